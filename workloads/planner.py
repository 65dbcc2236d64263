"""The planner: instance families, counts, storage and orchestrator from a Workload.

Pure Python (never imports aws_cdk or sagemaker). Encodes the seeds' guidance in DESIGN.md:
classic ML on CPU (XGBoost on m5), small DL on G4dn/G5, big DL on G5 for cost or P4d/P5 for
speed, 10B+ transformers on TB data on Trn1/Trn1n or P4d/P5 EFA clusters with FSx for Lustre.
Every choice carries the reason the plan prints.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

from . import estimates as est
from .catalog import (ML_PREFIX, Catalog, InstanceType, NetworkInterface, devices, load_catalog, load_serving,
                      load_utilisation, SoftwareStack, load_software, network_interfaces)
from .errors import ConfigError, raise_all
from .schema import CLASSIC_ML, Async, Batch, Realtime, Serverless, Workload
from . import parallelism
from .parallelism import Parallelism
from .serving import (ServingPlan, artifact_format, attention_heads, kv_cache_gib, layout_of, model_shape,
                      plan_serving, tensor_parallel)
from .startup import Startup, plan_startup
from .storage import FsxPlan, size_fsx
from .validators import hosting_zones
from . import speed

# Tier thresholds from the seeds' table: "10B+ parameters and TB data" is the cluster tier.
LARGE_PARAMS_B = 10
LARGE_DATA_GIB = 1000
MEDIUM_PARAMS_B = 1
MEDIUM_DATA_GIB = 100
DEFAULT_TARGET_HOURS = 168.0  # one week, when training.max_hours is open
MAX_INSTANCES = 512
# Small data is copied to each node (File mode); mid-size streams (FastFile); TB data -> FSx.
FILE_MODE_MAX_GIB = 50
XGBOOST_MEMORY_FACTOR = 2.0  # XGBoost holds the data in memory (DMatrix) plus histograms

TRAINING_CANDIDATES: dict[str, tuple[str, ...]] = {
    "large-dl": ("trn2.48xlarge", "p4d.24xlarge", "p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge",
                 "p6-b300.48xlarge"),
    "medium-dl": ("g5.12xlarge", "g5.48xlarge", "g6.48xlarge", "p4d.24xlarge", "p5.48xlarge"),
    "small-dl": ("g4dn.xlarge", "g5.xlarge", "g5.2xlarge", "g6.xlarge"),
    "xgboost": ("m5.xlarge", "m5.2xlarge", "m5.4xlarge", "m5.12xlarge", "m5.24xlarge"),
    "scikit-learn": ("c5.xlarge", "c5.2xlarge", "c5.4xlarge", "c5.9xlarge", "c5.18xlarge",
                     "m5.12xlarge", "m5.24xlarge", "r5.12xlarge"),
}
TIER_REASON = {
    "large-dl": "10B+ parameters on TB-scale data: Trainium or P4d/P5-class cluster with EFA (seeds); Trainium means "
                "Trn2 now, the generation Neuron still trains on",
    "medium-dl": "big deep learning: G5 for cost, P4d/P5 for speed (seeds)",
    "small-dl": "small deep learning / fine-tuning on small data: G4dn/G5 (seeds)",
    "xgboost": "XGBoost is memory-bound: general purpose m5 over compute optimized c5 (seeds)",
    "scikit-learn": "classic ML trains on CPU, never a GPU (seeds)",
}
# Inference families in order of preference per need; the cheapest that holds the model wins.
INFERENTIA = ("inf2.xlarge", "inf2.8xlarge", "inf2.24xlarge", "inf2.48xlarge")
GPU_SERVING = ("g4dn.xlarge", "g5.xlarge", "g5.2xlarge", "g5.12xlarge", "g5.48xlarge", "p4d.24xlarge")
CPU_SERVING = ("c5.large", "c5.xlarge", "m5.large", "m5.xlarge", "c5.2xlarge", "m5.2xlarge", "m5.4xlarge")


@dataclass(frozen=True)
class Candidate:
    instance_type: str
    count: int
    accelerators: str
    usd_per_hour: float  # whole cluster
    hours: float | None
    usd_total: float | None
    feasible: bool
    why: str
    chosen: bool = False


@dataclass(frozen=True)
class TrainingEstimate:
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


@dataclass(frozen=True)
class TrainingPlan:
    instance_type: str
    sagemaker_instance_type: str
    instance_count: int
    orchestrator: str
    storage: str
    tier: str
    accelerator: str
    accelerator_kind: str | None  # nvidia-gpu | trainium | None (CPU)
    efa_interfaces: int  # EFA devices per node
    efa_max_interfaces: int
    efa_gbps: float  # aggregate EFA bandwidth per node with efa_interfaces attached
    network_interfaces: tuple[NetworkInterface, ...]  # the launch template's, from the type's network cards
    network_gbps: float  # the type's maximum
    placement_group: bool
    capacity_reservation_id: str | None
    capacity_block: bool
    fsx: FsxPlan | None
    decisions: tuple[str, ...]
    candidates: tuple[Candidate, ...]
    estimate: TrainingEstimate
    parallelism: Parallelism | None = None  # deep learning on accelerators: how the model is spread
    software: SoftwareStack | None = None  # accelerators: the pinned stack the nodes run (catalog/software.yaml)


@dataclass(frozen=True)
class InferencePlan:
    kind: str
    instance_type: str | None
    min_instances: int
    max_instances: int
    usd_per_hour_min: float | None
    usd_per_hour_max: float | None
    reason: str
    local_nvme: bool = False  # SageMaker refuses KmsKeyId on these
    accelerator_kind: str | None = None
    memory_mb: int | None = None
    max_concurrency: int | None = None
    schedule: str | None = None
    invocations_per_instance: int | None = None  # real-time scaling target, per minute
    why_kind: str = ""
    requests_per_second_per_instance: float | None = None  # the throughput the $/million assumes (likely)
    requests_per_second_range: tuple[float, float] | None = None  # (low, high) over the published spread
    latency_ms: float | None = None  # one request, modelled, at `concurrency` in flight
    concurrency: int | None = None  # requests one instance serves at once
    throughput_basis: str = ""  # what the throughput rests on, with sources
    usd_per_million: float | None = None
    instances_needed_at_peak: int | None = None
    data_capture_percent: int = 0
    provisioned_concurrency: int | None = None
    max_concurrent_invocations_per_instance: int | None = None
    max_payload_mb: int | None = None
    max_concurrent_transforms: int | None = None
    serving: ServingPlan | None = None  # container, artifact and environment
    startup: Startup | None = None  # endpoint variants: download and start-up timeouts, ML volume size


@dataclass(frozen=True)
class Plan:
    workload: Workload
    training: TrainingPlan
    inference: dict[str, InferencePlan]
    calibration: tuple[str, ...] = field(default=())
    # Hosted endpoints' subnets: the cluster's zone first, then a second (SageMaker asks for two).
    hosting_zones: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        out = {
            "workload": self.workload.model_dump(by_alias=True, mode="json"),
            "training": asdict(self.training),
            "inference": {kind: asdict(p) for kind, p in self.inference.items()},
            "calibration": list(self.calibration),
            "hosting_zones": list(self.hosting_zones),
        }
        out["estimates"] = out["training"].pop("estimate")
        return out


def plan(w: Workload, cat: Catalog | None = None, *, allowed_families: list[str] | None = None) -> Plan:
    """`allowed_families`: a team's; the plan then compares and chooses only those."""
    cat = (cat or load_catalog()).for_families(allowed_families)
    training = _plan_training(w, cat)
    return Plan(
        workload=w,
        training=training,
        inference=_plan_inference(w, cat),
        calibration=_calibration_lines(cat) if training.estimate.flops is not None else (),
        hosting_zones=hosting_zones(w, cat),
    )


# ---------------------------------------------------------------- training

def tier_of(w: Workload) -> str:
    if w.model.framework in CLASSIC_ML:
        return w.model.framework
    if w.model.parameters_billion >= LARGE_PARAMS_B and w.data.dataset_size_gib >= LARGE_DATA_GIB:
        return "large-dl"
    if w.model.parameters_billion >= MEDIUM_PARAMS_B or w.data.dataset_size_gib >= MEDIUM_DATA_GIB:
        return "medium-dl"
    return "small-dl"


def utilisation(itype: InstanceType, parameters_billion: float) -> est.UtilisationRange:
    """Low, likely and high MFU for the type's accelerator at this model size, from published runs."""
    return est.utilisation_range(itype, parameters_billion, load_utilisation())


def _default_orchestrator(tier: str) -> str:
    return "slurm" if tier == "large-dl" else "sagemaker-jobs"


def _price(itype: InstanceType, w: Workload, orchestrator: str):
    return itype.price(w.region, sagemaker=orchestrator != "slurm")


def _eligible(name: str, w: Workload, cat: Catalog, orchestrator: str) -> tuple[InstanceType | None, str]:
    itype = cat.get(name)
    if itype is None:
        return None, "not in catalog"
    if not cat.allows(name) and name != w.training.instance_type:
        return None, "outside the team's allowed families"
    if w.region not in itype.regions:
        return None, f"not offered in {w.region}"
    if itype.accelerator and itype.accelerator.kind == "trainium":
        if w.model.framework != "pytorch" or not w.model.neuron_supported:
            return None, "Trainium needs a PyTorch model that compiles with Neuron"
        if orchestrator == "sagemaker-jobs":
            # sagemaker 3.27's offline image table knows no TorchNeuron training image (its newest Neuron one is
            # pytorch-training-neuronx 2.1.2, PyTorch/XLA), so a job would start on an unsupported stack.
            return None, "no SageMaker training image with TorchNeuron is known: train on Trainium with slurm or hyperpod"
    if itype.accelerator and isinstance(stack := load_software().for_type(itype), str):
        return None, stack
    if _price(itype, w, orchestrator) is None:
        return None, "no price for this form"
    return itype, ""


def _dl_candidate(itype: InstanceType, w: Workload, cat: Catalog, orchestrator: str, flops: float) -> Candidate:
    price = _price(itype, w, orchestrator)
    assert price and itype.accelerator
    util = utilisation(itype, w.model.parameters_billion).likely
    min_mem = est.min_instances_for_memory(w.model.parameters_billion, itype)
    if w.training.instance_count is not None:
        count = w.training.instance_count
    else:
        target = w.training.max_hours or DEFAULT_TARGET_HOURS
        single = est.hours(flops, itype, 1, util)
        by_time = 1 if single <= target else math.ceil(single / (target * est.MULTI_NODE_EFFICIENCY))
        count = min(max(min_mem, by_time), MAX_INSTANCES)
    hrs = est.hours(flops, itype, count, util)
    feasible = True
    why = f"{util:.0%} utilisation" + (", nodes set by the config" if w.training.instance_count else "")
    if count < min_mem:
        feasible, why = False, f"model state needs {min_mem} nodes' accelerator memory"
    elif count > 1 and orchestrator in ("slurm", "hyperpod") and itype.efa_max_interfaces == 0:
        feasible, why = False, f"a {count}-node cluster needs EFA; {itype.name} has none"
    elif w.training.max_hours is not None and hrs > w.training.max_hours:
        feasible, why = False, f"misses max_hours {w.training.max_hours:g}"
    acc = itype.accelerator
    return Candidate(itype.name, count, f"{acc.count} x {acc.model}", price.usd_per_hour * count,
                     hrs, hrs * price.usd_per_hour * count, feasible, why)


def _cpu_candidate(itype: InstanceType, w: Workload, orchestrator: str) -> Candidate:
    price = _price(itype, w, orchestrator)
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
    return Candidate(itype.name, count, f"{itype.vcpus} vCPU, {itype.memory_gib:g} GiB", price.usd_per_hour * count,
                     None, None, feasible, why)


def _pick(cands: list[Candidate]) -> Candidate:
    """The cheapest feasible candidate: lowest total cost (DL) or $/h then fewest nodes (CPU)."""
    feasible = [c for c in cands if c.feasible]
    if not feasible:
        best = min(cands, key=lambda c: c.usd_per_hour)
        raise ConfigError("training", best.instance_type, "a larger instance_count or max_hours, or less data",
                          reason=f"no instance type can run this workload ({best.why})")
    if feasible[0].usd_total is None:  # CPU: cheapest per hour that holds the data
        return min(feasible, key=lambda c: (round(c.usd_per_hour, 2), c.count))
    return min(feasible, key=lambda c: (round(c.usd_total or 0, 2), c.hours or 0))


def _candidates(w: Workload, cat: Catalog, tier: str, orchestrator: str,
                flops: float | None) -> tuple[list[Candidate], list[str]]:
    """Every eligible type of the tier (plus the config's own choice), costed side by side."""
    names = list(TRAINING_CANDIDATES[tier])
    if w.training.instance_type and w.training.instance_type not in names:
        names.insert(0, w.training.instance_type)
    cands, skipped = [], []
    for name in names:
        itype, reason = _eligible(name, w, cat, orchestrator)
        if itype is None:
            skipped.append(f"{name}: {reason}")
        elif flops is None:
            cands.append(_cpu_candidate(itype, w, orchestrator))
        elif itype.accelerator is None:
            skipped.append(f"{name}: CPU type for a neural network; no FLOP estimate")
        else:
            cands.append(_dl_candidate(itype, w, cat, orchestrator, flops))
    return cands, skipped


def _choose(w: Workload, cands: list[Candidate], skipped: list[str], decisions: list[str]) -> Candidate:
    wanted = w.training.instance_type
    if not cands and wanted is None:  # every type of the tier was skipped (a team's families, the region, ...)
        raise ConfigError("training.instance_type", None, "a type that can run this workload; none of the "
                          "candidates could: " + "; ".join(skipped),
                          reason="no candidate instance type is eligible")
    if wanted is None:
        chosen = _pick(cands)
        measure = "cost" if chosen.usd_total is not None else "$/h"
        decisions.append(f"{chosen.instance_type}: lowest {measure} among {len(cands)} candidates that fit")
        return chosen
    chosen = next((c for c in cands if c.instance_type == wanted), None)
    if chosen is None:
        why = next((r.split(": ", 1)[1] for r in skipped if r.startswith(f"{wanted}: ")), "not a candidate")
        plannable = [c.instance_type for c in cands if c.feasible]
        raise ConfigError("training.instance_type", wanted, ", ".join(plannable) or "another catalog type",
                          reason=f"cannot be planned for this workload ({why})")
    if not chosen.feasible:
        raise ConfigError("training.instance_count", chosen.count, "more nodes, or a type with more accelerator memory",
                          reason=f"{wanted} x{chosen.count}: {chosen.why}")
    decisions.append(f"instance type {wanted} set by the config")
    others = [c for c in cands if c.instance_type != wanted and c.feasible]
    if others and chosen.usd_total:
        best = _pick(others)
        if best.usd_total and best.usd_total < chosen.usd_total * 0.95:
            decisions.append(f"note: {best.instance_type} x{best.count} would cost "
                             f"{1 - best.usd_total / chosen.usd_total:.0%} less")
    return chosen


def _plan_training(w: Workload, cat: Catalog) -> TrainingPlan:
    tier = tier_of(w)
    decisions = [TIER_REASON[tier]]
    orchestrator = w.training.orchestrator or _default_orchestrator(tier)
    classic = tier in CLASSIC_ML
    tokens = None if classic else est.tokens_billion(w.data.dataset_size_gib, w.data.tokens_billion, w.training.epochs)
    flops = None if tokens is None else est.training_flops(w.model.parameters_billion, tokens)

    cands, skipped = _candidates(w, cat, tier, orchestrator, flops)
    chosen = _choose(w, cands, skipped, decisions)
    if skipped:
        decisions.append("not considered: " + "; ".join(skipped))
    itype, count = cat.types[chosen.instance_type], chosen.count

    if w.training.orchestrator is None and orchestrator == "slurm" and count == 1:
        orchestrator = "sagemaker-jobs"
        decisions.append("single node: SageMaker training job rather than a Slurm cluster")
    elif w.training.orchestrator is None:
        decisions.append(f"orchestrator {orchestrator}: " + ("a multi-node EFA cluster runs best on Slurm"
                         if orchestrator == "slurm" else "SageMaker runs the nodes for one job"))
    _nothing_ignored(w, orchestrator)
    storage = _storage(w, orchestrator, tier, decisions)
    # Multi-node jobs use every EFA interface the type has (SageMaker and HyperPod attach them too).
    efa = itype.efa_max_interfaces if count > 1 else 0
    placement = _placement(w, orchestrator, efa, decisions)
    estimate = _estimate(w, cat, itype, count, orchestrator, tokens, flops)
    fsx = None
    if storage == "fsx-lustre":
        fsx = size_fsx(dataset_gib=w.data.dataset_size_gib, parameters_billion=w.model.parameters_billion,
                       epochs=w.training.epochs, training_hours=estimate.hours)
        decisions.append(f"FSx for Lustre PERSISTENT_2: {fsx.why}")

    final = tuple(replace(c, chosen=c.instance_type == chosen.instance_type) for c in cands)
    acc = itype.accelerator
    spread = None if classic or acc is None else _parallelism(w, itype, count, decisions)
    software = load_software().for_type(itype) if acc else None
    assert not isinstance(software, str)  # _eligible refused types without a stack
    return TrainingPlan(
        instance_type=itype.name, sagemaker_instance_type=ML_PREFIX + itype.name, instance_count=count,
        orchestrator=orchestrator, storage=storage, tier=tier,
        accelerator=f"{acc.count} x {acc.model} ({acc.memory_gib:g} GiB)" if acc else "none (CPU)",
        accelerator_kind=acc.kind if acc else None, efa_interfaces=efa, efa_max_interfaces=itype.efa_max_interfaces,
        efa_gbps=itype.network_gbps * efa / itype.efa_max_interfaces if efa else 0.0, network_gbps=itype.network_gbps,
        network_interfaces=network_interfaces(itype, efa=efa > 0),
        placement_group=placement, capacity_reservation_id=w.training.capacity_reservation_id,
        capacity_block=w.training.capacity_block, fsx=fsx, decisions=tuple(decisions), candidates=final,
        estimate=estimate, parallelism=spread, software=software,
    )


def _parallelism(w: Workload, itype: InstanceType, count: int, decisions: list[str]) -> Parallelism:
    layers, _, _, hidden = model_shape(w)
    heads, _ = attention_heads(w)
    spread = parallelism.choose(parameters_billion=w.model.parameters_billion, layers=layers, hidden=hidden,
                                heads=heads, itype=itype, nodes=count)
    if spread is None:
        per_node, gib = devices(itype)
        field = "training.instance_count" if w.training.instance_count else "training.instance_type"
        value = w.training.instance_count if w.training.instance_count else itype.name
        raise ConfigError(field, value, "more nodes, or a type with more accelerator memory",
                          reason=f"no data/tensor/pipeline layout of a {w.model.parameters_billion:g}B model fits "
                                 f"{count} x {itype.name} ({count * per_node} ranks of {gib:g} GiB)")
    decisions.append(f"layout: {spread.reason}")
    return spread


def _nothing_ignored(w: Workload, orchestrator: str) -> None:
    """Values the chosen orchestrator would silently ignore are refused, each with the reason."""
    t, errors = w.training, []
    how = "set by the config" if t.orchestrator else "chosen by the planner"
    if t.spot and orchestrator != "sagemaker-jobs":
        errors.append(ConfigError(
            "training.spot", True, "false, or training.orchestrator sagemaker-jobs (managed spot, checkpoints to S3)",
            reason=f"the {orchestrator} cluster ({how}) runs on-demand or reserved nodes; managed spot is a SageMaker "
                   "training-job feature and would be ignored"))
    if t.capacity_reservation_id and orchestrator != "slurm":
        errors.append(ConfigError(
            "training.capacity_reservation_id", t.capacity_reservation_id,
            "training.orchestrator slurm, or training.training_plan_arn for HyperPod",
            reason=f"only the Slurm cluster's launch template uses an EC2 reservation; {orchestrator} ({how}) would "
                   "ignore it"))
    if w.data.shared_home and orchestrator != "slurm":
        errors.append(ConfigError(
            "data.shared_home", True, "training.orchestrator slurm, or false",
            reason=f"only the Slurm cluster's nodes mount /home from EFS; {orchestrator} ({how}) would not"))
    raise_all(errors)


def _placement(w: Workload, orchestrator: str, efa: int, decisions: list[str]) -> bool:
    """A cluster placement group for EFA clusters we launch ourselves, except on a Capacity Block."""
    if orchestrator != "slurm" or efa == 0:
        return False
    if w.training.capacity_block:
        decisions.append("no placement group: AWS already places a Capacity Block, and a placement group on it "
                         "causes insufficient-capacity errors")
        return False
    decisions.append("cluster placement group: all nodes close on the network, in one AZ")
    return True


def _estimate(w: Workload, cat: Catalog, itype: InstanceType, count: int, orchestrator: str,
              tokens: float | None, flops: float | None) -> TrainingEstimate:
    price = _price(itype, w, orchestrator)
    assert price
    util = util_range = None
    basis = ""
    if flops is not None:
        r = utilisation(itype, w.model.parameters_billion)
        util, util_range, basis = r.likely, (r.low, r.high), r.basis
        low_h, hrs, high_h = (est.hours(flops, itype, count, u) for u in (r.high, r.likely, r.low))
    else:
        u = load_utilisation()
        low_h, hrs, high_h = est.classic_hours(w.data.dataset_size_gib, itype.vcpus, count, u)
        basis = "; ".join(f"{m.what}: {m.value / 1e6:g} M cell-rounds per vCPU-second [{m.source}]"
                          for m in u.classic_rates)
    cluster_usd_h = price.usd_per_hour * count
    total = hrs * cluster_usd_h
    total_range = (low_h * cluster_usd_h, high_h * cluster_usd_h)
    spot = total * (1 - est.SPOT_SAVING) if orchestrator == "sagemaker-jobs" else None
    service = "EC2" if orchestrator == "slurm" else "SageMaker"
    note = price.note or f"{service} on-demand, {price.region}"
    reserved = "Capacity Block" if w.training.capacity_block else \
        "SageMaker training plan" if w.training.training_plan_arn else None
    if reserved:
        # Reserved capacity is bought up front at its own price, not at on-demand rates.
        total = spot = total_range = None
        note = (f"{reserved}: bought at its own up-front price, which the catalog does not record, so the total is "
                f"unknown; {service} on-demand $/h shown for reference only")
    return TrainingEstimate(
        tokens_billion=tokens, flops=flops, utilisation=util, hours=hrs, usd_per_hour=cluster_usd_h,
        usd_total=total, hours_range=(low_h, high_h), usd_total_range=total_range, utilisation_range=util_range,
        spot_usd_total=spot, price_note=note, assumptions=_assumptions(flops is None, itype, cat, w), basis=basis,
    )


def _storage(w: Workload, orchestrator: str, tier: str, decisions: list[str]) -> str:
    if w.data.storage is not None:
        decisions.append(f"storage {w.data.storage} set by the config")
        return w.data.storage
    size = w.data.dataset_size_gib
    if orchestrator in ("slurm", "hyperpod"):
        choice, why = "fsx-lustre", "a cluster needs a shared POSIX file system: FSx for Lustre linked to S3"
    elif size >= LARGE_DATA_GIB:
        choice, why = "fsx-lustre", "TB-scale data read repeatedly: FSx for Lustre linked to S3"
    elif size <= FILE_MODE_MAX_GIB or tier in CLASSIC_ML:
        choice, why = "s3-file", f"{size:g} GiB is copied to each node before training (S3 File mode)"
    else:
        choice, why = "s3-fastfile", f"{size:g} GiB streams from S3 on demand (FastFile mode)"
    decisions.append(f"storage {choice}: {why}")
    return choice


def _assumptions(classic: bool, itype: InstanceType, cat: Catalog, w: Workload) -> tuple[str, ...]:
    if classic:
        u = load_utilisation()
        return (f"classic ML time = float32 cells (dataset bytes / 4) x {u.classic_rounds} boosting rounds / "
                "(XGBoost hist cell-rounds per vCPU-second x vCPUs); range over the published rates, likely = median",
                "scikit-learn is assumed to train like a histogram booster (HistGradientBoosting); other estimators "
                "differ",
                f"XGBoost/scikit-learn hold about {XGBOOST_MEMORY_FACTOR:g}x the dataset in memory")
    lines = [
        "FLOPs = 6 x parameters x tokens x epochs",
        ("tokens given by data.tokens_billion" if w.data.tokens_billion is not None
         else f"tokens = dataset bytes / {est.BYTES_PER_TOKEN} bytes per token"),
        f"peak = dense {itype.peak_tflops_dtype or 'bf16'} TFLOPS from the catalog",
        "utilisation (MFU) from published training runs of the accelerator at this model size: low, likely "
        "(median) and high give the range; the runs' own multi-node scaling is included",
        f"nodes sized for a target time at {est.MULTI_NODE_EFFICIENCY:.0%} multi-node efficiency; model state "
        f"{est.TRAIN_BYTES_PER_PARAM} B/param in {est.MEMORY_HEADROOM:.0%} of accelerator memory",
        f"managed spot saves {est.SPOT_SAVING:.0%} (AWS: up to 90%)",
    ]
    return tuple(lines)


def _calibration_lines(cat: Catalog) -> tuple[str, ...]:
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


# ---------------------------------------------------------------- inference

def _cheapest_fitting(names: tuple[str, ...], w: Workload, cat: Catalog, *, fits: Callable[[InstanceType], bool],
                      cost: Callable[[InstanceType], float | None]) -> tuple[InstanceType | None, list[InstanceType]]:
    """(the fitting type of least cost, the fitting types whose cost is None: too slow for the latency target)."""
    costs: dict[str, tuple[float, InstanceType]] = {}
    too_slow = []
    for name in names:
        itype = cat.get(name)
        if itype is None or not cat.allows(name) or w.region not in itype.regions \
                or itype.price(w.region, sagemaker=True) is None or not fits(itype):
            continue
        c = cost(itype)
        if c is None:
            too_slow.append(itype)
        else:
            costs[name] = (c, itype)
    return (min(costs.values(), key=lambda pair: pair[0])[1] if costs else None), too_slow


def serving_speed(kind: str, w: Workload, itype: InstanceType) -> speed.Speed:
    """How fast one instance serves this workload's requests; the latency target binds real-time only."""
    target = w.inference.latency_ms if kind == "realtime" else None
    # A transform job has at most MaxConcurrentTransforms requests in flight per instance.
    limit = (w.inference.batch or Batch()).concurrency_limit() if kind == "batch" else None
    classic = w.model.framework in CLASSIC_ML
    if classic or itype.accelerator is None:
        return speed.cpu(w, itype, target, classic=classic, max_concurrency=limit)
    if artifact_format(w)[0] == "huggingface":
        heads, _ = attention_heads(w)
        degree = tensor_parallel(w.model.parameters_billion, heads, itype, kv_cache_gib=kv_cache_gib(w))
        assert degree is not None
        return speed.llm(w, itype, degree, target, max_concurrency=limit)
    return speed.encoder(w, itype, target)


def _serving_cost(kind: str, w: Workload) -> Callable[[InstanceType], float | None]:
    """Real-time: $/h of the instances the peak needs; async and batch: $ per request. None: misses the latency."""
    def cost(itype: InstanceType) -> float | None:
        s = serving_speed(kind, w, itype)
        if not s.meets_latency:
            return None
        hourly = itype.price(w.region, sagemaker=True).usd_per_hour
        if kind == "realtime":
            return hourly * math.ceil(w.inference.requests_per_second / s.requests_per_second)
        return hourly / s.requests_per_second
    return cost


def _weights_fit(w: Workload, bytes_per_param: float) -> Callable[[InstanceType], bool]:
    def fits(itype: InstanceType) -> bool:
        memory = itype.accelerator.memory_gib if itype.accelerator else itype.memory_gib
        return est.serving_fits(w.model.parameters_billion, memory, bytes_per_param)
    return fits


def _llm_fits(w: Workload) -> Callable[[InstanceType], bool]:
    """An LLM fits where a tensor-parallel degree that divides its attention heads holds its weights."""
    heads, _ = attention_heads(w)
    kv = kv_cache_gib(w)
    return lambda itype: itype.accelerator is not None and \
        tensor_parallel(w.model.parameters_billion, heads, itype, kv_cache_gib=kv) is not None


def _serving_type(kind: str, w: Workload, cat: Catalog) -> tuple[InstanceType, str]:
    """The cheapest type that holds the model and meets the latency: at the peak for real-time, per request else."""
    cost, too_slow = _serving_cost(kind, w), []
    least = "the fewest dollars an hour at the peak" if kind == "realtime" else "the lowest cost per request"
    if w.model.framework in CLASSIC_ML:
        itype, slow = _cheapest_fitting(CPU_SERVING if kind != "batch" else CPU_SERVING[4:], w, cat,
                                        fits=_weights_fit(w, est.CPU_BYTES_PER_PARAM), cost=cost)
        too_slow += slow
        if itype:
            return itype, "classic ML serves on CPU" + (" (seeds: low, steady traffic)" if kind == "realtime" else "") \
                + f"; {least}"
    llm = artifact_format(w)[0] == "huggingface"
    fits = _llm_fits(w) if llm else _weights_fit(w, est.SERVE_BYTES_PER_PARAM)
    # Inferentia2 serves LLMs through TGI on Neuron; other PyTorch models would need their own Neuron compile.
    if llm and w.model.neuron_supported and kind == "realtime":
        itype, slow = _cheapest_fitting(INFERENTIA, w, cat, fits=fits, cost=cost)
        too_slow += slow
        if itype:
            return itype, f"Neuron supports the model: Inferentia2 gives the best price-performance (seeds); {least}"
    itype, slow = _cheapest_fitting(GPU_SERVING, w, cat, fits=fits, cost=cost)
    too_slow += slow
    if itype:
        why = {"realtime": "GPU for throughput and latency (seeds)",
               "async": "GPU for large payloads and long inferences (seeds)",
               "batch": "GPU that holds the model, for periodic large datasets"}[kind]
        return itype, f"{why}; {least}"
    if too_slow:
        s, fastest = min(((serving_speed(kind, w, t), t) for t in too_slow), key=lambda pair: pair[0].latency_ms)
        raise _too_slow(w, fastest, s, "the fastest that holds the model", "")
    raise ConfigError(f"inference.{kind}.instance_type", None, "set one explicitly",
                      reason=f"no catalog type holds a {w.model.parameters_billion:g}B-parameter model")


KINDS = ("realtime", "serverless", "async", "batch")


def choose_kinds(w: Workload) -> dict[str, tuple[object, str]]:
    """The kinds to deploy: those the config lists, or the seeds' choice from the traffic."""
    inf = w.inference
    listed = {k: s for k, s in zip(KINDS, (inf.realtime, inf.serverless, inf.async_, inf.batch)) if s is not None}
    if listed:
        return {k: (s, "listed in the config") for k, s in listed.items()}
    if inf.traffic == "periodic":
        return {"batch": (Batch(), "periodic work on large datasets: batch transform (seeds)")}
    if inf.payload_mb > 6 or inf.processing_seconds > 60:
        return {"async": (Async(), f"{inf.payload_mb:g} MB / {inf.processing_seconds:g} s is past real-time's "
                                   "6 MB / 60 s: asynchronous, up to 1 GB and 1 hour (seeds)")}
    memory = _serverless_memory_mb(w)
    cold_starts_ok = inf.latency_ms is None or inf.latency_ms >= 1000
    cpu_servable = artifact_format(w)[0] != "huggingface"  # LLM serving containers need GPU or Inferentia2
    if inf.traffic in ("spiky", "rare") and inf.payload_mb <= 4 and memory and cold_starts_ok and cpu_servable:
        return {"serverless": (Serverless(memory_mb=memory), f"{inf.traffic} traffic, cold starts tolerated: "
                                                            "serverless scales to zero (seeds)")}
    if inf.traffic == "rare":
        return {"async": (Async(), "rare requests: asynchronous scales to zero between them (seeds)")}
    return {"realtime": (Realtime(), _why_realtime(w, memory, cold_starts_ok, cpu_servable))}


def _why_realtime(w: Workload, memory: int | None, cold_starts_ok: bool, cpu_servable: bool) -> str:
    """Why real-time, in terms of this workload's own traffic (every reason follows from the inputs)."""
    inf = w.inference
    if inf.traffic == "steady":
        need = f" and a {inf.latency_ms} ms latency target" if inf.latency_ms else ""
        return f"steady traffic{need}: real-time (seeds)"
    if not cold_starts_ok:
        return f"{inf.traffic} traffic, but a {inf.latency_ms} ms latency target rules out serverless cold starts: " \
               "real-time (seeds)"
    if not cpu_servable:
        return f"{inf.traffic} traffic, but an LLM needs a GPU or Inferentia2 and serverless is CPU only: real-time"
    if memory is None:
        return f"{inf.traffic} traffic, but the model does not fit serverless memory (6 GB): real-time"
    return f"{inf.traffic} traffic, but {inf.payload_mb:g} MB requests exceed serverless's 4 MB: real-time"


def _serverless_memory_mb(w: Workload) -> int | None:
    """The smallest serverless memory step that holds the model's fp32 weights, if any does."""
    for mb in range(1024, 6144 + 1, 1024):
        if est.serving_fits(w.model.parameters_billion, mb / 1024, est.CPU_BYTES_PER_PARAM):
            return mb
    return None


def _plan_inference(w: Workload, cat: Catalog) -> dict[str, InferencePlan]:
    inf = w.inference
    out: dict[str, InferencePlan] = {}
    for kind, (section, why_kind) in choose_kinds(w).items():
        if kind == "serverless":
            per_million = est.serverless_usd_per_million(section.memory_mb, inf.processing_seconds)
            out[kind] = InferencePlan(
                kind, None, 0, section.max_concurrency, 0.0, None,
                "CPU only, memory sized for the model's weights", memory_mb=section.memory_mb,
                max_concurrency=section.max_concurrency, why_kind=why_kind, usd_per_million=round(per_million, 2),
                provisioned_concurrency=section.provisioned_concurrency, serving=plan_serving(kind, w, None))
            continue
        if section.instance_type:
            itype, reason = cat.get(section.instance_type), "set by the config"
        else:
            itype, reason = _serving_type(kind, w, cat)
        assert itype is not None
        serving = plan_serving(kind, w, itype)  # first: a type no container can use says so before any sizing
        hourly = itype.price(w.region, sagemaker=True).usd_per_hour
        s = serving_speed(kind, w, itype)
        if not s.meets_latency:  # only a configured type: the planner's choices meet the target
            raise _too_slow(w, itype, s, "set by the config", ", or a faster inference.realtime.instance_type")
        rps = s.requests_per_second
        needed = max(1, math.ceil(inf.requests_per_second / rps))
        transforms = None
        invocations = getattr(section, "invocations_per_instance", None)
        if kind == "realtime":
            lo, hi, reason = _realtime_range(section, needed, rps, inf.requests_per_second, reason)
            if "invocations_per_instance" not in section.model_fields_set:
                invocations = speed.scaling_target(load_serving(), rps)
                reason += f"; scales out at {invocations} invocations a minute per instance (half its throughput, " \
                          "SageMaker's load-testing guide)"
        elif kind == "async":
            lo, hi = 0, section.max_instances  # scales to zero when the queue is empty
        else:
            lo = hi = section.instance_count
            transforms, reason = _transforms(section, s, serving, reason)
        out[kind] = InferencePlan(
            kind, ML_PREFIX + itype.name, lo, hi, round(hourly * lo, 4), round(hourly * hi, 4), reason,
            local_nvme=itype.local_nvme, accelerator_kind=itype.accelerator.kind if itype.accelerator else None,
            schedule=getattr(section, "schedule", None),
            invocations_per_instance=invocations,
            why_kind=why_kind, requests_per_second_per_instance=round(rps, 3),
            requests_per_second_range=(round(s.low, 3), round(s.high, 3)), latency_ms=round(s.latency_ms, 1),
            concurrency=s.concurrency, throughput_basis=s.basis,
            usd_per_million=round(est.usd_per_million(hourly, rps), 2), instances_needed_at_peak=needed,
            data_capture_percent=getattr(section, "data_capture_percent", 0),
            max_concurrent_invocations_per_instance=getattr(section, "max_concurrent_invocations_per_instance", None),
            max_payload_mb=getattr(section, "max_payload_mb", None),
            max_concurrent_transforms=transforms if kind == "batch" else None,
            serving=serving,
            startup=plan_startup(kind, w.model.parameters_billion, itype, compressed=serving.compressed)
            if kind in ("realtime", "async") else None,
        )
    _one_layout_per_key(out)
    return dict(sorted(out.items(), key=lambda kv: KINDS.index(kv[0])))


def _transforms(section: Batch, s: speed.Speed, serving: ServingPlan, reason: str) -> tuple[int, str]:
    """MaxConcurrentTransforms: the configured value, or as many requests as the container serves at once (the
    concurrency the job is priced at)."""
    if section.max_concurrent_transforms is None:
        return s.concurrency, f"{reason}; {s.concurrency} requests in flight per instance (MaxConcurrentTransforms): " \
                              f"what {serving.container_title} serves at once, priced at that"
    extra = section.max_concurrent_transforms - s.concurrency
    if extra > 0:
        reason += f"; {serving.container_title} serves {s.concurrency} at once: the other {extra} of " \
                  f"max_concurrent_transforms {section.max_concurrent_transforms} wait in its queue"
    return section.max_concurrent_transforms, reason


def _too_slow(w: Workload, itype: InstanceType, s: speed.Speed, which: str, or_else: str) -> ConfigError:
    return ConfigError("inference.latency_ms", w.inference.latency_ms,
                       f"at least {math.ceil(s.latency_ms)} (ml.{itype.name}, {which}), or fewer "
                       f"inference.generation.typical_output_tokens{or_else}",
                       reason=f"one request takes about {s.latency_ms:,.0f} ms on ml.{itype.name} ({s.basis})")


def _realtime_range(section: Realtime, needed: int, rps: float, peak: float, reason: str) -> tuple[int, int, str]:
    """Min from the config; max from the peak, or the config's if it carries the peak (else refused)."""
    lo = section.min_instances
    if "max_instances" not in section.model_fields_set:
        hi = max(lo, needed)
        return lo, hi, f"{reason}; max {hi} sized from the peak ({peak:g} req/s at {rps:.3g} req/s per instance)"
    if section.max_instances < needed:
        raise ConfigError("inference.realtime.max_instances", section.max_instances,
                          f"at least {needed}, or a lower inference.requests_per_second",
                          reason=f"inference.requests_per_second {peak:g} at peak needs {needed} instances at "
                                 f"{rps:.3g} req/s each")
    return lo, section.max_instances, reason


def _one_layout_per_key(plans: dict[str, InferencePlan]) -> None:
    """Kinds may share an artifact only when their containers read the same layout."""
    seen: dict[str, tuple[str, str]] = {}
    for kind in (k for k in KINDS if k in plans):
        sv = plans[kind].serving
        assert sv is not None
        layout = layout_of(sv.container, sv.artifact_format)
        first = seen.setdefault(sv.artifact_key, (kind, layout))
        if first[1] != layout:
            raise ConfigError(f"inference.{kind}.artifact_key", sv.artifact_key, f"a key of its own for {kind}",
                              reason=f"{sv.container_title} reads a {layout} artifact; {first[0]} reads a "
                                     f"{first[1]} one from the same key")
