"""Container image URIs without importing sagemaker.core on every synthesis (workloads/commands/image_cache.py), while the SDK
stays the source of truth: every remembered answer is the SDK's own, and another SDK version is never trusted."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from constructs_lib import images
from workloads.commands import image_cache

from .conftest import ROOT


@pytest.fixture(scope="module")
def warmed() -> dict[str, str]:
    """What `make setup` writes (constructs_lib.images.warm), read back."""
    images.warm()
    return json.loads(image_cache._path().read_text())


def test_shipped_workloads_resolve_their_images_without_the_sdk(warmed):
    """After `make setup`, what a synthesis of any shipped workload asks (its serving and job images) is answered
    without importing sagemaker.core, the 1.3 s of a `cdk synth` that only these URIs needed."""
    code = ("import sys; from constructs_lib import images\n"
            "found = [u for p in images.shipped_plans() for u in images.plan_images(p)]\n"
            "print(json.dumps({'found': len(found), 'sdk': sorted(m for m in sys.modules if m.startswith('sagemaker.'))}))")
    out = subprocess.run([sys.executable, "-c", "import json\n" + code], cwd=ROOT, check=True, capture_output=True,
                         text=True).stdout
    result = json.loads(out)
    assert result["found"] > 0
    assert result["sdk"] == [], result["sdk"][:5]


def test_every_remembered_image_is_the_sdks_answer(warmed):
    from sagemaker.core import image_uris

    assert warmed
    wrong = {key: uri for key, uri in warmed.items() if image_uris.retrieve(**json.loads(key)) != uri}
    assert not wrong, wrong


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(image_cache, "_FOLDER", tmp_path)
    monkeypatch.setattr(image_cache, "_known", None)
    return tmp_path


# What the XGBoost training job and endpoint resolve (workloads/planning/contracts.py CONTAINERS).
ARGS = dict(framework="xgboost", version="3.2-0", region="us-east-1")


def test_an_answer_for_another_sdk_version_is_not_trusted(empty_cache, monkeypatch):
    from sagemaker.core import image_uris

    truth = image_uris.retrieve(**ARGS)
    key = json.dumps(ARGS, sort_keys=True)
    (empty_cache / f"image_uris.{image_cache._DISTRIBUTION}-0.0.1.json").write_text(json.dumps({key: "stale"}))
    assert image_cache.retrieve(**ARGS) == truth
    # The same file under this version's name is trusted: the version is the key.
    image_cache._path().write_text(json.dumps({key: "remembered"}))
    monkeypatch.setattr(image_cache, "_known", None)
    assert image_cache.retrieve(**ARGS) == "remembered"


def test_a_damaged_file_asks_the_sdk_and_is_written_again(empty_cache):
    from sagemaker.core import image_uris

    image_cache._path().write_text("{not json")
    assert image_cache.retrieve(**ARGS) == image_uris.retrieve(**ARGS)
    image_cache.save()
    assert json.loads(image_cache._path().read_text()) == {json.dumps(ARGS, sort_keys=True): image_uris.retrieve(**ARGS)}


def test_the_version_key_is_the_installed_sdks():
    """The cache's key reads sagemaker-core's version from its .dist-info folder's name, without importing
    importlib.metadata (12 ms of a plan): the same answer importlib.metadata gives."""
    from importlib.metadata import version

    assert image_cache.installed_version() == version(image_cache._DISTRIBUTION)
