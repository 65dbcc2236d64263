"""scikit-learn in the SageMaker scikit-learn 1.9-0 container (scikit-learn 1.9.0, Python 3.12): `python -m workloads
submit NAME` runs it for a scikit-learn workload, as the sagemaker SDK's ModelTrainer runs a script in any image
(its driver needs python3 and pip on PATH, which the image's /opt/venv/bin gives: aws/deep-learning-containers
docker/sklearn/1.9-0/Dockerfile). It reads every CSV file of the `train` channel (the dataset bucket's datasets/
prefix; label in the first column, no header), fits a histogram gradient-boosting model, and saves it with joblib
in SM_MODEL_DIR beside code/inference.py (sklearn_inference.py: its model_fn loads it, its input_fn reads the rows).
SageMaker packs that folder into model.tar.gz, as the serving contract reads it (the scikit-learn container's script
mode: SAGEMAKER_PROGRAM inference.py in SAGEMAKER_SUBMIT_DIRECTORY /opt/ml/model/code). The endpoint runs the same
1.9-0 image: a joblib model loads in the scikit-learn that saved it.

    python train.py [--max-iter 100] [--learning-rate 0.1] [--task regression|classification]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from sklearn_inference import MODEL_FILE
from tabular import MODEL_DIR, TRAIN, load  # beside this script (the job uploads the folder)

HERE = Path(__file__).resolve().parent


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-iter", type=int, default=100)
    p.add_argument("--learning-rate", type=float, default=0.1)
    p.add_argument("--task", choices=("regression", "classification"), default="regression")
    p.add_argument("--train", type=Path, default=TRAIN)
    p.add_argument("--model-dir", type=Path, default=MODEL_DIR)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    import joblib
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    args = parse(argv)
    features, labels = load(args.train)
    kind = HistGradientBoostingClassifier if args.task == "classification" else HistGradientBoostingRegressor
    model = kind(max_iter=args.max_iter, learning_rate=args.learning_rate).fit(features, labels)
    args.model_dir.mkdir(parents=True, exist_ok=True)
    joblib.dump(model, args.model_dir / MODEL_FILE)
    (args.model_dir / "code").mkdir(exist_ok=True)
    shutil.copy(HERE / "sklearn_inference.py", args.model_dir / "code" / "inference.py")
    print(f"fitted {kind.__name__} on {features.shape[0]:,} rows of {features.shape[1]} features; saved "
          f"{args.model_dir / MODEL_FILE}", flush=True)


if __name__ == "__main__":
    main()
