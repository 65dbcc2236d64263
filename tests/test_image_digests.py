"""Issue 44: model images are referenced by tag; AWS publishes no digest for them (the catalog says so), so the digest
each tag names is read from the registry before a deploy (tools/image_digests.py), against moto's ECR."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone

import pytest
import yaml

from workloads import load, plan

from .conftest import ROOT

NOW = datetime(2026, 11, 28, 6, 0, tzinfo=timezone.utc)
MANIFEST = {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": 1, "digest": "sha256:" + "0" * 64},
            "layers": []}


@pytest.fixture
def ecr(monkeypatch):
    import boto3
    from moto import mock_aws

    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        yield boto3.client("ecr", region_name="us-west-2")


def _publish(ecr, uri: str) -> str:
    """The image at `uri` in the emulated registry (moto serves every registry ID from one account): its digest."""
    repository, tag = uri.split("/", 1)[1].rsplit(":", 1)
    try:
        ecr.create_repository(repositoryName=repository)
    except ecr.exceptions.RepositoryAlreadyExistsException:
        pass
    return ecr.put_image(repositoryName=repository, imageManifest=json.dumps(MANIFEST),
                         imageTag=tag)["image"]["imageId"]["imageDigest"]


def test_each_pulled_tag_is_reported_with_its_digest_and_a_missing_one_is_an_error(ecr):
    from constructs_lib.images import plan_images
    from tools.image_digests import image_digests

    images = list(dict.fromkeys(plan_images(plan(load("intermediate")))))
    assert len(images) >= 2 and all(":" in i.rsplit("/", 1)[1] for i in images)  # tags, not digests
    published = {uri: _publish(ecr, uri) for uri in images[1:]}
    found = {f.value: f for f in image_digests(images, ecr, NOW)}
    assert len(found) == len(images)
    for uri, digest in published.items():
        f = found[uri.split("/", 1)[1]]
        assert f.level == "INFO" and f.message == (
            f"{uri} is {digest} (read 2026-11-28 06:00 UTC); pin it as {uri.rsplit(':', 1)[0]}@{digest} to deploy "
            "exactly this image"), f.message
    missing = found[images[0].split("/", 1)[1]]
    assert missing.level == "ERROR" and "RepositoryNotFound" in missing.message, missing.message
    _publish(ecr, images[0].rsplit(":", 1)[0] + ":another-tag")  # the repository, without the tag
    again, = [f for f in image_digests(images[:1], ecr, NOW)]
    assert again.level == "ERROR" and "ImageNotFound" in again.message, again.message
    # A URI already by digest, or not in ECR, is left as it is.
    assert image_digests([f"{images[1].rsplit(':', 1)[0]}@sha256:{'a' * 64}", "public.example/x:1"], ecr, NOW) == []


def test_the_catalog_records_that_digests_are_resolved_at_deploy_time():
    digests = yaml.safe_load((ROOT / "workloads" / "catalog" / "serving_images.yaml").read_text())["digests"]
    assert digests["published"] is False and digests["resolved_at"] == "deploy" and digests["checked"]
    module = digests["command"].split()[-1]
    assert (ROOT / (module.replace(".", "/") + ".py")).exists()
