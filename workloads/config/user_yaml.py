"""YAML files a user writes (a workload, a teams file), read strictly: a key given twice in one mapping is refused
with both line numbers. PyYAML keeps the last silently, and the mistake then surfaces as an error about another
field, or not at all."""

from __future__ import annotations

from typing import Any


# YAML 1.2's numbers: PyYAML reads YAML 1.1, where `1e9` and `1e-7` (no dot, or no sign in the exponent) are strings,
# and a user who wrote a number is then told it is "not a valid number". `.nan`, `.inf` are numbers too (refused later
# as not finite, with the field's range).
_FLOAT_12 = r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"


def _loader(yaml: Any) -> type:
    """A SafeLoader that also reads YAML 1.2 exponent numbers (`1e9`) as floats."""
    import re

    class Loader(yaml.SafeLoader):
        pass
    Loader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(_FLOAT_12), list("-+0123456789."))
    return Loader


def read_value(text: str) -> Any:
    """A `-c KEY=VALUE` value as the workload file would read it ('16' -> 16, '1e9' -> 1e9, 'null' -> None); the text
    itself where it is not YAML."""
    import yaml

    try:
        return yaml.load(text, Loader=_loader(yaml))
    except yaml.YAMLError:
        return text


def read_user_yaml(text: str) -> Any:
    """The parsed document; yaml.YAMLError (with problem and problem_mark) for malformed YAML or a repeated key."""
    import yaml  # here: a preset plan comes from the cache and never needs it

    class StrictLoader(_loader(yaml)):
        def construct_mapping(self, node, deep=False):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r} (first at line {seen[key]}, again at line {line})",
                        key_node.start_mark)
                seen[key] = line
            return super().construct_mapping(node, deep=deep)

    return yaml.load(text, Loader=StrictLoader)


def yaml_problem(exc: Exception) -> str:
    """Where and what: 'line 7, column 3: duplicate key ...'."""
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
    return f"{where}: {getattr(exc, 'problem', None) or 'malformed'}"
