"""A teams file's synthesis on several cores: each team's stage is independent of every other (its own stacks, keys
and names), so worker processes each build and check a share of the teams into a folder of their own, and this
merges their cloud assemblies into the one the CDK CLI reads. A team costs about 0.6 CPU s to build, check and
write, nearly all of it in one process at a time (Python and jsii's node answer each other in turn), so one process
uses one core however many the machine has (docs/performance.md, issue 43: 50 teams 46 s on 2 cores).

What comes out is what one process writes: the same templates and assets byte for byte, the manifest's artifacts,
the construct tree and the validation report merged (tests/test_synth_workers.py compares the two whole). Pure
Python: the parent plans, spawns and merges without importing the CDK.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SHARD_ENV = "ML_ESTATE_SYNTH_SHARD"  # "K/N": this worker builds teams K, K+N, ... (and the shared stacks when K is 0)
WORKERS_ENV = "ML_ESTATE_SYNTH_WORKERS"  # processes for a teams file (default: see workers_for); 1 turns it off
# A worker's own start (Python's CDK imports, jsii's node loading aws-cdk-lib, CloudFormation Validate's engine)
# is about 3 CPU s, five teams' work: fewer teams than this a worker do not repay it.
TEAMS_PER_WORKER = 6
# By default at most 4 workers: each holds a Python process and jsii's node, 760 MB at the peak for 25 teams.
MAX_WORKERS = 4
_MERGED = ("manifest.json", "tree.json", "validation-report.json")


def shard() -> tuple[int, int]:
    """(K, N) of this worker, (0, 1) in a process that builds everything."""
    raw = os.environ.get(SHARD_ENV)
    if not raw:
        return 0, 1
    index, count = (int(x) for x in raw.split("/"))
    return index, count


def workers_for(teams: int) -> int:
    """One worker per core this process may use, each with at least TEAMS_PER_WORKER teams; WORKERS_ENV decides
    where set (a whole number >= 1)."""
    given = os.environ.get(WORKERS_ENV, "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise ValueError(f"{WORKERS_ENV} = {given!r}: allowed: a whole number >= 1")
        return min(int(given), max(teams, 1))
    return max(1, min(cores(), MAX_WORKERS, teams // TEAMS_PER_WORKER))


def cores() -> int:
    """The cores this process may use: its CPU affinity, within a cgroup's CPU quota where one is set (a container
    limited to 2 CPUs on a 32-core host gets 2), else the machine's count (macOS)."""
    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:  # cgroup v2: "QUOTA PERIOD", or "max PERIOD" for none
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            count = min(count, max(1, int(int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return count


def raw_context(cdk_json_context: Mapping[str, Any]) -> dict[str, Any] | None:
    """The app's context as cdk.App reads it: the CDK CLI's (CDK_CONTEXT_JSON), else cdk.json's (`python app.py`).
    None where the CLI put part of it in a file (a context too large for the environment): one process then,
    which reads both as cdk.App does."""
    if "CONTEXT_OVERFLOW_LOCATION_ENV" in os.environ:
        return None
    if "CDK_CONTEXT_JSON" in os.environ:
        return json.loads(os.environ["CDK_CONTEXT_JSON"])
    return dict(cdk_json_context)


def run_workers(*, app: Path, context: Mapping[str, Any], outdir: Path, workers: int, env: Mapping[str, str],
                order: Sequence[str]) -> int:
    """`workers` processes of `app` (each `python app.py` with SHARD_ENV), each into a folder of this run's under
    `outdir`, then their assemblies merged into `outdir`. `order`: the root's children as one process makes them
    (the tree's order). Returns the exit status: the first failed worker's, whose messages are on stderr; then the
    others are stopped, and the failed workers' validation reports merged into `outdir` (the CDK's message names
    the worker's folder, which goes). Interrupted or terminated, this stops the workers and their folders go too."""
    outdir.mkdir(parents=True, exist_ok=True)
    for folder in outdir.glob(".shard-*"):  # left by a run that was killed outright
        shutil.rmtree(folder, ignore_errors=True)
    run = Path(tempfile.mkdtemp(dir=outdir, prefix=".shard-"))
    shards = [run / str(k) for k in range(workers)]
    procs: list[subprocess.Popen] = []

    def stop(signum: int, _frame) -> None:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait()
        shutil.rmtree(run, ignore_errors=True)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)  # then die of it, as the caller expects

    before = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)
              if signal.getsignal(s) is not signal.SIG_IGN}
    try:
        procs += [subprocess.Popen([sys.executable, str(app)], env={
            **env, SHARD_ENV: f"{k}/{workers}", "CDK_OUTDIR": str(folder), "CDK_CONTEXT_JSON": json.dumps(context)})
            for k, folder in enumerate(shards)]
        failed = _first_failure(procs)
        if failed is None:
            merge(shards, outdir, order=order)
            return 0
        k, code = failed
        reports = [json.loads(f.read_text()) for f in (d / "validation-report.json" for d in shards) if f.exists()]
        if reports:
            _write(outdir / "validation-report.json", merged_report(reports))
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        print(f"synth: worker {k}/{workers} failed ({how}); the other workers were stopped"
              + (f"; the validation report: {outdir / 'validation-report.json'}" if reports else ""), file=sys.stderr)
        return code if code >= 0 else 128 - code  # a worker killed by a signal: the shell's number for it
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
        shutil.rmtree(run, ignore_errors=True)


def _first_failure(procs: Sequence[subprocess.Popen]) -> tuple[int, int] | None:
    """Wait for every worker; at the first that fails, stop the others: (its index, its status). None: all did."""
    running = dict(enumerate(procs))
    while running:
        for k, proc in list(running.items()):
            code = proc.poll()
            if code is None:
                continue
            del running[k]
            if code != 0:
                for other in running.values():
                    other.terminate()
                for other in running.values():
                    other.wait()
                return k, code
        time.sleep(0.1)
    return None


def merge(shards: Sequence[Path], outdir: Path, *, order: Sequence[str]) -> None:
    """The workers' assemblies as one: every other file moved as it is (assets are named by their content, so two
    workers' copies of one are the same bytes), the manifest's artifacts, the tree's root children and each
    validation plugin's findings joined."""
    loaded: dict[str, list[dict]] = {name: [] for name in _MERGED}
    for folder in shards:
        for entry in sorted(folder.iterdir()):
            if entry.name in _MERGED:
                loaded[entry.name].append(json.loads(entry.read_text()))
                continue
            if entry.name.startswith("trees-") or entry.name == "policy-validation-report.json":
                # A tree split over files (past 500,000 nodes) or the legacy report: each worker numbers or writes
                # its own, which moving would overwrite. None is written today; merge them before that changes.
                raise RuntimeError(f"synth workers cannot merge {entry.name}: set {WORKERS_ENV}=1")
            target = outdir / entry.name
            if target.is_dir() and entry.is_dir() and entry.name.startswith("asset."):
                continue  # the same content: its name is its hash
            if target.is_dir():
                shutil.rmtree(target)
            entry.replace(target)
    manifests, trees, reports = (loaded[name] for name in _MERGED)
    rank = {name: i for i, name in enumerate(order)}
    # The teams' assemblies first and in the teams' order, as one process lists them (`cdk ls` shows that order).
    artifacts = {k: v for m in manifests for k, v in m.get("artifacts", {}).items()}
    teams_first = sorted(artifacts, key=lambda k: rank.get(k.removeprefix("assembly-"), len(rank))
                         if k.startswith("assembly-") else len(rank))
    missing = list({json.dumps(m, sort_keys=True): m for f in manifests for m in f.get("missing", [])}.values())
    _write(outdir / "manifest.json", {**manifests[0], "artifacts": {k: artifacts[k] for k in teams_first},
                                      **({"missing": missing} if missing else {})})
    children = {k: v for t in trees for k, v in t["tree"].get("children", {}).items()}
    ordered = dict(sorted(children.items(), key=lambda kv: rank.get(kv[0], len(rank))))
    _write(outdir / "tree.json", {**trees[0], "tree": {**trees[0]["tree"], "children": ordered}}, indent=None)
    if reports:
        _write(outdir / "validation-report.json", merged_report(reports))


def merged_report(reports: Sequence[dict]) -> dict:
    """Each plugin's report once: its violations and acknowledged ones from every worker, failed if any failed."""
    plugins: dict[str, dict] = {}
    for report in reports:
        for plugin in report.get("pluginReports", []):
            seen = plugins.get(plugin["pluginName"])
            if seen is None:
                plugins[plugin["pluginName"]] = {**plugin}
                continue
            for key in ("violations", "suppressedViolations"):
                if key in plugin:
                    seen[key] = [*seen.get(key, []), *plugin[key]]
            if plugin.get("conclusion") == "failure":
                seen["conclusion"] = "failure"
    return {**reports[0], "pluginReports": list(plugins.values())}


def _write(path: Path, data: dict, indent: int | None = 2) -> None:
    path.write_text(json.dumps(data, indent=indent))
