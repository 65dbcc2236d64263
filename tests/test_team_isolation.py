"""Issue 10: one team's ML users cannot reach another team's resources, and stay inside their own network
and keys; their own work is allowed. Evaluated from the synthesized teams file through the same IAM
evaluator as the run-time contracts (contract_policy), as the request context SageMaker builds for each call
(condition keys from "Actions, resources, and condition keys for Amazon SageMaker AI")."""

from __future__ import annotations

import pytest

from .contract_policy import PARTITION, Call, World, evaluate
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

    key_stack, key = world.find(f"{team}/DataStack/DataKey/Key/Resource", "AWS::KMS::Key")
    sg_stack, sg = world.find(f"{team}/NetworkStack/Security/Cluster/Resource", "AWS::EC2::SecurityGroup")
    net, _ = world.find(f"{team}/NetworkStack/Network/Vpc/Resource", "AWS::EC2::VPC")
    return {"subnet": ref("NetworkStack/Network/Vpc/privateSubnet1/Subnet", "AWS::EC2::Subnet"),
            "sg": world.get_att(sg_stack, sg, "GroupId"),
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
    return Call("sagemaker:CreateTrainingJob", _arn(t, "training-job", "job-1"), DOC, context=context)


def _own(world: World, team: str) -> list[Call]:
    t = _team(world, team)
    endpoint = _arn(t, "endpoint", f"{team}-endpoint")
    return [
        _training_job(t, team),
        Call("sagemaker:AddTags", _arn(t, "training-job", "job-1"), DOC, why="tags that come with the create",
             context={"sagemaker:TaggingAction": "CreateTrainingJob", "aws:RequestTag/team": team,
                      "aws:TagKeys": ["team"]}),
        Call("sagemaker:CreateModel", _arn(t, "model", "m"), DOC, context={
            "aws:RequestTag/team": team, "sagemaker:VpcSubnets": [t["subnet"]],
            "sagemaker:VpcSecurityGroupIds": [t["sg"]], "sagemaker:NetworkIsolation": "true"}),
        Call("sagemaker:CreateModel", _arn(t, "model", "serverless"), DOC, why="no VPC, network-isolated",
             context={"aws:RequestTag/team": team, "sagemaker:NetworkIsolation": "true"}),
        Call("sagemaker:CreateEndpointConfig", _arn(t, "endpoint-config", "c"), DOC, why="NVMe type, no volume key",
             context={"aws:RequestTag/team": team, "sagemaker:InstanceTypes": ["ml.g5.xlarge"]}),
        Call("sagemaker:CreateNotebookInstance", _arn(t, "notebook-instance", "n"), DOC, context={
            "aws:RequestTag/team": team, "sagemaker:InstanceTypes": ["ml.m5.xlarge"],
            "sagemaker:VpcSubnets": [t["subnet"]], "sagemaker:VpcSecurityGroupIds": [t["sg"]],
            "sagemaker:VolumeKmsKey": t["key"], "sagemaker:DirectInternetAccess": "Disabled",
            "sagemaker:RootAccess": "Disabled"}),
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
        Call("sagemaker:CreateCluster", _arn(t, "cluster", "c"), DOC, why="clusters are the estate's, not users'",
             context={"aws:RequestTag/team": team, "sagemaker:InstanceTypes": ["ml.g5.12xlarge"]}),
        Call("sagemaker:CreateModel", _arn(t, "model", "open"), DOC, why="no VPC and not isolated",
             context={"aws:RequestTag/team": team}),
        Call("sagemaker:CreateModel", _arn(t, "model", "theirs"), DOC, why="another team's subnet",
             context={"aws:RequestTag/team": team, "sagemaker:VpcSubnets": [o["subnet"]],
                      "sagemaker:VpcSecurityGroupIds": [t["sg"]], "sagemaker:NetworkIsolation": "true"}),
        *[Call("sagemaker:CreateNotebookInstance", _arn(t, "notebook-instance", "n"), DOC, why=why, context={
            "aws:RequestTag/team": team, "sagemaker:InstanceTypes": ["ml.m5.xlarge"],
            "sagemaker:VpcSubnets": [t["subnet"]], "sagemaker:VpcSecurityGroupIds": [t["sg"]],
            "sagemaker:VolumeKmsKey": t["key"], **extra})
          for why, extra in (("direct internet access", {"sagemaker:RootAccess": "Disabled"}),
                             ("root access", {"sagemaker:DirectInternetAccess": "Disabled",
                                              "sagemaker:RootAccess": "Enabled"}))],
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
