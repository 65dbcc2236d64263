"""Issue 33, the layout and the trainer at scale (fast: one process, no torchrun; the four-rank tensor-parallel run is
tests/test_trainer.py): tensor parallel inside a node where FSDP2 alone would recompute or outrun the batch, a global
batch fixed in tokens whatever the node count, the checkpoint cadence at most 5% of wall-clock, Llama 2's optimiser
recipe, an epoch sampler without replacement, fp16 with loss scaling where the accelerator has no bf16, and the
model's shape fields in the memory model and the layout the trainer reads."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from workloads import load, plan
from workloads.planning.parallelism import GLOBAL_BATCH_TOKENS, Parallelism, gib_per_rank, trainer_refusal
from workloads.planning.run_length import CHECKPOINT_OVERHEAD, checkpoint_seconds

TRAINER = Path(__file__).resolve().parent.parent / "examples" / "slurm" / "train.py"


@pytest.fixture(scope="module")
def trainer():
    spec = importlib.util.spec_from_file_location("train_at_scale", TRAINER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def train(trainer):
    """recipe.py beside train.py (which imports it): the optimiser, clipping, loss scaling and the data order."""
    return sys.modules["recipe"]


def _training(overrides: dict | None = None):
    return plan(load("huge", overrides)).training


def test_h100s_split_the_70b_model_by_tensor_parallel_instead_of_recomputing_every_block():
    """FSDP-only on p5 (before): every block recomputed (a third more compute) at 4,096 tokens. Now tensor parallel
    inside the node holds the activations, FSDP2 shards across, and the plan says why."""
    t = _training({"training.instance_type": "p5.48xlarge"})
    lay = t.parallelism
    assert lay.tensor > 1 and lay.sharding == "full" and not lay.recompute, lay
    assert lay.tensor <= lay.ranks_per_node and lay.heads % lay.tensor == 0 and lay.kv_heads % lay.tensor == 0
    assert "FSDP2 alone would recompute every block" in lay.reason and f"tensor parallel {lay.tensor}" in lay.reason
    assert any(d.startswith("layout: ") and lay.reason in d for d in t.decisions)
    assert trainer_refusal(lay, t.software.device, what="huge") is None  # the shipped trainer runs it


def test_more_data_ranks_than_the_global_batch_has_sequences_take_tensor_parallel():
    """A model whose state and activations fit FSDP2 alone, on more ranks than the 4M-token batch has sequences:
    tensor parallel brings the data ranks within the batch instead of inflating it."""
    t = _training({"training.instance_type": "p6-b200.48xlarge", "training.instance_count": "256",
                   "model.parameters_billion": "13"})
    lay = t.parallelism
    assert lay.ranks > GLOBAL_BATCH_TOKENS // lay.sequence and lay.tensor > 1, lay
    assert lay.data <= lay.global_batch <= GLOBAL_BATCH_TOKENS // lay.sequence and "data ranks for a" in lay.reason


@pytest.mark.parametrize("nodes", ["8", "16", "32"])
def test_the_global_batch_is_fixed_in_tokens_whatever_the_node_count(nodes):
    t = _training({"training.instance_count": nodes})
    lay = t.parallelism
    assert lay.global_batch * lay.sequence == GLOBAL_BATCH_TOKENS
    assert lay.global_batch % (lay.data * lay.micro_batch) == 0
    assert lay.steps == math.ceil(t.estimate.tokens_billion * 1e9 / GLOBAL_BATCH_TOKENS)
    assert any("gradient accumulation" in d and f"{GLOBAL_BATCH_TOKENS:,} tokens" in d for d in t.decisions)


def test_the_checkpoint_cadence_keeps_its_cost_within_five_percent_and_the_plan_shows_it():
    """Before: a synchronous 1 TiB checkpoint every 100 steps, about as long as the training between them."""
    t = _training()
    lay = t.parallelism
    write_s = checkpoint_seconds(70, t.fsx.throughput_mb_s)
    step_s = t.estimate.hours * 3600 / lay.steps
    assert lay.checkpoint_every > 0 and write_s / (lay.checkpoint_every * step_s + write_s) <= CHECKPOINT_OVERHEAD
    line = next(d for d in t.decisions if d.startswith("checkpoints: "))
    assert f"every {lay.checkpoint_every:,} steps" in line and "dcp.async_save" in line and "of wall-clock" in line


def test_a_t4_plan_computes_in_fp16_with_loss_scaling_not_bf16():
    from workloads.commands.report import _compute

    t = plan(load("examples/workloads/vision-classifier.yaml", {"training.instance_type": "g4dn.xlarge"})).training
    assert t.parallelism.precision == "fp16" and "bf16 compute" not in _compute("fp16")
    assert _compute("fp16").startswith("fp16 compute") and "loss scaling" in _compute("fp16")
    assert _training().parallelism.precision == "bf16"


def test_the_models_vocabulary_and_sequence_length_reach_the_memory_model_and_the_layout():
    # on one type: fp8 makes p6-b200 and p5 close in cost, so the cheapest type may change with the shape
    base = _training({"training.instance_type": "p6-b200.48xlarge"}).parallelism
    llama3 = _training({"model.vocab_size": "128256", "training.sequence_length": "8192",
                        "training.instance_type": "p6-b200.48xlarge"}).parallelism
    assert (base.vocab, base.sequence) == (32000, 4096) and (llama3.vocab, llama3.sequence) == (128256, 8192)
    # More memory per rank, or a layout that splits it (tensor parallel divides the activations and the logits).
    assert llama3.gib_per_rank > base.gib_per_rank or llama3.tensor > base.tensor
    small = gib_per_rank(7e9, 32, 4096, shards=8, tensor=1, pipeline=1, sharded=True, vocab=32000)
    assert gib_per_rank(7e9, 32, 4096, shards=8, tensor=1, pipeline=1, sharded=True, vocab=128256) > small
    assert any("training.sequence_length" in d for d in _training().decisions)  # the default is said


def test_the_trainer_takes_its_run_from_the_layout(trainer, tmp_path, monkeypatch):
    lay = _training({"training.instance_type": "p5.48xlarge"}).parallelism
    path = tmp_path / "layout.json"
    path.write_text(lay.as_json())
    monkeypatch.setattr(sys, "argv", ["train.py", "--device", "cpu", "--layout", str(path),
                                      "--checkpoint-dir", str(tmp_path / "c"), "--export-dir", str(tmp_path / "e")])
    args = trainer.parse()
    assert (args.tensor, args.global_batch, args.batch, args.lr, args.warmup, args.precision, args.checkpoint_every,
            args.vocab, args.seq) == (lay.tensor, lay.global_batch, lay.micro_batch, lay.lr, lay.warmup_steps,
                                      lay.precision, lay.checkpoint_every, lay.vocab, lay.sequence)
    assert lay.lr == 1.5e-4  # Llama 2's peak for 70B


def test_the_optimiser_is_llama_2s(train):
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    args = argparse.Namespace(lr=3e-4, warmup=10, steps=110)
    opt = train.optimizer_for(model, args, torch.device("cpu"))
    assert all(g["betas"] == (0.9, 0.95) and g["eps"] == 1e-5 for g in opt.param_groups)
    assert [g["weight_decay"] for g in opt.param_groups] == [0.1, 0.0]  # matrices decay, gains and biases do not
    lrs = [train.learning_rate(s, args) for s in range(1, 111)]
    assert lrs[0] == pytest.approx(3e-5) and lrs[9] == pytest.approx(3e-4)  # linear warmup to the peak
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:])) and lrs[-1] == pytest.approx(3e-5)  # cosine to 10%


def test_gradients_are_clipped_to_a_global_norm_of_one(train):
    import torch

    model = torch.nn.Linear(3, 1, bias=False)
    model.weight.grad = torch.tensor([[3.0, 4.0, 0.0]])
    assert train.clip_gradients(model, 1.0).item() == pytest.approx(5.0)
    assert model.weight.grad.norm().item() == pytest.approx(1.0, rel=1e-5)


def test_fp16_loss_scaling_skips_an_overflowed_step_and_grows_again(train):
    scale = train.LossScale(True)
    first = scale.scale
    assert not scale.update(float("inf")) and scale.scale == first / 2
    for _ in range(train.LOSS_SCALE_GROWTH_INTERVAL):
        assert scale.update(1.0)
    assert scale.scale == first
    restored = train.LossScale(True)
    restored.load_state_dict(scale.state_dict())
    assert restored.state_dict() == scale.state_dict()  # it is in the checkpoint
    off = train.LossScale(False)
    assert off.scale == 1.0 and off.update(float("nan"))


@pytest.mark.parametrize("size", [1, 2, 7, 64, 1000, 4099])
def test_an_epoch_draws_every_window_once(train, size):
    order = [train.permuted(i, size, "epoch-0") for i in range(size)]
    assert sorted(order) == list(range(size))
    if size > 8:
        assert order != list(range(size)) and order != [train.permuted(i, size, "epoch-1") for i in range(size)]


def test_the_sampler_walks_epochs_of_the_token_file_without_replacement(train, tmp_path):
    import numpy as np

    path = tmp_path / "tokens.bin"
    np.arange(8 * 10 + 1, dtype=np.uint16).tofile(path)  # ten windows of 8 (+1) tokens
    tokens = train.Tokens(path, 8)
    assert tokens.windows == 10
    args = argparse.Namespace(seq=8, vocab=100, batch=1, global_batch=5)
    firsts = [int(train.sample(i, args, tokens)[0]) for i in range(20)]
    assert sorted(firsts[:10]) == sorted(firsts[10:]) == list(range(0, 80, 8))  # two epochs, each window once
    assert firsts[:10] != firsts[10:]  # reshuffled per epoch
    again = [int(train.batch_for(args, 0, 1, step, micro, tokens)[0, 0]) for step in (1, 2, 3, 4) for micro in range(5)]
    assert again == firsts  # a function of the step alone: a resumed run draws the same


def test_the_layout_round_trips_through_json():
    lay = _training().parallelism
    assert Parallelism(**json.loads(lay.as_json())) == lay and asdict(lay)["checkpoint_every"] == lay.checkpoint_every


@pytest.mark.parametrize("preset, overrides", [
    ("intermediate", {}),  # one node, no FSx
    ("huge", {"training.orchestrator": "sagemaker-jobs", "training.instance_type": "p5.48xlarge",
              "training.instance_count": "4"}),  # four nodes: FSx for data, but checkpoints on each node's volume
])
def test_a_sagemaker_plan_passes_its_checkpoint_cadence_from_each_nodes_own_volume(preset, overrides):
    """Before: SageMaker plans carried checkpoint_every 0, so the trainer checkpointed every 100 steps whatever a
    step cost. A job's trainer writes to each node's /opt/ml/checkpoints (jobs.job_environment), its 1/nodes share
    of the checkpoint at the node volume's rate, whether FSx holds the data or not."""
    from workloads.commands.jobs import CHECKPOINT_LOCAL_PATH, job_environment
    from workloads.planning.run_length import NODE_VOLUME_WRITE_MB_S

    p = plan(load(preset, overrides))
    t, lay = p.training, p.training.parallelism
    assert t.orchestrator == "sagemaker-jobs" and job_environment(p)["CHECKPOINT_DIR"] == CHECKPOINT_LOCAL_PATH
    assert json.loads(job_environment(p)["LAYOUT_JSON"])["checkpoint_every"] == lay.checkpoint_every > 0
    write_s = checkpoint_seconds(p.workload.model.parameters_billion / t.instance_count, NODE_VOLUME_WRITE_MB_S)
    step_s = t.estimate.hours * 3600 / lay.steps
    assert write_s / (lay.checkpoint_every * step_s + write_s) <= CHECKPOINT_OVERHEAD
    assert lay.checkpoint_every == max(1, min(lay.steps, math.ceil(write_s / CHECKPOINT_OVERHEAD / step_s)))
    line = next(d for d in t.decisions if d.startswith("checkpoints: "))
    assert f"every {lay.checkpoint_every:,} steps" in line and "own volume" in line


def test_a_plan_without_a_step_time_passes_the_trainers_own_cadence_not_0():
    from workloads.planning.run_length import TRAINER_CHECKPOINT_EVERY, checkpoint_cadence

    lay = _training().parallelism
    decisions: list[str] = []
    no_time = argparse.Namespace(hours=None)
    out = checkpoint_cadence(load("huge"), lay, None, no_time, decisions, 4)
    assert out.checkpoint_every == TRAINER_CHECKPOINT_EVERY == 100 and "default" in decisions[-1]
