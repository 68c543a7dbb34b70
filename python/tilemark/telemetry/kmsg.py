"""The kernel's own messages about a run's devices (/dev/kmsg).

When storage fails a run, the kernel usually says more than an errno: which sector of which
device failed and how (`I/O error, dev loop1, sector 8 op 0x0:(READ)`), a filesystem that
remounted read-only, a page cache that a direct write could not invalidate (which makes the
file's next fsync fail with EIO). A run keeps the messages logged while it ran that name one
of its devices (by name, or by the `DEVICE=bMAJ:MIN` the kernel attaches to a record) or
one of its target files, so the run's error can quote the kernel and run.json keeps what it
said. The log is the machine's: other devices' messages are never taken.

Reading /dev/kmsg needs CAP_SYSLOG where kernel.dmesg_restrict is set; without it a run says
once that kernel messages are unavailable and goes on.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

KMSG = "/dev/kmsg"
KEEP = 20  # messages kept per run; the count says how many there were
MAX_RECORDS = 100_000  # records read after a run at most (a kernel log flooding meanwhile)


@dataclass(frozen=True)
class Record:
    """One kernel log record: its time since boot, level (0 emergency .. 7 debug), message
    (first line) and the device it names in its dictionary (`bMAJ:MIN`), if any."""

    t_s: float
    level: int
    message: str
    device: str | None = None


def parse(raw: str) -> Record | None:
    """A /dev/kmsg record: `PRIO,SEQ,USEC,FLAGS[,...];MESSAGE` then ` KEY=VALUE` lines."""
    head, sep, rest = raw.partition(";")
    fields = head.split(",")
    if not sep or len(fields) < 3:
        return None
    try:
        prio, usec = int(fields[0]), int(fields[2])
    except ValueError:
        return None
    lines = rest.rstrip("\n").split("\n")
    device = None
    for line in lines[1:]:
        key, _, value = line.strip().partition("=")
        if key == "DEVICE" and value.startswith("b"):
            device = value[1:]
    return Record(usec / 1e6, prio & 7, lines[0], device)


class KernelLog:
    """Messages logged from start() to read() that name `names` (block devices: loop1,
    nvme0n1), `devs` (their MAJ:MIN) or `paths` (target files)."""

    def __init__(self, names: Iterable[str], devs: Iterable[str], paths: Iterable[str]):
        words = sorted({n for n in names if n}, key=len, reverse=True)
        pattern = r"\b(" + "|".join(map(re.escape, words)) + r")\b"
        self._names = re.compile(pattern) if words else None
        self._devs = {d for d in devs if d}
        self._paths = [p for p in paths if p]
        self._fd: int | None = None
        self.note: str | None = None

    def start(self, path: str = KMSG) -> None:
        try:
            self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            os.lseek(self._fd, 0, os.SEEK_END)  # only what comes from now on
        except OSError as e:
            self.close()
            self.note = f"kernel messages unavailable: {path}: {e.strerror or e}"

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:  # a run that failed before its telemetry stopped
        self.close()

    def matches(self, r: Record) -> bool:
        if r.device is not None and r.device in self._devs:
            return True
        if self._names is not None and self._names.search(r.message):
            return True
        return any(p in r.message for p in self._paths)

    def read(self) -> list[Record]:
        """The records about the run's devices logged since start(); closes the log."""
        if self._fd is None:
            return []
        out: list[Record] = []
        before: Record | None = None  # the record before, not taken
        try:
            for _ in range(MAX_RECORDS):
                try:
                    raw = os.read(self._fd, 8192)
                except OSError as e:
                    if e.errno == errno.EPIPE:
                        continue  # records overwritten before they were read: go on
                    if e.errno == errno.EAGAIN:
                        break
                    raise
                if not raw:
                    break
                r = parse(raw.decode("utf-8", "replace"))
                if r is None:
                    continue
                if self.matches(r):
                    # a message whose first line does not say where (a direct write that
                    # found stale page cache: "Page cache invalidation failure on direct
                    # I/O", then "File: PATH PID: ...") is taken with the line after it
                    if before is not None and r.message.startswith("File: "):
                        out.append(before)
                    out.append(r)
                    before = None
                else:
                    before = r
        except OSError as e:
            self.note = f"kernel messages could not be read: {e.strerror or e}"
        finally:
            self.close()
        return out


def summary(records: list[Record]) -> dict[str, object] | None:
    """What run.json keeps: how many, and the first KEEP."""
    if not records:
        return None
    return {
        "count": len(records),
        "messages": [
            {"t_s": round(r.t_s, 6), "level": r.level, "message": r.message} for r in records[:KEEP]
        ],
    }
