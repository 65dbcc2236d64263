"""YAML files a user writes (a workload, a teams file), read strictly: a key given twice in one mapping is refused
with both line numbers. PyYAML keeps the last silently, and the mistake then surfaces as an error about another
field, or not at all."""

from __future__ import annotations

from typing import Any


def read_user_yaml(text: str) -> Any:
    """The parsed document; yaml.YAMLError (with problem and problem_mark) for malformed YAML or a repeated key."""
    import yaml  # here: a preset plan comes from the cache and never needs it

    class StrictLoader(yaml.SafeLoader):
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
