"""Phases that start when the jobs before them have ended, on real IO (HOWTO "stonewall":
"Wait for preceding jobs in the job file to exit, before starting this one"): a fill that
writes a small file once, paced so that it takes a few intervals, then a stonewalled random
read; and a group ended by its steady-state criterion, after which the next group starts
(steadystate.c ends the group's jobs; backend.c run_threads then starts the next)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("tilemark._engine", reason="the engine is not built (make build)")

from tilemark.cli import main  # noqa: E402

pytestmark = pytest.mark.quick


def run(capsys, tmp_path: Path, name: str, text: str, *flags: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    results = tmp_path / "results"
    status = main(["run", str(path), "--results", str(results), *flags])
    err = capsys.readouterr().err
    assert status == 0, err
    return max((p for p in results.iterdir() if (p / "run.json").exists()), key=lambda p: p.name)


# Serial tier: its read phase is timed to 20 ms; in the parallel tier on 2 cores a 300 ms
# phase once ran 406 ms (CI on 697ec48), as the psync phase tests of c9682ff did.
@pytest.mark.serial
def test_a_stonewalled_phase_starts_after_the_fills_last_write(tmp_path, capsys):
    import pyarrow.parquet as pq

    # 2 MiB at 8 MiB/s: the fill takes about 0.25 s, over several 0.1 s intervals.
    run_dir = run(
        capsys,
        tmp_path,
        "job.fio",
        f"[global]\nfilename={tmp_path / 't.dat'}\nsize=2m\nioengine=psync\n"
        "[fill]\nrw=write\nbs=64k\nrate=8m\n"
        "[read]\nstonewall\nrw=randread\nbs=4k\ntime_based\nruntime=300ms\n",
        "--interval",
        "0.1s",
    )
    doc = json.loads((run_dir / "run.json").read_text())
    fill, read = doc["summary"]["streams"]
    spans = doc["result"]["spans"]
    assert fill["write"]["bytes"] == 2 * 1024 * 1024  # the fill wrote the file once
    # The engine's spans: the read phase started when the fill's last write had completed,
    # within the engine's 1 ms look across its threads (plus the scheduler on a busy machine).
    fill_end, read_start = spans[0]["ended_ns"], spans[1]["started_ns"]
    assert fill_end / 1e9 == pytest.approx(0.25, abs=0.1)  # paced: not at once
    assert 0 <= read_start - fill_end < 50_000_000
    assert (spans[1]["ended_ns"] - read_start) / 1e9 == pytest.approx(0.3, abs=0.02)
    # The summary rates each phase over its own time.
    assert fill["active_s"] == pytest.approx(fill_end / 1e9, abs=1e-6)
    assert read["start_s"] == pytest.approx(read_start / 1e9, abs=1e-6)
    assert read["active_s"] == pytest.approx(0.3, abs=0.02)
    # The interval data agree: no read completed in an interval that ended before the fill
    # did, no write in one that began after the read phase started.
    rows = pq.read_table(run_dir / "intervals.parquet").to_pylist()
    reads = [r for r in rows if r["stream_name"] == "read" and r["op"] == "read" and r["ops"]]
    writes = [r for r in rows if r["stream_name"] == "fill" and r["op"] == "write" and r["ops"]]
    assert sum(r["ops"] for r in writes) == 32
    assert min(r["end_ns"] for r in reads) > fill_end
    assert max(r["start_ns"] for r in writes) < read_start
    assert max(r["interval"] for r in writes) <= min(r["interval"] for r in reads)


# Serial: it times phases of 0.2-0.3 s on the psync backend, which another test's CPU burst
# shifts by tens of ms on a 2-CPU machine (CI, 2026-11-28: b ran 0.32 s; a window held).
@pytest.mark.serial
def test_a_group_ended_by_its_criterion_starts_the_next(tmp_path, capsys):
    # steadystate.fio in small: group a is paced at 200 IOPS, so every 1 s sample is 200 and
    # iops:30% over ss_dur=2 holds 2 s in, long before its 20 s runtime; b (stonewall) waits
    # for a and runs its 300 ms. fio's HOWTO steadystate: "When the criterion falls below the
    # threshold for the specified duration, the job will stop".
    run_dir = run(
        capsys,
        tmp_path,
        "job.fio",
        f"[global]\nfilename={tmp_path / 't.dat'}\nsize=4m\nioengine=psync\ntime_based\n"
        "rw=randread\n"
        "[a]\nruntime=20\nrate_iops=200\nss=iops:30%\nss_dur=2\n"
        "[b]\nstonewall\nruntime=300ms\n",
    )
    doc = json.loads((run_dir / "run.json").read_text())
    (group,) = doc["summary"]["fio_steady_state"]["groups"]
    assert group["met"] and group["ends"] == "streams" and group["met_at_s"] == pytest.approx(2.0)
    a, b = doc["summary"]["streams"]
    spans = doc["result"]["spans"]
    # a was stopped from Python once its rule was met (samples arrive as intervals end).
    a_end, b_start = spans[0]["ended_ns"] / 1e9, spans[1]["started_ns"] / 1e9
    assert group["met_at_s"] <= a_end < group["met_at_s"] + 0.6
    assert 0 <= b_start - a_end < 0.05  # b started when a had ended
    assert b["active_s"] == pytest.approx(0.3, abs=0.02)
    assert a["total"]["iops"] == pytest.approx(200, rel=0.2)
    assert doc["summary"]["duration_s"] < 4  # not a's 20 s
