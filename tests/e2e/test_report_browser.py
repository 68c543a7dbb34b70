"""Reports open in a real browser: every chart renders, the console stays clean, offline.

Drives Debian's headless Chromium (/usr/bin/chromium; `make test` installs it through
scripts/system-deps.sh) with Playwright's Python API, never a browser Playwright downloads.
Screenshots go to $TILEMARK_TEST_ARTIFACTS (default: the test's tmp_path) and their paths are
printed, so a person can look at what the report shows.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from report_runs import simple_plan, write_knob_study, write_run, write_study, write_tile_run
from tilemark.cli import main
from tilemark.report import HtmlExporter, build_report
from tilemark.report.data import load_source

pytestmark = [pytest.mark.browser]

from .conftest import RENDER_TIMEOUT_MS  # noqa: E402


def attach_counters(root: Path, run: Path, where: Path, counters: int) -> None:
    """Attach `counters` columns of storage counters, a sample every 0.5 s, to a stored run
    (more than a chart draws as lines: the report offers a drop-down)."""
    started = json.loads((run / "run.json").read_text())["result"]["started_at_ns"]
    lines = ["epoch," + ",".join(f"FA {k} IOPS" for k in range(counters))]
    for i in range(1, 21):
        t = started / 1e9 + i * 0.5
        lines.append(f"{t:.3f}," + ",".join(str(100 * k + i) for k in range(counters)))
    (where / "array.csv").write_text("\n".join(lines) + "\n")
    assert main(["attach", str(run), str(where / "array.csv"), "--results", str(root)]) == 0


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("results")
    out = tmp_path_factory.mktemp("reports")
    tile_run, _ = write_tile_run(root, 2)
    study = write_study(tmp_path_factory.mktemp("study"), (1, 2, 3), latency_per_tile=5.0)
    repeated = write_study(
        tmp_path_factory.mktemp("repeated"), (1, 2, 3), latency_per_tile=5.0, confirm_runs=1,
        repeat=2,
    )  # fmt: skip
    knob = write_knob_study(tmp_path_factory.mktemp("knob"))
    plan = simple_plan(("randrw", "seq"))
    base = write_run(root, plan)
    faster = write_run(root, plan, scale=2.0, latency=0.5)
    attached = write_run(root, plan, seed=5)
    attach_counters(root, attached, tmp_path_factory.mktemp("csv"), counters=14)
    paths = {}
    sources = [
        ("run", base), ("tiles", tile_run), ("study", study), ("repeated", repeated),
        ("knob", knob), ("attached", attached),
    ]  # fmt: skip
    for name, source in sources:
        paths[name] = out / f"{name}.html"
        HtmlExporter().export(build_report(load_source(source)), paths[name])
    paths["compare"] = out / "compare.html"
    assert main(["compare", str(base), str(faster), "-o", str(paths["compare"])]) == 0
    # A run on two targets with a phased stream: the per-target section and phase rules.
    targets_root = tmp_path_factory.mktemp("targets")
    workload = targets_root / "w.toml"
    workload.write_text(
        f'target = ["a={targets_root / "a.dat"}", "b={targets_root / "b.dat"}"]\n'
        'size = "4m"\nduration = "1s"\ninterval = "0.1s"\nbackend = "null"\n'
        '[[stream]]\nname = "load"\nrw = "randrw"\n'
        '[[stream]]\nname = "check"\ntarget = "b"\nstart = "0.3s"\nstop = "0.7s"\n'
    )
    assert main(["run", str(workload), "--results", str(targets_root / "r")]) == 0
    (targets_run,) = [p for p in (targets_root / "r").iterdir() if (p / "run.json").is_file()]
    paths["targets"] = out / "targets.html"
    HtmlExporter().export(build_report(load_source(targets_run)), paths["targets"])
    # Studies of one workload's parameters, run on the null backend (no storage IO).
    points_root = tmp_path_factory.mktemp("points")
    fast = ["--target", str(points_root / "t.dat"), "--size", "4m", "--backend", "null",
            "--duration", "0.2", "--interval", "0.1", "--results", str(points_root / "r"),
            "--no-report"]  # fmt: skip
    for kind, args in (
        ("sweep", ["--bs", "4k,64k", "--qd", "1,2"]),
        ("matrix", ["--small-qd", "1,2", "--large-streams", "0,1"]),
        ("curve", ["--max-qd", "2", "--loads", "0.1,0.2", "--slo", "p99<=1ms"]),
    ):
        studies = points_root / "r" / "studies"
        before = set(studies.iterdir()) if studies.is_dir() else set()
        assert main([kind, *args, *fast]) in (0, 3)
        (study,) = set(studies.iterdir()) - before
        paths[kind] = out / f"{kind}.html"
        HtmlExporter().export(build_report(load_source(study)), paths[kind])
        if kind == "sweep":  # a second sweep of the same definition, compared point by point
            assert main([kind, *args, *fast]) == 0
            (again,) = set(studies.iterdir()) - before - {study}
            paths["compare-sweep"] = out / "compare-sweep.html"
            cmd = ["compare", str(study), str(again), "-o", str(paths["compare-sweep"])]
            assert main(cmd) == 0
    return paths


def _artifacts(tmp_path: Path) -> Path:
    where = Path(os.environ.get("TILEMARK_TEST_ARTIFACTS") or tmp_path)
    where.mkdir(parents=True, exist_ok=True)
    return where


@pytest.mark.parametrize(
    "kind",
    [
        "run",
        "tiles",
        "study",
        "repeated",
        "knob",
        "compare",
        "sweep",
        "matrix",
        "curve",
        "compare-sweep",
        "targets",
        "attached",
    ],
)
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


def test_trace_report_renders_its_six_charts(browser, tmp_path):
    """`tilemark trace show --html`: an imported blkparse trace's report in the browser."""
    from test_trace_import import blkparse_sample

    src = tmp_path / "sdb.txt"
    src.write_text(blkparse_sample())
    trace, report = tmp_path / "t.trace", tmp_path / "trace.html"
    assert main(["trace", "import", str(src), "-o", str(trace)]) == 0
    assert main(["trace", "show", str(trace), "--html", str(report)]) == 0
    check_report(browser, report, "trace", tmp_path)
    html = report.read_text()
    for figure in ("throughput", "read-share", "outstanding", "sizes", "lba", "interarrival"):
        assert f'id="chart-{figure}"' in html, figure
