"""`python -m workloads prices refresh`: the catalog's prices read from the AWS Price List Query API (GetProducts),
written to a dated file the planner reads over the shipped figures.

The responses are tests/fixtures/pricing/get_products.json, in the documented GetProducts shape; the requests go
through botocore's Stubber on a real pricing client, so each one is validated against the pricing service model
(ServiceCode, TERM_MATCH filters, pagination) and must be exactly the one expected.
"""

from __future__ import annotations

import json
from dataclasses import replace

import boto3
import pytest
from botocore.stub import Stubber

from workloads import load, plan
from workloads.catalog import Source, load_catalog
from workloads.catalog import refreshed as refreshed_mod
from workloads.commands import prices

from .conftest import ROOT

FIXTURES = json.loads((ROOT / "tests" / "fixtures" / "pricing" / "get_products.json").read_text())


def _client():
    return boto3.session.Session(aws_access_key_id="x", aws_secret_access_key="x").client(
        "pricing", region_name=prices.PRICING_REGION)


def _expect(stub: Stubber, response: str, service: str, filters: list[dict], token: str | None = None) -> None:
    params = {"ServiceCode": service, "Filters": filters, "FormatVersion": "aws_v1", "MaxResults": 100}
    if token:
        params["NextToken"] = token
    stub.add_response("get_products", FIXTURES[response], params)


def _one_type_catalog(name: str):
    cat = load_catalog()
    return replace(cat, types={name: cat.types[name]})


def test_prices_are_read_from_get_products_with_pagination():
    client = _client()
    with Stubber(client) as stub:
        _expect(stub, "ec2_g5_xlarge_us_east_1", "AmazonEC2", prices.ec2_filters("g5.xlarge", "us-east-1"))
        _expect(stub, "sagemaker_g5_xlarge_us_east_1_page1", "AmazonSageMaker",
                prices.sagemaker_filters("g5.xlarge", "us-east-1"))
        _expect(stub, "sagemaker_g5_xlarge_us_east_1_page2", "AmazonSageMaker",
                prices.sagemaker_filters("g5.xlarge", "us-east-1"), token="page-2")
        result = prices.refresh(client, _one_type_catalog("g5.xlarge"), regions=("us-east-1",), today="2026-11-28")
        stub.assert_no_pending_responses()
    assert result.prices == {"g5.xlarge": {"ec2": {"us-east-1": 1.006}, "sagemaker": {"us-east-1": 1.408}}}
    assert result.as_of == "2026-11-28" and not result.ambiguous and not result.unanswered


def test_the_filters_name_the_hour_the_plan_costs():
    ec2 = {f["Field"]: f["Value"] for f in prices.ec2_filters("p5.48xlarge", "us-west-2")}
    assert ec2 == {"instanceType": "p5.48xlarge", "regionCode": "us-west-2", "operatingSystem": "Linux",
                   "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used",
                   "licenseModel": "No License required"}
    sm = {f["Field"]: f["Value"] for f in prices.sagemaker_filters("p5.48xlarge", "us-west-2")}
    assert sm == {"productFamily": "ML Instance", "instanceName": "ml.p5.48xlarge", "regionCode": "us-west-2",
                  "component": "Hosting"}


def test_two_prices_for_one_filter_are_refused_not_guessed_and_a_silent_list_keeps_the_shipped_figure():
    client = _client()
    with Stubber(client) as stub:
        _expect(stub, "ambiguous_synthetic", "AmazonEC2", prices.ec2_filters("c5.xlarge", "us-east-1"))
        _expect(stub, "empty", "AmazonSageMaker", prices.sagemaker_filters("c5.xlarge", "us-east-1"))
        result = prices.refresh(client, _one_type_catalog("c5.xlarge"), regions=("us-east-1",), today="2026-11-28")
    assert result.prices == {} and result.ambiguous == ["ec2 c5.xlarge us-east-1: [0.1, 0.2]"]
    assert result.unanswered == ["sagemaker c5.xlarge us-east-1"]


def test_the_written_file_is_dated_and_the_catalog_lays_it_over_the_shipped_figures(tmp_path):
    client = _client()
    with Stubber(client) as stub:
        _expect(stub, "empty", "AmazonEC2", prices.ec2_filters("p4d.24xlarge", "us-east-1"))
        _expect(stub, "sagemaker_p4d_us_east_1_synthetic", "AmazonSageMaker",
                prices.sagemaker_filters("p4d.24xlarge", "us-east-1"))
        result = prices.refresh(client, _one_type_catalog("p4d.24xlarge"), regions=("us-east-1",),
                                today="2026-11-28")
    path = prices.write(result, tmp_path / "refreshed_prices.yaml")
    assert "2026-11-28" in path.read_text()
    shipped = load_catalog()
    types, sources = refreshed_mod.apply(shipped.types, shipped.sources, Source, path)
    p4d, before = types["p4d.24xlarge"], shipped.types["p4d.24xlarge"]
    assert p4d.sagemaker_prices["us-east-1"] == 11.11  # the SYNTHETIC fixture figure, over the shipped one
    assert p4d.sagemaker_prices.get("us-west-2") == before.sagemaker_prices.get("us-west-2")  # not answered: kept
    assert p4d.ec2_prices == before.ec2_prices
    assert "aws-price-list" in p4d.sources and sources["aws-price-list"].checked == "2026-11-28"
    assert types["g5.xlarge"] is shipped.types["g5.xlarge"]
    lines = prices.summary(result, shipped, path)
    assert any("p4d.24xlarge sagemaker us-east-1" in line and "-> 11.11" in line for line in lines)


def test_the_planner_reads_the_refreshed_file(tmp_path, monkeypatch):
    """A refreshed price changes the plan's cost; without the file, the shipped figure."""
    path = tmp_path / "refreshed_prices.yaml"
    w = load("small")
    before = plan(w).inference["realtime"]
    itype = before.instance_type.removeprefix("ml.")
    shipped = load_catalog().types[itype].sagemaker_prices[w.region]
    prices.write(prices.Refresh(as_of="2026-11-28", prices={itype: {"sagemaker": {w.region: shipped * 2}}}), path)
    monkeypatch.setattr(refreshed_mod, "REFRESHED_PRICES", path)
    load_catalog.cache_clear()
    try:
        cat = load_catalog()
        assert cat.types[itype].sagemaker_prices[w.region] == pytest.approx(shipped * 2)
        after = plan(w, cat).inference["realtime"]
        assert after.instance_type != before.instance_type or after.usd_per_hour_min != before.usd_per_hour_min
    finally:
        monkeypatch.undo()
        load_catalog.cache_clear()


def test_no_refreshed_file_is_shipped():
    """The shipped catalog is what the tests and docs hold; a user's refresh lives beside it, ignored by git."""
    assert not refreshed_mod.REFRESHED_PRICES.exists()
    assert "workloads/catalog/refreshed_prices.yaml" in (ROOT / ".gitignore").read_text()


def test_bad_regions_are_one_line_and_exit_2(capsys):
    from workloads.commands.cli import main

    assert main(["prices", "refresh", "--regions", "nowhere-1"]) == 2
    err = capsys.readouterr().err
    assert "--regions" in err and "nowhere-1" in err and "Traceback" not in err
