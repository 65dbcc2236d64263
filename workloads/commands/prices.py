"""`python -m workloads prices refresh`: the catalog's EC2 and SageMaker on-demand prices read from the AWS Price List
Query API (pricing GetProducts, read-only, the user's credentials), written to a dated file the planner reads over the
shipped figures (catalog/__init__.py REFRESHED_PRICES).

GetProducts (AWS Price List Query API Reference; botocore's pricing service model): ServiceCode and TERM_MATCH
Filters in, `PriceList` out, a list of JSON documents, one per product, each with `product.attributes` and
`terms.OnDemand.<offer>.priceDimensions.<rate>.pricePerUnit.USD` with `unit` "Hrs"; paginated by NextToken.
- EC2 (AmazonEC2): instanceType, regionCode, operatingSystem Linux, tenancy Shared, preInstalledSw NA,
  capacitystatus Used, licenseModel "No License required": the plain on-demand Linux hour.
- SageMaker (AmazonSageMaker): productFamily "ML Instance", instanceName ml.<type>, regionCode, component Hosting: the
  endpoint instance hour the serving plan costs (training and processing hours are other components).
A type the Price List does not answer for keeps its shipped figure; a filter that matches two different prices is
refused rather than guessed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import yaml

from ..catalog import ML_PREFIX, PRICED_REGIONS, Catalog
from ..catalog.refreshed import REFRESHED_PRICES

PRICING_REGION = "us-east-1"  # a Price List Query API endpoint (us-east-1, eu-central-1, ap-south-1)
SOURCE = ("AWS Price List Query API, pricing GetProducts (endpoint us-east-1): EC2 on-demand Linux shared-tenancy "
          "hours (AmazonEC2) and SageMaker Hosting ML instance hours (AmazonSageMaker)")


def _term(field_name: str, value: str) -> dict:
    return {"Type": "TERM_MATCH", "Field": field_name, "Value": value}


def ec2_filters(instance_type: str, region: str) -> list[dict]:
    return [_term("instanceType", instance_type), _term("regionCode", region), _term("operatingSystem", "Linux"),
            _term("tenancy", "Shared"), _term("preInstalledSw", "NA"), _term("capacitystatus", "Used"),
            _term("licenseModel", "No License required")]


def sagemaker_filters(instance_type: str, region: str) -> list[dict]:
    return [_term("productFamily", "ML Instance"), _term("instanceName", ML_PREFIX + instance_type),
            _term("regionCode", region), _term("component", "Hosting")]


def hourly_usd(price_list: list[str]) -> set[float]:
    """Every on-demand hourly USD price in GetProducts' PriceList (zero-priced rates, e.g. reservations' hours, are
    not on-demand prices)."""
    out = set()
    for doc in price_list:
        product = json.loads(doc) if isinstance(doc, str) else doc
        for offer in (product.get("terms", {}).get("OnDemand") or {}).values():
            for rate in offer.get("priceDimensions", {}).values():
                usd = rate.get("pricePerUnit", {}).get("USD")
                if usd is not None and rate.get("unit") == "Hrs" and float(usd) > 0:
                    out.add(round(float(usd), 6))
    return out


def _query(client, service: str, filters: list[dict]) -> list[str]:
    out, token = [], None
    while True:
        kwargs = {"ServiceCode": service, "Filters": filters, "FormatVersion": "aws_v1", "MaxResults": 100}
        if token:
            kwargs["NextToken"] = token
        page = client.get_products(**kwargs)
        out += page.get("PriceList", [])
        token = page.get("NextToken")
        if not token:
            return out


@dataclass
class Refresh:
    as_of: str
    prices: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)  # type -> ec2|sagemaker -> region
    ambiguous: list[str] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)

    def as_yaml(self) -> dict:
        return {"as_of": self.as_of, "source": SOURCE, "prices": self.prices}


def refresh(client, cat: Catalog, *, regions: tuple[str, ...] = PRICED_REGIONS, today: str | None = None) -> Refresh:
    """Every catalog type's EC2 and SageMaker hourly price in `regions`, as the Price List answers."""
    out = Refresh(as_of=today or date.today().isoformat())
    for name in sorted(cat.types):
        for service, code, filters in (("ec2", "AmazonEC2", ec2_filters), ("sagemaker", "AmazonSageMaker",
                                                                          sagemaker_filters)):
            for region in regions:
                found = hourly_usd(_query(client, code, filters(name, region)))
                where = f"{service} {name} {region}"
                if len(found) > 1:
                    out.ambiguous.append(f"{where}: {sorted(found)}")
                elif found:
                    out.prices.setdefault(name, {}).setdefault(service, {})[region] = found.pop()
                else:
                    out.unanswered.append(where)
    return out


def write(result: Refresh, path: Path = REFRESHED_PRICES) -> Path:
    path.write_text(f"# Written by `python -m workloads prices refresh` on {result.as_of}; the planner reads it over the "
                    "shipped figures.\n" + yaml.safe_dump(result.as_yaml(), sort_keys=True), encoding="utf-8")
    return path


def summary(result: Refresh, cat: Catalog, path: Path) -> list[str]:
    changed = [f"  {name} {service} {region}: {_shipped(cat, name, service, region)} -> {price}"
               for name, services in sorted(result.prices.items()) for service, by_region in services.items()
               for region, price in by_region.items() if _shipped(cat, name, service, region) != price]
    lines = [f"wrote {path} ({sum(len(r) for s in result.prices.values() for r in s.values())} prices, as of "
             f"{result.as_of}); {len(changed)} differ from the shipped figures:", *changed]
    if result.ambiguous:
        lines.append(f"{len(result.ambiguous)} left as shipped, the Price List answering more than one price: "
                     + "; ".join(result.ambiguous))
    if result.unanswered:
        lines.append(f"{len(result.unanswered)} not in the Price List (shipped figure kept): "
                     + ", ".join(result.unanswered[:12]) + (" ..." if len(result.unanswered) > 12 else ""))
    return lines


def _shipped(cat: Catalog, name: str, service: str, region: str) -> float | None:
    t = cat.types[name]
    return (t.sagemaker_prices if service == "sagemaker" else t.ec2_prices).get(region)
