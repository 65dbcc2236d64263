"""Issues 40 and 42: training on the capacity AWS sells (planning/capacity.py). A type sold only as reserved capacity
(trn2.48xlarge) is planned on a training plan to buy, priced at the recorded reserved rate, with the commands that
find and buy it and the `-c` that deploys onto it; the candidates table ranks Capacity Block and training-plan rows
beside on-demand, each saying the days to buy and the purchase."""

from __future__ import annotations

import gzip
import json
import shlex
import subprocess
import sys
from pathlib import Path

import botocore
import pytest
from botocore import xform_name

from workloads import ConfigError, load, plan
from workloads.catalog import load_catalog
from workloads.errors import INFO, WARNING
from workloads.planning import estimates as est
from workloads.planning.capacity import CAPACITY_BLOCK, TRAINING_PLAN, plan_count

from .conftest import ROOT, TRN2_PLAN

CAT = load_catalog()
# A 30B decoder pre-trained on 600B tokens on trn2.48xlarge in us-east-2, no capacity and no orchestrator named.
TRN2_30B = {"model.parameters_billion": "30", "data.tokens_billion": "600", "data.dataset_size_gib": "2400",
            "training.instance_type": "trn2.48xlarge", "training.orchestrator": "null",
            "training.instance_count": "null", "inference": "none"}


@pytest.fixture(scope="module")
def trn2_30b():
    return plan(load("huge", TRN2_30B))


def test_a_trn2_run_with_no_capacity_plans_on_a_training_plan_to_buy(trn2_30b):
    """Before: refused ("EC2 sells trn2.48xlarge in us-east-2 only as EC2 Capacity Blocks"; on HyperPod "SageMaker
    does not offer ml.trn2.48xlarge"). Now: a HyperPod group on a SageMaker training plan, priced at the reserved
    rate recorded for the region, in whole days of the nodes bought."""
    t = trn2_30b.training
    assert (t.instance_type, t.orchestrator) == ("trn2.48xlarge", "hyperpod")
    assert t.purchase is not None and t.purchase.kind == TRAINING_PLAN
    rate = CAT.types["trn2.48xlarge"].capacity_block_prices["us-east-2"]
    assert rate is not None
    assert t.estimate.usd_per_hour == pytest.approx(rate * t.purchase.count)
    assert t.purchase.count in CAT.training_plan_limits["instance_counts"] and t.purchase.count >= t.instance_count
    assert t.purchase.days == -(-t.estimate.hours // 24)
    assert t.estimate.usd_total == pytest.approx(t.purchase.days * 24 * rate * t.purchase.count)
    # The price's provenance is said, not invented: SageMaker's own plan fee is not recorded here.
    assert "SageMaker training plan" in t.estimate.price_note and "not recorded" in t.estimate.price_note
    assert any(d.startswith("orchestrator hyperpod: EC2 sells trn2.48xlarge in us-east-2") for d in t.decisions)


def test_the_plan_says_how_to_buy_the_capacity_and_deploy_onto_it(trn2_30b):
    (warning,) = [f for f in trn2_30b.findings if f.field == "training.training_plan_arn"]
    assert warning.level == WARNING
    b = trn2_30b.training.purchase
    assert f"`{b.search}`" in warning.message and f"`{b.buy}`" in warning.message
    assert b.search.startswith("aws sagemaker search-training-plan-offerings --region us-east-2 --target-resources "
                               "hyperpod-cluster --instance-type ml.trn2.48xlarge")
    assert b.buy.startswith("aws sagemaker create-training-plan")
    assert "-c training.training_plan_arn=<TrainingPlanArn>" in warning.message
    assert "sagemaker/latest/dg/search-training-plan-offerings" in warning.source


def test_trainium_is_ranked_beside_gpus_at_like_for_like_prices(trn2_30b):
    """Every reserved row of a HyperPod plan is a training plan at its type's recorded Capacity Block rate, so
    Trainium and GPU rows compare on one kind of price; the Trn2 run costs about half the p5 on-demand one."""
    rows = trn2_30b.training.candidates
    plans = [c for c in rows if c.price_kind == TRAINING_PLAN]
    assert {c.instance_type for c in plans} >= {"trn2.48xlarge", "p5.48xlarge"}
    for c in plans:
        rate = CAT.types[c.instance_type].capacity_block_prices["us-east-2"]
        assert c.purchase and c.usd_total == pytest.approx(c.purchase.days * 24 * rate * c.purchase.count)
    trn2 = next(c for c in plans if c.instance_type == "trn2.48xlarge")
    assert trn2.chosen and any(c.instance_type == "p5.48xlarge" and c.purchase is None for c in rows)


def test_every_reserved_row_says_the_days_and_the_purchase():
    """huge on Slurm: each type PCS runs in blocks, sold as blocks in us-east-2 with a recorded rate, has a Capacity
    Block row beside its on-demand one, billed in the block's whole days (1-day steps to 14, then 7-day steps)."""
    t = plan(load("huge")).training
    blocks = [c for c in t.candidates if c.price_kind == CAPACITY_BLOCK]
    expected = {n for n, x in CAT.types.items() if x.family in CAT.pcs_capacity_block_families
                and "us-east-2" in (x.capacity_block_regions or ()) and x.capacity_block_prices.get("us-east-2")
                and any(c.instance_type == n for c in t.candidates)}
    assert expected and {c.instance_type for c in blocks} == expected
    for c in blocks:
        assert c.purchase and c.purchase.days * 24 == est.billed_hours(c.hours, CAPACITY_BLOCK)
        assert f"buy {c.purchase.days} days of {c.count} first" in c.why
        assert c.purchase.search.startswith(f"aws ec2 describe-capacity-block-offerings --region us-east-2 "
                                            f"--instance-type {c.instance_type} --instance-count {c.count}")
        assert "-c training.capacity_block=true" in c.purchase.deploy
    # The pick deploys as it is; a cheaper block is advice, with its purchase.
    chosen = next(c for c in t.candidates if c.chosen)
    assert chosen.purchase is None
    cheapest = min(blocks, key=lambda c: c.usd_total)
    advice = [f for f in plan(load("huge")).findings if f.level == INFO and "as an EC2 Capacity Block" in f.message]
    assert (cheapest.usd_total < 0.95 * chosen.usd_total) == bool(advice)


def _model(service: str) -> dict:
    root = Path(botocore.__file__).parent / "data" / service
    version = sorted(p.name for p in root.iterdir() if (p / "service-2.json.gz").exists())[-1]
    return json.loads(gzip.open(root / version / "service-2.json.gz").read())


def _check_command(command: str) -> None:
    """The command names an operation of botocore's model and only its input members, with every required one."""
    words = shlex.split(command.replace("<", "").replace(">", ""))
    assert words[0] == "aws"
    model = _model(words[1])
    ops = {xform_name(name, "-"): op for name, op in model["operations"].items()}
    op = ops[words[2]]
    shape = model["shapes"][op["input"]["shape"]]
    flags = {w[2:] for w in words[3:] if w.startswith("--")} - {"region"}
    members = {xform_name(m, "-"): m for m in shape["members"]}
    assert flags <= set(members), flags - set(members)
    assert {xform_name(r, "-") for r in shape.get("required", [])} <= flags


def test_purchase_commands_are_operations_of_botocores_models(trn2_30b):
    commands = [c.purchase for c in plan(load("huge")).training.candidates if c.purchase]
    commands += [c.purchase for c in trn2_30b.training.candidates if c.purchase]
    kinds = {b.kind for b in commands}
    assert kinds == {CAPACITY_BLOCK, TRAINING_PLAN}
    for b in commands:
        _check_command(b.search)
        _check_command(b.buy)


def test_a_training_plan_reserves_one_of_its_quantities():
    counts = CAT.training_plan_limits["instance_counts"]
    assert [plan_count(n, CAT) for n in (1, 3, 16, 17, 64, 71)] == [1, 4, 16, 32, 64, 64]
    assert all(plan_count(n, CAT) in counts for n in range(1, 100))


def test_a_named_training_plan_is_priced_at_the_reserved_rate():
    t = plan(load("huge", TRN2_PLAN)).training
    rate = CAT.types["trn2.48xlarge"].capacity_block_prices["us-east-2"]
    assert t.purchase is None and t.estimate.usd_per_hour == pytest.approx(rate * t.instance_count)
    assert t.estimate.usd_total == pytest.approx(est.billed_hours(t.estimate.hours, TRAINING_PLAN) * rate * 16)


def test_a_training_plan_bills_nothing_outside_the_run():
    from workloads.planning.estimates import cluster_lines

    t = plan(load("huge", TRN2_PLAN)).training
    (line,) = cluster_lines(t, 730)
    assert line.usd == 0 and "training plan" in line.item


def test_a_plan_arn_of_another_region_is_refused():
    """CreateCluster refuses a plan of another region: an ERROR naming the field, the ARN and what is allowed, exit 2
    from the CLI without a traceback."""
    arn = "arn:aws:sagemaker:us-west-2:123456789012:training-plan/x"
    with pytest.raises(ConfigError, match=r"training.training_plan_arn = .*us-west-2.*: the plan is in us-west-2, the "
                                          r"cluster in us-east-2.*allowed: a training plan bought in us-east-2"):
        plan(load("huge", {**TRN2_PLAN, "training.training_plan_arn": arn}))
    done = subprocess.run([sys.executable, "-m", "workloads", "plan", "huge", "-c", "training.instance_type=trn2.48xlarge",
                           "-c", "training.orchestrator=hyperpod", "-c", f"training.training_plan_arn={arn}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "training.training_plan_arn" in done.stderr and "us-east-2" in done.stderr


def test_trn2_on_slurm_without_capacity_names_the_training_plan_way():
    """AWS PCS runs no Trn2 block: a Slurm cluster of it is impossible without a reservation, and the refusal names
    HyperPod on a training plan beside the reservation."""
    with pytest.raises(ConfigError, match="training.orchestrator=hyperpod: planned on a SageMaker training plan"):
        plan(load("huge", {"training.instance_type": "trn2.48xlarge"}))


def test_hyperpod_group_of_trn2_carries_the_plan(synth):
    """cdk synth -c workload=huge -c training.instance_type=trn2.48xlarge -c training.orchestrator=hyperpod
    -c training.training_plan_arn=...: the worker group is ml.trn2.48xlarge on the plan."""
    s = synth("huge", TRN2_PLAN)
    cluster = s.one("TrainStack", "AWS::SageMaker::Cluster")["Properties"]
    workers = next(g for g in cluster["InstanceGroups"] if g["InstanceGroupName"] == "workers")
    assert workers["InstanceType"] == "ml.trn2.48xlarge"
    assert workers["TrainingPlanArn"] == TRN2_PLAN["training.training_plan_arn"]


def test_the_table_shows_capacity_and_the_commands(capsys):
    from workloads.commands.cli import main

    assert main(["plan", "huge", "--full", *(a for k, v in TRN2_30B.items() for a in ("-c", f"{k}={v}"))]) == 0
    out = capsys.readouterr().out
    assert "capacity" in out and "SageMaker training plan" in out
    assert "aws sagemaker search-training-plan-offerings --region us-east-2" in out
    assert "on a SageMaker training plan to buy first" in out


def _beta_types() -> list[tuple[str, object]]:
    """Every catalog type whose accelerator trains on a stack its vendor calls beta (software.yaml `beta`)."""
    from workloads.catalog import load_software

    sw = load_software()
    return [(name, stack) for stack in sw.stacks if stack.beta for name, t in CAT.types.items()
            if t.accelerator and t.accelerator.model in stack.accelerators]


@pytest.mark.parametrize("itype,stack", _beta_types(), ids=lambda v: v if isinstance(v, str) else "")
def test_a_beta_stack_trains_with_a_warning_that_says_so(itype, stack):
    """TorchNeuron (Neuron 2.33) is a public beta: Trn2 trains on it, and the plan warns, citing the release notes."""
    p = plan(load("huge", {**TRN2_PLAN, "training.instance_type": itype}))
    (warning,) = [f for f in p.warnings if f.field == "training.instance_type" and stack.beta in f.message]
    assert stack.name in warning.message and "neuron" in warning.source.lower()


def test_a_training_job_runs_on_a_named_training_plan(monkeypatch):
    """A SageMaker training job on a plan (ResourceConfig TrainingPlanArn): the plan prices it at the reserved rate,
    and `submit` hands the plan's ARN to the job's compute."""
    import sagemaker.train

    from workloads.commands import jobs

    arn = "arn:aws:sagemaker:us-west-2:123456789012:training-plan/jobs-plan"
    p = plan(load("intermediate", {"training.orchestrator": "sagemaker-jobs", "training.training_plan_arn": arn,
                                   "training.instance_type": "p4d.24xlarge"}))
    t = p.training
    assert t.orchestrator == "sagemaker-jobs" and t.estimate.price_note.startswith(TRAINING_PLAN)
    rate = CAT.types[t.instance_type].capacity_block_prices["us-west-2"]
    assert t.estimate.usd_per_hour == pytest.approx(rate * t.instance_count)
    seen = {}

    class Trainer:
        def __init__(self, **kwargs):
            seen.update(kwargs)
            self._latest_training_job = type("Job", (), {"training_job_name": "intermediate-train-1"})()

        def train(self, **kwargs):
            pass

    monkeypatch.setattr(sagemaker.train, "ModelTrainer", Trainer)
    monkeypatch.setattr(jobs, "_session", lambda estate: None)
    from workloads.commands import prepare_job  # the shards are there already: no Processing job before it
    monkeypatch.setattr(prepare_job, "prepared", lambda plan, estate, s3=None: True)
    estate = jobs.Estate(region="us-west-2", role_arn="arn:aws:iam::123456789012:role/r", bucket="b",
                         subnets=("subnet-1",), security_groups=("sg-1",))
    submitted = jobs.submit(p, entry_point="train.py", source_dir="examples/slurm", estate=estate)
    assert seen["compute"].training_plan_arn == arn and "on a training plan" in submitted.estimate


def test_reserved_rows_of_a_training_job_buy_a_plan_for_training_jobs():
    t = plan(load("intermediate")).training
    rows = [c for c in t.candidates if c.purchase]
    assert rows and all("--target-resources training-job" in c.purchase.search for c in rows)
    assert all("-c training.orchestrator=sagemaker-jobs" in c.purchase.deploy for c in rows)
    assert sum(c.chosen for c in t.candidates) == 1


def test_synthesis_of_capacity_still_to_buy_is_refused_with_the_purchase():
    """`plan` shows a run on capacity to buy; `cdk synth` would build a HyperPod group with nothing to start on, so it
    refuses, naming the commands that buy it and the -c that deploys onto it; once named, it synthesizes."""
    from workloads.commands.context import read_context

    overrides = {"workload": "huge", **{k: v for k, v in TRN2_30B.items()}}
    with pytest.raises(ConfigError) as err:
        read_context(overrides)
    message = str(err.value)
    assert message.startswith("training.training_plan_arn = None") and "not bought yet" in message
    assert "aws sagemaker search-training-plan-offerings" in message and "aws sagemaker create-training-plan" in message
    assert "-c training.orchestrator=hyperpod -c training.training_plan_arn=<TrainingPlanArn>" in message
    arn = "arn:aws:sagemaker:us-east-2:123456789012:training-plan/bought"
    target = read_context({**overrides, "training.orchestrator": "hyperpod", "training.training_plan_arn": arn})
    assert target.plan.training.purchase is None


def test_an_unconfirmed_rate_says_so_on_the_plans_price_line():
    """trn2's 35.76 $/h is a third-party on-demand figure read as the Capacity Block rate (instances.yaml
    price_unconfirmed): the training plan's price says UNCONFIRMED, that the offering's UpfrontFee decides, and the
    figure's date; a rate recorded without doubt (p5's block) carries no such words."""
    t = plan(load("huge", TRN2_PLAN)).training
    trn2 = CAT.types["trn2.48xlarge"]
    assert "capacity_block" in trn2.price_unconfirmed
    note = t.estimate.price_note
    assert "UNCONFIRMED" in note and "the offering's UpfrontFee decides the price" in note
    assert f"(as of {trn2.as_of})" in note
    p5 = CAT.types["p5.48xlarge"].price("us-east-2", sagemaker=False, capacity_block=True)
    assert p5 is not None and "UNCONFIRMED" not in p5.label
    for itype in CAT.types.values():  # every doubt names a kind of price the type records
        assert set(itype.price_unconfirmed) <= {"ec2", "sagemaker", "capacity_block"}, itype.name
