"""Per-team stamping: a teams file -> one validated Team and planned workload per team.

Pure Python like the rest of the planner. Every error names the team and the field:
`teams[vision].allowed_instance_families = [...]: reason; allowed: ...`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .catalog import load_catalog, strip_ml
from .errors import ConfigError
from .loader import _config_error, load
from .planner import Plan, plan

# A team name becomes a stage and the prefix of its stack names (CloudFormation: letters,
# digits and hyphens, starting with a letter; the longest stack name here is InferenceStack).
TEAM_NAME = r"^[a-z][a-z0-9-]{0,30}$"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Budget(_Frozen):
    monthly_usd: float = Field(gt=0)
    alert_emails: list[str] = Field(min_length=1)


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


class TeamsFile(_Frozen):
    teams: list[Team] = Field(min_length=1)


@dataclass(frozen=True)
class StampedTeam:
    team: Team
    plan: Plan


def load_teams(path: str, *, only: str | None = None) -> list[StampedTeam]:
    raw = _read(path)
    names = [t.get("name") for t in raw.get("teams", []) if isinstance(t, dict)]
    try:
        teams = TeamsFile.model_validate(raw).teams
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = list(err["loc"])
        if len(loc) >= 2 and loc[0] == "teams" and isinstance(loc[1], int) and loc[1] < len(names):
            loc = [f"teams[{names[loc[1]]}]", *loc[2:]]
        raise _config_error({**err, "loc": tuple(loc)}) from None
    _check_names(teams)
    if only is not None:
        teams = [t for t in teams if t.name == only]
        if not teams:
            raise ConfigError("team", only, ", ".join(names), reason="no such team in " + path)
    return [StampedTeam(t, _plan_team(t)) for t in teams]


def _read(path: str) -> dict:
    file = Path(path)
    if not file.is_file():
        raise ConfigError("teams", path, "an existing YAML file such as config/teams.yaml", reason="file not found")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except yaml.YAMLError:
        raise ConfigError("teams", path, "well-formed YAML", reason="malformed YAML") from None
    if not isinstance(data, dict):
        raise ConfigError("teams", path, "a mapping with a list under `teams`", reason="not a mapping")
    return data


def _check_names(teams: list[Team]) -> None:
    import re

    seen: set[str] = set()
    for t in teams:
        if not re.match(TEAM_NAME, t.name):
            raise ConfigError(f"teams[{t.name}].name", t.name, "lower-case letters, digits and hyphens, starting "
                              "with a letter, at most 31 characters", reason="not usable in stack names")
        if t.name in seen:
            raise ConfigError(f"teams[{t.name}].name", t.name, "a name used once", reason="duplicate team name")
        seen.add(t.name)
        if t.stage == "prod" and t.account is None:
            raise ConfigError(f"teams[{t.name}].account", None, "the 12-digit account prod deploys to",
                              reason="a prod team must name its account")
        known = {x.family for x in load_catalog().types.values()}
        unknown = sorted(set(t.allowed_instance_families) - known)
        if unknown:
            raise ConfigError(f"teams[{t.name}].allowed_instance_families", unknown, ", ".join(sorted(known)),
                              reason="not instance families of the catalog")


def _plan_team(t: Team) -> Plan:
    overrides: Mapping[str, Any] = {**t.overrides, "region": t.region, "availability_zone": t.availability_zone}
    try:
        the_plan = plan(load(t.workload, overrides))
    except ConfigError as exc:
        raise ConfigError(f"teams[{t.name}].{exc.field}", exc.value, exc.allowed, reason=exc.reason) from None
    missing = sorted({_family(x) for x in needed_instance_types(the_plan)} - set(t.allowed_instance_families))
    if missing:
        raise ConfigError(f"teams[{t.name}].allowed_instance_families", t.allowed_instance_families,
                          f"add {', '.join(missing)} (the workload needs {', '.join(needed_instance_types(the_plan))})",
                          reason="excludes instance families the workload needs")
    return the_plan


def needed_instance_types(p: Plan) -> list[str]:
    """Every instance type the team's estate launches (training, inference, notebook)."""
    types = [p.training.instance_type] + [i.instance_type for i in p.inference.values() if i.instance_type]
    if p.workload.notebook is not None:
        types.append(p.workload.notebook.instance_type)
    return sorted({strip_ml(t) for t in types})


def _family(instance_type: str) -> str:
    return strip_ml(instance_type).split(".")[0]
