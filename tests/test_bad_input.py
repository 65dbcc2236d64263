"""Bad input never reaches CloudFormation: one line on stderr naming field, value and what is
allowed; exit status 2; no traceback; for `python -m workloads`, `python app.py` and `cdk synth`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import ROOT, VENV_BIN

CASES = {
    "unknown preset": (["nosuch"], "workload = 'nosuch': unknown preset; allowed: huge, intermediate, small"),
    "missing file": (["/nonexistent/w.yaml"], "workload = '/nonexistent/w.yaml': file not found"),
    "unknown field": (["huge", "-c", "training.instnce_type=p5.48xlarge"],
                      "training.instnce_type = 'p5.48xlarge': unknown field; did you mean training.instance_type?; "
                      "allowed: training.instance_type, training.instance_count"),
    "wrong type": (["huge", "-c", "training.instance_count=lots"], "training.instance_count = 'lots': text, not a number"),
    "out of range": (["small", "-c", "inference.serverless.max_concurrency=0"],
                     "inference.serverless.max_concurrency = 0: out of range; allowed: a whole number >= 1 and <= 200"),
    "type not in catalog": (["huge", "-c", "training.instance_type=p9.48xlarge"],
                            "training.instance_type = 'p9.48xlarge': not in the instance catalog"),
    "type of a known family not in catalog": (["small", "-c", "training.instance_type=t3.xlarge"],
                                              "training.instance_type = 't3.xlarge': not in the instance catalog; "
                                              "allowed: the catalog's t3 types: t3.medium"),
    "type not in region": (["huge", "-c", "training.instance_type=p6-b300.48xlarge"],
                           "training.instance_type = 'p6-b300.48xlarge': not offered in region us-east-2; allowed: regions "
                           "us-east-1, us-west-2, ap-northeast-2"),
    "zone outside region": (["huge", "-c", "availability_zone=eu-west-1a"],
                            "availability_zone = 'eu-west-1a': not a zone of region us-east-2; allowed: us-east-2a"),
    "accelerator for classic ML": (["small", "-c", "training.instance_type=g5.xlarge"],
                                   "training.instance_type = 'g5.xlarge': xgboost trains on CPU, not on an accelerator; "
                                   "allowed: CPU families c5, c6i, m5, r5, t3"),
    "unknown storage": (["huge", "-c", "data.storage=nfs"],
                        "data.storage = 'nfs': not a known value; allowed: 's3-file', 's3-fastfile', 'efs' or 'fsx-lustre'"),
    "unknown orchestrator": (["huge", "-c", "training.orchestrator=k8s"],
                             "training.orchestrator = 'k8s': not a known value; allowed: 'slurm', 'hyperpod' or 'sagemaker-jobs'"),
}


def _check(result: subprocess.CompletedProcess, expected: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    ours = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(ours) == 1, result.stderr
    assert expected in ours[0], ours[0]


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_plan_command_refuses_bad_input(case):
    args, expected = CASES[case]
    workload, *overrides = args
    result = subprocess.run([sys.executable, "-m", "workloads", "plan", workload, *overrides],
                            cwd=ROOT, capture_output=True, text=True)
    _check(result, expected)
    assert result.stdout == ""


@pytest.mark.parametrize("name, text", [
    ("malformed.yaml", "name: x\nregion: [us-west-2\n"),
    ("list.yaml", "- a\n- b\n"),
])
def test_malformed_yaml_is_refused(tmp_path, name, text):
    (tmp_path / name).write_text(text)
    # Run where the file is: a long temporary path would be shortened in the one-line message.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", "workloads", "plan", name], cwd=tmp_path, env=env,
                            capture_output=True, text=True)
    _check(result, f"workload = '{name}': ")


def _context_args(args: list[str]) -> dict:
    workload, *rest = args
    ctx = {"workload": workload}
    for flag, pair in zip(rest[::2], rest[1::2]):
        key, _, value = pair.partition("=")
        ctx[key] = value
    return ctx


@pytest.mark.parametrize("case", ["unknown preset", "type not in region", "accelerator for classic ML", "unknown field"])
def test_app_refuses_bad_input_and_writes_nothing(tmp_path, case):
    args, expected = CASES[case]
    outdir = tmp_path / "cdk.out"
    env = {**os.environ, "CDK_CONTEXT_JSON": json.dumps(_context_args(args)), "CDK_OUTDIR": str(outdir)}
    result = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True)
    _check(result, expected)
    assert not outdir.exists() or not any(outdir.iterdir())  # App() makes the folder; nothing goes in


def test_cdk_synth_refuses_bad_input(tmp_path):
    args, expected = CASES["zone outside region"]
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}", "CDK_DISABLE_CLI_TELEMETRY": "true"}
    result = subprocess.run([str(ROOT / "node_modules" / ".bin" / "cdk"), "synth", "--no-notices", "-o", str(tmp_path / "out"),
                             "-c", "availability_zone=eu-west-1a"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr + result.stdout
    assert f"error: {expected}" in result.stderr
    assert not list((tmp_path / "out").glob("*.template.json"))


def test_an_empty_file_is_said_to_be_empty(tmp_path):
    """It said 'the file holds a NoneType, not a mapping' (issue 34 item 10.9)."""
    (tmp_path / "empty.yaml").write_text("# nothing yet\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", "workloads", "plan", "empty.yaml"], cwd=tmp_path, env=env,
                            capture_output=True, text=True)
    _check(result, "workload = 'empty.yaml': the file is empty; allowed: a YAML mapping")
