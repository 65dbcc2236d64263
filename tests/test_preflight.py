"""`python -m workloads preflight` (issue 31): each rule against an account that passes it and one that fails it.

The account is moto in process for what it serves (zones, instance type offerings, images, CloudFormation, S3, STS)
and recorded answers (tests/recorded.py, tests/fixtures/preflight/) for what it does not (Service Quotas, Cost
Explorer's cost allocation tags, capacity reservations). Nothing here reaches AWS.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime

import pytest

from workloads import load, plan
from workloads.catalog import load_catalog
from workloads.errors import ERROR, INFO, WARNING
from workloads.commands.preflight import Account

from .conftest import CAPACITY_BLOCK, ROOT, TRN1, TRN2
from .recorded import FIXTURES, load_fixture, replay

# p5.48xlarge in a Capacity Block, us-east-2b (use2-az2 in moto); the async type pinned to the one the recorded
# quotas name (the planner may choose another as its sizing moves).
# The endpoint types the recorded quotas name (the planner would choose ml.inf2.24xlarge for real time: as dear as one
# ml.inf2.48xlarge at the peak, half at the minimum).
HUGE_CB = ("huge", {**CAPACITY_BLOCK, "inference.async.instance_type": "ml.p4d.24xlarge",
                    "inference.realtime.instance_type": "ml.inf2.48xlarge"})
HUGE_TRN2 = ("huge", TRN2)  # trn2.48xlarge on a reservation: a Neuron node image
# 16 x trn1.32xlarge on demand in us-west-2a: moto maps it to usw2-az2, which its offerings leave Trn1 out of.
TRN1_WEST = ("huge", {**TRN1, "region": "us-west-2", "availability_zone": "us-west-2a"})
TRN1_WEST_B = ("huge", {**TRN1, "region": "us-west-2", "availability_zone": "us-west-2b"})
NOW = datetime.fromisoformat(load_fixture("capacity-block-active")["recorded_at"].replace("Z", "+00:00"))


@pytest.fixture
def moto(monkeypatch):
    """An empty emulated account (in process), with the Neuron DLAMIs the test loads; never a real one."""
    from moto import mock_aws

    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}.items():
        monkeypatch.setenv(key, value)
    images(monkeypatch, "neuron-dlamis-pinned")
    with mock_aws():
        yield


def images(monkeypatch, name: str) -> None:
    """Amazon-owned images in the emulator: moto loads its AMI list from MOTO_AMIS_PATH's contents, read at import,
    so the list itself is replaced (before the mock starts its EC2 backend)."""
    import moto.ec2.models.amis as amis

    data = json.loads((FIXTURES / f"{name}.json").read_text())
    monkeypatch.setattr(amis, "AMIS", [dict(i) for i in data["images"]])
    monkeypatch.setenv("MOTO_AMIS_PATH", str(FIXTURES / f"{name}.json"))


def account(region: str, *recorded: str, stage: str = "", now: datetime = NOW):
    """The emulated account, with the recorded answers `recorded` for the services moto does not serve."""
    acc = Account(region, stage=stage, now=now)
    by_service = {"quotas": "service-quotas", "cost": "ce", "capacity": "ec2"}
    for service in {by_service[r.split("-")[0]] for r in recorded}:
        names = [r for r in recorded if by_service[r.split("-")[0]] == service]
        replay(acc.client(service), *names, every_call=service != "ec2")
    return acc


def run(rule: str, config: tuple, acc) -> list:
    from workloads.commands import preflight

    check = next(r for r in preflight.RULES if r.name == rule)
    return check.check(plan(load(*config)), acc)


def levels(findings) -> list[str]:
    return [f.level for f in findings]


def bootstrap(region: str, version: str = "33") -> None:
    import boto3

    template = {"Resources": {"Version": {"Type": "AWS::SSM::Parameter", "Properties": {
        "Type": "String", "Value": version, "Name": "/cdk-bootstrap/hnb659fds/version"}}},
        "Outputs": {"BootstrapVersion": {"Value": version}}}
    boto3.client("cloudformation", region_name=region).create_stack(StackName="CDKToolkit",
                                                                    TemplateBody=json.dumps(template))


def data_stack(region: str, name: str, *keys: str) -> str:
    """A deployed DataStack as jobs.stack_outputs reads it: its DatasetBucketName output, the bucket, `keys`."""
    import boto3

    bucket = f"{name}-datasets"
    s3 = boto3.client("s3", region_name=region)
    where = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    s3.create_bucket(Bucket=bucket, **where)
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
                "Outputs": {"DatasetBucketName": {"Value": bucket}}}
    boto3.client("cloudformation", region_name=region).create_stack(StackName=name, TemplateBody=json.dumps(template))
    return bucket


# --- zones ----------------------------------------------------------------------------------------------------------

def test_zones_resolve_to_this_accounts_az_ids(moto):
    found = run("zones_exist", HUGE_CB, account("us-east-2"))
    assert levels(found) == [INFO, INFO]
    assert found[0].value == "us-east-2b" and "is use2-az2 in this account" in found[0].message


def test_az_ids_are_named_as_this_account_names_them(moto):
    found = run("zones_exist", ("small", {"availability_zone": "use1-az4", "second_availability_zone": "use1-az6"}),
                account("us-east-1"))
    assert [(f.level, f.value, f.message) for f in found] == [
        (INFO, "use1-az4", "is us-east-1d in this account"), (INFO, "use1-az6", "is us-east-1a in this account")]


def test_a_zone_id_the_account_does_not_have_is_an_error(moto):
    found = run("zones_exist", ("huge", {**CAPACITY_BLOCK, "availability_zone": "use2-az7",
                                         "second_availability_zone": "use2-az3",
                                         "training.capacity_reservation_az": "use2-az7"}), account("us-east-2"))
    assert levels(found) == [ERROR, INFO]
    assert "not a zone of us-east-2 in this account; its zones: us-east-2a (use2-az1)" in found[0].message


def test_the_zone_offers_every_ec2_type_the_estate_launches_there(moto):
    found = run("types_offered_in_zone", HUGE_CB, account("us-east-2"))
    assert levels(found) == [INFO] * 3
    assert [f.message.split(" (")[0] for f in found] == ["offers p5.48xlarge", "offers m5.xlarge", "offers m5.2xlarge"]


def test_a_type_not_offered_in_the_zone_is_an_error_naming_the_zones_that_offer_it(moto):
    found = run("types_offered_in_zone", TRN1_WEST, account("us-west-2"))
    errors = [f for f in found if f.level == ERROR]
    assert len(errors) == 1 and errors[0].field == "availability_zone" and errors[0].value == "us-west-2a"
    assert errors[0].message == (
        "usw2-az2 (us-west-2a in this account) does not offer trn1.32xlarge (the Slurm compute nodes), so they never "
        "launch; set availability_zone to one of usw2-az1 (us-west-2b in this account), usw2-az4 (us-west-2d in this "
        "account)")
    assert levels(run("types_offered_in_zone", TRN1_WEST_B, account("us-west-2"))) == [INFO] * 3


# --- quotas ---------------------------------------------------------------------------------------------------------

def test_every_catalog_type_is_counted_by_a_recorded_ec2_quota():
    from workloads.commands.preflight import ec2_quota_of

    quotas = {name: ec2_quota_of(name)["code"] for name in load_catalog().types}
    assert quotas["trn2.48xlarge"] == "L-2C3B7624" and quotas["inf2.xlarge"] == "L-1945791B"
    assert quotas["p5.48xlarge"] == "L-417A185B" and quotas["g6.xlarge"] == "L-DB2E81BA"
    assert quotas["p6-b300.48xlarge"] == "L-417A185B" and quotas["m5.xlarge"] == "L-1216C47A"


def test_ec2_vcpus_within_the_applied_quotas(moto):
    found = run("ec2_vcpu_quotas", TRN1_WEST, account("us-west-2", "quotas-ec2-enough"))
    assert levels(found) == [INFO, INFO]
    trn = next(f for f in found if "L-2C3B7624" in f.field)
    assert trn.value == 4096.0 and "16 x trn1.32xlarge (128 vCPUs each, the Slurm compute nodes): 2048 vCPUs" in \
        trn.message


def test_a_default_account_lacks_the_vcpus_and_preflight_says_how_to_ask(moto):
    found = run("ec2_vcpu_quotas", TRN1_WEST, account("us-west-2", "quotas-ec2-default"))
    assert levels(found) == [ERROR, ERROR]
    trn, standard = sorted(found, key=lambda f: "Standard" in f.field)
    assert trn.value == 0.0 and trn.message.endswith(
        "request an increase: aws service-quotas request-service-quota-increase --region us-west-2 --service-code ec2 "
        "--quota-code L-2C3B7624 --desired-value 2048")
    assert standard.value == 5.0 and "1 x m5.xlarge" in standard.message and "1 x m5.2xlarge" in standard.message


def test_nodes_in_a_capacity_block_are_held_by_the_block_not_the_on_demand_quota(moto):
    found = run("ec2_vcpu_quotas", HUGE_CB, account("us-east-2", "quotas-ec2-enough"))
    assert [(f.level, f.value) for f in found] == [(INFO, "p5.48xlarge"), (INFO, 1152.0)]
    assert "launch into cr-0123456789abcdef0" in found[0].message


def test_sagemaker_instances_within_the_applied_quotas(moto):
    found = run("sagemaker_quotas", HUGE_CB,
                account("us-east-2", "quotas-sagemaker-enough"))
    assert levels(found) == [INFO] * 3
    # The nightly batch is on a TransformInstanceType (ml.g6.48xlarge), not on p4d, which CreateTransformJob refuses.
    assert {f.field for f in found} == {"ml.inf2.48xlarge for endpoint usage", "ml.p4d.24xlarge for endpoint usage",
                                        "ml.g6.48xlarge for transform job usage"}


def test_a_default_account_has_no_sagemaker_instances_to_give(moto):
    found = run("sagemaker_quotas", HUGE_CB, account("us-east-2", "quotas-sagemaker-default"))
    assert levels(found) == [ERROR] * 3
    endpoint = next(f for f in found if f.field == "ml.inf2.48xlarge for endpoint usage")
    assert endpoint.value == 0.0 and endpoint.message == (
        "the plan needs 4 (4 for the realtime endpoint's instances at most); request an increase: aws service-quotas "
        "request-service-quota-increase --region us-east-2 --service-code sagemaker --quota-code L-286C98BC "
        "--desired-value 4")


def test_serverless_concurrency_and_training_jobs_are_counted_too(moto):
    config = ("small", {"inference.serverless.max_concurrency": "20"})
    found = {f.field: f for f in run("sagemaker_quotas", config, account("us-east-1", "quotas-sagemaker-default"))}
    concurrency = found["Maximum total concurrency that can be allocated across all serverless endpoints"]
    assert concurrency.level == ERROR and concurrency.value == 10.0 and "the plan needs 20" in concurrency.message
    assert found["ml.r5.2xlarge for training job usage"].level == ERROR


def test_a_quota_name_the_region_does_not_have_is_an_error(moto):
    """Neither applied nor a default: the region has no such quota, so the create call would fail (issue 41)."""
    # The types the recorded quotas name (vLLM now serves on T4 too, so the planner may choose g4dn, which the
    # recorded account lists no quota for).
    recorded = {"inference.realtime.instance_type": "ml.inf2.xlarge", "inference.async.instance_type": "ml.g6.xlarge",
                "inference.batch.instance_type": "ml.g6.xlarge"}
    found = run("sagemaker_quotas", (TRN1_WEST[0], {**TRN1_WEST[1], **recorded}),
                account("us-west-2", "quotas-sagemaker-enough"))
    assert levels(found) == [INFO, INFO, INFO]  # inf2.xlarge and g6.xlarge endpoint, g6.xlarge transform
    acc = account("us-west-2", "quotas-sagemaker-enough")
    found = run("sagemaker_quotas", ("huge", {**TRN1, **recorded, "region": "us-west-2", "availability_zone": "us-west-2b",
                                              "inference.batch.instance_type": "ml.g5.xlarge"}), acc)
    missing = [f for f in found if f.value is None]
    assert [(f.field, f.level) for f in missing] == [("ml.g5.xlarge for transform job usage", ERROR)]
    assert "does not offer the type here" in missing[0].message


# --- capacity -------------------------------------------------------------------------------------------------------

def test_the_named_capacity_block_is_there_in_the_zone_of_the_type_and_holds_the_nodes(moto):
    found = run("capacity_reservation", HUGE_CB, account("us-east-2", "capacity-block-active"))
    assert [(f.level, f.message) for f in found] == [
        (INFO, "a Capacity Block of 16 x p5.48xlarge in use2-az2 (us-east-2b in this account), active")]


def test_a_reservation_that_does_not_exist_is_an_error(moto):
    found = run("capacity_reservation", HUGE_CB, account("us-east-2", "capacity-reservation-not-found"))
    assert levels(found) == [ERROR] and "no such capacity reservation in us-east-2" in found[0].message


def test_a_reservation_elsewhere_of_another_type_size_and_kind_is_four_errors(moto):
    found = run("capacity_reservation", HUGE_CB, account("us-east-2", "capacity-block-mismatch"))
    assert levels(found) == [ERROR] * 4
    text = " | ".join(f.message for f in found)
    for part in ("is in use2-az3 (us-east-2c in this account); the cluster's zone is use2-az2",
                 "holds p4d.24xlarge; the plan launches p5.48xlarge", "holds 8 instances; the plan launches 16",
                 "it is a capacity reservation; training.capacity_block is true"):
        assert part in text


def test_a_block_still_to_come_is_a_warning(moto):
    found = run("capacity_reservation", HUGE_CB, account("us-east-2", "capacity-block-scheduled"))
    assert levels(found) == [WARNING]
    assert "is scheduled and starts at 2026-12-03 11:30 UTC, in 48 h" in found[0].message


def test_a_block_in_its_last_hours_is_a_warning(moto):
    now = datetime.fromisoformat(load_fixture("capacity-block-ending")["recorded_at"].replace("Z", "+00:00"))
    found = run("capacity_reservation", HUGE_CB, account("us-east-2", "capacity-block-ending", now=now))
    assert levels(found) == [WARNING] and "ends at 2026-12-01 11:30 UTC, in 6 h" in found[0].message


# --- what the stacks read ---------------------------------------------------------------------------------------------

def test_the_served_artifacts_are_in_the_dataset_bucket(moto):
    from workloads.planning.artifacts import artifact_checks

    p = plan(load(*HUGE_CB))
    keys = [c.key for c in artifact_checks(p.training, p.inference)]
    data_stack("us-east-2", "huge-DataStack", *keys)
    found = run("served_artifacts", HUGE_CB, account("us-east-2"))
    assert levels(found) == [INFO] * len(keys) and keys


def test_a_missing_artifact_is_a_warning_with_the_command_that_puts_it_there(moto):
    bucket = data_stack("us-east-2", "huge-DataStack", "models/llm-neuron/config.json")
    found = run("served_artifacts", HUGE_CB, account("us-east-2"))
    assert levels(found) == [INFO, WARNING]
    assert found[1].value == f"s3://{bucket}/models/llm/config.json"
    assert found[1].message.startswith("missing: `cdk deploy InferenceStack` refuses until it is there (async, batch "
                                       "read models/llm/)")
    assert f"aws s3 sync <local export dir> s3://{bucket}/models/llm/" in found[1].message


def test_before_the_data_stack_the_artifacts_wait_for_it(moto):
    found = run("served_artifacts", HUGE_CB, account("us-east-2"))
    assert levels(found) == [INFO] and "stack huge-DataStack is not deployed in us-east-2" in found[0].message


def test_a_team_stage_reads_its_own_data_stack_and_names_its_stage(moto):
    bucket = data_stack("us-east-1", "vision-DataStack")
    found = run("served_artifacts", ("small", None), account("us-east-1", stage="vision"))
    assert levels(found) == [WARNING] and found[0].value.startswith(f"s3://{bucket}/")
    assert "python -m workloads submit small --stage vision" in found[0].message  # a job-trained model


def test_the_cdk_bootstrap_stack_is_there_and_current(moto):
    bootstrap("us-east-2")
    found = run("cdk_bootstrap", HUGE_CB, account("us-east-2"))
    assert [(f.level, f.value) for f in found] == [(INFO, 33)]


def test_no_bootstrap_stack_is_an_error_with_the_command(moto):
    found = run("cdk_bootstrap", HUGE_CB, account("us-east-2"))
    assert levels(found) == [ERROR]
    assert found[0].message == "no CDK bootstrap stack in us-east-2: run cdk bootstrap aws://123456789012/us-east-2"


@pytest.mark.parametrize("version, level", [("5", ERROR), ("21", INFO)])
def test_a_bootstrap_older_than_the_templates_need_is_an_error(moto, version, level):
    bootstrap("us-east-2", version)
    found = run("cdk_bootstrap", HUGE_CB, account("us-east-2"))
    assert levels(found) == [level]


def test_a_bootstrap_stack_without_its_version_output_is_its_own_finding_not_version_0(moto):
    import boto3

    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}
    boto3.client("cloudformation", region_name="us-east-2").create_stack(StackName="CDKToolkit",
                                                                         TemplateBody=json.dumps(template))
    found = run("cdk_bootstrap", HUGE_CB, account("us-east-2"))
    assert [(f.level, f.value) for f in found] == [(ERROR, "CREATE_COMPLETE")]
    assert "no BootstrapVersion output" in found[0].message and "version 0" not in found[0].message


@pytest.mark.parametrize("status, body", [(500, "<!doctype html> <html lang=en> <title>500 Internal Server Error</title>"),
                                          (503, "Service Unavailable")])
def test_a_service_failure_is_one_line_without_the_body_and_does_not_blame_iam(moto, monkeypatch, status, body):
    from botocore.stub import Stubber

    from workloads.commands import preflight as module
    from workloads.commands.preflight import preflight

    monkeypatch.setattr(module, "RULES", [r for r in module.RULES if r.name == "cost_allocation_tags"])
    acc = account("us-east-2")
    stub = Stubber(acc.client("ce"))
    stub.add_client_error("list_cost_allocation_tags", service_error_code="", service_message=body,
                          http_status_code=status)
    stub.activate()
    found = preflight(plan(load(*HUGE_CB)), acc)
    assert [(f.level, f.value) for f in found] == [(WARNING, f"HTTP {status}")]  # a status, never a bare number
    assert found[0].message.startswith(f"not checked: the service failed (HTTP {status}), so this says nothing about "
                                       "the account") and "quota" not in found[0].message
    assert "ce:ListCostAllocationTags" in found[0].message and "<" not in found[0].message


# --- billing and images -----------------------------------------------------------------------------------------------

def test_the_cost_allocation_tags_are_active(moto):
    found = run("cost_allocation_tags", HUGE_CB, account("us-east-2", "cost-tags-active", stage="vision"))
    assert [(f.level, f.value) for f in found] == [(INFO, "workload"), (INFO, "team")]


def test_inactive_or_unseen_tags_are_warnings_saying_where_to_activate_them(moto):
    found = run("cost_allocation_tags", HUGE_CB, account("us-east-2", "cost-tags-inactive", stage="vision"))
    assert [(f.level, f.value) for f in found] == [(WARNING, "workload"), (WARNING, "team")]
    assert "inactive" in found[0].message and "not known to Billing yet" in found[1].message
    assert "management (payer) account" in found[1].message
    assert "aws ce update-cost-allocation-tags-status --cost-allocation-tags-status TagKey=team,Status=Active" in \
        found[1].message
    assert found[1].source.endswith("<https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/custom-tags.html>")


def test_the_pinned_neuron_release_has_its_dlami_in_the_region(moto):
    found = run("neuron_dlami_release", HUGE_TRN2, account("us-east-2"))
    assert [(f.level, f.value) for f in found] == [(INFO, "2.33.0")]
    assert found[0].message.startswith("ami-0b33a1c2d3e4f5a60 (Deep Learning Base Neuron AMI (Ubuntu 24.04) 20261118)")
    found = run("neuron_dlami_release", TRN1_WEST_B, account("us-west-2"))  # the 2.28 line takes 2.28.1
    assert levels(found) == [INFO] and "ami-0a28a1c2d3e4f5a62" in found[0].message


def test_a_pinned_release_no_longer_published_is_an_error_naming_what_is(monkeypatch):
    from moto import mock_aws

    images(monkeypatch, "neuron-dlamis-moved-on")
    with mock_aws():
        found = run("neuron_dlami_release", HUGE_TRN2, account("us-east-2"))
    assert levels(found) == [ERROR]
    assert found[0].message.startswith(
        "no Deep Learning Base Neuron AMI (Ubuntu 24.04)* image of Neuron SDK 2.33.0 owned by amazon in us-east-2; the "
        "region has Deep Learning Base Neuron AMI (Ubuntu 24.04)* images of Neuron 2.34.0, 2.35.0")


def test_plans_without_a_neuron_node_image_have_nothing_to_find(moto):
    assert run("neuron_dlami_release", ("huge", {"training.instance_type": "p5.48xlarge"}), account("us-east-2")) == []


# --- the rules as a whole -----------------------------------------------------------------------------------------

def test_every_rule_names_its_page_and_the_docs_list_every_action_it_calls():
    from workloads.commands.preflight import RULES, required_actions

    for r in RULES:
        assert r.source.endswith(">") and "<https://" in r.source and r.actions, r.name
        assert r.check.__doc__, f"{r.name} says what it checks"
    operations = (ROOT / "docs" / "operations.md").read_text()
    listed = {a for a in required_actions() if f"`{a}`" in operations}
    assert listed == set(required_actions())


def test_the_bootstrap_versions_are_what_the_templates_and_the_pinned_cli_say():
    from workloads.commands.preflight import account_facts

    boot = account_facts()["bootstrap"]
    snapshot = json.loads((ROOT / "tests" / "__snapshots__" / "test_snapshots" /
                           "test_template_snapshot[small-DataStack].json").read_text())
    rule = snapshot["Rules"]["CheckBootstrapVersion"]["Assertions"][0]
    assert rule["AssertDescription"].startswith(f"CDK bootstrap stack version {boot['templates_require']} required")
    assert json.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"] == boot["cli"]
    template = ROOT / "node_modules" / "aws-cdk" / "lib" / "api" / "bootstrap" / "bootstrap-template.yaml"
    if template.exists():  # `make setup` installs the CLI; the version sits in the template's BootstrapVersion output
        text = template.read_text()
        output = text[text.index("\n  BootstrapVersion:"):]
        assert f"Value: '{boot['cli_template']}'" in output.split("\n  ", 2)[1] + output


def test_a_refused_call_leaves_the_rule_unchecked_and_the_others_running(moto):
    from botocore.exceptions import ClientError

    from workloads.commands.preflight import preflight

    acc = account("us-east-2", "quotas-ec2-enough", "quotas-sagemaker-enough", "capacity-block-active",
                  "cost-tags-active")

    def deny(**_):
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not allowed"}},
                          "ListCostAllocationTags")
    acc.client("ce").list_cost_allocation_tags = deny
    found = preflight(plan(load(*HUGE_CB)), acc)
    refused = [f for f in found if f.field == "cost_allocation_tags"]
    assert [(f.level, f.value) for f in refused] == [(WARNING, "AccessDeniedException")]
    assert "the check needs ce:ListCostAllocationTags" in refused[0].message
    assert any(f.field == "availability_zone" for f in found)


# --- the command ----------------------------------------------------------------------------------------------------

def recorded_accounts(monkeypatch, *recorded: str, now: datetime = NOW) -> list:
    """The command's Account, answering from the emulator and `recorded`; the clients it made, for inspection."""
    from workloads.commands import preflight

    made = []

    class Recorded(preflight.Account):
        def __init__(self, region, *, stage=""):
            super().__init__(region, stage=stage, now=now)
            made.append(account(region, *recorded, stage=stage, now=now))
            self._clients = made[-1]._clients

    monkeypatch.setattr(preflight, "Account", Recorded)
    return made


CLEAN = ("quotas-ec2-enough", "quotas-sagemaker-enough", "capacity-block-active", "cost-tags-active")
CB_ARGS = [x for k, v in HUGE_CB[1].items() for x in ("-c", f"{k}={v}")]


def test_a_clean_account_exits_0(moto, monkeypatch, capsys):
    from workloads.commands.cli import main

    bootstrap("us-east-2")
    recorded_accounts(monkeypatch, *CLEAN)
    assert main(["preflight", "huge", *CB_ARGS]) == 0, capsys.readouterr()
    out = capsys.readouterr()
    assert out.err == ""  # no error, no warning
    assert "Preflight for huge in us-east-2: 0 errors, 0 warnings" in out.out


def test_an_error_exits_2_with_one_line_per_error_and_warning(moto, monkeypatch, capsys):
    from workloads.commands.cli import main

    recorded_accounts(monkeypatch, "quotas-ec2-default", "quotas-sagemaker-default", "capacity-block-mismatch",
                      "cost-tags-inactive")
    status = main(["preflight", "huge", *CB_ARGS])
    out = capsys.readouterr()
    assert status == 2 and "Traceback" not in out.err
    lines = out.err.strip().splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    warnings = [line for line in lines if line.startswith("warning: ")]
    assert len(errors) + len(warnings) == len(lines)
    assert len(errors) == 9  # 4 about the reservation, 3 SageMaker quotas, the standard vCPUs, the bootstrap stack
    assert "error: CDKToolkit = None: no CDK bootstrap stack in us-east-2: run cdk bootstrap " \
           "aws://123456789012/us-east-2 (source: AWS CDK v2 Developer Guide, cdk bootstrap " \
           "<https://docs.aws.amazon.com/cdk/v2/guide/ref-cli-cmd-bootstrap.html>)" in lines
    assert [line.split(" = ")[0] for line in warnings] == ["warning: cost allocation tag"]
    assert "errors" in out.out and out.out.count("ERROR") >= 9  # the table holds them too


def test_every_call_the_command_makes_is_one_the_docs_list(moto, monkeypatch, capsys):
    from workloads.commands.cli import main
    from workloads.commands.preflight import required_actions

    from workloads.commands import preflight

    bootstrap("us-east-2")
    recorded_accounts(monkeypatch, *CLEAN)
    called = set()
    original = preflight.Account.client

    def watched(self, service):
        client = original(self, service)
        if not getattr(client, "_watched", False):
            # before-parameter-build fires for every call, recorded or not (the recordings answer at before-call)
            client.meta.events.register("before-parameter-build", lambda model, **_: called.add(
                f"{client.meta.service_model.signing_name}:{model.name}"))
            client._watched = True
        return client
    monkeypatch.setattr(preflight.Account, "client", watched)
    data_stack("us-east-2", "huge-DataStack")
    assert main(["preflight", "huge", *CB_ARGS]) == 0
    main(["preflight", "huge", *[x for k, v in TRN1_WEST_B[1].items() for x in ("-c", f"{k}={v}")]])  # a Neuron image
    actions = {c.replace("s3:HeadObject", "s3:GetObject") for c in called}
    assert actions <= set(required_actions()), actions - set(required_actions())
    assert {"ec2:DescribeAvailabilityZones", "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeImages",
            "ec2:DescribeCapacityReservations", "servicequotas:GetServiceQuota", "servicequotas:ListServiceQuotas",
            "cloudformation:DescribeStacks", "s3:GetObject", "ce:ListCostAllocationTags"} <= actions


def test_a_team_is_checked_as_its_stage(moto, monkeypatch, capsys):
    from workloads.commands.cli import main

    bootstrap("us-west-2")
    made = recorded_accounts(monkeypatch, *CLEAN)
    main(["preflight", "-c", "teams=config/teams.yaml", "-c", "team=language"])
    assert made[0].stage == "language"
    assert "Preflight for team language's" in capsys.readouterr().out


def test_without_credentials_nothing_is_sent():
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull, AWS_EC2_METADATA_DISABLED="true")
    result = subprocess.run([sys.executable, "-m", "workloads", "preflight", "small"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "no AWS credentials were found, so nothing was sent" in result.stderr


def test_plan_never_imports_boto3():
    code = ("import sys; from workloads.commands.cli import main; main(['plan', 'huge']); "
            "assert 'boto3' not in sys.modules and 'botocore' not in sys.modules, 'boto3 on the plan path'")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
