"""Fields a workload of this kind does not read: set, they change nothing, and a user who set one believes it did
(issue 43: `training.max_hours: 1e-7` on an XGBoost workload planned an 18-minute run without a word; classic ML now
takes max_hours as a limit its candidates must meet, deep learning sizes its cluster by it). Each entry
says which workloads read the field; tests/test_ignored_fields.py checks that setting one on another kind leaves the
plan unchanged."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from pydantic import BaseModel

from ..errors import WARNING, Finding
from .schema import CLASSIC_ML, Workload


def _deep_learning(w: Workload) -> bool:
    return w.model.framework not in CLASSIC_ML


def _decoder(w: Workload) -> bool:
    from .model import architecture
    return architecture(w)[0] == "decoder"


def _serves_a_decoder(w: Workload) -> bool:
    return w.inference.serve and _decoder(w)


# field prefix -> (the workloads that read it, as the warning names them; whether this one does)
READ_BY: dict[str, tuple[str, Callable[[Workload], bool]]] = {
    "training.precision": ("deep learning on accelerators", _deep_learning),
    "training.sequence_length": ("deep learning", _deep_learning),
    "training.global_batch_tokens": ("deep learning", _deep_learning),
    "data.tokens_billion": ("deep learning", _deep_learning),
    "model.layers": ("a decoder (LLM) model", _decoder),
    "model.hidden_size": ("a decoder (LLM) model", _decoder),
    "model.kv_heads": ("a decoder (LLM) model", _decoder),
    "model.intermediate_size": ("a decoder (LLM) model", _decoder),
    "model.vocab_size": ("a decoder (LLM) model", _decoder),
    "inference.generation": ("a decoder (LLM) served from an endpoint", _serves_a_decoder),
}


def _set_fields(model: BaseModel, prefix: str = "") -> Iterator[tuple[str, object]]:
    """Every field the user set (in the file or with -c), dotted, with its value."""
    for name in model.model_fields_set:
        info = type(model).model_fields[name]
        value = getattr(model, name)
        path = prefix + (info.alias or name)
        yield path, value
        if isinstance(value, BaseModel):
            yield from _set_fields(value, path + ".")


def ignored_fields(w: Workload, cat: object = None) -> list[Finding]:
    """A WARNING for each field set that this workload does not read, naming who does."""
    out = []
    for path, value in _set_fields(w):
        for prefix, (readers, reads) in READ_BY.items():
            if (path == prefix or path.startswith(prefix + ".") and prefix == "inference.generation") \
                    and value is not None and not reads(w):
                out.append(Finding(WARNING, path, value, f"not read for this workload ({w.model.framework}, "
                                   f"{'training only' if not w.inference.serve else 'served'}): only {readers} "
                                   "uses it; remove it, or it changes nothing"))
                break
    return out
