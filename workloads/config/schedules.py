"""EventBridge Scheduler expressions (inference.batch.schedule), checked field by field against the rules in
workloads/catalog/schedules.yaml (the EventBridge user guides'), and the runs a month one makes.

A schedule EventBridge refuses fails the deployment after the other stacks are up; one it accepts but that never
fires as meant (hour 25 is refused, `cron(0 2 * * * *)` too) is caught here, with the field that is wrong."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from ..packaged import read_packaged_yaml

RULES = Path(__file__).parent.parent / "catalog" / "schedules.yaml"
DAYS_PER_MONTH = 365 / 12
_RATE = re.compile(r"^rate\((?P<body>.*)\)$")
_CRON = re.compile(r"^cron\((?P<body>.*)\)$")
_AT = re.compile(r"^at\((?P<body>.*)\)$")


class ScheduleError(ValueError):
    """What is wrong and what is allowed: `str()` is 'reason; allowed: ...' (the loader's value_error form)."""

    def __init__(self, reason: str, allowed: str) -> None:
        super().__init__(f"{reason}; allowed: {allowed}")


@cache
def rules() -> dict[str, Any]:
    return read_packaged_yaml(RULES)


def check_schedule(text: str) -> str:
    """`text` if EventBridge takes it; ScheduleError naming the part that is wrong otherwise."""
    if not isinstance(text, str):
        raise ScheduleError("not a schedule expression",
                            "cron(MIN HOUR DAY MONTH WEEKDAY YEAR), rate(N UNIT) or at(yyyy-mm-ddThh:mm:ss)")
    if m := _RATE.match(text):
        _rate_minutes(m["body"])
    elif m := _CRON.match(text):
        _cron_fields(m["body"])
    elif m := _AT.match(text):
        from datetime import datetime
        try:
            datetime.strptime(m["body"], rules()["at_format"])
        except ValueError:
            raise ScheduleError(f"at({m['body']}) is not a date and time", "at(yyyy-mm-ddThh:mm:ss), e.g. "
                                "at(2027-01-31T02:00:00)") from None
    else:
        raise ScheduleError("neither cron(...), rate(...) nor at(...)", "cron(0 2 * * ? *) (six fields), "
                            "rate(12 hours) or at(2027-01-31T02:00:00) (see " + rules()["source"] + ")")
    return text


def _rate_minutes(body: str) -> int:
    units = rules()["rate"]["units"]
    allowed = "rate(1 " + "|".join(units) + ") or rate(N " + "|".join(units.values()) + ") with N a whole number >= 1"
    parts = body.split()
    if len(parts) != 2:
        raise ScheduleError(f"rate({body}) is not 'VALUE UNIT'", allowed)
    value, unit = parts
    if not value.isdigit() or int(value) < 1:
        raise ScheduleError(f"rate value {value!r} is not a whole number >= 1", allowed)
    n = int(value)
    singular = {p: s for s, p in units.items()}
    if unit not in units and unit not in singular:
        raise ScheduleError(f"rate unit {unit!r} is not a unit", allowed)
    if (n == 1) != (unit in units):
        want = next(s for s, p in units.items() if unit in (s, p))
        raise ScheduleError(f"rate({body}): the unit must be {'singular' if n == 1 else 'plural'} for {n}",
                            f"rate({n} {want if n == 1 else units[want]})")
    return n * rules()["rate"]["minutes_per_unit"][singular.get(unit, unit)]


def _cron_fields(body: str) -> list[str]:
    spec = rules()["cron"]
    fields = body.split()
    names = [f["name"] for f in spec["fields"]]
    if len(fields) != len(names):
        raise ScheduleError(f"cron has {len(fields)} fields, not {len(names)}",
                            " ".join(names) + ", e.g. cron(0 2 * * ? *)")
    for text, field in zip(fields, spec["fields"]):
        _check_field(text, field)
    dom, dow = fields[2], fields[4]
    if spec["one_of_the_days_is_question_mark"] and (dom == "?") == (dow == "?"):
        raise ScheduleError(f"day-of-month {dom!r} and day-of-week {dow!r}: exactly one of them must be '?'",
                            f"cron({' '.join(fields[:2])} {dom if dom != '?' else '*'} {fields[3]} ? {fields[5]}) or "
                            f"cron({' '.join(fields[:2])} ? {fields[3]} {dow if dow != '?' else '*'} {fields[5]})")
    return fields


def _allowed(field: dict) -> str:
    names = field.get("names")
    values = f"{field['min']}-{field['max']}" + (f" or {names[0]}-{names[-1]}" if names else "")
    return f"{field['name']}: {values}, wildcards {field['wildcards']}"


def _value(part: str, field: dict) -> int:
    names = [n.upper() for n in field.get("names") or ()]
    if part.upper() in names:
        return field["min"] + names.index(part.upper())
    if not part.isdigit() or not field["min"] <= int(part) <= field["max"]:
        raise ScheduleError(f"{field['name']} {part!r} is out of range", _allowed(field))
    return int(part)


def _check_field(text: str, field: dict) -> None:
    wild = set(field["wildcards"].split())
    name = field["name"]

    def refuse(what: str) -> None:
        raise ScheduleError(f"{name} {text!r}: {what}", _allowed(field))
    items = text.split(",")
    if len(items) > 1 and "," not in wild:
        refuse("',' is not allowed here")
    for item in items:
        if item == "":
            refuse("an empty item")
        if item in ("*", "?", "L"):
            if item not in wild:
                refuse(f"{item!r} is not allowed here")
            if item == "?" and len(items) > 1:
                refuse("'?' stands alone")
            continue
        if "#" in item:
            if "#" not in wild:
                refuse("'#' is not allowed here")
            if len(items) > 1:
                refuse("'#' allows one expression only")
            day, _, nth = item.partition("#")
            _value(day, field)
            if not nth.isdigit() or not 1 <= int(nth) <= 5:
                refuse(f"the week of the month {nth!r} is not 1-5")
            continue
        if item.endswith("W") and "W" in wild:  # the weekday nearest a day (or LW: the month's last weekday)
            if item != "LW":
                _value(item[:-1], field)
            continue
        if item.endswith("L") and "L" in wild and name == "day-of-week":  # 6L: the month's last Friday
            _value(item[:-1], field)
            continue
        base, slash, step = item.partition("/")
        if slash:
            if "/" not in wild:
                refuse("'/' is not allowed here")
            if not step.isdigit() or int(step) < 1:
                refuse(f"the increment {step!r} is not a whole number >= 1")
        if base == "*" and slash:
            continue
        first, dash, last = base.partition("-")
        if dash and "-" not in wild:
            refuse("'-' is not allowed here")
        _value(first, field)
        if dash:
            _value(last, field)


def _expand(text: str, field: dict) -> int:
    """How many values of the field a (valid) expression takes, for counting runs."""
    low, high = field["min"], field["max"]
    taken: set[int] = set()
    for item in text.split(","):
        base, _, step = item.partition("/")
        if base in ("*", "?"):
            first, last = low, high
        else:
            a, _, b = base.partition("-")
            first = _value(a, field)
            last = _value(b, field) if b else (high if step else first)
        span = range(first, last + 1) if first <= last else [*range(first, high + 1), *range(low, last + 1)]
        taken |= set(list(span)[::int(step) if step else 1])
    return len(taken)


def runs_per_month(schedule: str) -> float:
    """Runs a month a valid schedule makes (a month of 365/12 days; a day-of-week pattern at 365/12/7 weeks)."""
    check_schedule(schedule)
    if m := _RATE.match(schedule):
        return DAYS_PER_MONTH * 24 * 60 / _rate_minutes(m["body"])
    if _AT.match(schedule):
        return 1.0  # one run, priced in the month it runs
    minute, hour, dom, month, dow, _ = schedule[5:-1].split()
    spec = rules()["cron"]["fields"]
    per_day = _expand(minute, spec[0]) * _expand(hour, spec[1])
    months = _expand(month, spec[3]) / 12
    if dow != "?":
        if "#" in dow or dow.endswith("L") and dow != "L":  # 3#2, 6L: one day a month each
            return per_day * len(dow.split(",")) * months
        days = 1 if dow == "L" else _expand(dow, spec[4])
        return per_day * days * DAYS_PER_MONTH / 7 * months
    special = [d for d in dom.split(",") if d.endswith(("L", "W"))]
    plain = [d for d in dom.split(",") if d not in special]
    days = len(special) + (_expand(",".join(plain), spec[2]) if plain else 0)
    return per_day * min(days, DAYS_PER_MONTH) * months
