"""Every kind of report, looked at in a real browser at 1400 px: no warning or error on the
console (Vega logs its own problems there), no two text elements of a chart on top of each
other (tick labels, rule labels, legends, heatmap labels), and no legend that cuts its entries
("…3 entries") or their labels ("t1.mail.d…").

One report of each kind: run, tiles, scale, knob, repeat, sweep, matrix, curve, compare (runs
and sweeps), array (attached counters of three kinds) and trace. Runs and point studies run on
the null backend (no storage IO, the host's telemetry as usual), the scaling studies are
synthetic (tests/report_runs.py), so the module takes seconds. With TILEMARK_SCREENSHOTS=DIR
the top of each report is saved there as report-KIND.png (docs/screenshots/ holds the
committed ones: `make screenshots`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from report_runs import write_knob_study, write_study
from tilemark.cli import main
from tilemark.report import HtmlExporter, build_report
from tilemark.report.data import load_source

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


def _new_study(results: Path, args: list[str]) -> Path:
    studies = results / "studies"
    before = set(studies.iterdir()) if studies.is_dir() else set()
    assert main(args) in (0, 3), args
    (study,) = set(studies.iterdir()) - before
    return study


def _new_run(results: Path, args: list[str]) -> Path:
    before = set(results.iterdir()) if results.is_dir() else set()
    assert main([*args, "--results", str(results)]) in (0, 3), args
    (run,) = [p for p in set(results.iterdir()) - before if (p / "run.json").is_file()]
    return run


def _attach_mixed_counters(results: Path, run: Path, where: Path) -> None:
    """Counters of three kinds, as an array exports them: IOs per second, a cache hit ratio
    in % and MB/s; each kind needs its own axis."""
    started = json.loads((run / "run.json").read_text())["result"]["started_at_ns"]
    lines = ["epoch,FA front-end IOPS,cache_hit_pct,backend MB/s"]
    for i in range(1, 21):
        t = started / 1e9 + i * 0.1
        lines.append(f"{t:.3f},{20000 + 100 * i},{90 + i % 5},{150 + i}")
    (where / "array.csv").write_text("\n".join(lines) + "\n")
    assert main(["attach", str(run), str(where / "array.csv"), "--results", str(results)]) == 0


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    """One HTML report of every kind (module doc)."""
    work = tmp_path_factory.mktemp("work")
    out = tmp_path_factory.mktemp("reports")
    results = work / "r"
    # Runs on the null backend (no storage IO), with the host's telemetry like any run.
    workload = work / "w.toml"
    workload.write_text(
        f'target = "{work / "t.dat"}"\nsize = "4m"\nbackend = "null"\nduration = "1s"\n'
        'warmup = "0.3s"\ninterval = "0.1s"\n'
        '[[stream]]\nname = "randrw"\nrw = "randrw"\n'
        '[[stream]]\nname = "seq"\nrw = "read"\nbs = "64k"\n'
    )
    base = _new_run(results, ["run", str(workload), "--label", "before"])
    after = _new_run(results, ["run", str(workload), "--label", "after"])
    tiles = _new_run(
        results,
        ["run", "--tiles", "2", "--target", str(work / "tiles.dat"), "--capacity", "64m",
         "--backend", "null", "--duration", "1", "--warmup", "0.3", "--interval", "0.1"],
    )  # fmt: skip
    _attach_mixed_counters(results, after, work)
    sources = {
        "run": base,
        "tiles": tiles,
        "array": after,
        # Synthetic scaling studies (report_runs.py): latency grows with the load.
        "scale": write_study(tmp_path_factory.mktemp("scale"), (1, 2, 3), latency_per_tile=5.0),
        "knob": write_knob_study(tmp_path_factory.mktemp("knob")),
    }
    paths = {}
    for kind, source in sources.items():
        paths[kind] = out / f"{kind}.html"
        HtmlExporter().export(build_report(load_source(source)), paths[kind])
    paths["compare"] = out / "compare.html"
    assert main(["compare", str(base), str(after), "-o", str(paths["compare"])]) == 0
    # Studies on the null backend: a few tenths of a second per run.
    fast = [
        "--target",
        str(work / "p.dat"),
        "--size",
        "4m",
        "--backend",
        "null",
        "--duration",
        "0.3",
        "--interval",
        "0.1",
        "--results",
        str(results),
        "--no-report",
    ]
    studies = {
        "repeat": ["repeat", "3", *fast],
        "sweep": ["sweep", "--bs", "4k,8k,16k,32k,64k,128k", "--qd", "1,2,4", *fast],
        "matrix": ["matrix", "--small-qd", "0,1,2,4", "--large-streams", "0,1,2", *fast],
        "curve": ["curve", "--max-qd", "4", "--loads", "10,50,90", "--slo", "p99<=1ms", *fast],
    }  # fmt: skip
    made = {kind: _new_study(results, args) for kind, args in studies.items()}
    for kind, study in made.items():
        paths[kind] = out / f"{kind}.html"
        HtmlExporter().export(build_report(load_source(study)), paths[kind])
    again = _new_study(results, studies["sweep"])
    paths["compare-sweep"] = out / "compare-sweep.html"
    cmd = ["compare", str(made["sweep"]), str(again), "-o", str(paths["compare-sweep"])]
    assert main(cmd) == 0
    # An imported block trace's report (tilemark trace show --html).
    from test_trace_import import blkparse_sample

    (work / "sdb.txt").write_text(blkparse_sample())
    trace, paths["trace"] = work / "t.trace", out / "trace.html"
    assert main(["trace", "import", str(work / "sdb.txt"), "-o", str(trace)]) == 0
    assert main(["trace", "show", str(trace), "--html", str(paths["trace"])]) == 0
    return paths


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
