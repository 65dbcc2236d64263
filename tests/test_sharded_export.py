"""Issue 42: the export writes shards from each rank. Before: examples/slurm/hf_export.py gathered the whole model onto
rank 0's CPU (full_state_dict), about 420 GB of host memory at 70B. Now every rank writes its own shards
(torch.distributed.checkpoint's HuggingFaceStorageWriter), the ranks consolidate them into Hugging Face's files, each
its share, with model.safetensors.index.json; and where the directory is not one file system for every rank, rank 0
writes one file at a time. Both load in transformers with the trainer's weights."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.trainer

SLURM = Path(__file__).resolve().parent.parent / "examples" / "slurm"
SMALL = ["--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2", "--seq", "32", "--vocab", "256"]


def _train(tmp: Path, *args: str, ranks: int = 2, **env: str) -> str:
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}",
                           str(SLURM / "train.py"), "--device", "cpu", *SMALL, "--batch", "2", "--log-every", "1",
                           *args], cwd=tmp, capture_output=True, text=True, timeout=240,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", **env})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize("sharding", ["full", "none"])
def test_each_rank_writes_its_shards_and_the_files_load_in_transformers(tmp_path, tokens, sharding):
    """FSDP2 (each rank holds a shard of every tensor) and DDP (replicated tensors, each written once): files of at
    most 100 kB here (EXPORT_MAX_FILE_BYTES), written from both ranks' shards, with the index; transformers loads the
    directory with the weights of the run's last checkpoint."""
    import torch
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    from transformers import AutoModelForCausalLM

    export = tmp_path / "export"
    out = _train(tmp_path, "--steps", "2", "--data", str(tokens), "--sharding", sharding, "--checkpoint-dir",
                 str(tmp_path / "ckpt"), "--export-dir", str(export), EXPORT_MAX_FILE_BYTES="100000")
    assert "written from the shards of 2 ranks" in out, out
    index = json.loads((export / "model.safetensors.index.json").read_text())
    files = sorted({f for f in index["weight_map"].values()})
    assert len(files) > 1 and sorted(p.name for p in export.glob("*.safetensors")) == files
    assert not (export / "sharded").exists() and not (export / "model.safetensors").exists()
    dcp_to_torch_save(tmp_path / "ckpt" / "step-00000002", tmp_path / "final.pt")
    trained = torch.load(tmp_path / "final.pt", weights_only=False)["training"]["model"]
    theirs = AutoModelForCausalLM.from_pretrained(export).state_dict()
    assert set(index["weight_map"]) == set(trained)
    assert all(torch.equal(theirs[k], trained[k]) for k in trained)


def test_one_file_is_named_model_safetensors_as_save_pretrained_names_it(tmp_path, tokens):
    from safetensors import safe_open

    out = _train(tmp_path, "--steps", "1", "--data", str(tokens), "--sharding", "full", "--checkpoint-dir",
                 str(tmp_path / "ckpt"), "--export-dir", str(tmp_path / "export"))
    assert "1 safetensors file(s) written from the shards of 2 ranks" in out, out
    assert not (tmp_path / "export" / "model.safetensors.index.json").exists()
    with safe_open(str(tmp_path / "export" / "model.safetensors"), "pt") as f:
        assert f.get_slice("model.embed_tokens.weight").get_shape() == [256, 64]


def test_where_the_directory_is_each_nodes_own_rank_0_writes_a_file_at_a_time(tmp_path):
    """The fallback, in one process: the files and index as Hugging Face writes them, from a state dict."""
    import torch
    import torch.distributed as dist
    from safetensors.torch import load_file

    sys.path.insert(0, str(SLURM))
    try:
        import hf_export
    finally:
        del sys.path[0]
    os.environ.update(MASTER_ADDR="localhost", MASTER_PORT="29613")
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        state = {f"w{i}": torch.full((10, 10), float(i)) for i in range(5)}  # 400 bytes each
        old, hf_export.MAX_FILE_BYTES = hf_export.MAX_FILE_BYTES, 800
        try:
            files = hf_export.file_index(state)
        finally:
            hf_export.MAX_FILE_BYTES = old
        assert files == {"w0": 1, "w1": 1, "w2": 2, "w3": 2, "w4": 3}
        hf_export._write_from_rank_0(state, files, tmp_path, 0)
    finally:
        dist.destroy_process_group()
    index = json.loads((tmp_path / hf_export.INDEX).read_text())
    assert index["weight_map"]["w4"] == "model-00003-of-00003.safetensors" and index["metadata"]["total_size"] == 2000
    assert torch.equal(load_file(str(tmp_path / "model-00002-of-00003.safetensors"))["w3"], state["w3"])
