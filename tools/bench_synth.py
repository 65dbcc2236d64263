"""`cdk synth --all -c workload=huge` against an empty Python CDK app (a benchmark to run by hand, not a test).

    python -m tools.bench_synth [PAIRS] [WORKLOAD]      # default: 5 pairs, huge

Both go through the project's CDK CLI (node_modules/.bin/cdk synth --all) and Python (.venv), with the same
environment (`make`'s PATH and telemetry setting), cdk.json's context and a fresh output folder per run. The empty
app is what `cdk init app --language python` makes: an App with one stack and nothing in it. Runs alternate, empty
then estate, so a busy machine slows both alike; the ratio is of the two medians.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CDK = ROOT / "node_modules" / ".bin" / "cdk"
EMPTY_APP = """\
import aws_cdk as cdk

app = cdk.App()
cdk.Stack(app, "EmptyStack")
app.synth()
"""


def environment() -> dict[str, str]:
    """As the Makefile sets it: the venv's python and node first, no CLI telemetry."""
    path = os.pathsep.join([str(ROOT / ".venv" / "bin"), str(ROOT / "node_modules" / ".bin"), os.environ["PATH"]])
    return {**os.environ, "PATH": path, "CDK_DISABLE_CLI_TELEMETRY": "true"}


def synth_seconds(extra: list[str], outdir: Path) -> float:
    start = time.perf_counter()
    subprocess.run([str(CDK), "synth", "--all", "-o", str(outdir), *extra], cwd=ROOT, env=environment(),
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - start


def main(pairs: int, workload: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        app = folder / "empty_app.py"
        app.write_text(EMPTY_APP)
        empty_cmd = ["--app", f"{ROOT / '.venv' / 'bin' / 'python'} {app}"]
        estate_cmd = ["-c", f"workload={workload}"]
        empty, estate = [], []
        print(f"{'pair':>4} {'empty s':>8} {workload + ' s':>8} {'ratio':>6}")
        for i in range(pairs):
            empty.append(synth_seconds(empty_cmd, folder / f"empty-{i}"))
            estate.append(synth_seconds(estate_cmd, folder / f"estate-{i}"))
            print(f"{i + 1:>4} {empty[-1]:>8.2f} {estate[-1]:>8.2f} {estate[-1] / empty[-1]:>6.2f}", flush=True)
        e, w = statistics.median(empty), statistics.median(estate)
        print(f"median empty {e:.2f} s, {workload} {w:.2f} s, ratio {w / e:.2f}x "
              f"(load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5, sys.argv[2] if len(sys.argv) > 2 else "huge")
