"""Issue 42 (review R2, P3): a decoder fine-tuned from base weights (training.init_from) is planned and trained with
the fine-tuning recipe (workloads/catalog/finetune.yaml, each figure sourced), not Llama 2's pre-training recipe: the
plan's batch, steps, warmup and learning rate are the fine-tune's, the layout carries them to the trainer, and
examples/slurm/finetune.py reads the same figures (from the layout, or the YAML itself) without the planner's package.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import re

import pytest

from workloads import load, plan
from workloads.catalog.finetune import PATH, load_finetune_recipe

from .conftest import ROOT

BASE = {"training.init_from": "datasets/base/llama-3-8b"}
FINETUNE_PY = ROOT / "examples" / "slurm" / "finetune.py"


def _finetune_module():
    import sys

    sys.path.insert(0, str(FINETUNE_PY.parent))
    spec = importlib.util.spec_from_file_location("finetune_under_test", FINETUNE_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_figure_of_the_recipe_names_its_source():
    r = load_finetune_recipe()
    assert set(r.sources) == {"learning_rate", "global_batch_sequences", "global_batch_sequence_length",
                              "weight_decay", "warmup_ratio", "epochs"}
    assert all("<https://" in cited for cited in r.sources.values())
    assert (r.learning_rate, r.global_batch_tokens, r.weight_decay) == (2e-5, 64 * 4096, 0.1)


@pytest.mark.parametrize("workload", ["intermediate", "huge"])
def test_a_fine_tune_is_planned_with_the_fine_tuning_recipe_not_pre_trainings(workload):
    r = load_finetune_recipe()
    w = load(workload, BASE)
    t = plan(w).training
    spread = t.parallelism
    per_step = spread.global_batch * spread.sequence
    # The layout's batch is the recipe's tokens, to a whole number of micro-steps.
    assert abs(per_step - r.global_batch_tokens) <= spread.data * spread.sequence, (per_step, spread)
    tokens = t.estimate.tokens_billion if hasattr(t.estimate, "tokens_billion") else None
    fine = next(d for d in t.decisions if d.startswith("fine-tuning recipe"))
    trained = float(re.search(r"([\d.]+)B tokens", fine).group(1))
    assert tokens is None or tokens == pytest.approx(trained)
    assert spread.steps == math.ceil(trained * 1e9 / per_step)
    assert spread.warmup_steps == math.ceil(r.warmup_ratio * spread.steps)
    assert spread.lr == r.learning_rate
    assert "arxiv.org/abs/2307.09288" in fine and "Llama 2's recipe" not in " ".join(t.decisions)
    carried = json.loads(spread.as_json())
    assert carried["finetune"] == {"learning_rate": r.learning_rate, "weight_decay": r.weight_decay,
                                   "warmup_ratio": r.warmup_ratio, "global_batch_tokens": r.global_batch_tokens}
    assert carried["lr"] == r.learning_rate and carried["warmup_steps"] == spread.warmup_steps
    # The same workload pre-trained keeps pre-training's recipe, and its layout no fine-tune.
    pre = plan(load(workload)).training.parallelism
    assert pre.lr in (3e-4, 1.5e-4) and "finetune" not in json.loads(pre.as_json())
    assert pre.global_batch * pre.sequence > 10 * per_step


def test_a_fine_tune_without_epochs_trains_the_recipes_epochs():
    r = load_finetune_recipe()
    one = plan(load("intermediate", {**BASE, "training.epochs": 1})).training
    default = plan(load("intermediate", BASE)).training
    assert default.parallelism.steps == pytest.approx(r.epochs * one.parallelism.steps, abs=1)
    assert default.estimate.hours == pytest.approx(r.epochs * one.estimate.hours, rel=0.02)


def test_the_trainer_reads_the_same_recipe_from_the_layout_or_the_catalog_file(monkeypatch, tmp_path):
    finetune = _finetune_module()
    r = load_finetune_recipe()
    from_file = finetune.recipe({})
    assert from_file == {"learning_rate": r.learning_rate, "weight_decay": r.weight_decay,
                         "warmup_ratio": r.warmup_ratio, "global_batch_tokens": r.global_batch_tokens}
    assert finetune.RECIPE_FILE == PATH
    planned = json.loads(plan(load("intermediate", BASE)).training.parallelism.as_json())
    assert finetune.recipe(planned) == planned["finetune"]
    monkeypatch.setenv("FINETUNE_RECIPE", str(tmp_path / "absent.yaml"))
    with pytest.raises(ValueError) as refused:
        finetune.recipe({})
    assert "FINETUNE_RECIPE" in str(refused.value) and "\n" not in str(refused.value)
    # The trainer holds no figure of its own and never imports the planner.
    source = FINETUNE_PY.read_text()
    assert not re.search(r"^\s*(import|from) workloads", source, re.MULTILINE)
    assert not re.search(r"\b2e-5\b|\b0\.03\b|64 \* 4096", source)


def test_a_planned_fine_tunes_batch_steps_and_warmup_stand_in_the_trainer():
    finetune = _finetune_module()
    layout = json.loads(plan(load("intermediate", BASE)).training.parallelism.as_json())
    args = argparse.Namespace(init_from=None, tensor=1, vocab=256, lr=layout["lr"], steps=layout["steps"],
                              global_batch=layout["global_batch"], warmup=layout["warmup_steps"], seq=4096, batch=1,
                              finetune=finetune.recipe(layout), finetune_planned=True)
    finetune.batch_and_steps(args, layout["data"], set())
    assert (args.global_batch, args.steps, args.warmup) == (layout["global_batch"], layout["steps"],
                                                            layout["warmup_steps"])
    # Without a fine-tune's layout (a pre-training layout and --init-from): the recipe's batch from the YAML.
    args = argparse.Namespace(steps=100, global_batch=1024, warmup=2000, seq=4096, batch=1,
                              finetune=finetune.recipe({}), finetune_planned=False)
    finetune.batch_and_steps(args, 8, set())
    assert args.global_batch * args.seq == load_finetune_recipe().global_batch_tokens
    assert args.steps == 100 * 1024 // 64 and args.warmup == math.ceil(0.03 * args.steps)


def test_the_shipped_fine_tune_example_starts_from_base_weights_and_says_so():
    """Review R2, P3: the example called itself a fine-tune but set no init_from, so it pre-trained an 8B model on
    2B tokens from random weights with Llama 2's pre-training recipe."""
    from workloads.commands.report import summary

    p = plan(load("examples/workloads/llm-finetune-realtime.yaml"))
    base = p.workload.training.init_from
    assert base and base.startswith("datasets/")
    assert f"fine-tuning from the base weights in {base}" in summary(p)[0]
    assert p.training.parallelism.lr == load_finetune_recipe().learning_rate
    assert p.training.parallelism.finetune is not None
