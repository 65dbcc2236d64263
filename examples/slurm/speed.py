"""The fast paths of examples/slurm/train.py, beside it, as torchtitan runs them (arXiv 2410.06511): FP8 training of
the blocks' linear layers (torchao's Float8 training, dynamic tensorwise scaling), torch.compile of each block, and
FSDP2's gradient reduction in bf16.

    --precision fp8   the blocks' projections in float8 (torchao.float8), everything else in bf16; on CUDA devices
                      of compute capability 8.9 or more (H100, H200, B200, L4, L40S); CPU runs torchao's emulation
                      (the same scaling and casts, computed in higher precision) so the numerics can be checked.
    --compile         torch.compile of every block in place (parameter names unchanged: checkpoints and the export
                      stay the same); inductor on CUDA, aot_eager elsewhere (CPU checks: the graph is captured).
"""

from __future__ import annotations

import argparse

import torch
from torch import nn

FP8_MIN_CAPABILITY = (8, 9)  # float8 tensor cores: Ada (8.9), Hopper (9.0), Blackwell (10.0)
FP8_DIVISOR = 16  # torch._scaled_mm needs both dimensions of a float8 matmul divisible by 16


def compute_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The dtype the blocks compute in on this device (None: as stored, fp32 - the CPU's)."""
    if device.type == "cpu" or precision == "fp32":
        return None
    return torch.float16 if precision == "fp16" else torch.bfloat16  # fp8: the rest of the model in bf16


def mixed_precision(args: argparse.Namespace, device: torch.device):
    """FSDP2's policy: compute in the layout's dtype, gradients reduced in bf16 when computing in bf16 (half the
    bytes of fp32; FSDP2 accumulates the reduced shards in the fp32 master gradient), in fp32 under fp16 (fp16's
    range would overflow the sum) and `--reduce-dtype fp32` where told."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    compute = compute_dtype(args.precision, device)
    if compute is None:
        return MixedPrecisionPolicy()
    reduce = torch.bfloat16 if compute == torch.bfloat16 and args.reduce_dtype == "bf16" else torch.float32
    return MixedPrecisionPolicy(param_dtype=compute, reduce_dtype=reduce)


def fp8_refusal(device: str) -> str | None:
    """Why --precision fp8 cannot run on this device, or None."""
    if device in ("neuron", "xla"):
        return "fp8 training (torchao float8) runs on CUDA devices; on Trainium train in bf16"
    if device == "cuda" and torch.cuda.is_available() and torch.cuda.get_device_capability() < FP8_MIN_CAPABILITY:
        return (f"this GPU (compute capability {'.'.join(map(str, torch.cuda.get_device_capability()))}) has no "
                "float8 tensor cores (8.9 or more: L4, L40S, H100, H200, B200): train in bf16")
    return None


def float8(model: nn.Module, device: torch.device, *, sharded: bool) -> int:
    """Swap the blocks' projections for torchao's Float8Linear (the output head stays in bf16, as torchtitan keeps
    it); returns how many. Before tensor parallel and FSDP2: FSDP2 then all-gathers their weights in float8."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    def eligible(module: nn.Module, fqn: str) -> bool:
        return (isinstance(module, nn.Linear) and ".layers." in f".{fqn}" and
                module.in_features % FP8_DIVISOR == 0 and module.out_features % FP8_DIVISOR == 0)

    config = Float8LinearConfig(emulate=device.type != "cuda", enable_fsdp_float8_all_gather=sharded)
    convert_to_float8_training(model, module_filter_fn=eligible, config=config)
    from torchao.float8.float8_linear import Float8Linear

    return sum(isinstance(m, Float8Linear) for m in model.modules())


def precompute_float8_scales(model: nn.Module) -> int:
    """After each optimizer step under FSDP2 with float8 all-gather (float8(sharded=True)): the next step's weight
    scales for every Float8Linear in one all-reduce, instead of one amax all-reduce per weight at each all-gather
    (torchao.float8.precompute_float8_dynamic_scale_for_fsdp's docstring; torchtitan docs/float8.md). Returns how
    many weights got a precomputed scale."""
    from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp
    from torchao.float8.fsdp_utils import WeightWithDynamicFloat8CastTensor

    precompute_float8_dynamic_scale_for_fsdp(model)
    local = (getattr(getattr(m, "weight", None), "_local_tensor", None) for m in model.modules())
    return sum(isinstance(t, WeightWithDynamicFloat8CastTensor) and t._precomputed_scale is not None for t in local)


def tensor_parallel_styles(fp8: bool) -> tuple[type, type]:
    """Column and row parallel styles: torchao's float8 ones for Float8Linear layers (they cast before the
    collectives), PyTorch's otherwise."""
    if fp8:
        from torchao.float8.float8_tensor_parallel import Float8ColwiseParallel, Float8RowwiseParallel

        return Float8ColwiseParallel, Float8RowwiseParallel
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    return ColwiseParallel, RowwiseParallel


def compile_blocks(blocks: nn.ModuleList, device: torch.device) -> None:
    """torch.compile of each block in place (nn.Module.compile: the parameter names stay), after tensor parallel and
    before FSDP2, as torchtitan orders them."""
    backend = "inductor" if device.type == "cuda" else "aot_eager"
    for block in blocks:
        block.compile(backend=backend)
