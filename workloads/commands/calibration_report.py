"""`plan --calibrate`'s section of the plan: the calibration job's measured speed beside the planned one."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from ..planning.planner import Plan
from .report import _console, _hours, money


def print_calibration(p: Plan, c, console: Console | None = None) -> None:
    """The calibration job's measured speed beside the plan's, and the run recomputed from it."""
    console = console or _console()
    e = p.training.estimate
    console.print("[bold]Calibration (measured)[/bold]")
    for w in c.warnings:
        console.print(f"  [yellow]WARNING[/yellow] {escape(w)}")
    planned = (f"planned {e.utilisation:.1%} likely ({e.utilisation_range[0]:.1%} to {e.utilisation_range[1]:.1%})"
               if e.utilisation is not None and e.utilisation_range else "planned: no utilisation estimate")
    mfu = "-" if c.mfu is None else f"{c.mfu:.1%}"
    console.print(f"  MFU measured {mfu} beside {planned}: {c.verdict}")
    console.print(f"  {c.measured_tokens_s:,.0f} tokens/s as measured; {c.tokens_s:,.0f} tokens/s of the plan's model "
                  f"on its {p.training.instance_count} node(s)")
    if c.hours is not None:
        planned_h = (f"planned {_hours(e.hours)} likely, {_hours(e.hours_range[0])} to {_hours(e.hours_range[1])}"
                     if e.hours_range else f"planned {_hours(e.hours)}")
        console.print(f"  run at the measured rate: {_hours(c.hours)} = {money(c.usd_total)} "
                      f"({planned_h} = {money(e.usd_total)})")
