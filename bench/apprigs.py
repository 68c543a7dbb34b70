"""Rigs for real applications: a device of known capacity, a filesystem on it, a memory cgroup,
PostgreSQL, RocksDB's db_bench and SQLite, each started and removed again.

Used by bench/fidelity.py, bench/pg_capacity.py and tests/e2e/test_learn_*.py. No pytest
here: a missing tool is `Unavailable(reason)`, which the tests turn into a skip and the benches
into a line in their report.

The device: nbdkit's memory plugin behind its `delay` filter (every read and write takes the
given time) and, for a known capacity, the `noparallel` filter (one request at a time), exposed
as a file by nbdfuse, under a loop device, under ext4. The limit sits below the filesystem, so
buffered writeback (the kernel's flusher threads, which a cgroup v1 blkio throttle does not
hold back) meets it as the application's own IO does; `measure_capacity` checks that it holds.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PG_BIN = Path("/usr/lib/postgresql/15/bin")
MEMCG = Path("/sys/fs/cgroup/memory")


class Unavailable(RuntimeError):
    """A tool or a kernel feature the rig needs is missing; the message says which."""


def need(*tools: str) -> None:
    for tool in tools:
        if not (shutil.which(tool) or Path(tool).exists()):
            raise Unavailable(f"{tool} is not installed (scripts/system-deps.sh installs it)")


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


@dataclass
class Device:
    """A loop device over a delayed nbdkit memory disk."""

    loop: str
    nbd_file: Path
    rdelay_ms: float
    wdelay_ms: float
    serial: bool

    @property
    def dev_id(self) -> str:
        st = os.stat(self.loop)
        return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


@contextlib.contextmanager
def delayed_device(
    workdir: Path, size: str, *, rdelay_ms: float, wdelay_ms: float, serial: bool = False
) -> Iterator[Device]:
    """nbdkit memory SIZE behind delay (and noparallel when `serial`) as a loop device."""
    need("nbdkit", "nbdfuse", "fusermount3", "losetup")
    for d in (rdelay_ms, wdelay_ms):
        if d != int(d):
            # nbdkit's delay filter takes whole milliseconds (NNms); "0.5ms" parses as no delay
            raise ValueError(f"delays are whole milliseconds for nbdkit's delay filter, got {d}")
    if os.geteuid() != 0:
        raise Unavailable("needs root (loop devices, mounts, cgroups)")
    if not Path("/dev/fuse").exists():
        raise Unavailable("/dev/fuse is not available")
    mnt = workdir / "nbd"
    mnt.mkdir(parents=True)
    filters = ["--filter=delay"] + (["--filter=noparallel"] if serial else [])
    args = [f"rdelay={int(rdelay_ms)}ms", f"wdelay={int(wdelay_ms)}ms"]
    if serial:
        args.append("serialize=requests")
    cmd = ["nbdfuse", str(mnt), "--command", "nbdkit", "-s", *filters, "memory", size, *args]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    disk = mnt / "nbd"
    loop = None
    try:
        for _ in range(200):
            if disk.exists():
                break
            if proc.poll() is not None:
                raise Unavailable(f"nbdfuse exited: {proc.stderr.read().decode().strip()}")
            time.sleep(0.05)
        else:
            raise Unavailable("nbdfuse did not expose its disk within 10 s")
        # direct IO to the FUSE file: otherwise the loop device's reads are served from the
        # page cache of its backing file and never meet the delay
        out = _run(["losetup", "--find", "--show", "--direct-io=on", str(disk)])
        if out.returncode != 0:
            raise Unavailable(f"cannot set up a loop device: {out.stderr.strip()}")
        loop = out.stdout.strip()
        yield Device(loop, disk, rdelay_ms, wdelay_ms, serial)
    finally:
        if loop:
            for _ in range(50):
                if _run(["losetup", "-d", loop]).returncode == 0:
                    break
                time.sleep(0.1)
        for _ in range(100):
            if _run(["fusermount3", "-u", str(mnt)]).returncode == 0:
                break
            time.sleep(0.05)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _run(["fusermount3", "-uz", str(mnt)])
            proc.kill()
            proc.wait()
        with contextlib.suppress(OSError):
            mnt.rmdir()


@contextlib.contextmanager
def ext4(dev: str, mountpoint: Path) -> Iterator[Path]:
    """ext4 made on `dev` and mounted at `mountpoint` (unmounted afterwards)."""
    need("mkfs.ext4")
    out = _run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev])
    if out.returncode != 0:
        raise Unavailable(f"mkfs.ext4 failed: {out.stderr.strip()}")
    mountpoint.mkdir(parents=True, exist_ok=True)
    out = _run(["mount", "-o", "noatime", dev, str(mountpoint)])
    if out.returncode != 0:
        raise Unavailable(f"cannot mount ext4: {out.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        for _ in range(100):
            if _run(["umount", str(mountpoint)]).returncode == 0:
                break
            time.sleep(0.1)


def remount(dev: str, mountpoint: Path) -> None:
    """Unmount and mount again: ext4's allocator forgets where it last allocated (its stream
    goal), so the next large file starts at the front of the free space, not after the
    application's last allocation (which made a target wrap from the end of the filesystem
    to its start)."""
    for _ in range(100):
        if _run(["umount", str(mountpoint)]).returncode == 0:
            break
        time.sleep(0.1)
    out = _run(["mount", "-o", "noatime", dev, str(mountpoint)])
    if out.returncode != 0:
        raise RuntimeError(f"cannot mount ext4 again: {out.stderr.strip()}")


@contextlib.contextmanager
def memory_cgroup(name: str, limit_bytes: int) -> Iterator[Path]:
    """A cgroup v1 memory group limited to `limit_bytes` (page cache included)."""
    if not (MEMCG / "memory.limit_in_bytes").exists():
        raise Unavailable("cgroup v1 memory controller is not mounted")
    cg = MEMCG / f"tilemark-{name}-{os.getpid()}-{time.monotonic_ns() % 10**9}"
    cg.mkdir()
    try:
        (cg / "memory.limit_in_bytes").write_text(f"{limit_bytes}\n")
        yield cg
    finally:
        for _ in range(100):
            procs = (cg / "cgroup.procs").read_text().split()
            for pid in procs:
                with contextlib.suppress(OSError):
                    (MEMCG / "cgroup.procs").write_text(pid)
            try:
                (cg / "memory.force_empty").write_text("0\n")
            except OSError:
                pass
            try:
                cg.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def in_cgroup(cg: Path | None, cmd: list[str]) -> list[str]:
    """`cmd` wrapped so that it starts inside the cgroup `cg` (None: as is)."""
    if cg is None:
        return cmd
    return ["sh", "-c", f'echo $$ > "{cg}/cgroup.procs" && exec "$@"', "sh", *cmd]


def as_postgres(cmd: list[str]) -> list[str]:
    return ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", *cmd]


@dataclass
class Postgres:
    """A running PostgreSQL instance of its own."""

    data: Path
    port: int
    sockdir: Path
    proc: subprocess.Popen

    def psql_args(self) -> list[str]:
        return ["-h", str(self.sockdir), "-p", str(self.port), "-U", "postgres"]

    def pgbench(self, *args: str) -> list[str]:
        return as_postgres([str(PG_BIN / "pgbench"), *self.psql_args(), *args, "postgres"])


# Settings of a small, disk-bound instance: little shared memory so that reads reach the page
# cache (and, under the memory cgroup, the device), checkpoints every few seconds so a short
# capture holds some.
PG_SETTINGS = {
    "shared_buffers": "16MB",
    "max_connections": "40",
    "checkpoint_timeout": "30s",
    "max_wal_size": "64MB",
    "min_wal_size": "32MB",
    "fsync": "on",
    "synchronous_commit": "on",
    "wal_sync_method": "fdatasync",
    "autovacuum": "off",
    "maintenance_work_mem": "4MB",
    "work_mem": "1MB",
    "log_min_messages": "warning",
    "listen_addresses": "",
}


@contextlib.contextmanager
def postgres(
    root: Path, port: int, *, cgroup: Path | None = None, settings: dict[str, str] | None = None
) -> Iterator[Postgres]:
    """initdb in `root`/pgdata, start on `port` with its socket in `root`/sock, stop and remove."""
    if not (PG_BIN / "postgres").exists():
        raise Unavailable(f"PostgreSQL 15 is not installed ({PG_BIN}; Debian postgresql)")
    need("setpriv")
    data, sock = root / "pgdata", root / "sock"
    for d in (data, sock):
        d.mkdir(parents=True, exist_ok=True)
        shutil.chown(d, "postgres", "postgres")
    out = _run(as_postgres([str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-E", "UTF8",
                            "--no-sync"]))  # fmt: skip
    if out.returncode != 0:
        raise Unavailable(f"initdb failed: {out.stderr.strip()[-400:]}")
    opts = {**PG_SETTINGS, **(settings or {}), "port": str(port),
            "unix_socket_directories": str(sock)}  # fmt: skip
    cmd = [str(PG_BIN / "postgres"), "-D", str(data)]
    for k, v in opts.items():
        cmd += ["-c", f"{k}={v}"]
    log = open(root / "postgres.log", "w")  # noqa: SIM115 (closed in finally)
    proc = subprocess.Popen(
        in_cgroup(cgroup, as_postgres(cmd)), stdout=log, stderr=subprocess.STDOUT
    )
    pg = Postgres(data, port, sock, proc)
    try:
        ready = [str(PG_BIN / "pg_isready"), "-q", *pg.psql_args()]
        for _ in range(300):
            if _run(ready).returncode == 0:
                break
            if proc.poll() is not None:
                raise Unavailable(f"postgres exited: {(root / 'postgres.log').read_text()[-400:]}")
            time.sleep(0.1)
        else:
            raise Unavailable("postgres did not accept connections within 30 s")
        yield pg
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # fast shutdown
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(sock, ignore_errors=True)


def pgbench_init(pg: Postgres, scale: int) -> None:
    out = _run(pg.pgbench("-i", "-q", "-s", str(scale)))
    if out.returncode != 0:
        raise RuntimeError(f"pgbench -i failed: {out.stderr.strip()[-400:]}")
    _run(as_postgres([str(PG_BIN / "psql"), *pg.psql_args(), "-c", "CHECKPOINT", "postgres"]))


def drop_caches(*paths: Path | str) -> None:
    """Write back and drop the cached pages of these files, directory trees and block devices
    (an application's filesystem and the loop device under it), so a run starts cold.

    Only theirs: /proc/sys/vm/drop_caches emptied the whole machine's cache, and the test
    suite runs other tests beside these rounds (a page-cache test saw its file's 8,192 cached
    pages drop to 8 mid-test). Clean pages go with POSIX_FADV_DONTNEED once written back; a
    block device also drops its buffers (BLKFLSBUF: the filesystem's metadata)."""
    os.sync()
    for root in map(Path, paths):
        files = [root] if not root.is_dir() else [
            Path(d) / f for d, _, names in os.walk(root) for f in names
        ]  # fmt: skip
        for f in files:
            with contextlib.suppress(OSError):
                fd = os.open(f, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                try:
                    if stat.S_ISBLK(os.fstat(fd).st_mode):
                        fcntl.ioctl(fd, BLKFLSBUF)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)


BLKFLSBUF = 0x1261  # linux/fs.h: flush a block device's buffer cache


def pressure() -> dict[str, str]:
    """/proc/pressure/* 'some' lines (avg10 avg60 avg300), for every figure's notes."""
    out = {}
    for kind in ("cpu", "io", "memory"):
        try:
            line = Path(f"/proc/pressure/{kind}").read_text().splitlines()[0]
        except OSError:
            continue
        out[kind] = " ".join(line.split()[1:4])
    return out


def db_bench_cmd(db: Path, benchmarks: str, *, num: int, duration_s: int | None = None,
                 extra: tuple[str, ...] = ()) -> list[str]:  # fmt: skip
    """db_bench with a small, disk-bound configuration."""
    exe = shutil.which("db_bench")
    if exe is None:
        raise Unavailable("db_bench is not installed (Debian rocksdb-tools)")
    cmd = [exe, f"--db={db}", f"--benchmarks={benchmarks}", f"--num={num}",
           "--value_size=400", "--key_size=16", "--cache_size=4194304",
           "--write_buffer_size=4194304", "--target_file_size_base=4194304",
           "--max_bytes_for_level_base=16777216", "--compression_type=none",
           "--threads=2", "--use_existing_db=" + ("1" if "fillrandom" not in benchmarks else "0"),
           "--statistics=0", "--histogram=0", "--stats_interval_seconds=0"]  # fmt: skip
    if duration_s is not None:
        cmd.append(f"--duration={duration_s}")
    return cmd + list(extra)


# An order-entry loop: three items per order, skewed (Pareto) item choice.
SQLITE_LOOP = r"""
import random, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA synchronous=FULL")
db.execute("PRAGMA cache_size=-2000")
db.execute("CREATE TABLE IF NOT EXISTS item(id INTEGER PRIMARY KEY, stock INTEGER, pad TEXT)")
db.execute("CREATE TABLE IF NOT EXISTS orders(id INTEGER PRIMARY KEY, item INTEGER, qty INTEGER,"
           " at REAL, pad TEXT)")
items = int(sys.argv[2])
if db.execute("SELECT count(*) FROM item").fetchone()[0] == 0:
    db.execute("BEGIN")
    db.executemany("INSERT INTO item VALUES (?, 1000, ?)", ((i, "x" * 200) for i in range(items)))
    db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    print("loaded", flush=True)
    sys.exit(0)
end = time.monotonic() + float(sys.argv[3])
rng = random.Random(7)
n = 0
while time.monotonic() < end:
    db.execute("BEGIN")
    for _ in range(3):
        item = int(rng.paretovariate(1.2)) % items
        db.execute("SELECT stock FROM item WHERE id = ?", (item,)).fetchone()
        db.execute("UPDATE item SET stock = stock - 1 WHERE id = ?", (item,))
        db.execute("INSERT INTO orders(item, qty, at, pad) VALUES (?, 1, ?, ?)",
                   (item, time.time(), "y" * 100))
    db.execute("COMMIT")
    n += 1
print(f"orders {n}", flush=True)
"""


def sqlite_cmd(python: str, db: Path, items: int, seconds: float) -> list[str]:
    """The SQLite order-entry loop (WAL, synchronous=FULL): load when empty, else run."""
    return [python, "-c", SQLITE_LOOP, str(db), str(items), str(seconds)]
