"""The prepare step: tokenize the dataset's raw text into the token shards examples/slurm/train.py reads.

    python prepare.py --input /fsx/datasets/text --tokenizer /fsx/datasets/tokenizer --output /fsx/tokens/NAME

Input: every *.txt file (one document each) and *.jsonl file (one document per line, its "text" field) under
--input. The tokenizer: a directory with the tokenizer's Hugging Face tokenizer.json (and tokenizer_config.json,
whose eos_token ends each document). Output: one shard per input file, its token ids as uint16 (uint32 for
vocabularies over 65,536), and meta.json with the dtype and vocabulary size, which the trainer checks.

Spread over every task of a Slurm job (prepare.sbatch: one per node, SLURM_PROCID of SLURM_NTASKS) and over the
node's cores; a shard is written under a temporary name and renamed when whole, so a rerun after a failure skips
what is done.
"""

from __future__ import annotations

import argparse
import json
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

SUFFIXES = (".txt", ".jsonl")
META = "meta.json"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--input", type=Path, required=True, help="raw text: *.txt and *.jsonl files, searched recursively")
    p.add_argument("--tokenizer", type=Path, required=True, help="a directory with tokenizer.json")
    p.add_argument("--output", type=Path, required=True, help="where the shards and meta.json go")
    p.add_argument("--part", type=int, default=int(os.environ.get("SLURM_PROCID", "0")),
                   help="this task's share of the files (default: SLURM_PROCID)")
    p.add_argument("--parts", type=int, default=int(os.environ.get("SLURM_NTASKS", "1")))
    p.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    return p.parse_args(argv)


def inputs(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix in SUFFIXES)


def shard_name(path: Path, root: Path) -> str:
    return "__".join(path.relative_to(root).with_suffix("").parts) + ".bin"


def meta(tokenizer_dir: Path) -> dict:
    """The vocabulary size (with added tokens), the dtype that holds it, and the id that ends each document."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    vocab = tokenizer.get_vocab_size(with_added_tokens=True)
    config = tokenizer_dir / "tokenizer_config.json"
    eos = json.loads(config.read_text()).get("eos_token") if config.exists() else None
    eos = eos.get("content") if isinstance(eos, dict) else eos
    return {"vocab_size": vocab, "dtype": "uint16" if vocab <= 2**16 else "uint32",
            "eos_id": tokenizer.token_to_id(eos) if eos else None}


def documents(path: Path):
    if path.suffix == ".txt":
        yield path.read_text(encoding="utf-8", errors="replace")
        return
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)["text"]


def tokenize(path: Path, target: Path, tokenizer_dir: Path, info: dict) -> int:
    import numpy as np
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    ids: list[int] = []
    for text in documents(path):
        ids += tokenizer.encode(text).ids
        if info["eos_id"] is not None:
            ids.append(info["eos_id"])
    tmp = target.with_name(target.name + ".tmp")
    np.asarray(ids, dtype=info["dtype"]).tofile(tmp)
    tmp.replace(target)  # whole or absent: a rerun redoes only what is missing
    return len(ids)


def run(args: argparse.Namespace) -> int:
    files = inputs(args.input)
    if not files:
        raise SystemExit(f"prepare: no *.txt or *.jsonl files under {args.input}")
    info = meta(args.tokenizer)
    args.output.mkdir(parents=True, exist_ok=True)
    mine = [f for f in files[args.part::args.parts] if not (args.output / shard_name(f, args.input)).exists()]
    with ProcessPoolExecutor(max_workers=max(1, min(args.workers, len(mine) or 1))) as pool:
        counts = list(pool.map(tokenize, mine, [args.output / shard_name(f, args.input) for f in mine],
                               [args.tokenizer] * len(mine), [info] * len(mine)))
    # Every task writes the same meta.json, whole (rename): the trainer refuses shards without it.
    tmp = args.output / f".{META}.{args.part}"
    tmp.write_text(json.dumps(info, indent=2))
    tmp.replace(args.output / META)
    print(f"prepare: task {args.part} of {args.parts} tokenized {len(mine)} file(s), {sum(counts):,} tokens, into "
          f"{args.output} ({info['dtype']}, vocabulary {info['vocab_size']:,})", flush=True)
    return sum(counts)


if __name__ == "__main__":
    run(parse())
