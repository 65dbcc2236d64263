"""The planner: the seeds' rules, the measured comparison, estimates, the plan command."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from workloads import load, plan
from workloads import estimates as est
from workloads.catalog import load_catalog
from workloads.plan_training import measured_choice, tier_of

from .conftest import ROOT

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
    assert p.training.instance_type.startswith("m5.")  # memory-bound: m5 over c5
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
    # Compared like for like (both at Capacity Block rates, issue 24), P5 is cheaper for this run and the plan says so.
    assert any(d.startswith("note: p5.48xlarge") and "less" in d for d in t.decisions), t.decisions


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


def test_inference_families_follow_the_seeds():
    small = plan(load("small")).inference
    assert not CAT.get(small["realtime"].instance_type).accelerated  # classic ML on CPU
    huge = plan(load("huge")).inference
    assert huge["realtime"].instance_type.startswith("ml.inf2.")  # Neuron: Inferentia2
    no_neuron = plan(load("huge", {"model.neuron_supported": "false", "training.instance_type": "p5.48xlarge",
                                   "inference.realtime.max_instances": "8"}))  # GPUs need 5 at the peak
    assert CAT.get(no_neuron.inference["realtime"].instance_type).accelerator.kind == "nvidia-gpu"
    assert set(plan(load("small")).inference) == {"realtime", "serverless", "batch"}


def test_serverless_refuses_a_model_it_cannot_hold():
    from workloads import ConfigError
    with pytest.raises(ConfigError, match="inference.serverless.memory_mb"):
        plan(load("huge", {"inference.serverless.memory_mb": "6144"}))


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workloads", *args], cwd=ROOT, capture_output=True, text=True)


def test_plan_json_has_the_interface_fields():
    out = _cli("plan", "huge", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["training"]["instance_type"] == "trn2.48xlarge"
    assert data["training"]["software"]["device"] == "neuron"  # issue 11: the pinned stack the nodes run
    assert data["training"]["network_interfaces"][0] == {"card": 0, "device": 0, "kind": "interface"}
    assert data["training"]["instance_count"] == 16
    assert data["estimates"]["usd_total"] > 0 and data["estimates"]["hours"] > 0
    assert set(data["inference"]) == {"realtime", "async", "batch"}
    assert data["inference"]["realtime"]["instance_type"].startswith("ml.")
    spread = data["training"]["parallelism"]  # issue 11: the layout, integer degrees
    assert {k: spread[k] for k in ("data", "tensor", "pipeline", "sharding")} == \
        {"data": 1024, "tensor": 1, "pipeline": 1, "sharding": "full"}
    assert all(isinstance(spread[k], int) for k in ("data", "tensor", "pipeline"))


def test_plan_table_is_readable():
    """Its speed is measured by tools/bench_plan.py, not asserted here: a shared machine's load fails a timing."""
    out = _cli("plan", "huge")
    assert out.returncode == 0, out.stderr
    for text in ("trn2.48xlarge x 16", "software: Neuron 2.33.0", "Training candidates", "p5.48xlarge", "Inference",
                 "Assumptions"):
        assert text in out.stdout


def test_planner_path_never_imports_cdk_or_sagemaker():
    code = ("import sys, workloads, workloads.cli, workloads.report, workloads.teams; "
            "workloads.plan(workloads.load('huge')); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('aws_cdk', 'sagemaker', 'jsii')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
