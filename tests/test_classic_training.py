"""Issue 42, classic ML: every CPU family the catalog offers is a training candidate for XGBoost and scikit-learn
unless a sourced reason excludes it (before: c5 was no XGBoost candidate, so a team limited to c5 was refused though
c5 is cheaper than the r5 pick), and a workload says how often it trains (training.schedule or
training.runs_per_month): the monthly estimate counts every run (before: a nightly retrain counted once)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from workloads import load, plan
from workloads.catalog import ML_PREFIX, load_catalog
from workloads.planning import classic
from workloads.config.schedules import runs_per_month
from workloads.planning.training import plan_training

from .conftest import ROOT

CAT = load_catalog()


@pytest.mark.parametrize("framework", ["xgboost", "scikit-learn"])
def test_every_cpu_family_is_a_candidate_unless_a_sourced_reason_excludes_it(framework):
    t = plan_training(load("small", {"model.framework": framework}), CAT)
    costed = {c.instance_type for c in t.candidates}
    from workloads.catalog.sagemaker_apis import load_sagemaker_apis

    sagemaker = {ML_PREFIX + n for n in load_sagemaker_apis().types["TrainingInstanceType"]}
    for itype in (x for x in CAT.types.values() if x.accelerator is None):
        excluded = classic.exclusions().get(itype.family)
        if excluded is not None:
            assert itype.name not in costed and excluded.source.startswith("Amazon EC2 User Guide")
            assert any(itype.name in d and excluded.why in d for d in t.decisions), itype.name
        elif ML_PREFIX + itype.name not in sagemaker:
            assert itype.name not in costed
        else:  # costed, or said why not (no SageMaker price recorded, not offered in the region)
            assert itype.name in costed or any(f"{itype.name}: " in d for d in t.decisions), itype.name
    assert {"c5", "m5", "r5"} <= {c.instance_type.split(".")[0] for c in t.candidates}


def test_a_team_limited_to_c5_trains_xgboost_on_c5():
    t = plan_training(load("small"), CAT.for_families(["c5"]))
    assert t.instance_type.startswith("c5.") and t.estimate.usd_total is not None
    assert {c.instance_type.split(".")[0] for c in t.candidates} == {"c5"}


def test_the_exclusions_name_recorded_sources():
    for e in classic.exclusions().values():
        assert e.why and "<https://" in e.source and "checked 20" in e.source


NIGHTLY = {"training.schedule": "cron(0 1 * * ? *)"}


def test_a_nightly_retrain_counts_every_run_in_the_month():
    once = plan(load("small"))
    nightly = plan(load("small", NIGHTLY))
    run = nightly.training.estimate.usd_total
    runs = runs_per_month("cron(0 1 * * ? *)")
    assert runs == pytest.approx(365 / 12)
    line, = [x for x in nightly.monthly.lines if x.item == "training runs"]
    assert line.usd == pytest.approx(run * runs, abs=0.01) and "training.schedule" in line.quantity
    assert nightly.monthly.usd_month == pytest.approx(once.monthly.usd_month + line.usd, abs=0.02)
    assert nightly.monthly.headline_usd == nightly.monthly.usd_month and nightly.monthly.training_runs == runs
    assert once.monthly.headline_usd == pytest.approx(once.monthly.usd_month + run, abs=0.01)
    assert not [x for x in once.monthly.lines if x.item == "training runs"]
    weekly = plan(load("small", {"training.runs_per_month": "4"}))
    assert [x.usd for x in weekly.monthly.lines if x.item == "training runs"] == [pytest.approx(4 * run, abs=0.01)]


def test_the_cost_command_and_the_plan_say_the_runs_are_in_the_month():
    out = subprocess.run([sys.executable, "-m", "workloads", "plan", "small", "-c", "training.runs_per_month=4"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "with its 4.0 training runs" in out and "with one training run" not in out


@pytest.mark.parametrize("overrides, field", [
    ({"training.schedule": "cron(0 1 * * ? *)", "training.runs_per_month": "4"}, "training"),
    ({"training.schedule": "rate(1 fortnight)"}, "training.schedule"),
    ({"training.schedule": "nightly"}, "training.schedule"),
    ({"training.runs_per_month": "0"}, "training.runs_per_month"),
])
def test_a_bad_frequency_is_refused_in_one_line(overrides, field):
    args = [a for k, v in overrides.items() for a in ("-c", f"{k}={v}")]
    run = subprocess.run([sys.executable, "-m", "workloads", "plan", "small", *args], cwd=ROOT, capture_output=True,
                         text=True)
    assert run.returncode == 2 and "Traceback" not in run.stderr and field in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
