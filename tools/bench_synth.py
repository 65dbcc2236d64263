"""`cdk synth --all -c workload=huge` against an empty Python CDK app (a benchmark to run by hand, not a test).

    python -m tools.bench_synth [PAIRS] [WORKLOAD]      # default: 5 pairs, huge

Both go through the project's CDK CLI (node_modules/.bin/cdk synth --all) and Python (.venv), with the same
environment (`make`'s PATH and telemetry setting), cdk.json's context and a fresh output folder per run. The empty
app is what `cdk init app --language python` makes: an App with one stack and nothing in it. Runs alternate, empty
then estate, so a busy machine slows both alike; the ratio is of the two medians. CPU seconds (the CLI, the app and
jsii's node together) are printed beside the wall time: on a shared machine they move less with the load.
"""

from __future__ import annotations

import os
import resource
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


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def synth_seconds(extra: list[str], outdir: Path) -> tuple[float, float]:
    """Wall and CPU seconds (the CLI, the app and jsii's node together) of one `cdk synth --all`."""
    start, cpu = time.perf_counter(), _cpu()
    subprocess.run([str(CDK), "synth", "--all", "-o", str(outdir), *extra], cwd=ROOT, env=environment(),
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - start, _cpu() - cpu


def main(pairs: int, workload: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        app = folder / "empty_app.py"
        app.write_text(EMPTY_APP)
        empty_cmd = ["--app", f"{ROOT / '.venv' / 'bin' / 'python'} {app}"]
        estate_cmd = ["-c", f"workload={workload}"]
        empty, estate = [], []
        print(f"{'pair':>4} {'empty s':>8} {workload + ' s':>8} {'ratio':>6}   (CPU s: empty, {workload}, ratio)")
        for i in range(pairs):
            empty.append(synth_seconds(empty_cmd, folder / f"empty-{i}"))
            estate.append(synth_seconds(estate_cmd, folder / f"estate-{i}"))
            (e, ec), (w, wc) = empty[-1], estate[-1]
            print(f"{i + 1:>4} {e:>8.2f} {w:>8.2f} {w / e:>6.2f}   ({ec:.2f}, {wc:.2f}, {wc / ec:.2f})", flush=True)
        (e, ec), (w, wc) = ([statistics.median(run[k] for run in runs) for k in (0, 1)] for runs in (empty, estate))
        print(f"median empty {e:.2f} s, {workload} {w:.2f} s, ratio {w / e:.2f}x; "
              f"CPU empty {ec:.2f} s, {workload} {wc:.2f} s, ratio {wc / ec:.2f}x "
              f"(load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5, sys.argv[2] if len(sys.argv) > 2 else "huge")
