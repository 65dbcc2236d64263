"""Training planning: the instance type, count, storage, orchestrator, layout and estimate of one workload.

Pure Python (never imports aws_cdk or sagemaker). Encodes the seeds' guidance in DESIGN.md: classic ML on CPU
(XGBoost on m5), small DL on G4dn/G5, big DL on G5 for cost or P4d/P5 for speed, 10B+ transformers on TB data on
Trainium or P4d/P5 EFA clusters with FSx for Lustre. Every choice carries the reason the plan prints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..catalog import (ML_PREFIX, Catalog, InstanceType, NetworkInterface, Price, SoftwareStack, devices,
                      load_software, load_utilisation, network_interfaces)
from ..catalog.sagemaker_apis import ORCHESTRATOR_API, load_sagemaker_apis
from ..config.model import SHAPE_TOLERANCE, attention_heads, decoder_parameters, ffn_width, model_shape, shape_line
from ..config.schema import CLASSIC_ML, Workload
from ..errors import INFO, WARNING, ConfigError, Finding, raise_all
from . import capacity, communication
from . import classic as classic_types
from . import encoder
from . import estimates as est
from . import layout
from . import nxd
from . import parallelism
from .capacity import Purchase
from .cluster_nodes import SCALE_DOWN_IDLE_S
from .node_packages import node_lock, unlocked_warning
from .parallelism import Parallelism
from .precision import choose as choose_precision, compiles, trainer_flags
from .storage import CHECKPOINT_BYTES_PER_PARAM, CHECKPOINTS_KEPT, FsxPlan, size_fsx

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
# The most data one catalog node holds for XGBoost (r5.12xlarge, 384 GiB, in MEMORY_HEADROOM): beyond it, distribute.
ONE_NODE_MAX_GIB = 384 * 0.8
# The trainer's stop budget. torchrun kills its workers TORCH_ELASTIC_SHUTDOWN_TIMEOUT seconds after SIGTERM, 30 by
# default (torch.distributed.launcher.api LaunchConfig); the checkpoint must fit in it, with room for a slower write
# and the step in flight when the signal comes.
TORCHRUN_DEFAULT_SHUTDOWN_S = 30
CHECKPOINT_TIME_MARGIN = 2.0
STEP_ALLOWANCE_S = 120
FSX_OUTPUT_DIR = "/fsx/output"  # the FSx link exports it to the bucket's models/ prefix (layout.FSX_LINKS)

TRAINING_CANDIDATES: dict[str, tuple[str, ...]] = {
    "large-dl": ("trn2.48xlarge", "p4d.24xlarge", "p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge",
                 "p6-b300.48xlarge"),
    "medium-dl": ("g5.12xlarge", "g5.48xlarge", "g6.48xlarge", "p4d.24xlarge", "p5.48xlarge"),
    "small-dl": ("g4dn.xlarge", "g5.xlarge", "g5.2xlarge", "g6.xlarge"),
}  # classic ML: every CPU type a sourced reason does not exclude (classic.candidates)
TIER_REASON = {
    "large-dl": "10B+ parameters on TB-scale data: Trainium or P4d/P5-class cluster with EFA; Trainium means "
                "Trn2 now, the generation Neuron still trains on",
    "medium-dl": "big deep learning: G5 for cost, P4d/P5 for speed",
    "small-dl": "small deep learning / fine-tuning on small data: G4dn/G5",
    "xgboost": "XGBoost trains on CPU, memory-bound: every CPU family is a candidate (m5 and r5 hold more memory a "
               "vCPU, c5 costs less an hour where it holds the data); one node that holds the data before distributed "
               "training",
    "scikit-learn": "classic ML trains on CPU, never a GPU",
}
# Inference families in order of preference per need; the cheapest that holds the model wins.


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
    price_kind: str = ""  # EC2 on-demand | SageMaker on-demand | EC2 Capacity Block
    refused_by: str = "training.instance_count"  # the field to change when it does not fit (a set type refuses)
    ranked_by: str = "cost"  # what picks among the rows that fit: total cost (deep learning) or $/h (classic ML)
    purchase: Purchase | None = None  # capacity to buy before deploying (a Capacity Block or training plan row)


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
    findings: tuple[Finding, ...] = ()  # WARNING and INFO about this plan (errors refuse instead)
    # Slurm compute nodes: 0 = dynamic (started for queued jobs, ended after scale_down_idle_s idle), instance_count =
    # static (capacity paid whether it runs or not: a Capacity Block or reservation); None: not a Slurm cluster.
    compute_min_nodes: int | None = None
    scale_down_idle_s: int = SCALE_DOWN_IDLE_S
    precision: str = ""  # accelerators: the compute precision the estimate is priced at (bf16 | fp8 | fp16)
    purchase: Purchase | None = None  # the capacity to buy before deploying (planning/capacity.py)
    compiled: bool = False  # the trainer compiles its blocks (train.py --compile): NVIDIA GPUs

    @property
    def speed_flags(self) -> tuple[str, ...]:
        """train.py's flags for the precision and compiler the estimate is priced at."""
        return tuple(trainer_flags(self.precision, self.compiled))




def tier_of(w: Workload) -> str:
    if w.model.framework in CLASSIC_ML:
        return w.model.framework
    if w.model.parameters_billion >= LARGE_PARAMS_B and w.data.dataset_size_gib >= LARGE_DATA_GIB:
        return "large-dl"
    if w.model.parameters_billion >= MEDIUM_PARAMS_B or w.data.dataset_size_gib >= MEDIUM_DATA_GIB:
        return "medium-dl"
    return "small-dl"


def utilisation(itype: InstanceType, parameters_billion: float, *, precision: str = "bf16",
                recompute: bool | None = None, sequence: int | None = None) -> est.UtilisationRange:
    """Low, likely and high MFU for the type's accelerator at this model size and precision, from published runs;
    `recompute`: whether the layout recomputes activations, `sequence`: the planned length (est.utilisation_range).
    The published rows are compiled or hand-tuned stacks'; the shipped trainer compiles its blocks on NVIDIA GPUs
    (precision.compiles) and Neuron compiles its graph, so they stand as published until `plan --calibrate`."""
    return est.utilisation_range(itype, parameters_billion, load_utilisation(), precision=precision,
                                 recompute=recompute, sequence=sequence)


def precision_of(w: Workload, itype: InstanceType) -> tuple[str, str]:
    """The run's compute precision on `itype` and why, or ("", why not) when the config's precision is impossible
    (precision.choose: fp8 where the accelerator and the model allow it)."""
    return choose_precision(w, itype)


def priced_precision(w: Workload, itype: InstanceType) -> str:
    """The precision the estimate is priced at: the one the trainer runs (train.py --precision fp8 --compile)."""
    return precision_of(w, itype)[0]


def _layout_recomputes(w: Workload, itype: InstanceType, count: int) -> bool:
    """Whether the layout on `count` nodes recomputes activations (no layout that fits: assume it would)."""
    spread = _choose_layout(w, itype, count)
    return spread is None or spread.recompute


def utilisation_at(w: Workload, itype: InstanceType, count: int, precision: str) -> est.UtilisationRange:
    """The utilisation range of `count` nodes of `itype`: the published runs of its precision, with those measured
    without recompute scaled where the layout on `count` nodes recomputes."""
    spread = _choose_layout(w, itype, count)
    if spread is not None and spread.sharding == nxd.SHARDING:  # NxD Training: its own published throughput
        return nxd.utilisation(itype, trained_billion(w))
    return utilisation(itype, w.model.parameters_billion, precision=precision,
                       recompute=spread is None or spread.recompute, sequence=planned_sequence(w))


def planned_sequence(w: Workload) -> int:
    """The sequence length the plan trains at: training.sequence_length, else the layout's default."""
    return encoder.sequence(w) if encoder.is_classifier(w) else w.training.sequence_length or parallelism.SEQUENCE


def _default_orchestrator(tier: str) -> str:
    return "slurm" if tier == "large-dl" else "sagemaker-jobs"


OUTSIDE_FAMILIES = "outside the team's allowed families"


def _price(itype: InstanceType, w: Workload, orchestrator: str, cat: Catalog | None = None):
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
    if _price(itype, w, orchestrator, cat) is None:
        kind = "Capacity Block" if orchestrator == "slurm" and capacity.capacity_block_pricing(w, cat) else \
            "EC2 on-demand" if orchestrator == "slurm" else "SageMaker"
        return f"no {kind} price recorded (compared like for like)"
    return ""


def _decoder(w: Workload) -> dict:
    """The decoder the shipped trainer builds for this workload: the config's shape, each absent value the usual
    decoder's at its size, the usual grouped-query key/value heads where they divide the heads (else one per head)."""
    layers, _, kv, hidden = model_shape(w)
    heads, _ = attention_heads(w)
    return dict(layers=layers, hidden=hidden, heads=heads, kv_heads=kv if heads % kv == 0 else heads,
                intermediate=ffn_width(w), vocab=w.model.vocab_size or parallelism.VOCAB)


def trained_billion(w: Workload) -> float:
    """The parameters (billions) of the model the trainer builds (config/model.py decoder_parameters, or the encoder
    classifier's): what memory and time are sized from, whatever model.parameters_billion says (a WARNING when a
    decoder's differ by over a tenth)."""
    if encoder.is_classifier(w):
        return encoder.parameters_billion(w)
    return decoder_parameters(**_decoder(w)) / 1e9


def _shape_mismatch(w: Workload) -> Finding | None:
    """A WARNING when the decoder the trainer builds differs from model.parameters_billion by more than a tenth: the
    plan sizes memory and time from the shape's count, so the stated size is not what is trained or priced."""
    stated, built = w.model.parameters_billion, trained_billion(w)
    if encoder.is_classifier(w) or abs(built / stated - 1) <= SHAPE_TOLERANCE:
        return None
    return Finding(WARNING, "model.parameters_billion", stated,
                   f"the decoder the trainer builds ({shape_line(w)}) has {built:.3g}B parameters, not the "
                   f"{stated:g}B stated: memory and time are sized at {built:.3g}B; set the model's shape "
                   "(model.layers, hidden_size, attention_heads, kv_heads, intermediate_size, vocab_size) or "
                   "parameters_billion to match it", "")


def _choose_layout(w: Workload, itype: InstanceType, count: int) -> Parallelism | None:
    """parallelism.choose for the decoder the trainer builds (_decoder), sized at its own parameter count; an encoder
    classifier's own layout (encoder.layout); on the Neuron 2.28 XLA stack (Trn1/Trn1n) NxD Training's layout where the
    shipped trainer's DDP does not fit (nxd.py)."""
    if encoder.is_classifier(w):
        return encoder.layout(w, itype, count)
    shape = dict(parameters_billion=trained_billion(w), **_decoder(w), itype=itype, nodes=count,
                 sequence=w.training.sequence_length or parallelism.SEQUENCE,
                 global_batch_tokens=w.training.global_batch_tokens or parallelism.GLOBAL_BATCH_TOKENS)
    spread = parallelism.choose(**shape)
    if (spread is not None and spread.sharding == "none") or not nxd.trains_on(itype):
        return spread
    return nxd.choose(**shape)


def _dl_candidate(itype: InstanceType, w: Workload, cat: Catalog, orchestrator: str, flops: float,
                  price: Price | None = None) -> Candidate:
    """The type's row: its node count (memory and the target time), hours and total at `price` (default: the config's
    capacity, _price)."""
    price = price or _price(itype, w, orchestrator, cat)
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
        fewest = needed(utilisation(itype, params, precision=precision, recompute=False, sequence=seq).likely)
        most = needed(utilisation(itype, params, precision=precision, recompute=True, sequence=seq).likely)
        # Past `most` where the layout's own figures are lower than the generic rows (NxD Training's, nxd.py).
        count = next((n for n in range(fewest, MAX_INSTANCES + 1)
                      if n >= needed(utilisation_at(w, itype, n, precision).likely)), most)
        count = min(count, MAX_INSTANCES)
    util = utilisation_at(w, itype, count, precision).likely
    hrs = _hours(w, itype, count, flops, util, peak)
    billed = est.billed_hours(hrs, price.kind)
    feasible = True
    why = (f"{util:.0%} utilisation ({precision}" + (", recompute" if _layout_recomputes(w, itype, count) else "")
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


def step_communication(w: Workload, itype: InstanceType, count: int, utilisation: float,
                       peak_tflops: float) -> communication.Communication | None:
    """One optimizer step's communication on `count` nodes against its compute at `utilisation` (None: no layout)."""
    spread = _choose_layout(w, itype, count)
    if spread is None or spread.sharding == nxd.SHARDING:  # NxD's published throughput includes its communication
        return None
    tokens = spread.global_batch * spread.sequence
    compute_s = est.training_flops(w.model.parameters_billion, tokens / 1e9) / \
        (peak_tflops * 1e12 * count * utilisation)
    return communication.step(spread, itype, parameters_billion=w.model.parameters_billion, compute_s=compute_s)


def _hours(w: Workload, itype: InstanceType, count: int, flops: float, utilisation: float, peak: float | None) -> float:
    """The run's hours: its compute at `utilisation`, plus the communication its layout cannot hide."""
    hours = est.hours(flops, itype, count, utilisation, peak)
    comm = step_communication(w, itype, count, utilisation, peak or itype.peak_tflops or 0)
    return hours * comm.factor if comm else hours


def _trainer_refusal(w: Workload, itype: InstanceType, count: int) -> str | None:
    """A candidate whose layout the shipped trainer cannot run on its stack is no candidate: the plan refuses it here,
    not the trainer after a node image bake (parallelism.trainer_refusal)."""
    spread = _choose_layout(w, itype, count)
    stack = load_software().for_type(itype)
    if spread is None or isinstance(stack, str):
        return None  # no layout at all is refused later, with the fields that would change it
    return parallelism.trainer_refusal(spread, stack.device, what=f"a {w.model.parameters_billion:g}B model on "
                                                                   f"{count} x {itype.name}")


def _cpu_candidate(itype: InstanceType, w: Workload, orchestrator: str) -> Candidate:
    price = _price(itype, w, orchestrator, None)
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
    # Each row's likely time and total, as _estimate gives the chosen one; the choice stays the lowest $/h.
    _, hrs, _ = est.classic_hours(w.data.dataset_size_gib, itype.vcpus, count, load_utilisation())
    refused_by = "training.instance_count"
    if feasible and w.training.max_hours is not None and hrs > w.training.max_hours:  # a faster type may meet it
        feasible, why, refused_by = False, f"{hrs:.3g} h misses max_hours {w.training.max_hours:g}", "training.max_hours"
    cluster = price.usd_per_hour * count
    return Candidate(itype.name, count, f"{itype.vcpus} vCPU, {itype.memory_gib:g} GiB", cluster, hrs,
                     est.billed_hours(hrs, price.kind) * cluster, feasible, why, price_kind=price.kind, ranked_by="$/h",
                     refused_by=refused_by)


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


def _candidates(w: Workload, cat: Catalog, tier: str, orchestrator: str,
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


def _choose(w: Workload, cands: list[Candidate], skipped: list[str], decisions: list[str],
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


def plan_training(w: Workload, cat: Catalog) -> TrainingPlan:
    tier = tier_of(w)
    decisions = [TIER_REASON[tier]]
    orchestrator, sold_as = (w.training.orchestrator, "") if w.training.orchestrator else \
        capacity.default_orchestrator(w, cat, _default_orchestrator(tier))
    classic = tier in CLASSIC_ML
    epochs = encoder.epochs(w) if encoder.is_classifier(w) else w.training.epochs
    tokens = None if classic else est.tokens_billion(w.data.dataset_size_gib, w.data.tokens_billion, epochs)
    flops = None if tokens is None else est.training_flops(trained_billion(w), tokens)

    if orchestrator == "slurm":
        capacity.capacity_as_sold(w, cat, TRAINING_CANDIDATES.get(tier, ()))
    cands, skipped = _candidates(w, cat, tier, orchestrator, flops)
    findings: list[Finding] = []
    chosen = _choose(w, cands, skipped, decisions, findings, allowed=cat.allowed_families)
    if skipped:
        decisions.append("not considered: " + "; ".join(skipped))
    if classic and (excluded := classic_types.candidates(cat)[1]):
        decisions.append("not candidates: " + "; ".join(excluded))
    itype, count = cat.types[chosen.instance_type], chosen.count

    if sold_as:
        decisions.append(sold_as)
    elif w.training.orchestrator is None and orchestrator == "slurm" and count == 1 and chosen.purchase is None:
        orchestrator = "sagemaker-jobs"
        decisions.append("single node: SageMaker training job rather than a Slurm cluster")
    elif w.training.orchestrator is None:
        decisions.append(f"orchestrator {orchestrator}: " + ("a multi-node EFA cluster runs best on Slurm"
                         if orchestrator == "slurm" else "SageMaker runs the nodes for one job"))
    _nothing_ignored(w, orchestrator)
    storage = _storage(w, orchestrator, tier, decisions)
    # Multi-node jobs use every EFA interface the type has (SageMaker and HyperPod attach them too).
    efa = itype.efa_max_interfaces if count > 1 else 0
    placement = capacity.placement(w, orchestrator, efa, decisions)
    reserved = capacity.reserved_price(w, cat, itype, orchestrator) if chosen.purchase else None
    estimate = _estimate(w, cat, itype, count, orchestrator, tokens, flops, reserved, chosen.purchase)
    if chosen.purchase and reserved:
        findings.append(capacity.purchase_finding(chosen.purchase, reserved, cat))
    findings.extend(capacity.plan_arn_findings(w))
    fsx = None
    if storage == "fsx-lustre":
        fsx = size_fsx(dataset_gib=w.data.dataset_size_gib, parameters_billion=w.model.parameters_billion,
                       epochs=w.training.epochs, training_hours=estimate.hours)
        decisions.append(f"FSx for Lustre PERSISTENT_2: {fsx.why}")

    final = tuple(replace(c, chosen=c is chosen) for c in cands)  # one row: a type may have a reserved row too
    acc = itype.accelerator
    spread = None if classic or acc is None else _parallelism(w, itype, count, decisions, estimate)
    if spread is not None:
        spread = _fault_budget(w, spread, fsx, decisions, orchestrator)
        spread = encoder.run_length(w, spread, tokens, decisions) if encoder.is_classifier(w) else \
            _run_length(w, spread, tokens, decisions)
        # A SageMaker job's trainer checkpoints to each node's /opt/ml/checkpoints (jobs.job_environment), FSx or not.
        spread = _checkpoint_cadence(w, spread, None if orchestrator == "sagemaker-jobs" else fsx, estimate,
                                     decisions, count)
        if spread.sharding == nxd.SHARDING:
            spread = nxd.planned(w, spread, decisions, findings, billions=trained_billion(w))
    software = load_software().for_type(itype) if acc else None
    assert not isinstance(software, str)  # _eligible refused types without a stack
    if software is not None and (software.legacy or software.beta):
        findings.append(_software_warning(itype, software, cat))
    if software is not None and orchestrator != "sagemaker-jobs" and node_lock(software.device) is None:
        findings.append(unlocked_warning(itype.name, software))
    precision = priced_precision(w, itype) if acc and not classic else ""
    if precision:
        decisions.append(f"precision: {precision_of(w, itype)[1]}")
    if precision and (borrowed := _borrowed_utilisation(itype, precision, cat)):
        findings.append(borrowed)
    if spread is not None and (mismatch := _shape_mismatch(w)):
        findings.append(mismatch)
    if chosen.purchase is None:
        findings.extend(capacity.capacity_at_scale(w, cat, itype, count, orchestrator, estimate.hours))
    min_nodes = capacity.compute_scaling(w, orchestrator, count, decisions)
    return TrainingPlan(
        instance_type=itype.name, sagemaker_instance_type=ML_PREFIX + itype.name, instance_count=count,
        orchestrator=orchestrator, storage=storage, tier=tier,
        accelerator=f"{acc.count} x {acc.model} ({acc.memory_gib:g} GiB)" if acc else "CPU only",
        accelerator_kind=acc.kind if acc else None, efa_interfaces=efa, efa_max_interfaces=itype.efa_max_interfaces,
        efa_gbps=itype.network_gbps * efa / itype.efa_max_interfaces if efa else 0.0, network_gbps=itype.network_gbps,
        network_interfaces=network_interfaces(itype, efa=efa > 0),
        placement_group=placement, capacity_reservation_id=w.training.capacity_reservation_id,
        capacity_block=w.training.capacity_block, fsx=fsx, decisions=tuple(decisions), candidates=final,
        estimate=estimate, parallelism=spread, software=software, findings=tuple(findings),
        compute_min_nodes=min_nodes, precision=precision, purchase=chosen.purchase,
        compiled=bool(acc and not classic and compiles(itype)),
    )


def _borrowed_utilisation(itype: InstanceType, precision: str, cat: Catalog) -> Finding | None:
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


def _software_warning(itype: InstanceType, software: SoftwareStack, cat: Catalog) -> Finding:
    """A family its vendor's current stack dropped trains on the last release that supports it, and a stack its vendor
    calls beta is the current path: built, with a warning that says what that means and where it is written."""
    known = {**cat.sources, **load_software().sources}
    what, keys = (software.legacy, software.legacy_sources) if software.legacy else \
        (software.beta, software.beta_sources)
    source = "; ".join(f"{known[k].title} <{known[k].url}>" for k in keys)
    return Finding(WARNING, "training.instance_type", itype.name, f"{what}; the nodes run {software.name}", source)


def _parallelism(w: Workload, itype: InstanceType, count: int, decisions: list[str],
                 estimate: TrainingEstimate | None = None) -> Parallelism:
    spread = _choose_layout(w, itype, count)
    if spread is None:
        per_node, gib = devices(itype)
        field = "training.instance_count" if w.training.instance_count else "training.instance_type"
        value = w.training.instance_count if w.training.instance_count else itype.name
        raise ConfigError(field, value, "more nodes, or a type with more accelerator memory",
                          reason=f"no data/tensor/pipeline layout of a {w.model.parameters_billion:g}B model fits "
                                 f"{count} x {itype.name} ({count * per_node} ranks of {gib:g} GiB)")
    line = f"layout: {spread.reason}"
    if estimate is not None and estimate.utilisation:
        peak = est.peak_tflops(itype, precision_of(w, itype)[0], load_utilisation()) or itype.peak_tflops or 0
        comm = step_communication(w, itype, count, estimate.utilisation, peak)
        if comm is not None:
            line += f"; {comm.line()}"
    decisions.append(line)
    return spread


def _run_length(w: Workload, spread: Parallelism, tokens_billion: float | None, decisions: list[str]) -> Parallelism:
    """The global batch (fixed in tokens, whatever the node count: gradient accumulation makes it up), the steps that
    train the plan's tokens (epochs included) and the learning-rate warmup (Llama 2's recipe)."""
    asked = w.training.global_batch_tokens or parallelism.GLOBAL_BATCH_TOKENS
    per_step = spread.global_batch * spread.sequence
    micro_steps = spread.global_batch // (spread.data * spread.micro_batch)
    said = "training.global_batch_tokens" + ("" if w.training.global_batch_tokens else ", Llama 2's")
    seq = "training.sequence_length" if w.training.sequence_length else "training.sequence_length, assumed"
    line = (f"global batch: {spread.global_batch:,} sequences of {spread.sequence:,} tokens ({seq}) = {per_step:,} "
            f"tokens ({said}: {asked:,}) = {spread.data:,} data ranks x {spread.micro_batch} sequence x {micro_steps} "
            "micro-steps (gradient accumulation), the same whatever the node count")
    if per_step != asked:
        line += f"; {per_step / asked:.0%} of the asked batch: the nearest whole number of micro-steps"
    decisions.append(line)
    if not tokens_billion:
        return spread
    steps = max(1, math.ceil(tokens_billion * 1e9 / per_step))
    warmup = min(parallelism.RECIPE_WARMUP, steps // 10)
    decisions.append(f"run length: {tokens_billion:g}B tokens / {per_step:,} tokens a step = {steps:,} steps; "
                     f"AdamW (betas 0.9, 0.95; weight decay 0.1), peak learning rate {spread.lr:g} after {warmup:,} "
                     "warmup steps, cosine decay to 10%, gradient clipping 1.0 (Llama 2's recipe, "
                     "https://arxiv.org/abs/2307.09288)")
    return replace(spread, steps=steps, warmup_steps=warmup)


# Checkpoints are written in the background (dcp.async_save); their cadence still keeps a whole synchronous write
# within this share of the time between them, so the overhead stays below it even where the write blocks (a full
# host memory, a slow file system).
CHECKPOINT_OVERHEAD = 0.05


# Where there is no FSx (a SageMaker job), each node writes its own ranks' shards to its /opt/ml/checkpoints: an EBS
# gp2 volume ("SageMaker supports only the General Purpose SSD (gp2) ML storage volume type", or the instance's NVMe
# where it has one: https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ResourceConfig.html). gp2 gives at
# most 128 MiB/s up to 170 GiB and 250 MiB/s above (EBS User Guide, gp2 throughput; read in a copy of that page,
# https://www.saisci.com/aws/gp2-throughput-explained-ebs-volumes/, not at AWS's own): the lower figure, so the cadence
# holds on any volume size (NVMe writes faster).
NODE_VOLUME_WRITE_MB_S = 128 * 2**20 / 1e6
# The trainer's own cadence when the plan cannot set one (no step count or time): examples/slurm/train.py's default.
TRAINER_CHECKPOINT_EVERY = 100


def _checkpoint_cadence(w: Workload, spread: Parallelism, fsx: FsxPlan | None, estimate: TrainingEstimate,
                        decisions: list[str], nodes: int) -> Parallelism:
    """Steps between checkpoints: the write time over CHECKPOINT_OVERHEAD, in steps of the estimate's step time. On
    FSx the whole checkpoint goes through the file system's rate; without it (`fsx` None: a SageMaker job) each node
    writes its share to its own volume, at NODE_VOLUME_WRITE_MB_S. Without a step time, the trainer's 100, said so."""
    if not spread.steps or not estimate.hours:
        decisions.append(f"checkpoints: every {TRAINER_CHECKPOINT_EVERY} steps (the trainer's default: the plan has "
                         "no step time to set a cadence from)")
        return replace(spread, checkpoint_every=TRAINER_CHECKPOINT_EVERY)
    if fsx:
        write_s, where = checkpoint_seconds(w.model.parameters_billion, fsx.throughput_mb_s), "FSx"
    else:
        write_s = checkpoint_seconds(w.model.parameters_billion / nodes, NODE_VOLUME_WRITE_MB_S)
        who = f"each node's 1/{nodes} share to its" if nodes > 1 else "to the node's"
        where = f"{who} own volume at {NODE_VOLUME_WRITE_MB_S:,.0f} MB/s, gp2's lower bound"
    step_s = estimate.hours * 3600 / spread.steps
    every = max(1, min(spread.steps, math.ceil(write_s / CHECKPOINT_OVERHEAD / step_s)))
    overhead = write_s / (every * step_s + write_s)
    decisions.append(f"checkpoints: every {every:,} steps ({every * step_s / 60:,.0f} min at {step_s:,.1f} s a step), "
                     f"written in the background (dcp.async_save); even a blocking {write_s:,.0f} s write "
                     f"({where}) would take {overhead:.1%} of wall-clock (at most {CHECKPOINT_OVERHEAD:.0%})")
    return replace(spread, checkpoint_every=every)


def _fault_budget(w: Workload, spread: Parallelism, fsx: FsxPlan | None, decisions: list[str],
                  orchestrator: str) -> Parallelism:
    """What the trainer needs to stop cleanly and hand its model on: checkpoints kept (what FSx is sized for), the
    export directory the FSx link puts under the serving contract's models/ prefix, and the stop budget: torchrun's
    shutdown timeout (its default 30 s kills a large checkpoint) and Slurm's signal lead, from the checkpoint's
    size over the file system's write rate."""
    from .contracts import DEFAULT_KEYS
    from ..config.model import artifact_format

    fmt, _ = artifact_format(w)
    key = w.inference.artifact.key or DEFAULT_KEYS[fmt]
    name = key.removeprefix(layout.MODELS).strip("/") if key.startswith(layout.MODELS) else w.name
    # On FSx the link exports it under models/; a SageMaker job writes SM_MODEL_DIR instead (the trainer's default
    # there), which SageMaker uploads to output/<job>/output/model/ (`python -m workloads promote` copies it on).
    export_dir = f"{FSX_OUTPUT_DIR}/{name}" if fmt == "huggingface" and orchestrator != "sagemaker-jobs" else ""
    seconds = (checkpoint_seconds(w.model.parameters_billion, fsx.throughput_mb_s) if fsx else 0.0)
    shutdown = max(TORCHRUN_DEFAULT_SHUTDOWN_S, math.ceil(seconds * CHECKPOINT_TIME_MARGIN))
    lead = shutdown + STEP_ALLOWANCE_S
    if fsx:
        decisions.append(f"stop budget: a {w.model.parameters_billion * 1e9 * CHECKPOINT_BYTES_PER_PARAM / 2**30:,.0f}"
                         f" GiB checkpoint at {fsx.throughput_mb_s:,.0f} MB/s takes {seconds:,.0f} s: torchrun waits "
                         f"{shutdown} s after SIGTERM (TORCH_ELASTIC_SHUTDOWN_TIMEOUT), Slurm signals {lead} s before "
                         f"the time limit; {CHECKPOINTS_KEPT} checkpoints kept")
    return replace(spread, keep_checkpoints=CHECKPOINTS_KEPT, export_dir=export_dir, shutdown_timeout_s=shutdown,
                   signal_lead_s=lead)


def checkpoint_seconds(parameters_billion: float, write_mb_s: float) -> float:
    """A checkpoint's write time: its size (storage.CHECKPOINT_BYTES_PER_PARAM) over the file system's rate."""
    return parameters_billion * 1e9 * CHECKPOINT_BYTES_PER_PARAM / 1e6 / write_mb_s


def _nothing_ignored(w: Workload, orchestrator: str) -> None:
    """Values the chosen orchestrator would silently ignore are refused, each with the reason."""
    t, errors = w.training, []
    how = "set by the config" if t.orchestrator else "chosen by the planner"
    if t.spot and not managed_spot(orchestrator):
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


def _estimate(w: Workload, cat: Catalog, itype: InstanceType, count: int, orchestrator: str,
              tokens: float | None, flops: float | None, reserved: Price | None = None,
              purchase: Purchase | None = None) -> TrainingEstimate:
    """Time and cost of the run: on the config's capacity, or on `reserved` capacity still to buy (`purchase`: its
    nodes, for whole days)."""
    price = reserved or _price(itype, w, orchestrator, cat)
    assert price
    util = util_range = None
    basis = ""
    if flops is not None:
        precision = priced_precision(w, itype)
        r = utilisation_at(w, itype, count, precision)  # at the count it runs, as the candidates table priced it
        util, util_range, basis = r.likely, (r.low, r.high), r.basis
        peak = est.peak_tflops(itype, precision, load_utilisation())
        low_h, hrs, high_h = (_hours(w, itype, count, flops, u, peak) for u in (r.high, r.likely, r.low))
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


# ---------------------------------------------------------------- inference

