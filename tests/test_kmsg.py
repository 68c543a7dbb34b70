"""The kernel's messages about a run's devices (telemetry/kmsg.py): records parsed with the
device their dictionary names, only the run's devices and files taken (loop1, not loop10),
and the message before a `File: PATH` line taken with it."""

from __future__ import annotations

import os

import pytest

from tilemark.telemetry import kmsg

IO_ERROR = (
    "3,1234,59047518323,-;I/O error, dev loop1, sector 8 op 0x0:(READ) flags 0x800 phys_seg 1"
    " prio class 2\n SUBSYSTEM=block\n DEVICE=b7:1\n"
)


def test_a_record_is_its_level_time_first_line_and_device():
    r = kmsg.parse(IO_ERROR)
    assert r == kmsg.Record(
        59047.518323,
        3,
        "I/O error, dev loop1, sector 8 op 0x0:(READ) flags 0x800 phys_seg 1 prio class 2",
        "7:1",
    )
    assert kmsg.parse("not a record") is None
    assert kmsg.parse("x,1,2;message") is None


def test_only_the_run_s_devices_and_files_are_taken():
    log = kmsg.KernelLog(["loop1", "vda"], ["7:1", "253:0"], ["/srv/t/target.dat"])
    take = [
        "I/O error, dev loop1, sector 8 op 0x0:(READ)",
        "EXT4-fs error (device vda): ext4_find_entry:1455: reading directory lblock 0",
        "File: /srv/t/target.dat PID: 4242 Comm: tilemark-engine",
    ]
    leave = [
        "I/O error, dev loop10, sector 8 op 0x0:(READ)",  # another loop device
        "I/O error, dev vdb, sector 8 op 0x0:(READ)",
        "loop0: detected capacity change from 0 to 131072",
    ]
    assert all(log.matches(kmsg.Record(0.0, 3, m)) for m in take)
    assert not any(log.matches(kmsg.Record(0.0, 3, m)) for m in leave)
    # the kernel's dictionary names the device where the text does not
    assert log.matches(kmsg.Record(0.0, 3, "buffer write failed", "253:0"))
    assert not log.matches(kmsg.Record(0.0, 3, "buffer write failed", "253:1"))


def test_an_unreadable_log_is_a_note_and_no_messages(tmp_path):
    log = kmsg.KernelLog(["loop1"], [], [])
    log.start(str(tmp_path / "no-such-log"))
    assert log.note and "kernel messages unavailable" in log.note
    assert log.read() == []


@pytest.mark.root
def test_messages_logged_while_reading_are_read_from_the_kernel_log(tmp_path):
    # Three lines written to the kernel's log (root may): one naming the run's device, one
    # another's, and a two-line message whose second line names the run's file.
    if os.geteuid() != 0:
        pytest.skip("writing to /dev/kmsg needs root")
    target = str(tmp_path / "target.dat")
    log = kmsg.KernelLog(["loop93"], [], [target])
    log.start()
    assert log.note is None
    with open(kmsg.KMSG, "w") as f:
        for line in (
            "tilemark test of its kernel log reader, not an error: loop93 answered",
            "tilemark test of its kernel log reader, not an error: loop930 answered",
            "tilemark test of its kernel log reader, not an error: the line before",
            f"File: {target} PID: 1 Comm: tilemark-test",
        ):
            f.write(line + "\n")
            f.flush()
    got = [r.message for r in log.read()]
    assert got == [
        "tilemark test of its kernel log reader, not an error: loop93 answered",
        "tilemark test of its kernel log reader, not an error: the line before",
        f"File: {target} PID: 1 Comm: tilemark-test",
    ]
    summary = kmsg.summary(log.read() or [kmsg.Record(1.0, 3, "x")])
    assert summary == {"count": 1, "messages": [{"t_s": 1.0, "level": 3, "message": "x"}]}


def test_a_storage_failure_quotes_the_first_message_of_one_host_or_of_a_cluster_s():
    from tilemark.run.runner import kernel_said

    msg = {"t_s": 1.0, "level": 3, "message": "I/O error, dev loop1, sector 8 op 0x0:(READ)"}
    one = {"telemetry": {"kernel": {"count": 3, "messages": [msg]}}}
    assert kernel_said(one) == (
        "; the kernel logged 3 message(s) about its devices, the first: "
        "I/O error, dev loop1, sector 8 op 0x0:(READ)"
    )
    cluster = {
        "telemetry": None,
        "hosts": [
            {"name": "a", "telemetry": {"devices": []}},
            {"name": "b", "telemetry": {"kernel": {"count": 2, "messages": [msg]}}},
        ],
    }
    assert kernel_said(cluster).endswith(
        "2 message(s) about its devices, the first: b: I/O error, dev loop1, sector 8 op 0x0:(READ)"
    )
    assert kernel_said({"telemetry": {"devices": []}}) == ""
