"""What a new user types in the first hour is never accepted silently nor answered with an unclear line (issue 43):
each mistake is one `error: FIELD = VALUE: reason; allowed: ...` line, exit 2, no traceback. Rules, not cases: a
repeated -c key, cdk's own keys under python -m workloads, numeric options, numbers as YAML 1.2 writes them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from workloads import ConfigError, load, plan
from workloads.commands.cli import _parser, main
from workloads.commands.context import cdk_cli_context, context_pairs, read_context, repeated_keys
from workloads.config.loader import config_paths

from .conftest import ROOT, cdk_json_context


def _errors(capsys, *argv: str) -> list[str]:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return [line.removeprefix("error: ") for line in err.splitlines() if line.startswith("error: ")]


@pytest.mark.parametrize("argv, line", [
    (["plan", "small", "-c", "training.instance_count=2", "-c", "training.instance_count=3"],
     "-c training.instance_count = ['2', '3']: given 2 times with different values"),
    (["plan", "small", "-c", "workload=huge"], "-c workload = 'huge': the workload is the command's argument here"),
    (["plan", "small", "-c", "strict=true"], "-c strict = 'true': -c strict is cdk synth's"),
    (["invoke", "small", "--timeout", "-5"], "--timeout = -5.0: out of range; allowed: seconds, a number > 0"),
    (["invoke", "small", "--timeout", "nan"], "--timeout = nan: out of range"),
    (["process", "small", "--code", "x.py", "--instance-count", "0"], "--instance-count = 0: out of range"),
    (["plan", "/tmp"], "workload = '/tmp': a folder, not a file; allowed: a workload file"),
    (["plan", "small", "-c", "model=5"], "model = 5: not a section; allowed: a section with the fields parameters_billion"),
    (["plan", "small", "-c", "model.parameters_billion=1e9"],
     "model.parameters_billion = 1000000000.0: out of range; allowed: a number > 0 and <= 10000"),
    (["plan", "small", "-c", "model.parameters_billion=.nan"], "model.parameters_billion = nan: not finite; allowed: a "
     "number > 0 and <= 10000"),
    (["plan", "small", "-c", "model.parameters_billion=null"], "model.parameters_billion = None: no value; allowed: a "
     "number > 0 and <= 10000"),
    (["submit", "small", "--entry-point", "nope.py"], "--entry-point = 'nope.py': no such file in "),
    # From a second new user's pass: no suggestion for a misspelt preset, the decimal comma called quoting, a folder
    # or a missing one for --html named by the exception's class, a name's rule as its regular expression.
    (["plan", "smal"], "workload = 'smal': unknown preset; did you mean small?"),
    (["plan", "Huge"], "workload = 'Huge': unknown preset; did you mean huge?"),
    (["plan", "small.yaml"], "workload = 'small.yaml': file not found; did you mean the preset small?"),
    (["plan", "small", "-c", "model.parameters_billion=1,5"],
     "model.parameters_billion = '1,5': a decimal comma (write 1.5)"),
    (["plan", "small", "--html", "/tmp"], "--html = '/tmp': a folder, not a file"),
    (["plan", "small", "--html", "/nonexistent/dir/x.html"], "--html = '/nonexistent/dir/x.html': no folder "
     "/nonexistent/dir"),
    (["plan", "small", "-c", "name=Bad_Name"], "name = 'Bad_Name': not in the form allowed; allowed: lowercase "
     "letters, digits and hyphens"),
])
def test_each_mistake_is_one_line_naming_field_value_and_what_is_allowed(capsys, argv, line):
    lines = _errors(capsys, *argv)
    assert len(lines) == 1 and lines[0].startswith(line) and "; allowed: " in lines[0], lines


@pytest.mark.parametrize("value", ["1e9", "1e308", "1e-400", ".nan", "nan", "null", "-1", "true", "'3'"])
def test_a_bad_number_gets_only_its_own_error_never_one_about_the_stand_in(value):
    """A stand-in for the bad value let the rules run on a 1B model: 'does not fit in serverless memory' was added."""
    with pytest.raises(ConfigError) as err:
        load("small", {"model.parameters_billion": value})
    assert [e.field for e in err.value.errors] == ["model.parameters_billion"], str(err.value)


@pytest.mark.parametrize("path", sorted(p for p in config_paths() if p.count(".") == 1 and "." in p))
def test_every_number_field_says_its_range_when_given_text(path):
    """Rule over every field: text where a number goes names the field's range (from the schema), never pydantic's
    'a valid number'."""
    try:
        load("intermediate", {path: "'abc'"})
    except ConfigError as exc:
        assert "valid number" not in str(exc) and "valid integer" not in str(exc) and "dictionary or instance" \
            not in str(exc), str(exc)


def test_exponent_numbers_in_a_workload_file_are_numbers(tmp_path):
    text = (ROOT / "workloads" / "presets" / "small.yaml").read_text().replace("dataset_size_gib: 20", "dataset_size_gib: 2e1")
    (tmp_path / "w.yaml").write_text(text)
    assert load(str(tmp_path / "w.yaml")).data.dataset_size_gib == 20


def test_plan_without_a_workload_says_which_it_plans(capsys):
    assert main(["plan", "--json"]) == 0
    out = capsys.readouterr()
    assert "no workload named, so the default preset 'huge'" in out.err and json.loads(out.out)["workload"]["name"] == "huge"
    assert "default: huge" in _parser()._subparsers._group_actions[0].choices["plan"].format_help()


@pytest.mark.parametrize("command", ["submit", "invoke", "promote", "process"])
def test_every_c_option_has_help(command):
    text = _parser()._subparsers._group_actions[0].choices[command].format_help()
    assert "-c KEY=VALUE, --context KEY=VALUE\n" in text and "override a config field" in text


@pytest.mark.parametrize("text, line", [
    ("teams: {}\n", "teams = {}: not a list; allowed: a list of entries with the fields name"),
    ("teams: []\n", "teams = []: too few entries; allowed: a list of at least 1 entries"),
])
def test_a_teams_file_without_teams_says_what_a_team_is(capsys, tmp_path, text, line):
    (tmp_path / "t.yaml").write_text(text)
    lines = _errors(capsys, "plan", "-c", f"teams={tmp_path / 't.yaml'}", "-c", "team=x")
    assert len(lines) == 1 and lines[0].startswith(line) and "docs/teams.md" in lines[0], lines


def test_team_field_errors_point_to_the_teams_page(capsys, tmp_path):
    (tmp_path / "t.yaml").write_text("teams:\n  - name: vision\n    workload: small\n")
    lines = _errors(capsys, "plan", "-c", f"teams={tmp_path / 't.yaml'}", "-c", "team=vision")
    assert lines and all("docs/teams.md" in line and "configuration.md" not in line for line in lines), lines


def test_an_empty_workload_context_is_refused():
    for value in ("", "  "):
        with pytest.raises(ConfigError) as err:
            read_context({"workload": value})
        assert str(err.value).startswith(f"workload = {value!r}: empty: name a preset or a workload file; allowed: ")


def test_context_pairs_read_every_form_and_a_repeat_is_refused():
    argv = ["node", "cdk", "synth", "-c", "workload=small", "--context", "a=1", "--context=workload=huge", "-c", "b=x=y"]
    assert context_pairs(argv) == [("workload", "small"), ("a", "1"), ("workload", "huge"), ("b", "x=y")]
    assert [e.field for e in repeated_keys(context_pairs(argv))] == ["-c workload"]
    assert repeated_keys([("a", "1"), ("a", "1")]) == []  # the same value twice is no ambiguity


def test_the_app_refuses_a_workload_given_twice_on_the_cdk_command_line(tmp_path):
    """The CDK CLI keeps the last `-c workload=` silently and hands the app the merged context: the app reads its
    command line (here a stand-in `cdk` that runs the app as the CLI does) and refuses."""
    cdk = tmp_path / "cdk"
    cdk.write_text(f"#!/bin/sh\ncd {ROOT} && {sys.executable} app.py\nexit $?\n")
    cdk.chmod(0o755)
    env = {**os.environ, "CDK_OUTDIR": str(tmp_path / "out"),
           "CDK_CONTEXT_JSON": json.dumps({**cdk_json_context(), "workload": "huge"})}
    result = subprocess.run(["sh", str(cdk), "synth", "-c", "workload=small", "-c", "workload=huge"], env=env,
                            capture_output=True, text=True)
    assert result.returncode == 2, result.stderr
    assert "error: -c workload = ['small', 'huge']: given 2 times with different values" in result.stderr
    assert result.stderr.startswith("synth: loading the CDK libraries (")  # says what it does before the long import
    assert "Traceback" not in result.stderr and not list((tmp_path / "out").glob("*.template.json"))


def test_outside_a_cdk_command_no_pairs_are_claimed():
    assert cdk_cli_context(os.getpid()) is None or all(isinstance(p, tuple) for p in cdk_cli_context(os.getpid()))


def test_a_decimal_comma_inside_a_flow_mapping_is_named_as_one(tmp_path, capsys):
    """`{parameters_billion: 1,5, ...}` is, to YAML, parameters_billion 1 and a key 5: the line said "Keys should be
    strings", pydantic's words."""
    path = tmp_path / "comma.yaml"
    path.write_text("name: t\nregion: us-east-1\navailability_zone: us-east-1a\n"
                    "model: {parameters_billion: 1,5, framework: xgboost}\ndata: {dataset_size_gib: 20}\n")
    lines = _errors(capsys, "plan", str(path))
    assert lines == ["model.5 = 5: a number where a field name goes; allowed: field names; inside {...} a comma ends "
                     "a field, so write a decimal number with a point (1.5)"]


def test_every_field_with_a_pattern_says_its_form_in_words():
    """A pattern-checked field's error says its form in words (its description), never the regular expression."""
    from pydantic import BaseModel

    from workloads.config.schema import Workload

    def walk(model: type[BaseModel], prefix: str):
        for name, info in model.model_fields.items():
            if any(getattr(m, "pattern", None) for m in info.metadata):
                yield f"{prefix}{name}", info
            for arg in getattr(info.annotation, "__args__", ()) + (info.annotation,):
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    yield from walk(arg, f"{prefix}{name}.")

    found = dict(walk(Workload, ""))
    assert "name" in found and len(found) >= 5
    assert not [path for path, info in found.items() if not info.description], "patterns without words"
