"""Training-time and cost arithmetic, with every assumption named.

time = 6 x parameters x tokens / (accelerators x peak dense TFLOPS x utilisation x scaling)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import statistics

from .catalog import InstanceType, Utilisation

# Raw text is about 4 bytes per token for English BPE tokenisers.
BYTES_PER_TOKEN = 4
# Mixed-precision Adam: fp16 weights and grads, fp32 master weights and two moments (16 B)
# plus about 2 B/param of working space, before activations.
TRAIN_BYTES_PER_PARAM = 18
# Inference in fp16/bf16 holds 2 B/param of weights; CPU serving usually runs fp32 (4 B/param).
SERVE_BYTES_PER_PARAM = 2
CPU_BYTES_PER_PARAM = 4
# Keep a fifth of accelerator memory for activations, KV cache and fragmentation.
MEMORY_HEADROOM = 0.8
# Sustained model-FLOPs utilisation of a well-tuned large-model job on NVIDIA GPUs.
GPU_UTILISATION = 0.40
# Cross-node efficiency of data/tensor parallel over EFA (all-reduce overlap is not perfect). Used only to
# size a cluster from a target time; the measured MFU figures already include their runs' scaling losses.
MULTI_NODE_EFFICIENCY = 0.90
# Managed spot: AWS says "up to 90%"; plan with a typical 70% saving, not the best case.
SPOT_SAVING = 0.70


@dataclass(frozen=True)
class MeasuredRun:
    instance_type: str
    seconds: float
    usd_per_hour: float

    @property
    def usd(self) -> float:
        return self.seconds / 3600 * self.usd_per_hour


# The seeds' measured BERT fine-tune: same accuracy on both (SageMaker prices of the time).
BERT_FINETUNE = (
    MeasuredRun("ml.trn1.32xlarge", 6033, 24.725),
    MeasuredRun("ml.p4d.24xlarge", 6553, 37.69),
)


def trainium_utilisation(trn1: InstanceType, p4d: InstanceType) -> float:
    """Trainium utilisation calibrated on the measured BERT run relative to A100 at GPU_UTILISATION.

    Equal work W: W = t_trn * peak_trn * u_trn = t_p4d * peak_p4d * u_gpu.
    """
    trn, gpu = BERT_FINETUNE
    assert trn1.peak_tflops and p4d.peak_tflops
    return GPU_UTILISATION * (gpu.seconds * p4d.peak_tflops) / (trn.seconds * trn1.peak_tflops)


def tokens_billion(dataset_size_gib: float, explicit: float | None, epochs: float) -> float:
    per_epoch = explicit if explicit is not None else dataset_size_gib * 2**30 / BYTES_PER_TOKEN / 1e9
    return per_epoch * epochs


def training_flops(parameters_billion: float, tokens_b: float) -> float:
    return 6 * parameters_billion * 1e9 * tokens_b * 1e9


def min_instances_for_memory(parameters_billion: float, itype: InstanceType) -> int:
    """Nodes whose accelerator memory holds weights, grads and optimizer state (sharded)."""
    assert itype.accelerator
    need_gib = parameters_billion * 1e9 * TRAIN_BYTES_PER_PARAM / 2**30
    return max(1, math.ceil(need_gib / (itype.accelerator.memory_gib * MEMORY_HEADROOM)))


def serving_fits(parameters_billion: float, memory_gib: float, bytes_per_param: float = SERVE_BYTES_PER_PARAM) -> bool:
    return parameters_billion * 1e9 * bytes_per_param / 2**30 <= memory_gib * MEMORY_HEADROOM


def hours(flops: float, itype: InstanceType, count: int, utilisation: float) -> float:
    """Wall-clock hours at a model-FLOPs utilisation measured at cluster scale (scaling losses included)."""
    assert itype.peak_tflops
    per_second = itype.peak_tflops * 1e12 * count * utilisation
    return flops / per_second / 3600


@dataclass(frozen=True)
class UtilisationRange:
    low: float
    likely: float
    high: float
    basis: str  # which published figures, or the stand-in used


def utilisation_range(itype: InstanceType, parameters_billion: float, u: Utilisation) -> UtilisationRange:
    """Low, likely (median) and high MFU from the published figures for the accelerator and size band."""
    assert itype.accelerator
    band = "large" if parameters_billion >= u.large_band_billion else "small"
    model = itype.accelerator.model
    figures = u.mfu.get((model, band))
    basis = model
    if not figures:
        basis = u.stand_in.get(model, u.spread_from)
        figures = u.mfu[(basis, band)]
        basis = f"no published figure for {model}: {basis}'s"
    values = sorted(f.value for f in figures)
    likely = statistics.median(values)
    low, high = values[0], values[-1]
    if len(values) == 1:  # one figure: the relative spread of the reference band around its median
        ref = sorted(f.value for f in u.mfu[(u.spread_from, band)])
        ref_median = statistics.median(ref)
        low, high = likely * ref[0] / ref_median, likely * ref[-1] / ref_median
    runs = "; ".join(f"{f.what} {f.value:.1%} [{f.source}]" for f in figures)
    size = f"{u.large_band_billion:g}B+" if band == "large" else f"under {u.large_band_billion:g}B"
    return UtilisationRange(low, likely, high, f"{basis} MFU at {size} parameters: {runs}")


def classic_hours(dataset_size_gib: float, vcpus: int, count: int, u: Utilisation) -> tuple[float, float, float]:
    """(low, likely, high) hours for boosted trees: float32 cells x rounds / (cell-rounds per vCPU-second x vCPUs)."""
    cells = dataset_size_gib * 2**30 / 4
    rates = sorted(r.value for r in u.classic_rates)
    work = cells * u.classic_rounds

    def at(rate: float) -> float:
        return work / (rate * vcpus * count) / 3600
    return at(rates[-1]), at(statistics.median(rates)), at(rates[0])


# Serverless compute price per GB-second of memory (us-east-1 list price, not confirmed in this
# session's sources: treat as an estimate).
SERVERLESS_USD_PER_GB_SECOND = 0.0000200


def usd_per_million(usd_per_hour: float, rps: float) -> float:
    return usd_per_hour / (rps * 3600) * 1e6


def serverless_usd_per_million(memory_mb: int, seconds_per_request: float) -> float:
    return memory_mb / 1024 * seconds_per_request * SERVERLESS_USD_PER_GB_SECOND * 1e6
