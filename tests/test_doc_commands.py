"""Every `python -m workloads` command the README and docs/*.md show (issue 34: docs that cannot drift): the ones that
need no account run here and exit 0 (plan, catalog); the ones that need an account (preflight, submit, promote,
process, invoke, cost) are parsed by the CLI's own parser, their workload or teams file loads with its -c options, and
the files they name exist. Placeholders a reader replaces are listed here, with what they stand for."""

from __future__ import annotations

import re
import shlex

import pytest

from workloads.commands.cli import _parser, main, parse_overrides
from workloads.commands.context import context_pairs, repeated_keys
from workloads.config.loader import DEFAULT_WORKLOAD, load
from workloads.errors import raise_all

from .conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# What a reader puts in place of these: not files of this repository.
PLACEHOLDERS = {"my.yaml": "your workload file", "./src": "your training script's folder",
                "request.json": "your request body", "JOB": "the job submit printed",
                "<job>": "the job submit printed"}
NEEDS_AN_ACCOUNT = {"preflight", "submit", "promote", "process", "invoke", "cost"}


def shown_commands() -> list[tuple[str, str]]:
    """(where, command) for each `python -m workloads` line of an indented code block; comments and line
    continuations handled."""
    out = []
    for doc in DOCS:
        lines = doc.read_text().splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.startswith("    python -m workloads "):
                command = line.strip()
                while command.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    command = command[:-1] + " " + lines[i].strip()
                out.append((f"{doc.name}:{i + 1}", re.sub(r"\s+#.*$", "", command)))
            i += 1
    return out


COMMANDS = shown_commands()


@pytest.fixture(scope="module")
def churn(tmp_path_factory):
    """The README's ten-line workload, as the file its commands name."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## A workload in ten lines", 1)[1].split("\n\n")[1]
    path = tmp_path_factory.mktemp("readme") / "churn.yaml"
    path.write_text("\n".join(line[4:] for line in block.splitlines()) + "\n")
    return path


def test_the_docs_show_commands_of_every_kind():
    kinds = {shlex.split(c)[3] for _, c in COMMANDS}
    assert {"plan", "catalog", "preflight", "submit", "promote", "process", "invoke", "cost"} <= kinds


@pytest.mark.parametrize("where, command", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_every_command_the_docs_show_parses_loads_and_names_files_that_exist(where, command, churn, capsys):
    argv = [str(churn) if a == "churn.yaml" else a for a in shlex.split(command)[3:]]
    if any(a in PLACEHOLDERS for a in argv):
        argv = [("huge" if a == "my.yaml" else a) for a in argv]
    try:
        args = _parser().parse_args(argv)
    except SystemExit:
        pytest.fail(f"{where}: `{command}` is refused by the CLI's parser: {capsys.readouterr().err}")
    if args.command not in NEEDS_AN_ACCOUNT:
        assert main(argv) == 0, f"{where}: `{command}`: {capsys.readouterr().err}"
        return
    overrides = parse_overrides(args.context)
    if "teams" in overrides:
        from workloads.planning.teams import load_teams
        load_teams(overrides["teams"], only=overrides.get("team"))
    else:
        load(args.workload, overrides)
    for name in ("code", "body", "source_dir"):
        value = getattr(args, name, None)
        if value is not None and value not in PLACEHOLDERS:
            assert (ROOT / value).exists(), f"{where}: `{command}` names {value}, which is not in the repository"


def shown_cdk_commands() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            if line.startswith("    cdk "):
                out.append((f"{doc.name}:{n}", re.sub(r"\s+#.*$", "", line.strip())))
    return out


CDK_COMMANDS = shown_cdk_commands()


@pytest.mark.parametrize("where, command", CDK_COMMANDS, ids=[w for w, _ in CDK_COMMANDS])
def test_every_cdk_command_the_docs_show_names_a_workload_or_teams_file_that_loads(where, command, churn):
    """`cdk synth|diff|deploy -c ...`: the app reads these -c options; they must load as the app would load them."""
    words = [f"workload={churn}" if w == "workload=churn.yaml" else w for w in shlex.split(command)]
    pairs = context_pairs(words)  # as the app reads the cdk command line: a key given twice is refused
    raise_all(repeated_keys(pairs))
    overrides = dict(pairs)
    if "teams" in overrides:
        from workloads.planning.teams import load_teams
        load_teams(overrides["teams"], only=overrides.get("team"))
        return
    workload = overrides.pop("workload", DEFAULT_WORKLOAD)  # what the app plans when none is named
    if workload in PLACEHOLDERS:
        return
    load(workload, overrides)
