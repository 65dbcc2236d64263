"""The trainer's faults an outside review found, checked in `make test` (fast, one process) beside the plan's side of
them: the stop budget from the checkpoint time, the export directory the FSx link puts under the serving contract's
models/ prefix, activation checkpointing as a layout decision the estimate counts, ranks' data slices and retention.
The two-rank runs (DDP, FSDP2, SIGTERM to torchrun, transformers loading the export) are tests/test_trainer.py."""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from workloads import layout, load, plan
from workloads.parallelism import RECOMPUTE_EFFICIENCY
from workloads.plan_training import TORCHRUN_DEFAULT_SHUTDOWN_S, checkpoint_seconds, utilisation

TRAINER = Path(__file__).resolve().parent.parent / "examples" / "slurm" / "train.py"


def _train():
    spec = importlib.util.spec_from_file_location("train", TRAINER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_stop_budget_is_the_plans_checkpoint_time():
    """A 70B checkpoint (1 TiB) takes minutes to write; torchrun's default 30 s would kill it half-written."""
    t = plan(load("huge")).training
    seconds = checkpoint_seconds(70, t.fsx.throughput_mb_s)
    assert seconds > TORCHRUN_DEFAULT_SHUTDOWN_S
    assert t.parallelism.shutdown_timeout_s >= seconds and t.parallelism.signal_lead_s > t.parallelism.shutdown_timeout_s
    assert t.parallelism.keep_checkpoints == 2  # what FSx was sized for (storage.CHECKPOINTS_KEPT)


def test_the_export_lands_where_the_serving_contract_reads():
    """train.py exports to the layout's export_dir; FSx's link of /fsx/output exports it to the bucket prefix the
    endpoints read (before: /fsx/output went to output/, the serving contract read models/llm/)."""
    p = plan(load("huge"))
    export = p.training.parallelism.export_dir
    (fs_path, prefix, _, exports), = [link for link in layout.FSX_LINKS if export.startswith("/fsx" + link[0] + "/")]
    key = prefix + export.removeprefix("/fsx" + fs_path + "/") + "/"
    served = {ip.serving.artifact_key for ip in p.inference.values() if ip.serving and ip.serving.container != "tgi-neuronx"}
    assert exports and served and served == {key}, (key, served)


def test_activation_checkpointing_is_a_layout_decision_the_estimate_counts():
    """llm-foundry's rows were measured without recomputation: a layout that recomputes every block does 8N
    FLOPs per token for the model's 6N, so its utilisation is 3/4 of theirs; one whose activations fit keeps it."""
    huge = plan(load("huge", {"training.instance_type": "p5.48xlarge"})).training
    assert huge.parallelism.recompute and "[llm-foundry-benchmarks]" in huge.estimate.basis
    measured = utilisation(load_type(huge.instance_type), 70).likely
    assert huge.estimate.utilisation == pytest.approx(measured * RECOMPUTE_EFFICIENCY)
    small = plan(load("intermediate")).training
    assert not small.parallelism.recompute
    assert small.estimate.utilisation == pytest.approx(utilisation(load_type(small.instance_type),
                                                                   load("intermediate").model.parameters_billion).likely)


def load_type(name):
    from workloads.catalog import load_catalog

    return load_catalog().types[name]


def test_ranks_take_different_slices_of_one_global_batch():
    import argparse

    train = _train()
    args = argparse.Namespace(batch=2, seq=8, vocab=100)
    r0, r1 = (train.batch_for(args, rank, 2, 5, None) for rank in (0, 1))
    assert not r0.equal(r1)
    args.batch = 4
    assert train.batch_for(args, 0, 1, 5, None).equal(__import__("torch").cat([r0, r1]))


def test_retention_deletes_the_oldest_only_behind_a_complete_newer_one(tmp_path):
    train = _train()
    for step in (1, 2, 3, 4):
        (tmp_path / f"step-{step:08d}").mkdir()
    (tmp_path / "latest").write_text("step-00000003\n")  # step 4 is still being written
    train.prune(tmp_path, keep=2)
    assert sorted(d.name for d in tmp_path.glob("step-*")) == ["step-00000002", "step-00000003", "step-00000004"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_one_process_resumes_where_it_stopped(tmp_path):
    """A trainer that never resumes fails here, in `make test`: a stopped run and its resumption end with the
    uninterrupted run's loss (one process, gloo, a tiny Llama: a few seconds)."""
    def run(*extra: str) -> str:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "RANK": "0", "LOCAL_RANK": "0",
               "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())}
        done = subprocess.run([sys.executable, str(TRAINER), "--device", "cpu", "--layers", "1", "--hidden", "32",
                               "--heads", "2", "--seq", "16", "--vocab", "64", "--steps", "4", "--log-every", "1",
                               "--checkpoint-every", "2", *extra], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return done.stdout

    def losses(out: str) -> dict[int, float]:
        return {int(m[1]): float(m[2]) for m in re.finditer(r"^step (\d+) loss ([0-9.]+)", out, re.M)}

    straight = losses(run("--checkpoint-dir", str(tmp_path / "a")))
    stopped = run("--checkpoint-dir", str(tmp_path / "b"), "--stop-after", "3")
    assert "stopped after step 3" in stopped
    resumed = run("--checkpoint-dir", str(tmp_path / "b"))
    assert "at step 3" in resumed and sorted(losses(resumed)) == [4]
    assert losses(resumed)[4] == pytest.approx(straight[4], rel=1e-5)
