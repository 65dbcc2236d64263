"""The chosen training run's estimate: its time (a range over the published utilisation), its cost on the capacity it
runs on or buys, the spot saving where a job has one, and the assumptions and measurements it rests on. Pure Python."""

from __future__ import annotations

from dataclasses import dataclass

from ..catalog import ML_PREFIX, Catalog, InstanceType, Price, load_utilisation
from ..config.schema import Workload
from ..errors import WARNING, Finding
from . import capacity
from . import estimates as est
from . import parallelism
from .candidates import XGBOOST_MEMORY_FACTOR, node_price
from .capacity import Purchase
from .training_layout import precision_of, priced_precision, run_hours, utilisation_at


@dataclass(frozen=True)
class TrainingEstimate:
    """A training run's estimated hours and cost at the assumed utilisation, with its range."""
    tokens_billion: float | None
    flops: float | None
    utilisation: float | None  # likely
    hours: float | None  # likely
    usd_per_hour: float
    usd_total: float | None  # likely
    hours_range: tuple[float, float] | None = None  # (low, high)
    usd_total_range: tuple[float, float] | None = None
    utilisation_range: tuple[float, float] | None = None  # (low, high) MFU for deep learning
    spot_usd_total: float | None = None
    price_note: str = ""
    assumptions: tuple[str, ...] = ()
    basis: str = ""  # the published measurements the range rests on
    trainer_mfu: float | None = None  # this toolkit's trainer's own measured MFU on the hardware (or a stand-in's)

    @property
    def no_faster_than_likely(self) -> bool:
        """The range's fast end is the likely run: the high utilisation's faster compute only exposes more of the
        step's communication (the step waits on it)."""
        return bool(self.utilisation_range and self.hours and self.hours_range and self.utilisation is not None
                    and self.utilisation_range[1] > self.utilisation and self.hours_range[0] >= self.hours * 0.995)


def estimate_run(w: Workload, cat: Catalog, itype: InstanceType, count: int, orchestrator: str,
                 tokens: float | None, flops: float | None, reserved: Price | None = None,
                 purchase: Purchase | None = None) -> TrainingEstimate:
    """Time and cost of the run: on the config's capacity, or on `reserved` capacity still to buy (`purchase`: its
    nodes, for whole days)."""
    price = reserved or node_price(itype, w, orchestrator, cat)
    assert price
    util = util_range = trainer_mfu = None
    basis = ""
    if flops is not None:
        precision = priced_precision(w, itype)
        r = utilisation_at(w, itype, count, precision)  # at the count it runs, as the candidates table priced it
        util, util_range, basis, trainer_mfu = r.likely, (r.low, r.high), r.basis, r.trainer_measured
        peak = est.peak_tflops(itype, precision, load_utilisation())
        low_h, hrs, high_h = (run_hours(w, itype, count, flops, u, peak) for u in (r.high, r.likely, r.low))
        # a faster compute hides less communication, so the range's ends are the extremes of the three
        low_h, high_h = min(low_h, hrs, high_h), max(low_h, hrs, high_h)
    else:
        u = load_utilisation()
        low_h, hrs, high_h = est.classic_hours(w.data.dataset_size_gib, itype.vcpus, count, u)
        basis = "; ".join(f"{m.what}: {m.value / 1e6:g} M cell-rounds per vCPU-second [{m.source}]"
                          for m in u.classic_rates)
    cluster_usd_h = price.usd_per_hour * (purchase.count if purchase else count)
    total = est.billed_hours(hrs, price.kind) * cluster_usd_h
    total_range = (est.billed_hours(low_h, price.kind) * cluster_usd_h,
                   est.billed_hours(high_h, price.kind) * cluster_usd_h)
    spot = total * (1 - est.SPOT_SAVING) if managed_spot(orchestrator) else None
    note = price.label
    if purchase:
        note += (f"; to buy: {purchase.days} days of {purchase.count} nodes, paid up front, so the total is whole days "
                 "of them")
    elif price.kind in (capacity.CAPACITY_BLOCK, capacity.TRAINING_PLAN) and \
            (w.training.capacity_block or w.training.training_plan_arn):
        note += "; bought in whole days up front, so the total is whole days of it"
    elif price.kind == capacity.CAPACITY_BLOCK:
        note += (f"; {itype.name} is not sold on-demand in {w.region}, so the named reservation is priced at the "
                 "type's Capacity Block rate in whole days (the reservation's own rate is not recorded)")
    elif w.training.training_plan_arn:
        # No reserved rate of the type is recorded: a training plan's own up-front price is unknown here.
        total = spot = total_range = None
        note = (f"SageMaker training plan: no reserved rate of {itype.name} is recorded in {w.region}, so the total "
                f"is unknown; {price.kind} $/h shown for reference only")
    return TrainingEstimate(
        tokens_billion=tokens, flops=flops, utilisation=util, hours=hrs, usd_per_hour=cluster_usd_h,
        usd_total=total, hours_range=(low_h, high_h), usd_total_range=total_range, utilisation_range=util_range,
        spot_usd_total=spot, price_note=note, assumptions=_assumptions(flops is None, itype, w, orchestrator), basis=basis,
        trainer_mfu=trainer_mfu,
    )


def managed_spot(orchestrator: str) -> bool:
    """Managed spot is a SageMaker training-job feature (EnableManagedSpotTraining): a Slurm or HyperPod cluster's
    nodes are on-demand or reserved, so their plans quote no spot saving."""
    return orchestrator == "sagemaker-jobs"


def _assumptions(classic: bool, itype: InstanceType, w: Workload, orchestrator: str) -> tuple[str, ...]:
    spot = (f"managed spot saves {est.SPOT_SAVING:.0%} (AWS: up to 90%)",) if managed_spot(orchestrator) else ()
    if classic:
        u = load_utilisation()
        return (f"classic ML time = float32 cells (dataset bytes / 4) x {u.classic_rounds} boosting rounds / "
                "(XGBoost hist cell-rounds per vCPU-second x vCPUs); range over the published rates, likely = median",
                "scikit-learn is assumed to train like a histogram booster (HistGradientBoosting); other estimators "
                "differ",
                f"XGBoost/scikit-learn hold about {XGBOOST_MEMORY_FACTOR:g}x the dataset in memory", *spot)
    lines = [
        "FLOPs = 6 x parameters x tokens x epochs",
        ("tokens given by data.tokens_billion" if w.data.tokens_billion is not None
         else f"tokens = dataset bytes / {est.BYTES_PER_TOKEN} bytes per token"),
        f"compute in {precision_of(w, itype)[1]}; peak = dense {priced_precision(w, itype)} TFLOPS "
        f"({est.peak_tflops(itype, priced_precision(w, itype), load_utilisation()):,g} a node)",
        "utilisation (MFU) from published training runs of the accelerator at this model size: low, likely "
        "(median) and high give the range; the runs' own multi-node scaling is included",
        f"nodes sized for a target time at {est.MULTI_NODE_EFFICIENCY:.0%} multi-node efficiency; model state "
        f"{est.TRAIN_BYTES_PER_PARAM} B/param in {est.MEMORY_HEADROOM:.0%} of accelerator memory",
        *spot,
        "a layout that recomputes activations (activation checkpointing, only where memory needs it) gets "
        f"{parallelism.RECOMPUTE_EFFICIENCY:.0%} of a run measured without it (8N for 6N FLOPs per token); runs "
        "measured with it, or whose source does not say, are taken as published",
    ]
    return tuple(lines)


def borrowed_utilisation(itype: InstanceType, precision: str, cat: Catalog) -> Finding | None:
    """A WARNING where the estimate rests on another accelerator's published runs because the type's own were
    searched for and not found (utilisation.yaml `borrowed`): the time and cost are that accelerator's utilisation
    applied to this one's peak."""
    assert itype.accelerator
    u = load_utilisation()
    model = itype.accelerator.model
    entry = u.borrowed.get(model)
    if entry is None or entry[0] != precision:
        return None
    stand_in = u.stand_in.get(model, u.spread_from)
    src = cat.sources[entry[1]]
    return Finding(WARNING, "training.instance_type", itype.name,
                   f"the {precision} estimate uses {stand_in}'s published utilisation on {model}'s peak, not {model}'s "
                   f"own: {entry[2]}; the run may be faster or slower than planned", f"{src.title} <{src.url}>")


def calibration_lines(cat: Catalog) -> tuple[str, ...]:
    """The seeds' measured BERT run that calibrates Trainium (deep-learning plans only), at its own prices."""
    runs = est.BERT_FINETUNE
    best = min(runs, key=lambda r: r.usd)
    lines = []
    for r in runs:
        today = cat.types[r.instance_type.removeprefix(ML_PREFIX)].price("us-east-1", sagemaker=True)
        now = f"; ${today.usd_per_hour:.2f}/h today" if today and abs(today.usd_per_hour - r.usd_per_hour) > 0.01 else ""
        lines.append(f"measured BERT fine-tune: {r.instance_type} {r.seconds:g} s at ${r.usd_per_hour}/h = ${r.usd:.2f} "
                     f"(SageMaker price at the time of the run{now})")
    lines.append(f"cheapest for the same accuracy in that run: {best.instance_type}")
    return tuple(lines)


def measured_choice() -> tuple[str, dict[str, float]]:
    """The seeds' measured comparison: which type is cheaper, and each run's cost."""
    costs = {r.instance_type: round(r.usd, 2) for r in est.BERT_FINETUNE}
    return min(costs, key=costs.__getitem__), costs
