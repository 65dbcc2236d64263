"""The job and endpoint commands can be tried without an account: `make emulator` keeps the demo's deployment
running and prints the environment that points `submit`, `process` and `invoke` at it; without credentials the
commands say that nothing was sent and what to do, and a missing upload is refused before any AWS call."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from .conftest import MAKE_NO_SETUP, ROOT

NO_ACCOUNT = {"AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
              "AWS_EC2_METADATA_DISABLED": "true"}


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {**env, **NO_ACCOUNT, **extra}


def _workloads(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workloads", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def test_without_credentials_the_commands_say_nothing_was_sent():
    """Before: "AWS refused the request: Unable to locate credentials", though no request had been sent."""
    for args in (["invoke", "small"], ["submit", "small"]):
        result = _workloads(*args, env=_clean_env())
        assert result.returncode == 1, result.stderr
        assert "no AWS credentials were found, so nothing was sent" in result.stderr
        assert "make emulator" in result.stderr and "Traceback" not in result.stderr


def test_a_missing_upload_is_refused_before_any_aws_call():
    """Checked first: with no credentials at all, the answer is about the folder, not about credentials."""
    cases = {("submit", "--entry-point", "train.py", "--source-dir", "nowhere"): "--source-dir = 'nowhere'",
             ("submit", "--entry-point", "nope.py", "--source-dir", "examples/slurm"): "--entry-point = 'nope.py'",
             ("process", "--code", "nope.py"): "--code = 'nope.py'"}
    for (command, *flags), line in cases.items():
        result = _workloads(command, "small", *flags, env=_clean_env())
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(f"error: {line}:"), result.stderr


@pytest.mark.e2e  # `make emulator` in a process, a deploy and every command: make test-e2e (CI)
def test_make_emulator_runs_the_commands_as_the_readme_shows():
    proc = subprocess.Popen(["make", "--no-print-directory", "emulator", "WORKLOAD=small", *MAKE_NO_SETUP], cwd=ROOT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    exports, seen, deadline = {}, [], time.monotonic() + 240
    try:
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("export "):
                key, _, value = line.removeprefix("export ").strip().partition("=")
                exports[key] = value
            if "Ctrl-C here stops it" in line or time.monotonic() > deadline:
                break
        assert exports.get("AWS_ENDPOINT_URL", "").startswith("http://localhost:"), "".join(seen)
        env = _clean_env(**exports)
        # The commands it prints are the ones run: what the user pastes is what is tested.
        # (The plan above them prints its promote command with <placeholders>, on a line of its own: not one to paste.)
        # (The short plan's own Next commands come before the emulator's exports: they are tested with the plan.)
        first_export = next(i for i, line in enumerate(seen) if line.startswith("export "))
        printed = [line.split("#")[0].split()[3:] for line in seen[first_export:]
                   if line.strip().startswith("python -m workloads ") and "<" not in line]
        expected = {"invoke": "realtime endpoint ", "submit": "training job small-train-",
                    "process": "processing job small-process-"}
        assert sorted(args[0] for args in printed) == sorted(expected), "".join(seen)
        for args in printed:
            result = _workloads(*args, env=env)
            assert result.returncode == 0 and result.stdout.startswith(expected[args[0]]), (args, result.stderr)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGINT and "Traceback" not in rest, rest


def test_the_example_processing_script_cleans_its_shard(tmp_path):
    shard = tmp_path / "in" / "part-0001.csv"
    shard.parent.mkdir()
    shard.write_text("a,b\n1,2\n\na,b\n3,4\n")
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "prep.py")], capture_output=True, text=True,
                            env={**os.environ, "PROCESSING_INPUT": str(tmp_path / "in"),
                                 "PROCESSING_OUTPUT": str(tmp_path / "out")})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "part-0001.csv").read_text() == "a,b\n1,2\n3,4\n"
