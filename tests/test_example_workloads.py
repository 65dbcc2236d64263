"""The commented workload files in examples/workloads/ plan and synthesize as the README says (cdk-nag runs in the
synthesis: a finding fails it), so a newcomer's first copy starts from something that works."""

from __future__ import annotations

import pytest

from workloads import load, plan

from .conftest import ROOT

EXAMPLES = sorted((ROOT / "examples" / "workloads").glob("*.yaml"))


def test_there_are_examples_for_the_common_cases():
    assert {p.stem for p in EXAMPLES} >= {"llm-finetune-realtime", "nightly-xgboost-batch", "vision-classifier"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_an_example_plans_and_synthesizes(synth, path):
    text = path.read_text()
    assert text.startswith("#"), "an example says what it is for"
    the_plan = plan(load(str(path)))
    kinds = set(the_plan.inference)
    templates = synth(str(path)).templates
    assert {"NetworkStack", "DataStack", "TrainStack"} <= set(templates)
    assert ("InferenceStack" in templates) == bool(kinds)
    for kind in kinds:  # each planned kind is in the config the file shows
        assert f"{'async' if kind == 'async' else kind}:" in text, kind


def test_the_readme_workload_plans_and_synthesizes(synth, tmp_path):
    """The ten-line workload file the README shows, exactly as shown."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## A workload in ten lines", 1)[1].split("\n\n")[1]
    lines = [line.removeprefix("    ") for line in block.splitlines()]
    assert len(lines) <= 10 and lines[0] == "name: churn", lines
    path = tmp_path / "churn.yaml"
    path.write_text("\n".join(lines) + "\n")
    assert set(plan(load(str(path))).inference) == {"realtime", "batch"}
    assert "InferenceStack" in synth(str(path)).templates
