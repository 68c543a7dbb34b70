"""The repository's paths and the small helpers every benchmark script uses."""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"
WORK = BENCH / "work"  # scratch files, logs and run directories (gitignored)
SCRATCH = WORK / "bench.dat"  # vs_fio.py's scratch file, and the default target of Settings
RESULTS_DIR = BENCH / "results"
TILEMARK_RESULTS = WORK / "results"
LOGS = WORK / "logs"
DEFAULT_FIO = "/usr/bin/fio"
SETTLE_S = 1.0  # after sync(), before every measured run


class SetupError(Exception):
    """The benchmark cannot run (fio or tilemark missing or broken, no target); one sentence."""


def parse_size(text: str) -> int:
    """Bytes from 2g, 512m, 1GiB or a plain number (binary units, like fio and tilemark)."""
    m = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)(i?b?)\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 2g or 512m)")
    return int(m.group(1)) * 1024 ** " kmgt".index(m.group(2).lower() or " ")


def positive_float(text: str) -> float:
    """An argparse type: a number above 0."""
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def run_text(cmd: list[str]) -> str | None:
    """stdout of a quick helper command, stripped, or None if it fails."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip() or None


def read_text(path: Path | str) -> str | None:
    """A file's text, stripped, or None when it is missing, unreadable or empty."""
    try:
        return Path(path).read_text(errors="replace").strip() or None
    except OSError:
        return None


def rel(path: Path) -> str:
    """A path relative to the repo when it is inside it (shorter command lines in reports)."""
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)


def median_or_none(values: list[float | None]) -> float | None:
    """The median of the values that are present, or None when none is."""
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None when either is missing or b is 0."""
    return a / b if a is not None and b else None


def spread(values: list[float | None]) -> dict[str, float] | None:
    """min, median and max of the values that are present (how results report repetitions)."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    return {"min": min(present), "median": statistics.median(present), "max": max(present)}


def settle() -> None:
    """sync(), then SETTLE_S of quiet: writeback of the previous run's files must not land in
    the next run."""
    os.sync()
    time.sleep(SETTLE_S)


def rmdir_retrying(path: Path, tries: int = 50, pause_s: float = 0.1) -> bool:
    """Remove a kernel directory (tracefs instance, cgroup) that stays busy for a moment after
    its last user is gone; True once it is gone."""
    for _ in range(tries):
        try:
            path.rmdir()
            return True
        except OSError:
            time.sleep(pause_s)
    return False


def tracefs_lost_events(instance: Path) -> int:
    """Events a tracefs instance's buffers could not take (overrun or dropped), over every CPU."""
    total = 0
    for stats in (instance / "per_cpu").glob("cpu*/stats"):
        for line in stats.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("overrun", "dropped events"):
                total += int(value.split()[0])
    return total
