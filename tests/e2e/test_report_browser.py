"""Reports open in a real browser: every chart renders, the console stays clean, nothing is
fetched (the report works offline), and at 1400 px no two text elements of a chart sit on top
of each other (tick labels, rule labels, legends, heatmap labels) and no legend cuts its
entries ("…3 entries") or their labels ("t1.mail.d…"); Vega logs its own problems on the
console, so a warning there fails too.

Drives Debian's headless Chromium (/usr/bin/chromium; `make test` installs it through
scripts/system-deps.sh) with Playwright's Python API, never a browser Playwright downloads.

One report of every kind (report_kinds.py): run, tiles, scale (and one repeated with its
confirmations), knob, repeat, sweep, matrix, curve, compare (runs and sweeps), targets, array
and attached (counters of three kinds, and 14 of one kind), trace. Each is built once and
opened once, at 1400 px, for both kinds of check (`seen`). Both kinds live in this one module
so that `make test` (`--dist loadfile`) builds the reports once, in one worker, while the other
worker runs other files.

Screenshots, when asked for: with TILEMARK_TEST_ARTIFACTS=DIR the full page of every report
checked for rendering (its path printed, for a person to look at); with
TILEMARK_SCREENSHOTS=DIR the top of each report at 1400 px as report-KIND.png
(docs/screenshots/ holds the committed ones: `make screenshots`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .conftest import RENDER_TIMEOUT_MS
from .report_kinds import SharedReports

pytestmark = [pytest.mark.browser, pytest.mark.cost(95)]


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> SharedReports:
    """`reports[kind]`: that kind's HTML report, built by the first test that asks for it."""
    return SharedReports(tmp_path_factory.mktemp("reports"))


# ---------------------------------------------------------------------------------------------
# every chart renders, offline


def _artifacts() -> Path | None:
    """Where screenshots of the checked reports go: $TILEMARK_TEST_ARTIFACTS, or nowhere (a
    full-page screenshot costs half a page load, and nobody looks in a passing test's
    tmp_path)."""
    where = os.environ.get("TILEMARK_TEST_ARTIFACTS")
    if not where:
        return None
    Path(where).mkdir(parents=True, exist_ok=True)
    return Path(where)


@pytest.fixture(scope="module")
def seen(browser, reports):
    """`seen(kind)`: what the browser showed of that kind's report (visit), each report opened
    once at 1400 px for both the render checks and the layout checks."""
    visits: dict[str, dict] = {}

    def look(kind: str) -> dict:
        if kind not in visits:
            visits[kind] = visit(browser, reports[kind], kind, VIEWPORT)
        return visits[kind]

    return look


@pytest.mark.parametrize(
    "kind",
    ["run", "tiles", "scale", "repeated", "knob", "compare", "sweep", "matrix", "curve",
     "compare-sweep", "targets", "attached"],
)  # fmt: skip
def test_report_renders_every_chart_without_console_errors(seen, reports, kind):
    assert_renders(seen(kind))
    if kind == "targets":
        html = reports[kind].read_text()
        for figure in ("targets-iops", "targets-mbps", "targets-latency"):
            assert f'id="chart-{figure}"' in html, figure
        assert "check starts" in html and "check stops" in html


def test_attached_counters_offer_a_picker_and_the_front_end_table(seen):
    page = seen("attached")  # the page the render check opened: the same report, once
    (counters,) = [c for c in page["boxes"] if c["id"] == "chart-array-counters"]
    assert counters["width"] > 0 and counters["height"] > 0, "the counters chart rendered"
    text = page["text"]
    assert "Storage counters (attached)" in text
    assert "Front end (tilemark) vs the storage's counters, measurement phase" in text
    assert "FA 13 IOPS" in text  # the 14th counter: in the tables and the picker
    assert len(page["pickers"]["chart-array-counters"]) == 14


CHART_BOXES_JS = """Array.from(document.querySelectorAll('.chart')).map(e => {
     const g = e.querySelector('svg, canvas');
     const r = g ? g.getBoundingClientRect() : {width: 0, height: 0};
     return {id: e.id, width: r.width, height: r.height, text: e.textContent};
   })"""


# The entries of each chart's drop-down pickers, by chart id.
PICKERS_JS = """Object.fromEntries(Array.from(document.querySelectorAll('.chart')).map(e => [
     e.id,
     Array.from(e.querySelectorAll('.vega-bindings select option')).map(o => o.value)]))"""


def visit(browser, report: Path, kind: str, viewport: dict) -> dict:
    """Open a report, wait for every chart, and collect what the page shows: console warnings
    and errors and the text boxes of every chart as drawn (`console`, `charts`: the layout
    checks), then pick another entry in the first picker (a chart redraws) and collect every
    console error and page error, the drawn size of every chart and every request the page
    made (`errors`, `boxes`, `requests`: the render checks); also the page's text and the
    entries of each chart's pickers as first drawn (`text`, `pickers`). Screenshots as the
    module doc says."""
    page = browser.new_page(viewport=viewport)
    console: list[str] = []
    errors: list[str] = []

    def on_console(m) -> None:
        if m.type in ("warning", "error"):
            console.append(f"{m.type}: {m.text}")
        if m.type == "error":
            errors.append(m.text)

    def on_page_error(e) -> None:
        console.append(f"pageerror: {e}")
        errors.append(str(e))

    page.on("console", on_console)
    page.on("pageerror", on_page_error)
    # Offline: any request that is not the file itself fails the render check.
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(report.resolve().as_uri())
    page.wait_for_function(
        "Array.from(document.querySelectorAll('.chart')).every("
        "e => e.dataset.rendered || e.textContent.includes('failed'))",
        timeout=RENDER_TIMEOUT_MS,
    )
    texts = page.evaluate(TEXTS_JS)
    boxes = page.evaluate(CHART_BOXES_JS)
    body = page.inner_text("body")
    pickers = page.evaluate(PICKERS_JS)
    shots = os.environ.get("TILEMARK_SCREENSHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        height = min(SCREENSHOT_HEIGHT, page.evaluate("document.body.scrollHeight"))
        clip = {"x": 0, "y": 0, "width": viewport["width"], "height": height}
        page.screenshot(path=str(Path(shots) / f"report-{kind}.png"), clip=clip, full_page=True)
    layout_console = list(console)
    # A chart with a stream picker redraws when another stream is picked.
    picker = page.query_selector(".vega-bindings select")
    if picker is not None:
        options = picker.eval_on_selector_all("option", "os => os.map(o => o.value)")
        picker.select_option(options[-1])
        page.wait_for_timeout(200)
    where = _artifacts()
    if where is not None:
        shot = where / f"report-{kind}.png"
        page.screenshot(path=str(shot), full_page=True)
        print(f"screenshot: {shot}")
    page.close()
    return {
        "console": layout_console,
        "charts": texts,
        "errors": errors,
        "boxes": boxes,
        "requests": requests,
        "text": body,
        "pickers": pickers,
    }


def assert_renders(seen: dict) -> None:
    """Every chart rendered, no console or page error, no request left the file."""
    assert seen["boxes"], "the report has no charts"
    for c in seen["boxes"]:
        assert c["width"] > 0 and c["height"] > 0, f"{c['id']} did not render: {c['text'][:200]}"
    assert seen["errors"] == []
    assert [u for u in seen["requests"] if not u.startswith("file://")] == []


def check_report(browser, report: Path, kind: str, tmp_path: Path | None = None) -> None:
    """Open a report at 1280 px: every chart renders, no console error, no request leaves
    the file (`tmp_path` is not used: screenshots go to $TILEMARK_TEST_ARTIFACTS)."""
    assert_renders(visit(browser, report, kind, {"width": 1280, "height": 900}))


def test_trace_report_renders_its_six_charts(seen, reports):
    """`tilemark trace show --html`: an imported blkparse trace's report in the browser."""
    report = reports["trace"]  # report_kinds.py: import, then trace show --html
    assert_renders(seen("trace"))
    html = report.read_text()
    for figure in ("throughput", "read-share", "outstanding", "sizes", "lba", "interarrival"):
        assert f'id="chart-{figure}"' in html, figure


# ---------------------------------------------------------------------------------------------
# every report kind reads cleanly at 1400 px


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


@pytest.mark.parametrize("kind", KINDS)
def test_every_report_kind_reads_cleanly_at_1400_px(seen, kind):
    page = seen(kind)
    assert page["console"] == [], page["console"]
    assert page["charts"], "the report has no charts"
    problems = []
    for chart in page["charts"]:
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
