"""Properties of the plan's prices, over every variant the suite builds and each orchestrator a preset can take:
a managed-spot saving is quoted only where managed spot exists (SageMaker training jobs), and every instance price is
the plan's region's, or says that it is another region's."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from workloads import load, plan
from workloads.catalog import load_catalog
from workloads.errors import ConfigError
from workloads.report import print_plan

from .conftest import PRESETS, VARIANTS

ORCHESTRATORS = ("slurm", "hyperpod", "sagemaker-jobs")


def _configs() -> dict[str, tuple[str, dict]]:
    """Every variant, and every preset under every orchestrator that plans it (a refused one is no plan)."""
    out = {name: (w, o or {}) for name, (w, o) in VARIANTS.items()}
    for preset in PRESETS:
        for orchestrator in ORCHESTRATORS:
            out[f"{preset}@{orchestrator}"] = (preset, {"training.orchestrator": orchestrator})
    out["intermediate-spot"] = ("intermediate", {"training.spot": "true"})
    return {name: config for name, config in out.items() if _plans(*config)}


def _plans(workload: str, overrides: dict) -> bool:
    try:
        plan(load(workload, overrides))
    except ConfigError:
        return False
    return True


CONFIGS = _configs()


def _plan(name: str):
    return plan(load(*CONFIGS[name]))


def _rendered(p) -> str:
    out = io.StringIO()
    print_plan(p, Console(file=out, width=400, color_system=None))
    return out.getvalue()


def _strings(value) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_managed_spot_saving_is_quoted_only_for_sagemaker_training_jobs(name):
    """Managed spot is a SageMaker training-job feature: a Slurm (PCS) or HyperPod plan quotes no spot total and
    names no spot saving anywhere (the printed plan, its JSON); a training-job plan quotes both."""
    p = _plan(name)
    t = p.training
    text = _rendered(p)
    said = [s for s in _strings(json.loads(json.dumps(p.to_dict(), default=str))) if "spot" in s.lower()]
    if t.orchestrator == "sagemaker-jobs":
        assert t.estimate.spot_usd_total is not None and 0 < t.estimate.spot_usd_total < t.estimate.usd_total
        assert "managed spot about" in text and said
    else:
        assert t.estimate.spot_usd_total is None, t.orchestrator
        assert "spot" not in text.lower() and not said, (t.orchestrator, said)


def test_the_grid_covers_every_orchestrator():
    assert {_plan(name).training.orchestrator for name in CONFIGS} == set(ORCHESTRATORS)
