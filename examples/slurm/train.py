"""Train the planned Llama decoder with PyTorch's own parallelism, checkpoint to /fsx, resume, and export the
final model as a Hugging Face directory the serving containers read.

    torchrun ... train.py --device cuda|neuron|xla|cpu --layout /opt/ml-estate/layout.json \
        --data /fsx/tokens/NAME --tokenizer /fsx/datasets/tokenizer [--steps N] [--export-dir DIR]

The model is Llama (RMSNorm, SwiGLU, rotary positions, grouped-query attention) with Hugging Face's parameter
names. `--device xla`: Trn1's legacy PyTorch/XLA path (Neuron 2.28), data-parallel.

The layout file is the plan's `training.parallelism` (python -m workloads plan NAME --json), which the TrainStack
writes on every node: the model's shape, how it is spread and how it trains. `sharding: none` trains with
DistributedDataParallel, `sharding: full` with FSDP2 (`fully_shard` on every block, then the root: ZeRO-3), `sharding:
hybrid` with HSDP (FSDP2 over a (replicate, shard) mesh: sharded within `shard_group` data ranks, replicated across); `tensor`
above 1 splits every block's projections inside a node with PyTorch's DTensor tensor parallelism (Megatron's column
and row split, the output head split over the vocabulary) and FSDP2 shards over the data-parallel ranks across nodes.
`pipeline` above 1 splits the blocks into stages across nodes (torch.distributed.pipelining, 1F1B): pipeline.py.

The model: model.py. Optimisation, the fixed global batch (micro-steps accumulate gradients whatever the node count), fp16 loss scaling and
the data order (an epoch draws every window once, a function of the step, so a resumed run draws the same): recipe.py.

Checkpoints: DCP writes each rank's shards to CHECKPOINT_DIR/step-NNNNNNNN every --checkpoint-every steps (the
plan's cadence), in the background (dcp.async_save: training goes on while the shards are written), and
synchronously when Slurm signals the job (SIGTERM/SIGUSR1) and at the end; once a checkpoint is complete rank 0
points CHECKPOINT_DIR/latest at it and prunes to --keep, and so does each node's local rank 0 where CHECKPOINT_DIR
is the node's own (a SageMaker job's /opt/ml/checkpoints). A start resumes after `latest`.

Data: --data is the prepare step's directory (examples/slurm/prepare.py: token shards and meta.json, whose vocabulary
the model takes), or one uint16 token file; without it, synthetic tokens (checks only). With --text as well (a
SageMaker job), each node tokenizes the text into --data first, its local ranks sharing the files. The export: the
layout's export_dir on a cluster, else SM_MODEL_DIR on a SageMaker job (which uploads it), with the tokenizer's files.
Where /fsx is not mounted (not a cluster node), the layout's /fsx paths are refused: --export-dir and --checkpoint-dir
say where instead.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.stateful import Stateful
from torch.distributed.tensor.parallel import loss_parallel

sys.path.insert(0, str(Path(__file__).resolve().parent))  # recipe.py and prepare.py, beside this script
from hf_export import NORM_EPS, ROPE_THETA, export  # noqa: E402
from model import Attention, Llama, MLP, RMSNorm, llama_intermediate, rotary, rotate_half  # noqa: E402,F401
from recipe import (CLIP_NORM, RECIPE_WARMUP, LossScale, Tokens, batch_for, clip_gradients,  # noqa: E402
                    Calibration, device_meshes, init_weights, learning_rate, mask_for, masked_cross_entropy,
                    optimizer_for, padded_vocab, publish, step_divisor, tensor_parallel)
import classifier  # noqa: E402
import evaluation  # noqa: E402
import finetune  # noqa: E402
import loader  # noqa: E402
import pipeline  # noqa: E402
import safety  # noqa: E402
from startup import data_vocabulary, prepare_here, prunes_here, same_run  # noqa: E402
import speed  # noqa: E402

BACKENDS = {"cuda": "nccl", "neuron": "neuron", "xla": "xla", "cpu": "gloo"}
FSX = Path("/fsx")  # where every cluster node mounts FSx for Lustre (workloads/planning/layout.py FSX_MOUNT)


def _switch(value: str) -> bool:
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"{value!r}: allowed true or false")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=tuple(BACKENDS), default="cuda")
    p.add_argument("--layout", type=Path, help="the plan's training.parallelism as JSON")
    p.add_argument("--steps", type=int, help="default: the layout's (the plan's tokens over the global batch), else 1000")
    p.add_argument("--batch", type=int, help="sequences per data rank per micro-step (default: the layout's, else 1)")
    p.add_argument("--global-batch", type=int, help="sequences per optimizer step (default: the layout's, else data "
                   "ranks x --batch); the micro-steps between optimizer steps follow from it")
    p.add_argument("--lr", type=float, help="peak learning rate (default: the layout's, else 3e-4)")
    p.add_argument("--warmup", type=int, help="warmup steps (default: the layout's, else 2000 or a tenth of the run)")
    p.add_argument("--precision", choices=("bf16", "fp16", "fp32", "fp8"),
                   help="compute dtype on accelerators (default: the layout's, else bf16; CPU computes in fp32); fp8: "
                   "the blocks' projections in float8 (torchao), the rest bf16 (speed.py)")
    # `--compile true|false` too: a SageMaker job passes every hyperparameter as `--key value`.
    p.add_argument("--compile", nargs="?", const=True, default=None, type=_switch,
                   help="torch.compile every block (default: the layout's `compile`, else off)")
    p.add_argument("--no-compile", dest="compile", action="store_false", help="never compile the blocks")
    p.add_argument("--reduce-dtype", choices=("bf16", "fp32"), help="FSDP2's gradient reduction under bf16 compute "
                   "(default: the layout's, else bf16)")
    p.add_argument("--tensor", type=int, help="tensor-parallel degree inside a node (default: the layout's, else 1)")
    p.add_argument("--pipeline", type=int, help="pipeline stages (default: the layout's, else 1): pipeline.py")
    # The layout's model shape, or these (small models for checks and tests).
    p.add_argument("--layers", type=int)
    p.add_argument("--hidden", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--kv-heads", type=int, help="grouped-query attention: key/value heads (default: heads)")
    p.add_argument("--intermediate", type=int, help="SwiGLU width (default: Llama 3's rule from hidden)")
    p.add_argument("--seq", type=int)
    p.add_argument("--vocab", type=int)
    p.add_argument("--sharding", choices=("none", "full", "hybrid"))
    p.add_argument("--shard-group", type=int, help="sharding hybrid (HSDP): data ranks each shard group holds the "
                   "state over (default: the layout's, else every data rank)")
    p.add_argument("--data", type=Path, help="the prepare step's shard directory (or one uint16 token file); "
                   "synthetic tokens when absent")
    p.add_argument("--text", type=Path, help="raw text to tokenize into --data first, on each node (prepare.py)")
    p.add_argument("--checkpoint-dir", type=Path, help="default: CHECKPOINT_DIR, else /fsx/checkpoints/<job name>")
    p.add_argument("--checkpoint-every", type=int, help="default: the layout's cadence (the plan's), else 100")
    p.add_argument("--keep", type=int, help="checkpoints kept (the plan sized FSx for this many; default 2)")
    p.add_argument("--export-dir", type=Path, help="the final model as a Hugging Face directory (default: the "
                   "layout's export_dir, which FSx exports to the serving contract's models/ prefix)")
    p.add_argument("--tokenizer", type=Path, help="a directory with the tokenizer's Hugging Face files to export")
    p.add_argument("--init-from", type=Path, help="fine-tune: a Hugging Face Llama directory (config.json, "
                   "*.safetensors) whose weights start the run, its shape the model's (finetune.py)")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--eval-every", type=int, help="held-out loss every N steps (the prepare step's held-out slice; "
                   "default: every checkpoint; 0: never)")
    p.add_argument("--metrics-file", type=Path, help="CloudWatch EMF lines (loss, tokens/s, MFU, held-out loss) "
                   "appended here (default: TRAIN_METRICS_FILE; on a SageMaker job stdout)")
    p.add_argument("--planned-mfu", type=float, help="the plan's MFU, written beside the measured one")
    p.add_argument("--stop-after", type=int, help="leave after this step, as an interrupted job would")
    p.add_argument("--max-nonfinite-steps", type=int, default=safety.MAX_NONFINITE_IN_A_ROW,
                   help="steps in a row with a non-finite gradient norm (each skipped) before the run stops")
    p.add_argument("--inject-nonfinite", metavar="STEP[,STEP]", help="fault injection (tests, drills): make these "
                   "steps' loss infinite, so their gradients are inf/NaN")
    # Calibration (workloads/planning/acceptance.py): a measurement, not a run - no resume, no checkpoint, no export.
    p.add_argument("--calibrate-output", type=Path, help="write the measured tokens/s and MFU here as JSON")
    p.add_argument("--peak-tflops", type=float, help="dense bf16 TFLOPS of one rank's device, for the MFU")
    args = p.parse_args()
    told = {a[2:].split("=")[0].replace("-", "_") for a in sys.argv[1:] if a.startswith("--")}
    # On a cluster the layout file; on a SageMaker training job `python -m workloads submit` passes it in LAYOUT_JSON.
    layout = json.loads(args.layout.read_text() if args.layout else os.environ.get("LAYOUT_JSON", "{}"))
    # model.family's rotary embedding where the plan names one (a fine-tune's base replaces it, and its context).
    family = layout.get("family") or {}
    args.rope_theta, args.norm_eps = family.get("rope_theta", ROPE_THETA), NORM_EPS
    args.rope_scaling, args.max_positions = family.get("rope_scaling"), None
    for field, default in (("layers", 2), ("hidden", 256), ("heads", 4), ("seq", 256), ("vocab", 32000),
                           ("sharding", "none"), ("keep", 2), ("steps", 0), ("batch", 1), ("global_batch", 0),
                           ("lr", 3e-4), ("warmup", -1), ("precision", "bf16"), ("tensor", 1), ("pipeline", 1),
                           ("checkpoint_every", 100), ("shard_group", 0)):
        if getattr(args, field) is None:
            key = {"seq": "sequence", "keep": "keep_checkpoints", "batch": "micro_batch",
                   "warmup": "warmup_steps"}.get(field, field)
            setattr(args, field, layout.get(key, default) or default)
    args.told = told
    if args.init_from:  # the base model's shape and the fine-tuning recipe, before the layout's shape fills the rest
        finetune.apply(args, told, p.error, layout)
    if args.kv_heads is None:  # the layout's only when its shape is the one trained (no --heads given here)
        args.kv_heads = layout.get("kv_heads") if layout.get("heads") == args.heads else None
        args.kv_heads = args.kv_heads or args.heads
    if args.intermediate is None:
        args.intermediate = layout.get("intermediate") if layout.get("hidden") == args.hidden else None
        args.intermediate = args.intermediate or llama_intermediate(args.hidden)
    if args.device == "xla" and args.sharding in ("full", "hybrid"):
        p.error("the layout shards the model (FSDP2), which PyTorch/XLA does not run: on Trn1 (Neuron 2.28) train it "
                "with NxD's ZeRO-1 optimizer (neuronx_distributed, in the node image), or on Trn2 with this script")
    args.steps = args.steps or 1000
    args.compile = bool(layout.get("compile", False)) if args.compile is None else args.compile
    args.reduce_dtype = args.reduce_dtype or layout.get("reduce_dtype") or "bf16"
    if args.precision == "fp8":
        if (why := speed.fp8_refusal(args.device)) or not _importable("torchao"):
            p.error(f"--precision fp8: {why or 'needs torchao (requirements-trainer.txt), which this Python lacks'}")
    args.eval_every = args.checkpoint_every if args.eval_every is None else args.eval_every
    args.planned_mfu = args.planned_mfu or layout.get("planned_mfu")
    if args.warmup < 0:
        args.warmup = min(RECIPE_WARMUP, args.steps // 10)
    args.recompute = bool(layout.get("recompute", True))  # the plan decides: only when memory needs it
    chosen = []  # paths this script picked itself, not told: on a cluster they are on FSx
    if args.checkpoint_dir is None:
        told = os.environ.get("CHECKPOINT_DIR")
        args.checkpoint_dir = Path(told or f"{FSX}/checkpoints/" + os.environ.get("SLURM_JOB_NAME", "train"))
        chosen += [] if told else [("--checkpoint-dir", args.checkpoint_dir)]
    if args.export_dir is None and (layout.get("export_dir") or os.environ.get("SM_MODEL_DIR")):
        # A cluster's FSx export directory, or a SageMaker job's model directory, which SageMaker uploads.
        args.export_dir = Path(layout.get("export_dir") or os.environ["SM_MODEL_DIR"])
        chosen += [("--export-dir", args.export_dir)] if layout.get("export_dir") else []
    if args.text and not (args.data and args.tokenizer):
        p.error("--text needs --data (where its token shards go) and --tokenizer (what tokenizes it)")
    args.vocab_given = args.vocab_given if args.init_from else "vocab" in args.told
    missing = [name for name, needed in (("safetensors", args.export_dir), ("tokenizers", args.text),
                                         ("numpy", args.data)) if needed and not _importable(name)]
    if missing:  # fail at the start, not after the last step
        p.error(f"this run needs {', '.join(missing)} (examples/slurm/train.py's packages: numpy, tokenizers, "
                "safetensors), which this Python does not have")
    pipeline.check(args, p.error)
    if args.tensor > 1:
        if args.sharding == "none" or args.device == "xla":
            p.error(f"tensor {args.tensor} runs with FSDP2 across the data ranks (sharding full or hybrid) on cuda, "
                    f"neuron or cpu, not with sharding {args.sharding} on {args.device}")
        for name, value in (("heads", args.heads), ("kv-heads", args.kv_heads), ("intermediate", args.intermediate)):
            if value % args.tensor:  # each rank holds whole heads and an equal slice of the SwiGLU width
                p.error(f"--{name} {value} is not divisible by the tensor-parallel degree {args.tensor}")
    for flag, path in chosen:
        if path.is_relative_to(FSX) and not os.path.ismount(FSX):
            # Off the cluster (a laptop, a test run, a GPU box) /fsx is no file system: creating it there writes
            # the run's checkpoints or model onto the root disk, where nothing exports or keeps them.
            p.error(f"{flag} defaults to {path}, on {FSX}, which is not mounted here (not a cluster node): give "
                    f"{flag} a directory of this machine")
    return args


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


class Training(Stateful):
    """What a checkpoint holds: model and optimizer (sharded as they are), the step and the fp16 loss scale. The
    learning rate and the data order are functions of the step."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, scaler: "LossScale", options=None) -> None:
        self.model, self.optimizer, self.scaler, self.step, self.options = model, optimizer, scaler, 0, options

    def state_dict(self) -> dict:
        model, optim = get_state_dict(self.model, self.optimizer, options=self.options)
        return {"model": model, "optim": optim, "step": self.step, "loss_scale": self.scaler.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"],
                       options=self.options)
        self.step = state["step"]
        self.scaler.load_state_dict(state["loss_scale"])


def setup(kind: str) -> torch.device:
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if kind == "neuron":
        import torch_neuronx  # noqa: F401  registers the neuron device and process group backend
    if kind == "xla":
        # Trn1's legacy path (Neuron 2.28): torch-neuronx on PyTorch/XLA; torchrun's environment, the xla backend.
        import torch_xla
        import torch_xla.distributed.xla_backend  # noqa: F401  registers the xla process group backend

        dist.init_process_group("xla", init_method="xla://")
        return torch_xla.device()
    dist.init_process_group(BACKENDS[kind])
    if kind == "cpu":
        return torch.device("cpu")
    device = torch.device(kind, local_rank)
    torch.accelerator.set_device_index(local_rank)  # cuda or neuron alike (TorchNeuron supports torch.accelerator)
    return device


def build(args: argparse.Namespace, device: torch.device, pipe=None) -> nn.Module:
    shape = dict(vocab=args.vocab, rows=padded_vocab(args.vocab, args.tensor), layers=args.layers, hidden=args.hidden, heads=args.heads, kv_heads=args.kv_heads,
                 intermediate=args.intermediate, recompute_blocks=args.recompute, rope_theta=args.rope_theta,
                 norm_eps=args.norm_eps, rope_scaling=args.rope_scaling)
    fp8 = args.precision == "fp8"
    if args.sharding == "none":
        from torch.nn.parallel import DistributedDataParallel

        with torch.device("meta" if pipe else device):
            model = Llama(**shape) if pipe is None else pipe.cut(Llama(**shape)).to_empty(device=device)
        if fp8:
            speed.float8(model, device, sharded=False)
        if args.compile:
            speed.compile_blocks(model.blocks, device)
        init_weights(model, device)
        if pipe is not None:  # the stage's gradients are averaged by pipeline.Pipeline (DDP fails under a schedule)
            return model
        # Gradients live in DDP's communication buckets instead of beside them: one copy fewer (4 B/param), which
        # the plan's memory per rank counts on (measured on an H100: 75.6 GiB without it, for the 3.4B model).
        return DistributedDataParallel(model, device_ids=[device.index] if device.type not in ("cpu", "xla") else None,
                                       gradient_as_bucket_view=True)
    from torch.distributed.fsdp import fully_shard

    # Built without memory (meta device) and sharded before any weight exists: a model the plan shards because
    # it does not fit one accelerator does not fit one host either. Each rank then fills in its own shards.
    with torch.device("meta"):
        model = Llama(**shape) if pipe is None else pipe.cut(Llama(**shape))
    if fp8:
        speed.float8(model, device, sharded=True)
    data_mesh, tensor_mesh = (pipe.data_mesh, pipe.tensor_mesh) if pipe else device_meshes(args, device)
    if tensor_mesh is not None:
        tensor_parallel(model, args, tensor_mesh)
    if args.compile:
        speed.compile_blocks(model.blocks, device)
    # Compute in the layout's dtype, fp32 master weights (the plan's 16 B/param), bf16 gradient reduction under bf16
    # (speed.mixed_precision); CPU stays fp32.
    mp = speed.mixed_precision(args, device)
    for block in model.blocks:
        fully_shard(block, mesh=data_mesh, mp_policy=mp)
    fully_shard(model, mesh=data_mesh, mp_policy=mp)
    model.to_empty(device=device)
    init_weights(model, device)
    return model


def latest(directory: Path) -> Path | None:
    marker = directory / "latest"
    return directory / marker.read_text().strip() if marker.exists() else None


def save(state: Training, directory: Path, pruner: bool, keep: int, loss: float | None = None) -> None:
    path = directory / f"step-{state.step:08d}"
    dcp.save({"training": state}, checkpoint_id=path)
    dist.barrier()  # every rank's shards are written
    if pruner:
        published(path, state.step, loss, keep)
    dist.barrier()


def published(path: Path, step: int, loss: float | None, keep: int) -> None:
    """A complete checkpoint: its loss recorded, `latest` moved to it (only once it is whole), older ones pruned."""
    if loss is not None:
        safety.record_loss(path, step, loss)
    publish(path.parent / "latest", path.name + "\n")
    prune(path.parent, keep)


class Checkpointer:
    """The plan's regular checkpoints in the background: dcp.async_save copies each rank's shards to host memory and
    returns, a thread writes them (over its own gloo group, apart from training's collectives) while training goes
    on. `latest` moves, and old ones are pruned, as soon as the write is complete (rank 0's future: DCP writes the
    metadata once every rank's shards are written); a job killed before resumes from the previous one."""

    def __init__(self, directory: Path, pruner: bool, keep: int, asynchronous: bool) -> None:
        self.directory, self.pruner, self.keep, self.pending = directory, pruner, keep, None
        self.group = dist.new_group(backend="gloo") if asynchronous else None

    def save(self, state: Training, loss: float | None = None) -> None:
        if self.group is None:
            return save(state, self.directory, self.pruner, self.keep, loss)
        self.wait()
        path = self.directory / f"step-{state.step:08d}"
        future = dcp.async_save({"training": state}, checkpoint_id=path, process_group=self.group)
        # Published from the writer's thread the moment it is whole (every rank's future completes once rank 0 has
        # written DCP's metadata), not at the next checkpoint.
        finished = threading.Event()  # the callback's publishing done: a future's result() returns before it
        step = state.step

        def whole(done) -> None:
            try:
                if self.pruner and done.exception() is None:
                    published(path, step, loss, self.keep)
            finally:
                finished.set()

        future.add_done_callback(whole)
        self.pending = (future, finished)

    def wait(self) -> None:
        """Finish the write in flight and its publishing; a failed write raises here."""
        if self.pending is None:
            return
        (future, finished), self.pending = self.pending, None
        future.result()
        finished.wait()


def prune(directory: Path, keep: int) -> None:
    """Keep the newest `keep` checkpoints up to `latest`, and the newest saved at a finite loss (safety.prune)."""
    safety.prune(directory, latest(directory), keep)


def main() -> None:
    layout, kind = classifier.layout_of(sys.argv[1:])
    if classifier.wanted(layout):  # an encoder classifier (the plan's task): fine-tuned as one, classifier.py
        device = setup(kind)
        classifier.run(sys.argv[1:], layout, device)
    else:
        args = parse()
        device = setup(args.device)
        train(args, device)
    # The model, optimizer and FSDP2's device mesh hold the process group and gloo's finished work (tensors). Freed
    # here, while Python is alive: freed at interpreter exit, gloo's threads abort the process (SIGABRT) at random
    # after a good run, and Slurm marks the job failed (seen once in CI; pytorch/pytorch#179291 describes it).
    gc.collect()
    dist.destroy_process_group()


def train(args: argparse.Namespace, device: torch.device) -> None:
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.text:
        prepare_here(args)
    tokens = Tokens(args.data, args.seq) if args.data else None
    if tokens is not None:
        data_vocabulary(args, tokens, rank)
    data_ranks = world // (args.tensor * args.pipeline)  # tensor ranks neighbours, stages outermost (pipeline.py)
    data_rank = rank // args.tensor % data_ranks
    if args.init_from:  # fine-tuning's batch, steps and warmup (its learning rate: parse)
        finetune.batch_and_steps(args, data_ranks, args.told)
    args.global_batch = args.global_batch or data_ranks * args.batch
    micro_steps, left = divmod(args.global_batch, data_ranks * args.batch)
    if left or not micro_steps:
        raise SystemExit(f"the global batch of {args.global_batch} sequences is not a whole number of micro-steps of "
                         f"{data_ranks} data ranks x {args.batch} (--global-batch, --batch)")
    pipe = pipeline.Pipeline(args, device) if args.pipeline > 1 else None
    model = build(args, device, pipe)
    parameters = pipe.wrap(model, micro_steps) if pipe else sum(p.numel() for p in model.parameters())  # global numel
    optimizer = optimizer_for(model, args, device)
    fp16 = args.precision == "fp16" and device.type != "cpu"
    state = Training(model, optimizer, LossScale(fp16), pipe and pipe.options)
    args.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    same_run(args, tokens, rank)
    dist.barrier()  # run.json is written before any rank checkpoints
    resume = None if args.calibrate_output else latest(args.checkpoint_dir)
    if resume is not None:
        dcp.load({"training": state}, checkpoint_id=resume)
        if rank == 0:
            print(f"resumed from {resume} at step {state.step}", flush=True)
    elif args.init_from:
        finetune.load(model, args.init_from)
        if rank == 0:
            print(f"fine-tuning from {args.init_from} (each rank read its own shards): peak lr {args.lr:g}, warmup "
                  f"{args.warmup} of {args.steps} steps", flush=True)
    pruner = prunes_here(args.checkpoint_dir, rank, device)
    checkpoints = Checkpointer(args.checkpoint_dir, pruner, args.keep, asynchronous=device.type in ("cuda", "cpu"))
    stop = {"signal": None}
    for sig in (signal.SIGTERM, signal.SIGUSR1):  # Slurm's warning before a requeue, preemption or time limit
        signal.signal(sig, lambda number, _: stop.update(signal=number))
    if rank == 0:
        how = {"full": "FSDP2", "none": "DDP"}.get(args.sharding) or \
            f"HSDP, replicate {data_ranks // (args.shard_group or data_ranks)} x shard {args.shard_group or data_ranks}"
        how += f", tensor parallel {args.tensor}" if args.tensor > 1 else ""
        how += f", pipeline {args.pipeline} stages ({pipe.kind})" if pipe else ""
        how += f", float8 projections ({sum(type(m).__name__ == 'Float8Linear' for m in model.modules())})" \
            if args.precision == "fp8" else ""
        how += ", compiled blocks" if args.compile else ""
        if (rows := padded_vocab(args.vocab, args.tensor)) != args.vocab:
            how += f", vocabulary {args.vocab:,} padded to {rows:,} (masked)"
        print(f"training {parameters:,} parameters on {world} ranks "
              f"({how}, {args.device}); global batch {args.global_batch} sequences = {data_ranks} data ranks x "
              f"{args.batch} x {micro_steps} micro-steps", flush=True)
    # The layout's compute dtype: FSDP2 casts through its MixedPrecisionPolicy; DDP on GPUs needs autocast (fp32
    # master weights stay in the module). Neuron's compiler casts fp32 matmuls to bf16 itself by default.
    compute = torch.float16 if args.precision == "fp16" else torch.bfloat16
    autocast = torch.autocast("cuda", dtype=compute, enabled=device.type == "cuda" and args.sharding == "none"
                              and args.precision != "fp32")
    since = (time.time(), state.step)
    first = state.step + 1  # this run's first step (a resumed run's too)
    held = evaluation.heldout(args.data, args.seq) if args.eval_every else None
    if rank == 0 and args.eval_every and args.data and held is None:
        print(f"no held-out loss: {args.data} has no held-out slice (prepare.py writes one)", flush=True)
    metrics = evaluation.Metrics(args, rank, parameters, world)
    guard = safety.StepGuard(args.max_nonfinite_steps, loss_scaling=state.scaler.enabled, rank=rank,
                             checkpoints=args.checkpoint_dir)
    faults = safety.injected(args.inject_nonfinite)
    batches = loader.Prefetcher(lambda step, micro: (batch_for(args, data_rank, data_ranks, step, micro, tokens),
                                                     mask_for(args, data_rank, data_ranks, step, micro, tokens)),
                                pin=device.type == "cuda")
    masked = tokens is not None and tokens.masked
    if rank == 0 and masked:
        print("loss mask: the prepared data marks prompt tokens; the loss counts only response tokens, each response "
              "token of a step weighing the same", flush=True)
    model.train()
    timed = Calibration(args, world, parameters) if args.calibrate_output else None

    def fetch(micro: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The micro-step's token window and its loss mask (None without one), prefetching the ones after it."""
        ahead = [(state.step, m) for m in range(micro + 1, micro_steps)] + [(state.step + 1, 0)]
        batch, mask = batches.get((state.step, micro), ahead)
        return batch.to(device, non_blocking=True), None if mask is None else mask.to(device, non_blocking=True)
    while state.step < args.steps:
        state.step += 1
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(state.step, args)
        optimizer.zero_grad(set_to_none=True)
        # This rank's share of the step's loss: the mean of its micro-steps' means, or with loss masks each
        # micro-step's summed loss over the step's divisor (recipe.step_divisor: every response token weighs the same).
        loss_sum = torch.zeros((), device=device)
        if pipe:
            loss_sum += pipe.step(fetch, scale=state.scaler.scale, fault=state.step in faults, masked=masked)
        fetched = [] if pipe else [fetch(micro) for micro in range(micro_steps)]
        per = step_divisor(torch.stack([m[:, 1:].sum() for _, m in fetched]).sum(), world, device) \
            if fetched and masked else None  # counted on the device: one host sync, the divisor's
        weight = 1.0 if per is not None else 1 / micro_steps
        for micro, (batch, mask) in enumerate(fetched):
            loss = micro_step(model, batch, args, autocast, scale=state.scaler.scale * weight,
                              last=micro == micro_steps - 1, fault=state.step in faults, mask=mask, per=per)
            loss_sum += (loss.full_tensor() if hasattr(loss, "full_tensor") else loss).detach().float() * weight
        norm = clip_gradients(model, CLIP_NORM * state.scaler.scale, args.pipeline)  # scaled: 1.0 once unscaled
        if state.scaler.enabled:
            for p in model.parameters():
                if p.grad is not None:
                    p.grad.mul_(1 / state.scaler.scale)
        # One collective for the mean loss and for whether any rank was signalled: all ranks stop together.
        reduced = torch.stack([loss_sum, torch.tensor(float(stop["signal"] is not None), device=device)])
        dist.all_reduce(reduced)
        step_loss, grad_norm = reduced[0].item() / (world // args.pipeline), norm.item()
        # A non-finite norm or loss (an overflow, a bad batch) skips the step: the weights stay the last good
        # step's. fp16's loss scale halves there too (its own skip, as torch.amp.GradScaler).
        good = guard.allows(state.step, grad_norm, step_loss)
        if state.scaler.update(grad_norm if state.scaler.enabled else 0.0) and good:
            optimizer.step()
            if args.precision == "fp8" and args.sharding != "none":  # float8 all-gather: scales in one all-reduce
                scaled = speed.precompute_float8_scales(model)
                if rank == 0 and state.step == first:
                    print(f"float8 weight scales precomputed for {scaled} weights (one all-reduce)", flush=True)
        if guard.diverged:
            checkpoints.wait()  # a write in flight publishes first; then `latest` goes back to a finite one
            dist.barrier()
            raise guard.stop(state.step, pruner)
        if device.type == "xla":
            import torch_xla

            torch_xla.sync()  # run the step's traced graph (XLA executes lazily)
        if rank == 0 and (state.step % args.log_every == 0 or state.step == args.steps):
            now = time.time()  # the rate since the last line: the first steps' warm-up does not blur it
            rate = (state.step - since[1]) * args.global_batch * args.seq / (now - since[0])
            since = (now, state.step)
            peak = (f" peak {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB allocated, "
                    f"{torch.cuda.max_memory_reserved() / 2**30:.1f} reserved") if device.type == "cuda" else ""
            print(f"step {state.step} loss {step_loss:.6f} lr {learning_rate(state.step, args):.3e} "
                  f"grad norm {grad_norm / state.scaler.scale:.4f} {rate:,.0f} tokens/s{peak}"
                  f"{f', {guard.skipped} skipped in this run' if guard.skipped else ''}", flush=True)
            metrics.emit(state.step, Loss=step_loss, TokensPerSecond=rate, SkippedSteps=guard.skipped)
        if held is not None and not timed and (state.step % args.eval_every == 0 or state.step == args.steps):
            eval_loss = evaluation.evaluate(model, args, held, data_rank, data_ranks, device,
                                            pipe.forward_loss if pipe else forward_loss, autocast,
                                            holds_loss=pipe.last if pipe else True)
            if rank == 0:
                print(f"eval step {state.step} held-out loss {eval_loss:.6f}", flush=True)
            metrics.emit(state.step, EvalLoss=eval_loss)
        stopping = reduced[1].item() > 0 or state.step == args.stop_after
        if timed:
            timed.after(state.step)
            if stopping:
                break
            continue
        if stopping or state.step == args.steps:
            checkpoints.wait()  # the background write first: `latest` moves in step order
            save(state, args.checkpoint_dir, pruner, args.keep, step_loss)
        elif state.step % args.checkpoint_every == 0:
            checkpoints.save(state, step_loss)
        if stopping:
            if rank == 0:
                print(f"stopped after step {state.step} (checkpointed); a new start resumes here", flush=True)
            break
    checkpoints.wait()
    batches.close()
    if timed:
        timed.write(rank)
    elif state.step == args.steps and args.export_dir:
        export(model, args, rank)


def micro_step(model: nn.Module, batch: torch.Tensor, args: argparse.Namespace, autocast, *, scale: float,
               last: bool, fault: bool = False, mask: torch.Tensor | None = None,
               per: float | None = None) -> torch.Tensor:
    """One micro-step's forward and backward, its gradients added to the step's; returns its loss. DDP reduces
    once, after the last micro-step (its ranks hold whole gradients anyway), and so do HSDP's replicas. FSDP2
    reduce-scatters every micro-step,
    as torchtitan does (torchtitan/train.py train_step): with sync off it would keep every parameter's unsharded fp32
    gradient on each rank until the last (FSDPModule.set_requires_gradient_sync), 4 B per parameter of the model."""
    sync = model.no_sync() if args.sharding == "none" and not last else contextlib.nullcontext()
    if args.sharding == "hybrid":  # HSDP: each micro-step reduce-scatters in its shard group, the replicas all-reduce
        model.set_requires_all_reduce(last)  # once, after the last (the sharded gradients accumulate between)
    # Split logits (tensor parallel over the vocabulary) take loss_parallel, forward and backward: each rank
    # computes its shard's part of the softmax, never gathering the logits.
    split = loss_parallel() if getattr(model, "vocab_parallel", False) else contextlib.nullcontext()
    with sync, split:
        loss = forward_loss(model, batch, args, autocast, mask, per=per)
        if fault:  # --inject-nonfinite: an overflow, as a diverging step makes one
            loss = loss * float("inf")
        (loss * scale).backward()
    return loss


def forward_loss(model: nn.Module, batch: torch.Tensor, args: argparse.Namespace, autocast,
                 mask: torch.Tensor | None = None, *, per: float | None = None) -> torch.Tensor:
    """The mean next-token cross-entropy of the batch; with a loss mask, of the tokens it keeps (a fine-tune's
    responses, never its prompts: recipe.masked_cross_entropy), over `per` where given."""
    with autocast:
        logits = model(batch[:, :-1])
    return masked_cross_entropy(logits, batch, mask, per=per)


if __name__ == "__main__":
    main()
