"""Which host AMI a serving container's GPU build runs on (catalog/hosts.yaml). Pure Python, no CDK.

An image built for CUDA major version M starts only on a host whose NVIDIA driver is at least NVIDIA's minimum for M
(CUDA 13 needs 580, CUDA 12 525). SageMaker fixes the driver by the host AMI: an endpoint variant's
InferenceAmiVersion, a transform job's TransformAmiVersion (470 or 535 only: no CUDA 13 image runs in batch
transform). SageMaker's default host AMI documents no driver, so every GPU endpoint and transform job names one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from ..errors import WARNING, Finding
from ..packaged import read_packaged_yaml


@cache
def host_facts() -> dict:
    return read_packaged_yaml(Path(__file__).parent.parent / "catalog" / "hosts.yaml")


@dataclass(frozen=True)
class Host:
    """A serving host's image: its AMI version and the NVIDIA driver major it carries."""
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


DRAIN_SOURCE = ("SageMaker Developer Guide, Asynchronous inference <https://docs.aws.amazon.com/sagemaker/latest/dg/"
                "async-inference.html>; SageMaker Runtime API Reference, InvokeEndpointAsync (InputLocation: one "
                "request object); Step Functions Developer Guide, Distributed Map and ItemReader (s3:listObjectsV2), AWS "
                "SDK service integrations; DLC data (catalog/hosts.yaml): every supported LLM server image (vLLM v2.x, "
                "SGLang, LMI 25+) is CUDA 13.0; SageMaker Processing (ProcessingClusterConfig) offers no host AMI choice "
                "and documents no driver")


def drain_route(inference: dict) -> dict:
    """The batch plan's route where no transform host runs its GPU image but the async endpoint's host does: the
    scheduled run sends each object under the batch prefix to the async endpoint (InvokeEndpointAsync), which scales
    from zero on the backlog. Returns `inference` with the batch's serving plan marked (drain "async")."""
    batch, queue = inference.get("batch"), inference.get("async")
    if batch is None or batch.serving is None or not batch.serving.host_problem or queue is None \
            or queue.serving is None or queue.serving.container != batch.serving.container:
        return inference
    ami = queue.serving.inference_ami_version
    driver = driver_of(ami) if ami else None
    if driver is None or not runs_on(queue.serving.container, driver):
        return inference
    return {**inference, "batch": replace(batch, serving=replace(batch.serving, drain="async"),
                                          batch_run=_drained_run(batch.batch_run, queue))}


def _drained_run(run, queue):
    """The scheduled run as the async endpoint serves it: the same records at its instances' rate, on as many as it
    scales out to on the backlog (max_instances), at its price; the start-up stays the model's download and load."""
    if run is None or not queue.max_instances or not queue.requests_per_second_per_instance:
        return run
    n, rps = queue.max_instances, queue.requests_per_second_per_instance
    hourly = queue.usd_per_hour_max / n
    hours = run.records / (rps * n) / 3600
    usd = (hours + run.startup_s / 3600) * hourly * n
    basis = (f"drained through the async endpoint: {run.records:,} records at {rps:.3g} requests/s on up to {n} x "
             f"{queue.instance_type} (scaled out on the backlog): {hours * 3600:,.0f} s plus {run.startup_s:.0f} s "
             f"start-up at ${hourly:g}/h each (SageMaker on-demand); {run.runs_per_month:.1f} runs a month")
    return replace(run, hours=round(hours, 3), usd=round(usd, 4), basis=basis)


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in str(v).split("."))


def neuron_driver(ami: str) -> str | None:
    """The Neuron driver of a Neuron InferenceAmiVersion (None: not one recorded here)."""
    fact = host_facts()["neuron_inference_amis"].get(ami)
    return str(fact["driver"]) if fact else None


def neuron_refusal(container: str, ami: str | None) -> str:
    """Why the Neuron image cannot start on this host AMI ('' where no stated floor refuses it): its runtime library
    needs a newer driver than the AMI's, by a floor a Neuron release note states."""
    image = host_facts()["neuron_images"][container]
    driver = neuron_driver(ami) if ami else None
    if driver is None:
        return f"InferenceAmiVersion {ami}: no Neuron driver is documented for it"
    for floor in host_facts()["neuron_runtime_floors"]:
        if _version(image["runtime_lib"])[:2] >= _version(floor["runtime_lib"]) and \
                _version(driver)[:2] <= _version(floor["driver_above"]):
            return (f"Neuron runtime library {image['runtime_lib']} needs a driver newer than {floor['driver_above']}; "
                    f"{ami} has {driver} [{floor['source']}]")
    return ""


def neuron_untested(container: str, ami: str) -> str:
    """Why the pair is one Neuron did not test ('' where the host's driver is at least the image SDK's own)."""
    image = host_facts()["neuron_images"][container]
    driver = neuron_driver(ami)
    if driver is None or _version(driver) >= _version(image["sdk_driver"]):
        return ""
    published = host_facts()["neuron_published_pairs"]
    shown = f"; the published deployments of this image name this AMI [{', '.join(published['sources'])}]" \
        if published["ami"] == ami else ""
    return (f"an untested Neuron host: the host AMI {ami} has Neuron driver {driver}, older than the {image['sdk_driver']} the image's Neuron SDK "
            f"{image['sdk']} ships with its runtime library {image['runtime_lib']}. Neuron keeps the driver backwards "
            f"compatible with older runtimes, and a newer runtime may need a newer driver; no release note states a "
            f"floor above {driver} for runtime {image['runtime_lib']}{shown}. SageMaker offers no newer Neuron host "
            "AMI: deploy once and look in the container's log for \"is not compatible with the installed "
            "aws-neuron-dkms package\"")


def host_findings(inference: dict) -> tuple[Finding, ...]:
    """A WARNING for each kind whose container no host here runs (today: an LLM's GPU batch transform on the CUDA 13
    vLLM DLC), saying the route taken: the async endpoint drains the batch prefix where the workload has one (its
    host AMI's driver runs the image), else nothing starts and the plan says how to get one."""
    out = []
    for kind, ip in inference.items():
        if ip.serving and ip.serving.container in host_facts()["neuron_images"] and ip.serving.inference_ami_version \
                and (untested := neuron_untested(ip.serving.container, ip.serving.inference_ami_version)):
            sources = host_facts()["sources"]
            out.append(Finding(WARNING, f"inference.{kind}.instance_type", ip.instance_type, untested,
                               source="; ".join(f"{sources[k]['title']} <{sources[k]['url']}>"
                                                for k in ("neuron-driver-compat", "neuron-runtime-rn"))))
        problem = ip.serving.host_problem if ip.serving else ""
        if not problem:
            continue
        if ip.serving.drain == "async":
            queue = inference["async"]
            message = (f"no transform job: {problem}. The scheduled run drains the batch prefix through the async "
                       f"endpoint instead ({queue.instance_type}, {queue.serving.inference_ami_version}, driver "
                       f"{driver_of(queue.serving.inference_ami_version)}): a Step Functions Distributed Map lists "
                       "batch/input/ and sends each object to InvokeEndpointAsync as one request (one JSON document "
                       "an object, not JSON Lines); outputs land under the async endpoint's output prefix, named in "
                       f"each response's OutputLocation, and {kind}.instance_type is not used. Chosen over a CUDA 12 "
                       "image (none of AWS's LLM server images in support is CUDA 12) and a Processing job (no host "
                       "AMI choice, no documented driver)")
        else:
            message = (f"the scheduled transform job cannot start: {problem}. AWS's CUDA 12 builds of the vLLM DLC "
                       "(v1.0-v1.4, CUDA 12.9.1) are past support (AWS supports only the latest vLLM release; every "
                       "build since v2.0 is CUDA 13.0). Add inference.async: the batch prefix is then drained through "
                       "the async endpoint, whose hosts run driver 580")
        out.append(Finding(
            WARNING, f"inference.{kind}.instance_type", ip.instance_type, message,
            source="NVIDIA CUDA Compatibility, Minor Version Compatibility "
                   "<https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html>; SageMaker "
                   "API Reference, TransformResources <https://docs.aws.amazon.com/sagemaker/latest/APIReference/"
                   "API_TransformResources.html>; " + DRAIN_SOURCE))
    return tuple(out)
