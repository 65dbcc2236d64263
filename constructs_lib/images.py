"""SageMaker serving container images, resolved offline with the sagemaker SDK's image_uris.

Which container serves what is the planner's decision (workloads/planning/contracts.py); this module only
turns it into an image URI with the arguments recorded there, and with the published tag where the
SDK builds another (vLLM on Neuron: the SDK's 0.4.4 tag is not the one AWS publishes; scikit-learn: the SDK's
1.9-0-cpu-py3 is not among the tags AWS lists). Imported only by the CDK side: the planner never loads the (large)
sagemaker package. The SDK's answers are remembered per SDK version (workloads/commands/image_cache.py);
`python -m constructs_lib.images` (run by `make setup`) writes those of every shipped workload.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from workloads.commands import image_cache
from workloads.planning.contracts import CONTAINERS

if TYPE_CHECKING:
    from workloads.planning.planner import Plan

# Frameworks whose image depends on the instance type (CPU, GPU or Neuron build).
_BY_INSTANCE = ("ray-serve", "tensorflow")
SERVERLESS_IMAGE_TYPE = "ml.m5.large"  # serverless runs on CPU: the CPU build


@cache
def serving_image(*, container: str, region: str, instance_type: str | None) -> str:
    args = dict(CONTAINERS[container].image)
    if args["framework"] in _BY_INSTANCE:
        args["instance_type"] = instance_type or SERVERLESS_IMAGE_TYPE
    return image_cache.with_tag(image_cache.retrieve(region=region, **args), CONTAINERS[container].tag)


def shipped_plans() -> list[Plan]:
    """The plans of every shipped workload: the presets, examples/workloads and config/teams.yaml's teams."""
    from workloads.config.loader import load, preset_names
    from workloads.planning.planner import plan
    from workloads.planning.teams import load_teams

    root = Path(__file__).resolve().parent.parent
    plans = [plan(load(name)) for name in preset_names()]
    plans += [plan(load(str(path))) for path in sorted((root / "examples" / "workloads").glob("*.yaml"))]
    return plans + [t.plan for t in load_teams(str(root / "config" / "teams.yaml"))]


def plan_images(p: Plan) -> list[str]:
    """Every image a synthesis of plan `p` asks for: its serving images and its SageMaker jobs' images."""
    from workloads.commands.jobs import job_images

    return [*(serving_image(container=ip.serving.container, region=p.workload.region, instance_type=ip.instance_type)
              for ip in p.inference.values() if ip.serving is not None), *job_images(p)]


def warm() -> int:
    """Write down the images of every shipped workload (`make setup`); the SDK is imported only if one is new."""
    asked = sum(len(plan_images(p)) for p in shipped_plans())
    image_cache.save()
    return asked


if __name__ == "__main__":
    print(f"container images written down: {warm()} asked")
