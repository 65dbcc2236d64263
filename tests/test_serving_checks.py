"""Issue 41's Checks, planned from the workload files a user writes (examples/workloads/serving/), and the property
that every preset's and example's endpoint is the cheapest candidate that meets its targets at the fleet it deploys.

"The g5 fleet" is what the planner plans when the 7B chat model is forced onto ml.g5.2xlarge: two instances at minimum
(one per hosting zone) and ten at the stated 20 req/s; its month at minimum is the issue's $2,266. The chosen fleet is
held to 1.1x of it at both ends: at minimum (the month the plan headlines) and at the stated peak (the ranking's
basis). Before FP8 candidates, the 7B case planned 2 x ml.g6.12xlarge at $11.50/h: 0.76x the g5 fleet at the peak,
but 3.8x at minimum ($8,452 a month against $2,266).
"""

from __future__ import annotations

import pytest

from workloads import load, plan

from .conftest import ROOT

SERVING = ROOT / "examples" / "workloads" / "serving"
CHAT_7B, CHAT_13B, BERT = (str(SERVING / f"{n}.yaml") for n in ("chat-7b", "chat-13b", "bert-classifier"))
RATIO = 1.1
G5_MONTH = 2266  # the issue: the 7B chat model forced onto ml.g5.2xlarge, a month of the estate
THREE_P4D_USD_PER_HOUR = 75.75  # the issue: 3 x ml.p4d.24xlarge across two zones


def _chosen(ip):
    return next(c for c in ip.candidates if c.chosen)


def test_the_issue_cases_are_written_as_users_write_them():
    for path in (CHAT_7B, CHAT_13B, BERT):
        text = open(path).read()
        assert text.startswith("#") and "realtime: {}" in text, path  # the planner picks the type
        assert "instance_type" not in text, path


def test_the_g5_fleet_is_what_the_planner_plans_forced_onto_g5_2xlarge():
    forced = plan(load(CHAT_7B, {"inference.realtime.instance_type": "ml.g5.2xlarge"}))
    rt = forced.inference["realtime"]
    assert (rt.min_instances, rt.instances_needed_at_peak) == (2, 10)
    assert forced.monthly.usd_month == pytest.approx(G5_MONTH, abs=1)
    # the month at the stated peak is the ten instances', and the plan says so beside the minimum's
    assert forced.monthly.usd_month_at_peak == pytest.approx(G5_MONTH + 8 * 1.515 * 730, abs=1)


def test_the_7b_chat_case_is_within_1_1x_of_the_g5_fleet_at_minimum_and_at_the_peak():
    chosen_plan = plan(load(CHAT_7B))
    g5_plan = plan(load(CHAT_7B, {"inference.realtime.instance_type": "ml.g5.2xlarge"}))
    chosen, g5 = _chosen(chosen_plan.inference["realtime"]), _chosen(g5_plan.inference["realtime"])
    assert chosen.meets and chosen.usd_per_hour_at_minimum <= RATIO * g5.usd_per_hour_at_minimum, (chosen, g5)
    assert chosen.usd_per_hour_at_peak <= RATIO * g5.usd_per_hour_at_peak, (chosen, g5)
    assert chosen_plan.monthly.usd_month <= RATIO * g5_plan.monthly.usd_month
    assert chosen_plan.monthly.usd_month_at_peak <= RATIO * g5_plan.monthly.usd_month_at_peak
    rt = chosen_plan.inference["realtime"]
    assert rt.ttft_ms <= 500 and rt.tpot_ms <= 50 and rt.min_instances == 2


def test_the_7b_chat_case_served_as_trained_is_within_1_1x_of_the_g5_fleet_at_the_peak():
    """quantization: none (bf16 only): the cheapest fleet at the stated peak is still within 1.1x of the g5 fleet there;
    at minimum it is dearer (fewer, larger instances), which the plan shows beside it."""
    rt = plan(load(CHAT_7B, {"inference.generation.quantization": "none"})).inference["realtime"]
    g5 = _chosen(plan(load(CHAT_7B, {"inference.realtime.instance_type": "ml.g5.2xlarge",
                                     "inference.generation.quantization": "none"})).inference["realtime"])
    chosen = _chosen(rt)
    assert not chosen.quantization and chosen.usd_per_hour_at_peak <= RATIO * g5.usd_per_hour_at_peak


def test_the_13b_chat_case_is_within_1_1x_of_three_p4d_at_the_peak():
    rt = plan(load(CHAT_13B)).inference["realtime"]
    chosen = _chosen(rt)
    assert chosen.usd_per_hour_at_peak <= RATIO * THREE_P4D_USD_PER_HOUR, chosen
    assert rt.ttft_ms <= 500 and rt.tpot_ms <= 50 and rt.min_instances == 2


def test_the_bert_case_serves_on_cpu():
    from workloads.catalog import load_catalog

    rt = plan(load(BERT)).inference["realtime"]
    assert load_catalog().get(rt.instance_type).accelerator is None, rt.instance_type
    assert rt.usd_per_hour_max <= RATIO * min(c.usd_per_hour_at_peak for c in rt.candidates if c.meets)
    # about a third of the issue's 2 x ml.g4dn.xlarge ($1.47/h)
    assert rt.usd_per_hour_max < 1.47 / 2


WORKLOADS = ["small", "intermediate", "huge", *sorted(str(p.relative_to(ROOT)) for p in
                                                      (ROOT / "examples" / "workloads").rglob("*.yaml"))]


def _key(kind: str, c) -> tuple[float, float]:
    return (c.usd_per_hour_at_peak, c.usd_per_hour_at_minimum) if kind != "batch" else (c.usd_per_million, 0.0)


@pytest.mark.parametrize("workload", WORKLOADS)
def test_every_endpoint_is_the_cheapest_candidate_meeting_its_targets_at_the_fleet_it_deploys(workload):
    p = plan(load(workload))
    seen = 0
    for kind, ip in p.inference.items():
        if not ip.candidates:
            continue
        seen += 1
        chosen = _chosen(ip)
        assert chosen.meets and chosen.instance_type == ip.instance_type, (kind, chosen)
        # the candidate is the fleet deployed: its minimum and the instances the peak needs are the plan's
        assert chosen.needed_at_peak == ip.instances_needed_at_peak, (kind, chosen)
        if kind != "batch":
            assert chosen.instances_at_minimum == ip.min_instances, (kind, chosen)
            assert chosen.usd_per_hour_at_minimum == pytest.approx(ip.usd_per_hour_min, abs=1e-3), (kind, chosen)
            assert chosen.instances_at_peak == max(ip.min_instances, ip.instances_needed_at_peak) <= ip.max_instances
        assert chosen.quantization == (ip.serving.quantization if ip.serving else "")
        # no candidate that meets the targets is cheaper at the peak, or as cheap there and cheaper at minimum
        for c in ip.candidates:
            if c.meets:
                assert _key(kind, c) >= (round(_key(kind, chosen)[0], 2) - 0.005, 0.0), (kind, c, chosen)
                if round(_key(kind, c)[0], 2) == round(_key(kind, chosen)[0], 2):
                    assert c.usd_per_hour_at_minimum >= chosen.usd_per_hour_at_minimum - 0.005, (kind, c, chosen)
    assert seen or not p.inference
