"""The trained model as a Hugging Face directory (LlamaForCausalLM: config.json, model.safetensors or
model-NNNNN-of-NNNNN.safetensors with model.safetensors.index.json, the tokenizer's files), what
examples/slurm/train.py exports for the serving containers, beside it; written from every rank (export).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

# Hugging Face tokenizer files copied into the export when --tokenizer names a directory holding them.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model")
# Files of at most 5 GB (transformers 4.x save_pretrained's max_shard_size; 5.23 raised it to 50GB): the
# consolidation spreads files over the ranks, and rank 0's fallback holds one file's tensors at a time.
MAX_FILE_BYTES = int(os.environ.get("EXPORT_MAX_FILE_BYTES", 5 * 10**9))
INDEX = "model.safetensors.index.json"  # Hugging Face's map of tensor names to files
PADDED = ("embed_tokens.weight", "lm_head.weight")  # a row per vocabulary entry (recipe.PADDED_ROWS)
ROPE_THETA = 500000.0  # Llama 3's rotary base (params.json rope_theta)
NORM_EPS = 1e-5


def hf_config(args: argparse.Namespace, dtype: str) -> dict:
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": args.vocab,
            "hidden_size": args.hidden, "intermediate_size": args.intermediate, "num_hidden_layers": args.layers,
            "num_attention_heads": args.heads, "num_key_value_heads": args.kv_heads, "head_dim": args.hidden // args.heads,
            "hidden_act": "silu", "max_position_embeddings": args.max_positions or args.seq,
            "rms_norm_eps": args.norm_eps, "rope_theta": args.rope_theta, "rope_scaling": args.rope_scaling,
            "attention_bias": False, "mlp_bias": False,
            "tie_word_embeddings": False, "torch_dtype": dtype}


def export(model: nn.Module, args: argparse.Namespace, rank: int) -> None:
    """The final weights as a Hugging Face directory, written from every rank, renamed into place when whole.

    No rank gathers the model (at 70B that is about 420 GB of host memory on rank 0): each rank writes its own shards
    of every tensor (torch.distributed.checkpoint's HuggingFaceStorageWriter, save_distributed), then the ranks
    consolidate them into Hugging Face's files, each rank its share of the files
    (consolidate_safetensors_files_on_every_rank), with model.safetensors.index.json; one file is named
    model.safetensors, as save_pretrained names it. Where the export directory is not one file system for every rank
    (a multi-node SageMaker job's SM_MODEL_DIR is each node's own), rank 0 writes the files one at a time, gathering
    only that file's tensors (at most MAX_FILE_BYTES)."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    dtype = torch.bfloat16 if args.device != "cpu" else torch.float32  # served in bf16, as trained
    tmp = args.export_dir.with_name(args.export_dir.name + ".tmp")
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    dist.barrier()
    # A vocabulary padded for tensor parallel goes out as the tokenizer's: the padding rows are dropped.
    state = {name: _exported(t, dtype, args.vocab if name.endswith(PADDED) else None)
             for name, t in get_model_state_dict(model).items()}
    held = holders(state)
    files = file_index({name: nbytes for name, (nbytes, _, _, _) in held.items()})
    # XLA (Trn1's legacy data-parallel path): every rank holds the whole model and DCP does not run there.
    device = torch.device("cpu") if args.device in ("cpu", "xla") else next(model.parameters()).device
    if args.device != "xla" and _shared(tmp, rank, device):
        how = f"from the shards of {_write_from_every_rank(state, files, tmp)} ranks"
    else:
        _write_from_rank_0(state, files, tmp, rank, held, device)
        how = "by rank 0 a file at a time (the export directory is each node's own)"
    if rank == 0:
        if max(files.values()) == 1:  # one file: save_pretrained's name for it, no index
            (tmp / "model-00001-of-00001.safetensors").replace(tmp / "model.safetensors")
            (tmp / INDEX).unlink(missing_ok=True)
        config = {**hf_config(args, str(dtype).removeprefix("torch.")), **special_ids(args.tokenizer)}
        (tmp / "config.json").write_text(json.dumps(config, indent=2))
        # Where a server reads when to stop: the tokenizer's own ids, not transformers' Llama 2 defaults (1, 2).
        generation = {k: v for k, v in config.items() if k in ("bos_token_id", "eos_token_id")}
        (tmp / "generation_config.json").write_text(json.dumps(generation, indent=2))
        for name in TOKENIZER_FILES if args.tokenizer else ():
            if (args.tokenizer / name).exists():
                shutil.copy(args.tokenizer / name, tmp / name)
        shutil.rmtree(args.export_dir, ignore_errors=True)
        tmp.replace(args.export_dir)
        print(f"exported {args.export_dir} (Hugging Face LlamaForCausalLM, {max(files.values())} safetensors "
              f"file(s) written {how})", flush=True)
    dist.barrier()


def holders(state: dict) -> dict[str, tuple[int, tuple, torch.dtype, int]]:
    """Every tensor of the model, from every rank, in rank order: its bytes, shape, dtype and the first rank holding
    it. Pipeline stages each hold their own layers (ranks stage by stage: the model's order); other layouts hold every
    name on every rank."""
    mine = [(name, t.numel() * t.element_size(), tuple(t.shape), t.dtype) for name, t in state.items()]
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    out = {}
    for rank, part in enumerate(everyone):
        for name, nbytes, shape, dtype in part:
            out.setdefault(name, (nbytes, shape, dtype, rank))
    return out


def file_index(state: dict) -> dict[str, int]:
    """Each tensor's output file (1-based), in order, a new file where the next tensor would pass MAX_FILE_BYTES.
    `state`: the tensors, or their sizes in bytes."""
    index, size, out = 1, 0, {}
    for name, t in state.items():
        nbytes = t if isinstance(t, int) else t.numel() * t.element_size()
        if size and size + nbytes > MAX_FILE_BYTES:
            index, size = index + 1, 0
        out[name], size = index, size + nbytes
    return out


def _exported(t: torch.Tensor, dtype: torch.dtype, rows: int | None) -> torch.Tensor:
    """The tensor as exported: `dtype`, plain storage (fp8 training's torchao subclasses out), still sharded as
    trained (a DTensor keeps its placements, each rank its own shard), except a padded vocabulary's rows, which are cut
    to the tokenizer's (a vocabulary-sized matrix gathered: the padding splits across shards)."""
    from torch.distributed.tensor import DTensor

    if rows is not None and t.shape[0] != rows:
        full = t.full_tensor() if isinstance(t, DTensor) else t
        return _plain(full[:rows], dtype)
    if isinstance(t, DTensor):
        local = _plain(t.to_local(), dtype, device=t.to_local().device)
        return DTensor.from_local(local, t.device_mesh, t.placements, run_check=False, shape=t.shape,
                                  stride=t.stride())
    return _plain(t, dtype)


def _shared(directory: Path, rank: int, device: torch.device) -> bool:
    """Whether every rank sees the directory rank 0 created (FSx, one node): a token written by rank 0, read back."""
    token = f"{time.time_ns()}-{os.getpid()}"
    box = [token if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    if rank == 0:
        (directory / ".probe").write_text(box[0])
    dist.barrier()
    probe = directory / ".probe"
    seen = torch.tensor([float(probe.exists() and probe.read_text() == box[0])], device=device)  # NCCL: on the GPU
    dist.all_reduce(seen, op=dist.ReduceOp.MIN)
    dist.barrier()
    if rank == 0:
        probe.unlink()
    return bool(seen.item())


def _write_from_every_rank(state: dict, files: dict[str, int], directory: Path) -> int:
    """Returns how many ranks wrote shards (rank 0's count; the others' is 0)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import HuggingFaceStorageWriter
    from torch.distributed.checkpoint._consolidate_hf_safetensors import consolidate_safetensors_files_on_every_rank

    shards = directory / "sharded"
    dcp.save(state, storage_writer=HuggingFaceStorageWriter(str(shards), save_distributed=True,
                                                            fqn_to_index_mapping=files))
    dist.barrier()
    writers = len({p.name.split("-model-")[0] for p in shards.glob("shard-*.safetensors")})
    consolidate_safetensors_files_on_every_rank(str(shards), str(directory), files)  # ends with a barrier
    if dist.get_rank() == 0:
        shutil.rmtree(shards)
    return writers


def _write_from_rank_0(state: dict, files: dict[str, int], directory: Path, rank: int,
                       held: dict | None = None, device: torch.device | str = "cpu") -> None:
    """`held`: holders(state), where ranks hold different tensors (pipeline stages): a tensor rank 0 lacks comes from
    the first rank holding it (point to point, on `device`)."""
    from safetensors.torch import save_file
    from torch.distributed.tensor import DTensor

    last = max(files.values())
    weight_map, total = {}, 0
    for index in range(1, last + 1):
        names = [n for n, i in files.items() if i == index]
        part = {}
        for name in names:  # every rank holding it joins each gather; rank 0 keeps it until its file is written
            t = state.get(name)
            t = t.full_tensor() if isinstance(t, DTensor) else t
            source = held[name][3] if held else 0
            if source and rank == source:
                dist.send(t.to(device).contiguous(), dst=0)
            elif source and rank == 0:
                t = torch.empty(held[name][1], dtype=held[name][2], device=device)
                dist.recv(t, src=source)
            if rank == 0:
                part[name] = t.cpu().contiguous()
        if rank == 0:
            file = f"model-{index:05d}-of-{last:05d}.safetensors"
            save_file(part, directory / file, metadata={"format": "pt"})
            weight_map.update(dict.fromkeys(names, file))
            total += sum(t.numel() * t.element_size() for t in part.values())
        del part
    if rank == 0:
        (directory / INDEX).write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map},
                                                  indent=2))


def _plain(tensor: torch.Tensor, dtype: torch.dtype, device: torch.device | str = "cpu") -> torch.Tensor:
    """A plain tensor of `dtype` (on the CPU unless told): fp8 training's weights are torchao tensor subclasses, which
    safetensors cannot read the storage of."""
    plain = torch.empty(tensor.shape, dtype=dtype, device=device)
    plain.copy_(tensor)
    return plain


def special_ids(tokenizer_dir: Path | None) -> dict:
    """bos_token_id and eos_token_id of the tokenizer the export carries (tokenizer_config.json's tokens)."""
    if not tokenizer_dir or not (tokenizer_dir / "tokenizer_config.json").exists():
        return {}
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    config = json.loads((tokenizer_dir / "tokenizer_config.json").read_text())
    ids = {}
    for name in ("bos", "eos"):
        token = config.get(f"{name}_token")
        token = token.get("content") if isinstance(token, dict) else token
        if token and tokenizer.token_to_id(token) is not None:
            ids[f"{name}_token_id"] = tokenizer.token_to_id(token)
    return ids
