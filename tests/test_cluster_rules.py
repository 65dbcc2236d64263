"""Issue 3 planning rules: EFA per node, FSx sizing, placement and capacity reservations."""

from __future__ import annotations

import pytest

from .conftest import CAPACITY_BLOCK, RESERVATION, TRN1, TRN2
from workloads import ConfigError, load, plan
from workloads.catalog import load_catalog, load_software

CAT = load_catalog()
from workloads.planning.storage import PER_UNIT_MB_S, size_fsx, valid_capacity


@pytest.mark.parametrize("itype, efa, gbps", [
    ("trn2.48xlarge", 16, 3200), ("p4d.24xlarge", 4, 400), ("p5.48xlarge", 32, 3200), ("p5en.48xlarge", 16, 3200),
    ("p6-b200.48xlarge", 8, 3200), ("p6-b300.48xlarge", 16, 6400),
])
def test_efa_bandwidth_per_node_is_the_types_maximum(itype, efa, gbps):
    region = {} if "us-east-2" in CAT.types[itype].regions else {"region": "us-west-2",
                                                                 "availability_zone": "us-west-2d"}
    # A type EC2 does not sell on-demand there (trn2) plans on a reservation of it.
    held = {} if CAT.types[itype].sold_on_demand(region.get("region", "us-east-2")) else RESERVATION
    t = plan(load("huge", {"training.instance_type": itype, **region, **held})).training
    assert (t.efa_interfaces, t.efa_max_interfaces, t.efa_gbps, t.network_gbps) == (efa, efa, gbps, gbps)
    assert t.placement_group


@pytest.mark.parametrize("gib, expected", [(1, 1200), (1200, 1200), (1201, 2400), (2400, 2400), (2401, 4800)])
def test_fsx_capacity_steps(gib, expected):
    assert valid_capacity(gib) == expected


def test_fsx_is_sized_for_the_need():
    f = plan(load("huge")).training.fsx
    assert f is not None
    assert f.storage_capacity_gib % 2400 == 0 and f.storage_capacity_gib >= 40000
    assert f.per_unit_mb_s in PER_UNIT_MB_S
    assert f.throughput_mb_s >= max(f.read_need_mb_s, f.checkpoint_need_mb_s)
    # a short, read-heavy job needs the faster tier
    fast = size_fsx(dataset_gib=800, parameters_billion=3, epochs=3, training_hours=2)
    assert fast.per_unit_mb_s == 1000 and fast.throughput_mb_s >= fast.read_need_mb_s


def test_fsx_buys_capacity_when_even_the_fastest_tier_is_short():
    f = size_fsx(dataset_gib=100, parameters_billion=1, epochs=100, training_hours=0.5)
    assert f.per_unit_mb_s == 1000 and f.throughput_mb_s >= f.read_need_mb_s


def test_no_fsx_plan_without_fsx():
    assert plan(load("intermediate")).training.fsx is None


def test_capacity_block_skips_the_placement_group():
    t = plan(load("huge", CAPACITY_BLOCK)).training
    assert not t.placement_group and t.capacity_block
    assert any("Capacity Block" in d for d in t.decisions)


def test_on_demand_reservation_keeps_the_placement_group():
    t = plan(load("huge", RESERVATION)).training
    assert t.placement_group and t.capacity_reservation_id == "cr-0123456789abcdef0"


@pytest.mark.parametrize("overrides, field, fragment", [
    ({**RESERVATION, "training.capacity_reservation_az": "us-west-2a"}, "training.capacity_reservation_az",
     "the reservation must be in the cluster's AZ"),
    ({"training.capacity_reservation_id": "cr-0123456789abcdef0"}, "training.capacity_reservation_az", "required"),
    ({"training.capacity_block": "true"}, "training.capacity_block", "reservation ID"),
    ({"training.instance_type": "g5.2xlarge"}, "training.instance_type", "needs EFA"),
    ({"training.instance_type": "inf2.48xlarge"}, "training.instance_type", "does not train"),
])
def test_cluster_config_that_cannot_work_is_refused(overrides, field, fragment):
    with pytest.raises(ConfigError) as err:
        load("huge", overrides)
    assert str(err.value).startswith(f"{field} = ") and fragment in str(err.value)


# Which SageMaker orchestrator takes which type: botocore's enums, over the whole catalog (test_sagemaker_apis.py).


def _legacy_types() -> list[tuple[str, object]]:
    """Every catalog type whose accelerator trains on a legacy stack (software.yaml `legacy`), with that stack."""
    cat, sw = load_catalog(), load_software()
    return [(name, stack) for stack in sw.stacks if stack.legacy for name, t in cat.types.items()
            if t.accelerator and t.accelerator.model in stack.accelerators and t.efa_max_interfaces > 0]


def test_trn1_and_trn1n_are_the_legacy_types():
    assert sorted(name for name, _ in _legacy_types()) == ["trn1.32xlarge", "trn1n.32xlarge"]


@pytest.mark.parametrize("itype,stack", _legacy_types())
def test_a_legacy_family_trains_on_its_last_release_with_a_warning(itype, stack):
    """Trn1/Trn1n train on Neuron 2.28 (the XLA path's last release), with EFA on every card, and the plan carries
    a WARNING that says what the legacy stack means and where Neuron says so."""
    p = plan(load("huge", {**TRN1, "training.instance_type": itype}))
    t = p.training
    assert t.software == stack and stack.neuron_release and stack.device == "xla" and stack.torch == "2.9"
    assert t.efa_interfaces == load_catalog().types[itype].efa_max_interfaces  # 8 on trn1, 16 on trn1n
    assert sum(i.kind != "interface" for i in t.network_interfaces) == t.efa_interfaces
    # the legacy stack's warning (and the lock's, while Neuron's index cannot be read to lock it: test_node_locks.py)
    warning, *rest = [w for w in p.warnings if w.field.startswith("training")]
    assert all("without a hash lock" in w.message for w in rest)
    assert warning.field == "training.instance_type" and warning.value == itype and stack.legacy in warning.message
    known = {**load_catalog().sources, **load_software().sources}
    assert all(known[k].url in warning.source for k in stack.legacy_sources)
    assert warning.as_dict() in p.to_dict()["warnings"]


def test_hyperpod_trains_on_ml_trn1_too():
    p = plan(load("huge", {**TRN1, "training.orchestrator": "hyperpod"}))
    assert p.training.sagemaker_instance_type == "ml.trn1.32xlarge" and p.warnings


def test_with_a_block_and_no_type_the_planner_picks_a_family_pcs_runs_in_blocks():
    """Before: the planner picked trn2.48xlarge for a Capacity Block, a block AWS PCS does not run (PCS user guide,
    Capacity Blocks limitations). Now it compares the families PCS takes, at Capacity Block prices, and says why
    Trn2 is not among them; never the legacy Trn1, and with no warning."""
    p = plan(load("huge", {**CAPACITY_BLOCK, "training.instance_type": None}))
    t = p.training
    assert CAT.types[t.instance_type].family in CAT.pcs_capacity_block_families
    assert not [w for w in p.warnings if w.field.startswith("training")]
    assert {c.price_kind for c in t.candidates} == {"EC2 Capacity Block"}
    assert not any(c.instance_type.startswith(("trn1", "trn2")) for c in t.candidates)
    assert any("trn2.48xlarge: AWS PCS runs Capacity Blocks of" in d for d in t.decisions)
    assert t.compute_min_nodes == t.instance_count  # the block is paid: static nodes


def test_volta_gpus_are_refused_for_training():
    with pytest.raises(ConfigError, match="Volta"):
        plan(load("intermediate", {"training.instance_type": "p3.16xlarge"}))


def test_sagemaker_jobs_on_trainium_are_refused():
    """TrainingInstanceType lists ml.trn2.48xlarge, but no TorchNeuron SageMaker training image is known offline: the
    refusal says so (not that SageMaker lacks the type)."""
    with pytest.raises(ConfigError, match="no SageMaker training image with TorchNeuron"):
        plan(load("huge", {"training.orchestrator": "sagemaker-jobs", "training.instance_type": "trn2.48xlarge"}))


def test_every_planned_accelerator_has_a_pinned_stack():
    t = plan(load("huge", TRN2)).training
    assert t.software is not None and t.software.device == "neuron" and "Neuron 2.33.0" in t.software.name
    gpu = plan(load("huge", {"training.instance_type": "p5.48xlarge"})).training.software
    assert gpu is not None and gpu.device == "cuda" and gpu.pip == ("torch==2.15.0",)
