"""Issue 42 (review R2, T1): supervised fine-tuning on prompt/response data trains on the responses only. prepare.py
reads JSONL lines {"prompt": ..., "response": ...}, writes each shard's loss mask beside it (0 on the prompt's
tokens, 1 on the response's and EOS), and the trainer's loss counts only the kept tokens: a prompt's tokens give no
loss and no gradient (Llama 2, section 3.1). Plain text keeps training on every token, with no mask written."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

from .conftest import ROOT
from .golden import train_tokenizer

pytestmark = pytest.mark.trainer

SLURM = ROOT / "examples" / "slurm"


def _modules():
    sys.path.insert(0, str(SLURM))
    spec = importlib.util.spec_from_file_location("train", SLURM / "train.py")
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    import prepare
    import recipe
    return prepare, recipe, train


def _sft_data(tmp_path, pairs: int = 400):
    text = tmp_path / "text"
    text.mkdir()
    with (text / "sft.jsonl").open("w") as f:
        for i in range(pairs):
            f.write(json.dumps({"prompt": f"Question {i}: what is {i} plus one? Answer:",
                                "response": f" {i + 1}, since {i} plus one is {i + 1}."}) + "\n")
    (text / "plain.txt").write_text("plain text is trained on whole " * 200)
    tokenizer = train_tokenizer(text, tmp_path / "tokenizer", vocab=300)
    return text, tokenizer


def test_prepare_writes_a_mask_zero_on_prompts_and_one_on_responses(tmp_path):
    prepare, recipe, _ = _modules()
    from tokenizers import Tokenizer

    text, tokenizer = _sft_data(tmp_path)
    out = tmp_path / "tokens"
    prepare.run(prepare.parse(["--input", str(text), "--tokenizer", str(tokenizer), "--output", str(out),
                               "--workers", "1"]))
    import numpy as np

    shard, mask = out / "sft.jsonl.bin", out / "sft.jsonl.mask"
    assert mask.exists() and not (out / "plain.txt.mask").exists()  # plain text: every token trained, no mask
    ids, keep = np.fromfile(shard, dtype="uint16"), np.fromfile(mask, dtype="uint8")
    assert len(ids) == len(keep) and set(keep.tolist()) == {0, 1}
    tok = Tokenizer.from_file(str(tokenizer / "tokenizer.json"))
    eos = json.loads((out / "meta.json").read_text())["eos_id"]
    # The first kept document: its prompt's tokens 0, its response's and the EOS 1.
    first = next(i for i in range(400) if not prepare.held_out(
        f"Question {i}: what is {i} plus one? Answer:" + f" {i + 1}, since {i} plus one is {i + 1}."))
    prompt = tok.encode(f"Question {first}: what is {first} plus one? Answer:").ids
    answer = tok.encode(f" {first + 1}, since {first} plus one is {first + 1}.", add_special_tokens=False).ids
    n = len(prompt) + len(answer) + 1
    assert ids[:n].tolist() == [*prompt, *answer, eos]
    assert keep[:n].tolist() == [0] * len(prompt) + [1] * (len(answer) + 1)
    # The trainer's stream reads the masks; the plain-text shard counts every token.
    stream = recipe.Tokens(out, 16)
    start = int(stream.ends[0])  # plain.txt.bin comes first: all kept; then sft.jsonl.bin with its mask
    assert stream.masked and stream.mask_window(0, 16).all()
    assert stream.mask_window(start, 16).tolist() == [bool(k) for k in keep[:17]]
    assert stream.window(start, 16).tolist() == ids[:17].tolist()
    held = out / "heldout"
    assert len(np.fromfile(held / "sft.jsonl.mask", dtype="uint8")) == len(np.fromfile(held / "sft.jsonl.bin",
                                                                                        dtype="uint16"))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.jsonl").write_text(json.dumps({"prompt": "no response"}) + "\n")
    with pytest.raises(SystemExit) as refused:
        prepare.run(prepare.parse(["--input", str(bad), "--tokenizer", str(tokenizer), "--output",
                                   str(tmp_path / "bad-out"), "--workers", "1"]))
    assert "line 1" in str(refused.value) and '"prompt" and a "response"' in str(refused.value)


def test_masked_tokens_contribute_no_loss_and_no_gradient():
    import torch

    _, recipe, _ = _modules()
    torch.manual_seed(0)
    batch = torch.randint(0, 50, (2, 9))
    mask = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 0, 0, 1, 1]], dtype=torch.bool)
    logits = torch.randn(2, 8, 50, requires_grad=True)
    loss = recipe.masked_cross_entropy(logits, batch, mask)
    loss.backward()
    kept = mask[:, 1:]
    assert torch.all(logits.grad[~kept] == 0) and torch.all(logits.grad[kept].abs().sum(-1) > 0)
    # Its value: the mean over the kept targets only, whatever the masked targets are.
    per_token = torch.nn.functional.cross_entropy(logits.detach().flatten(0, 1), batch[:, 1:].reshape(-1),
                                                  reduction="none").view(2, 8)
    assert loss.item() == pytest.approx(per_token[kept].mean().item(), rel=1e-6)
    other = batch.clone()
    other[:, 1:][~kept] = (other[:, 1:][~kept] + 7) % 50
    assert recipe.masked_cross_entropy(logits.detach(), other, mask).item() == pytest.approx(loss.item(), rel=1e-6)
    # A micro-batch that is all prompt: no loss, no NaN.
    none = recipe.masked_cross_entropy(logits.detach(), batch, torch.zeros_like(mask))
    assert none.item() == 0.0
    # No mask: every target, as before.
    assert recipe.masked_cross_entropy(logits.detach(), batch, None).item() == pytest.approx(
        per_token.mean().item(), rel=1e-6)


def test_the_trainers_gradient_ignores_the_prompt_tokens(tmp_path):
    """Through train.py's own forward_loss on its Llama: changing a prompt's tokens that are only targets (never
    inputs: the last position's target) changes nothing in any gradient."""
    import argparse
    import contextlib

    import torch

    _, _, train = _modules()
    torch.manual_seed(3)
    model = train.Llama(vocab=64, hidden=32, layers=1, heads=4, kv_heads=2, intermediate=64,
                        recompute_blocks=False)
    args = argparse.Namespace()
    batch = torch.randint(0, 64, (1, 9))
    mask = torch.ones_like(batch, dtype=torch.bool)
    mask[0, -1] = False  # the last target is a prompt token

    def grads(tokens):
        model.zero_grad()
        train.forward_loss(model, tokens, args, contextlib.nullcontext(), mask).backward()
        return [p.grad.clone() for p in model.parameters()]

    changed = batch.clone()
    changed[0, -1] = (changed[0, -1] + 5) % 64
    assert all(torch.equal(a, b) for a, b in zip(grads(batch), grads(changed)))
    mask[0, -1] = True  # counted: the same change moves the gradient
    assert not all(torch.equal(a, b) for a, b in zip(grads(batch), grads(changed)))


@pytest.mark.parametrize("layout", [["--sharding", "none", "--tensor", "1"], ["--sharding", "full", "--tensor", "2"]])
def test_train_py_fine_tunes_on_prompt_response_data_counting_only_responses(tmp_path, layout):
    """DDP, and tensor parallel's split logits (loss_parallel takes the masked, summed loss too)."""
    out = _train(tmp_path, "ckpt", 4 if "2" in layout else 2, *layout, "--batch", "1")
    assert "step 3 loss" in out and "nan" not in out.lower()


def _train(tmp_path, name: str, ranks: int, *layout: str) -> str:
    """train.py on the prompt/response data (prepared into tmp_path/tok on the first call), 3 steps of 4 sequences."""
    text, tokenizer = tmp_path / "text", tmp_path / "tokenizer"
    if not text.exists():
        _sft_data(tmp_path)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}",
         str(SLURM / "train.py"), *layout,
         "--device", "cpu", "--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--seq", "32",
         "--global-batch", "4", "--steps", "3", "--log-every", "1", "--text", str(text),
         "--data", str(tmp_path / "tok"), "--tokenizer", str(tokenizer), "--checkpoint-dir",
         str(tmp_path / name), "--eval-every", "3"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "the loss counts only response tokens" in done.stdout
    return done.stdout


def _losses(out: str) -> list[float]:
    """The training steps' losses, then the held-out loss."""
    return [float(x) for x in re.findall(r"^(?:eval )?step \d+ (?:held-out )?loss ([0-9.]+)", out, re.M)]


def test_a_pipelined_fine_tune_counts_only_responses_as_one_process_does(tmp_path):
    """Before: train.py refused loss masks under pipeline stages. The mask now travels inside the last stage's targets
    (IGNORE_INDEX, pipeline._targets): two stages train step for step as one process on the same prompt/response
    data, the held-out loss too."""
    plain = ("--sharding", "none", "--tensor", "1", "--batch", "1")
    one = _losses(_train(tmp_path, "one", 1, *plain))
    staged = _losses(_train(tmp_path, "staged", 2, *plain, "--pipeline", "2"))
    assert len(one) == 4 and staged == pytest.approx(one, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("layout", [(2, "--sharding", "none", "--tensor", "1"),
                                    (4, "--sharding", "full", "--tensor", "2"),
                                    (4, "--sharding", "hybrid", "--shard-group", "2", "--tensor", "1"),
                                    (2, "--sharding", "none", "--tensor", "1", "--pipeline", "2"),
                                    (4, "--sharding", "none", "--tensor", "1", "--pipeline", "2")])
def test_every_response_token_of_a_step_weighs_the_same_however_the_batch_is_split(tmp_path, layout):
    """Before: each micro-step's loss was the mean over its own response tokens and the step averaged those means, so
    a token of a short response weighed more than one of a long one, and the same four sequences trained differently
    as one micro-step of 4 than as 2 data ranks x 2 micro-steps of 1 (recipe.step_divisor). Now a step is the mean
    over all its response tokens: one process with the whole batch at once, data ranks with accumulated micro-steps,
    tensor parallel under FSDP2, and pipeline stages train alike."""
    whole = _losses(_train(tmp_path, "whole", 1, "--sharding", "none", "--tensor", "1", "--batch", "4"))
    ranks, *rest = layout
    split = _losses(_train(tmp_path, "split", ranks, *rest, "--batch", "1"))
    assert len(whole) == 4 and split[:3] == pytest.approx(whole[:3], rel=1e-4)


def test_the_held_out_loss_is_the_mean_over_every_response_token_of_its_windows(tmp_path):
    """Before: the held-out loss averaged each window's own mean, so a window with one response token weighed as much
    as one with thirty, and one with none added 0 to the sum and 1 to the count. Now: the windows' summed loss over
    their response tokens, as one batch of all of them computes it."""
    code = """
import argparse, contextlib, os, sys, torch, torch.distributed as dist
sys.path.insert(0, sys.argv[1])
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2])
dist.init_process_group("gloo", rank=0, world_size=1)
import importlib.util, evaluation, recipe
spec = importlib.util.spec_from_file_location("train", os.path.join(sys.argv[1], "train.py"))
train = importlib.util.module_from_spec(spec); spec.loader.exec_module(train)
torch.manual_seed(0)
seq, n = 16, evaluation.EVAL_SEQUENCES
ids = torch.randint(0, 64, (n * seq + 1,))
keep = torch.zeros(n * seq + 1, dtype=torch.bool)
for k in range(n):  # window k keeps k of its targets (window 0: none)
    keep[k * seq + seq + 1 - k: k * seq + seq + 1] = True
class Held:
    masked, windows = True, n
    def window(self, start, length): return ids[start:start + length + 1]
    def mask_window(self, start, length): return keep[start:start + length + 1]
model = train.Llama(vocab=64, hidden=32, layers=1, heads=4, kv_heads=2, intermediate=64, recompute_blocks=False)
args = argparse.Namespace(seq=seq)
got = evaluation.evaluate(model, args, Held(), 0, 1, torch.device("cpu"), train.forward_loss, contextlib.nullcontext())
batch = torch.stack([Held().window(k * seq, seq) for k in range(n)])
mask = torch.stack([Held().mask_window(k * seq, seq) for k in range(n)])
with torch.no_grad():
    want = recipe.masked_cross_entropy(model(batch[:, :-1]), batch, mask).item()
print(got, want)
"""
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    done = subprocess.run([sys.executable, "-c", code, str(SLURM), str(port)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    got, want = (float(x) for x in done.stdout.split())
    assert got == pytest.approx(want, rel=1e-5)
