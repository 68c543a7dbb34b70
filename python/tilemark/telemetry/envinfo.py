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


def sysfs_node(major: int, minor: int) -> Path | None:
    """The sysfs directory of a block device number (a disk's, or a partition's inside its
    disk's), or None when sysfs does not know it."""
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
    node = sysfs_node(major, minor)
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


# ---------------------------------------------------------------------------------------------
# The block devices that serve a target (telemetry samples their /proc/diskstats)

# Filesystems that have no block device of their own: what to say instead of a device.
NO_BLOCK_DEVICE = {
    "tmpfs": "tmpfs keeps its data in memory",
    "ramfs": "ramfs keeps its data in memory",
    "overlay": "overlay stacks other filesystems",
    "nfs": "a network filesystem",
    "nfs4": "a network filesystem",
    "cifs": "a network filesystem",
    "fuse": "a FUSE filesystem",
}
# Loop devices over files on loop devices...: deeper than this is a cycle or absurd.
MAX_DEPTH = 8


def _kind(node: Path) -> str:
    if (node / "partition").exists():
        return "partition"
    if (node / "loop").is_dir() or node.name.startswith("loop"):
        return "loop"
    if (node / "dm").is_dir():
        return "dm"
    if (node / "md").is_dir():
        return "md"
    return "disk"


def _dev_text(node: Path) -> str | None:
    return _read(node / "dev")


def _device_node(node: Path, depth: int, seen: set[str], mounts: list[dict[str, str]]) -> dict:
    """One block device and, recursively, what serves it."""
    kind = _kind(node)
    out: dict[str, Any] = {"name": node.name, "dev": _dev_text(node), "kind": kind}
    if kind == "dm":
        out["dm_name"] = _read(node / "dm" / "name")
    out["children"] = []
    if out["dev"] in seen or depth >= MAX_DEPTH:
        out["note"] = "already listed above" if out["dev"] in seen else "nested too deep"
        return out
    seen.add(out["dev"] or node.name)
    children: list[dict] = out["children"]
    if kind == "partition":
        children.append(_device_node(node.parent, depth + 1, seen, mounts))
        return out
    slaves = node / "slaves"
    if slaves.is_dir():
        # Each entry links to the slave's own directory (a partition's inside its disk's).
        for name in sorted(os.listdir(slaves)):
            child = slaves / name
            if child.exists():
                children.append(_device_node(child.resolve(), depth + 1, seen, mounts))
    if kind == "loop":
        backing = _read(node / "loop" / "backing_file")
        out["backing_file"] = backing
        if backing is not None:
            # "(deleted)" marks a backing file unlinked after the loop device was set up.
            path = backing.removesuffix(" (deleted)")
            below = _file_devices(path, depth + 1, seen, mounts)
            out["backing"] = {k: v for k, v in below.items() if k != "devices"}
            children.extend(below["devices"])
    return out


def _file_devices(
    path: str, depth: int, seen: set[str], mounts: list[dict[str, str]]
) -> dict[str, Any]:
    """The filesystem holding a file and the block devices under it."""
    out: dict[str, Any] = {"fs_type": None, "mount_point": None, "devices": [], "note": None}
    real = os.path.realpath(path)
    anchor = _existing_ancestor(Path(real))
    if anchor is None:
        out["note"] = f"{path} does not exist"
        return out
    mount = mount_for(str(real), mounts)
    if mount:
        out.update(fs_type=mount["fs_type"], mount_point=mount["mount_point"])
    st = os.stat(anchor)
    node = sysfs_node(os.major(st.st_dev), os.minor(st.st_dev))
    if node is None and mount and mount["source"].startswith("/dev/"):
        # btrfs reports an anonymous st_dev; its mount source names the device.
        rdev = _safe(lambda: _rdev_of(mount["source"]))
        node = sysfs_node(*rdev) if rdev else None
    if node is not None:
        out["devices"].append(_device_node(node, depth, seen, mounts))
        return out
    fs = out["fs_type"] or "unknown"
    why = NO_BLOCK_DEVICE.get(fs.split(".")[0])
    if why is not None:
        out["note"] = f"no block device: {path} is on {fs} ({why})"
    else:
        out["note"] = (
            f"no block device found in sysfs for {path} (filesystem {fs}, "
            f"device {os.major(st.st_dev)}:{os.minor(st.st_dev)})"
        )
    return out


def block_tree(
    major: int, minor: int, mounts: list[dict[str, str]] | None = None
) -> dict[str, Any] | None:
    """The tree of one block device number (see device_tree), or None if sysfs lacks it."""
    node = sysfs_node(major, minor)
    if node is None:
        return None
    return _device_node(node, 0, set(), read_mounts() if mounts is None else mounts)


def device_tree(path: str, mounts: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """The block devices that really serve a target, as a tree.

    A file goes to its filesystem's device; a partition to its whole disk; device-mapper and
    md devices to their slaves; a loop device to the filesystem device of its backing file,
    recursively. Each node: name, dev ("major:minor"), kind (disk, partition, loop, dm, md),
    children; loops add backing_file and backing (fs_type, mount_point, note). `note` says
    why there is no device (tmpfs, a device missing in sysfs). Never raises.
    """
    mounts = read_mounts() if mounts is None else mounts
    out: dict[str, Any] = {"path": str(path), "devices": [], "note": None}
    try:
        real = os.path.realpath(path)
        st = os.stat(real) if os.path.exists(real) else None
        if st is not None and stat.S_ISBLK(st.st_mode):
            out["kind"] = "block"
            node = block_tree(os.major(st.st_rdev), os.minor(st.st_rdev), mounts)
            if node is None:
                out["note"] = (
                    f"{path} (device {os.major(st.st_rdev)}:{os.minor(st.st_rdev)}) is not in sysfs"
                )
            else:
                out["devices"].append(node)
            return out
        out["kind"] = "file"
        below = _file_devices(real, 0, set(), mounts)
    except Exception as e:  # provenance is best effort: say why, never fail the run
        out["note"] = f"the devices under {path} could not be resolved: {e}"
        return out
    out.update(fs_type=below["fs_type"], mount_point=below["mount_point"], note=below["note"])
    out["devices"] = below["devices"]
    return out


def flat_devices(tree: dict[str, Any]) -> list[dict[str, Any]]:
    """The devices of a tree once each, depth first: name, dev, kind, depth (0 = the device
    that serves the target directly)."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()

    def walk(nodes: list[dict], depth: int) -> None:
        for n in nodes:
            if n.get("dev") and n["dev"] not in seen:
                seen.add(n["dev"])
                out.append({"name": n["name"], "dev": n["dev"], "kind": n["kind"], "depth": depth})
            walk(n.get("children") or [], depth + 1)

    walk(tree.get("devices") or [], 0)
    return out
