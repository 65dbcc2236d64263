"""What the config says the model is: its architecture, artifact format and shape (each absent field inferred, and
the plan says so), and the memory its weights take. The validators and the planner both read these."""

from __future__ import annotations

from functools import cache

from ..catalog.model_families import Family, load_families
from .schema import Workload


_FORMAT_OF_FRAMEWORK = {"pytorch": "framework-archive", "tensorflow": "framework-archive", "xgboost": "xgboost",
                        "scikit-learn": "scikit-learn"}


# The usual decoder's shape at each size, from the models' config.json on the Hugging Face Hub
# (num_hidden_layers, num_attention_heads, num_key_value_heads, hidden_size, intermediate_size): Llama 3.2 1B
# 16/32/8/2048/8192, Llama 3.2 3B 28/24/8/3072/8192, Llama 3.1 8B 32/32/8/4096/14336, Llama 2 13B
# 40/40/40/5120/13824, Code Llama 34B 48/64/8/8192/22016, Llama 3.1 70B 80/64/8/8192/28672
# (https://huggingface.co/meta-llama/Llama-3.2-1B/blob/main/config.json, .../Llama-3.2-3B, .../Llama-3.1-8B,
# .../Llama-2-13b-hf, https://huggingface.co/codellama/CodeLlama-34b-hf, .../meta-llama/Llama-3.1-70B; the widths
# checked 2026-11-25 in copies of those files that name them as their base, the meta-llama repositories being gated).
# Used for what the config leaves out, and for the KV cache.
# Above 150B, Llama 3.1 405B's 126/128/8/16384/53248 (its config.json). Where model.layers is absent the depth is
# fitted so the shape holds parameters_billion (model_shape): a 0.3B model is not planned as the 1B shape.
_TYPICAL_SHAPES = ((1.5, 16, 32, 8, 2048, 8192), (4, 28, 24, 8, 3072, 8192), (10, 32, 32, 8, 4096, 14336),
                   (20, 40, 40, 40, 5120, 13824), (40, 48, 64, 8, 8192, 22016),
                   (150, 80, 64, 8, 8192, 28672), (float("inf"), 126, 128, 8, 16384, 53248))


# Above this size a PyTorch model without model.architecture is taken for a decoder: the largest common encoders are
# about this size (DeBERTa-v2-xxlarge, 1.5B parameters: microsoft/deberta-v2-xxlarge on the Hugging Face Hub), while
# decoders start below it, so a small decoder should say model.architecture: decoder (the plan says what it assumed).
DECODER_ABOVE_BILLION = 1.5


# A shape whose parameter count is this close to model.parameters_billion is that model (the plan warns beyond it).
SHAPE_TOLERANCE = 0.10


# A decoder's vocabulary when model.vocab_size is absent: Llama 2's tokenizer, what the trainer uses.
DEFAULT_VOCAB = 32000


def family(m) -> Family | None:
    """model.family's published facts (catalog/model_families.yaml), or None."""
    return load_families()[m.family] if m.family else None


def vocab(m) -> int:
    """The decoder's vocabulary: model.vocab_size, else model.family's, else Llama 2's (DEFAULT_VOCAB)."""
    known = family(m)
    return m.vocab_size or (known.vocab_size if known else DEFAULT_VOCAB)


def architecture(w: Workload) -> tuple[str, str]:
    """(kind, why): the config's model.architecture, or inferred from the artifact format, the framework and size."""
    m = w.model
    if m.architecture:
        return m.architecture, "set by model.architecture"
    if w.inference.artifact.format == "huggingface":
        return "decoder", "inferred: a Hugging Face artifact is served by an LLM container; set model.architecture"
    if m.framework in ("xgboost", "scikit-learn"):
        return "tabular", f"inferred from the framework ({m.framework})"
    if m.framework == "pytorch" and m.parameters_billion > DECODER_ABOVE_BILLION:
        return "decoder", (f"inferred: a {m.parameters_billion:g}B pytorch model, above {DECODER_ABOVE_BILLION:g}B "
                           "(the largest common encoders); set model.architecture")
    return "encoder", (f"inferred: a {m.parameters_billion:g}B {m.framework} model"
                       + (f", at most {DECODER_ABOVE_BILLION:g}B" if m.framework == "pytorch" else
                          " (tensorflow has no LLM serving container here)") + "; set model.architecture")


def artifact_format(w: Workload) -> tuple[str, str]:
    if w.inference.artifact.format:
        return w.inference.artifact.format, "set by the config"
    if architecture(w)[0] == "decoder" and w.model.framework == "pytorch":
        # Never a TorchServe archive sized as an encoder: a decoder is served by an LLM container.
        return "huggingface", "from the architecture (a decoder: an LLM serving container reads a Hugging Face directory)"
    return _FORMAT_OF_FRAMEWORK[w.model.framework], f"from the framework ({w.model.framework})"


def model_shape(w: Workload) -> tuple[int, int, int, int]:
    """(layers, heads, KV heads, hidden): the config's model.layers, attention_heads, kv_heads and hidden_size, each
    absent one the usual decoder's at this size."""
    return _model_shape(w.model)


@cache  # the serving comparison asks it for every candidate's KV cache (thousands of calls a plan); the section is frozen
def _model_shape(m) -> tuple[int, int, int, int]:
    layers, heads, kv_heads, hidden, _ = _typical_of(m)
    heads = m.attention_heads or heads
    # The usual decoder's KV heads cannot exceed the heads the config names (multi-head attention then).
    kv_heads = m.kv_heads or min(kv_heads, heads)
    hidden = m.hidden_size or hidden
    if m.layers:
        return m.layers, heads, kv_heads, hidden
    if (known := family(m)) and known.published(m.parameters_billion, SHAPE_TOLERANCE):
        return layers, heads, kv_heads, hidden  # a published size: its depth (its own count, tied embeddings or not)
    # The usual depth where it holds parameters_billion within SHAPE_TOLERANCE; else the depth at which this width does.
    width = _ffn_width(m)
    one = decoder_parameters(layers=1, hidden=hidden, heads=heads, kv_heads=kv_heads, intermediate=width,
                             vocab=vocab(m))
    rest = decoder_parameters(layers=0, hidden=hidden, heads=heads, kv_heads=kv_heads, intermediate=width,
                              vocab=vocab(m))
    wanted = m.parameters_billion * 1e9
    if abs(rest + layers * (one - rest) - wanted) <= SHAPE_TOLERANCE * wanted:
        return layers, heads, kv_heads, hidden
    return max(1, round((wanted - rest) / (one - rest))), heads, kv_heads, hidden


def decoder_parameters(*, layers: int, hidden: int, heads: int, kv_heads: int, intermediate: int, vocab: int) -> int:
    """The parameters examples/slurm/train.py's Llama holds: the embeddings and an untied output head (vocab x hidden
    each); per layer q and o (hidden x heads x head size), k and v (hidden x kv heads x head size: grouped-query
    attention), SwiGLU's gate, up and down (3 x hidden x intermediate) and two RMSNorm weights; the final norm."""
    head_dim = hidden // heads
    per_layer = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim + 3 * hidden * intermediate + 2 * hidden
    return 2 * vocab * hidden + layers * per_layer + hidden


def _typical(parameters_billion: float) -> tuple[int, int, int, int, int]:
    return next(tuple(shape) for limit, *shape in _TYPICAL_SHAPES if parameters_billion <= limit)


def _typical_of(m) -> tuple[int, int, int, int, int]:
    """model.family's published size nearest parameters_billion, else the usual decoder at this size."""
    known = family(m)
    return known.nearest(m.parameters_billion) if known else _typical(m.parameters_billion)


def ffn_width(w: Workload) -> int:
    """The SwiGLU width (config.json's intermediate_size): model.intermediate_size, else the usual decoder's at this
    size, in proportion where the config sets its own hidden_size (a multiple of 8)."""
    return _ffn_width(w.model)


@cache
def _ffn_width(m) -> int:
    *_, hidden, width = _typical_of(m)
    if m.intermediate_size:
        return m.intermediate_size
    if m.hidden_size and m.hidden_size != hidden:
        return max(8, 8 * round(width * m.hidden_size / hidden / 8))
    return width


def shape_line(w: Workload) -> str:
    """The decoder's shape as sized, each assumed value said."""
    m = w.model
    layers, heads, kv_heads, hidden = model_shape(w)
    assumed = [f for f, v in (("layers", m.layers), ("attention_heads", m.attention_heads), ("kv_heads", m.kv_heads),
                              ("hidden_size", m.hidden_size), ("intermediate_size", m.intermediate_size),
                              ("vocab_size", m.vocab_size)) if v is None]
    known = family(m)
    line = (f"{layers} layers, {heads} attention heads, {kv_heads} KV heads, hidden {hidden}, FFN width "
            f"{ffn_width(w)}, vocabulary {vocab(m):,}")
    if assumed:
        basis = (f"model.family {known.name}'s published shape nearest {m.parameters_billion:g}B and its vocabulary "
                 f"({known.source})") if known else \
            (f"the usual decoder at {m.parameters_billion:g}B, from Llama-family config.json files, and Llama 2's "
             "vocabulary (set model.family or model.vocab_size for another)")
        line += (f" ({', '.join('model.' + f for f in assumed)} assumed: {basis}"
                 + ("; the depth fitted to model.parameters_billion"
                    if m.layers is None and layers != _typical_of(m)[0] else "") + ")")
    return line


def model_lines(w: Workload) -> tuple[str, ...]:
    """What the plan says about the model: its architecture and why, and a decoder's shape as sized."""
    kind, why = architecture(w)
    lines = [f"architecture {kind} ({why})"]
    if kind == "decoder":
        lines.append(f"decoder shape: {shape_line(w)}")
        if w.training.init_from:
            lines.append(f"fine-tuned from {w.training.init_from}: the trainer builds the base's own config.json "
                         "shape at run time (examples/slurm/finetune.py); the plan's memory and time are sized for "
                         "the shape above")
    return tuple(lines)


def attention_heads(w: Workload) -> tuple[int, bool]:
    """(heads, assumed): the config's value, or the usual decoder's at this size."""
    return model_shape(w)[1], w.model.attention_heads is None


# Inference in fp16/bf16 holds 2 B/param of weights; CPU serving usually runs fp32 (4 B/param).
SERVE_BYTES_PER_PARAM = 2
CPU_BYTES_PER_PARAM = 4


# Keep a fifth of accelerator memory for activations, KV cache and fragmentation.
MEMORY_HEADROOM = 0.8


def serving_fits(parameters_billion: float, memory_gib: float, bytes_per_param: float = SERVE_BYTES_PER_PARAM) -> bool:
    return parameters_billion * 1e9 * bytes_per_param / 2**30 <= memory_gib * MEMORY_HEADROOM
