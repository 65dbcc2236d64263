"""The container images a plan's deploy pulls: SageMaker serving images, resolved with the sagemaker SDK's image_uris
(through image_cache, which remembers its answers), and the SageMaker jobs' images by tag (job_tags; jobs.job_images
pins them).

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

# Framework containers for training, resolved offline by sagemaker.core.image_uris (SDK 3.27, the newest on PyPI):
# PyTorch 2.10 is the newest training image its table holds (pytorch.json, training versions).
TRAINING_IMAGES = {
    "pytorch": dict(framework="pytorch", version="2.10", py_version="py313"),
    "tensorflow": dict(framework="tensorflow", version="2.21", py_version="py312"),
    # The serving images themselves: a booster or joblib model loads in the XGBoost or scikit-learn it was saved
    # with, so training, processing and serving move together (workloads/planning/contracts.py CONTAINERS).
    "xgboost": dict(CONTAINERS["xgboost"].image),
    "scikit-learn": dict(CONTAINERS["sklearn"].image),
}
PROCESSING_IMAGE = TRAINING_IMAGES["scikit-learn"]
# The tags AWS publishes where the SDK builds another: the serving containers' own pins.
PUBLISHED_TAGS = {"xgboost": CONTAINERS["xgboost"].tag, "scikit-learn": CONTAINERS["sklearn"].tag}
# The SDK's table writes tensorflow-training's short tag as `2.21-gpu-py312`, but the Deep Learning Containers publish
# the SageMaker build of 2.21 as `2.21-gpu-py312-sagemaker` (and -cpu-; aws/deep-learning-containers
# docs/src/data/tensorflow-training/2.21-gpu-sagemaker.yml, read 2026-11-23; tests/sources/published_images).
TAG_SUFFIX = {"tensorflow": "-sagemaker"}


@cache
def serving_image(*, container: str, region: str, instance_type: str | None) -> str:
    args = dict(CONTAINERS[container].image)
    if args["framework"] in _BY_INSTANCE:
        args["instance_type"] = instance_type or SERVERLESS_IMAGE_TYPE
    return image_cache.with_tag(image_cache.retrieve(region=region, **args), CONTAINERS[container].tag)


def plan_images(p: Plan) -> list[str]:
    """Every image a synthesis of plan `p` asks for, by tag: its serving images and its SageMaker jobs' images."""
    return [*(serving_image(container=ip.serving.container, region=p.workload.region, instance_type=ip.instance_type)
              for ip in p.inference.values() if ip.serving is not None), *job_tags(p)]


def training_image(plan: Plan) -> str:
    region, t = plan.workload.region, plan.training
    # Trainium never gets here: the planner refuses SageMaker jobs on it (no TorchNeuron training image is known).
    args = dict(TRAINING_IMAGES[plan.workload.model.framework])
    if plan.workload.model.framework in ("pytorch", "tensorflow"):
        args.update(instance_type=t.sagemaker_instance_type)
    uri = image_cache.retrieve(region=region, image_scope="training", **args) + \
        TAG_SUFFIX.get(plan.workload.model.framework, "")
    return image_cache.with_tag(uri, PUBLISHED_TAGS.get(plan.workload.model.framework))


def processing_image(region: str) -> str:
    """The scikit-learn container `process` runs; it lives in another registry account than the training images."""
    return image_cache.with_tag(image_cache.retrieve(region=region, image_scope="training", **PROCESSING_IMAGE),
                                PUBLISHED_TAGS["scikit-learn"])


def job_tags(plan: Plan) -> tuple[str, ...]:
    """The images of job_images by their tags."""
    if plan.training.orchestrator != "sagemaker-jobs":
        return ()
    return training_image(plan), processing_image(plan.workload.region)
