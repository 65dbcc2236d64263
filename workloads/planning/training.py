"""Training planning: the instance type, count, storage, orchestrator, layout and estimate of one workload.

Pure Python (never imports aws_cdk or sagemaker). Encodes the seeds' guidance in DESIGN.md: classic ML on CPU
(XGBoost on m5), small DL on G4dn/G5, big DL on G5 for cost or P4d/P5 for speed, 10B+ transformers on TB data on
Trainium or P4d/P5 EFA clusters with FSx for Lustre. Every choice carries the reason the plan prints.

This module joins the concepts beside it: the candidates and their ranking (candidates.py), the model's layout and
speed (training_layout.py), the capacity (capacity.py), the estimate (training_estimate.py), and the run's length and
checkpoints (run_length.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..catalog import ML_PREFIX, Catalog, InstanceType, NetworkInterface, SoftwareStack, load_software, \
    network_interfaces
from ..config.schema import CLASSIC_ML, Workload
from ..errors import WARNING, ConfigError, Finding, raise_all
from . import capacity
from . import classic as classic_types
from . import encoder, finetune_recipe, vision
from . import estimates as est
from . import nxd
from .candidates import TRAINING_CANDIDATES, Candidate, choose_candidate, costed_candidates
from .capacity import Purchase
from .cluster_nodes import SCALE_DOWN_IDLE_S
from .node_packages import node_lock, unlocked_warning
from .parallelism import Parallelism
from .precision import compiles, trainer_flags
from .run_length import checkpoint_cadence, fault_budget, plan_run_length
from .storage import FsxPlan, size_fsx, tokens_gib
from .training_estimate import TrainingEstimate, borrowed_utilisation, estimate_run, managed_spot
from .training_layout import planned_layout, precision_of, priced_precision, shape_mismatch, trained_billion


# Tier thresholds from the seeds' table: "10B+ parameters and TB data" is the cluster tier.
LARGE_PARAMS_B = 10
LARGE_DATA_GIB = 1000
MEDIUM_PARAMS_B = 1
MEDIUM_DATA_GIB = 100
# Small data is copied to each node (File mode); mid-size streams (FastFile); TB data -> FSx.
FILE_MODE_MAX_GIB = 50
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


@dataclass(frozen=True)
class TrainingPlan:
    """The training cluster's plan: instance type and count, scheduler, storage, layout and estimate."""
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


def _default_orchestrator(tier: str) -> str:
    return "slurm" if tier == "large-dl" else "sagemaker-jobs"


def plan_training(w: Workload, cat: Catalog) -> TrainingPlan:
    tier = tier_of(w)
    decisions = [TIER_REASON[tier]]
    orchestrator, sold_as = (w.training.orchestrator, "") if w.training.orchestrator else \
        capacity.default_orchestrator(w, cat, _default_orchestrator(tier))
    classic = tier in CLASSIC_ML
    epochs = encoder.epochs(w) if encoder.is_classifier(w) else finetune_recipe.epochs(w)
    tokens = None if classic else est.tokens_billion(w.data.dataset_size_gib, w.data.tokens_billion, epochs)
    flops = None if tokens is None else est.training_flops(trained_billion(w), tokens)

    if orchestrator == "slurm":
        capacity.capacity_as_sold(w, cat, TRAINING_CANDIDATES.get(tier, ()))
    cands, skipped = costed_candidates(w, cat, tier, orchestrator, flops)
    findings: list[Finding] = []
    chosen = choose_candidate(w, cands, skipped, decisions, findings, allowed=cat.allowed_families)
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
    estimate = estimate_run(w, cat, itype, count, orchestrator, tokens, flops, reserved, chosen.purchase)
    if chosen.purchase and reserved:
        findings.append(capacity.purchase_finding(chosen.purchase, reserved, cat))
    fsx, fsx_at = None, len(decisions)
    final = tuple(replace(c, chosen=c is chosen) for c in cands)  # one row: a type may have a reserved row too
    acc = itype.accelerator
    spread = None if classic or acc is None else planned_layout(w, itype, count, decisions, estimate.utilisation)
    if storage == "fsx-lustre":  # after the layout: NxD Training's copy of the tokens is on /fsx too
        nxdt = spread is not None and spread.nxdt is not None
        token_gib = 0.0 if spread is None or tokens is None else tokens_gib(
            tokens_billion=tokens / epochs, vocab=spread.vocab, nxdt=nxdt)
        fsx = size_fsx(dataset_gib=w.data.dataset_size_gib, parameters_billion=w.model.parameters_billion,
                       epochs=epochs, training_hours=estimate.hours, token_gib=token_gib,
                       token_what="token shards (/fsx/tokens" + (" and NxD Training's copy)" if nxdt else ")"))
        decisions.insert(fsx_at, f"FSx for Lustre PERSISTENT_2: {fsx.why}")
    if spread is not None:
        spread = fault_budget(w, spread, fsx, decisions, orchestrator)
        if encoder.is_classifier(w):
            spread = encoder.run_length(w, spread, tokens, decisions)
        elif finetune_recipe.is_finetune(w):
            spread = finetune_recipe.run_length(w, spread, tokens, decisions)
        elif vision.is_vision(w):
            spread = vision.run_length(w, spread, tokens, decisions)
        else:
            spread = plan_run_length(w, spread, tokens, decisions)
        # A SageMaker job's trainer checkpoints to each node's /opt/ml/checkpoints (jobs.job_environment), FSx or not.
        spread = checkpoint_cadence(w, spread, None if orchestrator == "sagemaker-jobs" else fsx, estimate,
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
    if precision and (borrowed := borrowed_utilisation(itype, precision, cat)):
        findings.append(borrowed)
    if spread is not None and (mismatch := shape_mismatch(w)):
        findings.append(mismatch)
    findings.extend(finetune_recipe.base_findings(w))
    if spread is not None and spread.pipeline > 1 and orchestrator == "sagemaker-jobs":
        findings.append(Finding(WARNING, "training.orchestrator", orchestrator, PIPELINE_ON_JOBS, PIPELINE_VERSIONS))
    if vision.is_vision(w):
        findings.append(vision.finding(w, orchestrator))
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


# The trainer's pipeline stages override a PyTorch internal (pipeline.py ShardedStage) tested on the cluster nodes'
# PyTorch; a SageMaker job runs AWS's PyTorch training image, an older release (outside review R7).
PIPELINE_ON_JOBS = ("pipeline stages: the trainer's (examples/slurm/pipeline.py) are tested on PyTorch 2.15, the "
                    "cluster nodes'; a SageMaker job runs AWS's PyTorch 2.10 training image, where they are not: run "
                    "a short job first, or train on a Slurm cluster (training.orchestrator: slurm)")
PIPELINE_VERSIONS = ("requirements-trainer.txt (torch 2.15.0, the node image's lock); the SageMaker SDK's newest "
                     "PyTorch training image (pytorch.json, training 2.10; workloads/commands/images.py)")


def _software_warning(itype: InstanceType, software: SoftwareStack, cat: Catalog) -> Finding:
    """A family its vendor's current stack dropped trains on the last release that supports it, and a stack its vendor
    calls beta is the current path: built, with a warning that says what that means and where it is written."""
    known = {**cat.sources, **load_software().sources}
    what, keys = (software.legacy, software.legacy_sources) if software.legacy else \
        (software.beta, software.beta_sources)
    source = "; ".join(f"{known[k].title} <{known[k].url}>" for k in keys)
    return Finding(WARNING, "training.instance_type", itype.name, f"{what}; the nodes run {software.name}", source)
