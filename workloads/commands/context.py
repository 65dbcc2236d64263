"""What a synthesis builds, from the CDK context (app.py reads it once and hands it here): one workload, or a teams
file's teams. Pure Python: the stacks never read context; stacks.build builds what this returns."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..config.loader import DEFAULT_WORKLOAD, load, overrides_from_context
from ..errors import ConfigError, Finding, raise_all, strict
from ..planning.capacity import bought_first
from ..planning.planner import Plan, plan
from ..planning.teams import StampedTeam, load_teams


@dataclass(frozen=True)
class Target:
    """One workload's plan (`account` optional), or every stamped team of a teams file (`teams`)."""

    plan: Plan | None = None
    account: str | None = None
    teams: tuple[StampedTeam, ...] = ()

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


def read_context(context: Mapping[str, Any], *, cdk_keys: Iterable[str] = ()) -> Target:
    """A teams file (one stage per team, `team` picks one), or one workload with dotted overrides and an account.
    Every context key must mean something here (`cdk_keys`: cdk.json's own). Raises ConfigError, with every
    mistake at once."""
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
        teams = tuple(load_teams(str(context["teams"]), only=context.get("team")))
        for stamped in teams:
            bought_first(stamped.plan.training.purchase, stamped.team.name)
        return Target(teams=teams)
    if context.get("team") is not None:
        raise ConfigError("team", context["team"], "-c teams=config/teams.yaml -c team=NAME",
                          reason="picks a team of a teams file, and no teams file was given")
    planned = plan(load(str(context.get("workload") or DEFAULT_WORKLOAD), overrides))
    bought_first(planned.training.purchase)  # a deployment needs the capacity `plan` says to buy
    return Target(plan=planned, account=context.get("account"))
