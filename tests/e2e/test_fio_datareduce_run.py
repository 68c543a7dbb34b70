"""fio's dedupe-global example, translated and run on a small file: what is on disk dedupes and
compresses as fio's options mean (docs/fio.md, "Data reduction"; docs/verification.md)."""

from __future__ import annotations

import hashlib

import pytest

pytest.importorskip("tilemark._engine", reason="the engine is not built (make build)")

from tilemark.cli import main  # noqa: E402

pytestmark = pytest.mark.quick

# examples/dedupe-global.fio at 8 MiB per job instead of 100 MiB.
DEDUPE_GLOBAL = """\
[global]
ioengine=libaio
iodepth=256
size=8m
dedupe_mode=working_set
dedupe_global=1
dedupe_percentage=50
blocksize=4k
rw=write
buffer_compress_percentage=50
dedupe_working_set_percentage=50

[a]

[b]
"""


def distinct(data: bytes) -> int:
    return len({hashlib.blake2b(data[i : i + 4096], digest_size=16).digest()
                for i in range(0, len(data), 4096)})  # fmt: skip


def test_dedupe_global_on_disk(tmp_path, capsys):
    """Two jobs, half their blocks copies from one shared working set of half a job's size, half
    of each block zeros: together the files hold half as many distinct 4 KiB blocks as blocks
    (dedupe_percentage=50), each alone 3/4 (its own unique quarter and the whole pool: fio's
    draws leave part of the pool out, see the note), and every block compresses 2:1."""
    import zstandard

    job = tmp_path / "dedupe-global.fio"
    job.write_text(DEDUPE_GLOBAL)
    target = tmp_path / "t.dat"
    status = main(["run", str(job), "--target", str(target), "--results", str(tmp_path / "r")])
    assert status == 0, capsys.readouterr().err
    data = target.read_bytes()[4096:]  # after tilemark's target header
    assert len(data) == 16 << 20
    blocks = len(data) // 4096
    assert blocks / distinct(data) == pytest.approx(2.0, rel=0.02)
    half = len(data) // 2
    for region in (data[:half], data[half:]):
        assert (blocks // 2) / distinct(region) == pytest.approx(4 / 3, rel=0.02)
    zstd = zstandard.ZstdCompressor(level=3)
    compressed = sum(len(zstd.compress(data[i : i + 4096])) for i in range(0, len(data), 4096))
    assert len(data) / compressed == pytest.approx(2.0, rel=0.10)


def test_dedupe_global_with_verification_is_refused(tmp_path, capsys):
    job = tmp_path / "j.fio"
    job.write_text(DEDUPE_GLOBAL.replace("[a]", "verify=crc32c\n[a]"))
    status = main(["run", str(job), "--target", str(tmp_path / "t.dat"),
                   "--results", str(tmp_path / "r")])  # fmt: skip
    err = capsys.readouterr().err
    assert status == 2, err
    assert "dedupe_global cannot be used with --verify" in err and "Traceback" not in err


def test_a_pool_larger_than_the_distinct_blocks_is_refused(tmp_path, capsys):
    """dedupe 2 leaves half the blocks distinct; a pool is among them, so dedupe_set 60 is one
    sentence naming the field (fio refuses the same, init.c)."""
    workload = tmp_path / "w.toml"
    workload.write_text(
        'size = "4m"\nduration = "1s"\n[[stream]]\nname = "w"\nrw = "write"\n'
        "dedupe = 2\ndedupe_set = 60\n"
    )
    status = main(["run", str(workload), "--target", str(tmp_path / "t.dat"),
                   "--results", str(tmp_path / "r")])  # fmt: skip
    err = capsys.readouterr().err
    assert status == 2, err
    assert "dedupe_set 60 is more than the distinct share of dedupe 2: at most 50" in err
