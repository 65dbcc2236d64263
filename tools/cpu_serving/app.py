"""The per-request path of SageMaker's built-in XGBoost endpoint, rebuilt for a load test.

What aws/sagemaker-xgboost-container (cb8df91, 2026-06-25) does for a `text/csv` request in
algorithm mode, written here from its description, not copied:
- `algorithm_mode/serve.py`: gunicorn with gevent workers, one per vCPU, keep-alive 60 s; Flask
  routes `/ping` and `/invocations`; predictions encoded as CSV;
- `encoder.csv_to_dmatrix`: a csv.Sniffer on the first line picks the delimiter, each line is
  split, empty fields become NaN, the rows go through a NumPy float array into a DMatrix;
- `algorithm_mode/serve_utils.py`: the booster is loaded once per worker with nthread=1 and
  predicts with validate_features=False.
Logging, content-type negotiation and the selectable-output mode are left out (a few
microseconds; the test measures the path every request takes).
"""

from __future__ import annotations

import csv
import os

import flask
import numpy as np
import xgboost as xgb

app = flask.Flask(__name__)
_booster: xgb.Booster | None = None


def booster() -> xgb.Booster:
    global _booster
    if _booster is None:
        _booster = xgb.Booster()
        _booster.load_model(os.environ["MODEL_PATH"])
        _booster.set_param("nthread", 1)
    return _booster


def csv_to_dmatrix(text: str) -> xgb.DMatrix:
    sniffed = csv.Sniffer().sniff(text.split("\n")[0][:512]).delimiter
    delimiter = "," if sniffed.isalnum() else sniffed
    rows = [["nan" if field == "" else field for field in line.split(delimiter)] for line in text.split("\n")]
    return xgb.DMatrix(np.array(rows).astype(float))


@app.route("/ping", methods=["GET"])
def ping() -> flask.Response:
    booster()
    return flask.Response(status=200)


@app.route("/invocations", methods=["POST"])
def invocations() -> flask.Response:
    payload = flask.request.data
    if not payload:
        return flask.Response(status=204)
    predictions = booster().predict(csv_to_dmatrix(payload.strip().decode("utf-8")), validate_features=False)
    body = "\n".join(str(p) for p in predictions.tolist())
    return flask.Response(response=body, status=200, mimetype="text/csv")
