"""Training-time and cost arithmetic, with every assumption named.

time = 6 x parameters x tokens / (accelerators x peak dense TFLOPS x utilisation x scaling)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import statistics

from ..catalog import InstanceType, MfuFigure, Price, Utilisation
from ..config.model import SERVE_BYTES_PER_PARAM, CPU_BYTES_PER_PARAM, MEMORY_HEADROOM, serving_fits
from .parallelism import RECOMPUTE_EFFICIENCY

# Raw text is about 4 bytes per token for English BPE tokenisers.
BYTES_PER_TOKEN = 4
# Mixed-precision Adam: fp16 weights and grads, fp32 master weights and two moments (16 B)
# plus about 2 B/param of working space, before activations.
TRAIN_BYTES_PER_PARAM = 18
# Sustained model-FLOPs utilisation of a well-tuned large-model job on NVIDIA GPUs.
GPU_UTILISATION = 0.40
# Cross-node efficiency of data/tensor parallel over EFA (all-reduce overlap is not perfect). Used only to
# size a cluster from a target time; the measured MFU figures already include their runs' scaling losses.
MULTI_NODE_EFFICIENCY = 0.90
# Managed spot: AWS says "up to 90%"; plan with a typical 70% saving, not the best case.
SPOT_SAVING = 0.70


@dataclass(frozen=True)
class MeasuredRun:
    """A training run's measured seconds on an instance type, with the hourly price it is costed at."""
    instance_type: str
    seconds: float
    usd_per_hour: float

    @property
    def usd(self) -> float:
        return self.seconds / 3600 * self.usd_per_hour


# The seeds' measured BERT fine-tune: same accuracy on both (SageMaker prices of the time).
BERT_FINETUNE = (
    MeasuredRun("ml.trn1.32xlarge", 6033, 24.725),
    MeasuredRun("ml.p4d.24xlarge", 6553, 37.69),
)


def trainium_utilisation(trn1: InstanceType, p4d: InstanceType) -> float:
    """Trainium utilisation calibrated on the measured BERT run relative to A100 at GPU_UTILISATION.

    Equal work W: W = t_trn * peak_trn * u_trn = t_p4d * peak_p4d * u_gpu.
    """
    trn, gpu = BERT_FINETUNE
    assert trn1.peak_tflops and p4d.peak_tflops
    return GPU_UTILISATION * (gpu.seconds * p4d.peak_tflops) / (trn.seconds * trn1.peak_tflops)


def tokens_billion(dataset_size_gib: float, explicit: float | None, epochs: float) -> float:
    per_epoch = explicit if explicit is not None else dataset_size_gib * 2**30 / BYTES_PER_TOKEN / 1e9
    return per_epoch * epochs


def training_flops(parameters_billion: float, tokens_b: float) -> float:
    return 6 * parameters_billion * 1e9 * tokens_b * 1e9


def min_instances_for_memory(parameters_billion: float, itype: InstanceType) -> int:
    """Nodes whose accelerator memory holds weights, grads and optimizer state (sharded)."""
    assert itype.accelerator
    need_gib = parameters_billion * 1e9 * TRAIN_BYTES_PER_PARAM / 2**30
    return max(1, math.ceil(need_gib / (itype.accelerator.memory_gib * MEMORY_HEADROOM)))


def billed_hours(hours: float, price_kind: str) -> float:
    """Hours paid for: Capacity Blocks are bought in whole days (EC2 User Guide, Capacity Blocks for ML: 1-day
    increments up to 14 days, then 7-day increments), SageMaker training plans in 1-day increments (SageMaker
    Developer Guide, Search training plan offerings); other kinds bill by the second."""
    if price_kind not in ("EC2 Capacity Block", "SageMaker training plan"):
        return hours
    days = max(1, math.ceil(hours / 24 - 1e-9))
    if price_kind == "SageMaker training plan":
        return 24 * days
    return 24 * (days if days <= 14 else 7 * math.ceil(days / 7))


def hours(flops: float, itype: InstanceType, count: int, utilisation: float, peak_tflops: float | None = None) -> float:
    """Wall-clock hours at a model-FLOPs utilisation measured at cluster scale (scaling losses included). `peak_tflops`:
    one node's dense peak in the run's precision (default: the catalog's, in its own dtype)."""
    peak = peak_tflops or itype.peak_tflops
    assert peak
    per_second = peak * 1e12 * count * utilisation
    return flops / per_second / 3600


@dataclass(frozen=True)
class UtilisationRange:
    """The utilisation (MFU) an estimate assumes: low, likely and high, with the figures behind them."""
    low: float
    likely: float
    high: float
    basis: str  # which published figures, or the stand-in used
    trainer_measured: float | None = None  # this toolkit's trainer's measured MFU on the accelerator (or stand-in)


def peak_tflops(itype: InstanceType, precision: str, u: Utilisation) -> float | None:
    """One node's dense tensor peak in `precision`: the catalog's own figure in its dtype (bf16, or fp16 where the
    device has no bf16), else the per-device peak recorded in utilisation.yaml. None: not recorded (not offered)."""
    assert itype.accelerator
    if precision == (itype.peak_tflops_dtype or "bf16") or (precision == "fp16" and itype.peak_tflops_dtype == "bf16"):
        return itype.peak_tflops  # fp16 runs at the bf16 tensor peak on devices that have both
    per_device = u.peaks.get(precision, {}).get(itype.accelerator.model)
    return per_device[0] * itype.accelerator.count if per_device else None


def _published(model: str, band: str, precision: str, u: Utilisation) -> tuple[tuple[MfuFigure, ...], str]:
    """The figures for `model` in `precision` at `band`, or the nearest stand-in's, and whose they are."""
    other = "small" if band == "large" else "large"
    candidates = [model, u.stand_in_by_precision.get(precision, {}).get(model)]
    if precision == "bf16":
        candidates.append(u.stand_in.get(model, u.spread_from))
    for who in filter(None, candidates):
        for b in (band, other) if precision != "bf16" else (band,):
            if figures := u.figures(who, b, precision):
                if who == model and b == band:
                    return figures, ""
                what = "" if precision == "bf16" else f"{precision} "
                whose = ([] if who == model else [f"{who}'s"]) + ([f"{b}-model runs"] if b != band else [])
                return figures, f"no published {what}figure for {model}" + \
                    (" at this size" if b != band else "") + ": " + ", ".join(whose)
    if precision != "bf16":  # no run in this precision at all: the bf16 figures, said so
        figures, why = _published(model, band, "bf16", u)
        return figures, f"no published {precision} training figure for {model} or a stand-in: bf16 figures" + \
            (f" ({why})" if why else "")
    raise KeyError(model)


def attention_share(parameters_billion: float, shape: tuple[int, int], sequence: int) -> float:
    """Causal attention's FLOPs a token over the 6N of its weights: 6 x layers x hidden x sequence / 6N (the
    attention score and value products, halved by the causal mask; PaLM, arXiv 2204.02311, appendix B, counts 12 for
    full attention, as MfuFigure.on_6n does). 8B at 8,192 tokens: 0.13; at 65,536: 1.07."""
    layers, hidden = shape
    return 6 * layers * hidden * sequence / (6 * parameters_billion * 1e9)


def utilisation_range(itype: InstanceType, parameters_billion: float, u: Utilisation, *, precision: str = "bf16",
                      recompute: bool | None = None, sequence: int | None = None,
                      shape: tuple[int, int] | None = None) -> UtilisationRange:
    """Low, likely (median) and high MFU from the published figures for the accelerator, size band and precision,
    each on the plan's 6N basis (MfuFigure.on_6n: a source that counts attention FLOPs is converted with its own
    sequence length). `sequence`: the planned one; the band's rows at it, else at the nearest sequence published
    (attention's share and the kernels' efficiency change with it). `recompute`: whether the planned layout recomputes activations; a figure
    measured without recompute is then scaled by RECOMPUTE_EFFICIENCY (one measured with it already paid for it; one
    whose source does not say is taken as is). None: no layout known, no figure scaled. `shape`: the planned decoder's
    (layers, hidden): a figure published at another sequence is moved to the planned one as the same utilisation
    counting causal attention, whose share of a token's FLOPs grows with the sequence (attention_share): a 64k-token
    run spends about half its FLOPs on attention that the 6N basis does not count."""
    assert itype.accelerator
    band = "large" if parameters_billion >= u.large_band_billion else "small"
    model = itype.accelerator.model
    figures, borrowed = _published(model, band, precision, u)
    if sequence and (published := {f.sequence for f in figures if f.sequence}):
        # the rows at the planned sequence, else at the nearest published one (a tie: the longer, the lower MFU)
        nearest = min(published, key=lambda s: (abs(math.log(s / sequence)), -s))
        figures = tuple(f for f in figures if f.sequence == nearest)

    def at_sequence(f: MfuFigure) -> float:
        """The factor that moves `f`'s 6N figure from its sequence to the planned one (1 where either is unknown)."""
        if not (shape and sequence and f.sequence) or f.sequence == sequence:
            return 1.0
        return (1 + attention_share(parameters_billion, shape, f.sequence)) / \
            (1 + attention_share(parameters_billion, shape, sequence))

    def scaled(f: MfuFigure) -> float:
        moved = f.on_6n * at_sequence(f)
        return moved * RECOMPUTE_EFFICIENCY if recompute and f.recompute is False else moved
    values = sorted(scaled(f) for f in figures)
    # The likely figure is the fastest published stack's median: the plan runs the expert's techniques (FP8, compiled
    # blocks) and holds itself to what the best stack published, the others' rows widening the range below it.
    by_stack: dict[str, list[float]] = {}
    for f in figures:
        by_stack.setdefault(f.stack or f.source, []).append(scaled(f))
    fastest = max(sorted(by_stack), key=lambda s: statistics.median(by_stack[s]))
    likely = statistics.median(by_stack[fastest])
    low, high = values[0], values[-1]
    if len(values) == 1:  # one figure: the relative spread of the reference band around its median
        ref = sorted(f.value for f in u.mfu[(u.spread_from, band)])
        ref_median = statistics.median(ref)
        low, high = likely * ref[0] / ref_median, likely * ref[-1] / ref_median
    # This toolkit's own trainer, where it was measured on this accelerator (or its named stand-in) in this
    # precision: inside the range (the low end where it is below the published runs), said beside the likely figure,
    # which stays the fastest published stack's (the speed the plan holds the run to until `plan --calibrate`).
    own, stand_in = u.trainer_figures(model, precision)
    measured = statistics.median(scaled(f) for f in own) if own else None
    if measured is not None:
        low, high = min(low, measured), max(high, measured)

    def shown(f: MfuFigure) -> str:
        setting = {True: "recompute", False: "no recompute", None: "recompute not stated"}[f.recompute]
        batch = f", {f.global_batch_tokens:,}-token batch" if f.global_batch_tokens else ""
        counted = f", {f.on_6n:.1%} on 6N without its {f.attention} attention FLOPs" if f.on_6n != f.value else ""
        moved = at_sequence(f)
        note = f" x{moved:.2f} at {sequence:,} tokens (causal attention's FLOPs)" if moved != 1.0 else ""
        if recompute and f.recompute is False:
            note += f" x{RECOMPUTE_EFFICIENCY:g} (the layout recomputes)"
        note += f" = {scaled(f):.1%}" if note else ""
        return f"{f.what} {f.value:.1%} ({setting}{batch}{counted}){note} [{f.source}]"
    runs = "; ".join(shown(f) for f in figures)
    size = f"{u.large_band_billion:g}B+" if band == "large" else f"under {u.large_band_billion:g}B"
    basis = (borrowed + ": " if borrowed else "") + f"{model} {precision} MFU at {size} parameters: {runs}"
    if len(by_stack) > 1:
        basis += f"; likely: {fastest}'s median, the fastest of the {len(by_stack)} published stacks"
    if own:
        basis += f"; this toolkit's trainer as measured: {'; '.join(shown(f) for f in own)}" + \
            (f" ({stand_in}'s measurement, none on {model} yet)" if stand_in else "")
    return UtilisationRange(low, likely, high, basis, trainer_measured=measured)


def classic_hours(dataset_size_gib: float, vcpus: int, count: int, u: Utilisation) -> tuple[float, float, float]:
    """(low, likely, high) hours for boosted trees: float32 cells x rounds / (cell-rounds per vCPU-second x vCPUs)."""
    cells = dataset_size_gib * 2**30 / 4
    rates = sorted(r.value for r in u.classic_rates)
    work = cells * u.classic_rounds

    def at(rate: float) -> float:
        return work / (rate * vcpus * count) / 3600
    return at(rates[-1]), at(statistics.median(rates)), at(rates[0])


# Serverless compute price per GB-second of memory (us-east-1 list price, not confirmed in this
# session's sources: treat as an estimate).
SERVERLESS_USD_PER_GB_SECOND = 0.0000200


def usd_per_million(usd_per_hour: float, rps: float) -> float:
    return usd_per_hour / (rps * 3600) * 1e6


def serverless_usd_per_million(memory_mb: int, seconds_per_request: float) -> float:
    return memory_mb / 1024 * seconds_per_request * SERVERLESS_USD_PER_GB_SECOND * 1e6


# ---------------------------------------------------------------- the whole estate a month

@dataclass(frozen=True)
class MonthlyLine:
    """One line of the month's cost: what it is, its dollars, and the quantity and price multiplied."""
    item: str
    usd: float
    quantity: str  # what is multiplied, and whether it is assumed
    price: str  # the unit price with its kind
    source: str  # key of catalog/services.yaml sources, or the instance catalog's


@dataclass(frozen=True)
class Monthly:
    """The estate's cost for a month, line by line, with the training run's cost and the headline."""
    lines: tuple[MonthlyLine, ...]
    usd_month: float  # every line but the one training run (a scheduled workload's runs are a line of it)
    training_run_usd: float | None
    headline_usd: float | None  # one training run plus a month of everything else; the month where runs are in it
    note: str
    sources: dict[str, str]  # key -> "title <url>, checked date"
    training_runs: float | None = None  # runs a month (training.schedule or runs_per_month), in usd_month
    # The month with every endpoint at the fleet the stated peak needs (its chosen candidate's), where that is more than
    # its minimum: an autoscaled fleet costs between usd_month and this, as the traffic runs (None: no endpoint scales).
    usd_month_at_peak: float | None = None


# What the stacks create whatever the workload, counted here for their monthly lines (tests/test_billed_resources.py
# holds these counts to the synthesized templates): one NAT gateway (constructs_lib/network.py) with its public IPv4
# address, and the customer managed KMS keys of the data, the network's logs and the jobs' logs.
NAT_GATEWAYS = 1
CUSTOMER_MANAGED_KEYS = ("data", "logs", "job logs", "alarm topic")


@cache
def load_services() -> dict:
    from ..packaged import read_packaged_yaml
    return read_packaged_yaml(Path(__file__).parent.parent / "catalog" / "services.yaml")


def monthly(w, training, inference: dict, notebook_price: Price | None = None,
            standing: tuple[tuple[str, str, int, Price | None], ...] = ()) -> Monthly:
    """A month of the estate: storage, network, serving at minimum capacity, scheduled batch runs, notebook, the
    cluster's standing nodes and controller, keys, alarms and logs, priced from catalog/services.yaml; the headline
    adds one training run. Instance prices are named with their region, and say so where the plan's region has none
    recorded. `standing`: (what, instance type, count, price) of the nodes a cluster runs all month beside its
    training nodes (cluster_nodes.standing_nodes)."""
    svc = load_services()
    hours = svc["hours_per_month"]
    assumed = svc["assumed"]
    lines = []

    def add(item, usd, quantity, price, source):
        lines.append(MonthlyLine(item, round(usd, 2), quantity, price, source))

    if training.fsx:
        f = training.fsx
        rate = svc["fsx_lustre"]["persistent_2_ssd"][f.per_unit_mb_s]
        add("FSx for Lustre", f.storage_capacity_gib * rate, f"{f.storage_capacity_gib:,} GiB PERSISTENT_2 SSD at "
            f"{f.per_unit_mb_s} MB/s/TiB", f"${rate}/GB-month (FSx list price)", svc["fsx_lustre"]["source"])
    nat = svc["nat_gateway"]
    gb = assumed["nat_gb_processed_per_month"]
    add("NAT gateway hours", NAT_GATEWAYS * hours * nat["usd_per_hour"], f"{NAT_GATEWAYS} gateway x {hours} h",
        f"${nat['usd_per_hour']}/h (VPC list price)", nat["source"])
    add("NAT gateway data processed", gb * nat["usd_per_gb_processed"], f"{gb} GB (assumed: images, packages, AWS "
        "API calls; S3 goes through the gateway endpoint)", f"${nat['usd_per_gb_processed']}/GB (VPC list price)",
        nat["source"])
    ipv4 = svc["public_ipv4"]
    add("public IPv4 address", NAT_GATEWAYS * hours * ipv4["usd_per_hour"], f"{NAT_GATEWAYS} address x {hours} h "
        "(the NAT gateway's Elastic IP)", f"${ipv4['usd_per_hour']}/h (VPC list price)", ipv4["source"])
    s3 = svc["s3_standard"]
    gb_data = w.data.dataset_size_gib * 2**30 / 1e9
    add("S3 storage of the dataset", gb_data * s3["usd_per_gb_month"], f"{gb_data:,.0f} GB (the dataset)",
        f"${s3['usd_per_gb_month']}/GB-month (S3 Standard list price)", s3["source"])
    efs = svc["efs_standard"]
    if w.data.shared_home or w.data.storage == "efs":
        size = w.data.dataset_size_gib if w.data.storage == "efs" else assumed["efs_home_gib"]
        what = "the dataset" if w.data.storage == "efs" else "assumed /home"
        add("EFS", size * 2**30 / 1e9 * efs["usd_per_gb_month"], f"{size:,.0f} GiB ({what})",
            f"${efs['usd_per_gb_month']}/GB-month (EFS Standard list price)", efs["source"])
    for ip in inference.values():
        if ip.kind == "batch" and ip.batch_run:
            r = ip.batch_run
            drained = ip.serving is not None and ip.serving.drain == "async"  # hosts.drain_route: no transform job
            add("async endpoint scaled out for the batch runs" if drained else "batch transform runs",
                r.usd * r.runs_per_month, f"{r.runs_per_month:.1f} runs x ${r.usd:,.4g} "
                f"({'default schedule' if ip.schedule_is_default else 'schedule'} {ip.schedule}; {r.records:,} records "
                f"a run{' assumed' if r.records_assumed else ''})",
                f"{inference['async'].instance_type} at {inference['async'].price_note} (the async endpoint's)"
                if drained else f"{ip.instance_type} at {ip.price_note}", "catalog")
        elif ip.kind == "serverless":
            add("serverless endpoint at minimum", 0.0, "scales to zero; billed per GB-second of requests",
                f"${SERVERLESS_USD_PER_GB_SECOND}/GB-s (unconfirmed list price)", "catalog")
        else:
            add(f"{ip.kind} endpoint at minimum capacity", (ip.usd_per_hour_min or 0) * hours,
                f"{ip.min_instances} x {ip.instance_type} x {hours} h", f"${(ip.usd_per_hour_min or 0):,.4g}/h at "
                f"minimum ({ip.price_note})", "catalog")
    for what, itype, count, price in standing:
        if price is not None:
            add(what, count * price.usd_per_hour * hours, f"{count} x {itype} x {hours} h (runs all month)",
                f"${price.usd_per_hour}/h ({price.label})", "catalog")
    if training.orchestrator == "slurm":
        pcs = svc["pcs_controller"]
        add("PCS cluster controller", (pcs["usd_per_hour"] or 0) * hours, f"1 Slurm controller x {hours} h",
            "PCS list price by cluster size: not recorded, counted as $0", pcs["source"])
        snap, gb = svc["ebs_snapshot"], assumed["node_image_snapshot_gb"]
        add("node image snapshot", gb * snap["usd_per_gb_month"], f"{gb} GB (assumed: the baked image's written "
            "blocks)", f"${snap['usd_per_gb_month']}/GB-month (EBS snapshot list price)", snap["source"])
    kms = svc["kms_key"]
    add("KMS keys", len(CUSTOMER_MANAGED_KEYS) * kms["usd_per_key_month"],
        f"{len(CUSTOMER_MANAGED_KEYS)} customer managed keys ({', '.join(CUSTOMER_MANAGED_KEYS)})",
        f"${kms['usd_per_key_month']:g}/key-month (KMS list price; each yearly rotation adds a backing key)",
        kms["source"])
    from .monitoring import dashboards, plan_alarms

    # The step policies' wake-from-zero alarms: async endpoints, and inference components that scale to zero copies.
    wake = sum(1 for ip in inference.values() if ip.kind == "async" or ip.min_copies == 0)
    watch = len(plan_alarms(training, inference, latency_ms=w.inference.latency_ms))  # the monitors' (monitoring.py)
    if wake + watch:
        cw = svc["cloudwatch_alarms"]
        why = ", ".join(x for x in (f"{watch} of the estate's monitors" if watch else "",
                                    "the scale-out from zero of async endpoints and inference components"
                                    if wake else "") if x)
        add("CloudWatch alarms", (wake + watch) * cw["usd_per_alarm_month"], f"{wake + watch} alarms ({why})",
            f"${cw['usd_per_alarm_month']}/alarm-month (CloudWatch list price)", cw["source"])
    boards = dashboards(training, inference)
    if boards:
        cd = svc["cloudwatch_dashboards"]
        add("CloudWatch dashboards", boards * cd["usd_per_dashboard_month"], f"{boards} dashboards (training and "
            "serving; an account's first three are free, not counted here)",
            f"${cd['usd_per_dashboard_month']:g}/dashboard-month (CloudWatch list price)", cd["source"])
    lines.extend(cluster_lines(training, hours))
    from .schedule import training_runs_per_month

    runs, said = training_runs_per_month(w)
    run = training.estimate.usd_total
    if runs and run is not None:
        add("training runs", run * runs, f"{runs:,.1f} runs x ${run:,.4g} ({said})", training.estimate.price_note,
            "catalog")
    if w.notebook and notebook_price is not None:
        h = assumed["notebook_hours_per_month"]
        add("notebook", notebook_price.usd_per_hour * h, f"{h} h (assumed: stops itself after "
            f"{w.notebook.idle_minutes} idle minutes)", f"${notebook_price.usd_per_hour}/h ({notebook_price.label})",
            "catalog")
    logs = svc["cloudwatch_logs"]
    gb_logs = assumed["log_gb_per_month"]
    add("CloudWatch logs", gb_logs * (logs["usd_per_gb_ingested"] + logs["usd_per_gb_month_stored"]),
        f"{gb_logs} GB ingested and stored (assumed)", f"${logs['usd_per_gb_ingested']}/GB ingested + "
        f"${logs['usd_per_gb_month_stored']}/GB-month (CloudWatch list price)", logs["source"])
    month = round(sum(line.usd for line in lines), 2)
    above = sum(max(0.0, c.usd_per_hour_at_peak - (ip.usd_per_hour_min or 0)) * hours for ip in inference.values()
                if ip.kind in ("realtime", "async") for c in ip.candidates if c.chosen)
    region = "" if w.region == "us-east-1" else f"; service prices are us-east-1's ({w.region} may differ)"
    region += "; the PCS controller's fee is not recorded" if training.orchestrator == "slurm" else ""
    # A workload that trains on a schedule has its runs in the month; else the headline adds its one run.
    headline = None if run is None else round(month if runs else run + month, 2)
    what = f"a month with its {runs:,.1f} training runs ({said})" if runs else \
        f"one training run ({training.estimate.price_note}) + a month"
    return Monthly(tuple(lines), month, None if run is None else round(run, 2), headline,
                   f"headline = {what} of serving, storage, network, the cluster's always-on nodes and logs{region}; "
                   "compute nodes that run only for jobs are in the training run" + ("s" if runs else ""),
                   {k: f"{v['title']} <{v['url']}>, checked {v['checked']}" for k, v in svc["sources"].items()},
                   training_runs=runs, usd_month_at_peak=round(month + above, 2) if above > 0.005 else None)


def cluster_lines(training, hours: float) -> list[MonthlyLine]:
    """What the training cluster's compute bills in a month beside its training run (its always-on login and
    controller nodes are the `standing` lines): paid capacity outside the run, HyperPod's workers, and, for on-demand
    Slurm compute, nothing: dynamic nodes run only for jobs. `hours`: a month's hours."""
    t = training
    each = t.estimate.usd_per_hour / t.instance_count  # one compute node at the run's price
    outside = max(0.0, hours - (t.estimate.hours or 0.0))  # a month's hours the training run does not use
    nodes = f"{t.instance_count} x {t.instance_type}"
    kind = t.estimate.price_note.split(";")[0]
    lines = []
    if t.orchestrator == "slurm":
        if t.compute_min_nodes == 0:
            lines.append(MonthlyLine(
                "Slurm compute nodes when idle", 0.0, f"0 of {nodes}: dynamic nodes, started for queued jobs and ended "
                f"after {t.scale_down_idle_s} s idle (ScaleDownIdleTimeInSeconds); they bill while jobs run, which "
                "the training run counts", f"${each:,.4g}/h a node ({kind})", "catalog"))
        elif t.capacity_block:
            lines.append(MonthlyLine(
                "Capacity Block outside the training run", 0.0, f"{nodes}, static: the block is bought up front for "
                "whole days, which the training run counts; nothing bills once it ends", f"${each:,.4g}/h a node "
                f"({kind})", "catalog"))
        else:
            lines.append(MonthlyLine(
                "capacity reservation outside the training run", round(each * t.instance_count * outside, 2),
                f"{nodes} x {outside:,.0f} h: static nodes on the reservation, which bills whether they run or not "
                "(a month assumed; its term is yours)", f"${each:,.4g}/h a node ({kind})", "catalog"))
    elif t.orchestrator == "hyperpod" and kind.startswith("SageMaker training plan"):
        lines.append(MonthlyLine(
            "training plan outside the training run", 0.0, f"{nodes} on a SageMaker training plan: bought up front "
            "for whole days, which the training run counts; its capacity ends with the plan", f"${each:,.4g}/h a node "
            f"({kind})", "catalog"))
    elif t.orchestrator == "hyperpod" and t.estimate.usd_total is not None:
        # a training plan's capacity is bought at its own, unrecorded price
        lines.append(MonthlyLine(
            "HyperPod workers outside the training run", round(each * t.instance_count * outside, 2),
            f"{nodes} x {outside:,.0f} h: always on (a Slurm-orchestrated HyperPod cluster does not scale its "
            "workers; autoscaling is for EKS-orchestrated clusters): set the group's InstanceCount to 0 with "
            "update-cluster while idle", f"${each:,.4g}/h a node ({kind})", "catalog"))
    return lines
