"""The one error type bad input raises: it names the field, the value and what is allowed."""

from __future__ import annotations


class ConfigError(Exception):
    """A workload config that cannot be built. `str()` is the one line the user sees."""

    def __init__(self, field: str, value: object, allowed: str, *, reason: str = "not valid") -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        self.reason = reason
        super().__init__(f"{field} = {_show(value)}: {reason}; allowed: {allowed}")


def _show(value: object) -> str:
    text = repr(value) if not isinstance(value, (dict, list)) else type(value).__name__
    text = text.replace("\n", " ")
    return text if len(text) <= 80 else text[:77] + "..."
