"""Wall time of `python -m workloads plan` (a benchmark to run by hand, not a test: this machine is shared, and a
wall-time assertion in a test fails under load).

    python -m tools.bench_plan [--runs 21] [WORKLOAD ...]

Each run is a fresh process, as a user's is; the table and `--json` are timed in turn, and the medians printed.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .machine import describe

ROOT = Path(__file__).resolve().parent.parent


def seconds(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "workloads", "plan", *args], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_plan")
    parser.add_argument("workloads", nargs="*", default=["huge"])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    print(f"python -m workloads plan, {args.runs} fresh processes each, interleaved; {describe()}")
    for workload in args.workloads:
        table, as_json = [], []
        for _ in range(args.runs):
            table.append(seconds([workload]))
            as_json.append(seconds([workload, "--json"]))
        print(f"{workload}: table median {statistics.median(table):.3f} s (min {min(table):.3f}), "
              f"--json median {statistics.median(as_json):.3f} s (min {min(as_json):.3f})")


if __name__ == "__main__":
    main()
