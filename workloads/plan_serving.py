"""Serving planning: the inference kinds, their instance types, counts, scaling and serving contracts.

Pure Python (never imports aws_cdk or sagemaker). Inference per the seeds: CPU for low steady traffic, GPU (G4dn/G5)
for throughput and latency, Inferentia for price-performance when Neuron supports the model; real-time, serverless,
async and batch transform by the traffic and payload.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from . import estimates as est
from . import speed
from .catalog import ML_PREFIX, Catalog, InstanceType, load_serving
from .errors import ConfigError
from .schema import CLASSIC_ML, Async, Batch, Realtime, Serverless, Workload
from .serving import ServingPlan, artifact_format, attention_heads, kv_cache_gib, layout_of, plan_serving, tensor_parallel
from .startup import Startup, plan_startup

# Inference families in order of preference per need; the cheapest that holds the model wins.
INFERENTIA = ("inf2.xlarge", "inf2.8xlarge", "inf2.24xlarge", "inf2.48xlarge")
GPU_SERVING = ("g4dn.xlarge", "g5.xlarge", "g5.2xlarge", "g5.12xlarge", "g5.48xlarge", "p4d.24xlarge")
CPU_SERVING = ("c5.large", "c5.xlarge", "m5.large", "m5.xlarge", "c5.2xlarge", "m5.2xlarge", "m5.4xlarge")


@dataclass(frozen=True)
class InferencePlan:
    kind: str
    instance_type: str | None
    min_instances: int
    max_instances: int
    usd_per_hour_min: float | None
    usd_per_hour_max: float | None
    reason: str
    local_nvme: bool = False  # SageMaker refuses KmsKeyId on these
    accelerator_kind: str | None = None
    memory_mb: int | None = None
    max_concurrency: int | None = None
    schedule: str | None = None
    invocations_per_instance: int | None = None  # real-time scaling target, per minute
    why_kind: str = ""
    requests_per_second_per_instance: float | None = None  # the throughput the $/million assumes (likely)
    requests_per_second_range: tuple[float, float] | None = None  # (low, high) over the published spread
    latency_ms: float | None = None  # one request, modelled, at `concurrency` in flight
    concurrency: int | None = None  # requests one instance serves at once
    throughput_basis: str = ""  # what the throughput rests on, with sources
    usd_per_million: float | None = None
    instances_needed_at_peak: int | None = None
    data_capture_percent: int = 0
    provisioned_concurrency: int | None = None
    max_concurrent_invocations_per_instance: int | None = None
    max_payload_mb: int | None = None
    max_concurrent_transforms: int | None = None
    serving: ServingPlan | None = None  # container, artifact and environment
    startup: Startup | None = None  # endpoint variants: download and start-up timeouts, ML volume size



def _cheapest_fitting(names: tuple[str, ...], w: Workload, cat: Catalog, *, fits: Callable[[InstanceType], bool],
                      cost: Callable[[InstanceType], float | None]) -> tuple[InstanceType | None, list[InstanceType]]:
    """(the fitting type of least cost, the fitting types whose cost is None: too slow for the latency target)."""
    costs: dict[str, tuple[float, InstanceType]] = {}
    too_slow = []
    for name in names:
        itype = cat.get(name)
        if itype is None or not cat.allows(name) or w.region not in itype.regions \
                or itype.price(w.region, sagemaker=True) is None or not fits(itype):
            continue
        c = cost(itype)
        if c is None:
            too_slow.append(itype)
        else:
            costs[name] = (c, itype)
    return (min(costs.values(), key=lambda pair: pair[0])[1] if costs else None), too_slow


def serving_speed(kind: str, w: Workload, itype: InstanceType) -> speed.Speed:
    """How fast one instance serves this workload's requests; the latency target binds real-time only."""
    target = w.inference.latency_ms if kind == "realtime" else None
    # A transform job has at most MaxConcurrentTransforms requests in flight per instance.
    limit = (w.inference.batch or Batch()).concurrency_limit() if kind == "batch" else None
    classic = w.model.framework in CLASSIC_ML
    if classic or itype.accelerator is None:
        return speed.cpu(w, itype, target, classic=classic, max_concurrency=limit)
    if artifact_format(w)[0] == "huggingface":
        heads, _ = attention_heads(w)
        degree = tensor_parallel(w.model.parameters_billion, heads, itype, kv_cache_gib=kv_cache_gib(w))
        assert degree is not None
        return speed.llm(w, itype, degree, target, max_concurrency=limit)
    return speed.encoder(w, itype, target)


def _serving_cost(kind: str, w: Workload) -> Callable[[InstanceType], float | None]:
    """Real-time: $/h of the instances the peak needs; async and batch: $ per request. None: misses the latency."""
    def cost(itype: InstanceType) -> float | None:
        s = serving_speed(kind, w, itype)
        if not s.meets_latency:
            return None
        hourly = itype.price(w.region, sagemaker=True).usd_per_hour
        if kind == "realtime":
            return hourly * math.ceil(w.inference.requests_per_second / s.requests_per_second)
        return hourly / s.requests_per_second
    return cost


def _weights_fit(w: Workload, bytes_per_param: float) -> Callable[[InstanceType], bool]:
    def fits(itype: InstanceType) -> bool:
        memory = itype.accelerator.memory_gib if itype.accelerator else itype.memory_gib
        return est.serving_fits(w.model.parameters_billion, memory, bytes_per_param)
    return fits


def _llm_fits(w: Workload) -> Callable[[InstanceType], bool]:
    """An LLM fits where a tensor-parallel degree that divides its attention heads holds its weights."""
    heads, _ = attention_heads(w)
    kv = kv_cache_gib(w)
    return lambda itype: itype.accelerator is not None and \
        tensor_parallel(w.model.parameters_billion, heads, itype, kv_cache_gib=kv) is not None


def _serving_type(kind: str, w: Workload, cat: Catalog) -> tuple[InstanceType, str]:
    """The cheapest type that holds the model and meets the latency: at the peak for real-time, per request else."""
    cost, too_slow = _serving_cost(kind, w), []
    least = "the fewest dollars an hour at the peak" if kind == "realtime" else "the lowest cost per request"
    if w.model.framework in CLASSIC_ML:
        itype, slow = _cheapest_fitting(CPU_SERVING if kind != "batch" else CPU_SERVING[4:], w, cat,
                                        fits=_weights_fit(w, est.CPU_BYTES_PER_PARAM), cost=cost)
        too_slow += slow
        if itype:
            return itype, "classic ML serves on CPU" + (" (seeds: low, steady traffic)" if kind == "realtime" else "") \
                + f"; {least}"
    llm = artifact_format(w)[0] == "huggingface"
    fits = _llm_fits(w) if llm else _weights_fit(w, est.SERVE_BYTES_PER_PARAM)
    # Inferentia2 serves LLMs through TGI on Neuron; other PyTorch models would need their own Neuron compile.
    if llm and w.model.neuron_supported and kind == "realtime":
        itype, slow = _cheapest_fitting(INFERENTIA, w, cat, fits=fits, cost=cost)
        too_slow += slow
        if itype:
            return itype, f"Neuron supports the model: Inferentia2 gives the best price-performance (seeds); {least}"
    itype, slow = _cheapest_fitting(GPU_SERVING, w, cat, fits=fits, cost=cost)
    too_slow += slow
    if itype:
        why = {"realtime": "GPU for throughput and latency (seeds)",
               "async": "GPU for large payloads and long inferences (seeds)",
               "batch": "GPU that holds the model, for periodic large datasets"}[kind]
        return itype, f"{why}; {least}"
    if too_slow:
        s, fastest = min(((serving_speed(kind, w, t), t) for t in too_slow), key=lambda pair: pair[0].latency_ms)
        raise _too_slow(w, fastest, s, "the fastest that holds the model", "")
    raise ConfigError(f"inference.{kind}.instance_type", None, "set one explicitly",
                      reason=f"no catalog type holds a {w.model.parameters_billion:g}B-parameter model")


KINDS = ("realtime", "serverless", "async", "batch")


def choose_kinds(w: Workload) -> dict[str, tuple[object, str]]:
    """The kinds to deploy: those the config lists, or the seeds' choice from the traffic."""
    inf = w.inference
    listed = {k: s for k, s in zip(KINDS, (inf.realtime, inf.serverless, inf.async_, inf.batch)) if s is not None}
    if listed:
        return {k: (s, "listed in the config") for k, s in listed.items()}
    if inf.traffic == "periodic":
        return {"batch": (Batch(), "periodic work on large datasets: batch transform (seeds)")}
    if inf.payload_mb > 6 or inf.processing_seconds > 60:
        return {"async": (Async(), f"{inf.payload_mb:g} MB / {inf.processing_seconds:g} s is past real-time's "
                                   "6 MB / 60 s: asynchronous, up to 1 GB and 1 hour (seeds)")}
    memory = _serverless_memory_mb(w)
    cold_starts_ok = inf.latency_ms is None or inf.latency_ms >= 1000
    cpu_servable = artifact_format(w)[0] != "huggingface"  # LLM serving containers need GPU or Inferentia2
    if inf.traffic in ("spiky", "rare") and inf.payload_mb <= 4 and memory and cold_starts_ok and cpu_servable:
        return {"serverless": (Serverless(memory_mb=memory), f"{inf.traffic} traffic, cold starts tolerated: "
                                                            "serverless scales to zero (seeds)")}
    if inf.traffic == "rare":
        return {"async": (Async(), "rare requests: asynchronous scales to zero between them (seeds)")}
    return {"realtime": (Realtime(), _why_realtime(w, memory, cold_starts_ok, cpu_servable))}


def _why_realtime(w: Workload, memory: int | None, cold_starts_ok: bool, cpu_servable: bool) -> str:
    """Why real-time, in terms of this workload's own traffic (every reason follows from the inputs)."""
    inf = w.inference
    if inf.traffic == "steady":
        need = f" and a {inf.latency_ms} ms latency target" if inf.latency_ms else ""
        return f"steady traffic{need}: real-time (seeds)"
    if not cold_starts_ok:
        return f"{inf.traffic} traffic, but a {inf.latency_ms} ms latency target rules out serverless cold starts: " \
               "real-time (seeds)"
    if not cpu_servable:
        return f"{inf.traffic} traffic, but an LLM needs a GPU or Inferentia2 and serverless is CPU only: real-time"
    if memory is None:
        return f"{inf.traffic} traffic, but the model does not fit serverless memory (6 GB): real-time"
    return f"{inf.traffic} traffic, but {inf.payload_mb:g} MB requests exceed serverless's 4 MB: real-time"


def _serverless_memory_mb(w: Workload) -> int | None:
    """The smallest serverless memory step that holds the model's fp32 weights, if any does."""
    for mb in range(1024, 6144 + 1, 1024):
        if est.serving_fits(w.model.parameters_billion, mb / 1024, est.CPU_BYTES_PER_PARAM):
            return mb
    return None


def plan_inference(w: Workload, cat: Catalog) -> dict[str, InferencePlan]:
    inf = w.inference
    out: dict[str, InferencePlan] = {}
    for kind, (section, why_kind) in choose_kinds(w).items():
        if kind == "serverless":
            per_million = est.serverless_usd_per_million(section.memory_mb, inf.processing_seconds)
            out[kind] = InferencePlan(
                kind, None, 0, section.max_concurrency, 0.0, None,
                "CPU only, memory sized for the model's weights", memory_mb=section.memory_mb,
                max_concurrency=section.max_concurrency, why_kind=why_kind, usd_per_million=round(per_million, 2),
                provisioned_concurrency=section.provisioned_concurrency, serving=plan_serving(kind, w, None))
            continue
        if section.instance_type:
            itype, reason = cat.get(section.instance_type), "set by the config"
        else:
            itype, reason = _serving_type(kind, w, cat)
        assert itype is not None
        serving = plan_serving(kind, w, itype)  # first: a type no container can use says so before any sizing
        hourly = itype.price(w.region, sagemaker=True).usd_per_hour
        s = serving_speed(kind, w, itype)
        if not s.meets_latency:  # only a configured type: the planner's choices meet the target
            raise _too_slow(w, itype, s, "set by the config", ", or a faster inference.realtime.instance_type")
        rps = s.requests_per_second
        needed = max(1, math.ceil(inf.requests_per_second / rps))
        transforms = None
        invocations = getattr(section, "invocations_per_instance", None)
        if kind == "realtime":
            lo, hi, reason = _realtime_range(section, needed, rps, inf.requests_per_second, reason)
            if "invocations_per_instance" not in section.model_fields_set:
                invocations = speed.scaling_target(load_serving(), rps)
                reason += f"; scales out at {invocations} invocations a minute per instance (half its throughput, " \
                          "SageMaker's load-testing guide)"
        elif kind == "async":
            lo, hi = 0, section.max_instances  # scales to zero when the queue is empty
        else:
            lo = hi = section.instance_count
            transforms, reason = _transforms(section, s, serving, reason)
        out[kind] = InferencePlan(
            kind, ML_PREFIX + itype.name, lo, hi, round(hourly * lo, 4), round(hourly * hi, 4), reason,
            local_nvme=itype.local_nvme, accelerator_kind=itype.accelerator.kind if itype.accelerator else None,
            schedule=getattr(section, "schedule", None),
            invocations_per_instance=invocations,
            why_kind=why_kind, requests_per_second_per_instance=round(rps, 3),
            requests_per_second_range=(round(s.low, 3), round(s.high, 3)), latency_ms=round(s.latency_ms, 1),
            concurrency=s.concurrency, throughput_basis=s.basis,
            usd_per_million=round(est.usd_per_million(hourly, rps), 2), instances_needed_at_peak=needed,
            data_capture_percent=getattr(section, "data_capture_percent", 0),
            max_concurrent_invocations_per_instance=getattr(section, "max_concurrent_invocations_per_instance", None),
            max_payload_mb=getattr(section, "max_payload_mb", None),
            max_concurrent_transforms=transforms if kind == "batch" else None,
            serving=serving,
            startup=plan_startup(kind, w.model.parameters_billion, itype, compressed=serving.compressed)
            if kind in ("realtime", "async") else None,
        )
    _one_layout_per_key(out)
    return dict(sorted(out.items(), key=lambda kv: KINDS.index(kv[0])))


def _transforms(section: Batch, s: speed.Speed, serving: ServingPlan, reason: str) -> tuple[int, str]:
    """MaxConcurrentTransforms: the configured value, or as many requests as the container serves at once (the
    concurrency the job is priced at)."""
    if section.max_concurrent_transforms is None:
        return s.concurrency, f"{reason}; {s.concurrency} requests in flight per instance (MaxConcurrentTransforms): " \
                              f"what {serving.container_title} serves at once, priced at that"
    extra = section.max_concurrent_transforms - s.concurrency
    if extra > 0:
        reason += f"; {serving.container_title} serves {s.concurrency} at once: the other {extra} of " \
                  f"max_concurrent_transforms {section.max_concurrent_transforms} wait in its queue"
    return section.max_concurrent_transforms, reason


def _too_slow(w: Workload, itype: InstanceType, s: speed.Speed, which: str, or_else: str) -> ConfigError:
    return ConfigError("inference.latency_ms", w.inference.latency_ms,
                       f"at least {math.ceil(s.latency_ms)} (ml.{itype.name}, {which}), or fewer "
                       f"inference.generation.typical_output_tokens{or_else}",
                       reason=f"one request takes about {s.latency_ms:,.0f} ms on ml.{itype.name} ({s.basis})")


def _realtime_range(section: Realtime, needed: int, rps: float, peak: float, reason: str) -> tuple[int, int, str]:
    """Min from the config; max from the peak, or the config's if it carries the peak (else refused)."""
    lo = section.min_instances
    if "max_instances" not in section.model_fields_set:
        hi = max(lo, needed)
        return lo, hi, f"{reason}; max {hi} sized from the peak ({peak:g} req/s at {rps:.3g} req/s per instance)"
    if section.max_instances < needed:
        raise ConfigError("inference.realtime.max_instances", section.max_instances,
                          f"at least {needed}, or a lower inference.requests_per_second",
                          reason=f"inference.requests_per_second {peak:g} at peak needs {needed} instances at "
                                 f"{rps:.3g} req/s each")
    return lo, section.max_instances, reason


def _one_layout_per_key(plans: dict[str, InferencePlan]) -> None:
    """Kinds may share an artifact only when their containers read the same layout."""
    seen: dict[str, tuple[str, str]] = {}
    for kind in (k for k in KINDS if k in plans):
        sv = plans[kind].serving
        assert sv is not None
        layout = layout_of(sv.container, sv.artifact_format)
        first = seen.setdefault(sv.artifact_key, (kind, layout))
        if first[1] != layout:
            raise ConfigError(f"inference.{kind}.artifact_key", sv.artifact_key, f"a key of its own for {kind}",
                              reason=f"{sv.container_title} reads a {layout} artifact; {first[0]} reads a "
                                     f"{first[1]} one from the same key")
