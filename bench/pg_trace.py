"""A PostgreSQL trace for bench/replay.py: pgbench (TPC-B-like) on PostgreSQL on ext4 over a
RAM-backed loop device, its block requests captured from the kernel's block_rq_issue and
block_rq_complete events (what blktrace calls D and C) and written as a tilemark trace.

The server runs in a cgroup v1 memory group of 128 MiB (shared_buffers 16 MiB), so its reads
miss the page cache and reach the device, as on a server whose database outgrows its memory.
Everything it sets up (loop device, mount, cgroup, tracefs instance, server) is torn down
again, also on an error. This is the benchmark's own capture, not `tilemark trace capture`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from tmbench import rmdir_retrying

IMAGE = Path("/dev/shm/tilemark-bench-pg.img")
IMAGE_BYTES = 1 << 30
TRACEFS = Path("/sys/kernel/tracing")
MEMCG = Path("/sys/fs/cgroup/memory")
PG_BIN = Path("/usr/lib/postgresql/15/bin")
SCALE = 20  # pgbench scale: about 300 MB of tables and indexes
CLIENTS = 4


class CaptureError(Exception):
    """The capture cannot be made here; one sentence."""


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        raise CaptureError(f"`{' '.join(cmd)}` failed: {(done.stderr or done.stdout).strip()}")
    return done


def _tool(name: str) -> str:
    path = PG_BIN / name if (PG_BIN / name).exists() else shutil.which(name)
    if not path:
        raise CaptureError(f"{name} is not installed (PostgreSQL 15)")
    return str(path)


def _parse_rwbs(rwbs: str, size: int) -> dict:
    preflush = rwbs.startswith("F")
    rest = rwbs[1:] if preflush else rwbs
    op = {"R": "read", "W": "write", "D": "discard"}.get(rest[:1], "flush")
    if size == 0:
        op = "flush"
    flags = rest[1:]
    return {
        "op": op,
        "fua": op == "write" and flags.startswith("F"),
        "preflush": preflush and op != "flush",
        "sync": "S" in flags,
        "meta": "M" in flags,
    }


def _pid(head: str) -> int | None:
    """The pid of an event line's task field ("postgres-1234")."""
    task = head.split()[0] if head.split() else ""
    number = task.rsplit("-", 1)[-1]
    return int(number) if number.isdigit() else None


def _events(text: str) -> tuple[list[dict], dict[tuple, list[int]]]:
    """Issues in order, and completion times by (sector, sectors) in order."""
    issues, completions = [], {}
    for line in text.splitlines():
        for name in ("block_rq_issue:", "block_rq_complete:"):
            if name in line:
                break
        else:
            continue
        head, body = line.split(name)
        ns = round(float(head.split("]")[-1].split()[-1].rstrip(":")) * 1e9)
        f = body.split()
        if name == "block_rq_issue:":
            # dev rwbs bytes (cmd) sector + nr prio [comm]
            issues.append(
                {"ns": ns, "rwbs": f[1], "bytes": int(f[2]), "sector": int(f[4]),
                 "nr": int(f[6]), "comm": body[body.rindex("[") + 1 : body.rindex("]")],
                 "pid": _pid(head)}
            )  # fmt: skip
        else:
            # dev rwbs (cmd) sector + nr prio [error]
            completions.setdefault((int(f[3]), int(f[5])), []).append(ns)
    return issues, completions


def _rows(issues: list[dict], completions: dict[tuple, list[int]], dev: str) -> dict:
    rows: dict[str, list] = {k: [] for k in (
        "issue_ns", "complete_ns", "latency_ns", "op", "offset", "size", "sync", "fua",
        "preflush", "meta", "pid", "comm", "device")}  # fmt: skip
    pending = {k: list(v) for k, v in completions.items()}
    t0 = issues[0]["ns"]
    for e in issues:
        done = pending.get((e["sector"], e["nr"])) or []
        while done and done[0] < e["ns"]:
            done.pop(0)
        complete = done.pop(0) if done else None
        kind = _parse_rwbs(e["rwbs"], e["bytes"])
        rows["issue_ns"].append(e["ns"] - t0)
        rows["complete_ns"].append(None if complete is None else complete - t0)
        rows["latency_ns"].append(None if complete is None else complete - e["ns"])
        rows["offset"].append(0 if kind["op"] == "flush" else e["sector"] * 512)
        rows["size"].append(0 if kind["op"] == "flush" else e["bytes"])
        for k in ("op", "sync", "fua", "preflush", "meta"):
            rows[k].append(kind[k])
        rows["pid"].append(e["pid"])
        rows["comm"].append(e["comm"])
        rows["device"].append(dev)
    return rows


def capture(out: Path, work: Path, seconds: int) -> Path:
    """Run pgbench for `seconds` and write its block requests to `out` (a tilemark trace)."""
    for name in ("initdb", "pg_ctl", "pgbench"):
        _tool(name)
    for tool in ("losetup", "mkfs.ext4", "runuser"):
        if not shutil.which(tool):
            raise CaptureError(f"{tool} is not installed")
    if not (MEMCG / "memory.limit_in_bytes").exists():
        raise CaptureError("cgroup v1 memory control is not available")
    shutil.rmtree(work, ignore_errors=True)
    mnt, sock = work / "mnt", work / "sock"
    mnt.mkdir(parents=True)
    sock.mkdir()
    os.chmod(work, 0o755)
    shutil.chown(sock, "postgres", "postgres")
    with open(IMAGE, "wb") as f:
        f.truncate(IMAGE_BYTES)
    dev = _run(["losetup", "--find", "--show", "--direct-io=on", str(IMAGE)]).stdout.strip()
    cg = MEMCG / f"tilemark-bench-pg-{os.getpid()}"
    inst = TRACEFS / "instances" / f"tilemark-bench-pg-{os.getpid()}"
    data = mnt / "data"
    pg = ["runuser", "-u", "postgres", "--"]
    started = False
    try:
        _run(["mkfs.ext4", "-q", "-F", dev])
        _run(["mount", dev, str(mnt)])
        data.mkdir()
        shutil.chown(data, "postgres", "postgres")
        _run([*pg, _tool("initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"])
        cg.mkdir()
        (cg / "memory.limit_in_bytes").write_text(str(128 << 20))
        opts = f"-k {sock} -c listen_addresses='' -c shared_buffers=16MB -c fsync=on"
        start = [*pg, _tool("pg_ctl"), "-D", str(data), "-o", opts, "-w", "-l",
                 str(sock / "server.log"), "start"]  # fmt: skip
        _run(["sh", "-c", f'echo $$ > "{cg}/cgroup.procs" && exec "$@"', "sh", *start])
        started = True
        bench = [_tool("pgbench"), "-h", str(sock), "-U", "postgres"]
        _run([*bench, "-i", "-q", "-s", str(SCALE), "postgres"])
        os.sync()  # the load's writes are on the device before tracing starts
        st = os.stat(dev)
        number = (os.major(st.st_rdev) << 20) | os.minor(st.st_rdev)
        inst.mkdir()
        (inst / "trace_clock").write_text("mono")
        (inst / "buffer_size_kb").write_text("65536")
        for event in ("block_rq_issue", "block_rq_complete"):
            (inst / "events" / "block" / event / "filter").write_text(f"dev == {number}")
            (inst / "events" / "block" / event / "enable").write_text("1")
        _run([*bench, "-c", str(CLIENTS), "-j", "2", "-T", str(seconds), "postgres"],
             timeout=seconds + 120)  # fmt: skip
        for event in ("block_rq_issue", "block_rq_complete"):
            (inst / "events" / "block" / event / "enable").write_text("0")
        issues, completions = _events((inst / "trace").read_text())
        if not issues:
            raise CaptureError("pgbench issued no block requests while traced")
        from tilemark.trace.schema import TraceMeta, TraceWriter

        meta = TraceMeta(
            source="capture:bench-pgbench",
            device=dev,
            device_size=IMAGE_BYTES,
            command=["pgbench", "-c", str(CLIENTS), "-T", str(seconds), f"(scale {SCALE})"],
            notes=["bench/pg_trace.py: block_rq_issue/complete of ext4 over a loop device"],
        )
        with TraceWriter(out, meta) as w:
            w.write(_rows(issues, completions, dev))
        return out
    finally:
        if inst.exists():
            rmdir_retrying(inst)
        if started:
            subprocess.run([*pg, _tool("pg_ctl"), "-D", str(data), "-m", "fast", "stop"],
                           capture_output=True)  # fmt: skip
        for _ in range(50):
            if subprocess.run(["umount", str(mnt)], capture_output=True).returncode == 0:
                break
            if not os.path.ismount(mnt):
                break
            time.sleep(0.1)
        subprocess.run(["losetup", "-d", dev], capture_output=True)
        if cg.exists():
            rmdir_retrying(cg)
        IMAGE.unlink(missing_ok=True)
