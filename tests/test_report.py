"""tilemark report / compare / export: contents, offline HTML, merged percentiles, sizes."""

from __future__ import annotations

import csv
import json
import os
import re
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from report_runs import simple_plan, write_big_run, write_run, write_study, write_tile_run
from tilemark.cli import main
from tilemark.hist import Histogram
from tilemark.report import HtmlExporter, build_report
from tilemark.report import data as report_data
from tilemark.report.data import compute_series, distribution_rows, load_source, run_groups

pytestmark = [pytest.mark.cost(60)]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("results")


@pytest.fixture(scope="module")
def plain_run(results) -> Path:
    plan = simple_plan(("randrw",))
    open_loop = simple_plan(("log",), read_pct=0.0, rate=300.0)["streams"]
    plan["streams"] += open_loop
    return write_run(results, plan, intervals=12, warmup=2)


@pytest.fixture(scope="module")
def tile_run(results) -> Path:
    return write_tile_run(results, 2)[0]


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("study-results")
    # Latency grows 5x per tile: 1 and 2 tiles pass every limit, 3 tiles fail some.
    return write_study(root, (1, 2, 3), latency_per_tile=5.0)


def _html(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _specs(text: str) -> dict:
    raw = re.search(r'<script type="application/json" id="tm-specs">(.*?)</script>', text, re.S)
    return json.loads(raw.group(1).replace("<\\/", "</"))


def _assert_valid_vega_lite(report) -> None:
    """Every figure's spec passes the Vega-Lite JSON schema (Figure.spec skips that check)."""
    for figure in report.figures():
        figure.chart.to_dict(validate=True)  # raises on a spec the schema refuses


def _assert_offline(text: str) -> None:
    # No external script, stylesheet, image or frame: the file must work without network.
    external = re.findall(
        r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*[\"']?(?:https?:)?//", text
    )
    assert external == []
    assert "<script src" not in text
    assert "vegaEmbed" in text and "window.vegaEmbed" in text  # libraries inlined


def test_run_report_has_verdict_charts_environment_and_works_offline(plain_run, tmp_path):
    source = load_source(plain_run)
    report = build_report(source)
    _assert_valid_vega_lite(report)
    out = tmp_path / "r.html"
    HtmlExporter().export(report, out)
    text = _html(out)
    _assert_offline(text)
    assert report.verdict.headline in text
    assert "IOPS" in report.verdict.headline and "MB/s" in report.verdict.headline
    specs = _specs(text)
    ids = [f.id for f in report.figures()]
    assert set(ids) == set(specs)
    assert {"streams-iops", "streams-mbps", "streams-latency", "latency-distribution"} <= set(ids)
    for fig_id in ids:
        assert f'id="chart-{fig_id}"' in text
    # Provenance: environment, plan and the raw files, linked relatively.
    env = source.doc["environment"]
    assert env["hostname"] in text and "Full plan and environment" in text
    assert "&quot;plan_version&quot;: 1" in text
    for name in ("run.json", "intervals.parquet"):
        rel = os.path.relpath(plain_run / name, tmp_path)
        assert f'href="{rel}"' in text  # relative to the report, so the pair can move together
    # Open loop: service time is drawn next to response time.
    assert "p99 service" in json.dumps(specs["streams-latency"])
    # Warm-up is shaded in every time series.
    assert all('"warm-up"' in json.dumps(specs[i]) or "warm-up" in text for i in ids)


def test_tile_run_report_has_qos_table_and_application_charts(tile_run):
    report = build_report(load_source(tile_run))
    _assert_valid_vega_lite(report)
    assert report.kind == "tiles"
    assert report.verdict.criteria is not None
    criteria = [row[2].text for row in report.verdict.criteria.rows]
    assert "db read mean <= 20 ms" in criteria
    assert {c.text for row in report.verdict.criteria.rows for c in row[-1:]} <= {"pass", "FAIL"}
    ids = {f.id for f in report.figures()}
    assert {"apps-mbps", "apps-iops", "apps-latency", "apps-service"} <= ids
    apps_spec = json.dumps(next(f for f in report.figures() if f.id == "apps-mbps").spec())
    for app in ("mail", "oltp", "dss", "web", "backup"):
        assert app in apps_spec
    tables = {t.id for t in report.tables()}
    assert {"qos", "applications", "instances", "streams"} <= tables


def test_study_report_scaling_charts_with_qos_rule_and_saturation(study, tmp_path):
    source = load_source(study)
    report = build_report(source)
    _assert_valid_vega_lite(report)
    out = tmp_path / "study.html"
    HtmlExporter().export(report, out)
    text = _html(out)
    _assert_offline(text)
    doc = source.doc
    assert doc["max_passing_tiles"] is not None
    assert f"Max passing tiles: {doc['max_passing_tiles']}" in text
    specs = _specs(text)
    assert {"scaling-totals", "scaling-metric", "scaling-latency", "study-distribution"} <= set(
        specs
    )
    # Chart data are stored once per page; the figure's own spec carries them inline.
    figure = {f.id: json.dumps(f.spec()) for f in report.figures()}
    totals = figure["scaling-totals"]
    assert f"max passing {doc['max_passing_tiles']} (green)" in totals  # the subtitle
    latency = figure["scaling-latency"]
    assert '"rule"' in latency and "db_read_avg\\u00a020\\u00a0ms" in latency
    assert "Per tile count: application metrics" in text


def test_time_series_percentiles_come_from_merged_histograms(plain_run, monkeypatch):
    monkeypatch.setattr(report_data, "MAX_POINTS", 4)  # 12 intervals -> 3 per point
    run = load_source(plain_run)
    series = compute_series(run)
    assert series.intervals_per_point["total"] == 3
    rows = pq.read_table(plain_run / "intervals.parquet").to_pylist()
    point = next(r for r in series.rows["total"] if r["phase"] == "measure")
    lo, hi = point["start_s"] * 1e9, point["end_s"] * 1e9
    inside = [r for r in rows if lo <= r["start_ns"] < hi and r["op"] in ("read", "write")]
    assert len({r["interval"] for r in inside}) == 3
    response = Histogram.merged(json.loads(r["response_hist"] or r["service_hist"]) for r in inside)
    service = Histogram.merged(json.loads(r["service_hist"]) for r in inside)
    assert point["p99"] == response.percentile(99) / 1e6
    assert point["p50"] == response.percentile(50) / 1e6
    assert point["svc_p99"] == service.percentile(99) / 1e6
    assert point["mean"] == pytest.approx(response.mean() / 1e6)
    # Never an average of the stored per-row percentiles.
    averaged = sum(r["service_p99_us"] for r in inside) / len(inside) / 1e3
    assert point["svc_p99"] != pytest.approx(averaged)


def test_distribution_percentiles_come_from_merged_histograms(tile_run):
    run = load_source(tile_run)
    groups = run_groups(run)
    rows = distribution_rows(run, {"oltp": groups["oltp"]})
    p99 = next(r for r in rows if r["op"] == "read" and r["percentile"] == 99.0)
    streams = [run.result["streams"][i] for i in groups["oltp"]]
    merged = Histogram.merged(s["read"]["response"] for s in streams if s.get("read"))
    assert p99["latency_ms"] == merged.percentile(99.0) / 1e6
    assert len(groups["oltp"]) == 4  # data and redo of each of the 2 tiles


def test_downsampling_keeps_totals(plain_run, monkeypatch):
    monkeypatch.setattr(report_data, "MAX_POINTS", 5)
    monkeypatch.setattr(report_data, "STREAM_POINTS_BUDGET", 6)
    monkeypatch.setattr(report_data, "MIN_STREAM_POINTS", 3)
    series = compute_series(load_source(plain_run))
    rows = pq.read_table(plain_run / "intervals.parquet").to_pylist()
    data_rows = [r for r in rows if r["op"] in ("read", "write")]
    total_ops = sum(r["ops"] for r in data_rows)
    total_bytes = sum(r["bytes"] for r in data_rows)
    assert len(series.rows["total"]) <= 5
    for level in ("total", "stream"):
        points = series.rows[level]
        assert sum(p["ops"] for p in points) == total_ops
        assert sum(p["bytes"] for p in points) == total_bytes
        assert sum(p["iops"] * (p["end_s"] - p["start_s"]) for p in points) == pytest.approx(
            total_ops
        )
    # Bins never mix warm-up and measured intervals.
    for p in series.rows["total"]:
        inside = {
            r["phase"] for r in rows if p["start_s"] * 1e9 <= r["start_ns"] < p["end_s"] * 1e9
        }
        assert inside == {p["phase"]}


def test_long_many_stream_run_report_is_small_and_fast(tmp_path):
    # 1,500 one-second intervals (25 minutes) of 100 streams: two and a half times
    # MAX_POINTS, so every series is thinned as an hour's would be, at 40% of its cost.
    run_dir = write_big_run(tmp_path / "results", intervals=1500, streams=100)
    started = time.monotonic()
    report = build_report(load_source(run_dir))
    out = tmp_path / "big.html"
    HtmlExporter().export(report, out)
    elapsed = time.monotonic() - started
    size = out.stat().st_size
    print(f"25 min x 100 streams: report {size / 1e6:.2f} MB in {elapsed:.1f} s")
    assert size < 4_000_000
    # Its time is printed, not asserted: speed is checked by benchmarks, never by a unit test.
    text = _html(out)
    assert "streams-latency" in _specs(text)
    raw = re.search(r'<script type="application/json" id="tm-datasets">(.*?)</script>', text, re.S)
    for dataset in json.loads(raw.group(1)).values():
        if "group" in dataset["c"]:
            groups = dataset["v"][dataset["c"].index("group")]
            assert max(groups.count(g) for g in set(groups)) <= report_data.MAX_POINTS
    assert (run_dir / "intervals.parquet").stat().st_size > 0  # raw data untouched


def test_report_cli_writes_html_in_the_run_dir_and_png_svg(plain_run, results, tmp_path, capsys):
    assert main(["report", plain_run.name, "--results", str(results)]) == 0
    assert (plain_run / "report.html").is_file()
    assert "report.html" in capsys.readouterr().out
    png = tmp_path / "png"
    assert main(["report", str(plain_run), "--png", str(png)]) == 0
    report = build_report(load_source(plain_run))
    for fig in report.figures():
        assert (png / f"{fig.id}.png").read_bytes()[:4] == b"\x89PNG"
        assert "<svg" in (png / f"{fig.id}.svg").read_text()


def test_report_cli_refuses_unknown_and_ambiguous_names(results, plain_run, tile_run, capsys):
    assert main(["report", "nope", "--results", str(results)]) == 2
    assert "no run or study 'nope'" in capsys.readouterr().err
    assert main(["report", "2", "--results", str(results)]) == 2
    assert "ambiguous" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# compare


def _compare_json(args: list[str], capsys) -> dict:
    assert main(["compare", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _metric(doc: dict, name: str) -> dict:
    return next(m for m in doc["metrics"] if m["metric"] == name)


def test_compare_normalizes_exactly_to_the_baseline(tmp_path, capsys):
    root = tmp_path / "results"
    plan = simple_plan(("randrw",))
    base = write_run(root, plan, scale=1.0)
    double = write_run(root, plan, scale=2.0, latency=2.0)
    doc = _compare_json([str(base), str(double), "--baseline", str(base)], capsys)
    iops = _metric(doc, "IOPS")["runs"]
    assert iops[0]["normalized"] == 1.0 and iops[0]["change_pct"] == 0.0
    assert iops[1]["normalized"] == pytest.approx(2.0)
    assert iops[1]["change_pct"] == pytest.approx(100.0)
    assert _metric(doc, "read latency p99")["better"] == "lower"
    # The other baseline: everything relative to the second run.
    doc = _compare_json([str(base), str(double), "--baseline", str(double)], capsys)
    assert _metric(doc, "IOPS")["runs"][0]["change_pct"] == pytest.approx(-50.0)
    # Table and HTML report.
    out = tmp_path / "compare.html"
    assert main(["compare", str(base), str(double), "-o", str(out)]) == 0
    table = capsys.readouterr().out
    assert "+100.0%" in table
    text = _html(out)
    _assert_offline(text)
    assert "compare-normalized" in _specs(text)


def test_compare_refuses_different_workloads_naming_the_fields(tmp_path, capsys):
    root = tmp_path / "results"
    a = write_run(root, simple_plan(("randrw",), read_pct=70.0, bs=8192), intervals=4)
    b = write_run(root, simple_plan(("randrw",), read_pct=50.0, bs=4096), intervals=4)
    assert main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "cannot be compared" in err
    assert "block sizes (randrw: 8 KiB vs 4 KiB)" in err and "read % (randrw: 70 vs 50)" in err
    c = write_run(root, simple_plan(("log",), rate=100.0), intervals=4)
    d = write_run(root, simple_plan(("log",), rate=200.0), intervals=4)
    assert main(["compare", str(c), str(d)]) == 2
    assert "rates (log: 100 vs 200)" in capsys.readouterr().err
    e = write_run(root, simple_plan(("other",)), intervals=4)
    assert main(["compare", str(a), str(e)]) == 2
    assert "stream names" in capsys.readouterr().err


def test_compare_lists_environment_differences_without_refusing(tmp_path, capsys):
    root = tmp_path / "results"
    plan = simple_plan(("randrw",))
    hdd = write_run(root, plan, intervals=4)
    flash = write_run(root, plan, intervals=4, latency=0.1)
    doc = json.loads((flash / "run.json").read_text())
    doc["environment"]["targets"] = [
        {
            "path": "/tmp/t.dat",
            "fs_type": "xfs",
            "device": {"model": "Flash 9000", "rotational": False},
        }
    ]
    (flash / "run.json").write_text(json.dumps(doc))
    result = _compare_json([str(hdd), str(flash)], capsys)
    fields = {d["field"]: d["values"] for d in result["differences"]}
    assert fields["device"][1] == "Flash 9000"
    assert fields["filesystem"][1] == "xfs"
    assert _metric(result, "read latency mean")["runs"][1]["change_pct"] < -80


def test_compare_studies_aligns_tile_counts(study, tmp_path, capsys):
    other = write_study(tmp_path / "other", (1, 2), latency_per_tile=1.0)
    doc = _compare_json([str(study), str(other)], capsys)
    scopes = {m["scope"] for m in doc["metrics"]}
    assert "total @ 1 tiles" in scopes and "total @ 2 tiles" in scopes
    score1 = next(
        m for m in doc["metrics"] if m["metric"] == "score" and m["scope"] == "total @ 1 tiles"
    )
    assert score1["runs"][0]["normalized"] == 1.0
    assert main(["compare", str(study), str(next((study.parent.parent).glob("2*")))]) == 2
    assert "not both" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# export


def _csv_rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_export_csv_rows_match_parquet(tile_run, results, tmp_path):
    out = tmp_path / "csv"
    assert main(["export", tile_run.name, "--results", str(results), "--csv", str(out)]) == 0
    table = pq.read_table(tile_run / "intervals.parquet")
    rows = _csv_rows(out / "intervals.csv")
    assert len(rows) == table.num_rows
    assert set(rows[0]) == set(table.column_names) - {"service_hist", "response_hist"}
    doc = json.loads((tile_run / "run.json").read_text())
    streams = _csv_rows(out / "streams.csv")
    assert len(streams) == len(doc["plan"]["streams"])
    assert float(streams[0]["iops"]) == pytest.approx(doc["summary"]["streams"][0]["total"]["iops"])
    apps = _csv_rows(out / "applications.csv")
    assert [a["app"] for a in apps] == ["mail", "oltp", "dss", "web", "backup"]
    assert len(_csv_rows(out / "instances.csv")) == 10
    assert _csv_rows(out / "qos.csv")


def test_export_requires_csv_dir(plain_run, capsys):
    assert main(["export", str(plain_run)]) == 2
    assert "--csv" in capsys.readouterr().err


def test_study_report_shows_margins_every_run_and_repeats(tmp_path):
    from report_runs import write_study
    from tilemark.report import build_report
    from tilemark.report.data import load_source

    study = write_study(tmp_path, (1, 2, 3), latency_per_tile=5.0, confirm_runs=1, repeat=2)
    report = build_report(load_source(study))
    ids = [sec.id for sec in report.sections]
    assert ids[:4] == ["scaling", "repeats", "margins", "steps"]
    tables = {t.id: t for sec in report.sections for t in sec.items if hasattr(t, "rows")}
    margins = tables["margins"]
    assert margins.rows and {"value", "limit", "margin", "95% CI (ms)"} <= set(margins.columns)
    assert any(c.text.endswith("%") for row in margins.rows for c in row)
    runs = tables["steps"]
    why = [row[3].text for row in runs.rows]
    assert "confirm" in why and why.count("new") == 6  # 3 steps x 2 repeats
    assert "2 repeats: 2, 2; all agree" in report.verdict.headline
    assert any("decided at 3 tiles by" in n for n in report.verdict.notes)


def test_knob_study_report_uses_the_knob_as_its_axis(tmp_path):
    from report_runs import write_knob_study
    from tilemark.report import build_report
    from tilemark.report.data import load_source

    report = build_report(load_source(write_knob_study(tmp_path)))
    _assert_valid_vega_lite(report)
    assert report.verdict.headline.startswith("Max oltp.iops at 1 tile: ")
    # The synthetic storage's latency at 3500 straddles its limit: the answer is a range, and
    # the verdict says what was done about it.
    assert "(3500 inconclusive)" in report.verdict.headline and report.verdict.status == "warn"
    assert any("3500 was inconclusive even measured for longer" in n for n in report.verdict.notes)
    assert report.title.startswith("tilemark report: knob study")
    tables = {t.id: t for sec in report.sections for t in sec.items if hasattr(t, "rows")}
    assert tables["study-table"].columns[0] == "oltp.iops"
    assert tables["study-table"].title.startswith("Per oltp.iops value")


def test_run_report_names_io_errors_by_errno(tmp_path):
    import json

    from report_runs import simple_plan, write_run
    from tilemark.report import build_report
    from tilemark.report.data import load_source
    from tilemark.run.summary import summarize

    run_dir = write_run(tmp_path, simple_plan(("randrw",)))
    doc = json.loads((run_dir / "run.json").read_text())
    doc["result"]["streams"][0]["read"]["errors"] = {"5": 4, "28": 1}
    doc["summary"] = summarize(doc["plan"], doc["result"])
    (run_dir / "run.json").write_text(json.dumps(doc))
    report = build_report(load_source(run_dir))
    assert any("5 IOs failed (EIO 4, ENOSPC 1)" in n for n in report.verdict.notes)
    streams = next(
        t for sec in report.sections for t in sec.items if getattr(t, "id", "") == "streams"
    )
    errors = [row[streams.columns.index("errors")].text for row in streams.rows]
    assert errors[0] == "EIO 4, ENOSPC 1"


def test_warnings_are_styled_as_warnings_and_neutral_notes_are_not(tmp_path):
    from tilemark.report.base import Caution, Report, Verdict
    from tilemark.report.html import render

    verdict = Verdict("h", "info", notes=[Caution("tool-bound: host CPU 99%"), "data written"])
    html = render(Report(kind="run", title="t", verdict=verdict), tmp_path / "r.html")
    assert '<li class="warn">tool-bound: host CPU 99%</li>' in html
    assert "<li>data written</li>" in html


def test_a_passing_tile_run_that_was_tool_bound_is_amber_not_red(tmp_path):
    from report_runs import write_tile_run
    from tilemark.report import build_report
    from tilemark.report.data import load_source
    from tilemark.store.rundoc import write_json_atomic

    run_dir, _ = write_tile_run(tmp_path, 1)
    doc = json.loads((run_dir / "run.json").read_text())
    assert doc["summary"]["applications"]["passed"]
    doc["summary"]["tool_bound"] = {"tool_bound": True, "reasons": ["host CPU 99% busy"]}
    write_json_atomic(run_dir / "run.json", doc)
    verdict = build_report(load_source(run_dir)).verdict
    assert "QoS PASS" in verdict.headline and verdict.status == "warn"
    assert any(n.startswith("tool-bound: host CPU 99% busy") for n in verdict.notes)


def test_a_study_report_headline_says_what_the_answer_is_worth(tmp_path):
    from report_runs import write_study
    from tilemark.report import build_report
    from tilemark.report.base import Caution
    from tilemark.report.data import load_source
    from tilemark.store.rundoc import write_json_atomic

    study = write_study(tmp_path, (1, 2, 3), latency_per_tile=5.0)
    doc = json.loads((study / "study.json").read_text())
    assert doc["max_passing_tiles"] == 2 and doc["host_bound"] is False
    doc.update(host_bound=True, tool_bound_steps=[1, 2, 3])
    doc["first_failure"]["votes"] = {"pass": 0, "fail": 2, "noise": 0}
    write_json_atomic(study / "study.json", doc)
    verdict = build_report(load_source(study)).verdict
    assert verdict.headline.startswith("Max passing tiles: at least 2 (host-bound)")
    assert verdict.status == "warn"
    host = next(n for n in verdict.notes if "measured the host" in n)
    assert isinstance(host, Caution) and "the storage carries at least 2" in host


@pytest.mark.parametrize(
    ("sync", "words"),
    [
        ({}, "none"),
        ({"kind": "dsync"}, "dsync"),
        ({"kind": "fsync", "every": 1}, "fsync"),
        ({"kind": "fsync", "every": 8, "data": True}, "fdatasync every 8 writes"),
        ({"kind": "fsync", "every": 1, "data": True, "group": True}, "group commit (fdatasync)"),
    ],
)
def test_a_streams_sync_mode_is_described_in_words(sync, words):
    import msgspec

    from tilemark.report.format import sync_words
    from tilemark.store.results import SyncMode

    # As a plan's `sync` reads from run.json.
    assert sync_words(msgspec.convert(sync, SyncMode)) == words
