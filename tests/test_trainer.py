"""Issue 11: the example trainer trains for real with PyTorch's DDP and FSDP2 on two CPU ranks (gloo), checkpoints
with torch.distributed.checkpoint and resumes where it stopped, as a requeued Slurm job would: the resumed run ends
with the same loss as one that was never interrupted. The layout comes from the plan, as on the cluster."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from workloads import load, plan

pytestmark = pytest.mark.trainer  # make test-trainer (about 40 s), run by CI beside make test

TRAINER = Path(__file__).resolve().parent.parent / "examples" / "slurm" / "train.py"
SMALL = ["--layers", "2", "--hidden", "64", "--heads", "4", "--seq", "32", "--vocab", "256", "--batch", "2"]


def _torchrun(tmp: Path, *args: str) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(TRAINER), "--device", "cpu", *SMALL, "--log-every", "1", *args],
                          cwd=tmp, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _losses(out: str) -> dict[int, float]:
    return {int(m[1]): float(m[2]) for m in re.finditer(r"^step (\d+) loss ([0-9.]+)", out, re.M)}


@pytest.fixture(scope="module")
def layouts(tmp_path_factory) -> dict[str, Path]:
    """The plan's own layout files: intermediate plans DDP, huge plans FSDP2 (the model shape is overridden to
    a small one for CPU; the sharding is the plan's)."""
    out = {}
    for preset in ("intermediate", "huge"):
        spread = plan(load(preset)).training.parallelism
        path = tmp_path_factory.mktemp("layout") / f"{preset}.json"
        path.write_text(json.dumps(asdict(spread)))
        out[spread.sharding] = path
    assert set(out) == {"none", "full"}
    return out


@pytest.fixture(scope="module")
def tokens(tmp_path_factory) -> Path:
    """A token file with a pattern a model can learn in a few steps (uint16, as --data reads it)."""
    import numpy as np

    path = tmp_path_factory.mktemp("data") / "tokens.bin"
    (np.arange(1 << 14) % 17).astype(np.uint16).tofile(path)
    return path


@pytest.mark.parametrize("sharding", ["none", "full"])
def test_trains_checkpoints_and_resumes_where_it_stopped(tmp_path, layouts, tokens, sharding):
    run = ["--steps", "6", "--checkpoint-every", "2", "--layout", str(layouts[sharding]), "--data", str(tokens),
           "--lr", "1e-2", "--checkpoint-dir", str(tmp_path / "ckpt")]
    straight = _torchrun(tmp_path, *run)
    assert ("FSDP2" if sharding == "full" else "DDP") + ", cpu" in straight
    reference = _losses(straight)
    assert sorted(reference) == [1, 2, 3, 4, 5, 6] and reference[6] < 0.8 * reference[1]  # it learns the pattern
    ckpt = tmp_path / "ckpt"
    assert (ckpt / "latest").read_text().strip() == "step-00000006"
    assert len(list((ckpt / "step-00000004").glob("*.distcp"))) == 2  # one shard file per rank

    # As if the job had died after step 4's checkpoint and Slurm requeued it; this time it is told to stop after
    # step 5, as a signalled job does: checkpoint, then leave.
    (ckpt / "latest").write_text("step-00000004\n")
    requeued = _torchrun(tmp_path, *run, "--stop-after", "5")
    assert "resumed from" in requeued and "at step 4" in requeued and "stopped after step 5" in requeued
    after = _losses(requeued)
    assert sorted(after) == [5]  # the same batch and the same weights as the uninterrupted run
    assert after[5] == pytest.approx(reference[5], rel=1e-5, abs=1e-6), (after, reference)
    assert (ckpt / "latest").read_text().strip() == "step-00000005"


def test_a_tensor_or_pipeline_layout_is_refused_with_its_reason(tmp_path):
    layout = tmp_path / "tp.json"
    layout.write_text(json.dumps({"data": 1, "tensor": 2, "pipeline": 1, "sharding": "full"}))
    done = subprocess.run([sys.executable, str(TRAINER), "--device", "cpu", "--layout", str(layout)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "tensor 2 x pipeline 1" in done.stderr and "Traceback" not in done.stderr


def test_a_training_job_reads_the_layout_that_submit_passes(monkeypatch):
    """On a SageMaker training job there is no layout file: `submit` passes the plan's layout in the job's
    environment (jobs.job_environment), and the trainer takes the model's shape and sharding from it."""
    import importlib.util

    from workloads import jobs

    env = jobs.job_environment(plan(load("huge")))
    spec = importlib.util.spec_from_file_location("train", TRAINER)
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["train.py", "--device", "cpu"])
    args = train.parse()
    spread = json.loads(env[jobs.LAYOUT_ENV])
    assert (args.layers, args.hidden, args.heads, args.seq, args.vocab, args.sharding) == (
        spread["layers"], spread["hidden"], spread["heads"], spread["sequence"], spread["vocab"], "full")
    assert str(args.checkpoint_dir) == jobs.CHECKPOINT_LOCAL_PATH
