"""A training run's length and its checkpoints: the global batch and the steps that train the plan's tokens (with the
learning-rate warmup), how often the trainer checkpoints, and what it needs to stop cleanly and hand its model on (the
checkpoints kept, the export directory, torchrun's shutdown timeout and Slurm's signal lead). Pure Python."""

from __future__ import annotations

import math
from dataclasses import replace

from ..config.model import artifact_format
from ..config.schema import Workload
from . import layout, parallelism
from .contracts import DEFAULT_KEYS
from .parallelism import Parallelism
from .storage import CHECKPOINT_BYTES_PER_PARAM, CHECKPOINTS_KEPT, FsxPlan
from .training_estimate import TrainingEstimate


# The trainer's stop budget. torchrun kills its workers TORCH_ELASTIC_SHUTDOWN_TIMEOUT seconds after SIGTERM, 30 by
# default (torch.distributed.launcher.api LaunchConfig); the checkpoint must fit in it, with room for a slower write
# and the step in flight when the signal comes.
TORCHRUN_DEFAULT_SHUTDOWN_S = 30
CHECKPOINT_TIME_MARGIN = 2.0
STEP_ALLOWANCE_S = 120
FSX_OUTPUT_DIR = "/fsx/output"  # the FSx link exports it to the bucket's models/ prefix (layout.FSX_LINKS)


def plan_run_length(w: Workload, spread: Parallelism, tokens_billion: float | None,
                    decisions: list[str]) -> Parallelism:
    """The global batch (fixed in tokens, whatever the node count: gradient accumulation makes it up), the steps that
    train the plan's tokens (epochs included) and the learning-rate warmup (Llama 2's recipe)."""
    asked = w.training.global_batch_tokens or parallelism.GLOBAL_BATCH_TOKENS
    per_step = spread.global_batch * spread.sequence
    said = "training.global_batch_tokens" + ("" if w.training.global_batch_tokens else ", Llama 2's")
    seq = "training.sequence_length" if w.training.sequence_length else "training.sequence_length, assumed"
    decisions.append(parallelism.global_batch_line(spread, asked=asked, said=said, sequence_note=f" ({seq})",
                                                   tail=", the same whatever the node count"))
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


def fault_budget(w: Workload, spread: Parallelism, fsx: FsxPlan | None, decisions: list[str],
                 orchestrator: str) -> Parallelism:
    """What the trainer needs to stop cleanly and hand its model on: checkpoints kept (what FSx is sized for), the
    export directory the FSx link puts under the serving contract's models/ prefix, and the stop budget: torchrun's
    shutdown timeout (its default 30 s kills a large checkpoint) and Slurm's signal lead, from the checkpoint's
    size over the file system's write rate."""
    fmt, _ = artifact_format(w)
    key = w.inference.artifact.key or DEFAULT_KEYS[fmt]
    name = key.removeprefix(layout.MODELS).strip("/") if key.startswith(layout.MODELS) else w.name
    # On FSx the link exports it under models/; a SageMaker job writes SM_MODEL_DIR instead (the trainer's default
    # there), which SageMaker uploads to output/<job>/output/model/ (`python -m workloads promote` copies it on).
    # An encoder classifier's export is the framework archive itself (classifier.py packs it where the path ends in
    # .tar.gz): /fsx/output/model.tar.gz lands on the contract's models/model.tar.gz.
    exported = fmt == "huggingface" or (spread.task == "sequence-classification" and fmt == "framework-archive")
    export_dir = f"{FSX_OUTPUT_DIR}/{name}" if exported and orchestrator != "sagemaker-jobs" else ""
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


def checkpoint_cadence(w: Workload, spread: Parallelism, fsx: FsxPlan | None, estimate: TrainingEstimate,
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


def checkpoint_seconds(parameters_billion: float, write_mb_s: float) -> float:
    """A checkpoint's write time: its size (storage.CHECKPOINT_BYTES_PER_PARAM) over the file system's rate."""
    return parameters_billion * 1e9 * CHECKPOINT_BYTES_PER_PARAM / 1e6 / write_mb_s
