"""Run under torchrun on four CPU ranks (gloo): pipeline 2 x data 2, FSDP2 on each stage, one optimizer step of four
micro-batches through examples/slurm/pipeline.py's schedule. After every micro-batch's backward each rank records the
gradient bytes it holds (gradient_bytes.held_gradient_bytes: sharded gradients and any unsharded one FSDP2 keeps).
Rank 0 prints JSON: {"ranks": [{"stage_parameters": N, "data": D, "held": [bytes, ...]}, ...]}."""

from __future__ import annotations

import gc
import json
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "slurm"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import pipeline  # noqa: E402
import train  # noqa: E402
from gradient_bytes import held_gradient_bytes  # noqa: E402

MICRO_BATCHES = 4


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sys.argv = [sys.argv[0], "--device", "cpu", "--layers", "4", "--hidden", "64", "--heads", "4", "--kv-heads",
                    "2", "--seq", "32", "--vocab", "256", "--sharding", "full", "--pipeline", "2", "--tensor", "1",
                    "--checkpoint-dir", tmp]
        args = train.parse()
    device = train.setup("cpu")
    pipe = pipeline.Pipeline(args, device)
    model = train.build(args, device, pipe)
    pipe.wrap(model, MICRO_BATCHES)
    stage, held = pipe.schedule._stage, []
    backward = stage.backward_one_chunk

    def recorded(*a, **kw):
        out = backward(*a, **kw)
        held.append(held_gradient_bytes(model))
        return out

    stage.backward_one_chunk = recorded
    def fetch(m: int) -> tuple[torch.Tensor, None]:  # (batch, no loss mask), as train.py's fetch
        return torch.randint(0, args.vocab, (1, args.seq + 1), generator=torch.Generator().manual_seed(m)), None
    pipe.step(fetch, scale=1.0, fault=False)
    mine = {"stage_parameters": sum(p.numel() for p in model.parameters()), "data": pipe.data, "held": held}
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    if dist.get_rank() == 0:
        print(json.dumps({"ranks": everyone}), flush=True)
    del model, pipe, stage
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
