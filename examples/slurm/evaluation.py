"""Evaluation and metrics for examples/slurm/train.py, beside it: the held-out loss every --eval-every steps on the
prepare step's held-out slice (prepare.py HELDOUT: documents never trained on), and the run's metrics as CloudWatch
embedded metric format (EMF) lines: one JSON object per line that CloudWatch Logs turns into metrics when the line
reaches a log group (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html).
On a SageMaker job they go to stdout, which SageMaker sends to CloudWatch Logs; elsewhere to --metrics-file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

HELDOUT = "heldout"  # prepare.py's held-out slice, under the data directory
EVAL_SEQUENCES = 8  # held-out sequences per data rank per evaluation: the same ones every time (a comparable loss)
NAMESPACE = "MLEstate/Training"  # the EMF namespace the run's metrics land in


def heldout(data: Path | None, seq: int):
    """The held-out slice as recipe.Tokens, or None (no --data, a single token file, or a slice too small)."""
    from recipe import Tokens  # beside this script

    directory = data / HELDOUT if data and data.is_dir() else None
    if directory is None or not any(f.stat().st_size for f in directory.glob("*.bin")):
        return None
    try:
        return Tokens(directory, seq, info=json.loads((data / "meta.json").read_text()))
    except SystemExit:  # fewer held-out tokens than one window: no evaluation (train.py says so)
        return None


def evaluate(model, args: argparse.Namespace, tokens, data_rank: int, data_ranks: int, device, forward_loss,
             autocast, *, holds_loss: bool = True) -> float:
    """The mean next-token loss over every target of EVAL_SEQUENCES x data ranks held-out windows, in order from the
    first; with the held-out loss mask where prepare.py wrote one, over every response token of them (as a training
    step's, recipe.step_divisor: a window with few response tokens weighs little, one with none nothing). Under
    pipeline stages only the last stage's ranks hold a loss (`holds_loss`; pipeline.Pipeline.forward_loss)."""
    import contextlib

    from torch.distributed.tensor.parallel import loss_parallel

    split = loss_parallel() if getattr(model, "vocab_parallel", False) else contextlib.nullcontext()
    sums = torch.zeros(2, device=device)  # the summed loss of the counted targets, and their count
    model.eval()
    with torch.no_grad(), split:
        for k in range(EVAL_SEQUENCES):
            index = (k * data_ranks + data_rank) % tokens.windows
            batch = tokens.window(index * args.seq, args.seq)[None].to(device)
            mask = tokens.mask_window(index * args.seq, args.seq)[None].to(device) if tokens.masked else None
            loss = forward_loss(model, batch, args, autocast, mask, per=1.0)  # with a mask: summed over the kept
            loss = (loss.full_tensor() if hasattr(loss, "full_tensor") else loss).detach().float()
            counted = mask[:, 1:].sum().float() if mask is not None else torch.tensor(float(batch[:, 1:].numel()),
                                                                                      device=device)
            if mask is None:
                loss = loss * counted  # no mask: the window's mean over all its targets
            if holds_loss:
                sums += torch.stack([loss, counted])
    model.train()
    dist.all_reduce(sums)  # tensor-parallel ranks add each window's loss and count alike: the ratio stands
    return (sums[0] / sums[1].clamp(min=1)).item()


class Metrics:
    """EMF lines from rank 0: the training loss, tokens/s, MFU beside the plan's, the held-out loss, skipped steps."""

    def __init__(self, args: argparse.Namespace, rank: int, parameters: int, world: int) -> None:
        self.rank, self.parameters, self.world = rank, parameters, world
        self.workload = os.environ.get("WORKLOAD_NAME") or os.environ.get("SLURM_JOB_NAME") or "train"
        self.peak, self.planned = args.peak_tflops, args.planned_mfu
        path = args.metrics_file or os.environ.get("TRAIN_METRICS_FILE")
        on_job = "TRAINING_JOB_NAME" in os.environ  # SageMaker sets it in a training job's container
        self.path = None if on_job or not path else Path(path)
        self.enabled = rank == 0 and (on_job or self.path is not None)
        if self.enabled and self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def emit(self, step: int, **values: float | None) -> None:
        if not self.enabled:
            return
        tokens_s = values.get("TokensPerSecond")
        if tokens_s and self.peak:  # 6N FLOPs per token over the ranks' peak: the plan's utilisation definition
            values["MFU"] = 6 * self.parameters * tokens_s / (self.peak * 1e12 * self.world)
        if self.planned:
            values["PlannedMFU"] = self.planned
        values = {k: v for k, v in values.items() if v is not None}
        units = {"TokensPerSecond": "Count/Second", "SkippedSteps": "Count"}
        line = {"_aws": {"Timestamp": int(time.time() * 1000), "CloudWatchMetrics": [{
            "Namespace": NAMESPACE, "Dimensions": [["Workload"]],
            "Metrics": [{"Name": k, "Unit": units.get(k, "None")} for k in values]}]},
            "Workload": self.workload, "Step": step, **values}
        text = json.dumps(line) + "\n"
        if self.path is None:
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            with self.path.open("a") as f:
                f.write(text)
