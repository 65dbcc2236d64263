"""CPU and serverless candidates for small non-LLM models (issue 32): encoders and vision models are compared on the
newest CPU types the catalog prices (c6i, m5) beside the GPUs, and serverless is billed at the model's own time.
Before: BERT-base was only ever offered GPUs, and serverless was priced at the default 0.5 s a request."""

from __future__ import annotations

import pytest

from workloads import load, plan
from workloads.catalog import load_serving
from workloads.planning.estimates import SERVERLESS_USD_PER_GB_SECOND

# BERT-base (bert-base-uncased on the Hugging Face Hub: 110M parameters), asynchronous (no latency target): the cost
# per request decides, and the CPU figures (catalog/serving.yaml cpu_encoder: BERT-base shape, 80.4 GFLOPS a vCPU,
# tools/bench_cpu_encoder.py) compete with the GPUs.
BERT_BASE = {"model.parameters_billion": "0.11", "model.attention_heads": "null",
             "inference.artifact": "{format: framework-archive}", "inference.realtime": "null",
             "inference.batch": "null", "inference.async": "{}", "inference.requests_per_second": "5"}


def test_bert_base_is_compared_on_cpu_types_too():
    a = plan(load("intermediate", BERT_BASE)).inference["async"]
    types = {c.instance_type.removeprefix("ml.").split(".")[0] for c in a.candidates}
    assert {"c6i", "m5"} <= types and types & {"g4dn", "g5", "g6"}
    cpu = [c for c in a.candidates if c.instance_type.startswith(("ml.c6i", "ml.m5"))]
    assert all(c.tensor_parallel is None and c.concurrency >= 4 for c in cpu)  # one request per vCPU


def test_serverless_is_billed_at_the_models_own_time():
    """The small preset's XGBoost: 1.75 ms a request measured (catalog/serving.yaml), not 0.5 s."""
    s = plan(load("small")).inference["serverless"]
    likely_ms = load_serving().cpu_classic_likely.one_request_ms
    assert s.latency_ms == pytest.approx(likely_ms, abs=0.1)
    assert s.usd_per_million == pytest.approx(2 * likely_ms / 1e3 * SERVERLESS_USD_PER_GB_SECOND * 1e6, abs=0.01)
    assert "model's own time" in s.throughput_basis


def test_a_stated_processing_time_is_what_serverless_bills():
    s = plan(load("small", {"inference.processing_seconds": "0.5"})).inference["serverless"]
    assert s.usd_per_million == pytest.approx(2 * 0.5 * SERVERLESS_USD_PER_GB_SECOND * 1e6)


def test_bert_base_at_5_per_second_costs_less_than_a_g4dn_xlarge_on_cpu():
    """Without a latency target the CPU types win: at peak, less than one ml.g4dn.xlarge ($0.7364/h SageMaker
    on-demand in us-west-2, catalog/instances.yaml)."""
    overrides = {**BERT_BASE, "inference.async": "null", "inference.realtime": "{}"}
    rt = plan(load("intermediate", overrides)).inference["realtime"]
    chosen = next(c for c in rt.candidates if c.chosen)
    g4dn = next(c for c in rt.candidates if c.instance_type == "ml.g4dn.xlarge")
    assert rt.instance_type.startswith(("ml.c6i", "ml.m5")) and chosen.usd_per_hour_at_peak < 0.7364
    assert chosen.usd_per_hour_at_peak < g4dn.usd_per_hour_at_peak
