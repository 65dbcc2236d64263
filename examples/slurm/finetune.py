"""Fine-tuning from base weights for examples/slurm/train.py, beside it: --init-from names a Hugging Face directory
(config.json and *.safetensors of a LlamaForCausalLM, in the dataset bucket's datasets/ prefix, so on FSx at
/fsx/datasets/... or in a SageMaker job's train channel). The model takes the base's shape, each rank reads only its
own shards of each tensor from the safetensors files (torch.distributed.checkpoint's HuggingFaceStorageReader:
safetensors slices, straight into the FSDP2 / tensor-parallel DTensors; no full copy on rank 0), and the run trains
with a fine-tuning recipe instead of pre-training's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path

from torch import nn

# The fine-tuning recipe (learning rate, weight decay, warmup share, global batch in tokens) is data with its sources:
# workloads/catalog/finetune.yaml. A planned layout carries it (`finetune`, the plan's figures); without one this file
# reads that YAML itself (FINETUNE_RECIPE names another copy), never the planner's package.
RECIPE_FILE = Path(__file__).resolve().parents[2] / "workloads" / "catalog" / "finetune.yaml"
RECIPE_KEYS = ("learning_rate", "weight_decay", "warmup_ratio", "global_batch_tokens")
LLAMA3_ROPE = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
SHAPE = {"layers": "num_hidden_layers", "hidden": "hidden_size", "heads": "num_attention_heads",
         "kv_heads": "num_key_value_heads", "intermediate": "intermediate_size", "vocab": "vocab_size"}


def base_shape(directory: Path) -> dict:
    """The base model's shape and constants from its config.json, or a one-line reason it cannot be fine-tuned here
    (raised as ValueError; train.py turns it into a usage error)."""
    config_path = directory / "config.json"
    if not config_path.exists() or not any(directory.glob("*.safetensors")):
        raise ValueError(f"--init-from {directory}: no config.json and *.safetensors there (a Hugging Face model "
                         "directory saved with safe_serialization)")
    config = json.loads(config_path.read_text())
    if config.get("model_type") != "llama":
        raise ValueError(f"--init-from {directory}: model_type {config.get('model_type')!r}; this trainer fine-tunes "
                         "Llama decoders (model_type llama, LlamaForCausalLM)")
    for key, allowed in (("tie_word_embeddings", False), ("hidden_act", "silu"),
                         ("attention_bias", False), ("mlp_bias", False)):
        if config.get(key, allowed) != allowed:
            raise ValueError(f"--init-from {directory}: config.json {key} {config[key]!r}; this trainer builds "
                             f"{key} {allowed!r}")
    shape = {ours: config[theirs] for ours, theirs in SHAPE.items() if theirs in config}
    shape.setdefault("kv_heads", shape.get("heads"))
    if config.get("head_dim", config["hidden_size"] // config["num_attention_heads"]) * config[
            "num_attention_heads"] != config["hidden_size"]:
        raise ValueError(f"--init-from {directory}: head_dim x heads is not hidden_size; this trainer needs it")
    shape["rope_theta"], shape["rope_scaling"] = rope(config, directory)
    # The base's context (131,072 for Llama 3.1), carried into the export: not the fine-tune's sequence length.
    shape["max_positions"] = config.get("max_position_embeddings")
    shape["norm_eps"] = float(config.get("rms_norm_eps", 1e-6))
    return shape


def rope(config: dict, directory: Path) -> tuple[float, dict | None]:
    """rope_theta and the rope scaling of a config.json in either spelling: transformers 4 and Meta's published
    configs (top-level rope_theta, rope_scaling), or transformers 5 (rope_parameters holding both)."""
    parameters = config.get("rope_parameters") or {}
    theta = float(config.get("rope_theta", parameters.get("rope_theta", 10000.0)))  # LlamaConfig's default
    scaling = config.get("rope_scaling") or {k: v for k, v in parameters.items() if k != "rope_theta"}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default":
        return theta, None
    if kind != "llama3":
        raise ValueError(f"--init-from {directory}: config.json rope scaling {kind!r}; this trainer builds RoPE "
                         "unscaled or with Llama 3.1+'s rope_type 'llama3'")
    return theta, {"rope_type": "llama3", **{k: scaling[k] for k in LLAMA3_ROPE}}


def recipe(layout: dict) -> dict:
    """The fine-tuning recipe: the layout's `finetune` (the plan's, from workloads/catalog/finetune.yaml), else that
    file read here. ValueError (one line) where neither is to be had."""
    if layout.get("finetune"):
        return {key: layout["finetune"][key] for key in RECIPE_KEYS}
    path = Path(os.environ.get("FINETUNE_RECIPE") or RECIPE_FILE)
    try:
        import yaml

        figures = {name: fact["value"] for name, fact in yaml.safe_load(path.read_text())["recipe"].items()}
    except (ImportError, OSError) as e:
        raise ValueError(f"--init-from: no fine-tuning recipe: the layout is not a fine-tune's (plan the workload with "
                         f"training.init_from) and {path} cannot be read ({e}); set FINETUNE_RECIPE to a copy of "
                         "workloads/catalog/finetune.yaml") from None
    figures["global_batch_tokens"] = figures.pop("global_batch_sequences") * figures.pop("global_batch_sequence_length")
    return {key: figures[key] for key in RECIPE_KEYS}


def apply(args: argparse.Namespace, told: set[str], error, layout: dict) -> None:
    """The base's shape replaces the layout's; a shape flag given on the command line must agree with it. The
    fine-tuning recipe fills what the command line does not say: a fine-tune's layout already holds it, a
    pre-training layout's lr and warmup are pre-training's and are replaced."""
    try:
        shape = base_shape(args.init_from)
        args.finetune = recipe(layout)
    except ValueError as e:
        error(str(e))
    args.finetune_planned = bool(layout.get("finetune"))
    for name, value in shape.items():
        if name in told and getattr(args, name) != value:
            error(f"--{name.replace('_', '-')} {getattr(args, name)} differs from the base model's {value} "
                  f"({args.init_from}/config.json)")
        setattr(args, name, value)
    args.vocab_given = True  # the base's embedding decides the vocabulary, not the tokenizer's meta.json
    if "lr" not in told and not args.finetune_planned:
        args.lr = args.finetune["learning_rate"]
    args.weight_decay = args.finetune["weight_decay"]
    if args.tensor > 1 and args.vocab % args.tensor:
        error(f"--init-from: the base's vocabulary of {args.vocab} is not divisible by tensor parallel {args.tensor} "
              "(the trainer would pad it); choose a tensor degree that divides it")


def batch_and_steps(args: argparse.Namespace, data_ranks: int, told: set[str]) -> None:
    """Without a fine-tune's layout: the recipe's global batch (about its tokens, a whole number of micro-steps) unless
    told, the steps that train the tokens the layout's steps did at its batch, and warmup over the recipe's share of
    them unless told. A fine-tune's layout holds the plan's batch, steps and warmup: they stand."""
    if args.finetune_planned:
        return
    if "global_batch" not in told:
        tokens = args.steps * (args.global_batch or data_ranks * args.batch) * args.seq
        unit = data_ranks * args.batch
        args.global_batch = max(1, round(args.finetune["global_batch_tokens"] / args.seq / unit)) * unit
        if "steps" not in told:
            args.steps = max(1, math.ceil(tokens / (args.global_batch * args.seq)))
    if "warmup" not in told:
        args.warmup = math.ceil(args.finetune["warmup_ratio"] * args.steps)


def load(model: nn.Module, directory: Path) -> None:
    """Fill the model (DDP, FSDP2, HSDP or tensor parallel) from the base's safetensors: every rank reads the slices
    of its own shards."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import HuggingFaceStorageReader
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict

    state = get_model_state_dict(model)  # this rank's shards (DTensors), with Hugging Face's names
    dcp.load(state, storage_reader=HuggingFaceStorageReader(str(directory)))
    set_model_state_dict(model, state)
