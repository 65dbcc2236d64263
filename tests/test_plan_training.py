"""Training planning (workloads/planning/training.py): the tiers' rules, the measured comparison, candidate types
costed side by side on one kind of price, node counts, storage; classic ML on one node that holds the data."""

from __future__ import annotations

import pytest

from workloads import load, plan
from workloads.planning import estimates as est
from workloads.catalog import load_catalog
from workloads.planning.training import tier_of
from workloads.planning.training_estimate import measured_choice

CAT = load_catalog()


def test_seeds_measured_comparison_trainium_wins():
    chosen, costs = measured_choice()
    assert chosen == "ml.trn1.32xlarge"
    assert costs == {"ml.trn1.32xlarge": pytest.approx(41.43, abs=0.01), "ml.p4d.24xlarge": pytest.approx(68.61, abs=0.01)}


def test_measured_run_still_cheaper_on_trainium_at_todays_catalog_prices():
    trn, gpu = est.BERT_FINETUNE
    now_trn = trn.seconds / 3600 * CAT.get(trn.instance_type).sagemaker_prices["us-west-2"]
    now_gpu = gpu.seconds / 3600 * CAT.get(gpu.instance_type).sagemaker_prices["us-west-2"]
    assert now_trn < now_gpu


def test_trainium_utilisation_reproduces_the_measured_times():
    # Same work on both at the calibrated utilisations -> the measured time ratio.
    trn1, p4d = CAT.types["trn1.32xlarge"], CAT.types["p4d.24xlarge"]
    u_trn = est.trainium_utilisation(trn1, p4d)
    flops = 1e20
    ratio = est.hours(flops, trn1, 1, u_trn) / est.hours(flops, p4d, 1, est.GPU_UTILISATION)
    assert ratio == pytest.approx(6033 / 6553, rel=1e-9)


def test_flop_formula():
    assert est.training_flops(70, 40) == pytest.approx(6 * 70e9 * 40e9)
    trn1 = CAT.types["trn1.32xlarge"]
    hrs = est.hours(1.0e21, trn1, 4, 0.5)
    # The utilisation is measured at cluster scale: no further multi-node factor.
    assert hrs == pytest.approx(1.0e21 / (3040e12 * 4 * 0.5) / 3600)


def test_classic_ml_never_gets_a_gpu():
    p = plan(load("small"))
    assert p.training.tier == "xgboost"
    assert p.training.instance_type.split(".")[0] in ("m5", "r5")  # memory-bound: m5 or r5 over c5
    assert all(not CAT.types[c.instance_type].accelerated for c in p.training.candidates)
    sk = plan(load("small", {"model.framework": "scikit-learn"}))
    assert not CAT.types[sk.training.instance_type].accelerated and sk.training.instance_count == 1


def test_classic_candidates_each_have_a_time_and_total_and_the_reason_counts_the_ones_that_fit(tmp_path):
    """The README's ten-line churn workload: every row had '-' for time and total, and the reason counted the rows
    that do not fit among 'the candidates that fit'."""
    (tmp_path / "churn.yaml").write_text("name: churn\nregion: us-east-1\navailability_zone: us-east-1a\n"
                                         "model: {parameters_billion: 0.001, framework: xgboost}\n"
                                         "data: {dataset_size_gib: 20}\ntraining: {max_hours: 4}\n")
    t = plan(load(str(tmp_path / "churn.yaml"))).training
    assert all(c.hours and c.usd_total == pytest.approx(c.hours * c.usd_per_hour) for c in t.candidates)
    chosen = next(c for c in t.candidates if c.chosen)
    assert (chosen.hours, chosen.usd_total) == (pytest.approx(t.estimate.hours), pytest.approx(t.estimate.usd_total))
    fit = [c for c in t.candidates if c.feasible]
    assert 0 < len(fit) < len(t.candidates)
    assert f"{chosen.instance_type}: lowest $/h among the {len(fit)} of {len(t.candidates)} candidates that fit" in \
        " ".join(t.decisions)


def test_small_deep_learning_gets_g4dn_or_g5():
    p = plan(load("small", {"model.framework": "pytorch", "model.parameters_billion": "0.1",
                            "training.max_hours": "null"}))
    assert p.training.tier == "small-dl"
    assert p.training.instance_type.split(".")[0] in ("g4dn", "g5", "g6")


def test_intermediate_chooses_the_cheapest_total_and_shows_the_others():
    p = plan(load("intermediate"))
    # The rows that deploy as they are (training plans to buy are ranked beside them: tests/test_capacity.py).
    cands = {c.instance_type: c for c in p.training.candidates if c.purchase is None}
    chosen = cands[p.training.instance_type]
    assert chosen.chosen and chosen.feasible
    assert chosen.usd_total == min(c.usd_total for c in cands.values() if c.feasible)
    assert {"g5.48xlarge", "p4d.24xlarge", "p5.48xlarge"} <= set(cands)
    assert p.training.orchestrator == "sagemaker-jobs" and p.training.storage == "s3-fastfile"


def test_huge_deploys_as_shipped_on_a_type_sold_on_demand():
    """Before: huge pinned trn2.48xlarge, sold in us-east-2 only as Capacity Blocks, and deployed a cluster whose
    on-demand nodes never launch. Now the planner chooses among the types EC2 sells on-demand there (catalog `sold`),
    all compared at EC2 on-demand prices, and the plan says why Trn2 is not among them."""
    p = plan(load("huge"))
    t = p.training
    assert tier_of(p.workload) == "large-dl"
    assert (t.instance_count, t.orchestrator, t.storage) == (16, "slurm", "fsx-lustre")
    itype = CAT.types[t.instance_type]
    assert itype.sold_on_demand("us-east-2") and not t.capacity_reservation_id and not t.capacity_block
    assert t.efa_interfaces == itype.efa_max_interfaces and t.placement_group
    # What deploys as it is is priced on-demand; Capacity Blocks to buy are ranked beside it (planning/capacity.py).
    as_is = [c for c in t.candidates if c.purchase is None]
    assert {c.price_kind for c in as_is} == {"EC2 on-demand"}
    assert {c.price_kind for c in t.candidates if c.purchase} == {"EC2 Capacity Block"}
    assert all(CAT.types[c.instance_type].sold_on_demand("us-east-2") for c in as_is)
    chosen = next(c for c in t.candidates if c.chosen)
    assert chosen.purchase is None and chosen.usd_total == min(c.usd_total for c in as_is if c.feasible)
    assert any("trn2.48xlarge: EC2 sells trn2.48xlarge in us-east-2 only as EC2 Capacity Blocks" in d
               for d in t.decisions)
    # The one training warning a shipped huge plan may carry: Blackwell's utilisation borrowed from H100 rows.
    assert all("published utilisation on" in w.message for w in p.warnings if w.field.startswith("training")), \
        p.warnings


def test_huge_left_open_picks_an_efa_cluster_type():
    p = plan(load("huge", {"training.instance_type": "null"}))
    assert p.training.instance_type in ("p4d.24xlarge", "p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge")
    assert CAT.types[p.training.instance_type].efa_max_interfaces >= 4


def test_instance_count_sized_for_memory_and_time():
    p = plan(load("huge", {"training.instance_count": "null", "training.max_hours": "200"}))
    t = p.training
    assert t.estimate.hours <= 200
    assert t.instance_count >= est.min_instances_for_memory(70, CAT.types[t.instance_type])


def test_too_few_nodes_for_the_model_is_refused():
    from workloads import ConfigError
    with pytest.raises(ConfigError, match="model state needs"):
        plan(load("huge", {"training.instance_type": "p4d.24xlarge", "training.instance_count": "1"}))


def test_storage_modes():
    assert plan(load("small")).training.storage == "s3-file"
    assert plan(load("intermediate")).training.storage == "s3-fastfile"
    assert plan(load("intermediate", {"data.dataset_size_gib": "5000"})).training.storage == "fsx-lustre"
    assert plan(load("intermediate", {"data.storage": "efs"})).training.storage == "efs"


def test_xgboost_compares_r5_and_m5_and_prefers_one_node_that_holds_the_data():
    """40 GiB in memory (20 GiB x 2): r5.2xlarge (64 GiB) holds it on one node; 2 x r5.xlarge or 4 x m5.xlarge would
    cost as much an hour and add the network to every round, so they are not chosen."""
    t = plan(load("small")).training
    names = {c.instance_type for c in t.candidates}
    assert {"m5.4xlarge", "r5.2xlarge"} <= names
    assert t.instance_count == 1 and t.instance_type == "r5.2xlarge"
    for c in t.candidates:
        if c.count > 1:
            assert not c.feasible and "single larger node" in c.why


# ------------------------------------------------------------------ what the cluster bills in a month (issue 31)

def _month(p) -> dict:
    return {line.item: line for line in p.monthly.lines}


def test_an_idle_on_demand_slurm_cluster_bills_no_compute():
    """Before: the compute group was static, so 16 x p5en.48xlarge billed about $739k a month with no jobs, and the
    monthly estimate did not show it. Now the nodes are dynamic and the month says what stays on: the login node."""
    p = plan(load("huge"))
    t, lines = p.training, _month(p)
    assert t.compute_min_nodes == 0 and t.scale_down_idle_s == 600
    idle = lines["Slurm compute nodes when idle"]
    assert idle.usd == 0 and f"0 of 16 x {t.instance_type}" in idle.quantity and "600 s" in idle.quantity
    login = lines["Slurm login node"]
    assert login.usd == pytest.approx(CAT.types["m5.xlarge"].price("us-east-2", sagemaker=False).usd_per_hour * 730)
    assert "always-on nodes" in p.monthly.note


def test_paid_capacity_bills_outside_the_run_and_a_block_does_not():
    """A reservation bills whether its nodes run or not: a month of it beyond the run's hours. A Capacity Block is
    bought up front for whole days, which the training run already counts."""
    from .conftest import CAPACITY_BLOCK, TRN2

    held = plan(load("huge", TRN2))
    t = held.training
    line = _month(held)["capacity reservation outside the training run"]
    assert t.compute_min_nodes == 16
    assert line.usd == pytest.approx(t.estimate.usd_per_hour * (730 - t.estimate.hours), rel=1e-4)
    block = plan(load("huge", CAPACITY_BLOCK))
    assert _month(block)["Capacity Block outside the training run"].usd == 0
    assert block.training.compute_min_nodes == 16


def test_hyperpod_workers_bill_while_idle_and_the_month_says_so():
    """A Slurm-orchestrated HyperPod cluster keeps its workers (SageMaker's managed autoscaling is for EKS-orchestrated
    clusters): the month counts them outside the run, with the controller and login nodes."""
    from .conftest import HYPERPOD

    p = plan(load("huge", HYPERPOD))
    t, lines = p.training, _month(p)
    workers = lines["HyperPod workers outside the training run"]
    assert workers.usd == pytest.approx(t.estimate.usd_per_hour * (730 - t.estimate.hours), rel=1e-4)
    assert "InstanceCount to 0" in workers.quantity
    assert {"HyperPod controller node", "HyperPod login node"} <= set(lines)


def test_a_range_whose_fast_end_is_the_likely_run_says_why(capsys):
    """huge printed "$39,659 likely ($39,659 to $54,855)" at 36.9% MFU likely of up to 43%: the step waits on its
    communication, which the high utilisation's faster compute only exposes more of; the full plan says so."""
    from workloads.commands.cli import main

    huge = plan(load("huge")).training.estimate
    assert huge.no_faster_than_likely and huge.utilisation_range[1] > huge.utilisation
    assert huge.hours_range[0] == pytest.approx(huge.hours, rel=0.005)
    assert not plan(load("intermediate")).training.estimate.no_faster_than_likely  # its likely is its high figure
    assert main(["plan", "huge", "--full"]) == 0
    assert "no faster than likely: the step waits on communication" in " ".join(capsys.readouterr().out.split())
