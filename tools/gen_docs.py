"""The docs' figures, generated from the code (`make docs`; issue 34: docs that cannot drift).

A generated block in README.md or docs/*.md is a marker naming the command, then the command and what it prints,
indented as a code block, then an end marker:

    <!-- generated: python -m workloads plan huge --full | grep -A1 'layout:' -->

        $ python -m workloads plan huge --full | grep -A1 'layout:'
          layout: data 128 x tensor 1 ...

    <!-- end -->

`python -m tools.gen_docs` rewrites every block from what the code prints now; `--check` changes nothing and lists
the blocks that differ (exit 1), which tests/test_doc_figures.py runs. The command is run in this process (no
shell, no network): `python -m workloads ...` through the CLI's own `main`, piped into `grep [-E|-F] [-A N]
PATTERN` or `head -n N`, so a reader who pastes it sees the same lines (piped output is 150 columns wide); or
`python -m tools.gen_docs --table NAME`, a Markdown table made from the catalog as the planner reads it, which the
block shows as a table.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^(?P<indent>[ ]*)<!-- generated: (?P<command>.+?) -->\n(?P<body>.*?)^[ ]*<!-- end -->$",
                    re.M | re.S)


def docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


class CommandError(ValueError):
    """A generated block's command this tool cannot run, or one that fails."""


def _workloads(argv: list[str]) -> list[str]:
    from workloads.commands.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    if status != 0:
        raise CommandError(f"`python -m workloads {shlex.join(argv)}` exited {status}: {err.getvalue().strip()}")
    return out.getvalue().splitlines()


def _grep(lines: list[str], args: list[str]) -> list[str]:
    after, fixed, pattern = 0, False, None
    i = 0
    while i < len(args):
        if args[i] == "-A":
            after, i = int(args[i + 1]), i + 2
        elif re.fullmatch(r"-A\d+", args[i]):
            after, i = int(args[i][2:]), i + 1
        elif args[i] in ("-E", "-F"):
            fixed, i = args[i] == "-F", i + 1
        else:
            pattern, i = args[i], i + 1
    if pattern is None:
        raise CommandError("grep without a pattern")
    found = re.compile(re.escape(pattern) if fixed else pattern)
    keep: set[int] = set()
    for n, line in enumerate(lines):
        if found.search(line):
            keep |= set(range(n, min(n + after + 1, len(lines))))
    return [lines[n] for n in sorted(keep)]


def _head(lines: list[str], args: list[str]) -> list[str]:
    count = int(args[1]) if args[:1] == ["-n"] else int(args[0].lstrip("-")) if args else 10
    return lines[:count]


FILTERS = {"grep": _grep, "head": _head}


def utilisation_table() -> list[str]:
    """docs/plan.md's MFU bands: low, likely and high as the planner takes them from catalog/utilisation.yaml (bf16,
    no recompute scaling), and the published runs behind each."""
    from workloads.catalog import load_catalog, load_utilisation
    from workloads.planning.estimates import _published, utilisation_range

    catalog, u = load_catalog(), load_utilisation()
    rows = ["| accelerator | 10B and over | under 10B | published runs |", "|---|---|---|---|"]
    for label, itype in (("A100 40GB (p4d)", "p4d.24xlarge"), ("H100 80GB (p5)", "p5.48xlarge"),
                         ("Trainium (trn1, trn1n)", "trn1.32xlarge")):
        it = catalog.get(itype)
        assert it.accelerator is not None
        bands = [utilisation_range(it, size, u) for size in (u.large_band_billion, u.large_band_billion / 2)]
        runs = [f for band in ("large", "small") for f in _published(it.accelerator.model, band, "bf16", u)[0]]
        rows.append(f"| {label} | " + " | ".join(", ".join(f"{v:.1%}" for v in (b.low, b.likely, b.high))
                                               for b in bands) + f" | {_runs(runs)} |")
    return rows


def _runs(figures) -> str:
    """The published runs in a few words, by source: "MPT-70B, MPT-30B on 8-128 x H100 [source]"."""
    out = []
    for source in dict.fromkeys(f.source for f in figures):
        parsed = [re.match(r"(\S+) on ([\d,]+) x ([^,]+)", f.what) for f in figures if f.source == source]
        if not all(parsed):
            out += [f"{f.what} [{source}]" for f in figures if f.source == source]
            continue
        names = ", ".join(dict.fromkeys(m[1] for m in parsed if m))
        counts = sorted({int(m[2].replace(",", "")) for m in parsed if m})
        span = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
        out.append(f"{names} on {span} x {parsed[0][3]} [{source}]")
    return "; ".join(out)


TABLES = {"utilisation": utilisation_table}


def run(command: str) -> list[str]:
    """What `command` prints, line by line, trailing spaces dropped."""
    words = shlex.split(command)
    stages: list[list[str]] = [[]]
    for w in words:
        if w == "|":
            stages.append([])
        else:
            stages[-1].append(w)
    first, *filters = stages
    if first[:3] == ["python", "-m", "tools.gen_docs"] and first[3:4] == ["--table"] and first[4:] and \
            first[4] in TABLES:
        lines = TABLES[first[4]]()
    elif first[:3] == ["python", "-m", "workloads"]:
        lines = _workloads(first[3:])
    else:
        raise CommandError(f"`{command}`: a generated block runs `python -m workloads ...` or "
                           f"`python -m tools.gen_docs --table {'|'.join(TABLES)}`")
    for stage in filters:
        if not stage or stage[0] not in FILTERS:
            raise CommandError(f"`{command}`: only {' and '.join(FILTERS)} may follow a pipe")
        lines = FILTERS[stage[0]](lines, stage[1:])
    if not lines:
        raise CommandError(f"`{command}` prints nothing: the plan no longer prints what the block quotes")
    return [line.rstrip() for line in lines]


def render(indent: str, command: str) -> str:
    if command.startswith("python -m tools.gen_docs --table"):  # a Markdown table, shown as a table
        return "\n".join(["", *(indent + line for line in run(command)), "", ""])
    code = indent + " " * 4
    return "\n".join(["", f"{code}$ {command}", *(f"{code}{line}" if line else "" for line in run(command)), "", ""])


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    command: str
    body: str
    expected: str


def blocks(path: Path) -> list[Block]:
    text = path.read_text()
    return [Block(path, text.count("\n", 0, m.start()) + 1, m["command"], m["body"], render(m["indent"], m["command"]))
            for m in MARKER.finditer(text)]


def regenerate(path: Path) -> bool:
    from .measured import fill

    text = path.read_text()
    new = fill(MARKER.sub(lambda m: f"{m['indent']}<!-- generated: {m['command']} -->\n"
                                    f"{render(m['indent'], m['command'])}{m['indent']}<!-- end -->", text))
    if new != text:
        path.write_text(new)
    return new != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.gen_docs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; list the blocks that differ (exit 1)")
    parser.add_argument("--table", choices=sorted(TABLES), help="print one of the docs' generated tables")
    args = parser.parse_args(argv)
    try:
        if args.table:
            print("\n".join(TABLES[args.table]()))
            return 0
        if args.check:
            from .measured import stale as stale_figures

            stale = [b for p in docs() for b in blocks(p) if b.body != b.expected]
            for b in stale:
                print(f"{b.path.relative_to(ROOT)}:{b.line}: `{b.command}` prints other figures now: run `make docs`")
            figures = [(p, line, key) for p in docs() for line, key in stale_figures(p)]
            for p, line, key in figures:
                print(f"{p.relative_to(ROOT)}:{line}: the measured figure {key} differs from docs/measured.yaml: "
                      "run `make docs`")
            return 1 if stale or figures else 0
        for p in docs():
            if regenerate(p):
                print(f"regenerated {p.relative_to(ROOT)}")
    except CommandError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
