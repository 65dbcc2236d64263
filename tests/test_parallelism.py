"""Issue 11: the plan's layout (training.parallelism): the simplest spread whose memory per rank fits, degrees
whose product is the rank count, and a refusal when nothing fits. Its plan JSON: test_planner.py."""

from __future__ import annotations

import pytest

from workloads import load, plan
from workloads.catalog import load_catalog
from workloads.parallelism import choose


def _types():
    return load_catalog().types


@pytest.mark.parametrize("preset, sharding, ranks", [("intermediate", "none", 8), ("huge", "full", 16 * 64)])
def test_presets_get_the_simplest_layout_that_fits(preset, sharding, ranks):
    spread = plan(load(preset)).training.parallelism
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
