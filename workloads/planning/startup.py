"""How long an endpoint instance may take to fetch and load its model, and the ML storage volume it needs.

SageMaker rolls an endpoint back when the model download or the container's first healthy ping takes longer
than its timeouts, so a large model needs them sized from its bytes. Pure Python: the stacks only wire the result.

Limits (SageMaker API Reference, ProductionVariant; the same ranges are in botocore's sagemaker service model):
- ModelDataDownloadTimeoutInSeconds and ContainerStartupHealthCheckTimeoutInSeconds: 60-3600.
- VolumeSizeInGB: 1-512, "Currently only Amazon EBS gp2 storage volumes are supported"; an instance with NVMe
  instance storage gets no EBS gp2 ML volume ("When using an ML instance with NVMe SSD volumes, SageMaker AI
  doesn't provision Amazon EBS gp2 storage", SageMaker Developer Guide, "Managing storage paths for different
  types of instance local storage"), so the volume is sized only for types without local NVMe (catalog local_nvme).
- Without a timeout, the container must pass health checks "during the 4 minutes after startup" (SageMaker
  Developer Guide, "Use Your Own Inference Code with Hosting Services", "How Your Container Should Respond to
  Health Check (Ping) Requests"): the timeouts never go below that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..catalog import InstanceType
from ..errors import ConfigError
from . import estimates as est
from .neuron_hosting import neuron_startup

TIMEOUT_RANGE_S = (60, 3600)
VOLUME_RANGE_GB = (1, 512)
DEFAULT_HEALTH_CHECK_S = 240
# Assumptions (no published per-instance figure found): S3 to the instance's ML volume at 0.2 GB/s (1.6 Gbit/s,
# well under any serving type's network); volume to accelerator or host memory, with the server's warm-up, at
# 0.5 GB/s; extracting a model.tar.gz at that rate too. Each estimate is doubled, so a slow start still fits.
DOWNLOAD_GB_PER_S = 0.2
LOAD_GB_PER_S = 0.5
MARGIN = 2.0
VOLUME_HEADROOM_GB = 10  # assumption: logs, /tmp and the server's own files beside the model
# vLLM's V1 engine compiles the model with torch.compile (on by default) and captures CUDA graphs before its server
# answers a ping; a fresh SageMaker instance has no compilation cache, so every instance and copy pays it ("torch.compile
# integration", https://docs.vllm.ai/en/latest/design/torch_compile/: copying the cache saves "a great amount of
# compilation time"). No published duration: 300 s assumed, before the margin (an outside review found the 240 s
# default too tight for tensor parallel 8 and for FP8 weights quantized at load).
VLLM_ENGINE_WARMUP_S = 300


@dataclass(frozen=True)
class Startup:
    """An endpoint's model download and startup timeouts and its volume, sized from the model."""
    model_gb: float
    download_timeout_s: int
    startup_timeout_s: int
    volume_gb: int | None  # None: the type has local NVMe storage and no EBS ML volume to size
    basis: str


def _timeout(estimate_s: float, field: str, what: str, parameters_billion: float) -> int:
    wanted = max(DEFAULT_HEALTH_CHECK_S, math.ceil(estimate_s * MARGIN))
    low, high = TIMEOUT_RANGE_S
    if wanted > high:
        raise ConfigError("model.parameters_billion", parameters_billion, f"a model whose {what} fits SageMaker's "
                          f"{high} s {field}", reason=f"{what} is estimated at "
                          f"{estimate_s:,.0f} s ({MARGIN:g}x is {wanted:,} s)")
    return max(low, wanted)


def model_seconds(parameters_billion: float, itype: InstanceType, *, compressed: bool) -> tuple[float, float, float]:
    """(GB of weights, download seconds, load seconds) at the assumed rates above, without the margin: what an
    endpoint's timeouts are sized from and what a batch transform run spends starting."""
    per_param = est.SERVE_BYTES_PER_PARAM if itype.accelerator else est.CPU_BYTES_PER_PARAM
    gb = parameters_billion * 1e9 * per_param / 1e9
    return gb, gb / DOWNLOAD_GB_PER_S + (gb / LOAD_GB_PER_S if compressed else 0), gb / LOAD_GB_PER_S


def plan_startup(kind: str, parameters_billion: float, itype: InstanceType, *, compressed: bool,
                 engine_warmup_s: float = 0) -> Startup:
    """The timeouts and volume of an endpoint variant of `kind` on `itype` serving this model; `engine_warmup_s`: what
    the serving engine spends before its first healthy ping beside loading the weights (vLLM's compilation)."""
    per_param = est.SERVE_BYTES_PER_PARAM if itype.accelerator else est.CPU_BYTES_PER_PARAM
    gb, download_s, load_s = model_seconds(parameters_billion, itype, compressed=compressed)
    load_s += engine_warmup_s
    download = _timeout(download_s, "ModelDataDownloadTimeoutInSeconds", "the model download", parameters_billion)
    start = _timeout(load_s, "ContainerStartupHealthCheckTimeoutInSeconds", "loading the model", parameters_billion)
    volume = None
    if not itype.local_nvme:
        volume = max(VOLUME_RANGE_GB[0], math.ceil(gb * (2 if compressed else 1) + VOLUME_HEADROOM_GB))
        if volume > VOLUME_RANGE_GB[1]:
            raise ConfigError(f"inference.{kind}.instance_type", f"ml.{itype.name}",
                              "a type with local NVMe instance storage (g5, g6, p4d, p5)",
                              reason=f"the model needs a {volume} GB ML volume; VolumeSizeInGB is at most "
                                     f"{VOLUME_RANGE_GB[1]}")
    basis = (f"{gb:,.1f} GB of weights ({per_param} B/parameter); download at {DOWNLOAD_GB_PER_S:g} GB/s"
             + (" plus extraction" if compressed else "") + f", load at {LOAD_GB_PER_S:g} GB/s"
             + (f" plus {engine_warmup_s:g} s of the engine's compilation" if engine_warmup_s else "") + " (assumptions), "
             f"x{MARGIN:g}, at least the {DEFAULT_HEALTH_CHECK_S} s default"
             + (f"; {volume} GB EBS volume (model{' x2 for the archive' if compressed else ''} + "
                f"{VOLUME_HEADROOM_GB} GB)" if volume else "; local NVMe storage, no EBS volume to size"))
    startup = Startup(round(gb, 1), download, start, volume, basis)
    if itype.accelerator and itype.accelerator.kind == "inferentia":  # served by vLLM on Neuron (contracts.py)
        return neuron_startup(startup, parameters_billion, timeout_range=TIMEOUT_RANGE_S, volume_range=VOLUME_RANGE_GB)
    return startup
