"""`tilemark trace show`: exact summary numbers on a known trace, the offline HTML report with
its six charts, --json, and refusals (docs/traces.md)."""

from __future__ import annotations

import json
import re

import pytest

from tilemark.cli import main
from tilemark.trace import show
from tilemark.trace.schema import TraceMeta, TraceWriter, open_trace
from tilemark.trace.summary import summarize, summary_lines

MS = 1_000_000
S = 1_000_000_000


def cli(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def write_trace(path, rows: list[dict], **meta) -> None:
    columns = {k: [r.get(k) for r in rows] for k in rows[0]}
    with TraceWriter(path, TraceMeta(source="synthetic", **meta)) as w:
        w.write(columns)


def known_rows() -> list[dict]:
    """10 IOs over 2.5 s: 6 reads of 4 KiB, 2 writes of 64 KiB, a flush, a discard of 1 MiB;
    two processes, two devices; latencies 100 us .. 1 ms."""
    rows = []
    for i in range(6):  # reads: 0, 0.1, ..., 0.5 s on sdb by postgres
        rows.append(
            dict(
                issue_ns=i * 100 * MS,
                op="read",
                offset=i * 4096,
                size=4096,
                pid=10,
                comm="postgres",
                device="8:16",
                sync=False,
                fua=False,
                preflush=False,
                meta=False,
                latency_ns=100_000 * (i + 1),
            )
        )
    rows += [
        dict(
            issue_ns=1 * S,
            op="write",
            offset=1 << 20,
            size=65536,
            pid=10,
            comm="postgres",
            device="8:16",
            sync=True,
            fua=True,
            preflush=False,
            meta=False,
            latency_ns=1 * MS,
        ),
        dict(
            issue_ns=1 * S + 1,
            op="write",
            offset=2 << 20,
            size=65536,
            pid=20,
            comm="jbd2/sdb-8",
            device="8:16",
            sync=True,
            fua=False,
            preflush=False,
            meta=True,
            latency_ns=500_000,
        ),
        dict(
            issue_ns=2 * S,
            op="flush",
            offset=0,
            size=0,
            pid=20,
            comm="jbd2/sdb-8",
            device="8:16",
            sync=False,
            fua=False,
            preflush=True,
            meta=False,
            latency_ns=None,
        ),
        dict(
            issue_ns=2 * S + 500 * MS,
            op="discard",
            offset=1 << 30,
            size=1 << 20,
            pid=None,
            comm=None,
            device="8:32",
            sync=False,
            fua=False,
            preflush=False,
            meta=False,
            latency_ns=200_000,
        ),
    ]
    for r in rows:
        lat = r["latency_ns"]
        r["complete_ns"] = None if lat is None else r["issue_ns"] + lat
    return rows


@pytest.fixture
def known(tmp_path):
    path = tmp_path / "known.pq"
    write_trace(path, known_rows(), events_lost=3, device="/dev/sdb", notes=["a note"])
    return path


def test_summary_numbers_are_exact(known):
    s = summarize(open_trace(known))
    assert (s.ios, s.reads, s.writes, s.flushes, s.discards) == (10, 6, 2, 1, 1)
    assert (s.bytes_read, s.bytes_written, s.bytes_discarded) == (6 * 4096, 2 * 65536, 1 << 20)
    assert s.read_share == 6 / 8
    # From the first issue to the last completion (the discard's, at 2.5002 s).
    assert s.duration_s == pytest.approx(2.5002)
    assert s.iops_mean == pytest.approx(10 / 2.5002)
    assert s.iops_peak == 6  # the six reads in second 0
    assert s.sizes[:3] == ((4096, 6), (65536, 2), (0, 1)) and s.size_count == 4
    assert s.devices == (("8:16", 9), ("8:32", 1)) and s.device_count == 2
    assert s.processes == (("postgres (10)", 7), ("jbd2/sdb-8 (20)", 2))
    assert s.process_count == 2
    assert s.flags == {"sync": 2, "fua": 1, "preflush": 1, "meta": 1}
    assert s.latency.count == 9 and s.latency.max_ns == 1 * MS
    mean = (sum(100_000 * (i + 1) for i in range(6)) + 1 * MS + 500_000 + 200_000) / 9
    assert s.latency.mean_ns == pytest.approx(mean)
    # Percentiles come from tilemark's histogram buckets: within 1/128 of the true value.
    assert s.latency.p50_ns == pytest.approx(400_000, rel=1 / 128)
    assert s.latency.p99_ns == pytest.approx(1 * MS, rel=1 / 128)
    assert s.events_lost == 3 and s.device == "/dev/sdb" and s.source == "synthetic"
    lines = summary_lines(s)
    assert lines[0] == "10 IOs in 2.500 s: 4.0 IOPS mean, 6 in the busiest second"
    assert "reads 6 (75.0% of reads+writes)" in lines[1]
    assert "sizes: 4 KiB 60.0%, 64 KiB 20.0%, 0 B 10.0%, 1 MiB 10.0% (4 distinct)" in lines
    assert "flags: sync 20.0%, fua 10.0%, preflush 10.0%, meta 10.0%" in lines
    assert lines[-1] == "events lost while tracing: 3"


def test_show_prints_the_summary_and_json(known, capsys):
    status, out, err = cli(capsys, "trace", "show", str(known))
    assert status == 0, err
    assert "10 (reads 6, writes 2, flushes 1, discards 1)" in out
    assert "75.0% of reads + writes" in out
    assert "postgres (10) 7" in out and "note: a note" in out
    status, out, _ = cli(capsys, "trace", "show", str(known), "--json")
    assert status == 0
    doc = json.loads(out)
    assert doc["ios"] == 10 and doc["read_share"] == 0.75 and doc["iops_peak"] == 6
    assert doc["flag_shares"]["sync"] == 0.2 and doc["events_lost"] == 3
    assert doc["sizes"][0] == [4096, 6]


def html_specs(path) -> tuple[dict, dict]:
    text = path.read_text()
    specs = json.loads(re.search(r'id="tm-specs">(.*?)</script>', text, re.S).group(1))
    store = json.loads(re.search(r'id="tm-datasets">(.*?)</script>', text, re.S).group(1))
    return specs, store


def data_of(spec: dict, store: dict) -> list[dict]:
    """A chart's rows, rebuilt from the page's column-wise store (as the page's script does)."""
    (name,) = spec["__datasets"]
    d = store[name]
    keys = d.get("k", {})
    rows = []
    for i in range(len(d["v"][0])):
        row = {}
        for c, col in enumerate(d["c"]):
            v = d["v"][c][i]
            if v is not None:
                row[col] = keys[str(c)][v] if str(c) in keys else v
        rows.append(row)
    return rows


def marks(spec: dict) -> set[str]:
    found = set()
    for part in [spec, *spec.get("vconcat", [])]:
        mark = part.get("mark")
        if mark:
            found.add(mark["type"] if isinstance(mark, dict) else mark)
    return found


def test_html_report_is_one_offline_file_with_the_six_charts(known, tmp_path, capsys):
    report = tmp_path / "report.html"
    status, out, err = cli(capsys, "trace", "show", str(known), "--html", str(report))
    assert status == 0, err
    assert f"report: {report}" in out
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".html"] == ["report.html"]
    text = report.read_text()
    assert not re.search(r'<script[^>]+src=|<link[^>]+href="http', text)  # nothing fetched
    specs, store = html_specs(report)
    assert set(specs) == {"throughput", "read-share", "outstanding", "sizes", "lba", "interarrival"}
    assert marks(specs["throughput"]) == {"area"} and len(specs["throughput"]["vconcat"]) == 2
    assert marks(specs["sizes"]) == {"bar"} and marks(specs["lba"]) == {"rect"}
    assert marks(specs["read-share"]) == marks(specs["outstanding"]) == {"line"}
    assert specs["interarrival"]["encoding"]["x"]["scale"]["type"] == "log"
    assert specs["lba"]["encoding"]["color"]["scale"]["type"] == "log"
    # The aggregates add up to the trace.
    series = data_of(specs["throughput"], store)
    width_s = series[1]["t_s"] - series[0]["t_s"]
    assert sum(r["iops"] for r in series) * width_s == pytest.approx(10)
    sizes = {(r["size"], r["op"]): r["ios"] for r in data_of(specs["sizes"], store)}
    assert sizes == {
        ("4 KiB", "read"): 6,
        ("64 KiB", "write"): 2,
        ("0 B", "flush"): 1,
        ("1 MiB", "discard"): 1,
    }
    assert sum(r["ios"] for r in data_of(specs["lba"], store)) == 9  # IOs with data
    cdf = data_of(specs["interarrival"], store)
    assert cdf[-1]["share"] == 1.0 and cdf[0]["us"] <= 0.002  # 1 ns between the writes
    shares = {round(r["t_s"], 3): r["read_pct"] for r in data_of(specs["read-share"], store)}
    assert shares[0.0] == 100.0 and shares[1.0] == 0.0
    assert "1 IOs have no completion time" in text  # the flush, left out of outstanding


def test_outstanding_ios_are_time_weighted_per_slice(tmp_path):
    # A: 0..1 s, B: 0.5..1.5 s: one outstanding, then two, then one.
    rows = [
        dict(issue_ns=0, complete_ns=1 * S, op="read", offset=0, size=4096),
        dict(issue_ns=S // 2, complete_ns=3 * S // 2, op="read", offset=4096, size=4096),
    ]
    path = tmp_path / "t.pq"
    write_trace(path, rows)
    scan = show.ChartScan(*show._extent(open_trace(path)))
    for b in open_trace(path).batches():
        scan.add(b)
    width_s = scan.width / S
    assert width_s == 0.005  # 1.5 s in at most 600 slices
    by_time = {round(r["t_s"], 3): r["outstanding"] for r in scan.outstanding()}
    assert by_time[0.0] == by_time[0.495] == pytest.approx(1)
    assert by_time[0.5] == by_time[0.995] == pytest.approx(2)
    assert by_time[1.0] == by_time[1.495] == pytest.approx(1)
    assert by_time[1.5] == pytest.approx(0)


def test_chart_grids_do_not_grow_with_the_trace(tmp_path):
    # Ten days between two IOs 1 TiB apart: still at most 600 slices and a 160 x 129 grid.
    rows = [
        dict(issue_ns=0, op="write", offset=0, size=4096),
        dict(issue_ns=10 * 86400 * S, op="write", offset=1 << 40, size=4096),
    ]
    path = tmp_path / "t.pq"
    write_trace(path, rows)
    scan = show.ChartScan(*show._extent(open_trace(path)))
    assert scan.bins <= show.MAX_BINS and scan.heat_bins <= show.HEAT_TIME_BINS
    assert scan.offset_bins <= show.HEAT_OFFSET_BINS + 1


def test_unreadable_or_empty_traces_are_one_sentence(tmp_path, capsys):
    junk = tmp_path / "junk.pq"
    junk.write_bytes(b"not parquet")
    empty = tmp_path / "empty.pq"
    with TraceWriter(empty, TraceMeta(source="synthetic")):
        pass
    report = tmp_path / "r.html"
    for path, why in [
        (tmp_path / "missing.pq", "does not exist"),
        (junk, "is not a tilemark trace"),
        (empty, "has no requests"),
    ]:
        status, out, err = cli(capsys, "trace", "show", str(path), "--html", str(report))
        assert status == 2 and out == ""
        assert err.startswith("tilemark: error: trace ") and why in err and err.count("\n") == 1
        assert not report.exists()


def test_html_never_replaces_a_file_tilemark_did_not_write(known, tmp_path, capsys):
    mine = tmp_path / "notes.html"
    mine.write_text("<p>my notes</p>")
    status, _, err = cli(capsys, "trace", "show", str(known), "--html", str(mine))
    assert status == 2 and "was not written by tilemark" in err
    assert mine.read_text() == "<p>my notes</p>"
    report = tmp_path / "r.html"
    assert cli(capsys, "trace", "show", str(known), "--html", str(report))[0] == 0
    assert cli(capsys, "trace", "show", str(known), "--html", str(report))[0] == 0  # its own
