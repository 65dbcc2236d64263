"""`python -m workloads cost WORKLOAD [--month YYYY-MM]`: what the estate really cost, beside what the plan said.

Cost Explorer's GetCostAndUsage, filtered by the estate's cost allocation tags (`workload`, and a team's `team`),
grouped by SERVICE, one month; each service's bill beside the plan's monthly lines billed under it (the mapping and
the tolerance in catalog/cost_explorer.yaml), and one training run (the plan's low to high) on the service that runs
it. A line is called out when the bill is outside the plan's range. Read-only: `ce:GetCostAndUsage` is the one call.
boto3 is imported by the caller (Account), never on the planner's path.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import date, timedelta
from functools import cache
from pathlib import Path

from ..errors import ConfigError, raise_all
from ..packaged import read_packaged_yaml
from ..planning.planner import Plan

ABOVE, BELOW, WITHIN = "above the plan's range", "below the plan's range", "within the plan's range"
NOT_PLANNED, NOT_BILLED = "not in the plan", "nothing billed"


@cache
def cost_facts() -> dict:
    """catalog/cost_explorer.yaml: the metric, the plan line -> SERVICE map, the tolerance, with their sources."""
    return read_packaged_yaml(Path(__file__).parent.parent / "catalog" / "cost_explorer.yaml")


def service_of(item: str) -> str | None:
    """The Cost Explorer SERVICE a monthly line of the plan bills under (the longest prefix that names it)."""
    found = [(len(prefix), svc) for prefix, svc in cost_facts()["services"].items() if item.startswith(prefix)]
    return max(found)[1] if found else None


def month_period(month: str | None, today: date) -> tuple[date, date, float]:
    """(first day, the day after the last one asked, the share of the month that covers). The current month runs
    to yesterday, whose costs are in (Cost Explorer's End is exclusive), or is today alone on its first day; a month
    after this one is refused."""
    if month is None:
        start = today.replace(day=1)
    else:
        try:
            year, mon = (int(p) for p in month.split("-"))
            start = date(year, mon, 1)
        except ValueError:
            raise ConfigError("--month", month, "a month as YYYY-MM, e.g. 2026-10", reason="not a month") from None
        if start > today:
            raise ConfigError("--month", month, f"{today:%Y-%m} or earlier", reason="a month that has not begun")
    days = calendar.monthrange(start.year, start.month)[1]
    end = min(start + timedelta(days=days), max(today, start + timedelta(days=1)))
    return start, end, (end - start).days / days


def tag_filter(workload: str, team: str | None) -> dict:
    """The estate's cost allocation tags as a GetCostAndUsage Filter (stacks/estate.py and team_stage.py tag)."""
    tags = [{"Tags": {"Key": "workload", "Values": [workload], "MatchOptions": ["EQUALS"]}}]
    if team:
        tags.append({"Tags": {"Key": "team", "Values": [team], "MatchOptions": ["EQUALS"]}})
    return tags[0] if len(tags) == 1 else {"And": tags}


def request(plan: Plan, *, start: date, end: date, team: str | None) -> dict:
    return {"TimePeriod": {"Start": start.isoformat(), "End": end.isoformat()}, "Granularity": "MONTHLY",
            "Metrics": [cost_facts()["metric"]], "GroupBy": [{"Type": "DIMENSION", "Key": "SERVICE"}],
            "Filter": tag_filter(plan.workload.name, team)}


@dataclass(frozen=True)
class CostLine:
    service: str
    planned_usd: float | None  # None: nothing of the plan bills here
    low_usd: float | None
    high_usd: float | None
    actual_usd: float
    items: tuple[str, ...]  # the plan's lines this service stands for

    @property
    def verdict(self) -> str:
        if self.planned_usd is None:
            return NOT_PLANNED
        assert self.low_usd is not None and self.high_usd is not None
        if self.actual_usd > self.high_usd:
            return ABOVE
        if self.actual_usd < self.low_usd:
            return NOT_BILLED if self.actual_usd < 0.005 else BELOW
        return WITHIN

    @property
    def name_status(self) -> str:
        """Where the SERVICE name of a planned line was read (catalog/cost_explorer.yaml service_names: confirmed,
        public-tools-only, not-found); a line the plan has no part in carries the name Cost Explorer answered with."""
        if self.planned_usd is None:
            return "from Cost Explorer"
        return cost_facts()["service_names"][self.service]["status"]

    @property
    def differs(self) -> bool:
        """Outside the plan's range; a service the plan has no line for only past the floor (CDK's custom-resource
        Lambdas cost cents)."""
        if self.verdict == NOT_PLANNED:
            return self.actual_usd > cost_facts()["floor_usd"]
        return self.verdict != WITHIN


@dataclass(frozen=True)
class CostReport:
    workload: str
    team: str | None
    start: date
    end: date
    share: float  # of the month the period covers (the monthly lines are scaled by it)
    runs: int  # training runs counted in the plan column
    lines: tuple[CostLine, ...]
    estimated: bool  # Cost Explorer says the figures are not final
    unit: str
    request: dict

    @property
    def planned_usd(self) -> float:
        return round(sum(x.planned_usd or 0 for x in self.lines), 2)

    @property
    def actual_usd(self) -> float:
        return round(sum(x.actual_usd for x in self.lines), 2)

    def as_dict(self) -> dict:
        return {"workload": self.workload, "team": self.team, "start": self.start.isoformat(),
                "end": self.end.isoformat(), "share_of_month": round(self.share, 4), "training_runs": self.runs,
                "estimated": self.estimated, "unit": self.unit, "planned_usd": self.planned_usd,
                "actual_usd": self.actual_usd, "request": self.request,
                "lines": [{"service": x.service, "planned_usd": x.planned_usd, "low_usd": x.low_usd,
                           "high_usd": x.high_usd, "actual_usd": x.actual_usd, "verdict": x.verdict,
                           "differs": x.differs, "service_name": x.name_status,
                           "plan_lines": list(x.items)} for x in self.lines]}


def planned_by_service(plan: Plan, *, share: float, runs: int) -> dict[str, tuple[float, float, float, list[str]]]:
    """SERVICE -> (planned, low, high, the plan's lines): a month of the estate scaled by `share`, give or take the
    tolerance (at least `floor_usd`), plus `runs` training runs at the plan's likely figure, from its low to its high
    (the tolerance again where the plan has no range)."""
    facts = cost_facts()
    tol, floor = facts["tolerance"], facts["floor_usd"]
    month: dict[str, float] = {}
    run: dict[str, tuple[float, float, float]] = {}
    items: dict[str, list[str]] = {}
    for line in (plan.monthly.lines if plan.monthly else ()):
        svc = service_of(line.item)
        assert svc is not None, f"no Cost Explorer service for the plan's line {line.item!r} (cost_explorer.yaml)"
        month[svc] = month.get(svc, 0.0) + line.usd * share
        items.setdefault(svc, []).append(line.item)
    e = plan.training.estimate
    if runs and e.usd_total is not None:
        svc = facts["training_run"][plan.training.orchestrator]
        low, high = e.usd_total_range or (e.usd_total * (1 - tol), e.usd_total * (1 + tol))
        run[svc] = (runs * e.usd_total, runs * low, runs * high)
        items.setdefault(svc, []).append(f"{runs} training run{'s' if runs > 1 else ''} "
                                         f"({plan.training.instance_count} x {plan.training.instance_type})")
    out = {}
    for svc in items:
        usd = month.get(svc, 0.0)
        give = max(usd * tol, floor) if svc in month else 0.0
        r_usd, r_low, r_high = run.get(svc, (0.0, 0.0, 0.0))
        out[svc] = (round(usd + r_usd, 2), round(max(0.0, usd - give) + r_low, 2), round(usd + give + r_high, 2),
                    items[svc])
    return out


def billed_by_service(client, params: dict) -> tuple[dict[str, float], bool, str]:
    """SERVICE -> amount for the period, every page; whether any figure is estimated; the unit."""
    metric = params["Metrics"][0]
    billed: dict[str, float] = {}
    estimated, unit, token = False, "USD", None
    while True:
        answer = client.get_cost_and_usage(**params, **({"NextPageToken": token} if token else {}))
        for period in answer.get("ResultsByTime", []):
            estimated = estimated or bool(period.get("Estimated"))
            for group in period.get("Groups", []):
                amount = group["Metrics"][metric]
                unit = amount.get("Unit", unit)
                svc = group["Keys"][0]
                billed[svc] = billed.get(svc, 0.0) + float(amount["Amount"])
        token = answer.get("NextPageToken")
        if not token:
            return billed, estimated, unit


def check_arguments(*, month: str | None, runs: int, today: date) -> None:
    """Every mistake in the command's own arguments at once, before any AWS call."""
    errors = []
    try:
        month_period(month, today)
    except ConfigError as exc:
        errors.append(exc)
    if runs < 0:
        errors.append(ConfigError("--runs", runs, "0 or more training runs in the month", reason="out of range"))
    raise_all(errors)


def cost_report(plan: Plan, client, *, month: str | None, team: str | None, runs: int, today: date) -> CostReport:
    check_arguments(month=month, runs=runs, today=today)
    start, end, share = month_period(month, today)
    params = request(plan, start=start, end=end, team=team)
    billed, estimated, unit = billed_by_service(client, params)
    planned = planned_by_service(plan, share=share, runs=runs)
    lines = []
    for svc in sorted(set(planned) | set(billed), key=lambda s: (-(planned.get(s, (0,))[0]), s)):
        usd, low, high, items = planned.get(svc, (None, None, None, []))
        lines.append(CostLine(svc, usd, low, high, round(billed.get(svc, 0.0), 2), tuple(items)))
    return CostReport(plan.workload.name, team, start, end, share, runs, tuple(lines), estimated, unit, params)
