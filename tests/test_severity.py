"""Severity levels, as ParallelCluster's validators have them: an ERROR refuses (exit 2, one line each), a WARNING
is shown in the plan, its JSON and `cdk synth`'s output and the build goes on, an INFO explains. --strict (and
-c strict=true) refuses warnings too, for CI pipelines."""

from __future__ import annotations

import json
import pytest

from workloads import ConfigError, load, plan
from workloads.commands.cli import main
from workloads.commands.context import read_context
from workloads.errors import INFO, WARNING

from workloads.catalog import load_catalog
from workloads.planning.candidates import TRAINING_CANDIDATES

from .conftest import RESERVATION, TRN2
from .conftest import TRN1 as TRN1_OVERRIDES

CAT = load_catalog()

# Trn1 takes huge's pipeline only for a model the XLA trainer runs data parallel (conftest.TRN1).
# Without huge's nightly LLM batch on a GPU, which warns that no transform host runs the CUDA 13 vLLM image
# (tests/test_hosts.py): the Trn1 warning alone.
# Real-time on a GPU: huge's own Inferentia fleet warns that its Neuron host is untested (tests/test_hosts.py).
ONE_WARNING = {**TRN1_OVERRIDES, "inference.batch": "null", "inference.realtime.instance_type": "ml.g6.xlarge"}
TRN1 = ["huge", *(arg for k, v in ONE_WARNING.items() for arg in ("-c", f"{k}={v}"))]
# A classic-ML config on a burstable type: built, with a warning from the validators (not the planner).
T3 = ["intermediate", "-c", "model.framework=xgboost", "-c", "training.instance_type=t3.medium", "-c",
      "inference.artifact.format=xgboost", "-c", "inference.artifact.key=models/model.tar.gz",
      "-c", "data.tokens_billion=null"]  # the preset's token count, which classic ML does not read (a warning too)


def test_a_warning_is_shown_in_the_plan_and_the_build_goes_on(capsys, pin_images):
    pin_images(plan(load("huge", ONE_WARNING)))
    assert main(["plan", *TRN1]) == 0  # one screen: a line a warning
    out = capsys.readouterr().out
    assert "2 warnings" in out and "  - training.instance_type: Trn1/Trn1n train on Neuron 2.28" in out
    assert main(["plan", *TRN1, "--full"]) == 0  # the table, each in full with its source
    out = capsys.readouterr().out
    assert "Warnings and notes" in out and "WARNING" in out and "Neuron 2.28" in out


def test_the_plan_json_lists_warnings_with_field_message_and_source(capsys, pin_images):
    pin_images(plan(load("huge", ONE_WARNING)))
    assert main(["plan", *TRN1, "--json"]) == 0
    # Trn1's legacy stack, and its node packages not hash-locked (test_node_locks.py)
    warnings = json.loads(capsys.readouterr().out)["warnings"]
    assert len(warnings) == 2 and all(set(w) == {"field", "message", "source"} for w in warnings)
    assert all(w["field"] == "training.instance_type" for w in warnings)
    assert "announce-eos-nxdt-nxd-core-training" in warnings[0]["source"]
    assert "without a hash lock" in warnings[1]["message"]


@pytest.mark.parametrize("argv", [TRN1, T3], ids=["planner", "validator"])
def test_strict_refuses_warnings_with_exit_2_and_one_line_each(capsys, argv, pin_images):
    pin_images(plan(load(argv[0], dict(kv.split("=", 1) for kv in argv[2::2]))))
    assert main(["plan", *argv, "--strict"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == (2 if argv is TRN1 else 1) and "Traceback" not in "".join(err)
    assert all(line.startswith("error: training.instance_type = ") for line in err)


# intermediate without its batch and in bf16 (FP8 serving is a warning: it changes the model's numerics)
QUIET = {"inference.batch": "null", "inference.generation.quantization": "none"}


def test_strict_passes_a_plan_without_warnings(capsys, pin_images):
    argv = ["plan", "intermediate", *(a for k, v in QUIET.items() for a in ("-c", f"{k}={v}")), "--strict", "--json"]
    assert not plan(load("intermediate", QUIET)).warnings
    assert main(argv) == 2  # images by tag
    capsys.readouterr()
    pin_images(plan(load("intermediate", QUIET)))
    assert main(argv) == 0


def test_a_slurm_type_not_sold_on_demand_is_an_error_until_capacity_is_named(capsys):
    """Before: a WARNING, and `cdk deploy TrainStack` built a cluster whose on-demand nodes never launch. EC2 sells
    trn2.48xlarge in us-east-2 only as Capacity Blocks (catalog `sold`), so a Slurm cluster of it without capacity is
    an ERROR naming the field, the value and what to set; and since AWS PCS runs no Trn2 block, the fix it names is
    a type sold on-demand there or an On-Demand Capacity Reservation, never a block."""
    argv = ["huge", "-c", "training.instance_type=trn2.48xlarge"]
    assert main(["plan", *argv]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: training.instance_type = 'trn2.48xlarge': EC2 sells trn2.48xlarge in us-east-2 "
                           "only as EC2 Capacity Blocks for ML") and "Traceback" not in line
    sold_there = [n for n in TRAINING_CANDIDATES["large-dl"] if CAT.types[n].sold_on_demand("us-east-2")]
    assert sold_there and all(n in line for n in sold_there) and "trn2.48xlarge," not in line.split("allowed:")[1]
    assert "-c training.capacity_reservation_id=cr-... -c training.capacity_reservation_az=us-east-2b" in line
    assert "training.capacity_block=true" not in line and "docs.aws.amazon.com" in line
    assert main(["plan", *argv, *(a for k, v in RESERVATION.items() for a in ("-c", f"{k}={v}"))]) == 0


def test_a_type_sold_only_as_blocks_names_the_block_fields_when_pcs_runs_its_blocks():
    """p5e.48xlarge: Capacity Blocks only (us-east-2), a family PCS runs in blocks: the fix is the block's fields."""
    with pytest.raises(ConfigError) as refused:
        plan(load("huge", {"training.instance_type": "p5e.48xlarge"}))
    err = refused.value
    assert (err.field, err.value) == ("training.instance_type", "p5e.48xlarge")
    assert ("-c training.capacity_block=true -c training.capacity_reservation_id=cr-... -c "
            "training.capacity_reservation_az=us-east-2b") in err.allowed and "p5.48xlarge" in err.allowed


def test_a_capacity_block_of_a_family_pcs_does_not_run_is_an_error():
    """PCS user guide, Capacity Blocks limitations: P6-B300, P6-B200, P5en, P5e, P5 and P4d only."""
    with pytest.raises(ConfigError) as refused:
        plan(load("huge", {**TRN2, "training.capacity_block": "true"}))
    err = refused.value
    assert (err.field, err.value) == ("training.capacity_block", True)
    assert "not of trn2" in err.reason and "pcs/latest/userguide/capacity-blocks" in err.reason
    assert "On-Demand Capacity Reservation of trn2.48xlarge" in err.allowed


def test_a_burstable_type_trains_with_a_warning_not_an_error():
    """Before: refused ("t3 is for notebooks"). A t3 does train, only slower once its credits are spent: advice."""
    p = plan(load(T3[0], dict(kv.split("=", 1) for kv in T3[2::2])))
    assert p.training.instance_type == "t3.medium"
    assert [f.level for f in p.warnings] == [WARNING] and "CPU credits" in p.warnings[0].message


def test_a_cheaper_candidate_is_an_info_note_not_a_decision():
    p = plan(load("huge", TRN1_OVERRIDES))
    notes = [f for f in p.findings if f.level == INFO]
    assert notes and "would cost" in notes[0].message and not any("would cost" in d for d in p.training.decisions)
    assert not any(f.level == INFO for f in p.warnings)


def test_cdk_context_strict_refuses_warnings_and_false_lets_them_through():
    context = {"workload": "huge", **TRN1_OVERRIDES}
    assert read_context({**context, "strict": "false"}).findings
    with pytest.raises(ConfigError, match="refused under strict"):
        read_context({**context, "strict": "true"})
    with pytest.raises(ConfigError, match="strict = 'maybe'"):
        read_context({**context, "strict": "maybe"})


def test_cdk_synth_prints_each_warning_on_stderr(tmp_path, monkeypatch, capsys, pin_images):
    """app.py reports the warnings (the stacks never read context) before building; the building is stubbed here:
    the stacks' own tests synthesize. Run as `python app.py` with -c overrides added to the app's context (the CDK
    CLI hands them over in CDK_CONTEXT_JSON, which jsii's already running kernel would not see here)."""
    import app

    pin_images(plan(load("huge", ONE_WARNING)))
    built, real_app = [], app.cdk.App
    monkeypatch.setattr(app, "build", lambda cdk_app, target, **_: built.append(target))
    monkeypatch.delenv("CDK_CONTEXT_JSON", raising=False)
    for strict, status in (("false", 0), ("true", 2)):
        overrides = {"workload": "huge", **ONE_WARNING, "strict": strict}
        monkeypatch.setattr(app.cdk, "App", lambda **kw: real_app(**{**kw, "outdir": str(tmp_path),
                                                                    "context": {**kw["context"], **overrides}}))
        assert app.main() == status
        err = [line for line in capsys.readouterr().err.splitlines()
               if not line.startswith(("python app.py", "synth: "))]  # the app's own and its progress lines
        if status == 0:
            # each a line of its headline, then once the command that shows them whole
            assert built and "python -m workloads plan huge -c " in err[-1] and err[-1].endswith(" --full)"), err
            assert len(err) > 1 and all(line.startswith("warning: training.instance_type = 'trn1.32xlarge'")
                                        for line in err[:-1])
        else:  # one line a warning: Trn1's legacy stack, its packages not hash-locked
            assert len(err) == 2 and all(line.startswith("error: training.instance_type") for line in err)
