"""The fine-tuning recipe (finetune.yaml): a full supervised fine-tune's learning rate, global batch, weight decay,
warmup and epochs, each figure with its sources. Read by the planner (planning/finetune_recipe.py); the trainer gets
the same figures in the layout (examples/slurm/finetune.py reads the file itself only without a planned layout)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..packaged import read_packaged_yaml

PATH = Path(__file__).parent / "finetune.yaml"


@dataclass(frozen=True)
class FinetuneRecipe:
    """A published fine-tuning recipe's hyperparameters (catalog/finetune.yaml), with their sources."""
    learning_rate: float
    global_batch_sequences: int
    global_batch_sequence_length: int
    weight_decay: float
    warmup_ratio: float
    epochs: float
    sources: dict  # figure -> "title <url>; ..." of the sources it names
    as_of: str

    @property
    def global_batch_tokens(self) -> int:
        return self.global_batch_sequences * self.global_batch_sequence_length


@cache
def load_finetune_recipe() -> FinetuneRecipe:
    data = read_packaged_yaml(PATH)
    known = data["sources"]
    figures, cited = {}, {}
    for name, fact in data["recipe"].items():
        missing = [key for key in fact["sources"] if key not in known]
        if missing or not fact["sources"]:
            raise ValueError(f"finetune.yaml recipe {name} cites unknown sources {missing}")
        figures[name] = fact["value"]
        cited[name] = "; ".join(f"{' '.join(known[k]['title'].split())} <{known[k]['url']}>" for k in fact["sources"])
    return FinetuneRecipe(**figures, sources=cited, as_of=str(data["as_of"]))
