"""fio's verify_pattern and fill_device (python/tilemark/fio/verifyfill.py), as in fio's
surface-scan example, each rule taken from fio's HOWTO (fio commit f5344384) and fio's source
where the HOWTO is silent."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilemark.cli import main
from tilemark.fio import translate

# examples/surface-scan.fio, whole (its comments dropped).
SURFACE_SCAN = """\
[global]
thread
bs=64k
direct=1
ioengine=sync
verify=meta
verify_pattern=0xaa555aa5
verify_interval=512

[write-phase]
filename=datafile.tmp
rw=write
fill_device=1
do_verify=0

[verify-phase]
stonewall
create_serialize=0
filename=datafile.tmp
rw=read
do_verify=1
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.fio"
    path.write_text(text)
    return path


def test_surface_scan_writes_once_then_reads_everything_back_checked(tmp_path):
    t = translate(write(tmp_path, SURFACE_SCAN))
    assert t.doc["verify"] is True and t.doc["backend"] == "psync"
    w, r = t.doc["stream"]
    assert (w["rw"], w["bs"], w["passes"]) == ("write", "64k", 1)
    assert "length" not in w  # the whole data area
    # HOWTO stonewall: "Wait for preceding jobs in the job file to exit, before starting
    # this one."
    assert (r["rw"], r["passes"], r["after"]) == ("read", 1, ["write-phase"])
    notes = " ".join(t.notes)
    # HOWTO fill_device: "Sets size to something really large and waits for ENOSPC".
    assert "fill_device=1: fio writes until the device or file system is full" in notes
    assert "never fills a file system" in notes
    # HOWTO verify_pattern: "fio will fill the I/O buffers with this pattern".
    assert "verify_pattern=0xaa555aa5: fio fills each block after its header" in notes
    assert "verify_interval=512" in notes
    # HOWTO do_verify: "Run the verify phase after a write phase. Only valid if verify is
    # set." The write phase sets it to 0; the read phase checks what it reads.
    assert "does not read back what this job wrote (do_verify=0)" in notes
    assert "fio checks its reads against its own headers" in notes


def test_fill_device_with_a_size_writes_that_size(tmp_path):
    # init.c: "if (o->fill_device && !o->size) o->size = -1ULL;": a given size is kept.
    t = translate(write(tmp_path, "[j]\nfilename=/x\nrw=write\nsize=16m\nfill_device=1\n"))
    assert t.doc["stream"][0]["length"] == "16m"
    assert any("with size: fio writes size bytes unless the file system fills" in n
               for n in t.notes)  # fmt: skip


def test_fill_fs_is_fill_device(tmp_path):
    # HOWTO: ".. option:: fill_device=bool, fill_fs=bool".
    t = translate(write(tmp_path, "[j]\nfilename=/x\nrw=write\nfill_fs=1\n"))
    assert any("fill_device=1" in n or "fill_fs=1" in n for n in t.notes)


@pytest.mark.parametrize(
    "change, words",
    [
        # HOWTO fill_device: "Only makes sense with sequential write."
        (("rw=write\nfill_device", "rw=randwrite\nfill_device"), "rw=randwrite"),
        # options.c str_verify_pattern_cb: without verify, fio checks the pattern alone
        # ("if (!fio_option_is_set(&td->o, verify)) td->o.verify = VERIFY_PATTERN").
        (("verify=meta\n", ""), "verify=pattern"),
        (("verify=meta\n", "verify=0\n"), "only fills its write buffers"),
        (("verify_pattern=0xaa555aa5", "verify_pattern="), "needs a pattern"),
        (("fill_device=1", "fill_device=maybe"), "fill_device"),
    ],
)
def test_what_tilemark_cannot_keep_is_one_sentence(tmp_path, capsys, change, words):
    job = write(tmp_path, SURFACE_SCAN.replace(*change))
    assert main(["import-fio", str(job), "-o", str(tmp_path / "w.toml")]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and err.count("\n") == 1, err


def test_latency_target_is_refused_naming_the_study_that_asks_it(tmp_path, capsys):
    # HOWTO latency_target: "fio will attempt to find the max performance point that the
    # given workload will run at while maintaining a latency below this target"; io_u.c
    # lat_target_*: the queue depth from 1, doubled, then bisected, within the run.
    job = write(
        tmp_path,
        "[global]\nbs=4k\nrw=randread\ndirect=1\nioengine=libaio\niodepth=128\n"
        "latency_target=500000\nlatency_window=5000000\nlatency_percentile=99.9\n"
        "[device]\nfilename=/dev/sda\n",
    )
    assert main(["import-fio", str(job), "-o", str(tmp_path / "w.toml")]) == 2
    err = capsys.readouterr().err
    assert "fio option latency_target cannot be translated" in err
    assert "tilemark scale PROFILE --knob depth --knob-range 1..IODEPTH" in err
