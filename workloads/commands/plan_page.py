"""`python -m workloads plan WORKLOAD --html FILE`: the plan as one self-contained page that opens offline: the
summary, charts (training candidates' cost against hours with the pick marked, the month's cost by part of the
estate, the serving fleet over a day of the stated traffic) as inline SVG drawn here, and tables with the sources as
links. No script, style sheet or font from anywhere: nothing to fetch, nothing to run. Imported only for --html, so
the plain plan stays as fast as it was."""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence

from ..planning.planner import Plan

W, H, PAD = 640, 300, 56  # each chart's size and its margin for the axes' labels
INK, GRID, PICK, BAR, COST = "#1f2937", "#d1d5db", "#dc2626", "#2563eb", "#059669"

# A day of the stated traffic, as a share of inference.requests_per_second (the peak) hour by hour. The workload
# states only the kind of traffic and its peak: these shapes are ASSUMED, said so on the page, and only drawn.
DAY_SHAPES: dict[str, Sequence[float]] = {
    "steady": [round(0.8 + 0.2 * math.cos((h - 14) / 24 * 2 * math.pi), 3) for h in range(24)],
    "spiky": [1.0 if h in (9, 13, 18) else 0.2 for h in range(24)],
    "periodic": [1.0 if 1 <= h <= 3 else 0.05 for h in range(24)],
    "rare": [1.0 if h == 12 else 0.02 for h in range(24)],
}


def _e(text: object) -> str:
    return html.escape(str(text))


def _usd(x: float | None) -> str:
    return "-" if x is None else f"${x:,.0f}" if x >= 100 else f"${x:,.2f}"


def _svg(title: str, body: list[str]) -> str:
    return (f'<figure><svg class="chart" role="img" aria-label="{_e(title)}" xmlns="http://www.w3.org/2000/svg" '
            f'width="{W}" height="{H}" viewBox="0 0 {W} {H}"><title>{_e(title)}</title>'
            f'<rect width="{W}" height="{H}" fill="#ffffff"/>{"".join(body)}</svg>'
            f'<figcaption>{_e(title)}</figcaption></figure>')


def _axes(x_label: str, y_label: str) -> list[str]:
    return [f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - 16}" y2="{H - PAD}" stroke="{INK}"/>',
            f'<line x1="{PAD}" y1="16" x2="{PAD}" y2="{H - PAD}" stroke="{INK}"/>',
            f'<text x="{(W + PAD) / 2}" y="{H - 12}" text-anchor="middle" font-size="12">{_e(x_label)}</text>',
            f'<text x="14" y="{H / 2}" transform="rotate(-90 14 {H / 2})" text-anchor="middle" font-size="12">'
            f'{_e(y_label)}</text>']


def _scale(values: Sequence[float], log: bool) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if log:
        lo, hi = math.log10(lo), math.log10(hi)
    return (lo, hi) if hi > lo else (lo - 1, hi + 1)


def candidates_chart(p: Plan) -> str:
    """Each training candidate with an estimate: its run's cost against its hours; the pick marked, misfits hollow."""
    rows = [c for c in p.training.candidates if c.hours and c.usd_total]
    if not rows:
        return "<p>No candidate has a time and cost estimate to chart.</p>"
    log = max(c.hours for c in rows) / min(c.hours for c in rows) > 20 or \
        max(c.usd_total for c in rows) / min(c.usd_total for c in rows) > 20
    (x0, x1), (y0, y1) = _scale([c.hours for c in rows], log), _scale([c.usd_total for c in rows], log)

    def at(c) -> tuple[float, float]:
        x, y = (math.log10(c.hours), math.log10(c.usd_total)) if log else (c.hours, c.usd_total)
        return PAD + (x - x0) / (x1 - x0) * (W - PAD - 130), H - PAD - (y - y0) / (y1 - y0) * (H - PAD - 40)
    body = _axes("hours a run" + (" (log)" if log else ""), "cost of the run, USD" + (" (log)" if log else ""))
    shown = (lambda v: 10 ** v) if log else (lambda v: v)
    body += [f'<text x="{PAD}" y="{H - PAD + 14}" font-size="10">{shown(x0):.3g} h</text>',
             f'<text x="{W - 130}" y="{H - PAD + 14}" text-anchor="end" font-size="10">{shown(x1):.3g} h</text>',
             f'<text x="{PAD - 4}" y="{H - PAD}" text-anchor="end" font-size="10">{_usd(shown(y0))}</text>',
             f'<text x="{PAD - 4}" y="44" text-anchor="end" font-size="10">{_usd(shown(y1))}</text>']
    for c in rows:
        x, y = at(c)
        chosen = c.instance_type == p.training.instance_type and c.count == p.training.instance_count
        body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{8 if chosen else 5}" fill="{PICK if chosen else BAR if c.feasible else "none"}" '
                    f'stroke="{PICK if chosen else BAR}" stroke-width="2"><title>{_e(c.instance_type)} x{c.count}: '
                    f'{c.hours:.3g} h, {_usd(c.usd_total)}{"" if c.feasible else " (does not fit: " + _e(c.why) + ")"}'
                    f'</title></circle>')
        body.append(f'<text x="{x + 9:.1f}" y="{y - 6:.1f}" font-size="10" fill="{INK}">{_e(c.instance_type)}'
                    f'{" (pick)" if chosen else ""}</text>')
    return _svg("Training candidates: cost of a run against its hours (red: the pick; hollow: does not fit)", body)


def _bars(title: str, items: Sequence[tuple[str, float]], unit: str = "USD a month") -> str:
    items = [(k, v) for k, v in items if v > 0]
    if not items:
        return f"<p>{_e(title)}: nothing to chart.</p>"
    top, row = max(v for _, v in items), (H - 40) / len(items)
    body = [f'<text x="{W - 16}" y="14" text-anchor="end" font-size="11">{_e(unit)}</text>']
    for i, (label, value) in enumerate(items):
        y, width = 24 + i * row, max(1.0, value / top * (W - 260))
        body += [f'<text x="196" y="{y + row * 0.6:.1f}" text-anchor="end" font-size="11">{_e(label[:32])}</text>',
                 f'<rect x="200" y="{y + 2:.1f}" width="{width:.1f}" height="{max(4.0, row - 6):.1f}" fill="{BAR}">'
                 f'<title>{_e(label)}: {_usd(value)}</title></rect>',
                 f'<text x="{204 + width:.1f}" y="{y + row * 0.6:.1f}" font-size="11">{_usd(value)}</text>']
    return _svg(title, body)


def month_chart(p: Plan) -> str:
    m = p.monthly
    if m is None:
        return "<p>No monthly estimate.</p>"
    parts = [("one training run", m.training_run_usd or 0.0)] + [(line.item, line.usd) for line in m.lines]
    return _bars("The month's cost by part of the estate (one training run plus a month of the rest)",
                 sorted(parts, key=lambda kv: -kv[1])[:14])


def day_fleet(p: Plan) -> tuple[str, list[tuple[int, float, int, float]]] | None:
    """(kind, [(hour, requests/s, instances, USD that hour)]) for the first instance-hosted endpoint of the plan."""
    for kind in ("realtime", "async"):
        ip = p.inference.get(kind)
        if ip is None or not ip.requests_per_second_per_instance or ip.usd_per_hour_min is None:
            continue
        per_instance = ip.usd_per_hour_min / max(ip.min_instances, 1) if ip.min_instances else \
            (ip.usd_per_hour_max or 0) / max(ip.max_instances, 1)
        peak = p.workload.inference.requests_per_second
        hours = []
        for h, share in enumerate(DAY_SHAPES[p.workload.inference.traffic]):
            rps = peak * share
            n = min(ip.max_instances, max(ip.min_instances, math.ceil(rps / ip.requests_per_second_per_instance)))
            hours.append((h, rps, n, n * per_instance))
        return kind, hours
    return None


def day_chart(p: Plan) -> str:
    fleet = day_fleet(p)
    if fleet is None:
        return "<p>No instance-hosted endpoint (real-time or async) to chart over a day.</p>"
    kind, hours = fleet
    top_n, top_usd = max(n for _, _, n, _ in hours), max(u for *_, u in hours) or 1
    step = (W - PAD - 40) / 24
    body = _axes("hour of the day (UTC)", "instances (bars) / USD an hour (line)")
    points = []
    for h, rps, n, usd in hours:
        height = n / max(top_n, 1) * (H - PAD - 40)
        body.append(f'<rect x="{PAD + h * step + 1:.1f}" y="{H - PAD - height:.1f}" width="{step - 2:.1f}" '
                    f'height="{height:.1f}" fill="{BAR}"><title>{h:02d}:00 {rps:,.1f} req/s: {n} instance(s), '
                    f'{_usd(usd)}</title></rect>')
        points.append(f"{PAD + (h + 0.5) * step:.1f},{H - PAD - usd / top_usd * (H - PAD - 40):.1f}")
    body.append(f'<polyline points="{" ".join(points)}" fill="none" stroke="{COST}" stroke-width="3"/>')
    low, high = min(hours, key=lambda x: x[2]), max(hours, key=lambda x: x[2])
    body.append(f'<text x="{W - 16}" y="14" text-anchor="end" font-size="11">min {low[2]} ({_usd(low[3])}/h), '
                f'peak {high[2]} ({_usd(high[3])}/h)</text>')
    return _svg(f"The {kind} fleet over a day of {p.workload.inference.traffic} traffic peaking at "
                f"{p.workload.inference.requests_per_second:g} req/s (shape assumed)", body)


def _link(source: str) -> str:
    """'title <url>, checked date' as a link; text as it is otherwise."""
    m = re.search(r"<(https?://[^>]+)>", source) or re.search(r"(https?://\S+)", source)
    if not m:
        return _e(source)
    url = m.group(1).rstrip(").,")
    label = source.replace(m.group(0), "").strip(" ,") or url
    return f'<a href="{_e(url)}">{_e(label)}</a>'


def _table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    return ("<table><thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr></thead><tbody>"
            + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows) + "</tbody></table>")


def page(p: Plan) -> str:
    w, t, m = p.workload, p.training, p.monthly
    summary = [("workload", w.name), ("region", f"{w.region} ({w.availability_zone})"),
               ("training", f"{t.instance_count} x {t.instance_type} ({t.orchestrator}), "
                            f"{t.estimate.hours:.3g} h" if t.estimate.hours else f"{t.instance_count} x {t.instance_type}"),
               ("endpoints", ", ".join(f"{k}: {ip.instance_type or 'serverless'}" for k, ip in p.inference.items())
                or "none (training only)"),
               ("a month", _usd(m.headline_usd if m and m.headline_usd is not None else m.usd_month if m else None))]
    cands = _table(["type", "nodes", "accelerators", "$/h", "hours", "cost", "fits", "why"],
                   [[_e(c.instance_type), str(c.count), _e(c.accelerators), _usd(c.usd_per_hour),
                     f"{c.hours:.3g}" if c.hours else "-", _usd(c.usd_total), "yes" if c.feasible else "no", _e(c.why)]
                    for c in t.candidates])
    lines = _table(["item", "USD a month", "quantity", "price", "source"],
                   [[_e(x.item), _usd(x.usd), _e(x.quantity), _e(x.price),
                     _link(m.sources.get(x.source, x.source)) if m else _e(x.source)] for x in (m.lines if m else ())])
    serving = _table(["kind", "instance", "min", "max", "req/s an instance", "$/h min", "why"],
                     [[_e(k), _e(ip.instance_type or "-"), str(ip.min_instances), str(ip.max_instances),
                       f"{ip.requests_per_second_per_instance:,.1f}" if ip.requests_per_second_per_instance else "-",
                       _usd(ip.usd_per_hour_min), _e(ip.reason)] for k, ip in p.inference.items()])
    findings = _table(["level", "field", "says", "source"],
                      [[_e(f.level), _e(f.field), _e(f.message), _link(f.source)] for f in p.findings])
    fleet = day_fleet(p)
    shape = ("<p>The day's shape is assumed from <code>inference.traffic</code> (" + _e(w.inference.traffic)
             + "), a share of the peak each hour; the instances follow the plan's throughput an instance, between its "
             "minimum and maximum.</p>") if fleet else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Plan: {_e(w.name)}</title>
<style>
body {{ font-family: sans-serif; color: {INK}; max-width: 1100px; margin: 2em auto; padding: 0 1em; }}
table {{ border-collapse: collapse; margin: 1em 0; font-size: 13px; }}
th, td {{ border: 1px solid {GRID}; padding: 3px 6px; text-align: left; vertical-align: top; }}
figure {{ margin: 1em 0; }} figcaption {{ font-size: 13px; }} dt {{ font-weight: bold; }}
</style></head><body>
<h1>Plan: {_e(w.name)}</h1>
<dl>{"".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in summary)}</dl>
<h2>Training</h2>{candidates_chart(p)}{cands}
<h2>A month</h2>{month_chart(p)}{lines}<p>{_e(m.note) if m else ""}</p>
<h2>Serving</h2>{day_chart(p)}{shape}{serving}
<h2>Warnings and notes</h2>{findings}
<p>Written by <code>python -m workloads plan {_e(w.name)} --html</code>; every figure is the plan's, as
<code>python -m workloads plan --json</code> prints it.</p>
</body></html>
"""


def write(p: Plan, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(page(p))
