"""FP8 serving candidates: an LLM's weights quantized to FP8 as vLLM loads them, and its KV cache stored in FP8.

vLLM quantizes a BF16/FP16 checkpoint's linear layers to FP8 E4M3 at load (`--quantization fp8`, no FP8 checkpoint
needed) and keeps the KV cache in FP8 (`--kv-cache-dtype fp8`); the DLC passes both as SM_VLLM_* variables. It computes
in FP8 (W8A8) on compute capability 8.9 or newer (Ada L4/L40S, Hopper H100/H200, Blackwell); Turing and Ampere would
run FP8 weights only through weight-only kernels, so they are not offered FP8. Facts and sources:
catalog/serving_fp8.yaml.

The memory model takes 1 byte a parameter and 1 byte a cached K or V element (bf16: 2 and 2). Decode streams those
bytes (speed.llm); the prompt is still priced at the bf16 peak (the FP8 tensor-core speed-up is not counted: no FP8
serving measurement is recorded). A plan that picks FP8 carries a WARNING: outputs change slightly.

Pure Python (never imports aws_cdk or sagemaker).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from ..catalog import InstanceType, load_catalog
from ..catalog import _cited, _load_yaml  # the catalog's own reader and source check
from ..config.schema import Workload
from ..errors import WARNING, Finding

FP8 = "fp8"


@dataclass(frozen=True)
class WeightFormat:
    """How a served LLM's weights and KV cache are held: the checkpoint's dtype (name ''), or FP8."""

    name: str
    weight_bytes: float  # a parameter
    kv_bytes: int  # a cached K or V element
    environment: tuple[tuple[str, str], ...] = ()  # the serving container's variables that select it


CHECKPOINT = WeightFormat("", 2, 2)  # bf16 or fp16, as inference.generation.dtype says


@dataclass(frozen=True)
class Fp8Facts:
    """When FP8 serving applies: the compute capability it needs, the weight format and the container's flags."""
    min_compute_capability: float
    compute_capability: dict[str, float]  # accelerator model -> compute capability
    fmt: WeightFormat
    container: str  # the serving container's key that documents the flags
    sources: str  # what the plan cites
    accuracy: str


@cache
def load_fp8() -> Fp8Facts:
    data = _load_yaml("serving_fp8.yaml")
    keys = [data["quantization_source"], data["kv_cache_source"], data["environment_source"],
            data["compute_capability_source"]]
    catalog_sources = load_catalog().sources
    _cited("serving_fp8.yaml", keys, catalog_sources)
    env = tuple(sorted((str(k), str(v)) for k, v in data["environment"].items()))
    fmt = WeightFormat(FP8, float(data["weight_bytes_per_parameter"]), int(data["kv_cache_bytes"]), env)
    cited = "; ".join(f"{catalog_sources[k].title} <{catalog_sources[k].url}>, checked {catalog_sources[k].checked}"
                      for k in dict.fromkeys(keys))
    return Fp8Facts(float(data["min_compute_capability"]),
                    {str(k): float(v) for k, v in data["compute_capability"].items()}, fmt, data["container"], cited,
                    data["accuracy"])


def named(name: str) -> WeightFormat:
    """The format a candidate or plan names ('' : the checkpoint's dtype)."""
    return load_fp8().fmt if name == FP8 else CHECKPOINT


def supports_fp8(itype: InstanceType) -> bool:
    """The type's GPUs compute in FP8 (W8A8) under vLLM: compute capability at least the recorded minimum."""
    f = load_fp8()
    acc = itype.accelerator
    if acc is None or acc.kind != "nvidia-gpu":
        return False
    return f.compute_capability.get(acc.model, 0.0) >= f.min_compute_capability


def formats(w: Workload, itype: InstanceType) -> list[WeightFormat]:
    """The formats an LLM is compared in on `itype`: the checkpoint's dtype, and FP8 where the GPU computes in it;
    inference.generation.quantization 'none' keeps the checkpoint's only, 'fp8' FP8 only (none where unsupported)."""
    wanted = w.inference.generation.quantization
    fp8 = [load_fp8().fmt] if supports_fp8(itype) else []
    if wanted == "none":
        return [CHECKPOINT]
    if wanted == FP8:
        return fp8
    return [CHECKPOINT, *fp8]


def fp8_refusal(w: Workload, itype: InstanceType) -> str:
    """Why inference.generation.quantization fp8 cannot run on a set type ('' where it can)."""
    if w.inference.generation.quantization != FP8 or supports_fp8(itype):
        return ""
    acc = itype.accelerator
    f = load_fp8()
    if acc is None or acc.kind != "nvidia-gpu":
        return f"FP8 serving is vLLM's on NVIDIA GPUs; ml.{itype.name} has {acc.model if acc else 'no accelerator'}"
    return (f"the {acc.model} is compute capability {f.compute_capability.get(acc.model, 0.0):g}; vLLM computes in FP8 "
            f"from {f.min_compute_capability:g} (Ada L4/L40S, Hopper H100/H200)")


def fp8_findings(inference: dict) -> tuple[Finding, ...]:
    """A WARNING for each kind planned in FP8: a precision change the user did not write."""
    f = load_fp8()
    out = []
    for kind, ip in inference.items():
        # A batch drained through the async endpoint runs on that endpoint's model, not its own.
        if ip.serving is None or ip.serving.quantization != FP8 or ip.serving.drain:
            continue
        flags = " and ".join(f"{k}={v}" for k, v in f.fmt.environment)
        out.append(Finding(
            WARNING, "inference.generation.quantization", None,
            f"{kind} is served in FP8 on {ip.instance_type}; the cheapest fleet that meets the targets quantizes the "
            f"weights to FP8 E4M3 as vLLM loads the checkpoint and keeps the KV cache in FP8 ({flags}). {f.accuracy}",
            source=f.sources))
    return tuple(out)
