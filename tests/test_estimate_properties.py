"""Properties of the plan's prices, over every variant the suite builds and each orchestrator a preset can take:
a managed-spot saving is quoted only where managed spot exists (SageMaker training jobs), and every instance price is
the plan's region's, or says that it is another region's."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from workloads import load, plan
from workloads.catalog import PRICED_REGIONS, load_catalog
from workloads.errors import ConfigError
from workloads.commands.report import print_plan

from .conftest import PRESETS, VARIANTS

ORCHESTRATORS = ("slurm", "hyperpod", "sagemaker-jobs")


def _configs() -> dict[str, tuple[str, dict]]:
    """Every variant, and every preset under every orchestrator that plans it (a refused one is no plan)."""
    out = {name: (w, o or {}) for name, (w, o) in VARIANTS.items()}
    for preset in PRESETS:
        for orchestrator in ORCHESTRATORS:
            out[f"{preset}@{orchestrator}"] = (preset, {"training.orchestrator": orchestrator})
    out["intermediate-spot"] = ("intermediate", {"training.spot": "true"})
    return {name: config for name, config in out.items() if _plans(*config)}


def _plans(workload: str, overrides: dict) -> bool:
    try:
        plan(load(workload, overrides))
    except ConfigError:
        return False
    return True


CONFIGS = _configs()


def _plan(name: str):
    return plan(load(*CONFIGS[name]))


def _rendered(p) -> str:
    out = io.StringIO()
    print_plan(p, Console(file=out, width=400, color_system=None))
    return out.getvalue()


def _strings(value) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_managed_spot_saving_is_quoted_only_for_sagemaker_training_jobs(name):
    """Managed spot is a SageMaker training-job feature: a Slurm (PCS) or HyperPod plan quotes no spot total and
    names no spot saving anywhere (the printed plan, its JSON); a training-job plan quotes both."""
    p = _plan(name)
    t = p.training
    text = _rendered(p)
    said = [s for s in _strings(json.loads(json.dumps(p.to_dict(), default=str))) if "spot" in s.lower()]
    if t.orchestrator == "sagemaker-jobs":
        assert t.estimate.spot_usd_total is not None and 0 < t.estimate.spot_usd_total < t.estimate.usd_total
        assert "managed spot about" in text and said
    else:
        assert t.estimate.spot_usd_total is None, t.orchestrator
        assert "spot" not in text.lower() and not said, (t.orchestrator, said)


def test_the_grid_covers_every_orchestrator():
    assert {_plan(name).training.orchestrator for name in CONFIGS} == set(ORCHESTRATORS)


KINDS = ("EC2 on-demand", "SageMaker on-demand", "EC2 Capacity Block")
IN_EVERY_REGION = (("small", {}), ("intermediate", {"notebook.idle_minutes": "30"}),
                   ("intermediate", {"training.orchestrator": "slurm"}),
                   ("huge", {}), ("huge", {"training.instance_type": "p5.48xlarge"}))


def _recorded(itype, kind: str) -> dict:
    return {"EC2 on-demand": itype.ec2_prices, "SageMaker on-demand": itype.sagemaker_prices,
            "EC2 Capacity Block": itype.capacity_block_prices}[kind]


def _is_the_regions_price(label: str, hourly: float, itype, region: str) -> bool:
    """`label` (a price's kind and region, as the plan shows it) and `hourly` are the region's recorded price, or
    the plan says the region has none and names the region whose price it shows. True where the region had one."""
    kind = next(k for k in KINDS if label.startswith(k + ", "))
    prices = _recorded(itype, kind)
    if prices.get(region) is not None:
        assert label.startswith(f"{kind}, {region}") and "price recorded" not in label, (label, region)
        assert hourly == pytest.approx(prices[region]), (label, hourly)
        return True
    shown = label.removeprefix(f"{kind}, ").split(" ", 1)[0]
    assert f"no {region} price recorded; {shown} price shown" in label and shown != region, label
    assert hourly == pytest.approx(prices[shown]), (label, hourly)
    return False


@pytest.mark.parametrize("region", sorted(load_catalog().regions))
def test_instance_prices_are_the_plans_regions_or_say_whose_they_are(region):
    """Every instance price a plan uses (the training cluster's, each endpoint's and batch job's, the notebook's)
    is the plan's region's recorded price; where the catalog records none for that region, the plan shows another
    region's and says so, in the estimate, the monthly lines and the printed plan."""
    cat = load_catalog()
    zone = region + cat.regions[region][0]
    seen, notebooks = [], []
    for workload, overrides in IN_EVERY_REGION:
        try:
            p = plan(load(workload, {**overrides, "region": region, "availability_zone": zone}))
        except ConfigError:
            continue  # a type not offered there, say
        t = p.training
        text = _rendered(p)
        seen.append(_is_the_regions_price(t.estimate.price_note, t.estimate.usd_per_hour / t.instance_count,
                                          cat.get(t.instance_type), region))
        for ip in p.inference.values():
            if ip.instance_type and ip.max_instances:
                seen.append(_is_the_regions_price(ip.price_note, ip.usd_per_hour_max / ip.max_instances,
                                                  cat.get(ip.instance_type), region))
        for line in p.monthly.lines:
            if line.source == "catalog" and "/GB-s" not in line.price:  # instance prices (serverless: per use)
                here = f"on-demand, {region}" in line.price and "price recorded" not in line.price
                assert here != (f"no {region} price recorded" in line.price), line
        if not all(seen):
            assert f"no {region} price recorded" in text
        notebooks += [line for line in p.monthly.lines if line.item == "notebook"]
    assert seen, f"no preset plans in {region}"
    assert notebooks or region not in PRICED_REGIONS  # the notebook's price is checked where prices are recorded
