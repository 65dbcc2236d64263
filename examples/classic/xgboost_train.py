"""XGBoost in the SageMaker XGBoost 3.2-0 container (XGBoost 3.2.0, Python 3.12): `python -m workloads submit NAME`
runs it for an xgboost workload, as the sagemaker SDK's ModelTrainer runs a script in any image (its driver needs
python3 and pip on PATH, which the image's /opt/venv/bin gives: aws/deep-learning-containers docker/xgboost/
Dockerfile). It reads every CSV file of the `train` channel (the dataset bucket's datasets/ prefix; label in the
first column, no header: the built-in algorithm's CSV convention), trains a booster, and saves it as `xgboost-model`
in SM_MODEL_DIR, which SageMaker packs into model.tar.gz. XGBoost 3 writes a name without .json/.ubj as UBJSON; the
3.2-0 endpoint loads every top-level file of the archive with Booster.load_model (aws/sagemaker-xgboost-container
cb8df91, algorithm_mode/serve_utils.py get_loaded_booster; its own test model `xgboost-model` is UBJSON from 3.2.0),
so the folder holds the booster only.

    python train.py [--num-round 100] [--max-depth 6] [--eta 0.3] [--objective reg:squarederror]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from tabular import MODEL_DIR, TRAIN, load  # beside this script (the job uploads the folder)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # SageMaker passes hyperparameters as --name value; these are XGBoost's own defaults but for num_round.
    p.add_argument("--num-round", type=int, default=100)
    p.add_argument("--max-depth", type=int, default=6)
    p.add_argument("--eta", type=float, default=0.3)
    p.add_argument("--objective", default="reg:squarederror")
    p.add_argument("--train", type=Path, default=TRAIN)
    p.add_argument("--model-dir", type=Path, default=MODEL_DIR)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    import xgboost as xgb

    args = parse(argv)
    features, labels = load(args.train)
    train = xgb.DMatrix(features, label=labels, nthread=args.threads)
    params = {"max_depth": args.max_depth, "eta": args.eta, "objective": args.objective, "tree_method": "hist",
              "nthread": args.threads}
    booster = xgb.train(params, train, num_boost_round=args.num_round, evals=[(train, "train")], verbose_eval=10)
    args.model_dir.mkdir(parents=True, exist_ok=True)
    booster.save_model(str(args.model_dir / "xgboost-model"))
    print(f"trained on {features.shape[0]:,} rows of {features.shape[1]} features; saved "
          f"{args.model_dir / 'xgboost-model'}", flush=True)


if __name__ == "__main__":
    main()
