"""Wall time of `python -m workloads plan` (a benchmark to run by hand, not a test: this machine is shared, and a
wall-time assertion in a test fails under load).

    python -m tools.bench_plan [--runs 21] [WORKLOAD ...]

Each run is a fresh process, as a user's is; the table and `--json` are timed in turn, and the medians printed.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .machine import describe

ROOT = Path(__file__).resolve().parent.parent


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def seconds(args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run (CPU moves less with the load of a shared machine)."""
    start, cpu = time.perf_counter(), _cpu()
    subprocess.run([sys.executable, "-m", "workloads", "plan", *args], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start, _cpu() - cpu


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
        (tw, tc), (jw, jc) = ([statistics.median(r[k] for r in runs) for k in (0, 1)] for runs in (table, as_json))
        print(f"{workload}: table median {tw:.3f} s (min {min(r[0] for r in table):.3f}, CPU {tc:.3f}), "
              f"--json median {jw:.3f} s (min {min(r[0] for r in as_json):.3f}, CPU {jc:.3f}) "
              f"(load average {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
