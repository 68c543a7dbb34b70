"""fio's `rw=...:N` suffix and IO priorities, run for real on a loop device and checked where
the kernel sees them: every block request's sector and ioprio as the block_rq_issue tracepoint
records it (Linux 6.x carries the request's ioprio in that event). docs/fio.md, "Strides and
IO priorities".
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("tilemark._engine", reason="the engine is not built (make build)")

from tilemark.cli import main  # noqa: E402

from .rigs import block_requests, ram_loop_device  # noqa: E402

pytestmark = [pytest.mark.root, pytest.mark.loopdev, pytest.mark.quick]

MIB = 1 << 20


@contextlib.contextmanager
def issued(dev: str) -> Iterator[list[tuple[int, str, int]]]:
    """(byte offset, class, level) of every read request issued to `dev` inside the block, in
    issue order (rigs.block_requests); filled when the block ends."""
    reads: list[tuple[int, str, int]] = []
    with block_requests(dev, "tilemark-test-strides") as requests:
        yield reads
    reads.extend((offset, klass, level) for op, offset, _, klass, _, level in requests if op == "R")


@pytest.fixture
def ram_loop() -> Iterator[str]:
    with ram_loop_device("tilemark-test-strides", 4 * MIB) as dev:
        yield dev


def run(capsys, tmp_path: Path, workload: Path, *args: str) -> dict:
    status = main(["run", str(workload), "--results", str(tmp_path / "results"), "--json", *args])
    out, err = capsys.readouterr()
    assert status == 0, err
    return json.loads(out)


def test_a_backwards_fio_job_reads_each_block_from_the_end_and_a_share_at_rt(
    capsys, tmp_path, ram_loop
):
    # examples/backwards-read.fio (rw=read:-8k, bs=4k) on 1 MiB, with examples/
    # cmdprio-percentage.fio's priorities (prioclass=3, 50% at cmdprio_class=1). Beside it a
    # random job of runs of 8 (HOWTO rw_sequencer: "8 sequential offsets with a random
    # starting point") at best effort level 5.
    job = tmp_path / "job.fio"
    job.write_text(
        f"[global]\nfilename={ram_loop}\ndirect=1\nioengine=io_uring\nbs=4k\nsize=1m\n"
        "[back]\nrw=read:-8k\nprioclass=3\ncmdprio_percentage=50\ncmdprio_class=1\n"
        "[runs]\nrw=randread:8\nprio=5\n"
    )
    with issued(ram_loop) as requests:
        doc = run(capsys, tmp_path, job)
    back = [r for r in requests if r[1] in ("idle", "rt")]
    runs = [r[0] for r in requests if r[1:] == ("be", 5)]
    # fio's sequence: 0, then from the end 8k back from each end: 1m-8k, 1m-12k, ... 4k, 0.
    assert [r[0] for r in back] == [0, *range(MIB - 8192, 0, -4096), 0]
    assert all(level == 0 for _, _, level in back)
    rt = sum(1 for r in back if r[1] == "rt")
    summary = {s["name"]: s for s in doc["summary"]["streams"]}
    share = summary["back"]["priority"]["share"]
    assert share["ios"] == rt and 80 < rt < 176, rt
    # The share's reads are also summarised on their own (fio's clat_prio).
    assert share["read"]["ops"] == rt and share["read"]["service"]["p50_ms"] > 0
    assert summary["runs"]["priority"] == {"class": "be", "level": 5}
    # 256 reads in runs of 8: each run's 7 after its first continue where the last one ended
    # (or at the region's start after its end).
    assert len(runs) == 256
    for i in range(1, 256):
        if i % 8:
            assert runs[i] == (runs[i - 1] + 4096) % MIB, (i, runs[i - 1], runs[i])


def test_psync_issues_each_io_at_its_priority_through_its_worker_thread(capsys, tmp_path, ram_loop):
    workload = tmp_path / "w.toml"
    workload.write_text(
        'backend = "psync"\n[[stream]]\nname = "s"\nrw = "randread"\nbs = "4k"\nqd = 2\n'
        'io_size = "1m"\npriority = "be/6"\npriority_share = "25:idle"\n'
    )
    with issued(ram_loop) as requests:
        doc = run(capsys, tmp_path, workload, "--target", ram_loop)
    # Reads of anyone else (udev probing the new device) carry no priority: class none.
    classes = [(klass, level) for _, klass, level in requests if klass != "none"]
    assert len(classes) == 256 and set(classes) == {("be", 6), ("idle", 0)}, set(classes)
    idle = classes.count(("idle", 0))
    (stream,) = doc["summary"]["streams"]
    assert stream["priority"]["share"]["ios"] == idle and 32 < idle < 96, idle


@pytest.mark.fio
def test_fio_itself_issues_the_same_offsets_for_the_suffix(capsys, tmp_path, ram_loop):
    # fio as the oracle: the job run by fio (write_iolog records each IO's offset) and by
    # `tilemark run` on the same device issue the same sequence: backwards with the wrap to
    # the end (read:-8k on 1m of the device), and 16k every 64k with the wrap to the start
    # (read:48k over the whole device: fio wraps holes only at the file's end).
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed (make system-deps)")
    for rw, bs, size in (("read:-8k", "4k", "1m"), ("read:48k", "16k", "4m")):
        text = f"[j]\nfilename={ram_loop}\ndirect=1\nbs={bs}\nsize={size}\nrw={rw}\n"
        log = tmp_path / f"fio-{size}.log"
        job = tmp_path / "fio.fio"
        job.write_text(text + f"write_iolog={log}\n")
        subprocess.run(["fio", "--output=/dev/null", str(job)], check=True)
        fio_offsets = [int(f.split()[3]) for f in log.read_text().splitlines() if " read " in f]
        job.write_text(text)
        with issued(ram_loop) as requests:
            run(capsys, tmp_path, job)
        ours = [r[0] for r in requests]
        assert len(fio_offsets) > 60 and ours == fio_offsets, rw
