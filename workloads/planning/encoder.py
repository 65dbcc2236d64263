"""Encoder classifiers (BERT-class: config/model.py infers them) planned as sequence-classification fine-tuning, not as
a decoder language model: their shape, memory per rank, batch, learning rate, epochs and steps. Pure Python.

The recipe is BERT's (Devlin et al. 2018, https://arxiv.org/abs/1810.04805, section 4.1: "a batch size of 32 and
fine-tune for 3 epochs over the data for all GLUE tasks", the learning rate chosen among 5e-5, 4e-5, 3e-5 and 2e-5)
with google-research/bert run_classifier.py's defaults for what the paper leaves out (max_seq_length 128,
warmup_proportion 0.1: a linear warmup over a tenth of the steps, then linear decay).
"""

from __future__ import annotations

import math
from dataclasses import replace

from ..catalog import InstanceType, devices
from ..config.model import architecture
from ..config.schema import CLASSIC_ML, Workload
from .parallelism import MEMORY_FRACTION, STATE_BYTES_PER_PARAM, Parallelism

TASK = "sequence-classification"
BATCH = 32  # sequences per optimizer step
EPOCHS = 3  # where training.epochs is not set
LEARNING_RATE = 2e-5  # the lowest of the paper's four: the stable end for the larger encoders
SEQUENCE = 128  # tokens per example where training.sequence_length is not set
WARMUP_SHARE = 0.1
MAX_POSITIONS = 512  # BERT's position embeddings: the longest sequence an encoder of this family reads
VOCAB = 30522  # BERT's WordPiece vocabulary (bert-base-uncased config.json vocab_size)
# (up to billions of parameters, hidden, attention heads): BERT-base 768/12, BERT-large 1024/16 (bert-base-uncased,
# bert-large-uncased config.json), DeBERTa-v2-xxlarge 1536/24 (microsoft/deberta-v2-xxlarge config.json); the depth is
# fitted to model.parameters_billion (12 for 0.11B, 24 for 0.34B).
SHAPES = ((0.2, 768, 12), (0.6, 1024, 16), (float("inf"), 1536, 24))
# Activation bytes a layer keeps per token, fp16/bf16 without recompute: 34 x hidden + 5 x heads x sequence
# (Korthikanti et al. 2022, https://arxiv.org/abs/2205.05198, equation 1, per sequence x batch).
ACTIVATION_HIDDEN_BYTES = 34
ACTIVATION_SCORE_BYTES = 5


def is_classifier(w: Workload) -> bool:
    """An encoder the planner fine-tunes as a sequence classifier: model.architecture encoder, set or inferred."""
    return w.model.framework not in CLASSIC_ML and architecture(w)[0] == "encoder"


def _parameters(layers: int, hidden: int, vocab: int) -> int:
    """BERT's count: token, position and type embeddings with their norm; per layer q, k, v, o (4h^2 + 4h), the GELU
    MLP at 4h (8h^2 + 5h) and two norms (4h); the pooler (h^2 + h)."""
    embeddings = (vocab + MAX_POSITIONS + 2) * hidden + 2 * hidden
    per_layer = 12 * hidden * hidden + 13 * hidden
    return embeddings + layers * per_layer + hidden * hidden + hidden


def shape(w: Workload) -> tuple[int, int, int, int]:
    """(layers, hidden, heads, vocab): the config's model.layers, hidden_size, attention_heads and vocab_size, each
    absent one the usual encoder's at this size, the depth fitted to parameters_billion."""
    m = w.model
    _, hidden, heads = next(s for s in SHAPES if m.parameters_billion <= s[0])
    hidden, heads, vocab = m.hidden_size or hidden, m.attention_heads or heads, m.vocab_size or VOCAB
    if m.layers:
        return m.layers, hidden, heads, vocab
    rest, one = _parameters(0, hidden, vocab), _parameters(1, hidden, vocab) - _parameters(0, hidden, vocab)
    return max(1, round((m.parameters_billion * 1e9 - rest) / one)), hidden, heads, vocab


def parameters_billion(w: Workload) -> float:
    layers, hidden, _, vocab = shape(w)
    return _parameters(layers, hidden, vocab) / 1e9


def epochs(w: Workload) -> float:
    """training.epochs where the config sets it, else BERT's 3."""
    return w.training.epochs if "epochs" in w.training.model_fields_set else EPOCHS


def sequence(w: Workload) -> int:
    return min(w.training.sequence_length or SEQUENCE, MAX_POSITIONS)


def gib_per_rank(w: Workload, micro_batch: int) -> float:
    """Model state (every rank holds it: DDP) plus one micro-batch's activations."""
    layers, hidden, heads, _ = shape(w)
    seq = sequence(w)
    state = parameters_billion(w) * 1e9 * STATE_BYTES_PER_PARAM
    activations = layers * micro_batch * seq * (ACTIVATION_HIDDEN_BYTES * hidden + ACTIVATION_SCORE_BYTES * heads * seq)
    return (state + activations) / 2**30


def layout(w: Workload, itype: InstanceType, nodes: int) -> Parallelism | None:
    """Data parallel (DDP) over every rank, BATCH sequences a step split between them; None where the state and one
    sequence's activations do not fit a rank."""
    per_node, rank_gib = devices(itype)
    ranks = per_node * nodes
    micro = max(1, BATCH // ranks)
    while micro > 1 and gib_per_rank(w, micro) > rank_gib * MEMORY_FRACTION:
        micro //= 2
    need = gib_per_rank(w, micro)
    if need > rank_gib * MEMORY_FRACTION:
        return None
    layers, hidden, heads, vocab = shape(w)
    global_batch = max(BATCH, ranks * micro)
    global_batch -= global_batch % (ranks * micro)
    precision = "fp16" if itype.peak_tflops_dtype == "fp16" else "bf16"
    return Parallelism(
        data=ranks, tensor=1, pipeline=1, sharding="none", ranks=ranks, ranks_per_node=per_node,
        gib_per_rank=round(need, 1), rank_memory_gib=round(rank_gib, 1), layers=layers, hidden=hidden, heads=heads,
        sequence=sequence(w), vocab=vocab, recompute=False, kv_heads=heads, intermediate=4 * hidden,
        micro_batch=micro, global_batch=global_batch, precision=precision, lr=LEARNING_RATE, task=TASK,
        reason=(f"an encoder classifier ({layers} layers, hidden {hidden}, {heads} heads, vocabulary {vocab:,}) "
                f"fine-tuned with data parallel (DDP) on every rank: {need:.1f} GiB a rank (state and "
                f"{micro} sequence{'s' if micro > 1 else ''} of {sequence(w)} tokens)"))


def run_length(w: Workload, spread: Parallelism, tokens_billion: float | None, decisions: list[str]) -> Parallelism:
    """Steps from the examples (tokens over the sequence) and epochs at BATCH a step; warmup a tenth of them."""
    seq = spread.sequence
    per_epoch = (tokens_billion or 0) * 1e9 / epochs(w) / seq
    steps = max(1, math.ceil(per_epoch * epochs(w) / spread.global_batch)) if tokens_billion else 0
    warmup = math.ceil(steps * WARMUP_SHARE)
    said = "training.epochs" if "epochs" in w.training.model_fields_set else "BERT's 3"
    decisions.append(
        f"fine-tuning recipe (sequence classification): {per_epoch:,.0f} examples of {seq} tokens "
        f"({'training.sequence_length' if w.training.sequence_length else 'BERT run_classifier.py max_seq_length'}) "
        f"x {epochs(w):g} epochs ({said}) at {spread.global_batch} a step (BERT's 32) = {steps:,} steps; AdamW at "
        f"{spread.lr:g} (the BERT paper's search: 5e-5 to 2e-5), {warmup:,} warmup steps (a tenth, run_classifier.py) "
        "then linear decay (https://arxiv.org/abs/1810.04805, section 4.1); its time at the accelerator's published "
        "training MFU, which are decoder runs at 2,048 tokens and more (no encoder fine-tuning MFU is recorded): "
        "likely optimistic for 128-token sequences until `plan --calibrate` measures it")
    return replace(spread, steps=steps, warmup_steps=warmup, epochs=epochs(w))
