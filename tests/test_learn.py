"""tilemark learn: synthetic traces of a database-like application learned into a profile that
the loader accepts, with the streams, rates, placement and sync cadence the trace has; bad
input refused with one sentence and nothing written; fidelity scores recorded."""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

import numpy as np
import pytest

from tilemark.cli import main
from tilemark.errors import UsageError
from tilemark.learn import LearnOptions, commits, learn, model, placement
from tilemark.learn.traces import fingerprint
from tilemark.trace.schema import TraceMeta, TraceWriter
from tilemark.units import parse_size_mix
from tilemark.workload.apps import load_profile

MS = 1_000_000
GIB = 1 << 30


def _db_trace(
    path: Path,
    *,
    seconds: float = 10.0,
    devices: tuple[str, ...] = ("7:3",),
    log_pids: int = 1,
    fsyncs: bool = False,
) -> dict:
    """A database on one device: backends reading 8 KiB pages at random (Zipf-skewed) from a
    1 GiB table, a log writer appending 16 KiB sync writes each followed by a flush, and
    kworker writing pages back asynchronously in batches; with `fsyncs`, a checkpointer's
    fsync of the table every second (16 random 8 KiB sync writes 200 ns apart, then a flush).
    Returns what was put in."""
    rng = np.random.default_rng(5)
    rows: list[tuple] = []
    span = int(seconds * 1e9)
    # reads: 400/s Poisson from 4 backends
    t = 0
    ranks = rng.zipf(1.3, size=100_000) % (GIB // 8192)
    i = 0
    while True:
        t += int(rng.exponential(1e9 / 400))
        if t >= span:
            break
        off = int(ranks[i] * 7919 % (GIB // 8192)) * 8192  # hot pages scattered over the table
        rows.append((t, t + 2 * MS, "read", off, 8192, False, 100 + i % 4, "postgres"))
        i += 1
    reads = i
    # log: 100/s constant, sequential 16 KiB at 2 GiB.., each followed by a flush
    log = 0
    for k in range(int(seconds * 100)):
        t = k * 10 * MS + 3 * MS
        pid = 200 + k % log_pids  # the sessions committing, one WAL write at a time
        rows.append((t, t + MS, "write", 2 * GIB + k * 16384, 16384, True, pid, "postgres"))
        rows.append((t + MS + 1000, t + 2 * MS, "flush", 0, 0, False, pid, "postgres"))
        log += 1
    # writeback: batches of 32 async 8 KiB writes every 500 ms
    wb = 0
    for k in range(int(seconds * 2)):
        base = k * 500 * MS + 7 * MS
        for j in range(32):
            off = int(rng.integers(0, GIB // 8192)) * 8192
            tj = base + j * 20_000
            rows.append((tj, tj + 5 * MS, "write", off, 8192, False, 300 + k % 3, "kworker/u8:1"))
            wb += 1
    fsynced = 0
    for k in range(int(seconds) if fsyncs else 0):
        base = k * 1000 * MS + 501 * MS
        for j in range(16):
            off = int(rng.integers(0, GIB // 8192)) * 8192
            tj = base + j * 200
            rows.append((tj, tj + 4 * MS, "write", off, 8192, True, 400, "postgres"))
            fsynced += 1
        rows.append((base + 5 * MS, base + 6 * MS, "flush", 0, 0, False, 400, "postgres"))
    rows.sort()
    _write_rows(path, rows, devices)
    return {"reads": reads, "log": log, "writeback": wb, "fsynced": fsynced,
            "span_s": rows[-1][0] / 1e9}  # fmt: skip


def _write_rows(path: Path, rows: list[tuple], devices: tuple[str, ...] = ("7:3",)) -> None:
    """A trace of (issue, complete, op, offset, size, sync, pid, comm) rows, in issue order;
    the devices taken in turn."""
    cols = {
        "issue_ns": [r[0] for r in rows],
        "complete_ns": [r[1] for r in rows],
        "op": [r[2] for r in rows],
        "offset": [r[3] for r in rows],
        "size": [r[4] for r in rows],
        "sync": [r[5] for r in rows],
        "pid": [r[6] for r in rows],
        "comm": [r[7] for r in rows],
        "device": [devices[n % len(devices)] for n in range(len(rows))],
    }
    with TraceWriter(path, TraceMeta(source="synthetic", device="/dev/loop3")) as w:
        w.write(cols)


@pytest.fixture(scope="module")
def db_trace(tmp_path_factory):
    """_db_trace(path, **kw) written once per module for each set of arguments (the tests
    only read them): (path, what was put in)."""
    made: dict[tuple, tuple[Path, dict]] = {}
    where = tmp_path_factory.mktemp("traces")

    def trace(**kw) -> tuple[Path, dict]:
        key = tuple(sorted(kw.items()))
        if key not in made:
            path = where / f"db{len(made)}.parquet"
            made[key] = path, _db_trace(path, **kw)
        return made[key]

    return trace


@pytest.fixture(scope="module")
def learned_db(db_trace, tmp_path_factory):
    """The 3-second database trace and the profile learned from it (no unit); tests that
    change the profile copy it."""
    trace, _ = db_trace(seconds=3)
    out = tmp_path_factory.mktemp("learned") / "db.toml"
    learn(LearnOptions(traces=(trace,), output=out))
    return trace, out


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    """`tilemark ARGS` in this process (the CLI's own entry point: its exit status and what it
    printed; a subprocess would only add Python's start-up)."""
    status = main([str(a) for a in args])
    printed = capsys.readouterr()
    return status, printed.out, printed.err


def test_a_database_trace_learns_its_reader_log_and_writeback_streams(tmp_path, db_trace):
    trace, put = db_trace()
    out = tmp_path / "db.toml"
    result = learn(LearnOptions(traces=(trace,), output=out, unit="tps=50"))
    profile = load_profile(str(out))
    names = {s.name for s in profile.streams}
    assert names == {"postgres_read", "postgres_log", "kworker_writeback"}
    rates = {k: v["iops"] for k, v in profile.rates().items()}
    span = put["span_s"]
    assert rates["postgres_read"] == pytest.approx(put["reads"] / span, rel=0.01)
    assert rates["postgres_log"] == pytest.approx(put["log"] / span, rel=0.01)
    assert rates["kworker_writeback"] == pytest.approx(put["writeback"] / span, rel=0.01)
    by = {s.name: s.table for s in profile.streams}
    assert by["postgres_read"]["rw"] == "randread"
    assert by["postgres_read"]["pattern"].startswith(("zipf:", "hotspot:"))  # skewed, not uniform
    assert by["postgres_read"]["bs"] == "8k"
    assert by["postgres_log"]["pattern"] == "sequential" and by["postgres_log"]["rw"] == "write"
    # a flush after every write of an appended log: commits, joined as the device slows
    assert by["postgres_log"]["sync"] == "fdatasync:group"
    assert by["postgres_log"]["arrival"] == "constant"
    assert {s.name: s.qd for s in profile.streams}["postgres_log"] == 1  # one writer, one IO
    assert by["kworker_writeback"]["writeback"] is True
    # 32 writes 20 us apart every 500 ms: batches of 32 whose IOs come 20 us apart (two
    # exponentials fitted to the gaps), not 32 at once nor CV-matched Poisson
    # (its gaps: 31 in each batch, and a pause between two: 19 pauses among 20 batches)
    batches = put["writeback"] / 32
    assert by["kworker_writeback"]["batch"] == pytest.approx(
        (put["writeback"] - 1) / (batches - 1), rel=0.01
    )
    assert by["kworker_writeback"]["batch_gap"] == "0.02ms"
    # log and data touch different places: two areas, the log's the size of what it wrote
    areas = {s.name: s.region for s in profile.streams}
    assert areas["postgres_read"] == areas["kworker_writeback"] != areas["postgres_log"]
    doc = tomllib.loads(out.read_text())
    log_share = areas["postgres_log"][1] - areas["postgres_log"][0]
    assert log_share * doc["learned"]["capacity"] >= put["log"] * 16384
    assert profile.metric_unit == "tps"
    assert doc["scale"]["rate"] == 1
    total = sum(rates.values())
    assert doc["scale"]["ios_per_tps"] == pytest.approx(total / 50, rel=1e-4)
    src = doc["learned"]["source"][0]
    assert src["fingerprint"] == fingerprint(trace)
    assert src["rows"] == put["reads"] + 2 * put["log"] + put["writeback"]
    assert doc["learned"]["model_bytes"] == len(out.read_bytes())
    assert result.model_bytes < result.trace_bytes


def test_a_files_fsync_is_a_stream_of_its_own_due_at_once_and_flushed_once(tmp_path, db_trace):
    # The checkpointer's fsyncs: runs of 16 random sync writes dispatched 200 ns apart, then
    # one flush. They are not the log's (sequential, a flush after each write): a stream of
    # their own, in batches of 16 due at once, an fdatasync after each 16 writes.
    trace, put = db_trace(seconds=10, fsyncs=True)
    out = tmp_path / "db.toml"
    learn(LearnOptions(traces=(trace,), output=out))
    profile = load_profile(str(out))
    by = {s.name: s.table for s in profile.streams}
    assert set(by) == {"postgres_read", "postgres_log", "postgres_filesync", "kworker_writeback"}
    fs = by["postgres_filesync"]
    assert fs["rw"] == "randwrite" and fs["bs"] == "8k"
    # 16 per run, 10 runs: 150 gaps inside, 9 pauses (as for the writeback above)
    runs = put["fsynced"] / 16
    assert fs["batch"] == pytest.approx((put["fsynced"] - 1) / (runs - 1), rel=0.01)
    assert "batch_gap" not in fs  # 200 ns apart: due at once
    assert fs["sync"] == "fdatasync:16"
    rates = {k: v["iops"] for k, v in profile.rates().items()}
    assert rates["postgres_filesync"] == pytest.approx(put["fsynced"] / put["span_s"], rel=0.01)
    # the log keeps its own: sequential, every write flushed, its writes only
    assert by["postgres_log"]["pattern"] == "sequential"
    assert by["postgres_log"]["sync"] == "fdatasync:group"
    assert rates["postgres_log"] == pytest.approx(put["log"] / put["span_s"], rel=0.01)


def test_the_rate_knob_scales_every_learned_stream(learned_db):
    _, out = learned_db
    profile = load_profile(str(out))
    base = profile.rates()
    doubled = profile.with_overrides({"rate": 2}).rates()
    for name, r in base.items():
        assert doubled[name]["iops"] == pytest.approx(2 * r["iops"])
    assert profile.metric_unit == "IOPS"


def test_two_traces_are_learned_end_to_end(tmp_path, db_trace):
    a, pa = db_trace(seconds=3)
    b, pb = db_trace(seconds=4)
    out = tmp_path / "ab.toml"
    learn(LearnOptions(traces=(a, b), output=out))
    doc = tomllib.loads(out.read_text())
    assert len(doc["learned"]["source"]) == 2
    assert doc["learned"]["ios"] == sum(p["reads"] + p["log"] + p["writeback"] for p in (pa, pb))


def test_phases_come_from_chunks_where_a_stream_s_rate_moves(tmp_path, db_trace):
    trace, _ = db_trace()
    out = tmp_path / "db.toml"
    learn(LearnOptions(traces=(trace,), output=out, chunk_s=0.25))
    profile = load_profile(str(out))
    phased = [s for s in profile.streams if s.name.startswith("kworker_writeback.p")]
    steady = [s for s in profile.streams if s.name == "postgres_log"]
    assert phased and steady  # writeback comes every 500 ms; the log is steady
    assert all("start" in s.table and "stop" in s.table for s in phased)


def test_too_few_ios_say_how_many_there_are_and_are_needed(tmp_path):
    trace = tmp_path / "small.parquet"
    with TraceWriter(trace, TraceMeta(source="synthetic")) as w:
        w.write({"issue_ns": list(range(0, 50_000, 1000)), "op": ["read"] * 50,
                 "offset": [4096 * i for i in range(50)], "size": [4096] * 50})  # fmt: skip
    out = tmp_path / "small.toml"
    with pytest.raises(UsageError, match=r"has 50 reads and writes; a model needs at least 200"):
        learn(LearnOptions(traces=(trace,), output=out))
    assert not out.exists()


def test_a_trace_mixing_devices_needs_device(tmp_path):
    trace = tmp_path / "two.parquet"
    _db_trace(trace, seconds=3, devices=("7:3", "259:0"))
    out = tmp_path / "two.toml"
    with pytest.raises(UsageError, match=r"mixes devices .*--device"):
        learn(LearnOptions(traces=(trace,), output=out))
    assert not out.exists()
    learn(LearnOptions(traces=(trace,), output=out, device="7:3"))
    assert tomllib.loads(out.read_text())["learned"]["source"][0]["device"] == "7:3"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--unit", "tps"], "--unit must be NAME=PER_SECOND"),
        (["--unit", "tps=-3"], "--unit must be NAME=PER_SECOND"),
        (["--device", "9:9"], "has no requests of device 9:9"),
        (["--chunk", "1ms"], "at most 64"),
    ],
)
def test_bad_input_is_one_sentence_exit_2_and_nothing_written(
    tmp_path, db_trace, capsys, args, message
):
    trace, _ = db_trace(seconds=3)
    out = tmp_path / "x.toml"
    status, _, err = _cli(capsys, "learn", trace, "-o", out, *args)
    assert status == 2, err
    assert message in err and "Traceback" not in err
    assert not out.exists()


def test_a_max_capacity_below_the_areas_themselves_is_refused(tmp_path, db_trace):
    # --max-capacity shrinks the gaps between areas; areas larger than it are one sentence,
    # exit 2, nothing written (a profile larger than asked for would fail at its target)
    trace, _ = db_trace(seconds=2)
    out = tmp_path / "db.toml"
    with pytest.raises(UsageError, match=r"--max-capacity 1 MiB is below the .* use at least"):
        learn(LearnOptions(traces=(trace,), output=out, max_capacity=1 << 20))
    assert not out.exists()
    learn(LearnOptions(traces=(trace,), output=out, max_capacity=1 << 40))
    assert out.exists()


def test_areas_spread_wider_than_max_capacity_are_fitted_within_it(tmp_path, db_trace):
    # the table's pages spread over 1 GiB, the log 1 GiB past it: 256 MiB is room for what
    # they touched (about 40 MiB), not for their extents; the areas are fitted within it
    trace, _ = db_trace(seconds=3)
    out = tmp_path / "db.toml"
    learn(LearnOptions(traces=(trace,), output=out, max_capacity=256 << 20))
    doc = tomllib.loads(out.read_text())
    assert doc["learned"]["capacity"] <= 256 << 20
    assert any("fitted within --max-capacity" in n for n in doc["learned"]["notes"])
    assert load_profile(str(out)).streams


def test_an_existing_file_not_written_by_tilemark_is_kept(tmp_path, db_trace):
    trace, _ = db_trace(seconds=3)
    out = tmp_path / "mine.toml"
    out.write_text("# my notes\n")
    with pytest.raises(UsageError, match="was not written by tilemark"):
        learn(LearnOptions(traces=(trace,), output=out))
    assert out.read_text() == "# my notes\n"
    learn(LearnOptions(traces=(trace,), output=out, force=True))
    learn(LearnOptions(traces=(trace,), output=out))  # its own file: replaced


def test_fidelity_scores_are_recorded_in_the_profile_learned_from_the_trace(
    tmp_path, db_trace, learned_db, capsys
):
    a, learned = learned_db  # the profile learned from A
    b, _ = db_trace(seconds=4)
    out = tmp_path / "db.toml"
    shutil.copy(learned, out)
    status, _, err = _cli(capsys, "fidelity", a, b, "--record", out)
    assert status == 0, err
    fid = tomllib.loads(out.read_text())["learned"]["fidelity"]
    assert fid["reference"] == str(a) and 0.5 < fid["overall"] <= 1.0
    assert set(fid) >= {"rate", "seek_distance", "skew"}
    load_profile(str(out))  # still a profile
    _, shown, _ = _cli(capsys, "profiles", "show", out)
    assert "fidelity against" in shown and "fingerprint" in shown
    # the writeback's batching said in words (rich may wrap the cell: compare its words):
    # six batches in the 3 s trace, so at constant intervals
    words = " ".join(shown.replace("│", " ").split())
    assert re.search(r"constant, batches of [0-9.]+ \(0\.02ms apart\)", words), words
    # B was not the source: refused, the profile untouched
    before = out.read_text()
    status, _, err = _cli(capsys, "fidelity", b, a, "--record", out)
    assert status == 2 and "was not learned from" in err
    assert out.read_text() == before


def test_fidelity_of_streams_without_a_common_property_is_refused(tmp_path, db_trace, capsys):
    a, _ = db_trace(seconds=3)
    b = tmp_path / "flushes.parquet"
    with TraceWriter(b, TraceMeta(source="synthetic")) as w:
        w.write({"issue_ns": [0, 1000, 2000], "op": ["flush"] * 3, "offset": [0] * 3,
                 "size": [0] * 3})  # fmt: skip
    status, _, err = _cli(capsys, "fidelity", a, b)
    assert status == 2
    assert "no property in common" in err and "Traceback" not in err


def test_placement_fit_reproduces_the_skew_and_the_footprint_of_a_zipf_stream():
    length = 256 << 20
    sizes = np.full(20_000, 8192)
    offsets = placement.simulate("zipf:1.1", 100, sizes, length, seed=9)
    obs = placement.Observed(offsets + (1 << 30), sizes, 100.0)
    fitted = placement.fit_area([obs], extent=4 * length)
    assert obs.pattern != "uniform"
    again = placement.simulate(obs.pattern, 100, sizes, fitted, seed=4)
    want, got = placement.hot_shares(offsets), placement.hot_shares(again)
    # fidelity's skew accuracy: 1 - the mean absolute difference of the two shares
    assert 1 - (abs(want[0] - got[0]) + abs(want[1] - got[1])) / 2 > 0.95, (want, got)
    blocks = len(placement.touched_blocks(offsets, sizes))
    assert len(placement.touched_blocks(again, sizes)) == pytest.approx(blocks, rel=0.1)


def test_a_log_that_also_jumps_gets_the_region_of_its_writes_not_of_its_extent():
    # PostgreSQL's WAL: 24 KiB writes that start 8 KiB back (rewriting the last page), and now
    # and then a jump to another segment file far away. The sequential model (skip -8k for
    # every IO) advances a little less than the trace, so no region reaches the trace's
    # footprint; the region is then the smallest that gives what the largest gives, not the
    # whole extent between the segment files.
    sizes = np.full(1000, 24 << 10)
    offsets = np.empty(1000, dtype=np.int64)
    at = 0
    for i in range(1000):
        if i % 30 == 29:
            at += 4 << 20  # the next segment file, 4 MiB on
        offsets[i] = at
        at += (24 << 10) - (8 << 10)
    extent = int(offsets[-1] + sizes[-1])
    obs = placement.Observed(offsets, sizes, 0.0, skip=(-(8 << 10), -(8 << 10)))
    fitted = placement.fit_area([obs], extent=extent)
    written = 1000 * (16 << 10)
    assert fitted <= 1.25 * written, (fitted, written, extent)
    assert extent > 5 * fitted


def test_a_log_written_by_several_sessions_is_a_group_commit_log(tmp_path, db_trace):
    # four sessions writing the log one write at a time (what the device sees at low load):
    # as the device slows, all four can be waiting for their commits, which a database serves
    # with one write and flush (group commit): the stream joins the commits due meanwhile
    trace, _ = db_trace(log_pids=4)
    out = tmp_path / "db.toml"
    learn(LearnOptions(traces=(trace,), output=out))
    streams = {s.name: s for s in load_profile(str(out)).streams}
    assert streams["postgres_log"].table["sync"] == "fdatasync:group"
    assert streams["postgres_read"].qd <= 3  # other streams keep what the device saw (p90)
    assert "join the next write and flush" in out.read_text()


def _group_log_trace(
    path: Path, *, commits: float, seconds: float = 20.0, sessions: int = 4
) -> dict:
    """A database's log under group commit: Poisson commits of 8 KiB each, written in rounds
    of a write (1 ms) and its flush (1 ms); the commits that came while a round was in flight
    go in the next one, one write from the first's offset to the last's end (the engine's
    worker/group.rs). The trace has the rounds only, as a block trace would."""
    rng = np.random.default_rng(11)
    arrivals = np.cumsum(rng.exponential(1e9 / commits, size=int(commits * seconds * 1.2)))
    arrivals = arrivals[arrivals < seconds * 1e9].astype(np.int64)
    rows: list[tuple] = []
    at, i, offset = 0, 0, 0
    while i < len(arrivals):
        start = max(at, int(arrivals[i]))
        k = max(1, int(np.searchsorted(arrivals, start, side="right")) - i)
        size = 8192 * k
        pid = 200 + i % sessions
        rows.append((start, start + MS, "write", offset, size, True, pid, "postgres"))
        rows.append((start + MS, start + 2 * MS, "flush", 0, 0, False, 200, "postgres"))
        offset += size
        at, i = start + 2 * MS, i + k
    _write_rows(path, rows)
    span = rows[-2][0] / 1e9
    return {"commits": len(arrivals) / span, "rounds": len(rows) / 2 / span,
            "bytes": 8192 * len(arrivals) / span}  # fmt: skip


def test_a_group_commit_log_is_learned_as_its_commits_not_its_rounds(tmp_path, capsys):
    # 500 commits a second grouped by rounds of 2 ms: the trace shows about 365 writes a
    # second. Learned as 365 commits a second, the engine would group those again (about 300
    # rounds): the stream's rate is the commit rate whose rounds come as often as the trace's.
    trace = tmp_path / "log.parquet"
    put = _group_log_trace(trace, commits=500)
    assert put["rounds"] < 0.8 * put["commits"]  # the trace is grouped
    out = tmp_path / "log.toml"
    learn(LearnOptions(traces=(trace,), output=out, unit="tps=500"))
    profile = load_profile(str(out))
    (log,) = profile.streams
    assert log.table["sync"] == "fdatasync:group" and log.table["arrival"] == "poisson"
    rate = profile.rates()[log.name]["iops"]
    assert rate == pytest.approx(put["commits"], rel=0.05)
    # the engine's rounds at that rate, a write and flush taking 2 ms: the trace's
    assert commits.round_rate(rate, np.array([2e-3])) == pytest.approx(put["rounds"], rel=0.01)
    # each commit writes its share of a round's bytes: the log's bytes a second are kept
    assert log.table["bs"] == "8k"  # each commit its 8 KiB, as put in
    mix = parse_size_mix(log.table["bs"], "bs")
    per_commit = sum(b * w for b, w in mix) / sum(w for _, w in mix)
    assert rate * per_commit == pytest.approx(put["bytes"], rel=0.1)
    doc = tomllib.loads(out.read_text())
    assert doc["learned"]["stream"][log.name]["rounds_iops"] == pytest.approx(put["rounds"], 0.01)
    assert "to a round" in out.read_text()
    # the application's unit counts the profile's IOs (commits): 500 tps is the profile's rate
    assert doc["scale"]["ios_per_tps"] == pytest.approx(rate / 500, rel=1e-4)
    status, shown, _ = _cli(capsys, "profiles", "show", out)
    assert status == 0
    assert f"{log.name}: {rate:.4g} commits a second behind the trace's" in shown


def test_a_log_one_process_wrote_keeps_its_writes_as_its_commits(tmp_path):
    # the same rounds from one process: one transaction at a time, none waits with another
    trace = tmp_path / "log.parquet"
    put = _group_log_trace(trace, commits=500, sessions=1)
    out = tmp_path / "log.toml"
    learn(LearnOptions(traces=(trace,), output=out))
    profile = load_profile(str(out))
    (log,) = profile.streams
    assert log.table["sync"] == "fdatasync:group"
    assert profile.rates()[log.name]["iops"] == pytest.approx(put["rounds"], rel=0.01)
    assert "to a round" not in out.read_text()


def test_reads_that_land_just_after_the_one_before_follow_it_by_a_skip(tmp_path):
    # 12% of the reads 8 KiB after the previous read's end (pages near each other), the rest
    # at random over 1 GiB, where chance puts 0.006% within 64 KiB: random = 88, skip = 8k
    rng = np.random.default_rng(9)
    rows, t, end = [], 0, 0
    for i in range(4000):
        t += int(rng.exponential(1e9 / 400))
        near = rng.random() < 0.12 and end
        off = end + 8192 if near else int(rng.integers(0, GIB // 8192)) * 8192
        rows.append((t, t + MS, "read", off, 8192, False, 100 + i % 4, "postgres"))
        end = off + 8192
    trace = tmp_path / "reads.parquet"
    _write_rows(trace, rows)
    out = tmp_path / "reads.toml"
    learn(LearnOptions(traces=(trace,), output=out))
    (reads,) = load_profile(str(out)).streams
    assert reads.table["skip"] == "8k"
    assert reads.table["random"] == pytest.approx(88, abs=2)
    # a random stream without them keeps no skip
    plain = tmp_path / "plain.parquet"
    _write_rows(plain, [(r[0], r[1], r[2], int(rng.integers(0, GIB // 8192)) * 8192, *r[4:])
                        for r in rows])  # fmt: skip
    learn(LearnOptions(traces=(plain,), output=tmp_path / "plain.toml"))
    (plain_reads,) = load_profile(str(tmp_path / "plain.toml")).streams
    assert "skip" not in plain_reads.table


def test_a_few_large_batches_come_at_constant_intervals(tmp_path, db_trace):
    # the writeback's batches of 32: 20 in the 10 s trace stay Poisson; 6 in 3 s come at
    # constant intervals (with Poisson pauses a run as long as a trace of one batch has none
    # in 37% of its windows)
    many, few = tmp_path / "many.toml", tmp_path / "few.toml"
    learn(LearnOptions(traces=(db_trace()[0],), output=many))
    learn(LearnOptions(traces=(db_trace(seconds=3)[0],), output=few))
    wb = {p.name: {s.name: s.table for s in load_profile(str(p)).streams} for p in (many, few)}
    assert wb["many.toml"]["kworker_writeback"]["arrival"] == "poisson"
    assert wb["few.toml"]["kworker_writeback"]["arrival"] == "constant"
    assert re.search(
        r"batches in the trace: at constant intervals, 0\.\d+ s apart", few.read_text()
    )


def test_a_size_mix_keeps_the_bytes_of_its_rare_sizes():
    # RocksDB-like: most IOs 4 to 64 KiB, and compaction writes of 300 sizes from 256 KiB to
    # 4 MiB, none of them 0.5% of the IOs, carrying most of the bytes
    rng = np.random.default_rng(3)
    small = rng.choice(
        [4096, 8192, 16384, 32768, 65536], size=20_000, p=[0.4, 0.3, 0.15, 0.1, 0.05]
    )
    large = (rng.integers(64, 1024, size=3_000) * 4096).astype(np.int64)
    odd = np.full(150, 12288 + 4096 * 3)  # a rare size between two kept ones: 24 KiB
    sizes = np.concatenate([small, large, odd])
    mix = model._size_mix(sizes)
    assert sum(w for _, w in mix) == pytest.approx(1.0)
    assert len(mix) <= model.MAX_SIZES + 1
    mean = sum(b * w for b, w in mix)
    assert mean == pytest.approx(sizes.mean(), rel=0.01)  # joined to 64 KiB: a fifth of it
    assert {4096, 8192, 16384, 32768, 65536} <= {b for b, _ in mix}


def test_trace_columns_read_from_buffers_equal_arrow_s_own_conversion():
    # tilemark.trace.columns reads Arrow buffers itself (Arrow's to_numpy imports pandas):
    # sliced chunks, nulls filled, booleans and dictionaries give what Arrow gives
    import pyarrow as pa

    from tilemark.trace.columns import numbers, strings

    ints = pa.chunked_array([pa.array([1, None, 3]), pa.array([7, 8, 9, 10]).slice(1)])
    assert numbers(ints, np.int64, -1).tolist() == [1, -1, 3, 8, 9, 10]
    assert numbers(ints.fill_null(0), np.float64).tolist() == [1.0, 0.0, 3.0, 8.0, 9.0, 10.0]
    flags = pa.array([True, None, False, True, True, False, False, False, True, True]).slice(2)
    want = flags.fill_null(False).to_numpy(zero_copy_only=False).tolist()
    assert numbers(flags, np.bool_, False).tolist() == want
    ops = pa.array(["read", "write", None, "read"]).dictionary_encode()
    names = pa.chunked_array([pa.array(["a", None]), pa.array(["x", "b", "a"]).slice(1)])
    assert strings(ops).tolist() == ["read", "write", None, "read"]
    assert strings(names, "").tolist() == ["a", "", "b", "a"]
    assert numbers(pa.chunked_array([], pa.int64()), np.int64).tolist() == []


def test_flushes_follow_a_family_s_few_sync_writes_into_the_stream_they_joined(tmp_path):
    # PostgreSQL in a short window: many reads and page-cache writes, only a few WAL writes
    # of its own (the flusher wrote the rest), each followed by its flush; the ext4 journal
    # writes sync too. The WAL writes are too few for a stream and join another postgres
    # stream; their flushes must go with them, not to the journal.
    rows = []
    for k in range(300):
        rows.append((k * 3 * MS, k * 3 * MS + MS, "read", k * 8192, 8192, False, 100, "postgres"))
    for k in range(60):
        t = k * 15 * MS + MS
        rows.append((t, t + MS, "write", GIB + k * 8192, 8192, False, 101, "postgres"))
    for k in range(8):
        t = k * 100 * MS + 2 * MS
        rows.append((t, t + MS, "write", 2 * GIB + k * 8192, 8192, True, 102, "postgres"))
        rows.append((t + MS + 1000, t + 2 * MS, "flush", 0, 0, False, 102, "postgres"))
    for k in range(40):
        t = k * 20 * MS + 5 * MS
        rows.append((t, t + MS, "write", 3 * GIB + k * 4096, 4096, True, 7, "jbd2/loop3-8"))
    rows.sort()
    names = ("issue_ns", "complete_ns", "op", "offset", "size", "sync", "pid", "comm")
    cols = {n: [r[i] for r in rows] for i, n in enumerate(names)}
    cols["device"] = ["7:3"] * len(rows)
    trace = tmp_path / "pg.parquet"
    with TraceWriter(trace, TraceMeta(source="synthetic", device="/dev/loop3")) as w:
        w.write(cols)
    out = tmp_path / "pg.toml"
    learn(LearnOptions(traces=(trace,), output=out))
    doc = tomllib.loads(out.read_text())
    synced = {s["name"]: s.get("sync") for s in doc["stream"] if s.get("sync")}
    assert [n for n in synced if n.startswith("postgres_")], synced
    assert all(v.startswith("fdatasync:") for n, v in synced.items() if n.startswith("postgres_"))
    assert "jbd2_journal" not in synced, synced
