"""fio's block sequences, strided zones, per-direction block sizes and priorities per block
size (python/tilemark/fio/patterns.py), run for real on a loop device and checked where the
kernel sees them: every block request's direction, sector, size and priority (class, hint,
level) as the block_rq_issue tracepoint records it. docs/fio.md, "Sequences, strided zones
and sizes per direction".
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("tilemark._engine", reason="the engine is not built (make build)")

from tilemark.cli import main  # noqa: E402

from .rigs import block_requests, ram_loop_device  # noqa: E402

pytestmark = [pytest.mark.root, pytest.mark.loopdev, pytest.mark.quick]

KIB, MIB = 1 << 10, 1 << 20


@contextlib.contextmanager
def issued(dev: str) -> Iterator[list[tuple[str, int, int, str, int, int]]]:
    """(R or W, byte offset, bytes, class, hint, level) of every data request issued to `dev`
    inside the block, in issue order (rigs.block_requests)."""
    with block_requests(dev, "tilemark-test-patterns") as requests:
        yield requests


@pytest.fixture
def ram_loop() -> Iterator[str]:
    with ram_loop_device("tilemark-test-patterns", 4 * MIB) as dev:
        yield dev


def run(capsys, tmp_path: Path, workload: Path, *args: str) -> dict:
    status = main(["run", str(workload), "--results", str(tmp_path / "results"), "--json", *args])
    out, err = capsys.readouterr()
    assert status == 0, err
    return json.loads(out)


def test_a_block_sequence_and_its_strided_form_read_the_blocks_fio_reads(
    capsys, tmp_path, ram_loop
):
    # examples/sequence-distribution.fio on the device: "Accessed block indices: 2, 0, 1, 2,
    # 0, 1", then with random_sequence_stride=1 "Cycle 1 (Group 0): 2, 0, 1 - Cycle 2 (Group
    # 1): 5, 3, 4" (fio f5344384 built from source logs these offsets with write_iolog).
    job = tmp_path / "seq.fio"
    job.write_text(
        f"[global]\nfilename={ram_loop}\ndirect=1\nioengine=io_uring\nrw=randread\nbs=4k\n"
        "size=48k\nio_size=24k\n"
        "[repeating_sequence]\nrandom_distribution=sequence:2,0,1\nrandom_sequence_stride=0\n"
        "[strided_sequence]\nstonewall\nrandom_distribution=sequence:2,0,1\n"
        "random_sequence_stride=1\n"
    )
    with issued(ram_loop) as requests:
        run(capsys, tmp_path, job)
    blocks = [offset // 4096 for op, offset, *_ in requests if op == "R"]
    assert blocks == [2, 0, 1, 2, 0, 1, 2, 0, 1, 5, 3, 4]


def test_strided_zones_read_a_zone_then_skip_as_fio_does(capsys, tmp_path, ram_loop):
    # examples/disk-zone-profile.fio in small: 64k reads, 256k per zone, then 512k skipped
    # (HOWTO zoneskip: "the number of bytes to skip after zonesize bytes of data have been
    # transferred"), size=3m bytes of the 4m device: the zones move through the whole device
    # (io_u.c: they wrap at the file's end, not at size): 0, 768k, ... 3840k, then 0 again.
    text = (
        f"[j]\nfilename={ram_loop}\ndirect=1\nioengine=io_uring\niodepth=2\nrw=read\nbs=64k\n"
        "size=3m\nzonemode=strided\nzonesize=256k\nzoneskip=512k\n"
    )
    job = tmp_path / "zones.fio"
    job.write_text(text)
    with issued(ram_loop) as requests:
        run(capsys, tmp_path, job)
    ours = [offset for op, offset, *_ in requests if op == "R"]
    zone = [0, 64 * KIB, 128 * KIB, 192 * KIB]
    cycle = [start * KIB + o for start in range(0, 4096, 768) for o in zone]
    assert len(cycle) == 24 and ours == cycle * 2
    if shutil.which("fio") is not None:
        # fio itself as the oracle (Debian's 3.33 has strided zones): the same offsets.
        log = tmp_path / "fio.log"
        job.write_text(text + f"write_iolog={log}\n")
        subprocess.run(["fio", "--output=/dev/null", str(job)], check=True)
        fio_offsets = [int(f.split()[3]) for f in log.read_text().splitlines() if " read " in f]
        assert fio_offsets == ours


def test_sizes_per_direction_and_priorities_per_size_reach_the_device(capsys, tmp_path, ram_loop):
    # examples/cmdprio-bssplit.fio [cmdprio-adv-def] with sizes 16 times smaller: "40% of read
    # I/Os are 64kB and 60% are 1MB. 100% of writes are 1MB. 25% of the 64kB reads are executed
    # with prio class 1 and prio level 1, 75% of the 64kB reads are executed with prio class 3
    # [...]. All other I/Os are executed with prio class 2 and prio level 7"; and a hint (HOWTO
    # cmdprio_bssplit bs/percentage/class/level/hint) on half of the writes.
    job = tmp_path / "prio.fio"
    job.write_text(
        f"[j]\nfilename={ram_loop}\ndirect=1\nioengine=io_uring\niodepth=4\nrw=randrw\n"
        "size=4m\nio_size=24m\nprioclass=2\nprio=7\nbssplit=4k/40:64k/60,64k/100\n"
        "cmdprio_bssplit=4k/25/1/1:4k/75/3/0:64k/0,64k/50/2/0/1\n"
    )
    with issued(ram_loop) as requests:
        doc = run(capsys, tmp_path, job, "--destroy-data", ram_loop)
    (stream,) = doc["summary"]["streams"]
    reads, writes = stream["read"], stream["write"]
    # Every write is 64k; reads are 4k (40%) and 64k (60%) by count.
    assert writes["bytes"] == writes["ops"] * 64 * KIB
    small = (reads["ops"] * 64 * KIB - reads["bytes"]) / (60 * KIB)
    assert 0.3 < small / reads["ops"] < 0.5, (small, reads["ops"])
    # Where the kernel sees them: 4k reads at rt/1 or idle only; nothing else at those;
    # writes at be/7 or be/0 with hint 1.
    # Others' reads (udev probing the new device) go at the kernel's default, be/4.
    requests = [r for r in requests if r[3:] != ("be", 0, 4)]
    prios = Counter(
        (op, size == 4 * KIB, klass, hint, level) for op, _, size, klass, hint, level in requests
    )
    assert set(prios) <= {
        ("R", True, "rt", 0, 1),
        ("R", True, "idle", 0, 0),
        ("R", False, "be", 0, 7),
        ("W", False, "be", 0, 7),
        ("W", False, "be", 1, 0),
    }, prios
    rt, idle = prios[("R", True, "rt", 0, 1)], prios[("R", True, "idle", 0, 0)]
    assert rt + idle == round(small) and 0.1 < rt / (rt + idle) < 0.4, (rt, idle)
    hinted = sum(n for k, n in prios.items() if k[0] == "W" and k[3] == 1)
    plain = sum(n for k, n in prios.items() if k[0] == "W" and k[3] == 0)
    assert 0.3 < hinted / (hinted + plain) < 0.7, (hinted, plain)
    # The IOs at another priority than the stream's are summarised apart.
    by_size = stream["priority"]["by_size"]
    assert by_size["read"]["ops"] == rt + idle and by_size["ios"] > rt + idle
