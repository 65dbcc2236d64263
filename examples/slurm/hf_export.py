"""The trained model as a Hugging Face directory (LlamaForCausalLM: config.json, model.safetensors, the tokenizer's
files), what examples/slurm/train.py exports for the serving containers, beside it.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

# Hugging Face tokenizer files copied into the export when --tokenizer names a directory holding them.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model")
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
    """The final weights as a Hugging Face directory, gathered onto rank 0's CPU, renamed into place when whole."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if rank == 0:
        from safetensors.torch import save_file

        dtype = torch.bfloat16 if args.device != "cpu" else torch.float32  # served in bf16, as trained
        tmp = args.export_dir.with_name(args.export_dir.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        # A vocabulary padded for tensor parallel goes out as the tokenizer's: the padding rows are dropped.
        rows = {k: args.vocab if k.endswith(("embed_tokens.weight", "lm_head.weight")) else None for k in state}
        save_file({k: _plain(v[:rows[k]], dtype) for k, v in state.items()}, tmp / "model.safetensors",
                  metadata={"format": "pt"})
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
        print(f"exported {args.export_dir} (Hugging Face LlamaForCausalLM)", flush=True)
    dist.barrier()


def _plain(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A plain CPU tensor of `dtype`: fp8 training's weights are torchao tensor subclasses, which safetensors cannot
    read the storage of."""
    plain = torch.empty(tensor.shape, dtype=dtype)
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
