"""The estate's training dashboard and alarms: the run's own loss, speed and MFU (the trainer's EMF lines), the Slurm
cluster's nodes and GPUs (what the CloudWatch agent on each node reports, rolled up per cluster: node_metrics.py) and
FSx for Lustre's throughput and free space; the alarms of workloads.planning.monitoring (FSx filling up, idle GPUs),
to the estate's alarm topic."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sns as sns
from constructs import Construct

from workloads.planning.monitoring import PERIOD_S, training_alarms

from .metrics import alarm, metric


class TrainingMonitor(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, topic: sns.ITopic, cluster: str | None,
                 workload: str | None, gpu_nodes: bool, file_system_id: str | None, fsx_capacity_gib: int | None) -> None:
        """`cluster`: the value of the Cluster dimension the nodes' agent publishes with (a Slurm cluster), else
        None; `workload`: the trainer's Workload dimension, where its metrics reach CloudWatch, else None;
        `gpu_nodes`: the nodes report NVIDIA GPUs."""
        super().__init__(scope, construct_id)
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard")
        if workload is not None:  # the run itself: the first row of the page
            self.dashboard.add_widgets(*_run_widgets(workload))
        specs = {s.metric: s for s in training_alarms(fsx_capacity_gib=fsx_capacity_gib if file_system_id else None,
                                                       gpu_nodes=gpu_nodes and cluster is not None)}
        self.alarms: list[cloudwatch.Alarm] = []
        if cluster is not None:
            nodes = {"Cluster": cluster}
            # SampleCount over a minute: the nodes whose agent reported (one memory sample each a minute).
            widgets: list[cloudwatch.IWidget] = [cloudwatch.GraphWidget(title="cluster: nodes running", width=8, left=[
                metric("CWAgent:mem_used_percent", nodes, statistic="SampleCount", label="nodes", period_s=60)])]
            if gpu_nodes:
                idle = alarm(self, specs["CWAgent:nvidia_smi_utilization_gpu"], nodes, topic=topic)
                self.alarms.append(idle)
                widgets += [
                    cloudwatch.GraphWidget(title="cluster: GPU use %", width=8, left=[
                        metric("CWAgent:nvidia_smi_utilization_gpu", nodes, statistic="Average", label="average"),
                        metric("CWAgent:nvidia_smi_utilization_gpu", nodes, statistic="Minimum", label="least used")],
                        left_annotations=[cloudwatch.HorizontalAnnotation(
                            value=specs["CWAgent:nvidia_smi_utilization_gpu"].threshold, label="idle below")]),
                    cloudwatch.GraphWidget(title="cluster: GPU memory", width=8, left=[
                        metric("CWAgent:nvidia_smi_utilization_memory", nodes, statistic="Average",
                               label="memory busy %")], right=[
                        metric("CWAgent:nvidia_smi_memory_used", nodes, statistic="Maximum", label="used (MiB)")])]
            self.dashboard.add_widgets(*widgets)
        if file_system_id is not None:
            fs = {"FileSystemId": file_system_id}
            fill = alarm(self, specs["AWS/FSx:FreeDataStorageCapacity"], fs, topic=topic)
            self.alarms.append(fill)
            # Sum over the period / seconds = bytes a second (the FSx guide's throughput formula).
            throughput = cloudwatch.MathExpression(
                expression=f"(r + w) / {PERIOD_S}", label="client throughput (bytes/s)", using_metrics={
                    "r": metric("AWS/FSx:DataReadBytes", fs, statistic="Sum"),
                    "w": metric("AWS/FSx:DataWriteBytes", fs, statistic="Sum")})
            self.dashboard.add_widgets(
                cloudwatch.GraphWidget(title="FSx for Lustre: throughput", width=8, left=[throughput]),
                cloudwatch.GraphWidget(title="FSx for Lustre: free space", width=8, left=[
                    metric("AWS/FSx:FreeDataStorageCapacity", fs, statistic="Sum", label="free (bytes)")]),
                cloudwatch.AlarmStatusWidget(title="training: alarms", width=8, alarms=self.alarms))


def _run_widgets(workload: str) -> list[cloudwatch.IWidget]:
    """The trainer's own metrics (its EMF lines, examples/slurm/evaluation.py) for the run named `workload`."""
    run = {"Workload": workload}

    def m(name: str, label: str, statistic: str = "Average") -> cloudwatch.Metric:
        return metric(f"MLEstate/Training:{name}", run, statistic=statistic, label=label, period_s=60)
    return [cloudwatch.GraphWidget(title="training: loss", width=8, left=[m("Loss", "training"),
                                                                          m("EvalLoss", "held out")]),
            cloudwatch.GraphWidget(title="training: tokens/s", width=8, left=[m("TokensPerSecond", "tokens/s")],
                                   right=[m("SkippedSteps", "skipped steps (non-finite)", "Maximum")]),
            cloudwatch.GraphWidget(title="training: MFU, measured and planned", width=8,
                                   left=[m("MFU", "measured"), m("PlannedMFU", "planned")])]
