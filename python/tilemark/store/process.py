"""Which process writes a run, and whether it still exists: tells a run in progress from one
whose process was killed (SIGKILL, OOM killer, power loss) and left run.json at "running".

A process is identified by host, boot id, pid and start time: a pid alone is reused after the
process ends, and after a reboot every pid means something else.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str | None:
    """This boot's random id (changes at every boot), or None where /proc does not have it."""
    try:
        return BOOT_ID.read_text().strip() or None
    except OSError:
        return None


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks since boot) of process `pid` from /proc/PID/stat."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        return fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None


def start_ticks(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot (/proc/PID/stat field 22)."""
    stat = _stat(pid)
    return None if stat is None else stat[1]


def current() -> dict[str, Any]:
    """run.json's `process` record of this process."""
    pid = os.getpid()
    return {
        "host": socket.gethostname(),
        "boot_id": boot_id(),
        "pid": pid,
        "start_ticks": start_ticks(pid),
    }


def gone_reason(record: dict[str, Any] | None) -> str | None:
    """Why the process of `record` no longer exists, or None when it may still be running
    (it is alive, or it ran on another host, which cannot be checked from here)."""
    if not isinstance(record, dict):
        return None
    host = record.get("host")
    if host and host != socket.gethostname():
        return None
    pid = record.get("pid")
    recorded_boot = record.get("boot_id")
    now_boot = boot_id()
    if recorded_boot and now_boot and recorded_boot != now_boot:
        return f"process {pid} ran before the host was restarted (boot id {recorded_boot[:8]})"
    if not isinstance(pid, int) or isinstance(pid, bool):
        return None
    stat = _stat(pid)
    # A zombie has ended; only its parent has not collected its exit status yet.
    if stat is None or stat[0] in ("Z", "X"):
        return f"process {pid} no longer exists"
    recorded_ticks = record.get("start_ticks")
    if recorded_ticks is not None and stat[1] != recorded_ticks:
        return f"process {pid} no longer exists (the pid now belongs to another process)"
    return None
