"""The plan as `python -m workloads plan` shows it by default: one screen (what is launched and its cost, the pick and
why, each warning in a line, the next commands). Every table, note and source is `--full`'s (report.print_plan)."""

from __future__ import annotations

import shlex

from rich.console import Console
from rich.markup import escape

from ..errors import WARNING, headline
from ..planning.planner import Plan
from .emulator_target import deploy_options
from .report import _console, _hours, money, print_header, print_line, summary

# The stacks a first deploy brings up before the model exists (the InferenceStack's artifact check waits for it).
FIRST_DEPLOY = "TrainStack"


def print_short_plan(p: Plan, console: Console | None = None, *, given: str, context: dict[str, str],
                     budget: dict | None = None) -> None:
    """`given`: the plan command's arguments as typed (the workload and its -c options, quoted), which the next
    commands repeat; `context`: the same as cdk's -c pairs."""
    console = console or _console()
    t, e = p.training, p.training.estimate
    print_header(p, console, budget)
    for line in summary(p, budget)[:-1 if _warnings(p) else None]:  # the count of warnings: their lines follow
        print_line(console, line)

    console.print("[bold]Why this pick[/bold]")
    for line in _why(p):
        print_line(console, line, "  - ")

    warnings = _warnings(p)
    notes = sum(1 for f in p.findings if f.level != WARNING)
    if warnings:
        console.print(f"[bold yellow]{len(warnings)} warning{'s' if len(warnings) != 1 else ''}[/bold yellow] "
                      "(each in full, with its source, under --full)")
        for f in warnings:
            console.print(f"  - {escape(f.field)}: {escape(f.headline)}", soft_wrap=False)

    console.print("[bold]Cost[/bold]")
    run = f"  training: cluster {money(e.usd_per_hour)}/h"
    if e.hours is not None:
        run += f"; {_hours(e.hours)} = {money(e.usd_total)} likely"
    if e.hours_range and e.usd_total_range:
        run += f" ({money(e.usd_total_range[0])} to {money(e.usd_total_range[1])})"
    console.print(run)
    m = p.monthly
    if m is not None:
        console.print(f"  a month of the estate {money(m.usd_month)} over {len(m.lines)} lines"
                      + (f"; with one training run {money(m.headline_usd)}" if m.headline_usd is not None
                         and not m.training_runs else ""))

    console.print("[bold]Next[/bold]")
    rest = [what for what, n in (("the training candidates", len(t.candidates)), ("the estate's monthly lines",
            len(m.lines) if m else 0), ("notes", notes)) if n]
    print_line(console, f"the full plan ({', '.join(rest) or 'every table'}, sources), the account checked against "
                        "it, the first deploy:")
    for command in next_commands(given=given, context=context):
        console.print(f"      {escape(command)}", soft_wrap=True, highlight=False)


def _warnings(p: Plan) -> list:
    return [f for f in p.findings if f.level == WARNING]


def _why(p: Plan) -> list[str]:
    """The decision that picked the type, and what it beat: the runner-up among the rows that fit."""
    t = p.training
    picked = [d for d in t.decisions if d.startswith(f"{t.instance_type}:") or "set by the config" in d]
    lines = picked[:1] or t.decisions[:1]
    chosen = next((c for c in t.candidates if c.chosen), None)
    by_total = chosen is not None and chosen.ranked_by == "cost"  # classic ML ranks by $/h (planning/classic.py)
    rank = (lambda c: c.usd_total) if by_total else (lambda c: c.usd_per_hour)
    # From the pool the pick came from: rows that deploy as they are, where it is one (a row on capacity still to
    # buy, a training plan's, can cost less and is the capacity advice's, not the runner-up).
    pool = [c for c in t.candidates if c.feasible and not c.chosen and rank(c) is not None
            and (c.purchase is None or chosen is None or chosen.purchase is not None)]
    rivals = sorted(pool, key=rank)
    if rivals and chosen is not None and rank(chosen) is not None:
        r = rivals[0]
        gap = rank(r) - rank(chosen)
        more = f"{money(abs(gap))}{'' if by_total else '/h'} {'more' if gap >= 0 else 'less'}"
        label = "cheapest other type" if "set by the config" in lines[0] else "runner-up"
        lines.append(f"{label} {r.count} x {r.instance_type}: {_hours(r.hours)}, {money(r.usd_total)}, "
                     f"{money(r.usd_per_hour)}/h ({more})")
    for ip in p.inference.values():
        on = f" on {ip.instance_type}" if ip.instance_type else ""
        compared = f" ({len(ip.candidates)} compared)" if len(ip.candidates) > 1 else ""
        lines.append(f"{ip.kind}{on}: {headline(ip.reason)}{compared}")
    return lines


def next_commands(*, given: str, context: dict[str, str]) -> list[str]:
    """The commands after the plan, complete as printed: the full plan, the account's check, the first deploy (with
    the emulator's options where this shell talks to it, emulator_target.deploy_options)."""
    cdk = " ".join([*(f"-c {shlex.quote(f'{k}={v}')}" for k, v in context.items()), *deploy_options()])
    first = f"'{context['team']}/{FIRST_DEPLOY}'" if "team" in context else FIRST_DEPLOY
    return [f"python -m workloads plan {given} --full".replace("  ", " "),
            f"python -m workloads preflight {given}".rstrip(),
            f"cdk deploy {first} {cdk}"]
