"""What examples/slurm/train.py does once before its first step, beside it: tokenizing on the job's nodes, the
vocabulary from the data, who prunes the checkpoints, and that the checkpoint folder is this run's."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch
import torch.distributed as dist

from recipe import Tokens, publish  # beside this script


def prepare_here(args: argparse.Namespace) -> None:
    """--text: this node's ranks tokenize the text into --data together (prepare.py: each its share of the files,
    skipping finished shards), then every rank waits for all: no rank decides alone that the data is ready."""
    import prepare  # beside this script

    local, local_world = int(os.environ.get("LOCAL_RANK", "0")), int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    prepare.run(prepare.parse(["--input", str(args.text), "--tokenizer", str(args.tokenizer),
                               "--output", str(args.data), "--part", str(local), "--parts", str(local_world),
                               "--workers", "1"]))
    dist.barrier()


def data_vocabulary(args: argparse.Namespace, tokens: Tokens, rank: int) -> None:
    """The model's vocabulary is the tokenizer's (prepare.py's meta.json) unless --vocab says otherwise."""
    vocab = tokens.info.get("vocab_size")
    if vocab and not args.vocab_given and vocab != args.vocab:
        if rank == 0:
            print(f"vocabulary {vocab:,} from the tokenizer (the plan assumed {args.vocab:,})", flush=True)
        args.vocab = vocab
    if vocab and vocab > args.vocab:
        raise SystemExit(f"--vocab {args.vocab} is smaller than the tokenizer's {vocab}")


def prunes_here(directory: Path, rank: int, device: torch.device) -> bool:
    """Whether this rank moves `latest` and prunes in `directory`: rank 0 alone where every node sees one directory
    (FSx), and each node's local rank 0 as well where the directory is the node's own (a SageMaker job's
    /opt/ml/checkpoints: each node writes its ranks' shards there, on a volume sized for --keep checkpoints). Found
    by looking, not assumed: rank 0 writes a token that the others read back or do not."""
    token = torch.randint(1, 2**62, (1,), dtype=torch.int64).to(device)
    dist.broadcast(token, src=0)
    probe = directory / ".rank0-token"
    if rank == 0:
        publish(probe, str(token.item()))
    dist.barrier()
    shared = probe.exists() and probe.read_text() == str(token.item())
    return rank == 0 or (int(os.environ.get("LOCAL_RANK", "0")) == 0 and not shared)


def same_run(args: argparse.Namespace, tokens: "Tokens | None", rank: int) -> None:
    """The checkpoint folder belongs to one run: a new start with another model, layout or data would resume the
    old run's step (or fail inside DCP), so it is refused, naming what differs."""
    run = {"layers": args.layers, "hidden": args.hidden, "heads": args.heads, "kv_heads": args.kv_heads,
           "intermediate": args.intermediate, "vocab": args.vocab, "seq": args.seq,
           "global_batch": args.global_batch,  # the data order and the schedule follow it
           "init_from": str(args.init_from) if args.init_from else None,
           "data": str(args.data) if args.data else None,
           "tokenizer_sha256": tokens.info.get("tokenizer_sha256") if tokens else None}
    path = args.checkpoint_dir / "run.json"
    if path.exists():
        before = json.loads(path.read_text())
        differs = sorted(k for k in run if before.get(k) != run[k])
        if differs:
            raise SystemExit(f"{args.checkpoint_dir} holds another run's checkpoints (it differs in "
                             f"{', '.join(differs)}): give this run its own --checkpoint-dir or CHECKPOINT_DIR")
    elif rank == 0:
        publish(path, json.dumps(run, indent=2))
