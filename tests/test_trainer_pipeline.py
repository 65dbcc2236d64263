"""Issue 42: pipeline parallelism (torch.distributed.pipelining) in the shipped trainer, where the planner's memory
model needs it. On CPU ranks (gloo), fp32: pipeline 2 on two ranks, pipeline 2 x data 2 on four (FSDP2 per stage) and
pipeline 4 under GPipe train step for step as one process does on the same data (losses and held-out losses), a step
with an injected inf gradient is skipped on every stage, a stopped run resumes to the uninterrupted run's losses, and
the export, each stage writing its own layers, loads in transformers with the trained model's logits. (Before:
train.py refused any layout with pipeline above 1.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.trainer  # make test-trainer

TRAINER = Path(__file__).resolve().parent.parent / "examples" / "slurm" / "train.py"
# Five blocks: pipeline 2 splits them 3 + 2, pipeline 4 as 2 + 1 + 1 + 1 (pipeline.spans).
SMALL = ["--layers", "5", "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--seq", "32", "--vocab", "256"]
COMMON = ["--device", "cpu", *SMALL, "--log-every", "1", "--steps", "4", "--lr", "1e-2", "--warmup", "0",
          "--global-batch", "4", "--tensor", "1", "--eval-every", "2", "--checkpoint-every", "2"]


def _run(tmp: Path, *args: str, ranks: int, script: Path = TRAINER) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}",
               str(script), *COMMON, *args]
    done = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _losses(out: str) -> dict[int, float]:
    return {int(m[1]): float(m[2]) for m in re.finditer(r"^step (\d+) loss ([0-9.a-z]+)", out, re.M)}


def _evals(out: str) -> dict[int, float]:
    return {int(m[1]): float(m[2]) for m in re.finditer(r"^eval step (\d+) held-out loss ([0-9.]+)$", out, re.M)}


def _close(a: dict, b: dict) -> bool:
    return sorted(a) == sorted(b) and all(a[k] == pytest.approx(b[k], rel=1e-5, abs=1e-6) for k in a)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """A prepared token directory (prepare.py's layout) with a held-out slice: the pattern of conftest's tokens."""
    import numpy as np

    path = tmp_path_factory.mktemp("prepared")
    (path / "heldout").mkdir()
    (path / "meta.json").write_text(json.dumps({"dtype": "uint16", "vocab_size": 256, "parts": 0}))
    (np.arange(1 << 14) % 17).astype(np.uint16).tofile(path / "a.bin")
    (np.arange(2048) % 17).astype(np.uint16).tofile(path / "heldout" / "a.bin")
    return path


@pytest.fixture(scope="module")
def one_process(tmp_path_factory, data) -> str:
    """The reference: one rank, the whole model, four micro-steps of one sequence a step."""
    tmp = tmp_path_factory.mktemp("one")
    return _run(tmp, "--data", str(data), "--batch", "1", "--sharding", "none", "--checkpoint-dir", str(tmp / "c"),
                ranks=1)


@pytest.fixture(scope="module")
def pipelined(tmp_path_factory, data) -> Path:
    """Pipeline 2 x data 2 (FSDP2 per stage) trained uninterrupted to the end and exported."""
    tmp = tmp_path_factory.mktemp("pp2dp2")
    out = _run(tmp, "--data", str(data), "--batch", "1", "--sharding", "full", "--pipeline", "2",
               "--checkpoint-dir", str(tmp / "c"), "--export-dir", str(tmp / "export"), ranks=4)
    (tmp / "out.txt").write_text(out)
    return tmp


@pytest.mark.parametrize("layout, ranks, said", [
    (["--pipeline", "2", "--sharding", "none", "--batch", "1"], 2, "DDP, pipeline 2 stages (1F1B)"),
    # Before: DDP wrapped each stage, and its reducer failed the second step at data 2 (PyTorch 2.15); the stage's
    # gradients are now averaged over its data ranks after the step (pipeline.Pipeline._average_gradients).
    (["--pipeline", "2", "--sharding", "none", "--batch", "1"], 4, "DDP, pipeline 2 stages (1F1B)"),
    # The planner's pipelined layouts: tensor parallel inside a node, stages across (the head split over the
    # vocabulary on the last stage, its loss computed on the shards).
    (["--pipeline", "2", "--tensor", "2", "--sharding", "full", "--batch", "1"], 4,
     "FSDP2, tensor parallel 2, pipeline 2 stages (1F1B)"),
    # Two micro-batches of two sequences for four stages: fewer than the stages, so GPipe.
    (["--pipeline", "4", "--sharding", "full", "--batch", "2"], 4, "FSDP2, pipeline 4 stages (GPipe)"),
])
def test_a_pipeline_trains_as_one_process_on_the_same_data(tmp_path, data, one_process, layout, ranks, said):
    out = _run(tmp_path, "--data", str(data), *layout, "--checkpoint-dir", str(tmp_path / "c"), ranks=ranks)
    assert said in out, out
    reference = _losses(one_process)
    assert sorted(reference) == [1, 2, 3, 4] and reference[4] < reference[1]  # it learns the pattern
    assert _close(_losses(out), reference), (_losses(out), reference)
    assert sorted(_evals(one_process)) == [2, 4]
    if " = 1 data ranks x " in out:  # more data ranks evaluate more held-out windows
        assert _close(_evals(out), _evals(one_process)), out


def test_pipeline_2_x_data_2_trains_as_one_process_and_each_stage_checkpoints_its_own_parameters(pipelined,
                                                                                                 one_process):
    from torch.distributed.checkpoint import FileSystemReader

    out = (pipelined / "out.txt").read_text()
    whole = re.search(r"training ([0-9,]+) parameters", one_process)[1]  # the stages' count is the whole model's
    assert f"training {whole} parameters on 4 ranks (FSDP2, pipeline 2 stages (1F1B), cpu)" in out, out
    assert "2 data ranks x 1 x 2 micro-steps" in out
    assert _close(_losses(out), _losses(one_process)), out
    # Two data ranks evaluate twice the held-out windows of one: the held-out loss is there and falls.
    evals = _evals(out)
    assert sorted(evals) == [2, 4] and evals[4] < evals[2], out
    step = pipelined / "c" / "step-00000004"
    assert len(list(step.glob("*.distcp"))) == 4  # every rank its shards
    names = {k.removeprefix("training.model.") for k in FileSystemReader(step).read_metadata().state_dict_metadata
             if k.startswith("training.model.")}
    blocks = {int(n.split(".")[2]) for n in names if n.startswith("model.layers.")}
    assert blocks == set(range(5)) and {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"} <= names


def test_a_stopped_pipeline_resumes_to_the_uninterrupted_runs_losses(tmp_path, data, pipelined):
    """Stopped after step 2 (checkpointed as a signalled job is), started again: steps 3 and 4 are the uninterrupted
    run's, which they are only when every stage restored its weights, its AdamW moments and the step."""
    run = ["--data", str(data), "--batch", "1", "--sharding", "full", "--pipeline", "2",
           "--checkpoint-dir", str(tmp_path / "c")]
    stopped = _run(tmp_path, *run, "--stop-after", "2", ranks=4)
    assert "stopped after step 2" in stopped and sorted(_losses(stopped)) == [1, 2]
    resumed = _run(tmp_path, *run, ranks=4)
    assert "resumed from" in resumed and "at step 2" in resumed and sorted(_losses(resumed)) == [3, 4]
    straight = _losses((pipelined / "out.txt").read_text())
    assert _close({**_losses(stopped), **_losses(resumed)}, straight), (stopped, resumed, straight)


def test_an_inf_gradient_is_skipped_on_every_stage(tmp_path, data):
    """--inject-nonfinite 2 makes step 2's loss infinite on the last stage; its inf/NaN gradients flow back through
    every stage. The norm over all stages is not finite, so every stage skips the step: the later losses are those
    of one process skipping the same step (a stage that stepped would carry NaN weights, or other ones)."""
    fault = ["--data", str(data), "--batch", "1", "--inject-nonfinite", "2"]
    one = _run(tmp_path, *fault, "--sharding", "none", "--checkpoint-dir", str(tmp_path / "a"), ranks=1)
    out = _run(tmp_path, *fault, "--sharding", "full", "--pipeline", "2", "--checkpoint-dir", str(tmp_path / "b"),
               ranks=4)
    assert re.search(r"^step 2 skipped: gradient norm (nan|inf)", out, re.M), out
    losses = _losses(out)
    assert losses[3] == losses[3] and losses[3] != float("inf")  # finite after the skip
    later = {k: v for k, v in losses.items() if k != 2}
    assert _close(later, {k: v for k, v in _losses(one).items() if k != 2}), (out, one)


def _trained(checkpoint: Path, tmp: Path):
    """The model of a pipelined run's checkpoint, whole (the stages' parameters under the full model's names)."""
    import importlib.util

    import torch
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    dcp_to_torch_save(checkpoint, tmp / "final.pt")
    weights = torch.load(tmp / "final.pt", weights_only=False)["training"]["model"]
    spec = importlib.util.spec_from_file_location("train", TRAINER)
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    model = train.Llama(vocab=256, layers=5, hidden=64, heads=4, kv_heads=2,
                        intermediate=train.llama_intermediate(64), recompute_blocks=False)
    model.load_state_dict(weights)
    return model.eval()


def test_the_pipelined_export_loads_in_transformers_with_the_trained_models_logits(tmp_path, pipelined, data):
    """Each stage wrote its own layers' shards under the full model's names; transformers' LlamaForCausalLM loads the
    directory and gives the trained model's logits. Rank 0's one-file-at-a-time export (a directory each node has
    its own of), which receives the other stages' tensors, writes the same weights."""
    import torch
    from safetensors.torch import load_file
    from transformers import LlamaForCausalLM

    export = pipelined / "export"
    assert "exported" in (pipelined / "out.txt").read_text()
    ours = _trained(pipelined / "c" / "step-00000004", tmp_path)
    theirs = LlamaForCausalLM.from_pretrained(export).eval()
    sample = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        assert torch.allclose(theirs(sample).logits, ours(sample), atol=1e-4, rtol=1e-4)

    driver = tmp_path / "rank0_export.py"  # the trainer with the shared-directory probe answering no
    driver.write_text("import runpy, sys\nsys.path.insert(0, %r)\nimport hf_export\n"
                      "hf_export._shared = lambda *a: False\nsys.argv[0] = %r\n"
                      "runpy.run_path(%r, run_name='__main__')\n" % (str(TRAINER.parent), str(TRAINER), str(TRAINER)))
    out = _run(tmp_path, "--data", str(data), "--batch", "1", "--sharding", "full", "--pipeline", "2",
               "--checkpoint-dir", str(pipelined / "c"), "--export-dir", str(tmp_path / "rank0"), ranks=4,
               script=driver)
    assert "at step 4" in out and "by rank 0 a file at a time" in out, out
    first, second = load_file(export / "model.safetensors"), load_file(tmp_path / "rank0" / "model.safetensors")
    assert set(first) == set(second) and all(torch.equal(first[k], second[k]) for k in first)


def test_fsdp2_stages_hold_only_the_sharded_gradient_the_plan_counts():
    """After every micro-batch's backward each rank of pipeline 2 x data 2 holds its shard of its stage's fp32
    gradients (GRADIENT_BYTES_PER_PARAM over the stage's data ranks), what the memory model counts: torch's
    PipelineStage alone keeps the stage's whole unsharded gradients (and weights) until the last micro-batch, four
    times that here (pipeline.ShardedStage reduce-scatters every micro-batch, as train.py does without stages)."""
    from workloads.planning.parallelism import GRADIENT_BYTES_PER_PARAM

    probe = Path(__file__).resolve().parent / "probes" / "pipeline_gradient_bytes.py"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4",
                           str(probe)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ranks = json.loads(done.stdout.strip().splitlines()[-1])["ranks"]
    assert len(ranks) == 4 and all(len(r["held"]) == 4 for r in ranks)
    for r in ranks:
        planned = GRADIENT_BYTES_PER_PARAM * r["stage_parameters"] / r["data"]
        assert all(0.9 * planned <= held <= 1.1 * planned for held in r["held"]), (r, planned)


def test_a_pipelined_fine_tune_starts_from_the_base_models_loss(tmp_path, tokens):
    """--init-from under pipeline 2 x data 2: each stage reads its own layers of the base model's safetensors (the
    stage's names are Hugging Face's), so step 1's loss is the base model's as transformers computes it."""
    from .test_trainer import _base_loss, _base_model

    base = tmp_path / "base"
    _base_model(base)
    out = _run(tmp_path, "--init-from", str(base), "--layers", "2", "--data", str(tokens), "--steps", "2",
               "--batch", "1", "--sharding", "full", "--pipeline", "2", "--checkpoint-dir", str(tmp_path / "c"),
               ranks=4)
    assert f"fine-tuning from {base}" in out and "pipeline 2 stages" in out, out
    assert _losses(out)[1] == pytest.approx(_base_loss(base, tokens, 32, 1, 4), rel=1e-4), out
