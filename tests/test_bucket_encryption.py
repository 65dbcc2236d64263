"""Issue 44: the estate's KMS-encrypted buckets (datasets, HyperPod's scripts) take objects only under their own key:
an upload that names SSE-S3, DSSE or another KMS key is refused, whoever sends it; every writer the run-time contract
knows (SageMaker jobs, transform and async as the model's role, FSx's export, the nodes) still writes, with no
encryption header (the bucket's default applies its key) or naming the key, as SageMaker does with OutputKmsKey.
Evaluated with the IAM evaluator (contract_policy) against the synthesized bucket policy."""

from __future__ import annotations

import dataclasses

import pytest

from .conftest import VARIANTS
from .contract_calls import purpose, walk
from .contract_policy import PARTITION, evaluate
from .test_runtime_contract import world_of

HEADER, KEY_ID = "s3:x-amz-server-side-encryption", "s3:x-amz-server-side-encryption-aws-kms-key-id"


def _writers(world, bucket: str):
    """(principal, call) for every PutObject into `bucket` a role makes by its purpose or its resources' rows."""
    found = [(f.principal, f.call) for f in walk(world).found if not f.denied]
    found += [(c.principal, call) for c in purpose(world) for call in c.allowed]
    return [(p, c) for p, c in found if c.action == "s3:PutObject" and c.resource.startswith(bucket + "/")]


@pytest.mark.parametrize("variant", ["huge", "intermediate", "huge-hyperpod", "small-all-kinds"])
def test_writers_write_with_the_buckets_key_and_not_with_another(synth, variant):
    world = world_of(synth(*VARIANTS[variant]))
    buckets = [(world.arn(path, "AWS::S3::Bucket"), world.arn(key, "AWS::KMS::Key"))
               for path, key in (("DataStack/Datasets/Dataset/Resource", "DataStack/DataKey/Key/Resource"),)]
    other_key = f"arn:{PARTITION}:kms:us-east-1:999999999999:key/00000000-0000-0000-0000-000000000000"
    checked = 0
    for bucket, key in buckets:
        writers = _writers(world, bucket)
        assert writers, f"{variant}: no writer of {bucket} found"
        for principal, call in writers:
            def with_(**headers):
                return dataclasses.replace(call, context={**call.context, **headers})
            for ok in (call, with_(**{HEADER: "aws:kms"}), with_(**{HEADER: "aws:kms", KEY_ID: key})):
                decision = evaluate(principal, ok, world)
                assert decision.allowed, (principal.arn, ok.resource, ok.context, decision.reason)
            for refused in (with_(**{HEADER: "AES256"}), with_(**{HEADER: "aws:kms:dsse", KEY_ID: key}),
                            with_(**{HEADER: "aws:kms", KEY_ID: other_key})):
                decision = evaluate(principal, refused, world)
                assert not decision.allowed and "explicit deny in the resource policy" in decision.reason, (
                    principal.arn, refused.context, decision.reason)
            checked += 1
    assert checked


def test_the_access_log_bucket_stays_sse_s3(synth):
    """S3 delivers server access logs only to an SSE-S3 bucket: no key condition there."""
    s = synth("huge")
    policies = s.resources("DataStack", "AWS::S3::BucketPolicy")
    logs = [p for p in policies.values() if "AccessLogs" in str(p["Properties"]["Bucket"])]
    assert logs and not any("x-amz-server-side-encryption" in str(p) for p in logs)
    data = [p for p in policies.values() if "AccessLogs" not in str(p["Properties"]["Bucket"])]
    assert data and all("x-amz-server-side-encryption-aws-kms-key-id" in str(p) for p in data)
