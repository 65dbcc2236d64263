"""Serving speed of one instance: requests per second (likely, with the published spread), the latency of one
request, and what the figures rest on. Pure Python: the planner sizes endpoints and ranks types with it.

- LLMs (Hugging Face artifacts on vLLM, or TGI on Neuron): every generated token streams the weights and the KV cache
  from memory, so a token costs a step overhead plus bytes / (bandwidth x efficiency), with the constants fitted to
  each runtime's published measurements (catalog/serving.yaml: vLLM's on GPUs, Neuron's on Inferentia2); the prompt is processed at the accelerator's published
  training MFU. Requests share the decode steps (continuous batching) up to the generation batch limit, or fewer
  where the latency target needs it.
- Other models on accelerators: 2 x parameters x tokens per request at the utilisation BERT-class models reach
  in Neuron's published Inferentia2 benchmark (the only encoder serving figures recorded; GPUs borrow them).
- Classic ML on CPUs: SageMaker's XGBoost serving path, measured per vCPU with tools/bench_cpu_serving.py (no
  published endpoint measurement found); scikit-learn borrows the figure. Other models on CPUs: the GFLOPS one
  vCPU reaches on BERT-class requests, measured with tools/bench_cpu_encoder.py.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from functools import cache

from ..catalog import (DecodeFit, InstanceType, Measurement, ServingFacts, devices, load_serving, load_utilisation,
                      runtime_of)
from ..config.schema import Workload
from . import estimates as est
from . import neuron_hosting, neuron_memory
from .contracts import holds, kv_bytes_per_token, neuron_holds, paged_kv_cache_gib
from .fp8_serving import CHECKPOINT, WeightFormat

ENCODER_TOKENS_PER_REQUEST = 512
# Where the CPU figures were measured (tools/bench_cpu_*.py), said beside every figure that rests on them.
MEASURED_HERE = "measured on a 2-vCPU AMD EPYC machine (AVX2), not on an ml. instance, whose vCPUs may share cores"


@dataclass(frozen=True)
class Speed:
    """An instance's estimated serving speed: requests a second, latency and concurrency, with its basis."""
    requests_per_second: float  # one instance (all its copies), likely
    low: float  # requests per second at the slow end of the published spread
    high: float
    latency_ms: float  # one request at `concurrency` requests in flight, likely
    concurrency: int  # requests one copy of the model serves at once (one copy per instance but with Inference Components)
    meets_latency: bool  # the latency targets (if any) are met at concurrency 1 or more
    basis: str
    ttft_ms: float | None = None  # LLMs: time to first token, likely
    tpot_ms: float | None = None  # LLMs: time per output token at `concurrency`, likely
    missed: str = ""  # which target is missed, and by how much
    copies: int = 1  # copies of the model on one instance (Inference Components): devices / tensor-parallel degree
    quantization: str = ""  # LLMs: "fp8" (weights and KV cache in FP8, fp8_serving.py); "": the checkpoint's dtype

    def times(self, copies: int, degree: int) -> "Speed":
        """One instance running `copies` copies of this speed's model side by side, each on its own `degree` devices:
        the instance serves `copies` times the requests; a request's latency and one copy's batch stay the same."""
        if copies == 1:
            return self
        return replace(self, requests_per_second=self.requests_per_second * copies, low=self.low * copies,
                       high=self.high * copies, copies=copies,
                       basis=f"{copies} copies of TP={degree} per instance, each: {self.basis}")


@dataclass(frozen=True)
class Targets:
    """The latency targets a kind is held to: real-time only (async and batch queue their requests)."""

    request_ms: int | None = None
    ttft_ms: int | None = None
    tpot_ms: int | None = None

    @classmethod
    def of(cls, kind: str, w: Workload) -> "Targets":
        inf = w.inference
        if kind != "realtime":
            return cls()
        return cls(inf.latency_ms, inf.time_to_first_token_ms, inf.time_per_output_token_ms)

    def missed(self, ttft: float | None, tpot: float | None, request: float) -> str:
        """'' when every stated target is met, else the first one missed."""
        for name, target, value in (("time to first token", self.ttft_ms, ttft),
                                    ("time per output token", self.tpot_ms, tpot),
                                    ("whole-request latency", self.request_ms, request)):
            if target is not None and value is not None and value > target:
                return f"{name} {value:,.0f} ms > {target:,} ms"
        return ""


def token_ms(fit: DecodeFit, device_gbs: float, degree: int, bytes_per_device: float) -> float:
    """Modelled milliseconds per generated token (a runtime's fitted decode model, catalog/serving.yaml)."""
    overhead = fit.overhead_ms_one if degree == 1 else fit.overhead_ms_sharded
    return overhead + bytes_per_device / (device_gbs * 1e9 * fit.efficiency) * 1e3


def decode_ratios(f: ServingFacts, runtime: str | None = None) -> list[float]:
    """Measured / modelled ms per token of each published measurement (of one runtime, or all), each by its
    runtime's fit."""
    out = []
    for m in f.decode:
        if runtime is not None and m.runtime != runtime:
            continue
        gbs = f.core_gbs(m.accelerator)
        assert gbs is not None
        out.append(m.ms_per_token / token_ms(f.fits[m.runtime], gbs, m.tensor_parallel,
                                             m.parameters_billion * 1e9 * est.SERVE_BYTES_PER_PARAM / m.tensor_parallel))
    return out


@cache
def spread(runtime: str) -> tuple[float, float]:
    ratios = decode_ratios(load_serving(), runtime)
    return min(ratios), max(ratios)


def prefill_utilisation(itype: InstanceType, parameters_billion: float) -> tuple[float, str]:
    """Prompt MFU: the median of the accelerator's published time-to-first-token figures, else its training MFU."""
    rows = load_serving().prefill.get(itype.accelerator.model if itype.accelerator else "")
    if rows:
        values = sorted(m.value for m in rows)
        return statistics.median(values), (f"prompt at {statistics.median(values):.0%} MFU ({values[0]:.0%}-"
                                           f"{values[-1]:.0%}: published time to first token "
                                           f"[{', '.join(sorted({m.source for m in rows}))}])")
    u = est.utilisation_range(itype, parameters_billion, load_utilisation())
    return u.likely, f"prompt at {u.likely:.0%} MFU ({u.basis.split(' MFU at')[0]} training figures)"


def max_batch(itype: InstanceType) -> tuple[int, str]:
    """The most requests the type's LLM container decodes together, and its source."""
    assert itype.accelerator
    return load_serving().max_batch[runtime_of(itype.accelerator.model)]


def llm(w: Workload, itype: InstanceType, degree: int, targets: Targets, *,
        max_concurrency: int | None = None, fmt: WeightFormat = CHECKPOINT) -> Speed | None:
    """Continuous batching at `degree`: the largest batch that the KV-cache room holds and that meets the targets.
    None: the weights and one sequence's cache do not fit. `max_concurrency`: at most this many requests in flight
    (a transform job's MaxConcurrentTransforms). `fmt`: the weights' and cache's bytes (FP8: one each); the prompt
    stays at the bf16 peak (no FP8 serving measurement is recorded, so FP8's faster matrix units are not counted)."""
    f = load_serving()
    gbs = f.device_gbs(itype)
    acc = itype.accelerator
    assert acc is not None and itype.peak_tflops
    if gbs is None:
        raise ValueError(f"serving.yaml records no memory bandwidth for {acc.model}")
    runtime = runtime_of(acc.model)
    fit = f.fits[runtime]
    params = w.model.parameters_billion
    n = params * 1e9
    g = w.inference.generation
    tokens_in, tokens_out = g.typical()
    neuron = runtime != "nvidia-gpu"  # vLLM on Neuron: NxD Inference's padded and replicated heads (neuron_memory.py)
    kv_per_token = neuron_memory.kv_per_token_bytes(w, degree) if neuron else kv_bytes_per_token(w, fmt)
    weight_bytes = neuron_memory.weights_gib(w, degree) * 2**30 if neuron else n * fmt.weight_bytes
    context = tokens_in + tokens_out / 2  # average context while a request decodes
    count, _ = devices(itype)
    flops_per_device = itype.peak_tflops * 1e12 / count
    u, prompt_basis = prefill_utilisation(itype, params)
    prefill_ms = 2 * n * tokens_in / (degree * flops_per_device * u) * 1e3

    def step_ms(batch: int, ratio: float = 1.0) -> float:
        memory = token_ms(fit, gbs, degree, (weight_bytes + batch * context * kv_per_token) / degree)
        compute = 2 * n * batch / (degree * flops_per_device * u) * 1e3
        return max(memory, compute) * ratio

    def tpot_ms(batch: int, ratio: float = 1.0) -> float:
        # The other requests' prompts interleave with this one's decode steps (one prompt per request).
        return step_ms(batch, ratio) + (batch - 1) * prefill_ms / tokens_out

    def latency_ms(batch: int, ratio: float = 1.0) -> float:
        return prefill_ms + tokens_out * tpot_ms(batch, ratio)

    def rps(batch: int, ratio: float = 1.0) -> float:
        return batch / latency_ms(batch, ratio) * 1e3

    # vLLM (GPUs) pages the cache: requests hold their own context. Neuron compiles batch x max_total_tokens on
    # every core, with the heads it pads and replicates.
    def fits(b: int) -> bool:
        if neuron:
            return neuron_holds(w, itype, degree, b)
        return holds(params, itype, degree, paged_kv_cache_gib(w, b, fmt), fmt)  # one sequence: max_total_tokens

    if not fits(1):
        return None
    # Neuron compiles the batch: at most what is published for a model of this size (neuron_serving.yaml).
    cap, cap_source = neuron_hosting.published_batch(params, itype.name) if neuron else max_batch(itype)
    most = min(cap, g.max_batch_size or cap, max_concurrency or cap)
    batch, missed = 1, targets.missed(prefill_ms + step_ms(1), tpot_ms(1), latency_ms(1))
    for b in range(most, 0, -1):
        if fits(b) and \
                not targets.missed(prefill_ms + step_ms(b), tpot_ms(b), latency_ms(b)):
            batch, missed = b, ""
            break
    fast, slow = spread(runtime)
    rows = [m for m in f.decode if m.runtime == runtime]
    why_batch = "set by inference.generation.max_batch_size" if g.max_batch_size else \
        f"the most the targets and the KV-cache room allow, up to {cap_source}" if neuron else \
        f"the most the targets and the KV-cache room allow, up to {cap} [{cap_source}]"
    basis = (f"{tokens_in} tokens in, {tokens_out} out, {batch} at a time at tensor parallel {degree} ({why_batch}); "
             f"decode streams {degree} x {weight_bytes / degree / 1e9:.1f} GB of {fmt.name.upper() + ' ' if fmt.name else ''}weights at "
             f"{fit.efficiency:.0%} of {gbs:g} GB/s per device [{f.bandwidth_sources[acc.model]}] plus "
             f"{fit.overhead_ms_one if degree == 1 else fit.overhead_ms_sharded:g} ms a token, {runtime} fit to "
             f"{len(rows)} published measurements [{', '.join(sorted({m.source for m in rows}))}] "
             f"(measured/modelled {fast:.2f}-{slow:.2f}); {prompt_basis}")
    if fmt.name:
        basis += f"; {fmt.name.upper()} weights and KV cache (the prompt priced at the bf16 peak)"
    return Speed(rps(batch), rps(batch, slow), rps(batch, fast), latency_ms(batch), batch, not missed, basis,
                 ttft_ms=prefill_ms + step_ms(batch), tpot_ms=tpot_ms(batch), missed=missed, quantization=fmt.name)


def _low_likely_high(measurements: tuple[Measurement, ...]) -> tuple[float, float, float, str]:
    """The range of several measurements, the median as likely, and their sources."""
    values = sorted(m.value for m in measurements)
    return values[0], statistics.median(values), values[-1], ", ".join(sorted({m.source for m in measurements}))


def _request_flops(w: Workload) -> float:
    return 2 * w.model.parameters_billion * 1e9 * ENCODER_TOKENS_PER_REQUEST


def encoder(w: Workload, itype: InstanceType, latency_target_ms: int | None) -> Speed:
    """A framework-archive model on accelerators: compute-bound at the published BERT-class utilisation."""
    assert itype.accelerator and itype.peak_tflops
    low, likely, high, sources = _low_likely_high(load_serving().encoder)
    flops = _request_flops(w)
    count, _ = devices(itype)
    latency = flops / (itype.peak_tflops * 1e12 / count * likely) * 1e3
    borrowed = "" if itype.accelerator.model == "Inferentia2" else \
        f"; no published {itype.accelerator.model} figure recorded: Inferentia2's"
    basis = (f"{ENCODER_TOKENS_PER_REQUEST}-token requests at {likely:.0%} of peak ({low:.0%}-{high:.0%}): "
             f"BERT-class serving in Neuron's inf2 benchmark [{sources}]{borrowed}")
    per = itype.peak_tflops * 1e12 / flops
    return Speed(per * likely, per * low, per * high, latency, 1,
                 latency_target_ms is None or latency <= latency_target_ms, basis)


def cpu(w: Workload, itype: InstanceType, latency_target_ms: int | None, *, classic: bool,
        max_concurrency: int | None = None) -> Speed:
    """Per vCPU, one worker each: classic ML by the measured serving path, other models by measured GFLOPS.
    `max_concurrency`: at most this many requests in flight, so at most this many workers busy."""
    if "processing_seconds" in w.inference.model_fields_set:
        return _stated(w, itype, latency_target_ms, max_concurrency)
    workers = min(itype.vcpus, max_concurrency or itype.vcpus)
    if classic:
        f = load_serving()
        likely, slow, fast = f.cpu_classic_likely, f.cpu_classic[0], f.cpu_classic[-1]
        latency = likely.one_request_ms
        basis = (f"one CSV row a request through SageMaker's XGBoost serving path, one worker per vCPU: "
                 f"{likely.per_second_per_vcpu:g}/s per vCPU for {likely.what} ({slow.per_second_per_vcpu:g} for "
                 f"{slow.what}, {fast.per_second_per_vcpu:g} for {fast.what}) [{likely.source}]; {MEASURED_HERE}"
                 + ("" if w.model.framework == "xgboost" else f"; {w.model.framework} borrows the XGBoost figure"))
        return Speed(workers * likely.per_second_per_vcpu, workers * slow.per_second_per_vcpu,
                     workers * fast.per_second_per_vcpu, latency, workers,
                     latency_target_ms is None or latency <= latency_target_ms, basis)
    low, likely, high, sources = _low_likely_high(load_serving().cpu_encoder)
    flops = _request_flops(w)
    latency = flops / (likely * 1e9) * 1e3  # on one vCPU: each serves its own request at full load
    basis = (f"{ENCODER_TOKENS_PER_REQUEST}-token requests at {likely:g} GFLOPS per vCPU ({low:g}-{high:g}), fp32 on "
             f"one thread: BERT-base and -large shapes [{sources}]; {MEASURED_HERE}")
    return Speed(workers * likely * 1e9 / flops, workers * low * 1e9 / flops, workers * high * 1e9 / flops,
                 latency, workers, latency_target_ms is None or latency <= latency_target_ms, basis)


def _stated(w: Workload, itype: InstanceType, latency_target_ms: int | None, max_concurrency: int | None) -> Speed:
    """inference.processing_seconds, as the user measured one request: one request per physical core at a time (a
    request's threads share its core: the vCPUs are its hardware threads), so the instance serves cores / seconds."""
    per_core, source = load_serving().cpu_threads_per_core
    cores = max(1, itype.vcpus // per_core)
    workers = min(cores, max_concurrency or cores)
    seconds = w.inference.processing_seconds
    basis = (f"inference.processing_seconds {seconds:g} s a request (set by the config), one request per physical "
             f"core: {cores} cores ({itype.vcpus} vCPUs at {per_core} threads per core [{source}])")
    rate = workers / seconds
    return Speed(rate, rate, rate, seconds * 1e3, workers,
                 latency_target_ms is None or seconds * 1e3 <= latency_target_ms, basis)


def cpu_request_seconds(w: Workload) -> tuple[float, str]:
    """One request's time on one vCPU, as `cpu` models it: what a serverless endpoint (CPU only) bills per request."""
    if w.model.framework in ("xgboost", "scikit-learn"):
        likely = load_serving().cpu_classic_likely
        return likely.one_request_ms / 1e3, (f"{likely.one_request_ms:g} ms a request through SageMaker's XGBoost "
                                             f"serving path [{likely.source}]; {MEASURED_HERE}")
    _, likely, _, sources = _low_likely_high(load_serving().cpu_encoder)
    seconds = _request_flops(w) / (likely * 1e9)
    return seconds, (f"{ENCODER_TOKENS_PER_REQUEST}-token requests of the {w.model.parameters_billion:g}B model at "
                     f"{likely:g} GFLOPS on one vCPU [{sources}]; {MEASURED_HERE}")


def scaling_target(f: ServingFacts, rps: float) -> int:
    """Invocations per instance per minute that real-time scaling tracks (SageMaker's load-testing guide)."""
    return max(1, math.floor(rps * f.scaling_safety_factor * 60))
