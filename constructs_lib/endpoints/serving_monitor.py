"""The estate's serving dashboard and alarms: for each hosted endpoint its requests, failures, latency against the
plan's target, an async endpoint's queue, and the hosting instances' use; the alarms of workloads.planning.monitoring, to
the estate's alarm topic. The widgets and alarms live in the InferenceStack with the endpoints they watch, so an
endpoint's name never has to be exported (an export in use blocks replacing what it names)."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sns as sns
from constructs import Construct

from workloads.planning.monitoring import alarm_dimensions, batch_alarms, endpoint_alarms, invocation_dimensions

from ..metrics import alarm, metric
from .scaling import VARIANT


@dataclass(frozen=True)
class WatchedEndpoint:
    kind: str  # realtime | serverless | async
    endpoint_name: str  # a token
    accelerated: bool  # GPU instances (their use is graphed)
    component_name: str | None = None  # a token: the endpoint hosts this inference component
    startup: object = None  # async: the plan's Startup (download and healthy-within), the stuck-queue alarm's basis


class ServingMonitor(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, endpoints: list[WatchedEndpoint], topic: sns.ITopic,
                 latency_ms: int | None, batch_state_machine_arn: str | None = None, batch_drain: str = "",
                 batch_drain_s: float = 0.0) -> None:
        """`batch_state_machine_arn`: the scheduled batch runs' state machine, if the estate has them; `batch_drain`:
        "async" where it drains the batch through the async endpoint instead of a transform job; `batch_drain_s`: then the
        drain's planned processing seconds (its records' time in the queue)."""
        super().__init__(scope, construct_id)
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard")
        self.alarms: list[cloudwatch.Alarm] = []
        if batch_state_machine_arn is not None:
            runs = {"StateMachineArn": batch_state_machine_arn}
            made = [alarm(self, s, runs, topic=topic) for s in batch_alarms(drain=batch_drain)]
            self.alarms += made
            self.dashboard.add_widgets(
                cloudwatch.GraphWidget(title="batch: scheduled runs", width=16, left=[
                    metric(f"AWS/States:Executions{what}", runs, statistic="Sum", label=what.lower(), period_s=3600)
                    for what in ("Succeeded", "Failed", "TimedOut")]),
                cloudwatch.AlarmStatusWidget(title="batch: alarms", width=8, alarms=made))
        for e in endpoints:
            dims = {"EndpointName": e.endpoint_name, "VariantName": VARIANT}  # the instances' metrics
            # Requests, errors and latency: per component where the endpoint hosts one (catalog/metrics.yaml).
            values = {"EndpointName": e.endpoint_name, "VariantName": VARIANT, "InferenceComponentName": e.component_name}
            components = e.component_name is not None
            calls = {d: values[d] for d in invocation_dimensions(e.kind, components=components)}
            specs = endpoint_alarms(e.kind, latency_ms=latency_ms, drained=batch_drain == "async",
                                    components=components, startup=e.startup if e.kind == "async" else None,
                                    drain_s=batch_drain_s)
            made = [alarm(self, s, {d: values[d] for d in alarm_dimensions(s, e.kind, components=components)},
                          topic=topic) for s in specs]
            self.alarms += made
            invocations = [] if e.kind == "async" else [  # not published for async endpoints
                metric("AWS/SageMaker:Invocations", calls, statistic="Sum", label="requests")]
            latency = metric("AWS/SageMaker:ModelLatency", calls, statistic="Average", label="model latency (us)")
            widgets: list[cloudwatch.IWidget] = [
                cloudwatch.GraphWidget(title=f"{e.kind}: requests and failures", width=8, left=[
                    *invocations, metric("AWS/SageMaker:Invocation4XXErrors", calls, statistic="Sum", label="4xx"),
                    metric("AWS/SageMaker:Invocation5XXErrors", calls, statistic="Sum", label="5xx")]),
                cloudwatch.GraphWidget(title=f"{e.kind}: model latency", width=8, left=[latency],
                                       left_annotations=[cloudwatch.HorizontalAnnotation(
                                           value=latency_ms * 1000.0, label="the plan's target")]
                                       if latency_ms and e.kind != "async" else None),
                cloudwatch.AlarmStatusWidget(title=f"{e.kind}: alarms", width=8, alarms=made)]
            if e.kind == "async":
                queue = {"EndpointName": e.endpoint_name}
                widgets.append(cloudwatch.GraphWidget(title="async: backlog", width=12, left=[
                    metric("AWS/SageMaker:ApproximateBacklogSize", queue, statistic="Average", label="queued"),
                    metric("AWS/SageMaker:HasBacklogWithoutCapacity", queue, statistic="Maximum",
                           label="queued with no instance")], right=[
                    metric("AWS/SageMaker:ApproximateAgeOfOldestRequest", queue, statistic="Maximum",
                           label="oldest request (s)")]))
                outcomes = {"EndpointName": e.endpoint_name, "VariantName": VARIANT}
                widgets.append(cloudwatch.GraphWidget(title="async: requests failed or expired in the queue", width=12,
                                                      left=[metric(f"AWS/SageMaker:{name}", outcomes, statistic="Sum",
                                                                   label=label) for name, label in (
                                                          ("InvocationFailures", "failed"),
                                                          ("ExpiredRequests", "expired (TTL)"),
                                                          ("RequestDownloadFailures", "request not read from S3"),
                                                          ("ResponseUploadFailures", "answer not written to S3"),
                                                          ("NotificationFailures", "notification not sent"))]))
            if e.kind != "serverless":  # a serverless endpoint has no instances of its own
                use = [metric("/aws/sagemaker/Endpoints:CPUUtilization", dims, statistic="Average", label="CPU %"),
                       metric("/aws/sagemaker/Endpoints:MemoryUtilization", dims, statistic="Average",
                              label="memory %")]
                if e.accelerated:
                    use += [metric("/aws/sagemaker/Endpoints:GPUUtilization", dims, statistic="Average",
                                   label="GPU %"),
                            metric("/aws/sagemaker/Endpoints:GPUMemoryUtilization", dims, statistic="Average",
                                   label="GPU memory %")]
                # SampleCount over a minute is the number of instances reporting (SageMaker async FAQ).
                count = metric("/aws/sagemaker/Endpoints:CPUUtilization", dims, statistic="SampleCount",
                               label="instances", period_s=60)
                widgets.append(cloudwatch.GraphWidget(title=f"{e.kind}: instances and their use", width=12,
                                                      left=use, right=[count]))
            if e.component_name is not None and e.accelerated:  # each copy's use of the GPUs it reserved
                copy = {"InferenceComponentName": e.component_name}
                widgets.append(cloudwatch.GraphWidget(title=f"{e.kind}: model copies' GPU use", width=12, left=[
                    metric(f"/aws/sagemaker/InferenceComponents:{name}Normalized", copy, statistic="Average",
                           label=f"{label} % of reserved") for name, label in (
                        ("GPUUtilization", "GPU"), ("GPUMemoryUtilization", "GPU memory"),
                        ("MemoryUtilization", "memory"))]))
            self.dashboard.add_widgets(*widgets)
