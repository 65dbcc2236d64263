"""The instance catalog: every fact carries its source and date; field facts are pinned."""

from __future__ import annotations

import re

import pytest

from workloads.catalog import PRICED_REGIONS, NetworkInterface, load_catalog, network_interfaces
from workloads.planning.candidates import TRAINING_CANDIDATES

CAT = load_catalog()
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def test_families_of_the_seeds_and_successors_are_covered():
    families = {t.family for t in CAT.types.values()}
    assert {"c5", "c6i", "m5", "r5", "g4dn", "g5", "g6", "p3", "p4d", "p5", "p5e", "p5en", "p6-b200", "p6-b300",
            "trn1", "trn1n", "trn2",
            "inf1", "inf2"} <= families


@pytest.mark.parametrize("itype", CAT.types.values(), ids=lambda t: t.name)
def test_every_entry_has_sources_date_and_prices(itype):
    assert itype.sources and all(s in CAT.sources for s in itype.sources)
    assert DATE.match(itype.as_of)
    assert itype.regions
    for region in PRICED_REGIONS:
        if region in itype.regions:
            assert itype.ec2_prices.get(region), f"{itype.name}: no EC2 price in {region}"
    if itype.accelerator:
        assert itype.accelerator.count > 0 and itype.accelerator.memory_gib > 0
        if itype.accelerator.kind != "inferentia":
            assert itype.peak_tflops and itype.peak_tflops_dtype in ("bf16", "fp16")


def test_sources_are_dated_and_addressed():
    for source in CAT.sources.values():
        assert DATE.match(source.checked) and source.url.startswith("https://") and source.title


@pytest.mark.parametrize("name, efa, cards, card0", [
    ("trn1.32xlarge", 8, 8, True), ("trn1n.32xlarge", 16, 16, True), ("trn2.48xlarge", 16, 16, True),
    ("p4d.24xlarge", 4, 4, True), ("p5.48xlarge", 32, 32, True), ("p5e.48xlarge", 32, 32, True),
    ("p5en.48xlarge", 16, 16, True), ("p6-b200.48xlarge", 8, 8, True),
    # EC2 guide: P6-B300 has 17 network cards and its primary card supports only an ENA interface.
    ("p6-b300.48xlarge", 16, 17, False),
])
def test_efa_facts_per_type(name, efa, cards, card0):
    t = CAT.types[name]
    assert (t.efa_max_interfaces, t.network_cards, t.efa_on_card0) == (efa, cards, card0)


EFA_TYPES = [t for t in CAT.types.values() if t.efa_max_interfaces]


@pytest.mark.parametrize("itype", EFA_TYPES, ids=lambda t: t.name)
def test_interfaces_follow_the_ec2_guide_for_every_efa_type(itype):
    """ENA primary (card 0, device 0; never EFA-only), an EFA-only interface at card 0 device 1 where card 0
    carries EFA, one EFA-only interface at device 0 on every further card: as many EFA devices as the type has,
    none on a card that cannot carry one, and one IP address per node."""
    nics = network_interfaces(itype, efa=True)
    slots = [(n.card, n.device) for n in nics]
    assert len(set(slots)) == len(slots) and all(n.card < itype.network_cards for n in nics)
    efa = [n for n in nics if n.kind in ("efa", "efa-only")]
    assert len(efa) == itype.efa_max_interfaces
    assert len({n.card for n in efa}) == len(efa)  # at most one EFA per network card
    with_ip = [n for n in nics if n.kind in ("interface", "efa")]
    assert with_ip == [nics[0]] and (nics[0].card, nics[0].device) == (0, 0)
    if itype.network_cards == 1:
        assert nics == (NetworkInterface(0, 0, "efa"),)
        return
    assert nics[0].kind == "interface"
    assert all(n.kind == "efa-only" for n in efa)
    assert any(n.card == 0 for n in efa) == itype.efa_on_card0
    assert all(n.device == (1 if n.card == 0 else 0) for n in efa)


def test_interfaces_without_efa_are_one_ordinary_interface():
    assert network_interfaces(CAT.types["p5.48xlarge"], efa=False) == (NetworkInterface(0, 0, "interface"),)
    assert network_interfaces(CAT.types["m5.xlarge"], efa=True) == (NetworkInterface(0, 0, "interface"),)


def test_trn1_facts_from_the_seeds():
    trn1 = CAT.types["trn1.32xlarge"]
    assert (trn1.accelerator.count, trn1.accelerator.memory_gib, trn1.network_gbps) == (16, 512, 800)
    assert CAT.types["trn1n.32xlarge"].network_gbps == 1600
    assert trn1.sagemaker_prices["us-west-2"] == 24.725


def test_local_nvme_is_known_for_kms_rule():
    for name in ("g4dn.xlarge", "g5.xlarge", "p4d.24xlarge", "p5.48xlarge"):
        assert CAT.types[name].local_nvme, name
    for name in ("m5.xlarge", "c5.xlarge", "inf2.xlarge"):
        assert not CAT.types[name].local_nvme, name


def test_ml_names_resolve_to_the_same_facts():
    assert CAT.get("ml.g5.xlarge") is CAT.types["g5.xlarge"]
    assert "ml.p4d.24xlarge" in CAT.names(sagemaker=True)


def test_price_outside_recorded_regions_falls_back_and_says_so():
    price = CAT.types["m5.xlarge"].price("eu-west-1", sagemaker=False)
    assert price.region == "us-east-1" and "no eu-west-1 price" in price.note


# ------------------------------------------------------------------ capacity as it is sold (issue 31)

@pytest.mark.parametrize("name", TRAINING_CANDIDATES["large-dl"])
def test_how_each_cluster_type_is_sold_is_recorded_with_its_sources(name):
    """Every type the planner weighs for a cluster records where EC2 sells it on-demand and as Capacity Blocks,
    with its sources; an on-demand offering in a priced region has its price, and a type sold on-demand nowhere has
    no on-demand price at all (its recorded rate is another kind)."""
    t = CAT.types[name]
    assert t.on_demand_regions is not None and t.sold_sources
    assert all(s in CAT.sources for s in t.sold_sources) and set(t.on_demand_regions) <= set(t.regions)
    for region in set(t.on_demand_regions) & {*PRICED_REGIONS, "us-east-2"}:
        assert t.ec2_prices.get(region), f"{name}: sold on-demand in {region} without a price"
    if not t.on_demand_regions:
        assert not any(t.ec2_prices.values())


def test_trn2_is_sold_in_ohio_only_as_capacity_blocks_which_pcs_does_not_run():
    """EC2 User Guide (Capacity Blocks for ML): trn2.48xlarge blocks in US East (Ohio); no on-demand offering in the
    Price List copy read (vantage 2026-08). PCS User Guide (Capacity Blocks limitations): P6-B300, P6-B200, P5en, P5e,
    P5 and P4d only."""
    trn2 = CAT.types["trn2.48xlarge"]
    assert (trn2.on_demand_regions, trn2.capacity_block_regions) == ((), ("us-east-2",))
    assert not trn2.sold_on_demand("us-east-2") and CAT.types["p5.48xlarge"].sold_on_demand("us-east-2")
    assert CAT.pcs_capacity_block_families == {"p4d", "p5", "p5e", "p5en", "p6-b200", "p6-b300"}
    assert CAT.sources[CAT.pcs_capacity_block_source].url == \
        "https://docs.aws.amazon.com/pcs/latest/userguide/capacity-blocks.html"


def test_a_type_without_a_sold_record_is_sold_on_demand_where_it_is_offered():
    m5 = CAT.types["m5.xlarge"]
    assert m5.on_demand_regions is None and m5.sold_on_demand("us-east-1") and not m5.sold_on_demand("mars-1")
