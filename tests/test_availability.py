"""Availability (issue 32): a real-time endpoint with a latency target gets two instances, one for each of the two
hosting zones, unless inference.realtime.min_instances is set; the plan says why and cites SageMaker's best practice.
Before: 7B at 20 req/s planned min = max = 1 instance, one zone."""

from __future__ import annotations

import pytest

from workloads import load, plan
from workloads.planning.fleet import AVAILABILITY_SOURCE

# SageMaker Developer Guide, "Best practices for deploying models on SageMaker Hosting Services" (section "Deploy
# Multiple Instances Across Availability Zones"): "we strongly recommended that you deploy multiple instances for each
# production endpoint"; and a VPC endpoint wants "at least two Subnets, each in a different Availability Zone".
BEST_PRACTICE_URL = "https://docs.aws.amazon.com/sagemaker/latest/dg/deployment-best-practices.html"
# The case, with the real-time section listed but no min_instances.
SEVEN_B = {"model.parameters_billion": "7", "inference.requests_per_second": "20", "inference.latency_ms": "2500",
           "inference.realtime": "{}", "inference.async": "null", "inference.batch": "null",
           "inference.artifact.format": "huggingface"}


def _realtime(overrides: dict[str, str]):
    p = plan(load("intermediate", overrides))
    return p, p.inference["realtime"]


def test_a_latency_target_gets_two_instances_across_the_two_hosting_zones():
    p, rt = _realtime(SEVEN_B)
    assert rt.min_instances == 2 and rt.max_instances >= 2
    assert len(set(p.hosting_zones)) == 2
    assert "min 2: a latency target" in rt.reason and BEST_PRACTICE_URL in rt.reason
    assert BEST_PRACTICE_URL in AVAILABILITY_SOURCE


@pytest.mark.parametrize("target", ["inference.time_to_first_token_ms", "inference.time_per_output_token_ms"])
def test_an_llm_token_target_is_a_latency_target_too(target):
    overrides = {k: v for k, v in SEVEN_B.items() if k != "inference.latency_ms"}
    _, rt = _realtime({**overrides, target: "60000"})
    assert rt.min_instances == 2


def test_min_instances_one_is_kept_when_set():
    _, rt = _realtime({**SEVEN_B, "inference.realtime": "{min_instances: 1}"})
    assert rt.min_instances == 1 and "min 2" not in rt.reason


def test_no_latency_target_keeps_one_instance():
    overrides = {k: v for k, v in SEVEN_B.items() if k != "inference.latency_ms"}
    _, rt = _realtime(overrides)
    assert rt.min_instances == 1


def test_a_max_of_one_says_it_leaves_no_second_instance():
    _, rt = _realtime({**SEVEN_B, "inference.requests_per_second": "1", "inference.realtime": "{max_instances: 1}"})
    assert rt.min_instances == rt.max_instances == 1 and "allows no second instance" in rt.reason


def test_the_floor_is_what_the_template_deploys(synth):
    """The endpoint's initial count and scaling minimum are the plan's two."""
    s = synth("intermediate", SEVEN_B)
    [config] = s.resources("InferenceStack", "AWS::SageMaker::EndpointConfig").values()
    [variant] = config["Properties"]["ProductionVariants"]
    [target] = s.resources("InferenceStack", "AWS::ApplicationAutoScaling::ScalableTarget").values()
    assert variant["InitialInstanceCount"] == target["Properties"]["MinCapacity"] == 2
