"""Data verification on real files: damage made by hand is found and classified, a run killed
with SIGKILL leaves a journal that verifies clean, and IO errors stay IO errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tilemark.cli import main

from .rigs import tilemark_exe

B = 4096
HEADER = 4096  # a tilemark file's data area starts after its 4 KiB header


def cli(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def write_run(capsys, target: Path, results: Path, *extra: str) -> dict:
    status, out, err = cli(
        capsys, "run", "--target", str(target), "--size", "4m", "--rw", "write", "--bs", "64k",
        "--qd", "4", "--duration", "0.7", "--interval", "0.2s", "--verify", "--json",
        "--results", str(results), *extra,
    )  # fmt: skip
    assert status == 0, err
    return json.loads(out)


def block(data: bytes, i: int) -> bytes:
    return data[HEADER + i * B : HEADER + (i + 1) * B]


def put(target: Path, i: int, content: bytes, within: int = 0) -> None:
    with open(target, "r+b") as f:
        f.seek(HEADER + i * B + within)
        f.write(content)


@pytest.mark.quick
def test_damage_is_found_and_classified_at_its_offsets(tmp_path, capsys):
    target, results = tmp_path / "t.dat", tmp_path / "r"
    write_run(capsys, target, results)
    earlier = target.read_bytes()
    second = write_run(capsys, target, results)
    assert second["summary"]["verification"]["findings"] == 0
    now = target.read_bytes()
    assert all(block(earlier, i) != block(now, i) for i in (10, 20, 30)), "rewritten"
    # The two runs share a seed; their epochs keep their bytes apart in every sector, or the
    # torn block below would read as whole (a run with the same IO count used to write the
    # same keys: this test missed "torn" about once in eight).
    alike = [i for i in range(1024) if block(earlier, i)[512:520] == block(now, i)[512:520]]
    assert alike == [], f"{len(alike)} blocks hold the same data in both runs"

    for i in (3, 100, 700):  # one flipped bit in each of 3 blocks
        flipped = bytearray(block(now, i))
        flipped[1000 + i] ^= 0x04
        put(target, i, bytes(flipped))
    put(target, 10, block(earlier, 10))  # an earlier copy restored: a lost write
    put(target, 20, block(now, 21))  # another block's data: a misdirected write
    put(target, 30, block(earlier, 30)[2048:], within=2048)  # half the sectors older: torn

    status, out, err = cli(
        capsys, "verify", second["run_id"], "--results", str(results), "--json"
    )  # fmt: skip
    assert status == 1, err
    doc = json.loads(out)
    found = {(f["class"], f["offset"]) for f in doc["findings"]}
    assert found == {
        ("corrupt", 3 * B),
        ("corrupt", 100 * B),
        ("corrupt", 700 * B),
        ("stale", 10 * B),
        ("misdirected", 20 * B),
        ("torn", 30 * B),
    }, doc["findings"]
    assert doc["checked"] == 1024 and doc["complete"] is True
    stored = json.loads((Path(second["run_dir"]) / "run.json").read_text())
    assert stored["verify_passes"][-1]["total"] == 6

    # A verified run reading the damaged target finds damage inline and fails on it.
    status, out, err = cli(
        capsys, "run", "--target", str(target), "--rw", "randread", "--qd", "4",
        "--duration", "3", "--verify", "--json", "--results", str(results),
    )  # fmt: skip
    assert status == 1, err
    run = json.loads(out)
    assert run["summary"]["verification"]["findings"] >= 1
    assert json.loads((Path(run["run_dir"]) / "run.json").read_text())["status"] == "data-errors"
    assert "data errors" in err and "finding:" in err and "Traceback" not in err


def test_a_run_killed_with_sigkill_verifies_clean_from_its_journal(tmp_path, capsys):
    target, results = tmp_path / "t.dat", tmp_path / "r"
    cmd = [
        tilemark_exe(), "run", "--target", str(target), "--size", "8m",
        "--rw", "randrw", "--sync", "dsync", "--qd", "8", "--duration", "60", "--verify",
        "--results", str(results),
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        journal = None
        while time.monotonic() < deadline and journal is None:
            journal = next(results.glob("*/verify.journal"), None) if results.exists() else None
            time.sleep(0.05)
        assert journal is not None, proc.stderr.read() if proc.poll() is not None else "no journal"
        time.sleep(1.5)  # synced writes land and are journaled
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(30)
    status, out, err = cli(
        capsys, "verify", journal.parent.name, "--results", str(results), "--json"
    )
    doc = json.loads(out)
    assert status == 0, (err, doc["findings"][:3])
    assert doc["total"] == 0 and doc["checked"] == 2048
    assert doc["journal_closed"] is False and "did not end cleanly" in err


@pytest.mark.quick
def test_bad_input_is_one_sentence_and_writes_nothing(tmp_path, capsys):
    foreign = tmp_path / "foreign.dat"
    foreign.write_bytes(os.urandom(1 << 20))
    results = tmp_path / "r"
    status, out, err = cli(
        capsys, "run", "--target", str(foreign), "--rw", "randread", "--duration", "1",
        "--verify", "--results", str(results),
    )  # fmt: skip
    assert status == 2 and "nothing to check against" in err and err.count("\n") == 1
    assert not results.exists()

    status, _, err = cli(
        capsys, "run", "--target", str(tmp_path / "n.dat"), "--size", "1m", "--rw", "randwrite",
        "--dedupe", "0.5", "--results", str(results),
    )  # fmt: skip
    assert status == 2 and "--dedupe must be a ratio from 1 to 100" in err
    assert not results.exists() and not (tmp_path / "n.dat").exists()

    # A run without --verify has no journal to verify.
    status, out, err = cli(capsys, "run", "--target", str(tmp_path / "t.dat"), "--size", "1m",
                           "--rw", "randwrite", "--duration", "0.3", "--json",
                           "--results", str(results))  # fmt: skip
    assert status == 0, err
    run_id = json.loads(out)["run_id"]
    status, _, err = cli(capsys, "verify", run_id, "--results", str(results))
    assert status == 2 and "no verification journal" in err and "Traceback" not in err


def test_a_target_filled_by_an_older_tilemark_gets_a_sentence(tmp_path, capsys):
    from tilemark import targets

    old = tmp_path / "old.dat"
    header = {"version": 1, "created_at": "2026-01-01T00:00:00+00:00", "data_offset": 4096,
              "data_length": 1 << 20, "filled_length": 1 << 20}  # fmt: skip
    old.write_bytes(targets.encode_header(header) + os.urandom(1 << 20))
    status, _, err = cli(capsys, "verify", str(old))
    assert status == 2 and "filled by an older tilemark with random data" in err
    status, _, err = cli(capsys, "run", "--target", str(old), "--rw", "randread", "--verify",
                         "--duration", "1", "--results", str(tmp_path / "r"))  # fmt: skip
    assert status == 2 and "older tilemark" in err and "nothing to check against" in err


def test_a_repeat_of_a_workload_file_asking_for_verify_passes_after_every_repetition(
    tmp_path, capsys
):
    # `verify = true` in the file is --verify: each repetition ends with its checksum pass.
    workload = tmp_path / "w.toml"
    workload.write_text(
        f'target = "{tmp_path / "t.dat"}"\nsize = "4m"\nduration = "0.4"\ninterval = "0.2s"\n'
        'verify = true\n[[stream]]\nrw = "randrw"\nbs = "4k"\nqd = 4\n'
    )
    results = tmp_path / "results"
    status, _, err = cli(capsys, "repeat", "2", str(workload), "--results", str(results))
    assert status == 0, err
    runs = [json.loads(p.read_text()) for p in sorted(results.glob("*/run.json"))]
    assert len(runs) == 2
    for run in runs:
        (passed,) = run["verify_passes"]
        assert passed["checked"] == 1024 and passed["total"] == 0


def test_a_target_cut_short_outside_tilemark_is_a_finding(tmp_path, capsys):
    """Issue 28: a target truncated behind tilemark's back verified as "0 findings" by path
    (and as read errors by run); the part that is gone is one `missing` finding now."""
    target, results = tmp_path / "t.dat", tmp_path / "r"
    run = write_run(capsys, target, results)
    os.truncate(target, HEADER + (1 << 20) + 100)  # 4 MiB of data area cut to 1 MiB and a bit
    for given in (str(target), run["run_id"]):
        status, out, err = cli(capsys, "verify", given, "--results", str(results), "--json")
        assert status == 1, err
        doc = json.loads(out)
        assert doc["by_class"] == {"missing": 1} and doc["total"] == 1, doc["by_class"]
        assert doc["bytes"] == 1 << 20 and not doc["io_errors"]
        (finding,) = doc["findings"]
        assert finding["offset"] == 1 << 20
        assert "3 MiB (768 blocks) short" in finding["detail"]
    # A run refills what is gone and says so.
    status, _, err = cli(capsys, "run", "--target", str(target), "--rw", "randread",
                         "--duration", "0.2", "--results", str(results))  # fmt: skip
    assert status == 0 and "3 MiB shorter than its header says was filled" in err


def test_a_journal_whose_header_is_cut_short_is_one_sentence(tmp_path, capsys):
    results = tmp_path / "r"
    run = write_run(capsys, tmp_path / "t.dat", results)
    journal = Path(run["run_dir"]) / "verify.journal"
    os.truncate(journal, 40)  # the magic line and the start of the JSON
    status, _, err = cli(capsys, "verify", run["run_id"], "--results", str(results))
    assert status == 2 and "Traceback" not in err, err
    assert err.count("\n") == 1 and "verify.journal is damaged" in err


def test_a_ring_with_a_polling_kernel_thread_reads_back_what_it_wrote(tmp_path, capsys):
    # --sqpoll: requests reach the kernel through its submission thread, not system calls.
    target, results = tmp_path / "t.dat", tmp_path / "r"
    written = write_run(capsys, target, results, "--sqpoll")
    status, out, err = cli(
        capsys, "run", "--target", str(target), "--size", "4m", "--rw", "randrw", "--bs", "4k",
        "--qd", "8", "--duration", "0.7", "--verify", "--sqpoll", "--json",
        "--results", str(results),
    )  # fmt: skip
    assert status == 0, err
    mixed = json.loads(out)
    for run in (written, mixed):
        stored = json.loads((Path(run["run_dir"]) / "run.json").read_text())
        assert stored["plan"]["sqpoll"] is True
    stream = mixed["summary"]["streams"][0]
    assert stream["read"]["ops"] > 100 and stream["write"]["ops"] > 100
    verification = mixed["summary"]["verification"]
    assert verification["findings"] == 0 and verification["checked"] > 100
