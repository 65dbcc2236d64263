"""Zones named by AZ ID (issue 31): `availability_zone: use2-az2` names one physical zone in every account, where a
zone name (us-east-2b) is mapped to a zone per account in the oldest regions (AWS "AZ IDs" page). Synthesis stays
offline: the subnets are placed by AvailabilityZoneId, and `python -m workloads preflight` reports the name this
account gives the zone."""

from __future__ import annotations

import pytest

from workloads import ConfigError, load, plan
from workloads.catalog import is_zone_id, load_catalog

from .conftest import VARIANTS

BY_ID = VARIANTS["small-zone-ids"]


def test_every_region_the_catalog_plans_for_has_its_az_id_prefix():
    cat = load_catalog()
    assert set(cat.zone_id_prefixes) == set(cat.regions)
    assert all(cat.is_zone_id_of(f"{prefix}-az1", region) for region, prefix in cat.zone_id_prefixes.items())


def test_a_config_may_name_both_zones_by_az_id():
    p = plan(load(*BY_ID))
    assert p.hosting_zones == ("use1-az4", "use1-az6")
    assert all(is_zone_id(z) for z in p.hosting_zones)


def test_the_subnets_are_placed_by_az_id_and_never_by_name(synth):
    subnets = synth(*BY_ID).resources("NetworkStack", "AWS::EC2::Subnet")
    assert len(subnets) == 4
    for lid, r in subnets.items():
        props = r["Properties"]
        assert "AvailabilityZone" not in props, lid  # the two properties exclude each other
        assert props["AvailabilityZoneId"] in ("use1-az4", "use1-az6"), lid
    private = sorted(r["Properties"]["AvailabilityZoneId"] for lid, r in subnets.items() if "private" in lid)
    assert private == ["use1-az4", "use1-az6"]


@pytest.mark.parametrize("overrides, field, reason", [
    ({"availability_zone": "use1-az4"}, "second_availability_zone", "required when availability_zone is an AZ ID"),
    ({"availability_zone": "use1-az4", "second_availability_zone": "us-east-1b"}, "second_availability_zone",
     "one zone is a name and the other an AZ ID"),
    ({"availability_zone": "us-east-1a", "second_availability_zone": "use1-az6"}, "second_availability_zone",
     "one zone is a name and the other an AZ ID"),
    ({"availability_zone": "use1-az4", "second_availability_zone": "use1-az4"}, "second_availability_zone",
     "the same zone as availability_zone"),
    ({"availability_zone": "use2-az1", "second_availability_zone": "use2-az2"}, "availability_zone",
     "not a zone of region us-east-1"),
])
def test_zone_ids_that_cannot_be_built_offline_are_refused_naming_the_field(overrides, field, reason):
    with pytest.raises(ConfigError) as err:
        load("small", overrides)
    line = next(str(e) for e in err.value.errors if e.field == field)
    assert reason in line and "allowed:" in line


def test_a_reservation_zone_in_the_other_form_is_left_to_preflight():
    """A reservation's zone given as a name with the cluster's as an AZ ID: only the account maps one to the other."""
    w = load("huge", {"availability_zone": "use2-az2", "second_availability_zone": "use2-az3",
                      "training.capacity_reservation_id": "cr-0123456789abcdef0",
                      "training.capacity_reservation_az": "us-east-2b", "training.capacity_block": "true"})
    assert w.training.capacity_reservation_az == "us-east-2b"
