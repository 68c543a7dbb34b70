"""Faults and bad inputs around targets and workload files, each once observed as a traceback,
a wrong message or a silent surprise (issue "Failing storage fails the run"): one sentence and
the right exit status now, or the run going ahead and saying what it did."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tilemark.cli import main

from .rigs import failing_storage, loop_device

pytestmark = [pytest.mark.root, pytest.mark.loopdev, pytest.mark.cost(15)]

MiB = 1 << 20


def cli(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def one_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("tilemark: error: "), lines[0]
    return lines[0]


def null_run(tmp_path: Path, *args: str) -> list[str]:
    return ["run", *args, "--duration", "1", "--backend", "null", "--results", str(tmp_path / "r")]


# -----------------------------------------------------------------------------------------------
# Workload files and numbers


@pytest.mark.parametrize("kind", ["workload", "tile", "profile"])
def test_a_file_that_is_not_utf8_is_one_sentence(tmp_path, capsys, kind):
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b'target = "x.dat"\n# caf\xe9\n[[stream]]\nrw = "randread"\n')
    if kind == "workload":
        args = null_run(tmp_path, str(bad))
    elif kind == "tile":
        args = ["run", "--tiles", "1", "--tile", str(bad), "--target", str(tmp_path / "t.dat")]
    else:
        (tmp_path / "tile.toml").write_text(f'[[app]]\nprofile = "{bad}"\n')
        args = ["run", "--tiles", "1", "--tile", str(tmp_path / "tile.toml")]
        args += ["--target", str(tmp_path / "t.dat")]
    status, out, err = cli(capsys, *args)
    assert status == 2 and out == ""
    line = one_line(err)
    assert "bad.toml is not UTF-8 text (byte 0xe9 at offset" in line


def test_a_workload_file_named_with_spaces_runs(tmp_path, capsys):
    wl = tmp_path / "my db.toml"
    wl.write_text(f'target = "{tmp_path / "y.dat"}"\nsize = "4m"\n[[stream]]\nrw = "randread"\n')
    status, out, err = cli(capsys, *null_run(tmp_path, str(wl)), "--json")
    assert status == 0, err
    run_dir = Path(json.loads(out)["run_dir"])
    assert json.loads((run_dir / "run.json").read_text())["workload"]["name"] == "my_db"


def test_a_rate_in_scientific_notation_is_a_number(tmp_path, capsys):
    target = str(tmp_path / "z.dat")
    status, out, err = cli(
        capsys, *null_run(tmp_path, "--target", target, "--size", "4m", "--rate", "1e3"), "--json"
    )
    assert status == 0, err
    run_dir = Path(json.loads(out)["run_dir"])
    plan = json.loads((run_dir / "run.json").read_text())["plan"]
    assert plan["streams"][0]["arrival"]["rate_iops"] == 1000


def test_flags_that_override_the_workload_file_say_so_once(tmp_path, capsys):
    wl = tmp_path / "w.toml"
    target = tmp_path / "y.dat"
    wl.write_text(f'target = "{target}"\nsize = "4m"\nduration = 5\n[[stream]]\nqd = 2\n')
    status, _, err = cli(capsys, *null_run(tmp_path, str(wl), "--qd", "4"))
    assert status == 0, err
    notes = [line for line in err.splitlines() if line.startswith("note:")]
    assert notes == [f"note: --duration 1 overrides duration = 5; --qd 4 overrides qd = 2 in {wl}"]


def test_tile_runs_say_when_they_add_a_warmup(tmp_path, capsys):
    args = ["--target", str(tmp_path / "t.dat"), "--capacity", "64m", "--backend", "null"]
    args += ["--duration", "1", "--results", str(tmp_path / "r")]
    # The default run is stopped once it has said so: its 10 s warm-up proves nothing more.
    said = "the 10s warm-up is the tile-run default (--warmup 0 for none)"
    exe = str(Path(sys.executable).with_name("tilemark"))
    proc = subprocess.Popen(
        [exe, "run", "--tiles", "1", *args], stderr=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    err = ""
    for line in proc.stderr:
        err += line
        if said in line or line.startswith("[measure"):
            break
    proc.send_signal(signal.SIGINT)
    err += proc.communicate(timeout=60)[1]
    assert said in err, err
    assert proc.returncode == 130 and "Traceback" not in err, err
    status, _, err = cli(capsys, "run", "--tiles", "1", *args, "--warmup", "0")
    assert status in (0, 3), err
    assert "warm-up is the tile-run default" not in err


def test_too_large_a_capacity_names_capacity(tmp_path, capsys):
    status, _, err = cli(capsys, "run", "--tiles", "1", "--target", str(tmp_path / "t.dat"),
                         "--capacity", "500t")  # fmt: skip
    assert status == 2
    line = one_line(err)
    assert "lower --capacity or free some space" in line and "--size" not in line


# -----------------------------------------------------------------------------------------------
# Targets


def test_a_dangling_symlink_target_is_refused_and_nothing_is_created(tmp_path, capsys):
    link = tmp_path / "t.dat"
    elsewhere = tmp_path / "elsewhere.dat"
    link.symlink_to(elsewhere)
    status, _, err = cli(capsys, *null_run(tmp_path, "--target", str(link), "--size", "4m"))
    assert status == 2
    line = one_line(err)
    assert "is a symbolic link to" in line and "does not exist" in line
    assert not elsewhere.exists()


def test_a_read_only_workload_runs_on_an_immutable_tilemark_file(tmp_path, capsys):
    if os.geteuid() != 0 or not shutil.which("chattr"):
        pytest.skip("needs root and chattr (e2fsprogs) to make a file immutable")
    target = tmp_path / "ro.dat"
    status, _, err = cli(capsys, *null_run(tmp_path, "--target", str(target), "--size", "4m"))
    assert status == 0, err
    if subprocess.run(["chattr", "+i", str(target)], capture_output=True).returncode != 0:
        pytest.skip(f"the filesystem of {tmp_path} does not support chattr +i")
    try:
        status, _, err = cli(
            capsys, "run", "--target", str(target), "--rw", "randread", "--duration", "1",
            "--results", str(tmp_path / "r"),
        )  # fmt: skip
        assert status == 0, err
        # Writes are still refused, with one sentence.
        status, _, err = cli(
            capsys, "run", "--target", str(target), "--rw", "write", "--duration", "1",
            "--results", str(tmp_path / "r"),
        )  # fmt: skip
        last = err.strip().splitlines()[-1]
        assert status == 1 and "Traceback" not in err
        assert last.startswith("tilemark: error: cannot open target") and "not permitted" in last
    finally:
        subprocess.run(["chattr", "-i", str(target)], check=False)


def test_new_and_existing_files_use_the_same_o_direct_alignment(tmp_path):
    from tilemark.targets.inspect import file_dio_alignment, inspect_target

    target = tmp_path / "a.dat"
    new = inspect_target(str(target), size=4 * MiB, writes=True, direct=True)
    target.write_bytes(b"\0" * 8192)  # any existing file on the same filesystem
    assert file_dio_alignment(target) == new.dio_alignment


def test_a_failing_header_read_is_one_sentence_exit_1(tmp_path, capsys):
    with failing_storage(tmp_path / "mnt", "16M", "error-pread=EIO", "error-pread-rate=100%") as d:
        status, _, err = cli(capsys, *null_run(tmp_path, "--target", str(d), "--rw", "randread"))
    assert status == 1
    line = one_line(err)
    assert f"target {d} cannot be read: Input/output error" in line


def test_a_second_run_on_a_target_in_use_is_refused_naming_the_holder(tmp_path, capsys):
    target = tmp_path / "busy.dat"
    exe = Path(sys.executable).with_name("tilemark")
    if not exe.exists():
        pytest.skip(f"{exe} is not installed")
    first = subprocess.Popen(
        [str(exe), "run", "--target", str(target), "--size", "4m", "--duration", "20",
         "--backend", "null", "--results", str(tmp_path / "r1")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for _ in range(200):  # until the first run holds the target (its results dir appears)
            if (tmp_path / "r1").exists() or first.poll() is not None:
                break
            time.sleep(0.05)
        assert first.poll() is None, first.stderr.read()
        status, _, err = cli(capsys, *null_run(tmp_path, "--target", str(target)))
        assert status == 2
        line = one_line(err)
        assert f"target {target} is in use by another tilemark run (pid {first.pid}" in line
    finally:
        first.terminate()
        first.wait(timeout=20)
    # Once the holder is gone the target is free again.
    status, _, err = cli(capsys, *null_run(tmp_path, "--target", str(target)))
    assert status == 0, err


def test_a_foreign_file_with_holes_is_read_with_a_note(tmp_path, capsys):
    foreign = tmp_path / "sparse.img"
    with open(foreign, "wb") as f:
        f.truncate(8 * MiB)
        f.write(b"x" * MiB)  # 1 MiB of data, 7 MiB of holes
    status, _, err = cli(
        capsys, *null_run(tmp_path, "--target", str(foreign), "--rw", "randread", "--buffered")
    )
    assert status == 0, err
    assert "of its data area are holes, which read as zeros" in err
    assert "7 MiB" in err


def test_fill_on_a_foreign_file_is_refused(tmp_path, capsys):
    foreign = tmp_path / "theirs.img"
    foreign.write_bytes(b"y" * MiB)
    status, _, err = cli(capsys, *null_run(tmp_path, "--target", str(foreign), "--rw",
                                           "randread", "--fill"))  # fmt: skip
    assert status == 2 and "--fill writes the target" in one_line(err)
    assert foreign.read_bytes() == b"y" * MiB


def test_a_block_device_is_read_with_a_note_and_fill_writes_it(tmp_path, capsys):
    with loop_device(tmp_path / "disk.img", 16 * MiB) as dev:
        status, _, err = cli(capsys, *null_run(tmp_path, "--target", dev, "--rw", "randread"))
        assert status == 0, err
        assert f"target {dev} was not written by tilemark" in err
        assert (tmp_path / "disk.img").read_bytes() == bytes(16 * MiB)  # reads wrote nothing

        status, _, err = cli(capsys, *null_run(tmp_path, "--target", dev, "--fill"))
        assert status == 2 and "--destroy-data" in one_line(err)

        status, _, err = cli(capsys, *null_run(tmp_path, "--target", dev, "--rw", "randread",
                                               "--fill", "--destroy-data", dev))  # fmt: skip
        assert status == 0, err
        assert "was not written by tilemark" not in err
    data = (tmp_path / "disk.img").read_bytes()
    # Every 4 KiB block holds data now (incompressible, so none is all zeros).
    zero = bytes(4096)
    assert not any(data[i : i + 4096] == zero for i in range(0, len(data), 4096))
