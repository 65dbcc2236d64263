"""The prepare step: tokenize the dataset's raw text into the token shards examples/slurm/train.py reads.

    python prepare.py --input /fsx/datasets/text --tokenizer /fsx/datasets/tokenizer --output /fsx/tokens/NAME

Input: every *.txt file (one document each) and *.jsonl file (one document per line, its "text" field) under
--input. Supervised fine-tuning data: a *.jsonl line with "prompt" and "response" fields instead (the prompt holds
whatever template the model is tuned to, the response what it should answer); its tokens are the prompt's (with the
tokenizer's special tokens) then the response's and EOS, and the shard gets a loss mask beside it (X.mask, uint8, one
entry a token: 0 on the prompt's tokens, 1 on the response's and EOS), so the trainer's loss counts only the
responses (Llama 2's SFT, section 3.1: "we zero-out the loss on tokens from the user prompt"). The tokenizer: a directory with the tokenizer's Hugging Face tokenizer.json and tokenizer_config.json,
whose eos_token ends each document. Output: one shard per input file, its token ids as uint16 (uint32 for
vocabularies over 65,536), and meta.json: the dtype, the vocabulary (which the model takes), the tokenizer's hash
and how many tasks wrote the shards. Each task leaves done-P-of-N when its files are whole; the trainer reads the
shards only when every task's marker is there.

Spread over every task of a Slurm job (prepare.sbatch: one per node, SLURM_PROCID of SLURM_NTASKS) and over the
node's cores, streaming (a file is never held whole). A shard is written under its task's temporary name and
renamed when whole, so a rerun skips what is done; a rerun with another tokenizer is refused.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

SUFFIXES = (".txt", ".jsonl")
MASK_SUFFIX = ".mask"  # X.bin's loss mask is X.mask (recipe.MASK_SUFFIX reads it)
META = "meta.json"
BATCH = 256  # documents per encode_batch call (the tokenizer's own threads work across them)
# The held-out slice the trainer's evaluation reads: one document in HOLDOUT_EVERY (0.5%), chosen by a hash of its
# text (the same documents whatever the task split or rerun), into HELDOUT/ beside the training shards, never trained
# on (the trainer reads only the top directory's shards).
HOLDOUT_EVERY = 200
HELDOUT = "heldout"


def held_out(text: str) -> bool:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") % HOLDOUT_EVERY == 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--input", type=Path, required=True, help="raw text: *.txt and *.jsonl files, searched recursively")
    p.add_argument("--tokenizer", type=Path, required=True, help="a directory with tokenizer.json")
    p.add_argument("--output", type=Path, required=True, help="where the shards and meta.json go")
    p.add_argument("--part", type=int, default=int(os.environ.get("SLURM_PROCID", "0")),
                   help="this task's share of the files (default: SLURM_PROCID)")
    p.add_argument("--parts", type=int, default=int(os.environ.get("SLURM_NTASKS", "1")))
    p.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    # An encoder classifier's labelled examples (classify_data.py: {"text", "label"} a line) instead of a token stream.
    p.add_argument("--task", choices=("causal-lm", "sequence-classification"), default="causal-lm")
    p.add_argument("--seq", type=int, default=128, help="sequence-classification: tokens an example is cut or padded "
                   "to (the plan's sequence)")
    return p.parse_args(argv)


def inputs(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.suffix in SUFFIXES)


def shard_name(path: Path, root: Path) -> str:
    """a/b.jsonl -> a__b.jsonl.bin: the suffix stays, so b.txt and b.jsonl never share a shard."""
    return "__".join(path.relative_to(root).parts) + ".bin"


def meta(tokenizer_dir: Path, parts: int) -> dict:
    """The vocabulary size (with added tokens), the dtype that holds it, the id that ends each document, and the
    tokenizer's hash (shards of another tokenizer are never mixed in)."""
    from tokenizers import Tokenizer

    raw = (tokenizer_dir / "tokenizer.json").read_bytes()
    tokenizer = Tokenizer.from_str(raw.decode())
    vocab = tokenizer.get_vocab_size(with_added_tokens=True)
    config = tokenizer_dir / "tokenizer_config.json"
    eos = json.loads(config.read_text()).get("eos_token") if config.exists() else None
    eos = eos.get("content") if isinstance(eos, dict) else eos
    eos_id = tokenizer.token_to_id(eos) if eos else None
    if eos_id is None:  # documents would run into each other with nothing between them
        raise SystemExit(f"prepare: {config} names no eos_token the tokenizer knows ({eos!r})")
    return {"vocab_size": vocab, "dtype": "uint16" if vocab <= 2**16 else "uint32", "eos_id": eos_id,
            "tokenizer_sha256": hashlib.sha256(raw).hexdigest(), "parts": parts, "heldout_every": HOLDOUT_EVERY}


def documents(path: Path):
    """(prompt, text) for each document: prompt None for plain text (trained on whole), else a prompt/response
    line's prompt and its response."""
    if path.suffix == ".txt":
        yield None, path.read_text(encoding="utf-8", errors="replace")
        return
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            doc = json.loads(line)
            if isinstance(doc, dict) and isinstance(doc.get("prompt"), str) and isinstance(doc.get("response"), str):
                yield doc["prompt"], doc["response"]
            elif isinstance(doc, dict) and isinstance(doc.get("text"), str):
                yield None, doc["text"]
            else:
                raise SystemExit(f"prepare: {path} line {number}: a JSONL line holds a \"text\" string, or a "
                                 "\"prompt\" and a \"response\" string (supervised fine-tuning)")


def _batches(items, size: int):
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _encoded(tokenizer, batch: list, eos: int):
    """Each (prompt, text) document's tokens and loss mask (1: trained on): a prompt's tokens (the tokenizer's special
    tokens included) masked out, then the response's (no special tokens: it continues the prompt) and EOS."""
    prompts = [prompt or "" for prompt, _ in batch]
    texts = tokenizer.encode_batch([text for _, text in batch], add_special_tokens=False) if any(
        p is not None for p, _ in batch) else None
    if texts is None:  # plain text only: one encoding each, as before loss masks
        for (_, text), encoding in zip(batch, tokenizer.encode_batch([t for _, t in batch])):
            yield text, [*encoding.ids, eos], None
        return
    for (prompt, text), asked, answer in zip(batch, tokenizer.encode_batch(prompts), texts):
        if prompt is None:
            whole = tokenizer.encode(text)
            yield text, [*whole.ids, eos], None
        else:
            yield prompt + text, [*asked.ids, *answer.ids, eos], [0] * len(asked.ids) + [1] * (len(answer.ids) + 1)


def tokenize(path: Path, target: Path, tokenizer_dir: Path, info: dict, part: int) -> int:
    """One input file into one shard, streaming: each batch of documents is encoded and appended, and where a
    document is a prompt and response, the shard's loss mask beside it (MASK_SUFFIX)."""
    import numpy as np
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    tmp = target.with_name(f"{target.name}.tmp-{part}")  # this task's own: two tasks never write one file
    (target.parent / HELDOUT).mkdir(exist_ok=True)
    held = target.parent / HELDOUT / tmp.name
    masks = {f: f.with_name(f.name + ".mask") for f in (tmp, held)}
    count, aside_count, masked = 0, 0, False
    with tmp.open("wb") as out, held.open("wb") as aside, masks[tmp].open("wb") as out_mask, \
            masks[held].open("wb") as aside_mask:
        for batch in _batches(documents(path), BATCH):
            kept, apart, kept_mask, apart_mask, any_mask = [], [], [], [], False
            for text, ids, mask in _encoded(tokenizer, batch, info["eos_id"]):  # mask None: every token
                away = held_out(text)
                (apart if away else kept).extend(ids)
                (apart_mask if away else kept_mask).extend(mask or [1] * len(ids))
                any_mask = any_mask or mask is not None
            if any_mask and not masked:  # the first prompt: every token before it was trained on (a 1 each)
                np.ones(count, dtype="uint8").tofile(out_mask)
                np.ones(aside_count, dtype="uint8").tofile(aside_mask)
                masked = True
            np.asarray(kept, dtype=info["dtype"]).tofile(out)
            np.asarray(apart, dtype=info["dtype"]).tofile(aside)
            if masked:  # plain text alone writes no mask
                np.asarray(kept_mask, dtype="uint8").tofile(out_mask)
                np.asarray(apart_mask, dtype="uint8").tofile(aside_mask)
            count += len(kept)
            aside_count += len(apart)
    for shard, final in ((held, target.parent / HELDOUT / target.name), (tmp, target)):
        if masked:  # the mask before its shard: a shard's presence means its mask is whole too
            masks[shard].replace(final.with_suffix(MASK_SUFFIX))
        else:
            masks[shard].unlink()
    held.replace(target.parent / HELDOUT / target.name)  # first: the training shard's presence means both are whole
    tmp.replace(target)  # whole or absent: a rerun redoes only what is missing
    return count


def run(args: argparse.Namespace) -> int:
    classify = args.task == "sequence-classification"
    files = [f for f in inputs(args.input) if f.suffix == ".jsonl" or not classify]
    if not files:
        raise SystemExit(f"prepare: no {'*.jsonl' if classify else '*.txt or *.jsonl'} files under {args.input}")
    if classify:
        import classify_data  # beside this script

        info, work = classify_data.meta(args.tokenizer, args.parts, args.seq), classify_data.tokenize
        whole = lambda f: classify_data.done(args.output, shard_name(f, args.input).removesuffix(".bin"))  # noqa: E731
    else:
        info, work = meta(args.tokenizer, args.parts), tokenize
        whole = lambda f: (args.output / shard_name(f, args.input)).exists()  # noqa: E731
    args.output.mkdir(parents=True, exist_ok=True)
    existing = args.output / META
    if existing.exists() and json.loads(existing.read_text()).get("tokenizer_sha256") != info["tokenizer_sha256"]:
        raise SystemExit(f"prepare: {args.output} holds shards of another tokenizer; prepare into a new --output")
    if existing.exists() and json.loads(existing.read_text()).get("seq", info.get("seq")) != info.get("seq"):
        raise SystemExit(f"prepare: {args.output} holds examples of another --seq; prepare into a new --output")
    mine = [f for f in files[args.part::args.parts] if not whole(f)]
    with ProcessPoolExecutor(max_workers=max(1, min(args.workers, len(mine) or 1))) as pool:
        counts = list(pool.map(work, mine, [args.output / shard_name(f, args.input) for f in mine],
                               [args.tokenizer] * len(mine), [info] * len(mine), [args.part] * len(mine)))
    # Every task writes the same meta.json, whole (rename), then its marker: the trainer waits for all markers.
    tmp = args.output / f".{META}.{args.part}"
    tmp.write_text(json.dumps(info, indent=2))
    tmp.replace(existing)
    (args.output / f"done-{args.part}-of-{args.parts}").touch()
    print(f"prepare: task {args.part} of {args.parts} tokenized {len(mine)} file(s), {sum(counts):,} {'examples' if classify else 'tokens'}, into "
          f"{args.output} ({info['dtype']}, vocabulary {info['vocab_size']:,})", flush=True)
    return sum(counts)


if __name__ == "__main__":
    run(parse())
