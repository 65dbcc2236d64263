"""Issue 10: the log groups SageMaker names itself exist with our key and retention before anything writes to
them: the account-wide job groups in one shared stack per account and region, HyperPod's per-cluster group once
its ID exists. Both are ensured (created, or an existing group given the key and retention), in that order."""

from __future__ import annotations

import json
import re

import pytest

from constructs_lib.job_log_groups import JOB_LOG_GROUPS, KEY_PARAMETER
from stacks.job_logs_stack import STACK_NAME
from workloads.planning.teams import load_teams, shared_stack_id

from .conftest import TEAMS_FILE, VARIANTS
from .contract_policy import Call, Principal, Stack, World, evaluate
from .test_runtime_contract import world_of

DOC = "CloudWatch Logs API Reference (CreateLogGroup, AssociateKmsKey, PutRetentionPolicy)"
# Pinned: the shared key is retained, and a new logical ID would make a second one.
JOB_LOGS_KEY = "JobLogsKeyCD1E0CF5"


def _ensured(world: World, stack: str) -> dict[str, list[dict]]:
    """Log group name -> the Custom::AWS calls on it, resolved, in dependency order (Create, Encrypt, Retain)."""
    resources = world.stacks[stack].template["Resources"]
    calls: dict[str, list[dict]] = {}
    order = {"CreateLogGroup": 0, "AssociateKmsKey": 1, "PutRetentionPolicy": 2}
    for lid, res in resources.items():
        if res["Type"] != "Custom::AWS":
            continue
        create = json.loads(world.resolve(stack, res["Properties"]["Create"]))
        assert json.loads(world.resolve(stack, res["Properties"]["Update"])) == create  # the same on update
        assert "Delete" not in res["Properties"]  # deleting the stack leaves the logs
        calls.setdefault(create["parameters"]["logGroupName"], []).append({**create, "lid": lid,
                                                                             "after": res.get("DependsOn", [])})
    for name, steps in calls.items():
        steps.sort(key=lambda c: order[c["action"]])
        assert [c["action"] for c in steps] == list(order), name
        assert steps[0]["ignoreErrorCodesMatching"] == "ResourceAlreadyExistsException"  # an existing group is fine
        assert steps[1]["lid"] in steps[2]["after"] and steps[0]["lid"] in steps[1]["after"]
    return calls


def test_job_log_groups_are_ensured_with_the_shared_key_and_a_year(synth):
    s = synth("huge")
    world = world_of(s)
    calls = _ensured(world, "JobLogsStack")
    assert set(calls) == set(JOB_LOG_GROUPS.values()) == {
        "/aws/sagemaker/TrainingJobs", "/aws/sagemaker/ProcessingJobs", "/aws/sagemaker/TransformJobs",
        "/aws/sagemaker/NotebookInstances"}
    key = world.get_att(world.stacks["JobLogsStack"], JOB_LOGS_KEY, "Arn")
    for name, (create, encrypt, retain) in calls.items():
        assert create["parameters"]["kmsKeyId"] == encrypt["parameters"]["kmsKeyId"] == key, name
        assert retain["parameters"]["retentionInDays"] == 365, name
    assert s.templates["JobLogsStack"]["Resources"][JOB_LOGS_KEY]["DeletionPolicy"] == "Retain"
    artifact = s.artifact("JobLogsStack")
    assert artifact["properties"]["stackName"] == STACK_NAME and artifact["properties"]["terminationProtection"]
    for stack in ("TrainStack", "InferenceStack"):  # nothing of the estate runs a job before the groups exist
        assert "JobLogsStack" in s.artifact(stack)["dependencies"], stack


def test_one_shared_stack_per_account_and_region_outside_every_team(teams_synth, synth):
    """Issue 44: a teams file builds the job log groups' stack once per account and region, outside every team's
    stage (`cdk destroy 'vision/*'` cannot reach it), not a copy per team. Its template is the lone workload's
    JobLogsStack: one CloudFormation stack, whichever builds it. No team, stage or workload tag goes into it."""
    envs = {(t.team.account, t.team.region) for t in load_teams(str(TEAMS_FILE))}
    assert set(teams_synth.shared) == {shared_stack_id(*env) for env in envs} and len(envs) < len(teams_synth.templates)
    for sid, template in teams_synth.shared.items():
        assert teams_synth.shared_artifacts[sid]["properties"]["stackName"] == STACK_NAME
        lone = synth("small").templates["JobLogsStack"]  # us-east-1, no account given
        assert {lid: r["Type"] for lid, r in template["Resources"].items()} == \
            {lid: r["Type"] for lid, r in lone["Resources"].items()}, sid
        if sid == "Shared-us-east-1":  # the same environment: the same template
            assert _masked(template) == _masked(lone)
        tagged = [lid for lid, r in template["Resources"].items()
                  if any(t.get("Key") in ("team", "stage", "cost-center", "workload")
                         for t in r.get("Properties", {}).get("Tags", []) if isinstance(t, dict))]
        assert not tagged, f"{sid}: {tagged}"
    for team, stacks in teams_synth.templates.items():
        assert "JobLogsStack" not in stacks, team


def _masked(template: dict) -> str:
    """A template less its asset hashes (the handler's bundle is the same code, staged per assembly)."""
    return re.sub(r"[0-9a-f]{64}", "<hash>", json.dumps(template, sort_keys=True))


def test_hyperpod_cluster_log_group_is_ensured_once_the_cluster_exists(synth):
    s = synth(*VARIANTS["huge-hyperpod"])
    world = world_of(s)
    cluster_lid = next(iter(s.resources("TrainStack", "AWS::SageMaker::Cluster")))
    cluster = s.templates["TrainStack"]["Resources"][cluster_lid]["Properties"]
    cluster_arn = world.get_att(world.stacks["TrainStack"], cluster_lid, "ClusterArn")
    (name, steps), = _ensured(world, "TrainStack").items()
    # /aws/sagemaker/Clusters/NAME/ID, the ID being the last part of the cluster's ARN.
    assert name == f"/aws/sagemaker/Clusters/{cluster['ClusterName']}/{cluster_arn.split('/')[-1]}"
    logs_key = world.arn("NetworkStack/LogsKey/Key/Resource", "AWS::KMS::Key")
    assert steps[0]["parameters"]["kmsKeyId"] == logs_key
    assert cluster_lid in json.dumps(s.templates["TrainStack"]["Resources"][steps[0]["lid"]]["Properties"]["Create"])


def test_the_ensuring_role_touches_its_log_groups_and_nothing_else(synth):
    world = world_of(synth(*VARIANTS["huge-hyperpod"]))
    for stack, others in (("JobLogsStack", ["/aws/sagemaker/Endpoints/x", "/aws/lambda/anything"]),
                          ("TrainStack", ["/aws/sagemaker/TrainingJobs", "/aws/sagemaker/Clusters/other/abc"])):
        role = world.role(f"{stack}/EnsuredLogGroupsHandlerRole/Resource")
        stack_ = world.stacks[stack]

        def arn(name: str) -> str:
            return f"arn:aws:logs:{stack_.region}:{stack_.account}:log-group:{name}"
        for name in _ensured(world, stack):
            for action in ("logs:CreateLogGroup", "logs:AssociateKmsKey", "logs:PutRetentionPolicy"):
                assert evaluate(role, Call(action, arn(name), DOC), world).allowed, (stack, action, name)
            for action in ("logs:DeleteLogGroup", "logs:DisassociateKmsKey", "logs:DeleteRetentionPolicy"):
                assert not evaluate(role, Call(action, arn(name), DOC), world).allowed, (stack, action, name)
        for name in others:
            assert not evaluate(role, Call("logs:AssociateKmsKey", arn(name), DOC), world).allowed, (stack, name)


def test_cloudwatch_logs_encrypts_the_job_groups_with_the_shared_key_and_nothing_more(synth):
    """As CloudWatch Logs uses the key (encryption context aws:logs:arn of the group; CloudWatch Logs user guide,
    "Encrypt log data in CloudWatch Logs using AWS KMS"), and as the handler writes its own log."""
    world = world_of(synth("huge"))
    stack = world.stacks["JobLogsStack"]
    key = world.get_att(stack, JOB_LOGS_KEY, "Arn")
    logs = Principal(arn="", account=stack.account, identity=[], service=f"logs.{stack.region}.amazonaws.com")
    s3_logging = Principal(arn="", account=stack.account, identity=[], service="logging.s3.amazonaws.com")

    def group(account: str) -> dict:
        return {"kms:EncryptionContext:aws:logs:arn":
                f"arn:aws:logs:{stack.region}:{account}:log-group:/aws/sagemaker/TrainingJobs"}
    for action in ("kms:GenerateDataKey", "kms:Decrypt"):
        assert evaluate(logs, Call(action, key, DOC, context=group(stack.account)), world).allowed, action
        assert not evaluate(logs, Call(action, key, DOC, context=group("999999999999")), world).allowed, action
        assert not evaluate(s3_logging, Call(action, key, DOC, context=group(stack.account)), world).allowed, action
    role = world.role("JobLogsStack/EnsuredLogGroupsHandlerRole/Resource")
    own = world.arn("JobLogsStack/EnsuredLogGroupsHandlerLogs/Resource", "AWS::Logs::LogGroup").removesuffix(":*")
    for action in ("logs:CreateLogStream", "logs:PutLogEvents"):
        assert evaluate(role, Call(action, f"{own}:log-stream:2026/11/22/x", DOC), world).allowed, action


def test_no_team_stack_keys_the_account_wide_groups_and_each_reads_the_shared_key(teams_synth):
    """Issue 44: with several teams in one account and region, no team's own stack may associate a key with the
    account-wide /aws/sagemaker/* job groups (the last deployed would re-key every team's logs, and deleting it would
    take the key's stack with it). Only the shared stack does; the teams' stacks that run jobs read its key's ARN from
    SSM Parameter Store at deploy time (so a team deployed before it fails, naming the parameter)."""
    for team, stacks in teams_synth.templates.items():
        for sid, template in stacks.items():
            for lid, r in template["Resources"].items():
                text = json.dumps(r.get("Properties", {}))
                assert not ("AssociateKmsKey" in text and any(n in text for n in JOB_LOG_GROUPS.values())), \
                    (team, sid, lid)
        for sid in ("TrainStack", "InferenceStack"):
            template = stacks[sid]
            param, = [p for p, v in template["Parameters"].items() if v.get("Default") == KEY_PARAMETER]
            assert template["Parameters"][param]["Type"] == "AWS::SSM::Parameter::Value<String>", (team, sid)
            assert template["Outputs"]["JobLogsKeyArn"]["Value"] == {"Ref": param}, (team, sid)
    for sid, template in teams_synth.shared.items():
        account, region = teams_synth.shared_artifacts[sid]["environment"].removeprefix("aws://").split("/")
        world = World([Stack(STACK_NAME, template, region, account)])
        assert set(_ensured(world, STACK_NAME)) == set(JOB_LOG_GROUPS.values()), sid  # created, keyed, retained
        parameter, = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::SSM::Parameter"]
        assert parameter["Name"] == KEY_PARAMETER and parameter["Value"] == {"Fn::GetAtt": [JOB_LOGS_KEY, "Arn"]}


def test_the_shared_key_lets_cloudwatch_logs_encrypt_every_teams_job_logs(teams_synth):
    """The key policy names CloudWatch Logs of the account and region for its log groups, which serves every team's
    jobs; the teams' roles need nothing on the key (CloudWatch Logs decrypts for readers itself: AssociateKmsKey)."""
    for sid, template in teams_synth.shared.items():
        account, region = teams_synth.shared_artifacts[sid]["environment"].removeprefix("aws://").split("/")
        account = "111111111111" if account == "unknown-account" else account
        world = World([Stack(STACK_NAME, template, region, account)])
        key = world.get_att(world.stacks[STACK_NAME], JOB_LOGS_KEY, "Arn")
        logs = Principal(arn="", account=account, identity=[], service=f"logs.{region}.amazonaws.com")
        for name in JOB_LOG_GROUPS.values():
            context = {"kms:EncryptionContext:aws:logs:arn": f"arn:aws:logs:{region}:{account}:log-group:{name}"}
            assert evaluate(logs, Call("kms:GenerateDataKey", key, DOC, context=context), world).allowed, (sid, name)


@pytest.mark.parametrize("name", ["intermediate", "intermediate-copies-to-zero"])
def test_an_inference_components_container_logs_have_their_group_key_retention_and_writer(name, variant_synth_by_name):
    """An inference component's container writes to its own group (metrics.yaml container_logs; the review R4 F1):
    the stack makes /aws/sagemaker/InferenceComponents/<component> first, with the retention and key of the endpoint's
    group, lets the endpoint's execution role write its streams, and the component endpoint's 5xx alarm sends the
    on-call engineer there. Before: only the endpoint's group existed, the role could write nothing else, and vLLM's
    start-up errors had nowhere to land."""
    from workloads.planning.monitoring import container_logs

    res = variant_synth_by_name(name).templates["InferenceStack"]["Resources"]
    component_lid, = [lid for lid, r in res.items() if r["Type"] == "AWS::SageMaker::InferenceComponent"]
    component = res[component_lid]
    prefix = container_logs("realtime", components=True).removesuffix("{InferenceComponentName}")
    wanted = json.dumps({"Fn::Join": ["", [prefix, component["Properties"]["InferenceComponentName"]]]}, sort_keys=True)
    groups = {lid: r for lid, r in res.items() if r["Type"] == "AWS::Logs::LogGroup"}
    mine = [lid for lid, r in groups.items() if json.dumps(r["Properties"].get("LogGroupName"), sort_keys=True) == wanted]
    assert len(mine) == 1, f"no {prefix}<component> group"
    group = groups[mine[0]]
    endpoint_prefix = container_logs("realtime").removesuffix("{EndpointName}")
    endpoint_groups = [r for r in groups.values() if endpoint_prefix in json.dumps(r["Properties"].get("LogGroupName"))]
    assert endpoint_groups
    for field in ("KmsKeyId", "RetentionInDays"):
        assert all(group["Properties"][field] == r["Properties"][field] for r in endpoint_groups), field
    assert mine[0] in component.get("DependsOn", [])
    config = next(r["Properties"] for r in res.values() if r["Type"] == "AWS::SageMaker::EndpointConfig"
                  and "ExecutionRoleArn" in r["Properties"])
    role = config["ExecutionRoleArn"]["Fn::GetAtt"][0]
    statements = [st for r in res.values() if r["Type"] == "AWS::IAM::Policy"
                  and {"Ref": role} in r["Properties"]["Roles"] for st in r["Properties"]["PolicyDocument"]["Statement"]]
    writes = [st for st in statements if "logs:PutLogEvents" in st["Action"]]
    assert any(prefix in json.dumps(st["Resource"]) and "log-stream" in json.dumps(st["Resource"]) for st in writes)
    errors = [r["Properties"]["AlarmDescription"] for r in res.values() if r["Type"] == "AWS::CloudWatch::Alarm"
              and r["Properties"].get("MetricName") == "Invocation5XXErrors"
              and any(d["Name"] == "InferenceComponentName" for d in r["Properties"]["Dimensions"])]
    assert errors and all(prefix in d and endpoint_prefix not in d for d in errors), errors
