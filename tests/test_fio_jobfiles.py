"""fio jobs over several files of their own (python/tilemark/fio/jobfiles.py), each rule taken
from fio's HOWTO (fio commit f5344384, "Target file/device": nrfiles, filesize,
filename_format, file_service_type, openfiles; "size")."""

from __future__ import annotations

from pathlib import Path

import pytest

from tilemark.cli import main
from tilemark.errors import UsageError
from tilemark.fio import translate

JOB = "[job]\nrw=randread\nbs=4k\ndirectory=/d\n"


def translated(tmp_path: Path, text: str):
    path = tmp_path / "job.fio"
    path.write_text(text)
    return translate(path)


def refused(tmp_path: Path, text: str) -> str:
    with pytest.raises(UsageError) as e:
        translated(tmp_path, text)
    return str(e.value)


def test_nrfiles_divides_size_between_files_named_as_fio_names_them(tmp_path):
    # HOWTO nrfiles: "Number of files to use for this job"; size: "fio will divide this size
    # between the available files determined by options such as nrfiles"; filename_format:
    # default "$jobname.$jobnum.$filenum", in `directory`.
    t = translated(tmp_path, JOB + "nrfiles=4\nsize=4m\nnumjobs=2\n")
    assert [(x["name"], x["path"], x["size"]) for x in t.doc["target"]] == [
        (f"job.{c}.{k}", f"/d/job.{c}.{k}", "1m") for c in (0, 1) for k in range(4)
    ]
    s0, s1 = t.doc["stream"]
    assert s0["target"] == [f"job.0.{k}" for k in range(4)] and "spread" not in s0  # uniform
    assert s1["target"] == [f"job.1.{k}" for k in range(4)]
    # size is the job's IO over all its files (one pass: no time_based)
    assert s0["length"] == "1m" and s0["io_size"] == "4m" and "passes" not in s0
    assert any("8 files" in n and "roundrobin" in n for n in t.notes)


def test_filesize_sets_each_file_and_size_defaults_to_all_of_them(tmp_path):
    # HOWTO filesize: "Individual file sizes"; size "unless filesize is specified".
    t = translated(tmp_path, JOB + "nrfiles=3\nfilesize=2m\nloops=2\n")
    (s,) = t.doc["stream"]
    assert [x["size"] for x in t.doc["target"]] == ["2m"] * 3
    assert s["io_size"] == "12m"  # 3 files x 2m, twice


def test_a_filename_format_names_the_files(tmp_path):
    t = translated(tmp_path, JOB + "nrfiles=2\nsize=2m\nfilename_format=data.$jobname.$filenum\n")
    assert [x["path"] for x in t.doc["target"]] == ["/d/data.job.0", "/d/data.job.1"]


def test_random_file_service_is_noted_and_the_skewed_ones_refused(tmp_path):
    # HOWTO file_service_type: random, roundrobin, sequential, zipf, pareto, normal/gauss.
    t = translated(tmp_path, JOB + "nrfiles=2\nsize=2m\nfile_service_type=random:4\n")
    assert any("random switching file every 4 IOs" in n for n in t.notes)
    for kind in ("sequential", "zipf:1.2"):
        msg = refused(tmp_path, JOB + f"nrfiles=2\nsize=2m\nfile_service_type={kind}\n")
        assert "file_service_type" in msg and "same share" in msg, msg
    assert "fio allows" in refused(tmp_path, JOB + "nrfiles=2\nsize=2m\nfile_service_type=x\n")


def test_what_would_change_the_storage_is_refused(tmp_path):
    # openfiles below nrfiles: fio closes and opens files as it goes.
    assert "closing and opening" in refused(tmp_path, JOB + "nrfiles=4\nopenfiles=2\nsize=4m\n")
    # sequential IO takes the files in turn, each continuing its own sequence
    seq = "[job]\nrw=read\nbs=4k\nnrfiles=2\nsize=2m\n"
    assert "in turn" in refused(tmp_path, seq)
    # the same file for two clones (no $jobnum): fio shares it
    msg = refused(tmp_path, JOB + "nrfiles=2\nsize=2m\nnumjobs=2\nfilename_format=f.$filenum\n")
    assert "/d/f.0 is named by job (copy 0) too" in msg
    # a named file with nrfiles
    assert "names its filename" in refused(tmp_path, "[j]\nfilename=/x\nnrfiles=2\nsize=1m\n")
    assert "count of files" in refused(tmp_path, JOB + "nrfiles=abc\nsize=1m\n")


def test_a_bad_value_is_one_sentence_and_exit_2(tmp_path, capsys):
    path = tmp_path / "bad.fio"
    path.write_text(JOB + "nrfiles=0\nsize=1m\n")
    assert main(["import-fio", str(path)]) == 2
    err = capsys.readouterr().err
    assert "nrfiles" in err and "Traceback" not in err


def test_export_gives_fio_each_files_size_and_the_jobs_total():
    # HOWTO size: fio divides it between a job's files unless filesize gives each its own.
    from tilemark.fio.export import job_text

    stream = {
        "name": "s", "read_pct": 100, "sizes": [[4096, 1]], "pattern": {"kind": "random"},
        "random_pct": 100, "align": 4096, "qd": 1, "arrival": {"kind": "closed"},
        "sync": {"kind": "none"}, "io_limit": 4 << 20,
        "regions": [{"target": k, "offset": 0, "length": 1 << 20} for k in range(4)],
    }  # fmt: skip
    targets = [{"path": f"/d/f.{k}", "offset": 4096, "length": 1 << 20, "direct": True}
               for k in range(4)]  # fmt: skip
    lines = job_text({"backend": "psync", "targets": targets, "streams": [stream]}, title="t")
    lines = lines.splitlines()
    for line in (
        "filename=/d/f.0:/d/f.1:/d/f.2:/d/f.3",
        "file_service_type=random",
        "offset=4096",
        f"filesize={1 << 20}",
        f"size={4 << 20}",
        f"io_size={4 << 20}",
    ):
        assert line in lines, line  # fmt: skip
