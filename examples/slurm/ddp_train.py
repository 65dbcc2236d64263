"""A small data-parallel training run that exercises the whole path: torchrun on every node,
one process per GPU or NeuronCore, gradients all-reduced over EFA, checkpoints on /fsx.

    torchrun ... ddp_train.py --device cuda|xla|cpu [--steps 200] [--data /fsx/datasets/tokens.bin]

Without --data it trains on synthetic tokens, so a fresh cluster can be checked end to end.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--device", choices=("cuda", "xla", "cpu"), default="cuda")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--data", type=Path, help="uint16 token file; synthetic tokens when absent")
    p.add_argument("--checkpoint-dir", type=Path, default=Path(os.environ.get("CHECKPOINT_DIR", "/fsx/checkpoints")))
    return p.parse_args()


def setup(kind: str) -> torch.device:
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if kind == "xla":
        import torch_xla.core.xla_model as xm
        import torch_xla.distributed.xla_backend  # noqa: F401  registers the "xla" backend

        dist.init_process_group("xla", init_method="xla://")
        return xm.xla_device()
    if kind == "cuda":
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl")
        return torch.device("cuda", local_rank)
    dist.init_process_group("gloo")
    return torch.device("cpu")


def batches(args: argparse.Namespace, rank: int):
    generator = torch.Generator().manual_seed(1234 + rank)  # each rank draws its own samples
    tokens = None
    if args.data:
        import numpy as np

        tokens = np.memmap(args.data, dtype=np.uint16, mode="r")  # read lazily: datasets outgrow memory
    while True:
        if tokens is None:
            yield torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=generator)
        else:
            starts = torch.randint(0, len(tokens) - args.seq - 1, (args.batch,), generator=generator).tolist()
            yield torch.stack([torch.from_numpy(tokens[s:s + args.seq + 1].astype("int64")) for s in starts])


def main() -> None:
    args = parse()
    device = setup(args.device)
    rank, world = dist.get_rank(), dist.get_world_size()
    layer = nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048, batch_first=True)
    model = nn.Sequential(nn.Embedding(args.vocab, 512), nn.TransformerEncoder(layer, num_layers=4),
                          nn.Linear(512, args.vocab)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    loss_fn = nn.CrossEntropyLoss()
    data = batches(args, rank)
    start = time.time()
    for step in range(1, args.steps + 1):
        batch = next(data).to(device)
        logits = model(batch[:, :-1])
        loss = loss_fn(logits.reshape(-1, args.vocab), batch[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        for p in model.parameters():  # data parallel: average gradients across every rank
            dist.all_reduce(p.grad)
            p.grad /= world
        optimizer.step()
        if args.device == "xla":
            import torch_xla.core.xla_model as xm

            xm.mark_step()
        if step % 50 == 0 and rank == 0:
            tokens = step * args.batch * args.seq * world
            print(f"step {step} loss {loss.item():.3f} {tokens / (time.time() - start):,.0f} tokens/s "
                  f"on {world} ranks", flush=True)
    if rank == 0:
        args.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        state = {k: v.cpu() for k, v in model.state_dict().items()}
        torch.save(state, args.checkpoint_dir / f"ddp-{os.environ.get('SLURM_JOB_ID', 'local')}.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
