"""Issue 44: images pinned by digest beside the tag, recorded with the date they were read.

`python -m tools.image_digests WORKLOAD` reads each tag's digest (ecr:BatchGetImage) and records it in
workloads/catalog/image_digests.yaml with the date and the reader; synthesis deploys a recorded image as IMAGE@DIGEST
with its tag kept as the model's `image-tag` tag; `plan` and `cdk synth` carry one WARNING naming the images deployed
by tag only and the command (workloads/commands/image_pins.py). The ECR answer is the documented BatchGetImage response
(tests/fixtures/ecr/batch_get_image.json, checked against botocore's model by its Stubber), and moto's ECR and STS for
the command end to end."""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone

import pytest
import yaml

from workloads import load, plan
from workloads.commands import image_pins
from workloads.commands.image_pins import Pin, by_tag_only, pin_finding, pinned, record

from .conftest import ROOT, build_app, cdk_json_context
from .test_image_digests import _publish

NOW = datetime(2026, 11, 28, 6, 0, tzinfo=timezone.utc)
RECORDED = json.loads((ROOT / "tests" / "fixtures" / "ecr" / "batch_get_image.json").read_text())


@pytest.fixture
def record_file(tmp_path, monkeypatch):
    """An empty record with the shipped file's header, in place of the shipped one."""
    path = tmp_path / "image_digests.yaml"
    path.write_text(image_pins.RECORD.read_text())
    monkeypatch.setattr(image_pins, "RECORD", path)
    return path


def test_the_shipped_record_is_well_formed():
    data = yaml.safe_load(image_pins.RECORD.read_text())
    for entry in data["images"]:  # none yet: no public source gives DLC digests, and none was read from ECR here
        assert set(entry) == {"image", "tag", "digest", "read_at", "read_by"}
        assert entry["digest"].startswith("sha256:") and "@" not in entry["image"] and ":" not in entry["image"]



def test_a_recorded_batch_get_image_answer_is_recorded_and_pins_the_image(record_file):
    import boto3
    from botocore.stub import Stubber

    from tools.image_digests import MEDIA_TYPES, image_digests

    image = RECORDED["response"]["images"][0]
    digest = image["imageId"]["imageDigest"]
    assert digest == "sha256:" + hashlib.sha256(image["imageManifest"].encode()).hexdigest()
    uri = "763104351884.dkr.ecr.us-west-2.amazonaws.com/vllm:server-sagemaker-cuda-v2.6"
    ecr = boto3.client("ecr", region_name="us-west-2", aws_access_key_id="x", aws_secret_access_key="x")
    read = []
    with Stubber(ecr) as stub:  # the Stubber refuses a response that is not the model's shape
        stub.add_response("batch_get_image", RECORDED["response"],
                          {**RECORDED["request"], "acceptedMediaTypes": MEDIA_TYPES})
        (found,) = image_digests([uri], ecr, NOW, pins=read)
    assert found.level == "INFO" and digest in found.message
    assert read == [Pin(uri.rsplit(":", 1)[0], "server-sagemaker-cuda-v2.6", digest, "2026-11-28T06:00:00Z", "")]
    assert pinned(uri) == (uri, None) and by_tag_only([uri]) == [uri]
    record([Pin(**{**read[0].__dict__, "read_by": "arn:aws:sts::123456789012:assumed-role/ops/me"})])
    assert pinned(uri) == (f"{uri.rsplit(':', 1)[0]}@{digest}", "server-sagemaker-cuda-v2.6")
    assert by_tag_only([uri]) == []
    text = record_file.read_text()
    assert text.startswith("# Digests of the container images")  # the header stays
    (entry,) = yaml.safe_load(text)["images"]
    assert entry == {"image": uri.rsplit(":", 1)[0], "tag": "server-sagemaker-cuda-v2.6", "digest": digest,
                     "read_at": "2026-11-28T06:00:00Z", "read_by": "arn:aws:sts::123456789012:assumed-role/ops/me"}
    # Read again later: the entry is replaced, not repeated.
    record([Pin(uri.rsplit(":", 1)[0], "server-sagemaker-cuda-v2.6", "sha256:" + "b" * 64, "2026-12-01T00:00:00Z", "x")])
    assert [e["digest"] for e in yaml.safe_load(record_file.read_text())["images"]] == ["sha256:" + "b" * 64]


def test_the_command_reads_and_records_every_image_of_the_plan(record_file, monkeypatch, capsys):
    import boto3
    from moto import mock_aws

    from constructs_lib.images import plan_images
    from tools.image_digests import main

    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    p = plan(load("intermediate"))
    images = list(dict.fromkeys(plan_images(p)))
    finding = pin_finding(p, workload_args="intermediate")
    assert finding.level == "WARNING" and "`python -m tools.image_digests intermediate`" in finding.message
    assert all(uri.rsplit("/", 1)[1] in finding.message for uri in images), finding.message
    with mock_aws():
        session = boto3.session.Session(region_name=p.workload.region)
        digests = {uri: _publish(session.client("ecr", region_name=p.workload.region), uri) for uri in images}
        assert main(["intermediate"], session=session) == 0
    out = capsys.readouterr().out
    assert f"recorded {len(images)} digest(s)" in out
    entries = yaml.safe_load(record_file.read_text())["images"]
    assert {(e["image"] + ":" + e["tag"], e["digest"]) for e in entries} == set(digests.items())
    assert all(e["read_by"].startswith("arn:aws:") and e["read_at"].endswith("Z") for e in entries)
    for uri, digest in digests.items():
        assert pinned(uri) == (f"{uri.rsplit(':', 1)[0]}@{digest}", uri.rsplit(":", 1)[1])
    assert pin_finding(p, workload_args="intermediate") is None  # every image pinned: no warning
    from workloads.commands.jobs import job_images
    assert all("@sha256:" in uri for uri in job_images(p))  # submit and process run them by digest


def test_plan_and_synth_carry_one_warning_naming_the_images_by_tag(record_file, capsys):
    from workloads.commands.cli import main
    from workloads.commands.context import read_context

    assert main(["plan", "intermediate", "--json"]) == 0
    warnings = [w for w in json.loads(capsys.readouterr().out)["warnings"] if w["field"] == "images"]
    assert len(warnings) == 1 and "python -m tools.image_digests intermediate" in warnings[0]["message"]
    target = read_context({**cdk_json_context(), "workload": "intermediate"})
    assert [f.field for f in target.findings].count("images") == 1


def test_synthesis_deploys_a_recorded_image_by_digest_with_its_tag_beside_it(record_file, tmp_path):
    import aws_cdk as cdk

    from constructs_lib.images import plan_images

    p = plan(load("small"))
    served = [u for u in dict.fromkeys(plan_images(p)) if "sklearn" in u or "xgboost" in u or "vllm" in u]
    assert served
    digest = "sha256:" + "c" * 64
    record([Pin(u.rsplit(":", 1)[0], u.rsplit(":", 1)[1], digest, "2026-11-28T06:00:00Z", "test") for u in served])
    app = cdk.App(outdir=str(tmp_path / "out"), context={**cdk_json_context(), "workload": "small"})
    build_app(app)
    template = app.synth().get_stack_by_name(next(s.stack_name for s in app.node.children
                                                   if getattr(s, "stack_name", "").endswith("InferenceStack"))).template
    models = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Model"]
    assert models
    for m in models:
        image = m["PrimaryContainer"]["Image"]
        assert image.endswith("@" + digest), image
        tags = {t["Key"]: t["Value"] for t in m.get("Tags", [])}
        assert f"{image.split('@')[0]}:{tags['image-tag']}" in served
