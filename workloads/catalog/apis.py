"""Which instance types each SageMaker serving API accepts, by inference kind: a view of sagemaker_apis (the enums of
botocore's service model, one table for every API).

The planner never offers a type its API refuses: CreateTransformJob takes TransformInstanceType only (no p4d, no p5),
endpoint configs ProductionVariantInstanceType.
"""

from __future__ import annotations

from dataclasses import dataclass

from .sagemaker_apis import APIS, INFERENCE_API, load_sagemaker_apis


@dataclass(frozen=True)
class ServingApi:
    """A SageMaker serving API's instance-type enum and the catalog types it lists."""
    shape: str  # the enum's shape in botocore's SageMaker model
    api: str  # what takes it
    types: frozenset[str]  # the catalog's EC2 names the enum lists


def serving_api(kind: str) -> ServingApi:
    shape = INFERENCE_API[kind]
    return ServingApi(shape, APIS[shape], load_sagemaker_apis().types[shape])


def accepts(kind: str, name: str) -> bool:
    """Whether the kind's API takes the type (`name` with or without the ml. prefix)."""
    return load_sagemaker_apis().takes(INFERENCE_API[kind], name)
