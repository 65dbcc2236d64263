"""The scikit-learn serving container's entry (SAGEMAKER_PROGRAM inference.py, in model.tar.gz's code/): the fitted
model from the archive. Requests and responses use the container's default text/csv functions
(aws/sagemaker-scikit-learn-container handler_service.py)."""

from pathlib import Path

MODEL_FILE = "model.joblib"  # what sklearn_train.py saves


def model_fn(model_dir: str):
    import joblib

    return joblib.load(Path(model_dir) / MODEL_FILE)
