"""Estimates as calibrated ranges (issue 13): per accelerator and model-size band, the low, likely (median)
and high MFU of published training runs, each with its source; classic ML from a sourced CPU throughput.
The published figures below are the fixtures: the catalog must hold them as their sources state them."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

import pytest

from workloads.planning import estimates as est
from workloads import load, plan
from workloads.catalog import load_catalog, load_utilisation

from .conftest import ROOT, TRN2

CAT = load_catalog()
U = load_utilisation()


def _figures(accelerator: str, band: str) -> dict[str, float]:
    return {m.what: m.value for m in U.mfu[(accelerator, band)]}


def test_neuron_published_70b_throughput_gives_the_trainium_figure():
    """Neuron trn1 training performance (May 2025): Llama-3.1-70B, 32 x trn1.32xlarge, seq 8192, 7.51 seq/s."""
    tokens_per_second = 7.51 * 8192
    mfu = 6 * 70.6e9 * tokens_per_second / (32 * CAT.types["trn1.32xlarge"].peak_tflops * 1e12)
    assert _figures("Trainium", "large") == {"Llama-3.1-70B on 32 x trn1.32xlarge, seq 8192": pytest.approx(mfu, abs=5e-4)}
    assert {m.source for m in U.mfu[("Trainium", "large")]} == {"neuron-trn1-training-performance"}


@pytest.mark.parametrize("accelerator, what, published", [
    ("NVIDIA A100 40GB", "MPT-70B on 128 x A100 40GB, seq 2048", 0.4891),   # llm-foundry A100 40GB table
    ("NVIDIA A100 40GB", "MPT-70B on 64 x A100 40GB, seq 2048", 0.3587),
    ("NVIDIA H100 80GB", "MPT-70B on 64 x H100, seq 2048", 0.4257),         # llm-foundry H100 80GB BF16 table
    ("NVIDIA H100 80GB", "MPT-7B on 8 x H100, seq 2048", 0.4644),
])
def test_llm_foundry_figures_are_recorded_as_published(accelerator, what, published):
    band = "large" if what.startswith(("MPT-70B", "MPT-30B", "MPT-13B")) else "small"
    assert _figures(accelerator, band)[what] == published
    assert all(m.source in CAT.sources for band_figures in U.mfu.values() for m in band_figures)


def test_the_seeds_bert_calibration_is_one_of_the_trainium_figures():
    bert = est.trainium_utilisation(CAT.types["trn1.32xlarge"], CAT.types["p4d.24xlarge"])
    assert _figures("Trainium", "small")["the seeds' BERT fine-tune, relative to A100 at 40%"] == pytest.approx(bert, abs=1e-4)


def test_huge_on_trainium_is_a_range_around_the_70b_measurement():
    e = plan(load("huge", TRN2)).training.estimate
    assert e.utilisation == pytest.approx(0.2679)
    low, high = e.hours_range
    assert low < e.hours < high and e.usd_total_range[0] < e.usd_total < e.usd_total_range[1]
    assert "Llama-3.1-70B on 32 x trn1.32xlarge" in e.basis and "neuron-trn1-training-performance" in e.basis


def test_a_band_with_one_figure_takes_the_reference_spread():
    r = est.utilisation_range(CAT.types["trn1.32xlarge"], 70, U)
    ref = sorted(_figures("NVIDIA A100 40GB", "large").values())
    median = statistics.median(ref)
    assert r.low == pytest.approx(0.2679 * ref[0] / median) and r.high == pytest.approx(0.2679 * ref[-1] / median)


def test_a_family_without_figures_says_whose_it_borrows():
    r = est.utilisation_range(CAT.types["g5.48xlarge"], 3, U)
    assert "no published figure for NVIDIA A10G" in r.basis and "NVIDIA A100 40GB" in r.basis
    # llm-foundry's A100 40GB rows under 10B (they count attention: on the plan's 6N basis, MfuFigure.on_6n)
    six_n = sorted(f.on_6n for f in U.mfu[("NVIDIA A100 40GB", "small")])
    assert (r.low, r.likely, r.high) == pytest.approx((six_n[0], statistics.median(six_n), six_n[-1]))


def test_classic_ml_has_time_and_cost_as_a_range():
    t = plan(load("small")).training
    e = t.estimate
    assert e.hours and e.usd_total and e.hours_range[0] < e.hours < e.hours_range[1]
    assert "xgboost-pr-12158" in e.basis and "devto-xgboost-speed" in e.basis
    cells = 20 * 2**30 / 4  # 20 GiB of float32
    vcpus = load_catalog().types[t.instance_type].vcpus * t.instance_count
    assert e.hours == pytest.approx(cells * 100 / (((16e6 + 105e6) / 2) * vcpus) / 3600)


def test_plan_json_has_the_range_fields():
    out = subprocess.run([sys.executable, "-m", "workloads", "plan", "huge", "--json"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    e = json.loads(out)["estimates"]
    # huge at its likely MFU is as fast as its communication allows: a faster compute shortens nothing
    assert e["hours_range"][0] <= e["hours"] < e["hours_range"][1]
    assert e["usd_total_range"][0] <= e["usd_total"] < e["usd_total_range"][1]


def test_the_text_plan_shows_the_range_and_what_it_rests_on():
    out = subprocess.run([sys.executable, "-m", "workloads", "plan", "small", "--full"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert "estimate: - = -" not in out and "likely; range" in out and "rests on:" in out
