"""Issue 31: an estate deployed to the emulator and torn down as docs/operations.md says ("Tearing down"): each
stack reaches DELETE_COMPLETE in order, and what the estate keeps is still there. The rules that make this order
work on AWS, where moto models less (network interfaces, FSx), are checked on the templates in test_lifecycle.py."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from tools.emulator import deployed_resources, running
from workloads import load, plan

from .conftest import VARIANTS
from .test_lifecycle import kept

# What `cdk destroy DataStack NetworkStack` deletes, then the account's shared JobLogsStack, by hand, once no estate
# of the account and region is left (docs/operations.md, "Tearing down").
STACKS = ("InferenceStack", "TrainStack", "DataStack", "NetworkStack", "JobLogsStack")


def _still_there(emu, kind: str, physical: str) -> bool:
    """Whether a kept resource of this kind exists in the emulator (an unknown kind fails: add its probe)."""
    try:
        if kind == "AWS::S3::Bucket":
            return bool(emu.client("s3").head_bucket(Bucket=physical))
        if kind == "AWS::KMS::Key":
            return emu.client("kms").describe_key(KeyId=physical)["KeyMetadata"]["KeyState"] == "Enabled"
        if kind == "AWS::Logs::LogGroup":
            groups = emu.client("logs").describe_log_groups(logGroupNamePrefix=physical)["logGroups"]
            return any(g["logGroupName"] == physical for g in groups)
        if kind == "AWS::EFS::FileSystem":
            return bool(emu.client("efs").describe_file_systems(FileSystemId=physical)["FileSystems"])
    except ClientError:
        return False
    raise AssertionError(f"no probe for a kept {kind}")


def _deleted_at(cf, stack_id: str):
    events = cf.describe_stack_events(StackName=stack_id)["StackEvents"]
    return max(e["Timestamp"] for e in events if e["ResourceStatus"] == "DELETE_COMPLETE"
               and e["ResourceType"] == "AWS::CloudFormation::Stack")


# huge with a shared home: a kept file system beside the buckets, and a DataStack that imports from NetworkStack;
# small: a DataStack that depends on no other stack.
@pytest.mark.e2e  # an emulator deploy: make test-e2e (CI)
@pytest.mark.parametrize("variant", ["huge-shared-home", "small"])
def test_teardown_in_the_documented_order_keeps_what_the_docs_say(synth, variant):
    workload, overrides = VARIANTS[variant]
    s = synth(workload, overrides)
    w = load(workload, overrides)
    names = {sid: s.artifact(sid)["properties"].get("stackName", sid) for sid in s.templates}
    assert set(names) == set(STACKS)
    with running(w.region) as emu:
        emu.bootstrap(quiet=True)
        emu.deploy_estate("--app", str(s.outdir), plan=plan(w), quiet=True)
        cf = emu.client("cloudformation")
        created = {r.name: r.created for r in deployed_resources(emu, s.outdir)}
        ids = {sid: cf.describe_stacks(StackName=name)["Stacks"][0]["StackId"] for sid, name in names.items()}
        keep = {}  # (stack, logical ID) -> (type, physical ID), for what the emulator created
        for sid, template in s.templates.items():
            for row in cf.describe_stack_resources(StackName=names[sid])["StackResources"]:
                lid = row.get("LogicalResourceId")  # moto lists the resources it skipped as blank rows
                if lid in created[sid] and kept(template["Resources"][lid]):
                    keep[(sid, lid)] = (row["ResourceType"], row["PhysicalResourceId"])
        assert {t for t, _ in keep.values()} == {"AWS::S3::Bucket", "AWS::KMS::Key", "AWS::Logs::LogGroup",
                                                  *(["AWS::EFS::FileSystem"] if variant == "huge-shared-home" else [])}

        # Out of order, CloudFormation refuses: NetworkStack's exports are in use, the shared stack is protected.
        cf.delete_stack(StackName=names["NetworkStack"])
        assert cf.describe_stacks(StackName=names["NetworkStack"])["Stacks"][0]["StackStatus"] == "DELETE_FAILED"
        events = cf.describe_stack_events(StackName=names["NetworkStack"])["StackEvents"]
        reason, = [e["ResourceStatusReason"] for e in events if e["ResourceStatus"] == "DELETE_FAILED"]
        assert "cannot be deleted as it is in use by" in reason, reason
        with pytest.raises(ClientError, match="TerminationProtection"):
            cf.delete_stack(StackName=names["JobLogsStack"])

        # The documented commands: `cdk destroy DataStack NetworkStack` (dependents first), then the shared stack.
        emu.destroy("--app", str(s.outdir), stacks=("DataStack", "NetworkStack"), quiet=True)
        cf.update_termination_protection(StackName=names["JobLogsStack"], EnableTerminationProtection=False)
        cf.delete_stack(StackName=names["JobLogsStack"])

        statuses = {sid: cf.describe_stacks(StackName=ids[sid])["Stacks"][0]["StackStatus"] for sid in STACKS}
        assert set(statuses.values()) == {"DELETE_COMPLETE"}, statuses
        deleted = {sid: _deleted_at(cf, ids[sid]) for sid in STACKS}
        for sid in STACKS:  # every stack goes before the stacks it imports from
            for used in s.artifact(sid).get("dependencies", []):
                assert used not in deleted or deleted[sid] < deleted[used], (sid, used)
        assert max(deleted.values()) == deleted["JobLogsStack"]
        gone = [key for key, (kind, physical) in keep.items() if not _still_there(emu, kind, physical)]
        assert not gone, gone
        # Nothing else is left: no VPC but the account's default one, no security group but a default one (issue 44:
        # the models' groups are NetworkStack's), no model, endpoint, role or function of the estate.
        assert all(vpc["IsDefault"] for vpc in emu.client("ec2").describe_vpcs()["Vpcs"])
        groups = emu.client("ec2").describe_security_groups()["SecurityGroups"]
        assert [g["GroupName"] for g in groups if g["GroupName"] != "default"] == []
        sagemaker = emu.client("sagemaker")
        assert sagemaker.list_models()["Models"] == [] and sagemaker.list_endpoints()["Endpoints"] == []
        ours = tuple(names.values())
        left = [r["RoleName"] for r in emu.client("iam").list_roles()["Roles"] if r["RoleName"].startswith(ours)]
        left += [f["FunctionName"] for f in emu.client("lambda").list_functions()["Functions"]
                 if f["FunctionName"].startswith(ours)]
        assert not left, left


# Two teams of one account and region (the emulator's account), each a small estate: what `cdk deploy 'Shared-*'`
# and `cdk deploy 'TEAM/*'` make, then torn down team by team, the shared stack last.
TWO_TEAMS = """teams:
{}""".format("".join(f"""  - name: {name}
    account: "123456789012"
    region: us-east-1
    availability_zone: us-east-1a
    workload: small
    allowed_instance_families: [m5, c5]
    budget: {{monthly_usd: 2000, alert_emails: [{name}@example.com]}}
    cost_center: CC-{i}
""" for i, name in enumerate(("alpha", "beta"))))
SHARED = "Shared-123456789012-us-east-1"


@pytest.fixture(scope="module")
def two_teams(synth_root, tmp_path_factory):
    import json

    import aws_cdk as cdk

    from .conftest import _once, build_app, cdk_json_context

    teams_file = tmp_path_factory.mktemp("two-teams") / "teams.yaml"
    teams_file.write_text(TWO_TEAMS)
    outdir = synth_root / "two-teams"
    with _once(outdir) as needed:
        if needed:
            app = cdk.App(outdir=str(outdir), context={**cdk_json_context(), "teams": str(teams_file)})
            build_app(app)
            app.synth()
    templates = {}  # display name (TEAM/STACK or the shared ID) -> (CloudFormation name, template)
    manifest = json.loads((outdir / "manifest.json").read_text())
    for art_id, art in manifest["artifacts"].items():
        if art["type"] == "aws:cloudformation:stack":
            templates[art_id] = (art["properties"]["stackName"],
                                 json.loads((outdir / art["properties"]["templateFile"]).read_text()))
        elif art["type"] == "cdk:cloud-assembly":
            nested = outdir / art["properties"]["directoryName"]
            for stack in json.loads((nested / "manifest.json").read_text())["artifacts"].values():
                if stack["type"] == "aws:cloudformation:stack":
                    templates[stack["displayName"]] = (stack["properties"]["stackName"], json.loads(
                        (nested / stack["properties"]["templateFile"]).read_text()))
    return outdir, teams_file, templates


@pytest.mark.e2e  # two teams' estates deployed to the emulator and torn down: make test-e2e (CI)
def test_two_teams_tear_down_one_by_one_and_leave_only_what_is_kept(two_teams):
    """Issue 44: every stack of a two-team deployment deleted in dependency order leaves nothing of the estate but
    what is kept by design (RetainExceptOnCreate: each team's dataset and access-log buckets, data key, logs key and
    log groups; the shared stack's key), and deleting one team leaves the other and the shared stack as they were.

    What the emulator cannot show: moto runs no Lambda, so the shared stack's Custom::AWS calls that ensure and key
    the four /aws/sagemaker job log groups are skipped (tools/emulator.py LAMBDA_BACKED); that no team stack keys
    them is checked on the templates (test_log_groups.py)."""
    from workloads.planning.teams import load_teams

    outdir, teams_file, templates = two_teams
    assert SHARED in templates and not any(n.endswith("/JobLogsStack") for n in templates)  # one shared stack
    app = ("--app", str(outdir))
    with running("us-east-1") as emu:
        emu.bootstrap(quiet=True)
        for stamped in load_teams(str(teams_file)):
            assert stamped.shared_stack == SHARED
            emu.deploy_estate(*app, plan=stamped.plan, stage=stamped.team.name, shared=SHARED, quiet=True)
        cf = emu.client("cloudformation")
        reports = {r.name: r for r in deployed_resources(emu, outdir) if r.status != "NOT_DEPLOYED"}
        assert set(reports) == set(templates) and {r.status for r in reports.values()} == {"CREATE_COMPLETE"}
        ids = {n: cf.describe_stacks(StackName=name)["Stacks"][0]["StackId"] for n, (name, _) in templates.items()}
        keep = {}
        for n, (name, template) in templates.items():
            for row in cf.describe_stack_resources(StackName=name)["StackResources"]:
                lid = row.get("LogicalResourceId")
                if lid in reports[n].created and kept(template["Resources"][lid]):
                    keep[(n, lid)] = (row["ResourceType"], row["PhysicalResourceId"])
        kept_buckets = {p for t, p in keep.values() if t == "AWS::S3::Bucket"}
        assert len(kept_buckets) == 4  # each team's dataset and access-log buckets
        shared_key = cf.describe_stacks(StackName="sagemaker-job-logs")["Stacks"][0]
        parameter = emu.client("ssm").get_parameter(Name="/sagemaker-job-logs/key-arn")["Parameter"]["Value"]
        assert {(SHARED, lid) for (n, lid), (t, _) in keep.items() if n == SHARED} and shared_key

        def status(n: str) -> str:
            return cf.describe_stacks(StackName=ids[n])["Stacks"][0]["StackStatus"]

        # One team goes (docs/operations.md: the guardrails and the data stack name every stack of the team).
        emu.destroy(*app, stacks=("alpha/GuardrailsStack", "alpha/DataStack", "alpha/NetworkStack"), quiet=True)
        assert {n: status(n) for n in templates if n.startswith("alpha/")} == \
            {n: "DELETE_COMPLETE" for n in templates if n.startswith("alpha/")}
        assert {status(n) for n in templates if not n.startswith("alpha/")} == {"CREATE_COMPLETE"}
        assert emu.client("ssm").get_parameter(Name="/sagemaker-job-logs/key-arn")["Parameter"]["Value"] == parameter
        # The other team, then the shared stack (termination-protected) by hand, once no team is left.
        emu.destroy(*app, stacks=("beta/GuardrailsStack", "beta/DataStack", "beta/NetworkStack"), quiet=True)
        with pytest.raises(ClientError, match="TerminationProtection"):
            cf.delete_stack(StackName="sagemaker-job-logs")
        cf.update_termination_protection(StackName="sagemaker-job-logs", EnableTerminationProtection=False)
        cf.delete_stack(StackName="sagemaker-job-logs")

        assert {n: status(n) for n in templates} == {n: "DELETE_COMPLETE" for n in templates}
        deleted = {n: _deleted_at(cf, ids[n]) for n in templates}
        assert max(deleted.values()) == deleted[SHARED]
        gone = [key for key, (kind, physical) in keep.items() if not _still_there(emu, kind, physical)]
        assert not gone, gone
        # Nothing else is left: the buckets are the kept ones and CDK's bootstrap bucket; no VPC but the default, no
        # security group but a default one, no model or endpoint, no role, function or parameter of the estate.
        buckets = {b["Name"] for b in emu.client("s3").list_buckets()["Buckets"]}
        assert {b for b in buckets if not b.startswith("cdk-hnb659fds-assets-")} == kept_buckets
        assert all(vpc["IsDefault"] for vpc in emu.client("ec2").describe_vpcs()["Vpcs"])
        groups = emu.client("ec2").describe_security_groups()["SecurityGroups"]
        assert [g["GroupName"] for g in groups if g["GroupName"] != "default"] == []
        sagemaker = emu.client("sagemaker")
        assert sagemaker.list_models()["Models"] == [] and sagemaker.list_endpoints()["Endpoints"] == []
        assert sagemaker.list_notebook_instances()["NotebookInstances"] == []
        ours = tuple(name for name, _ in templates.values())
        left = [r["RoleName"] for r in emu.client("iam").list_roles()["Roles"] if r["RoleName"].startswith(ours)]
        left += [f["FunctionName"] for f in emu.client("lambda").list_functions()["Functions"]
                 if f["FunctionName"].startswith(ours)]
        left += [p["Name"] for p in emu.client("ssm").describe_parameters()["Parameters"]
                 if p["Name"].startswith("/sagemaker-job-logs")]
        assert not left, left
        keys = {p for t, p in keep.values() if t == "AWS::KMS::Key"}
        assert parameter.split("/")[-1] in keys  # the shared key is kept, with the teams' own
