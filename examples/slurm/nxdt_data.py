"""The prepare step's token shards as the Hugging Face dataset NxD Training reads (Trn1 layouts beyond data parallel).

    python nxdt_data.py --data /fsx/tokens/NAME --output /fsx/tokens/NAME-nxdt --sequence 4096

NxD Training's HF data module loads data.train_dir with datasets.load_from_disk and batches input_ids, attention_mask
and labels with transformers' default_data_collator (neuronx-distributed-training lightning_modules/data/
hf_data_module.py). The shards (prepare.py: token ids as meta.json's dtype, every *.bin a run of documents ending in
EOS) are cut into whole sequences of --sequence tokens; the labels are the inputs (the model shifts them). Written to a
temporary directory and renamed when whole: a rerun of a finished conversion does nothing. Runs in NxD Training's
venv (datasets, numpy).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path


def sequences(data: Path, sequence: int):
    import numpy as np

    info = json.loads((data / "meta.json").read_text())
    for shard in sorted(f for f in data.glob("*.bin") if f.stat().st_size):
        tokens = np.memmap(shard, dtype=info["dtype"], mode="r")
        for start in range(0, len(tokens) - sequence + 1, sequence):
            ids = tokens[start:start + sequence].astype("int64").tolist()
            yield {"input_ids": ids, "attention_mask": [1] * sequence, "labels": ids}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, required=True, help="the prepare step's shard directory (meta.json, *.bin)")
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--sequence", type=int, required=True)
    args = p.parse_args(argv)
    if (args.output / "dataset_info.json").exists():
        print(f"nxdt_data: {args.output} is already converted")
        return
    if not list(args.data.glob("done-*")):
        raise SystemExit(f"nxdt_data: {args.data} holds no finished prepare step (done-* markers)")
    import datasets

    tmp = args.output.with_name(f".{args.output.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    dataset = datasets.Dataset.from_generator(sequences, gen_kwargs={"data": args.data, "sequence": args.sequence})
    if len(dataset) == 0:
        raise SystemExit(f"nxdt_data: {args.data} holds fewer than {args.sequence} tokens")
    dataset.save_to_disk(str(tmp))
    tmp.replace(args.output)
    print(f"nxdt_data: {len(dataset):,} sequences of {args.sequence:,} tokens in {args.output}")


if __name__ == "__main__":
    main()
