"""The small estate with all four inference kinds, deployed once to the emulator: invoke each kind, and make
the run-time calls SageMaker makes with the async and batch model roles, with those roles' own assumed-role
credentials, under moto's IAM access control.

moto enforces identity policies on each request (moto/iam/access_control.py), object by object for S3. It
checks SNS and KMS actions against resource "*" only (moto/core/responses.py, call_action), and it knows
nothing of key policies, bucket policies, boundaries or conditions: those calls are evaluated from the
templates in test_runtime_contract.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager

import boto3
import pytest
from botocore.exceptions import ClientError

from tools.emulator import running
from workloads import load, plan
from workloads.planning import layout
from workloads.commands.invoke import invoke
from workloads.commands.jobs import stack_name

from .conftest import ROOT

# Every test here reads the deployed estate: make test-e2e (CI), after make test.
pytestmark = pytest.mark.e2e

OVERRIDES = {"inference.async.max_instances": "2"}


@pytest.fixture(scope="module")
def deployed(synth):
    s = synth("small", OVERRIDES)
    with running("us-east-1") as emu:
        emu.bootstrap(quiet=True)
        emu.deploy_estate("--app", str(s.outdir), plan=plan(load("small", OVERRIDES)), quiet=True)
        yield emu


@pytest.fixture(scope="module")
def serving(deployed):
    with deployed.in_process():
        yield plan(load("small", OVERRIDES))


@pytest.mark.parametrize("kind", ["realtime", "serverless", "async"])
def test_invoke_each_kind_on_the_emulator(serving, kind):
    answer = invoke(serving, kind=kind, body=b'{"x": [1, 2]}', content_type="application/json",
                    timeout_s=20, poll_s=0.2)
    assert answer.kind == kind and answer.body
    if kind == "async":
        assert answer.location and answer.location.startswith("s3://")


def test_invoke_cli(serving):
    result = subprocess.run([sys.executable, "-m", "workloads", "invoke", "small", "-c", "inference.async.max_instances=2",
                             "--kind", "serverless"], cwd=ROOT, capture_output=True, text=True, env=dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("serverless endpoint small-InferenceStack-ServerlessEndpoint")


# ---- the model roles, enforced by the emulator


def _physical(emu, stack: str, prefix: str, rtype: str) -> str:
    rows = emu.client("cloudformation").list_stack_resources(StackName=stack_name("small", stack))["StackResourceSummaries"]
    found = [r["PhysicalResourceId"] for r in rows
             if r["LogicalResourceId"].startswith(prefix) and r["ResourceType"] == rtype]
    assert len(found) == 1, (prefix, found)
    return found[0]


@contextmanager
def _as_role(emu, role_name: str):
    """boto3 clients with the role's assumed-role credentials while moto enforces IAM policies."""
    from moto import settings
    from moto.core.authorization import ActionAuthenticatorMixin

    arn = emu.client("iam").get_role(RoleName=role_name)["Role"]["Arn"]
    creds = emu.client("sts").assume_role(RoleArn=arn, RoleSessionName="SageMaker")["Credentials"]
    session = boto3.Session(aws_access_key_id=creds["AccessKeyId"], aws_secret_access_key=creds["SecretAccessKey"],
                            aws_session_token=creds["SessionToken"], region_name=emu.region)
    saved = settings.INITIAL_NO_AUTH_ACTION_COUNT
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    ActionAuthenticatorMixin.request_count = 0
    try:
        yield lambda service: session.client(service, endpoint_url=emu.endpoint)
    finally:
        settings.INITIAL_NO_AUTH_ACTION_COUNT = saved


def _denied(call) -> bool:
    try:
        call()
    except ClientError as e:
        return e.response["Error"]["Code"] in ("AccessDenied", "AccessDeniedException", "AuthorizationError")
    return False


@pytest.fixture(scope="module")
def estate(deployed):
    emu = deployed
    outputs = {o["OutputKey"]: o["OutputValue"] for o in
               emu.client("cloudformation").describe_stacks(StackName=stack_name("small", "DataStack"))["Stacks"][0]["Outputs"]}
    bucket = outputs["DatasetBucketName"]
    s3 = emu.client("s3")
    for key in (layout.ASYNC_INPUT + "request-1.json", layout.BATCH_INPUT + "day-1.csv",
                layout.DATASETS + "train/part-0000", "models/model.tar.gz"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"{}")
    return emu, bucket


def test_moto_enforces_policies_here(estate):
    """The check is live: a role with no policy is refused what the model roles are allowed."""
    emu, bucket = estate
    iam = emu.client("iam")
    iam.create_role(RoleName="nothing-allowed", AssumeRolePolicyDocument=(
        '{"Statement":[{"Effect":"Allow","Principal":{"Service":"sagemaker.amazonaws.com"},"Action":"sts:AssumeRole"}]}'))
    with _as_role(emu, "nothing-allowed") as client:
        assert _denied(lambda: client("s3").get_object(Bucket=bucket, Key=layout.ASYNC_INPUT + "request-1.json"))


# What SageMaker reads and writes as each model role (async: the queue; batch: the transform job), and
# what the role must not touch.
ROLE_CALLS = {
    "AsyncModelRole": ([layout.ASYNC_INPUT + "request-1.json"],
                       [layout.ASYNC_OUTPUT + "request-1.out", layout.ASYNC_FAILURE + "request-1-error.out"],
                       [("put", "models/model.tar.gz"), ("get", layout.DATASETS + "train/part-0000")]),
    "BatchModelRole": ([layout.BATCH_INPUT + "day-1.csv"], [layout.BATCH_OUTPUT + "day-1.csv.out"],
                       [("put", "models/model.tar.gz"), ("put", layout.ASYNC_OUTPUT + "x.out")]),
}


@pytest.mark.parametrize("prefix", list(ROLE_CALLS))
def test_model_role_does_its_services_work_and_nothing_else(estate, prefix):
    emu, bucket = estate
    reads, writes, refused = ROLE_CALLS[prefix]
    with _as_role(emu, _physical(emu, "InferenceStack", prefix, "AWS::IAM::Role")) as client:
        s3 = client("s3")
        for key in reads:
            s3.get_object(Bucket=bucket, Key=key)
        for key in writes:
            s3.put_object(Bucket=bucket, Key=key, Body=b"{}")
        for verb, key in refused:
            call = (lambda k=key: s3.put_object(Bucket=bucket, Key=k, Body=b"x")) if verb == "put" else \
                (lambda k=key: s3.get_object(Bucket=bucket, Key=k))
            assert _denied(call), f"{prefix} may {verb} {key}"
