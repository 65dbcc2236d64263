"""Every figure in the docs is what the code prints now, or a dated measurement (issue 34: docs that cannot drift).

A plan output the docs quote lives in a generated block (tools/gen_docs.py, `make docs`): the block fails here as
soon as the plan prints something else. Any other figure of the kinds a plan prints (a price, a rate, "N x type",
a time, GiB, a share of less/more/MFU) must be a measurement with its date and command beside it (its paragraph,
the one before or after, or its section's or document's heading), or be in ALLOWED below with why it is not a plan output.
The preset files' comments state no such figure at all: `plan NAME` shows them."""

from __future__ import annotations

import re

import pytest

from tools import gen_docs

from .conftest import ROOT

FIGURE = re.compile(r"""
    \$\d[\d,]*(?:\.\d+)?                                         # a price or a cost
  | \b\d[\d.,]*\s*(?:req/s|requests/s|requests\ a\ second)        # a serving rate
  | \b\d+\s*x\s+(?:ml\.)?[a-z][a-z0-9-]*\.\d*x?large\b            # a count of instances
  | \.\d*x?large\ x\s?\d+
  | \b\d+(?:\.\d+)?%\s+(?:less|more|cheaper|dearer|faster|slower|MFU|utilisation)
  | \b\d[\d.,]*\s?h\b                                             # hours
  | \b\d[\d.,]*\s?(?:GiB|GB|s|ms)\b                               # memory, storage, a time
""", re.X)
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
COMMAND = re.compile(r"`(?:python|make|cdk|pytest|torchrun|bash|\.venv/bin/python)\b[^`]*`|python -X")

# Figures that are not plan outputs, by why. Each is checked at its source where the text says so.
ALLOWED: dict[str, dict[str, set[str]]] = {
    "an AWS limit, default or price, named with its source in the text or in the catalog": {
        "inference.md": {"60 s", "1 GB", "6 GB", "3600 s", "512 GB"},
        "training.md": {"300 GiB", "512 GiB", "512 GB", "1200 GiB", "2400 GiB", "600 s", "30 GB", "16 GiB"},
        "operations.md": {"$0.10", "$3"},
    },
    "a constant or threshold of the code, named with where it lives": {
        "inference.md": {"0.5 s", "0.2 GB", "0.5 GB", "2.6 ms", "8.88 ms"},
        # decode_fit in catalog/serving.yaml: the fitted constants, each with the measurements they rest on
        "serving-and-costs.md": {"8.88 ms", "17.3 ms", "2.9 ms"},
        "training.md": {"120 s"},
        "operations.md": {"$5"},
    },
    "a config's input, not an output (the preset or case it describes)": {
        "configuration.md": {"20 GiB", "800 GiB"},
        "serving-and-costs.md": {"20 req/s", "2.5 s", "50 req/s", "500 ms", "50 ms"},
    },
    "a figure of the past that a test keeps as its baseline (tests/test_plan_serving.py BEFORE_USD_PER_HOUR)": {
        "serving-and-costs.md": {"13 x ml.inf2.48xlarge", "5 x ml.p4d.24xlarge"},  # and test_serving_sizing BEFORE
    },
    "nothing is billed: an idle dynamic cluster, an unrecorded fee (the plan says so)": {
        "serving-and-costs.md": {"$0,", "$0"},
        "training.md": {"$0"},
    },
    "a published measurement or an accelerator's name, with its source (the seeds' BERT run in DESIGN.md, pinned by "
    "tests/test_plan_training.py and tests/test_plan_consistency.py; Neuron's Llama run in catalog/utilisation.yaml)": {
        "serving-and-costs.md": {"40GB", "54.2 ms"},  # the A100 40GB row; Neuron's published Llama-2-70B TP24
        "plan.md": {"40GB", "80GB", "32 x trn1.32xlarge", "26.8% MFU", "6033 s", "$24.725", "$41.43", "6553 s",
                    "$37.69", "$68.61", "$25.25"},
        "training.md": {"28.3% MFU"},  # Neuron's Llama-3.1-70B NxD row (catalog/nxd.yaml), converted as the text says
    },
}


def _allowed(doc: str) -> set[str]:
    return {f for by_doc in ALLOWED.values() for f in by_doc.get(doc, set())}


def _paragraphs(text: str) -> list[tuple[int, str, str, str]]:
    """(line, paragraph, what introduces it, the headings above it) for each paragraph of a doc, generated blocks
    taken out. A top-level list item is a paragraph of its own, introduced by the paragraph before its list."""
    text = gen_docs.MARKER.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    out, title, section, start, lead, previous = [], "", "", 0, "", ""
    for sep in [*re.finditer(r"\n\n|\n(?=- )", text), None]:
        end = sep.start() if sep else len(text)
        para = text[start:end]
        for heading in re.findall(r"^(#+ .*)$", para, re.M):
            title, section = (heading, "") if heading.startswith("# ") else (title, heading)
        if not para.startswith("- ") or not lead:
            lead = previous
        out.append((text.count("\n", 0, start) + 1, para, lead, title + "\n" + section))
        if not para.startswith("- "):
            previous, lead = para, ""
        start = sep.end() if sep else end
    return out


def undated_figures(doc) -> list[str]:
    allowed = _allowed(doc.name)
    text = doc.read_text()
    paragraphs = _paragraphs(text)
    sections: dict[str, str] = {}
    for _, para, _, headings in paragraphs:
        sections[headings] = sections.get(headings, "") + "\n\n" + para
    wrong = []
    for i, (line, para, lead, headings) in enumerate(paragraphs):
        figures = [m.group(0) for m in FIGURE.finditer(para) if m.group(0) not in allowed]
        if not figures:
            continue
        near = "\n\n".join([lead, para, paragraphs[i + 1][1] if i + 1 < len(paragraphs) else ""])
        if DATE.search(near) and COMMAND.search(near):
            continue
        title, _, section = headings.partition("\n")
        if DATE.search(section) and COMMAND.search(sections[headings]):
            continue
        if DATE.search(title) and COMMAND.search(text):  # the whole document reports one dated measurement
            continue
        wrong.append(f"{doc.name}:{line}: {figures}")
    return wrong


def test_every_generated_block_is_what_the_code_prints_now():
    stale = [f"{b.path.name}:{b.line}: `{b.command}` now prints:\n{b.expected}"
             for p in gen_docs.docs() for b in gen_docs.blocks(p) if b.body != b.expected]
    assert not stale, "run `make docs`:\n" + "\n".join(stale)


def test_every_generated_marker_has_its_end():
    for p in gen_docs.docs():
        text = p.read_text()
        assert text.count("<!-- generated: ") == len(gen_docs.blocks(p)), f"{p.name}: a marker without its end"


@pytest.mark.parametrize("doc", gen_docs.docs(), ids=lambda p: p.name)
def test_every_figure_is_generated_dated_or_allowed(doc):
    wrong = undated_figures(doc)
    assert not wrong, ("figures that state a plan output must come from a generated block (tools/gen_docs.py), "
                       "or carry their measurement's date and command:\n" + "\n".join(wrong))


def test_the_allow_list_names_only_figures_the_docs_still_have():
    for reason, by_doc in ALLOWED.items():
        for doc, figures in by_doc.items():
            present = {m.group(0) for m in FIGURE.finditer((ROOT / "docs" / doc).read_text())}
            assert figures <= present, f"{doc}: {sorted(figures - present)} are gone: drop them from ALLOWED"


@pytest.mark.parametrize("preset", sorted((ROOT / "workloads" / "presets").glob("*.yaml")), ids=lambda p: p.name)
def test_the_presets_comments_state_no_plan_figure(preset):
    comments = [line.split("#", 1)[1] for line in preset.read_text().splitlines() if "#" in line]
    figures = [m.group(0) for c in comments for m in FIGURE.finditer(c)]
    assert not figures, f"{preset.name}'s comments state {figures}: say `plan {preset.stem}` shows them"


def test_the_check_fails_on_a_figure_the_plan_no_longer_prints(tmp_path, monkeypatch):
    """The mechanism itself: a block quoting yesterday's figure is reported, and regenerating fixes it."""
    doc = tmp_path / "plan.md"
    block = "<!-- generated: python -m workloads plan huge | grep 'summary:' -->\n\n    $ old\n    32% less\n\n<!-- end -->\n"
    doc.write_text("Text.\n\n" + block)
    monkeypatch.setattr(gen_docs, "docs", lambda: [doc])
    monkeypatch.setattr(gen_docs, "ROOT", tmp_path)
    assert gen_docs.main(["--check"]) == 1
    assert gen_docs.main([]) == 0 and gen_docs.main(["--check"]) == 0
    assert "summary: train on" in doc.read_text()
