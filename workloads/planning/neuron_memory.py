"""What an LLM occupies on each NeuronCore when vLLM on Neuron (optimum-neuron's NxD Inference backend) serves it.

A tensor-parallel rank is one NeuronCore (16 GiB of an Inferentia2 chip's 32). NxD Inference shards attention by
heads (catalog/neuron_serving.yaml `nxd_heads`, optimum-neuron gqa.py): the query heads are padded up to a multiple of
the degree; the KV heads are replicated to one a rank when the degree is a multiple of them, else the model becomes
multi-head attention (as many KV heads as padded query heads). Each rank holds its share of the weights, padded and
replicated the same way, and a KV cache compiled for the whole batch x sequence length in the model's dtype
(kv_cache_manager.py). So a degree that is not a multiple of the KV heads (12 for a 70B with 8) multiplies the cache
by the heads it invents: the memory check is per core, with those heads counted.
"""

from __future__ import annotations

from ..config.model import model_shape
from ..config.schema import Workload
from . import estimates as est


def head_counts(degree: int, heads: int, kv_heads: int) -> tuple[int, int]:
    """(query heads, KV heads) after NxD Inference shards them over `degree` ranks (get_shardable_head_counts)."""
    padded = -(-heads // degree) * degree
    if heads == kv_heads:  # multi-head attention: K and V follow the padded query heads
        return padded, padded
    if kv_heads >= degree and kv_heads % degree == 0:
        return padded, kv_heads
    return padded, degree if degree % kv_heads == 0 else padded


def weights_gib(w: Workload, degree: int) -> float:
    """The weights on all `degree` cores: the model's, plus the padded query and output projections and the
    replicated K and V projections (each head is hidden x head size)."""
    layers, heads, kv_heads, hidden = model_shape(w)
    q, kv = head_counts(degree, heads, kv_heads)
    added = layers * hidden * (hidden // heads) * (2 * (q - heads) + 2 * (kv - kv_heads))
    return (w.model.parameters_billion * 1e9 + added) * est.SERVE_BYTES_PER_PARAM / 2**30


def kv_cache_gib(w: Workload, degree: int, batch: int) -> float:
    """The compiled KV cache on all `degree` cores: batch x max_total_tokens x (K and V) x layers x the KV heads after
    sharding x head size, in the model's dtype (the cache's dtype is the weights')."""
    layers, heads, kv_heads, hidden = model_shape(w)
    _, kv = head_counts(degree, heads, kv_heads)
    tokens = w.inference.generation.max_total_tokens
    return batch * tokens * 2 * layers * kv * (hidden // heads) * est.SERVE_BYTES_PER_PARAM / 2**30


def per_core_gib(w: Workload, degree: int, batch: int) -> float:
    """Weights plus compiled KV cache on one core (every rank holds an equal share)."""
    return (weights_gib(w, degree) + kv_cache_gib(w, degree, batch)) / degree


def kv_per_token_bytes(w: Workload, degree: int) -> float:
    """KV bytes a token adds over all cores, with the heads sharding adds (what decode streams)."""
    return kv_cache_gib(w, degree, 1) * 2**30 / w.inference.generation.max_total_tokens


def basis(w: Workload, degree: int, batch: int) -> str:
    _, heads, kv_heads, _ = model_shape(w)
    q, kv = head_counts(degree, heads, kv_heads)
    how = "as is" if kv == kv_heads else (f"replicated to {kv}" if kv == degree else
                                          f"converted to multi-head attention: {kv}")
    return (f"{per_core_gib(w, degree, batch):.1f} GiB a NeuronCore: {weights_gib(w, degree) / degree:.1f} of weights and "
            f"{kv_cache_gib(w, degree, batch) / degree:.1f} of KV cache; {heads} query heads padded to {q}, {kv_heads} "
            f"KV heads {how} at tensor parallel {degree} (NxD Inference, optimum-neuron-gqa)")
