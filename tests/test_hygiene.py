"""Issue 25: hygiene that outside scanners and reviewers asked for, checked over every resource of a kind:
endpoint configs encrypt their volumes wherever SageMaker accepts a key, service principals act for this account
only (confused deputy), ..."""

from __future__ import annotations

import json
import re

import pytest

from workloads.catalog import load_catalog

from .conftest import VARIANTS
from .contract_policy import FAKE_ACCOUNT, Call, Principal, evaluate
from .test_runtime_contract import teams_world, world_of

OTHER_ACCOUNT = "999999999999"


@pytest.mark.parametrize("variant", ["small-all-kinds", "huge", "intermediate"])
def test_every_endpoint_config_has_a_volume_key_where_sagemaker_accepts_one(synth, variant):
    """CreateEndpointConfig.KmsKeyId is refused only for instance types with local storage (SageMaker API
    Reference); serverless variants (no instance type) take it too."""
    catalog = load_catalog()
    configs = synth(*VARIANTS[variant]).resources("InferenceStack", "AWS::SageMaker::EndpointConfig")
    assert configs
    for lid, config in configs.items():
        props = config["Properties"]
        types = [v.get("InstanceType") for v in props["ProductionVariants"]]
        nvme = any(t and catalog.get(t).local_nvme for t in types)
        assert ("KmsKeyId" in props) != nvme, (lid, types, props.get("KmsKeyId"))


def test_serverless_endpoint_config_is_encrypted_with_the_data_key(synth):
    world = world_of(synth(*VARIANTS["small-all-kinds"]))
    stack, lid = world.find("InferenceStack/Serverless/Config", "AWS::SageMaker::EndpointConfig")
    key = world.resolve(stack.name, stack.template["Resources"][lid]["Properties"]["KmsKeyId"])
    assert key == world.arn("DataStack/DataKey/Key/Resource", "AWS::KMS::Key")
    role = world.role("InferenceStack/ServerlessModel/Role/Resource")
    grant = Call("kms:CreateGrant", key, "CreateEndpointConfig KmsKeyId", context={"kms:GrantIsForAWSResource": "true"})
    assert evaluate(role, grant, world).allowed


def test_s3_logging_uses_no_key_and_takes_logs_of_this_account_only(synth):
    """S3 server access logging writes its SSE-S3 destination (the only default encryption S3 supports there; issue
    31): the data key grants the logging service nothing, for any account; the destination takes logs of this
    account's buckets only (S3 user guide, "Enabling Amazon S3 server access logging": aws:SourceAccount)."""
    world = world_of(synth("huge"))
    data_key = world.arn("DataStack/DataKey/Key/Resource", "AWS::KMS::Key")
    access_logs = world.arn("DataStack/Datasets/AccessLogs/Resource", "AWS::S3::Bucket")
    s3_logging = Principal(arn="", account=FAKE_ACCOUNT, identity=[], service="logging.s3.amazonaws.com")
    for account in (FAKE_ACCOUNT, OTHER_ACCOUNT):
        for action in ("kms:GenerateDataKey", "kms:Decrypt"):
            call = Call(action, data_key, "S3 server access logging", context={"aws:SourceAccount": account})
            assert not evaluate(s3_logging, call, world).allowed, (action, account)
    put = f"{access_logs}/dataset/2026-11-25-00-00-00-ABCDEF"
    source = world.arn("DataStack/Datasets/Dataset/Resource", "AWS::S3::Bucket")
    ours = Call("s3:PutObject", put, "S3 server access logging",
                context={"aws:SourceAccount": FAKE_ACCOUNT, "aws:SourceArn": source})
    theirs = Call("s3:PutObject", put, "S3 server access logging",
                  context={"aws:SourceAccount": OTHER_ACCOUNT, "aws:SourceArn": "arn:aws:s3:::someone-elses"})
    assert evaluate(s3_logging, ours, world).allowed and not evaluate(s3_logging, theirs, world).allowed


def test_the_flow_logs_role_is_assumed_for_this_accounts_flow_logs_only(synth):
    """Outside review R5 L1: aws-cdk-lib's flow-log role trusted the service with no condition. The VPC User Guide's
    trust for publishing flow logs names the account and its flow logs (aws:SourceAccount, aws:SourceArn)."""
    world = world_of(synth(*VARIANTS["small-all-kinds"]))
    stack, logical = world.find("NetworkStack/Network/FlowLogsRole/Resource", "AWS::IAM::Role")
    role = world.arn("NetworkStack/Network/FlowLogsRole/Resource", "AWS::IAM::Role")
    flow = Principal(arn="", account=FAKE_ACCOUNT, identity=[], service="vpc-flow-logs.amazonaws.com")
    doc = "VPC User Guide, IAM role for publishing flow logs to CloudWatch Logs"

    def assume(account: str) -> bool:
        source = f"arn:aws:ec2:{stack.region}:{account}:vpc-flow-log/fl-0123456789abcdef0"
        call = Call("sts:AssumeRole", role, doc, context={"aws:SourceAccount": account, "aws:SourceArn": source})
        return evaluate(flow, call, world).allowed

    assert assume(FAKE_ACCOUNT) and not assume(OTHER_ACCOUNT)
    (flow_log,) = [r for r in stack.template["Resources"].values() if r["Type"] == "AWS::EC2::FlowLog"]
    assert world._resolve(stack, flow_log["Properties"]["DeliverLogsPermissionArn"]) == role


def test_the_batch_schedule_role_is_assumed_for_this_account_only(synth):
    """EventBridge Scheduler assumes the role for a schedule of this account, never for another's."""
    world = world_of(synth(*VARIANTS["small-all-kinds"]))
    role = world.arn("InferenceStack/Batch/ScheduleRole/Resource", "AWS::IAM::Role")
    scheduler = Principal(arn="", account=FAKE_ACCOUNT, identity=[], service="scheduler.amazonaws.com")
    doc = "EventBridge Scheduler User Guide, Set up the execution role"
    ours = Call("sts:AssumeRole", role, doc, context={"aws:SourceAccount": FAKE_ACCOUNT})
    theirs = Call("sts:AssumeRole", role, doc, context={"aws:SourceAccount": OTHER_ACCOUNT})
    assert evaluate(scheduler, ours, world).allowed
    assert not evaluate(scheduler, theirs, world).allowed


@pytest.mark.parametrize("variant", ["small-all-kinds", "huge", "teams"])
def test_every_state_machine_role_is_assumed_by_its_own_state_machine_only(synth, teams_synth, variant):
    """Issue 44: the trust named any state machine of the account (stateMachine:*), and aws-cdk-lib's own role for the
    batch drain still did (outside review R5 L2). Step Functions' confused deputy guidance (Developer Guide, "Creating
    an IAM role for your state machine") names the state machine itself: a rule over every state machine."""
    world = teams_world(teams_synth) if variant == "teams" else world_of(synth(*VARIANTS[variant]))
    states = Principal(arn="", account=FAKE_ACCOUNT, identity=[], service="states.amazonaws.com")
    doc = "Step Functions Developer Guide, Prevent cross-service confused deputy issue"
    machines = [(st, lid) for st in world.stacks.values() for lid, r in st.template["Resources"].items()
                if r["Type"] == "AWS::StepFunctions::StateMachine"]
    assert machines
    for st, lid in machines:
        machine = world.get_att(st, lid, "Arn")
        role = world._resolve(st, st.template["Resources"][lid]["Properties"]["RoleArn"])

        def assume(source_arn: str, account: str = st.account) -> bool:
            call = Call("sts:AssumeRole", role, doc, context={"aws:SourceAccount": account, "aws:SourceArn": source_arn})
            return evaluate(states, call, world).allowed

        assert assume(machine), (st.name, lid)
        assert not assume(machine.rsplit(":", 1)[0] + ":another-state-machine"), (st.name, lid)
        assert not assume(machine.replace(st.account, OTHER_ACCOUNT), OTHER_ACCOUNT), (st.name, lid)


def world_models(world) -> set[str]:
    """Every SageMaker model of every estate in the world, by the ARN SageMaker reports (its generated name)."""
    return {f"arn:aws:sagemaker:{st.region}:{st.account}:model/{world._name(st, logical)}"
            for st in world.stacks.values() for logical, r in st.template.get("Resources", {}).items()
            if r["Type"] == "AWS::SageMaker::Model"}


@pytest.mark.parametrize("variant", ["small-all-kinds", "teams"])
def test_the_batch_state_machine_transforms_with_its_estates_model_only(synth, teams_synth, variant):
    """Issue 44: the state machine's role could CreateTransformJob naming any model of the account. What Step
    Functions calls at run time (tests/contract_calls.py) stays allowed; the same job naming another model, or
    another team's model, is refused."""
    from .contract_calls import walk
    from .test_runtime_contract import teams_world

    world = teams_world(teams_synth) if variant == "teams" else world_of(synth(*VARIANTS[variant]))
    creates = [f for f in walk(world).found if f.call.action == "sagemaker:CreateTransformJob"]
    ours = [f for f in creates if not f.denied]
    assert ours and len(creates) == 2 * len(ours)
    models = {f.call.context["sagemaker:ModelArn"] for f in ours}
    for found in ours:
        assert evaluate(found.principal, found.call, world).allowed, found.call
        for other in [*models - {found.call.context["sagemaker:ModelArn"]}, "arn:aws:sagemaker:x:1:model/other"]:
            call = Call(found.call.action, found.call.resource, found.call.source,
                        {**found.call.context, "sagemaker:ModelArn": other})
            assert not evaluate(found.principal, call, world).allowed, (found.where, other)
    if variant == "teams":  # each team's batch role is refused the other's model, the one that drains too
        others = {m for m in world_models(world) if m not in models}
        assert others, "the teams' other models must exist to be refused"
        for found in ours:
            for other in others:
                call = Call(found.call.action, found.call.resource, found.call.source,
                            {**found.call.context, "sagemaker:ModelArn": other})
                assert not evaluate(found.principal, call, world).allowed, (found.where, other)


@pytest.mark.parametrize("variant", ["huge", "huge-p5", "huge-capacity-block", "huge-trn2-reservation"])
def test_cluster_launch_templates_keep_node_credentials_from_containers(synth, variant):
    """IMDSv2 with hop limit 1 on every launch template: node software runs on the host, and a container behind a
    bridge (one more hop) cannot reach the node role's credentials (EC2 User Guide, "Configure the instance metadata
    options")."""
    templates = synth(*VARIANTS[variant]).resources("TrainStack", "AWS::EC2::LaunchTemplate")
    assert templates
    for lid, t in templates.items():
        options = t["Properties"]["LaunchTemplateData"]["MetadataOptions"]
        assert options["HttpTokens"] == "required", lid
        assert options["HttpPutResponseHopLimit"] == 1, (lid, options)


# Roles of CDK's own deployment-time handlers (Lambda) are not workload roles.
def _workload_roles(world):
    for stack in world.stacks.values():
        for lid, r in stack.template["Resources"].items():
            if r["Type"] != "AWS::IAM::Role":
                continue
            trust = str(r["Properties"]["AssumeRolePolicyDocument"])
            if "lambda.amazonaws.com" not in trust:
                yield lid, world.principal(stack, lid)


@pytest.mark.parametrize("variant", ["huge", "huge-hyperpod", "small-all-kinds"])
def test_no_workload_role_deletes_object_versions(synth, variant):
    """Versioning protects the dataset bucket only if no workload role can erase a version; the training role
    still deletes checkpoints (a delete marker, recoverable)."""
    world = world_of(synth(*VARIANTS[variant]))
    bucket = world.arn("DataStack/Datasets/Dataset/Resource", "AWS::S3::Bucket")
    roles = list(_workload_roles(world))
    assert roles
    erasing = [f"{lid}: {key}" for lid, role in roles for key in ("checkpoints/step-1/model.pt", "datasets/x", "output/x")
               if evaluate(role, Call("s3:DeleteObjectVersion", f"{bucket}/{key}", "S3 versioning"), world).allowed]
    assert not erasing, erasing
    trainer = world.role("TrainStack/TrainingRole/Role/Resource")
    assert evaluate(trainer, Call("s3:DeleteObject", f"{bucket}/checkpoints/step-1/model.pt", "rotation"), world).allowed


def _lambda_groups(s):
    """(stack, function) -> how its logs are kept: its LoggingConfig group, or a group named /aws/lambda/<its name>."""
    out = {}
    for stack, template in s.templates.items():
        res = template["Resources"]
        named = {json.dumps(r["Properties"].get("LogGroupName"), sort_keys=True) for r in res.values()
                 if r["Type"] == "AWS::Logs::LogGroup"}
        for lid, r in res.items():
            if r["Type"] != "AWS::Lambda::Function":
                continue
            own = {"Fn::Join": ["", ["/aws/lambda/", {"Ref": lid}]]}
            out[(stack, lid)] = ("LogGroup" in r["Properties"].get("LoggingConfig", {})
                                 or json.dumps(own, sort_keys=True) in named)
    return out


@pytest.mark.parametrize("variant", ["huge", "huge-hyperpod", "small-all-kinds"])
def test_service_made_log_groups_are_created_ahead(synth, variant):
    """Every Lambda function logs to a group of ours (made ahead: kept and encrypted, as every group of the estate,
    test_stacks), and so does Image Builder's bake: the image names its group (ImageLoggingConfiguration), under
    /aws/imagebuilder/ where the service's and the build instance's managed policies write, and the group exists
    first (the Ref orders it). Its name is the build role's, generated anew each time: issue 31, test_lifecycle."""
    s = synth(*VARIANTS[variant])
    missing = [k for k, ok in _lambda_groups(s).items() if not ok]
    assert not missing, missing
    resources = s.templates["TrainStack"]["Resources"]
    for lid, image in s.resources("TrainStack", "AWS::ImageBuilder::Image").items():
        (group,) = re.findall(r'"Ref": "([^"]+)"', json.dumps(image["Properties"]["LoggingConfiguration"]))
        name = resources[group]["Properties"]["LogGroupName"]
        assert resources[group]["Type"] == "AWS::Logs::LogGroup", (lid, group)
        assert name["Fn::Join"][1][0] == "/aws/imagebuilder/", (lid, name)


def test_the_pcs_agent_is_pinned_and_verified_before_it_is_installed():
    """PCS user guide, "Step 2 - Install the AWS PCS agent": the versioned tarball, the public key's fingerprint
    1C24 32C1 862F 64D1 F90A  239A 7EEF 030E DDF5 C21C (that key alone exported to its own keyring), then gpgv of the
    tarball's .sig against that keyring only; the installer only after both (set -e and explicit exits stop the bake otherwise)."""
    from constructs_lib.node_image import PCS_AGENT_VERSION, bake_steps
    from workloads.catalog import load_software

    script = next(st for st in bake_steps(software=load_software().stacks[0], region="us-east-1")
                  if st.name == "InstallPcsAgentAndSlurm").commands()
    assert "aws-pcs-agent-v1-latest" not in script and re.fullmatch(r"\d+\.\d+\.\d+-\d+", PCS_AGENT_VERSION)
    lines = script.splitlines()
    at = {what: next(i for i, line in enumerate(lines) if what in line) for what in (
        "set -euxo pipefail", "--export 1C2432C1862F64D1F90A239A7EEF030EDDF5C21C",
        f"aws-pcs-agent-v{PCS_AGENT_VERSION}.tar.gz.sig\" -o", "gpgv ", "./installer.sh")}
    assert at["set -euxo pipefail"] < at["--export 1C2432C1862F64D1F90A239A7EEF030EDDF5C21C"] \
        < at["gpgv "] < at["./installer.sh"], at
    assert "exit 1" in lines[at["gpgv "] + 1] and "gpg --verify" not in script and "gpg --batch --verify" not in script
