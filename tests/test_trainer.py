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

from .golden import save_base_model

pytestmark = pytest.mark.trainer  # make test-trainer (about 40 s), run by CI beside make test

TRAINER = Path(__file__).resolve().parent.parent / "examples" / "slurm" / "train.py"
SMALL = ["--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--seq", "32", "--vocab", "256"]


def _command(*args: str, ranks: int = 2, batch: int = 2) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}", str(TRAINER),
            "--device", "cpu", *SMALL, "--batch", str(batch), "--log-every", "1", *args]


def _torchrun(tmp: Path, *args: str, ranks: int = 2, batch: int = 2) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(_command(*args, ranks=ranks, batch=batch), cwd=tmp, env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _losses(out: str) -> dict[int, float]:
    return {int(m[1]): float(m[2]) for m in re.finditer(r"^step (\d+) loss ([0-9.]+)", out, re.M)}


@pytest.fixture(scope="module")
def layouts(tmp_path_factory) -> dict[str, Path]:
    """The plan's own layout files: intermediate on p5 plans DDP, huge plans FSDP2 (the model shape is overridden to
    a small one for CPU; the sharding is the plan's)."""
    out = {}
    for preset, overrides in (("intermediate", {"training.instance_type": "p5.48xlarge"}), ("huge", None)):
        spread = plan(load(preset, overrides)).training.parallelism
        path = tmp_path_factory.mktemp("layout") / f"{preset}.json"
        path.write_text(json.dumps(asdict(spread)))
        out[spread.sharding] = path
    assert set(out) == {"none", "full"}
    return out


@pytest.mark.parametrize("sharding", ["none", "full"])
def test_trains_checkpoints_and_resumes_where_it_stopped(tmp_path, layouts, tokens, sharding):
    # The plan's layout names its export directory on /fsx: here it goes under the test's own directory.
    # The plan's global batch (1,024 sequences) and warmup are a 70B run's: here one micro-step of two ranks x 2.
    run = ["--steps", "6", "--checkpoint-every", "2", "--layout", str(layouts[sharding]), "--data", str(tokens),
           "--lr", "1e-2", "--checkpoint-dir", str(tmp_path / "ckpt"), "--export-dir", str(tmp_path / "export"),
           "--global-batch", "4", "--warmup", "0", "--tensor", "1"]
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
    # Resumed again, to the end: step 6 follows an update made with the restored AdamW moments, so it matches only
    # when the checkpoint holds the optimizer state as well as the weights.
    finished = _losses(_torchrun(tmp_path, *run))
    assert sorted(finished) == [6] and finished[6] == pytest.approx(reference[6], rel=1e-5, abs=1e-6), (
        finished, reference)
    assert (tmp_path / "export" / "config.json").exists()


def test_an_impossible_pipeline_or_tensor_degree_is_refused_with_its_reason(tmp_path):
    for spread, said in (({"data": 1, "tensor": 1, "pipeline": 3, "sharding": "full", "layers": 2}, "pipeline 3"),
                         ({"data": 1, "tensor": 1, "pipeline": 2, "sharding": "hybrid"}, "not sharding hybrid"),
                         ({"data": 1, "tensor": 2, "pipeline": 1, "sharding": "none"}, "sharding none"),
                         ({"data": 1, "tensor": 8, "pipeline": 1, "sharding": "full", "heads": 4}, "--heads 4")):
        layout = tmp_path / "layout.json"
        layout.write_text(json.dumps(spread))
        done = subprocess.run([sys.executable, str(TRAINER), "--device", "cpu", "--layout", str(layout)],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_training_job_reads_the_layout_that_submit_passes(monkeypatch):
    """On a SageMaker training job there is no layout file: `submit` passes the plan's layout in the job's
    environment (jobs.job_environment), and the trainer takes the model's shape and sharding from it."""
    import importlib.util

    from workloads.commands import jobs

    env = jobs.job_environment(plan(load("huge")))
    spec = importlib.util.spec_from_file_location("train", TRAINER)
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["train.py", "--device", "cpu", "--export-dir", "unused"])
    args = train.parse()
    spread = json.loads(env[jobs.LAYOUT_ENV])
    assert (args.layers, args.hidden, args.heads, args.seq, args.vocab, args.sharding) == (
        spread["layers"], spread["hidden"], spread["heads"], spread["sequence"], spread["vocab"], "full")
    assert str(args.checkpoint_dir) == jobs.CHECKPOINT_LOCAL_PATH


def _train_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("train", TRAINER)
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    return train


def test_the_exported_model_loads_in_transformers_with_the_trainers_logits_and_generates(tmp_path, tokens):
    """Two ranks train a tiny Llama (grouped-query attention: 4 heads, 2 key/value heads) for a few steps and export
    it; transformers' AutoModelForCausalLM loads the directory, gives the trainer's logits on the same tokens (the
    trainer's model filled from its own last checkpoint) and generates. Retention: --keep 2 leaves two checkpoints."""
    import torch
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    from transformers import AutoModelForCausalLM

    export = tmp_path / "output" / "llm"
    out = _torchrun(tmp_path, "--steps", "4", "--checkpoint-every", "1", "--keep", "2", "--data", str(tokens),
                    "--checkpoint-dir", str(tmp_path / "ckpt"), "--export-dir", str(export))
    assert f"exported {export}" in out
    assert sorted(d.name for d in (tmp_path / "ckpt").glob("step-*")) == ["step-00000003", "step-00000004"]
    config = json.loads((export / "config.json").read_text())
    assert (config["architectures"], config["num_key_value_heads"], config["num_attention_heads"]) == (
        ["LlamaForCausalLM"], 2, 4)

    dcp_to_torch_save(tmp_path / "ckpt" / "step-00000004", tmp_path / "final.pt")
    weights = torch.load(tmp_path / "final.pt", weights_only=False)["training"]["model"]
    train = _train_module()
    ours = train.Llama(vocab=256, layers=2, hidden=64, heads=4, kv_heads=2, intermediate=train.llama_intermediate(64),
                       recompute_blocks=False)
    ours.load_state_dict(weights)
    theirs = AutoModelForCausalLM.from_pretrained(export)
    ours.eval(), theirs.eval()
    sample = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        assert torch.allclose(theirs(sample).logits, ours(sample), atol=1e-4, rtol=1e-4)
        generated = theirs.generate(sample[:1, :8], max_new_tokens=4, do_sample=False)
    assert generated.shape == (1, 12) and torch.equal(generated[0, :8], sample[0, :8])


def test_two_ranks_train_as_one_rank_at_twice_the_batch(tmp_path):
    """Each rank takes its own slice of the step's global batch: two ranks at batch 1 see what one rank at batch 2
    sees, so the losses match step by step (DDP averages the gradients as one rank's mean does)."""
    two = _losses(_torchrun(tmp_path, "--steps", "3", "--checkpoint-dir", str(tmp_path / "a"), ranks=2, batch=1))
    one = _losses(_torchrun(tmp_path, "--steps", "3", "--checkpoint-dir", str(tmp_path / "b"), ranks=1, batch=2))
    assert sorted(two) == [1, 2, 3] and all(two[k] == pytest.approx(one[k], rel=1e-5) for k in two), (two, one)


def test_sigterm_to_torchrun_mid_run_writes_a_checkpoint_and_the_next_run_resumes(tmp_path):
    """What Slurm does before a time limit or preemption: SIGTERM to torchrun. torchrun passes it to the workers and
    waits TORCH_ELASTIC_SHUTDOWN_TIMEOUT (the plan's checkpoint time, not its 30 s default) before killing; the
    workers finish the step, checkpoint together and leave. The next run resumes from that step."""
    import signal
    import time

    run = ["--steps", "100000", "--checkpoint-every", "100000", "--checkpoint-dir", str(tmp_path / "ckpt")]
    proc = _start(tmp_path, run, TORCH_ELASTIC_SHUTDOWN_TIMEOUT="120")
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("step 3 "):
                proc.send_signal(signal.SIGTERM)  # torchrun itself, as srun delivers it
                break
        rest, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    out = "".join(seen) + rest
    stopped = re.search(r"stopped after step (\d+) \(checkpointed\)", out)
    assert stopped, out[-3000:]
    step = int(stopped[1])
    assert (tmp_path / "ckpt" / "latest").read_text().strip() == f"step-{step:08d}"
    assert len(list((tmp_path / "ckpt" / f"step-{step:08d}").glob("*.distcp"))) == 2
    resumed = _torchrun(tmp_path, *run[:1], str(step + 1), *run[2:])
    assert f"at step {step}" in resumed and sorted(_losses(resumed)) == [step + 1]


def test_tensor_parallel_2_x_data_parallel_2_trains_and_resumes_as_the_data_parallel_run(tmp_path, tokens):
    """Issue 33: the layout the planner emits at scale, tensor parallel inside a node with FSDP2 across, on four CPU
    ranks (gloo): TP 2 x DP 2 with two micro-steps per step gives the losses of FSDP2 over four data ranks with one,
    step by step (one global batch of 8 sequences, the same initial weights, the same samples), and after a stop
    and a resume the later steps still match (the checkpoint holds the sharded AdamW moments and the step)."""
    common = ["--steps", "4", "--checkpoint-every", "2", "--data", str(tokens), "--lr", "1e-2", "--warmup", "0",
              "--sharding", "full", "--global-batch", "8"]
    data_parallel = _losses(_torchrun(tmp_path, *common, "--checkpoint-dir", str(tmp_path / "dp"), ranks=4))
    assert sorted(data_parallel) == [1, 2, 3, 4] and data_parallel[4] < data_parallel[1]
    tp = [*common, "--tensor", "2", "--checkpoint-dir", str(tmp_path / "tp")]
    stopped = _torchrun(tmp_path, *tp, "--stop-after", "2", ranks=4)
    assert "tensor parallel 2" in stopped and "2 data ranks x 2 x 2 micro-steps" in stopped, stopped
    resumed = _torchrun(tmp_path, *tp, ranks=4)
    assert "at step 2" in resumed
    tensor_parallel = {**_losses(stopped), **_losses(resumed)}
    assert sorted(tensor_parallel) == [1, 2, 3, 4]
    assert all(tensor_parallel[k] == pytest.approx(data_parallel[k], rel=1e-5) for k in data_parallel), (
        tensor_parallel, data_parallel)
    assert (tmp_path / "tp" / "latest").read_text().strip() == "step-00000004"


def test_hsdp_replicate_2_x_shard_2_trains_and_resumes_as_the_data_parallel_run(tmp_path, tokens):
    """Issue 33: HSDP, FSDP2 over a (replicate 2, shard 2) mesh on four CPU ranks (gloo), gives the losses of plain
    data parallel (DDP) over the same four ranks step by step, and after a stop and a resume the later steps still
    match (the checkpoint holds the shards, replicated across the groups, the AdamW moments and the step)."""
    common = ["--steps", "4", "--checkpoint-every", "2", "--data", str(tokens), "--lr", "1e-2", "--warmup", "0",
              "--global-batch", "8", "--tensor", "1"]
    data_parallel = _losses(_torchrun(tmp_path, *common, "--sharding", "none", "--checkpoint-dir",
                                      str(tmp_path / "ddp"), ranks=4))
    assert sorted(data_parallel) == [1, 2, 3, 4] and data_parallel[4] < data_parallel[1]
    hsdp = [*common, "--sharding", "hybrid", "--shard-group", "2", "--checkpoint-dir", str(tmp_path / "hsdp")]
    stopped = _torchrun(tmp_path, *hsdp, "--stop-after", "2", ranks=4)
    assert "HSDP, replicate 2 x shard 2" in stopped, stopped
    resumed = _torchrun(tmp_path, *hsdp, ranks=4)
    assert "at step 2" in resumed
    hybrid = {**_losses(stopped), **_losses(resumed)}
    assert sorted(hybrid) == [1, 2, 3, 4]
    assert all(hybrid[k] == pytest.approx(data_parallel[k], rel=1e-5) for k in data_parallel), (hybrid, data_parallel)
    assert (tmp_path / "hsdp" / "latest").read_text().strip() == "step-00000004"


def test_the_trainer_accepts_every_layout_the_planner_emits(tmp_path, monkeypatch):
    """Planner output -> trainer accepts: the layouts of the presets and of a grid of configs (tests/
    test_parallelism.py), each parsed by train.py on its node stack's device, with its sharding and degrees."""
    from .test_parallelism import _planned_layouts

    train = _train_module()
    seen = set()
    for where, spread, device in _planned_layouts():
        layout = tmp_path / "layout.json"
        layout.write_text(json.dumps(asdict(spread)))
        monkeypatch.setattr(sys, "argv", ["train.py", "--device", device, "--layout", str(layout),
                                          "--checkpoint-dir", str(tmp_path / "c"), "--export-dir", str(tmp_path)])
        args = train.parse()
        assert (args.sharding, args.tensor, args.shard_group, args.pipeline) == (
            spread.sharding, spread.tensor, spread.shard_group, spread.pipeline), where
        seen.add(spread.sharding)
    assert seen == {"none", "full", "hybrid"}


def test_an_uneven_vocabulary_under_tensor_parallel_is_padded_masked_and_exported_whole(tmp_path, tokens):
    """Issue 33: 257 entries on tensor parallel 2 (which does not divide them). The embedding and output head are
    padded to 512 rows as Megatron-LM pads them (a multiple of 128 x 2), the padding logits masked out of the loss:
    TP 2 x DP 2 trains step for step as FSDP2 over four ranks with the unpadded vocabulary, and the export holds the
    tokenizer's 257 rows."""
    from safetensors import safe_open

    common = ["--steps", "3", "--data", str(tokens), "--lr", "1e-2", "--warmup", "0", "--sharding", "full",
              "--global-batch", "8", "--vocab", "257"]
    plain = _losses(_torchrun(tmp_path, *common, "--checkpoint-dir", str(tmp_path / "dp"), ranks=4))
    out = _torchrun(tmp_path, *common, "--tensor", "2", "--checkpoint-dir", str(tmp_path / "tp"),
                    "--export-dir", str(tmp_path / "export"), ranks=4)
    assert "vocabulary 257 padded to 512 (masked)" in out, out
    padded = _losses(out)
    assert sorted(padded) == [1, 2, 3] and all(padded[k] == pytest.approx(plain[k], rel=1e-5) for k in plain), (
        padded, plain)
    with safe_open(str(tmp_path / "export" / "model.safetensors"), "pt") as f:
        assert f.get_slice("model.embed_tokens.weight").get_shape()[0] == 257
        assert f.get_slice("lm_head.weight").get_shape()[0] == 257
    assert json.loads((tmp_path / "export" / "config.json").read_text())["vocab_size"] == 257


def test_the_planner_and_the_trainer_pad_the_vocabulary_alike():
    import importlib.util

    from workloads.planning.parallelism import padded_vocab

    spec = importlib.util.spec_from_file_location("recipe", TRAINER.parent / "recipe.py")
    recipe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recipe)
    for vocab in (257, 32000, 50257, 128256, 151936, 32001):
        for tensor in (1, 2, 4, 8, 16, 32, 64):
            assert recipe.padded_vocab(vocab, tensor) == padded_vocab(vocab, tensor), (vocab, tensor)


def _start(tmp_path, run: list[str], **env: str) -> subprocess.Popen:
    """torchrun of train.py in its own session (a signal reaches it alone), its output read line by line."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", **env}
    return subprocess.Popen(_command(*run), cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (torchrun's workers), from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def test_a_rank_killed_mid_run_fails_the_job_and_the_requeued_job_resumes_from_the_last_complete_checkpoint(tmp_path):
    """A node lost mid-run: one rank dies with SIGKILL (no signal handler, no final checkpoint), torchrun fails the
    job. Slurm requeues it (#SBATCH --requeue; HyperPod's auto-resume runs the step again): the same command resumes
    from `latest`, the last checkpoint written whole, and trains on to the end."""
    import signal

    run = ["--steps", "40", "--checkpoint-every", "5", "--checkpoint-dir", str(tmp_path / "ckpt")]
    proc = _start(tmp_path, run)
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("step 12 "):  # after step 10's checkpoint, before step 15's
                workers = _children(proc.pid)
                assert len(workers) == 2, workers
                os.kill(max(workers), signal.SIGKILL)  # one rank, as a node failure takes it
                break
        rest, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    out = "".join(seen) + rest
    assert proc.returncode != 0, out[-2000:]  # the job fails: Slurm requeues it
    last = (tmp_path / "ckpt" / "latest").read_text().strip()
    # A complete checkpoint, never the killed step's: step 10's, published as soon as its background write was
    # whole, or step 5's if that write had not finished when the rank died (a loaded machine).
    assert last in ("step-00000005", "step-00000010"), last
    resumed = _torchrun(tmp_path, *run)  # the requeued job: the same command
    step = int(last.removeprefix("step-"))
    assert f"resumed from" in resumed and f"at step {step}" in resumed
    assert sorted(_losses(resumed)) == list(range(step + 1, 41))
    assert (tmp_path / "ckpt" / "latest").read_text().strip() == "step-00000040"


def test_the_calibration_result_feeds_plan_calibrate(tmp_path, capsys):
    """The trainer on two CPU ranks writes the calibration JSON; `plan --calibrate` reads it and recomputes the run.
    (tests/fixtures/calibration/cpu-two-ranks.json is such a result, for `make test` without torch runs.)"""
    from workloads.commands.cli import main as cli

    result = tmp_path / "calibration" / "small.json"
    out = _torchrun(tmp_path, "--steps", "10", "--checkpoint-dir", str(tmp_path / "ckpt"),
                    "--calibrate-output", str(result), "--peak-tflops", "0.5")
    assert "calibration:" in out and "tokens/s" in out and not (tmp_path / "ckpt" / "latest").exists()
    measured = json.loads(result.read_text())
    assert measured["ranks"] == 2 and measured["nodes"] == 1 and measured["device"] == "cpu"
    assert measured["tokens_per_s"] > 0 and 0 < measured["mfu"] < 1 and measured["steps_timed"] == 8
    fixture = json.loads((Path(__file__).parent / "fixtures" / "calibration" / "cpu-two-ranks.json").read_text())
    assert set(measured) <= set(fixture)  # the fixture has every field the trainer writes
    assert cli(["plan", "intermediate", "--calibrate", str(result), "--json"]) == 0
    calibration = json.loads(capsys.readouterr().out)["calibration"]
    assert calibration["measured_tokens_s"] == pytest.approx(measured["tokens_per_s"]) and calibration["hours"] > 0


def test_fsdp2_gradient_accumulation_holds_only_the_sharded_gradient_the_plan_counts():
    """Issue 33 B1: two CPU ranks, three micro-steps of the trainer's own micro_step on its FSDP2 model. After every
    micro-step each rank holds its shard of the fp32 gradient, what the memory model counts (GRADIENT_BYTES_PER_PARAM
    over the ranks), never the whole model's unsharded gradient that FSDP2 keeps while gradient sync is off."""
    from workloads.planning.parallelism import GRADIENT_BYTES_PER_PARAM

    probe = Path(__file__).resolve().parent / "probes" / "gradient_bytes.py"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(probe), "3"], env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    planned = GRADIENT_BYTES_PER_PARAM * measured["parameters"] / measured["world"]
    assert measured["world"] == 2 and len(measured["held"]) == 3
    for held in measured["held"]:
        assert 0.9 * planned <= held <= 1.1 * planned, (held, planned, measured)


def _two_nodes(tmp: Path, node_dirs: tuple[Path, Path], *args: str) -> None:
    """Two "nodes" of one rank each, with the environment torchrun gives a rank (RANK, LOCAL_RANK, GROUP_RANK, ...),
    each node with its own CHECKPOINT_DIR as a SageMaker job's nodes have /opt/ml/checkpoints."""
    from tests.test_trainer_resume import _free_port

    port = _free_port()
    procs = []
    for node, directory in enumerate(node_dirs):
        env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "RANK": str(node),
               "LOCAL_RANK": "0", "GROUP_RANK": str(node), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "CHECKPOINT_DIR": str(directory)}
        procs.append(subprocess.Popen([sys.executable, str(TRAINER), "--device", "cpu", *SMALL, "--sharding", "full",
                                       "--log-every", "1", *args], cwd=tmp, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    for p in procs:
        out, _ = p.communicate(timeout=240)
        assert p.returncode == 0, out[-3000:]


def test_every_node_prunes_its_own_checkpoint_directory_and_rank_0_alone_a_shared_one(tmp_path):
    """A multi-node SageMaker job writes each node's shards to that node's /opt/ml/checkpoints, on a volume sized for
    --keep checkpoints: each node's local rank 0 prunes there (rank 0 alone would leave every other node to fill
    its volume). A shared directory (FSx) keeps one pruner."""
    local = (tmp_path / "node0", tmp_path / "node1")
    _two_nodes(tmp_path, local, "--steps", "5", "--checkpoint-every", "1", "--keep", "2")
    for directory in local:
        assert sorted(d.name for d in directory.glob("step-*")) == ["step-00000004", "step-00000005"], directory
        assert (directory / "latest").read_text().strip() == "step-00000005"
        assert any((directory / "step-00000005").glob("*.distcp"))  # the node's own shards, not an empty folder
    shared = tmp_path / "fsx"
    _two_nodes(tmp_path, (shared, shared), "--steps", "5", "--checkpoint-every", "1", "--keep", "2")
    assert sorted(d.name for d in shared.glob("step-*")) == ["step-00000004", "step-00000005"]


def _base_model(directory: Path) -> None:
    save_base_model(directory)


def _base_loss(directory: Path, tokens: Path, seq: int, first: int, count: int) -> float:
    """transformers' own loss of the base model on the run's first global batch (next-token cross-entropy)."""
    import argparse

    import torch
    from transformers import LlamaForCausalLM

    train = _train_module()
    args = argparse.Namespace(batch=count, seq=seq, vocab=256, global_batch=count)
    data = train.Tokens(tokens, seq) if tokens.is_dir() else train.Tokens(tokens, seq)
    batch = train.batch_for(args, 0, 1, first, 0, data)
    model = LlamaForCausalLM.from_pretrained(directory).eval()
    with torch.no_grad():
        logits = model(batch[:, :-1]).logits
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch[:, 1:].reshape(-1)).item()


@pytest.mark.parametrize("layout", [["--sharding", "full"], ["--sharding", "full", "--tensor", "2"],
                                    ["--sharding", "none"]])
def test_fine_tuning_starts_from_the_base_models_loss_and_exports_the_fine_tuned_model(tmp_path, tokens, layout):
    """Issue 42: --init-from a Hugging Face directory the test saved itself. The trainer takes the base's shape
    (and its rope_theta and rms_norm_eps), each rank reads its own shards of the safetensors straight into FSDP2 /
    tensor-parallel DTensors (or DDP's replicas), and step 1's loss is the base model's on that batch as transformers
    computes it; the run trains at the fine-tuning recipe's learning rate and the export is the fine-tuned model,
    not the base. (Before: --init-from did not exist and every run started from random weights.)"""
    from safetensors.torch import load_file

    base = tmp_path / "base"
    _base_model(base)
    export = tmp_path / "export"
    ranks = 4 if "--tensor" in layout else 2
    out = _torchrun(tmp_path, "--init-from", str(base), "--data", str(tokens), "--steps", "3", "--global-batch", "4",
                    "--checkpoint-dir", str(tmp_path / "ckpt"), "--export-dir", str(export), *layout,
                    *([] if "--tensor" in layout else ["--tensor", "1"]), ranks=ranks)  # 2 data ranks x 2
    assert f"fine-tuning from {base}" in out and "peak lr 2e-05, warmup 1 of 3 steps" in out, out
    losses = _losses(out)
    assert losses[1] == pytest.approx(_base_loss(base, tokens, 32, 1, 4), rel=1e-4), (losses, out)
    assert losses[3] < losses[1]
    config = json.loads((export / "config.json").read_text())
    assert (config["rope_theta"], config["rms_norm_eps"], config["intermediate_size"]) == (10000.0, 1e-6, 128)
    tuned, before = load_file(export / "model.safetensors"), load_file(next(base.glob("*.safetensors")))
    assert set(tuned) == set(before)
    moved = [k for k in tuned if not torch_allclose(tuned[k], before[k])]
    assert moved and all(tuned[k].shape == before[k].shape for k in tuned)


def torch_allclose(a, b) -> bool:
    import torch

    return torch.allclose(a.float(), b.float())


def test_a_base_model_the_trainer_cannot_build_is_refused_with_its_reason(tmp_path):
    base = tmp_path / "base"
    _base_model(base)
    config = json.loads((base / "config.json").read_text())
    (base / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": True}))
    done = subprocess.run([sys.executable, str(TRAINER), "--device", "cpu", "--init-from", str(base)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "tie_word_embeddings True" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run([sys.executable, str(TRAINER), "--device", "cpu", "--init-from", str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "no config.json" in done.stderr, done.stderr


@pytest.mark.parametrize("layout", [["--sharding", "full"], ["--sharding", "none"],
                                    ["--sharding", "full", "--tensor", "2"]])
def test_fp8_training_trains_with_float8_projections_close_to_the_full_precision_run(tmp_path, tokens, layout):
    """Issue 42: --precision fp8 swaps every block's projections for torchao's Float8Linear (emulated on CPU: the
    same scaling and casts) under FSDP2, DDP and tensor parallel x FSDP2, and the run's losses stay within float8's
    error of the fp32 run's while it learns. (Before: fp8 was not a --precision the trainer took.)"""
    ranks = 4 if "--tensor" in layout else 2
    common = ["--steps", "4", "--data", str(tokens), "--lr", "1e-2", "--warmup", "0", "--global-batch", "4",
              "--hidden", "64", *layout, *([] if "--tensor" in layout else ["--tensor", "1"])]
    full = _losses(_torchrun(tmp_path, *common, "--checkpoint-dir", str(tmp_path / "a"), ranks=ranks))
    out = _torchrun(tmp_path, *common, "--precision", "fp8", "--checkpoint-dir", str(tmp_path / "b"), ranks=ranks)
    assert "float8 projections (14)" in out, out  # 2 blocks x (q, k, v, o, gate, up, down)
    fp8 = _losses(out)
    assert sorted(fp8) == [1, 2, 3, 4] and fp8[4] < fp8[1]
    assert all(fp8[k] == pytest.approx(full[k], rel=0.05) for k in full), (fp8, full)
    assert fp8 != full  # float8's rounding shows: not the fp32 path under another name


def test_compiled_blocks_train_as_the_eager_ones_and_checkpoint_under_the_same_names(tmp_path, tokens):
    """Issue 42: --compile compiles every block in place (CPU: aot_eager, the captured graph run as is): the losses
    are the eager run's, and the checkpoint's names are the eager model's, so either resumes the other."""
    common = ["--steps", "3", "--data", str(tokens), "--lr", "1e-2", "--warmup", "0", "--sharding", "full",
              "--tensor", "1", "--checkpoint-every", "2"]
    eager = _losses(_torchrun(tmp_path, *common, "--checkpoint-dir", str(tmp_path / "a")))
    compiled_dir = tmp_path / "b"
    out = _torchrun(tmp_path, *common, "--compile", "--checkpoint-dir", str(compiled_dir), "--stop-after", "2")
    assert "compiled blocks" in out
    compiled = _losses(out)
    resumed = _losses(_torchrun(tmp_path, *common, "--checkpoint-dir", str(compiled_dir)))  # eager, from compiled
    both = {**compiled, **resumed}
    assert sorted(both) == [1, 2, 3] and all(both[k] == pytest.approx(eager[k], rel=1e-5) for k in eager), (
        both, eager)


def test_bf16_compute_reduces_gradients_in_bf16_and_fp16_in_fp32():
    """Issue 42: FSDP2's reduce-scatter carries bf16 gradients under bf16 (and fp8) compute, half fp32's bytes."""
    import argparse

    import torch

    _train_module()
    import speed

    cuda = torch.device("cuda", 0)  # only the policy is built: no GPU needed
    for precision, reduce, expected in (("bf16", "bf16", torch.bfloat16), ("fp8", "bf16", torch.bfloat16),
                                        ("fp16", "bf16", torch.float32), ("bf16", "fp32", torch.float32)):
        policy = speed.mixed_precision(argparse.Namespace(precision=precision, reduce_dtype=reduce), cuda)
        assert policy.reduce_dtype == expected, (precision, reduce)
    assert speed.mixed_precision(argparse.Namespace(precision="bf16", reduce_dtype="bf16"),
                                 torch.device("cpu")).reduce_dtype is None  # CPU: fp32 throughout
