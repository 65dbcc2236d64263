"""Which instance types each SageMaker serving API accepts (serving_apis.yaml: the enums of botocore's service model).

The planner never offers a type its API refuses: CreateTransformJob takes TransformInstanceType only (no p4d, no p5),
endpoint configs ProductionVariantInstanceType.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from . import ML_PREFIX, _load_yaml


@dataclass(frozen=True)
class ServingApi:
    shape: str  # the enum's shape in botocore's SageMaker model
    api: str  # the call that takes it
    types: frozenset[str]  # ml. names


def api_key(kind: str) -> str:
    """Batch transform jobs take TransformInstanceType; real-time and async endpoints ProductionVariantInstanceType."""
    return "batch" if kind == "batch" else "endpoint"


@cache
def load_serving_apis() -> dict[str, ServingApi]:
    data = _load_yaml("serving_apis.yaml")
    return {k: ServingApi(v["shape"], v["api"], frozenset(v["types"])) for k, v in data["apis"].items()}


def serving_api(kind: str) -> ServingApi:
    return load_serving_apis()[api_key(kind)]


def accepts(kind: str, name: str) -> bool:
    """Whether the kind's API takes the type (`name` with or without the ml. prefix)."""
    return ML_PREFIX + name.removeprefix(ML_PREFIX) in serving_api(kind).types
