"""Requests per second one vCPU serves through SageMaker's XGBoost serving path (a benchmark to
run by hand, not a test; its results are recorded in workloads/catalog/serving.yaml).

    python -m tools.bench_cpu_serving [--seconds 20] [--trials 3]

No published measurement of a SageMaker XGBoost or scikit-learn endpoint's throughput was found
(issue 13), so this measures one. tools/cpu_serving/app.py is the container's request path;
it runs under gunicorn with one gevent worker pinned to CPU 0, as the container runs one worker
per vCPU, and this process drives it from CPU 1 with keep-alive connections, one CSV row per
request. Concurrency 1 gives the time of one request; concurrency 4 keeps the worker busy and
gives its throughput. Its packages are pinned in tools/cpu_serving/requirements.txt and live in
their own virtualenv (.bench/cpu-serving), so the project's does not carry XGBoost.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from .machine import describe

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "tools" / "cpu_serving"
VENV = ROOT / ".bench" / "cpu-serving"
SERVER_CPU, CLIENT_CPU = 0, 1
# (name, boosting rounds, max depth, features). `typical` is XGBoost's default depth at the 100
# rounds the training estimate assumes (utilisation.yaml classic_rounds); the other two bound it.
MODELS = (("small", 10, 3, 10), ("typical", 100, 6, 30), ("large", 1000, 8, 200))


def bench_python() -> Path:
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "-r", str(HERE / "requirements.txt")], check=True)
    return python


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(python: Path, model: Path, port: int) -> subprocess.Popen:
    server = subprocess.Popen(
        ["taskset", "-c", str(SERVER_CPU), str(python), "-m", "gunicorn", "--workers", "1", "--worker-class", "gevent",
         "--keep-alive", "60", "--bind", f"127.0.0.1:{port}", "--log-level", "warning", "app:app"],
        cwd=HERE, env={**os.environ, "MODEL_PATH": str(model)}, stderr=subprocess.DEVNULL)  # gevent's exit noise
    for _ in range(100):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/ping")
            if conn.getresponse().status == 200:
                return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("the benchmark server did not answer /ping")


def load(port: int, row: bytes, concurrency: int, seconds: float, warmup: float) -> dict:
    """Closed-loop load: each connection sends its next request when the last one is answered."""
    latencies: list[list[float]] = [[] for _ in range(concurrency)]
    start = time.perf_counter()
    measure_from, stop_at = start + warmup, start + warmup + seconds

    def connection(out: list[float]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        while (now := time.perf_counter()) < stop_at:
            conn.request("POST", "/invocations", body=row, headers={"Content-Type": "text/csv"})
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"status {response.status}")
            if now >= measure_from:
                out.append(time.perf_counter() - now)

    threads = [threading.Thread(target=connection, args=(out,)) for out in latencies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done = sorted(x for out in latencies for x in out)
    return {"requests_per_second": round(len(done) / seconds, 1),
            "p50_ms": round(1000 * done[len(done) // 2], 3), "p99_ms": round(1000 * done[int(len(done) * 0.99)], 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    if (os.cpu_count() or 1) < 2:
        print("needs two CPUs: one for the server, one for the load", file=sys.stderr)
        return 2
    python = bench_python()
    os.sched_setaffinity(0, {CLIENT_CPU})
    models = ROOT / ".bench" / "models"
    models.mkdir(parents=True, exist_ok=True)
    results = []
    for name, rounds, depth, features in MODELS:
        model = models / f"{name}.ubj"
        subprocess.run([str(python), str(HERE / "train.py"), str(model), str(rounds), str(depth), str(features)],
                       check=True)
        row = ",".join(f"{0.1 * (i % 7) - 0.3:.4f}" for i in range(features)).encode()
        port = free_port()
        server = start_server(python, model, port)
        try:
            for concurrency in (1, 4):
                for trial in range(args.trials):
                    r = load(port, row, concurrency, args.seconds, warmup=2)
                    results.append({"model": name, "rounds": rounds, "depth": depth, "features": features,
                                    "concurrency": concurrency, "trial": trial, **r})
                    print(json.dumps(results[-1]), flush=True)
        finally:
            server.terminate()
            server.wait()
    summary = {}
    for name, *_ in MODELS:
        mine = [r for r in results if r["model"] == name]
        summary[name] = {
            "requests_per_second_per_vcpu": statistics.median(r["requests_per_second"] for r in mine
                                                              if r["concurrency"] == 4),
            "one_request_ms": statistics.median(r["p50_ms"] for r in mine if r["concurrency"] == 1)}
    print(json.dumps({"machine": describe(), "date": time.strftime("%Y-%m-%d"), "summary": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
