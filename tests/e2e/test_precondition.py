"""`tilemark precondition` (SNIA PTS workload-independent preconditioning): every byte of the
data area is written, the record is kept with the target and shown by every later run, and
runs on targets never preconditioned say so."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tilemark import targets
from tilemark.cli import main

from .rigs import loop_device, throttled_cgroup

pytestmark = [pytest.mark.root, pytest.mark.loopdev, pytest.mark.blkio]

KiB, MiB = 1 << 10, 1 << 20
BLOCK = 4 * KiB
NEVER = "was never preconditioned (SNIA PTS): results on fresh storage may not last"


def cli(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def zero_blocks(path: Path, offset: int, length: int) -> int:
    """4 KiB blocks of [offset, offset+length) that read as all zeros."""
    zero = bytes(BLOCK)
    count = 0
    with open(path, "rb") as f:
        f.seek(offset)
        for _ in range(length // BLOCK):
            if f.read(BLOCK) == zero:
                count += 1
    return count


def test_preconditioning_writes_every_byte_and_the_next_run_shows_the_record(tmp_path, capsys):
    target = tmp_path / "t.dat"
    size = 6 * MiB + 12 * KiB  # not a whole number of 128 KiB writes: the tail is written too
    # The file as preconditioning creates it, before its passes: allocated, reading as zeros.
    info = targets.inspect_target(str(target), size=size, writes=True, direct=True)
    targets.prepare_target(info, fill=False)
    assert zero_blocks(target, targets.HEADER_SIZE, size) == size // BLOCK
    created_at = targets.read_header(str(target))["created_at"]

    status, out, err = cli(capsys, "precondition", "--target", str(target))
    assert status == 0, err
    assert "pass 2 of 2" in err and "recorded in its header" in err
    assert zero_blocks(target, targets.HEADER_SIZE, size) == 0
    assert targets.hole_bytes(str(target), targets.HEADER_SIZE, size) == 0

    header = targets.read_header(str(target))
    assert header["created_at"] == created_at  # the rest of the header is kept
    assert header["filled_length"] == size  # a full pass is the fill: runs do not refill
    record = header["preconditioning"]
    assert record["passes_completed"] == 2 and record["passes"] == 2
    assert record["bs"] == 128 * KiB and record["pattern"] == "sequential"
    assert record["data_length"] == size
    assert record["bytes_written"] == 2 * size
    assert len(record["mbps_per_pass"]) == 2 and all(v > 0 for v in record["mbps_per_pass"])

    results = tmp_path / "r"
    args = ["run", "--target", str(target), "--rw", "randread", "--duration", "0.5"]
    status, out, err = cli(capsys, *args, "--interval", "0.25", "--results", str(results), "--json")
    assert status == 0, err
    run_dir = Path(json.loads(out)["run_dir"])
    doc = json.loads((run_dir / "run.json").read_text())
    assert doc["targets"][0]["preconditioning"] == record
    assert doc["summary"]["preconditioning"] == {"target": str(target), "record": record}
    assert NEVER not in json.dumps(doc["summary"].get("notes") or [])
    assert "creating" not in err and "filling" not in err

    from tilemark.report.data import RunData
    from tilemark.report.format import tested_on

    shown = dict(tested_on(RunData.load(run_dir)))
    assert shown["preconditioned"].startswith(record["at"])
    assert "2 pass(es) of 128 KiB sequential writes" in shown["preconditioned"]


def test_a_run_on_a_target_never_preconditioned_says_so_in_a_note(tmp_path, capsys):
    target = tmp_path / "fresh.dat"
    args = ["run", "--target", str(target), "--size", "4m", "--rw", "randread"]
    args += ["--duration", "0.3", "--interval", "0.1", "--results", str(tmp_path / "r"), "--json"]
    status, out, err = cli(capsys, *args)
    assert status == 0, err
    summary = json.loads(out)["summary"]
    notes = [n for n in summary["notes"] if NEVER in n]
    assert notes == [f"target {target} {NEVER}; see `tilemark precondition`"]
    assert summary["preconditioning"] == {"target": str(target), "record": None}
    assert f"note: target {target} {NEVER}" in err


@pytest.mark.parametrize("passes", ["0", "-1"])
def test_passes_below_one_is_one_sentence_and_nothing_is_written(tmp_path, capsys, passes):
    target = tmp_path / "t.dat"
    status, _, err = cli(capsys, "precondition", "--target", str(target), "--size", "4m",
                         "--passes", passes)  # fmt: skip
    assert status == 2
    assert err.strip() == (
        f"tilemark: error: --passes must be an integer from 1 to 100, got {passes}."
    )
    assert not target.exists()


def test_a_write_size_off_the_o_direct_alignment_is_one_sentence(tmp_path, capsys):
    target = tmp_path / "t.dat"
    status, _, err = cli(
        capsys, "precondition", "--target", str(target), "--size", "4m", "--bs", "1000"
    )  # a multiple of no O_DIRECT alignment (512 B on ext4 over 512-byte sectors, 4 KiB)
    assert status == 2
    assert err.strip().startswith("tilemark: error: --bs 1000 is not a multiple of ")
    assert len(err.strip().splitlines()) == 1 and not target.exists()


def test_foreign_files_and_unnamed_devices_are_refused(tmp_path, capsys):
    foreign = tmp_path / "mine.dat"
    foreign.write_bytes(b"precious" * 1024)
    status, _, err = cli(capsys, "precondition", "--target", str(foreign))
    assert status == 2 and "was not created by tilemark" in err
    assert foreign.read_bytes() == b"precious" * 1024
    status, _, err = cli(capsys, "precondition", "--target", str(tmp_path / "new.dat"))
    assert status == 2 and "--size is required" in err


def test_a_block_device_is_preconditioned_only_when_named_and_keeps_its_record(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv(targets.STATE_DIR_ENV, str(tmp_path / "state"))
    with loop_device(tmp_path / "img", 8 * MiB) as dev:
        status, _, err = cli(capsys, "precondition", "--target", dev)
        assert status == 2 and f"--destroy-data {dev}" in err
        status, _, err = cli(
            capsys, "precondition", "--target", dev, "--destroy-data", dev, "--passes", "1"
        )
        assert status == 0, err
        assert zero_blocks(Path(dev), 0, 8 * MiB) == 0
        args = ["run", "--target", dev, "--rw", "randread", "--duration", "0.3"]
        status, out, err = cli(capsys, *args, "--results", str(tmp_path / "r"), "--json")
        assert status == 0, err
        summary = json.loads(out)["summary"]
        record = summary["preconditioning"]["record"]
        assert record["passes_completed"] == 1 and record["bytes_written"] == 8 * MiB
        assert NEVER not in json.dumps(summary.get("notes") or [])


def test_an_interrupted_pass_leaves_the_record_as_it_was(tmp_path):
    """SIGINT in the middle of a pass on a throttled device: exit 130, no record written."""
    state = tmp_path / "state"
    with loop_device(tmp_path / "img", 32 * MiB) as dev:
        with throttled_cgroup(dev, read_iops=100000) as cg:
            (cg / "blkio.throttle.write_bps_device").write_text(
                f"{os.major(os.stat(dev).st_rdev)}:{os.minor(os.stat(dev).st_rdev)} {4 * MiB}\n"
            )
            script = (
                f"echo $$ > {cg}/cgroup.procs; exec {Path(sys.executable).with_name('tilemark')} "
                f"precondition "
                f"--target {dev} --destroy-data {dev}"
            )
            env = {**os.environ, targets.STATE_DIR_ENV: str(state), "PYTHONUNBUFFERED": "1"}
            proc = subprocess.Popen(
                ["sh", "-c", script], env=env, stderr=subprocess.PIPE, text=True
            )
            seen = []
            for line in proc.stderr:
                seen.append(line)
                if "pass 1 of 2" in line:
                    break
            time.sleep(1.5)  # about 6 MiB into the first 32 MiB pass
            proc.send_signal(signal.SIGINT)
            _, rest = proc.communicate(timeout=60)
            err = "".join(seen) + rest
    assert proc.returncode == 130, err
    assert "interrupted in pass 1" in err
    # The device's record holds what its data is (the writes are verifiable), no preconditioning.
    records = list((state / "devices").glob("*.json")) if (state / "devices").exists() else []
    assert all("preconditioning" not in json.loads(r.read_text()) for r in records)
