"""SageMaker container images, resolved offline with the sagemaker SDK's image_uris.

Imported only by the CDK side: the planner never loads the (large) sagemaker package.
"""

from __future__ import annotations

from functools import cache

from workloads.catalog import InstanceType

# Framework versions the serving containers use (sagemaker image_uri_config, SDK 3.27).
_SERVING = {
    "pytorch": dict(framework="pytorch", version="2.6", py_version="py312"),
    "tensorflow": dict(framework="tensorflow", version="2.20"),
    "xgboost": dict(framework="xgboost", version="1.7-1"),
    "scikit-learn": dict(framework="sklearn", version="1.2-1", py_version="py3"),
}
# Inferentia2 serves through the Neuron (neuronx) text-generation container.
_NEURON_SERVING = dict(framework="huggingface-llm-neuronx", version="0.3.0")


@cache
def serving_image(*, framework: str, region: str, instance_type: str, accelerator_kind: str | None) -> str:
    from sagemaker.core import image_uris  # heavy import, deferred to synthesis

    if accelerator_kind == "inferentia":
        return image_uris.retrieve(region=region, **_NEURON_SERVING)
    args = dict(_SERVING[framework])
    if framework in ("pytorch", "tensorflow"):
        args.update(instance_type=instance_type, image_scope="inference")
    return image_uris.retrieve(region=region, **args)


def serving_image_for(itype: InstanceType, *, framework: str, region: str) -> str:
    kind = itype.accelerator.kind if itype.accelerator else None
    return serving_image(framework=framework, region=region, instance_type="ml." + itype.name, accelerator_kind=kind)
