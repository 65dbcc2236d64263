"""Training capacity: how EC2 and SageMaker sell a type, what a plan must buy before it deploys, and at what price.

EC2 sells some accelerated types only as Capacity Blocks for ML (catalog `sold`), AWS PCS runs blocks of some
families only, and SageMaker reserves the types its ReservedCapacityInstanceType enum lists as training plans
(catalog/sagemaker_apis.py). A type the plan can only get by buying capacity is planned on that capacity: priced at
the recorded reserved rate, with the commands that find and buy the offering and the `-c` that then deploys onto it.
Pure Python (never imports aws_cdk or sagemaker).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..catalog import ML_PREFIX, Catalog, InstanceType, Price
from ..catalog.sagemaker_apis import load_sagemaker_apis
from ..config.schema import Workload
from ..errors import WARNING, ConfigError, Finding
from . import estimates as est
from .cluster_nodes import SCALE_DOWN_IDLE_S

CAPACITY_BLOCK = "EC2 Capacity Block"
TRAINING_PLAN = "SageMaker training plan"
# No SageMaker training-plan price table was readable (catalog source sagemaker-training-plans-search): a plan is
# priced at the type's recorded EC2 Capacity Block rate in the region, and the plan says so.
PLAN_PRICE_NOTE = ("at the recorded EC2 Capacity Block rate: SageMaker's own training-plan fee is not recorded here "
                   "(search-training-plan-offerings returns it as UpfrontFee)")
# The largest cluster planned on-demand without a capacity warning. An assumption, not an AWS figure: EC2 publishes
# no on-demand capacity for accelerated types, and clusters beyond a few nodes are bought as Capacity Blocks or
# SageMaker training plans in practice.
ON_DEMAND_CLUSTER_NODES = 16


def _cited(cat: Catalog, key: str) -> str:
    src = cat.sources[key]
    return f"{src.title} <{src.url}>, checked {src.checked}"


def capacity_named(w: Workload) -> bool:
    """The config names the capacity it runs on: a reservation, a Capacity Block or a training plan."""
    t = w.training
    return bool(t.capacity_reservation_id or t.capacity_block or t.training_plan_arn)


def capacity_block_pricing(w: Workload, cat: Catalog) -> bool:
    """Price every candidate as a Capacity Block when the config says so, or when its type is not sold on-demand in
    the region but a block price is recorded (trn2.48xlarge on a reservation): candidates are compared on one kind of
    price, never on-demand against Capacity Block."""
    if w.training.capacity_block:
        return True
    wanted = cat.get(w.training.instance_type) if w.training.instance_type else None
    return bool(wanted and not wanted.sold_on_demand(w.region)
                and wanted.price(w.region, sagemaker=False, capacity_block=True) is not None)


def _block_rate(itype: InstanceType, region: str) -> Price | None:
    """The type's recorded EC2 Capacity Block rate in `region` itself (another region's rate buys nothing here)."""
    block = itype.price(region, sagemaker=False, capacity_block=True)
    return block if block is not None and block.region == region else None


def training_plan_price(itype: InstanceType, region: str) -> Price | None:
    """$/h of one node on a SageMaker training plan: only types ReservedCapacityInstanceType lists, at the recorded
    Capacity Block rate in the region (PLAN_PRICE_NOTE); None where none is recorded."""
    if not load_sagemaker_apis().takes("ReservedCapacityInstanceType", itype.name):
        return None
    block = _block_rate(itype, region)
    if block is None:
        return None
    return Price(block.usd_per_hour, region, "; ".join(n for n in (PLAN_PRICE_NOTE, block.note) if n),
                 kind=TRAINING_PLAN)


def reserved_price(w: Workload, cat: Catalog, itype: InstanceType, orchestrator: str) -> Price | None:
    """The capacity the plan could buy for `itype` when the config names none: a Capacity Block on a Slurm cluster
    (a family PCS runs in blocks, sold as blocks in the region), a training plan for a HyperPod group or training
    jobs; None when there is none to buy, or capacity is already named (then every row is priced on it)."""
    if capacity_named(w):
        return None
    if orchestrator == "slurm":
        if itype.family in cat.pcs_capacity_block_families and w.region in (itype.capacity_block_regions or ()):
            return _block_rate(itype, w.region)
        return None
    return training_plan_price(itype, w.region)  # a HyperPod group's or a training job's plan


def default_orchestrator(w: Workload, cat: Catalog, usual: str) -> tuple[str, str]:
    """The orchestrator when the config names none, and why when it is not `usual`: a type EC2 does not sell
    on-demand in the region, with no capacity named, trains where its capacity is sold - a HyperPod group on a
    training plan (AWS PCS runs no block of it, and SageMaker jobs have no image for Trainium)."""
    itype = cat.get(w.training.instance_type) if w.training.instance_type else None
    if itype is None or capacity_named(w) or itype.sold_on_demand(w.region):
        return usual, ""
    apis = load_sagemaker_apis()
    if (usual == "slurm" and reserved_price(w, cat, itype, "slurm")) or \
            not apis.takes("ClusterInstanceType", itype.name) or training_plan_price(itype, w.region) is None:
        return usual, ""
    return "hyperpod", (f"orchestrator hyperpod: EC2 sells {itype.name} in {w.region} without an on-demand offering "
                        "and AWS PCS runs no block of it, so it trains on a HyperPod instance group on a SageMaker "
                        "training plan (ClusterInstanceType and ReservedCapacityInstanceType list "
                        f"{ML_PREFIX}{itype.name})")


@dataclass(frozen=True)
class Purchase:
    """Capacity to buy before deploying: what, for how long, and the commands that find, buy and then use it."""

    kind: str  # CAPACITY_BLOCK | TRAINING_PLAN
    instance_type: str
    count: int  # instances bought (a training plan's quantity options round the cluster up)
    days: int  # whole days bought
    search: str
    buy: str
    deploy: str  # the -c overrides that deploy onto it

    def line(self) -> str:
        return (f"buy {self.days} days of {self.count} x {self.instance_type} as {article(self.kind)}: "
                f"`{self.search}`, then `{self.buy}`; then deploy onto it with {self.deploy}")


def article(kind: str) -> str:
    """"an EC2 Capacity Block", "a SageMaker training plan"."""
    return ("an " if kind[0] in "AEIOU" else "a ") + kind


def days_to_buy(hours: float, kind: str) -> int:
    """Whole days bought: a Capacity Block in 1-day increments to 14 days then 7-day ones (est.billed_hours); a
    training plan in 1-day increments (sagemaker-training-plans-search)."""
    return round(est.billed_hours(hours, CAPACITY_BLOCK) / 24) if kind == CAPACITY_BLOCK \
        else max(1, math.ceil(hours / 24 - 1e-9))


def plan_counts(cat: Catalog) -> list[int]:
    return sorted(cat.training_plan_limits["instance_counts"])


def plan_count(count: int, cat: Catalog) -> int:
    """Instances one training plan reserves for `count` nodes: the smallest quantity option that holds them, at most
    the largest (the run then takes longer on fewer nodes)."""
    options = plan_counts(cat)
    return next((n for n in options if n >= count), options[-1])


def purchase(w: Workload, cat: Catalog, itype: InstanceType, count: int, hours: float, kind: str,
             orchestrator: str = "hyperpod") -> Purchase:
    """The offering to buy for `count` x `itype` over `hours`, and the AWS CLI commands (operations and parameters of
    botocore's ec2 and sagemaker models: tests/test_capacity.py) that find and buy it."""
    days = days_to_buy(hours, kind)
    region = f"--region {w.region}"
    if kind == TRAINING_PLAN:
        bought = plan_count(count, cat)
        name = f"{w.name}-{itype.family}"[:63]
        # A plan serves one target resource (SageMakerResourceName): a HyperPod group's or training jobs'.
        target = "training-job" if orchestrator == "sagemaker-jobs" else "hyperpod-cluster"
        return Purchase(
            kind, itype.name, bought, days,
            search=(f"aws sagemaker search-training-plan-offerings {region} --target-resources {target} "
                    f"--instance-type {ML_PREFIX}{itype.name} --instance-count {bought} --duration-hours {days * 24}"),
            buy=(f"aws sagemaker create-training-plan {region} --training-plan-name {name} "
                 "--training-plan-offering-id <TrainingPlanOfferingId>"),
            deploy=f"-c training.orchestrator={orchestrator} -c training.training_plan_arn=<TrainingPlanArn>")
    return Purchase(
        kind, itype.name, count, days,
        search=(f"aws ec2 describe-capacity-block-offerings {region} --instance-type {itype.name} "
                f"--instance-count {count} --capacity-duration-hours {days * 24}"),
        buy=(f"aws ec2 purchase-capacity-block {region} --capacity-block-offering-id <CapacityBlockOfferingId> "
             "--instance-platform Linux/UNIX"),
        deploy=("-c training.capacity_block=true -c training.capacity_reservation_id=<CapacityReservationId> "
                "-c training.capacity_reservation_az=<AvailabilityZone> -c availability_zone=<AvailabilityZone>"))


def bought_first(p: Purchase | None, where: str = "") -> None:
    """Synthesis of a plan on capacity still to buy is refused: its nodes would have nothing to start on (a HyperPod
    group without its plan, on-demand nodes of a type sold only as blocks). `python -m workloads plan` shows it; the
    error names the commands that buy it and the -c that deploys onto it. `where`: a team's name."""
    if p is None:
        return
    field = "training.training_plan_arn" if p.kind == TRAINING_PLAN else "training.capacity_reservation_id"
    raise ConfigError(f"{where}: {field}" if where else field, None, f"the bought capacity: {p.deploy}",
                      reason=f"{p.count} x {p.instance_type} is planned on {article(p.kind)} not bought yet, so "
                             f"nothing would start; buy {p.days} days of it: {p.search}, then {p.buy}")


def purchase_finding(p: Purchase, price: Price, cat: Catalog) -> Finding:
    """The WARNING a plan on capacity still to buy carries: nothing deploys onto it until it is bought and named."""
    source = "sagemaker-training-plans-search" if p.kind == TRAINING_PLAN else "ec2-capacity-blocks-guide"
    field = "training.training_plan_arn" if p.kind == TRAINING_PLAN else "training.capacity_reservation_id"
    return Finding(WARNING, field, None,
                   f"planned on {article(p.kind)} still to buy ({price.label}, ${price.usd_per_hour:g}/h a node): "
                   f"{p.line()}; until it is named, the {p.instance_type} nodes have no capacity to start on",
                   _cited(cat, source))


def slurm_capacity_refusal(itype: InstanceType, w: Workload, cat: Catalog) -> str:
    """Why a Slurm (AWS PCS) cluster of `itype` would never start its nodes in the config's capacity, or "": PCS runs
    Capacity Blocks of some families only, and on-demand nodes need an on-demand offering (catalog `sold`)."""
    t = w.training
    if t.capacity_block and itype.family not in cat.pcs_capacity_block_families:
        families = ", ".join(sorted(cat.pcs_capacity_block_families))
        return f"AWS PCS runs Capacity Blocks of {families} only, not of {itype.family}"
    if not t.capacity_reservation_id and not itype.sold_on_demand(w.region):
        how = "only as EC2 Capacity Blocks for ML" if w.region in (itype.capacity_block_regions or ()) else \
            "without an on-demand offering"
        return f"EC2 sells {itype.name} in {w.region} {how}, so on-demand nodes would never launch"
    return ""


def capacity_as_sold(w: Workload, cat: Catalog, names: tuple[str, ...]) -> None:
    """A Slurm cluster of the config's type is refused when its nodes could never start: the type is not sold
    on-demand in the region and no capacity is named, or it is named as a Capacity Block PCS does not run. The error
    says what to set instead, among the tier's `names`; a HyperPod training plan where SageMaker reserves the type."""
    t = w.training
    itype = cat.get(t.instance_type) if t.instance_type else None
    if itype is None or not (why := slurm_capacity_refusal(itype, w, cat)):
        return
    if reserved_price(w, cat, itype, "slurm") is not None:
        return  # planned on a Capacity Block to buy (the candidates' purchase)
    sold = [n for n in names if (x := cat.get(n)) and x.sold_on_demand(w.region) and cat.allows(n)]
    on_demand = f"a type sold on-demand in {w.region}: {', '.join(sold)}" if sold else \
        "a region where a type of this tier is sold on-demand"
    source = cat.sources[cat.pcs_capacity_block_source if t.capacity_block else
                         (itype.sold_sources or ("ec2-capacity-blocks-guide",))[0]]
    cited = f" ({source.title} <{source.url}>, checked {source.checked})"
    reservation = (f"an On-Demand Capacity Reservation of {itype.name} in {w.availability_zone}: "
                   f"-c training.capacity_reservation_id=cr-... -c training.capacity_reservation_az={w.availability_zone}")
    plan = ""
    if not t.capacity_block and load_sagemaker_apis().takes("ClusterInstanceType", itype.name) and \
            training_plan_price(itype, w.region) is not None:
        plan = (f"; or -c training.orchestrator=hyperpod: planned on a SageMaker training plan of {ML_PREFIX}"
                f"{itype.name} to buy (the plan prints the commands)")
    if t.capacity_block:
        raise ConfigError("training.capacity_block", True, f"{reservation} (with training.capacity_block=false); or "
                          f"{on_demand}", reason=why + cited)
    if itype.family in cat.pcs_capacity_block_families and w.region in (itype.capacity_block_regions or ()):
        block = (f"buy a Capacity Block of {itype.name} in {w.availability_zone}, then name it: -c "
                 f"training.capacity_block=true -c training.capacity_reservation_id=cr-... -c "
                 f"training.capacity_reservation_az={w.availability_zone}")
        raise ConfigError("training.instance_type", itype.name, f"{block}; or {on_demand}", reason=why + cited)
    pcs = "" if itype.family in cat.pcs_capacity_block_families else \
        f"; AWS PCS does not run {itype.family} Capacity Blocks"
    raise ConfigError("training.instance_type", itype.name, f"{on_demand}; or {reservation}{plan}",
                      reason=why + pcs + cited)


def capacity_at_scale(w: Workload, cat: Catalog, itype: InstanceType, count: int, orchestrator: str,
                      hours: float | None) -> list[Finding]:
    """A WARNING for accelerated clusters beyond what on-demand realistically gets, priced as Capacity Blocks where
    a rate is recorded, naming each published Capacity Block limit the run exceeds (catalog capacity_block_limits)."""
    if itype.accelerator is None or count <= ON_DEMAND_CLUSTER_NODES or hours is None or w.training.training_plan_arn:
        return []
    limits = cat.capacity_block_limits
    days = math.ceil(hours / 24)
    exceeded = []
    if count > limits["instances_per_block"]:
        exceeded.append(f"{count} nodes exceed {limits['instances_per_block']} instances per Capacity Block (it "
                        f"takes {math.ceil(count / limits['instances_per_block'])} blocks, each its own reservation)")
    if count > limits["instances_per_account"]:
        exceeded.append(f"{count} nodes exceed {limits['instances_per_account']} instances across an account's "
                        "Capacity Blocks")
    if days > limits["max_days"]:
        exceeded.append(f"{days} days exceed a block's {limits['max_days']}-day maximum")
    cited = _cited(cat, limits["source"])
    if w.training.capacity_block:
        if not exceeded:
            return []
        return [Finding(WARNING, "training.instance_count", count, "beyond the Capacity Block limits: " +
                        "; ".join(exceeded), cited)]
    block = _block_rate(itype, w.region)
    if block is not None:
        total = est.billed_hours(hours, block.kind) * block.usd_per_hour * count
        priced = f"; as Capacity Blocks at ${block.usd_per_hour:g}/h a node ({block.label}) it costs ${total:,.0f}"
    else:
        priced = f"; no {itype.name} Capacity Block rate is recorded for {w.region}"
    what = "SageMaker training plans" if orchestrator != "slurm" else \
        "EC2 Capacity Blocks (-c training.capacity_block=true with the reservation) or SageMaker training plans"
    limits_line = ("; " + "; ".join(exceeded)) if exceeded else \
        f"; within the Capacity Block limits ({limits['instances_per_block']} instances a block, " \
        f"{limits['instances_per_account']} across an account's blocks, {limits['max_days']} days)"
    return [Finding(WARNING, "training.capacity_block", False,
                    f"{count} x {itype.name} for {days} days priced on-demand: clusters beyond "
                    f"{ON_DEMAND_CLUSTER_NODES} nodes rarely get on-demand capacity; reserve {what}{priced}"
                    f"{limits_line}", cited)]


def compute_scaling(w: Workload, orchestrator: str, count: int, decisions: list[str]) -> int | None:
    """The Slurm compute group's minimum: static nodes only where the capacity is paid whether they run or not (a
    Capacity Block, or a reservation); dynamic nodes otherwise, so an idle on-demand cluster bills no compute."""
    if orchestrator != "slurm":
        return None
    if w.training.capacity_reservation_id:
        paid = "Capacity Block, bought up front for its days" if w.training.capacity_block else \
            "capacity reservation, billed whether its instances run or not"
        decisions.append(f"static compute nodes ({count} of {count}): the {paid}")
        return count
    decisions.append(f"dynamic compute nodes (0 to {count}): PCS starts them for queued jobs and ends them after "
                     f"{SCALE_DOWN_IDLE_S} s idle (ScaleDownIdleTimeInSeconds), so an idle cluster bills no compute")
    return 0


def placement(w: Workload, orchestrator: str, efa: int, decisions: list[str]) -> bool:
    """A cluster placement group for EFA clusters we launch ourselves, except on a Capacity Block."""
    if orchestrator != "slurm" or efa == 0:
        return False
    if w.training.capacity_block:
        decisions.append("no placement group: AWS already places a Capacity Block, and a placement group on it "
                         "causes insufficient-capacity errors")
        return False
    decisions.append("cluster placement group: all nodes close on the network, in one AZ")
    return True
