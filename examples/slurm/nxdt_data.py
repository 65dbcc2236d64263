"""The prepare step's token shards as the Hugging Face dataset NxD Training reads (Trn1 layouts beyond data parallel).

    srun --ntasks-per-node=1 python nxdt_data.py --data /fsx/tokens/NAME --output /fsx/tokens/NAME-nxdt \
        --sequence 4096 --vocab 32000                      # every node converts its share of the shards
    python nxdt_data.py ... --finish                       # once all are done: the dataset's index, renamed whole

NxD Training's HF data module loads data.train_dir with datasets.load_from_disk and batches it with transformers'
default_data_collator; its Llama model's pipeline takes input_names input_ids, attention_mask and labels
(neuronx-distributed-training lightning_modules/data/hf_data_module.py, model/hf_models/llama_model.py at 9169aa03),
so all three columns are written, in the smallest type that holds them: the ids in meta.json's dtype (uint16 below
65,536 entries), the mask as int8 (5 bytes a token, not the 24 of int64 rows). The collator makes int64 tensors of
them either way. The Arrow files are written here straight onto /fsx in the layout save_to_disk writes (IPC streams,
state.json, dataset_info.json): no Hugging Face cache on the node's root volume and no second copy.

Every task (SLURM_PROCID of SLURM_NTASKS) cuts shards PROCID, PROCID+NTASKS, ... into whole sequences of --sequence
tokens (the labels are the inputs: the model shifts them) and writes data-PROCID-of-NTASKS.arrow into a temporary
directory; --finish writes the index and renames the directory, so a rerun of a finished conversion does nothing.
The model's vocabulary (--vocab, its config.json's vocab_size) must hold the tokenizer's (meta.json's vocab_size), or
the run stops here: an id past the embedding table is not a number NxD Training can train on.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

MASK_DTYPE = "int8"


def meta(data: Path) -> dict:
    return json.loads((data / "meta.json").read_text())


def check_vocab(info: dict, vocab: int) -> None:
    if int(info["vocab_size"]) > vocab:
        raise SystemExit(f"nxdt_data: meta.json vocab_size {int(info['vocab_size']):,} (the tokenizer's) is larger "
                         f"than the model's vocab_size {vocab:,} (config.json): use a tokenizer of at most {vocab:,} "
                         "entries or plan the model with its vocabulary")


def shards(data: Path, part: int, parts: int) -> list[Path]:
    return sorted(f for f in data.glob("*.bin") if f.stat().st_size)[part::parts]


def features(dtype: str) -> dict:
    """dataset_info.json's features: what datasets checks the Arrow schema against when it loads the directory."""
    def seq(kind: str) -> dict:
        return {"feature": {"dtype": kind, "_type": "Value"}, "_type": "Sequence"}
    return {"input_ids": seq(dtype), "attention_mask": seq(MASK_DTYPE), "labels": seq(dtype)}


def schema(dtype: str):
    import pyarrow as pa

    ids = pa.list_(pa.from_numpy_dtype(dtype))
    return pa.schema([("input_ids", ids), ("attention_mask", pa.list_(pa.int8())), ("labels", ids)],
                     metadata={"huggingface": json.dumps({"info": {"features": features(dtype)}})})


def write_part(data: Path, tmp: Path, *, sequence: int, part: int, parts: int) -> int:
    """This task's shards as whole sequences in one Arrow stream file; the number of sequences."""
    import numpy as np
    import pyarrow as pa

    info = meta(data)
    dtype = info["dtype"]
    sch = schema(dtype)
    mask = pa.array([np.ones(sequence, dtype=np.int8)], type=pa.list_(pa.int8()))
    count = 0
    tmp.mkdir(parents=True, exist_ok=True)
    target = tmp / f"data-{part:05d}-of-{parts:05d}.arrow"
    with pa.OSFile(str(target.with_suffix(".partial")), "wb") as sink, pa.ipc.new_stream(sink, sch) as writer:
        for shard in shards(data, part, parts):
            tokens = np.memmap(shard, dtype=dtype, mode="r")
            whole = len(tokens) // sequence
            for start in range(0, whole, 1024):  # record batches of up to 1,024 sequences
                rows = np.asarray(tokens[start * sequence:min(whole, start + 1024) * sequence]).reshape(-1, sequence)
                offsets = pa.array(np.arange(len(rows) + 1, dtype=np.int32) * sequence)
                ids = pa.ListArray.from_arrays(offsets, pa.array(rows.ravel()))
                writer.write_batch(pa.record_batch(
                    [ids, pa.concat_arrays([mask] * len(rows)), ids], schema=sch))
                count += len(rows)
    target.with_suffix(".partial").replace(target)
    return count


def finish(data: Path, tmp: Path, output: Path, *, parts: int) -> int:
    """The index load_from_disk reads (state.json, dataset_info.json) over every task's file, then the rename."""
    import pyarrow as pa

    files = [f"data-{i:05d}-of-{parts:05d}.arrow" for i in range(parts)]
    for stale in set(p.name for p in tmp.iterdir()) - set(files) if tmp.exists() else ():  # an earlier run's parts
        (tmp / stale).unlink()
    missing = [f for f in files if not (tmp / f).exists()]
    if missing:
        raise SystemExit(f"nxdt_data: {tmp} lacks {', '.join(missing)}: a conversion task did not finish")
    rows = 0
    for f in files:
        with pa.memory_map(str(tmp / f)) as source:
            rows += pa.ipc.open_stream(source).read_all().num_rows
    if rows == 0:
        raise SystemExit(f"nxdt_data: {data} holds no whole sequence of the planned length")
    (tmp / "dataset_info.json").write_text(json.dumps({
        "description": f"{data} as sequences for NxD Training (nxdt_data.py)", "citation": "", "homepage": "",
        "license": "", "features": features(meta(data)["dtype"])}, indent=1))
    (tmp / "state.json").write_text(json.dumps({
        "_data_files": [{"filename": f} for f in files], "_fingerprint": f"nxdt-{rows}-{parts}",
        "_format_columns": None, "_format_kwargs": {}, "_format_type": None, "_output_all_columns": False,
        "_split": None}, indent=1))
    tmp.replace(output)
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, required=True, help="the prepare step's shard directory (meta.json, *.bin)")
    p.add_argument("--output", type=Path, required=True)
    p.add_argument("--sequence", type=int, required=True)
    p.add_argument("--vocab", type=int, required=True, help="the model config's vocab_size")
    p.add_argument("--parts", type=int, default=int(os.environ.get("SLURM_NTASKS", "1")),
                   help="how many tasks convert (default: SLURM_NTASKS)")
    p.add_argument("--finish", action="store_true", help="write the index once every task has written its part")
    args = p.parse_args(argv)
    if not list(args.data.glob("done-*")):
        raise SystemExit(f"nxdt_data: {args.data} holds no finished prepare step (done-* markers)")
    check_vocab(meta(args.data), args.vocab)
    if any(args.data.glob("*.mask")) and (args.finish or int(os.environ.get("SLURM_PROCID", "0")) == 0):
        print(f"nxdt_data: WARNING: {args.data} carries loss masks (prompt/response data, prepare.py), which this copy "
              "drops: NxD Training's labels are its inputs, so it trains on the prompts' tokens too; train.py (Trn2, "
              "GPUs) counts only the responses", flush=True)
    if (args.output / "dataset_info.json").exists():
        print(f"nxdt_data: {args.output} is already converted")
        return
    tmp = args.output.with_name(f".{args.output.name}.tmp")
    parts = args.parts
    if args.finish:
        rows = finish(args.data, tmp, args.output, parts=parts)
        print(f"nxdt_data: {rows:,} sequences of {args.sequence:,} tokens in {args.output}")
        return
    part = int(os.environ.get("SLURM_PROCID", "0"))
    rows = write_part(args.data, tmp, sequence=args.sequence, part=part, parts=parts)
    print(f"nxdt_data: task {part} of {parts}: {rows:,} sequences in {tmp}")


if __name__ == "__main__":
    main()
