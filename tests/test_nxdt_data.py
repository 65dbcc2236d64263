"""examples/slurm/nxdt_data.py: the prepare step's shards as the dataset NxD Training loads (issue 40's review): every
task writes its share of the shards straight onto the output's file system in compact types, one task writes the
index, and a tokenizer larger than the model's vocabulary is refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "slurm"))
import nxdt_data  # noqa: E402


def _shards(tmp: Path, *, vocab: int = 32000, lengths=(10, 7, 9, 0), dtype="uint16") -> Path:
    data = tmp / "tokens"
    data.mkdir()
    (data / "meta.json").write_text(json.dumps({"vocab_size": vocab, "dtype": dtype, "eos_id": 2}))
    start = 0
    for i, n in enumerate(lengths):
        np.arange(start, start + n, dtype=dtype).tofile(data / f"shard-{i:03d}.bin")
        start += n
    (data / "done-0").write_text("")
    return data


def _read(path: Path) -> pa.Table:
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_stream(source).read_all()


def test_every_task_writes_its_shards_in_compact_types_and_one_index_lists_them(tmp_path, monkeypatch):
    data, out = _shards(tmp_path), tmp_path / "tokens-nxdt"
    argv = ["--data", str(data), "--output", str(out), "--sequence", "4", "--vocab", "32000"]
    for part in (0, 1):
        monkeypatch.setenv("SLURM_PROCID", str(part))
        nxdt_data.main(argv + ["--parts", "2"])
    assert not out.exists()  # nothing loadable until the index is written
    monkeypatch.setenv("SLURM_NTASKS", "1")
    nxdt_data.main(argv + ["--parts", "2", "--finish"])
    state = json.loads((out / "state.json").read_text())
    files = [f["filename"] for f in state["_data_files"]]
    assert files == ["data-00000-of-00002.arrow", "data-00001-of-00002.arrow"]
    tables = [_read(out / f) for f in files]
    # shards 0 and 2 to task 0 (10 -> 2 sequences, 9 -> 2), shard 1 to task 1 (7 -> 1); the empty shard is skipped
    assert [t.num_rows for t in tables] == [4, 1]
    first = tables[0].to_pydict()
    assert first["input_ids"][0] == [0, 1, 2, 3] and first["input_ids"][2] == [17, 18, 19, 20]
    assert first["labels"] == first["input_ids"] and first["attention_mask"][0] == [1, 1, 1, 1]
    schema = tables[0].schema
    assert schema.field("input_ids").type == pa.list_(pa.uint16())  # 2 bytes a token, not int64's 8
    assert schema.field("attention_mask").type == pa.list_(pa.int8())
    info = json.loads((out / "dataset_info.json").read_text())
    assert json.loads(schema.metadata[b"huggingface"])["info"]["features"] == info["features"]
    assert info["features"]["input_ids"]["feature"]["dtype"] == "uint16"
    nxdt_data.main(argv + ["--parts", "2"])  # a rerun of a finished conversion does nothing
    assert sorted(p.name for p in out.iterdir()) == sorted(files + ["dataset_info.json", "state.json"])


def test_the_index_waits_for_every_task(tmp_path, monkeypatch):
    data, out = _shards(tmp_path), tmp_path / "tokens-nxdt"
    argv = ["--data", str(data), "--output", str(out), "--sequence", "4", "--vocab", "32000", "--parts", "2"]
    monkeypatch.setenv("SLURM_PROCID", "0")
    nxdt_data.main(argv)
    with pytest.raises(SystemExit, match="data-00001-of-00002.arrow"):
        nxdt_data.main(argv + ["--finish"])
    assert not out.exists()


def test_a_tokenizer_larger_than_the_models_vocabulary_is_refused(tmp_path):
    data = _shards(tmp_path, vocab=50257)
    with pytest.raises(SystemExit, match="vocab_size 50,257.*larger than the model's vocab_size 32,000"):
        nxdt_data.main(["--data", str(data), "--output", str(tmp_path / "o"), "--sequence", "4", "--vocab", "32000"])
    assert not (tmp_path / ".o.tmp").exists()


def test_loss_masks_the_copy_drops_are_said(tmp_path, capsys):
    """prepare.py's loss masks (prompt/response data) have no column here: NxD Training trains on every token, and
    the conversion says so rather than dropping them silently."""
    data, out = _shards(tmp_path), tmp_path / "tokens-nxdt"
    np.ones(10, dtype="uint8").tofile(data / "shard-000.mask")
    nxdt_data.main(["--data", str(data), "--output", str(out), "--sequence", "4", "--vocab", "32000", "--parts", "1"])
    said = capsys.readouterr().out
    assert "WARNING" in said and "loss masks" in said and "prompts' tokens" in said
