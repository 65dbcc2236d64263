"""The error types bad input raises: each names the field, the value and what is allowed."""

from __future__ import annotations

import difflib
import sys
from collections.abc import Iterable, Sequence
from typing import TextIO


class ConfigError(Exception):
    """A workload config that cannot be built. `str()` is the one line the user sees."""

    def __init__(self, field: str, value: object, allowed: str, *, reason: str = "not valid") -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        self.reason = reason
        super().__init__(f"{field} = {_show(value)}: {reason}; allowed: {allowed}")

    @property
    def errors(self) -> list[ConfigError]:
        return [self]


class ConfigErrors(ConfigError):
    """Every mistake found in one run: one line each, sorted by field (`str()` joins the lines)."""

    def __init__(self, errors: Iterable[ConfigError]) -> None:
        flat = {str(e): e for err in errors for e in err.errors}  # the same line once
        self._errors = sorted(flat.values(), key=lambda e: (e.field, str(e)))
        assert self._errors, "ConfigErrors needs at least one error"
        first = self._errors[0]
        super().__init__(first.field, first.value, first.allowed, reason=first.reason)
        self.args = ("\n".join(str(e) for e in self._errors),)

    @property
    def errors(self) -> list[ConfigError]:
        return list(self._errors)


def raise_all(errors: Sequence[ConfigError]) -> None:
    """Raise every collected error at once (nothing when there is none)."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ConfigErrors(errors)


def report(exc: ConfigError, file: TextIO = sys.stderr) -> None:
    """What the user sees: `error: FIELD = VALUE: reason; allowed: ...`, one line per mistake."""
    for err in exc.errors:
        print(f"error: {err}", file=file)


def did_you_mean(name: str, candidates: Iterable[str]) -> str | None:
    """The closest valid name to a misspelt one (case and one or two letters off), if any."""
    candidates = list(candidates)
    lowered = {c.lower(): c for c in candidates}
    if name.lower() in lowered:
        return lowered[name.lower()]
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.75)
    if close:
        return close[0]
    # A dotted key with one misspelt part: compare the last part with the last parts of the candidates.
    tail = name.rsplit(".", 1)[-1]
    by_tail = {c.rsplit(".", 1)[-1]: c for c in candidates}
    close = difflib.get_close_matches(tail, list(by_tail), n=1, cutoff=0.8)
    return by_tail[close[0]] if close else None


def _show(value: object) -> str:
    # A short list is shown (`['zz9']`), so the user sees which entry is wrong; a long one or a mapping by its kind.
    text = repr(value) if not isinstance(value, (dict, list)) or len(repr(value)) <= 80 else type(value).__name__
    text = text.replace("\n", " ")
    return text if len(text) <= 80 else text[:77] + "..."
