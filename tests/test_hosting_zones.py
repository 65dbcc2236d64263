"""Hosted endpoints in two zones, training in one (issue 22, item 7).

SageMaker Developer Guide, "Give SageMaker AI Hosted Endpoints Access to Resources in Your Amazon VPC": a hosted
model's VpcConfig should name subnets in at least two Availability Zones. DESIGN.md: the cluster, FSx and capacity
reservations share one zone. Both are checked over every variant's and every team's templates.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from workloads import ConfigError, load, plan
from workloads.catalog import load_catalog

from .conftest import ROOT, VARIANTS


def _subnet_zones(network: dict) -> dict[str, str]:
    """Subnet logical ID -> its zone (a name, or an AZ ID where the config names zones by ID), in a NetworkStack
    template."""
    return {lid: r["Properties"].get("AvailabilityZone") or r["Properties"]["AvailabilityZoneId"]
            for lid, r in network["Resources"].items()
            if r["Type"] == "AWS::EC2::Subnet"}


def _referenced_subnets(node, zones: dict[str, str]) -> set[str]:
    """The NetworkStack subnets a resource names (through the exports CDK makes: ...Ref<logical ID>...)."""
    text = json.dumps(node)
    return {lid for lid in zones if f"Ref{lid}" in text or f'"Ref": "{lid}"' in text}


def _problems(templates: dict[str, dict], first_zone: str) -> list[str]:
    zones = _subnet_zones(templates["NetworkStack"])
    out = []
    nats = [lid for lid, r in templates["NetworkStack"]["Resources"].items() if r["Type"] == "AWS::EC2::NatGateway"]
    if len(nats) != 1:
        out.append(f"expected one NAT gateway, found {nats}")
    for stack, template in templates.items():
        if stack == "NetworkStack":
            continue  # the second zone's subnets and their routes live here
        for lid, r in template["Resources"].items():
            used = {zones[s] for s in _referenced_subnets(r.get("Properties", {}), zones)}
            if r["Type"] == "AWS::SageMaker::Model" and "VpcConfig" in r["Properties"]:
                if len(used) < 2:
                    out.append(f"{stack}/{lid}: a hosted model's subnets span {sorted(used)}: SageMaker asks for two zones")
            elif stack != "InferenceStack" and used - {first_zone}:  # model roles name their models' subnets
                out.append(f"{stack}/{lid} ({r['Type']}): uses {sorted(used)}; training resources stay in {first_zone}")
    return out


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_models_span_two_zones_and_training_keeps_to_one(synth, variant):
    workload, overrides = VARIANTS[variant]
    w = load(workload, overrides)
    problems = _problems(synth(workload, overrides).templates, w.availability_zone)
    assert not problems, "\n".join(problems)


def test_every_team_estate_follows_the_same_rule(teams_synth):
    from workloads.planning.teams import load_teams

    from .conftest import TEAMS_FILE

    zones = {s.team.name: s.team.availability_zone for s in load_teams(str(TEAMS_FILE))}
    problems = [f"{team}: {p}" for team, templates in teams_synth.templates.items()
                for p in _problems(templates, zones[team])]
    assert not problems, "\n".join(problems)


def test_the_second_zone_defaults_to_another_zone_of_the_region_from_the_catalog():
    cat = load_catalog()
    for name in ("small", "intermediate", "huge"):
        w = load(name)
        first, second = plan(w).hosting_zones
        assert first == w.availability_zone and second != first
        assert second.startswith(w.region) and second.removeprefix(w.region) in cat.regions[w.region]
    assert plan(load("huge", {"second_availability_zone": "us-east-2c"})).hosting_zones == ("us-east-2b", "us-east-2c")


@pytest.mark.parametrize("value, reason", [
    ("us-east-2b", "the same zone as availability_zone"),
    ("us-west-2a", "not a zone of region us-east-2"),
    ("us-east-2z", "not a zone of region us-east-2"),
])
def test_a_wrong_second_zone_is_refused_naming_field_value_and_the_allowed_zones(value, reason):
    with pytest.raises(ConfigError) as err:
        load("huge", {"second_availability_zone": value})
    assert str(err.value) == f"second_availability_zone = '{value}': {reason}; hosted endpoints need subnets in two " \
                             "zones of the region; allowed: us-east-2a, us-east-2c"


def test_the_cli_says_it_in_one_line_with_exit_status_2():
    out = subprocess.run([sys.executable, "-m", "workloads", "plan", "huge", "-c", "second_availability_zone=us-east-2b"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        "error: "
        "second_availability_zone = 'us-east-2b': the same zone as availability_zone; hosted endpoints need subnets "
        "in two zones of the region; allowed: us-east-2a, us-east-2c"]
