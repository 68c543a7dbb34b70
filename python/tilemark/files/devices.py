"""The device view beneath a file run: what reached the block device under each file set
(from /proc/diskstats, before and after the run), so a metadata storm shows as what it is on
the device: many small writes and flushes (docs/files.md).

Figures follow iostat -x over the run (telemetry/sampler.py's device_figures), plus flushes
per second (diskstats fields 15-16, Linux 5.5+) and the mean write size. The device is the
one the set's file system sits on (envinfo.device_tree; a loop device is named as itself).
Other IO on the same device (another tenant, the system) is counted too: it is the device's
view, not tilemark's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROC_DISKSTATS = Path("/proc/diskstats")


@dataclass(frozen=True)
class DeviceView:
    name: str
    dev: str  # major:minor
    filesets: tuple[str, ...]
    read_iops: float | None
    write_iops: float | None
    write_mbps: float | None
    write_kib_avg: float | None  # mean size of a completed write request
    w_await_ms: float | None
    flushes_s: float | None  # None: the kernel does not count flushes
    util_pct: float | None


def devices_of(filesets: list[tuple[str, str]]) -> dict[str, tuple[str, list[str]]]:
    """dev -> (device name, set names) for the devices under the sets' directories (none on
    tmpfs)."""
    from tilemark.telemetry import envinfo

    out: dict[str, tuple[str, list[str]]] = {}
    for name, path in filesets:
        tree = envinfo.device_tree(path)
        for node in tree.get("devices") or []:
            out.setdefault(node["dev"], (node["name"], []))[1].append(name)
    return out


def read_stats(devs: set[str]) -> dict[str, tuple[tuple[int, ...], int | None]]:
    """dev -> (the 11 iostat counters, flush requests completed or None)."""
    out: dict[str, tuple[tuple[int, ...], int | None]] = {}
    try:
        text = PROC_DISKSTATS.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        f = line.split()
        dev = f"{f[0]}:{f[1]}" if len(f) >= 14 else ""
        if dev in devs:
            flushes = int(f[18]) if len(f) >= 20 else None
            out[dev] = (tuple(int(v) for v in f[3:14]), flushes)
    return out


def device_views(
    devs: dict[str, tuple[str, list[str]]],
    before: dict[str, tuple[tuple[int, ...], int | None]],
    after: dict[str, tuple[tuple[int, ...], int | None]],
    seconds: float,
) -> tuple[DeviceView, ...]:
    """The devices' figures between two readings `seconds` apart."""
    from tilemark.telemetry.sampler import SECTOR_BYTES, device_figures

    views = []
    for dev, (name, sets) in devs.items():
        if dev not in before or dev not in after or seconds <= 0:
            continue
        (a, fa), (b, fb) = before[dev], after[dev]
        fig = device_figures(a, b, seconds)
        writes = fig["writes"]
        views.append(
            DeviceView(
                name=name,
                dev=dev,
                filesets=tuple(sets),
                read_iops=fig["read_iops"],
                write_iops=fig["write_iops"],
                write_mbps=fig["write_mbps"],
                write_kib_avg=fig["write_sectors"] * SECTOR_BYTES / 1024 / writes
                if writes
                else None,
                w_await_ms=fig["w_await_ms"],
                flushes_s=None if fa is None or fb is None else max(0, fb - fa) / seconds,
                util_pct=fig["util_pct"],
            )
        )
    return tuple(views)
