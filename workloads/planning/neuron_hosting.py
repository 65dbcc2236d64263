"""How a vLLM-on-Neuron endpoint variant is hosted: its host AMI, start-up health check timeout and ML volume, from
the published SageMaker deployments of that container (catalog/neuron_serving.yaml `sagemaker`). Pure Python.

The generic rule (startup.py: the weights' bytes at assumed rates) gives a 70B model 560 s to become healthy; the
published deployment of a 70B on Inferentia2 allows 3600 s ("It takes around 30 minutes for deployment"): Neuron
loads the compiled graphs onto every core and warms them up. So the Neuron variant's start-up timeout and volume scale
with the weights from the published deployment, never below the value every model gets in optimum-neuron's own
deployment script, within the API's range. The host AMI is the Neuron one both deployments name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from ..packaged import read_packaged_yaml

NEURON_SERVING = Path(__file__).parent.parent / "catalog" / "neuron_serving.yaml"


@cache
def facts() -> dict:
    return read_packaged_yaml(NEURON_SERVING)


@dataclass(frozen=True)
class Deployment:
    """Neuron hosting settings for a model size: startup timeout and volume, with their source."""
    parameters_billion: float | None  # None: what every model gets
    startup_timeout_s: int
    volume_gb: int
    source: str


def deployments() -> tuple[Deployment, ...]:
    return tuple(Deployment(d["parameters_billion"], int(d["startup_timeout_s"]), int(d["volume_gb"]), d["source"])
                 for d in facts()["sagemaker"]["deployments"])


def inference_ami() -> str:
    """InferenceAmiVersion of Inferentia2 and Trainium endpoint variants (the Neuron driver)."""
    return facts()["sagemaker"]["inference_ami"]


def _scaled(parameters_billion: float, field: str, limits: tuple[int, int]) -> tuple[int, str]:
    """The published value in proportion to the weights (the sized deployment), at least the floor every model gets,
    within the API's limits; and the sources it rests on."""
    sized = [d for d in deployments() if d.parameters_billion]
    floor = max((getattr(d, field) for d in deployments() if not d.parameters_billion), default=limits[0])
    wanted = max([floor] + [math.ceil(getattr(d, field) * parameters_billion / d.parameters_billion) for d in sized])
    return min(max(wanted, limits[0]), limits[1]), ", ".join(d.source for d in deployments())


def neuron_startup(startup, parameters_billion: float, *, timeout_range: tuple[int, int],
                   volume_range: tuple[int, int]):
    """`startup` (startup.Startup, from the generic rule) with the Neuron variant's published start-up timeout and
    volume, where they are larger. The download timeout stays the bytes' rule: it is S3 to the volume, as anywhere."""
    timeout, sources = _scaled(parameters_billion, "startup_timeout_s", timeout_range)
    volume, _ = _scaled(parameters_billion, "volume_gb", volume_range)
    timeout = max(timeout, startup.startup_timeout_s)
    volume = max(volume, startup.volume_gb or 0)
    basis = (f"{startup.basis}; vLLM on Neuron: healthy within {timeout} s and a {volume} GB volume, the published "
             f"deployments' figures in proportion to the weights, at least what every model gets, within the API's "
             f"limits [{sources}]")
    return replace(startup, startup_timeout_s=timeout, volume_gb=volume, basis=basis)


def published_batch(parameters_billion: float, instance: str) -> tuple[int, str]:
    """The most requests a vLLM-on-Neuron endpoint compiles for: the largest batch published for the nearest published
    model at least this large (the largest published model's above them all), on this instance where one is
    published; and why. NxD Inference compiles the batch into every graph, so a batch nobody published is a
    compilation and a memory layout nobody has shown to work."""
    shapes = facts()["sagemaker"]["published_shapes"]
    here = [s for s in shapes if s["instance"] == instance] or shapes
    larger = [s for s in here if s["parameters_billion"] >= parameters_billion]
    shape = min(larger, key=lambda s: s["parameters_billion"]) if larger else \
        max(here, key=lambda s: s["parameters_billion"])
    batch = max(shape["batch_sizes"])
    return batch, (f"{batch}, the largest batch published for a {shape['parameters_billion']:g}B model on "
                   f"{shape['instance']} at TP {shape['tensor_parallel']} [{shape['source']}]")
