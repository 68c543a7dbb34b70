"""`tilemark attach RUN FILE.csv`: counters from the storage side on the run's clock, shown by
reports beside tilemark's intervals and written by `export --csv`; bad input is one sentence,
exit 2, nothing written."""

from __future__ import annotations

import csv
import json
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from report_runs import simple_plan, write_run
from tilemark.cli import main
from tilemark.report import build_report
from tilemark.report.data import load_source
from tilemark.store.array import ARRAY_FILE, read_array
from tilemark.store.rundir import RunWriter

NS = 1_000_000_000
# report_runs.write_run: 10 one-second intervals, 2 of warm-up, 280 reads + 120 writes a second.
INTERVALS, WARMUP = 10, 2


@pytest.fixture
def stored(tmp_path) -> tuple[Path, Path, int]:
    """(results root, run dir, the run's start on the clock in ns)."""
    root = tmp_path / "results"
    run_dir = write_run(root, simple_plan(("randrw", "seq")))
    started = json.loads((run_dir / "run.json").read_text())["result"]["started_at_ns"]
    return root, run_dir, started


def iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / NS, tz=UTC).isoformat().replace("+00:00", "Z")


def write_csv(path: Path, header: list[str], rows: list[list], delimiter: str = ",") -> Path:
    with open(path, "w", newline="") as f:
        w = csv.writer(f, delimiter=delimiter)
        w.writerow(header)
        w.writerows(rows)
    return path


def samples(started: int, times_s: list[float], stamp=iso) -> list[list]:
    """Rows of (timestamp, front-end IOPS, disk IOPS) at run times `times_s`."""
    return [[stamp(started + int(t * NS)), 400 + t, 2 * (400 + t)] for t in times_s]


def cli(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize(
    "header, chosen",
    [
        (["Uptime", "update_count", "Sample Time", "IOPS"], "Sample Time"),
        (["IOPS", "Timestamp"], "Timestamp"),
        (["DateTime", "v"], "DateTime"),
        (["collection_time", "ts"], "ts"),
    ],
)
def test_the_timestamp_column_is_found_by_its_name(tmp_path, header, chosen):
    from tilemark.telemetry.attach import read_counter_csv

    row = ["2026-11-25T04:08:17Z" if h == chosen else "1" for h in header]
    parsed = read_counter_csv(write_csv(tmp_path / "c.csv", header, [row]))
    assert parsed.time_column == chosen
    assert list(parsed.counters) == [h for h in header if h != chosen]


def test_iso_counters_land_in_their_intervals_and_rows_outside_are_dropped(
    stored, tmp_path, capsys
):
    root, run_dir, started = stored
    times = [-3.0, -0.5, 0.5, 1.5, 2.5, 5.0, 9.99, 10.0, 10.5, 30.0]
    f = write_csv(tmp_path / "dmx-fa.csv", ["Timestamp", "FA IOPS", "Disk IOPS"],
                  samples(started, times))  # fmt: skip
    status, out, err = cli(capsys, "attach", run_dir.name, str(f), "--results", str(root))
    assert status == 0, err
    assert "attached 6 rows x 2 counters (FA IOPS, Disk IOPS)" in out
    assert "as 'dmx-fa'" in out
    assert "note: dropped 4 of 10 rows outside the run (2 before its start, 2 after its end)" in err
    rows, sources = read_array(run_dir)
    kept = sorted({r["t_ns"] for r in rows})
    assert kept == [int(t * NS) for t in (0.5, 1.5, 2.5, 5.0, 9.99, 10.0)]
    by_t = {r["t_ns"]: r for r in rows if r["counter"] == "FA IOPS"}
    phases = [(by_t[int(t * NS)]["interval"], by_t[int(t * NS)]["phase"]) for t in (0.5, 2.5)]
    assert phases == [(0, "warmup"), (2, "measure")]
    assert by_t[10 * NS]["interval"] == INTERVALS - 1  # the run's end belongs to its last interval
    assert by_t[int(5.0 * NS)]["value"] == pytest.approx(405.0)
    assert by_t[int(5.0 * NS)]["time_ns"] == started + 5 * NS
    (source,) = sources
    assert source["counters"] == ["FA IOPS", "Disk IOPS"] and source["time_column"] == "Timestamp"
    assert (source["rows_read"], source["rows_kept"]) == (10, 6)
    # run.json is not touched by attaching.
    assert "array" not in json.loads((run_dir / "run.json").read_text())["files"]


def test_epoch_seconds_with_an_offset_and_semicolons_with_empty_cells(stored, tmp_path, capsys):
    root, run_dir, started = stored
    # The array's clock runs 2 s ahead of the host: its sample at host time t says t + 2.
    rows = [[f"{(started + int((t + 2) * NS)) / NS:.3f}", 100 + t, ""] for t in (1.0, 3.0, 4.0)]
    f = write_csv(tmp_path / "x.csv", ["epoch", "util", "missing"], rows, delimiter=";")
    args = ["attach", run_dir.name, str(f), "--results", str(root), "--name", "array1"]
    for offset, expected in ((None, (3, 5, 6)), ("-2s", (1, 3, 4))):
        status, out, err = cli(capsys, *args, *(["--offset", offset] if offset else []))
        assert status == 0, err
        got, (source,) = read_array(run_dir)
        util = sorted((r["t_ns"], r["value"]) for r in got if r["counter"] == "util")
        assert util == [(t * NS, 100.0 + v) for t, v in zip(expected, (1, 3, 4), strict=True)]
        assert source["offset_s"] == (-2.0 if offset else 0.0)
    assert all(r["value"] is None for r in got if r["counter"] == "missing")
    assert {r["source"] for r in got} == {"array1"}


def test_a_timestamp_without_a_zone_is_this_hosts_local_time(stored, tmp_path, capsys, monkeypatch):
    root, run_dir, started = stored
    monkeypatch.setenv("TZ", "Asia/Kolkata")  # +05:30, no daylight saving
    time.tzset()
    try:
        local = timezone(timedelta(hours=5, minutes=30))

        def naive(ns: int) -> str:
            return datetime.fromtimestamp(ns / NS, tz=local).replace(tzinfo=None).isoformat(" ")

        f = write_csv(tmp_path / "local.csv", ["date", "iops"],
                      [[naive(started + 4 * NS), 1.0]])  # fmt: skip
        status, _, err = cli(capsys, "attach", run_dir.name, str(f), "--results", str(root))
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert status == 0, err
    (row,) = read_array(run_dir)[0]
    assert row["t_ns"] == 4 * NS


def test_attaching_a_name_again_replaces_it_and_other_names_are_kept(stored, tmp_path, capsys):
    root, run_dir, started = stored
    a = write_csv(
        tmp_path / "a.csv", ["time", "v"], [[iso(started + NS), 1], [iso(started + 2 * NS), 2]]
    )
    b = write_csv(tmp_path / "b.csv", ["time", "w"], [[iso(started + 3 * NS), 3]])
    for f in (a, b, a):
        assert cli(capsys, "attach", run_dir.name, str(f), "--results", str(root))[0] == 0
    rows, sources = read_array(run_dir)
    assert sorted((r["source"], r["counter"], r["value"]) for r in rows) == [
        ("a", "v", 1.0),
        ("a", "v", 2.0),
        ("b", "w", 3.0),
    ]
    assert [s["name"] for s in sources] == ["b", "a"]


def test_report_shows_counters_beside_tilemark_and_export_writes_them(stored, tmp_path, capsys):
    root, run_dir, started = stored
    times = [k * 0.5 for k in range(1, 21)]
    f = write_csv(
        tmp_path / "fa.csv", ["Timestamp", "FA IOPS", "Disk IOPS"], samples(started, times)
    )
    assert cli(capsys, "attach", run_dir.name, str(f), "--results", str(root))[0] == 0
    report = build_report(load_source(str(run_dir)))
    section = next(s for s in report.sections if s.id == "array")
    assert "fa: 20 samples of 2 counters" in section.intro
    assert [i.id for i in section.items] == ["array-counters", "array-vs-front", "array-samples"]
    totals = {r[1].text: [c.text for c in r] for r in section.items[1].rows}
    # tilemark did 400 IOPS; the disk counter averaged 2 x (400 + t) over the measurement phase.
    assert totals["tilemark IOPS"][3] == "400"
    # A sample closes the period before it: the one at 2.0 s reports on the warm-up.
    disk = [2 * (400 + t) for t in times if t > WARMUP]
    mean = float(totals["Disk IOPS"][3].replace(",", ""))
    assert mean == pytest.approx(sum(disk) / len(disk), rel=1e-3)
    assert float(totals["Disk IOPS"][6]) == pytest.approx(sum(disk) / len(disk) / 400, rel=1e-2)
    per_sample = section.items[2]
    assert per_sample.columns[:5] == [
        "t (s)",
        "phase",
        "tilemark r/s",
        "tilemark w/s",
        "tilemark MB/s",
    ]
    assert per_sample.columns[5:] == ["FA IOPS", "Disk IOPS"]
    assert len(per_sample.rows) == 20
    assert per_sample.rows[5][2].text == "280"  # reads/s over (2.5, 3.0]
    status, out, _ = cli(capsys, "export", run_dir.name, "--csv", str(tmp_path / "csv"),
                         "--results", str(root))  # fmt: skip
    assert status == 0 and "array.csv" in out
    with open(tmp_path / "csv" / "array.csv") as fh:
        exported = list(csv.DictReader(fh))
    assert len(exported) == 40
    first = exported[0]
    assert first["counter"] in ("FA IOPS", "Disk IOPS") and float(first["t_s"]) == 0.5
    assert first["time"].endswith("Z")


def test_a_run_with_counters_can_still_be_deleted(stored, tmp_path, capsys):
    root, run_dir, started = stored
    f = write_csv(tmp_path / "a.csv", ["time", "v"], [[iso(started + NS), 1]])
    assert cli(capsys, "attach", run_dir.name, str(f), "--results", str(root))[0] == 0
    status, _, err = cli(capsys, "runs", "rm", run_dir.name, "--results", str(root))
    assert status == 0, err
    assert not run_dir.exists()


BAD = [
    (["a", "b"], [[1, 2]], [], "has no timestamp column (one named like time, timestamp or date); "
     "name it with --time-column (columns: a, b)"),
    (["time", "v"], [["@START", "fast"]], [], "column 'v' is not numeric (line 2 has 'fast')"),
    (["time", "v"], [["2020-01-01T00:00:00Z", 1]], [], "no row of"),
    (["time", "v"], [["yesterday", 1]], [], "'yesterday' is not a timestamp; use ISO 8601"),
    (["time", "v"], [["@START", 1]], ["--offset", "soon"], "--offset must be a duration"),
    (["time", "v"], [["@START", 1]], ["--time-column", "when"],
     "--time-column 'when' is not a column"),
    (["time"], [["@START"]], [], "has no counter columns besides 'time'"),
    (["time", "v"], [["@MS", 1]], [], "look like epoch milliseconds"),
    (["time", "v"], [["@START", 1]], ["--name", "a b"], "--name must be 1 to 64 letters"),
]  # fmt: skip


@pytest.mark.parametrize("header, rows, extra, message", BAD)
def test_bad_input_is_one_sentence_exit_2_and_nothing_written(
    stored, tmp_path, capsys, header, rows, extra, message
):
    root, run_dir, started = stored
    start_cell = {"@START": iso(started + NS), "@MS": str((started + NS) // 1_000_000)}
    rows = [[start_cell.get(c, c) if isinstance(c, str) else c for c in r] for r in rows]
    f = write_csv(tmp_path / "bad.csv", header, rows)
    status, out, err = cli(capsys, "attach", run_dir.name, str(f), "--results", str(root), *extra)
    assert status == 2, err
    assert message in err
    assert err.startswith("tilemark: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert not (run_dir / ARRAY_FILE).exists() and out == ""


def test_unknown_running_and_missing_inputs_are_refused(stored, tmp_path, capsys):
    root, run_dir, started = stored
    good = write_csv(tmp_path / "a.csv", ["time", "v"], [[iso(started + NS), 1]])
    status, _, err = cli(capsys, "attach", "no-such-run", str(good), "--results", str(root))
    assert status == 2 and "no run 'no-such-run'" in err
    status, _, err = cli(capsys, "attach", run_dir.name, str(tmp_path / "nope.csv"),
                         "--results", str(root))  # fmt: skip
    assert status == 2 and "counter file" in err and "does not exist" in err
    running = RunWriter(root, plan=simple_plan(), workload={"name": "w"}, targets=[], argv=["t"])
    status, _, err = cli(capsys, "attach", running.run_id, str(good), "--results", str(root))
    assert status == 2 and "is still running" in err
    assert not (running.path / ARRAY_FILE).exists()


def test_a_study_gives_each_of_its_runs_the_rows_within_its_span(tmp_path, capsys):
    """One export for a whole sweep or scaling study: every step run takes its own rows."""
    from report_runs import write_study

    root = tmp_path / "results"
    study = write_study(root, (1, 2, 3))
    runs = [s["run_id"] for s in json.loads((study / "study.json").read_text())["steps"]]
    # Synthetic runs all start at one instant; place them 20 s apart as a study runs them.
    base = 1_790_000_000 * NS
    for k, run_id in enumerate(runs):
        path = root / run_id / "run.json"
        doc = json.loads(path.read_text())
        doc["result"]["started_at_ns"] = base + k * 20 * NS
        path.write_text(json.dumps(doc))
    times = [k * 20 + t for k in range(3) for t in (1.0, 5.0)] + [15.0, 70.0]
    f = write_csv(tmp_path / "sweep.csv", ["time", "disk_iops"],
                  [[iso(base + int(t * NS)), t] for t in times])  # fmt: skip
    status, out, err = cli(capsys, "attach", study.name, str(f), "--results", str(root))
    assert status == 0, err
    assert out.count("attached 2 rows x 1 counters") == 3
    assert "dropped 2 of 8 rows outside every run of study" in err
    for k, run_id in enumerate(runs):
        rows, _ = read_array(root / run_id)
        assert [r["value"] for r in rows] == [k * 20 + 1.0, k * 20 + 5.0]
    late = write_csv(tmp_path / "late.csv", ["time", "v"], [[iso(base + 500 * NS), 1]])
    status, _, err = cli(capsys, "attach", study.name, str(late), "--results", str(root))
    assert status == 2 and "falls inside any run of study" in err
