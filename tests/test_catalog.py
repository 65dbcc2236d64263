"""The instance catalog: every fact carries its source and date; field facts are pinned."""

from __future__ import annotations

import re

import pytest

from workloads.catalog import PRICED_REGIONS, load_catalog

CAT = load_catalog()
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def test_families_of_the_seeds_and_successors_are_covered():
    families = {t.family for t in CAT.types.values()}
    assert {"c5", "c6i", "m5", "r5", "g4dn", "g5", "g6", "p3", "p4d", "p5", "trn1", "trn1n", "trn2",
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


@pytest.mark.parametrize("name, efa", [
    ("trn1.32xlarge", 8), ("trn1n.32xlarge", 16), ("trn2.48xlarge", 16), ("p4d.24xlarge", 4), ("p5.48xlarge", 32),
])
def test_efa_interfaces_per_type(name, efa):
    assert CAT.types[name].efa_max_interfaces == efa
    assert CAT.types[name].network_cards == efa


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
