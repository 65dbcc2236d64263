"""The terminal plan is one screen by default, the rest under --full (issue 43); each warning a line; --json whole."""

from __future__ import annotations

import io
import json
import shlex

import pytest
from rich.console import Console

from workloads.commands.cli import main
from workloads.commands.emulator_target import DEPLOY_OPTIONS
from workloads.commands.report import print_plan
from workloads.commands.short_plan import print_short_plan
from workloads.config.loader import load
from workloads.errors import HEADLINE_CHARS, Finding, headline, report_findings
from workloads.planning.planner import plan


def _lines(printer, p, width: int, **kw) -> list[str]:
    out = io.StringIO()
    printer(p, Console(file=out, width=width, highlight=False, color_system=None), **kw)
    return out.getvalue().splitlines()


@pytest.mark.parametrize("name", ["small", "intermediate", "huge"])
def test_the_default_plan_is_a_screen_at_80_columns_and_full_is_the_rest(name):
    p = plan(load(name, {}))
    short = _lines(print_short_plan, p, 80, given=name, context={"workload": name})
    full = _lines(print_plan, p, 80)
    assert len(short) < 60 < len(full), (len(short), len(full))
    assert max(map(len, short)) <= 80
    text = "\n".join(short)
    assert f"train on {p.training.instance_count} x {p.training.instance_type}" in text  # the summary
    assert "Why this pick" in text and "runner-up" in text
    # every warning once, in one line of its headline; never the full message
    for f in p.findings:
        if f.level == "WARNING":
            assert sum(f.headline in line for line in short) == 1 and f.message not in text


def test_the_next_commands_paste_and_name_the_workload_as_given(capsys, monkeypatch):
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)  # an account's shell
    assert main(["plan", "examples/workloads/llm-finetune-realtime.yaml", "-c", "training.instance_count=2"]) == 0
    out = capsys.readouterr().out.splitlines()
    commands = [line.strip() for line in out if line.strip().startswith(("python -m", "cdk "))]
    assert commands == [
        "python -m workloads plan examples/workloads/llm-finetune-realtime.yaml -c training.instance_count=2 --full",
        "python -m workloads preflight examples/workloads/llm-finetune-realtime.yaml -c training.instance_count=2",
        "cdk deploy TrainStack -c workload=examples/workloads/llm-finetune-realtime.yaml -c training.instance_count=2"]
    # --full is the long plan: pasted, it parses and prints the tables the short one leaves out
    assert main(shlex.split(commands[0])[3:]) == 0
    assert "Training candidates" in capsys.readouterr().out


@pytest.mark.parametrize("endpoint,options", [("http://localhost:4566", True), ("http://127.0.0.1:5000", True),
                                              ("https://sagemaker.us-east-1.amazonaws.com", False)])
def test_the_deploy_line_takes_the_emulators_options_where_its_endpoint_is_exported(capsys, monkeypatch, endpoint,
                                                                                   options):
    """With `make emulator`'s exports pasted, the plan's `cdk deploy` line failed after 45 s ("XML parse error"):
    the emulator needs a direct deployment and no approval prompt (emulator_target.DEPLOY_OPTIONS)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    assert main(["plan", "small"]) == 0
    deploy = next(line.strip() for line in capsys.readouterr().out.splitlines() if line.strip().startswith("cdk "))
    assert deploy.startswith("cdk deploy TrainStack -c workload=small")
    assert deploy.endswith(" ".join(DEPLOY_OPTIONS)) is options


def test_json_is_unchanged_by_the_short_default(capsys, pin_images):
    p = plan(load("huge", {}))
    pin_images(p)
    assert main(["plan", "huge", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [w["message"] for w in data["warnings"]] == [f.message for f in p.findings if f.level == "WARNING"]
    assert data["warnings"] and len(data["warnings"][0]["message"]) > HEADLINE_CHARS  # whole, not the headline


@pytest.mark.parametrize("message,expected", [
    ("the scheduled transform job cannot start: the AWS vLLM DLC is CUDA 13.0", "the scheduled transform job cannot start"),
    ("short", "short"),
    ("a finding without a clause break " + "word " * 40, None),
])
def test_a_headline_is_the_first_clause_within_a_line(message, expected):
    got = headline(message)
    assert len(got) <= HEADLINE_CHARS
    if expected is not None:
        assert got == expected
    else:
        assert got.endswith("...") and message.startswith(got[:-3])


def test_synthesis_prints_each_warning_as_a_line_and_the_command_for_the_detail_once():
    findings = [Finding("WARNING", "a.b", 1, "it cannot start: " + "why " * 200, "src"),
                Finding("WARNING", "c.d", 2, "another finding: detail"), Finding("INFO", "e", 3, "a note")]
    out = io.StringIO()
    report_findings(findings, out, detail="python -m workloads plan huge --full")
    lines = out.getvalue().splitlines()
    assert lines == ["warning: a.b = 1: it cannot start", "warning: c.d = 2: another finding",
                     "  (each in full, with its source: python -m workloads plan huge --full)"]


def test_the_runner_up_comes_from_the_picks_pool_and_a_cheaper_one_says_less(capsys):
    """vision-classifier printed "runner-up 1 x p4d.24xlarge ... ($-6.51 more)": a training plan's row, on capacity
    still to buy, against a pick among the rows that deploy as they are; a type the config sets can cost more."""
    assert main(["plan", "examples/workloads/vision-classifier.yaml"]) == 0
    out = capsys.readouterr().out
    runner = next(line for line in out.splitlines() if "runner-up" in line)
    assert "$-" not in out and runner.rstrip().endswith(" more)")
    assert main(["plan", "examples/workloads/long-context-pipeline.yaml"]) == 0
    out = capsys.readouterr().out
    assert "$-" not in out and "set by the config" in out
    other = next(line for line in out.splitlines() if "cheapest other type" in line)
    assert other.rstrip().endswith(" less)")


def test_a_wrapped_line_continues_indented_under_its_text():
    """Lines past the console's width wrapped to column 0 (`with one training run` / `$1,447`)."""
    buf = io.StringIO()
    print_short_plan(plan(load("huge", {})), Console(file=buf, width=80, highlight=False), given="huge",
                     context={"workload": "huge"})
    lines = buf.getvalue().splitlines()
    headers = {"Why this pick", "Cost", "Next"}
    flush = [line for line in lines[1:] if line and not line[0].isspace() and line not in headers
             and not line.endswith("(each in full, with its source, under --full)")]
    assert not flush, flush
