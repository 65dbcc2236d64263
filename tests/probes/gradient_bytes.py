"""Run under torchrun on CPU ranks (gloo): the gradient bytes each rank holds after every micro-step of one optimizer
step of examples/slurm/train.py's FSDP2 model, driven by the trainer's own build and micro_step. Rank 0 prints JSON:
{"parameters": N, "world": W, "held": [bytes after micro-step 1, ...]}. Argument: the number of micro-steps."""

from __future__ import annotations

import contextlib
import gc
import json
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "slurm"))
import train  # noqa: E402


def held_gradient_bytes(model: torch.nn.Module) -> int:
    """This rank's gradient bytes: the sharded gradients (DTensor local shards) and any unsharded gradient FSDP2
    keeps beside them while gradient sync is off (its FSDPParam's unsharded parameter)."""
    held = 0
    for p in model.parameters():
        if p.grad is not None:
            local = p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad
            held += local.numel() * local.element_size()
    for module in model.modules():
        state = module._get_fsdp_state() if hasattr(module, "_get_fsdp_state") else None
        group = getattr(state, "_fsdp_param_group", None)
        for fsdp_param in getattr(group, "fsdp_params", ()):
            unsharded = getattr(fsdp_param, "_unsharded_param", None)
            if unsharded is not None and unsharded.grad is not None:
                held += unsharded.grad.numel() * unsharded.grad.element_size()
    return held


def main() -> None:
    micro_steps = int(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        sys.argv = [sys.argv[0], "--device", "cpu", "--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads",
                    "2", "--seq", "32", "--vocab", "256", "--sharding", "full", "--checkpoint-dir", tmp]
        args = train.parse()
    device = train.setup("cpu")
    model = train.build(args, device)
    held = []
    for micro in range(micro_steps):
        batch = torch.randint(0, args.vocab, (1, args.seq + 1), generator=torch.Generator().manual_seed(micro))
        train.micro_step(model, batch, args, contextlib.nullcontext(), scale=1 / micro_steps,
                         last=micro == micro_steps - 1)
        held.append(held_gradient_bytes(model))
    if dist.get_rank() == 0:
        print(json.dumps({"parameters": sum(p.numel() for p in model.parameters()), "world": dist.get_world_size(),
                          "held": held}), flush=True)
    # As train.py does: the model and its mesh freed while Python is alive, before the group (gloo aborts at exit
    # otherwise, pytorch/pytorch#179291).
    del model, batch
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
