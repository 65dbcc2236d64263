"""Training-only workloads (issue 32): no inference section, `inference: none` (or null, also as `-c inference=...`),
or `inference.serve: false` plan and deploy no endpoint, and the plan says so in one line. Before: a 30B pre-training
run with no inference section was planned with a real-time endpoint on ml.g6.12xlarge ($4,199 a month), and
`-c inference=null` was refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from workloads import load, plan
from workloads.commands.context import read_context
from workloads.errors import WARNING
from workloads.planning.serving import TRAINING_ONLY

from .conftest import ROOT, TEAMS_FILE

PRETRAIN = """\
name: pretrain
region: us-west-2
availability_zone: us-west-2b
model: {parameters_billion: 30, framework: pytorch}
data: {dataset_size_gib: 2000}
"""


def test_a_workload_without_an_inference_section_plans_no_endpoint(tmp_path):
    path = tmp_path / "pretrain.yaml"
    path.write_text(PRETRAIN)
    p = plan(load(str(path)))
    assert p.inference == {} and not p.workload.inference.serve
    assert p.path[-1] == TRAINING_ONLY
    assert p.to_dict()["inference"] == {}
    assert all(line.item.split()[0] not in ("realtime", "serverless", "async", "batch") for line in p.monthly.lines)


@pytest.mark.parametrize("value", ["none", "null", "~"])
def test_inference_none_or_null_on_the_command_line_is_training_only(value):
    target = read_context({"workload": "huge", "inference": value})
    assert target.plan.inference == {} and target.plan.path[-1] == TRAINING_ONLY


def test_inference_none_in_a_file_is_training_only(tmp_path):
    path = tmp_path / "pretrain.yaml"
    path.write_text(PRETRAIN + "inference: none\n")
    assert plan(load(str(path))).inference == {}


def test_serve_false_keeps_the_artifact_settings_training_reads_and_warns_about_listed_kinds():
    """huge lists real-time, async and batch and exports a Hugging Face directory; serve: false keeps the export."""
    p = plan(load("huge", {"inference.serve": "false"}))
    assert p.inference == {}
    assert p.training.parallelism.export_dir, "the trainer still exports the Hugging Face directory"
    [warning] = [f for f in p.findings if f.field == "inference.serve"]
    assert warning.level == WARNING and "realtime, async, batch" in warning.message


def test_a_section_without_kinds_still_lets_the_traffic_choose():
    """An inference section that lists no kind is not training only: the planner picks from the traffic."""
    p = plan(load("small", {"inference.realtime": "null", "inference.serverless": "null", "inference.batch": "null",
                            "inference.traffic": "periodic"}))
    assert list(p.inference) == ["batch"]


def test_synthesized_training_only_estate_has_no_inference_stack(synth):
    s = synth("huge", {"inference": "none"})
    assert "InferenceStack" not in s.templates and "TrainStack" in s.templates


def test_shipped_workloads_say_what_they_serve():
    """Presets, examples and the teams file list their kinds (or traffic) explicitly, so the new reading of an absent
    section (training only) changes none of them."""
    import yaml

    files = [*(ROOT / "workloads" / "presets").glob("*.yaml"), *(ROOT / "examples" / "workloads").glob("*.yaml")]
    for path in files:
        raw = yaml.safe_load(Path(path).read_text())
        assert isinstance(raw.get("inference"), dict) and raw["inference"], path
        assert plan(load(str(path))).inference, path
    teams = read_context({"teams": str(TEAMS_FILE)}).teams
    assert all(s.plan.inference for s in teams)
