"""Serving fleets: every candidate costed as the fleet that will be deployed, then ranked.

A candidate is a type (and, for LLMs, a tensor-parallel degree and copies per instance) together with its fleet: the
minimum the endpoint keeps (two instances across the hosting zones when a latency target says it is in production,
none where it scales to zero, the config's minimum when set) and the instances the stated peak needs. Its cost is
max(minimum fleet, fleet needed at the peak) x price at the peak and the minimum fleet x price at minimum, both in the
table, before any ranking: a type where one instance covers the peak is not cheap when the minimum doubles it.

Pure Python (never imports aws_cdk or sagemaker).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..catalog import ML_PREFIX, Catalog, InstanceType, devices
from ..catalog.apis import accepts
from ..config.model import artifact_format, attention_heads
from ..config.schema import CLASSIC_ML, Batch, Realtime, Workload
from ..errors import ConfigError
from . import estimates as est
from . import speed
from .contracts import VLLM_TOO_OLD, container_for, copy_degrees, tensor_degrees
from .fp8_serving import formats
from .unmeasured import llm_unmeasured

# SageMaker Developer Guide, "Best practices for deploying models on SageMaker Hosting Services", section "Deploy
# Multiple Instances Across Availability Zones": "If an outage occurs or an instance fails, SageMaker automatically
# attempts to distribute your instances across Availability Zones. For this reason, we strongly recommended that you
# deploy multiple instances for each production endpoint." (checked 2026-11-25 in awsdocs/amazon-sagemaker-developer-
# guide, doc_source/deployment-best-practices.md)
AVAILABILITY_SOURCE = ("SageMaker Developer Guide, 'Best practices for deploying models on SageMaker Hosting Services: "
                       "Deploy Multiple Instances Across Availability Zones' <https://docs.aws.amazon.com/sagemaker/"
                       "latest/dg/deployment-best-practices.html#deployment-best-practices-availability-zones>")
AVAILABLE_INSTANCES = 2  # one in each of the endpoint's two subnets' zones (Plan.hosting_zones)

# Scale to zero: an endpoint scales to and from zero instances only when it hosts inference components and its
# variant's ManagedInstanceScaling MinInstanceCount is 0 (SageMaker Developer Guide, "Scale an endpoint to zero
# instances", https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html); requests
# fail for the minutes an instance takes to come back, so only traffic that tolerates it goes there.
ZERO_COPIES_TRAFFIC = ("spiky", "rare", "periodic")

# Ranked at the stated traffic: real-time and async hold whole instances while it flows, so a candidate costs its
# fleet at the peak (the minimum fleet at least); ties go to the cheaper minimum fleet, then the faster request. A
# transform job runs until its input is done on the instances it is given, so batch is ranked by $ per request.
AT_THE_PEAK = ("realtime", "async")


@dataclass(frozen=True)
class ServingCandidate:
    """One type (and, for LLMs, one tensor-parallel degree) with its fleet, costed for a kind, side by side."""

    instance_type: str
    tensor_parallel: int | None
    concurrency: int  # requests one copy serves at once
    requests_per_second: float  # one instance, likely
    instances_at_peak: int  # max(minimum fleet, instances the stated peak needs)
    usd_per_hour_at_peak: float  # that fleet, an hour
    usd_per_million: float  # at the stated traffic on that fleet (batch: at full throughput, as the job runs)
    latency_ms: float
    ttft_ms: float | None
    tpot_ms: float | None
    meets: bool
    why: str  # why it won, or why it lost
    chosen: bool = False
    copies: int = 1  # copies of the model per instance (Inference Components), each at `tensor_parallel`
    instances_at_minimum: int = 0  # the minimum fleet: zones, the config's minimum, or none (scales to zero)
    usd_per_hour_at_minimum: float = 0.0
    needed_at_peak: int = 1  # instances the stated peak needs at this candidate's rate, before the minimum
    quantization: str = ""  # LLMs: "fp8" (weights and KV cache in FP8 on vLLM, fp8_serving.py); "": as trained


def llm_served(w: Workload) -> bool:
    """A Hugging Face artifact: served by an LLM container (vLLM, or vLLM on Neuron)."""
    return artifact_format(w)[0] == "huggingface"


def uses_components(kind: str, itype: InstanceType) -> bool:
    """LLMs on vLLM (GPUs) at a real-time endpoint run as Inference Components: several copies per instance, copies
    scaled with load. Async endpoints and transform jobs host a model per variant; Neuron's TGI stays one copy an
    instance (its export is compiled for a fixed core count)."""
    return kind == "realtime" and itype.accelerator is not None and itype.accelerator.kind == "nvidia-gpu"


def has_latency_target(w: Workload) -> bool:
    inf = w.inference
    return any(t is not None for t in (inf.latency_ms, inf.time_to_first_token_ms, inf.time_per_output_token_ms))


def availability_floor(w: Workload, section: Realtime) -> tuple[int, str]:
    """The real-time minimum: the config's when set; else two instances (one per hosting zone) when a latency target
    says the endpoint is in production, so one instance or zone failing leaves it serving."""
    if "min_instances" in section.model_fields_set or not has_latency_target(w):
        return section.min_instances, ""
    if "max_instances" in section.model_fields_set and section.max_instances < AVAILABLE_INSTANCES:
        return section.max_instances, (f"min {section.max_instances}: inference.realtime.max_instances allows no "
                                       "second instance, so an instance or zone failing stops the endpoint "
                                       f"({AVAILABILITY_SOURCE})")
    return AVAILABLE_INSTANCES, (
        f"min {AVAILABLE_INSTANCES}: a latency target means a production endpoint, and SageMaker attempts to "
        "distribute an endpoint's instances across its subnets' zones (the two hosting zones), so an instance or zone "
        f"failing leaves it serving ({AVAILABILITY_SOURCE}); set inference.realtime.min_instances: 1 to accept one")


def scales_to_zero(w: Workload, section: Realtime) -> bool:
    """Copies (and instances) may scale to zero: bursty traffic, no latency target, no minimum set by the config."""
    return w.inference.traffic in ZERO_COPIES_TRAFFIC and not has_latency_target(w) \
        and "min_instances" not in section.model_fields_set


def minimum_fleet(kind: str, w: Workload, section: object, itype: InstanceType) -> int:
    """Instances the endpoint keeps whatever the traffic: part of every candidate's cost."""
    if kind == "batch":
        return (section or Batch()).instance_count
    if kind == "async":
        return 0  # scales to zero on an empty queue
    rt = section if isinstance(section, Realtime) else Realtime()
    if llm_served(w) and uses_components(kind, itype) and scales_to_zero(w, rt):
        return 0
    return availability_floor(w, rt)[0]


def speeds(kind: str, w: Workload, itype: InstanceType) -> list[tuple[int | None, speed.Speed]]:
    """(degree, speed) of every way the type can serve: LLMs at each tensor-parallel degree that holds them."""
    targets = speed.Targets.of(kind, w)
    # A transform job has at most MaxConcurrentTransforms requests in flight per instance.
    limit = (w.inference.batch or Batch()).concurrency_limit() if kind == "batch" else None
    classic = w.model.framework in CLASSIC_ML
    if classic or itype.accelerator is None:
        return [(None, speed.cpu(w, itype, targets.request_ms, classic=classic, max_concurrency=limit))]
    if llm_served(w):
        # Each weight format offered on the type: the checkpoint's dtype, FP8 where vLLM's GPU computes in it.
        fmts = formats(w, itype)
        if uses_components(kind, itype):
            count, _ = devices(itype)
            out = [(d, speed.llm(w, itype, d, targets, fmt=f)) for f in fmts for d in copy_degrees(w, itype, f)]
            return [(d, s.times(count // d, d)) for d, s in out if s is not None]
        heads, _ = attention_heads(w)
        out = [(d, speed.llm(w, itype, d, targets, max_concurrency=limit, fmt=f))
               for f in fmts for d in tensor_degrees(itype, heads)]
        return [(d, s) for d, s in out if s is not None]
    return [(None, speed.encoder(w, itype, targets.request_ms))]


def candidate(kind: str, w: Workload, itype: InstanceType, degree: int | None, s: speed.Speed,
              section: object = None) -> ServingCandidate:
    """The type at `degree` with its fleet: the minimum it keeps and what the stated peak needs, both priced."""
    hourly = itype.price(w.region, sagemaker=True).usd_per_hour
    peak = w.inference.requests_per_second
    needed = max(1, math.ceil(peak / s.requests_per_second))
    least = minimum_fleet(kind, w, section, itype)
    fleet = max(least, needed) if kind in AT_THE_PEAK else least
    meets, why = s.meets_latency, s.missed
    limit = getattr(section, "max_instances", None)
    if meets and kind == "realtime" and limit is not None and "max_instances" in section.model_fields_set \
            and needed > limit:
        meets, why = False, f"needs {needed} instances at the peak, inference.realtime.max_instances is {limit}"
    per_million = est.usd_per_million(hourly * fleet, peak) if kind in AT_THE_PEAK else \
        est.usd_per_million(hourly, s.requests_per_second)
    return ServingCandidate(ML_PREFIX + itype.name, degree, s.concurrency, round(s.requests_per_second, 3), fleet,
                            round(hourly * fleet, 4), round(per_million, 2), round(s.latency_ms, 1),
                            None if s.ttft_ms is None else round(s.ttft_ms, 1),
                            None if s.tpot_ms is None else round(s.tpot_ms, 1), meets, why, copies=s.copies,
                            instances_at_minimum=least, usd_per_hour_at_minimum=round(hourly * least, 4),
                            needed_at_peak=needed, quantization=s.quantization)


def rank_key(kind: str, c: ServingCandidate) -> tuple[float, float, int]:
    """Real-time and async: the fleet's $/h at the stated peak, then at minimum, then the faster request; batch: $ per
    request, then the faster request."""
    if kind in AT_THE_PEAK:
        return round(c.usd_per_hour_at_peak, 2), round(c.usd_per_hour_at_minimum, 2), round(c.latency_ms)
    return round(c.usd_per_million, 2), 0.0, round(c.latency_ms)


def serving_speed(kind: str, w: Workload, itype: InstanceType, degree: int | None = None,
                  section: object = None) -> speed.Speed:
    """How fast one instance serves this kind: at `degree`, or the degree of least cost that meets the targets."""
    options = [(d, s) for d, s in speeds(kind, w, itype) if degree is None or d == degree]
    if not options:
        raise ConfigError(f"inference.{kind}.instance_type", f"ml.{itype.name}",
                          "a type with more accelerator memory, or lower inference.generation limits",
                          reason=f"no tensor-parallel degree the container allows holds the "
                                 f"{w.model.parameters_billion:g}B model's weights and one sequence's KV cache")
    return min(options, key=lambda ds: (not ds[1].meets_latency,
                                        rank_key(kind, candidate(kind, w, itype, *ds, section))))[1]


def eligible(kind: str, name: str, w: Workload, cat: Catalog, bytes_per_param: float | None) -> InstanceType | None:
    """The type, if the kind's API takes it, it is offered and priced here, and it holds the model."""
    itype = cat.get(name)
    if itype is None or not cat.allows(name) or w.region not in itype.regions \
            or itype.price(w.region, sagemaker=True) is None or not accepts(kind, name):
        return None
    if llm_served(w) and itype.accelerator and itype.accelerator.model in VLLM_TOO_OLD:
        return None  # vLLM needs compute capability 7.5 or newer
    if bytes_per_param is not None:
        memory = itype.accelerator.memory_gib if itype.accelerator else itype.memory_gib
        if not est.serving_fits(w.model.parameters_billion, memory, bytes_per_param):
            return None
    return itype


def container_runs(kind: str, w: Workload, itype: InstanceType) -> bool:
    """Whether this kind's container runs on the type (a batch job cannot give Ray Serve's GPU build its host)."""
    try:
        container_for(kind, artifact_format(w)[0], w.model.framework, itype)
    except ConfigError:
        return False
    return True


def compare(kind: str, w: Workload, cat: Catalog, names: tuple[str, ...], bytes_per_param: float | None,
            section: object = None, left_out: list[str] | None = None
            ) -> list[tuple[ServingCandidate, InstanceType, speed.Speed]]:
    """Each type costed as the fleet it deploys. `left_out`: where given, an LLM type no measurement backs is left out
    and its reason appended there (unmeasured.py); where None (the config's own type), it is costed."""
    out = []
    for name in names:
        itype = eligible(kind, name, w, cat, bytes_per_param)
        if itype is None or (llm_served(w) and itype.accelerator is None) or not container_runs(kind, w, itype):
            continue
        if left_out is not None and llm_served(w) and (why := llm_unmeasured(itype)):
            left_out.append(f"{ML_PREFIX}{itype.name}: {why}")
            continue
        out += [(candidate(kind, w, itype, d, s, section), itype, s) for d, s in speeds(kind, w, itype)]
    return out


def ranked(kind: str, cands: list[tuple[ServingCandidate, InstanceType, speed.Speed]]
           ) -> tuple[tuple[ServingCandidate, ...], tuple[ServingCandidate, InstanceType, speed.Speed] | None]:
    """Candidates, cheapest fleet meeting the targets first, each saying why it won or lost; and the winner."""
    ok = sorted((c for c in cands if c[0].meets), key=lambda c: rank_key(kind, c[0]))
    best = ok[0] if ok else None
    unit = "$/h at the peak" if kind in AT_THE_PEAK else "$ per million requests"
    rows = []
    for c, _, _ in ok + sorted((c for c in cands if not c[0].meets), key=lambda c: c[0].latency_ms):
        if best and c is best[0]:
            why = f"least {unit} that meets the targets" + _fleet_words(c)
        elif not c.meets:
            why = f"misses the target: {c.why}"
        else:
            more = rank_key(kind, c)[0] - rank_key(kind, best[0])[0]
            why = f"${more:,.2f} more {unit}" if more > 0.005 else \
                f"ties at {unit}; dearer at minimum, or slower a request"
            why += _fleet_words(c)
        rows.append(replace(c, why=why, chosen=best is not None and c is best[0]))
    return tuple(rows), best


def _fleet_words(c: ServingCandidate) -> str:
    """Where the minimum fleet, not the peak, sets the cost."""
    return f"; the peak needs {c.needed_at_peak}, the minimum is {c.instances_at_minimum}" \
        if c.needed_at_peak < c.instances_at_minimum else ""



def refuse_over_maximum(kind: str, w: Workload, section: object, table: tuple[ServingCandidate, ...]) -> None:
    """No candidate fits inference.realtime.max_instances at the peak, though some meet the latency targets: the
    maximum is what to change."""
    over = [c for c in table if c.why.startswith("misses the target: needs ")]
    if kind != "realtime" or not over:
        return
    fewest = min(over, key=lambda c: c.needed_at_peak)
    raise ConfigError("inference.realtime.max_instances", section.max_instances,
                      f"at least {fewest.needed_at_peak}, or a lower inference.requests_per_second",
                      reason=f"inference.requests_per_second {w.inference.requests_per_second:g} at peak needs {fewest.needed_at_peak} x "
                             f"{fewest.instance_type} at {fewest.requests_per_second:.3g} req/s each")
