"""Issue 40: every SageMaker instance type the catalog offers for an API is a member of that API's enum in the pinned
botocore model, and a refusal that SageMaker does not take a type comes from that model (catalog/sagemaker_apis.py).

The enums are read here from botocore's own service-2.json, not from the generated file the planner reads: the file is
checked against them separately."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

import botocore
import pytest

from tools.gen_sagemaker_apis import MODEL, render
from workloads import ConfigError, load, plan
from workloads.catalog import ML_PREFIX, load_catalog
from workloads.catalog.sagemaker_apis import APIS, DATA, INFERENCE_API, ORCHESTRATOR_API
from workloads.planning.training import TRAINING_CANDIDATES

CAT = load_catalog()


@cache
def enum(api: str) -> frozenset[str]:
    shapes = json.loads(gzip.open(Path(botocore.__file__).parent.parent / MODEL).read())["shapes"]
    return frozenset(shapes[api]["enum"])


def test_the_generated_file_is_what_botocore_says():
    assert DATA.read_text() == render(), "run python -m tools.gen_sagemaker_apis"


def test_every_api_shape_is_an_instance_type_enum_of_the_model():
    for api in APIS:
        assert enum(api) and all(v.startswith(ML_PREFIX) for v in enum(api)), api


# One workload per training tier: the candidates the planner ranks for it on each SageMaker orchestrator.
TIER_WORKLOADS = {
    "large-dl": ("huge", {}),
    "medium-dl": ("intermediate", {}),
    "small-dl": ("small", {"model.framework": "pytorch", "model.parameters_billion": 0.1}),
    "xgboost": ("small", {}),
    "scikit-learn": ("small", {"model.framework": "scikit-learn"}),
}


@pytest.mark.parametrize("orchestrator", sorted(ORCHESTRATOR_API))
@pytest.mark.parametrize("tier", sorted(TIER_WORKLOADS))
def test_training_candidates_on_sagemaker_are_members_of_the_orchestrators_enum(tier, orchestrator):
    from workloads.planning.training import _candidates, tier_of

    preset, overrides = TIER_WORKLOADS[tier]
    w = load(preset, {**overrides, "training.orchestrator": orchestrator, "training.instance_count": None,
                      "training.spot": False, "data.shared_home": False})
    assert tier_of(w) == tier
    flops = None if tier in ("xgboost", "scikit-learn") else 1e21
    cands, skipped = _candidates(w, CAT, tier, orchestrator, flops)
    api = ORCHESTRATOR_API[orchestrator]
    outside = [c.instance_type for c in cands if ML_PREFIX + c.instance_type not in enum(api)]
    assert not outside, f"{orchestrator} ranks types its {api} does not list"
    # Every catalog type of the tier that the enum leaves out is skipped with the model's word for it.
    from workloads.planning import classic

    names = classic.candidates(CAT)[0] if tier in ("xgboost", "scikit-learn") else TRAINING_CANDIDATES[tier]
    for name in names:
        if ML_PREFIX + name not in enum(api):
            assert any(s.startswith(f"{name}: SageMaker's {api} enum") for s in skipped), (name, skipped)


@pytest.mark.parametrize("orchestrator", sorted(ORCHESTRATOR_API))
def test_a_sagemaker_orchestrator_refuses_exactly_the_types_its_enum_leaves_out(orchestrator):
    # Over the whole catalog: the refusal and the model agree, and the refusal names the model.
    api = ORCHESTRATOR_API[orchestrator]
    from workloads.config.validators import orchestrator_supports_type

    for name in CAT.types:
        w = load("small", {"training.orchestrator": orchestrator})
        w = w.model_copy(update={"training": w.training.model_copy(update={"instance_type": name})})
        try:
            orchestrator_supports_type(w, CAT)
            refused = ""
        except ConfigError as exc:
            refused = str(exc)
        assert bool(refused) == (ML_PREFIX + name not in enum(api)), (name, refused)
        if refused:
            assert f"SageMaker's {api} enum" in refused and "botocore" in refused


def test_hyperpod_takes_trn2_as_its_enum_does():
    assert ML_PREFIX + "trn2.48xlarge" in enum("ClusterInstanceType")
    w = load("huge", {"training.orchestrator": "hyperpod", "training.instance_type": "trn2.48xlarge"})
    from workloads.config.validators import orchestrator_supports_type

    orchestrator_supports_type(w, CAT)  # no "SageMaker does not offer ml.trn2.48xlarge"


SERVING_WORKLOADS = [("small", {}), ("intermediate", {}), ("huge", {}),
                     ("small", {"model.framework": "pytorch", "model.parameters_billion": 0.1})]


def _serving_rows(kind: str) -> set[str]:
    rows = set()
    for preset, overrides in SERVING_WORKLOADS:
        try:
            p = plan(load(preset, overrides))
        except ConfigError:
            continue
        ip = p.inference.get(kind)
        if ip is not None:
            rows |= {c.instance_type for c in ip.candidates} | ({ip.instance_type} if ip.instance_type else set())
    return rows


@pytest.mark.parametrize("kind", ["realtime", "async", "batch"])
def test_serving_candidates_are_members_of_their_apis_enum(kind):
    rows = _serving_rows(kind)
    assert rows
    api = INFERENCE_API[kind]
    assert not sorted(r for r in rows if r not in enum(api)), f"{kind} ranks types {api} does not list"


@pytest.mark.parametrize("kind", sorted(INFERENCE_API))
def test_an_inference_type_outside_its_enum_is_refused_in_the_models_words(kind):
    api = INFERENCE_API[kind]
    outside = sorted(n for n, t in CAT.types.items() if t.on_sagemaker and ML_PREFIX + n not in enum(api))
    assert outside
    with pytest.raises(ConfigError, match=f"SageMaker's {api} enum .* does not list ml.{outside[0]}"):
        load("huge", {f"inference.{kind}.instance_type": ML_PREFIX + outside[0]})


def test_the_default_notebook_is_a_notebook_instance_type():
    from workloads.config.schema import Notebook

    assert Notebook().instance_type in enum("InstanceType")
def test_training_plan_rows_are_members_of_the_reserved_capacity_enum():
    # Every type the planner offers on a SageMaker training plan (capacity rows of the candidates table).
    from workloads.planning.capacity import TRAINING_PLAN

    w = load("huge", {"training.orchestrator": "hyperpod"})
    rows = [c for c in plan(w).training.candidates if c.price_kind == TRAINING_PLAN]
    assert rows
    assert all(ML_PREFIX + c.instance_type in enum("ReservedCapacityInstanceType") for c in rows)


