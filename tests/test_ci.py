"""CI runs every test: `.ci/run` calls `make test` and the targets that run what it leaves out for its 3 minutes
(`make test-e2e`, `make test-trainer`), and between them those targets select every combination of pytest.ini's
markers. A marker added without a target, or a target dropped from CI, leaves tests that nothing runs."""

from __future__ import annotations

import configparser
import itertools
import re
import shlex
import subprocess

from _pytest.mark.expression import Expression

from .conftest import ROOT

CI = ROOT / ".ci" / "run"


def _ci_targets() -> list[str]:
    """The make targets .ci/run calls, in order (comments left out)."""
    lines = [line.split("#", 1)[0] for line in CI.read_text().splitlines()]
    return [t for line in lines for t in re.findall(r"^\s*make\s+([a-z][a-z0-9-]*)\s*$", line)]


def _pytest_line(target: str) -> list[str]:
    """The pytest command `make TARGET` runs, as make expands it (`make -n`: printed, not run)."""
    out = subprocess.run(["make", "-n", "--no-print-directory", target, "SETUP="], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    (line,) = [ln for ln in out.splitlines() if " -m pytest " in ln]
    return shlex.split(line)


def _selection(args: list[str]) -> str:
    """The `-m` expression of a pytest command line (after `python -m pytest`)."""
    rest = args[args.index("pytest") + 1:]
    return rest[rest.index("-m") + 1]


def _markers() -> list[str]:
    ini = configparser.ConfigParser()
    ini.read(ROOT / "pytest.ini")
    return [m[1] for line in ini["pytest"]["markers"].splitlines() if (m := re.match(r"([A-Za-z_]\w*):", line))]


def test_ci_runs_make_test_then_the_slow_targets():
    assert _ci_targets() == ["test", "test-e2e", "test-trainer"]


def test_the_targets_ci_runs_select_every_combination_of_markers():
    markers = _markers()
    assert {"trainer", "e2e"} <= set(markers), markers
    selections = {t: _pytest_line(t) for t in _ci_targets()}
    expressions = {t: Expression.compile(_selection(args)) for t, args in selections.items()}
    for n in range(len(markers) + 1):
        for marked in itertools.combinations(markers, n):
            runs = [t for t, e in expressions.items() if e.evaluate(lambda name, m=marked: name in m)]
            assert runs, f"a test marked {set(marked) or 'with no marker'} is run by none of {list(expressions)}"
    # make test leaves out both slow markers; make test-e2e selects e2e.
    assert not expressions["test"].evaluate(lambda name: name == "e2e")
    assert expressions["test-e2e"].evaluate(lambda name: name == "e2e")


def test_a_target_that_names_files_names_every_file_with_its_marker():
    """`make test-trainer` runs `-m trainer` over the files it names: a trainer test in another file would be run by
    no target."""
    for target, args in ((t, _pytest_line(t)) for t in _ci_targets()):
        files = {a for a in args if a.startswith("tests/")}
        if not files:
            continue
        marker = _selection(args)
        using = {f"tests/{p.name}" for p in (ROOT / "tests").glob("test_*.py")
                 if re.search(rf"pytest\.mark\.{re.escape(marker)}\b", p.read_text())}
        assert using and using <= files, (target, sorted(using - files))
