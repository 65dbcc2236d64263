"""`python -m workloads plan WORKLOAD --html FILE` (issue 43): one self-contained page that opens offline, with the
summary, the charts (training candidates with the pick, the month by part, the serving fleet over a day) and tables
with the sources as links; the plain plan never imports it. Rendered in headless Chromium where it is installed
(`make test` installs Debian's package, allowed to fail): the charts must have drawn, read from the screenshot."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from workloads import load, plan
from workloads.commands import plan_page
from workloads.commands.cli import main

from .conftest import ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def huge_page(tmp_path_factory):
    path = tmp_path_factory.mktemp("page") / "huge.html"
    assert main(["plan", "huge", "--html", str(path)]) == 0
    return path


def test_the_page_is_self_contained_and_has_every_part(huge_page):
    text = huge_page.read_text()
    assert not re.search(r"<(?:script|link|img|iframe)\b", text)  # nothing to fetch or run
    assert not re.search(r"""src=|@import|url\(""", text)
    assert text.count('<svg class="chart"') == 3
    p = plan(load("huge"))
    assert p.training.instance_type in text and "(pick)" in text
    assert all(line.item in text for line in p.monthly.lines)
    assert re.search(r'<a href="https://[^"]+">', text)  # sources as links
    assert "min " in text and "peak " in text


def test_the_pick_is_marked_once_and_every_candidate_with_an_estimate_is_a_point():
    p = plan(load("intermediate"))
    svg = plan_page.candidates_chart(p)
    assert svg.count("(pick)") == 1
    assert svg.count("<circle") == sum(1 for c in p.training.candidates if c.hours and c.usd_total)


@pytest.mark.parametrize("traffic", sorted(plan_page.DAY_SHAPES))
def test_the_days_fleet_stays_within_the_endpoints_bounds_and_peaks_at_the_peak(traffic):
    p = plan(load("intermediate", {"inference.traffic": traffic}))
    fleet = plan_page.day_fleet(p)
    if fleet is None:
        pytest.skip(f"{traffic}: the plan has no instance-hosted endpoint")
    kind, hours = fleet
    ip = p.inference[kind]
    assert len(hours) == 24 and all(ip.min_instances <= n <= ip.max_instances for _, _, n, _ in hours)
    assert max(rps for _, rps, _, _ in hours) == pytest.approx(p.workload.inference.requests_per_second)


def test_the_plain_plan_never_imports_the_page():
    code = ("import sys; from workloads.commands.cli import main; main(['plan', 'small', '--json']); "
            "print('plan_page' in ' '.join(sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True).stdout
    assert out.strip().endswith("False")


def test_an_unwritable_file_is_one_line(capsys, tmp_path):
    assert main(["plan", "small", "--html", str(tmp_path / "no" / "such" / "dir.html")]) == 2
    assert "error: --html = " in capsys.readouterr().err


@pytest.mark.e2e  # Chromium renders the page: make test-e2e (CI)
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (make test installs it with apt-get; "
                    "without root or apt the rendering is not checked)")
def test_the_charts_draw_in_a_browser(huge_page, tmp_path):
    Image = pytest.importorskip("PIL.Image", reason="Pillow reads the screenshot")

    shot = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1200,2600", f"--screenshot={shot}", huge_page.as_uri()],
                   check=True, capture_output=True, timeout=120)
    image = Image.open(shot).convert("RGB")
    # The charts' own colours: the candidates' points and the bars are blue, the pick red, the cost line green.
    counts = {name: 0 for name in ("pick", "bar", "cost")}
    want = {"pick": plan_page.PICK, "bar": plan_page.BAR, "cost": plan_page.COST}
    rgb = {k: tuple(int(v[i:i + 2], 16) for i in (1, 3, 5)) for k, v in want.items()}
    for pixel in image.getdata():
        for name, colour in rgb.items():
            if all(abs(a - b) <= 24 for a, b in zip(pixel, colour)):
                counts[name] += 1
    assert counts["pick"] > 50 and counts["bar"] > 2000 and counts["cost"] > 100, counts


def test_the_terminal_plan_colours_only_what_the_plan_marks():
    """Rich's highlighter coloured digits at random (the "2" of us-east-2): a terminal plan's only colours are the
    plan's own styles (the pick in green, headings bold, detail dim)."""
    import io

    from rich.console import Console

    from workloads.commands import report

    out = io.StringIO()
    # The plan's own console, forced to colour as a terminal would.
    forced = Console(file=out, force_terminal=True, color_system="standard", width=150,
                     highlight=report._console()._highlight)
    report.print_plan(plan(load("huge")), forced)
    text = out.getvalue()
    assert "us-east-2" in text and not re.search(r"us-east-\x1b\[", text)  # no escape inside the region's name
    assert not re.search(r"\x1b\[[0-9;]*m\d", text.split("Training candidates")[0].split("summary:")[0]), \
        "a digit in the header coloured"
