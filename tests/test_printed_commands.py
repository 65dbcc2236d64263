"""What the tool prints, a user can paste (issue 43): the commands name the workload as the user gave it (a file, with
its -c overrides; a team's file from here with --stage), and the emulator's deploy line is complete. Each printed
`python -m workloads` command is parsed from the output and run; with no estate deployed it must get as far as AWS
(exit 1, 'not deployed' or unreachable), never be refused as bad input (exit 2: `unknown preset`)."""

from __future__ import annotations

import re
import shlex
import shutil

import pytest

from tools.demo import serve_lines
from workloads.commands.emulator_target import DEPLOY_OPTIONS
from workloads.commands.cli import main
from workloads.commands.context import context_pairs, read_context, repeated_keys
from workloads.errors import raise_all
from workloads.planning.artifacts import artifact_checks

from .conftest import ROOT, TEAMS_FILE, cdk_json_context

COMMAND = re.compile(r"python -m workloads (?:submit|promote|invoke|process)[^,;\n#(]*")  # up to prose


@pytest.fixture
def offline(monkeypatch):
    """AWS answers nowhere, at once: a command that loads its workload fails at its first AWS call (exit 1)."""
    for k, v in {"AWS_ENDPOINT_URL": "http://localhost:9", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
                 "AWS_MAX_ATTEMPTS": "1", "AWS_EC2_METADATA_DISABLED": "true"}.items():
        monkeypatch.setenv(k, v)


@pytest.fixture
def churn(tmp_path, monkeypatch):
    """The README's file workload, in a folder of its own (run from there, as a user would)."""
    shutil.copy(ROOT / "workloads" / "presets" / "small.yaml", tmp_path / "churn.yaml")
    monkeypatch.chdir(tmp_path)
    return "churn.yaml"


def _run(line: str, capsys) -> tuple[int, str]:
    words = shlex.split(line.replace("<training job>", "job-1"))
    assert words[:3] == ["python", "-m", "workloads"], line
    code = main(words[3:])
    return code, capsys.readouterr().err


def test_the_artifact_checks_commands_name_the_file_and_its_overrides_and_run(churn, offline, capsys):
    context = {"workload": churn, "training.instance_count": "1"}
    target = read_context(context)
    checks = artifact_checks(target.plan.training, target.plan.inference, workload=target.workload_args)
    lines = [m.group(0).strip() for c in checks for m in COMMAND.finditer(c.put)]
    assert {shlex.split(x)[3] for x in lines} == {"submit", "promote"}, lines
    for line in lines:
        assert f"workloads {shlex.split(line)[3]} churn.yaml -c training.instance_count=1" in line
        code, err = _run(line, capsys)
        assert code == 1 and "error: workload" not in err and "Traceback" not in err, (line, err)


def test_the_emulators_lines_paste_and_run(churn, offline, capsys):
    lines = serve_lines(workload=churn, team=None, teams_file="", app_args=["-c", f"workload={churn}"])
    commands = [m.group(0).strip() for line in lines for m in COMMAND.finditer(line)]
    assert len(commands) == 3
    for line in commands:
        code, err = _run(line, capsys)
        assert code in (1, 2) and "error: workload" not in err and "Traceback" not in err, (line, err)
        assert code == 1 or "--code" in err, (line, err)  # process: its --code is relative to the project
    deploy = next(shlex.split(line.split("#")[0]) for line in lines if "cdk deploy" in line)
    assert all(option in deploy for option in DEPLOY_OPTIONS) and deploy[:2] == ["cdk", "deploy"]
    pairs = context_pairs(deploy)
    raise_all(repeated_keys(pairs))
    assert read_context({**cdk_json_context(), **dict(pairs)}, cdk_keys=cdk_json_context()).plan.workload.name == "small"


def test_a_teams_lines_name_its_file_from_here_and_its_stage(offline, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    team = "tabular"
    lines = serve_lines(workload="", team=team, teams_file=str(TEAMS_FILE.relative_to(ROOT)),
                        app_args=["-c", f"teams={TEAMS_FILE.relative_to(ROOT)}", "-c", f"team={team}"])
    commands = [m.group(0).strip() for line in lines for m in COMMAND.finditer(line)]
    for line in commands[:2]:  # invoke, submit
        assert f"--stage {team}" in line and "-c region=" in line
        code, err = _run(line, capsys)
        assert code == 1 and "Traceback" not in err, (line, err)
    assert any(f"cdk deploy '{team}/*'" in line and "--method direct" in line for line in lines)


@pytest.mark.parametrize("path", sorted((ROOT / "examples" / "workloads").glob("*.yaml"))
                         + sorted((ROOT / "workloads" / "presets").glob("*.yaml")), ids=lambda p: p.name)
def test_a_workload_files_deploy_lines_follow_the_real_order(path):
    """`cdk deploy --all` for a workload that serves deploys the InferenceStack before any model is in the bucket, and
    its artifact check fails the deployment: a file's comments say TrainStack, then InferenceStack."""
    from workloads import load, plan

    lines = [line for line in path.read_text().splitlines()
             if line.lstrip().startswith("#") and line.lstrip("# ").startswith("cdk deploy")]
    if not lines:
        return
    serves = bool(plan(load(str(path))).inference)
    for line in lines:
        words = shlex.split(line.split("#", 1)[1].split("  #")[0])
        assert not (serves and "--all" in words), line
        pairs = dict(context_pairs(words))
        # the file itself, as pasted from the project's root (a preset by its name)
        assert pairs.get("workload") in (str(path.relative_to(ROOT)), path.stem), line


@pytest.mark.parametrize("context", [{"workload": "huge"}, {"workload": "small"},
                                     {"teams": "config/teams.yaml", "team": "vision"}])
def test_the_demo_shows_every_warning_the_synthesis_counts(context):
    """`make demo` printed "2 warnings" over its plan, then its synthesis "3 warnings, shown with the plan above":
    the images deployed by tag only were counted but not shown. The demo's plan now has the app's findings."""
    from tools.demo import demo_plan

    shown, _, _ = demo_plan(context.get("workload", ""), team=context.get("team"),
                            teams_file=context.get("teams", "config/teams.yaml"))
    counted = [f.message for f in read_context(context).findings if f.level == "WARNING"]
    assert [f.message for f in shown.findings if f.level == "WARNING"] == counted
    assert any("no digest recorded" in m for m in counted)
