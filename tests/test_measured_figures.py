"""A time or a count that only a run can measure is quoted from docs/measured.yaml, with its command, date and load
(tools/measured.py), never written as prose (issue 43: "about 960 tests in 117 s" while the suite had 1,724)."""

from __future__ import annotations

import re

import pytest

from tools import gen_docs, measured

# Prose that states a suite's size, or how long a `make` target runs, without a marker.
UNMARKED = re.compile(r"\b\d[\d,]* tests in \d|`make [a-z-]+`[^.;]{0,80}?\b(?:took|takes|ran|in) (?:about )?\d+(?:\.\d+)? ?"
                      r"(?:s|min)\b")


def test_every_figure_has_its_command_and_a_filled_one_its_date_and_load():
    for key, f in measured.record().items():
        assert set(measured.FIELDS) <= set(f), key
        assert f["command"].startswith(("make ", "python ", "pytest ", "bash ")), key
        if f["value"] not in (None, ""):
            assert re.fullmatch(r"20\d\d-\d\d-\d\d", str(f["date"])) and f["load"] is not None, key


@pytest.mark.parametrize("path", gen_docs.docs(), ids=lambda p: p.name)
def test_the_docs_show_what_the_record_says(path):
    assert measured.stale(path) == [], "run `make docs`"


@pytest.mark.parametrize("path", gen_docs.docs(), ids=lambda p: p.name)
def test_no_suite_size_or_run_time_is_written_as_prose(path):
    prose = measured.MEASURED.sub("", path.read_text())
    assert not UNMARKED.findall(prose), UNMARKED.findall(prose)


def test_a_filled_figure_is_shown_with_how_it_was_measured():
    figures = {"x": {"command": "make test", "how": "set up", "value": "1,724 tests in 437 s", "date": "2026-11-28",
                     "load": 4.0}}
    shown = measured.fill("<!-- measured: x --><!-- /measured -->", figures)
    assert "1,724 tests in 437 s (`make test`, set up, 2026-11-28, load 4.0)" in shown
    with pytest.raises(KeyError):
        measured.fill("<!-- measured: nosuch --><!-- /measured -->", figures)
