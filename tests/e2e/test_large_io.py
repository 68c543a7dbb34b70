"""A large direct IO reaches the device whole. The engine's buffers are transparent huge pages
(crates/engine/src/buf.rs), so a buffer's pages are physically contiguous and the block layer
describes a 1,280 KiB write in a few segments; from 4 KiB pages it took 320, and a loop device
(128 segments a request) received it as 512 + 512 + 256 KiB, where an application writing from
the page cache's large folios sends one request (RocksDB's, docs/fidelity.md). Checked where
the kernel issues the requests (block_rq_issue)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("tilemark._engine", reason="the engine is not built (make build)")

from tilemark.cli import main  # noqa: E402

from .rigs import block_requests, ram_loop_device  # noqa: E402

pytestmark = [pytest.mark.root, pytest.mark.loopdev, pytest.mark.quick]

KIB = 1 << 10
BS = 1280 * KIB


def huge_pages_on() -> bool:
    """Transparent huge pages are available to a program that asks (madvise or always)."""
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    return thp.exists() and "[never]" not in thp.read_text()


def test_a_1280k_write_is_one_block_request(capsys, tmp_path):
    with ram_loop_device("tilemark-test-large-io", 16 * BS) as dev:
        queue = Path("/sys/block") / Path(dev).name / "queue"
        # The IO is as large as the device takes in one request, up to 1,280 KiB (a loop
        # device's default): larger than the 512 KiB that 128 segments of 4 KiB pages carry.
        bs = min(BS, int((queue / "max_sectors_kb").read_text()) * KIB)
        with block_requests(dev, "tilemark-test-large-io") as requests:
            args = ["--rw", "write", "--bs", f"{bs // KIB}k", "--align", f"{bs // KIB}k",
                    "--qd", "2", "--duration", "0.5", "--warmup", "0"]  # fmt: skip
            args += ["--results", str(tmp_path / "r")]
            status = main(["run", "--target", dev, "--destroy-data", dev, "--json", *args])
    out, err = capsys.readouterr()
    assert status == 0, err
    written = json.loads(out)["summary"]["streams"][0]["write"]["ops"]
    writes = [size for op, _, size, *_ in requests if op == "W"]
    assert written > 10
    # Every byte the engine wrote reached the device, in requests no larger than the IOs.
    assert sum(writes) == written * bs and max(writes) <= bs
    if huge_pages_on():
        assert writes == [bs] * written, sorted(set(writes))
    else:
        # Without huge pages the buffers are 4 KiB pages: whether an IO stays whole depends on
        # where the allocator's pages happen to lie, so only the bytes are checked.
        print("transparent huge pages are off: whole requests not checked, bytes checked")
