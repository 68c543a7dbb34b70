"""The machine notes every result carries: CPU, memory, kernel, tool versions, the facts that
decide where threads and a device's worker run, and the block device and filesystem under the
target. A figure without them cannot be compared with another machine's, or explained."""

from __future__ import annotations

import os
import platform
import re
import socket
import stat
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tmbench.common import BENCH, SCRATCH, WORK, read_text, run_text
from tmbench.proc import CLK_TCK

if TYPE_CHECKING:
    from tmbench.tools import Settings

# Kernel command-line parameters that change where the scheduler runs a woken thread or how an
# idle CPU sleeps: on a small VM these decide low-queue-depth results more than either engine.
SCHED_PARAMS = re.compile(r"sched|idle|haltpoll|isolcpus|nohz|irqaffinity|rcu_nocbs|preempt")
# Wake-up placement code that mainline Linux does not have, by its symbol names. The
# development VM's kernel packs woken tasks onto busy vCPUs (`sched_vcpu_pack=`,
# `vcpu_pack_room` next to `select_idle_core`): bench/README.md, "Which kernel decides QD1".
NON_MAINLINE_PLACEMENT = re.compile(r"\s((?!__pfx_)\w*vcpu_pack\w*)$")


def loop_notes(dev_name: str) -> dict[str, Any] | None:
    """Backing file and direct-IO flag of a loop device, None when dev_name is not one."""
    loop = Path(f"/sys/block/{dev_name}/loop")
    if not loop.is_dir():
        return None
    backing = read_text(loop / "backing_file")

    def findmnt(columns: str) -> str | None:
        # With mounts stacked on one mount point, findmnt lists all; the last one is in effect.
        out = run_text(["findmnt", "-n", "-o", columns, "-T", backing]) if backing else None
        return out.splitlines()[-1] if out else None

    return {
        "backing_file": backing,
        "dio": read_text(loop / "dio"),
        "backing_filesystem": findmnt("TARGET,SOURCE,FSTYPE,OPTIONS"),
        "backing_fstype": findmnt("FSTYPE"),
    }


def block_device(path: Path) -> dict[str, Any]:
    """Disk, model (or driver) and IO scheduler behind the filesystem holding path, or of the
    block device path itself."""
    st = path.stat()
    dev = st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev
    node = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    notes: dict[str, Any] = {"dev": f"{os.major(dev)}:{os.minor(dev)}"}
    if not node.exists():
        notes["disk"] = None  # tmpfs, overlay, nbd-fuse ...: no block device
        return notes
    node = node.resolve()
    disk = node.parent if (node / "partition").exists() else node
    notes["disk"] = disk.name
    notes["partition"] = node.name if disk != node else None
    model = read_text(disk / "device" / "model")
    driver = None
    try:
        if (disk / "device" / "driver").exists():  # virtual devices (loop) have none
            driver = (disk / "device" / "driver").resolve().name
    except OSError:
        pass
    if model is None and ((driver or "").startswith("virtio") or disk.name.startswith("vd")):
        model = "virtio"
    notes["model"] = model
    notes["driver"] = driver
    sched = read_text(disk / "queue" / "scheduler") or ""
    chosen = re.search(r"\[(\S+)\]", sched)
    notes["scheduler"] = chosen.group(1) if chosen else (sched or None)
    notes["rotational"] = read_text(disk / "queue" / "rotational")
    notes["nr_requests"] = read_text(disk / "queue" / "nr_requests")
    loop = loop_notes(disk.name)
    if loop is not None:
        notes["loop"] = loop
    return notes


def target_note(s: Settings, target: dict[str, Any] | None) -> str | None:
    """One line on what the tools ran against, for --device and --ramdisk runs."""
    if target is None:
        return None
    ram = target.get("ramdisk")
    if ram:
        return (
            f"loop device {ram['device']} (losetup --direct-io=on, dio={ram.get('dio')}) over "
            f"{ram['image']}, {ram['image_bytes'] / 2**30:g} GiB of random data in "
            f"{ram.get('backing_fstype')} (RAM, not a disk); measures the engines, not storage"
        )
    return f"block device {s.target} ({target['device_bytes'] / 2**30:g} GiB), read-only cases"


def scheduler_notes() -> dict[str, Any]:
    """What decides where threads and the device's worker run: the facts a placement-sensitive
    result (QD1 on a loop device, bench/README.md) needs beside it."""
    cmdline = (read_text("/proc/cmdline") or "").split(" -- ")[0].split()
    symbols: set[str] = set()
    try:  # root reads the names; nothing here needs the addresses
        with open("/proc/kallsyms") as f:
            for line in f:
                if "vcpu_pack" in line and (m := NON_MAINLINE_PLACEMENT.search(line.rstrip())):
                    symbols.add(m.group(1))
    except OSError:
        pass
    cpuidle = Path("/sys/devices/system/cpu/cpuidle")
    return {
        "kernel_params": [p for p in cmdline if SCHED_PARAMS.search(p.split("=")[0])],
        "cpuidle_driver": read_text(cpuidle / "current_driver"),
        "cpuidle_governor": read_text(cpuidle / "current_governor"),
        "autogroup": read_text("/proc/sys/kernel/sched_autogroup_enabled"),
        "non_mainline_placement": sorted(symbols),
    }


def machine_notes(s: Settings, target: dict[str, Any] | None = None) -> dict[str, Any]:
    """The notes of this machine, the tools `s` names and what they run against: `target` (a
    device or RAM disk, as --device/--ramdisk describe it) or else the scratch file's disk."""
    cpuinfo = read_text("/proc/cpuinfo") or ""
    models = [
        ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines() if ln.startswith("model name")
    ]
    model = models[0] if models else platform.processor() or None
    meminfo = read_text("/proc/meminfo") or ""
    mem = re.search(r"MemTotal:\s+(\d+) kB", meminfo)
    os_name = re.search(r'PRETTY_NAME="?([^"\n]*)', read_text("/etc/os-release") or "")
    if target is None:
        findmnt = run_text(
            ["findmnt", "-n", "-o", "TARGET,SOURCE,FSTYPE,OPTIONS", "-T", str(SCRATCH)]
        )
    else:  # a device has no filesystem under the benchmark; a loop device's backing file does
        loop = loop_notes(Path(os.path.realpath(s.target)).name) or {}
        findmnt = loop.get("backing_filesystem")
    tm_version = run_text([s.tilemark, "--version"])
    if tm_version is None:
        python = Path(s.tilemark).parent / "python"
        tm_version = run_text(
            [
                str(python if python.exists() else sys.executable),
                "-c",
                "import tilemark; print(tilemark.__version__)",
            ]
        )
    return {
        "date": datetime.now().astimezone().isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "cpu_model": model,
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "virtualized": " hypervisor" in cpuinfo,
        "memory_gib": round(int(mem.group(1)) / 2**20, 1) if mem else None,
        "kernel": platform.release(),
        "os": os_name.group(1) if os_name else None,
        "fio_version": run_text([s.fio, "--version"]),
        "tilemark_version": tm_version,
        "python": platform.python_version(),
        "filesystem": findmnt,
        "block_device": block_device(
            Path(s.target) if target else next(p for p in (SCRATCH, WORK, BENCH) if p.exists())
        ),
        "clk_tck": CLK_TCK,
        "scheduler": scheduler_notes(),
    } | ({"target": target_note(s, target)} if target else {})
