"""Review R2, P7: the vision example was planned with the language-model recipe (Llama 2's learning rate, its 4M-token
batch in 4,096-token sequences, train.py launch flags) though no shipped trainer builds a vision network. The plan
now says the workload brings its own script (a WARNING with what to run) and prints no recipe of its own for it."""

from __future__ import annotations

import contextlib
import io

from workloads import load, plan
from workloads.commands.cli import main

EXAMPLE = "examples/workloads/vision-classifier.yaml"


def test_a_vision_model_is_told_to_bring_its_own_script():
    p = plan(load(EXAMPLE))
    found = [f for f in p.training.findings if f.field == "model.architecture"]
    assert len(found) == 1 and found[0].level == "WARNING"
    assert "bring your own training script" in found[0].message
    assert "--entry-point" in found[0].message  # a SageMaker job: submit with the script
    cluster = plan(load(EXAMPLE, {"training.orchestrator": "slurm"}))
    said = next(f for f in cluster.training.findings if f.field == "model.architecture").message
    assert "sbatch your own script" in said


def test_a_vision_plan_prints_no_language_model_recipe():
    p = plan(load(EXAMPLE))
    decisions = " ".join(p.training.decisions)
    assert "Llama 2" not in decisions and "learning rate" in decisions  # said to be the script's, never a figure
    assert "peak learning rate" not in decisions and "global batch:" not in decisions
    assert p.training.parallelism.steps == 0 and p.training.parallelism.warmup_steps == 0
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["plan", EXAMPLE, "--full"]) == 0
    printed = out.getvalue()
    assert "(your training script)" in printed and "train.py --compile" not in printed
    assert "entry vocabulary" not in printed  # no language model's vocabulary in its layout line
    # A language model keeps its recipe.
    assert any("Llama 2's recipe" in d for d in plan(load("intermediate")).training.decisions)
