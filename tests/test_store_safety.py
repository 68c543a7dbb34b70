"""The results store never loses what was measured and never destroys what it did not write:
the interval log read back after any cut, killed and damaged runs, foreign catalogs, older
run directories (docs/results-schema.md)."""

import json
import os
import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from engine_data import plan, result_for, simple_snapshots
from tilemark.report.data import compute_series, load_source
from tilemark.report.telemetry import read_rows
from tilemark.run.summary import summarize
from tilemark.store import intervals as iv
from tilemark.store import process
from tilemark.store.catalog import ForeignCatalogError, list_runs, rebuild
from tilemark.store.rundir import RunWriter
from tilemark.store.rundoc import inspect_run, load_run, read_intervals
from tilemark.telemetry import sampler as tm

GOLDEN_V1 = Path(__file__).resolve().parent / "data" / "results-v1"
V1_COMPLETE = "20261123-183420-b18d"
V1_KILLED = "20261123-183420-39ce"  # left running by a schema-1 writer, one part flushed


def writer(root: Path, p: dict | None = None) -> RunWriter:
    return RunWriter(
        root, plan=p or plan(), workload={"name": "w"}, targets=[], argv=["tilemark", "run"]
    )


def finished(root: Path, snapshots: int = 3) -> RunWriter:
    w = writer(root)
    snaps = simple_snapshots(snapshots)
    w.add_snapshots(snaps)
    res = result_for([{"stream": 0, "read": snaps[0]["streams"][0]["read"]}], seconds=2.0)
    w.finish(res, summary=summarize(w.plan, res), complete=True)
    return w


def short_intervals(n: int, interval_ns: int) -> list[dict]:
    """simple_snapshots with `interval_ns` long intervals."""
    snaps = simple_snapshots(n)
    for s in snaps:
        s["start_ns"] = s["interval"] * interval_ns
        s["end_ns"] = (s["interval"] + 1) * interval_ns
    return snaps


# -----------------------------------------------------------------------------------------------
# the interval log


def test_log_read_back_after_a_cut_anywhere_in_its_last_batch(tmp_path):
    root = tmp_path / "results"
    w = writer(root)
    w.add_snapshots(simple_snapshots(4))  # 1 s intervals: one batch each, on disk now
    log = w.path / "intervals.arrows"
    data = log.read_bytes()
    w.add_snapshots(simple_snapshots(5)[4:])
    whole = log.read_bytes()
    assert len(whole) > len(data) and whole.startswith(data)
    # Every byte near the batch's framing (length prefix, metadata) and a stride through its
    # body: a cut anywhere leaves the complete batches before it.
    start, end = len(data), len(whole)
    cuts = {*range(start, start + 64), *range(start, end, 7), *range(end - 64, end)}
    for cut in sorted(c for c in cuts if start <= c < end):
        log.write_bytes(whole[:cut])
        table = read_intervals(w.path)
        assert sorted(set(table.column("interval").to_pylist())) == [0, 1, 2, 3], cut
    # Power loss on some filesystems leaves a zero-filled tail instead of a short file.
    log.write_bytes(data + b"\0" * 4096)
    assert read_intervals(w.path).num_rows == 4 * 3
    log.write_bytes(whole[: len(data) + 40])
    note = iv.interval_source(w.path).note
    assert "cut off mid-write (40 bytes)" in note and inspect_run(w.path).status == "running"


def test_short_intervals_are_written_about_once_a_second(tmp_path):
    w = writer(tmp_path / "results")
    w.add_snapshots(short_intervals(23, 200_000_000))  # 0.2 s intervals
    batches = list(iv.log_batches(w.path / "intervals.arrows"))
    # 20 intervals on disk in batches of 5 (1 s); the last 3 wait for more.
    assert [b.num_rows for b in batches] == [15] * 4
    assert w.rows_written == 20 * 3
    w.finish(None, summary=None, complete=False)
    assert read_intervals(w.path).num_rows == 23 * 3


def host_row(run_id: str, snap: dict) -> dict:
    keys = ("interval", "phase", "start_ns", "end_ns")
    return {"run_id": run_id, **{k: snap[k] for k in keys}, "sample_ns": 1, "cpu_busy_pct": 5.0}


def test_telemetry_on_disk_keeps_in_step_with_the_intervals(tmp_path):
    """A killed run keeps the host rows of its stored intervals but the last: the sampler's rows
    of an interval come a poll after its frame, and each log groups about a second of them."""
    w = RunWriter(
        tmp_path / "results",
        plan=plan(),
        workload={"name": "w"},
        targets=[],
        argv=["tilemark", "run"],
        telemetry={"targets": [], "devices": [], "notes": []},
    )
    snaps = short_intervals(9, 500_000_000)  # 0.5 s intervals: the log writes every second

    def on_disk(log: str) -> set[int]:
        return {i for b in iv.log_batches(w.path / log) for i in b.column("interval").to_pylist()}

    for k, snap in enumerate(snaps):
        w.add_snapshots([snap])
        stored = on_disk("intervals.arrows")
        # The poll that wrote interval k holds the rows of interval k - 1 only.
        if k:
            w.add_telemetry([], [host_row(w.run_id, snaps[k - 1])])
        host = on_disk(tm.HOST_LOG)
        assert host <= stored
        assert len(host) >= len(stored) - 1, (k, sorted(stored), sorted(host))
    assert on_disk(tm.HOST_LOG) == set(range(8))
    w.finish(None, summary=None, complete=False)
    assert {r["interval"] for r in read_rows(w.path, tm.HOST_FILE, tm.HOST_LOG)} == set(range(8))


def test_a_failed_log_write_is_rolled_back_and_stops_storing(tmp_path, monkeypatch):
    w = writer(tmp_path / "results")
    w.add_snapshots(simple_snapshots(3))
    good = (w.path / "intervals.arrows").stat().st_size
    real_write = os.write
    calls = []

    def full_disk(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data)[: len(data) // 2])  # a short write, then ENOSPC
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(iv.os, "write", full_disk)
    w.add_snapshots(simple_snapshots(5)[3:])
    monkeypatch.setattr(iv.os, "write", real_write)
    assert w.failure.startswith("results could not be written: No space left on device (ENOSPC)")
    assert "intervals from 3 on are not stored" in w.failure
    assert (w.path / "intervals.arrows").stat().st_size == good, "the half batch is cut off"
    w.finish(None, summary=None, complete=True)
    doc = load_run(w.path)
    assert doc["status"] == "failed" and "ENOSPC" in doc["error"]
    assert read_intervals(w.path).num_rows == 3 * 3
    assert sorted(p.name for p in w.path.iterdir()) == ["intervals.parquet", "run.json"]


def test_seal_failure_keeps_the_log_and_no_temporary_file(tmp_path, monkeypatch):
    w = writer(tmp_path / "results")
    w.add_snapshots(simple_snapshots(12))

    def no_space(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(iv.pq.ParquetWriter, "write_table", no_space)
    w.finish(None, summary=None, complete=True)
    doc = load_run(w.path)
    assert doc["status"] == "failed"
    assert "ENOSPC" in doc["error"] and "kept in intervals.arrows" in doc["error"]
    assert sorted(p.name for p in w.path.iterdir()) == ["intervals.arrows", "run.json"]
    assert read_intervals(w.path).num_rows == 12 * 3
    (row,) = list_runs(w.results_root)
    assert row["status"] == "failed"


@pytest.mark.parametrize(
    ("fits", "attempts", "status"),
    [
        # room once the reserve set aside at the start is freed
        (lambda reserve, doc, compact: not reserve, [True, False], "complete"),
        # room for the same document without indentation
        (lambda reserve, doc, compact: compact, [True, False, False], "complete"),
        # room only without the engine result: the summary is kept, the run marked failed
        (lambda reserve, doc, compact: doc["result"] is None, [True, False, False, False],
         "failed"),
    ],
)  # fmt: skip
def test_final_run_json_is_written_however_full_the_disk(
    tmp_path, monkeypatch, fits, attempts, status
):
    w = writer(tmp_path / "results")
    snaps = simple_snapshots(2)
    w.add_snapshots(snaps)
    res = result_for([{"stream": 0, "read": snaps[0]["streams"][0]["read"]}], seconds=2.0)
    from tilemark.store import rundir

    real = rundir.write_json_atomic
    seen = []

    def full_disk(path, doc, *, compact=False):
        seen.append((w.path / ".reserve").exists())
        if not fits(seen[-1], doc, compact):
            raise OSError(28, "No space left on device")
        real(path, doc, compact=compact)

    monkeypatch.setattr(rundir, "write_json_atomic", full_disk)
    w.finish(res, summary=summarize(w.plan, res), complete=True)
    assert seen == attempts
    doc = load_run(w.path)
    assert doc["status"] == status and doc["summary"]["total"]["iops"] == 25.0
    if status == "failed":
        assert doc["result"] is None
        assert doc["error"] == "the engine result was not stored: No space left on device (ENOSPC)"
        assert w.failure.startswith("results could not be written")


# -----------------------------------------------------------------------------------------------
# killed, damaged


def test_process_records_tell_a_gone_process_from_a_live_one(monkeypatch):
    me = process.current()
    assert process.gone_reason(me) is None
    assert "no longer exists" in process.gone_reason({**me, "pid": 2**22 + 7})
    assert "another process" in process.gone_reason({**me, "start_ticks": me["start_ticks"] + 1})
    assert "restarted" in process.gone_reason({**me, "boot_id": "0" * 36})
    # Another host's run cannot be checked from here: it stays running.
    assert process.gone_reason({**me, "host": "elsewhere", "pid": 2**22 + 7}) is None


def test_truncated_intervals_parquet_is_damaged_and_the_rest_is_reported(tmp_path):
    root = tmp_path / "results"
    w = finished(root)
    path = w.path / "intervals.parquet"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    (row,) = list_runs(root)
    assert row["status"] == "damaged" and row["total_iops"] == 25.0  # the summary is intact
    assert row["problem"].startswith("intervals.parquet cannot be read")
    assert "(run.json says complete)" in row["problem"]
    run = load_source(w.run_id, root)
    assert run.status == "damaged" and "intervals.parquet" in run.problem
    assert run.read_intervals().num_rows == 0
    assert compute_series(run).intervals == 0


def test_corrupt_run_json_is_listed_as_damaged_not_dropped(tmp_path):
    root = tmp_path / "results"
    good = finished(root)
    bad = finished(root)
    (bad.path / "run.json").write_text('{"schema_version": 2, "run_')
    rows = {r["run_id"]: r for r in list_runs(root)}
    assert rows[good.run_id]["status"] == "complete"
    assert rows[bad.run_id]["status"] == "damaged" and rows[bad.run_id]["kind"] is None
    assert "run.json cannot be read as JSON" in rows[bad.run_id]["problem"]
    assert rows[bad.run_id]["started_at"].startswith(bad.run_id[:4])  # from the run id


# -----------------------------------------------------------------------------------------------
# the catalog is tilemark's own or left alone


def foreign_duckdb(path: Path) -> None:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE runs (x INTEGER)")
    con.execute("INSERT INTO runs VALUES (42)")
    con.close()


def test_someone_elses_catalog_duckdb_is_refused_and_untouched(tmp_path):
    root = tmp_path / "results"
    finished(root)
    (root / "catalog.duckdb").unlink()
    foreign_duckdb(root / "catalog.duckdb")
    with pytest.raises(ForeignCatalogError, match="without tilemark's tilemark_catalog table"):
        list_runs(root)
    with pytest.raises(ForeignCatalogError):
        rebuild(root)
    late = finished(root)  # a run finishing there is kept; only the catalog is skipped
    assert "tilemark_catalog" in late.catalog_error
    con = duckdb.connect(str(root / "catalog.duckdb"), read_only=True)
    assert con.execute("SELECT * FROM runs").fetchall() == [(42,)]
    con.close()


def test_no_catalog_is_created_where_there_are_no_runs(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    assert list_runs(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_version_1_catalog_is_recognised_and_upgraded(tmp_path):
    root = tmp_path / "results"
    w = finished(root)
    (root / "catalog.duckdb").unlink()
    con = duckdb.connect(str(root / "catalog.duckdb"))
    con.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, status TEXT)")
    con.execute("CREATE TABLE run_files (path TEXT PRIMARY KEY, run_id TEXT, signature TEXT)")
    con.execute("CREATE TABLE catalog_meta (key TEXT PRIMARY KEY, value TEXT)")
    con.execute("INSERT INTO catalog_meta VALUES ('catalog_version', '1')")
    con.close()
    assert [r["run_id"] for r in list_runs(root)] == [w.run_id]
    con = duckdb.connect(str(root / "catalog.duckdb"), read_only=True)
    marker = dict(con.execute("SELECT * FROM tilemark_catalog").fetchall())
    con.close()
    assert marker == {"format": "tilemark run catalog", "catalog_version": "3"}


def test_a_version_2_catalog_is_rebuilt_with_the_labels(tmp_path):
    root = tmp_path / "results"
    w = finished(root)
    doc = json.loads((w.path / "run.json").read_text())
    doc["label"] = "before tiering"
    (w.path / "run.json").write_text(json.dumps(doc))
    con = duckdb.connect(str(root / "catalog.duckdb"))
    con.execute("ALTER TABLE runs DROP COLUMN label")
    con.execute("UPDATE tilemark_catalog SET value = '2' WHERE key = 'catalog_version'")
    con.close()
    (row,) = list_runs(root)
    assert row["run_id"] == w.run_id and row["label"] == "before tiering"


# -----------------------------------------------------------------------------------------------
# schema 1 run directories (golden files written by tilemark 0.1.0)


@pytest.fixture
def v1_results(tmp_path) -> Path:
    root = tmp_path / "results"
    shutil.copytree(GOLDEN_V1, root)
    return root


def test_schema_1_run_json_is_migrated(v1_results):
    doc = load_run(V1_COMPLETE, v1_results)
    assert doc["schema_version"] == 4 and doc["process"] is None and doc["telemetry"] is None
    # Schema 4 breaks results down per target: a one-target run's target has its totals.
    (target,) = doc["summary"]["targets"]
    assert target["iops"] == doc["summary"]["total"]["iops"] and target["read_latency"]
    assert all(s["active_s"] == 2.0 and s["start_s"] is None for s in doc["summary"]["streams"])
    assert doc["verify_passes"] == []
    assert doc["hosts"] is None, "a one-host run"
    assert doc["summary"]["hosts"] is None and doc["summary"]["cluster"] is None
    assert doc["summary"]["telemetry"] is None and doc["summary"]["tool_bound"] is None
    assert doc["status"] == "complete" and doc["summary"]["duration_s"] == 2.0
    assert read_intervals(v1_results / V1_COMPLETE).num_rows == 3 * 3
    on_disk = json.loads((v1_results / V1_COMPLETE / "run.json").read_text())
    assert on_disk["schema_version"] == 1, "reading never rewrites"


def test_schema_1_run_left_running_long_ago_shows_killed_with_its_parts(v1_results):
    rows = {r["run_id"]: r for r in list_runs(v1_results)}
    killed = rows[V1_KILLED]
    assert killed["status"] == "killed" and "10 intervals kept" in killed["problem"]
    assert "no process was recorded" in killed["problem"]
    run = load_source(V1_KILLED, v1_results)
    assert run.intervals.kind == "parts" and compute_series(run).intervals == 10


def test_schema_1_run_without_process_record_within_its_planned_time_stays_running(v1_results):
    from datetime import UTC, datetime

    path = v1_results / V1_KILLED / "run.json"
    doc = json.loads(path.read_text())
    doc["started_at"] = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    path.write_text(json.dumps(doc))
    assert inspect_run(v1_results / V1_KILLED).status == "running"


def test_interval_schema_matches_the_store_version():
    assert (
        iv.INTERVAL_SCHEMA.metadata[b"tilemark.schema_version"] == str(iv.SCHEMA_VERSION).encode()
    )
    empty = pa.Table.from_batches([], schema=iv.INTERVAL_SCHEMA)
    assert iv.totals([empty])["intervals"] == 0
