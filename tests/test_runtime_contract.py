"""Run-time contracts: every call an AWS service or node makes with one of our roles is allowed by the
synthesized identity policy, permissions boundary, bucket, topic and key policies, and a call just outside
the role's purpose is denied.

The calls are derived, not listed: contract_calls.walk visits every resource of every synthesized variant
and the teams' estates, and derives each call from the resource's options with the sourced table
tests/sources/role_calls.yaml. A resource that takes a role, or an option of one, with no row fails
here. contract_policy.py evaluates the statements."""

from __future__ import annotations

import json

import pytest

from workloads import load

from .conftest import VARIANTS
from .contract_calls import FSX_S3_ROLE, Contract, Found, purpose, walk
from .contract_policy import FAKE_ACCOUNT, Call, Principal, Stack, World, evaluate, metadata_paths


def world_of(synth) -> World:
    stacks = []
    for name, template in synth.templates.items():
        env = synth.artifact(name)["environment"].removeprefix("aws://")
        account, region = env.split("/")
        paths = metadata_paths(synth.outdir / synth.artifact(name)["additionalMetadataFile"])
        stacks.append(Stack(name, template, region, FAKE_ACCOUNT if account == "unknown-account" else account, paths,
                            deployed_as=synth.artifact(name)["properties"].get("stackName", name)))
    return World(stacks)


def teams_world(teams_synth) -> World:
    stacks = []
    for team, by_id in teams_synth.templates.items():
        for sid, template in by_id.items():
            art = teams_synth.artifacts[team][sid]
            account, region = art["environment"].removeprefix("aws://").split("/")
            paths = metadata_paths(teams_synth.paths[team][sid].parent / art["additionalMetadataFile"])
            stacks.append(Stack(art["properties"].get("stackName", f"{team}-{sid}"), template, region,
                                FAKE_ACCOUNT if account == "unknown-account" else account, paths))
    for sid, template in teams_synth.shared.items():  # the account's shared stacks, outside the teams' stages
        art = teams_synth.shared_artifacts[sid]
        account, region = art["environment"].removeprefix("aws://").split("/")
        paths = metadata_paths(teams_synth.outdir / art["additionalMetadataFile"])
        stacks.append(Stack(sid, template, region, FAKE_ACCOUNT if account == "unknown-account" else account, paths))
    return World(stacks)


def refused(found: list[Found], world: World) -> list[str]:
    """Messages for the derived calls that the policies refuse, and the denials they let through."""
    out = []
    for f in found:
        d = evaluate(f.principal, f.call, world)
        if f.denied and d.allowed:
            out.append(f"{f.where}: {f.call} is allowed to {f.role} ({d.reason}) but is outside its purpose")
        elif not f.denied and not d.allowed:
            out.append(f"{f.where}: {f.call} is refused to {f.role} ({d.reason}); needed per {f.call.source}")
    return sorted(set(out))


def problems(contract: Contract, world: World) -> list[str]:
    out = []
    for call in contract.allowed:
        d = evaluate(contract.principal, call, world)
        if not d.allowed:
            out.append(f"{contract.name}: {call} is refused ({d.reason}); needed per {call.source[:90]}...")
    for call in contract.denied:
        d = evaluate(contract.principal, call, world)
        if d.allowed:
            out.append(f"{contract.name}: {call} is allowed ({d.reason}) but is outside the role's purpose")
    return out


@pytest.fixture(scope="module")
def worlds(synth, teams_synth) -> dict[str, World]:
    """Every synthesized variant and the teams' estates, each walked once."""
    out = {name: world_of(synth(*VARIANTS[name])) for name in VARIANTS}
    out["teams"] = teams_world(teams_synth)
    return out


@pytest.fixture(scope="module")
def walks(worlds):
    return {name: walk(world) for name, world in worlds.items()}


@pytest.mark.parametrize("variant", [*VARIANTS, "teams"])
def test_every_resource_that_takes_a_role_has_a_row(walks, variant):
    w = walks[variant]
    assert not w.uncovered, "\n".join(sorted(set(w.uncovered)))
    assert not w.problems, "\n".join(w.problems)


@pytest.mark.parametrize("variant", [*VARIANTS, "teams"])
def test_every_derived_call_is_allowed_and_every_denial_holds(walks, worlds, variant):
    found = walks[variant].found
    assert found
    out = refused(found, worlds[variant])
    assert not out, "\n".join(out)


def test_the_walk_reaches_every_kind_of_role(walks):
    """The rows act: each role-taking type of the table is met in some variant and yields calls."""
    met = {f.where.split(" (", 1)[1].split(")", 1)[0] for w in walks.values() for f in w.found}
    for kind in ("AWS::SageMaker::Model", "AWS::SageMaker::EndpointConfig", "AWS::SageMaker::InferenceComponent",
                 "AWS::SageMaker::NotebookInstance",
                 "AWS::SageMaker::Cluster", "AWS::PCS::ComputeNodeGroup", "AWS::StepFunctions::StateMachine",
                 "AWS::Scheduler::Schedule", "AWS::EC2::FlowLog", "AWS::Lambda::Function", "Custom::AWS"):
        assert kind in met, kind


@pytest.mark.parametrize("variant", [*VARIANTS])
def test_what_our_software_does_on_the_nodes_is_allowed(worlds, variant):
    world = worlds[variant]
    out = [p for c in purpose(world) for p in problems(c, world)]
    assert not out, "\n".join(out)


def test_team_roles_work_inside_their_boundary(walks, worlds, teams_synth):
    world = worlds["teams"]
    out = []
    for team in teams_synth.templates:
        for c in purpose(world, scope=f"{team}/"):
            if not c.principal.arn.endswith(FSX_S3_ROLE.rsplit("/", 1)[-1]):
                assert c.principal.boundary is not None, f"{team}: {c.name} has no permissions boundary"
            out += [f"{team}: {p}" for p in problems(c, world)]
    # The roles of the teams' own stacks (the account-wide job-logs stack is no team's).
    roles = {f.role: f.principal for f in walks["teams"].found
             if f.where.split("/", 1)[0].split("-", 1)[0] in teams_synth.templates}
    assert roles
    for arn, principal in roles.items():
        assert principal.boundary is not None, f"{arn} has no permissions boundary"
    assert not out, "\n".join(out)


def test_a_team_role_cannot_read_another_teams_bucket(walks, worlds):
    world = worlds["teams"]
    language_bucket = world.arn("language/DataStack/Datasets/Dataset/Resource", "AWS::S3::Bucket")
    language_key = world.arn("language/DataStack/DataKey/Key/Resource", "AWS::KMS::Key")
    vision = {f.role: f.principal for f in walks["teams"].found if "vision-" in f.where.split("/")[0]}
    assert vision
    for arn, role in vision.items():
        read = Call("s3:GetObject", f"{language_bucket}/datasets/train/part-0000", "cross-team isolation")
        assert not evaluate(role, read, world).allowed, arn
        decrypt = Call("kms:Decrypt", language_key, "cross-team isolation",
                       context={"kms:ViaService": "s3.us-west-2.amazonaws.com", "kms:CallerAccount": "123456789012"})
        assert not evaluate(role, decrypt, world).allowed, arn


def test_every_row_names_its_document_and_section():
    from .contract_calls import TABLE

    for key, s in TABLE["sources"].items():
        assert s["title"] and s["section"] and s["url"].startswith("https://") and s["read"], key
    for group in ("types", "requests"):
        for kind, row in TABLE[group].items():
            for path, rule in [*row.get("options", {}).items(), *((None, r) for r in row.get("always", []))]:
                assert ("derive" in rule) != ("inert" in rule), (kind, path)
                if "derive" in rule:
                    assert rule["source"] in TABLE["sources"], (kind, path)


# ---- the evaluator itself: it must tell allowed from refused, or the tests above prove nothing


def _world_with_key(key_policy: dict) -> World:
    template = {"Resources": {"Key": {"Type": "AWS::KMS::Key", "Properties": {"KeyPolicy": key_policy}}}}
    return World([Stack("S", template, "us-west-2", FAKE_ACCOUNT)])


def test_account_root_in_a_key_policy_only_delegates_to_iam():
    root = {"Statement": [{"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{FAKE_ACCOUNT}:root"},
                           "Action": "kms:*", "Resource": "*"}]}
    world = _world_with_key(root)
    key = world.get_att(world.stacks["S"], "Key", "Arn")
    nobody = Principal(arn=f"arn:aws:iam::{FAKE_ACCOUNT}:role/r", account=FAKE_ACCOUNT, identity=[])
    granted = Principal(arn=nobody.arn, account=FAKE_ACCOUNT,
                        identity=[{"Effect": "Allow", "Action": "kms:Decrypt", "Resource": key}])
    assert not evaluate(nobody, Call("kms:Decrypt", key, "t"), world).allowed
    assert evaluate(granted, Call("kms:Decrypt", key, "t"), world).allowed


def test_conditions_and_boundaries_are_enforced():
    world = World([Stack("S", {"Resources": {}}, "us-west-2", FAKE_ACCOUNT)])
    allow = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/data/*",
             "Condition": {"StringEquals": {"aws:ResourceTag/team": "a"}}}
    role = Principal(arn=f"arn:aws:iam::{FAKE_ACCOUNT}:role/r", account=FAKE_ACCOUNT, identity=[allow])
    call = Call("s3:GetObject", "arn:aws:s3:::b/data/x", "t", context={"aws:ResourceTag/team": "a"})
    assert evaluate(role, call, world).allowed
    assert not evaluate(role, Call(call.action, call.resource, "t", {"aws:ResourceTag/team": "b"}), world).allowed
    assert not evaluate(role, Call(call.action, "arn:aws:s3:::b/models/x", "t", call.context), world).allowed
    capped = Principal(arn=role.arn, account=FAKE_ACCOUNT, identity=[allow],
                       boundary=[{"Effect": "Allow", "Action": "*", "Resource": "*"},
                                 {"Effect": "Deny", "Action": "s3:*", "Resource": "*"}])
    assert not evaluate(capped, call, world).allowed


# ---- ordering and service-linked roles: what the templates must say for the service to work


def test_pcs_node_groups_wait_for_the_node_role_policy(synth):
    """Nodes register with PCS as they boot; the grant must exist before any node group starts one."""
    resources = synth("huge").templates["TrainStack"]["Resources"]
    grant = next(lid for lid, r in resources.items() if r["Type"] == "AWS::IAM::Policy"
                 and "pcs:RegisterComputeNodeGroupInstance" in json.dumps(r["Properties"]))
    groups = {lid: r for lid, r in resources.items() if r["Type"] == "AWS::PCS::ComputeNodeGroup"}
    assert len(groups) == 2
    for lid, r in groups.items():
        assert grant in r.get("DependsOn", []), f"{lid} may boot nodes before {grant} exists"


@pytest.mark.parametrize("variant", ["small-all-kinds", "huge"])
def test_endpoint_scaling_runs_as_the_service_linked_role(synth, variant):
    """SageMaker endpoint scaling ignores custom roles: RoleARN is the service-linked role, and no custom one is made."""
    workload, overrides = VARIANTS[variant]
    resources = synth(workload, overrides).templates["InferenceStack"]["Resources"]
    targets = [r for r in resources.values() if r["Type"] == "AWS::ApplicationAutoScaling::ScalableTarget"]
    assert targets
    for t in targets:
        assert "aws-service-role/sagemaker.application-autoscaling.amazonaws.com/" \
               "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint" in json.dumps(t["Properties"]["RoleARN"])
    trusted = [json.dumps(r["Properties"]["AssumeRolePolicyDocument"]) for r in resources.values()
               if r["Type"] == "AWS::IAM::Role"]
    assert not any("application-autoscaling.amazonaws.com" in t for t in trusted)


def test_services_that_encrypt_our_logs_can_use_their_keys_and_nothing_more(synth):
    """CloudWatch Logs encrypts a log group with the logs key (context aws:logs:arn of the group) (CloudWatch Logs
    user guide, "Encrypt log data in CloudWatch Logs using AWS KMS"). S3 server access logging writes its
    destination SSE-S3, the only default encryption S3 supports there (S3 user guide, "Enabling Amazon S3 server
    access logging"; issue 31): it needs, and has, no key of ours."""
    world = world_of(synth("huge"))
    region, account = load("huge").region, FAKE_ACCOUNT
    logs_key = world.arn("NetworkStack/LogsKey/Key/Resource", "AWS::KMS::Key")
    data_key = world.arn("DataStack/DataKey/Key/Resource", "AWS::KMS::Key")
    logs = Principal(arn="", account=account, identity=[], service=f"logs.{region}.amazonaws.com")
    s3_logging = Principal(arn="", account=account, identity=[], service="logging.s3.amazonaws.com")

    def group(acct: str) -> dict:
        return {"kms:EncryptionContext:aws:logs:arn": f"arn:aws:logs:{region}:{acct}:log-group:/aws/sagemaker/x"}

    for action in ("kms:GenerateDataKey", "kms:Decrypt"):
        assert evaluate(logs, Call(action, logs_key, "logs", context=group(account)), world).allowed
        assert not evaluate(logs, Call(action, logs_key, "logs", context=group("999999999999")), world).allowed
    assert not evaluate(logs, Call("kms:GenerateDataKey", data_key, "logs", context=group(account)), world).allowed
    for key in (data_key, logs_key):
        assert not evaluate(s3_logging, Call("kms:GenerateDataKey", key, "s3 logging",
                                             context={"aws:SourceAccount": account}), world).allowed


def test_s3_access_logs_come_from_this_account_only(synth):
    """The access-log bucket takes S3 server access logs of the dataset bucket and of the HyperPod scripts bucket
    (another stack, so aws-cdk-lib's grant names no source): from buckets of this account only (S3 user guide,
    "Enabling Amazon S3 server access logging": aws:SourceAccount)."""
    world = world_of(synth(*VARIANTS["huge-hyperpod"]))
    s3_logging = Principal(arn="", account=FAKE_ACCOUNT, identity=[], service="logging.s3.amazonaws.com")
    access_logs = world.arn("DataStack/Datasets/AccessLogs/Resource", "AWS::S3::Bucket")
    for prefix, source in (("dataset/", "DataStack/Datasets/Dataset/Resource"),
                           ("lifecycle-scripts/", "TrainStack/HyperPod/Scripts/Resource")):
        put = f"{access_logs}/{prefix}2026-11-22-00-00-00-ABCDEF"
        ours = {"aws:SourceAccount": FAKE_ACCOUNT, "aws:SourceArn": world.arn(source, "AWS::S3::Bucket")}
        assert evaluate(s3_logging, Call("s3:PutObject", put, "s3 logging", context=ours), world).allowed, prefix
        theirs = {"aws:SourceAccount": "999999999999", "aws:SourceArn": "arn:aws:s3:::someone-elses"}
        assert not evaluate(s3_logging, Call("s3:PutObject", put, "s3 logging", context=theirs), world).allowed


def test_the_scripts_deployment_writes_its_bucket_and_not_the_datasets(synth):
    """CDK's BucketDeployment handler copies the lifecycle scripts as its role: into their own bucket only."""
    world = world_of(synth(*VARIANTS["huge-hyperpod"]))
    handler = world.role("ServiceRole/Resource")
    scripts = world.arn("TrainStack/HyperPod/Scripts/Resource", "AWS::S3::Bucket")
    datasets = world.arn("DataStack/Datasets/Dataset/Resource", "AWS::S3::Bucket")
    put = "s3:PutObject"
    assert evaluate(handler, Call(put, f"{scripts}/lifecycle/hyperpod/on_init_complete.sh", "cdk"), world).allowed
    for key in ("lifecycle/hyperpod/on_init_complete.sh", "models/model.tar.gz", "datasets/train/part-0"):
        assert not evaluate(handler, Call(put, f"{datasets}/{key}", "cdk"), world).allowed
        assert not evaluate(handler, Call("s3:DeleteObject", f"{datasets}/{key}", "cdk"), world).allowed


# ---- the walk itself: it must fail on what it does not know, and catch the denials that matter


def _model_world(statements: list[dict], *, extra: dict | None = None) -> World:
    """A bucket with a KMS key, and a model whose role has `statements`."""
    key_policy = {"Statement": [{"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{FAKE_ACCOUNT}:root"},
                                 "Action": "kms:*", "Resource": "*"}]}
    resources = {
        "Key": {"Type": "AWS::KMS::Key", "Properties": {"KeyPolicy": key_policy}},
        "Bucket": {"Type": "AWS::S3::Bucket", "Properties": {"BucketEncryption": {"ServerSideEncryptionConfiguration": [
            {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": {"Fn::GetAtt": ["Key", "Arn"]}}}]}}},
        "Role": {"Type": "AWS::IAM::Role", "Properties": {"Policies": [{"PolicyDocument": {"Statement": statements}}]}},
        "Model": {"Type": "AWS::SageMaker::Model", "Properties": {
            "ExecutionRoleArn": {"Fn::GetAtt": ["Role", "Arn"]},
            "PrimaryContainer": {"Image": "763104351884.dkr.ecr.us-west-2.amazonaws.com/tgi:1",
                                 "ModelDataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "CompressionType": "None",
                                                                      "S3Uri": "s3://s-bucket/models/llm/"}}}}},
        "Config": {"Type": "AWS::SageMaker::EndpointConfig", "Properties": {
            "KmsKeyId": {"Fn::GetAtt": ["Key", "Arn"]},
            "ProductionVariants": [{"ModelName": {"Fn::GetAtt": ["Model", "ModelName"]}, "VariantName": "v"}]}},
        **(extra or {}),
    }
    return World([Stack("S", {"Resources": resources}, "us-west-2", FAKE_ACCOUNT)])


def _messages(world: World) -> list[str]:
    found = walk(world).found
    return refused(found, world)


def test_a_role_taking_type_or_option_with_no_row_fails():
    world = _model_world([], extra={"Job": {"Type": "AWS::Batch::JobDefinition", "Properties": {
        "ContainerProperties": {"JobRoleArn": {"Fn::GetAtt": ["Role", "Arn"]}}}}})
    world.stacks["S"].template["Resources"]["Model"]["Properties"]["InferenceExecutionConfig"] = {"Mode": "Direct"}
    uncovered = "\n".join(walk(world).uncovered)
    assert "AWS::Batch::JobDefinition: takes a role" in uncovered
    assert "AWS::SageMaker::Model: option InferenceExecutionConfig.Mode" in uncovered


def test_a_model_reads_only_its_own_artifact_and_grants_only_for_aws_resources():
    ecr = {"Effect": "Allow", "Action": "ecr:*", "Resource": "arn:aws:ecr:us-west-2:763104351884:repository/tgi"}
    token = {"Effect": "Allow", "Action": ["ecr:GetAuthorizationToken", "cloudwatch:PutMetricData"], "Resource": "*"}
    kms = {"Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": "*"}
    exact = [ecr, token, kms,
             {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::s-bucket/models/llm/*"},
             {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::s-bucket",
              "Condition": {"StringLike": {"s3:prefix": "models/llm/*"}}},
             {"Effect": "Allow", "Action": "kms:CreateGrant", "Resource": "*",
              "Condition": {"Bool": {"kms:GrantIsForAWSResource": "true"}}}]
    assert _messages(_model_world(exact)) == []
    loose = [ecr, token, kms, {"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket"],
                               "Resource": ["arn:aws:s3:::s-bucket", "arn:aws:s3:::s-bucket/models/*"]},
             {"Effect": "Allow", "Action": "kms:CreateGrant", "Resource": "*"}]
    text = "\n".join(_messages(_model_world(loose)))
    for sibling in ("s3:GetObject on arn:aws:s3:::s-bucket/models/llm2/part-0000",
                    "s3:GetObject on arn:aws:s3:::s-bucket/models/llm.tar.gz", "s3:ListBucket on arn:aws:s3:::s-bucket (only its own artifact's prefix)"):
        assert sibling in text, sibling
    assert "kms:CreateGrant" in text and "grants for AWS resources only" in text
    # Logs on every /aws/sagemaker/* group (issue 34): another team's endpoint and job logs are written too.
    logs = {"Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Resource": "arn:aws:logs:us-west-2:111111111111:log-group:/aws/sagemaker/*"}
    text = "\n".join(_messages(_model_world([*exact, logs])))
    assert "/aws/sagemaker/Endpoints/someone-else" in text and "/aws/sagemaker/TrainingJobs" in text, text


# CloudWatch publishes an alarm's notification as the service principal: the topic's policy must allow
# cloudwatch.amazonaws.com sns:Publish, and the topic's key must let it encrypt (CloudWatch User Guide, "Using Amazon
# CloudWatch alarms", actions: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarms-and-actions.html;
# SNS Developer Guide, "Enable compatibility between event sources from AWS services and encrypted topics":
# https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services). A topic policy
# that CDK writes for enforce_ssl replaces SNS's default policy, so nothing allows the service unless we say so.
ALARM_PUBLISH_SOURCE = "CloudWatch alarm actions publish as cloudwatch.amazonaws.com (alarms-and-actions.html, sns-key-management.html)"


def test_every_alarm_may_publish_to_its_topic(worlds):
    checked, out = 0, []
    for name, world in worlds.items():
        for stack in world.stacks.values():
            for lid, r in stack.template["Resources"].items():
                if r["Type"] != "AWS::CloudWatch::Alarm":
                    continue
                alarm = f"arn:aws:cloudwatch:{stack.region}:{stack.account}:alarm:{stack.stack_name}-{lid}-AbCd123"
                context = {"aws:SourceAccount": stack.account, "aws:SourceArn": alarm}
                cloudwatch = Principal("cloudwatch.amazonaws.com", stack.account, [], service="cloudwatch.amazonaws.com")
                props = r["Properties"]
                for action in props.get("AlarmActions", []) + props.get("OKActions", []):
                    topic = world._resolve(stack, action)
                    if ":sns:" not in topic:
                        continue
                    found = world.lookup(topic)
                    assert found, f"{name} {stack.name}/{lid}: {topic} is not a topic of the estate"
                    ts, tlid = found
                    calls = [Call("sns:Publish", topic, ALARM_PUBLISH_SOURCE, context)]
                    key = ts.template["Resources"][tlid]["Properties"].get("KmsMasterKeyId")
                    if key is not None:
                        key_arn = world._resolve(ts, key)
                        calls += [Call(a, key_arn, ALARM_PUBLISH_SOURCE, context)
                                  for a in ("kms:GenerateDataKey", "kms:Decrypt")]
                    for call in calls:
                        checked += 1
                        d = evaluate(cloudwatch, call, world)
                        if not d.allowed:
                            out.append(f"{name} {stack.name}/{lid}: {call.action} on {call.resource} ({d.reason})")
    assert checked and not out, sorted(set(out))[:10]
