"""Reports open in a real browser: every chart renders, the console stays clean, offline.

Drives Debian's headless Chromium (/usr/bin/chromium; `make test` installs it through
scripts/system-deps.sh) with Playwright's Python API, never a browser Playwright downloads.
Screenshots go to $TILEMARK_TEST_ARTIFACTS (default: the test's tmp_path) and their paths are
printed, so a person can look at what the report shows.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser]

from .conftest import RENDER_TIMEOUT_MS  # noqa: E402


@pytest.fixture(scope="module")
def reports(shared_reports):
    """The HTML report of every kind (report_kinds.py), shared with test_report_layout.py."""
    return shared_reports


def _artifacts(tmp_path: Path) -> Path:
    where = Path(os.environ.get("TILEMARK_TEST_ARTIFACTS") or tmp_path)
    where.mkdir(parents=True, exist_ok=True)
    return where


# The kinds only this module opens first, then the others in the opposite order to
# test_report_layout.py's: when both modules run at once (two workers), each builds its own.
@pytest.mark.parametrize(
    "kind",
    ["targets", "attached", "repeated", "compare-sweep", "curve", "matrix", "sweep", "compare",
     "knob", "scale", "tiles", "run"],
)  # fmt: skip
def test_report_renders_every_chart_without_console_errors(browser, reports, kind, tmp_path):
    check_report(browser, reports[kind], kind, tmp_path)
    if kind == "targets":
        html = reports[kind].read_text()
        for figure in ("targets-iops", "targets-mbps", "targets-latency"):
            assert f'id="chart-{figure}"' in html, figure
        assert "check starts" in html and "check stops" in html


def test_attached_counters_offer_a_picker_and_the_front_end_table(browser, reports):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(reports["attached"].resolve().as_uri())
    page.wait_for_function(
        "document.querySelector('#chart-array-counters')?.dataset.rendered",
        timeout=RENDER_TIMEOUT_MS,
    )
    text = page.inner_text("body")
    assert "Storage counters (attached)" in text
    assert "Front end (tilemark) vs the storage's counters, measurement phase" in text
    assert "FA 13 IOPS" in text  # the 14th counter: in the tables and the picker
    options = page.eval_on_selector_all(
        "#chart-array-counters .vega-bindings select option", "os => os.map(o => o.value)"
    )
    assert len(options) == 14
    page.close()


def check_report(browser, report: Path, kind: str, tmp_path: Path) -> None:
    """Open a report: every chart renders, no console error, no request leaves the file;
    a screenshot is kept."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    # Offline: any request that is not the file itself fails the test.
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(report.resolve().as_uri())
    page.wait_for_function(
        "Array.from(document.querySelectorAll('.chart')).every("
        "e => e.dataset.rendered || e.textContent.includes('failed'))",
        timeout=RENDER_TIMEOUT_MS,
    )
    charts = page.evaluate(
        """Array.from(document.querySelectorAll('.chart')).map(e => {
             const g = e.querySelector('svg, canvas');
             const r = g ? g.getBoundingClientRect() : {width: 0, height: 0};
             return {id: e.id, width: r.width, height: r.height, text: e.textContent};
           })"""
    )
    assert charts, "the report has no charts"
    for c in charts:
        assert c["width"] > 0 and c["height"] > 0, f"{c['id']} did not render: {c['text'][:200]}"
    # A chart with a stream picker redraws when another stream is picked.
    picker = page.query_selector(".vega-bindings select")
    if picker is not None:
        options = picker.eval_on_selector_all("option", "os => os.map(o => o.value)")
        picker.select_option(options[-1])
        page.wait_for_timeout(200)
    assert problems == []
    assert [u for u in requests if not u.startswith("file://")] == []
    shot = _artifacts(tmp_path) / f"report-{kind}.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")
    page.close()


def test_trace_report_renders_its_six_charts(browser, shared_reports, tmp_path):
    """`tilemark trace show --html`: an imported blkparse trace's report in the browser."""
    report = shared_reports["trace"]  # report_kinds.py: import, then trace show --html
    check_report(browser, report, "trace", tmp_path)
    html = report.read_text()
    for figure in ("throughput", "read-share", "outstanding", "sizes", "lba", "interarrival"):
        assert f'id="chart-{figure}"' in html, figure
