"""What examples/slurm/train.py needs to train at scale, beside it: tensor parallel inside a node, one initialisation
whatever the layout, Llama 2's optimiser recipe, gradient clipping over sharded gradients, fp16 loss scaling and the
data order of an epoch; files replaced whole (publish) and the calibration measurement.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn import functional as F

# Llama 2's pretraining recipe (https://arxiv.org/abs/2307.09288, section 2.2 "Training Details").
ADAM_BETAS, ADAM_EPS, WEIGHT_DECAY, CLIP_NORM, MIN_LR_RATIO = (0.9, 0.95), 1e-5, 0.1, 1.0, 0.1
RECIPE_WARMUP = 2000  # its warmup steps; a run shorter than ten times that warms up over its first tenth
# The target id the loss skips (torch.nn.functional.cross_entropy's default ignore_index) where a shard's loss mask
# (prepare.py MASK_SUFFIX: prompt/response documents) says so.
IGNORE_INDEX = -100
# Dynamic loss scaling for fp16 (torch.amp.GradScaler's defaults: init_scale 2**16, growth_interval 2000).
LOSS_SCALE_INIT, LOSS_SCALE_GROWTH_INTERVAL = 2.0 ** 16, 2000


# Megatron-LM pads the vocabulary to a multiple of make_vocab_size_divisible_by (default 128) x the tensor-parallel
# size (megatron/training/tokenizer/tokenizer.py _vocab_size_with_padding; arguments.py
# --make-vocab-size-divisible-by default=128). Here only where tensor parallel does not divide it.
VOCAB_PAD_MULTIPLE = 128
PADDED_ROWS = ("embed_tokens.weight", "lm_head.weight")  # the parameters with a row per vocabulary entry


def padded_vocab(vocab: int, tensor: int) -> int:
    """The embedding and output head's rows under tensor parallel `tensor`: the vocabulary itself where `tensor`
    divides it, else the next multiple of VOCAB_PAD_MULTIPLE x `tensor` (the padding logits are masked out)."""
    if tensor <= 1 or vocab % tensor == 0:
        return vocab
    multiple = VOCAB_PAD_MULTIPLE * tensor
    return -(-vocab // multiple) * multiple


def device_meshes(args: argparse.Namespace, device: torch.device):
    """The mesh FSDP2 shards over and the tensor-parallel mesh, (None, None) where plain FSDP2 over every rank does.
    Ranks are numbered node by node: tensor parallel is the inner dimension (inside a node), then the shard group,
    then the replicas. `sharding: hybrid` (HSDP) gives FSDP2 a 2-D (replicate, shard) mesh: each shard group of
    --shard-group data ranks holds the state sharded, the groups replicate it and all-reduce their gradients."""
    from torch.distributed.device_mesh import init_device_mesh

    if args.tensor == 1 and args.sharding != "hybrid":
        return None, None
    world = dist.get_world_size()
    if world % args.tensor:
        raise SystemExit(f"tensor parallel {args.tensor} does not divide the {world} ranks")
    data = world // args.tensor
    if args.sharding == "hybrid":
        shard = args.shard_group or data
        if data % shard:
            raise SystemExit(f"the shard group of {shard} data ranks (--shard-group) does not divide the {data} data "
                             "ranks")
        mesh = init_device_mesh(device.type, (data // shard, shard, args.tensor),
                                mesh_dim_names=("replicate", "shard", "tensor"))
        data_mesh = mesh["replicate", "shard"]
    else:
        mesh = init_device_mesh(device.type, (data, args.tensor), mesh_dim_names=("data", "tensor"))
        data_mesh = mesh["data"]
    return data_mesh, mesh["tensor"] if args.tensor > 1 else None


def tensor_parallel(model: nn.Module, args: argparse.Namespace, tensor_mesh) -> None:
    """Split every block's projections over the `tensor` ranks of a node (the inner mesh dimension stays inside
    one): q/k/v, gate and up by output columns, o and down by input rows, one all-reduce after attention and one
    after the MLP (Megatron-LM's layout, Shoeybi et al. 2019). The output head is split over the vocabulary and the
    loss computed on the shards (loss_parallel), so no rank holds all the logits."""
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

    from speed import tensor_parallel_styles  # beside this script

    column, row = tensor_parallel_styles(args.precision == "fp8")
    plan = {"self_attn.q_proj": column(), "self_attn.k_proj": column(), "self_attn.v_proj": column(),
            "self_attn.o_proj": row(), "mlp.gate_proj": column(), "mlp.up_proj": column(), "mlp.down_proj": row()}
    for block in model.blocks:
        parallelize_module(block, tensor_mesh, plan)
        block.self_attn.heads //= args.tensor  # each rank's own heads
        block.self_attn.kv_heads //= args.tensor
    if model.lm_head is None:  # a pipeline stage before the last (pipeline.Stage): blocks only
        return
    parallelize_module(model.lm_head, tensor_mesh, ColwiseParallel(output_layouts=Shard(-1), use_local_output=False))
    model.vocab_parallel = True
    rows = model.lm_head.weight.shape[0]
    if rows > args.vocab:  # a padded vocabulary: its padding logits are -inf, so no probability and no gradient
        from torch.distributed.tensor import distribute_tensor

        mask = torch.zeros(rows, device=tensor_mesh.device_type)
        mask[args.vocab:] = float("-inf")
        model.vocab_mask = distribute_tensor(mask, tensor_mesh, [Shard(0)])  # split as the logits are


def init_weights(model: nn.Module, device: torch.device) -> None:
    """Llama's initialisation (transformers LlamaConfig initializer_range 0.02): normal(0, 0.02) for every linear
    and embedding weight, ones for the norms. Each parameter is drawn whole from its own seed (its name) and each rank
    keeps its shard of it: the same model whatever the layout (DDP, FSDP2, tensor parallel), one parameter in memory
    at a time."""
    import zlib

    from torch.distributed.tensor import DTensor, distribute_tensor

    on = device if device.type in ("cuda", "cpu") else torch.device("cpu")  # where a generator is sure to exist
    vocab = getattr(model, "vocab", None)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.dim() == 1:
                full = torch.ones(param.shape, device=on)
            else:
                generator = torch.Generator(device=on).manual_seed(zlib.crc32(name.encode()))
                # A padded vocabulary's rows beyond the tokenizer's are zero: the real rows are drawn as unpadded.
                rows = vocab if vocab and param.shape[0] > vocab and name.endswith(PADDED_ROWS) else param.shape[0]
                full = torch.zeros(param.shape, device=on)
                full[:rows].normal_(0.0, 0.02, generator=generator)
            if isinstance(param, DTensor):
                local = distribute_tensor(full, param.device_mesh, param.placements).to_local()
                param.to_local().copy_(local)
            else:
                param.copy_(full)


def clip_gradients(model: nn.Module, max_norm: float, stages: int = 1) -> torch.Tensor:
    """Scale the gradients so their global L2 norm is at most `max_norm` and return the norm before clipping
    (inf or nan where a gradient overflowed). DTensor gradients (FSDP2, tensor parallel) live on meshes of different
    shapes, so each rank sums its shards' squares, divided by how many ranks hold the same shard, and one all-reduce
    adds them up; DDP's gradients are whole and equal on every rank. Pipeline `stages`: each stage's world / stages
    ranks hold its own parameters only (so that many hold a DDP gradient), and the all-reduce adds the stages up."""
    from torch.distributed.tensor import DTensor

    grads = [p.grad for p in model.parameters() if p.grad is not None]
    sharded = bool(grads) and isinstance(grads[0], DTensor)
    device = (grads[0].to_local() if sharded else grads[0]).device if grads else torch.device("cpu")
    total = torch.zeros((), device=device, dtype=torch.float32)
    # The ranks of one stage (every rank without pipeline stages); one process without a group (DDP's whole gradients)
    copies = dist.get_world_size() // stages if sharded or stages > 1 else 1
    for g in grads:
        if isinstance(g, DTensor):
            # Shard or FSDP's _StridedShard over a tensor-parallel shard: anything not replicated splits the tensor.
            shards = math.prod(g.device_mesh.size(i) for i, pl in enumerate(g.placements) if not pl.is_replicate())
            total += g.to_local().float().pow(2).sum() * shards / copies
        else:
            total += g.float().pow(2).sum() / (copies if stages > 1 else 1)
    if sharded or stages > 1:
        dist.all_reduce(total)
    norm = total.sqrt()
    scale = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    for g in grads:
        (g.to_local() if isinstance(g, DTensor) else g).mul_(scale)
    return norm


class LossScale:
    """fp16's dynamic loss scaling (as torch.amp.GradScaler): the loss is multiplied by the scale before backward
    so small gradients survive fp16; a step whose gradients overflowed is skipped and the scale halved, and after
    LOSS_SCALE_GROWTH_INTERVAL good steps it doubles. Off (scale 1, never skips) for bf16 and fp32."""

    def __init__(self, enabled: bool) -> None:
        self.enabled, self.scale, self.good = enabled, LOSS_SCALE_INIT if enabled else 1.0, 0

    def update(self, grad_norm: float) -> bool:
        """Whether the optimizer may step; adjusts the scale."""
        if not self.enabled:
            return True
        if not math.isfinite(grad_norm):
            self.scale, self.good = self.scale / 2, 0
            return False
        self.good += 1
        if self.good % LOSS_SCALE_GROWTH_INTERVAL == 0:
            self.scale *= 2
        return True

    def state_dict(self) -> dict:
        return {"scale": self.scale, "good": self.good}

    def load_state_dict(self, state: dict) -> None:
        self.scale, self.good = float(state["scale"]), int(state["good"])


def learning_rate(step: int, args: argparse.Namespace) -> float:
    """Linear warmup to the peak, then cosine decay to MIN_LR_RATIO of it at the last step (Llama 2's schedule). A
    function of the step alone: a resumed run continues the same curve."""
    if args.warmup and step <= args.warmup:
        return args.lr * step / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.lr * (MIN_LR_RATIO + (1 - MIN_LR_RATIO) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def optimizer_for(model: nn.Module, args: argparse.Namespace, device: torch.device) -> torch.optim.Optimizer:
    """AdamW as Llama 2 trained: weight decay on the matrices and embeddings, none on the norms' gains (the
    usual split, as Megatron-LM and nanoGPT make it). On GPUs the fused kernel: no all-parameter temporaries at the
    step (foreach AdamW: 4 B/param more)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    keep = [p for p in model.parameters() if p.dim() < 2]
    weight_decay = getattr(args, "weight_decay", WEIGHT_DECAY)  # a fine-tune's recipe (finetune.py) sets its own
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay}, {"params": keep, "weight_decay": 0.0}],
                             lr=args.lr, betas=ADAM_BETAS, eps=ADAM_EPS,
                             fused=True if device.type == "cuda" else None)


def permuted(index: int, size: int, key: str) -> int:
    """A pseudo-random permutation of range(size) keyed by `key`, evaluated at `index` without building it (a
    four-round Feistel network over the next even power of two, walking the cycle until it lands inside): the order
    of an epoch of half a billion windows costs no memory, and every window comes exactly once."""
    bits = max(2, (size - 1).bit_length())
    bits += bits % 2
    half, mask = bits // 2, (1 << (bits // 2)) - 1
    x = index
    while True:
        left, right = x >> half, x & mask
        for round_ in range(4):
            digest = hashlib.blake2b(f"{key}/{round_}/{right}".encode(), digest_size=8).digest()
            left, right = right, left ^ (int.from_bytes(digest, "little") & mask)
        x = (left << half) | right
        if x < size:
            return x


class Tokens:
    """The prepare step's shards as one stream of tokens (documents end with EOS, so a window may span two files):
    every shard is read lazily, and a window is found by its start's shard (binary search). A shard's loss mask
    (prepare.py's X.mask beside X.bin: 1 where a token is trained on, 0 on a prompt's tokens) is read the same way;
    a shard without one trains on every token."""

    def __init__(self, path: Path, seq: int, info: dict | None = None) -> None:
        """`info`: the parent's meta.json, for the held-out slice (its shards under the prepared directory)."""
        import numpy as np

        from prepare import MASK_SUFFIX  # beside this file: the loss mask's name beside a shard

        meta = path / "meta.json" if path.is_dir() and info is None else None
        if meta is not None and not meta.exists():
            raise SystemExit(f"{path} has no meta.json: run the prepare step (prepare.py) into it first")
        self.info = info or (json.loads(meta.read_text()) if meta else {"dtype": "uint16", "vocab_size": None,
                                                                          "parts": 0})
        parts = self.info.get("parts", 0) if info is None else 0
        undone = [p for p in range(parts) if not (path / f"done-{p}-of-{parts}").exists()]
        if undone:
            raise SystemExit(f"{path}: the prepare step's task(s) {undone} of {parts} did not finish; run it again")
        files = sorted(f for f in path.glob("*.bin") if f.stat().st_size) if path.is_dir() else [path]
        self.shards = [np.memmap(f, dtype=self.info["dtype"], mode="r") for f in files]  # datasets outgrow memory
        masks = [f.with_suffix(MASK_SUFFIX) for f in files]
        self.masks = [np.memmap(m, dtype="uint8", mode="r") if m.exists() else None for m in masks]
        self.masked = any(m is not None for m in self.masks)
        for f, tokens, mask in zip(files, self.shards, self.masks):
            if mask is not None and len(mask) != len(tokens):
                raise SystemExit(f"{f}: its loss mask holds {len(mask)} entries for {len(tokens)} tokens; prepare "
                                 "it again")
        self.ends = np.cumsum([len(t) for t in self.shards])
        total = int(self.ends[-1]) if len(self.ends) else 0
        if total < seq + 1:
            raise SystemExit(f"{path}: {total} tokens, fewer than one {seq + 1}-token window")
        # An epoch: every window of seq + 1 tokens starting at a multiple of seq (neighbours share one token, the
        # last target of one being the first input of the next), each once.
        self.windows = (total - 1) // seq

    def _span(self, arrays: list, start: int, seq: int, dtype: str):
        import numpy as np

        pieces, shard = [], int(np.searchsorted(self.ends, start, side="right"))
        offset = start - (int(self.ends[shard - 1]) if shard else 0)
        while sum(len(p) for p in pieces) < seq + 1:
            need = seq + 1 - sum(len(p) for p in pieces)
            part = arrays[shard]
            length = min(need, len(self.shards[shard]) - offset)
            pieces.append(np.ones(length, dtype) if part is None else part[offset:offset + length].astype(dtype))
            shard, offset = shard + 1, 0
        return torch.from_numpy(np.concatenate(pieces))

    def window(self, start: int, seq: int) -> torch.Tensor:
        return self._span(self.shards, start, seq, "int64")

    def mask_window(self, start: int, seq: int) -> torch.Tensor:
        """The window's loss mask (bool, seq + 1): True where the token is a target the loss counts."""
        return self._span(self.masks, start, seq, "bool")


def _start(index: int, args: argparse.Namespace, tokens: "Tokens") -> int:
    """The `index`-th sequence's first token: epoch index // windows, its position in that epoch's order."""
    epoch, position = divmod(index, tokens.windows)
    return permuted(position, tokens.windows, f"epoch-{epoch}") * args.seq


def sample(index: int, args: argparse.Namespace, tokens: "Tokens | None") -> torch.Tensor:
    """The `index`-th sequence of the run (seq + 1 tokens). Synthetic tokens (no --data) are drawn from the index's
    own seed."""
    if tokens is None:
        generator = torch.Generator().manual_seed(1_000_003 + index)
        return torch.randint(0, args.vocab, (args.seq + 1,), generator=generator)
    return tokens.window(_start(index, args, tokens), args.seq)


def _first(args: argparse.Namespace, data_rank: int, data_ranks: int, step: int, micro: int) -> int:
    return (step - 1) * args.global_batch + (micro * data_ranks + data_rank) * args.batch


def batch_for(args: argparse.Namespace, data_rank: int, data_ranks: int, step: int, micro: int,
              tokens: "Tokens | None") -> torch.Tensor:
    """This data rank's sequences for one micro-step: the step's global batch is args.global_batch consecutive
    samples, micro-step m of rank r takes its --batch of them. The same samples make up a step whatever the ranks,
    micro-steps and tensor degree (tensor-parallel ranks of one data rank take the same ones)."""
    first = _first(args, data_rank, data_ranks, step, micro)
    return torch.stack([sample(first + k, args, tokens) for k in range(args.batch)])


def mask_for(args: argparse.Namespace, data_rank: int, data_ranks: int, step: int, micro: int,
             tokens: "Tokens | None") -> torch.Tensor | None:
    """The loss mask of batch_for's sequences (bool, True where the loss counts the token), None where the data has
    no masks (every token counts)."""
    if tokens is None or not tokens.masked:
        return None
    first = _first(args, data_rank, data_ranks, step, micro)
    return torch.stack([tokens.mask_window(_start(first + k, args, tokens), args.seq) for k in range(args.batch)])


def masked_cross_entropy(logits: torch.Tensor, batch: torch.Tensor, mask: torch.Tensor | None, *,
                         per: float | None = None) -> torch.Tensor:
    """Next-token cross-entropy of `logits` (batch x seq x vocab) against batch[:, 1:]: the mean over every target,
    or with `mask` over those the mask keeps (a prompt's tokens give no loss and no gradient; a micro-batch with
    none kept gives 0, not 0/0). `per`: the divisor of the kept targets' summed loss instead of their count
    (step_divisor: a training step's share, so that every response token of the step weighs the same)."""
    targets = batch[:, 1:].reshape(-1)
    if mask is None:
        return F.cross_entropy(logits.float().flatten(0, 1), targets)
    keep = mask[:, 1:].reshape(-1)
    total = F.cross_entropy(logits.float().flatten(0, 1), targets.masked_fill(~keep, IGNORE_INDEX),
                            ignore_index=IGNORE_INDEX, reduction="sum")
    return total / (per if per is not None else keep.sum().clamp(min=1))


def step_divisor(kept: torch.Tensor | int, ranks: int, device: torch.device) -> float:
    """What each rank divides its summed loss of kept targets by, so that one optimizer step's loss is the mean over
    all the step's kept targets (every micro-batch, every data rank): `kept` is this rank's count for the step (0 on
    a rank that holds no loss), `ranks` how many ranks hold one. A mean of micro-batch means would weigh a token of a
    short response more than one of a long one and depend on how the global batch is split into micro-steps and
    ranks (Hugging Face, "Fixing Gradient Accumulation", https://huggingface.co/blog/gradient_accumulation, October
    2024: their Trainer now sums the loss and divides by the step's count of targets, num_items_in_batch, gathered
    across devices with average_tokens_across_devices). Gradients are averaged over data ranks, so a rank's share is the count
    over the data ranks; each data shard's count arrives once per tensor-parallel rank, and `ranks` counts those too:
    the all-reduced total over `ranks` is the share. A step with nothing kept divides by 1 (its loss is 0)."""
    # int32: exact to 2**31 tokens a step, and a sum every collective backend reduces (XLA's included)
    total = torch.as_tensor(kept, device=device, dtype=torch.int32).reshape(())
    dist.all_reduce(total)
    return max(total.item(), 1.0) / ranks


def publish(path: Path, text: str) -> None:
    """Replace `path` with `text` whole or not at all: a job killed mid-write (a node lost, a time limit) leaves the
    previous file, never half of one. The bytes reach the disk before the rename makes them the file."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


class Calibration:
    """The rate after a warm-up fifth of the steps (compilation, allocator growth), as tokens/s and MFU (6N FLOPs per
    token over the ranks' peak, the plan's utilisation definition), for `python -m workloads plan --calibrate`."""

    def __init__(self, args: argparse.Namespace, world: int, parameters: int) -> None:
        self.args, self.world, self.parameters = args, world, parameters  # the whole model's, however spread
        self.warmup = max(1, args.steps // 5)
        self.start = self.last = (time.time(), 0)

    def after(self, step: int) -> None:
        self.last = (time.time(), step)
        if step == self.warmup:
            self.start = self.last

    def write(self, rank: int) -> None:
        seconds, steps = self.last[0] - self.start[0], self.last[1] - self.start[1]
        tokens_s = steps * self.args.global_batch * self.args.seq / seconds  # a step: the global batch's sequences
        peak = self.args.peak_tflops
        result = {"tokens_per_s": tokens_s, "mfu": 6 * self.parameters * tokens_s / (peak * 1e12 * self.world)
                  if peak else None, "parameters": self.parameters, "ranks": self.world,
                  "nodes": int(os.environ.get("SLURM_JOB_NUM_NODES") or max(1, self.world // int(
                      os.environ.get("LOCAL_WORLD_SIZE", self.world)))),
                  "steps_timed": steps, "seconds": seconds, "device": self.args.device,
                  "sequence": self.args.seq, "batch_per_rank": self.args.batch, "peak_tflops_per_rank": peak,
                  # what ran, so `plan --calibrate` can say when the plan trains otherwise
                  "precision": self.args.precision, "compile": bool(self.args.compile),
                  "device_name": torch.cuda.get_device_name() if self.args.device == "cuda" else self.args.device}
        if rank == 0:
            self.args.calibrate_output.parent.mkdir(parents=True, exist_ok=True)
            publish(self.args.calibrate_output, json.dumps(result, indent=1) + "\n")
            print(f"calibration: {tokens_s:,.0f} tokens/s" + (f", MFU {result['mfu']:.1%}" if peak else "") +
                  f" -> {self.args.calibrate_output}", flush=True)
