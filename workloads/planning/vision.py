"""A vision model (model.architecture vision) is planned for its hardware, time and cost, but the shipped trainer
builds decoder language models (examples/slurm/train.py) and encoder classifiers (classifier.py), not vision
networks: the workload brings its own training script. So the plan prints no learning-rate recipe, batch or step
count of its own for it (those are the script's), and says so in a WARNING with what to run. Pure Python."""

from __future__ import annotations

from dataclasses import replace

from ..config.model import architecture
from ..config.schema import CLASSIC_ML, Workload
from ..errors import WARNING, Finding
from .parallelism import Parallelism


def is_vision(w: Workload) -> bool:
    return w.model.framework not in CLASSIC_ML and architecture(w)[0] == "vision"


def run_length(w: Workload, spread: Parallelism, tokens_billion: float | None, decisions: list[str]) -> Parallelism:
    """No recipe of the shipped trainer's: the run's size is its FLOPs over the plan's tokens (patches); its batch,
    learning rate, warmup and steps are the script's."""
    decisions.append(
        f"run length: {tokens_billion or 0:g}B tokens (data.tokens_billion: image patches x epochs) priced as 6 FLOPs "
        "a parameter a token; the batch, learning rate, warmup, augmentation and steps are your training script's "
        "(a vision model has no recipe in the shipped trainer); memory per rank is sized as a transformer of this "
        f"size on {spread.sequence:,}-token sequences, an upper bound for 224-pixel images (196 patches)")
    return replace(spread, steps=0, warmup_steps=0)


def finding(w: Workload, orchestrator: str) -> Finding:
    """What a vision workload does to train: its own script, on the planned nodes."""
    run = ("python -m workloads submit <workload> --entry-point train.py --source-dir <your script's folder> (the "
           "job gets the plan's instance type, count, data channel and checkpoint folder)"
           if orchestrator == "sagemaker-jobs" else
           "sbatch your own script on the cluster (srun torchrun ... your_train.py), reading /fsx/datasets and writing "
           "/fsx/checkpoints and /fsx/output; the TrainStack's Submit output runs the shipped language-model trainer, "
           "not a vision model")
    return Finding(WARNING, "model.architecture", "vision",
                   "the shipped trainer trains decoder language models (examples/slurm/train.py) and encoder "
                   "classifiers (examples/slurm/classifier.py), not vision networks: bring your own training script "
                   f"(timm, torchvision, ...): {run}; the plan's hours are the model's FLOPs at published MFU, and "
                   "JPEG decoding and augmentation can bound a small model's speed before the GPUs do: measure images "
                   "a second per vCPU before trusting them", "")
