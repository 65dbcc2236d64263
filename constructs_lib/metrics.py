"""CloudWatch metrics and alarms from the sourced table (workloads/catalog/metrics.yaml): one helper for the
training and serving monitors. A metric, dimension set or statistic the table does not list is refused here, at
synthesis, rather than found on a dashboard that never draws."""

from __future__ import annotations

from functools import cache

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from workloads.planning.monitoring import PERIOD_S, AlarmSpec, metric_facts


def metric(key: str, dimensions: dict[str, str], *, statistic: str, label: str | None = None,
           period_s: int = PERIOD_S) -> cloudwatch.Metric:
    fact = metric_facts()["metrics"].get(key)
    assert fact is not None, f"{key}: not in workloads/catalog/metrics.yaml"
    published = [fact["dimensions"], *fact.get("dimension_sets", ())]
    assert any(sorted(dimensions) == sorted(d) for d in published), f"{key}: dimensions {sorted(dimensions)}, " \
                                                                    f"published with {published}"
    assert statistic in fact["statistics"], f"{key}: {statistic} is not among {fact['statistics']}"
    namespace, name = key.rsplit(":", 1)
    return cloudwatch.Metric(namespace=namespace, metric_name=name, dimensions_map=dimensions, statistic=statistic,
                             label=label, period=_period(period_s))


@cache
def _period(seconds: int) -> Duration:
    """One Duration per length, shared: a Duration never changes, and each new one is a round trip to jsii's node
    process (a team's estate makes about thirty metrics, issue 43)."""
    return Duration.seconds(seconds)


def alarm(scope: Construct, spec: AlarmSpec, dimensions: dict[str, str], *, topic: sns.ITopic) -> cloudwatch.Alarm:
    """The plan's alarm (workloads.planning.monitoring) on its metric, notifying the estate's topic when it fires and ends;
    no data is not a breach (a cluster with no nodes, an endpoint with no traffic)."""
    made = cloudwatch.Alarm(
        scope, spec.id, metric=metric(spec.metric, dimensions, statistic=spec.statistic, period_s=spec.period_s),
        threshold=spec.threshold, evaluation_periods=spec.periods, alarm_description=spec.why,
        comparison_operator=getattr(cloudwatch.ComparisonOperator, _OPERATORS[spec.comparison]),
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING)
    made.add_alarm_action(actions.SnsAction(topic))
    made.add_ok_action(actions.SnsAction(topic))
    return made


_OPERATORS = {"GreaterThanThreshold": "GREATER_THAN_THRESHOLD", "LessThanThreshold": "LESS_THAN_THRESHOLD"}
