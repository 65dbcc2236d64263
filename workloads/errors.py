"""The error types bad input raises: each names the field, the value and what is allowed."""

from __future__ import annotations

import difflib
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TextIO

# Severity levels, as ParallelCluster's validators have them: an ERROR refuses (ConfigError, exit 2), a WARNING is
# shown and the build goes on (or refused with --strict / -c strict=true), an INFO explains a choice. Offline, an
# ERROR is a ConfigError; `python -m workloads preflight` reports what the account says as Findings of all three.
ERROR, WARNING, INFO = "ERROR", "WARNING", "INFO"


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


def report(exc: ConfigError, file: TextIO | None = None) -> None:
    """What the user sees: `error: FIELD = VALUE: reason; allowed: ...`, one line per mistake."""
    for err in exc.errors:
        print(f"error: {err}", file=file or sys.stderr)


@dataclass(frozen=True)
class Finding:
    """Advice about a workload that can be built: what it concerns, what to know, and the document that says so."""

    level: str  # WARNING or INFO (ERROR: preflight's, about the account)
    field: str
    value: object
    message: str
    source: str = ""  # title and URL of the document behind the message

    def __str__(self) -> str:
        return f"{self.field} = {_show(self.value)}: {self.message}" + (f" (source: {self.source})" if self.source else "")

    @property
    def headline(self) -> str:
        """The message in a line a terminal shows whole: its first clause (before the first ': ', '; ' or '. '),
        else its first words; the rest is the plan's --full (and --json, whole)."""
        return headline(self.message)

    def as_dict(self) -> dict:
        return {"field": self.field, "message": self.message, "source": self.source}

    def as_error(self) -> ConfigError:
        """--strict: the warning refuses, as an error does (for CI pipelines)."""
        return ConfigError(self.field, self.value, "another value, or leave out --strict / -c strict=true",
                           reason=f"a warning, refused under strict: {self.message}")


HEADLINE_CHARS = 100


def headline(message: str, limit: int = HEADLINE_CHARS) -> str:
    cuts = [i for sep in (": ", "; ", ". ") if (i := message.find(sep)) >= 12]
    first = message[:min(cuts)] if cuts else message
    if len(first) <= limit:
        return first.rstrip(".")
    return first[:first.rfind(" ", 0, limit - 3)].rstrip(" ,;:") + "..."


def report_findings(findings: Iterable[Finding], file: TextIO | None = None, *, errors: bool = False,
                    detail: str = "") -> None:
    """`warning: FIELD = VALUE: message (source: ...)`, one line each (INFO lines are left to the plan); with
    `errors`, `error: ...` lines for ERROR findings too (preflight's). With `detail` (the command that shows each in
    full, e.g. `python -m workloads plan W --full`), each warning is its headline and that command follows once."""
    out = file or sys.stderr
    shown = [f for f in findings if f.level == WARNING or (errors and f.level == ERROR)]
    for f in shown:
        line = f"{f.field} = {_show(f.value)}: {f.headline}" if detail else str(f)
        print(f"{f.level.lower()}: {line}", file=out)
    if detail and shown:
        print(f"  (each in full, with its source: {detail})", file=out)


def repeated_keys(pairs: Sequence[tuple[str, str]]) -> list[ConfigError]:
    """A `-c KEY=VALUE` given twice with different values: the CDK CLI (and a dict) keeps the last silently, so the
    user deploys what they did not mean. The same value twice is harmless. Here, not beside the context it reads:
    `python -m workloads plan` checks its own -c options without importing the teams machinery."""
    values: dict[str, list[str]] = {}
    for key, value in pairs:
        values.setdefault(key, []).append(value)
    return [ConfigError(f"-c {key}", given, f"one -c {key}=VALUE",
                        reason=f"given {len(given)} times with different values; the last would win silently")
            for key, given in values.items() if len(set(given)) > 1]


def strict(findings: Iterable[Finding]) -> None:
    """Raise every warning as an error at once (nothing when there is none)."""
    raise_all([f.as_error() for f in findings if f.level == WARNING])


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
