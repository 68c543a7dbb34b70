"""`tilemark replay`: traces written with the trace schema, replayed on small tilemark files
and a loop device, each in a few seconds (docs/replay.md).

What is measured: the IO lists the engine ran against the traces (op, size and offset
multisets), the engine's counters per op kind, the replay's achieved rate and span against the
trace's, holes punched by discards, and on a loop device the requests the block layer saw.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import random
import subprocess
import time
from pathlib import Path

import pytest

from tilemark.cli import main
from tilemark.trace.iolist import read_list
from tilemark.trace.schema import TraceMeta, TraceWriter

from .rigs import loop_device, need_root, ram_dir

MiB = 1 << 20
OPS = ("read", "write", "flush", "discard")


def write_trace(
    path: Path, columns: dict, device_size: int | None = None, source: str = "synthetic"
) -> Path:
    with TraceWriter(path, TraceMeta(source=source, device_size=device_size)) as w:
        w.write(columns)
    return path


def mixed_trace(path: Path, n: int, span_s: float, *, seed: int = 1, extent: int = 12 * MiB):
    """`n` IOs at random times over `span_s`: reads, writes and flushes of 4 to 64 KiB at
    4 KiB-aligned offsets below `extent`, each completing 200 us after it was issued."""
    rng = random.Random(seed)
    times = sorted(rng.randrange(1, int(span_s * 1e9)) for _ in range(n - 2))
    times = [0, *times, int(span_s * 1e9)]
    ops = [rng.choices(("read", "write", "flush"), (6, 3, 1))[0] for _ in range(n)]
    sizes = [0 if op == "flush" else rng.choice((4096, 8192, 16384, 65536)) for op in ops]
    offsets = [
        0 if op == "flush" else rng.randrange(0, (extent - size) // 4096) * 4096
        for op, size in zip(ops, sizes, strict=True)
    ]
    return write_trace(
        path,
        {
            "issue_ns": times,
            "complete_ns": [t + 200_000 for t in times],
            "op": ops,
            "offset": offsets,
            "size": sizes,
            "pid": [100 + i % 3 for i in range(n)],
        },
    )


def replay(tmp: Path, *args: str, capsys) -> tuple[int, dict | None, str]:
    """Run `tilemark replay ARGS --results tmp/results --json`: (status, run.json, stderr)."""
    status = main(["replay", *args, "--results", str(tmp / "results"), "--json"])
    out, err = capsys.readouterr()
    if status != 0 or not out.strip():
        return status, None, err
    doc = json.loads(out[out.index("{") :])
    run = json.loads((Path(doc["run_dir"]) / "run.json").read_text())
    return status, run, err


def trace_multiset(path: Path) -> collections.Counter:
    from tilemark.trace.schema import iter_rows, open_trace

    return collections.Counter(
        (r["op"], r["offset"] if r["op"] != "flush" else 0, r["size"])
        for r in iter_rows(open_trace(path), ["op", "offset", "size"])
    )


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> tuple[Path, collections.Counter]:
    path = mixed_trace(tmp_path_factory.mktemp("traces") / "mixed.parquet", 1000, 2.0)
    return path, trace_multiset(path)


def _as_tuples(records) -> list[tuple[int, int, int]]:
    """An IO list's records as (op, offset, len) tuples."""
    columns = (records["op"].tolist(), records["offset"].tolist(), records["len"].tolist())
    return list(zip(*columns, strict=True))


def ios_multiset(run: dict, stream: int = 0) -> collections.Counter:
    records = read_list(Path(run["plan"]["streams"][stream]["ios"]["path"]))
    return collections.Counter((OPS[op], off, ln) for op, off, ln in _as_tuples(records))


def test_a_trace_replays_on_a_file_with_its_ios_and_its_rate(tmp_path, mixed, capsys):
    trace, expected = mixed
    status, run, err = replay(
        tmp_path, str(trace), "--target", str(tmp_path / "t.dat"), "--size", "16m", capsys=capsys
    )
    assert status == 0, err
    # The trace fits the target: offsets are kept (modulo of a smaller extent is the identity).
    assert ios_multiset(run) == expected
    summary = run["summary"]
    counts = collections.Counter(op for op, _, _ in expected.elements())
    sizes = collections.Counter()
    for (op, _, size), n in expected.items():
        sizes[op] += size * n
    stream = summary["streams"][0]
    assert (stream["read"]["ops"], stream["read"]["bytes"]) == (counts["read"], sizes["read"])
    assert (stream["write"]["ops"], stream["write"]["bytes"]) == (counts["write"], sizes["write"])
    assert stream["sync"]["ops"] == counts["flush"], "every flush replayed as an fsync"
    section = summary["replay"]
    total = section["total"]
    assert (total["issued"], total["expected"], total["skipped"]) == (1000, 1000, 0)
    assert abs(total["rate_error_pct"]) < 1.0, section["verdict"]
    assert section["streams"][0]["trace_iops"] == pytest.approx(999 / 2.0)
    assert total["lateness"]["p50_us"] is not None
    assert run["status"] == "complete" and run["kind"] == "replay"
    assert "replay:" in err or section["verdict"]


def test_speed_2_halves_the_duration(tmp_path, mixed, capsys):
    trace, _ = mixed
    status, run, err = replay(
        tmp_path,
        str(trace),
        "--target",
        str(tmp_path / "t.dat"),
        "--size",
        "16m",
        "--speed",
        "2",
        capsys=capsys,
    )
    assert status == 0, err
    stream = run["summary"]["replay"]["streams"][0]
    assert stream["trace_span_s"] == pytest.approx(1.0)
    assert stream["replay_span_s"] == pytest.approx(1.0, rel=0.01)
    assert stream["achieved_iops"] == pytest.approx(999 / 1.0, rel=0.01)
    assert run["summary"]["duration_s"] == pytest.approx(1.0, abs=0.1)


def test_flushes_fua_writes_and_discards_are_replayed_as_such(tmp_path, capsys):
    # Writes in the first 4 MiB (every fourth FUA, every fifth after a flush), discards of
    # 64 KiB at 8, 9, ... MiB, and flushes: 0.5 s of trace.
    n = 200
    ops = ["write" if i % 4 else ("discard" if i % 8 else "flush") for i in range(n)]
    discards = [i for i, op in enumerate(ops) if op == "discard"]
    offsets = [
        (8 * MiB + discards.index(i) * MiB) if op == "discard" else (i % 64) * 65536
        for i, op in enumerate(ops)
    ]
    trace = write_trace(
        tmp_path / "sync.parquet",
        {
            "issue_ns": [i * 2_500_000 for i in range(n)],
            "op": ops,
            "offset": [0 if op == "flush" else off for op, off in zip(ops, offsets, strict=True)],
            "size": [{"write": 4096, "discard": 65536, "flush": 0}[op] for op in ops],
            "fua": [op == "write" and i % 16 == 1 for i, op in enumerate(ops)],
            "preflush": [op == "write" and i % 20 == 2 for i, op in enumerate(ops)],
        },
    )
    target = tmp_path / "t.dat"
    status, run, err = replay(
        tmp_path, str(trace), "--target", str(target), "--size", "48m", capsys=capsys
    )
    assert status == 0, err
    stream = run["summary"]["streams"][0]
    writes = ops.count("write")
    preflush = sum(op == "write" and i % 20 == 2 for i, op in enumerate(ops))
    assert stream["write"]["ops"] == writes
    assert stream["sync"]["ops"] == ops.count("flush") + preflush
    assert (stream["discard"]["ops"], stream["discard"]["bytes"]) == (len(discards), 65536 * 25)
    records = read_list(Path(run["plan"]["streams"][0]["ios"]["path"]))
    fua = [r for r in _as_tuples(records) if r[0] == 1]
    assert sum(int(f) for f in records["flags"]) == sum(
        op == "write" and i % 16 == 1 for i, op in enumerate(ops)
    ), "FUA writes carry their flag to the engine"
    assert len(fua) == writes
    # The discards punched holes in the target file where the trace said (after its header).
    data_offset = run["targets"][0]["data_offset"]
    fd = os.open(target, os.O_RDONLY)
    try:
        for k in range(len(discards)):
            start = data_offset + 8 * MiB + k * MiB
            assert os.lseek(fd, start, os.SEEK_HOLE) == start, f"discard {k} left no hole"
            assert os.lseek(fd, start, os.SEEK_DATA) == start + 65536
    finally:
        os.close(fd)


def test_afap_and_qd_replay_without_waiting_for_the_traces_times(tmp_path, capsys):
    # 300 IOs over 3 s, 200 us each: afap and qd:4 need a small part of that.
    trace = mixed_trace(tmp_path / "slow.parquet", 300, 3.0, seed=2)
    for mode in ("afap", "qd:4"):
        status, run, err = replay(
            tmp_path,
            str(trace),
            "--target",
            str(tmp_path / "t.dat"),
            "--size",
            "16m",
            "--mode",
            mode,
            capsys=capsys,
        )
        assert status == 0, err
        section = run["summary"]["replay"]
        assert section["mode"] == mode.split(":")[0]
        assert section["total"]["issued"] == 300 and section["skipped"] == 0
        assert section["total"]["lateness"] is None, "no times to be late against"
        assert section["streams"][0]["replay_span_s"] < 1.5, section["verdict"]
        assert run["summary"]["streams"][0]["arrival"] == "closed"
    plan = run["plan"]["streams"][0]
    assert (plan["qd"], plan["ios"]["mode"]) == (4, "qd")


def test_deps_and_keep_gaps_shape_a_timed_replay(tmp_path, capsys):
    # 60 IOs over 0.3 s, each completing 200 us after its issue: the list carries, per IO,
    # how many had completed when it was recorded, and the timed replay waits for them;
    # --keep-gaps asks the engine to submit IOs recorded > 1 us apart separately.
    trace = mixed_trace(tmp_path / "deps.parquet", 60, 0.3, seed=3)
    target = str(tmp_path / "t.dat")
    status, run, err = replay(tmp_path, str(trace), "--target", target, "--size", "16m",
                              "--deps", "--keep-gaps", capsys=capsys)  # fmt: skip
    assert status == 0, err
    plan = run["plan"]["streams"][0]
    assert (plan["ios"]["mode"], plan["ios"]["deps"], plan["ios"]["split_ns"]) == (
        "timed",
        True,
        1000,
    )
    records = read_list(Path(plan["ios"]["path"]))
    done = sorted(t + 200_000 for t in records["time_ns"].tolist())
    expected = [sum(c < t for c in done) for t in records["time_ns"].tolist()]
    assert records["deps"].tolist() == expected and expected[-1] > 0
    section = run["summary"]["replay"]
    assert section["deps"] is True and section["total"]["issued"] == 60
    assert main(["replay", str(trace), "--target", target, "--mode", "afap", "--deps"]) == 2
    assert "--deps applies to --mode timed" in capsys.readouterr().err


# Serial: an IO due just before the duration ends must be issued in time, or the run fails by
# design (every IO of a timed replay counts); another test's load can make it miss by ms.
@pytest.mark.serial
def test_loop_repeats_the_trace_until_the_duration(tmp_path, capsys):
    trace = mixed_trace(tmp_path / "short.parquet", 101, 1.0, seed=3)
    status, run, err = replay(
        tmp_path,
        str(trace),
        "--target",
        str(tmp_path / "t.dat"),
        "--size",
        "16m",
        "--loop",
        "--duration",
        "2.5",
        capsys=capsys,
    )
    assert status == 0, err
    total = run["summary"]["replay"]["total"]
    # A pass lasts 1.01 s (its span and one mean gap): two passes, then the IOs of the first
    # 0.48 s of a third.
    from tilemark.trace.schema import open_trace

    times = open_trace(trace).table(["issue_ns"]).column("issue_ns").to_pylist()
    assert total["expected"] == 2 * 101 + sum(t < 480_000_000 for t in times)
    assert total["issued"] == total["expected"] and total["skipped"] == 0
    assert abs(total["rate_error_pct"]) < 1.0


def test_split_makes_a_stream_per_process_sharing_the_traces_clock(tmp_path, mixed, capsys):
    trace, expected = mixed
    status, run, err = replay(
        tmp_path,
        str(trace),
        "--target",
        str(tmp_path / "t.dat"),
        "--size",
        "16m",
        "--split",
        "pid",
        "--select",
        "pid=100,pid=101",
        capsys=capsys,
    )
    assert status == 0, err
    names = [s["name"] for s in run["plan"]["streams"]]
    assert names == ["mixed.pid100", "mixed.pid101"]
    both = ios_multiset(run, 0) + ios_multiset(run, 1)
    assert sum(both.values()) == 1000 - 333, "pid 102 left out"
    assert both <= expected
    assert run["summary"]["replay"]["skipped"] == 0


# -----------------------------------------------------------------------------------------
# Refused: one sentence, exit 2, nothing written


def _refused(tmp_path: Path, args: list[str], why: str, capsys) -> None:
    target = tmp_path / "new.dat"
    status = main(["replay", *args, "--target", str(target), "--results", str(tmp_path / "res")])
    err = capsys.readouterr().err.strip()
    assert status == 2, err
    assert err.startswith("tilemark: error: ") and err.count("\n") == 0, err
    assert why in err, err
    assert not (tmp_path / "res").exists(), "no results directory"
    assert not target.exists(), "no target created"


def test_unreadable_empty_or_unselected_traces_are_refused(tmp_path, capsys):
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"this is not parquet")
    _refused(tmp_path, [str(junk)], "not a tilemark trace", capsys)
    _refused(tmp_path, [str(tmp_path / "missing.parquet")], "does not exist", capsys)
    empty = write_trace(tmp_path / "empty.parquet", {"issue_ns": [], "op": [], "offset": []})
    _refused(tmp_path, [str(empty)], "is empty", capsys)
    one = write_trace(
        tmp_path / "one.parquet", {"issue_ns": [0], "op": ["read"], "offset": [0], "size": [4096]}
    )
    _refused(tmp_path, [str(one), "--select", "pid=7"], "selects no IO", capsys)
    _refused(tmp_path, [str(one), "--select", "user=7"], "--select knows the keys", capsys)
    _refused(tmp_path, [str(one), "--select", "pid=x"], "--select pid must be", capsys)
    _refused(tmp_path, [str(one), "--mode", "qd:0"], "--mode must be", capsys)
    _refused(tmp_path, [str(one), "--loop"], "--loop repeats the trace until --duration", capsys)
    backwards = write_trace(
        tmp_path / "back.parquet",
        {"issue_ns": [5, 3], "op": ["read"] * 2, "offset": [0, 0], "size": [4096] * 2},
    )
    _refused(tmp_path, [str(backwards)], "not in issue order", capsys)
    _refused(tmp_path, [str(one), "--mode", "afap"], "needs completion times", capsys)


def test_a_trace_larger_than_the_target_is_refused_without_remap(tmp_path, capsys):
    trace = write_trace(
        tmp_path / "big.parquet",
        {
            "issue_ns": [0, 1000],
            "op": ["read", "write"],
            "offset": [0, 60 * MiB],
            "size": [4096] * 2,
        },  # fmt: skip
    )
    _refused(
        tmp_path, [str(trace), "--remap", "off", "--size", "16m"], "beyond the data area", capsys
    )


def test_a_missing_kernel_facility_is_refused_before_the_run(tmp_path, capsys):
    need_root()
    trace = write_trace(
        tmp_path / "discard.parquet",
        {"issue_ns": [0, 1000], "op": ["write", "discard"], "offset": [0, 0], "size": [4096] * 2},
    )
    # A loop device over a file on ramfs, which cannot punch holes: the device cannot discard.
    mount = tmp_path / "ramfs"
    mount.mkdir()
    subprocess.run(["mount", "-t", "ramfs", "ramfs", str(mount)], check=True)
    image = mount / "disk.img"
    with open(image, "wb") as f:
        f.truncate(16 * MiB)
    losetup = ["losetup", "--find", "--show", str(image)]
    out = subprocess.run(losetup, capture_output=True, text=True)
    try:
        if out.returncode != 0:
            pytest.skip(f"cannot set up a loop device: {out.stderr.strip()}")
        dev = out.stdout.strip()
        args = [str(trace), "--destroy-data", dev, "--remap", "scale"]
        status = main(["replay", *args, "--target", dev, "--results", str(tmp_path / "res")])
        err = capsys.readouterr().err.strip()
        assert status == 2 and "does not support discard" in err, err
        assert err.count("\n") == 0
        assert not (tmp_path / "res").exists()
        with open(dev, "rb") as f:
            assert f.read(8192) == bytes(8192), "nothing written to the device"
    finally:
        if out.returncode == 0:
            subprocess.run(["losetup", "-d", out.stdout.strip()], check=False)
        for _ in range(50):
            if subprocess.run(["umount", str(mount)], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)


# -----------------------------------------------------------------------------------------
# On a block device, what the block layer saw


class BioTrace:
    """block_bio_queue events of one device, in a tracefs instance of our own (so no other
    tracer's settings are touched)."""

    def __init__(self, dev: str):
        from tilemark.trace.tracefs import TracingUnavailable, find_tracefs

        try:  # tilemark's own lookup: it mounts tracefs when the kernel has one and it is not
            root = find_tracefs(None)
        except TracingUnavailable as e:
            pytest.skip(str(e))
        self.dir = root / "instances" / f"tilemark-test-{os.getpid()}-{time.monotonic_ns()}"
        st = os.stat(dev)
        self.dev = (os.major(st.st_rdev) << 20) | os.minor(st.st_rdev)

    def __enter__(self) -> BioTrace:
        self.dir.mkdir()
        (self.dir / "buffer_size_kb").write_text("8192")
        event = self.dir / "events" / "block" / "block_bio_queue"
        (event / "filter").write_text(f"dev == {self.dev}")
        (event / "enable").write_text("1")
        return self

    def events(self) -> list[tuple[str, int, int]]:
        """(rwbs, byte offset, bytes) of every bio the engine queued so far (its own thread,
        or io_uring's workers for it), not those of tilemark inspecting the device or of udev
        probing it."""
        out = []
        for line in (self.dir / "trace").read_text().splitlines():
            if "block_bio_queue:" not in line:
                continue
            fields = line.split("block_bio_queue:")[1].split()
            rwbs, sector, count = fields[1], int(fields[2]), int(fields[4])
            comm = " ".join(fields[5:]).strip("[]")
            if comm.startswith(("tilemark-engine", "iou-")):
                out.append((rwbs, sector * 512, count * 512))
        return out

    def __exit__(self, *exc: object) -> None:
        (self.dir / "events" / "block" / "block_bio_queue" / "enable").write_text("0")
        for _ in range(50):
            try:
                self.dir.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def test_a_block_device_receives_the_traces_requests(tmp_path, capsys):
    need_root()
    n = 400
    rng = random.Random(5)
    ops = [rng.choices(("read", "write", "discard", "flush"), (5, 3, 1, 1))[0] for _ in range(n)]
    sizes = [0 if op == "flush" else rng.choice((4096, 16384, 65536)) for op in ops]
    offsets = [0 if op == "flush" else rng.randrange(0, 4000) * 4096 for op in ops]
    trace = write_trace(
        tmp_path / "dev.parquet",
        {"issue_ns": [i * 1_000_000 for i in range(n)], "op": ops, "offset": offsets,
         "size": sizes, "fua": [op == "write" and i % 5 == 0 for i, op in enumerate(ops)]},
    )  # fmt: skip
    image = ram_dir() / f"tilemark-replay-{os.getpid()}.img"
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(image.unlink, missing_ok=True)  # the rig detaches, we remove
        dev = cleanup.enter_context(loop_device(image, 32 * MiB))
        name = Path(dev).name
        (Path("/sys/block") / name / "queue" / "nomerges").write_text("2")
        with BioTrace(dev) as bios:
            status, run, err = replay(
                tmp_path, str(trace), "--target", dev, "--destroy-data", dev, "--remap", "off",
                capsys=capsys,
            )  # fmt: skip
            seen = bios.events()
        fua_device = (Path("/sys/block") / name / "queue" / "fua").read_text().strip() == "1"
    assert status == 0, err
    assert run["targets"][0]["data_offset"] == 0
    kind = {"R": "read", "W": "write", "D": "discard"}
    data = collections.Counter(
        (kind[rwbs.lstrip("F")[0]], off, size) for rwbs, off, size in seen if size
    )
    wanted = collections.Counter(
        (op, off, size) for op, off, size in zip(ops, offsets, sizes, strict=True) if size
    )
    # Discards larger than the device's discard granularity may be split; reads and writes
    # of up to 64 KiB go through as one bio each.
    for op in ("read", "write"):
        assert {k: v for k, v in data.items() if k[0] == op} == {
            k: v for k, v in wanted.items() if k[0] == op
        }, op
    discarded = sum(size * n for (op, _, size), n in data.items() if op == "discard")
    assert discarded == sum(s for op, s in zip(ops, sizes, strict=True) if op == "discard")
    flushes = sum(1 for rwbs, _, size in seen if rwbs.startswith("F") and size == 0)
    assert flushes >= ops.count("flush"), "every flush reached the device"
    if fua_device:
        fua = sum(1 for rwbs, _, size in seen if rwbs.lstrip("F").startswith("WF") and size)
        assert fua == sum(op == "write" and i % 5 == 0 for i, op in enumerate(ops))


def test_writeback_writes_reach_the_device_without_the_sync_flag_as_traced(tmp_path, capsys):
    """A captured trace says which writes were the application's page-cache writeback (no sync
    flag): replayed as traced onto a file, those reach the device as writeback does, the others
    as sync writes, byte for byte. `--writes direct`, a trace whose source does not record the
    flag, or a block device target (whose page cache writes back 4 KiB per request) send every
    write O_DIRECT, with the sync flag."""
    need_root()
    n = 240
    rng = random.Random(8)
    ops = [rng.choices(("read", "write"), (1, 2))[0] for _ in range(n)]
    sizes = [rng.choice((4096, 16384, 65536)) for _ in ops]
    offsets = [i * 128 * 1024 for i in range(n)]  # apart: no two requests touch one page
    sync = [op == "write" and rng.random() < 0.4 for op in ops]
    columns = {"issue_ns": [i * 500_000 for i in range(n)], "op": ops, "offset": offsets,
               "size": sizes, "sync": sync}  # fmt: skip
    traced = {True: 0, False: 0}  # bytes the trace wrote with and without the flag
    for op, size, s in zip(ops, sizes, sync, strict=True):
        traced[s] += size if op == "write" else 0
    image = ram_dir() / f"tilemark-replay-wb-{os.getpid()}.img"
    mount = tmp_path / "fs"
    mount.mkdir()
    seen, counted = {}, {}
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(image.unlink, missing_ok=True)
        dev = cleanup.enter_context(loop_device(image, 96 * MiB))
        mkfs = subprocess.run(["mkfs.ext4", "-q", "-F", "-O", "^has_journal", dev],
                              capture_output=True, text=True)  # fmt: skip
        assert mkfs.returncode == 0, mkfs.stderr
        subprocess.run(["mount", dev, str(mount)], check=True)
        cleanup.callback(subprocess.run, ["umount", str(mount)], capture_output=True)
        target = str(mount / "t.dat")
        for case, source, extra in (
            ("create", "capture", ("--writes", "direct")),  # makes and fills the file
            ("traced", "capture", ()),
            ("direct", "capture", ("--writes", "direct")),
            ("msr", "import:msr", ()),
        ):
            trace = write_trace(tmp_path / f"{case}.parquet", columns, source=source)
            with BioTrace(dev) as bios:
                status, run, err = replay(
                    tmp_path, str(trace), "--target", target, "--size", "40m", *extra,
                    capsys=capsys,
                )  # fmt: skip
                assert status == 0, err
                seen[case] = [e for e in bios.events() if e[0].lstrip("F").startswith("W")]
            counted[case] = run["summary"]["replay"]["writeback_writes"]
        subprocess.run(["umount", str(mount)], check=True)
        trace = write_trace(tmp_path / "block.parquet", columns, source="capture")
        with BioTrace(dev) as bios:
            status, run, err = replay(
                tmp_path, str(trace), "--target", dev, "--destroy-data", dev, "--force",
                "--remap", "off", capsys=capsys,
            )  # fmt: skip
            assert status == 0, err
            seen["block"] = [e for e in bios.events() if e[0].lstrip("F").startswith("W")]
        counted["block"] = run["summary"]["replay"]["writeback_writes"]
    assert counted == {"create": 0, "traced": sum(not s for op, s in zip(ops, sync, strict=True)
                       if op == "write"), "direct": 0, "msr": 0, "block": 0}  # fmt: skip
    for case in ("traced", "direct", "msr", "block"):
        written = {True: 0, False: 0}
        for rwbs, _, size in seen[case]:
            written["S" in rwbs] += size
        if case == "traced":
            assert written == traced, "the writeback bytes without the flag, the rest with it"
        else:
            assert written == {True: traced[True] + traced[False], False: 0}, case


def test_the_run_report_shows_the_replay_accuracy(tmp_path, capsys):
    from tilemark.report import build_report
    from tilemark.report.data import load_source

    trace = mixed_trace(tmp_path / "app.parquet", 120, 0.5)
    status, run, err = replay(
        tmp_path, str(trace), "--target", str(tmp_path / "t.dat"), "--size", "16m", capsys=capsys
    )
    assert status == 0, err
    (run_dir,) = [d for d in (tmp_path / "results").iterdir() if (d / "run.json").is_file()]
    report = build_report(load_source(run_dir))
    (section,) = [s for s in report.sections if s.id == "replay"]
    assert section.intro == run["summary"]["replay"]["verdict"]
    (table,) = section.items
    (row,) = table.rows
    assert [c.text for c in row[:4]] == ["app", "120", "120", "0"]  # name, records, issued, skipped
