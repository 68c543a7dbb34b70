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


def test_a_group_ended_by_its_criterion_starts_the_next(tmp_path, capsys):
    # a: 200 IOPS paced, so every 0.2 s sample is the same and iops:30% over 0.6 s holds
    # 0.6 s in; its stop (5 s) is never reached. b waits for a and runs 0.3 s.
    target = tmp_path / "t.dat"
    run_dir = run(
        capsys,
        tmp_path,
        "w.toml",
        f'target = "{target}"\nsize = "4m"\ninterval = "0.2s"\nbackend = "psync"\n'
        '[[steadystate]]\ncriterion = "iops"\nlimit = "30%"\nwindow = "0.6s"\nsample = "0.2s"\n'
        'streams = ["a"]\nends = "streams"\n'
        '[[stream]]\nname = "a"\nrw = "randread"\nrate = 200\nstop = "5s"\n'
        '[[stream]]\nname = "b"\nrw = "randread"\nrate = 200\nafter = "a"\nstop = "0.3s"\n',
    )
    doc = json.loads((run_dir / "run.json").read_text())
    (group,) = doc["summary"]["fio_steady_state"]["groups"]
    assert group["met"] and group["ends"] == "streams"
    a, b = doc["summary"]["streams"]
    # a was stopped from Python when the rule was met (its samples come in as intervals end).
    assert group["met_at_s"] <= a["active_s"] < group["met_at_s"] + 0.5
    assert b["start_s"] == pytest.approx(a["active_s"], abs=0.05)
    assert b["active_s"] == pytest.approx(0.3, abs=0.02)
    assert doc["summary"]["duration_s"] < 2.5  # not a's 5 s
