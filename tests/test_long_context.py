"""Outside review R7: a published MFU measured at one sequence length is moved to the planned one through causal
attention's share of a token's FLOPs (estimates.attention_share), which the plan's 6N basis does not count; and a
pipelined layout on a SageMaker job says its stages are untested on the job's PyTorch image."""

from __future__ import annotations

import pytest

from workloads import load, plan
from workloads.catalog import load_catalog, load_utilisation
from workloads.planning import estimates as est

LONG = "examples/workloads/long-context-pipeline.yaml"


def test_attention_share_is_causal_attention_over_6n():
    # Llama 3.1 8B (32 layers, hidden 4096, 8.03B): 0.13 of 6N at 8,192 tokens, 1.07 at 65,536 (the review's figures)
    assert est.attention_share(8.03, (32, 4096), 8192) == pytest.approx(0.134, abs=0.001)
    assert est.attention_share(8.03, (32, 4096), 65536) == pytest.approx(1.07, abs=0.01)


def test_a_figure_at_another_sequence_is_moved_to_the_planned_one():
    itype, u = load_catalog().get("p4d.24xlarge"), load_utilisation()
    at_8k = est.utilisation_range(itype, 8.03, u, sequence=8192, shape=(32, 4096))
    at_64k = est.utilisation_range(itype, 8.03, u, sequence=65536, shape=(32, 4096))
    unmoved = est.utilisation_range(itype, 8.03, u, sequence=65536)
    published = {f.sequence for f in u.mfu.get(("NVIDIA A100 40GB", "small"), ()) if f.sequence}
    assert published and 65536 not in published  # the rows are at shorter sequences: each is moved
    assert at_64k.likely < unmoved.likely
    ratio = at_64k.likely / at_8k.likely
    assert ratio == pytest.approx((1 + est.attention_share(8.03, (32, 4096), 8192)) /
                                  (1 + est.attention_share(8.03, (32, 4096), 65536)), rel=0.02)
    assert "causal attention's FLOPs" in at_64k.basis


def test_the_long_context_plan_is_priced_with_its_attention():
    p = plan(load(LONG))
    e = p.training.estimate
    assert e.utilisation < 0.25  # 32% before (the 8k rows unmoved); 17-21% by the review's reckoning
    assert p.training.parallelism.pipeline > 1
    assert any(f.field == "training.orchestrator" and "pipeline stages" in f.message for f in p.warnings)


def test_a_pipelined_cluster_plan_has_no_job_image_warning():
    p = plan(load(LONG, {"training.orchestrator": "slurm"}))
    assert not any("pipeline stages" in f.message for f in p.warnings)
