"""Every synthesized async endpoint lets SageMaker's client hand an instance the concurrency the plan sized it for, and
scales out on a backlog beyond it (catalog/async_inference.yaml).

Before: MaxConcurrentInvocationsPerInstance was 4 on every async endpoint while the vLLM server behind it was sized for
128-217 sequences at once, so the server ran at batch 4 and neither the plan's throughput nor its nightly drain time
was reachable; the scaling target of 5 in the backlog (which counts requests in flight) scaled out at 5 requests an
instance.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import botocore
import pytest

from workloads import load, plan
from workloads.planning import async_client

from .conftest import SERVING_VARIANTS, VARIANTS

MODEL = Path(botocore.__file__).parent / "data" / "sagemaker" / "2017-07-24" / "service-2.json.gz"


def _async_resources(template: dict) -> tuple[list[dict], list[dict]]:
    configs = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::EndpointConfig"
               and "AsyncInferenceConfig" in r["Properties"]]
    policies = [r["Properties"] for r in template["Resources"].values()
                if r["Type"] == "AWS::ApplicationAutoScaling::ScalingPolicy"
                and r["Properties"].get("TargetTrackingScalingPolicyConfiguration", {})
                .get("CustomizedMetricSpecification", {}).get("MetricName") == "ApproximateBacklogSizePerInstance"]
    return configs, policies


def _check(template: dict, ip, where: str) -> None:
    configs, policies = _async_resources(template)
    if ip is None:
        assert not configs, f"{where}: an async endpoint the plan does not have"
        return
    wanted = ip.concurrency * (ip.copies_per_instance or 1)
    limits = async_client.facts()["max_concurrent_invocations"]
    wanted = max(limits["min"], min(limits["max"], wanted))
    config, = configs
    sent = config["AsyncInferenceConfig"]["ClientConfig"]["MaxConcurrentInvocationsPerInstance"]
    assert sent == ip.max_concurrent_invocations_per_instance == wanted, (where, sent, wanted)
    policy, = policies
    assert policy["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] == sent, where


@pytest.mark.parametrize("variant", SERVING_VARIANTS)
def test_every_async_endpoint_is_sent_the_concurrency_it_is_planned_for(synth, variant):
    workload, overrides = VARIANTS[variant]
    template = synth(workload, overrides).templates["InferenceStack"]
    _check(template, plan(load(workload, overrides or {})).inference.get("async"), variant)


def test_every_teams_async_endpoint_too(teams_synth):
    from workloads.planning.teams import load_teams

    from .conftest import TEAMS_FILE

    seen = 0
    for stamped in load_teams(str(TEAMS_FILE)):
        name = stamped.team.name
        inference = teams_synth.templates[name].get("InferenceStack")
        if inference is None:
            continue
        ip = stamped.plan.inference.get("async")
        _check(inference, ip, name)
        seen += ip is not None
    assert seen, "no team has an async endpoint: the walk found none"


def test_the_range_is_the_apis():
    shapes = json.loads(gzip.open(MODEL).read())["shapes"]
    member = shapes["AsyncInferenceClientConfig"]["members"]["MaxConcurrentInvocationsPerInstance"]
    shape = shapes[member["shape"]]
    limits = async_client.facts()["max_concurrent_invocations"]
    assert (shape["min"], shape["max"]) == (limits["min"], limits["max"])


def test_an_llm_async_endpoint_takes_the_servers_batch_and_a_set_value_wins():
    a = plan(load("huge")).inference["async"]
    assert a.max_concurrent_invocations_per_instance == a.concurrency > 4
    a = plan(load("huge", {"inference.async.max_concurrent_invocations_per_instance": "8"})).inference["async"]
    assert a.max_concurrent_invocations_per_instance == 8
