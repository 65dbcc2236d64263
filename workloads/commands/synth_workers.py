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
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SHARD_ENV = "ML_ESTATE_SYNTH_SHARD"  # "K/N": this worker builds teams K, K+N, ... (and the shared stacks when K is 0)
WORKERS_ENV = "ML_ESTATE_SYNTH_WORKERS"  # processes for a teams file (default: see workers_for); 1 turns it off
# A worker's own start (Python's CDK imports, jsii's node loading aws-cdk-lib, CloudFormation Validate's engine)
# is about 3 CPU s, five teams' work: fewer teams than this a worker do not repay it.
TEAMS_PER_WORKER = 6
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
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, teams // TEAMS_PER_WORKER))


def raw_context(cdk_json_context: Mapping[str, Any]) -> dict[str, Any] | None:
    """The app's context as cdk.App reads it: the CDK CLI's (CDK_CONTEXT_JSON), else cdk.json's (`python app.py`).
    None where the CLI passed it in a file (a context too large for the environment): one process then."""
    if "CDK_CONTEXT_JSON" in os.environ:
        return json.loads(os.environ["CDK_CONTEXT_JSON"])
    if "CONTEXT_OVERFLOW_LOCATION_ENV" in os.environ:
        return None
    return dict(cdk_json_context)


def run_workers(*, app: Path, context: Mapping[str, Any], outdir: Path, workers: int, env: Mapping[str, str],
                order: Sequence[str]) -> int:
    """`workers` processes of `app` (each `python app.py` with SHARD_ENV), each into outdir/.shard-K, then their
    assemblies merged into `outdir`. `order`: the root's children as one process makes them (the tree's order).
    Returns the exit status: the first failed worker's (its messages are on stderr already), else 0."""
    shards = [outdir / f".shard-{k}" for k in range(workers)]
    outdir.mkdir(parents=True, exist_ok=True)
    for folder in outdir.glob(".shard-*"):  # left by an interrupted run
        shutil.rmtree(folder)
    procs = [subprocess.Popen([sys.executable, str(app)], cwd=app.parent, env={
        **env, SHARD_ENV: f"{k}/{workers}", "CDK_OUTDIR": str(folder), "CDK_CONTEXT_JSON": json.dumps(context)})
        for k, folder in enumerate(shards)]
    codes = [p.wait() for p in procs]
    failed = next((c for c in codes if c != 0), 0)
    if not failed:
        merge(shards, outdir, order=order)
    for folder in shards:
        shutil.rmtree(folder, ignore_errors=True)
    return failed if failed >= 0 else 128 - failed  # a worker killed by a signal: the shell's number for it


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
    _write(outdir / "manifest.json", {**manifests[0], "artifacts": {k: artifacts[k] for k in teams_first}})
    children = {k: v for t in trees for k, v in t["tree"].get("children", {}).items()}
    ordered = dict(sorted(children.items(), key=lambda kv: rank.get(kv[0], len(rank))))
    _write(outdir / "tree.json", {**trees[0], "tree": {**trees[0]["tree"], "children": ordered}})
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


def _write(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2))
