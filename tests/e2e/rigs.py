"""Test rigs: loop devices, blkio-throttled cgroups, nbdkit-backed failing storage.

Each rig probes for what it needs and skips with the reason when the machine lacks it (these
rigs need root, cgroup v1 blkio, losetup, nbdkit/nbdfuse). `make test` installs the Debian
packages via scripts/system-deps.sh.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

BLKIO = Path("/sys/fs/cgroup/blkio")


def ram_dir() -> Path:
    """/dev/shm, the tmpfs every Linux system mounts: files there are RAM-speed targets and
    loop-device backings. Its absence is a broken test machine, not a reason to skip."""
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.fail("/dev/shm (tmpfs) is missing: the RAM-backed targets of this test need it")
    return shm


def need_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (loop devices, cgroups)")


@contextlib.contextmanager
def loop_device(image: Path, size: int) -> Iterator[str]:
    """A loop device over a fresh image file of `size` bytes (direct IO to the image)."""
    need_root()
    if not shutil.which("losetup"):
        pytest.skip("losetup not installed")
    with open(image, "wb") as f:
        f.truncate(size)
    with loop_over(image) as dev:
        yield dev


@contextlib.contextmanager
def loop_over(image: Path) -> Iterator[str]:
    """A loop device over an existing file (direct IO to it): a nbdfuse disk, an image."""
    need_root()
    if not shutil.which("losetup"):
        pytest.skip("losetup not installed")
    out = subprocess.run(
        ["losetup", "--find", "--show", "--direct-io=on", str(image)],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        pytest.skip(f"cannot set up a loop device: {out.stderr.strip()}")
    dev = out.stdout.strip()
    try:
        yield dev
    finally:
        subprocess.run(["losetup", "-d", dev], check=False)


@contextlib.contextmanager
def ram_loop_device(name: str, size: int) -> Iterator[str]:
    """A loop device over a fresh image of `size` bytes in /dev/shm, removed afterwards (an
    image left there holds its RAM until the machine restarts)."""
    image = ram_dir() / f"{name}-{os.getpid()}-{time.monotonic_ns()}.img"
    try:
        with loop_device(image, size) as dev:
            yield dev
    finally:
        image.unlink(missing_ok=True)


# block_rq_issue: "7,0 R 4096 () 2032 + 8 be,1,7 [iou-wrk-1]": device, rwbs, bytes, command,
# sector, sectors, class,hint,level (Linux 6.x carries the request's ioprio in the event).
RQ_ISSUE = "events/block/block_rq_issue"
RQ_ISSUE_LINE = re.compile(
    r"block_rq_issue: \d+,\d+ (\S+) \d+ \(.*?\) (\d+) \+ (\d+) (\w+),(\d+),(\d+)"
)


@contextlib.contextmanager
def block_requests(dev: str, name: str) -> Iterator[list[tuple[str, int, int, str, int, int]]]:
    """(R or W, byte offset, bytes, ioprio class, hint, level) of every data request issued to
    `dev` inside the block, in issue order, from a tracefs instance of our own (`name`); the
    list is filled when the block ends. Skips, saying why, on a kernel without tracefs or
    without the ioprio in block_rq_issue."""
    from tilemark.trace.tracefs import TracingUnavailable, find_tracefs

    try:  # tilemark's own lookup: it mounts tracefs when the kernel has one and it is not
        tracing = find_tracefs(None)
    except TracingUnavailable as e:
        pytest.skip(str(e))
    if "ioprio" not in (tracing / RQ_ISSUE / "format").read_text():
        pytest.skip("this kernel's block_rq_issue event carries no ioprio (Linux 6.x does)")
    st = os.stat(dev)
    instance = tracing / "instances" / f"{name}-{os.getpid()}"
    instance.mkdir()
    requests: list[tuple[str, int, int, str, int, int]] = []
    try:
        dev_t = (os.major(st.st_rdev) << 20) | os.minor(st.st_rdev)
        (instance / RQ_ISSUE / "filter").write_text(f"dev == {dev_t}\n")
        (instance / "buffer_size_kb").write_text("4096\n")
        (instance / RQ_ISSUE / "enable").write_text("1\n")
        yield requests
        (instance / RQ_ISSUE / "enable").write_text("0\n")
        for m in RQ_ISSUE_LINE.finditer((instance / "trace").read_text()):
            rwbs, sector, sectors, klass, hint, level = m.groups()
            op = "R" if "R" in rwbs else "W" if "W" in rwbs else ""
            if op and int(sectors):
                requests.append(
                    (op, int(sector) * 512, int(sectors) * 512, klass, int(hint), int(level))
                )
    finally:
        instance.rmdir()


def dev_numbers(dev: str) -> str:
    """'major:minor' of a block device."""
    st = os.stat(dev)
    return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


@contextlib.contextmanager
def throttled_cgroup(
    dev: str,
    *,
    read_iops: int | None = None,
    read_bps: int | None = None,
    write_bps: int | None = None,
    write_iops: int | None = None,
) -> Iterator[Path]:
    """A cgroup v1 blkio group limiting reads from `dev` to `read_iops` IOs/s and/or
    `read_bps` bytes/s, and direct writes to `write_bps` bytes/s and/or `write_iops` IOs/s."""
    need_root()
    if not (BLKIO / "blkio.throttle.read_iops_device").exists():
        pytest.skip("cgroup v1 blkio throttling is not available")
    cg = BLKIO / f"tilemark-test-{os.getpid()}-{time.monotonic_ns()}"
    cg.mkdir()
    try:
        if read_iops is not None:
            (cg / "blkio.throttle.read_iops_device").write_text(f"{dev_numbers(dev)} {read_iops}\n")
        if read_bps is not None:
            (cg / "blkio.throttle.read_bps_device").write_text(f"{dev_numbers(dev)} {read_bps}\n")
        if write_bps is not None:
            (cg / "blkio.throttle.write_bps_device").write_text(f"{dev_numbers(dev)} {write_bps}\n")
        if write_iops is not None:
            (cg / "blkio.throttle.write_iops_device").write_text(
                f"{dev_numbers(dev)} {write_iops}\n"
            )
        yield cg
    finally:
        for _ in range(50):
            try:
                cg.rmdir()
                break
            except OSError:
                time.sleep(0.1)


@contextlib.contextmanager
def failing_storage(
    mountpoint: Path, size: str, *filter_args: str, nbd_filter: str = "error"
) -> Iterator[Path]:
    """A file backed by nbdkit's memory plugin behind a filter, exposed via nbdfuse.

    `filter_args` are the filter's settings: for the error filter e.g. "error-pread-rate=10%",
    "error-pread=EIO"; with `nbd_filter="delay"` e.g. "rdelay=5" (every read takes 5 s).
    """
    for tool in ("nbdkit", "nbdfuse", "fusermount3"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} not installed (Debian nbdkit, libnbd-bin, fuse3)")
    if not Path("/dev/fuse").exists():
        pytest.skip("/dev/fuse is not available")
    mountpoint.mkdir()
    cmd = ["nbdfuse", str(mountpoint), "--command", "nbdkit", "-s", f"--filter={nbd_filter}"]
    proc = subprocess.Popen(
        [*cmd, "memory", size, *filter_args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    disk = mountpoint / "nbd"
    try:
        for _ in range(100):
            if disk.exists():
                break
            if proc.poll() is not None:
                pytest.skip("nbdfuse exited before the disk appeared")
            time.sleep(0.05)
        else:
            pytest.skip("nbdfuse did not expose its disk within 5 s")
        yield disk
    finally:
        # io_uring releases its file references asynchronously after the ring closes, so
        # the mount can be busy for a moment after the run. Still busy after a second, it is
        # held by reads the test gave up on (a delayed device answers them seconds later, one
        # after another): it is detached lazily and nbdkit stopped, so those reads fail now
        # instead of the test waiting for them (up to 12 s in the hung-IO tests).
        for _ in range(20):
            umount = ["fusermount3", "-u", str(mountpoint)]
            if subprocess.run(umount, check=False, capture_output=True).returncode == 0:
                break
            time.sleep(0.05)
        else:
            subprocess.run(["fusermount3", "-uz", str(mountpoint)], check=False)
            proc.kill()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            subprocess.run(["fusermount3", "-uz", str(mountpoint)], check=False)
            proc.kill()


@contextlib.contextmanager
def small_filesystem(mountpoint: Path, size: str, kind: str = "tmpfs") -> Iterator[Path]:
    """A filesystem of `size` (e.g. "1m") mounted at `mountpoint`: tmpfs, or ext4 on a loop
    device over an image file next to it. For runs whose results fill it up."""
    need_root()
    mountpoint.mkdir(parents=True, exist_ok=True)
    if kind == "tmpfs":
        cmd = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mountpoint)]
    else:
        if not shutil.which("mkfs.ext4"):
            pytest.skip("mkfs.ext4 not installed")
        image = mountpoint.with_name(mountpoint.name + ".img")
        units = {"k": 1 << 10, "m": 1 << 20}
        with open(image, "wb") as f:
            f.truncate(int(size[:-1]) * units[size[-1].lower()])
        mkfs = subprocess.run(
            ["mkfs.ext4", "-q", "-F", "-O", "^has_journal", str(image)], capture_output=True
        )
        if mkfs.returncode != 0:
            pytest.skip(f"mkfs.ext4 failed: {mkfs.stderr.decode().strip()}")
        cmd = ["mount", "-o", "loop", str(image), str(mountpoint)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"cannot mount a {kind}: {out.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        for _ in range(50):
            if subprocess.run(["umount", str(mountpoint)], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)


def remount_read_only(mountpoint: Path) -> None:
    """Make a mounted filesystem read-only (EROFS for every write, even root's)."""
    subprocess.run(["mount", "-o", "remount,ro", str(mountpoint)], check=True)


def tilemark_exe() -> str:
    """The tilemark command of this environment."""
    exe = Path(sys.executable).with_name("tilemark")
    return str(exe) if exe.exists() else shutil.which("tilemark") or "tilemark"


def in_cgroup(cg: Path, cmd: list[str]) -> list[str]:
    """`cmd` wrapped so that it runs inside the cgroup `cg` (for subprocess.run/Popen)."""
    joined = f'echo 0 > "{cg}/cgroup.procs" && exec "$@"'
    return ["sh", "-c", joined, "sh", *cmd]


def set_read_iops(cg: Path, dev: str, read_iops: int) -> None:
    """Change the read IOPS cap of `dev` in `cg` (takes effect at once, even mid-run)."""
    (cg / "blkio.throttle.read_iops_device").write_text(f"{dev_numbers(dev)} {read_iops}\n")
