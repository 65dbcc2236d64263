"""Issue 10: the log groups SageMaker names itself exist with our key and retention before anything writes to
them: the account-wide job groups in one shared stack per account and region, HyperPod's per-cluster group once
its ID exists. Both are ensured (created, or an existing group given the key and retention), in that order."""

from __future__ import annotations

import json

from constructs_lib.job_log_groups import JOB_LOG_GROUPS
from stacks.job_logs_stack import STACK_NAME

from .conftest import VARIANTS
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


def test_one_job_logs_stack_per_account_and_region_whatever_the_team(teams_synth):
    """Teams in one account and region deploy the same CloudFormation stack: the template must not differ, or
    each team's deployment would change it back. No team, stage or workload tag goes into it."""
    by_team = {team: stacks["JobLogsStack"] for team, stacks in teams_synth.templates.items()}
    assert by_team["vision"] == by_team["language"]  # one account, one region (config/teams.yaml)
    assert by_team["tabular"] != by_team["vision"]  # its own region
    assert all(teams_synth.artifacts[t]["JobLogsStack"]["properties"]["stackName"] == STACK_NAME for t in by_team)
    for team, template in by_team.items():
        tagged = [lid for lid, r in template["Resources"].items()
                  if any(t.get("Key") in ("team", "stage", "cost-center", "workload")
                         for t in r.get("Properties", {}).get("Tags", []) if isinstance(t, dict))]
        assert not tagged, f"{team}: {tagged}"


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


def test_only_the_shared_stack_keys_the_account_wide_groups_however_many_teams(teams_synth):
    """Issue 44: with several teams in one account and region, no team's own stack may associate a key with the
    account-wide /aws/sagemaker/* job groups (the last deployed would re-key every team's logs). Only the shared
    stack (one CloudFormation stack name, one template per account and region) does, and its key lets CloudWatch
    Logs encrypt each of those groups for every team's jobs (key policy, aws:logs:arn encryption context)."""
    keyed: dict[tuple[str, str], set[str]] = {}
    for team, stacks in teams_synth.templates.items():
        for sid, template in stacks.items():
            art = teams_synth.artifacts[team][sid]
            for lid, r in template["Resources"].items():
                text = json.dumps(r.get("Properties", {}))
                if r["Type"] != "Custom::AWS" or "AssociateKmsKey" not in text:
                    continue
                for name in JOB_LOG_GROUPS.values():
                    if f'\\"{name}\\"' in text or f'"{name}"' in text:
                        assert art["properties"].get("stackName") == STACK_NAME, (team, sid, lid, name)
                        keyed.setdefault((art["environment"], name), set()).add(json.dumps(template, sort_keys=True))
    environments = {teams_synth.artifacts[t]["JobLogsStack"]["environment"] for t in teams_synth.templates}
    assert {env for env, _ in keyed} == environments and len(environments) < len(teams_synth.templates)
    assert all(len(templates) == 1 for templates in keyed.values()), "one template per account and region"
    for team, stacks in teams_synth.templates.items():
        account, region = teams_synth.artifacts[team]["JobLogsStack"]["environment"].removeprefix("aws://").split("/")
        world = World([Stack(STACK_NAME, stacks["JobLogsStack"], region, account)])
        key = world.get_att(world.stacks[STACK_NAME], JOB_LOGS_KEY, "Arn")
        logs = Principal(arn="", account=account, identity=[], service=f"logs.{region}.amazonaws.com")
        for name in JOB_LOG_GROUPS.values():
            context = {"kms:EncryptionContext:aws:logs:arn": f"arn:aws:logs:{region}:{account}:log-group:{name}"}
            assert evaluate(logs, Call("kms:GenerateDataKey", key, DOC, context=context), world).allowed, (team, name)
