"""Synthesis wall time for 1, 10 and 50 teams (a benchmark to run by hand, not a test).

    python -m tools.bench_teams [1 10 50]

Each team is a copy of the example `vision` team with its own name; every run synthesizes
the whole app in a fresh process, as `cdk synth -c teams=...` does, cdk-nag included.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def teams_file(n: int, folder: Path) -> Path:
    template = next(t for t in yaml.safe_load((ROOT / "config" / "teams.yaml").read_text())["teams"]
                    if t["name"] == "vision")
    teams = [{**template, "name": f"team{i:03d}"} for i in range(n)]
    path = folder / f"teams-{n}.yaml"
    path.write_text(yaml.safe_dump({"teams": teams}))
    return path


def stack_count(outdir: Path) -> int:
    """Stacks in the synthesized assembly (each team's stage is a nested assembly)."""
    return sum(1 for m in outdir.glob("assembly-*/manifest.json")
               for a in json.loads(m.read_text())["artifacts"].values() if a["type"] == "aws:cloudformation:stack")


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def synth_seconds(path: Path, outdir: Path) -> tuple[float, float]:
    """Wall and CPU seconds (the app and jsii's node together: on a shared machine CPU moves less with the load)."""
    context = {**json.loads((ROOT / "cdk.json").read_text())["context"], "teams": str(path)}
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps(context), "CDK_OUTDIR": str(outdir),
           "JSII_NODE": str(ROOT / ".venv" / "bin" / "node")}
    start, cpu = time.perf_counter(), _cpu()
    subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, check=True, capture_output=True)
    return time.perf_counter() - start, _cpu() - cpu


def main(counts: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print(f"{'teams':>6} {'stacks':>7} {'synth s':>8} {'s/team':>7} {'CPU s':>7}")
        for n in counts:
            outdir = folder / f"out-{n}"
            seconds, cpu = synth_seconds(teams_file(n, folder), outdir)
            print(f"{n:>6} {stack_count(outdir):>7} {seconds:>8.1f} {seconds / n:>7.2f} {cpu:>7.1f}", flush=True)
        print(f"(load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1, 10, 50])
