"""Target safety and preparation: marker header, fills, foreign files, block devices."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("tilemark._engine", reason="the engine is not built (make build)")

from tilemark import targets  # noqa: E402
from tilemark.errors import UsageError  # noqa: E402

MIB = 1 << 20
REAL_FILL = targets.fill_region


def inspect(path, *, size=None, writes=True, direct=True, destroy_data=None, force=False):
    return targets.inspect_target(
        str(path), size=size, writes=writes, direct=direct, destroy_data=destroy_data, force=force
    )


def header_of(path: Path) -> dict:
    raw = path.read_bytes()[: targets.HEADER_SIZE]
    assert raw.startswith(b"TILEMARK-TARGET\n")
    body, _, padding = raw[len(b"TILEMARK-TARGET\n") :].partition(b"\0")
    assert set(padding) <= {0}  # zero padded to 4096
    return json.loads(body)


class Interrupted(Exception):
    """Stands in for Ctrl-C arriving between two fill chunks."""


class FillRecorder:
    """Wraps the real fill and records each call's (offset, length)."""

    def __init__(self, fail_after: int | None = None):
        self.calls: list[tuple[int, int]] = []
        self.fail_after = fail_after

    def __call__(self, path, offset, length, *, direct, seed, verify=None):
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise Interrupted
        self.calls.append((offset, length))
        return REAL_FILL(path, offset, length, direct=direct, seed=seed, verify=verify)


def test_new_file_gets_marker_header_and_exact_filled_data_area(tmp_path):
    path = tmp_path / "t.dat"
    info = inspect(path, size=8 * MIB + 1000)  # rounded down to whole 4 KiB blocks
    assert not path.exists()  # inspection never writes
    targets.prepare_target(info)
    assert info.created and info.data_length == 8 * MIB
    assert path.stat().st_size == 4096 + 8 * MIB
    header = header_of(path)
    assert header["version"] == 1 and header["created_at"]
    assert header["data_offset"] == 4096
    assert header["data_length"] == header["filled_length"] == 8 * MIB
    # Filled, not sparse: every block allocated, and data (not zeros) at both ends.
    assert path.stat().st_blocks * 512 >= 4096 + 8 * MIB
    with open(path, "rb") as f:
        for offset in (4096, 4096 + 4 * MIB, 4096 + 8 * MIB - 4096):
            f.seek(offset)
            assert f.read(4096).count(0) < 4096
    assert info.plan_target() == {
        "path": str(path),
        "offset": 4096,
        "length": 8 * MIB,
        "direct": True,
    }
    assert info.record() == {
        "name": None,
        "path": str(path),
        "kind": "file",
        "created": True,
        "data_offset": 4096,
        "data_length": 8 * MIB,
        "direct": True,
        "dio_alignment": info.dio_alignment,
        "preconditioning": None,  # never preconditioned (tilemark precondition)
        "data": header["data"],
    }
    # What the data area holds: verifiable fill blocks of a new target identity.
    assert header["data"]["fill"] == "verifiable" and header["data"]["epoch"] == 0
    assert header["data"]["block_size"] == 4096 and header["data"]["target_id"] > 0
    with open(path, "rb") as f:
        f.seek(4096)
        assert f.read(8) == b"TMVERIFY"


def test_existing_tilemark_file_is_reused_grown_and_resumed(tmp_path, monkeypatch):
    path = tmp_path / "t.dat"
    targets.prepare_target(inspect(path, size=4 * MIB))

    recorder = FillRecorder()
    monkeypatch.setattr(targets.prepare, "fill_region", recorder)
    again = inspect(path)  # no size: the file's own data area
    assert (again.exists, again.tilemark, again.data_length) == (True, True, 4 * MIB)
    targets.prepare_target(again)
    assert recorder.calls == [] and not again.created

    smaller = inspect(path, size=1 * MIB)  # uses the start of the file, never shrinks it
    targets.prepare_target(smaller)
    assert smaller.data_length == 1 * MIB and path.stat().st_size == 4096 + 4 * MIB

    grown = inspect(path, size=6 * MIB)
    targets.prepare_target(grown)
    assert recorder.calls == [(4096 + 4 * MIB, 2 * MIB)]  # only the new part is filled
    assert header_of(path)["data_length"] == header_of(path)["filled_length"] == 6 * MIB
    assert path.stat().st_size == 4096 + 6 * MIB


def test_interrupted_fill_keeps_progress_and_resumes(tmp_path, monkeypatch):
    path = tmp_path / "t.dat"
    monkeypatch.setattr(targets.prepare, "FILL_CHUNK", 1 * MIB)
    monkeypatch.setattr(targets.prepare, "fill_region", FillRecorder(fail_after=2))
    with pytest.raises(Interrupted):
        targets.prepare_target(inspect(path, size=4 * MIB))
    assert header_of(path)["filled_length"] == 2 * MIB

    recorder = FillRecorder()
    monkeypatch.setattr(targets.prepare, "fill_region", recorder)
    resumed = inspect(path)
    assert resumed.filled_length == 2 * MIB
    targets.prepare_target(resumed)
    assert recorder.calls == [(4096 + 2 * MIB, MIB), (4096 + 3 * MIB, MIB)]
    assert header_of(path)["filled_length"] == 4 * MIB


def test_foreign_file_is_never_written_but_may_be_read(tmp_path):
    path = tmp_path / "precious.db"
    content = os.urandom(3 * 4096)
    path.write_bytes(content)
    with pytest.raises(UsageError) as err:
        inspect(path, writes=True)
    assert str(err.value) == (
        f"refusing to write {path}: it exists and was not created by tilemark; "
        "name a new file or remove it."
    )
    info = inspect(path, writes=False)
    assert (info.kind, info.data_offset, info.data_length, info.tilemark) == (
        "file",
        0,
        len(content),
        False,
    )
    targets.prepare_target(info)
    assert path.read_bytes() == content
    with pytest.raises(UsageError, match="never grows a file it did not create"):
        inspect(path, writes=False, size=MIB)


def test_damaged_header_is_refused(tmp_path):
    path = tmp_path / "t.dat"
    path.write_bytes(b"TILEMARK-TARGET\n{not json".ljust(8192, b"\0"))
    with pytest.raises(UsageError, match="header is damaged; remove the file"):
        inspect(path)


def test_bad_target_paths(tmp_path, monkeypatch):
    with pytest.raises(UsageError, match="is a directory; name a file in it instead"):
        inspect(tmp_path, size=MIB)
    with pytest.raises(UsageError, match="in a directory that does not exist"):
        inspect(tmp_path / "nope" / "t.dat", size=MIB)
    with pytest.raises(UsageError, match="--size is required to create target"):
        inspect(tmp_path / "t.dat")
    with pytest.raises(UsageError, match="--destroy-data applies to block devices only"):
        inspect(tmp_path / "t.dat", size=MIB, destroy_data=str(tmp_path / "t.dat"))
    monkeypatch.setattr(targets.inspect, "free_bytes", lambda directory: 10 * MIB)
    with pytest.raises(UsageError, match=r"not enough free space .* needs 64 MiB more"):
        inspect(tmp_path / "t.dat", size=64 * MIB - 4096)
    assert list(tmp_path.iterdir()) == []  # nothing was created


def test_default_data_directory_is_created(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    info = inspect("tilemark-data/scratch.dat", size=MIB)
    assert info.make_dir and not (tmp_path / "tilemark-data").exists()
    targets.prepare_target(info)
    assert (tmp_path / "tilemark-data" / "scratch.dat").stat().st_size == 4096 + MIB


def test_default_size_is_capped_and_reuses_existing_files(tmp_path, monkeypatch):
    monkeypatch.setattr(targets.inspect, "free_bytes", lambda directory: 100 << 30)
    assert targets.default_size(str(tmp_path / "new.dat")) == 2 << 30
    monkeypatch.setattr(targets.inspect, "free_bytes", lambda directory: 5 << 30)
    assert targets.default_size(str(tmp_path / "new.dat")) == 512 * MIB
    monkeypatch.setattr(targets.inspect, "free_bytes", lambda directory: 100 * MIB)
    with pytest.raises(UsageError, match="not enough free space for the default workload"):
        targets.default_size(str(tmp_path / "new.dat"))


def test_magic_signatures():
    blank = bytearray(70_000)
    assert targets.magic_signatures(bytes(blank)) == []
    for offset, magic, meaning in targets.MAGICS:
        head = bytearray(blank)
        head[offset : offset + len(magic)] = magic
        assert meaning in targets.magic_signatures(bytes(head))


# --- block devices (loop devices; root) -------------------------------------------------------


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, check=False)


@pytest.fixture
def loop_device(tmp_path):
    """A 32 MiB zeroed loop device, detached (and unmounted) afterwards."""
    if os.geteuid() != 0:
        pytest.skip("loop devices need root")
    if shutil.which("losetup") is None:
        pytest.skip("losetup is not installed (util-linux)")
    image = tmp_path / "disk.img"
    with open(image, "wb") as f:
        f.truncate(32 * MIB)
    attached = _run("losetup", "--find", "--show", str(image))
    if attached.returncode != 0:
        pytest.skip(f"losetup cannot attach a loop device here: {attached.stderr.strip()}")
    device = attached.stdout.strip()
    mount_point = tmp_path / "mnt"
    try:
        yield device
    finally:
        if os.path.ismount(mount_point):
            _run("umount", str(mount_point))
        _run("losetup", "-d", device)


@pytest.mark.root
def test_block_device_reads_need_no_permission_but_writes_need_destroy_data(loop_device):
    info = inspect(loop_device, writes=False)
    assert (info.kind, info.data_offset, info.data_length) == ("block", 0, 32 * MIB)
    with pytest.raises(UsageError) as err:
        inspect(loop_device, writes=True)
    assert f"--destroy-data {loop_device}" in str(err.value)
    with pytest.raises(UsageError, match="does not name the target device"):
        inspect(loop_device, writes=True, destroy_data="/dev/null")
    accepted = inspect(loop_device, writes=True, destroy_data=loop_device)
    assert accepted.kind == "block" and accepted.plan_target()["offset"] == 0


@pytest.mark.root
def test_destroy_data_through_a_symlink_names_the_same_device(loop_device, tmp_path):
    link = tmp_path / "disk-link"
    link.symlink_to(loop_device)
    assert inspect(link, writes=True, destroy_data=loop_device).kind == "block"


@pytest.mark.root
def test_filesystem_signature_refused_even_with_destroy_data_unless_forced(loop_device):
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("mkfs.ext4 is not installed (e2fsprogs)")
    made = _run("mkfs.ext4", "-q", "-F", loop_device)
    assert made.returncode == 0, made.stderr
    with pytest.raises(UsageError) as err:
        inspect(loop_device, writes=True, destroy_data=loop_device)
    message = str(err.value)
    assert message.startswith(f"refusing to write block device {loop_device}: it carries")
    assert "ext" in message and "--force" in message and "wipefs" in message
    assert inspect(loop_device, writes=True, destroy_data=loop_device, force=True).kind == "block"


@pytest.mark.root
def test_partition_table_found_by_own_magic_check_without_blkid(loop_device, monkeypatch):
    with open(loop_device, "r+b") as f:
        f.seek(510)
        f.write(b"\x55\xaa")
    monkeypatch.setattr(targets.block, "_blkid_signatures", lambda path: [])
    with pytest.raises(UsageError, match=r"0x55AA at byte 510"):
        inspect(loop_device, writes=True, destroy_data=loop_device)


@pytest.mark.root
def test_mounted_device_is_refused(loop_device, tmp_path):
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("mkfs.ext4 is not installed (e2fsprogs)")
    assert _run("mkfs.ext4", "-q", "-F", loop_device).returncode == 0
    mount_point = tmp_path / "mnt"
    mount_point.mkdir()
    mounted = _run("mount", loop_device, str(mount_point))
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a loop device here: {mounted.stderr.strip()}")
    reasons = targets.in_use_reasons(os.stat(loop_device).st_rdev)
    assert reasons == [f"{loop_device} is mounted on {mount_point}"]
    with pytest.raises(UsageError) as err:
        inspect(loop_device, writes=True, destroy_data=loop_device)
    assert f"it is in use ({loop_device} is mounted on {mount_point})" in str(err.value)
    # Reading a mounted device is harmless and allowed.
    assert inspect(loop_device, writes=False).kind == "block"


def test_a_header_nested_too_deep_to_parse_is_damaged_not_a_traceback(tmp_path):
    """Issue 28: JSON nested past Python's recursion limit raises RecursionError, not
    ValueError; a planted header must still be one sentence."""
    from tilemark.targets.header import HEADER_SIZE, MARKER

    path = tmp_path / "deep.dat"
    body = MARKER + b"[" * 2000 + b"]" * 2000
    path.write_bytes(body.ljust(HEADER_SIZE, b"\0") + bytes(1 << 20))
    with pytest.raises(UsageError, match="header is damaged; remove the file"):
        targets.inspect_target(str(path), size=None, writes=False, direct=False)


def test_a_new_file_gets_the_alignment_its_filesystem_gives_files(tmp_path):
    # ext4 and xfs answer STATX_DIOALIGN for regular files only; a directory is asked through
    # an unnamed O_TMPFILE, so a target about to be created gets the alignment it will have
    # (512 on ext4 over a 512-byte-sector disk) and not a guessed 4096 that refuses the
    # 512-byte IOs fio runs there (iometer-file-access-server, jesd219).
    from tilemark import engine
    from tilemark.targets.inspect import file_dio_alignment

    existing = tmp_path / "existing.dat"
    existing.write_bytes(b"\0" * 8192)
    new = tmp_path / "new.dat"
    assert file_dio_alignment(new) == engine.dio_alignment(str(existing))
    assert file_dio_alignment(existing) == engine.dio_alignment(str(existing))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing.dat"]  # nothing left behind
