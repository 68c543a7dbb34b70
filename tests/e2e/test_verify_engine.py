"""Verification in the engine under stress: concurrent writers on one region give no false
findings, and failing storage gives IO errors, not findings. Data reduction as measured and
as written."""

from __future__ import annotations

import os
import time

import pytest

from tilemark import engine
from tilemark.run import datareduction

from .engine_helpers import MiB, plan, run, stream
from .rigs import failing_storage, ram_dir

TARGET_ID = 0x5EED


def verify_spec(prior: str = "verified", epoch: int = 1) -> dict:
    return {"target_id": TARGET_ID, "epoch": epoch, "block_size": 4096, "prior": prior,
            "journal": None}  # fmt: skip


@pytest.fixture
def shm_file():
    path = ram_dir() / f"tilemark-verify-{os.getpid()}-{time.monotonic_ns()}.dat"
    yield path
    path.unlink(missing_ok=True)


def test_four_streams_writing_one_region_for_two_million_ios_find_nothing(shm_file):
    size = 1 * MiB  # 256 blocks: every block is written and read by every stream, often at once
    with open(shm_file, "wb") as f:
        f.truncate(size)
    engine.fill(str(shm_file), 0, size, direct=False, seed=3, verify=(TARGET_ID, 4096, 0))
    per_stream = 520_000
    streams = [
        stream(
            f"w{i}", length=size, read_pct=50.0, qd=16, seed=i + 1, io_limit=per_stream * 4096
        )  # fmt: skip
        for i in range(4)
    ]
    target = [{"path": str(shm_file), "offset": 0, "length": size, "direct": False,
               "verify": verify_spec()}]  # fmt: skip
    t0 = time.monotonic()
    _, result = run(plan(shm_file, streams, targets=target, duration_ms=None, interval_ms=500))
    elapsed = time.monotonic() - t0
    ios = sum(s["read"]["ops"] + s["write"]["ops"] for s in result["streams"])
    v = result["verification"]
    assert ios >= 2_000_000, ios
    assert v["total"] == 0, v["findings"][:3]
    assert v["checked"] > 200_000 and v["skipped"] > 0, v
    assert elapsed < 120, elapsed


def test_io_errors_stay_errors_and_are_not_findings(tmp_path):
    args = ("error-pread=EIO", "error-pread-rate=5%", "error-pwrite=EIO", "error-pwrite-rate=5%")
    with failing_storage(tmp_path / "mnt", "16M", *args) as disk:
        target = [{"path": str(disk), "offset": 0, "length": 16 * MiB, "direct": True,
                   "verify": verify_spec(prior="unknown")}]  # fmt: skip
        streams = [stream("rw", length=2 * MiB, read_pct=50.0, qd=4)]
        _, result = run(plan(disk, streams, targets=target, duration_ms=1500, max_errors=None))
    (s,) = result["streams"]
    assert s["read"]["errors"].get("5", 0) > 0 and s["write"]["errors"].get("5", 0) > 0
    v = result["verification"]
    assert v["total"] == 0, v["findings"][:3]
    assert v["checked"] > 100, v


@pytest.mark.parametrize("pct", [0, 25, 50, 75])
def test_compressibility_is_the_requested_one(pct):
    wanted = 100 / (100 - pct)
    for verify in (False, True):
        m = datareduction.measure_data(4096, pct, 1.0, verify)
        assert abs(m["zstd"] / wanted - 1) < 0.10, (verify, m)
        assert abs(m["lz4"] / wanted - 1) < 0.15, (verify, m)
        assert abs(m["dedupe"] - 1) < 0.001


@pytest.mark.parametrize("ratio", [1.5, 2, 4])
def test_dedupe_ratio_is_the_requested_one(ratio):
    m = datareduction.measure_data(4096, 0, ratio, True)
    assert abs(m["dedupe"] / ratio - 1) < 0.02, m


def test_the_data_on_disk_has_the_measured_ratios(tmp_path):
    """A sequential write run at compress 50 and dedupe 2: every 4 KiB block of the file's data
    area compresses 2:1, it holds half as many distinct blocks as blocks, and zstd over the
    whole area (which also finds the copies) reaches both together, 4:1."""
    import hashlib

    import zstandard

    from tilemark.cli import main

    target = tmp_path / "t.dat"
    status = main(["run", "--target", str(target), "--size", "8m", "--rw", "write", "--bs", "64k",
                   "--qd", "2", "--compress", "50", "--dedupe", "2", "--duration", "0.6",
                   "--interval", "0.2s", "--results", str(tmp_path / "r")])  # fmt: skip
    assert status == 0
    data = target.read_bytes()[4096:]
    zstd = zstandard.ZstdCompressor(level=3)
    blocks = [data[i : i + 4096] for i in range(0, len(data), 4096)]
    per_block = len(data) / sum(len(zstd.compress(b)) for b in blocks)
    assert abs(per_block / 2 - 1) < 0.10, per_block
    whole = len(data) / len(zstd.compress(data))
    assert abs(whole / 4 - 1) < 0.10, whole
    distinct = len({hashlib.blake2b(b, digest_size=16).digest() for b in blocks})
    assert abs(len(blocks) / distinct / 2 - 1) < 0.02, len(blocks) / distinct
