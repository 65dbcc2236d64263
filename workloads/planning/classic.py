"""Classic ML (XGBoost, scikit-learn) training: which CPU types are candidates.

Every CPU type of the catalog is a candidate for both frameworks unless a sourced reason excludes it: a family listed
in catalog/classic.yaml (burstable T3), or a SageMaker job on a type SageMaker does not train on (botocore's sagemaker
service model, TrainingInstanceType). The ranking (cheapest per hour that holds the data) picks among them, so a team
limited to c5 trains on c5. Pure Python: botocore's model is read as data, never a client.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..catalog import ML_PREFIX, Catalog
from ..packaged import read_packaged_yaml


@dataclass(frozen=True)
class Exclusion:
    family: str
    why: str
    source: str  # "title <url>, checked date"


@cache
def exclusions() -> dict[str, Exclusion]:
    data = read_packaged_yaml(Path(__file__).parent.parent / "catalog" / "classic.yaml")
    sources = data["sources"]
    out = {}
    for family, e in data["excluded_families"].items():
        src = sources[e["source"]]  # a KeyError here is a catalog error: every exclusion names a recorded source
        out[family] = Exclusion(family, e["why"], f"{src['title']} <{src['url']}>, checked {src['checked']}")
    return out


@cache
def sagemaker_training_types() -> frozenset[str]:
    """ml. types a SageMaker training job takes: the TrainingInstanceType enum of botocore's sagemaker model."""
    import botocore.loaders

    model = botocore.loaders.Loader().load_service_model("sagemaker", "service-2")
    return frozenset(model["shapes"]["TrainingInstanceType"]["enum"])


def candidates(cat: Catalog, orchestrator: str) -> tuple[list[str], list[str]]:
    """(CPU types to cost, `name: why not` for the CPU types a sourced reason excludes), smallest first by family."""
    names, skipped = [], []
    cpu = sorted((t for t in cat.types.values() if t.accelerator is None), key=lambda t: (t.family, t.vcpus))
    for t in cpu:
        if (e := exclusions().get(t.family)) is not None:
            skipped.append(f"{t.name}: {e.why} [{e.source}]")
        elif orchestrator == "sagemaker-jobs" and ML_PREFIX + t.name not in sagemaker_training_types():
            skipped.append(f"{t.name}: not a SageMaker training instance type (botocore sagemaker "
                           "TrainingInstanceType)")
        else:
            names.append(t.name)
    return names, skipped
