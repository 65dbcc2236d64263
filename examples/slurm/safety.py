"""Safe steps for examples/slurm/train.py, beside it: a step whose gradient norm (or loss) is not finite is skipped
instead of writing inf/NaN into the weights, too many in a row stop the run, and checkpoint pruning never deletes
the newest checkpoint saved at a finite loss.

Before: the optimizer stepped whatever the norm (clip_gradients returns inf/NaN and scales by it), one overflow made
every weight NaN, and with --keep 2 two saves after it pruned the last good checkpoint away.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

from recipe import publish  # beside this script

# Steps in a row with a non-finite gradient norm before the run stops. A transient spike (one bad batch, one
# overflow) is skipped and forgotten; this many in a row is a diverged run or bad data, which skipping cannot cure.
MAX_NONFINITE_IN_A_ROW = 10
LOSS_FILE = "loss.json"  # inside each checkpoint: the loss of the step it was saved at, written by the publisher


class StepGuard:
    """Counts the skipped steps; `allows` says whether the optimizer may step. The norm is the global one (every
    rank computes the same all-reduced value), so all ranks decide alike with no extra collective."""

    def __init__(self, limit: int, *, loss_scaling: bool, rank: int, checkpoints: Path) -> None:
        # fp16's loss scale starts at 2**16 and halves at each overflow: its first halvings are the scaler finding
        # its level (torch.amp.GradScaler's behaviour), not a diverged run, so they do not count toward the limit.
        self.limit = limit + (17 if loss_scaling else 0)
        self.rank, self.checkpoints, self.skipped, self.in_a_row = rank, checkpoints, 0, 0

    def allows(self, step: int, grad_norm: float, loss: float) -> bool:
        if math.isfinite(grad_norm) and math.isfinite(loss):
            self.in_a_row = 0
            return True
        self.skipped += 1
        self.in_a_row += 1
        if self.rank == 0:
            print(f"step {step} skipped: gradient norm {grad_norm} loss {loss} ({self.in_a_row} in a row, "
                  f"{self.skipped} skipped in this run)", flush=True)
        return False

    @property
    def diverged(self) -> bool:
        return self.in_a_row > self.limit

    def stop(self, step: int, pruner: bool) -> SystemExit:
        """The run stops: `latest` goes back to the newest checkpoint saved at a finite loss (the pruners move it),
        so the next start resumes from there, not from a checkpoint taken during the bad steps."""
        marker = self.checkpoints / "latest"
        good = last_finite(self.checkpoints, self.checkpoints / marker.read_text().strip() if marker.exists() else None)
        if pruner and good is not None:
            publish(marker, good.name + "\n")
        return SystemExit(
            f"stopping at step {step}: {self.in_a_row} steps in a row had a non-finite gradient norm or loss (limit "
            f"{self.limit}, --max-nonfinite-steps): the run diverged or its data is bad here. `latest` names "
            f"{good.name if good else 'no checkpoint saved at a finite loss'}, the last saved at a finite "
            "loss: start again with a lower --lr, or look at the data of these steps")


def record_loss(checkpoint: Path, step: int, loss: float) -> None:
    """Beside DCP's files: the loss the run had when it saved this checkpoint (rank 0 / the pruner writes it)."""
    publish(checkpoint / LOSS_FILE, json.dumps({"step": step, "loss": loss if math.isfinite(loss) else str(loss),
                                                "finite": math.isfinite(loss)}) + "\n")


def finite(checkpoint: Path) -> bool:
    """Whether a checkpoint was saved at a finite loss (one without the record, an older run's, counts as finite)."""
    path = checkpoint / LOSS_FILE
    return not path.exists() or bool(json.loads(path.read_text()).get("finite", True))


def last_finite(directory: Path, newest: Path | None) -> Path | None:
    """The newest checkpoint up to `newest` saved at a finite loss: train.py's DCP folders, or classifier.py's
    step-N.pt files (written only between good steps: a skipped step leaves the weights as they were)."""
    done = sorted(d for d in directory.glob("step-*") if (d.is_dir() or d.suffix == ".pt") and newest
                  and d.name <= newest.name)
    good = [d for d in done if finite(d)]
    return good[-1] if good else None


def prune(directory: Path, newest: Path | None, keep: int) -> None:
    """Keep the newest `keep` checkpoints up to `newest` (`latest`; FSx is sized for them): older ones go only behind
    a complete newer one, and the newest one saved at a finite loss stays whatever came after it."""
    done = sorted(d for d in directory.glob("step-*") if d.is_dir() and newest and d.name <= newest.name)
    good = last_finite(directory, newest)
    for old in done[:-keep] if keep > 0 else []:
        if old != good:
            shutil.rmtree(old, ignore_errors=True)


def injected(spec: str | None) -> frozenset[int]:
    """--inject-nonfinite STEP[,STEP...]: the steps whose loss is made infinite (fault injection for tests and
    drills), so their gradients are inf/NaN as an overflow makes them."""
    return frozenset(int(s) for s in spec.split(",") if s.strip()) if spec else frozenset()
