"""inference.batch.schedule is checked field by field against EventBridge Scheduler's rules (catalog/schedules.yaml):
each field's range and wildcards come from that table, so a value one past a field's end is refused for every field,
and one at each end is taken (issue 43: `cron(0 25 * * ? *)` passed plan and synth)."""

from __future__ import annotations

import pytest

from workloads import ConfigError, load
from workloads.config.schedules import check_schedule, rules, runs_per_month

FIELDS = rules()["cron"]["fields"]
VALID = ["0", "2", "*", "*", "?", "*"]


def _cron(index: int, value: str) -> str:
    parts = list(VALID)
    parts[index] = value
    if index == 4 and value != "?":
        parts[2] = "?"
    return f"cron({' '.join(parts)})"


@pytest.mark.parametrize("index", range(len(FIELDS)), ids=[f["name"] for f in FIELDS])
def test_every_cron_field_is_refused_past_its_range_and_taken_at_its_ends(index):
    field = FIELDS[index]
    for bad in (field["min"] - 1, field["max"] + 1):
        if bad < 0:
            continue
        with pytest.raises(ConfigError) as err:
            load("small", {"inference.batch.schedule": _cron(index, str(bad))})
        line = str(err.value)
        assert line.startswith("inference.batch.schedule = ") and f"{field['name']} '{bad}'" in line, line
        assert f"{field['min']}-{field['max']}" in line, line
    for good in (field["min"], field["max"], *(field.get("names") or ())[:1]):
        check_schedule(_cron(index, str(good)))


@pytest.mark.parametrize("schedule, says", [
    ("cron(0 2 * * * *)", "exactly one of them must be '?'"),
    ("cron(0 2 ? * ? *)", "exactly one of them must be '?'"),
    ("cron(0 2 * * ?)", "cron has 5 fields, not 6"),
    ("cron(0 2 L * ? *)/", "neither cron"),
    ("cron(0 2 ? * 2#1,3#2 *)", "'#' allows one expression only"),
    ("cron(0 2 ? * MON#6 *)", "not 1-5"),
    ("cron(0 2 * JAN-FOO ? *)", "month 'FOO' is out of range"),
    ("cron(0 2 W * ? *)", "day-of-month"),
    ("cron(0 2 * * ? *,)", "an empty item"),
    ("cron(0 2 ? * MON/2 *)", "'/' is not allowed here"),
    ("cron(0/0 2 * * ? *)", "increment '0'"),
    ("rate(1 hours)", "the unit must be singular"),
    ("rate(5 minute)", "the unit must be plural"),
    ("rate(0 minutes)", "not a whole number >= 1"),
    ("rate(-5 minutes)", "not a whole number >= 1"),
    ("rate(1.5 hours)", "not a whole number >= 1"),
    ("rate(2 weeks)", "'weeks' is not a unit"),
    ("rate(12)", "is not 'VALUE UNIT'"),
    ("at(2027-02-30T02:00:00)", "not a date and time"),
    ("daily", "neither cron(...), rate(...) nor at(...)"),
])
def test_a_schedule_eventbridge_would_refuse_is_refused_naming_what_is_wrong(schedule, says):
    with pytest.raises(ConfigError) as err:
        load("small", {"inference.batch.schedule": schedule})
    line = str(err.value)
    assert line.startswith(f"inference.batch.schedule = {schedule!r}: ") and says in line and "; allowed: " in line, line


@pytest.mark.parametrize("schedule, runs", [
    ("cron(0 2 * * ? *)", 365 / 12), ("cron(0 3 ? * SUN *)", 365 / 12 / 7), ("cron(0 3 ? * MON-FRI *)", 5 * 365 / 12 / 7),
    ("rate(12 hours)", 730 / 12), ("rate(1 day)", 365 / 12), ("cron(0/15 * * * ? *)", 4 * 24 * 365 / 12),
    ("cron(0 2 1,15 * ? *)", 2), ("cron(0 2 LW * ? *)", 1), ("cron(0 2 ? * 2#1 *)", 1),
    ("cron(0 2 1 JAN,JUL ? *)", 2 / 12), ("cron(0 22-1 * * ? *)", 4 * 365 / 12), ("at(2027-01-31T02:00:00)", 1),
])
def test_runs_a_month_follow_every_valid_form(schedule, runs):
    assert runs_per_month(check_schedule(schedule)) == pytest.approx(runs)


def test_the_rules_name_their_source_and_date():
    assert rules()["source"].startswith("https://docs.aws.amazon.com/") and rules()["as_of"]
