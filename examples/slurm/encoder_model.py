"""A BERT encoder with a sequence-classification head, in plain PyTorch with Hugging Face's parameter names (the
names BertForSequenceClassification loads), for examples/slurm/classifier.py beside it and for the serving
application the export carries (code/inference.py imports this file): no `transformers` needed to train or serve.

The architecture is BERT's (Devlin et al. 2018; transformers' BertModel as of 5.23): word, position and token-type
embeddings with LayerNorm; post-norm blocks of multi-head self-attention and a GELU MLP at 4x the width; the pooler
(a tanh over the first token's state) and a linear classifier.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

LAYER_NORM_EPS = 1e-12  # BertConfig.layer_norm_eps
MAX_POSITIONS = 512  # BertConfig.max_position_embeddings (bert-base-uncased config.json)
DROPOUT = 0.1  # hidden_dropout_prob and attention_probs_dropout_prob
INIT_STD = 0.02  # initializer_range


class _Dense(nn.Module):
    """`dense` (+ `LayerNorm`): the module names BertSelfOutput, BertOutput and the pooler use."""

    def __init__(self, inner: int, outer: int, norm: bool) -> None:
        super().__init__()
        self.dense = nn.Linear(inner, outer)
        if norm:
            self.LayerNorm = nn.LayerNorm(outer, eps=LAYER_NORM_EPS)


class _SelfAttention(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.query, self.key, self.value = (nn.Linear(hidden, hidden) for _ in range(3))


class _Attention(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.self = _SelfAttention(hidden)
        self.output = _Dense(hidden, hidden, norm=True)


class Layer(nn.Module):
    def __init__(self, hidden: int, heads: int, intermediate: int) -> None:
        super().__init__()
        self.heads = heads
        self.attention = _Attention(hidden)
        self.intermediate = _Dense(hidden, intermediate, norm=False)
        self.output = _Dense(intermediate, hidden, norm=True)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        a = self.attention.self
        q, k, v = (proj(x).view(b, s, self.heads, h // self.heads).transpose(1, 2) for proj in (a.query, a.key, a.value))
        p = DROPOUT if self.training else 0.0
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p).transpose(1, 2).reshape(b, s, h)
        out = self.attention.output
        x = out.LayerNorm(x + F.dropout(out.dense(context), p, self.training))
        inner = F.gelu(self.intermediate.dense(x))
        return self.output.LayerNorm(x + F.dropout(self.output.dense(inner), p, self.training))


class _Embeddings(nn.Module):
    def __init__(self, vocab: int, hidden: int, positions: int) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, hidden)
        self.position_embeddings = nn.Embedding(positions, hidden)
        self.token_type_embeddings = nn.Embedding(2, hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=LAYER_NORM_EPS)


class _Encoder(nn.Module):
    def __init__(self, layers: int, hidden: int, heads: int, intermediate: int) -> None:
        super().__init__()
        self.layer = nn.ModuleList(Layer(hidden, heads, intermediate) for _ in range(layers))


class _Bert(nn.Module):
    def __init__(self, vocab: int, layers: int, hidden: int, heads: int, intermediate: int, positions: int) -> None:
        super().__init__()
        self.embeddings = _Embeddings(vocab, hidden, positions)
        self.encoder = _Encoder(layers, hidden, heads, intermediate)
        self.pooler = _Dense(hidden, hidden, norm=False)


class EncoderClassifier(nn.Module):
    """BertForSequenceClassification's parameters: `bert.*` and `classifier`. forward(ids, attention_mask) -> logits
    (batch, labels); the mask is 1 for tokens, 0 for padding."""

    def __init__(self, *, vocab: int, layers: int, hidden: int, heads: int, labels: int,
                 intermediate: int | None = None, positions: int = MAX_POSITIONS) -> None:
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden {hidden} is not divisible by {heads} heads")
        self.shape = dict(vocab=vocab, layers=layers, hidden=hidden, heads=heads, labels=labels,
                          intermediate=intermediate or 4 * hidden, positions=positions)
        self.bert = _Bert(vocab, layers, hidden, heads, intermediate or 4 * hidden, positions)
        self.classifier = nn.Linear(hidden, labels)
        self.apply(_init)

    def forward(self, ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        e = self.bert.embeddings
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = e.word_embeddings(ids) + e.position_embeddings(positions)[None] + e.token_type_embeddings.weight[0]
        x = F.dropout(e.LayerNorm(x), DROPOUT, self.training)
        # SDPA's boolean mask: True where a query may attend (every query attends to the real tokens only).
        mask = attention_mask.bool()[:, None, None, :]
        for layer in self.bert.encoder.layer:
            x = layer(x, mask)
        pooled = torch.tanh(self.bert.pooler.dense(x[:, 0]))
        return self.classifier(F.dropout(pooled, DROPOUT, self.training))


def _init(module: nn.Module) -> None:
    """BertPreTrainedModel._init_weights: normal(0, 0.02) weights, zero biases, LayerNorm at one and zero."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=INIT_STD)
        if getattr(module, "bias", None) is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


def hf_config(model: EncoderClassifier, id2label: dict[int, str], *, pad_id: int, dtype: str) -> dict:
    """config.json for BertForSequenceClassification: the shape, and the labels the serving side names."""
    s = model.shape
    return {"architectures": ["BertForSequenceClassification"], "model_type": "bert", "vocab_size": s["vocab"],
            "hidden_size": s["hidden"], "num_hidden_layers": s["layers"], "num_attention_heads": s["heads"],
            "intermediate_size": s["intermediate"], "hidden_act": "gelu", "hidden_dropout_prob": DROPOUT,
            "attention_probs_dropout_prob": DROPOUT, "max_position_embeddings": s["positions"], "type_vocab_size": 2,
            "initializer_range": INIT_STD, "layer_norm_eps": LAYER_NORM_EPS, "pad_token_id": pad_id,
            "position_embedding_type": "absolute", "classifier_dropout": None, "problem_type": "single_label_classification",
            "id2label": {str(i): name for i, name in id2label.items()},
            "label2id": {name: i for i, name in id2label.items()}, "torch_dtype": dtype}


def from_config(config: dict) -> EncoderClassifier:
    """The model a config.json describes (a base BERT's, or an export's), weights not loaded."""
    if config.get("model_type") != "bert":
        raise ValueError(f"model_type {config.get('model_type')!r}: this encoder builds BERT (model_type bert)")
    for key, allowed in (("hidden_act", "gelu"), ("position_embedding_type", "absolute")):
        if config.get(key, allowed) != allowed:
            raise ValueError(f"config.json {key} {config[key]!r}: this encoder builds {key} {allowed!r}")
    return EncoderClassifier(vocab=config["vocab_size"], layers=config["num_hidden_layers"],
                             hidden=config["hidden_size"], heads=config["num_attention_heads"],
                             labels=len(config.get("id2label") or {0: 0, 1: 1}),
                             intermediate=config.get("intermediate_size"),
                             positions=config.get("max_position_embeddings", MAX_POSITIONS))
