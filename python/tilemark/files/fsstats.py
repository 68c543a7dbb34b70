"""The file system's own figures beneath a file run, where Linux exposes them (docs/files.md):
what the file system did for the operations tilemark issued, read before and after the run.

- ext4: `/sys/fs/ext4/DEV/session_write_kbytes`, the bytes the file system wrote to its device
  (data, metadata and journal): beside the bytes the streams appended, the write amplification
  of a metadata-heavy workload.
- xfs: `/sys/fs/xfs/DEV/stats/stats` (per file system): transactions, log writes and the bytes
  they carried, directory operations (lookup, create, remove, getdents), inode lookups.
- btrfs: `/sys/fs/btrfs/FSID/commit_stats`: transaction commits and the longest commit.
- NFS: `/proc/self/mountstats`, the client's per-operation statistics for the mount: calls per
  second, mean round trip and execution time per operation (what a NAS answered).

Other file systems (tmpfs has no device and no statistics) show none. The figures are the
file system's, so another process using it is counted too, as in the device view.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

MOUNTSTATS = Path("/proc/self/mountstats")
SYS_FS = Path("/sys/fs")
SYS_DEV_BLOCK = Path("/sys/dev/block")

# xfs stats lines and the counters kept of each (fs/xfs/xfs_stats.c's field order).
_XFS_FIELDS = {
    "dir": ("dir_lookup", "dir_create", "dir_remove", "dir_getdents"),
    "trans": ("trans_sync", "trans_async", "trans_empty"),
    "ig": ("inode_get",),
    "log": ("log_writes", "log_blocks"),
    "xpc": ("xstrat_bytes", "write_bytes", "read_bytes"),
}


@dataclass(frozen=True)
class Counters:
    """A file system's counters at one moment: name -> count (ext4, xfs, btrfs), and an NFS
    mount's per-operation counters (op -> ops, transmissions, timeouts, bytes sent, bytes
    received, queue ms, rtt ms, execute ms)."""

    counts: dict[str, int] = field(default_factory=dict)
    nfs_ops: dict[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class FsFigure:
    name: str  # e.g. "log writes/s", "written MiB", "READ mean rtt ms"
    value: float


@dataclass(frozen=True)
class FsView:
    mount: str  # the mount point the sets live under
    fstype: str
    source: str  # the device or export
    filesets: tuple[str, ...]
    figures: tuple[FsFigure, ...]
    written_bytes: int | None = None  # ext4: bytes the file system wrote to its device


@dataclass(frozen=True)
class Mount:
    point: str
    fstype: str
    source: str
    dev: str  # major:minor of the superblock


def mounts_of(filesets: list[tuple[str, str]]) -> dict[str, tuple[Mount, list[str]]]:
    """mount point -> (its mount, the set names on it): each set's mount as envinfo finds a
    target's (the longest mount point above its real path)."""
    from tilemark.telemetry import envinfo

    mounts = envinfo.read_mounts()
    out: dict[str, tuple[Mount, list[str]]] = {}
    for name, path in filesets:
        m = envinfo.mount_for(os.path.realpath(path), mounts)
        if m is not None:
            mount = Mount(m["mount_point"], m["fs_type"], m["source"], m["dev"])
            out.setdefault(mount.point, (mount, []))[1].append(name)
    return out


def _block_name(dev: str) -> str | None:
    """The kernel's name of block device major:minor (sysfs), as /sys/fs/ext4 and xfs use."""
    try:
        return Path(os.path.realpath(SYS_DEV_BLOCK / dev)).name
    except OSError:
        return None


def parse_xfs_stats(text: str) -> dict[str, int]:
    """The kept xfs counters of a stats file (see _XFS_FIELDS)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        f = line.split()
        names = _XFS_FIELDS.get(f[0]) if f else None
        if names:
            for name, value in zip(names, f[1:], strict=False):
                out[name] = int(value)
    return out


def parse_btrfs_commits(text: str) -> dict[str, int]:
    """commit_stats: commits, last_commit_ms, max_commit_ms, total_commit_ms."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) == 2 and f[1].isdigit():
            out[f[0]] = int(f[1])
    return out


def parse_nfs_ops(text: str, mount_point: str) -> dict[str, tuple[int, ...]]:
    """The per-op statistics of the NFS mount at `mount_point` in /proc/self/mountstats:
    op -> (ops, transmissions, timeouts, bytes sent, bytes received, queue ms, rtt ms,
    execute ms)."""
    out: dict[str, tuple[int, ...]] = {}
    mine = in_ops = False
    for line in text.splitlines():
        if line.startswith("device "):
            f = line.split()
            mine = len(f) >= 5 and f[3] == "on" and f[4] == mount_point
            in_ops = False
            continue
        if not mine:
            continue
        s = line.strip()
        if s == "per-op statistics":
            in_ops = True
        elif in_ops and ":" in s:
            op, _, rest = s.partition(":")
            values = rest.split()
            if len(values) >= 8 and all(v.isdigit() for v in values[:8]):
                out[op] = tuple(int(v) for v in values[:8])
    return out


def read_counters(m: Mount) -> Counters | None:
    """The file system's counters now (None where it keeps none tilemark reads)."""
    try:
        if m.fstype == "ext4":
            name = _block_name(m.dev)
            kb = (SYS_FS / "ext4" / str(name) / "session_write_kbytes").read_text()
            return Counters({"written_kib": int(kb.strip())})
        if m.fstype == "xfs":
            name = _block_name(m.dev)
            return Counters(
                parse_xfs_stats((SYS_FS / "xfs" / str(name) / "stats/stats").read_text())
            )
        if m.fstype == "btrfs":
            name = _block_name(m.dev)
            for fsid in (SYS_FS / "btrfs").iterdir():
                if (fsid / "devices" / str(name)).exists() and (fsid / "commit_stats").exists():
                    return Counters(parse_btrfs_commits((fsid / "commit_stats").read_text()))
            return None
        if m.fstype in ("nfs", "nfs4"):
            return Counters(nfs_ops=parse_nfs_ops(MOUNTSTATS.read_text(), m.point))
    except (OSError, ValueError, StopIteration):
        return None
    return None


def read_all(mounts: dict[str, tuple[Mount, list[str]]]) -> dict[str, Counters | None]:
    return {point: read_counters(m) for point, (m, _sets) in mounts.items()}


def fs_views(
    mounts: dict[str, tuple[Mount, list[str]]],
    before: dict[str, Counters | None],
    after: dict[str, Counters | None],
    seconds: float,
) -> tuple[FsView, ...]:
    """The file systems' figures between two readings `seconds` apart."""
    views = []
    for point, (m, sets) in mounts.items():
        a, b = before.get(point), after.get(point)
        if not a or not b or seconds <= 0:
            continue
        figures, written = _figures(m.fstype, a, b, seconds)
        if figures:
            views.append(FsView(point, m.fstype, m.source, tuple(sets), figures, written))
    return tuple(views)


def _figures(
    fstype: str, a: Counters, b: Counters, seconds: float
) -> tuple[tuple[FsFigure, ...], int | None]:
    def delta(key: str) -> int:
        return max(0, b.counts.get(key, 0) - a.counts.get(key, 0))

    if fstype == "ext4":
        written = delta("written_kib") * 1024
        return (
            FsFigure("written MiB", written / 2**20),
            FsFigure("written MB/s", written / 1e6 / seconds),
        ), written
    if fstype == "xfs":
        trans = delta("trans_sync") + delta("trans_async") + delta("trans_empty")
        return (
            FsFigure("transactions/s", trans / seconds),
            FsFigure("log writes/s", delta("log_writes") / seconds),
            FsFigure("log MB/s", delta("log_blocks") * 512 / 1e6 / seconds),
            FsFigure("dir lookups/s", delta("dir_lookup") / seconds),
            FsFigure("dir creates/s", delta("dir_create") / seconds),
            FsFigure("dir removes/s", delta("dir_remove") / seconds),
            FsFigure("inode gets/s", delta("inode_get") / seconds),
        ), None
    if fstype == "btrfs":
        figures = [FsFigure("commits/s", delta("commits") / seconds)]
        if b.counts.get("max_commit_ms"):
            figures.append(FsFigure("max commit ms (since mount)", b.counts["max_commit_ms"]))
        return tuple(figures), None
    if fstype in ("nfs", "nfs4"):
        ops_a, ops_b = a.nfs_ops, b.nfs_ops
        figures = []
        moved = []
        for op, vb in ops_b.items():
            va = ops_a.get(op, (0,) * 8)
            d = [max(0, x - y) for x, y in zip(vb, va, strict=True)]
            if d[0]:
                moved.append((d[0], op, d))
        for n, op, d in sorted(moved, reverse=True)[:8]:  # the busiest operations
            figures.append(FsFigure(f"{op} calls/s", n / seconds))
            figures.append(FsFigure(f"{op} mean rtt ms", d[6] / n))
            figures.append(FsFigure(f"{op} mean execute ms", d[7] / n))
        return tuple(figures), None
    return (), None
