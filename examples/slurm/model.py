"""The model examples/slurm/train.py trains, beside it: Llama (RMSNorm, SwiGLU, rotary positions, grouped-query
attention) with Hugging Face's parameter names, so its state dict is a LlamaForCausalLM's."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint as recompute

from hf_export import NORM_EPS, ROPE_THETA  # beside this script


def llama_intermediate(hidden: int) -> int:
    """SwiGLU width by Llama 3's rule (meta-llama/llama3 model.py FeedForward): 4096 -> 14336, 8192 -> 28672."""
    width = int(1.3 * int(2 * 4 * hidden / 3))
    return 1024 * -(-width // 1024) if hidden >= 1024 else 8 * -(-width // 8)


class RMSNorm(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = NORM_EPS  # a base model's rms_norm_eps where one is fine-tuned (Llama.__init__)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wide = x.float()  # once: autograd keeps one fp32 copy of the input for backward, not two
        normed = wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * normed.to(x.dtype)

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def inverse_frequencies(head_dim: int, device: torch.device, theta: float = ROPE_THETA,
                        scaling: dict | None = None) -> torch.Tensor:
    """RoPE's inverse frequencies; with Llama 3.1+'s rope_scaling (rope_type llama3) the long wavelengths are divided
    by `factor` and the band between them smoothly interpolated, as Meta's reference (meta-llama/llama-models
    models/llama3/model.py apply_scaling) and transformers' _compute_llama3_parameters do."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).to(device, torch.float32) / head_dim)
    if not scaling:
        return inv
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > old / low, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old / high) * ~(wavelen > old / low)
    return torch.where(medium, smoothed, scaled)


def rotary(seq: int, head_dim: int, device: torch.device, theta: float = ROPE_THETA,
           scaling: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary angles, halves repeated (Hugging Face's Llama layout)."""
    inv = inverse_frequencies(head_dim, device, theta, scaling)
    angles = torch.outer(torch.arange(seq, device=device, dtype=torch.float32), inv)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = cos.to(q.dtype), sin.to(q.dtype)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        # Grouped-query attention: each key/value head serves heads / kv_heads query heads. SDPA's enable_gqa reads
        # the shared K/V in place (no repeat_interleave copy of K and V, heads / kv_heads times their size).
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.heads != self.kv_heads)
        return self.o_proj(out.transpose(1, 2).reshape(b, s, -1))


class MLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))  # SwiGLU


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int, intermediate: int) -> None:
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(hidden), RMSNorm(hidden)
        self.self_attn, self.mlp = Attention(hidden, heads, kv_heads), MLP(hidden, intermediate)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    def __init__(self, *, vocab: int, layers: int, hidden: int, heads: int, kv_heads: int, intermediate: int) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(Block(hidden, heads, kv_heads, intermediate) for _ in range(layers))
        self.norm = RMSNorm(hidden)


class Llama(nn.Module):
    def __init__(self, *, vocab: int, layers: int, hidden: int, heads: int, kv_heads: int, intermediate: int,
                 recompute_blocks: bool, rows: int = 0, rope_theta: float = ROPE_THETA,
                 norm_eps: float = NORM_EPS, rope_scaling: dict | None = None) -> None:
        super().__init__()
        self.model = Body(vocab=rows or vocab, layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
                          intermediate=intermediate)
        self.lm_head = nn.Linear(hidden, rows or vocab, bias=False)
        self.head_dim, self.recompute_blocks = hidden // heads, recompute_blocks
        self.vocab_parallel = False  # tensor parallel: the logits come out split over the vocabulary (DTensor)
        self.vocab = vocab  # the tokenizer's; the embedding and head may have more rows (padded for tensor parallel)
        self.vocab_mask = None  # -inf on the padding logits (recipe.tensor_parallel), split as the logits are
        self.rope_theta, self.rope_scaling = rope_theta, rope_scaling
        for norm in (m for m in self.modules() if isinstance(m, RMSNorm)):
            norm.eps = norm_eps

    @property
    def blocks(self) -> nn.ModuleList:
        return self.model.layers

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.model.embed_tokens(tokens)
        cos, sin = rotary(tokens.shape[1], self.head_dim, x.device, self.rope_theta, self.rope_scaling)
        for block in self.model.layers:
            # Activation checkpointing where the plan's layout needs it (its estimate counts the second forward).
            if self.recompute_blocks and self.training:
                x = recompute(block, x, cos, sin, use_reentrant=False)
            else:
                x = block(x, cos, sin)
        logits = self.lm_head(self.model.norm(x))
        return logits if self.vocab_mask is None else logits + self.vocab_mask
