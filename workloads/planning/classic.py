"""Classic ML (XGBoost, scikit-learn) training: which CPU types are candidates.

Every CPU type of the catalog is a candidate for both frameworks unless a sourced reason excludes it: a family listed
in catalog/classic.yaml (burstable T3). The orchestrator's SageMaker API then skips the types its enum leaves out, as
for every candidate (training._eligible, catalog/sagemaker_apis.py). The ranking (cheapest per hour that holds the
data) picks among them, so a team limited to c5 trains on c5. Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..catalog import Catalog
from ..packaged import read_packaged_yaml


@dataclass(frozen=True)
class Exclusion:
    """An instance family classic ML is not planned on, why, and the source that says so."""
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


def candidates(cat: Catalog) -> tuple[list[str], list[str]]:
    """(CPU types to cost, `name: why not` for the CPU types a sourced reason excludes), smallest first by family."""
    names, skipped = [], []
    cpu = sorted((t for t in cat.types.values() if t.accelerator is None), key=lambda t: (t.family, t.vcpus))
    for t in cpu:
        if (e := exclusions().get(t.family)) is not None:
            skipped.append(f"{t.name}: {e.why} [{e.source}]")
        else:
            names.append(t.name)
    return names, skipped
