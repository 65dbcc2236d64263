"""Prices a user refreshed from the AWS Price List (`python -m workloads prices refresh`, workloads/commands/prices.py),
laid over the shipped figures: each refreshed price replaces the shipped one for its type, service and region, and the
type cites the refresh (source `aws-price-list`, checked on the file's date). A figure the refresh did not answer
keeps its shipped value and source."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..packaged import read_packaged_yaml

# Not shipped (.gitignore): the user's own read of the Price List, dated inside.
REFRESHED_PRICES = Path(__file__).parent / "refreshed_prices.yaml"
SOURCE_KEY = "aws-price-list"


def apply(types: dict, sources: dict, source_cls, path: Path | None = None) -> tuple[dict, dict]:
    """(types, sources) with the refreshed prices over the shipped ones; unchanged when no file was written."""
    path = path or REFRESHED_PRICES
    if not path.is_file():
        return types, sources
    data = read_packaged_yaml(path)
    as_of = str(data["as_of"])
    sources = {**sources, SOURCE_KEY: source_cls(SOURCE_KEY, data["source"],
                                                 "https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/"
                                                 "API_pricing_GetProducts.html", as_of,
                                                 f"read with the user's credentials on {as_of}")}
    out = dict(types)
    for name, services in (data.get("prices") or {}).items():
        t = out.get(name)
        if t is None:
            continue
        ec2 = {**t.ec2_prices, **{r: float(p) for r, p in (services.get("ec2") or {}).items()}}
        sm = {**t.sagemaker_prices, **{r: float(p) for r, p in (services.get("sagemaker") or {}).items()}}
        out[name] = replace(t, ec2_prices=ec2, sagemaker_prices=sm, sources=(*t.sources, SOURCE_KEY),
                            note=(t.note + " " if t.note else "") + f"Prices refreshed from the AWS Price List on {as_of}.")
    return out, sources
