"""Run-time contracts: every call an AWS service or node makes with one of our roles is allowed by the
synthesized identity policy, permissions boundary, bucket, topic and key policies, and a call outside
the role's purpose is denied. The calls and their documents are in contract_calls.py; the evaluation
of the statements is contract_policy.py."""

from __future__ import annotations

import json

import pytest

from workloads import load

from .conftest import VARIANTS
from .contract_calls import FSX_S3_ROLE, Contract, contracts
from .contract_policy import FAKE_ACCOUNT, Call, Principal, Stack, World, evaluate, metadata_paths

# The variants that between them create every role the toolkit makes.
CONTRACT_VARIANTS = ("small-all-kinds", "intermediate", "huge", "huge-hyperpod")
EXPECTED_ROLES = {
    "small-all-kinds": {"real-time model role", "serverless model role", "async model role", "batch model role",
                        "batch state machine role", "batch schedule role", "training job role"},
    "intermediate": {"real-time model role", "async model role", "batch model role", "batch state machine role",
                     "batch schedule role", "training job role"},
    "huge": {"real-time model role", "async model role", "batch model role", "batch state machine role",
             "batch schedule role", "PCS node role", "FSx S3 service-linked role (key policy)"},
    "huge-hyperpod": {"real-time model role", "async model role", "batch model role", "batch state machine role",
                      "batch schedule role", "HyperPod instance role", "notebook role",
                      "FSx S3 service-linked role (key policy)"},
}


def world_of(synth) -> World:
    stacks = []
    for name, template in synth.templates.items():
        env = synth.artifact(name)["environment"].removeprefix("aws://")
        account, region = env.split("/")
        paths = metadata_paths(synth.outdir / synth.artifact(name)["additionalMetadataFile"])
        stacks.append(Stack(name, template, region, FAKE_ACCOUNT if account == "unknown-account" else account, paths))
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
    return World(stacks)


def _problems(contract: Contract, world: World) -> list[str]:
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


@pytest.fixture(scope="module", params=CONTRACT_VARIANTS)
def variant_world(request, synth) -> tuple[str, World]:
    workload, overrides = VARIANTS[request.param]
    return request.param, world_of(synth(workload, overrides))


def test_every_role_is_covered(variant_world):
    name, world = variant_world
    assert {c.name for c in contracts(world)} == EXPECTED_ROLES[name]


def test_every_role_can_do_what_its_service_does_and_nothing_else(variant_world):
    name, world = variant_world
    problems = [p for c in contracts(world) for p in _problems(c, world)]
    assert not problems, "\n".join(problems)


def test_every_call_names_its_source(variant_world):
    _, world = variant_world
    for c in contracts(world):
        for call in [*c.allowed, *c.denied]:
            assert "https://" in call.source or "API Reference" in call.source, call


def test_team_roles_work_inside_their_boundary(teams_synth):
    world = teams_world(teams_synth)
    problems = []
    for team in teams_synth.templates:
        found = contracts(world, scope=f"{team}/")
        assert found, team
        for c in found:
            if c.principal.arn.endswith(FSX_S3_ROLE.rsplit("/", 1)[-1]):
                continue
            assert c.principal.boundary is not None, f"{team}: {c.name} has no permissions boundary"
            problems += [f"{team}: {p}" for p in _problems(c, world)]
    assert not problems, "\n".join(problems)


def test_a_team_role_cannot_read_another_teams_bucket(teams_synth):
    world = teams_world(teams_synth)
    vision = {c.name: c for c in contracts(world, scope="vision/")}
    language_bucket = world.arn("language/DataStack/Datasets/Dataset/Resource", "AWS::S3::Bucket")
    language_key = world.arn("language/DataStack/DataKey/Key/Resource", "AWS::KMS::Key")
    for name in ("batch model role", "async model role", "training job role"):
        role = vision[name].principal
        read = Call("s3:GetObject", f"{language_bucket}/datasets/train/part-0000", "cross-team isolation")
        assert not evaluate(role, read, world).allowed, name
        decrypt = Call("kms:Decrypt", language_key, "cross-team isolation",
                       context={"kms:ViaService": "s3.us-west-2.amazonaws.com", "kms:CallerAccount": "123456789012"})
        assert not evaluate(role, decrypt, world).allowed, name


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
    """CloudWatch Logs encrypts a log group with the logs key (context aws:logs:arn of the group), and S3 server
    access logging writes the access-log bucket with the data key (CloudWatch Logs user guide, "Encrypt log data
    in CloudWatch Logs using AWS KMS"; S3 user guide, "Enabling Amazon S3 server access logging")."""
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
    assert evaluate(s3_logging, Call("kms:GenerateDataKey", data_key, "s3 logging",
                                     context={"aws:SourceAccount": account}), world).allowed
    assert not evaluate(s3_logging, Call("kms:GenerateDataKey", logs_key, "s3 logging",
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
