"""Where a result came from: the host and, for every target, its device and filesystem.

Everything is read from /proc, /sys and os calls, best effort: a field that cannot be
determined is None, and nothing here raises, because missing provenance must never cost a run.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import tilemark

T = TypeVar("T")

SYS_DEV_BLOCK = Path("/sys/dev/block")
SYS_BLOCK = Path("/sys/block")
MOUNTINFO = Path("/proc/self/mountinfo")

# Kernel driver names of the disks whose sysfs has no `model` file, said in plain words.
DRIVER_MODELS = {"virtio_blk": "virtio-blk", "xen_blkfront": "xen-blkfront"}


def _safe(fn: Callable[[], T]) -> T | None:
    try:
        return fn()
    except Exception:  # provenance is best effort by contract: any failure is "unknown"
        return None


def _read(path: Path | str) -> str | None:
    """Stripped content of a small text file, or None if it cannot be read or is empty."""
    try:
        text = Path(path).read_text(errors="replace").strip()
    except OSError:
        return None
    return text or None


def _read_int(path: Path | str) -> int | None:
    text = _read(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _os_pretty_name() -> str | None:
    text = _read("/etc/os-release") or _read("/usr/lib/os-release")
    for line in (text or "").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "PRETTY_NAME":
            return value.strip().strip('"').strip("'") or None
    return None


def _cpu_model() -> str | None:
    text = _read("/proc/cpuinfo") or ""
    # x86 says "model name"; some ARM kernels only give "Hardware" or "Processor".
    for key in ("model name", "Hardware", "Processor", "cpu model"):
        for line in text.splitlines():
            name, _, value = line.partition(":")
            if name.strip() == key and value.strip():
                return value.strip()
    return platform.processor() or None


def _memory_bytes() -> int | None:
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            parts = line.split()
            return int(parts[1]) * 1024 if len(parts) >= 2 and parts[1].isdigit() else None
    return None


def _engine_version() -> str | None:
    def load() -> str:
        from tilemark import engine  # the compiled module may be absent: import lazily

        return engine.version()

    return _safe(load)


def host_info() -> dict[str, Any]:
    """Host name, kernel, OS, CPU, memory and software versions."""
    uname = _safe(os.uname)
    return {
        "hostname": _safe(socket.gethostname),
        "kernel": f"{uname.sysname} {uname.release}" if uname else None,
        "kernel_version": uname.version if uname else None,
        "machine": uname.machine if uname else None,
        "os": _safe(_os_pretty_name),
        "cpu_model": _safe(_cpu_model),
        "cpu_count": _safe(os.cpu_count),
        # cgroups and taskset can leave this process fewer CPUs than the machine has.
        "cpu_usable": _safe(lambda: len(os.sched_getaffinity(0))),
        "memory_bytes": _safe(_memory_bytes),
        "python_version": _safe(platform.python_version),
        "tilemark_version": tilemark.__version__,
        "engine_version": _engine_version(),
    }


def _unescape_mount_path(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash as \ooo octal escapes.
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def read_mounts() -> list[dict[str, str]]:
    """Mounts of this process's namespace, in /proc/self/mountinfo order."""
    mounts = []
    for line in (_read(MOUNTINFO) or "").splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 2:
            continue
        mounts.append(
            {
                "dev": fields[2],
                "mount_point": _unescape_mount_path(fields[4]),
                "fs_type": tail[0],
                "source": _unescape_mount_path(tail[1]),
            }
        )
    return mounts


def mount_for(path: str, mounts: list[dict[str, str]]) -> dict[str, str] | None:
    """The mount holding `path`: longest mount-point prefix; the later (upper) one on a tie."""
    best = None
    for m in mounts:
        mp = m["mount_point"]
        if path == mp or path.startswith(mp.rstrip("/") + "/"):
            if best is None or len(mp) >= len(best["mount_point"]):
                best = m
    return best


def _existing_ancestor(path: Path) -> Path | None:
    # A target file may not exist yet: it will be created in its nearest existing directory.
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return None


def _sysfs_node(major: int, minor: int) -> Path | None:
    node = SYS_DEV_BLOCK / f"{major}:{minor}"
    return node.resolve() if node.exists() else None


def _disk_of(node: Path) -> tuple[Path, str | None]:
    """The whole-disk sysfs node for a block node, and the partition name if it was one."""
    if (node / "partition").exists():
        return node.parent, node.name
    return node, None


def _transport(disk: Path) -> str | None:
    name = disk.name
    if (disk / "loop").is_dir() or name.startswith("loop"):
        return "loop"
    if (disk / "dm").is_dir():
        return "device-mapper"
    if (disk / "md").is_dir():
        return "md"
    driver = _safe(lambda: (disk / "device" / "driver").resolve().name)
    if driver:
        return driver
    subsystem = _safe(lambda: (disk / "device" / "subsystem").resolve().name)
    return subsystem or None


def _scheduler(disk: Path) -> str | None:
    text = _read(disk / "queue" / "scheduler")
    if text is None:
        return None
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            return word[1:-1]
    return text  # one scheduler without brackets (older kernels print just "none")


def block_device_info(major: int, minor: int) -> dict[str, Any] | None:
    """Model, vendor, queue settings of the disk behind a block device number, or None."""
    node = _sysfs_node(major, minor)
    if node is None:
        return None
    disk, partition = _disk_of(node)
    transport = _transport(disk)
    model = _read(disk / "device" / "model")
    vendor = _read(disk / "device" / "vendor")
    if model is None:
        if transport in DRIVER_MODELS:
            model = DRIVER_MODELS[transport]
        elif transport == "loop":
            model = "loop"
        elif transport == "device-mapper":
            model = "device-mapper"
        elif transport == "md":
            model = "md-raid"
    slaves = _safe(lambda: sorted(p.name for p in (disk / "slaves").iterdir()))
    rotational = _read_int(disk / "queue" / "rotational")
    size_sectors = _read_int(disk / "size")
    return {
        "name": disk.name,
        "dev_path": f"/dev/{disk.name}",
        "dev": _read(disk / "dev"),
        "partition": partition,
        "model": model,
        "vendor": vendor,
        "transport": transport,
        "rotational": None if rotational is None else bool(rotational),
        "logical_block_size": _read_int(disk / "queue" / "logical_block_size"),
        "physical_block_size": _read_int(disk / "queue" / "physical_block_size"),
        "scheduler": _scheduler(disk),
        "size_bytes": None if size_sectors is None else size_sectors * 512,
        "loop_backing_file": _read(disk / "loop" / "backing_file"),
        "dm_name": _read(disk / "dm" / "name"),
        "slaves": slaves or None,
    }


def _rdev_of(path: str) -> tuple[int, int] | None:
    st = os.stat(path)
    return (os.major(st.st_rdev), os.minor(st.st_rdev)) if stat.S_ISBLK(st.st_mode) else None


def target_info(path: str, mounts: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """Device and filesystem facts for one target path (file, directory or block device)."""
    mounts = read_mounts() if mounts is None else mounts
    info: dict[str, Any] = {
        "path": str(path),
        "real_path": None,
        "exists": False,
        "kind": None,
        "fs_type": None,
        "mount_point": None,
        "mount_source": None,
        "fs_free_bytes": None,
        "fs_total_bytes": None,
        "device": None,
    }
    real = _safe(lambda: Path(os.path.realpath(path)))
    if real is None:
        return info
    info["real_path"] = str(real)
    anchor = _safe(lambda: _existing_ancestor(real))
    st = _safe(lambda: os.stat(anchor)) if anchor else None
    if st is None:
        return info
    info["exists"] = anchor == real
    if not info["exists"]:
        info["kind"] = "missing"
    elif stat.S_ISBLK(st.st_mode):
        info["kind"] = "block"
    elif stat.S_ISDIR(st.st_mode):
        info["kind"] = "directory"
    elif stat.S_ISREG(st.st_mode):
        info["kind"] = "file"
    else:
        info["kind"] = "other"

    if info["kind"] == "block":
        # A raw device: describe it, and the filesystem on it only if it is mounted.
        major, minor = os.major(st.st_rdev), os.minor(st.st_rdev)
        info["device"] = _safe(lambda: block_device_info(major, minor))
        mounted = [m for m in mounts if m["dev"] == f"{major}:{minor}"]
        if mounted:
            m = mounted[-1]
            info.update(fs_type=m["fs_type"], mount_point=m["mount_point"])
            info["mount_source"] = m["source"]
            _fill_statvfs(info, m["mount_point"])
        return info

    mount = mount_for(str(real), mounts)
    if mount:
        info.update(fs_type=mount["fs_type"], mount_point=mount["mount_point"])
        info["mount_source"] = mount["source"]
    _fill_statvfs(info, str(anchor))
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    device = _safe(lambda: block_device_info(major, minor))
    if device is None and mount and mount["source"].startswith("/dev/"):
        # btrfs and others report an anonymous st_dev; the mount source names the device.
        rdev = _safe(lambda: _rdev_of(mount["source"]))
        device = _safe(lambda: block_device_info(*rdev)) if rdev else None
    info["device"] = device
    return info


def _fill_statvfs(info: dict[str, Any], path: str) -> None:
    vfs = _safe(lambda: os.statvfs(path))
    if vfs is not None:
        info["fs_free_bytes"] = vfs.f_bavail * vfs.f_frsize
        info["fs_total_bytes"] = vfs.f_blocks * vfs.f_frsize


def collect(target_paths: list[str]) -> dict[str, Any]:
    """Host facts plus device and filesystem facts of every target; never raises."""
    mounts = _safe(read_mounts) or []
    targets = []
    for path in target_paths:
        info = _safe(lambda p=path: target_info(p, mounts))
        targets.append(info if info is not None else {"path": str(path), "exists": None})
    return {**host_info(), "targets": targets}
