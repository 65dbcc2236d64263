"""The prepare step for an encoder classifier (prepare.py --task sequence-classification), and what
examples/slurm/classifier.py reads back: labelled examples as fixed-length token ids.

Data contract. Input: *.jsonl files under --input, one example a line: {"text": "...", "label": L}, L a string or an
integer (a class name or index; an optional "text_pair" is encoded as BERT's second segment). The tokenizer: a
Hugging Face tokenizer.json (a BERT WordPiece one adds [CLS] ... [SEP] itself) whose pad token is tokenizer_config.json's
pad_token (else [PAD]). Output, per input file: NAME.ids.npy (examples x --seq token ids, truncated and padded),
NAME.lengths.npy (the real tokens of each) and NAME.labels.json (each example's label as written), the held-out
examples (prepare.HOLDOUT_EVERY, chosen by a hash of the text) the same under heldout/, and meta.json with the task,
the sequence length, the vocabulary, the pad id and the tokenizer's hash. Labels are named at training time over every
shard (classes sorted: numbers by value, names alphabetically), so each task of the prepare step works alone.
"""

from __future__ import annotations

import json
from pathlib import Path

TASK = "sequence-classification"


def pad_id(tokenizer_dir: Path, tokenizer) -> int:
    config = tokenizer_dir / "tokenizer_config.json"
    token = json.loads(config.read_text()).get("pad_token") if config.exists() else None
    token = token.get("content") if isinstance(token, dict) else token
    found = tokenizer.token_to_id(token or "[PAD]")
    if found is None:
        raise SystemExit(f"prepare: the tokenizer has no pad token ({token or '[PAD]'!r}; tokenizer_config.json "
                         "pad_token names it)")
    return found


def meta(tokenizer_dir: Path, parts: int, seq: int) -> dict:
    import hashlib

    from tokenizers import Tokenizer

    import prepare  # beside this script

    raw = (tokenizer_dir / "tokenizer.json").read_bytes()
    tokenizer = Tokenizer.from_str(raw.decode())
    vocab = tokenizer.get_vocab_size(with_added_tokens=True)
    return {"task": TASK, "seq": seq, "vocab_size": vocab, "dtype": "uint16" if vocab <= 2**16 else "uint32",
            "pad_id": pad_id(tokenizer_dir, tokenizer), "tokenizer_sha256": hashlib.sha256(raw).hexdigest(),
            "parts": parts, "heldout_every": prepare.HOLDOUT_EVERY}


def examples(path: Path):
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if "text" not in row or "label" not in row:
                raise SystemExit(f"prepare: {path} line {number} has no \"text\" and \"label\" (the classification "
                                 "data contract: one {\"text\": ..., \"label\": ...} a line)")
            yield row["text"], row.get("text_pair"), row["label"]


def tokenize(path: Path, target: Path, tokenizer_dir: Path, info: dict, part: int) -> int:
    """One input file into NAME.ids.npy, NAME.lengths.npy and NAME.labels.json (and their held-out twins); the ids
    file, renamed last, says the shard is whole."""
    import numpy as np
    from tokenizers import Tokenizer

    import prepare

    tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    tokenizer.enable_truncation(info["seq"])
    tokenizer.enable_padding(pad_id=info["pad_id"], length=info["seq"])
    rows = {False: ([], [], []), True: ([], [], [])}
    for batch in prepare._batches(examples(path), prepare.BATCH):
        pairs = [(t, p) if p is not None else t for t, p, _ in batch]
        for (text, _, label), enc in zip(batch, tokenizer.encode_batch(pairs)):
            ids, lengths, labels = rows[prepare.held_out(text)]
            ids.append(enc.ids)
            lengths.append(sum(enc.attention_mask))
            labels.append(label)
    for held, (ids, lengths, labels) in sorted(rows.items(), reverse=True):  # held-out first: the top one is last
        where = target.parent / prepare.HELDOUT if held else target.parent
        where.mkdir(exist_ok=True)
        stem = target.name.removesuffix(".bin")
        tmp = f".tmp-{part}"
        np.save(where / f"{stem}.lengths{tmp}.npy", np.asarray(lengths, dtype=np.int32))
        (where / f"{stem}.labels.json{tmp}").write_text(json.dumps(labels))
        np.save(where / f"{stem}.ids{tmp}.npy", np.asarray(ids, dtype=info["dtype"]).reshape(-1, info["seq"]))
        for name in (".lengths", ".labels.json", ".ids"):
            suffix = "" if name == ".labels.json" else ".npy"
            (where / f"{stem}{name}{tmp}{suffix}").replace(where / f"{stem}{name}{suffix}")
    return len(rows[False][0])


def done(output: Path, stem: str) -> bool:
    return (output / f"{stem}.ids.npy").exists()


class Examples:
    """Every shard of a prepared directory (or its held-out slice): ids (N x seq), lengths and label names."""

    def __init__(self, directory: Path) -> None:
        import numpy as np

        stems = sorted(p.name.removesuffix(".ids.npy") for p in directory.glob("*.ids.npy"))
        if not stems:
            raise SystemExit(f"{directory}: no prepared examples (*.ids.npy: prepare.py --task {TASK} writes them)")
        self.ids = np.concatenate([np.load(directory / f"{s}.ids.npy") for s in stems])
        self.lengths = np.concatenate([np.load(directory / f"{s}.lengths.npy") for s in stems])
        self.labels = [label for s in stems for label in json.loads((directory / f"{s}.labels.json").read_text())]

    def __len__(self) -> int:
        return len(self.labels)


def label_names(labels: list) -> list[str]:
    """The classes in a fixed order: integers by value, names alphabetically (each as the string config.json's
    id2label holds)."""
    distinct = set(labels)
    if all(isinstance(x, int) for x in distinct):
        return [str(x) for x in sorted(distinct)]
    return sorted(str(x) for x in distinct)


def ready(directory: Path) -> dict:
    """meta.json once every task of the prepare step has left its marker (prepare.py's done-P-of-N)."""
    path = directory / "meta.json"
    if not path.exists():
        raise SystemExit(f"{directory}: no meta.json (run prepare.py --task {TASK} first)")
    info = json.loads(path.read_text())
    if info.get("task") != TASK:
        raise SystemExit(f"{directory} holds {info.get('task', 'language-model')} shards, not labelled examples: "
                         f"prepare it with --task {TASK}")
    missing = [p for p in range(info["parts"]) if not (directory / f"done-{p}-of-{info['parts']}").exists()]
    if missing:
        raise SystemExit(f"{directory}: the prepare step's tasks {missing} have not finished")
    return info
