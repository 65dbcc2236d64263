"""A plan an expert would sign (issue 13, first part): real-time sized to the load, reasons that follow
from the inputs, reserved capacity priced as what it is, team plans within the team's families, and LLM
serving with room for the KV cache at a valid tensor-parallel degree."""

from __future__ import annotations

import math

import pytest

from workloads import ConfigError, load, plan
from workloads.planning.teams import load_teams

from .conftest import CAPACITY_BLOCK, TEAMS_FILE

NO_KINDS = {"inference.realtime": "null", "inference.serverless": "null", "inference.batch": "null"}


def test_a_configured_maximum_that_cannot_carry_the_peak_is_refused_naming_both_fields():
    with pytest.raises(ConfigError) as err:
        plan(load("huge", {"inference.requests_per_second": "200"}))
    assert err.value.field == "inference.realtime.max_instances"
    assert "inference.requests_per_second 200" in str(err.value) and "at least" in err.value.allowed


def test_an_open_maximum_is_sized_from_the_peak():
    p = plan(load("small", {"inference.realtime": "{min_instances: 1}", "inference.requests_per_second": "20000"}))
    rt = p.inference["realtime"]
    assert rt.requests_per_second_per_instance == 4 * 686.0  # ml.c5.xlarge: 4 vCPUs at the measured rate
    assert rt.max_instances == rt.instances_needed_at_peak == 8  # 20000 req/s at 2744 req/s per instance
    assert "sized from the peak" in rt.reason


@pytest.mark.parametrize("overrides, says, never", [
    ({"inference.traffic": "spiky", "inference.latency_ms": "100"}, "spiky traffic, but a 100 ms latency target",
     "steady"),
    ({"inference.traffic": "steady"}, "steady traffic", "spiky"),
    ({"inference.traffic": "spiky", "inference.payload_mb": "5"}, "exceed serverless's 4 MB", "steady"),
])
def test_the_kind_reason_follows_the_traffic(overrides, says, never):
    why = plan(load("small", {**NO_KINDS, **overrides})).inference["realtime"].why_kind
    assert says in why and never not in why


def test_classic_ml_plans_do_not_cite_the_bert_run():
    p = plan(load("small"))
    assert p.calibration == ()
    assert not any("trn1" in line for line in p.training.estimate.assumptions)


def test_the_seeds_p4d_price_is_labelled_as_the_price_of_its_time():
    lines = plan(load("huge")).calibration
    p4d = next(line for line in lines if "p4d" in line)
    assert "$37.69/h" in p4d and "at the time of the run" in p4d and "$25.25/h today" in p4d


def test_a_capacity_block_is_not_priced_as_on_demand():
    e = plan(load("huge", CAPACITY_BLOCK)).training.estimate
    # Priced at the block's own rate (p5.48xlarge $39.33/h in US East (Ohio), ec2-capacity-blocks-pricing), in
    # whole days.
    assert e.usd_per_hour == pytest.approx(39.33 * 16)
    assert e.usd_total == pytest.approx(math.ceil(e.hours / 24) * 24 * e.usd_per_hour)
    assert "EC2 Capacity Block" in e.price_note and "whole days" in e.price_note


def test_team_plans_compare_only_allowed_families():
    vision = next(s for s in load_teams(str(TEAMS_FILE)) if s.team.name == "vision")
    allowed = set(vision.team.allowed_instance_families)
    assert {c.instance_type.split(".")[0] for c in vision.plan.training.candidates} <= allowed
    assert not any("would cost" in d and "p5" in d for d in vision.plan.training.decisions)
    assert {i.instance_type.removeprefix("ml.").split(".")[0] for i in vision.plan.inference.values()
            if i.instance_type} <= allowed


def test_llm_serving_leaves_room_for_the_kv_cache():
    """13B fp16 is 24 GiB: it fits inf2.xlarge's 32 GiB only without its 12.5 GiB KV cache at 4 x 4096 tokens."""
    sized = {"model.parameters_billion": "13", "model.attention_heads": "40", "inference.realtime": "{min_instances: 1}"}
    # Left to choose, a GPU wins now: vLLM pages its cache, so a request holds its own context, not max_total_tokens.
    assert plan(load("intermediate", sized)).inference["realtime"].accelerator_kind == "nvidia-gpu"
    p = plan(load("intermediate", {**sized, "inference.realtime": "{min_instances: 1, instance_type: ml.inf2.24xlarge}"}))
    rt = p.inference["realtime"]
    # Neuron pads 40 heads to 48 over all 12 cores, and the cache with them (3.125 GiB a sequence becomes 3.75: NxD
    # Inference, tests/test_neuron_hosting.py); the batch is what the cache room and the published cap allow.
    assert rt.instance_type == "ml.inf2.24xlarge" and rt.serving.tensor_parallel == 12
    assert any(f"KV cache {rt.concurrency * 3.125 * 48 / 40:.1f} GiB" in n for n in rt.serving.notes)
    shorter = plan(load("intermediate", {**sized, "inference.generation.max_total_tokens": "2048",
                                         "inference.generation.max_input_tokens": "1024",
                                         "inference.generation.max_batch_size": "1",
                                         # FP8 on an L4 would undercut it: the Neuron cache rule is what this holds
                                         "inference.generation.quantization": "none"}))
    assert shorter.inference["realtime"].instance_type == "ml.inf2.xlarge"  # 1.6 GiB of cache fits
