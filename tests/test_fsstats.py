"""The file system's own figures beneath a file run (files/fsstats.py): the kernel's formats
parsed as documented (proc(5) mountinfo, fs/xfs/xfs_stats.c, btrfs commit_stats, the NFS
client's mountstats), the mount of a path found, and figures made from two readings."""

from __future__ import annotations

from tilemark.files import fsstats

MOUNTINFO = """\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:27 / /tmp/ram rw shared:9 - tmpfs tmpfs rw
31 22 7:0 / /mnt/with\\040space rw - xfs /dev/loop0 rw
40 22 0:52 / /mnt/nas rw - nfs4 filer:/export rw,vers=4.2
"""

XFS = """\
extent_alloc 0 0 0 0
dir 10 20 5 3
trans 1 100 2
ig 7 6 0 1 0 0 0
log 40 800 0 3 1
xpc 0 4096 8192
"""

NFS = """\
device filer:/other mounted on /mnt/other with fstype nfs4 statvers=1.1
\tper-op statistics
\t        READ: 99 99 0 0 0 0 0 0 0
device filer:/export mounted on /mnt/nas with fstype nfs4 statvers=1.1
\topts:\trw,vers=4.2
\tper-op statistics
\t        NULL: 0 0 0 0 0 0 0 0 0
\t        READ: 10 10 0 1600 40960 5 30 40 0
\t       WRITE: 4 4 0 16800 640 1 20 24 0
"""


def test_a_set_belongs_to_the_longest_mount_point_above_it(tmp_path, monkeypatch):
    from tilemark.telemetry import envinfo

    info = tmp_path / "mountinfo"
    info.write_text(MOUNTINFO)
    monkeypatch.setattr(envinfo, "MOUNTINFO", info)
    mounts = fsstats.mounts_of([("a", "/mnt/with space/a/b"), ("m", "/mnt/nas/tm/mail"),
                                ("n", "/mnt/nasty"), ("l", "/mnt/nas/tm/log")])  # fmt: skip
    assert {p: (m.fstype, m.dev, sets) for p, (m, sets) in mounts.items()} == {
        "/mnt/with space": ("xfs", "7:0", ["a"]),  # octal escape
        "/mnt/nas": ("nfs4", "0:52", ["m", "l"]),
        "/": ("ext4", "254:0", ["n"]),  # a prefix is not a parent
    }


def test_xfs_counters_become_rates_over_the_run():
    a = fsstats.parse_xfs_stats(XFS)
    assert a["dir_create"] == 20 and a["trans_async"] == 100 and a["log_blocks"] == 800
    b = {k: v * 3 for k, v in a.items()}
    m = fsstats.Mount("/x", "xfs", "/dev/loop0", "7:0")
    (view,) = fsstats.fs_views(
        {"/x": (m, ["mail"])}, {"/x": fsstats.Counters(a)}, {"/x": fsstats.Counters(b)}, 2.0
    )
    got = {f.name: f.value for f in view.figures}
    assert got["transactions/s"] == 2 * 103 / 2 and got["dir creates/s"] == 2 * 20 / 2
    assert got["log MB/s"] == 2 * 800 * 512 / 1e6 / 2 and got["inode gets/s"] == 7
    assert view.written_bytes is None and view.filesets == ("mail",)


def test_ext4_bytes_written_and_btrfs_commits():
    e = fsstats.Mount("/e", "ext4", "/dev/vda", "254:0")
    (view,) = fsstats.fs_views(
        {"/e": (e, ["s"])},
        {"/e": fsstats.Counters({"written_kib": 100})},
        {"/e": fsstats.Counters({"written_kib": 2148})},
        4.0,
    )
    assert view.written_bytes == 2048 * 1024
    assert {f.name: f.value for f in view.figures}["written MiB"] == 2.0
    commits = fsstats.parse_btrfs_commits("commits 12\nlast_commit_ms 3\nmax_commit_ms 40\n")
    b = fsstats.Mount("/b", "btrfs", "/dev/loop1", "7:1")
    (view,) = fsstats.fs_views(
        {"/b": (b, ["s"])},
        {"/b": fsstats.Counters({**commits, "commits": 2})},
        {"/b": fsstats.Counters(commits)},
        5.0,
    )
    assert {f.name: f.value for f in view.figures} == {
        "commits/s": 2.0,
        "max commit ms (since mount)": 40.0,
    }


def test_nfs_per_operation_calls_and_times_of_its_own_mount_only():
    ops = fsstats.parse_nfs_ops(NFS, "/mnt/nas")
    assert set(ops) == {"NULL", "READ", "WRITE"} and ops["READ"][6] == 30
    m = fsstats.Mount("/mnt/nas", "nfs4", "filer:/export", "0:52")
    zero = {op: (0,) * 8 for op in ops}
    before, after = fsstats.Counters(nfs_ops=zero), fsstats.Counters(nfs_ops=ops)
    mounts = {"/mnt/nas": (m, ["s"])}
    (view,) = fsstats.fs_views(mounts, {"/mnt/nas": before}, {"/mnt/nas": after}, 2.0)
    got = {f.name: f.value for f in view.figures}
    assert got == {
        "READ calls/s": 5.0, "READ mean rtt ms": 3.0, "READ mean execute ms": 4.0,
        "WRITE calls/s": 2.0, "WRITE mean rtt ms": 5.0, "WRITE mean execute ms": 6.0,
    }  # fmt: skip


def test_a_file_system_without_counters_shows_nothing(tmp_path):
    m = fsstats.Mount(str(tmp_path), "tmpfs", "tmpfs", "0:27")
    assert fsstats.read_counters(m) is None
    assert fsstats.fs_views({"/t": (m, ["s"])}, {"/t": None}, {"/t": None}, 1.0) == ()


def test_the_file_report_shows_the_devices_and_file_systems_beneath_the_sets():
    from tilemark.report.files_report import beneath_table
    from tilemark.store import results

    files = results.FilesSummary(
        devices=[results.DeviceViewResult(name="loop0", dev="7:0", filesets=["mail"],
                                          write_iops=4261.0, flushes_s=943.0)],
        filesystems=[results.FsResult(mount="/mnt", fstype="xfs", source="/dev/loop0",
                                      filesets=["mail"], figures=[
                                          results.FsFigureResult("log writes/s", 450.5)])],
    )  # fmt: skip
    table = beneath_table(files)
    cells = [[c.text for c in row] for row in table.rows]
    assert cells[0][:3] == ["device", "loop0 (7:0)", "mail"] and "943 flushes/s" in cells[0][3]
    assert cells[1] == ["file system (xfs)", "/mnt (/dev/loop0)", "mail", "log writes/s 450.5"]
    assert beneath_table(results.FilesSummary()) is None  # tmpfs: nothing beneath
