"""Run a command; over a window in the middle of its run, report its IOPS and MB/s on a block
device (from /proc/diskstats, not the tool's own figures) and its process tree's CPU per IO,
with each busy thread's share and voluntary context switches (sleeps).

    cd bench && python3 -m placement.window SECONDS DEVICE -- COMMAND...

The window starts 2.5 s after COMMAND does (past start-up and warm-up) and lasts SECONDS. Run as
a module from bench/ (as pinned.sh does), so that the tmbench package beside placement/ imports.
"""

import os
import subprocess
import sys
import time

from tmbench import tree_pids


def sample(root: int) -> dict[tuple[int, int], tuple[str, int, int]]:
    """(pid, tid) -> (name, CPU ns, voluntary context switches) for the whole tree."""
    res = {}
    for pid in tree_pids(root):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except FileNotFoundError:
            continue
        for t in tids:
            try:
                with open(f"/proc/{pid}/task/{t}/stat") as f:
                    st = f.read()
                with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                    cpu_ns = int(f.read().split()[0])
                with open(f"/proc/{pid}/task/{t}/status") as f:
                    vol = int(f.read().split("voluntary_ctxt_switches:")[1].split()[0])
            except (FileNotFoundError, ProcessLookupError):
                continue
            res[(pid, int(t))] = (st[st.index("(") + 1 : st.rindex(")")], cpu_ns, vol)
    return res


def ios(dev: str) -> tuple[int, int]:
    """IOs as the tools issued them (requests completed plus IOs merged into them by the block
    layer: a tool that submits sequential IOs together gets them merged, one that submits them
    one at a time does not), and bytes."""
    with open("/proc/diskstats") as f:
        for line in f:
            x = line.split()
            if x[2] == dev:
                return int(x[3]) + int(x[4]) + int(x[7]) + int(x[8]), (int(x[5]) + int(x[9])) * 512
    raise SystemExit(f"{dev}: not in /proc/diskstats")


def main() -> None:
    secs, dev = float(sys.argv[1]), os.path.basename(sys.argv[2])
    cmd = sys.argv[sys.argv.index("--") + 1 :]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(2.5)
    i0, a, t0 = ios(dev), sample(p.pid), time.monotonic()
    time.sleep(secs)
    b, t1, i1 = sample(p.pid), time.monotonic(), ios(dev)
    p.wait()
    dt = t1 - t0
    busy = []
    for k, (name, ns, vol) in sorted(b.items()):
        if k in a and (ns - a[k][1]) / 1e9 / dt > 0.01:
            share = (ns - a[k][1]) / 1e7 / dt
            busy.append(f"{name} {share:.0f}% ({(vol - a[k][2]) / dt:,.0f} sleeps/s)")
    iops, mbps = (i1[0] - i0[0]) / dt, (i1[1] - i0[1]) / dt / 1e6
    cpu = sum(ns - a[k][1] for k, (_, ns, _) in b.items() if k in a) / 1e9 / dt
    per_io = f"{cpu / iops * 1e6:5.2f} us" if iops else "-- (no IO)"
    head = f"IOPS {iops:9,.0f}  MB/s {mbps:7,.0f}  CPU/IO {per_io}"
    head += f"  tree CPU {cpu * 100:4.0f}%"
    print(head + "  " + ", ".join(busy))


if __name__ == "__main__":
    main()
