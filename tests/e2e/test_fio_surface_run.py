"""fio's surface-scan example, translated and run on a small file: the write phase writes the
whole data area, the verify phase then reads all of it back and checks every block, and a
block damaged on disk is found (docs/fio.md, "Surface scan")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("tilemark._engine", reason="the engine is not built (make build)")

from tilemark.cli import main  # noqa: E402

pytestmark = pytest.mark.quick

# examples/surface-scan.fio, whole (its comments dropped).
SURFACE_SCAN = """\
[global]
thread
bs=64k
direct=1
ioengine=sync
verify=meta
verify_pattern=0xaa555aa5
verify_interval=512

[write-phase]
filename=datafile.tmp
rw=write
fill_device=1
do_verify=0

[verify-phase]
stonewall
create_serialize=0
filename=datafile.tmp
rw=read
do_verify=1
"""
SIZE = 4 << 20


def run(capsys, results: Path, *args: str) -> tuple[int, dict, str]:
    """Run into a results directory of its own: its one run's status, run.json and stderr."""
    status = main(["run", *args, "--results", str(results)])
    err = capsys.readouterr().err
    (run_dir,) = [p for p in results.iterdir() if (p / "run.json").exists()]
    return status, json.loads((run_dir / "run.json").read_text()), err


def test_surface_scan_writes_everything_then_checks_every_block(tmp_path, capsys):
    job = tmp_path / "surface-scan.fio"
    job.write_text(SURFACE_SCAN)
    target = tmp_path / "datafile.tmp"
    status, doc, err = run(
        capsys, tmp_path / "scan", str(job), "--target", str(target), "--size", "4m"
    )
    assert status == 0, err
    write, read = doc["summary"]["streams"]
    # fill_device: the whole data area written once, in 64 KiB IOs...
    assert (write["write"]["bytes"], write["write"]["ops"]) == (SIZE, SIZE // (64 << 10))
    # ...then (stonewall) all of it read back, every 4 KiB verification block checked.
    assert read["read"]["bytes"] == SIZE and read["start_s"] >= write["active_s"] * 0.99
    verification = doc["summary"]["verification"]
    assert (verification["checked"], verification["findings"]) == (SIZE // 4096, 0)

    # A block damaged on disk is a finding when the verify phase alone reads it back.
    with target.open("r+b") as f:
        f.seek(4096 + 100 * 4096 + 1000)  # after tilemark's 4 KiB target header
        f.write(b"\xff" * 16)
    workload = tmp_path / "verify-phase.toml"
    assert main(["import-fio", str(job), "--section", "verify-phase", "-o", str(workload)]) == 0
    status, doc, err = run(capsys, tmp_path / "check", str(workload), "--target", str(target))
    assert status == 1
    assert "corrupt at offset 409,600" in err
    assert doc["summary"]["verification"]["by_class"] == {"corrupt": 1}
