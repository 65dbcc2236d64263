"""Issue 33: every layout's communication per optimizer step, against hand-computed fixtures (NCCL's bus-bandwidth
model, workloads/planning/communication.py), and the plan's estimate and layout line that carry it."""

from __future__ import annotations

import pytest

from workloads import load, plan
from workloads.planning import communication
from workloads.planning import estimates as est
from workloads.catalog import load_catalog
from workloads.planning.parallelism import Parallelism
from workloads.planning.training_layout import step_communication


def _spread(**kw) -> Parallelism:
    base = dict(data=16, tensor=1, pipeline=1, sharding="full", ranks=16, ranks_per_node=8, gib_per_rank=1.0,
                rank_memory_gib=80.0, layers=32, hidden=4096, heads=32, sequence=4096, vocab=32000, reason="",
                recompute=False, global_batch=64)
    return Parallelism(**{**base, **kw})


P5 = "p5.48xlarge"  # 8 x H100: NVLink 4 at 450 GB/s a direction; 3,200 Gbps EFA = 400 GB/s a node


def test_fsdp_over_two_nodes_uses_the_whole_nodes_efa_and_is_hidden():
    # 7B, FSDP2 over 16 ranks on 2 nodes, 4 micro-steps. One group spans the nodes with 8 ranks a node: 400 GB/s.
    # all-gathers: 2 x 4 x (15/16) x 14e9 B / 400e9 = 0.2625 s; reduce-scatters in bf16 (the trainer's reduce_dtype
    # under bf16 compute), one a micro-step: 4 x (15/16) x 14e9 / 400e9 = 0.13125 s;
    # EFA a node: 8 x 15/16 x 14e9 + 4 x 15/16 x 14e9 = 157.5 GB.
    c = communication.step(_spread(), load_catalog().types[P5], parameters_billion=7, compute_s=10.0)
    assert c.gather_s == pytest.approx(0.2625) and c.reduce_s == pytest.approx(0.13125) and c.tensor_s == 0
    assert c.inter_node_gb == pytest.approx(157.5)
    assert c.exposed_s == 0 and c.hidden and c.factor == 1.0
    assert "hidden behind compute" in c.line() and "FSDP over 16 ranks across nodes at 400 GB/s" in c.line()
    # under fp16 compute the trainer reduces in fp32: twice the bytes
    fp16 = communication.step(_spread(precision="fp16"), load_catalog().types[P5], parameters_billion=7,
                              compute_s=10.0)
    assert fp16.reduce_s == pytest.approx(2 * c.reduce_s)


def test_tensor_parallel_all_reduces_are_exposed_and_fsdp_beyond_compute_too():
    # 70B, tensor parallel 2 inside each node, FSDP2 over 8 data ranks on 2 nodes (4 a node: the node's EFA is
    # shared by 2 groups, 200 GB/s each), 2 micro-steps, recompute on.
    # all-gathers: 2 x 2 x (7/8) x 70e9 / 200e9 = 1.225 s; bf16 reduce-scatters: 2 x (7/8) x 70e9 / 200e9 = 0.6125 s;
    # TP: 2 micro-steps x 80 blocks x 6 all-reduces x 2 x (1/2) x (4096 x 8192 x 2 B) / 450e9 = 0.143166 s.
    # Against 1 s of compute the gathers and reductions share the links: 1.225 + 0.6125 - 1 = 0.8375 s exposed (more
    # than each alone: 0.225 s of gathers beyond compute, each reduction within its backward).
    spread = _spread(data=8, tensor=2, layers=80, hidden=8192, heads=64, recompute=True, global_batch=16)
    c = communication.step(spread, load_catalog().types[P5], parameters_billion=70, compute_s=1.0)
    assert c.gather_s == pytest.approx(1.225) and c.reduce_s == pytest.approx(0.6125)
    assert c.tensor_s == pytest.approx(2 * 80 * 6 * 2 * (1 / 2) * (4096 * 8192 * 2) / 450e9)
    assert c.exposed_s == pytest.approx(c.tensor_s + 0.8375)
    assert c.factor == pytest.approx(1 + c.exposed_s) and not c.hidden
    assert "exposed" in c.line() and "tensor parallel 2 inside a node" in c.line()


def test_communication_is_never_hidden_behind_less_compute_than_it_takes():
    """The ML review's case (huge on 16 x p6-b200 with fp32 reductions): gathers and reductions each under the step's
    compute, their sum over it, were called hidden. One set of links carries both: the excess is exposed."""
    c = communication.step(_spread(), load_catalog().types[P5], parameters_billion=7, compute_s=0.3)
    assert c.gather_s < c.compute_s and c.reduce_s < c.compute_s < c.total_s
    assert c.exposed_s == pytest.approx(c.total_s - c.compute_s) and not c.hidden
    assert c.step_s >= c.total_s


def test_ddp_inside_one_node_runs_at_the_device_link():
    # 3B DDP on 8 ranks of one node, 1 micro-step: all-reduce 2 x (7/8) x 12e9 B / 450e9 = 0.046667 s, no EFA.
    spread = _spread(data=8, ranks=8, sharding="none", global_batch=8)
    c = communication.step(spread, load_catalog().types[P5], parameters_billion=3, compute_s=5.0)
    assert c.reduce_s == pytest.approx(2 * 7 / 8 * 12e9 / 450e9) and c.gather_s == 0 and c.inter_node_gb == 0
    assert c.hidden


def test_the_plans_hours_carry_what_communication_cannot_hide():
    # The huge preset on 256 x p4d.24xlarge (400 Gbps EFA a node): the 4M-token global batch leaves each rank one
    # sequence a step, so the 70B model's FSDP traffic outruns each node's compute, and tensor parallel's all-reduces
    # are never hidden. (On 16 nodes the gathers and reductions hide: both shrink with the micro-steps.)
    w = load("huge", {"training.instance_type": "p4d.24xlarge", "training.orchestrator": "slurm",
                      "training.instance_count": "256"})
    p = plan(w).training
    itype = load_catalog().types["p4d.24xlarge"]
    peak = itype.peak_tflops
    comm = step_communication(w, itype, p.instance_count, p.estimate.utilisation, peak)
    assert comm is not None and not comm.hidden and comm.factor > 1.02
    bare = est.hours(p.estimate.flops, itype, p.instance_count, p.estimate.utilisation, peak)
    assert p.estimate.hours == pytest.approx(bare * comm.factor)
    layout_line = next(d for d in p.decisions if d.startswith("layout:"))
    assert f"communication {comm.total_s:,.2f} s a step" in layout_line and "exposed" in layout_line


@pytest.mark.parametrize("preset", ["huge", "intermediate"])
def test_every_accelerated_plans_layout_line_says_its_communication(preset):
    p = plan(load(preset)).training
    layout_line = next(d for d in p.decisions if d.startswith("layout:"))
    assert "communication" in layout_line and ("hidden behind compute" in layout_line or "exposed" in layout_line)


def test_every_training_accelerator_has_a_device_link_recorded():
    from workloads.catalog import load_utilisation
    from workloads.planning.candidates import TRAINING_CANDIDATES

    types = load_catalog().types
    models = {types[n].accelerator.model for tier in ("large-dl", "medium-dl") for n in TRAINING_CANDIDATES[tier]}
    assert models <= set(load_utilisation().intra_node)
