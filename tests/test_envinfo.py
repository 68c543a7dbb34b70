"""envinfo.collect(): host and per-target provenance, best effort, never raising."""

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tilemark.telemetry import envinfo


def df_fstype(path: Path) -> str:
    """Filesystem type as coreutils df reports it: an oracle independent of envinfo."""
    out = subprocess.run(
        ["df", "--output=fstype", str(path)], capture_output=True, text=True, check=True
    )
    return out.stdout.split()[-1]


def test_host_facts():
    info = envinfo.collect([])
    assert info["hostname"] == socket.gethostname()
    assert info["kernel"] == f"{os.uname().sysname} {os.uname().release}"
    assert info["cpu_count"] == os.cpu_count()
    assert info["memory_bytes"] > 0
    assert info["python_version"].count(".") == 2
    assert info["tilemark_version"]
    assert info["targets"] == []


def test_file_on_a_disk_backed_filesystem(tmp_path):
    target = tmp_path / "tm.dat"
    target.write_bytes(b"x" * 4096)
    (info,) = envinfo.collect([str(target)])["targets"]
    assert info["exists"] is True and info["kind"] == "file"
    assert info["fs_type"] == df_fstype(target)
    assert Path(target).resolve().is_relative_to(info["mount_point"])
    assert 0 < info["fs_free_bytes"] <= info["fs_total_bytes"]
    st = os.stat(target)
    sysfs = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    if not sysfs.exists():
        pytest.skip(f"{tmp_path} is not on a block device here ({info['fs_type']})")
    device = info["device"]
    disk = sysfs.resolve().parent if (sysfs / "partition").exists() else sysfs.resolve()
    assert device["name"] == disk.name
    scheduler_line = (disk / "queue" / "scheduler").read_text()
    assert f"[{device['scheduler']}]" in scheduler_line or device["scheduler"] == "none"
    assert device["logical_block_size"] == int((disk / "queue/logical_block_size").read_text())
    assert device["physical_block_size"] >= device["logical_block_size"]
    assert isinstance(device["rotational"], bool)
    assert device["model"]  # a virtio disk has no model file: envinfo names it "virtio-blk"


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm")
def test_file_on_tmpfs():
    path = Path("/dev/shm") / f"tilemark-envinfo-{os.getpid()}"
    path.write_bytes(b"x")
    try:
        (info,) = envinfo.collect([str(path)])["targets"]
    finally:
        path.unlink()
    assert info["fs_type"] == "tmpfs"
    assert info["mount_point"] == "/dev/shm"
    assert info["device"] is None
    assert info["fs_total_bytes"] > 0


def test_missing_paths_do_not_raise():
    info = envinfo.collect(["/nonexistent/dir/tm.dat", "", "/proc/self/status"])
    missing, empty, proc = info["targets"]
    assert missing["exists"] is False and missing["kind"] == "missing"
    assert missing["path"] == "/nonexistent/dir/tm.dat"
    assert empty["path"] == ""
    assert proc["fs_type"] == "proc" and proc["device"] is None


def test_mount_for_takes_longest_prefix_and_the_upper_of_stacked_mounts():
    mounts = [
        {"dev": "8:1", "mount_point": "/", "fs_type": "ext4", "source": "/dev/sda1"},
        {"dev": "8:2", "mount_point": "/mnt/ab", "fs_type": "xfs", "source": "/dev/sda2"},
        {"dev": "0:5", "mount_point": "/mnt/ab", "fs_type": "tmpfs", "source": "tmpfs"},
        {"dev": "8:3", "mount_point": "/mnt/a b", "fs_type": "btrfs", "source": "/dev/sda3"},
    ]
    assert envinfo.mount_for("/mnt/ab/x", mounts)["fs_type"] == "tmpfs"
    assert envinfo.mount_for("/mnt/abc/x", mounts)["fs_type"] == "ext4"
    assert envinfo.mount_for("/mnt/a b/f", mounts)["fs_type"] == "btrfs"
    assert envinfo.mount_for("/", mounts)["fs_type"] == "ext4"


def test_mountinfo_escapes_are_decoded(tmp_path, monkeypatch):
    fake = tmp_path / "mountinfo"
    fake.write_text(
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
        "40 27 0:50 / /mnt/a\\040b rw shared:1 - tmpfs my\\040src rw\n"
    )
    monkeypatch.setattr(envinfo, "MOUNTINFO", fake)
    mounts = envinfo.read_mounts()
    assert mounts[1] == {
        "dev": "0:50",
        "mount_point": "/mnt/a b",
        "fs_type": "tmpfs",
        "source": "my src",
    }


def test_partition_resolves_to_its_disk_in_sysfs(tmp_path, monkeypatch):
    # A sysfs tree shaped like the kernel's: /sys/dev/block/M:m links into the device tree,
    # and a partition is a child directory of its disk holding a `partition` file.
    disk = tmp_path / "devices/pci0000:00/virtio3/block/vdb"
    part = disk / "vdb2"
    (disk / "queue").mkdir(parents=True)
    part.mkdir()
    (part / "partition").write_text("2\n")
    (disk / "dev").write_text("254:16\n")
    (disk / "size").write_text("2048\n")
    (disk / "queue/scheduler").write_text("none [mq-deadline] kyber\n")
    (disk / "queue/rotational").write_text("0\n")
    (disk / "queue/logical_block_size").write_text("512\n")
    (disk / "queue/physical_block_size").write_text("4096\n")
    drivers = tmp_path / "bus/virtio/drivers/virtio_blk"
    drivers.mkdir(parents=True)
    (disk / "device").symlink_to(disk.parents[1])
    (disk.parents[1] / "driver").symlink_to(drivers)
    links = tmp_path / "dev/block"
    links.mkdir(parents=True)
    (links / "254:18").symlink_to(part)
    monkeypatch.setattr(envinfo, "SYS_DEV_BLOCK", links)

    info = envinfo.block_device_info(254, 18)
    assert info["name"] == "vdb" and info["partition"] == "vdb2"
    assert info["model"] == "virtio-blk" and info["transport"] == "virtio_blk"
    assert info["scheduler"] == "mq-deadline"
    assert info["rotational"] is False
    assert (info["logical_block_size"], info["physical_block_size"]) == (512, 4096)
    assert info["size_bytes"] == 2048 * 512
    assert envinfo.block_device_info(254, 99) is None


def _mbr_with_one_partition(image: Path, start_sector: int, sectors: int) -> None:
    """A DOS partition table with one Linux partition, written by hand (no sfdisk needed)."""
    entry = bytes([0x00, 0, 0, 0, 0x83, 0, 0, 0])
    entry += start_sector.to_bytes(4, "little") + sectors.to_bytes(4, "little")
    with open(image, "r+b") as f:
        f.seek(446)
        f.write(entry + bytes(48) + b"\x55\xaa")


needs_root_losetup = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("losetup"), reason="needs root and losetup"
)


@pytest.fixture
def loop_device(tmp_path):
    """An 8 MiB image with one MBR partition, attached as a loop device with partscan."""
    image = tmp_path / "disk.img"
    with open(image, "wb") as f:
        f.truncate(8 << 20)
    _mbr_with_one_partition(image, 2048, 8192)
    attach = subprocess.run(
        ["losetup", "--find", "--show", "--partscan", str(image)], capture_output=True, text=True
    )
    if attach.returncode != 0:
        pytest.skip(f"losetup failed: {attach.stderr.strip()}")
    loop = attach.stdout.strip()
    try:
        yield loop, image
    finally:
        subprocess.run(["losetup", "--detach", loop], check=False)


@pytest.mark.root
@needs_root_losetup
def test_loop_device(loop_device):
    loop, image = loop_device
    (info,) = envinfo.collect([loop])["targets"]
    assert info["kind"] == "block"
    assert info["fs_type"] is None  # not mounted
    device = info["device"]
    assert device["name"] == Path(loop).name and device["partition"] is None
    assert device["model"] == "loop" and device["transport"] == "loop"
    assert device["loop_backing_file"] == str(image)
    assert device["size_bytes"] == 8 << 20
    assert device["scheduler"] is not None


@pytest.mark.root
@needs_root_losetup
def test_loop_partition_resolves_to_the_loop_disk(loop_device):
    loop, _ = loop_device
    partition = Path(f"{loop}p1")
    deadline = time.monotonic() + 1
    while not partition.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    if not partition.exists():
        pytest.skip("this kernel made no partition node (CONFIG_MSDOS_PARTITION unset?)")
    (info,) = envinfo.collect([str(partition)])["targets"]
    assert info["kind"] == "block"
    assert info["device"]["name"] == Path(loop).name
    assert info["device"]["partition"] == partition.name


@pytest.mark.root
@needs_root_losetup
def test_loop_partition_device_tree_goes_to_the_loop_disk(loop_device):
    loop, image = loop_device
    partition = Path(f"{loop}p1")
    deadline = time.monotonic() + 1
    while not partition.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    if not partition.exists():
        pytest.skip("this kernel made no partition node (CONFIG_MSDOS_PARTITION unset?)")
    (node,) = envinfo.device_tree(str(partition))["devices"]
    assert (node["name"], node["kind"]) == (partition.name, "partition")
    (disk,) = node["children"]
    assert (disk["name"], disk["kind"]) == (Path(loop).name, "loop")
    assert disk["backing_file"] == str(image)
