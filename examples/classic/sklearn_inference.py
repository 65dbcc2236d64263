"""The scikit-learn serving container's entry (SAGEMAKER_PROGRAM inference.py, in model.tar.gz's code/), for
sagemaker-scikit-learn 1.9-0 (scikit-learn 1.9.0, Python 3.12): the fitted model from the archive, and requests read
as 2-D rows. Responses use the container's default output_fn (text/csv: one prediction a line).

A single-model endpoint serves through the container's serving.py (SAGEMAKER_SERVING_MODULE
sagemaker_sklearn_container.serving:main), whose default_input_fn is sagemaker-containers' encoders.decode: it reads
CSV as `np.array(rows).squeeze()`, so the one-row request `invoke` sends by default becomes a 1-D array, which
scikit-learn's predict refuses ("Expected 2D array"). Only the multi-model handler (handler_service.py) reshapes it.
Sources: aws/sagemaker-scikit-learn-container eae7b6b, src/sagemaker_sklearn_container/serving.py default_input_fn;
aws/sagemaker-containers 913aa80, src/sagemaker_containers/_encoders.py csv_to_numpy (the copy read here; the image
pins sagemaker-containers 2.8.6.post2).
"""

from pathlib import Path

MODEL_FILE = "model.joblib"  # what sklearn_train.py saves
READS = ("text/csv", "application/json", "application/x-npy")  # workloads/planning/contracts.py REQUESTS["sklearn"].reads


def model_fn(model_dir: str):
    import joblib

    return joblib.load(Path(model_dir) / MODEL_FILE)


def input_fn(body, content_type: str):
    """Rows as the model predicts them: text/csv one row a line, JSON one row or a list of rows, or an .npy array
    (never unpickled); one row is always (1, features)."""
    import io
    import json

    import numpy as np

    kind = content_type.split(";")[0].strip().lower()
    if kind not in READS:
        raise ValueError(f"Content-Type {content_type!r} is not read here; send one of {', '.join(READS)}")
    if kind == "application/x-npy":
        rows = np.load(io.BytesIO(body), allow_pickle=False)
    else:
        text = body.decode("utf-8") if isinstance(body, (bytes, bytearray)) else body
        rows = (np.loadtxt(io.StringIO(text), delimiter=",", ndmin=2, dtype=np.float32) if kind == "text/csv"
                else np.asarray(json.loads(text), dtype=np.float32))
    return rows.reshape(1, -1) if rows.ndim == 1 else rows
