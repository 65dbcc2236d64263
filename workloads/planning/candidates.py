"""Training candidates and their ranking: every instance type of the workload's tier (plus the config's own), eligible
or skipped with the reason, each costed as the run it would be (its node count from memory and the target time, its
hours and total on the config's capacity, and a row on capacity bought for the run beside it); then the pick (the
lowest total for deep learning, the lowest $/h for classic ML) or the config's own type, with advice where another row
costs less. Pure Python."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..catalog import Catalog, InstanceType, Price, load_software, load_utilisation
from ..catalog.sagemaker_apis import ORCHESTRATOR_API, load_sagemaker_apis
from ..config.schema import CLASSIC_ML, Workload
from ..errors import INFO, ConfigError, Finding
from . import capacity
from . import classic as classic_types
from . import estimates as est
from . import parallelism
from .capacity import Purchase
from .training_layout import (attention_shape, choose_layout, layout_recomputes, planned_sequence, precision_of,
                              priced_precision, run_hours, trained_billion, utilisation, utilisation_at)


DEFAULT_TARGET_HOURS = 168.0  # one week, when training.max_hours is open
MAX_INSTANCES = 512
XGBOOST_MEMORY_FACTOR = 2.0  # XGBoost holds the data in memory (DMatrix) plus histograms
# The most data one catalog node holds for XGBoost (r5.12xlarge, 384 GiB, in MEMORY_HEADROOM): beyond it, distribute.
ONE_NODE_MAX_GIB = 384 * 0.8
TRAINING_CANDIDATES: dict[str, tuple[str, ...]] = {
    "large-dl": ("trn2.48xlarge", "p4d.24xlarge", "p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge",
                 "p6-b300.48xlarge"),
    "medium-dl": ("g5.12xlarge", "g5.48xlarge", "g6.48xlarge", "p4d.24xlarge", "p5.48xlarge"),
    "small-dl": ("g4dn.xlarge", "g5.xlarge", "g5.2xlarge", "g6.xlarge"),
}  # classic ML: every CPU type a sourced reason does not exclude (classic.candidates)


@dataclass(frozen=True)
class Candidate:
    """One training option the planner weighed: instance type and count, hours, cost, and whether it fits."""
    instance_type: str
    count: int
    accelerators: str
    usd_per_hour: float  # whole cluster
    hours: float | None
    usd_total: float | None
    feasible: bool
    why: str
    chosen: bool = False
    price_kind: str = ""  # EC2 on-demand | SageMaker on-demand | EC2 Capacity Block
    refused_by: str = "training.instance_count"  # the field to change when it does not fit (a set type refuses)
    ranked_by: str = "cost"  # what picks among the rows that fit: total cost (deep learning) or $/h (classic ML)
    purchase: Purchase | None = None  # capacity to buy before deploying (a Capacity Block or training plan row)


OUTSIDE_FAMILIES = "outside the team's allowed families"


def node_price(itype: InstanceType, w: Workload, orchestrator: str, cat: Catalog | None = None):
    """$/h of one node on the capacity the config names (a Capacity Block, a training plan), else on-demand."""
    if orchestrator == "slurm" and cat is not None and capacity.capacity_block_pricing(w, cat):
        return itype.price(w.region, sagemaker=False, capacity_block=True)
    if orchestrator != "slurm" and w.training.training_plan_arn:  # on-demand where no reserved rate is recorded
        return capacity.training_plan_price(itype, w.region) or itype.price(w.region, sagemaker=True)
    return itype.price(w.region, sagemaker=orchestrator != "slurm")


def _eligible(name: str, w: Workload, cat: Catalog, orchestrator: str) -> tuple[InstanceType | None, str]:
    itype = cat.get(name)
    if itype is None:
        return None, "not in catalog"
    if not cat.allows(name) and name != w.training.instance_type:
        return None, OUTSIDE_FAMILIES
    if w.region not in itype.regions:
        return None, f"not offered in {w.region}"
    if (api := ORCHESTRATOR_API.get(orchestrator)) and (refusal := load_sagemaker_apis().refusal(api, name)):
        return None, refusal
    if itype.accelerator and itype.accelerator.kind == "trainium":
        if w.model.framework != "pytorch" or not w.model.neuron_supported:
            return None, "Trainium needs a PyTorch model that compiles with Neuron"
        if orchestrator == "sagemaker-jobs":
            # sagemaker 3.27's offline image table knows no TorchNeuron training image (its newest Neuron one is
            # pytorch-training-neuronx 2.1.2, PyTorch/XLA), so a job would start on an unsupported stack.
            return None, "no SageMaker training image with TorchNeuron is known: train on Trainium with slurm or hyperpod"
    if itype.accelerator and isinstance(stack := load_software().for_type(itype), str):
        return None, stack
    if itype.accelerator and not (precision := precision_of(w, itype))[0]:
        return None, f"training.precision {w.training.precision}: {precision[1]}"
    return itype, ""


def _unpriced(itype: InstanceType, w: Workload, cat: Catalog, orchestrator: str) -> str:
    """Why `itype` has no row on the config's capacity (on-demand unless it names some), or "": its nodes would
    never start there, or no price of that kind is recorded (rows are compared like for like)."""
    if orchestrator == "slurm" and (refusal := capacity.slurm_capacity_refusal(itype, w, cat)):
        return refusal
    if node_price(itype, w, orchestrator, cat) is None:
        kind = "Capacity Block" if orchestrator == "slurm" and capacity.capacity_block_pricing(w, cat) else \
            "EC2 on-demand" if orchestrator == "slurm" else "SageMaker"
        return f"no {kind} price recorded (compared like for like)"
    return ""


def _dl_candidate(itype: InstanceType, w: Workload, cat: Catalog, orchestrator: str, flops: float,
                  price: Price | None = None) -> Candidate:
    """The type's row: its node count (memory and the target time), hours and total at `price` (default: the config's
    capacity, node_price)."""
    price = price or node_price(itype, w, orchestrator, cat)
    assert price and itype.accelerator
    precision = priced_precision(w, itype)
    peak = est.peak_tflops(itype, precision, load_utilisation())
    min_mem = est.min_instances_for_memory(trained_billion(w), itype)
    if w.training.instance_count is not None:
        count = w.training.instance_count
    else:
        target = w.training.max_hours or DEFAULT_TARGET_HOURS

        def needed(u: float) -> int:
            single = est.hours(flops, itype, 1, u, peak)
            return max(min_mem, 1 if single <= target else math.ceil(single / (target * est.MULTI_NODE_EFFICIENCY)))
        # The utilisation depends on the layout, which depends on the count: the fewest nodes that meet the target at
        # their own layout's utilisation, between the counts with and without the recompute penalty.
        params = w.model.parameters_billion
        seq = planned_sequence(w)
        shape = attention_shape(w)
        fewest = needed(utilisation(itype, params, precision=precision, recompute=False, sequence=seq,
                                    shape=shape).likely)
        most = needed(utilisation(itype, params, precision=precision, recompute=True, sequence=seq,
                                  shape=shape).likely)
        # Past `most` where the layout's own figures are lower than the generic rows (NxD Training's, nxd.py).
        count = next((n for n in range(fewest, MAX_INSTANCES + 1)
                      if n >= needed(utilisation_at(w, itype, n, precision).likely)), most)
        count = min(count, MAX_INSTANCES)
    util = utilisation_at(w, itype, count, precision).likely
    hrs = run_hours(w, itype, count, flops, util, peak)
    if w.training.instance_count is None and hrs > target and count > max(min_mem, 1):
        # The count came from scaling one node's time; where the network cannot keep up (no EFA, a small model's
        # step all communication) more nodes take longer, not less. The row keeps the fewest nodes tried that meet
        # the target, else the fastest: its hours are then the least this type can do (what max_hours's hint says).
        base = max(min_mem, 1)
        tried = sorted({base, count, *(2 ** k for k in range(1, count.bit_length()) if base < 2 ** k < count)})
        hours_at = {n: run_hours(w, itype, n, flops, utilisation_at(w, itype, n, precision).likely, peak)
                    for n in tried}
        count = next((n for n in tried if hours_at[n] <= target), min(tried, key=lambda n: (hours_at[n], n)))
        util, hrs = utilisation_at(w, itype, count, precision).likely, hours_at[count]
    billed = est.billed_hours(hrs, price.kind)
    feasible = True
    why = (f"{util:.0%} utilisation ({precision}" + (", recompute" if layout_recomputes(w, itype, count) else "")
           + ")" + (", nodes set by the config" if w.training.instance_count else ""))
    if count < min_mem:
        feasible, why = False, f"model state needs {min_mem} nodes' accelerator memory"
    elif count > 1 and orchestrator in ("slurm", "hyperpod") and itype.efa_max_interfaces == 0:
        feasible, why = False, f"a {count}-node cluster needs EFA; {itype.name} has none"
    refused_by = "training.instance_count"
    if feasible and w.training.max_hours is not None and hrs > w.training.max_hours:
        feasible, why, refused_by = False, f"{hrs:.3g} h misses max_hours {w.training.max_hours:g}", "training.max_hours"
    if feasible and (refusal := _trainer_refusal(w, itype, count)):
        feasible, why, refused_by = False, refusal, "training.instance_type"
    acc = itype.accelerator
    return Candidate(itype.name, count, f"{acc.count} x {acc.model}", price.usd_per_hour * count,
                     hrs, billed * price.usd_per_hour * count, feasible, why, price_kind=price.kind,
                     refused_by=refused_by)


def _trainer_refusal(w: Workload, itype: InstanceType, count: int) -> str | None:
    """A candidate whose layout the shipped trainer cannot run on its stack is no candidate: the plan refuses it here,
    not the trainer after a node image bake (parallelism.trainer_refusal)."""
    spread = choose_layout(w, itype, count)
    stack = load_software().for_type(itype)
    if spread is None or isinstance(stack, str):
        return None  # no layout at all is refused later, with the fields that would change it
    return parallelism.trainer_refusal(spread, stack.device, what=f"a {w.model.parameters_billion:g}B model on "
                                                                   f"{count} x {itype.name}")


def _cpu_candidate(itype: InstanceType, w: Workload, orchestrator: str) -> Candidate:
    price = node_price(itype, w, orchestrator, None)
    assert price
    need_gib = w.data.dataset_size_gib * XGBOOST_MEMORY_FACTOR
    per_node = itype.memory_gib * est.MEMORY_HEADROOM
    if w.model.framework == "scikit-learn":
        count = 1
        feasible = need_gib <= per_node
        why = "holds the data in memory" if feasible else f"needs {need_gib:.0f} GiB of memory on one node"
    else:
        count = w.training.instance_count or max(1, math.ceil(need_gib / per_node))
        feasible = count <= MAX_INSTANCES and need_gib <= per_node * count
        why = f"{need_gib:.0f} GiB of data in memory over {count} node(s)"
        if feasible and count > 1 and not w.training.instance_count and need_gib <= ONE_NODE_MAX_GIB:
            # Distributed XGBoost adds the network to every histogram round for no saving while a larger node holds
            # the data: an architect sizes up before out.
            feasible, why = False, f"{count} nodes: a single larger node holds {need_gib:.0f} GiB"
    # Each row's likely time and total, as estimate_run gives the chosen one; the choice stays the lowest $/h.
    _, hrs, _ = est.classic_hours(w.data.dataset_size_gib, itype.vcpus, count, load_utilisation())
    refused_by = "training.instance_count"
    if feasible and w.training.max_hours is not None and hrs > w.training.max_hours:  # a faster type may meet it
        feasible, why, refused_by = False, f"{hrs:.3g} h misses max_hours {w.training.max_hours:g}", "training.max_hours"
    cluster = price.usd_per_hour * count
    return Candidate(itype.name, count, f"{itype.vcpus} vCPU, {itype.memory_gib:g} GiB", cluster, hrs,
                     est.billed_hours(hrs, price.kind) * cluster, feasible, why, price_kind=price.kind, ranked_by="$/h",
                     refused_by=refused_by)


def costed_candidates(w: Workload, cat: Catalog, tier: str, orchestrator: str,
                      flops: float | None) -> tuple[list[Candidate], list[str]]:
    """Every eligible type of the tier (plus the config's own choice), costed side by side."""
    names = classic_types.candidates(cat)[0] if tier in CLASSIC_ML else list(TRAINING_CANDIDATES[tier])
    if w.training.instance_type and w.training.instance_type not in names:
        names.insert(0, w.training.instance_type)
    cands, skipped = [], []
    for name in names:
        itype, reason = _eligible(name, w, cat, orchestrator)
        if itype is None or (reason := _unpriced(itype, w, cat, orchestrator)) and (
                flops is None or capacity.reserved_price(w, cat, itype, orchestrator) is None):
            skipped.append(f"{name}: {reason}")
        elif flops is None:
            cands.append(_cpu_candidate(itype, w, orchestrator))
        elif itype.accelerator is None:
            skipped.append(f"{name}: CPU type for a neural network; no FLOP estimate")
        else:
            row = None if reason else _dl_candidate(itype, w, cat, orchestrator, flops)
            if reason:
                skipped.append(f"{name} on-demand: {reason}")
            cands += [r for r in (row, _reserved_row(row, itype, w, cat, orchestrator, flops)) if r is not None]
    return cands, skipped


def _reserved_row(row: Candidate | None, itype: InstanceType, w: Workload, cat: Catalog, orchestrator: str,
                  flops: float) -> Candidate | None:
    """The type's row on capacity bought for the run (a Capacity Block, a training plan), beside its on-demand `row`
    (None: it has none): the nodes it buys for the whole days it buys them, with the purchase to make first."""
    price = capacity.reserved_price(w, cat, itype, orchestrator)
    if price is None or (row is not None and not row.feasible):
        return None
    base = row or _dl_candidate(itype, w, cat, orchestrator, flops, price)
    if price.kind == capacity.TRAINING_PLAN and base.feasible and not w.training.instance_count and \
            (nodes := capacity.plan_count(base.count, cat)) != base.count:
        # A plan reserves one of its quantity options: train on every node bought (at most the largest, for longer).
        fixed = w.model_copy(update={"training": w.training.model_copy(update={"instance_count": nodes})})
        base = replace(_dl_candidate(itype, fixed, cat, orchestrator, flops, price),
                       why=f"{nodes} nodes: a training plan reserves {', '.join(map(str, capacity.plan_counts(cat)))}")
    if not base.feasible or base.hours is None:
        return replace(base, price_kind=price.kind)
    bought = capacity.purchase(w, cat, itype, base.count, base.hours, price.kind, orchestrator)
    hourly = price.usd_per_hour * bought.count
    return replace(base, usd_per_hour=hourly, usd_total=bought.days * 24 * hourly, price_kind=price.kind,
                   purchase=bought, why=f"{base.why}; buy {bought.days} days of {bought.count} first "
                   f"(`{bought.buy.split(' --')[0]}`, commands below the table)")


def _pick(cands: list[Candidate], max_hours: float | None = None) -> Candidate:
    """The cheapest feasible candidate: lowest total cost (DL) or $/h then fewest nodes (CPU); among the rows that
    deploy as they are, and only where there is none, among those on capacity still to buy."""
    feasible = [c for c in cands if c.feasible and c.purchase is None] or [c for c in cands if c.feasible]
    if not feasible:
        late = [c for c in cands if c.refused_by == "training.max_hours" and c.hours]
        if late:  # every type that holds the model misses the time target: say the shortest run there is
            fastest = min(late, key=lambda c: c.hours or 0)
            raise ConfigError("training.max_hours", max_hours, f"at least {fastest.hours:.3g} (the fastest "
                              f"candidate: {fastest.count} x {fastest.instance_type}), or less data",
                              reason="no instance type finishes the run in time")
        best = min(cands, key=lambda c: c.usd_per_hour)
        raise ConfigError("training", best.instance_type, "a larger instance_count or max_hours, or less data",
                          reason=f"no instance type can run this workload ({best.why})")
    if feasible[0].ranked_by == "$/h":  # CPU: cheapest per hour that holds the data
        return min(feasible, key=lambda c: (round(c.usd_per_hour, 2), c.count))
    return min(feasible, key=lambda c: (round(c.usd_total or 0, 2), c.hours or 0))


def choose_candidate(w: Workload, cands: list[Candidate], skipped: list[str], decisions: list[str],
                     findings: list[Finding], *, allowed: frozenset[str] | None = None) -> Candidate:
    wanted = w.training.instance_type
    if not cands and wanted is None:  # every type of the tier was skipped (a team's families, the region, ...)
        outside = [s.split(":")[0] for s in skipped if s.endswith(OUTSIDE_FAMILIES)]
        if outside and len(outside) == len(skipped):  # the team's families alone rule every candidate out
            families = sorted({t.split(".")[0] for t in outside})
            raise ConfigError("allowed_instance_families", sorted(allowed or ()),
                              f"a list including {' or '.join(families)} (the families of the types that could "
                              f"train this workload: {', '.join(outside)})",
                              reason="none of the team's families can train this workload")
        raise ConfigError("training.instance_type", None, "a type that can run this workload; none of the "
                          "candidates could: " + "; ".join(skipped),
                          reason="no candidate instance type is eligible")
    if wanted is None:
        chosen = _pick(cands, w.training.max_hours)
        fit = sum(c.feasible for c in cands)
        why = "" if chosen.ranked_by == "cost" else (" (classic ML takes the cheapest node per hour that holds the "
                                                     "data; each row's time assumes every vCPU busy)")
        decisions.append(f"{chosen.instance_type}: lowest {chosen.ranked_by} among the {fit} of {len(cands)} "
                         f"candidates that fit{why}" + (" and deploy as they are" if chosen.purchase is None and
                                                        any(c.purchase for c in cands) else ""))
        findings.extend(_capacity_advice(chosen, cands))
        return chosen
    # The config's type as it deploys today, else on the capacity it must buy (trn2.48xlarge: reserved only).
    chosen = next((c for c in cands if c.instance_type == wanted and c.purchase is None),
                  next((c for c in cands if c.instance_type == wanted), None))
    if chosen is None:
        why = next((r.split(": ", 1)[1] for r in skipped if r.startswith(f"{wanted}: ")), "not a candidate")
        plannable = [c.instance_type for c in cands if c.feasible]
        raise ConfigError("training.instance_type", wanted, ", ".join(plannable) or "another catalog type",
                          reason=f"cannot be planned for this workload ({why})")
    if not chosen.feasible and chosen.refused_by == "training.instance_type":
        plannable = [c.instance_type for c in cands if c.feasible]
        raise ConfigError("training.instance_type", wanted, ", ".join(plannable) or "another catalog type",
                          reason=chosen.why)
    if not chosen.feasible and chosen.refused_by == "training.max_hours":
        raise ConfigError("training.max_hours", w.training.max_hours, f"at least {chosen.hours:.3g} for {wanted} "
                          f"x{chosen.count}, or more nodes (training.instance_count)", reason="the run does not finish in time")
    if not chosen.feasible:
        raise ConfigError("training.instance_count", chosen.count, "more nodes, or a type with more accelerator memory",
                          reason=f"{wanted} x{chosen.count}: {chosen.why}")
    decisions.append(f"instance type {wanted} set by the config")
    others = [c for c in cands if c.instance_type != wanted and c.feasible and c.purchase is None]
    if others and chosen.usd_total and chosen.ranked_by == "cost":
        best = _pick(others)
        if best.usd_total and best.usd_total < chosen.usd_total * 0.95:
            # Advice, not a refusal: the config's type is built as asked.
            findings.append(Finding(INFO, "training.instance_type", wanted, f"{best.instance_type} x{best.count} would "
                                    f"cost {1 - best.usd_total / chosen.usd_total:.0%} less (the candidates table)"))
    findings.extend(_capacity_advice(chosen, cands))
    return chosen


def _capacity_advice(chosen: Candidate, cands: list[Candidate]) -> list[Finding]:
    """INFO where capacity bought for the run (a row with a purchase) costs over 5% less than the chosen row that
    deploys as it is: the table ranks them side by side, and the pick stays what deploys without buying first."""
    bought = [c for c in cands if c.feasible and c.purchase and c.usd_total]
    if chosen.purchase or not chosen.usd_total or not bought:
        return []
    best = min(bought, key=lambda c: c.usd_total or 0)
    if not best.usd_total or best.usd_total >= chosen.usd_total * 0.95:
        return []
    assert best.purchase
    return [Finding(INFO, "training.instance_type", chosen.instance_type,
                    f"{best.instance_type} x{best.purchase.count} as {capacity.article(best.price_kind)} would cost "
                    f"{1 - best.usd_total / chosen.usd_total:.0%} less (${best.usd_total:,.0f} against "
                    f"${chosen.usd_total:,.0f}): {best.purchase.line()}")]
