"""Read a workload (preset name or YAML path), apply dotted overrides, validate.

The same function serves app.py (`-c workload=... -c training.instance_type=...`) and
`python -m workloads`. Every failure is a ConfigError naming field, value and what is allowed.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ValidationError

from ..errors import ConfigError, did_you_mean, raise_all
from ..packaged import read_packaged_yaml
from .schema import Workload
from .validators import check

PRESETS_DIR = Path(__file__).parent.parent / "presets"
DEFAULT_WORKLOAD = "huge"


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))


# Context keys that are the app's own, not config fields.
APP_KEYS = ("workload", "teams", "team", "account", "strict")


def load(source: str = DEFAULT_WORKLOAD, overrides: Mapping[str, Any] | None = None) -> Workload:
    """A validated, frozen Workload from a preset name or a YAML file plus dotted overrides.

    Every mistake is reported at once (ConfigErrors): unknown override keys, schema errors, then
    the cross-field rules."""
    raw = _read(source)
    errors: list[ConfigError] = []
    for key, value in (overrides or {}).items():
        try:
            _apply_override(raw, key, value)
        except ConfigError as exc:
            errors.append(exc)
    try:
        workload = Workload.model_validate(raw)
    except ValidationError as exc:
        errors += config_errors(exc.errors(), Workload)
        # The cross-field rules too, on what the user evidently meant. A bad number stands in at the low and then at
        # the high end of its range: a rule's error that holds at both is the user's, one that comes and goes with
        # the stand-in is about the guess (a 1B stand-in model "does not fit in serverless memory") and is dropped.
        runs = [_repaired(raw, exc.errors(), end) for end in ("low", "high")]
        if all(r is not None for r in runs):
            reported = {e.field for e in errors}
            low, high = ([e for e in _rule_errors(r) if e.field not in reported and _PLACEHOLDER not in str(e)]
                         for r in runs)
            errors += [e for e in low if str(e) in {str(h) for h in high}]
        raise_all(errors)
        raise AssertionError("unreachable") from None
    raise_all(errors)
    check(workload)
    return workload


def _rule_errors(workload: Workload) -> list[ConfigError]:
    try:
        check(workload)
    except ConfigError as exc:
        return exc.errors
    return []


def _repaired(raw: dict, errs: list[Mapping[str, Any]], end: str = "low") -> Workload | None:
    """The workload with each bad value dropped and each near-miss key renamed, if that validates (a required number
    stands in at the `end` of its range)."""
    try:
        return Workload.model_validate(repair(raw, errs, Workload, end=end))
    except ValidationError:
        return None


def repair(raw: dict, errs: list[Mapping[str, Any]], root: type[BaseModel], *, end: str = "low") -> dict:
    """A copy of `raw` with each bad value dropped and each near-miss key renamed to what it was meant to be,
    so that the checks after the schema can still run on the rest and report their mistakes too."""
    fixed = copy.deepcopy(raw)
    for err in errs:
        *parents, last = err["loc"] or ("",)
        node: Any = fixed
        for part in parents:
            node = node[part] if isinstance(node, dict) and part in node or \
                isinstance(node, list) and isinstance(part, int) and part < len(node) else None
        if not isinstance(node, dict) or last not in node:
            continue
        value = node.pop(last)
        model = _model_at(list(parents), root)
        if err["type"] == "extra_forbidden":
            guess = did_you_mean(str(last), _field_names(model)) if model else None
            if guess and guess not in node:
                node[guess] = value
        elif model is not None:
            placeholder = _placeholder(model, str(last), value, end=end)
            if placeholder is not None:
                node[last] = placeholder
    return fixed


# The stand-in for a required text field that was wrong (a name, a region): it matches the name pattern, and a
# rule's finding that quotes it is about the stand-in, not the user's config, so it is dropped.
_PLACEHOLDER = "placeholder"


def _placeholder(model: type[BaseModel], name: str, value: Any = None, *, end: str = "low") -> Any:
    """A stand-in for a required number or text that was wrong, so the rules that do not read it can still run
    (their findings on the field itself are dropped: it is reported already). A required choice stands in only for
    the value it evidently misspells ('torch' -> 'pytorch'): any other would make the rules judge a guess."""
    info = next((i for n, i in model.model_fields.items() if (i.alias or n) == name), None)
    if info is None or not info.is_required():
        return None
    if info.annotation in (int, float):
        return _range_end(info, end)
    if get_origin(info.annotation) is Literal:
        return did_you_mean(str(value), [str(a) for a in get_args(info.annotation)])
    return _PLACEHOLDER if info.annotation is str else None


def _range_end(info: Any, end: str) -> float | int:
    """The low or high end of a number field's range (its bounds, or 1 and a million where it has none)."""
    whole = info.annotation is int
    bound = {a: getattr(m, a) for m in info.metadata for a in ("gt", "ge", "lt", "le") if getattr(m, a, None) is not None}
    step = 1 if whole else 0.001
    if end == "low":
        return bound["ge"] if "ge" in bound else bound["gt"] + step if "gt" in bound else 1
    return bound["le"] if "le" in bound else bound["lt"] - step if "lt" in bound else 1_000_000


def command_args(source: str, overrides: Mapping[str, Any]) -> str:
    """What `python -m workloads submit|promote|invoke` take for this workload, ready to paste: the file or preset as
    given and every -c override (the estate was planned with them), each quoted for a POSIX shell."""
    import shlex

    return " ".join([shlex.quote(source), *(f"-c {shlex.quote(f'{k}={v}')}" for k, v in overrides.items())])


def overrides_from_context(context: Mapping[str, Any], *, cdk_keys: Iterable[str] = ()) -> dict[str, Any]:
    """The dotted config overrides among CDK context keys. Every key must be accounted for: a config
    field, one of the app's own keys, or CDK's (feature flags, the CLI's own keys, `cdk_keys` from
    cdk.json). Anything else is a mistake the user would otherwise deploy with, so it is refused."""
    cdk = set(cdk_keys)
    overrides, errors = {}, []
    paths = config_paths()
    for key, value in context.items():
        if key in APP_KEYS or key in cdk or key.startswith(("@aws-cdk", "aws:cdk:")) or key == "cli-telemetry":
            continue
        if key in paths:
            overrides[key] = value
            continue
        guess = did_you_mean(key, [*paths, *APP_KEYS])
        what = "unknown field" if key.split(".", 1)[0] in paths else "unknown context key"
        errors.append(ConfigError(key, _parse_value(value), _allowed_here(key, app_keys=True),
                                  reason=what + (f"; did you mean {guess}?" if guess else "")))
    raise_all(errors)
    return overrides


@cache
def config_paths(model: type[BaseModel] = Workload, prefix: str = "") -> frozenset[str]:
    """Every dotted config field and section (`training`, `training.instance_count`, `inference.async`...)."""
    out: set[str] = set()
    for name, info in model.model_fields.items():
        path = prefix + (info.alias or name)
        out.add(path)
        sub = _submodel(info.annotation)
        if sub is not None:
            out |= config_paths(sub, path + ".")
    return frozenset(out)


def _allowed_here(key: str, *, app_keys: bool = False) -> str:
    """The valid names at the level of a dotted key where it goes wrong."""
    parts = key.split(".")
    model: type[BaseModel] | None = Workload
    for depth, part in enumerate(parts):
        names = _field_names(model)
        if part not in names:
            prefix = ".".join(parts[:depth])
            shown = [f"{prefix}.{n}" if prefix else n for n in names]
            return ", ".join(shown + (list(APP_KEYS) if depth == 0 and app_keys else []))
        model = _model_at([*parts[:depth + 1]])
        if model is None:
            break
    return "the fields in docs/configuration.md"


def _read(source: str) -> dict:
    # A file that exists is read whatever its name; a folder is named as one; a bare word is a preset.
    is_path = source.endswith((".yaml", ".yml")) or "/" in source or \
        Path(source).exists() and source not in preset_names()
    if is_path and Path(source).is_dir():
        found = sorted(str(p) for p in Path(source).glob("*.y*ml"))[:5]
        raise ConfigError("workload", source, "a workload file" + (f", e.g. {', '.join(found)}" if found else
                          " (.yaml), or a preset: " + ", ".join(preset_names())), reason="a folder, not a file")
    if is_path:
        data = _read_user_file(source)
    else:
        path = PRESETS_DIR / f"{source}.yaml"
        if not path.is_file():
            guess = did_you_mean(source, preset_names())
            raise ConfigError("workload", source, ", ".join(preset_names()) + " or a path to a .yaml file",
                              reason="unknown preset" + (f"; did you mean {guess}?" if guess else ""))
        data = read_packaged_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError("workload", str(source), "a YAML mapping with the fields name, region, availability_zone, model, data, ...",
                          reason="the file is empty" if data is None else
                          f"the file holds a {type(data).__name__}, not a mapping")
    return copy.deepcopy(data)


def _read_user_file(source: str) -> Any:
    import yaml  # here, not at the top: a preset plan comes from the cache and never needs it

    from .user_yaml import read_user_yaml, yaml_problem

    path = Path(source)
    if not path.is_file():
        preset = did_you_mean(path.stem, preset_names()) if path.parent == Path(".") else None
        raise ConfigError("workload", source, "an existing YAML file or a preset: " + ", ".join(preset_names()),
                          reason="file not found" + (f"; did you mean the preset {preset}?" if preset else ""))
    try:
        return read_user_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError("workload", source, "well-formed YAML with each key once",
                          reason=f"malformed YAML at {yaml_problem(exc)}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("workload", source, "a readable UTF-8 YAML file", reason=type(exc).__name__) from None


def _parse_value(value: Any) -> Any:
    """Context values arrive as strings: '16' -> 16, 'null' -> None, 'true' -> True."""
    if not isinstance(value, str):
        return value
    from .user_yaml import read_value  # only when there are overrides (see _read_user_file)

    return read_value(value)


def _apply_override(raw: dict, key: str, value: Any) -> None:
    if key not in config_paths():
        guess = did_you_mean(key, config_paths())
        raise ConfigError(key, _parse_value(value), _allowed_here(key),
                          reason="unknown field" + (f"; did you mean {guess}?" if guess else ""))
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
    parsed = _parse_value(value)
    if parsed is None and _unset_by_null(parts):
        node.pop(parts[-1], None)  # `-c FIELD=null`: absent, so its default (docs/configuration.md)
        return
    node[parts[-1]] = parsed


def _unset_by_null(parts: list[str]) -> bool:
    """An optional field that does not take None itself (a count with a default): null means absent. A field that
    takes None (a section such as inference.realtime, or max_hours) keeps null as its own value."""
    model = _model_at(parts[:-1])
    info = next((i for n, i in (model.model_fields.items() if model else ()) if (i.alias or n) == parts[-1]), None)
    return info is not None and not info.is_required() and type(None) not in get_args(info.annotation) \
        and info.annotation is not type(None)


def _validate(raw: dict) -> Workload:
    try:
        return Workload.model_validate(raw)
    except ValidationError as exc:
        raise_all(config_errors(exc.errors(), Workload))
        raise AssertionError("unreachable") from None


def config_errors(errs: list[Mapping[str, Any]], root: type[BaseModel],
                  show: Callable[[tuple], list[str]] = lambda loc: [str(p) for p in loc],
                  docs: str = "docs/configuration.md") -> list[ConfigError]:
    """pydantic's errors as ConfigErrors. A misspelt key says what it was probably meant to be, and then
    the field it misses is not also reported missing. `show` turns a location into the displayed path; `docs` is the
    page that documents the file's fields."""
    out, explained = [], set()
    for err in errs:
        if err["type"] == "extra_forbidden":
            loc = tuple(err["loc"])
            names = _field_names(_model_at(list(loc[:-1]), root) or root)
            guess = did_you_mean(str(loc[-1]), names)
            if guess:
                explained.add((*loc[:-1], guess))
            out.append(ConfigError(".".join(show(loc)), err.get("input"), ", ".join(names),
                                   reason="unknown field" + (f"; did you mean {guess}?" if guess else "")))
    for err in errs:
        if err["type"] != "extra_forbidden" and not (err["type"] == "missing" and tuple(err["loc"]) in explained):
            out.append(_config_error({**err, "loc": tuple(show(tuple(err["loc"])))}, _field_at(err["loc"], root), docs))
    return out


def _field_at(loc: Sequence[Any], root: type[BaseModel]) -> Any:
    """The pydantic FieldInfo at an error's location (None where it is not one field of a model)."""
    names = [p for p in loc if not isinstance(p, int)]
    model = _model_at(names[:-1], root) if names else None
    if model is None:
        return None
    return next((i for n, i in model.model_fields.items() if (i.alias or n) == names[-1]), None)


def _number_allowed(info: Any) -> str | None:
    """What a number field takes, from its schema: 'a number > 0 and <= 10000' (None: not a number field)."""
    kinds = {a for a in (info.annotation, *get_args(info.annotation)) if a in (int, float)}
    if not kinds:
        return None
    bounds = []
    for m in info.metadata:
        for attr, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="), ("multiple_of", "a multiple of")):
            if getattr(m, attr, None) is not None:
                bound = getattr(m, attr)
                bounds.append(f"{sign} {int(bound)}" if float(bound).is_integer() else f"{sign} {bound:g}")
    what = "a whole number" if kinds == {int} else "a number"
    return what + (" " + " and ".join(bounds) if bounds else "") + (" or null" if type(None) in get_args(
        info.annotation) else "")


_NUMBER_ERRORS = ("float_type", "int_type", "float_parsing", "int_parsing", "finite_number", "int_from_float",
                  "greater_than", "greater_than_equal", "less_than", "less_than_equal", "multiple_of")


def _config_error(err: Mapping[str, Any], info: Any = None, docs: str = "docs/configuration.md") -> ConfigError:
    loc = [str(p) for p in err["loc"]]
    field = ".".join(loc) or "workload"
    value = err.get("input")
    kind = err["type"]
    if kind == "missing":
        return ConfigError(field, None, f"see {docs}", reason="required field is missing")
    if kind == "invalid_key":  # YAML read `{size: 1,5}` as size 1 and a key 5: a comma ends a field inside {...}
        parent = ".".join(loc[:-1]) or "workload"
        return ConfigError(f"{parent}.{value}", value, "field names; inside {...} a comma ends a field, so write a "
                           "decimal number with a point (1.5)", reason="a number where a field name goes")
    if kind == "literal_error":
        return ConfigError(field, value, err["ctx"]["expected"], reason="not a known value")
    if kind == "value_error":
        # The schema's own checks say what is allowed after "; allowed: " (docs/configuration.md otherwise).
        reason, _, allowed = str(err["msg"]).removeprefix("Value error, ").partition("; allowed: ")
        return ConfigError(field, value, allowed or f"see {docs}", reason=reason)
    numbers = _number_allowed(info) if info is not None and kind in _NUMBER_ERRORS else None
    if kind.endswith("_type") and isinstance(value, bool):
        return ConfigError(field, value, numbers or str(err["msg"]).removeprefix("Input should be "),
                           reason="a boolean is not a number or a string here")
    if numbers:
        reason = ("not finite" if kind == "finite_number" else
                  _text_for_number(value) if isinstance(value, str) else "no value" if value is None else
                  "not a whole number" if kind == "int_from_float" or isinstance(value, float) and kind == "int_type"
                  else "out of range" if kind not in ("float_type", "int_type") else "not a number")
        return ConfigError(field, value, numbers, reason=reason)
    section = _submodel(info.annotation) if info is not None else None
    if kind in ("model_type", "model_attributes_type", "dict_type") and section is not None:
        return ConfigError(field, value, "a section with the fields " + ", ".join(_field_names(section)),
                           reason="not a section")
    if kind in ("list_type", "too_short") and section is not None:
        least = f"at least {err.get('ctx', {}).get('min_length', 1)} " if kind == "too_short" else ""
        return ConfigError(field, value, f"a list of {least}entries with the fields "
                           f"{', '.join(_field_names(section))} (see {docs})",
                           reason="not a list" if kind == "list_type" else "too few entries")
    if kind == "string_pattern_mismatch" and info is not None and info.description:
        return ConfigError(field, value, info.description, reason="not in the form allowed")
    # Type and range errors: pydantic's own message says what is allowed ("Input should be ...").
    allowed = str(err["msg"]).removeprefix("Input should be ").removeprefix("String should ")
    return ConfigError(field, value, allowed, reason="wrong type or out of range")


def _text_for_number(value: str) -> str:
    """Why a text is not a number, with the likely fix: a decimal comma, or quotes."""
    if re.fullmatch(r"[+-]?\d+,\d+", value.strip()):
        return f"a decimal comma (write {value.strip().replace(',', '.')})"
    return "text, not a number (write it unquoted)"


def _field_names(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def _submodel(annotation: Any) -> type[BaseModel] | None:
    """The model inside an annotation (`Model`, `Model | None`, `list[Model]`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _submodel(arg)
        if found is not None:
            return found
    return None


def _model_at(loc: list, root: type[BaseModel] = Workload) -> type[BaseModel] | None:
    """The pydantic model at a location (list indices are skipped), walking Optional and list annotations."""
    model: type[BaseModel] = root
    for part in loc:
        if isinstance(part, int):
            continue
        fields = {info.alias or name: info for name, info in model.model_fields.items()}
        if part not in fields:
            return None
        found = _submodel(fields[part].annotation)
        if found is None:
            return None
        model = found
    return model
