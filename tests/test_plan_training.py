"""Training planning (workloads/plan_training.py): the tiers' rules, the measured comparison, candidate types
costed side by side on one kind of price, node counts, storage; classic ML on one node that holds the data."""

from __future__ import annotations

import pytest

from workloads import load, plan
from workloads import estimates as est
from workloads.catalog import load_catalog
from workloads.plan_training import measured_choice, tier_of

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


def test_small_deep_learning_gets_g4dn_or_g5():
    p = plan(load("small", {"model.framework": "pytorch", "model.parameters_billion": "0.1",
                            "training.max_hours": "null"}))
    assert p.training.tier == "small-dl"
    assert p.training.instance_type.split(".")[0] in ("g4dn", "g5", "g6")


def test_intermediate_chooses_the_cheapest_total_and_shows_the_others():
    p = plan(load("intermediate"))
    cands = {c.instance_type: c for c in p.training.candidates}
    chosen = cands[p.training.instance_type]
    assert chosen.chosen and chosen.feasible
    assert chosen.usd_total == min(c.usd_total for c in cands.values() if c.feasible)
    assert {"g5.48xlarge", "p4d.24xlarge", "p5.48xlarge"} <= set(cands)
    assert p.training.orchestrator == "sagemaker-jobs" and p.training.storage == "s3-fastfile"


def test_huge_is_a_trainium_efa_cluster_on_fsx():
    p = plan(load("huge"))
    t = p.training
    assert tier_of(p.workload) == "large-dl"
    assert (t.instance_type, t.instance_count, t.orchestrator, t.storage) == ("trn2.48xlarge", 16, "slurm", "fsx-lustre")
    assert t.efa_interfaces == 16 and t.placement_group
    # Compared like for like (all at Capacity Block rates, issue 24): the plan notes a cheaper type exactly when one is.
    mine = next(c for c in t.candidates if c.instance_type == t.instance_type)
    assert {c.price_kind for c in t.candidates} == {"EC2 Capacity Block"}
    cheaper = sorted((c for c in t.candidates if c.feasible and c.usd_total < mine.usd_total * 0.95),
                     key=lambda c: c.usd_total)[:1]
    notes = [f.message for f in p.findings if f.level == "INFO" and "less" in f.message]
    assert len(notes) == len(cheaper) and all(c.instance_type in notes[0] for c in cheaper), (notes, cheaper)


def test_huge_left_open_picks_an_efa_cluster_type():
    p = plan(load("huge", {"training.instance_type": "null"}))
    assert p.training.instance_type in ("trn2.48xlarge", "p4d.24xlarge", "p5.48xlarge", "p5en.48xlarge",
                                        "p6-b200.48xlarge")
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
