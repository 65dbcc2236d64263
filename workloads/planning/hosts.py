"""Which host AMI a serving container's GPU build runs on (catalog/hosts.yaml). Pure Python, no CDK.

An image built for CUDA major version M starts only on a host whose NVIDIA driver is at least NVIDIA's minimum for M
(CUDA 13 needs 580, CUDA 12 525). SageMaker fixes the driver by the host AMI: an endpoint variant's
InferenceAmiVersion, a transform job's TransformAmiVersion (470 or 535 only: no CUDA 13 image runs in batch
transform). SageMaker's default host AMI documents no driver, so every GPU endpoint and transform job names one.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..errors import WARNING, Finding
from ..packaged import read_packaged_yaml


@cache
def host_facts() -> dict:
    return read_packaged_yaml(Path(__file__).parent.parent / "catalog" / "hosts.yaml")


@dataclass(frozen=True)
class Host:
    ami: str
    driver: int


def image_cuda(container: str) -> str | None:
    """The CUDA version of the container's GPU build (None: it has none)."""
    image = host_facts()["images"].get(container)
    return str(image["cuda"]) if image else None


def min_driver(cuda: str) -> int:
    """NVIDIA's minimum driver for a CUDA version (minor version compatibility inside its major release)."""
    return int(host_facts()["cuda_min_driver"][int(cuda.split(".")[0])])


def runs_on(container: str, driver: int) -> bool:
    cuda = image_cuda(container)
    return cuda is not None and driver >= min_driver(cuda)


def _hosts(table: str) -> list[Host]:
    return [Host(name, int(fact["driver"])) for name, fact in host_facts()[table].items()]


def endpoint_host(container: str) -> Host | None:
    """The InferenceAmiVersion for the container's GPU build: the one its documentation names where that driver runs
    the image, else the newest driver that does. None: the container has no GPU build recorded."""
    fits = [h for h in _hosts("inference_amis") if runs_on(container, h.driver)]
    if not fits:
        return None
    documented = host_facts()["documented_amis"].get(container, {}).get("ami")
    return next((h for h in fits if h.ami == documented), max(fits, key=lambda h: h.driver))


def transform_host(container: str) -> Host | None:
    """The TransformAmiVersion whose driver runs the container's GPU build (the newest), or None: none does."""
    fits = [h for h in _hosts("transform_amis") if runs_on(container, h.driver)]
    return max(fits, key=lambda h: h.driver) if fits else None


def driver_of(ami: str) -> int | None:
    """The NVIDIA driver of an InferenceAmiVersion or TransformAmiVersion (None: not a GPU AMI recorded here)."""
    for table in ("inference_amis", "transform_amis"):
        if ami in host_facts()[table]:
            return int(host_facts()[table][ami]["driver"])
    return None


def no_transform_host(container: str, title: str) -> str:
    """Why a GPU transform job cannot run the container: the reason a plan states."""
    cuda = image_cuda(container)
    drivers = "/".join(str(h.driver) for h in _hosts("transform_amis"))
    return (f"the {title} GPU build is CUDA {cuda}, which needs NVIDIA driver {min_driver(cuda)} or newer; batch "
            f"transform hosts (TransformAmiVersion) offer drivers {drivers} only")


def host_findings(inference: dict) -> tuple[Finding, ...]:
    """A WARNING for each kind whose container no host here runs (today: an LLM's GPU batch transform on the CUDA 13
    vLLM DLC). The way an expert takes instead is stated; the plan does not pretend the nightly job starts."""
    out = []
    for kind, ip in inference.items():
        problem = ip.serving.host_problem if ip.serving else ""
        if problem:
            out.append(Finding(
                WARNING, f"inference.{kind}.instance_type", ip.instance_type,
                f"the scheduled transform job cannot start: {problem}. AWS's CUDA 12 builds of the vLLM DLC (v1.0-v1.4, "
                "CUDA 12.9.1) are past support (AWS supports only the latest vLLM release; every build since v2.0 is "
                "CUDA 13.0). Send the batch's requests to the async endpoint instead (inference.async: its hosts run "
                "driver 580)",
                source="NVIDIA CUDA Compatibility, Minor Version Compatibility "
                       "<https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html>; SageMaker "
                       "API Reference, TransformResources <https://docs.aws.amazon.com/sagemaker/latest/APIReference/"
                       "API_TransformResources.html>"))
    return tuple(out)
