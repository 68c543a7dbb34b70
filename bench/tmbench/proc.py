"""Child processes and what they cost: the process tree's CPU sampled while a child runs, the
CPU of a window inside its measurement phase, and the load the machine was under."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tmbench.common import LOGS, REPO, read_text

CLK_TCK = os.sysconf("SC_CLK_TCK")
SAMPLE_INTERVAL_S = 0.1
WINDOW_MARGIN_S = 0.5  # the CPU window starts this long after the measurement phase, ends before


def tree_pids(pid: int) -> list[int]:
    """pid and all its live descendants (fio runs each job in a forked process)."""
    pids, i = [pid], 0
    while i < len(pids):
        tasks = Path(f"/proc/{pids[i]}/task")
        i += 1
        try:
            for task in tasks.iterdir():
                children = read_text(task / "children")
                if children:
                    pids.extend(int(c) for c in children.split())
        except OSError:
            continue
    return pids


def stat_ticks(pid: int) -> int | None:
    """utime+stime (fields 14, 15) plus waited-for children's cutime+cstime (16, 17)."""
    text = read_text(f"/proc/{pid}/stat")
    if text is None:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # fields[0] is field 3 (state)
    return sum(int(fields[n - 3]) for n in (14, 15, 16, 17))


def tree_cpu_ticks(pid: int) -> int | None:
    """CPU clock ticks of pid's whole process tree, None when none of it is left."""
    total = None
    for p in tree_pids(pid):
        ticks = stat_ticks(p)
        if ticks is not None:
            total = (total or 0) + ticks
    return total


@dataclass
class ChildRun:
    """A child process run to its end: exit code, times, CPU samples and output."""

    cmd: list[str]
    exit_code: int
    wall_s: float
    rusage_cpu_s: float
    samples: list[tuple[float, int]]  # (CLOCK_REALTIME seconds, CPU ticks of the tree)
    stdout: str
    stderr: str


def run_child(cmd: list[str], log_stem: str) -> ChildRun:
    """Run cmd to completion, sampling its process tree's CPU; rusage from wait4. Its stdout
    and stderr are kept in bench/work/logs/<log_stem>.out and .err."""
    LOGS.mkdir(parents=True, exist_ok=True)
    out_path, err_path = LOGS / f"{log_stem}.out", LOGS / f"{log_stem}.err"
    samples: list[tuple[float, int]] = []
    started = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=REPO)
        try:
            while True:
                pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                now = time.time()
                ticks = tree_cpu_ticks(proc.pid)
                if ticks is not None:
                    samples.append((now, ticks))
                time.sleep(SAMPLE_INTERVAL_S)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    proc.returncode = os.waitstatus_to_exitcode(status)
    return ChildRun(
        cmd=cmd,
        exit_code=proc.returncode,
        wall_s=time.monotonic() - started,
        rusage_cpu_s=rusage.ru_utime + rusage.ru_stime,
        samples=samples,
        stdout=out_path.read_text(errors="replace"),
        stderr=err_path.read_text(errors="replace"),
    )


def psi_some(kind: str) -> dict[str, float]:
    """The "some" line of /proc/pressure/<kind> (cpu, io, memory): avg10, avg60, avg300 (%) and
    total (us); empty when the kernel has no pressure stall information."""
    for line in (read_text(f"/proc/pressure/{kind}") or "").splitlines():
        if line.startswith("some"):
            return {k: float(v) for k, v in (part.split("=") for part in line.split()[1:])}
    return {}


def load_now() -> dict[str, Any]:
    """Load average and pressure stall information (PSI, "some" avg10 %) at this moment: on a
    shared machine a surprising run is first explained by what else was running."""
    return {
        "loadavg": (read_text("/proc/loadavg") or "").split()[:3],
        "cpu_some_avg10": psi_some("cpu").get("avg10"),
        "io_some_avg10": psi_some("io").get("avg10"),
    }


def window_cpu(
    samples: list[tuple[float, int]], measure_start: float | None, measure_end: float | None
) -> dict[str, Any] | None:
    """CPU seconds and wall seconds between the samples bracketing the inner window."""
    if measure_start is None or measure_end is None:
        return None
    lo, hi = measure_start + WINDOW_MARGIN_S, measure_end - WINDOW_MARGIN_S
    inside = [s for s in samples if lo <= s[0] <= hi]
    if len(inside) < 2:
        return None
    (t0, c0), (t1, c1) = inside[0], inside[-1]
    return {
        "t_start": t0,
        "t_end": t1,
        "seconds": t1 - t0,
        "cpu_ticks": c1 - c0,
        "cpu_s": (c1 - c0) / CLK_TCK,
        "measure_start": measure_start,
        "measure_end": measure_end,
    }


def cpu_us_per_io(window: dict[str, Any] | None, iops: float | None) -> float | None:
    """Microseconds of CPU per IO over a window_cpu() window, at the run's IOPS."""
    if not window or not iops or window["seconds"] <= 0:
        return None
    return window["cpu_s"] / (iops * window["seconds"]) * 1e6
