"""Every kind of report, looked at in a real browser at 1400 px: no warning or error on the
console (Vega logs its own problems there), no two text elements of a chart on top of each
other (tick labels, rule labels, legends, heatmap labels), and no legend that cuts its entries
("…3 entries") or their labels ("t1.mail.d…").

One report of each kind: run, tiles, scale, knob, repeat, sweep, matrix, curve, compare (runs
and sweeps), array (attached counters of three kinds) and trace, built once per session for
this module and test_report_browser.py (report_kinds.py: runs and point studies on the null
backend, synthetic scaling studies). With TILEMARK_SCREENSHOTS=DIR the top of each report is
saved there as report-KIND.png (docs/screenshots/ holds the committed ones: `make
screenshots`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .conftest import RENDER_TIMEOUT_MS

pytestmark = [pytest.mark.browser]

VIEWPORT = {"width": 1400, "height": 1000}
SCREENSHOT_HEIGHT = 1600  # the top of a report: its verdict and first charts
KINDS = (
    "run", "tiles", "scale", "knob", "repeat", "sweep", "matrix", "curve", "compare",
    "compare-sweep", "array", "trace",
)  # fmt: skip

# Text boxes (in the page, px) overlap when they share more than this in both directions:
# glyph boxes of neighbouring labels may touch.
OVERLAP_PX = 1.5

# Every text element of every chart: its text, box, and whether it sits in a legend.
TEXTS_JS = """
Array.from(document.querySelectorAll('.chart')).map(chart => ({
  id: chart.id,
  texts: Array.from(chart.querySelectorAll('svg text')).filter(t => {
      const s = getComputedStyle(t);
      const o = parseFloat(t.getAttribute('opacity') ?? s.opacity ?? '1');
      const fo = parseFloat(t.getAttribute('fill-opacity') ?? '1');
      return t.textContent.trim() && s.display !== 'none' && s.visibility !== 'hidden'
        && o > 0 && fo > 0;
    }).map(t => {
      const r = t.getBoundingClientRect();
      return {text: t.textContent, x: r.left, y: r.top, w: r.width, h: r.height,
              legend: !!t.closest('.role-legend'),
              title: !!t.closest('.role-title, .role-axis-title, .role-legend-title')};
    }).filter(t => t.w > 0 && t.h > 0)
}))
"""


def _overlaps(texts: list[dict]) -> list[tuple[str, str]]:
    """Pairs of text elements whose boxes overlap."""
    found = []
    for i, a in enumerate(texts):
        for b in texts[i + 1 :]:
            dx = min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"])
            dy = min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"])
            if dx > OVERLAP_PX and dy > OVERLAP_PX:
                found.append((a["text"], b["text"]))
    return found


@pytest.fixture(scope="module")
def reports(shared_reports):
    """One HTML report of every kind (report_kinds.py), shared with test_report_browser.py."""
    return shared_reports


def look_at(browser, report: Path, kind: str) -> dict:
    """Open a report at 1400 px, wait for every chart, and collect what the page shows: its
    console warnings and errors, the text boxes of every chart, and the page itself."""
    page = browser.new_page(viewport=VIEWPORT)
    console: list[str] = []
    page.on(
        "console",
        lambda m: console.append(f"{m.type}: {m.text}") if m.type in ("warning", "error") else None,
    )
    page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
    page.goto(report.resolve().as_uri())
    page.wait_for_function(
        "Array.from(document.querySelectorAll('.chart')).every("
        "e => e.dataset.rendered || e.textContent.includes('failed'))",
        timeout=RENDER_TIMEOUT_MS,
    )
    charts = page.evaluate(TEXTS_JS)
    shots = os.environ.get("TILEMARK_SCREENSHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        height = min(SCREENSHOT_HEIGHT, page.evaluate("document.body.scrollHeight"))
        clip = {"x": 0, "y": 0, "width": VIEWPORT["width"], "height": height}
        page.screenshot(path=str(Path(shots) / f"report-{kind}.png"), clip=clip, full_page=True)
    page.close()
    return {"console": console, "charts": charts}


@pytest.mark.parametrize("kind", KINDS)
def test_every_report_kind_reads_cleanly_at_1400_px(browser, reports, kind):
    seen = look_at(browser, reports[kind], kind)
    assert seen["console"] == [], seen["console"]
    assert seen["charts"], "the report has no charts"
    problems = []
    for chart in seen["charts"]:
        texts = chart["texts"]
        for a, b in _overlaps(texts):
            problems.append(f"{chart['id']}: {a!r} overlaps {b!r}")
        for t in texts:
            if t["legend"] and "…" in t["text"]:
                problems.append(f"{chart['id']}: legend cut: {t['text']!r}")
    assert problems == [], "\n".join(problems[:40])


def test_the_overlap_check_sees_overlaps():
    """The check itself: two boxes sharing 10 px each way overlap, touching ones do not."""
    a = {"text": "45", "x": 0, "y": 0, "w": 20, "h": 12}
    assert _overlaps([a, {**a, "text": "5055", "x": 10}]) == [("45", "5055")]
    assert _overlaps([a, {**a, "text": "50", "x": 21}]) == []
