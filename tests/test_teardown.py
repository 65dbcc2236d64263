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
