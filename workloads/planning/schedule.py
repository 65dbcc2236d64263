"""How often a workload trains: the runs a month its training.schedule (config/schedules.py counts EventBridge
expressions, as for inference.batch.schedule) or training.runs_per_month makes. Pure Python."""

from __future__ import annotations

from ..config.schedules import runs_per_month
from ..config.schema import Workload
from ..errors import ConfigError

DAYS_PER_MONTH = 365 / 12
HOURS_PER_MONTH = 730  # AWS's monthly figure for hourly prices (24 x 365 / 12)


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
