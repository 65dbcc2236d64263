"""Pipeline parallelism for examples/slurm/train.py, beside it (torch.distributed.pipelining): the plan's `pipeline`
degree splits the Llama decoder into that many stages of contiguous blocks, the first holding the embedding, the last
the final norm, the output head and the loss, each stage on its own ranks.

Ranks are numbered stage by stage (pipeline is the outer mesh dimension, across nodes as the planner places it):
a 2-D DeviceMesh (pipeline, data), or (pipeline, data, tensor) with tensor parallel inside a node. The data ranks of a
stage train it as train.py trains a whole model: data parallel (its gradients averaged after the step, as DDP's
are), or FSDP2 with the layout's reduce dtype, over the stage's data mesh. A step's micro-steps (the fixed global
batch's gradient accumulation) are the schedule's micro-batches: 1F1B
(Schedule1F1B, one micro-batch's activations in flight per stage after the warm-up), GPipe where a step has fewer
micro-batches than stages (1F1B needs at least one per stage). The schedule divides the gradients by the micro-batches
as train.py's micro-steps do, so a pipelined run computes what one rank at the whole batch computes.

Each stage keeps the full model's parameter names (its blocks in a ModuleDict keyed by their index in the model):
initialisation (recipe.init_weights seeds by name), checkpoints (every stage saves its own parameters under globally
unique names) and the export (hf_export.py, each stage writing its own layers' shards) are the unsplit model's.
"""

from __future__ import annotations

import argparse
import contextlib

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions
from torch.utils.checkpoint import checkpoint as recompute

from model import Llama, rotary  # beside this script
from recipe import IGNORE_INDEX, step_divisor


def check(args: argparse.Namespace, error) -> None:
    """train.py's parse: a pipeline degree this trainer cannot run is refused with the reason (`error`: argparse's)."""
    if args.pipeline > 1 and (args.device == "xla" or args.sharding == "hybrid" or args.pipeline > args.layers):
        error(f"pipeline {args.pipeline} runs with DDP or FSDP2 (sharding none or full) on cuda, neuron or cpu, at "
              f"least one block per stage: not sharding {args.sharding} on {args.device} with {args.layers} layers")


def spans(layers: int, stages: int) -> list[range]:
    """Each stage's blocks: contiguous, as even as the count allows, the earlier stages taking one more (the last
    stage also computes the output head and the loss)."""
    each, extra = divmod(layers, stages)
    out, start = [], 0
    for s in range(stages):
        count = each + (s < extra)
        out.append(range(start, start + count))
        start += count
    return out



def _targets(batch: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """The next-token targets of `batch`, a loss mask's dropped ones (prompt tokens) as IGNORE_INDEX: the schedule
    hands the last stage's loss function only (output, target), so the mask travels inside the target."""
    targets = batch[:, 1:]
    return targets if mask is None else targets.masked_fill(~mask[:, 1:], IGNORE_INDEX)


def _kept_mean(logits: torch.Tensor, targets: torch.Tensor, per: float | None = None) -> torch.Tensor:
    """recipe.masked_cross_entropy on targets whose dropped ones are IGNORE_INDEX: the mean over the kept, 0 where
    none is kept (every target kept: the plain mean); over `per` where given (the step's divisor)."""
    flat = targets.reshape(-1)
    total = F.cross_entropy(logits.float().flatten(0, 1), flat, ignore_index=IGNORE_INDEX, reduction="sum")
    return total / (per if per is not None else (flat != IGNORE_INDEX).sum().clamp(min=1))

class Stage(nn.Module):
    """One stage of the Llama model under the full model's parameter names (model.embed_tokens, model.layers.N,
    model.norm, lm_head): the first stage takes token ids, the others the previous stage's hidden states; the last
    returns logits, the others hidden states."""

    def __init__(self, model: Llama, index: int, stages: int) -> None:
        super().__init__()
        body, keep = model.model, spans(len(model.blocks), stages)[index]
        self.first, self.last = index == 0, index == stages - 1
        self.model = nn.Module()
        self.model.embed_tokens = body.embed_tokens if self.first else None
        self.model.layers = nn.ModuleDict({str(i): body.layers[i] for i in keep})
        self.model.norm = body.norm if self.last else None
        self.lm_head = model.lm_head if self.last else None
        self.head_dim, self.recompute_blocks, self.vocab = model.head_dim, model.recompute_blocks, model.vocab
        self.rope_theta, self.rope_scaling, self.vocab_mask = model.rope_theta, model.rope_scaling, None
        self.vocab_parallel = False
        self.autocast = contextlib.nullcontext()  # DDP on GPUs: the layout's compute dtype (train.py sets it)

    @property
    def blocks(self) -> list[nn.Module]:
        return list(self.model.layers.values())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with self.autocast:
            if self.first:
                x = self.model.embed_tokens(x)
            cos, sin = rotary(x.shape[1], self.head_dim, x.device, self.rope_theta, self.rope_scaling)
            for block in self.model.layers.values():
                if self.recompute_blocks and self.training:
                    x = recompute(block, x, cos, sin, use_reentrant=False)
                else:
                    x = block(x, cos, sin)
            if not self.last:
                return x
            logits = self.lm_head(self.model.norm(x))
        return logits if self.vocab_mask is None else logits + self.vocab_mask


def _stage_class() -> type:
    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining._backward import stage_backward

    class ShardedStage(PipelineStage):
        """FSDP2 under the schedule as train.py runs it without stages: each micro-batch's backward reduce-scatters
        its gradients into the sharded ones and reshards the weights (what the plan's memory per rank counts: sharded
        fp32 gradients, one block gathered at a time). PipelineStage itself turns both off until the last micro-batch,
        holding the whole stage's unsharded weights and gradients meanwhile (stage.py backward_maybe_with_nosync)."""

        def backward_maybe_with_nosync(self, backward_type, bwd_kwargs: dict, last_backward: bool = False):
            if not isinstance(self.submod, FSDPModule) or backward_type != "full":
                return super().backward_maybe_with_nosync(backward_type, bwd_kwargs, last_backward)
            self.submod.set_requires_gradient_sync(True)
            self.submod.set_reshard_after_backward(True)
            grads = stage_backward(bwd_kwargs["stage_output"], bwd_kwargs["output_grads"], bwd_kwargs["input_values"])
            # The root's own parameters (the first stage's embedding) reduce when backward is finalized, not in a
            # hook: finalized every micro-batch, as an automatic backward would be.
            self.submod.finalize_backward()
            return grads, None

    return ShardedStage


class Pipeline:
    """This rank's stage, its mesh and its schedule. `step` runs one optimizer step's forward and backward over the
    step's micro-batches and returns this rank's share of the step's loss (on the last stage; zero on the others)."""

    def __init__(self, args: argparse.Namespace, device: torch.device) -> None:
        from torch.distributed.device_mesh import init_device_mesh

        world, self.stages = dist.get_world_size(), args.pipeline
        if world % (args.pipeline * args.tensor):
            raise SystemExit(f"pipeline {args.pipeline} x tensor {args.tensor} does not divide the {world} ranks")
        if args.layers < args.pipeline:
            raise SystemExit(f"pipeline {args.pipeline} needs at least one block per stage; the model has "
                             f"{args.layers} (--layers)")
        self.data = world // (args.pipeline * args.tensor)
        dims, names = (args.pipeline, self.data), ("pipeline", "data")
        if args.tensor > 1:
            dims, names = (*dims, args.tensor), (*names, "tensor")
        self.mesh = init_device_mesh(device.type, dims, mesh_dim_names=names)
        self.data_mesh = self.mesh["data"]
        self.tensor_mesh = self.mesh["tensor"] if args.tensor > 1 else None
        self.index = self.mesh["pipeline"].get_local_rank()
        self.first, self.last = self.index == 0, self.index == args.pipeline - 1
        self.per_stage = world // args.pipeline  # ranks of one stage: stage s holds ranks s x per_stage onwards
        self.device, self.args, self.module, self.schedule = device, args, None, None
        self.scale, self.fault, self.per = 1.0, False, None
        # Checkpoints: the optimizer's param groups keyed by parameter name (each stage has its own), not one list
        # that DCP would keep once for every stage (torchtitan saves pipelined runs so).
        self.options = StateDictOptions(flatten_optimizer_state_dict=True)

    def cut(self, model: Llama) -> Stage:
        return Stage(model, self.index, self.stages)

    def wrap(self, module: nn.Module, micro_steps: int) -> int:
        """The stage (FSDP2-wrapped, or plain with its gradients averaged by step()) and the schedule of `micro_steps`
        micro-batches per step; returns the whole model's parameter count. Without FSDP2 the stage computes in the
        layout's dtype under autocast on GPUs, inside the stage (the schedule calls it), as train.py's forward does."""
        from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe

        self.module, self.micro_steps, args = module, micro_steps, self.args
        compute = torch.float16 if args.precision == "fp16" else torch.bfloat16
        self.stage_module.autocast = torch.autocast("cuda", dtype=compute, enabled=self.device.type == "cuda"
                                                    and args.sharding == "none" and args.precision != "fp32")
        stage = _stage_class()(module, self.index, self.stages, self.device, group=self.mesh["pipeline"].get_group())
        kind = Schedule1F1B if micro_steps >= self.stages else ScheduleGPipe
        self.schedule = kind(stage, n_microbatches=micro_steps, loss_fn=self._loss, scale_grads=True)
        self.kind = "1F1B" if kind is Schedule1F1B else "GPipe"
        return self.parameters(module)

    def _loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The schedule's loss function (last stage): the micro-batch's mean next-token cross-entropy, or with loss
        masks (prompt tokens come as IGNORE_INDEX) its kept targets' summed loss over the step's divisor
        (recipe.step_divisor) times the micro-batches, since the schedule divides the gradients by them; scaled by
        fp16's loss scale. The stage's first call (its shapes inferred on placeholder tensors) runs it too: the
        losses are the schedule's `losses`, not kept here."""
        loss = _kept_mean(logits, target) if self.per is None else \
            _kept_mean(logits, target, self.per) * self.micro_steps
        if self.fault:  # --inject-nonfinite: an overflow, as a diverging step makes one
            loss = loss * float("inf")
        return loss * self.scale

    def step(self, fetch, *, scale: float, fault: bool, masked: bool = False) -> torch.Tensor:
        """One step: `fetch(micro)` is micro-step `micro`'s (batch, loss mask or None) of this data rank (read on the
        first and last stages only: the tokens in, the targets out). Returns this rank's share of the step's loss
        (train.py's: the mean of its micro-batches' means, or with loss masks their sums over the step's divisor)."""
        self.scale, self.fault = scale, fault
        batches = [fetch(m) for m in range(self.micro_steps)] if self.first or self.last else None
        inputs = [(b[:, :-1],) for b, _ in batches] if self.first else None
        targets = [_targets(b, mask) for b, mask in batches] if self.last else None
        # Every rank joins the count's all-reduce; the last stage's ranks hold the loss (recipe.step_divisor).
        kept = torch.stack([(t != IGNORE_INDEX).sum() for t in targets]).sum() if self.last else 0
        self.per = step_divisor(kept, self.per_stage, self.device) if masked else None
        losses = []
        with self._split():
            self.schedule.step(arg_mbs=inputs, target_mbs=targets, losses=losses, return_outputs=False)
        if self.args.sharding == "none":
            self._average_gradients()
        total = torch.zeros((), device=self.device)
        for loss in losses:  # the last stage's, one a micro-batch
            total += (loss.full_tensor() if hasattr(loss, "full_tensor") else loss).detach().float() / self.scale
        return total / self.micro_steps

    def _average_gradients(self, bucket_bytes: int = 25 * 2**20) -> None:
        """The stage's gradients averaged over its data ranks, after the step's micro-batches, in buckets of 25 MB
        (DDP's default bucket_cap_mb). DDP itself cannot wrap a stage here: PyTorch 2.15's reducer fails the second
        step at data 2 ("rebuilt parameter indices size is not same as original model parameters size"), and
        static_graph=True runs but changes the gradients (both reproduced on CPU against one process's losses)."""
        if self.data == 1:
            return
        from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

        filling: dict[torch.dtype, tuple[list[torch.Tensor], int]] = {}  # per dtype: the open bucket, its bytes
        full: list[list[torch.Tensor]] = []
        for p in self.stage_module.parameters():
            if p.grad is None:
                continue
            bucket, size = filling.get(p.grad.dtype, ([], 0))
            if bucket and size >= bucket_bytes:
                full.append(bucket)
                bucket, size = [], 0
            filling[p.grad.dtype] = ([*bucket, p.grad], size + p.grad.numel() * p.grad.element_size())
        group = self.data_mesh.get_group()
        for bucket in [*full, *(b for b, _ in filling.values())]:
            flat = _flatten_dense_tensors(bucket)
            dist.all_reduce(flat, group=group)
            flat /= self.data
            for grad, averaged in zip(bucket, _unflatten_dense_tensors(flat, bucket)):
                grad.copy_(averaged)

    def _split(self):
        from torch.distributed.tensor.parallel import loss_parallel

        return loss_parallel() if self.last and self.stage_module.vocab_parallel else contextlib.nullcontext()

    @property
    def stage_module(self) -> Stage:
        return getattr(self.module, "module", self.module)  # a wrapper's module, else the stage itself

    def forward_loss(self, model: nn.Module, batch: torch.Tensor, args: argparse.Namespace, autocast,
                     mask: torch.Tensor | None = None, *, per: float | None = None) -> torch.Tensor:
        """The held-out loss of one batch through the stages (evaluation.evaluate's forward_loss): each stage
        receives the previous stage's hidden states (fp32 on the wire), runs its blocks and sends them on; the last
        returns the loss, the others zero (over the targets `mask` keeps, where prepare.py wrote one)."""
        tokens = batch[:, :-1]
        if self.first:
            x = tokens
        else:
            x = torch.empty((*tokens.shape, args.hidden), device=self.device)
            dist.recv(x, src=dist.get_rank() - self.per_stage)
        out = model(x)  # evaluate's loss_parallel holds split logits' loss (the model's vocab_parallel: the stage's)
        if not self.last:
            dist.send(out.float().contiguous(), dst=dist.get_rank() + self.per_stage)
            return torch.zeros((), device=self.device)
        return _kept_mean(out, _targets(batch, mask), per if mask is not None else None)

    def parameters(self, model: nn.Module) -> int:
        """The whole model's parameter count (each stage holds its own; DTensor numel is the global one)."""
        count = torch.tensor([float(sum(p.numel() for p in model.parameters()))], device=self.device)
        dist.all_reduce(count)
        return round(count.item() / self.per_stage)
