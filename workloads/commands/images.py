"""The container images a plan's deploy pulls: SageMaker serving images, resolved with the sagemaker SDK's image_uris
(through image_cache, which remembers its answers), and the SageMaker jobs' images (jobs.job_images).

Which container serves what is the planner's decision (workloads/planning/contracts.py); this module only turns it
into an image URI with the arguments recorded there, and with the published tag where the SDK builds another (vLLM on
Neuron: the SDK's 0.4.4 tag is not the one AWS publishes; scikit-learn: the SDK's 1.9-0-cpu-py3 is not among the tags
AWS lists). The SDK is imported only for a question not answered before, and never within image_cache.offline().
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from ..planning.contracts import CONTAINERS
from . import image_cache

if TYPE_CHECKING:
    from ..planning.planner import Plan

# Frameworks whose image depends on the instance type (CPU, GPU or Neuron build).
_BY_INSTANCE = ("ray-serve", "tensorflow")
SERVERLESS_IMAGE_TYPE = "ml.m5.large"  # serverless runs on CPU: the CPU build


@cache
def serving_image(*, container: str, region: str, instance_type: str | None) -> str:
    args = dict(CONTAINERS[container].image)
    if args["framework"] in _BY_INSTANCE:
        args["instance_type"] = instance_type or SERVERLESS_IMAGE_TYPE
    return image_cache.with_tag(image_cache.retrieve(region=region, **args), CONTAINERS[container].tag)


def plan_images(p: Plan) -> list[str]:
    """Every image a synthesis of plan `p` asks for, by tag: its serving images and its SageMaker jobs' images."""
    from .jobs import job_tags

    return [*(serving_image(container=ip.serving.container, region=p.workload.region, instance_type=ip.instance_type)
              for ip in p.inference.values() if ip.serving is not None), *job_tags(p)]
