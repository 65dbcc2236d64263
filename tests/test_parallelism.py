"""Issue 11: the plan's layout (training.parallelism): the simplest spread whose memory per rank fits, degrees
whose product is the rank count, and a refusal when nothing fits. Its plan JSON: test_planner.py."""

from __future__ import annotations

import pytest

from workloads import load, plan
from workloads.catalog import load_catalog
from workloads.parallelism import choose, gib_per_rank

from .conftest import TRN2


def _types():
    return load_catalog().types


@pytest.mark.parametrize("preset, overrides, sharding, ranks", [
    ("intermediate", None, "none", 8), ("huge", TRN2, "full", 16 * 64), ("huge", None, "full", 16 * 8)])
def test_presets_get_the_simplest_layout_that_fits(preset, overrides, sharding, ranks):
    spread = plan(load(preset, overrides)).training.parallelism
    assert spread.sharding == sharding and spread.ranks == ranks
    assert spread.data * spread.tensor * spread.pipeline == spread.ranks
    assert spread.gib_per_rank <= 0.85 * spread.rank_memory_gib


def test_activations_that_do_not_fit_sharded_get_tensor_parallel_dividing_the_heads():
    # A GPT-3-sized decoder (96 layers, hidden 12288, 96 heads) on 64 x trn1.32xlarge: sharded state is small,
    # but a gathered layer and the activations exceed a 16 GiB NeuronCore until tensor parallel splits them.
    spread = choose(parameters_billion=175, layers=96, hidden=12288, heads=96, itype=_types()["trn1.32xlarge"],
                    nodes=64)
    assert spread is not None and spread.tensor == 2 and spread.pipeline == 1 and spread.sharding == "full"
    assert 96 % spread.tensor == 0 and spread.data == 64 * 32 // 2


def test_a_model_that_fits_no_layout_is_refused():
    assert choose(parameters_billion=70, layers=80, hidden=8192, heads=64, itype=_types()["p4d.24xlarge"],
                  nodes=2) is None


# Peak memory of examples/slurm/train.py on one NVIDIA H100 80GB HBM3, measured 2026-11-23 on the device machine
# lent to this project (torch 2.11.0+cu130, NCCL 2.28.9, one rank, one 4096-token sequence, 12 steps; the trainer's
# own "peak ... GiB allocated" line, torch.cuda.max_memory_allocated). Shapes: the intermediate plan's decoder
# (28 x 3072), a 1.3B one (24 x 2048), and a 2-layer one with a 128k vocabulary where the logits dominate.
# "foreach" is PyTorch's default AdamW, "fused" the trainer's choice on GPUs. Before DDP kept its gradients in
# its buckets the intermediate model peaked at 75.6 GiB, 12.6 GiB (4 B/param) above these.
H100_PEAKS = [  # (parameters, layers, hidden, vocab, sharding, optimizer, GiB allocated)
    (3_367_852_032, 28, 3072, 32000, "none", "foreach", 63.0),
    (3_367_852_032, 28, 3072, 32000, "full", "foreach", 63.0),
    (1_339_232_256, 24, 2048, 32000, "none", "foreach", 25.3),
    (1_339_232_256, 24, 2048, 32000, "full", "foreach", 25.3),
    (287_844_352, 2, 1024, 128256, "none", "foreach", 12.6),
    (287_844_352, 2, 1024, 128256, "full", "foreach", 10.7),
    (3_367_852_032, 28, 3072, 32000, "none", "fused", 63.0),
    (3_367_852_032, 28, 3072, 32000, "full", "fused", 52.5),
    (1_339_232_256, 24, 2048, 32000, "full", "fused", 21.9),
]


@pytest.mark.parametrize("params, layers, hidden, vocab, sharding, optimizer, measured", H100_PEAKS)
def test_the_memory_per_rank_matches_what_the_trainer_measured_on_an_h100(params, layers, hidden, vocab, sharding,
                                                                        optimizer, measured):
    # Never materially under what the trainer held (a plan that fits must run), and at most a quarter over (the
    # plan counts foreach AdamW's step where the fused kernel needs less, and FSDP2's logits generously).
    estimate = gib_per_rank(params, layers, hidden, shards=1, tensor=1, pipeline=1, sharded=sharding == "full",
                            vocab=vocab)
    assert 0.97 * measured <= estimate <= 1.25 * measured, (estimate, measured)
