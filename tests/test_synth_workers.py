"""A teams file's synthesis on several cores (workloads/commands/synth_workers.py): the workers' merged assembly is
what one process writes, a failed worker fails the synthesis, and the number of workers follows the cores and teams
or the user's variable. The speed is measured by tools/bench_teams (docs/performance.md), never asserted here."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from workloads.commands import synth_workers as sw

from .conftest import ROOT, TEAMS_FILE, cdk_json_context

JSII_FOLDER = re.compile(rb"/tmp/jsii-kernel-[A-Za-z0-9]+/")  # jsii's temporary folder, in stack traces


PATHS = {"PATH": f"{ROOT / '.venv' / 'bin'}:{ROOT / 'node_modules' / '.bin'}:{os.environ['PATH']}"}  # Node 24


def _synth(out: Path, workers: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps({**cdk_json_context(), "teams": str(TEAMS_FILE)}),
           "CDK_OUTDIR": str(out), sw.WORKERS_ENV: str(workers), **PATHS}
    return subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True)


def _report(path: Path) -> dict:
    """The validation report without stack traces (jsii's folder), each plugin's findings in a fixed order."""
    def strip(o):
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items() if k != "stackTraces"}
        return [strip(x) for x in o] if isinstance(o, list) else o
    report = strip(json.loads(path.read_text()))
    for plugin in report["pluginReports"]:
        for key in ("violations", "suppressedViolations"):
            plugin[key] = sorted(plugin.get(key, []), key=lambda v: json.dumps(v, sort_keys=True))
    return report


@pytest.mark.e2e
def test_a_teams_file_built_by_workers_is_what_one_process_writes(tmp_path):
    """Every file of the two assemblies: templates, assets and metadata byte for byte (but for jsii's temporary
    folder in stack traces, which differs between any two runs), the manifest and the tree as data, the validation
    report's findings as a set."""
    one, two = _synth(tmp_path / "one", 1), _synth(tmp_path / "two", 2)
    assert one.returncode == 0 and two.returncode == 0, (one.stderr[-2000:], two.stderr[-2000:])
    assert "building the stacks in 2 processes" in two.stderr and "in 2 processes" not in one.stderr
    # The CDK CLI reads both alike: the same stacks in the same order, a team's by its pattern.
    listed = [subprocess.run([str(ROOT / "node_modules" / ".bin" / "cdk"), "ls", "--app", str(tmp_path / name),
                              *pattern], cwd=tmp_path, env={**os.environ, **PATHS}, capture_output=True, text=True,
                             check=True).stdout
              for name in ("one", "two") for pattern in ([], ["vision/*"])]
    assert listed[0] == listed[2] and listed[1] == listed[3] and "vision/TrainStack" in listed[1]
    files = {p.relative_to(tmp_path / "one") for p in (tmp_path / "one").rglob("*") if p.is_file()}
    assert files == {p.relative_to(tmp_path / "two") for p in (tmp_path / "two").rglob("*") if p.is_file()}
    assert any(f.name.endswith(".template.json") for f in files) and not any(".shard-" in str(f) for f in files)
    for f in files:
        a, b = tmp_path / "one" / f, tmp_path / "two" / f
        if f.name in ("manifest.json", "tree.json"):
            assert json.loads(a.read_text()) == json.loads(b.read_text()), f
        elif f.name == "validation-report.json":
            assert _report(a) == _report(b)
        else:
            assert JSII_FOLDER.sub(b"", a.read_bytes()) == JSII_FOLDER.sub(b"", b.read_bytes()), f


def test_the_workers_follow_the_cores_and_the_teams_or_the_users_variable(monkeypatch):
    monkeypatch.delenv(sw.WORKERS_ENV, raising=False)
    monkeypatch.setattr(sw, "cores", lambda: 2)
    assert [sw.workers_for(n) for n in (1, 11, 12, 50)] == [1, 1, 2, 2]
    monkeypatch.setattr(sw, "cores", lambda: 16)  # at most MAX_WORKERS by default: each holds up to 760 MB
    assert sw.workers_for(50) == sw.MAX_WORKERS == 4 and sw.workers_for(18) == 3
    monkeypatch.setenv(sw.WORKERS_ENV, "3")
    assert sw.workers_for(50) == 3 and sw.workers_for(2) == 2
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(sw.WORKERS_ENV, bad)
        with pytest.raises(ValueError, match=sw.WORKERS_ENV):
            sw.workers_for(50)


def test_a_bad_workers_variable_is_refused_by_the_app_with_its_name(tmp_path):
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps({**cdk_json_context(), "teams": str(TEAMS_FILE)}),
           "CDK_OUTDIR": str(tmp_path / "out"), sw.WORKERS_ENV: "many"}
    done = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{sw.WORKERS_ENV} = 'many': allowed: a whole number >= 1" in done.stderr


def test_a_failed_worker_fails_the_synthesis_keeps_its_report_and_stops_the_others(tmp_path, capsys):
    """Worker 1 fails at once (as an unacknowledged cdk-nag finding fails it, after its messages) while worker 0
    would run a minute: its status is the synthesis's, worker 0 is stopped, its validation report is merged into
    the folder the CLI reads (the CDK's message names the worker's folder, which goes), nothing else is."""
    app = tmp_path / "app.py"
    app.write_text("import json, os, pathlib, sys, time\n"
                   f"k = os.environ[{sw.SHARD_ENV!r}].split('/')[0]\n"
                   "out = pathlib.Path(os.environ['CDK_OUTDIR']); out.mkdir(parents=True, exist_ok=True)\n"
                   "(out / 'manifest.json').write_text('{}')\n"
                   "if k == '0':\n    time.sleep(60)\n"
                   f"    pathlib.Path({str(tmp_path / 'finished')!r}).write_text('worker 0 ran its minute')\n"
                   "(out / 'validation-report.json').write_text(json.dumps({'pluginReports': [\n"
                   "    {'pluginName': 'AwsSolutions', 'conclusion': 'failure', 'violations': [{'ruleName': 'X'}]}]}))\n"
                   "sys.exit(3)\n")
    out = tmp_path / "out"
    assert sw.run_workers(app=app, context={}, outdir=out, workers=2, env=dict(os.environ), order=()) == 3
    assert not (tmp_path / "finished").exists()  # worker 0 was stopped, not waited for
    assert [p.name for p in out.iterdir()] == ["validation-report.json"]
    report = json.loads((out / "validation-report.json").read_text())
    assert report["pluginReports"][0]["conclusion"] == "failure"
    assert "worker 1/2 failed (exit status 3)" in capsys.readouterr().err


def test_merged_reports_keep_every_finding_and_fail_if_any_worker_failed():
    def report(conclusion, *rules):
        return {"version": "55.0.0", "title": "Validation Report", "pluginReports": [
            {"pluginName": "AwsSolutions", "conclusion": conclusion,
             "violations": [{"ruleName": r} for r in rules], "suppressedViolations": []}]}
    merged = sw.merged_report([report("success"), report("failure", "AwsSolutions-IAM5"), report("success")])
    assert merged["pluginReports"] == [{"pluginName": "AwsSolutions", "conclusion": "failure",
                                        "violations": [{"ruleName": "AwsSolutions-IAM5"}],
                                        "suppressedViolations": []}]
