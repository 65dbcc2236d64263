"""Figures the docs state that only a run can measure (test counts, the suite's and set-up's times, the demo's time):
each lives in docs/measured.yaml with the command that measured it, the date and the machine's load, and the docs
quote it through an inline marker that `make docs` (tools/gen_docs.py) fills:

    `make test` took <!-- measured: make_test_fresh -->...<!-- /measured -->

A figure nobody has measured since the code changed says so, with the command that measures it: prose never
carries a time or a count of its own (issue 43: "about 960 tests in 117 s" stood while the suite grew to 1,724)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "docs" / "measured.yaml"
MEASURED = re.compile(r"<!-- measured: (?P<key>[a-z0-9_.-]+) -->(?P<body>.*?)<!-- /measured -->", re.S)
FIELDS = ("command", "how", "value", "date", "load")


def record() -> dict[str, dict]:
    import yaml

    return yaml.safe_load(RECORD.read_text())["figures"]


def text(key: str, figures: dict[str, dict] | None = None) -> str:
    """What the marker shows: the figure with how, when and under what load it was measured, or that it was not."""
    figures = record() if figures is None else figures
    if key not in figures:
        raise KeyError(f"<!-- measured: {key} -->: no such figure in {RECORD.relative_to(ROOT)}")
    f = figures[key]
    if f.get("value") in (None, ""):
        return f"not measured since the code changed (`{f['command']}`, {f['how']}, measures it)"
    return f"{f['value']} (`{f['command']}`, {f['how']}, {f['date']}, load {f['load']})"


def fill(doc: str, figures: dict[str, dict] | None = None) -> str:
    figures = record() if figures is None else figures
    return MEASURED.sub(lambda m: f"<!-- measured: {m['key']} -->{text(m['key'], figures)}<!-- /measured -->", doc)


def stale(path: Path) -> list[tuple[int, str]]:
    """(line, key) of each marker in `path` that shows other than the record says."""
    doc, figures = path.read_text(), record()
    return [(doc.count("\n", 0, m.start()) + 1, m["key"]) for m in MEASURED.finditer(doc)
            if m["body"] != text(m["key"], figures)]
