"""Train the planned decoder with PyTorch's own data parallelism, checkpoint to /fsx and resume.

    torchrun ... train.py --device cuda|neuron|cpu --layout /opt/ml-estate/layout.json [--steps N]

The layout file is the plan's `training.parallelism` (python -m workloads plan NAME --json), which the TrainStack
writes on every node: the model's shape and how it is spread. `sharding: none` trains with DistributedDataParallel,
`sharding: full` with FSDP2 (`fully_shard` on every block, then the root: ZeRO-3). Tensor and pipeline degrees
above 1 are refused here, with the reason: this example covers the data-parallel layouts.

Checkpoints: torch.distributed.checkpoint (DCP) writes each rank's shards to CHECKPOINT_DIR/step-NNNNNNNN every
--checkpoint-every steps and when Slurm signals the job (SIGTERM or SIGUSR1 before a requeue or preemption); rank 0
then points CHECKPOINT_DIR/latest at it. A start finds `latest` and continues from the step after it, drawing the
same batches as an uninterrupted run would (each batch is seeded by rank and step). Without --data it trains on
synthetic tokens, so a fresh cluster can be checked end to end.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn.functional as F
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.stateful import Stateful
from torch.utils.checkpoint import checkpoint as recompute

BACKENDS = {"cuda": "nccl", "neuron": "neuron", "cpu": "gloo"}


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=tuple(BACKENDS), default="cuda")
    p.add_argument("--layout", type=Path, help="the plan's training.parallelism as JSON")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--batch", type=int, default=1, help="sequences per rank per step")
    p.add_argument("--lr", type=float, default=3e-4)
    # The layout's model shape, or these (small models for checks and tests).
    p.add_argument("--layers", type=int)
    p.add_argument("--hidden", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--seq", type=int)
    p.add_argument("--vocab", type=int)
    p.add_argument("--sharding", choices=("none", "full"))
    p.add_argument("--data", type=Path, help="uint16 token file; synthetic tokens when absent")
    p.add_argument("--checkpoint-dir", type=Path,
                   default=Path(os.environ.get("CHECKPOINT_DIR", "/fsx/checkpoints/" +
                                               os.environ.get("SLURM_JOB_NAME", "train"))))
    p.add_argument("--checkpoint-every", type=int, default=100)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--stop-after", type=int, help="leave after this step, as an interrupted job would")
    args = p.parse_args()
    # On a cluster the layout file; on a SageMaker training job `python -m workloads submit` passes it in LAYOUT_JSON.
    layout = json.loads(args.layout.read_text() if args.layout else os.environ.get("LAYOUT_JSON", "{}"))
    for field, default in (("layers", 2), ("hidden", 256), ("heads", 4), ("seq", 256), ("vocab", 32000),
                           ("sharding", "none")):
        if getattr(args, field) is None:
            setattr(args, field, layout.get("sequence" if field == "seq" else field, default))
    if layout.get("tensor", 1) != 1 or layout.get("pipeline", 1) != 1:
        p.error(f"the layout asks for tensor {layout.get('tensor')} x pipeline {layout.get('pipeline')}: this example "
                "trains data-parallel layouts (DDP, FSDP2); use a tensor/pipeline-parallel trainer for this plan")
    return args


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv, self.out = nn.Linear(hidden, 3 * hidden, bias=False), nn.Linear(hidden, hidden, bias=False)
        self.up, self.down = nn.Linear(hidden, 4 * hidden, bias=False), nn.Linear(4 * hidden, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, h // self.heads).unbind(2)
        attn = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.out(attn.transpose(1, 2).reshape(b, s, h))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class Decoder(nn.Module):
    def __init__(self, *, vocab: int, layers: int, hidden: int, heads: int, recompute_blocks: bool) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(hidden), nn.Linear(hidden, vocab, bias=False)
        self.recompute_blocks = recompute_blocks

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            # Activation checkpointing: keep each block's input, recompute the rest in backward (the plan's memory).
            x = recompute(block, x, use_reentrant=False) if self.recompute_blocks and self.training else block(x)
        return self.head(self.norm(x))


class Training(Stateful):
    """What a checkpoint holds: model and optimizer (sharded as they are) and the step."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.model, self.optimizer, self.step = model, optimizer, 0

    def state_dict(self) -> dict:
        model, optim = get_state_dict(self.model, self.optimizer)
        return {"model": model, "optim": optim, "step": self.step}

    def load_state_dict(self, state: dict) -> None:
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
        self.step = state["step"]


def setup(kind: str) -> torch.device:
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if kind == "neuron":
        import torch_neuronx  # noqa: F401  registers the neuron device and process group backend
    dist.init_process_group(BACKENDS[kind])
    if kind == "cpu":
        return torch.device("cpu")
    device = torch.device(kind, local_rank)
    torch.accelerator.set_device_index(local_rank)  # cuda or neuron alike (TorchNeuron supports torch.accelerator)
    return device


def build(args: argparse.Namespace, device: torch.device) -> nn.Module:
    shape = dict(vocab=args.vocab, layers=args.layers, hidden=args.hidden, heads=args.heads, recompute_blocks=True)
    torch.manual_seed(0)  # every rank starts from the same weights
    if args.sharding == "none":
        from torch.nn.parallel import DistributedDataParallel

        model = Decoder(**shape).to(device)
        # Gradients live in DDP's communication buckets instead of beside them: one copy fewer (4 B/param), which
        # the plan's memory per rank counts on (measured on an H100: 75.6 GiB without it, for the 3.4B model).
        return DistributedDataParallel(model, device_ids=[device.index] if device.type != "cpu" else None,
                                       gradient_as_bucket_view=True)
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    # Built without memory (meta device) and sharded before any weight exists: a model the plan shards because
    # it does not fit one accelerator does not fit one host either. Each rank then fills in its own shards.
    with torch.device("meta"):
        model = Decoder(**shape)
    # bf16 compute, fp32 gradient reduction and master weights (the plan's 16 B/param); CPU stays fp32.
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if device.type != "cpu" \
        else MixedPrecisionPolicy()
    for block in model.blocks:
        fully_shard(block, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    model.to_empty(device=device)
    with torch.no_grad():
        for module in model.modules():
            if hasattr(module, "reset_parameters") and module is not model:
                module.reset_parameters()  # DTensor's random ops keep the shards consistent across ranks
    return model


def batch_for(args: argparse.Namespace, rank: int, step: int, tokens) -> torch.Tensor:
    generator = torch.Generator().manual_seed(1_000_003 * step + rank)  # the same batch after a resume
    if tokens is None:
        return torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=generator)
    starts = torch.randint(0, len(tokens) - args.seq - 1, (args.batch,), generator=generator).tolist()
    return torch.stack([torch.from_numpy(tokens[s:s + args.seq + 1].astype("int64")) for s in starts])


def latest(directory: Path) -> Path | None:
    marker = directory / "latest"
    return directory / marker.read_text().strip() if marker.exists() else None


def save(state: Training, directory: Path, rank: int) -> None:
    path = directory / f"step-{state.step:08d}"
    dcp.save({"training": state}, checkpoint_id=path)
    if rank == 0:  # `latest` moves only once every rank's shards are written
        tmp = directory / "latest.tmp"
        tmp.write_text(path.name + "\n")
        tmp.replace(directory / "latest")
    dist.barrier()


def main() -> None:
    args = parse()
    device = setup(args.device)
    rank, world = dist.get_rank(), dist.get_world_size()
    model = build(args, device)
    # On GPUs the fused kernel: faster, and no all-parameter temporaries at the step (foreach AdamW holds 4 B/param
    # more at its peak: measured 20 B/param in all on an H100, where the plan counts 16 + 4).
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, fused=True if device.type == "cuda" else None)
    state = Training(model, optimizer)
    args.checkpoint_dir.mkdir(parents=True, exist_ok=True)
    resume = latest(args.checkpoint_dir)
    if resume is not None:
        dcp.load({"training": state}, checkpoint_id=resume)
        if rank == 0:
            print(f"resumed from {resume} at step {state.step}", flush=True)
    stop = {"signal": None}
    for sig in (signal.SIGTERM, signal.SIGUSR1):  # Slurm's warning before a requeue, preemption or time limit
        signal.signal(sig, lambda number, _: stop.update(signal=number))
    tokens = None
    if args.data:
        import numpy as np

        tokens = np.memmap(args.data, dtype=np.uint16, mode="r")  # read lazily: datasets outgrow memory
    if rank == 0:
        print(f"training {sum(p.numel() for p in model.parameters()):,} parameters on {world} ranks "  # global numel
              f"({'FSDP2' if args.sharding == 'full' else 'DDP'}, {args.device})",
              flush=True)
    # bf16 compute as the plan assumes: FSDP2 casts through its MixedPrecisionPolicy; DDP on GPUs needs autocast
    # (fp32 master weights stay in the module). Neuron's compiler casts fp32 matmuls to bf16 itself by default.
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda" and args.sharding == "none")
    since = (time.time(), state.step)
    model.train()
    while state.step < args.steps:
        state.step += 1
        batch = batch_for(args, rank, state.step, tokens).to(device)
        with autocast:
            logits = model(batch[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, args.vocab), batch[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        # One collective for the mean loss and for whether any rank was signalled: all ranks stop together.
        reduced = torch.stack([loss.detach().float(), torch.tensor(float(stop["signal"] is not None),
                                                                   device=device)])
        dist.all_reduce(reduced)
        if rank == 0 and (state.step % args.log_every == 0 or state.step == args.steps):
            now = time.time()  # the rate since the last line: the first steps' warm-up does not blur it
            rate = (state.step - since[1]) * args.batch * args.seq * world / (now - since[0])
            since = (now, state.step)
            peak = (f" peak {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB allocated, "
                    f"{torch.cuda.max_memory_reserved() / 2**30:.1f} reserved") if device.type == "cuda" else ""
            print(f"step {state.step} loss {reduced[0].item() / world:.6f} "
                  f"{rate:,.0f} tokens/s{peak}", flush=True)
        stopping = reduced[1].item() > 0 or state.step == args.stop_after
        if state.step % args.checkpoint_every == 0 or state.step == args.steps or stopping:
            save(state, args.checkpoint_dir, rank)
        if stopping:
            if rank == 0:
                print(f"stopped after step {state.step} (checkpointed); a new start resumes here", flush=True)
            break
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
