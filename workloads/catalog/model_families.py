"""Decoder families (model_families.yaml): each family's vocabulary, rotary embedding, context and tied embeddings,
and the shape of its published sizes, from their config.json. model.family names one; config/model.py sizes from it."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..packaged import read_packaged_yaml

PATH = Path(__file__).parent / "model_families.yaml"
# The model_type examples/slurm/train.py builds (and finetune.py reads as a base).
TRAINER_MODEL_TYPE = "llama"


@dataclass(frozen=True)
class Family:
    """A model family's published architecture (catalog/model_families.yaml): vocabulary, RoPE, and shapes by size."""
    name: str
    model_type: str
    vocab_size: int
    rope_theta: float
    rope_scaling: dict | None
    max_position_embeddings: int
    tie_word_embeddings: bool
    sizes: tuple[tuple[float, tuple[int, int, int, int, int]], ...]  # (billions, (layers, heads, kv, hidden, width))
    source: str

    def nearest(self, parameters_billion: float) -> tuple[int, int, int, int, int]:
        """The published size nearest to `parameters_billion` (by ratio): its (layers, heads, kv, hidden, width)."""
        return min(self.sizes, key=lambda s: abs(s[0] / parameters_billion - 1))[1]

    def published(self, parameters_billion: float, tolerance: float) -> bool:
        """Whether `parameters_billion` is one of the published sizes (within `tolerance`, a share)."""
        return any(abs(b / parameters_billion - 1) <= tolerance for b, _ in self.sizes)


@cache
def load_families() -> dict[str, Family]:
    data = read_packaged_yaml(PATH)
    return {name: Family(
        name=name, model_type=raw["model_type"], vocab_size=int(raw["vocab_size"]),
        rope_theta=float(raw["rope_theta"]), rope_scaling=raw["rope_scaling"],
        max_position_embeddings=int(raw["max_position_embeddings"]),
        tie_word_embeddings=bool(raw["tie_word_embeddings"]),
        sizes=tuple(sorted((float(b), tuple(int(v) for v in shape)) for b, shape in raw["sizes"].items())),
        source=raw["source"]) for name, raw in data["families"].items()}
