"""Issue 10: one team's ML users cannot reach another team's resources, and stay inside their own network
and keys; their own work is allowed. Evaluated from the synthesized teams file through the same IAM
evaluator as the run-time contracts (contract_policy), as the request context SageMaker builds for each call
(condition keys from "Actions, resources, and condition keys for Amazon SageMaker AI")."""

from __future__ import annotations

import json
import re

import pytest

from .contract_policy import PARTITION, Call, Principal, World, _action_matches, evaluate
from .test_runtime_contract import teams_world

DOC = "IAM service authorization reference, Amazon SageMaker AI condition keys"
A, B = "vision", "language"  # two teams in one account and region (config/teams.yaml)


@pytest.fixture(scope="module")
def world(teams_synth) -> World:
    return teams_world(teams_synth)


def _team(world: World, team: str) -> dict:
    def ref(path: str, kind: str) -> str:
        stack, logical = world.find(f"{team}/{path}", kind)
        return world.ref(stack, logical)

    def group(name: str) -> str:
        sg_stack, sg = world.find(f"{team}/NetworkStack/Security/{name}/Resource", "AWS::EC2::SecurityGroup")
        return world.get_att(sg_stack, sg, "GroupId")

    key_stack, key = world.find(f"{team}/DataStack/DataKey/Key/Resource", "AWS::KMS::Key")
    net, _ = world.find(f"{team}/NetworkStack/Network/Vpc/Resource", "AWS::EC2::VPC")
    file_systems = [world.ref(s, lid) for s in world.stacks.values() if s.name.startswith(f"{team}-")
                    for lid, r in s.template["Resources"].items()
                    if r["Type"] in ("AWS::FSx::FileSystem", "AWS::EFS::FileSystem")]
    return {"subnet": ref("NetworkStack/Network/Vpc/privateSubnet1/Subnet", "AWS::EC2::Subnet"),
            "sg": group("Cluster"), "workspace": group("Workspace"), "file_systems": file_systems,
            "key": world.get_att(key_stack, key, "Arn"), "region": net.region, "account": net.account}


def _arn(t: dict, kind: str, name: str) -> str:
    return f"arn:{PARTITION}:sagemaker:{t['region']}:{t['account']}:{kind}/{name}"


def _training_job(t: dict, team: str, **override) -> Call:
    context = {"sagemaker:InstanceTypes": ["ml.g5.12xlarge"], f"aws:RequestTag/team": team, "aws:TagKeys": ["team"],
               "sagemaker:VpcSubnets": [t["subnet"]], "sagemaker:VpcSecurityGroupIds": [t["sg"]],
               "sagemaker:OutputKmsKey": t["key"], "sagemaker:NetworkIsolation": "true"}
    context.update(override)
    for k in [k for k, v in context.items() if v is None]:
        del context[k]
    return Call("sagemaker:CreateTrainingJob", _arn(t, "training-job", f"{team}-job-1"), DOC, context=context)


def _notebook(t: dict, team: str, **override) -> Call:
    context = {"aws:RequestTag/team": team, "sagemaker:InstanceTypes": ["ml.m5.xlarge"],
               "sagemaker:VpcSubnets": [t["subnet"]], "sagemaker:VpcSecurityGroupIds": [t["workspace"]],
               "sagemaker:VolumeKmsKey": t["key"], "sagemaker:DirectInternetAccess": "Disabled",
               "sagemaker:RootAccess": "Disabled", "sagemaker:MinimumInstanceMetadataServiceVersion": "2", **override}
    return Call("sagemaker:CreateNotebookInstance", _arn(t, "notebook-instance", f"{team}-n"), DOC,
                context={k: v for k, v in context.items() if v is not None})


def _own(world: World, team: str) -> list[Call]:
    t = _team(world, team)
    endpoint = _arn(t, "endpoint", f"{team}-endpoint")
    return [
        _training_job(t, team),
        Call("sagemaker:AddTags", _arn(t, "training-job", "job-1"), DOC, why="tags that come with the create",
             context={"sagemaker:TaggingAction": "CreateTrainingJob", "aws:RequestTag/team": team,
                      "aws:TagKeys": ["team"]}),
        Call("sagemaker:CreateModel", _arn(t, "model", f"{team}-m"), DOC, context={
            "aws:RequestTag/team": team, "sagemaker:VpcSubnets": [t["subnet"]],
            "sagemaker:VpcSecurityGroupIds": [t["workspace"]], "sagemaker:NetworkIsolation": "true"}),
        Call("sagemaker:CreateModel", _arn(t, "model", f"{team}-serverless"), DOC, why="no VPC, network-isolated",
             context={"aws:RequestTag/team": team, "sagemaker:NetworkIsolation": "true"}),
        Call("sagemaker:CreateEndpointConfig", _arn(t, "endpoint-config", f"{team}-c"), DOC,
             why="NVMe type, no volume key", context={"aws:RequestTag/team": team,
                                                      "sagemaker:InstanceTypes": ["ml.g5.xlarge"],
                                                      "sagemaker:ModelArn": _arn(t, "model", f"{team}-m")}),
        # CreateEndpoint is authorized on the endpoint and on the endpoint config it deploys.
        Call("sagemaker:CreateEndpoint", _arn(t, "endpoint", f"{team}-e"), DOC, context={"aws:RequestTag/team": team}),
        Call("sagemaker:CreateEndpoint", _arn(t, "endpoint-config", f"{team}-c"), DOC, why="its own config",
             context={"aws:RequestTag/team": team, "aws:ResourceTag/team": team}),
        _notebook(t, team),
        *[Call(a, endpoint, DOC, context={"aws:ResourceTag/team": team})
          for a in ("sagemaker:InvokeEndpoint", "sagemaker:UpdateEndpoint", "sagemaker:DeleteEndpoint")],
        Call("sagemaker:AddTags", endpoint, DOC, why="another tag on its own endpoint",
             context={"aws:ResourceTag/team": team, "aws:RequestTag/owner": "ana", "aws:TagKeys": ["owner"]}),
    ]


def _denied(world: World, team: str, other: str) -> list[Call]:
    t, o = _team(world, team), _team(world, other)
    theirs = _arn(o, "endpoint", f"{other}-endpoint")
    mine = _arn(t, "endpoint", f"{team}-endpoint")
    return [
        Call("sagemaker:AddTags", theirs, DOC, why="re-tag another team's endpoint as ours",
             context={"aws:ResourceTag/team": other, "aws:RequestTag/team": team, "aws:TagKeys": ["team"]}),
        *[Call(a, theirs, DOC, why="another team's endpoint", context={"aws:ResourceTag/team": other})
          for a in ("sagemaker:InvokeEndpoint", "sagemaker:UpdateEndpoint", "sagemaker:DeleteEndpoint",
                    "sagemaker:DeleteTags")],
        Call("sagemaker:AddTags", mine, DOC, why="hand its own endpoint to another team",
             context={"aws:ResourceTag/team": team, "aws:RequestTag/team": other, "aws:TagKeys": ["team"]}),
        Call("sagemaker:DeleteTags", mine, DOC, why="remove the team tag",
             context={"aws:ResourceTag/team": team, "aws:TagKeys": ["team"]}),
        Call("sagemaker:AddTags", _arn(t, "training-job", "j"), DOC, why="create-time tags of another team",
             context={"sagemaker:TaggingAction": "CreateTrainingJob", "aws:RequestTag/team": other,
                      "aws:TagKeys": ["team"]}),
        _training_job(t, team, **{"sagemaker:VpcSubnets": [o["subnet"]]}),
        _training_job(t, team, **{"sagemaker:VpcSecurityGroupIds": [o["sg"]]}),
        _training_job(t, team, **{"sagemaker:VpcSubnets": None, "sagemaker:VpcSecurityGroupIds": None}),
        _training_job(t, team, **{"sagemaker:OutputKmsKey": None}),
        _training_job(t, team, **{"sagemaker:OutputKmsKey": o["key"]}),
        _training_job(t, team, **{"sagemaker:VolumeKmsKey": o["key"]}),
        _training_job(t, team, **{"sagemaker:NetworkIsolation": "false"}),
        _training_job(t, team, **{"sagemaker:NetworkIsolation": None}),
        _training_job(t, team, **{"sagemaker:InstanceTypes": ["ml.p5.48xlarge"]}),
        _training_job(t, team, **{"aws:RequestTag/team": other}),
        Call("sagemaker:CreateTrainingJob", _arn(t, "training-job", f"{other}-job-1"), DOC,
             why="named as another team's job (its logs are that team's streams)",
             context=_training_job(t, team).context),
        Call("sagemaker:CreateCluster", _arn(t, "cluster", "c"), DOC, why="clusters are the estate's, not users'",
             context={"aws:RequestTag/team": team, "sagemaker:InstanceTypes": ["ml.g5.12xlarge"]}),
        Call("sagemaker:CreateModel", _arn(t, "model", f"{team}-open"), DOC, why="no VPC and not isolated",
             context={"aws:RequestTag/team": team}),
        Call("sagemaker:CreateModel", _arn(t, "model", f"{team}-theirs"), DOC, why="another team's subnet",
             context={"aws:RequestTag/team": team, "sagemaker:VpcSubnets": [o["subnet"]],
                      "sagemaker:VpcSecurityGroupIds": [t["workspace"]], "sagemaker:NetworkIsolation": "true"}),
        Call("sagemaker:CreateModel", _arn(t, "model", f"{other}-m"), DOC, why="named as another team's model",
             context={"aws:RequestTag/team": team, "sagemaker:NetworkIsolation": "true"}),
        Call("sagemaker:CreateModel", _arn(t, "model", f"{team}-m"), DOC, why="in the cluster's all-traffic group",
             context={"aws:RequestTag/team": team, "sagemaker:VpcSubnets": [t["subnet"]],
                      "sagemaker:VpcSecurityGroupIds": [t["sg"]], "sagemaker:NetworkIsolation": "true"}),
        _notebook(t, team, **{"sagemaker:DirectInternetAccess": None}),
        _notebook(t, team, **{"sagemaker:RootAccess": "Enabled"}),
        # IMDSv1 allowed: named, or left out (the API's default)
        _notebook(t, team, **{"sagemaker:MinimumInstanceMetadataServiceVersion": "1"}),
        _notebook(t, team, **{"sagemaker:MinimumInstanceMetadataServiceVersion": None}),
        _notebook(t, team, **{"sagemaker:VpcSecurityGroupIds": [t["sg"]]}),
        # The case: an endpoint config (tagged ours) on another team's model, then an endpoint on it.
        Call("sagemaker:CreateEndpointConfig", _arn(t, "endpoint-config", f"{team}-c"), DOC,
             why="another team's model", context={"aws:RequestTag/team": team,
                                                  "sagemaker:InstanceTypes": ["ml.g5.xlarge"],
                                                  "sagemaker:ModelArn": _arn(o, "model", f"{other}-m")}),
        Call("sagemaker:CreateEndpoint", _arn(t, "endpoint-config", f"{other}-c"), DOC,
             why="an endpoint on another team's config", context={"aws:RequestTag/team": team,
                                                                  "aws:ResourceTag/team": other}),
        Call("sagemaker:CreateTransformJob", _arn(t, "transform-job", f"{team}-t"), DOC,
             why="a transform with another team's model", context={
                 "aws:RequestTag/team": team, "sagemaker:InstanceTypes": ["ml.m5.xlarge"],
                 "sagemaker:OutputKmsKey": t["key"], "sagemaker:ModelArn": _arn(o, "model", f"{other}-m")}),
        Call("sagemaker:UpdateEndpoint", _arn(t, "endpoint-config", f"{other}-c"), DOC,
             why="its own endpoint onto another team's config", context={"aws:ResourceTag/team": other}),
    ]


@pytest.mark.parametrize("team, other", [(A, B), (B, A)])
def test_a_teams_own_work_is_allowed(world, team, other):
    users = world.policy_holder(f"{team}/MlUsersStack/MlUsers/Policy/Resource", f"{team}-ml-user")
    refused = [f"{c}: {evaluate(users, c, world).reason}" for c in _own(world, team)
               if not evaluate(users, c, world).allowed]
    assert not refused, "\n".join(refused)


@pytest.mark.parametrize("team, other", [(A, B), (B, A)])
def test_a_team_cannot_reach_another_teams_resources_network_or_keys(world, team, other):
    users = world.policy_holder(f"{team}/MlUsersStack/MlUsers/Policy/Resource", f"{team}-ml-user")
    allowed = [f"{c}" for c in _denied(world, team, other) if evaluate(users, c, world).allowed]
    assert not allowed, "allowed but must be denied:\n" + "\n".join(allowed)


def test_the_teams_really_differ(world):
    a, b = _team(world, A), _team(world, B)
    assert a["subnet"] != b["subnet"] and a["sg"] != b["sg"] and a["key"] != b["key"]
    assert a["account"] == b["account"] and a["region"] == b["region"]


# ---------------------------------------------------------------- reads (issue 25)

def _reads() -> dict:
    from constructs_lib.team_ml_users import sagemaker_reads
    return sagemaker_reads()


def _user(world: World, team: str):
    return world.policy_holder(f"{team}/MlUsersStack/MlUsers/Policy/Resource", f"{team}-ml-user")


@pytest.mark.parametrize("team, other", [(A, B), (B, A)])
@pytest.mark.parametrize("action, kind", [("sagemaker:DescribeEndpointConfig", "endpoint-config"),
                                          ("sagemaker:DescribeModel", "model"),
                                          ("sagemaker:DescribeTrainingJob", "training-job")])
def test_a_team_describes_its_own_work_and_not_another_teams(world, team, other, action, kind):
    """The issue's case: the container environment and S3 URIs in another team's resources stay unread."""
    users, t, o = _user(world, team), _team(world, team), _team(world, other)
    mine = Call(action, _arn(t, kind, f"{team}-x"), DOC, context={"aws:ResourceTag/team": team})
    theirs = Call(action, _arn(o, kind, f"{other}-x"), DOC, context={"aws:ResourceTag/team": other})
    assert evaluate(users, mine, world).allowed, evaluate(users, mine, world).reason
    assert not evaluate(users, theirs, world).allowed, f"{team} reads {theirs}"


@pytest.mark.parametrize("team, other", [(A, B), (B, A)])
def test_every_read_action_is_scoped_by_the_team_tag_or_takes_no_resource(world, team, other):
    """Over every Describe*/List*/Search row of the service authorization reference (sagemaker_reads.yaml):
    a tagged resource is read only with the team's tag; an untagged or untaggable one never; an action that takes
    no resource only where it is one of the team's List actions; Search only with the team's visibility condition."""
    users, t, reads = _user(world, team), _team(world, team), _reads()
    wrong = []
    for action, kinds in reads["tagged"].items():
        for kind in kinds:
            arn = _arn(t, kind, "x")
            for tags, want in (({"aws:ResourceTag/team": team}, True), ({"aws:ResourceTag/team": other}, False),
                               ({}, False)):
                if evaluate(users, Call(f"sagemaker:{action}", arn, DOC, context=tags), world).allowed != want:
                    wrong.append(f"{action} on {kind} tagged {tags or 'nothing'}: want allowed={want}")
    for action, kinds in reads["untagged"].items():
        if evaluate(users, Call(f"sagemaker:{action}", _arn(t, kinds[0], "x"), DOC), world).allowed:
            wrong.append(f"{action}: its resource has no tag to scope by, yet allowed")
    listed = {a for a in reads["no_resource"] if evaluate(users, Call(f"sagemaker:{a}", "*", DOC), world).allowed}
    lists_of_creates = {a.removeprefix("sagemaker:").replace("Create", "List", 1) + "s" for a in
                        ("sagemaker:CreateTrainingJob", "sagemaker:CreateProcessingJob", "sagemaker:CreateTransformJob",
                         "sagemaker:CreateHyperParameterTuningJob", "sagemaker:CreateModel",
                         "sagemaker:CreateEndpointConfig", "sagemaker:CreateEndpoint",
                         "sagemaker:CreateNotebookInstance")}
    assert listed == lists_of_creates, (sorted(listed), sorted(lists_of_creates))
    for context, want in (({"sagemaker:SearchVisibilityCondition/Tags.team": team}, True),
                          ({"sagemaker:SearchVisibilityCondition/Tags.team": other}, False), ({}, False)):
        if evaluate(users, Call("sagemaker:Search", "*", DOC, context=context), world).allowed != want:
            wrong.append(f"Search with {context or 'no visibility condition'}: want allowed={want}")
    assert not wrong, "\n".join(wrong)


def test_the_reads_facts_are_complete():
    """Every Describe/List action the policy's wildcards reach is classified, with its source recorded."""
    reads = _reads()
    assert "list_amazonsagemaker.html" in reads["source"]["url"]
    classified = [*reads["tagged"], *reads["untagged"], *reads["no_resource"]]
    assert len(classified) == len(set(classified))
    for a in ("DescribeEndpointConfig", "DescribeModel", "DescribeTrainingJob", "DescribeEndpoint", "ListTags"):
        assert a in reads["tagged"], a
    assert "Search" in reads["no_resource"] and "ListTrainingJobs" in reads["no_resource"]


# ---------------------------------------------------------------- creates that take another resource (issue 34)

def _references() -> dict:
    from constructs_lib.team_guardrails import sagemaker_references
    return sagemaker_references()


def _kebab(name: str) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "-", name).lower()


def _made(action: str, resources: list[str]) -> str | None:
    """The resource type a Create or Update action makes or changes (CreateInferenceComponent ->
    inference-component), if listed: the others are what the request takes besides."""
    noun = _kebab(re.sub(r"^(Create|Update)", "", action))
    return next((r for r in resources if r == noun), None) if action.startswith(("Create", "Update")) else None


def _own_value(key: str, action: str, t: dict, team: str) -> object | None:
    """A request's value for `key` that names only the team's own things (None: leave the key out)."""
    groups = [t["workspace"]] if action in ("CreateNotebookInstance", "CreateModel", "CreateEndpointConfig") else [t["sg"]]
    return {"aws:RequestTag/${TagKey}": None, "aws:TagKeys": ["team"], "sagemaker:InstanceTypes": ["ml.m5.xlarge"],
            "sagemaker:VpcSubnets": [t["subnet"]], "sagemaker:VpcSecurityGroupIds": groups,
            "sagemaker:OutputKmsKey": t["key"], "sagemaker:VolumeKmsKey": t["key"], "sagemaker:NetworkIsolation": "true",
            "sagemaker:DirectInternetAccess": "Disabled", "sagemaker:RootAccess": "Disabled",
            "sagemaker:MinimumInstanceMetadataServiceVersion": "2", "sagemaker:ModelArn": _arn(t, "model", f"{team}-m"),
            "sagemaker:FileSystemId": t["file_systems"][0] if t["file_systems"] else None}.get(key)


def _other_value(key: str, o: dict, other: str) -> object:
    """The same key naming another team's thing."""
    if key == "sagemaker:FileSystemId":
        return o["file_systems"][0] if o["file_systems"] else "fs-0another0team00"
    kind = _kebab(key.removeprefix("sagemaker:").removesuffix("Arns").removesuffix("Arn"))
    arn = _arn(o, kind, f"{other}-x")
    return [arn] if key.endswith("Arns") else arn


def _request(action: str, row: dict, t: dict, team: str) -> list[Call]:
    """The action as the team's ML users would send it on their own things: one call per resource it authorizes."""
    resources = [r.rstrip("*") for r in row["resources"] if r.endswith("*")]
    made = _made(action, resources)
    context = {"aws:RequestTag/team": team} if "aws:RequestTag/${TagKey}" in row["condition_keys"] else {}
    for key in row["condition_keys"]:
        value = _own_value(key, action, t, team)
        if value is not None:
            context[key] = value
    new = made if action.startswith("Create") else None  # it does not exist yet: no tag of its own
    return [Call(f"sagemaker:{action}", _arn(t, r, f"{team}-x"), DOC, why="own",
                 context=context if r == new else {**context, "aws:ResourceTag/team": team}) for r in resources]


def _swaps(action: str, row: dict, own: list[Call], t: dict, o: dict, other: str) -> list[tuple[str, list[Call]]]:
    """The same request with one of the resources it takes (a second resource type, optional ones included, or a
    condition key that names a resource) being another team's."""
    resources = [r.rstrip("*") for r in row["resources"]]
    made = _made(action, resources)
    out = []
    base = {k: v for k, v in own[0].context.items() if k != "aws:ResourceTag/team"}
    for r in resources:
        if r == made:
            continue
        theirs = Call(f"sagemaker:{action}", _arn(o, r, f"{other}-x"), DOC, why=f"another team's {r}",
                      context={**base, "aws:ResourceTag/team": other})
        out.append((f"another team's {r}", [c for c in own if f":{r}/" not in c.resource] + [theirs]))
    for key in row["condition_keys"]:
        if key in _references()["naming_keys"]:
            out.append((f"{key} of another team", [Call(c.action, c.resource, DOC, why=f"{key} of another team",
                                                         context={**c.context, key: _other_value(key, o, other)})
                                                    for c in own]))
    return out


def _allowed(users, calls: list[Call], world: World) -> bool:
    """A request is allowed when every resource it authorizes is (IAM User Guide, "Policy evaluation logic")."""
    return all(evaluate(users, c, world).allowed for c in calls)


@pytest.mark.parametrize("team, other", [(A, B), (B, A)])
def test_no_create_takes_another_teams_resource(world, team, other):
    """Over every Write action of the service authorization reference whose request takes another resource
    (workloads/catalog/sagemaker_references.yaml): the team's users, sending it on their own things, are allowed
    where their policy grants the action at all; with any one of those resources another team's, refused.
    A new action in the reference is covered without a new test."""
    users, t, o = _user(world, team), _team(world, team), _team(world, other)
    refs = _references()["references"]
    granted = {a for a in refs if any(st.get("Effect") == "Allow" and _action_matches(st, f"sagemaker:{a}")
                                      for st in users.identity)}
    assert {"CreateEndpoint", "CreateEndpointConfig", "CreateTransformJob", "UpdateEndpoint"} <= granted, granted
    wrong = []
    for action, row in refs.items():
        own = _request(action, row, t, team)
        if action in granted and not _allowed(users, own, world):
            refused = [f"{c.resource}: {evaluate(users, c, world).reason}" for c in own
                       if not evaluate(users, c, world).allowed]
            wrong.append(f"{action} on the team's own things is refused ({refused}): teach _request its keys")
        for why, calls in _swaps(action, row, own, t, o, other):
            if _allowed(users, calls, world):
                wrong.append(f"{action} with {why} is allowed")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("team, other", [(A, B), (B, A)])
def test_an_inference_component_on_another_teams_model_or_endpoint_is_refused(world, team, other):
    """Issue 32: LLM endpoints host inference components. CreateInferenceComponent authorizes the endpoint and the
    component and names the model (sagemaker:ModelArn, the service authorization reference): with another team's
    endpoint or model it is refused, as every such swap of the property above."""
    users, t, o = _user(world, team), _team(world, team), _team(world, other)
    row = _references()["references"]["CreateInferenceComponent"]
    own = _request("CreateInferenceComponent", row, t, team)
    swaps = dict(_swaps("CreateInferenceComponent", row, own, t, o, other))
    assert {"another team's endpoint", "sagemaker:ModelArn of another team"} <= set(swaps), set(swaps)
    for why in ("another team's endpoint", "sagemaker:ModelArn of another team"):
        assert not _allowed(users, swaps[why], world), why


def test_the_references_facts_are_complete():
    refs = _references()
    assert "list_amazonsagemaker.html" in refs["source"]["url"] and refs["source"]["as_of"]
    assert refs["references"]["CreateEndpoint"]["resources"] == ["endpoint*", "endpoint-config*"]
    assert refs["references"]["UpdateEndpoint"]["resources"] == ["endpoint*", "endpoint-config*"]
    for action in ("CreateEndpointConfig", "CreateTransformJob", "CreateInferenceComponent"):
        assert "sagemaker:ModelArn" in refs["references"][action]["condition_keys"], action
    assert {"CreateCluster", "UpdateCluster", "CreateTrainingJob"} <= set(refs["sized"])


@pytest.mark.parametrize("team, other", [(A, B), (B, A)])
def test_the_boundary_caps_every_sized_action_the_cluster_updates_included(world, team, other):
    """The team's boundary, for a role that would otherwise be allowed anything: every action whose request carries
    instance types (creates and updates, UpdateCluster among them) only on the team's families."""
    stack, lid = world.find(f"{team}/GuardrailsStack/Guardrails/Boundary/Resource", "AWS::IAM::ManagedPolicy")
    boundary = world._managed_policy(world.ref(stack, lid))
    anything = Principal(arn=f"arn:{PARTITION}:iam::{stack.account}:role/{team}-any", account=stack.account,
                         identity=[{"Effect": "Allow", "Action": "*", "Resource": "*"}], boundary=boundary)
    t = _team(world, team)
    for action in _references()["sized"]:
        for itype, want in (("ml.m5.xlarge", True), ("ml.p5.48xlarge", False)):
            call = Call(f"sagemaker:{action}", _arn(t, "x", f"{team}-x"), DOC,
                        context={"sagemaker:InstanceTypes": [itype]})
            assert evaluate(anything, call, world).allowed == want, (action, itype)


# ---------------------------------------------------------------- roles it may pass, and where notebooks sit

def _roles(world: World, team: str) -> dict[str, dict]:
    return {world.get_att(s, lid, "Arn"): r for s in world.stacks.values() if s.name.startswith(f"{team}-")
            for lid, r in s.template["Resources"].items() if r["Type"] == "AWS::IAM::Role"}


def _trusts_sagemaker(role: dict) -> bool:
    return "sagemaker.amazonaws.com" in json.dumps(role["Properties"]["AssumeRolePolicyDocument"])


@pytest.mark.parametrize("team, other", [(A, B), (B, A)])
def test_a_team_passes_its_work_roles_by_name_and_no_other_role(world, team, other):
    """PassRole by tag reached every role of the team (CDK's handlers, the state machines', the nodes'): a notebook
    or job could borrow their rights. Only the roles SageMaker runs the team's work as, by ARN."""
    users = _user(world, team)
    mine, theirs = _roles(world, team), _roles(world, other)
    context = {"iam:PassedToService": "sagemaker.amazonaws.com"}
    passed = {arn for arn in mine if evaluate(users, Call("iam:PassRole", arn, DOC, context=context), world).allowed}
    assert passed and passed == {arn for arn, r in mine.items() if _trusts_sagemaker(r)}, sorted(passed)
    assert not [a for a in theirs if evaluate(users, Call("iam:PassRole", a, DOC, context=context), world).allowed]
    untagged = {"aws:ResourceTag/team": team, **context}  # what the old policy let through: any role with the tag
    assert not [a for a, r in mine.items() if not _trusts_sagemaker(r)
                and evaluate(users, Call("iam:PassRole", a, DOC, context=untagged), world).allowed]


def _group(world: World, team: str, name: str) -> tuple[dict, str]:
    stack, lid = world.find(f"{team}/NetworkStack/Security/{name}/Resource", "AWS::EC2::SecurityGroup")
    return stack.template, lid


@pytest.mark.parametrize("team", [A, B])
def test_notebooks_and_models_reach_no_node_and_no_file_system(world, team):
    """The workspace group (ML users' notebooks and models, the estate's notebook) admits nothing and sends only
    HTTPS; nothing of the cluster or its file systems admits it."""
    template, lid = _group(world, team, "Workspace")
    props = template["Resources"][lid]["Properties"]
    assert not props.get("SecurityGroupIngress")
    assert [(e["IpProtocol"], e.get("FromPort"), e.get("ToPort")) for e in props["SecurityGroupEgress"]] == \
        [("tcp", 443, 443)]
    assert not [r for r in template["Resources"].values()
                if r["Type"] in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress")
                and lid in json.dumps(r["Properties"])]
    for s in world.stacks.values():
        for r in s.template["Resources"].values():
            if r["Type"] == "AWS::SageMaker::NotebookInstance" and s.name.startswith(f"{team}-"):
                assert lid in json.dumps(r["Properties"]["SecurityGroupIds"]), s.name


def test_the_ml_users_stack_deploys_before_the_inference_stack(teams_synth):
    """The documented order deploys TEAM/TrainStack and TEAM/MlUsersStack, then the model, then TEAM/*: the ML users'
    policy names the model roles by the InferenceStack's IAM path, so it must not depend on that stack."""
    for team, stacks in teams_synth.artifacts.items():
        depends = stacks["MlUsersStack"].get("dependencies", [])
        assert not any(d.endswith("InferenceStack") or "InferenceStack." in d for d in depends), (team, depends)
        template = teams_synth.templates[team]["MlUsersStack"]
        passed = [s for p in template["Resources"].values() if p["Type"] == "AWS::IAM::ManagedPolicy"
                  for s in p["Properties"]["PolicyDocument"]["Statement"] if s.get("Sid") == "PassTheTeamsWorkRoles"]
        assert passed and f":role/{team}-InferenceStack/models/*" in json.dumps(passed), passed


# ---------------------------------------------------------------- the notebook's logs

@pytest.mark.parametrize("team, other", [(A, B), (B, A)])
def test_a_teams_notebook_writes_only_its_teams_notebook_streams(world, team, other):
    """The notebook role wrote every stream of /aws/sagemaker/NotebookInstances, another team's notebooks' included.
    SageMaker names them NOTEBOOK-NAME/HOOK (CreateNotebookInstanceLifecycleConfig, SageMaker API Reference): the
    team's own notebook and its ML users' notebooks (TEAM-..., which may run as this role) only."""
    role = world.role(f"{team}/TrainStack/Notebook/Role/Resource")

    def stream(owner: str, notebook: str, hook: str = "LifecycleConfigOnStart") -> str:
        t = _team(world, owner)
        return (f"arn:{PARTITION}:logs:{t['region']}:{t['account']}:log-group:/aws/sagemaker/NotebookInstances"
                f":log-stream:{notebook}/{hook}")

    def name(owner: str) -> str:
        stack, lid = world.find(f"{owner}/TrainStack/Notebook/Notebook", "AWS::SageMaker::NotebookInstance")
        return stack.template["Resources"][lid]["Properties"]["NotebookInstanceName"]

    for action in ("logs:CreateLogStream", "logs:PutLogEvents"):
        for notebook in (f"{other}-analysis", "someone-else"):
            theirs = Call(action, stream(other, notebook), DOC)
            assert not evaluate(role, theirs, world).allowed, f"{team}'s notebook writes {theirs.resource}"
    assert name(team).startswith(f"{team}-") and name(other).startswith(f"{other}-")
    for action in ("logs:CreateLogStream", "logs:PutLogEvents"):
        for notebook in (name(team), f"{team}-analysis"):  # the estate's notebook, an ML user's
            for hook in ("LifecycleConfigOnCreate", "LifecycleConfigOnStart"):
                mine = Call(action, stream(team, notebook, hook), DOC)
                assert evaluate(role, mine, world).allowed, evaluate(role, mine, world).reason
        theirs = Call(action, stream(other, name(other)), DOC)
        assert not evaluate(role, theirs, world).allowed, f"{team}'s notebook writes {theirs.resource}"


@pytest.mark.parametrize("team, other", [(A, B), (B, A)])
def test_a_team_builds_component_endpoints_by_hand_on_its_own_models(world, team, other):
    """Issue 44: an endpoint config for inference components names no model (no sagemaker:ModelArn): the model deny
    applies only where a model is named. A component of the team's model on the team's endpoint is allowed; of
    another team's model, or on another team's endpoint, refused."""
    users, t, o = _user(world, team), _team(world, team), _team(world, other)

    def config(**network) -> Call:
        return Call("sagemaker:CreateEndpointConfig", _arn(t, "endpoint-config", f"{team}-components"), DOC,
                    context={"aws:RequestTag/team": team, "aws:TagKeys": ["team"],
                             "sagemaker:InstanceTypes": ["ml.g5.12xlarge"], "sagemaker:VolumeKmsKey": t["key"],
                             **network})
    in_vpc = config(**{"sagemaker:VpcSubnets": [t["subnet"]], "sagemaker:VpcSecurityGroupIds": [t["workspace"]]})
    assert evaluate(users, in_vpc, world).allowed, evaluate(users, in_vpc, world).reason
    isolated = config(**{"sagemaker:NetworkIsolation": "true"})
    assert evaluate(users, isolated, world).allowed, evaluate(users, isolated, world).reason
    # The outside review (R5 M2): the components' containers would run with the team's model role, on the internet
    for refused in (config(), config(**{"sagemaker:NetworkIsolation": "false"}),
                    config(**{"sagemaker:VpcSubnets": [o["subnet"]], "sagemaker:VpcSecurityGroupIds": [t["workspace"]]}),
                    config(**{"sagemaker:VpcSubnets": [t["subnet"]], "sagemaker:VpcSecurityGroupIds": [t["sg"]]})):
        assert not evaluate(users, refused, world).allowed, refused.context

    def component(model_team: str, endpoint_team: str) -> list[Call]:
        ctx = {"aws:RequestTag/team": team, "aws:TagKeys": ["team"],
               "sagemaker:ModelArn": _arn(t if model_team == team else o, "model", f"{model_team}-m")}
        return [Call("sagemaker:CreateInferenceComponent", _arn(t, "inference-component", f"{team}-ic"), DOC,
                     context=ctx),
                Call("sagemaker:CreateInferenceComponent",
                     _arn(t if endpoint_team == team else o, "endpoint", f"{endpoint_team}-e"), DOC,
                     context={**ctx, "aws:ResourceTag/team": endpoint_team})]
    assert _allowed(users, component(team, team), world)
    assert not _allowed(users, component(other, team), world)
    assert not _allowed(users, component(team, other), world)
    # a component given as a container (image and artifact) names no model: refused (R5 M2)
    container = [Call(c.action, c.resource, DOC, context={k: v for k, v in c.context.items()
                                                        if k != "sagemaker:ModelArn"})
                 for c in component(team, team)]
    assert not _allowed(users, container, world)


@pytest.mark.parametrize("team, other", [(A, B), (B, A)])
def test_a_team_builds_serverless_endpoint_configs_on_its_own_models(world, team, other):
    """The outside review (F9): a serverless endpoint config has no instance types, so an allow that requires
    sagemaker:InstanceTypes never matched it, though the team's own estate serves that way. Allowed on the team's
    own model under the team's name and tag; another team's model or name refused."""
    users, t, o = _user(world, team), _team(world, team), _team(world, other)

    def config(name: str, model_team: str) -> Call:
        return Call("sagemaker:CreateEndpointConfig", _arn(t, "endpoint-config", name), DOC, context={
            "aws:RequestTag/team": team, "aws:TagKeys": ["team"],
            "sagemaker:ModelArn": _arn(t if model_team == team else o, "model", f"{model_team}-m")})
    own = config(f"{team}-serverless", team)
    assert evaluate(users, own, world).allowed, evaluate(users, own, world).reason
    assert not evaluate(users, config(f"{team}-serverless", other), world).allowed
    assert not evaluate(users, config(f"{other}-serverless", team), world).allowed
