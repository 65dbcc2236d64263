"""A decoder fine-tuned from base weights (training.init_from) is planned with the fine-tuning recipe
(catalog/finetune.yaml: Llama 2's supervised fine-tuning, TRL's default learning rate, Alpaca's warmup), not with
pre-training's: its global batch (the layout's micro-steps), epochs, steps, warmup, peak learning rate and weight
decay, each said with its source; the layout carries them to the trainer (`finetune`). Pure Python."""

from __future__ import annotations

import math
from dataclasses import replace

from ..catalog.finetune import FinetuneRecipe, load_finetune_recipe
from ..catalog.model_families import TRAINER_MODEL_TYPE
from ..config.model import family
from ..config.schema import Workload
from ..errors import WARNING, Finding
from . import encoder, parallelism
from .parallelism import Parallelism


def is_finetune(w: Workload) -> bool:
    """A decoder that starts from base weights (an encoder classifier has its own recipe: encoder.py)."""
    return bool(w.training.init_from) and not encoder.is_classifier(w)


def recipe() -> FinetuneRecipe:
    return load_finetune_recipe()


def global_batch_tokens(w: Workload) -> int:
    """training.global_batch_tokens, else the fine-tune's (64 x 4,096) or pre-training's (Llama 2's 4M)."""
    if w.training.global_batch_tokens:
        return w.training.global_batch_tokens
    return recipe().global_batch_tokens if is_finetune(w) else parallelism.GLOBAL_BATCH_TOKENS


def epochs(w: Workload) -> float:
    """training.epochs where the config sets it, else the recipe's (Llama 2's SFT: 2) for a fine-tune."""
    if "epochs" in w.training.model_fields_set or not is_finetune(w):
        return w.training.epochs
    return recipe().epochs


def run_length(w: Workload, spread: Parallelism, tokens_billion: float | None,
               decisions: list[str]) -> Parallelism:
    """The fine-tune's global batch (the layout's: a whole number of micro-steps near the recipe's tokens), the steps
    that train the plan's tokens, warmup over the recipe's share of them, its peak learning rate and weight decay."""
    r = recipe()
    asked = global_batch_tokens(w)
    per_step = spread.global_batch * spread.sequence
    said = "training.global_batch_tokens" if w.training.global_batch_tokens else \
        f"the fine-tuning recipe's {r.global_batch_sequences} x {r.global_batch_sequence_length:,}"
    decisions.append(parallelism.global_batch_line(spread, asked=asked, said=said))
    carried = {"learning_rate": r.learning_rate, "weight_decay": r.weight_decay, "warmup_ratio": r.warmup_ratio,
               "global_batch_tokens": asked}
    if not tokens_billion:
        return replace(spread, lr=r.learning_rate, finetune=carried)
    steps = max(1, math.ceil(tokens_billion * 1e9 / per_step))
    warmup = math.ceil(r.warmup_ratio * steps)
    told = "training.epochs" if "epochs" in w.training.model_fields_set else "the recipe's"
    decisions.append(
        f"fine-tuning recipe (from base weights, training.init_from {w.training.init_from}): {tokens_billion:g}B "
        f"tokens ({epochs(w):g} epochs, {told}) / {per_step:,} tokens a step = {steps:,} steps; AdamW (betas 0.9, "
        f"0.95; weight decay {r.weight_decay:g}), peak learning rate {r.learning_rate:g} after {warmup:,} warmup "
        f"steps ({r.warmup_ratio:.0%} of the run), cosine decay to 10%, gradient clipping 1.0. Sources: learning "
        f"rate: {r.sources['learning_rate']}; batch, weight decay and epochs: {r.sources['global_batch_sequences']}; "
        f"warmup: {r.sources['warmup_ratio']} (read {r.as_of})")
    return replace(spread, steps=steps, warmup_steps=warmup, lr=r.learning_rate, finetune=carried)


def base_findings(w: Workload) -> list[Finding]:
    """A WARNING where model.family names a base the shipped trainer refuses to fine-tune (finetune.base_shape): not
    a Llama (model_type), or tied embeddings."""
    known = family(w.model)
    if not is_finetune(w) or known is None:
        return []
    why = [f"model_type {known.model_type}"] if known.model_type != TRAINER_MODEL_TYPE else []
    why += ["tied embeddings (tie_word_embeddings true)"] if known.tie_word_embeddings else []
    if not why:
        return []
    return [Finding(WARNING, "model.family", known.name,
                    f"a {known.name} base has {' and '.join(why)}, which examples/slurm/finetune.py refuses at run "
                    f"time (it builds Llama decoders with untied embeddings): fine-tune it with your own script "
                    f"(training.init_from stays the base's place), or start from a base the trainer builds",
                    known.source)]
