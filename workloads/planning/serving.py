"""Serving planning: the inference kinds, their instance types, counts, scaling and serving contracts.

Pure Python (never imports aws_cdk or sagemaker). Inference per the seeds: CPU for low steady traffic, GPU (G4dn/G5)
for throughput and latency, Inferentia for price-performance when Neuron supports the model; real-time, serverless,
async and batch transform by the traffic and payload.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..catalog import ML_PREFIX, Catalog, InstanceType, devices, load_serving
from ..config.model import artifact_format
from ..config.schema import CLASSIC_ML, Async, Batch, Realtime, Serverless, Workload
from ..errors import ConfigError
from ..config.schedules import runs_per_month
from . import estimates as est
from . import async_client, hosts, speed
from .contracts import ServingPlan, copy_degrees, layout_of, plan_serving
from .fleet import (AT_THE_PEAK, ServingCandidate, availability_floor, compare, llm_served, ranked,
                    refuse_over_maximum, scales_to_zero, serving_speed, uses_components)
from .fp8_serving import fp8_refusal, named
from .startup import VLLM_ENGINE_WARMUP_S, Startup, model_seconds, plan_startup

# Inference families in order of preference per need; the cheapest that meets the targets wins.
INFERENTIA = ("inf2.xlarge", "inf2.8xlarge", "inf2.24xlarge", "inf2.48xlarge")
GPU_SERVING = ("g4dn.xlarge", "g5.xlarge", "g5.2xlarge", "g6.xlarge", "g6.2xlarge", "g5.12xlarge", "g6.12xlarge",
               "g5.48xlarge", "g6.48xlarge", "p4d.24xlarge", "p5.48xlarge")
# Not candidates yet: ml.g6e (L40S) and ml.p5en.48xlarge. No SageMaker hosting price for either was found at AWS's
# pricing page or Price List in the sources searched (2026-11-25): the g6e figures seen are third-party code's
# (ml.g6e.xlarge 2.61, 2xlarge 2.80, 12xlarge 13.12, 48xlarge 37.66 $/h, "Pricing API"), none for ml.p5en; the
# catalog records p5en's SageMaker price as null. A type joins this list with its sourced price. Searched again on
# 2026-11-28 for a named public copy of the Price List (the code and pages corpora; aws-samples/foundation-model-
# benchmarking-tool fmbench/configs/pricing.yml at f92381db: no g6e, no p5en; vantage-sh/ec2instances.info's
# scraper/aws/sagemaker.go reads the AmazonSageMaker offer's Notebook SKUs but its www/sagemaker/instances.json is
# generated, not in the repository): the g6e figures found (2.61/2.80/13.12/37.66, and 2.80/3.76/5.66/13.10) are in
# files whose repository the index does not name, so none is recorded.
CPU_SERVING = ("c5.large", "c5.xlarge", "m5.large", "m5.xlarge", "c5.2xlarge", "m5.2xlarge", "m5.4xlarge")
# CPU candidates for models that are neither classic ML nor LLMs (encoders, vision): the newest CPU families the catalog
# prices on SageMaker (catalog/instances.yaml, with its sources), compared with the GPUs at fp32 weights.
CPU_MODEL_SERVING = ("c6i.xlarge", "c6i.2xlarge", "c6i.4xlarge", "c6i.8xlarge", "m5.xlarge", "m5.2xlarge",
                     "m5.4xlarge")
# The field each missed target names.
TARGET_FIELDS = {"time to first token": "inference.time_to_first_token_ms",
                 "time per output token": "inference.time_per_output_token_ms",
                 "whole-request latency": "inference.latency_ms"}


@dataclass(frozen=True)
class InferencePlan:
    """One endpoint's plan: its kind, instance type, fleet bounds, hourly cost and why."""
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
    schedule_is_default: bool = False  # batch: the schema's default schedule, not the user's
    invocations_per_instance: int | None = None  # real-time scaling target, per minute
    why_kind: str = ""
    requests_per_second_per_instance: float | None = None  # the throughput the $/million assumes (likely)
    requests_per_second_range: tuple[float, float] | None = None  # (low, high) over the published spread
    latency_ms: float | None = None  # one request, modelled, at `concurrency` in flight
    ttft_ms: float | None = None  # LLMs: time to first token, modelled
    tpot_ms: float | None = None  # LLMs: time per output token, modelled
    concurrency: int | None = None  # requests one instance serves at once
    throughput_basis: str = ""  # what the throughput rests on, with sources
    usd_per_million: float | None = None
    instances_needed_at_peak: int | None = None
    data_capture_percent: int = 0
    provisioned_concurrency: int | None = None
    # Serverless with provisioned concurrency: the utilization its scaling tracks (None: not scaled).
    provisioned_utilization_target: float | None = None
    max_concurrent_invocations_per_instance: int | None = None
    max_payload_mb: int | None = None
    max_concurrent_transforms: int | None = None
    serving: ServingPlan | None = None  # container, artifact and environment
    startup: Startup | None = None  # endpoint variants: download and start-up timeouts, ML volume size
    candidates: tuple[ServingCandidate, ...] = ()  # what was compared, the winner marked
    left_out: tuple[str, ...] = ()  # "ml.type: why" of the types not compared (no measurement backs them)
    price_kind: str = "SageMaker on-demand"
    batch_run: BatchRun | None = None  # batch: one scheduled run
    price_note: str = ""  # the instance price's kind and region, with the fallback note off the recorded regions
    # Inference Components (LLMs on vLLM GPUs, real-time): copies of the model per instance, the fleet in copies, and
    # the copies' scaling target. None: the model is the variant's own (one copy an instance).
    copies_per_instance: int | None = None
    min_copies: int | None = None
    max_copies: int | None = None
    copies_needed_at_peak: int | None = None
    invocations_per_copy: int | None = None  # a minute, the component's scaling target
    memory_mb_per_copy: int | None = None  # host memory each copy reserves (ComputeResourceRequirements)


def _serving_type(kind: str, w: Workload, cat: Catalog, section: object, left: list[str]
                  ) -> tuple[InstanceType, str, speed.Speed, int | None, tuple[ServingCandidate, ...]]:
    """The type (and degree) of least cost that holds the model and meets the targets: at the peak for real-time,
    per request else. The comparison comes back for the plan's table."""
    least = ("the least $/h at the peak for its fleet (the minimum fleet, or what the peak needs if more), then at "
             "minimum") if kind in AT_THE_PEAK else "the lowest cost per request"
    if w.model.framework in CLASSIC_ML:
        names, why = (CPU_SERVING if kind != "batch" else CPU_SERVING[4:]), "classic ML serves on CPU"
        cands = compare(kind, w, cat, names, est.CPU_BYTES_PER_PARAM, section, left)
    else:
        llm = llm_served(w)
        names = GPU_SERVING
        # Inferentia2 serves LLMs through vLLM on Neuron; other PyTorch models would need their own Neuron compile.
        if llm and w.model.neuron_supported and kind == "realtime":
            names = INFERENTIA + GPU_SERVING
        cands = compare(kind, w, cat, names, None if llm else est.SERVE_BYTES_PER_PARAM, section, left)
        why = {"realtime": "GPU or Inferentia2 for throughput and latency", "async": "GPU for large payloads and long "
               "inferences", "batch": "GPU that holds the model, for periodic large datasets"}[kind]
        if not llm:  # a small model may serve on CPU for less (the seeds: CPU for low, steady traffic)
            cands += compare(kind, w, cat, CPU_MODEL_SERVING, est.CPU_BYTES_PER_PARAM, section, left)
            why = {"realtime": "GPU for throughput and latency, CPU for low traffic", "async": "GPU or CPU for large "
                   "payloads and long inferences", "batch": "GPU or CPU that holds the model, for periodic large "
                   "datasets"}[kind]
    table, best = ranked(kind, cands)
    if best is None:
        refuse_over_maximum(kind, w, section, table)
        if cands:
            c, fastest, s = min(cands, key=lambda c: c[0].latency_ms)
            raise _too_slow(w, fastest, s, "the fastest that holds the model", "")
        raise ConfigError(f"inference.{kind}.instance_type", None, "set one explicitly",
                          reason=f"no catalog type holds a {w.model.parameters_billion:g}B-parameter model")
    c, itype, s = best
    others = sum(1 for r in table if not r.chosen)
    return itype, f"{why}; {least} among {others + 1} compared (table below)", s, c.tensor_parallel, table


KINDS = ("realtime", "serverless", "async", "batch")


def choose_kinds(w: Workload) -> dict[str, tuple[object, str]]:
    """The kinds to deploy: those the config lists, or the seeds' choice from the traffic."""
    inf = w.inference
    if not inf.serve:
        return {}
    listed = inf.listed()
    if listed:
        return {k: (s, "listed in the config") for k, s in listed.items()}
    if inf.traffic == "periodic":
        return {"batch": (Batch(), "periodic work on large datasets: batch transform (SageMaker Developer Guide, 'Inference options')")}
    if inf.payload_mb > 6 or inf.processing_seconds > 60:
        return {"async": (Async(), f"{inf.payload_mb:g} MB / {inf.processing_seconds:g} s is past real-time's "
                                   "6 MB / 60 s: asynchronous, up to 1 GB and 1 hour (SageMaker Developer Guide, 'Inference options')")}
    memory = _serverless_memory_mb(w)
    cold_starts_ok = inf.latency_ms is None or inf.latency_ms >= 1000
    cpu_servable = artifact_format(w)[0] != "huggingface"  # LLM serving containers need GPU or Inferentia2
    if inf.traffic in ("spiky", "rare") and inf.payload_mb <= 4 and memory and cold_starts_ok and cpu_servable:
        return {"serverless": (Serverless(memory_mb=memory), f"{inf.traffic} traffic, cold starts tolerated: "
                                                            "serverless scales to zero (SageMaker Developer Guide, 'Inference options')")}
    if inf.traffic == "rare":
        return {"async": (Async(), "rare requests: asynchronous scales to zero between them (SageMaker Developer Guide, 'Inference options')")}
    return {"realtime": (Realtime(), _why_realtime(w, memory, cold_starts_ok, cpu_servable))}


# The plan's one line (train -> serve) when it serves nothing.
TRAINING_ONLY = ("not served: training only: no inference section (or inference: none, or inference.serve: false), so no "
                 "endpoint is planned or deployed and there is no InferenceStack; add an inference section to serve")


# Serverless with provisioned concurrency keeps that many requests warm (no cold start), billed for the provisioned
# concurrency's memory and time plus each request's duration (SageMaker Developer Guide, "Deploy models with Amazon
# SageMaker Serverless Inference", https://docs.aws.amazon.com/sagemaker/latest/dg/serverless-endpoints.html). Its
# prices could not be read at AWS's pricing page in this repository's sources, so it is named, not compared.
PROVISIONED_UNPRICED = (
    "serverless with provisioned concurrency would keep requests warm, but its price (provisioned concurrency per "
    "GB-second, and inference duration) is not confirmed here, so it is not compared; set inference.serverless with "
    "provisioned_concurrency to deploy it (CloudFormation ServerlessConfig: at most MaxConcurrency, 1-200)")


def _why_realtime(w: Workload, memory: int | None, cold_starts_ok: bool, cpu_servable: bool) -> str:
    """Why real-time, in terms of this workload's own traffic (every reason follows from the inputs)."""
    inf = w.inference
    if inf.traffic == "steady":
        need = f" and a {inf.latency_ms} ms latency target" if inf.latency_ms else ""
        return f"steady traffic{need}: real-time"
    if not cold_starts_ok:
        why = f"{inf.traffic} traffic, but a {inf.latency_ms} ms latency target rules out serverless cold starts: " \
              "real-time"
        if cpu_servable and memory is not None and inf.payload_mb <= 4 and inf.traffic != "steady":
            why += f"; {PROVISIONED_UNPRICED}"
        return why
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




@dataclass(frozen=True)
class BatchRun:
    """One scheduled transform run, and how many the schedule makes a month."""

    records: int
    records_assumed: bool  # True: inference.batch.records_per_run is absent (an hour of the peak rate assumed)
    hours: float  # processing the records; the start-up is startup_s
    usd: float  # processing and start-up
    runs_per_month: float
    basis: str
    records_per_request: int = 1  # as the job batches them (MultiRecord up to MaxPayloadInMB; SingleRecord one)
    startup_s: float = 0.0  # billed start-up of each run: the model's download and load (startup.model_seconds)


def _batch_run(w: Workload, section: Batch, hourly: float, rps: float, itype: InstanceType,
               serving: ServingPlan) -> BatchRun:
    records = section.records_per_run or max(1, round(w.inference.requests_per_second * 3600))
    hours = records / (rps * section.instance_count) / 3600
    per_month = runs_per_month(section.schedule)
    assumed = section.records_per_run is None
    source = "assumed: an hour at inference.requests_per_second; set inference.batch.records_per_run" if assumed \
        else "inference.batch.records_per_run"
    # CreateTransformJob (serving.RequestContract): MultiRecord packs records into a request up to MaxPayloadInMB; a
    # record is taken at inference.payload_mb. The rate stays the one-record-a-request rate: the saving is not counted.
    per_request = 1 if serving.request.batch_strategy == "SingleRecord" else \
        max(1, math.floor(section.max_payload_mb / w.inference.payload_mb + 1e-9))
    batching = (f"{per_request:,} a request (MultiRecord, up to {section.max_payload_mb} MB at {w.inference.payload_mb:g} "
                "MB a record; the rate is one record a request's, so an upper bound)") if per_request > 1 else \
        f"one a request ({serving.request.batch_strategy})"
    # Billing runs from TransformStartTime, "when the transform job starts on ML instances" (SageMaker API Reference,
    # TransformJob <https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_TransformJob.html>), so provisioning
    # is not billed and the model's download and load are; the container's own start has no figure and is not counted.
    _, download_s, load_s = model_seconds(w.model.parameters_billion, itype, compressed=serving.compressed)
    startup_s = download_s + load_s
    usd = (hours + startup_s / 3600) * hourly * section.instance_count
    basis = (f"{records:,} records ({source}) at {rps:.3g} records/s on {section.instance_count} instance(s), "
             f"{batching}: {hours * 3600:,.0f} s plus {startup_s:.0f} s start-up (the model's download and load; "
             f"provisioning is not billed, the container's start is not counted) at ${hourly:g}/h each (SageMaker "
             f"on-demand); {per_month:.1f} runs a month from {section.schedule}")
    return BatchRun(records, assumed, round(hours, 3), round(usd, 4), round(per_month, 2), basis,
                    records_per_request=per_request, startup_s=round(startup_s, 1))


def plan_inference(w: Workload, cat: Catalog) -> dict[str, InferencePlan]:
    inf = w.inference
    out: dict[str, InferencePlan] = {}
    for kind, (section, why_kind) in choose_kinds(w).items():
        if kind == "serverless":
            seconds, basis = _serverless_seconds(w)
            per_million = est.serverless_usd_per_million(section.memory_mb, seconds)
            out[kind] = InferencePlan(
                kind, None, 0, section.max_concurrency, 0.0, None,
                "CPU only, memory sized for the model's weights" + _provisioned_reason(section),
                memory_mb=section.memory_mb,
                latency_ms=round(seconds * 1e3, 1), throughput_basis=basis,
                max_concurrency=section.max_concurrency, why_kind=why_kind, usd_per_million=round(per_million, 2),
                provisioned_concurrency=section.provisioned_concurrency, serving=plan_serving(kind, w, None),
                provisioned_utilization_target=_provisioned_target(section),
                price_kind="SageMaker serverless")
            continue
        left: list[str] = []  # types not compared: no measurement backs them (unmeasured.py)
        if section.instance_type:
            itype = cat.get(section.instance_type)
            assert itype is not None
            plan_serving(kind, w, itype)  # first: a type no container can use says so before any sizing
            if llm_served(w) and fp8_refusal(w, itype):
                raise ConfigError("inference.generation.quantization", "fp8", "none, or a type with FP8 (g6, p5)",
                                  reason=fp8_refusal(w, itype))
            table, best = ranked(kind, compare(kind, w, cat, (itype.name,), None, section))
            if best is None:
                if not table:
                    serving_speed(kind, w, itype, section=section)  # raises: nothing holds the model
                refuse_over_maximum(kind, w, section, table)
                s = serving_speed(kind, w, itype, section=section)
                raise _too_slow(w, itype, s, "set by the config", f", or a faster inference.{kind}.instance_type")
            _, _, s = best
            degree, reason = best[0].tensor_parallel, "set by the config"
        else:
            itype, reason, s, degree, table = _serving_type(kind, w, cat, section, left)
        serving = plan_serving(kind, w, itype, degree=degree, batch=s.concurrency, quantization=s.quantization)
        price = itype.price(w.region, sagemaker=True)
        hourly = price.usd_per_hour
        rps = s.requests_per_second
        needed = max(1, math.ceil(inf.requests_per_second / rps))
        transforms = run = None
        invocations = getattr(section, "invocations_per_instance", None)
        fleet: dict = {}
        if kind == "realtime":
            lo, hi, reason = _realtime_range(w, section, needed, rps, reason)
            if llm_served(w) and uses_components(kind, itype):
                lo, reason, fleet = _copies(w, section, itype, degree, s, lo, hi, reason)
                if "invocations_per_instance" not in section.model_fields_set:  # the instance's figure, for reference
                    invocations = speed.scaling_target(load_serving(), rps)
            elif "invocations_per_instance" not in section.model_fields_set:
                invocations = speed.scaling_target(load_serving(), rps)
                reason += f"; scales out at {invocations} invocations a minute per instance (half its throughput, " \
                          "SageMaker's load-testing guide)"
        elif kind == "async":
            lo, hi = 0, section.max_instances  # scales to zero when the queue is empty
            # The endpoint config cannot start at zero (ProductionVariant InitialInstanceCount is at least 1).
            reason += ("; starts with 1 instance at deploy (InitialInstanceCount is at least 1), billed until the "
                       "scaling policy sees the empty queue and scales in (not in the monthly estimate)")
        else:
            lo = hi = section.instance_count
            transforms, reason = _transforms(section, s, serving, reason)
            run = _batch_run(w, section, hourly, rps, itype, serving)
        out[kind] = InferencePlan(
            kind, ML_PREFIX + itype.name, lo, hi, round(hourly * lo, 4), round(hourly * hi, 4), reason,
            local_nvme=itype.local_nvme, accelerator_kind=itype.accelerator.kind if itype.accelerator else None,
            schedule=getattr(section, "schedule", None),
            schedule_is_default=kind == "batch" and "schedule" not in section.model_fields_set,
            invocations_per_instance=invocations,
            why_kind=why_kind, requests_per_second_per_instance=round(rps, 3),
            requests_per_second_range=(round(s.low, 3), round(s.high, 3)), latency_ms=round(s.latency_ms, 1),
            ttft_ms=None if s.ttft_ms is None else round(s.ttft_ms, 1),
            tpot_ms=None if s.tpot_ms is None else round(s.tpot_ms, 1),
            concurrency=s.concurrency, throughput_basis=s.basis,
            usd_per_million=round(_usd_per_million(kind, w, hourly, rps, lo, needed), 2),
            instances_needed_at_peak=needed,
            data_capture_percent=getattr(section, "data_capture_percent", 0),
            max_concurrent_invocations_per_instance=async_client.invocations_per_instance(
                section, s.concurrency * s.copies) if kind == "async" else None,
            max_payload_mb=getattr(section, "max_payload_mb", None),
            max_concurrent_transforms=transforms if kind == "batch" else None,
            serving=serving,
            startup=plan_startup(kind, w.model.parameters_billion, itype, compressed=serving.compressed,
                                 engine_warmup_s=VLLM_ENGINE_WARMUP_S if serving.container == "vllm" else 0)
            if kind in ("realtime", "async") else None,
            candidates=table, left_out=tuple(left), batch_run=run, price_note=price.label, **fleet,
        )
    _one_layout_per_key(out)
    return hosts.drain_route(dict(sorted(out.items(), key=lambda kv: KINDS.index(kv[0]))))


def _usd_per_million(kind: str, w: Workload, hourly: float, rps: float, lo: int, needed: int) -> float:
    """At the stated traffic on the planned fleet (the minimum, or what the peak needs if more); a transform job at
    its instances' full throughput, as it runs until its input is done."""
    if kind == "batch":
        return est.usd_per_million(hourly, rps)
    return est.usd_per_million(hourly * max(lo, needed), w.inference.requests_per_second)


def _provisioned_reason(section: Serverless) -> str:
    pc, target = section.provisioned_concurrency, _provisioned_target(section)
    if not pc:
        return ""
    why = f"; {pc} requests kept warm (provisioned concurrency, no cold start up to it"
    if target:
        return why + f"), scaled up to {section.max_concurrency} at {target:.0%} utilization " \
                     "(SageMakerVariantProvisionedConcurrencyUtilization)"
    return why + ")"


def _provisioned_target(section: Serverless) -> float | None:
    """Provisioned concurrency scales from the configured value up to max_concurrency, tracking its utilization at
    SageMaker's load-testing safety factor (half busy), as real-time tracks half an instance's throughput."""
    pc = section.provisioned_concurrency
    return load_serving().scaling_safety_factor if pc and section.max_concurrency > pc else None


def _serverless_seconds(w: Workload) -> tuple[float, str]:
    """Seconds a serverless request is billed: inference.processing_seconds when set, else the model's own time on
    one vCPU (not the schema's 0.5 s default)."""
    if "processing_seconds" in w.inference.model_fields_set:
        return w.inference.processing_seconds, "billed at inference.processing_seconds (set by the config)"
    seconds, basis = speed.cpu_request_seconds(w)
    return seconds, f"billed at the model's own time: {basis}; set inference.processing_seconds to override"


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
    field = next((f for name, f in TARGET_FIELDS.items() if s.missed.startswith(name)), "inference.latency_ms")
    if field != "inference.latency_ms":
        value = getattr(w.inference, field.split(".")[1])
        return ConfigError(field, value, f"a larger target (ml.{itype.name}, {which}: {s.missed}), or fewer "
                                         "inference.generation.typical_input_tokens",
                           reason=f"no type and tensor-parallel degree meets it ({s.basis})")
    return ConfigError("inference.latency_ms", w.inference.latency_ms,
                       f"at least {math.ceil(s.latency_ms)} (ml.{itype.name}, {which}), or fewer "
                       f"inference.generation.typical_output_tokens{or_else}",
                       reason=f"one request takes about {s.latency_ms:,.0f} ms on ml.{itype.name} ({s.basis})")


def _realtime_range(w: Workload, section: Realtime, needed: int, rps: float, reason: str) -> tuple[int, int, str]:
    """Min from the config, or the availability floor; max from the peak, or the config's if it carries the peak
    (else refused)."""
    peak = w.inference.requests_per_second
    lo, why_min = availability_floor(w, section)
    if why_min:
        reason = f"{reason}; {why_min}"
    if "max_instances" not in section.model_fields_set:
        hi = max(lo, needed)
        return lo, hi, f"{reason}; max {hi} sized from the peak ({peak:g} req/s at {rps:.3g} req/s per instance)"
    if section.max_instances < needed:
        raise ConfigError("inference.realtime.max_instances", section.max_instances,
                          f"at least {needed}, or a lower inference.requests_per_second",
                          reason=f"inference.requests_per_second {peak:g} at peak needs {needed} instances at "
                                 f"{rps:.3g} req/s each")
    return lo, section.max_instances, reason


def _copies(w: Workload, section: Realtime, itype: InstanceType, degree: int | None, s: speed.Speed, lo: int, hi: int,
            reason: str) -> tuple[int, str, dict]:
    """The fleet in copies: per instance devices / TP, at the peak as many as its rate needs, at least the minimum
    instances' worth (their devices are paid for) or none where the traffic allows scaling to zero."""
    assert degree is not None and itype.accelerator is not None
    count, _ = devices(itype)
    per_copy = s.requests_per_second / s.copies
    needed = max(1, math.ceil(w.inference.requests_per_second / per_copy))
    fewest = copy_degrees(w, itype, named(s.quantization))[0]
    why_tp = f"TP={degree} is the fewest GPUs that hold the weights and a typical request's KV cache" \
        if degree == fewest else f"TP={degree} (TP={fewest} holds the model too, but costs more at the peak or misses " \
                                 "the targets: table below)"
    copies = f"{s.copies} cop{'y' if s.copies == 1 else 'ies'}"
    reason = (f"{reason}; {copies} of TP={degree} per ml.{itype.name} (Inference Components): {why_tp}, so "
              f"the {count} GPUs run {count} / {degree} = {copies}; {needed} copies at the peak "
              f"({w.inference.requests_per_second:g} req/s at {per_copy:.3g} req/s a copy)")
    if scales_to_zero(w, section):
        lo, least = 0, 0
        reason += (f"; min 0 copies and instances: {w.inference.traffic} traffic with no latency target scales to zero "
                   "(requests fail for the minutes a copy takes to start; set inference.realtime.min_instances to keep one)")
    else:
        least = lo * s.copies
        reason += f"; min {least} copies ({lo} instance(s) x {s.copies}: the minimum instances' GPUs are paid for)"
    invocations = speed.scaling_target(load_serving(), per_copy)
    reason += f"; copies scale at {invocations} invocations a minute per copy (half its throughput, SageMaker's " \
              "load-testing guide)"
    memory_mb = int(itype.memory_gib * 1024 * SERVING_HOST_MEMORY_SHARE / s.copies)
    return lo, reason, dict(copies_per_instance=s.copies, min_copies=least, max_copies=hi * s.copies,
                            copies_needed_at_peak=needed, invocations_per_copy=invocations,
                            memory_mb_per_copy=memory_mb)


# Host memory each copy reserves: an equal share of the instance's, less room for SageMaker's own agents. No published
# figure for that room was found; half keeps every copy placeable (the weights load through host memory, in shards).
SERVING_HOST_MEMORY_SHARE = 0.5


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
