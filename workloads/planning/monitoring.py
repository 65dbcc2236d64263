"""What each estate watches: the alarms, from the plan (pure Python, no CDK). The constructs create exactly these
(constructs_lib/training_monitor.py, constructs_lib/endpoints/serving_monitor.py) and the monthly estimate counts
them (estimates.monthly), so the bill and the templates cannot disagree.

Metric names and dimensions are catalog/metrics.yaml's, each with its page.
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..packaged import read_packaged_yaml
from .layout import ASYNC_FAILURE

# An endpoint's 5xx answers: Invocation5XXErrors is 1 or 0 a request, so its Average is the share that failed.
ERROR_RATE = 0.01
# FSx for Lustre is full when writes fail: warn with a tenth of it left.
FSX_FREE_SHARE = 0.10
# An accelerator below this average use for IDLE_HOURS is idle (a job that loads data runs far above it).
IDLE_UTILISATION = 5.0
IDLE_HOURS = 2
PERIOD_S = 300
# Three five-minute periods in a row: a blip (one slow request, one failed deploy) does not page anyone.
PERIODS = 3


@cache
def metric_facts() -> dict:
    return read_packaged_yaml(Path(__file__).parent.parent / "catalog" / "metrics.yaml")


@dataclass(frozen=True)
class AlarmSpec:
    """A CloudWatch alarm to create: its metric, statistic, threshold and what it means."""
    id: str  # construct ID, stable across plans
    metric: str  # catalog/metrics.yaml key, "NAMESPACE:MetricName"
    statistic: str
    comparison: str  # CloudWatch ComparisonOperator
    threshold: float
    periods: int
    why: str  # the alarm's description: what it means and what to do

    @property
    def period_s(self) -> int:
        return PERIOD_S


def container_logs(kind: str, *, components: bool = False) -> str:
    """The log group a kind's model container writes to, with its name's placeholder (metrics.yaml container_logs)."""
    return metric_facts()["container_logs"][invocation_kind(kind, components=components)]["group"]


def endpoint_alarms(kind: str, *, latency_ms: int | None, drained: bool = False,
                    components: bool = False, startup=None, drain_s: float = 0.0) -> tuple[AlarmSpec, ...]:
    """A hosted endpoint's alarms: failed requests, and the plan's latency target where it has one (real-time and
    serverless: an async request's latency includes its time in the queue); an async endpoint's queue outcomes
    (`drained`: the batch drains through it). `components`: it hosts an inference component, whose container logs
    are the component's own group."""
    logs = container_logs(kind, components=components).replace("{EndpointName}", "<endpoint>") \
        .replace("{InferenceComponentName}", "<inference component>")
    out = [AlarmSpec(f"{kind}Errors", "AWS/SageMaker:Invocation5XXErrors", "Average", "GreaterThanThreshold",
                     ERROR_RATE, PERIODS, f"More than {ERROR_RATE:.0%} of the {kind} endpoint's requests answered 5xx "
                     f"for {PERIODS * PERIOD_S // 60} minutes: see the container's logs in {logs}")]
    if latency_ms and kind in ("realtime", "serverless"):
        # ModelLatency is in microseconds; the documentation lists Average, not percentiles, so the mean is held to
        # the plan's p95 target: a mean above it means most requests miss it.
        out.append(AlarmSpec(f"{kind}Latency", "AWS/SageMaker:ModelLatency", "Average", "GreaterThanThreshold",
                             latency_ms * 1000.0, PERIODS, f"The {kind} endpoint's mean model latency is above the "
                             f"plan's target of {latency_ms} ms (inference.latency_ms) for "
                             f"{PERIODS * PERIOD_S // 60} minutes: add instances or a larger type"))
    if kind == "async":
        out += async_alarms(drained=drained)
        if startup is not None:
            out.append(oldest_request_alarm(startup, drain_s=drain_s))
    return tuple(out)


# Beyond the plan's start-up allowance, before a request waiting in the async queue means a stuck scale-from-zero:
# the wake-from-zero alarm's evaluation and SageMaker provisioning the instance (an assumption: AWS publishes no
# figure for either), and one request's own processing.
SCALE_OUT_MARGIN_S = 900


def oldest_request_alarm(startup, *, drain_s: float = 0.0) -> AlarmSpec:
    """The async queue's oldest request (metrics.yaml async_stuck_alarm): older than the plan's start-up allowance (the
    model's download plus its healthy-within timeout, workloads.planning.startup) plus SCALE_OUT_MARGIN_S, the instance
    that should serve it has not come up: scale-from-zero is stuck (no quota, InsufficientCapacity, the image or model
    failing its health check), or the fleet at its maximum drains slower than the queue fills. ExpiredRequests alone
    would say so only at the request's TTL (6 h for the batch drain). `drain_s`: the nightly drain's planned processing
    time (its records wait in the queue that long on a healthy fleet)."""
    allowance = startup.download_timeout_s + startup.startup_timeout_s
    drain = math.ceil(drain_s)
    threshold = allowance + drain + SCALE_OUT_MARGIN_S
    queued = f" plus {drain} s the nightly drain's records take to process on the planned fleet" if drain else ""
    key = metric_facts()["async_stuck_alarm"]
    return AlarmSpec("asyncOldestRequest", key, "Maximum", "GreaterThanThreshold", threshold, 1,
                     f"A request has waited in the async queue over {threshold} s: the plan's start-up allowance "
                     f"({startup.download_timeout_s} s model download + {startup.startup_timeout_s} s healthy within = "
                     f"{allowance} s){queued} plus {SCALE_OUT_MARGIN_S} s for the scale-out alarm, provisioning and the "
                     "request itself. Scale-from-zero is stuck (check the endpoint's events and "
                     "/aws/sagemaker/Endpoints/<AsyncEndpointName> for a quota, capacity or health-check failure) or "
                     "the fleet at its maximum drains slower than the queue fills (raise inference.async.max_instances)")


def async_alarms(*, drained: bool) -> tuple[AlarmSpec, ...]:
    """An asynchronous endpoint's queue outcomes (metrics.yaml async_failure_alarms): a queued request that failed or
    expired. InvokeEndpointAsync returns once the request is queued, so neither the caller nor the batch drain (a
    Distributed Map of InvokeEndpointAsync: its run ends Succeeded when the prefix is queued) learns of it otherwise.
    `drained`: the scheduled batch drains its prefix through this endpoint."""
    drain = (" The nightly batch drain's run ended Succeeded once it had queued the prefix: this alarm is the sign that "
             "records of it were not answered (their input keys are in the failure objects)." if drained else "")
    why = {
        "AWS/SageMaker:InvocationFailures":
            f"A request queued on the async endpoint failed (the container's error, its invocation timeout, or the "
            f"request or answer in S3): its error is under s3://<DatasetBucketName>/{ASYNC_FAILURE} and on the error "
            f"topic, its inference ID in /aws/sagemaker/Endpoints/<AsyncEndpointName> (data-log streams).{drain}",
        "AWS/SageMaker:ExpiredRequests":
            "A request waited in the async queue past its TTL (RequestTTLSeconds; the batch drain gives each the API's "
            "longest, 6 h) and was dropped unanswered: the fleet drains the queue too slowly for its backlog; raise "
            f"inference.async.max_instances or choose a faster type, then resend it.{drain}"}
    return tuple(AlarmSpec(f"async{key.split(':')[1]}", key, "Sum", "GreaterThanThreshold", 0, 1, why[key])
                 for key in metric_facts()["async_failure_alarms"])


def alarm_dimensions(spec: AlarmSpec, kind: str, *, components: bool) -> tuple[str, ...]:
    """The dimensions an endpoint alarm's metric is published with for this endpoint: the invocation metrics per its
    kind's row (invocation_dimensions), the others (the async queue's outcomes) with the metric's own."""
    fact = metric_facts()["metrics"][spec.metric]
    wanted = invocation_dimensions(kind, components=components)
    published = [fact["dimensions"], *fact.get("dimension_sets", ())]
    return wanted if any(sorted(wanted) == sorted(d) for d in published) else tuple(fact["dimensions"])


def invocation_kind(kind: str, *, components: bool) -> str:
    """The row of metrics.yaml invocation_dimensions an endpoint's requests, errors and latency are published under:
    an endpoint hosting inference components publishes them per InferenceComponentName, the rest per endpoint and
    variant (a component endpoint's alarms on EndpointName/VariantName would get no data and, notBreaching, never
    fire)."""
    return f"{kind}-components" if components else kind


def invocation_dimensions(kind: str, *, components: bool) -> tuple[str, ...]:
    return tuple(metric_facts()["invocation_dimensions"][invocation_kind(kind, components=components)])


def batch_alarms(*, drain: str = "") -> tuple[AlarmSpec, ...]:
    """A scheduled batch run that failed or ran out of time: its state machine's executions (the transform job runs
    inside it, .sync; or, `drain` "async", a Distributed Map sends the prefix to the async endpoint), so nobody learns
    of a nightly failure from an empty output prefix days later. The description sends the on-call engineer to the
    logs of what the run drove."""
    where = (", its Map Run, and the async endpoint's log group /aws/sagemaker/Endpoints/<AsyncEndpointName> and "
             "failure prefix" if drain == "async" else " and /aws/sagemaker/TransformJobs")
    what_ran = "batch drain through the async endpoint" if drain == "async" else "batch transform run"
    return tuple(AlarmSpec(f"batchRuns{what}", f"AWS/States:Executions{what}", "Sum", "GreaterThanThreshold", 0, 1,
                           f"A scheduled {what_ran} {verb}: see the state machine's execution "
                           f"(BatchStateMachineArn){where}")
                 for what, verb in (("Failed", "failed"), ("TimedOut", "ran past its 24 h timeout")))


def training_alarms(*, fsx_capacity_gib: int | None, gpu_nodes: bool) -> tuple[AlarmSpec, ...]:
    """FSx filling up; accelerators that stand idle (NVIDIA nodes, from the CloudWatch agent's roll-up)."""
    out = []
    if fsx_capacity_gib:
        free = fsx_capacity_gib * 2**30 * FSX_FREE_SHARE
        out.append(AlarmSpec("FsxFillingUp", "AWS/FSx:FreeDataStorageCapacity", "Sum", "LessThanThreshold", free,
                             PERIODS, f"FSx for Lustre has less than {FSX_FREE_SHARE:.0%} of its "
                             f"{fsx_capacity_gib:,} GiB free: release files (the bucket keeps exported ones) or grow "
                             "it (update-file-system StorageCapacity)"))
    if gpu_nodes:
        periods = IDLE_HOURS * 3600 // PERIOD_S
        out.append(AlarmSpec("AcceleratorsIdle", "CWAgent:nvidia_smi_utilization_gpu", "Average", "LessThanThreshold",
                             IDLE_UTILISATION, periods, f"The cluster's GPUs averaged under {IDLE_UTILISATION:g}% use "
                             f"for {IDLE_HOURS} hours while nodes ran: cancel stuck jobs, or let the nodes go"))
    return tuple(out)


def plan_alarms(training, inference: dict, *, latency_ms: int | None) -> tuple[AlarmSpec, ...]:
    """Every alarm the estate's monitors create, for the plan (what estimates.monthly counts). `latency_ms`: the
    workload's inference.latency_ms."""
    fsx = training.fsx.storage_capacity_gib if training.fsx else None
    out = list(training_alarms(fsx_capacity_gib=fsx, gpu_nodes=cluster_gpu_nodes(training)))
    drained = "batch" in inference and _drain(inference["batch"]) == "async"
    for kind in inference:
        out += batch_alarms(drain=_drain(inference[kind])) if kind == "batch" else \
            endpoint_alarms(kind, latency_ms=latency_ms, drained=drained, startup=inference[kind].startup,
                            drain_s=drain_seconds(inference) if drained else 0.0)
    return tuple(out)


def drain_seconds(inference: dict) -> float:
    """The nightly batch's processing time on the planned fleet, without its start-up (0: no batch run)."""
    run = getattr(inference.get("batch"), "batch_run", None)
    return run.hours * 3600 if run is not None else 0.0


def _drain(batch) -> str:
    return batch.serving.drain if getattr(batch, "serving", None) is not None else ""


def cluster_gpu_nodes(training) -> bool:
    """The Slurm nodes report their GPUs through the CloudWatch agent (HyperPod and SageMaker jobs do not run it)."""
    return training.orchestrator == "slurm" and training.accelerator_kind == "nvidia-gpu"


def training_dashboard(training) -> bool:
    """A training dashboard where there is something to draw: a Slurm cluster's nodes, or an FSx file system."""
    return training.orchestrator == "slurm" or training.fsx is not None


def dashboards(training, inference: dict) -> int:
    """The estate's dashboards: training (TrainStack) and serving (InferenceStack, with an endpoint or batch runs)."""
    return int(training_dashboard(training)) + int(bool(inference))
