"""Readable rendering of a plan and of the catalog (rich tables)."""

from __future__ import annotations

import re
import sys
import textwrap
from datetime import timedelta

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..catalog import Catalog
from ..config.model import artifact_format
from ..planning import estimates as est
from ..planning.capacity import article
from ..planning.planner import Plan
from ..planning.precision import trainer_flags
from ..planning.training import TrainingPlan
from ..planning.vision import is_vision
from .jobs import TRAINING_IMAGES


def money(value: float | None) -> str:
    if value is None:
        return "-"
    return f"${value:,.0f}" if value >= 100 else f"${value:,.2f}"


# A command in backticks, as a line of the plan quotes it for the reader to run.
_COMMAND = re.compile(r"`((?:python -m|cdk|aws|sbatch|make) [^`]+)`")


def print_line(console: Console, line: str, indent: str = "  ") -> None:
    """One line of the plan, its prose wrapped to the console; a command it quotes goes on a line of its own, never
    wrapped (a command broken in the middle cannot be copied and pasted)."""
    commands, stripped = _COMMAND.findall(line), line.rstrip(" .")
    if commands and stripped.endswith("`"):  # "... copy it with `cmd`": "... copy it with:", then the command
        head = stripped[:stripped.rindex("`", 0, len(stripped) - 1)]
        prose = _COMMAND.sub("the command below", head).rstrip() + ":"
    else:
        prose = _COMMAND.sub("the command below" if len(commands) == 1 else "the commands below", line)
    hang = " " * (len(indent) + len(prose) - len(prose.lstrip()) + 2)
    wrapped = textwrap.fill(prose, width=max(console.width, 40), initial_indent=indent, subsequent_indent=hang,
                            break_long_words=False, break_on_hyphens=False)
    console.print(escape(wrapped), soft_wrap=True)  # wrapped here: rich starts a continuation at column 0
    for command in commands:
        console.print(f"{' ' * (len(indent) + 4)}{escape(command)}", soft_wrap=True, highlight=False)


def _cents(value: float) -> str:
    """A small amount that money() would print as $0.00."""
    return "under $0.01" if 0 < value < 0.005 else money(value)


def _hours(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 1 / 60:  # a batch run of seconds
        return f"{max(1, round(value * 3600))} s"
    if value < 0.95:  # a classic-ML run of minutes read "0.0 h"
        return f"{round(value * 60)} min"
    return f"{value:,.1f} h" if value < 1000 else f"{value:,.0f} h"


def _console() -> Console:
    # Piped output gets a width that keeps the tables readable. Colour only where the plan sets it (the pick, dim
    # detail, headings): rich's highlighter would colour every digit and quote (the "2" of us-east-2).
    return Console(highlight=False) if sys.stdout.isatty() else Console(width=150, highlight=False)


def _compute(precision: str) -> str:
    """The layout's compute dtype in words: fp16 where the accelerator has no bf16 (T4) trains with loss scaling."""
    return "fp16 compute, dynamic loss scaling: this accelerator has no bfloat16" if precision == "fp16" else \
        f"{precision} compute"


def _interfaces(t: TrainingPlan) -> str:
    """The launch template's layout in a line: the ENA primary, then where the EFA devices sit."""
    efa = [i for i in t.network_interfaces if i.kind != "interface"]
    cards = sorted({i.card for i in efa})
    where = f"card {cards[0]}" if len(cards) == 1 else f"cards {cards[0]}-{cards[-1]}"
    kinds = "/".join(sorted({i.kind for i in efa}))
    primary = " and ENA primary" if any(i.kind == "interface" for i in t.network_interfaces) else ""
    return f"{kinds} on {where}{primary}"


def _software(p: Plan) -> str:
    """What the nodes train with: the pinned stack the node image bakes, or what SageMaker or HyperPod bring."""
    t = p.training
    if t.orchestrator == "sagemaker-jobs":
        image = TRAINING_IMAGES[p.workload.model.framework]
        return f"SageMaker {image['framework']} {image['version']} training image ({image.get('py_version', '')})"
    if t.orchestrator == "hyperpod":
        return f"{t.software.name}, installed on the workers by the lifecycle script (HyperPod's own AMI)"
    return f"{t.software.name}, baked into the node image"


def print_header(p: Plan, console: Console, budget: dict | None) -> None:
    """The plan's first line, the same in the short and the full plan."""
    w = p.workload
    whose = f"team {budget['team']} (workload {w.name})" if budget else w.name
    title = f"Plan for {whose}"
    line = textwrap.fill(f"{title}  {w.region} / {w.availability_zone}  ({w.model.parameters_billion:g}B-parameter "
                         f"{w.model.framework} model, {w.data.dataset_size_gib:,.0f} GiB of data)",
                         width=max(console.width, 40), subsequent_indent="  ", break_on_hyphens=False)
    console.print(f"[bold]{escape(title)}[/bold]{escape(line[len(title):])}", soft_wrap=True)


def print_plan(p: Plan, console: Console | None = None, *, budget: dict | None = None) -> None:
    console = console or _console()
    t, e = p.training, p.training.estimate
    print_header(p, console, budget)
    for line in summary(p, budget):
        print_line(console, line)
    for line in p.model:
        print_line(console, line)
    console.print()
    _print_findings(p, console)
    if p.path:
        console.print("[bold]Train -> serve[/bold]")
        for line in p.path:
            print_line(console, line)
        console.print()
    console.print("[bold]Training[/bold]")
    console.print(f"  {t.instance_type} x {t.instance_count}  ({t.accelerator})")
    if t.efa_interfaces:
        console.print(f"  EFA per node: {t.efa_interfaces} of {t.efa_max_interfaces} interfaces, "
                      f"{t.efa_gbps:g} of {t.network_gbps:g} Gbps; {_interfaces(t)}")
    else:
        console.print(f"  EFA: none ({'single node' if t.instance_count == 1 else 'type has no EFA'}); "
                      f"network {t.network_gbps:g} Gbps")
    if t.software:
        console.print(f"  software: {_software(p)}")
    reservation = ""
    if t.capacity_reservation_id:
        reservation = f", {'Capacity Block' if t.capacity_block else 'capacity reservation'} {t.capacity_reservation_id}"
    nodes = ""
    if t.orchestrator == "slurm":
        nodes = f", compute nodes {t.compute_min_nodes}-{t.instance_count} " + \
            ("(dynamic: none when idle)" if t.compute_min_nodes == 0 else "(static: capacity paid anyway)")
    console.print(f"  orchestrator {t.orchestrator}, storage {t.storage}, "
                  f"placement group {'yes' if t.placement_group else 'no'}{reservation}{nodes}")
    if t.parallelism:
        lay = t.parallelism
        console.print(f"  layout: data {lay.data} x tensor {lay.tensor} x pipeline {lay.pipeline} = {lay.ranks} "
                      f"ranks, {SHARDING_WORDS[lay.sharding].format(lay=lay)}; about "
                      f"{lay.gib_per_rank:g} of {lay.rank_memory_gib:g} GiB per rank ({_compute(lay.precision)}{', fp8 linears (torchao Float8)' if t.precision == 'fp8' else ''}, fp32 weights + AdamW, "
                      + (f"sized as a transformer on {lay.sequence}-token sequences (your script's model), "
                         if is_vision(p.workload) else
                         f"{lay.sequence}-token sequences, {lay.vocab:,}-entry vocabulary, ")
                      + f"{'activation checkpointing' if lay.recompute else 'no activation checkpointing'})")
    if t.orchestrator in ("slurm", "hyperpod") and t.accelerator_kind:
        from ..planning.acceptance import MIN_FRACTION, acceptance_script, expected_busbw_gbs
        from ..catalog import load_catalog
        console.print(f"  after deploy: {acceptance_script(t.accelerator_kind)} (TrainStack output Acceptance) expects "
                      f"up to {expected_busbw_gbs(load_catalog().get(t.instance_type)):g} GB/s bus bandwidth over EFA "
                      f"and fails below {MIN_FRACTION:.0%}" + (
                          "; NxD Training's speed is Neuron's published throughput (no Calibrate output)"
                          if t.parallelism and t.parallelism.nxdt else
                          "; the Calibrate output measures the speed for `plan --calibrate` (docs/operations.md)"))
    if t.fsx:
        f = t.fsx
        console.print(f"  FSx for Lustre: {f.storage_capacity_gib:,} GiB at {f.per_unit_mb_s} MB/s/TiB = "
                      f"{f.throughput_mb_s:,.0f} MB/s against a need of {max(f.read_need_mb_s, f.checkpoint_need_mb_s):,.0f} MB/s "
                      f"(reads {f.read_need_mb_s:,.0f}, checkpoint writes {f.checkpoint_need_mb_s:,.0f})")
    line = f"  cluster {money(e.usd_per_hour)}/h; estimate: {_hours(e.hours)} = {money(e.usd_total)} likely"
    if e.hours_range:
        usd = f" = {money(e.usd_total_range[0])} to {money(e.usd_total_range[1])}" if e.usd_total_range else ""
        line += f"; range {_hours(e.hours_range[0])} to {_hours(e.hours_range[1])}{usd}"
        line += " (no faster than likely: the step waits on communication)" if e.no_faster_than_likely else ""
    if e.spot_usd_total is not None:
        line += f"  (managed spot about {money(e.spot_usd_total)})"
    console.print(line + f"  [dim]{e.price_note}[/dim]")
    if e.flops and e.utilisation_range:
        console.print(f"  [dim]{e.tokens_billion:,.1f}B tokens, {e.flops:.2e} FLOPs, utilisation {e.utilisation:.1%} "
                      f"likely ({e.utilisation_range[0]:.1%} to {e.utilisation_range[1]:.1%})[/dim]")
        if t.precision:
            how = f"{t.precision}" + (", torch.compile" if t.compiled else "")
            flags = ' '.join(trainer_flags(t.precision, t.compiled)) or 'defaults'
            by = "your training script" if is_vision(p.workload) else f"train.py {flags}"
            console.print(f"  trained in {how} ({by}): priced at the published {t.precision} runs' MFU until "
                          "`plan --calibrate` measures it")
            if e.trainer_mfu is not None and e.trainer_mfu < e.utilisation:  # said, not only inside the range
                slow = _hours(e.hours_range[1]) + (f", {money(e.usd_total_range[1])}" if e.usd_total_range else "")
                console.print(f"  [yellow]this toolkit's trainer measured {e.trainer_mfu:.1%} MFU in {t.precision} (one "
                              f"GPU, a small model: catalog utilisation.yaml), below the published {e.utilisation:.1%}; "
                              f"the range's slow end covers it: {slow}[/yellow]")
    if e.basis:
        console.print(f"  [dim]rests on: {escape(e.basis)}[/dim]")
    for d in t.decisions:
        print_line(console, d, "  - ")

    kinds = sorted({c.price_kind for c in t.candidates if c.price_kind})
    table = Table(title="Training candidates, side by side" + (f" (all at {kinds[0]} prices)" if len(kinds) == 1 else
                  f" (prices: {', '.join(kinds)})" if kinds else ""), title_justify="left")
    for col in ("type", "capacity", "nodes", "accelerators", "$/h (cluster)", "time", "total", "fits", "why"):
        table.add_column(col, justify="right" if col in ("nodes", "$/h (cluster)", "time", "total") else "left")
    # Ranked by total, capacity still to buy beside what deploys as it is (planning/capacity.py).
    for c in sorted(t.candidates, key=lambda c: (not c.feasible, c.usd_total is None, c.usd_total or 0)):
        style = "bold green" if c.chosen else ("dim" if not c.feasible else "")
        what = c.price_kind + (f", buy {c.purchase.days} days" if c.purchase else "")
        table.add_row(("* " if c.chosen else "") + c.instance_type, what, str(c.count), c.accelerators,
                      money(c.usd_per_hour), _hours(c.hours), money(c.usd_total),
                      "yes" if c.feasible else "no", c.why, style=style)
    console.print(table)
    for c in t.candidates:
        if c.purchase and c.feasible:  # the commands on lines of their own, never wrapped
            b = c.purchase
            console.print(f"  - {b.count} x {b.instance_type} as {article(b.kind)} for {b.days} days: find the "
                          f"offering and buy it, then deploy onto it with {escape(b.deploy)}")
            for command in (b.search, b.buy):
                console.print(f"      {escape(command)}", soft_wrap=True, highlight=False)

    table = Table(title="Inference", title_justify="left")
    for col in ("kind", "instance", "min-max", "$/h at min", "$/h at max", "$ per million requests", "why"):
        table.add_column(col)
    for ip in p.inference.values():
        why = f"{ip.why_kind}; {ip.reason}"
        if ip.kind == "serverless":
            per_million = f"{money(ip.usd_per_million)} at {ip.latency_ms / 1e3:.3g} s/request"
            table.add_row(ip.kind, f"{ip.memory_mb} MB", f"0-{ip.max_concurrency} concurrent", "$0", "per GB-second",
                          per_million, why)
            continue
        low, high = ip.requests_per_second_range
        each = f"{_rate(ip.requests_per_second_per_instance)} req/s/instance ({_rate(low)}-{_rate(high)})"
        per_million = f"{money(ip.usd_per_million)} at {each}" if ip.kind == "batch" else \
            f"{money(ip.usd_per_million)} at the stated {_rate(p.workload.inference.requests_per_second)} req/s on " \
            f"{max(ip.min_instances, ip.instances_needed_at_peak or 0)} instance(s), {each}"
        if ip.schedule:
            why += f" (default schedule {ip.schedule}: set inference.batch.schedule)" if ip.schedule_is_default \
                else f" (schedule {ip.schedule}, from the config)"
        if ip.batch_run:
            r = ip.batch_run
            why += (f"; one scheduled run: {r.records:,} records"
                    + (" (assumed: an hour at inference.requests_per_second; set inference.batch.records_per_run)"
                       if r.records_assumed else "")
                    + f", {r.records_per_request:,} a request, {_hours(r.hours)} + {_hours(r.startup_s / 3600)} start-up = "
                    f"{_cents(r.usd)}; {r.runs_per_month:.1f} runs a month")
        table.add_row(ip.kind, ip.instance_type or "-", f"{ip.min_instances}-{ip.max_instances}",
                      money(ip.usd_per_hour_min), money(ip.usd_per_hour_max), per_million, why)
    if p.inference:  # else the train -> serve path says: training only
        console.print(table)
    _print_serving_candidates(p, console)
    for ip in p.inference.values():
        if ip.throughput_basis:
            took = f"{ip.latency_ms / 1000:,.2f} s" if ip.latency_ms >= 100 else f"{ip.latency_ms:.1f} ms"
            console.print(f"  - {ip.kind}: {took} a request; {escape(ip.throughput_basis)}")
    _print_serving(p, console)
    _print_monthly(p, console)
    console.print("[bold]Assumptions[/bold]")
    for a in e.assumptions:
        console.print(f"  - {a}")
    for c in p.calibration:
        console.print(f"  - {c}")
    if "serverless" in p.inference:
        console.print(f"  - serverless ${est.SERVERLESS_USD_PER_GB_SECOND:.7f}/GB-s (unconfirmed list price)")


def summary(p: Plan, budget: dict | None = None) -> list[str]:
    """The plan on one screen, before its detail: what is launched, what it costs, the team's budget verdict and how
    many warnings follow."""
    t, e = p.training, p.training.estimate
    run = f"{_hours(e.hours)}, {money(e.usd_total)} likely" if e.usd_total is not None else f"{money(e.usd_per_hour)}/h"
    run += f" in {t.precision} at {e.utilisation:.0%} MFU, until calibrated" \
        if t.precision and e.utilisation and e.usd_total is not None else ""
    bought = "" if t.purchase is None else \
        f" on {article(t.purchase.kind)} to buy first ({t.purchase.days} days of {t.purchase.count})"
    base = p.workload.training.init_from
    start = f", fine-tuning from the base weights in {base}" if base else ""
    lines = [f"summary: train on {t.instance_count} x {t.instance_type} ({t.orchestrator}){bought}{start}: {run}"]
    for ip in p.inference.values():
        if ip.kind == "batch" and ip.serving is not None and ip.serving.drain == "async":
            what = "drained through the async endpoint" + (f", {ip.schedule}" if ip.schedule else "")
        elif ip.kind == "batch":
            what = f"{ip.max_instances} x {ip.instance_type} per run" + (f", {ip.schedule}" if ip.schedule else "")
        elif ip.instance_type:
            what = f"{ip.min_instances}-{ip.max_instances} x {ip.instance_type}, {money(ip.usd_per_hour_min)}/h at minimum"
            peak = next((c for c in ip.candidates if c.chosen), None)
            if peak is not None and peak.usd_per_hour_at_peak > (ip.usd_per_hour_min or 0) + 0.005:
                what += f", {money(peak.usd_per_hour_at_peak)}/h at the stated peak ({peak.instances_at_peak})"
            if ip.copies_per_instance:
                assert ip.serving is not None
                n = ip.copies_per_instance
                what += (f"; {n} cop{'y' if n == 1 else 'ies'} of TP={ip.serving.tensor_parallel} per {ip.instance_type} "
                         f"({ip.min_copies}-{ip.max_copies} copies, Inference Components)")
            if ip.serving is not None and ip.serving.quantization:
                what += f"; {ip.serving.quantization.upper()} weights and KV cache"
        else:
            what = f"{ip.memory_mb} MB, up to {ip.max_concurrency} concurrent requests" if ip.memory_mb else "on demand"
        lines.append(f"         {ip.kind}: {what}")
    if not p.inference:
        lines.append("         no endpoints (training only)")
    m = p.monthly
    if m is not None:
        at_peak = f" (endpoints at their minimum; {money(m.usd_month_at_peak)} with the fleet the stated peak " \
            "needs all month)" if m.usd_month_at_peak is not None else ""
        lines.append(f"         a month of the estate {money(m.usd_month)}{at_peak}" + (
            f" with its {m.training_runs:,.1f} training runs" if m.training_runs else
            f"; with one training run {money(m.headline_usd)}" if m.headline_usd is not None else ""))
    if budget:
        lines.append(f"         team {budget['team']}: {money(budget['monthly_estimate_usd'])} against its budget of "
                     f"{money(budget['monthly_budget_usd'])}: {budget_verdict(budget)}")
    warnings = sum(1 for f in p.findings if f.level == "WARNING")
    if warnings:
        lines.append(f"         {warnings} warning{'s' if warnings != 1 else ''}: see Warnings and notes below")
    return lines


def _print_monthly(p: Plan, console: Console) -> None:
    m = p.monthly
    if m is None:
        return
    head = f"one training run {money(m.training_run_usd)} + a month {money(m.usd_month)} = {money(m.headline_usd)}" \
        if m.headline_usd is not None else f"a month {money(m.usd_month)} (training run not priced)"
    if m.training_runs and m.headline_usd is not None:
        head = f"a month {money(m.usd_month)}, its {m.training_runs:,.1f} training runs of {money(m.training_run_usd)} " \
            "included"
    table = Table(title=f"The whole estate: {head}", title_justify="left")
    for col in ("item", "$ a month", "quantity", "price (kind)", "source"):
        table.add_column(col, justify="right" if col == "$ a month" else "left")
    for line in m.lines:
        table.add_row(line.item, money(line.usd), line.quantity, line.price, line.source)
    console.print(table)
    console.print(f"  [dim]{m.note}[/dim]")


SHOWN_CANDIDATES = 8
SHARDING_WORDS = {"none": "DDP (no sharding)", "full": "FSDP2 full shard",
                  "hybrid": "HSDP (FSDP2 sharded over {lay.shard_group} data ranks, replicated across the rest)",
                  "zero1": "NxD Training: ZeRO-1 over the data ranks, sequence parallel, key/value heads replicated "
                           "{lay.nxdt[kv_replicator]}x, selective recompute"}


def _print_serving_candidates(p: Plan, console: Console) -> None:
    """Per kind the planner chose: the winner and its runners-up, each with why it lost."""
    for ip in p.inference.values():
        if len(ip.candidates) + len(ip.left_out) < 2:
            continue
        fleet = ip.kind != "batch"  # endpoints: the fleet at minimum and at the stated peak; batch: $ per request
        table = Table(title=f"{ip.kind}: serving candidates ({len(ip.candidates)} compared, "
                            f"{min(SHOWN_CANDIDATES, len(ip.candidates))} shown)", title_justify="left")
        # Endpoints: the fleet (instances at minimum - at the stated peak), its $/h at both, $ per million at the peak.
        costs = ("fleet", "$/h min / peak", "$/M") if fleet else ("instances", "$/million")
        for col in ("type", "TP x copies", "batch", "req/s each", *costs, "TTFT", "TPOT", "request", "why"):
            table.add_column(col, no_wrap=col == "type")
        for c in ip.candidates[:SHOWN_CANDIDATES]:
            cost = (f"{c.instances_at_minimum}-{c.instances_at_peak}",
                    f"{money(c.usd_per_hour_at_minimum)} / {money(c.usd_per_hour_at_peak)}",
                    money(c.usd_per_million)) if fleet else (str(c.instances_at_peak), money(c.usd_per_million))
            ms = (lambda v: "-" if v is None else f"{v:,.0f} ms")
            layout = f"{c.tensor_parallel or '-'} x {c.copies}" + (f" {c.quantization}" if c.quantization else "")
            table.add_row(("* " if c.chosen else "") + c.instance_type, layout,
                          str(c.concurrency), _rate(c.requests_per_second), *cost,
                          ms(c.ttft_ms), ms(c.tpot_ms), ms(c.latency_ms), c.why,
                          style="bold green" if c.chosen else ("dim" if not c.meets else ""))
        for row in ip.left_out:  # not costed: what no measurement backs is not compared
            name, why = row.split(": ", 1)
            table.add_row(name, *["-"] * (len(table.columns) - 2), why, style="dim")
        console.print(table)


def _print_findings(p: Plan, console: Console) -> None:
    """Warnings first (the build goes on; --strict refuses them), then the notes that explain a choice."""
    if not p.findings:
        return
    table = Table(title="Warnings and notes", title_justify="left")
    for col in ("level", "field", "what to know", "source"):
        table.add_column(col)
    for f in sorted(p.findings, key=lambda f: f.level != "WARNING"):
        table.add_row(f.level, f.field, escape(f.message), escape(f.source) or "-",
                      style="bold yellow" if f.level == "WARNING" else "")
    console.print(table)
    console.print()


def print_preflight(p: Plan, findings: list, *, stage: str = "", console: Console | None = None) -> None:
    """Every preflight finding in one table: errors, then warnings, then what was found."""
    console = console or _console()
    counts = {level: sum(f.level == level for f in findings) for level in ("ERROR", "WARNING", "INFO")}
    who = f"team {stage}'s " if stage else ""
    console.print(f"[bold]Preflight for {who}{p.workload.name}[/bold] in {p.workload.region}: {counts['ERROR']} "
                  f"errors, {counts['WARNING']} warnings, {counts['INFO']} notes")
    table = Table(title_justify="left")
    for col in ("level", "field", "value", "finding", "source"):
        table.add_column(col)
    styles = {"ERROR": "bold red", "WARNING": "bold yellow"}
    for f in findings:
        table.add_row(f.level, escape(f.field), escape("-" if f.value is None else str(f.value)), escape(f.message),
                      escape(f.source) or "-", style=styles.get(f.level, ""))
    console.print(table)


def _rate(rps: float) -> str:
    return f"{rps:,.0f}" if rps >= 100 else f"{rps:.3g}"


def _print_serving(p: Plan, console: Console) -> None:
    """Per kind: the container, the artifact it reads (upload it before deploying) and its environment."""
    if not p.inference:
        return
    fmt, why = artifact_format(p.workload)
    console.print(f"[bold]Serving contract[/bold]  artifact format {fmt} ({why})")
    table = Table(show_header=True)
    for col in ("kind", "container", "artifact in the dataset bucket", "environment"):
        table.add_column(col)
    for ip in p.inference.values():
        sv = ip.serving
        if sv is None:
            continue
        env = " ".join(f"{k}={v}" for k, v in sv.environment.items()) or "-"
        table.add_row(ip.kind, sv.container_title, f"{sv.artifact_key}\n[dim]{sv.artifact_layout}[/dim]", env)
    console.print(table)
    batch = p.inference.get("batch")
    if batch and batch.serving:
        r = batch.serving.request
        console.print(f"  - batch transform sends what {batch.serving.container_title} reads: ContentType "
                      f"{r.content_type}, Accept {r.accept}, SplitType {r.split_type}, {r.batch_strategy}, "
                      f"AssembleWith {r.assemble_with}, {batch.max_concurrent_transforms} in flight per instance")
    for ip in p.inference.values():
        if ip.startup:
            st = ip.startup
            console.print(f"  - {ip.kind} start-up: model download within {st.download_timeout_s} s, healthy within "
                          f"{st.startup_timeout_s} s" + (f", {st.volume_gb} GB ML volume" if st.volume_gb else "")
                          + f" ({escape(st.basis)})")
    notes = dict.fromkeys(n for ip in p.inference.values() if ip.serving for n in ip.serving.notes)
    for note in notes:
        console.print(f"  - {note}")


def print_catalog(cat: Catalog, console: Console | None = None) -> None:
    console = console or _console()
    table = Table(title=f"Instance catalog (as of {cat.as_of})", title_justify="left")
    for col in ("type", "vCPU", "GiB", "accelerators", "TFLOPS", "EFA", "Gbps", "NVMe", "EC2 $/h us-east-1",
                "ml. $/h us-east-1", "sources"):
        table.add_column(col)
    for t in cat.types.values():
        acc = f"{t.accelerator.count} x {t.accelerator.model}" if t.accelerator else "-"
        ec2 = t.ec2_prices.get("us-east-1")
        sm = t.sagemaker_prices.get("us-east-1")
        table.add_row(t.name, str(t.vcpus), f"{t.memory_gib:g}", acc,
                      f"{t.peak_tflops:g} {t.peak_tflops_dtype}" if t.peak_tflops else "-",
                      str(t.efa_max_interfaces), f"{t.network_gbps:g}", "yes" if t.local_nvme else "no",
                      money(ec2), money(sm), ", ".join(t.sources))
    console.print(table)
    for s in cat.sources.values():
        console.print(f"  [{s.key}] {s.title} <{s.url}> checked {s.checked}")


def print_team_budget(b: dict, console: Console | None = None) -> None:
    """A team's plan against its monthly budget (python -m workloads plan -c teams=FILE -c team=NAME)."""
    console = console or _console()
    console.print(f"[bold]Team {b['team']}[/bold]  families {', '.join(b['allowed_instance_families'])}; "
                  f"{b['estimate_is']} {money(b['monthly_estimate_usd'])} against a monthly budget of "
                  f"{money(b['monthly_budget_usd'])}: {escape(budget_verdict(b))}")


def budget_verdict(b: dict) -> str:
    """fits, unknown, or EXCEEDS with what to cut: the largest monthly lines (the exit status stays 0: a verdict)."""
    if b["fits_budget"] is None:
        return "unknown"
    if b["fits_budget"]:
        return "fits"
    over = b["monthly_estimate_usd"] - b["monthly_budget_usd"]
    largest = b.get("largest_lines") or []
    return f"EXCEEDS by {money(over)}" + (f"; the largest lines: {'; '.join(largest)}" if largest else "")


def print_cost(r, console: Console | None = None) -> None:
    """`python -m workloads cost`: each service's bill beside the plan's figure and range, and which differ."""
    console = console or _console()
    who = f"team {r.team}'s " if r.team else ""
    last = r.end - timedelta(days=1)
    part = "" if r.share >= 1 else f" ({r.share:.0%} of the month: the plan's monthly lines are scaled to it)"
    runs = f"{r.runs} training run{'s' if r.runs != 1 else ''}" if r.runs else "no training run"
    console.print(f"[bold]Cost of {who}{r.workload}[/bold] from {r.start} to {last}{part}, by service, tagged "
                  f"workload={r.workload}{f' and team={r.team}' if r.team else ''}: billed {money(r.actual_usd)}, "
                  f"planned {money(r.planned_usd)} (a month of the estate and {runs})")
    table = Table(title_justify="left")
    for col in ("service", "billed", "planned", "plan's range", "verdict", "the plan's lines"):
        table.add_column(col, justify="right" if col in ("billed", "planned") else "left")
    for x in r.lines:
        span = "-" if x.low_usd is None else f"{money(x.low_usd)} to {money(x.high_usd)}"
        table.add_row(escape(x.service), money(x.actual_usd), money(x.planned_usd), span, x.verdict,
                      escape("; ".join(x.items)) or "-", style="bold yellow" if x.differs else "")
    console.print(table)
    differ = [x.service for x in r.lines if x.differs]
    console.print(f"  {len(differ)} of {len(r.lines)} lines differ from the plan by more than its range"
                  + (f": {', '.join(differ)}" if differ else ""))
    unsure = [x.service for x in r.lines if x.name_status not in ("confirmed", "from Cost Explorer")]
    if unsure:
        console.print(f"  [dim]Not confirmed at an AWS source as Cost Explorer's SERVICE name: {escape(', '.join(unsure))}"
                      " (workloads/catalog/cost_explorer.yaml service_names). If one shows nothing billed beside a "
                      "service the plan does not name, that service may be it: aws ce get-dimension-values "
                      "--dimension SERVICE[/dim]")
    if r.estimated:
        console.print("  [dim]Cost Explorer marks these figures estimated: the month is not closed yet[/dim]")
    console.print("  [dim]Only resources carrying the tags count, and only once the tags are active cost allocation "
                  "tags (docs/operations.md, 'What it really cost')[/dim]")
