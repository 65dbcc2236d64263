"""What autograd keeps for backward in one block of examples/slurm/train.py, without recompute: bytes per token and
hidden unit (or SwiGLU unit), split by what tensor parallel divides (a measurement to run by hand; the test
tests/test_parallelism.py runs it small and holds workloads/planning/parallelism.py's constants to it).

    python -m tools.activation_bytes [--hidden 1024 --heads 8 --kv-heads 2 --intermediate 3584 --seq 1024]

The block runs in bf16 on the CPU, as FSDP2's MixedPrecisionPolicy runs it on an accelerator (bf16 parameters and
activations; RMSNorm computes in fp32). torch.autograd.graph.saved_tensors_hooks sees every tensor saved for backward;
parameters are left out (the model state counts them) and a storage saved twice counts once. Tensor parallel (recipe.py
tensor_parallel: q/k/v, gate and up split by columns, o and down by rows, no sequence parallel) divides what attention
and the MLP keep inside, not the norms' tensors nor the full-width input the column-split projections keep.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import torch

TRAINER = Path(__file__).resolve().parent.parent / "examples" / "slurm" / "model.py"  # the trainer's blocks
COLUMN_SPLIT = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")  # they keep their full-width input


def _trainer():
    import sys

    sys.path.insert(0, str(TRAINER.parent))  # model.py imports its neighbours as train.py's folder does
    spec = importlib.util.spec_from_file_location("trainer_model", TRAINER)
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    return train


def measure(*, hidden: int, heads: int, kv_heads: int, intermediate: int, seq: int) -> dict[str, float]:
    """Bytes kept for backward by one block for a sequence of `seq` tokens: {"unsplit": per token x hidden (norms, the
    column-split projections' input), "attention": per token x hidden inside attention, "mlp": per token x
    intermediate inside the MLP}."""
    train = _trainer()
    torch.manual_seed(0)
    block = train.Block(hidden, heads, kv_heads, intermediate).to(torch.bfloat16)
    params = {p.untyped_storage().data_ptr() for p in block.parameters()}
    where: list[str] = []  # the module running now, innermost last
    def enter(name: str):
        return lambda module, args: where.append(name)  # None: the arguments stay

    def leave(module, args, output) -> None:  # None: the output stays
        where.pop()

    for name, module in block.named_modules():
        module.register_forward_pre_hook(enter(name))
        module.register_forward_hook(leave)
    kept: dict[int, tuple[str, int]] = {}  # storage -> (where first saved, bytes)

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params and storage.data_ptr() not in kept:
            kept[storage.data_ptr()] = (where[-1] if where else "", storage.nbytes())
        return t

    x = torch.randn(1, seq, hidden, dtype=torch.bfloat16, requires_grad=True)
    cos, sin = train.rotary(seq, hidden // heads, x.device)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        block(x, cos, sin).float().sum().backward()
    parts = {"unsplit": 0, "attention": 0, "mlp": 0}
    for name, nbytes in kept.values():
        if "layernorm" in name or name.endswith(COLUMN_SPLIT) or not name:
            parts["unsplit"] += nbytes
        else:
            parts["attention" if name.startswith("self_attn") else "mlp"] += nbytes
    return {"unsplit": parts["unsplit"] / (seq * hidden), "attention": parts["attention"] / (seq * hidden),
            "mlp": parts["mlp"] / (seq * intermediate)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, default in (("hidden", 1024), ("heads", 8), ("kv-heads", 2), ("intermediate", 3584), ("seq", 1024)):
        p.add_argument(f"--{flag}", type=int, default=default)
    a = p.parse_args()
    print(json.dumps({"torch": torch.__version__, **measure(hidden=a.hidden, heads=a.heads, kv_heads=a.kv_heads,
                                                             intermediate=a.intermediate, seq=a.seq)}, indent=1))


if __name__ == "__main__":
    main()
