"""Per-team stamping: a teams file -> one validated Team and planned workload per team.

Pure Python like the rest of the planner. Every error names the team and the field:
`teams[vision].allowed_instance_families = [...]: reason; allowed: ...`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..catalog import load_catalog, strip_ml
from ..config.loader import command_args, config_errors, load, repair
from ..config.user_yaml import read_user_yaml, yaml_problem
from ..errors import ConfigError, raise_all
from .planner import Plan, plan

# A team name becomes a stage and the prefix of its stack names (CloudFormation: letters,
# digits and hyphens, starting with a letter; the longest stack name here is InferenceStack).
TEAM_NAME = r"^[a-z][a-z0-9-]{0,30}$"


# An address budget notifications can be sent to (AWS Budgets refuses anything else at deploy time).
EMAIL = r"^[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}$"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Budget(_Frozen):
    monthly_usd: float = Field(gt=0)
    alert_emails: list[str] = Field(min_length=1)  # addresses: checked with the other rules (_rule_errors)


class Team(_Frozen):
    name: str
    account: str | None = Field(default=None, pattern=r"^\d{12}$")
    region: str
    availability_zone: str
    stage: Literal["dev", "prod"] = "dev"
    workload: str
    overrides: dict[str, Any] = {}
    allowed_instance_families: list[str] = Field(min_length=1)
    budget: Budget
    cost_center: str = Field(min_length=1)
    # Who the estate's alarms (endpoint errors and latency, FSx filling up, idle GPUs) email; absent: the budget's.
    alarm_emails: list[str] = []


class TeamsFile(_Frozen):
    teams: list[Team] = Field(min_length=1)


@dataclass(frozen=True)
class StampedTeam:
    team: Team
    plan: Plan
    workload_args: str = ""  # what `python -m workloads submit ... --stage` take for this team's estate

    @property
    def shared_stack(self) -> str:
        """The construct ID of the account's shared stack the team's estate needs deployed first."""
        return shared_stack_id(self.team.account, self.team.region)


def shared_stack_id(account: str | None, region: str) -> str:
    """`Shared-ACCOUNT-REGION` (`Shared-REGION` for teams with no account): the one stack per account and region that
    holds what belongs to no team (stacks/job_logs_stack.py); `cdk deploy 'Shared-*' -c teams=FILE` deploys them."""
    return f"Shared-{account}-{region}" if account else f"Shared-{region}"


def load_teams(path: str, *, only: str | None = None) -> list[StampedTeam]:
    """Every team validated and planned; every mistake in the file reported at once (ConfigErrors)."""
    raw = _read(path)
    entries = raw.get("teams") if isinstance(raw.get("teams"), list) else []
    names = [t.get("name") if isinstance(t, dict) else None for t in entries]

    def show(loc: tuple) -> list[str]:
        if len(loc) >= 2 and loc[0] == "teams" and isinstance(loc[1], int):
            name = names[loc[1]] if loc[1] < len(names) and isinstance(names[loc[1]], str) else loc[1]
            return [f"teams[{name}]", *(str(p) for p in loc[2:])]
        return [str(p) for p in loc]

    errors: list[ConfigError] = []
    try:
        teams = TeamsFile.model_validate(raw).teams
    except ValidationError as exc:
        errors += config_errors(exc.errors(), TeamsFile, show, docs="docs/teams.md")
        teams = _readable_teams(repair(raw, exc.errors(), TeamsFile))
    errors += _rule_errors(teams)
    # Duplicates from the file itself: an entry with other mistakes still takes its name.
    for name in sorted({n for n in names if isinstance(n, str) and names.count(n) > 1}):
        errors.append(ConfigError(f"teams[{name}].name", name, "a name used once", reason="duplicate team name"))
    if only is not None:
        teams = [t for t in teams if t.name == only]
        if only not in names and names:  # a file with no team entry at all is reported under `teams` already
            errors.append(ConfigError("team", only, ", ".join(str(n) for n in names), reason="no such team in " + path))
    stamped, plans = [], {}
    for t in teams:
        try:
            stamped.append(StampedTeam(t, _plan_team(t, folder=Path(path).parent, plans=plans),
                                       workload_args=_team_args(t, folder=Path(path).parent)))
        except ConfigError as exc:
            errors += exc.errors
    raise_all(errors)
    return stamped


def team_names(path: str) -> list[str]:
    """The names a teams file gives its teams, read without planning them (for an error that lists them)."""
    teams = _read(path).get("teams") or []
    return [str(t["name"]) for t in teams if isinstance(t, dict) and "name" in t]


def _read(path: str) -> dict:
    file = Path(path)
    if not file.is_file():
        raise ConfigError("teams", path, "an existing YAML file such as config/teams.yaml", reason="file not found")
    try:
        data = read_user_yaml(file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError("teams", path, "well-formed YAML with each key once",
                          reason=f"malformed YAML at {yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError("teams", path, "a mapping with a list under `teams`", reason="not a mapping")
    return data


def _readable_teams(fixed: dict) -> list[Team]:
    """The entries that validate once repaired; the others' mistakes are already reported."""
    out = []
    for entry in fixed.get("teams") or []:
        try:
            out.append(Team.model_validate(entry))
        except ValidationError:
            continue
    return out


def _rule_errors(teams: list[Team]) -> list[ConfigError]:
    import re

    errors = []
    known = {x.family for x in load_catalog().types.values()}
    for t in teams:
        if not re.match(TEAM_NAME, t.name):
            errors.append(ConfigError(f"teams[{t.name}].name", t.name, "lower-case letters, digits and hyphens, "
                                      "starting with a letter, at most 31 characters", reason="not usable in stack names"))
        if t.stage == "prod" and t.account is None:
            errors.append(ConfigError(f"teams[{t.name}].account", None, "the 12-digit account prod deploys to",
                                      reason="a prod team must name its account"))
        for i, address in enumerate(t.budget.alert_emails):
            if not re.match(EMAIL, address):
                errors.append(ConfigError(f"teams[{t.name}].budget.alert_emails.{i}", address,
                                          "an email address such as team-leads@example.com",
                                          reason="not an email address; AWS Budgets could not notify it"))
        for i, address in enumerate(t.alarm_emails):
            if not re.match(EMAIL, address):
                errors.append(ConfigError(f"teams[{t.name}].alarm_emails.{i}", address,
                                          "an email address such as ml-oncall@example.com",
                                          reason="not an email address; SNS could not notify it"))
        # Every name a team's ML users create starts with TEAM- (constructs_lib/team_ml_users.py: model ARNs carry no
        # tag, so names keep teams apart); a team named like another's prefix would match that team's names.
        for o in teams:
            if o is not t and o.region == t.region and (o.account == t.account or None in (o.account, t.account)) \
                    and o.name.startswith(f"{t.name}-"):
                errors.append(ConfigError(f"teams[{o.name}].name", o.name, f"a name that does not start with "
                                          f"'{t.name}-' in the account and region of team {t.name}",
                                          reason=f"team {t.name}'s users could use its models (names {t.name}-*)"))
        unknown = sorted(set(t.allowed_instance_families) - known)
        if unknown:
            errors.append(ConfigError(f"teams[{t.name}].allowed_instance_families", unknown, ", ".join(sorted(known)),
                                      reason="not instance families of the catalog"))
    return errors


def workload_source(workload: str, folder: Path) -> str:
    """A team's `workload`: a preset name as it is, a file relative to the teams file's folder (as an include is),
    not to wherever the command runs."""
    if not (workload.endswith((".yaml", ".yml")) or "/" in workload) or Path(workload).is_absolute():
        return workload
    return str(folder / workload)


def _team_overrides(t: Team) -> dict[str, Any]:
    return {**t.overrides, "region": t.region, "availability_zone": t.availability_zone}


def _team_args(t: Team, *, folder: Path) -> str:
    """The team's workload as the job commands take it: its file (from here) or preset, and its entry's overrides."""
    return command_args(workload_source(t.workload, folder), _team_overrides(t))


def _plan_team(t: Team, *, folder: Path, plans: dict[str, Plan]) -> Plan:
    """The team's plan; `plans`: those of the file's teams so far, by what they were planned from (teams stamped from
    the same workload, overrides, region and families share one: a plan is frozen, and planning it again for each of
    50 teams was a second of the synthesis)."""
    overrides: Mapping[str, Any] = _team_overrides(t)
    source = workload_source(t.workload, folder)
    key = json.dumps([source, overrides, t.allowed_instance_families], sort_keys=True, default=repr)
    try:
        the_plan = plans.get(key) or plan(load(source, overrides), allowed_families=t.allowed_instance_families)
        plans[key] = the_plan
    except ConfigError as exc:
        def where(e: ConfigError) -> str:  # a missing file: say where it was looked for, and why there
            return e.reason + (f" (looked for {source}: a path in a teams file is relative to the teams file's "
                               f"folder, {folder}/)" if e.field == "workload" and source != t.workload else "")
        raise_all([ConfigError(f"teams[{t.name}].{_team_field(e.field)}", t.workload if e.field == "workload"
                               else e.value, e.allowed, reason=where(e)) for e in exc.errors])
        raise AssertionError("unreachable") from None
    missing = sorted({_family(x) for x in needed_instance_types(the_plan)} - set(t.allowed_instance_families))
    if missing:
        raise ConfigError(f"teams[{t.name}].allowed_instance_families", t.allowed_instance_families,
                          f"add {', '.join(missing)} (the workload needs {', '.join(needed_instance_types(the_plan))})",
                          reason="excludes instance families the workload needs")
    return the_plan


def _team_field(field: str) -> str:
    """Where a workload error lives in the team entry: its own fields, or an override."""
    return field if field in ("region", "availability_zone", "workload", "allowed_instance_families") \
        else f"overrides.{field}"


def needed_instance_types(p: Plan) -> list[str]:
    """Every instance type the team's estate launches (training, inference, notebook)."""
    types = [p.training.instance_type] + [i.instance_type for i in p.inference.values() if i.instance_type]
    if p.workload.notebook is not None:
        types.append(p.workload.notebook.instance_type)
    return sorted({strip_ml(t) for t in types})


def _family(instance_type: str) -> str:
    return strip_ml(instance_type).split(".")[0]
