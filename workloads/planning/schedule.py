"""How often a schedule runs: the runs a month an EventBridge expression makes (batch transform's
inference.batch.schedule, a workload's training.schedule). Pure Python."""

from __future__ import annotations

from ..config.schema import Workload
from ..errors import ConfigError

DAYS_PER_MONTH = 365 / 12
HOURS_PER_MONTH = 730  # AWS's monthly figure for hourly prices (24 x 365 / 12)


def runs_per_month(schedule: str) -> float:
    """Runs a month an EventBridge schedule makes: rate(N unit), or cron(min hour day-of-month month day-of-week
    year) with one time of day (lists in minutes or hours multiply)."""
    body = schedule[schedule.index("(") + 1:-1].split()
    if schedule.startswith("rate("):
        n, unit = int(body[0]), body[1].rstrip("s")
        return HOURS_PER_MONTH / {"minute": 1 / 60, "hour": 1, "day": 24}[unit] / n
    minute, hour, dom, _, dow = body[:5]
    per_day = len(minute.split(",")) * (24 if hour == "*" else len(hour.split(",")))
    if dow not in ("?", "*"):
        days = sum(len(range(*_span(part))) for part in dow.split(","))
        return per_day * days * DAYS_PER_MONTH / 7
    if dom not in ("?", "*"):
        return per_day * len(dom.split(","))
    return per_day * DAYS_PER_MONTH


_WEEKDAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")


def _span(part: str) -> tuple[int, int]:
    def day(x: str) -> int:
        return _WEEKDAYS.index(x.upper()) if x.upper() in _WEEKDAYS else int(x) - 1
    first, _, last = part.partition("-")
    return day(first), day(last or first) + 1


def training_runs_per_month(w: Workload) -> tuple[float | None, str]:
    """(runs a month, what says so) from training.schedule or training.runs_per_month; (None, "") when neither is
    set (one run)."""
    t = w.training
    if t.runs_per_month:
        return t.runs_per_month, "training.runs_per_month"
    if not t.schedule:
        return None, ""
    try:
        return runs_per_month(t.schedule), f"training.schedule {t.schedule}"
    except (ValueError, KeyError, IndexError):
        raise ConfigError("training.schedule", t.schedule, "cron(minute hour day-of-month month day-of-week year) or "
                          "rate(N minutes|hours|days)", reason="not a schedule the plan can count") from None
