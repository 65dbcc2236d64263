"""Sizing at the real context (issue 32): the 13B chat model at 50 req/s, 1000 tokens in, 200 out, TTFT 500 ms,
TPOT 50 ms. The issue's figures: 5 x ml.p4d.24xlarge ($126/h at peak) before, about 3 (about $76/h) by roofline
arithmetic on the planner's constants and published vLLM figures.

Held here: vLLM's paged attention (a request holds its own context, max_total_tokens is a limit), vLLM's batch
default, copies per instance (Inference Components: GPUs / TP copies of the model), and the decode step fitted to
published vLLM measurements (catalog/serving.yaml, the rows below as fixtures) instead of TGI 1.0.3's 2023 figures
(17.3 ms a sharded step). What comes out of the fit: 1 x ml.p5.48xlarge with 8 copies of TP=1 ($63.30/h), with
ml.p4d.24xlarge at 3 instances ($75.75/h) beside it.
"""

from __future__ import annotations

import pytest

from workloads import load, plan

CASE = {"model.parameters_billion": "13", "model.architecture": "decoder", "inference.requests_per_second": "50",
        "inference.generation.typical_input_tokens": "1000", "inference.generation.typical_output_tokens": "200",
        "inference.time_to_first_token_ms": "500", "inference.time_per_output_token_ms": "50",
        "inference.latency_ms": "null", "inference.realtime.max_instances": "20",
        "inference.realtime.instance_type": "null"}
P4D_SAGEMAKER_USD_PER_HOUR = 25.251286  # catalog/instances.yaml, ml.p4d.24xlarge, us-west-2
BEFORE = 5  # the issue: 5 x ml.p4d.24xlarge


def _realtime():
    return plan(load("intermediate", CASE)).inference["realtime"]


def test_13b_at_50_rps_needs_fewer_p4d_than_the_kv_reservation_did():
    ip = _realtime()
    chosen = next(c for c in ip.candidates if c.chosen)
    assert ip.instances_needed_at_peak < BEFORE, ip.instances_needed_at_peak
    assert chosen.usd_per_hour_at_peak <= 4 * P4D_SAGEMAKER_USD_PER_HOUR + 0.01, chosen
    assert ip.ttft_ms <= 500 and ip.tpot_ms <= 50
    # The batch is sized at the typical context, not max_total_tokens: more than the 84 the reservation allowed
    # (over the instance's copies: `concurrency` is one copy's).
    assert ip.concurrency * (ip.copies_per_instance or 1) > 84
    assert any(c.instance_type == "ml.p5.48xlarge" for c in ip.candidates)


# The published vLLM measurements the GPU decode constants are fitted to (catalog/instances.yaml sources): source key,
# hardware, TP, billions of parameters, ms a generated token.
VLLM_PUBLISHED = [
    ("vllm-a100-sweep", "NVIDIA A100 40GB", 1, 8.03, 1000 / 75),  # vLLM 0.23.0, about 75 tokens/s at one request
    ("inferencebench-h100-sweep", "NVIDIA H100 80GB", 1, 8.03, 6.48),  # vLLM 0.21.0, TPOT p50, 2026-05-16
    ("vllm-nightly-latency", "NVIDIA H200", 1, 8.03, 833.53 / 128),  # batch 8, 32 in 128 out, median / 128
    ("vllm-nightly-latency", "NVIDIA H200", 4, 70.6, 2077.56 / 128),
]


def test_gpu_decode_rests_on_the_published_vllm_measurements_not_tgi():
    from workloads.catalog import load_catalog, load_serving
    f, sources = load_serving(), load_catalog().sources
    rows = [m for m in f.decode if m.runtime == "nvidia-gpu"]
    assert sorted((m.source, m.accelerator, m.tensor_parallel, m.parameters_billion) for m in rows) == \
        sorted(r[:4] for r in VLLM_PUBLISHED)
    for m in rows:
        ms = next(r[4] for r in VLLM_PUBLISHED if r[:4] == (m.source, m.accelerator, m.tensor_parallel,
                                                            m.parameters_billion))
        assert m.ms_per_token == pytest.approx(ms, abs=0.01) and "vLLM" in m.what and "TGI" not in m.what
        assert sources[m.source].url.startswith("https://")
    assert f.fits["nvidia-gpu"].overhead_ms_sharded < 17.3  # TGI 1.0.3's sharded step


def test_13b_at_50_rps_meets_the_issues_three_p4d_or_equal_cost():
    ip = _realtime()
    chosen = next(c for c in ip.candidates if c.chosen)
    assert chosen.usd_per_hour_at_peak <= 3 * P4D_SAGEMAKER_USD_PER_HOUR + 0.01, chosen
    p4d = min((c for c in ip.candidates if c.instance_type == "ml.p4d.24xlarge" and c.meets),
              key=lambda c: c.usd_per_hour_at_peak)
    assert p4d.instances_at_peak <= 3, p4d
    assert ip.ttft_ms <= 500 and ip.tpot_ms <= 50
