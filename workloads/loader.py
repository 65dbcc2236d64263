"""Read a workload (preset name or YAML path), apply dotted overrides, validate.

The same function serves app.py (`-c workload=... -c training.instance_type=...`) and
`python -m workloads`. Every failure is a ConfigError naming field, value and what is allowed.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError

from .errors import ConfigError
from .schema import Workload
from .validators import check

PRESETS_DIR = Path(__file__).parent / "presets"
DEFAULT_WORKLOAD = "huge"


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))


def load(source: str = DEFAULT_WORKLOAD, overrides: Mapping[str, Any] | None = None) -> Workload:
    """A validated, frozen Workload from a preset name or a YAML file plus dotted overrides."""
    raw = _read(source)
    for key, value in (overrides or {}).items():
        _apply_override(raw, key, value)
    workload = _validate(raw)
    check(workload)
    return workload


def overrides_from_context(context: Mapping[str, Any]) -> dict[str, Any]:
    """The dotted config overrides among CDK context keys (`training.instance_type`, `region`...)."""
    top = _field_names(Workload)
    return {k: v for k, v in context.items() if k.split(".", 1)[0] in top}


def _read(source: str) -> dict:
    is_path = source.endswith((".yaml", ".yml")) or "/" in source
    if is_path:
        path = Path(source)
        if not path.is_file():
            raise ConfigError("workload", source, "an existing YAML file or a preset: " + ", ".join(preset_names()),
                              reason="file not found")
    else:
        path = PRESETS_DIR / f"{source}.yaml"
        if not path.is_file():
            raise ConfigError("workload", source, ", ".join(preset_names()) + " or a path to a .yaml file",
                              reason="unknown preset")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown position"
        problem = getattr(exc, "problem", None) or "malformed"
        raise ConfigError("workload", str(source), "well-formed YAML", reason=f"malformed YAML at {where}: {problem}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("workload", str(source), "a readable UTF-8 YAML file", reason=type(exc).__name__) from None
    if not isinstance(data, dict):
        raise ConfigError("workload", str(source), "a YAML mapping with the fields name, region, availability_zone, model, data, ...",
                          reason=f"the file holds a {type(data).__name__}, not a mapping")
    return copy.deepcopy(data)


def _parse_value(value: Any) -> Any:
    """Context values arrive as strings: '16' -> 16, 'null' -> None, 'true' -> True."""
    if not isinstance(value, str):
        return value
    try:
        return yaml.safe_load(value)
    except yaml.YAMLError:
        return value


def _apply_override(raw: dict, key: str, value: Any) -> None:
    parts = key.split(".")
    node = raw
    for depth, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(".".join(parts[: depth + 1]), child, "a section with sub-fields",
                              reason=f"cannot set {key} under a plain value")
        node = child
    node[parts[-1]] = _parse_value(value)


def _validate(raw: dict) -> Workload:
    try:
        return Workload.model_validate(raw)
    except ValidationError as exc:
        raise _config_error(exc.errors()[0]) from None


def _config_error(err: Mapping[str, Any]) -> ConfigError:
    loc = [str(p) for p in err["loc"]]
    field = ".".join(loc) or "workload"
    value = err.get("input")
    kind = err["type"]
    if kind == "extra_forbidden":
        parent = _model_at(loc[:-1])
        allowed = ", ".join(_field_names(parent)) if parent else "see the config reference"
        return ConfigError(field, value, allowed, reason="unknown field")
    if kind == "missing":
        return ConfigError(field, None, "see the config reference in README.md", reason="required field is missing")
    if kind == "literal_error":
        return ConfigError(field, value, err["ctx"]["expected"], reason="not a known value")
    if kind == "value_error":
        return ConfigError(field, value, "see the config reference", reason=str(err["msg"]).removeprefix("Value error, "))
    # Type and range errors: pydantic's own message says what is allowed ("Input should be ...").
    allowed = str(err["msg"]).removeprefix("Input should be ").removeprefix("String should ")
    return ConfigError(field, value, allowed, reason="wrong type or out of range")


def _field_names(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _model_at(loc: list[str]) -> type[BaseModel] | None:
    """The pydantic model class at a dotted location, walking Optional[...] annotations."""
    model: type[BaseModel] = Workload
    for part in loc:
        fields = {info.alias or name: info for name, info in model.model_fields.items()}
        if part not in fields:
            return None
        annotation = fields[part].annotation
        candidates = [annotation, *get_args(annotation)]
        found = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if found is None:
            return None
        model = found
    return model
