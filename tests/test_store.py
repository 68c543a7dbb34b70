"""Run directories, intervals.parquet and the catalog (docs/results-schema.md)."""

import json
import os
import re
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from engine_data import plan, result_for, simple_snapshots
from tilemark.hist import Histogram
from tilemark.run.summary import summarize
from tilemark.store import catalog, rundoc
from tilemark.store.catalog import CatalogError, ForeignCatalogError, list_runs, rebuild
from tilemark.store.rundir import RunWriter
from tilemark.store.rundoc import RunFormatError, RunNotFoundError, load_run, read_intervals

PYTHON_DIR = Path(__file__).resolve().parents[1] / "python"
TESTS_DIR = Path(__file__).resolve().parent

# The column list as docs/results-schema.md states it, written out independently of the code.
DOCUMENTED_COLUMNS = [
    "run_id", "interval", "phase", "start_ns", "end_ns", "stream", "stream_name", "op",
    "ops", "bytes", "errors", "errors_json",
    "service_mean_us", "service_p50_us", "service_p99_us", "service_p999_us", "service_max_us",
    "response_mean_us", "response_p50_us", "response_p99_us", "response_p999_us",
    "response_max_us", "lag_max_ns", "behind_ios", "service_hist", "response_hist",
]  # fmt: skip


def new_writer(root: Path) -> RunWriter:
    p = plan()
    return RunWriter(
        root,
        plan=p,
        workload={"name": "oltp+log", "streams": 2},
        targets=[{"path": str(root.parent / "tm.dat"), "size": 1 << 30}],
        argv=["tilemark", "run", "--target", "tm.dat"],
    )


def finished_run(root: Path, snapshots: int = 3) -> RunWriter:
    w = new_writer(root)
    snaps = simple_snapshots(snapshots)
    w.add_snapshots(snaps)
    res = result_for(
        [{"stream": 0, **{k: snaps[0]["streams"][0][k] for k in ("read", "write")}}],
        seconds=2.0,
    )
    w.finish(res, summary=summarize(w.plan, res), complete=True)
    return w


def test_writer_leaves_running_run_json_at_start(tmp_path):
    root = tmp_path / "results"  # does not exist yet
    w = new_writer(root)
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}", w.run_id)
    assert w.path == root / w.run_id
    doc = json.loads((w.path / "run.json").read_text())
    assert doc["schema_version"] == 4
    assert doc["hosts"] is None, "one host: no cluster section"
    assert doc["status"] == "running" and doc["complete"] is False
    assert doc["run_id"] == w.run_id
    assert doc["argv"][:2] == ["tilemark", "run"]
    assert datetime.fromisoformat(doc["started_at"]).tzinfo is not None
    assert doc["environment"]["targets"][0]["path"] == str(tmp_path / "tm.dat")
    assert doc["environment"]["hostname"]
    assert doc["files"] == {"intervals": "intervals.parquet", "intervals_log": "intervals.arrows"}
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert doc["process"]["pid"] == os.getpid() and doc["process"]["boot_id"] == boot
    assert doc["process"]["host"] == os.uname().nodename
    assert doc["process"]["start_ticks"] > 0
    # Room for the final run.json, set aside while the run is in progress.
    assert (w.path / ".reserve").stat().st_size >= 256 << 10
    assert (w.path / "intervals.arrows").is_file()


def test_intervals_parquet_has_documented_columns_rows_and_row_groups(tmp_path):
    w = new_writer(tmp_path / "results")
    snaps = simple_snapshots(25)
    w.add_snapshots(snaps[:12])
    w.add_snapshots(snaps[12:])
    w.finish(None, summary=None, complete=False)

    pf = pq.ParquetFile(w.path / "intervals.parquet")
    assert pf.schema_arrow.names == DOCUMENTED_COLUMNS
    assert pf.metadata.num_rows == 25 * 3  # stream 0 read+write, stream 1 read
    assert pf.metadata.num_row_groups == 3  # 10 + 10 + 5 intervals
    assert pf.schema_arrow.metadata[b"tilemark.schema_version"] == b"4"
    assert sorted(p.name for p in w.path.iterdir()) == ["intervals.parquet", "run.json"]

    table = pf.read().to_pylist()
    row = next(r for r in table if r["interval"] == 4 and r["stream"] == 1)
    read1 = snaps[4]["streams"][1]["read"]
    assert row["op"] == "read" and row["stream_name"] == "log.0"
    assert row["ops"] == read1["ops"] and row["bytes"] == read1["bytes"]
    assert row["start_ns"] == 4_000_000_000 and row["end_ns"] == 5_000_000_000
    assert row["lag_max_ns"] == 4000
    resp = Histogram.from_json(read1["response"])
    assert row["response_p99_us"] == pytest.approx(resp.percentile(99) / 1e3)
    assert json.loads(row["response_hist"]) == read1["response"]
    closed = next(r for r in table if r["stream"] == 0 and r["op"] == "write")
    assert closed["response_p99_us"] is None and closed["response_hist"] is None
    assert closed["service_p99_us"] > 0


def test_error_only_and_idle_streams_get_rows(tmp_path):
    w = new_writer(tmp_path / "results")
    snap = {
        "interval": 0,
        "phase": "warmup",
        "start_ns": 0,
        "end_ns": 1_000_000_000,
        "streams": [
            {
                "stream": 0,
                "read": {"ops": 0, "bytes": 0, "errors": {"5": 2}, "service": None,
                         "response": None},
                "write": {"ops": 0, "bytes": 0, "errors": {}, "service": None, "response": None},
                "lag_max_ns": 0,
                "behind_ios": 0,
            },
            {"stream": 1, "lag_max_ns": 9_000_000, "behind_ios": 40},
        ],
    }  # fmt: skip
    w.add_snapshots([snap])
    w.finish(None, summary=None, complete=False)
    rows = read_intervals(w.path).to_pylist()
    assert [(r["stream"], r["op"]) for r in rows] == [(0, "read"), (1, None)]
    assert rows[0]["errors"] == 2 and json.loads(rows[0]["errors_json"]) == {"5": 2}
    assert rows[0]["service_p99_us"] is None
    assert rows[1]["behind_ios"] == 40 and rows[1]["lag_max_ns"] == 9_000_000


def test_finish_registers_the_run_in_the_catalog(tmp_path):
    root = tmp_path / "results"
    w = finished_run(root)
    doc = load_run(w.run_id, root)
    assert doc["status"] == "complete" and doc["complete"] is True
    assert doc["ended_at"] is not None
    assert doc["summary"]["duration_s"] == 2.0
    (row,) = list_runs(root)
    assert row["run_id"] == w.run_id
    assert row["status"] == "complete" and row["complete"] is True
    assert row["backend"] == "psync" and row["streams"] == 2 and row["kind"] == "run"
    assert row["workload_name"] == "oltp+log"
    assert row["total_iops"] == doc["summary"]["total"]["iops"]
    assert row["duration_s"] == 2.0 and row["errors"] == 0
    assert row["path"] == str(w.path.resolve())
    # The target column comes from the typed run.targets (a renamed field fails, not '').
    assert row["target"] == ", ".join(t["path"] for t in doc["targets"]) and row["target"]
    assert (root / "catalog.duckdb").is_file()
    # The writer registers the document it holds (not read back): the row is the one a
    # catalog rebuilt from the directory makes.
    (root / "catalog.duckdb").unlink()
    (rebuilt,) = list_runs(root)
    assert rebuilt == row


def test_the_first_run_under_a_root_creates_the_catalog_without_reading_itself_back(
    tmp_path, monkeypatch
):
    # Creating the catalog indexes every run directory under the root, the finishing run's
    # too: that one is indexed from the document its writer holds. Reading a run.json of
    # 10,000 streams (110 MB) back took 4 s at the end of every first run.
    from tilemark.store import rundoc

    reads: list[Path] = []
    real = rundoc.read_run_json

    def counted(run_dir):
        reads.append(Path(run_dir))
        return real(run_dir)

    monkeypatch.setattr(rundoc, "read_run_json", counted)
    root = tmp_path / "results"
    w = finished_run(root)
    assert (root / "catalog.duckdb").is_file()
    assert reads == []
    (row,) = list_runs(root)
    assert row["run_id"] == w.run_id and row["status"] == "complete"
    # A second run under the same root: the catalog exists, the first run is not read either.
    second = finished_run(root)
    assert reads == []
    assert {r["run_id"] for r in list_runs(root)} == {w.run_id, second.run_id}


def test_failed_and_incomplete_status(tmp_path):
    root = tmp_path / "results"
    failed = new_writer(root)
    failed.finish(None, summary=None, complete=False, error="engine: /x: EIO")
    assert load_run(failed.path)["status"] == "failed"
    assert load_run(failed.path)["error"] == "engine: /x: EIO"
    stopped = new_writer(root)
    stopped.finish(None, summary=None, complete=False)
    assert load_run(stopped.path)["status"] == "incomplete"


def test_list_runs_is_newest_first_and_rebuilds_a_deleted_catalog(tmp_path):
    root = tmp_path / "results"
    ids = []
    for _ in range(3):
        ids.append(finished_run(root, snapshots=1).run_id)
        time.sleep(0.01)  # started_at has millisecond resolution
    newest_first = list(reversed(ids))
    assert [r["run_id"] for r in list_runs(root)] == newest_first

    (root / "catalog.duckdb").unlink()
    assert [r["run_id"] for r in list_runs(root)] == newest_first
    assert rebuild(root) == 3


def test_a_catalog_file_tilemark_cannot_open_is_refused_not_replaced(tmp_path):
    root = tmp_path / "results"
    finished_run(root, snapshots=1)
    garbage = b"not a database" * 100
    (root / "catalog.duckdb").write_bytes(garbage)
    with pytest.raises(ForeignCatalogError, match="not a DuckDB database this tilemark can open"):
        list_runs(root)
    with pytest.raises(ForeignCatalogError):
        rebuild(root)
    assert (root / "catalog.duckdb").read_bytes() == garbage


def test_catalog_follows_run_directories(tmp_path):
    root = tmp_path / "results"
    kept = finished_run(root, snapshots=1)
    removed = finished_run(root, snapshots=1)
    crashed = new_writer(root)  # never finished: registered on the next listing
    import shutil

    shutil.rmtree(removed.path)
    rows = {r["run_id"]: r for r in list_runs(root)}
    assert set(rows) == {kept.run_id, crashed.run_id}
    assert rows[crashed.run_id]["status"] == "running"
    assert rows[crashed.run_id]["total_iops"] is None


def test_killed_writer_keeps_every_interval_written_and_shows_killed(tmp_path):
    root = tmp_path / "results"
    script = f"""
import os, signal, sys
sys.path[:0] = [{str(PYTHON_DIR)!r}, {str(TESTS_DIR)!r}]
from engine_data import plan, simple_snapshots
from tilemark.store.rundir import RunWriter
w = RunWriter({str(root)!r}, plan=plan(), workload={{}}, targets=[], argv=["x"])
w.add_snapshots(simple_snapshots(25))
print(w.run_id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr
    run_id = proc.stdout.strip()
    doc = load_run(run_id, root)
    assert doc["status"] == "running" and doc["summary"] is None
    assert not (root / run_id / "intervals.parquet").exists()
    table = read_intervals(root / run_id)
    # 1 s intervals go to disk one by one: all 25 survive (schema 1 kept 20 of them).
    assert table.num_rows == 25 * 3
    assert sorted(set(table.column("interval").to_pylist())) == list(range(25))

    (row,) = list_runs(root)
    assert row["status"] == "killed"
    assert "no longer exists" in row["problem"] and "25 intervals kept" in row["problem"]
    assert row["duration_s"] == 25.0 and row["total_iops"] > 0  # from the intervals kept
    # The catalog remembers; a later listing does not rescan the log.
    assert list_runs(root) == [row]


def test_a_run_whose_process_is_alive_stays_running(tmp_path):
    root = tmp_path / "results"
    w = new_writer(root)  # this test process is the run's process
    w.add_snapshots(simple_snapshots(2))
    (row,) = list_runs(root)
    assert row["status"] == "running" and row["problem"] is None
    w.finish(None, summary=None, complete=False)
    (row,) = list_runs(root)
    assert row["status"] == "incomplete"


def test_load_run_by_id_prefix_and_directory(tmp_path):
    root = tmp_path / "results"
    w = finished_run(root, snapshots=1)
    assert load_run(w.path)["run_id"] == w.run_id
    assert load_run(str(w.path / "run.json"))["run_id"] == w.run_id
    assert load_run(w.run_id, root)["run_id"] == w.run_id
    assert load_run(w.run_id[:-2], root)["run_id"] == w.run_id
    with pytest.raises(RunNotFoundError, match="no run"):
        load_run("19990101-000000-0000", root)


def _set_schema_version(run_dir: Path, version) -> None:
    path = run_dir / "run.json"
    doc = json.loads(path.read_text())
    doc["schema_version"] = version
    path.write_text(json.dumps(doc))


def test_newer_schema_version_is_refused_clearly(tmp_path):
    root = tmp_path / "results"
    w = finished_run(root, snapshots=1)
    _set_schema_version(w.path, 99)
    with pytest.raises(RunFormatError, match=r"schema_version 99, newer .* upgrade tilemark"):
        load_run(w.run_id, root)
    # listed as damaged, saying why, instead of silently missing
    (row,) = list_runs(root)
    assert row["run_id"] == w.run_id and row["status"] == "damaged"
    assert "schema_version 99, newer" in row["problem"]


def test_old_schema_version_is_migrated_not_reinterpreted(tmp_path, monkeypatch):
    root = tmp_path / "results"
    w = finished_run(root, snapshots=1)

    def v4_to_v5(doc):
        return {**doc, "migrated_from_v4": True}

    monkeypatch.setattr(rundoc, "SCHEMA_VERSION", 5)  # the reading side migrates
    monkeypatch.setitem(rundoc.MIGRATIONS, 4, v4_to_v5)
    doc = load_run(w.path)
    assert doc["schema_version"] == 5 and doc["migrated_from_v4"] is True

    _set_schema_version(w.path, 0)  # no migration registered from 0
    with pytest.raises(RunFormatError, match="cannot migrate"):
        load_run(w.path)
    _set_schema_version(w.path, None)
    with pytest.raises(RunFormatError, match="not a tilemark run"):
        load_run(w.path)


def test_a_version_3_run_reads_as_a_one_host_run(tmp_path):
    root = tmp_path / "results"
    w = finished_run(root, snapshots=1)
    path = w.path / "run.json"
    doc = json.loads(path.read_text())
    doc.pop("hosts")
    doc["summary"].pop("hosts", None)
    doc["schema_version"] = 3
    path.write_text(json.dumps(doc))
    migrated = load_run(w.path)
    assert migrated["schema_version"] == 4
    assert migrated["hosts"] is None
    assert migrated["summary"]["hosts"] is None and migrated["summary"]["cluster"] is None


def test_locked_catalog_is_a_clear_error_and_the_run_is_kept(tmp_path, monkeypatch):
    root = tmp_path / "results"
    finished_run(root, snapshots=1)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
            "print('ready', flush=True); time.sleep(60)",
            str(root / "catalog.duckdb"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        monkeypatch.setattr(catalog, "LOCK_WAIT_S", 0.3)
        with pytest.raises(CatalogError, match=f"in use by another .*{holder.pid}"):
            list_runs(root)
        late = finished_run(root, snapshots=1)
        assert late.catalog_error and "in use" in late.catalog_error
        assert load_run(late.path)["status"] == "complete"
    finally:
        holder.kill()
        holder.wait()
    assert late.run_id in {r["run_id"] for r in list_runs(root)}


def test_missing_results_dir_lists_nothing_and_creates_nothing(tmp_path):
    assert list_runs(tmp_path / "nowhere") == []
    assert not (tmp_path / "nowhere").exists()


def test_finish_twice_is_refused(tmp_path):
    w = finished_run(tmp_path / "results", snapshots=1)
    with pytest.raises(rundoc.StoreError, match="already finished"):
        w.finish(None, summary=None, complete=True)
    assert os.path.isfile(w.path / "run.json")


def test_the_interval_log_imports_nothing_once_the_run_has_started(tmp_path):
    # A module imported during a run costs CPU next to the engine's threads: pyarrow's first
    # from_pylist imports pandas (0.27 s of CPU on the development VM). Creating the log, before
    # the engine starts, must already have paid for everything that writing batches needs.
    script = f"""
import sys
from pathlib import Path
from tilemark.store.intervals import IntervalLog, LOG_SPAN_NS
log = IntervalLog(Path({str(tmp_path / "intervals.arrows")!r}))
before = set(sys.modules)
log.add([], 0, LOG_SPAN_NS)
log.add([{{"interval": 0}}], LOG_SPAN_NS, 2 * LOG_SPAN_NS)
log.close()
print(sorted(set(sys.modules) - before))
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]", f"imported during the run: {out[:300]}"
    assert (tmp_path / "intervals.arrows").stat().st_size > 0
