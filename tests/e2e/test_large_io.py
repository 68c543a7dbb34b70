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


def test_a_1280k_write_is_one_block_request(capsys, tmp_path):
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if not thp.exists() or "[never]" in thp.read_text():
        pytest.skip("transparent huge pages are off in this kernel: buffers are 4 KiB pages")
    with ram_loop_device("tilemark-test-large-io", 16 * BS) as dev:
        queue = Path("/sys/block") / Path(dev).name / "queue"
        if int((queue / "max_sectors_kb").read_text()) * KIB < BS:
            pytest.skip(f"{dev} takes requests of at most {(queue / 'max_sectors_kb').read_text()}")
        with block_requests(dev, "tilemark-test-large-io") as requests:
            args = ["--rw", "write", "--bs", "1280k", "--align", "1280k", "--qd", "2",
                    "--duration", "0.5", "--warmup", "0"]  # fmt: skip
            args += ["--results", str(tmp_path / "r")]
            status = main(["run", "--target", dev, "--destroy-data", dev, "--json", *args])
    out, err = capsys.readouterr()
    assert status == 0, err
    written = json.loads(out)["summary"]["streams"][0]["write"]["ops"]
    writes = [size for op, _, size, *_ in requests if op == "W"]
    assert written > 10
    assert writes == [BS] * written, sorted(set(writes))
