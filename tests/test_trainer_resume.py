"""The trainer's faults an outside review found, checked in `make test` (fast, one process) beside the plan's side of
them: the stop budget from the checkpoint time, the export directory the FSx link puts under the serving contract's
models/ prefix, activation checkpointing as a layout decision the estimate counts, ranks' data slices and retention.
The two-rank runs (DDP, FSDP2, SIGTERM to torchrun, transformers loading the export) are tests/test_trainer.py."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from workloads import load, plan
from workloads.planning import layout
from workloads.planning.parallelism import RECOMPUTE_EFFICIENCY
from workloads.planning.run_length import TORCHRUN_DEFAULT_SHUTDOWN_S, checkpoint_seconds
from workloads.planning.training_layout import utilisation

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
    served = {ip.serving.artifact_key for ip in p.inference.values() if ip.serving and ip.serving.container != "vllm-neuronx"}
    assert exports and served and served == {key}, (key, served)


def test_activation_checkpointing_is_a_layout_decision_the_estimate_counts():
    """A layout that recomputes every block does 8N FLOPs per token for the model's 6N: a published run measured
    without recompute counts at 3/4 of its MFU there, one measured with it (llm-foundry's 70B rows) as published
    (issue 33: the penalty was applied to rows already measured with activation checkpointing)."""
    from workloads.catalog import load_utilisation

    # 32k-token sequences on H100s: no tensor-parallel degree holds every block's activations (4k ones: issue 33's
    # tensor parallel does, tests/test_training_at_scale.py).
    # (bf16: the rows this is about; fp8 plans rest on the FP8 rows, tests/test_expert_speed.py)
    bf16 = {"training.precision": "bf16"}
    huge = plan(load("huge", {"training.instance_type": "p5.48xlarge", "training.sequence_length": "32768",
                              **bf16})).training
    assert huge.parallelism.recompute and "[llm-foundry-benchmarks]" in huge.estimate.basis
    rows = load_utilisation().mfu[("NVIDIA H100 80GB", "large")]
    # the rows at the published sequence nearest 32k: MPT-30B at 8k, measured with recompute, taken on the 6N basis
    (nearest,) = [r for r in rows if r.sequence == 8192]
    # moved from its 8k to the planned 32k through causal attention's FLOPs (estimates.attention_share)
    from workloads.planning.estimates import attention_share
    from workloads.planning.training_layout import attention_shape
    w = load("huge", {"training.instance_type": "p5.48xlarge", "training.sequence_length": "32768", **bf16})
    shape, n = attention_shape(w), w.model.parameters_billion
    moved = (1 + attention_share(n, shape, 8192)) / (1 + attention_share(n, shape, 32768))
    assert nearest.recompute and huge.estimate.utilisation == pytest.approx(nearest.on_6n * moved)
    p5 = plan(load("huge", {"training.instance_type": "p5.48xlarge", **bf16})).training.instance_type
    short = utilisation(load_type(p5), 70, recompute=True, sequence=2048)  # rows without recompute pay for it
    values = sorted(r.on_6n * (RECOMPUTE_EFFICIENCY if r.recompute is False else 1) for r in rows if r.sequence == 2048)
    assert short.likely == pytest.approx((values[1] + values[2]) / 2)
    assert any(r.recompute is False for r in rows) and any(r.recompute for r in rows)
    small = plan(load("intermediate", bf16)).training
    assert not small.parallelism.recompute
    assert small.estimate.utilisation == pytest.approx(utilisation(
        load_type(small.instance_type), load("intermediate", bf16).model.parameters_billion, recompute=False,
        sequence=small.parallelism.sequence, shape=attention_shape(load("intermediate", bf16))).likely)


def load_type(name):
    from workloads.catalog import load_catalog

    return load_catalog().types[name]


def test_ranks_take_different_slices_of_one_global_batch():
    """A step's global batch is the same sequences however it is split over data ranks and micro-steps (issue 33: a
    fixed global batch with gradient accumulation, independent of the node count)."""
    import argparse

    import torch

    train = _train()
    args = argparse.Namespace(batch=2, seq=8, vocab=100, global_batch=4)
    r0, r1 = (train.batch_for(args, rank, 2, 5, 0, None) for rank in (0, 1))
    assert not r0.equal(r1)
    one_rank = torch.cat([train.batch_for(args, 0, 1, 5, micro, None) for micro in (0, 1)])  # two micro-steps
    assert one_rank.equal(torch.cat([r0, r1]))
    args.batch = 4
    assert train.batch_for(args, 0, 1, 5, 0, None).equal(one_rank)


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
    uninterrupted run's losses (one process, gloo, a tiny Llama: a few seconds). Every step after the resumption is
    compared, not only the first: the first step's loss depends on the weights alone, the later ones on AdamW's
    moments too, so a checkpoint without the optimizer state shows there (a large learning rate makes it plain)."""
    def run(*extra: str) -> str:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "RANK": "0", "LOCAL_RANK": "0",
               "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())}
        done = subprocess.run([sys.executable, str(TRAINER), "--device", "cpu", "--layers", "1", "--hidden", "32",
                               "--heads", "2", "--seq", "16", "--vocab", "64", "--steps", "6", "--log-every", "1",
                               "--lr", "1e-2", "--checkpoint-every", "2", *extra], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return done.stdout

    straight = _losses(run("--checkpoint-dir", str(tmp_path / "a")))
    stopped = run("--checkpoint-dir", str(tmp_path / "b"), "--stop-after", "3")
    assert "stopped after step 3" in stopped
    resumed = run("--checkpoint-dir", str(tmp_path / "b"))
    assert "at step 3" in resumed and sorted(_losses(resumed)) == [4, 5, 6]
    after = _losses(resumed)
    assert all(after[k] == pytest.approx(straight[k], rel=1e-6, abs=2e-6) for k in after), (after, straight)


def _losses(out: str) -> dict[int, float]:
    return {int(m[1]): float(m[2]) for m in re.finditer(r"^step (\d+) loss ([0-9.]+)", out, re.M)}


class _Crash(OSError):
    pass


def test_a_crash_while_latest_is_written_leaves_the_previous_checkpoint_named(tmp_path, monkeypatch):
    """`latest` is what a requeued job resumes from: a job killed while writing it (a node lost, the time limit)
    must leave the previous, complete checkpoint named, never a half-written name. Here every file write under the
    checkpoint directory stops half-way with an error, as a crash would, while step 4's checkpoint is published."""
    import builtins
    import io
    import types

    train = _train()
    real_open = io.open

    def fake_dcp_save(state, checkpoint_id):  # a complete checkpoint: its directory and DCP's .metadata
        Path(checkpoint_id).mkdir(exist_ok=True)
        with real_open(Path(checkpoint_id) / ".metadata", "wb") as f:  # written whole: the crash comes after
            f.write(b"complete")

    monkeypatch.setattr(train, "dcp", types.SimpleNamespace(save=fake_dcp_save))
    monkeypatch.setattr(train, "dist", types.SimpleNamespace(barrier=lambda: None))
    state = types.SimpleNamespace(step=2)
    train.save(state, tmp_path, True, keep=2)
    assert train.latest(tmp_path) == tmp_path / "step-00000002"

    class HalfWritten:
        def __init__(self, f):
            self.f = f

        def write(self, data):
            self.f.write(data[:len(data) // 2])
            self.f.flush()
            raise _Crash("the job died here")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def __getattr__(self, name):
            return getattr(self.f, name)

    def crashing_open(file, mode="r", *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        inside = isinstance(file, (str, os.PathLike)) and Path(file).resolve().is_relative_to(tmp_path.resolve())
        return HalfWritten(f) if inside and any(c in mode for c in "wax+") else f

    state.step = 4
    with monkeypatch.context() as crash:
        crash.setattr(io, "open", crashing_open)
        crash.setattr(builtins, "open", crashing_open)
        with pytest.raises(_Crash):
            train.save(state, tmp_path, True, keep=2)
    named = train.latest(tmp_path)
    assert named == tmp_path / "step-00000002" and (named / ".metadata").read_bytes() == b"complete", named
    # The next save (the requeued job's) publishes normally over what the crash left.
    train.save(state, tmp_path, True, keep=2)
    assert train.latest(tmp_path) == tmp_path / "step-00000004"


def test_off_a_cluster_the_trainer_refuses_to_create_fsx(tmp_path, monkeypatch, capsys):
    """The plan's layout names /fsx paths (the export directory; the checkpoints by default). Where /fsx is not a
    mounted file system (a test run, a laptop, a GPU box) the trainer refuses them at the start instead of
    creating /fsx on the root disk; told another directory, or on a cluster node, it goes on."""
    train = _train()
    spread = plan(load("huge")).training.parallelism
    assert spread.export_dir.startswith(layout.FSX_MOUNT + "/") and str(train.FSX) == layout.FSX_MOUNT
    path = tmp_path / "layout.json"
    path.write_text(spread.as_json())
    monkeypatch.delenv("CHECKPOINT_DIR", raising=False)
    monkeypatch.delenv("SM_MODEL_DIR", raising=False)
    monkeypatch.setattr(os.path, "ismount", lambda p: False)

    def parse(*extra: str):
        monkeypatch.setattr(sys, "argv", ["train.py", "--device", "cpu", "--layout", str(path), *extra])
        return train.parse()

    for given, refused in ((["--checkpoint-dir", str(tmp_path / "c")], f"--export-dir defaults to {spread.export_dir}"),
                           (["--export-dir", str(tmp_path / "e")], "--checkpoint-dir defaults to /fsx/checkpoints/")):
        with pytest.raises(SystemExit) as stopped:
            parse(*given)
        err = capsys.readouterr().err
        assert stopped.value.code == 2 and refused in err and "not mounted" in err and "Traceback" not in err, err
    args = parse("--checkpoint-dir", str(tmp_path / "c"), "--export-dir", str(tmp_path / "e"))
    assert (args.checkpoint_dir, args.export_dir) == (tmp_path / "c", tmp_path / "e")
    monkeypatch.setattr(os.path, "ismount", lambda p: str(p) == layout.FSX_MOUNT)  # a cluster node
    assert str(parse().export_dir) == spread.export_dir


def test_on_a_sagemaker_job_the_trainer_exports_to_sm_model_dir(tmp_path, monkeypatch):
    """Issue 44's mutation audit: a trainer that ignored SM_MODEL_DIR was caught only by the trainer-marked golden path.
    A job's layout names no export directory (no /fsx on a job); train.py then exports to SM_MODEL_DIR, the only
    directory SageMaker uploads, and without it exports nothing rather than guessing."""
    train = _train()
    spread = plan(load("intermediate")).training.parallelism
    assert plan(load("intermediate")).training.orchestrator == "sagemaker-jobs" and spread.export_dir == ""
    path = tmp_path / "layout.json"
    path.write_text(spread.as_json())
    monkeypatch.setenv("CHECKPOINT_DIR", str(tmp_path / "checkpoints"))  # what a job's command sets
    monkeypatch.setenv("SM_MODEL_DIR", str(tmp_path / "model"))
    monkeypatch.setattr(sys, "argv", ["train.py", "--device", "cpu", "--layout", str(path)])
    assert train.parse().export_dir == tmp_path / "model"
    monkeypatch.delenv("SM_MODEL_DIR")
    assert train.parse().export_dir is None


def _one_process(tmp_path: Path, *extra: str, ok: bool = True) -> subprocess.CompletedProcess:
    """train.py as one gloo rank with a tiny Llama (a few seconds)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "RANK": "0", "LOCAL_RANK": "0",
           "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())}
    done = subprocess.run([sys.executable, str(TRAINER), "--device", "cpu", "--layers", "1", "--hidden", "32",
                           "--heads", "2", "--seq", "16", "--vocab", "64", "--log-every", "1", "--lr", "1e-2",
                           "--warmup", "0", *extra], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert (done.returncode == 0) == ok, done.stdout[-2000:] + done.stderr[-2000:]
    return done


@pytest.mark.e2e  # the trainer in three processes: make test-e2e (CI); the resume above stays in make test
def test_a_nonfinite_step_is_skipped_the_run_recovers_and_the_good_checkpoint_is_kept(tmp_path):
    """Issue 42: steps 4 and 5 overflow (--inject-nonfinite makes their loss, and so their gradients, infinite). Each
    is skipped, counted and logged; the weights stay step 3's, so the run goes on at finite losses. With --keep 1 the
    checkpoints of the bad steps would have pruned step 3's, the last one saved at a finite loss: it stays. The run
    resumed from step 5 ends as the uninterrupted one does. (Before: AdamW stepped on inf, every later loss NaN.)"""
    common = ["--steps", "8", "--inject-nonfinite", "4,5", "--checkpoint-every", "1", "--keep", "1"]
    straight = _one_process(tmp_path, *common, "--checkpoint-dir", str(tmp_path / "a")).stdout
    assert re.search(r"^step 4 skipped: gradient norm (nan|inf) loss inf \(1 in a row, 1 skipped", straight, re.M)
    assert re.search(r"^step 5 skipped: .*\(2 in a row, 2 skipped in this run\)", straight, re.M), straight
    assert re.search(r"^step 8 loss [0-9.]+ .*, 2 skipped in this run$", straight, re.M), straight
    losses = _losses(straight)
    assert sorted(losses) == [1, 2, 3, 6, 7, 8], straight  # finite again after the bad steps (NaN never matches)

    ckpt = tmp_path / "b"
    stopped = _one_process(tmp_path, *common, "--checkpoint-dir", str(ckpt), "--stop-after", "5").stdout
    assert "stopped after step 5" in stopped
    assert sorted(d.name for d in ckpt.glob("step-*")) == ["step-00000003", "step-00000005"]
    assert (ckpt / "latest").read_text().strip() == "step-00000005"
    record = json.loads((ckpt / "step-00000003" / "loss.json").read_text())
    assert record["finite"] and record["step"] == 3
    assert not json.loads((ckpt / "step-00000005" / "loss.json").read_text())["finite"]
    resumed = _losses(_one_process(tmp_path, *common, "--checkpoint-dir", str(ckpt)).stdout)
    assert sorted(resumed) == [6, 7, 8]
    assert all(resumed[k] == pytest.approx(losses[k], rel=1e-6, abs=2e-6) for k in resumed), (resumed, losses)
    assert sorted(d.name for d in ckpt.glob("step-*")) == ["step-00000008"]  # finite again: keep 1 is one


@pytest.mark.e2e  # the trainer in two processes: make test-e2e (CI)
def test_too_many_nonfinite_steps_in_a_row_stop_the_run_with_latest_on_the_last_finite_checkpoint(tmp_path):
    ckpt = tmp_path / "ckpt"
    done = _one_process(tmp_path, "--steps", "8", "--inject-nonfinite", "2,3,4", "--max-nonfinite-steps", "2",
                        "--checkpoint-every", "1", "--keep", "2", "--checkpoint-dir", str(ckpt), ok=False)
    assert "stopping at step 4: 3 steps in a row had a non-finite gradient norm or loss (limit 2" in done.stderr
    assert "`latest` names step-00000001" in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert (ckpt / "latest").read_text().strip() == "step-00000001"
    assert "step 5 " not in done.stdout
    resumed = _one_process(tmp_path, "--steps", "2", "--checkpoint-dir", str(ckpt)).stdout  # starts after step 1
    assert "at step 1" in resumed


def test_pruning_keeps_the_newest_checkpoint_saved_at_a_finite_loss(tmp_path):
    import importlib.util as util

    spec = util.spec_from_file_location("safety", TRAINER.parent / "safety.py")
    _train()  # puts the trainer's directory on sys.path (safety imports recipe)
    safety = util.module_from_spec(spec)
    spec.loader.exec_module(safety)
    for step, loss in ((1, 2.0), (2, 1.5), (3, float("nan")), (4, float("inf")), (5, float("nan"))):
        (tmp_path / f"step-{step:08d}").mkdir()
        safety.record_loss(tmp_path / f"step-{step:08d}", step, loss)
    safety.prune(tmp_path, tmp_path / "step-00000005", keep=2)
    assert sorted(d.name for d in tmp_path.glob("step-*")) == ["step-00000002", "step-00000004", "step-00000005"]
    assert safety.last_finite(tmp_path, tmp_path / "step-00000005").name == "step-00000002"


def test_prepare_holds_out_a_slice_by_document_that_training_never_reads(tmp_path):
    """Issue 42: the prepare step writes one document in HOLDOUT_EVERY to heldout/ (by a hash of its text, so the
    same ones whatever the task split), and the trainer's token stream is only the rest."""
    from tests.golden import train_tokenizer

    _train()  # the trainer's directory on sys.path
    import prepare
    import recipe

    text = tmp_path / "text"
    text.mkdir()
    docs = [f"document {i} says {'word ' * (i % 7)}" for i in range(1000)]
    (text / "a.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    tokenizer = train_tokenizer(text, tmp_path / "tok", vocab=300)
    out = tmp_path / "tokens"
    prepare.run(prepare.parse(["--input", str(text), "--tokenizer", str(tokenizer), "--output", str(out),
                               "--workers", "1"]))
    held = [d for d in docs if prepare.held_out(d)]
    assert 0 < len(held) < 20  # about 1 in 200
    info = json.loads((out / "meta.json").read_text())
    kept = recipe.Tokens(out, 8)
    apart = recipe.Tokens(out / prepare.HELDOUT, 8, info=info)
    import numpy as np

    eos = info["eos_id"]
    stream = np.concatenate(kept.shards)
    assert (stream == eos).sum() == len(docs) - len(held) and (np.concatenate(apart.shards) == eos).sum() == len(held)


@pytest.mark.e2e  # the trainer in a process: make test-e2e (CI)
def test_the_held_out_loss_and_emf_metrics_are_written_every_n_steps(tmp_path):
    """Issue 42: with a held-out slice beside the shards, the run prints the held-out loss every --eval-every steps
    and appends CloudWatch embedded-metric-format lines (loss, tokens/s, MFU beside the plan's, held-out loss)."""
    import numpy as np

    data = tmp_path / "tokens"
    (data / "heldout").mkdir(parents=True)
    (data / "meta.json").write_text(json.dumps({"dtype": "uint16", "vocab_size": 64, "parts": 0}))
    (np.arange(4096) % 13).astype(np.uint16).tofile(data / "a.bin")
    (np.arange(1024) % 13).astype(np.uint16).tofile(data / "heldout" / "a.bin")
    metrics = tmp_path / "metrics" / "train.emf.log"
    out = _one_process(tmp_path, "--steps", "6", "--data", str(data), "--eval-every", "3", "--checkpoint-dir",
                       str(tmp_path / "c"), "--metrics-file", str(metrics), "--peak-tflops", "1",
                       "--planned-mfu", "0.4").stdout
    evals = {int(m[1]): float(m[2]) for m in re.finditer(r"^eval step (\d+) held-out loss ([0-9.]+)$", out, re.M)}
    assert sorted(evals) == [3, 6] and evals[6] < evals[3], out  # the pattern is learnt; the held-out loss shows it
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    train_lines = [x for x in lines if "Loss" in x]
    assert [x["Step"] for x in train_lines] == [1, 2, 3, 4, 5, 6]
    first = train_lines[0]
    spec = first["_aws"]["CloudWatchMetrics"][0]
    assert spec["Dimensions"] == [["Workload"]] and {m["Name"] for m in spec["Metrics"]} >= {
        "Loss", "TokensPerSecond", "MFU", "PlannedMFU"}
    assert first["PlannedMFU"] == 0.4 and 0 < first["MFU"] and first["TokensPerSecond"] > 0
    assert [x["EvalLoss"] for x in lines if "EvalLoss" in x] == pytest.approx([evals[3], evals[6]], rel=1e-5)


def test_grouped_query_attention_uses_sdpas_own_support_without_copying_kv(monkeypatch):
    """Issue 42: K/V are read in place by SDPA (enable_gqa), not expanded heads/kv_heads times by repeat_interleave;
    the result is the expanded computation's."""
    import torch
    import torch.nn.functional as F

    train = _train()
    torch.manual_seed(0)
    attn = train.Attention(32, 4, 2)
    x = torch.randn(2, 8, 32)
    cos, sin = train.rotary(8, 8, x.device)
    monkeypatch.setattr(torch.Tensor, "repeat_interleave", lambda *a, **k: (_ for _ in ()).throw(
        AssertionError("K/V copied with repeat_interleave")))
    ours = attn(x, cos, sin)
    monkeypatch.undo()
    b, s, _ = x.shape
    q = attn.q_proj(x).view(b, s, 4, 8).transpose(1, 2)
    k = attn.k_proj(x).view(b, s, 2, 8).transpose(1, 2)
    v = attn.v_proj(x).view(b, s, 2, 8).transpose(1, 2)
    q, k = q * cos + train.rotate_half(q) * sin, k * cos + train.rotate_half(k) * sin
    k, v = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
    expanded = attn.o_proj(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, -1))
    assert torch.allclose(ours, expanded, atol=1e-6)


def test_the_next_micro_batch_is_read_while_the_current_one_trains():
    """Issue 42: the loader reads ahead on a background thread: once batch (1, 0) is handed over, (1, 1) and (2, 0)
    are already being read, and are handed over without reading them again."""
    import threading

    import torch

    _train()
    import loader

    reads, main = [], threading.get_ident()

    def read(step, micro):
        reads.append(((step, micro), threading.get_ident() != main))
        return torch.tensor([step, micro])

    prefetch = loader.Prefetcher(read, pin=False)
    assert prefetch.get((1, 0), [(1, 1), (2, 0)]).tolist() == [1, 0]
    prefetch.pending[(2, 0)].result()
    assert [k for k, _ in reads] == [(1, 0), (1, 1), (2, 0)] and all(off for _, off in reads)
    assert prefetch.get((1, 1), [(2, 0), (2, 1)]).tolist() == [1, 1]
    assert prefetch.get((2, 0), []).tolist() == [2, 0]
    prefetch.close()
    assert [k for k, _ in reads].count((2, 0)) == 1
