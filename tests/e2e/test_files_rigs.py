"""File workloads on real file systems: the varmail-like workload on ext4 and xfs loop
devices (counts against the disk), ENOSPC and EMFILE ending a run with the error named and
the intervals kept, and a read-only mount or too few inodes refused in one sentence with
nothing created (docs/files.md). Each test takes a second or two."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
from pathlib import Path

import pytest

from .rigs import need_root, remount_read_only, small_filesystem, tilemark_exe


@pytest.fixture(autouse=True)
def _results_in_tmp(tmp_path, monkeypatch):
    """`files run` stores its run under ./tilemark-results: keep it out of the checkout."""
    monkeypatch.chdir(tmp_path)


pytestmark = [pytest.mark.quick]


def _umount(mnt: Path) -> None:
    """Unmount, lazily when something (an engine run a failed assertion left alive) still
    holds it: a mount is never left behind in the temporary directory."""
    if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "--lazy", str(mnt)], check=False)


def write_workload(path: Path, sets: str, streams: str, duration: str = "1s") -> Path:
    path.write_text(f'name = "t"\nduration = "{duration}"\ninterval = "0.2s"\n{sets}\n{streams}\n')
    return path


def tilemark(*args: str, nofile: int | None = None) -> subprocess.CompletedProcess:
    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    return subprocess.run(
        [tilemark_exe(), *args], capture_output=True, text=True, preexec_fn=limit, timeout=60
    )


def files_under(root: Path) -> dict[str, int]:
    out = {}
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            if not n.startswith(".tilemark"):
                out[os.path.join(dirpath, n)] = os.path.getsize(os.path.join(dirpath, n))
    return out


@pytest.fixture(params=["ext4", "xfs"])
def loop_fs(request, tmp_path):
    """A fresh ext4 or xfs file system on a loop device, mounted in tmp_path/mnt."""
    need_root()
    kind = request.param
    mkfs = shutil.which(f"mkfs.{kind}")
    if not mkfs:
        pytest.skip(f"mkfs.{kind} not installed (Debian {'xfsprogs' if kind == 'xfs' else kind})")
    image, mnt = tmp_path / f"{kind}.img", tmp_path / "mnt"
    mnt.mkdir()
    with open(image, "wb") as f:
        f.truncate(320 << 20)  # xfs needs 300 MB at least
    made = subprocess.run([mkfs, "-q", "-f" if kind == "xfs" else "-F", str(image)],
                          capture_output=True, text=True)  # fmt: skip
    if made.returncode != 0:
        pytest.skip(f"mkfs.{kind} failed: {made.stderr.strip()}")
    mounted = subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount {kind} on a loop device: {mounted.stderr.decode().strip()}")
    try:
        yield kind, mnt
    finally:
        _umount(mnt)


@pytest.mark.root
@pytest.mark.loopdev
def test_varmail_on_a_loop_device_leaves_on_disk_what_it_counted(loop_fs, tmp_path):
    kind, mnt = loop_fs
    out = tmp_path / "r.json"
    r = tilemark("files", "run", "varmail", "--dir", str(mnt), "--duration", "1s", "--json",
                 str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    mail = next(s for s in doc["streams"] if s["name"] == "mail")
    n = {o["op"]: o["ops"] for o in mail["ops"]}
    assert n["create"] > 0 and n["fsync"] > 0 and n["read"] > 0 and n["delete"] > 0, n
    on_disk = files_under(mnt / "mail")
    assert len(on_disk) == 800 + n["create"] - n["delete"]
    state = {f["name"]: f for f in doc["filesets"]}
    assert state["mail"]["files"] == len(on_disk)
    assert state["mail"]["bytes"] == sum(on_disk.values())
    log = next(s for s in doc["streams"] if s["name"] == "log")
    appended = next(o for o in log["ops"] if o["op"] == "append")
    assert sum(files_under(mnt / "log").values()) == appended["bytes"] == 4096 * appended["ops"]
    # The device view beneath: the loop device took the metadata storm as small writes and
    # flushes (each fsync of a message ends in a flush).
    (dev,) = doc["devices"]
    assert dev["name"].startswith("loop") and dev["filesets"] == ["mail", "log"]
    assert dev["write_iops"] > 0 and dev["write_kib_avg"] < 1024
    fsyncs = n["fsync"] / doc["seconds"]
    assert dev["flushes_s"] is not None and dev["flushes_s"] > 0.1 * fsyncs
    # The file system's own figures: ext4 counts what it wrote to the loop device, xfs its
    # transactions, log writes and directory operations (each create is a directory entry).
    (fs,) = doc["filesystems"]
    assert fs["fstype"] == kind and fs["mount"] == str(mnt) and fs["filesets"] == ["mail", "log"]
    figures = {f["name"]: f["value"] for f in fs["figures"]}
    if kind == "ext4":
        assert fs["written_bytes"] > 0 and figures["written MiB"] > 0
    else:
        assert figures["transactions/s"] > 0 and figures["log writes/s"] > 0
        creates = n["create"] / doc["seconds"]
        assert figures["dir creates/s"] >= 0.9 * creates, (figures, creates)
    # Nothing outside the two sets' directories (lost+found is ext4's own).
    assert sorted(p.name for p in mnt.iterdir()) in (["log", "mail"], ["log", "lost+found", "mail"])


@pytest.mark.root
def test_enospc_while_creating_files_ends_the_run_named_and_keeps_the_intervals(tmp_path):
    with small_filesystem(tmp_path / "small", "2m") as mnt:
        toml = write_workload(
            tmp_path / "w.toml",
            f'[[fileset]]\nname = "s"\npath = "{mnt}/set"\nfiles = 1000\nprealloc = 0\n',
            '[[filestream]]\nname = "fill"\nsequence = "create,append,close"\nappend = "64k"\n',
            duration="20s",
        )
        out = tmp_path / "r.json"
        r = tilemark("files", "run", str(toml), "--json", str(out))
        assert r.returncode == 1, r.stderr
        assert "ENOSPC" in r.stderr and "append" in r.stderr, r.stderr
        doc = json.loads(out.read_text())
        assert doc["status"] == "errors" and doc["seconds"] < 10
        n = {o["op"]: o for o in doc["streams"][0]["ops"]}
        assert n["append"]["errors"] == {"ENOSPC": 1}
        # What ran before the error is kept, interval by interval.
        assert sum(i["streams"][0]["ops"]["create"]["ops"] for i in doc["intervals"]) == \
            n["create"]["ops"] > 0  # fmt: skip
        assert len(files_under(mnt / "set")) == n["create"]["ops"]
        # The failed run is stored too: status errors, the errno named (docs/files.md).
        (run,) = (tmp_path / "tilemark-results").glob("2*/run.json")
        stored = json.loads(run.read_text())
        assert stored["kind"] == "files" and stored["status"] == "errors"
        assert "ENOSPC" in stored["error"]
        assert stored["summary"]["total"]["errors_by_name"] == {"ENOSPC": 1}


def test_emfile_ends_the_run_named_and_keeps_the_intervals(tmp_path):
    toml = write_workload(
        tmp_path / "w.toml",
        f'[[fileset]]\nname = "s"\npath = "{tmp_path}/set"\nfiles = 500\nsize = "1k"\n',
        '[[filestream]]\nname = "hold"\nops = "open:1"\nopenfiles = 4096\n',
        duration="20s",
    )
    out = tmp_path / "r.json"
    r = tilemark("files", "run", str(toml), "--json", str(out), nofile=128)
    assert r.returncode == 1, r.stderr
    assert "EMFILE" in r.stderr and "open" in r.stderr, r.stderr
    doc = json.loads(out.read_text())
    opens = next(o for o in doc["streams"][0]["ops"] if o["op"] == "open")
    assert opens["errors"] == {"EMFILE": 1} and 0 < opens["ops"] < 128
    assert sum(i["streams"][0]["ops"]["open"]["ops"] for i in doc["intervals"]) == opens["ops"]


@pytest.mark.root
def test_a_read_only_mount_is_refused_for_writes_and_read_by_a_read_only_workload(tmp_path):
    with small_filesystem(tmp_path / "ro", "4m") as mnt:
        sets = f'[[fileset]]\nname = "s"\npath = "{mnt}/set"\nfiles = 50\nsize = "1k"\n'
        write_ops = '[[filestream]]\nname = "w"\nops = "create:1,delete:1"\n'
        writer = write_workload(tmp_path / "w.toml", sets, write_ops)
        reader = write_workload(tmp_path / "r.toml", sets,
                                '[[filestream]]\nname = "r"\nsequence = "open,read,close"\n',
                                duration="0.3s")  # fmt: skip
        assert tilemark("files", "prepare", str(writer)).returncode == 0
        before = files_under(mnt)
        remount_read_only(mnt)
        r = tilemark("files", "run", str(writer))
        assert r.returncode == 2
        assert r.stderr.strip().count("\n") == 0 and "read-only mount" in r.stderr, r.stderr
        assert files_under(mnt) == before
        ok = tilemark("files", "run", str(reader))
        assert ok.returncode == 0, ok.stderr
        assert files_under(mnt) == before


@pytest.mark.root
def test_more_files_than_free_inodes_is_refused_and_nothing_is_made(tmp_path):
    need_root()
    mnt = tmp_path / "few"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,nr_inodes=64", "tmpfs",
                              str(mnt)], capture_output=True)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.decode().strip()}")
    try:
        toml = write_workload(
            tmp_path / "w.toml",
            f'[[fileset]]\nname = "s"\npath = "{mnt}/set"\nfiles = 100\nsize = "1"\n',
            '[[filestream]]\nname = "r"\nops = "stat:1"\n',
        )
        r = tilemark("files", "prepare", str(toml))
        assert r.returncode == 2
        assert "inodes" in r.stderr and r.stderr.strip().count("\n") == 0, r.stderr
        assert list(mnt.iterdir()) == []
    finally:
        _umount(mnt)


def test_sigterm_stops_a_file_run_in_order_and_keeps_what_ran(tmp_path):
    import signal
    import time

    toml = write_workload(
        tmp_path / "w.toml",
        f'[[fileset]]\nname = "s"\npath = "{tmp_path}/set"\nfiles = 50\nsize = "1k"\n',
        '[[filestream]]\nname = "r"\nops = "stat:1"\n',
        duration="60s",
    )
    out = tmp_path / "r.json"
    p = subprocess.Popen([tilemark_exe(), "files", "run", str(toml), "--json", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    # Signal once the run is under way: the set is prepared (its marker says ready), then a
    # little more (a loaded machine may take seconds to get there).
    marker = tmp_path / "set" / ".tilemark-fileset"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if marker.exists() and '"ready"' in marker.read_text():
            break
        time.sleep(0.05)
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=20)
    assert p.returncode == 143, err
    assert "interrupted" in err
    doc = json.loads(out.read_text())
    assert doc["status"] == "interrupted" and 0.5 < doc["seconds"] < 10
    stats = next(o for o in doc["streams"][0]["ops"] if o["op"] == "stat")["ops"]
    assert stats > 0
    assert sum(i["streams"][0]["ops"]["stat"]["ops"] for i in doc["intervals"]) == stats


@pytest.mark.root
def test_enospc_on_create_when_inodes_run_out_mid_run_is_named(tmp_path):
    """The inodes a set needs are checked before the run; another tenant can still take them
    while it runs: the create that fails says so (ENOSPC) and what ran is kept."""
    from tilemark import _engine
    from tilemark.files.run import file_plan, prepare_all
    from tilemark.files.spec import parse_file_workload

    need_root()
    mnt = tmp_path / "few"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,nr_inodes=400", "tmpfs",
                              str(mnt)], capture_output=True)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.decode().strip()}")
    try:
        doc = {"name": "t", "duration": "20s", "interval": "0.1s",
               "fileset": [{"name": "s", "path": str(mnt / "set"), "files": 300,
                            "prealloc": 0, "size": "0"}],
               "filestream": [{"name": "c", "sequence": "create,close"}]}  # fmt: skip
        w = parse_file_workload(doc, "test")
        plan = file_plan(w, prepare_all(w))
        other = mnt / "tenant"  # someone else takes all but a few inodes
        other.mkdir()
        k = 0
        while True:
            try:
                (other / f"x{k}").touch()
            except OSError:
                break
            k += 1
        for j in range(20):
            (other / f"x{j}").unlink()
        run = _engine.start_files(json.dumps(plan))
        assert run.wait(15)
        snaps = json.loads(run.poll())
        res = json.loads(run.result())
        del run  # its directory fds keep the file system busy
        assert res["stop_reason"] == "errors"
        assert "create of f" in res["error"] and "errno 28" in res["error"], res["error"]
        creates = res["streams"][0]["ops"]["create"]
        assert creates["errors"] == {"28": 1} and 15 <= creates["ops"] <= 20
        assert sum(s["streams"][0]["ops"]["create"]["ops"] for s in snaps) == creates["ops"]
        assert len(list((mnt / "set").iterdir())) == creates["ops"] + 1  # and the marker
    finally:
        _umount(mnt)
