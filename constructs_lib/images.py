"""SageMaker serving container images, resolved offline with the sagemaker SDK's image_uris.

Which container serves what is the planner's decision (workloads/serving.py); this module only
turns it into an image URI with the arguments recorded there (for TGI on Neuron, inference_tool
"neuronx": the published tags are `-neuronx-`, and without it image_uris builds an `-inf2-` tag
that no registry holds). Imported only by the CDK side: the planner never loads the (large)
sagemaker package.
"""

from __future__ import annotations

from functools import cache

from workloads.serving import CONTAINERS

# Frameworks whose image depends on the instance type (CPU, GPU or Neuron build).
_BY_INSTANCE = ("pytorch", "tensorflow", "huggingface-llm", "huggingface-llm-neuronx")
SERVERLESS_IMAGE_TYPE = "ml.m5.large"  # serverless runs on CPU: the CPU build


@cache
def serving_image(*, container: str, region: str, instance_type: str | None) -> str:
    from sagemaker.core import image_uris  # heavy import, deferred to synthesis

    args = dict(CONTAINERS[container].image)
    if args["framework"] in _BY_INSTANCE:
        args["instance_type"] = instance_type or SERVERLESS_IMAGE_TYPE
    return image_uris.retrieve(region=region, **args)
