"""What a synthesis builds, from the CDK context (app.py reads it once and hands it here): one workload, or a teams
file's teams. Pure Python: the stacks never read context; stacks.build builds what this returns."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..config.loader import DEFAULT_WORKLOAD, command_args, load, overrides_from_context
from ..errors import ConfigError, Finding, raise_all, repeated_keys, strict  # noqa: F401 (repeated_keys: its home was here)
from ..planning.capacity import bought_first
from ..planning.planner import Plan, plan
from ..planning.teams import StampedTeam, load_teams
from .image_pins import with_pin_finding


@dataclass(frozen=True)
class Target:
    """One workload's plan (`account` optional), or every stamped team of a teams file (`teams`)."""

    plan: Plan | None = None
    account: str | None = None
    teams: tuple[StampedTeam, ...] = ()
    workload_args: str = ""  # the workload as the user gave it, with its -c overrides (command_args)

    @property
    def findings(self) -> tuple[Finding, ...]:
        """Every plan's WARNING and INFO findings; a team's name their field (one team file, many plans)."""
        if self.plan is not None:
            return self.plan.findings
        return tuple(replace(f, field=f"{s.team.name}: {f.field}") for s in self.teams for f in s.plan.findings)


def _strict(context: Mapping[str, Any]) -> bool:
    value = context.get("strict", False)
    if value in (True, False, "true", "false"):
        return value in (True, "true")
    raise ConfigError("strict", value, "true or false", reason="-c strict=true refuses warnings as errors")


def context_pairs(argv: Sequence[str]) -> list[tuple[str, str]]:
    """The KEY=VALUE pairs of `-c`/`--context` options in a command line, in order."""
    pairs, args = [], iter(argv)
    for arg in args:
        if arg in ("-c", "--context"):
            assignment = next(args, "")
        elif arg.startswith("--context="):
            assignment = arg.removeprefix("--context=")
        else:
            continue
        key, sep, value = assignment.partition("=")
        if sep:
            pairs.append((key, value))
    return pairs


def cdk_cli_context(pid: int | None = None) -> list[tuple[str, str]] | None:
    """The `-c` pairs of the `cdk` command that runs this app, from its command line (Linux /proc: the CLI hands the
    app only the merged context, so a repeated key is invisible otherwise); None where no such process is found."""
    pid = os.getppid() if pid is None else pid
    for _ in range(4):  # the app's parent is the CLI, or a shell the CLI started
        try:
            argv = [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        if any(Path(a).name in ("cdk", "cdk.js") for a in argv[:3]):
            return context_pairs(argv)
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the parent's id, after the command's name
        if pid <= 1:
            return None
    return None


def read_context(context: Mapping[str, Any], *, cdk_keys: Iterable[str] = (),
                 given: Sequence[tuple[str, str]] = ()) -> Target:
    """A teams file (one stage per team, `team` picks one), or one workload with dotted overrides and an account.
    Every context key must mean something here (`cdk_keys`: cdk.json's own); `given`: the `-c` pairs as typed, where
    known (a key given twice is refused). Raises ConfigError, with every mistake at once."""
    raise_all(repeated_keys(given))
    target = _target(context, cdk_keys=cdk_keys)
    if _strict(context):
        strict(target.findings)  # for CI pipelines: every warning refuses, one line each
    return target


def _target(context: Mapping[str, Any], *, cdk_keys: Iterable[str]) -> Target:
    overrides = overrides_from_context(context, cdk_keys=cdk_keys)
    if context.get("teams"):
        ignored = [ConfigError(key, value, f"overrides in the team's entry of {context['teams']}",
                               reason="-c overrides do not apply to a teams file") for key, value in overrides.items()]
        if context.get("account") is not None:
            ignored.append(ConfigError("account", context["account"], f"account in each team's entry of "
                                       f"{context['teams']}", reason="-c account does not apply to a teams file"))
        raise_all(ignored)
        teams = tuple(replace(s, plan=with_pin_finding(s.plan, workload_args=s.workload_args))
                      for s in load_teams(str(context["teams"]), only=context.get("team")))
        for stamped in teams:
            bought_first(stamped.plan.training.purchase, stamped.team.name)
        return Target(teams=teams)
    workload = context.get("workload", DEFAULT_WORKLOAD)
    if not isinstance(workload, str) or not workload.strip():
        from ..config.loader import preset_names
        raise ConfigError("workload", workload, "-c workload=PRESET (" + ", ".join(preset_names()) + ") or "
                          "-c workload=path/to/file.yaml", reason="empty: name a preset or a workload file")
    if context.get("team") is not None:
        raise ConfigError("team", context["team"], "-c teams=config/teams.yaml -c team=NAME",
                          reason="picks a team of a teams file, and no teams file was given")
    args = command_args(workload, overrides)
    planned = with_pin_finding(plan(load(workload, overrides)), workload_args=args)
    bought_first(planned.training.purchase)  # a deployment needs the capacity `plan` says to buy
    return Target(plan=planned, workload_args=args, account=context.get("account"))
