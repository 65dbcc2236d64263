"""The InferenceStack refuses to deploy, in seconds and in one line, when a model artifact it serves is missing.

Read from the templates: every SageMaker model waits for the check, the check looks for exactly what the models read
(the proof object of each: workloads.planning.contracts.proof_key), and its role may read exactly those objects. The handler is
called directly, and run by the emulator during a real `cdk deploy` of the small preset: refused without the artifact,
deployed once it is uploaded.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from constructs_lib.endpoints.artifact_check_handler import RESOURCE_TYPE, handler, missing
from tools.emulator import running
from workloads import load, plan
from workloads.planning.artifacts import artifact_checks
from workloads.commands.cli import _parser
from workloads.commands.jobs import stack_name
from workloads.planning.contracts import proof_key

from .conftest import VARIANTS

INFERENCE = "InferenceStack"


def _key_after_bucket(value) -> tuple[object, str]:
    """(bucket reference, key) of `s3://<bucket>/<key>` or `<bucket ARN>/<key>`, as CDK joins them."""
    parts = value["Fn::Join"][1]
    assert isinstance(parts[-1], str) and parts[-1].startswith("/"), value
    return parts[-2], parts[-1].removeprefix("/")


def _model_reads(model: dict) -> tuple[object, str]:
    container = model["Properties"]["PrimaryContainer"]
    url = container.get("ModelDataUrl") or container["ModelDataSource"]["S3DataSource"]["S3Uri"]
    return _key_after_bucket(url)


def test_every_model_waits_for_a_check_of_exactly_what_it_reads(variant_synth):
    name, s = variant_synth
    if INFERENCE not in s.templates:
        pytest.skip(f"{name} serves nothing")
    checks = s.resources(INFERENCE, RESOURCE_TYPE)
    assert len(checks) == 1, f"{name}: one check per stack, found {sorted(checks)}"
    (check_id, check), = checks.items()
    props = check["Properties"]
    models = s.resources(INFERENCE, "AWS::SageMaker::Model")
    assert models
    read = set()
    for model_id, model in models.items():
        assert check_id in model.get("DependsOn", []), f"{name}: {model_id} does not wait for the artifact check"
        bucket, key = _model_reads(model)
        assert bucket == props["Bucket"], f"{name}: {model_id} reads another bucket than the check looks in"
        read.add(key)
    assert {a["Artifact"] for a in props["Artifacts"]} == read, name
    assert [a["Key"] for a in props["Artifacts"]] == [proof_key(a["Artifact"]) for a in props["Artifacts"]]
    # The check's role: s3:GetObject on exactly the checked objects, and no other S3 or KMS action.
    role = check["DependsOn"][0]
    statements = s.templates[INFERENCE]["Resources"][role]["Properties"]["PolicyDocument"]["Statement"]
    storage = [st for st in statements if any(a.startswith(("s3:", "kms:")) for a in _list(st["Action"]))]
    assert len(storage) == 1 and _list(storage[0]["Action"]) == ["s3:GetObject"], storage
    assert sorted(_key_after_bucket(r)[1] for r in _list(storage[0]["Resource"])) == \
        sorted(a["Key"] for a in props["Artifacts"])


def _list(value) -> list:
    return value if isinstance(value, list) else [value]


def test_the_checks_follow_the_plan():
    """Kinds sharing an artifact share its check; the line names the trainer's export where the plan trains it."""
    huge = plan(load("huge"))
    checks = {c.artifact: c for c in artifact_checks(huge.training, huge.inference)}
    assert set(checks) == {ip.serving.artifact_key for ip in huge.inference.values() if ip.serving}
    trained = checks["models/llm/"]
    assert trained.key == "models/llm/config.json" and "train.py exports /fsx/output/llm" in trained.put
    assert "aws s3 sync <local export dir> s3://{bucket}/models/llm/" in trained.put
    small = plan(load("small"))
    (one,) = artifact_checks(small.training, small.inference, workload="small --stage vision")
    assert one.kinds == tuple(small.inference) and one.key == "models/model.tar.gz"
    # A SageMaker training job's model gets there by the two commands that exist for it; both parse as written.
    commands = re.findall(r"python -m workloads ([a-z]+ [^,;(]+?)(?:,| \(|;|$)", one.put)
    assert [c.split()[0] for c in commands] == ["submit", "promote"], one.put
    for command in commands:
        _parser().parse_args(command.replace("<training job>", "small-train-1").split())


# ---- the handler, called directly


ARTIFACTS = [{"Key": "models/llm/config.json", "Artifact": "models/llm/",
              "Put": "aws s3 sync <local export dir> s3://data-bucket/models/llm/"},
             {"Key": "models/model.tar.gz", "Artifact": "models/model.tar.gz",
              "Put": "aws s3 cp <local model.tar.gz> s3://data-bucket/models/model.tar.gz"}]


@pytest.fixture
def s3():
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="data-bucket")
        client.put_object(Bucket="data-bucket", Key="models/model.tar.gz", Body=b"archive")
        yield client


def test_a_missing_key_is_one_line_with_the_command(s3):
    reason = missing(s3, "data-bucket", ARTIFACTS)
    assert "\n" not in reason
    assert "s3://data-bucket/models/llm/config.json is missing: " \
           "aws s3 sync <local export dir> s3://data-bucket/models/llm/" in reason
    assert "model.tar.gz" not in reason  # that one is there
    s3.put_object(Bucket="data-bucket", Key="models/llm/config.json", Body=b"{}")
    assert missing(s3, "data-bucket", ARTIFACTS) is None


def test_without_list_bucket_an_absent_key_is_missing_too():
    """HeadObject answers 403 for an absent key when the caller lacks s3:ListBucket, as the check's role does."""
    class Forbidden:
        def head_object(self, **_):
            raise ClientError({"Error": {"Code": "403", "Message": "Forbidden"}}, "HeadObject")

    assert "s3://b/models/model.tar.gz is missing: aws s3 cp" in missing(Forbidden(), "b", ARTIFACTS[1:])


class _Replies(BaseHTTPRequestHandler):
    got: list = []

    def do_PUT(self):  # noqa: N802 (http.server's name)
        self.got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def _event(request: str, port: int) -> dict:
    return {"RequestType": request, "ResponseURL": f"http://localhost:{port}/reply", "StackId": "stack",
            "RequestId": "r1", "LogicalResourceId": "ArtifactCheck", "ResourceType": RESOURCE_TYPE,
            "ResourceProperties": {"Bucket": "data-bucket", "Artifacts": ARTIFACTS}}


def test_the_lambda_replies_failed_on_create_and_success_on_delete(s3):
    server = HTTPServer(("localhost", 0), _Replies)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Replies.got = []
    try:
        handler(_event("Create", server.server_port), None)
        handler(_event("Delete", server.server_port), None)  # deletes nothing, checks nothing
    finally:
        server.shutdown()
    created, deleted = _Replies.got
    assert created["Status"] == "FAILED" and "models/llm/config.json is missing" in created["Reason"]
    assert "\n" not in created["Reason"] and created["PhysicalResourceId"] == "ArtifactCheck"
    assert deleted["Status"] == "SUCCESS"


# ---- in the emulator: a real `cdk deploy`


@pytest.mark.e2e  # an emulator deploy: make test-e2e (CI)
def test_the_emulator_refuses_the_inference_stack_until_the_artifact_is_uploaded(synth):
    s = synth("small")
    (check,) = artifact_checks(plan(load("small")).training, plan(load("small")).inference)
    with running("us-east-1") as emu:
        emu.bootstrap(quiet=True)
        # Its dependencies (JobLogs, Network, Data) deploy first, as `cdk deploy InferenceStack` does on AWS.
        started = time.perf_counter()
        with pytest.raises(subprocess.CalledProcessError) as refused:
            emu.deploy("--app", str(s.outdir), stacks=(INFERENCE,), quiet=True)
        print(f"InferenceStack refused after {time.perf_counter() - started:.1f} s (with its dependencies)")
        said = refused.value.stdout + refused.value.stderr
        assert f"/{check.key} is missing: " in said, said
        cf = emu.client("cloudformation")
        assert cf.describe_stacks(StackName=stack_name("small", INFERENCE))["Stacks"][0]["StackStatus"] == \
            "ROLLBACK_COMPLETE"
        assert not cf.describe_stack_resources(StackName=stack_name("small", INFERENCE))["StackResources"]
        # The failed create left nothing (issue 31): its log groups went with the rollback (RetainExceptOnCreate), and
        # the endpoints' groups, kept even then, wait for their configs, which wait for the check.
        groups = [g["logGroupName"] for g in emu.client("logs").describe_log_groups()["logGroups"]]
        assert groups and not [g for g in groups if INFERENCE in g], groups
        outputs = cf.describe_stacks(StackName=stack_name("small", "DataStack"))["Stacks"][0]["Outputs"]
        bucket = next(o["OutputValue"] for o in outputs if o["OutputKey"] == "DatasetBucketName")
        emu.client("s3").put_object(Bucket=bucket, Key=check.key, Body=b"placeholder")
        emu.deploy("--app", str(s.outdir), stacks=(INFERENCE,), quiet=True)
        status = cf.describe_stacks(StackName=stack_name("small", INFERENCE))["Stacks"][0]["StackStatus"]
        assert status == "CREATE_COMPLETE"
