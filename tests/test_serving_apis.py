"""Every instance type the planner can emit for a serving API is in that API's enum in the pinned botocore model
(issue 41). Before: `huge`'s nightly batch was ml.p4d.24xlarge, which TransformInstanceType does not list, so every
scheduled CreateTransformJob failed with a ValidationException.

The expectation is read from botocore's SageMaker service model in .venv, not from the catalog's copy."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from functools import cache

import pytest

from workloads import ConfigError, load, plan
from workloads.catalog import load_catalog
from workloads.catalog.apis import serving_api
from workloads.planning import serving
from workloads.planning.fleet import eligible

from .conftest import ROOT
from .test_serving_fleet import _unseen

SHAPES = {"batch": "TransformInstanceType", "endpoint": "ProductionVariantInstanceType"}
# Every kind with an instance type, and the API its type goes to.
KINDS = {"realtime": "endpoint", "async": "endpoint", "batch": "batch"}
EXAMPLES = sorted(str(p) for p in (ROOT / "examples" / "workloads").glob("*.yaml"))


@cache
def _enum(shape: str) -> frozenset[str]:
    import botocore.loaders

    model = botocore.loaders.Loader().load_service_model("sagemaker", "service-2")
    return frozenset(model["shapes"][shape]["enum"])


def test_the_serving_view_is_the_pinned_botocore_model():
    """Each kind's accepted types are exactly the catalog's types its enum lists (sagemaker_apis.yaml, generated)."""
    names = set(load_catalog().types)
    for kind, key in KINDS.items():
        api = serving_api(kind)
        assert api.shape == SHAPES[key], kind
        assert api.types == {n for n in names if "ml." + n in _enum(api.shape)}, kind


def test_transform_jobs_take_no_p4d_or_p5_in_the_pinned_model():
    """The fact the planner rests on, as botocore states it."""
    assert not {t for t in _enum("TransformInstanceType") if t.startswith(("ml.p4d.", "ml.p5."))}
    assert "ml.p4d.24xlarge" in _enum("ProductionVariantInstanceType")


CANDIDATE_LISTS = (serving.INFERENTIA + serving.GPU_SERVING + serving.CPU_SERVING + serving.CPU_MODEL_SERVING)


@pytest.mark.parametrize("kind", list(KINDS))
def test_no_type_outside_its_api_is_ever_a_candidate(kind):
    """Over every type the planner compares, for every kind: one its API refuses is never eligible."""
    w = load("intermediate", {"model.parameters_billion": "0.11", "model.attention_heads": "null",
                              "inference.artifact": "{format: framework-archive}"})
    enum = _enum(SHAPES[KINDS[kind]])
    refused = [n for n in CANDIDATE_LISTS if "ml." + n not in enum]
    assert kind != "batch" or refused  # the rule has cases to hold: p4d and p5 for batch
    for name in refused:
        assert eligible(kind, name, w, load_catalog(), None) is None, (kind, name)


def _plans():
    for preset in ("small", "intermediate", "huge"):
        yield preset, plan(load(preset))
    for path in EXAMPLES:
        yield path, plan(load(path))
    for seed in range(12):
        try:
            yield f"unseen {seed}", plan(load("intermediate", _unseen(seed)))
        except ConfigError:
            continue


def test_every_serving_candidate_and_choice_is_in_its_apis_enum():
    seen = 0
    for name, p in _plans():
        for kind, ip in p.inference.items():
            if kind == "serverless":
                continue
            enum = _enum(SHAPES[KINDS[kind]])
            for c in ip.candidates:
                assert c.instance_type in enum, (name, kind, c.instance_type)
                seen += 1
            assert ip.instance_type in enum, (name, kind, ip.instance_type)
    assert seen > 100


def test_huges_nightly_batch_runs_on_a_transform_type():
    b = plan(load("huge")).inference["batch"]
    assert b.instance_type in _enum("TransformInstanceType") and not b.instance_type.startswith(("ml.p4d", "ml.p5"))


@pytest.mark.parametrize("kind, itype", [("batch", "ml.p4d.24xlarge"), ("batch", "ml.p5.48xlarge")])
def test_a_type_its_api_refuses_is_one_line_and_exit_2(kind, itype):
    out = subprocess.run([sys.executable, "-m", "workloads", "plan", "huge", f"-cinference.{kind}.instance_type={itype}"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    line, = out.stderr.strip().splitlines()
    assert f"inference.{kind}.instance_type" in line and itype in line and "TransformInstanceType" in line
    assert "TransformInstanceType enum" in line


TRANSFORM_TYPE = re.compile(r'TransformResources\\*"\s*:\s*\{[^}]*?InstanceType\\*"\s*:\s*\\*"(ml\.[a-z0-9.-]+)')


@pytest.mark.parametrize("workload", ["small", "intermediate", "huge", *EXAMPLES])
def test_no_synthesized_endpoint_or_transform_type_is_outside_its_api(synth, workload):
    """The issue's check on `cdk synth` of every preset and example: endpoint configs' variants and the transform
    jobs the state machines start."""
    s = synth(workload)
    endpoints = [v["InstanceType"] for r in s.resources("InferenceStack", "AWS::SageMaker::EndpointConfig").values()
                 for v in r["Properties"]["ProductionVariants"] if "InstanceType" in v]
    machines = s.resources("InferenceStack", "AWS::StepFunctions::StateMachine").values()
    transforms = [t for r in machines for t in TRANSFORM_TYPE.findall(json.dumps(r["Properties"]))]
    assert endpoints or transforms, workload
    assert all(t in _enum("ProductionVariantInstanceType") for t in endpoints), endpoints
    assert all(t in _enum("TransformInstanceType") for t in transforms), transforms
    batch = plan(load(workload)).inference.get("batch")
    # The pattern finds the transform job where the plan has one (a batch drained through the async endpoint has none).
    assert (batch is None or batch.serving.drain == "async") == (not transforms)
