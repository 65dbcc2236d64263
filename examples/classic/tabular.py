"""What the classic-ML examples share: the `train` channel's CSV files as features and labels (label in the first
column, no header: SageMaker's built-in algorithms' CSV convention), and the channel and model folders SageMaker
gives a script-mode job."""

from __future__ import annotations

import os
from pathlib import Path

TRAIN = Path(os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))  # the dataset bucket's datasets/
MODEL_DIR = Path(os.environ.get("SM_MODEL_DIR", "/opt/ml/model"))  # SageMaker packs it into model.tar.gz


def load(directory: Path):
    """Every *.csv under `directory`, stacked: (features, labels)."""
    import numpy as np

    files = sorted(p for p in directory.rglob("*.csv") if p.is_file())
    if not files:
        raise SystemExit(f"no CSV files under {directory}: put them under the bucket's datasets/ prefix")
    rows = np.vstack([np.loadtxt(f, delimiter=",", ndmin=2) for f in files])
    return rows[:, 1:], rows[:, 0]
