"""fio's jobs that pace or end each other, on real IO (fio/pace.py): flow.fio and butterfly.fio
in small (HOWTO "flow": "if one job has flow=3, another job has flow=2 and another with
flow=1, then there will be a roughly 3:2:1 ratio in how much one runs vs the others") and
exitwhat.fio in small (HOWTO "exit_what": "stonewall terminates all currently running jobs
across all groups and continues execution with the next stonewalled group"; "all
terminates all jobs")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("tilemark._engine", reason="the engine is not built (make build)")

from tilemark.cli import main  # noqa: E402

pytestmark = pytest.mark.quick


def run(capsys, tmp_path: Path, text: str, *flags: str) -> dict:
    path = tmp_path / "job.fio"
    path.write_text(text)
    results = tmp_path / "results"
    status = main(["run", str(path), "--results", str(results), *flags])
    err = capsys.readouterr().err
    assert status == 0, err
    run_dir = max((p for p in results.iterdir() if (p / "run.json").exists()), key=lambda p: p.name)
    return json.loads((run_dir / "run.json").read_text())


def ops(stream: dict) -> int:
    return sum((stream[op] or {}).get("ops", 0) for op in ("read", "write"))


def test_flow_weights_1_and_8_give_one_write_for_eight_reads(tmp_path, capsys):
    # flow.fio on an 8 MiB file for 1 s (psync: the jobs at depth 1 on two engine threads).
    doc = run(
        capsys,
        tmp_path,
        f"[global]\nfilename={tmp_path / 't.dat'}\nsize=8m\nbs=8k\nioengine=psync\n"
        "time_based\nruntime=1s\nflow_sleep=1000\nthread\n"
        "[job2]\nrw=write\nflow=1\n[job1]\nrw=randread\nflow=8\n",
        "--threads",
        "2",
    )
    writer, reader = doc["summary"]["streams"]
    assert ops(writer) > 50, writer
    assert ops(reader) / ops(writer) == pytest.approx(8.0, rel=0.05)


def test_butterfly_reads_forward_and_backward_in_turn(tmp_path, capsys):
    # butterfly.fio on a 1 MiB file: both read it once (256 IOs each), paced 1:1.
    doc = run(
        capsys,
        tmp_path,
        f"[global]\nfilename={tmp_path / 't.dat'}\nsize=1m\nbs=4k\nioengine=psync\n"
        "[forward]\nrw=read\nflow=2\n[backward]\nrw=read:-8k\nflow=2\n",
        "--threads",
        "2",
    )
    forward, backward = doc["summary"]["streams"]
    assert ops(forward) == ops(backward) == 256
    spans = doc["result"]["spans"]
    # In step: neither can run ahead of the other, so they end together (a lone 256-IO read
    # of a cached file takes a few ms; the two end within a few IOs of each other).
    assert abs(spans[0]["ended_ns"] - spans[1]["ended_ns"]) < 20_000_000


# A stop asked by a stream of another engine thread is seen at this thread's next loop turn:
# within its longest sleep (worker.rs MAX_WAIT_NS, 50 ms), plus what the scheduler adds on a
# loaded host (CI runs two test workers on two CPUs: 107 ms was seen once). Without the stop,
# the fast jobs would run to the end of the run.
STOP_SEEN_NS = 150_000_000


# Serial: it times 2 ms think times and stops across threads, which another test's CPU burst
# on a 2-CPU machine stretches (CI, 2026-11-28: 50 think times of 2 ms took 185 ms).
@pytest.mark.serial
def test_exit_what_stonewall_then_all(tmp_path, capsys):
    # exitwhat.fio in small: slow1 does 50 IOs 2 ms apart and, ending, stops fast1 (running:
    # exit_what=stonewall), not slow2/fast2/runsnever (waiting at the stonewall); slow2 then
    # does its 50 and stops everything (exit_what=all). The fast jobs never end by themselves.
    doc = run(
        capsys,
        tmp_path,
        f"[global]\nfilename={tmp_path / 't.dat'}\nfilesize=8m\nblocksize=4096\n"
        "group_reporting\nexitall=1\n"
        "[slow1]\nrw=read\nioengine=sync\nnew_group=1\nthinktime=2000\nnumber_ios=50\n"
        "exit_what=stonewall\n"
        "[fast1]\nnew_group=1\nrw=randrw\nnumjobs=2\nioengine=libaio\niodepth=4\nrate=300k\n"
        "[slow2]\nstonewall\nrw=write\nioengine=sync\nnew_group=1\nthinktime=2000\n"
        "number_ios=50\nexit_what=all\n"
        "[fast2]\nrw=randrw\nnumjobs=2\nioengine=libaio\niodepth=4\nrate=300k\n"
        "[runsnever]\nrw=randrw\nioengine=libaio\niodepth=4\nrate=300k\n",
    )
    names = [s["name"] for s in doc["summary"]["streams"]]
    by = dict(zip(names, doc["result"]["spans"], strict=True))
    streams = dict(zip(names, doc["summary"]["streams"], strict=True))
    assert ops(streams["slow1"]) == 50 and ops(streams["slow2"]) == 50
    slow1_end = by["slow1"]["ended_ns"]
    assert slow1_end / 1e6 == pytest.approx(100, abs=60)  # 50 x (2 ms + the IO)
    for fast in ("fast1@0", "fast1@1"):
        assert by[fast]["stopped"]
        assert 0 <= by[fast]["ended_ns"] - slow1_end < STOP_SEEN_NS
        assert ops(streams[fast]) > 5  # it ran meanwhile
    slow2 = by["slow2"]
    assert slow2["started_ns"] >= max(by[f]["ended_ns"] for f in ("fast1@0", "fast1@1"))
    assert not slow2["stopped"]
    for job in ("fast2@0", "fast2@1", "runsnever"):
        # Started with slow2 (not stopped by slow1's end: not running then), ended by its end.
        assert by[job]["started_ns"] == pytest.approx(slow2["started_ns"], abs=5_000_000)
        assert by[job]["stopped"]
        assert 0 <= by[job]["ended_ns"] - slow2["ended_ns"] < STOP_SEEN_NS
