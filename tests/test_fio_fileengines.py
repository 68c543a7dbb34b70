"""fio's file and directory engines translated into file workloads (tilemark.fio.fileengines,
docs/fio.md "fio's file and directory engines"). Each rule is taken from fio's source
(engines/fileoperations.c, commit f5344384) or its HOWTO, cited in the test. No IO here but
the parse of the translated TOML; tests/e2e/test_fio_fileengines.py runs them."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tilemark.cli import main
from tilemark.errors import UsageError
from tilemark.files.spec import parse_file_workload
from tilemark.fio.fileengines import translate_file_jobs
from tilemark.fio.translate import examine, toml_text, translate


def job(tmp_path: Path, text: str, name: str = "j.fio") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def doc_of(tmp_path: Path, text: str) -> tuple[dict, list[str]]:
    return translate_file_jobs(job(tmp_path, text))


# fio's examples (examples/<engine>-ioengine.fio at f5344384), as far as the translation goes.
EXAMPLES = {
    "filecreate": ("[global]\ncreate_on_open=1\nnrfiles=31250\nioengine=filecreate\n"
                   "fallocate=none\nfilesize=4k\nopenfiles=1\n"
                   + "".join(f"[t{i}]\n" for i in range(16))),
    "filestat": ("[global]\nioengine=filestat\nnumjobs=1\nfilesize=4k\nnrfiles=200\nthread\n"
                 + "".join(f"[t{i}]\n" for i in range(6))),
    "filedelete": ("[global]\nioengine=filedelete\nfilesize=4k\nnrfiles=200\nunlink=0\n"
                   + "".join(f"[t{i}]\n" for i in range(6))),
    "dircreate": ("[global]\ncreate_on_open=1\nnrfiles=30\nioengine=dircreate\nfallocate=none\n"
                  "filesize=4k\nopenfiles=1\n" + "".join(f"[t{i}]\n" for i in range(6))),
    "dirstat": ("[global]\nioengine=dirstat\nnumjobs=10\nfilesize=4k\nnrfiles=5\nthread\n"
                + "".join(f"[t{i}]\n" for i in range(6))),
    "dirdelete": ("[global]\nioengine=dirdelete\nfilesize=4k\nnrfiles=200\nunlink=0\n"
                  + "".join(f"[t{i}]\n" for i in range(6))),
}  # fmt: skip

# fileoperations.c: open_file() creates (open O_CREAT, or fio_mkdir for dir*), stat_file()
# stats, delete_file() unlinks or rmdirs; setup_dirs() makes the directories dirstat and
# dirdelete work on before the job runs; filestat/filedelete use generic_get_file_size, so
# fio lays their files out first (HOWTO ioengine: "You need to set 'filesize' and 'nrfiles',
# so that files will be created").
WANT = {
    "filecreate": ("files", 0, "sequence", "create,close", 31250, 1, 16),
    "filestat": ("files", 100, "ops", "stat", 200, 1, 6),
    "filedelete": ("files", 100, "ops", "delete", 200, 1, 6),
    "dircreate": ("dirs", 0, "ops", "mkdir", 30, 1, 6),
    "dirstat": ("dirs", 100, "ops", "statdir", 5, 10, 6),
    "dirdelete": ("dirs", 100, "ops", "rmdir", 200, 1, 6),
}


@pytest.mark.parametrize("engine", list(WANT))
def test_each_engine_becomes_a_set_and_a_stream_handling_every_file_once(tmp_path, engine):
    kind, prealloc, key, ops, nrfiles, numjobs, jobs = WANT[engine]
    doc, _ = doc_of(tmp_path, f"[global]\ndirectory={tmp_path}\n" + EXAMPLES[engine])
    assert len(doc["fileset"]) == len(doc["filestream"]) == jobs
    for fs, st in zip(doc["fileset"], doc["filestream"], strict=True):
        assert fs["path"] == str(tmp_path / fs["name"])  # HOWTO directory: the files' place
        assert fs.get("kind", "files") == kind and fs["prealloc"] == prealloc
        # HOWTO nrfiles: "Files are created for each thread separately" (numjobs clones).
        assert fs["files"] == nrfiles * numjobs and st["threads"] == numjobs
        assert st[key] == ops and st["select"] == "sequential"
        assert st["limit"] == nrfiles * numjobs  # the job ends when each file was handled
    # The document is a file workload tilemark reads (sizes: HOWTO filesize, 4k).
    w = parse_file_workload(doc, "test")
    if kind == "files":
        assert w.filesets[0].size.sizes[0][0] == 4096


@pytest.mark.parametrize("engine", list(WANT))
def test_fios_own_examples_translate(tmp_path, engine):
    outcome = examine(job(tmp_path, EXAMPLES[engine]))
    assert outcome.translation is not None, outcome.problems
    assert outcome.translation.doc["filestream"][0]["select"] == "sequential"


def test_laid_out_files_are_on_disk_before_the_run_unless_create_fsync_is_off(tmp_path):
    # filesetup.c extend_file() fsyncs each laid-out file when create_fsync is set; HOWTO
    # create_fsync: "fsync(2) the data file after creation. This is the default."
    doc, notes = doc_of(tmp_path, "[a]\nioengine=filedelete\nfilesize=4k\n")
    assert doc["fileset"][0]["sync"] is True and any("syncfs" in n for n in notes)
    doc, _ = doc_of(tmp_path, "[a]\nioengine=filestat\nfilesize=4k\ncreate_fsync=0\n")
    assert doc["fileset"][0]["sync"] is False
    # fio creates dircreate/filecreate entries in the run and setup_dirs() only mkdirs.
    for engine in ("filecreate", "dirstat"):
        doc, _ = doc_of(tmp_path, f"[a]\nioengine={engine}\nfilesize=4k\n")
        assert "sync" not in doc["fileset"][0]


def test_size_without_filesize_is_divided_among_the_files(tmp_path):
    # HOWTO nrfiles: "The size of files will be size divided by this unless explicit size is
    # specified by filesize."
    doc, _ = doc_of(tmp_path, "[a]\nioengine=filestat\nsize=1m\nnrfiles=4\n")
    assert doc["fileset"][0]["size"] == str(256 * 1024)


def test_what_fio_does_differently_is_said(tmp_path):
    doc, notes = doc_of(tmp_path, "[a]\nioengine=dirstat\nfilesize=4k\nstat_type=statx\n")
    text = "\n".join(notes)
    assert "statx(STATX_ALL)" in text  # fileoperations.c stat_file(): FIO_FILESTAT_STATX
    assert "mode 0700" in text  # setup_dirs(): fio_mkdir(f->file_name, 0700)
    _, notes = doc_of(tmp_path, EXAMPLES["dircreate"])
    assert any("S_IFDIR as mkdir's mode" in n for n in notes)  # open_file(): mkdir(S_IFDIR)
    _, notes = doc_of(tmp_path, EXAMPLES["filecreate"])
    assert any("O_CREAT|O_RDWR, mode 0600" in n for n in notes)  # open_file(): open(...)
    assert sum("create_on_open" in n for n in notes) == 1  # a [global] option: said once


def test_time_based_repeats_stats_but_is_refused_where_a_repeat_fails(tmp_path):
    # HOWTO time_based: run for the runtime, repeating the workload as many times as it takes.
    doc, _ = doc_of(tmp_path, "[a]\nioengine=filestat\nfilesize=4k\nruntime=3\ntime_based\n")
    assert doc["duration"] == 3 and "limit" not in doc["filestream"][0]
    # A second pass of filedelete unlinks files that are gone (delete_file(): ENOENT).
    with pytest.raises(UsageError, match="time_based cannot be translated.*ENOENT"):
        doc_of(tmp_path, "[a]\nioengine=filedelete\nfilesize=4k\nruntime=3\ntime_based\n")
    # HOWTO loops: "Run the specified number of iterations of this job."
    doc, _ = doc_of(tmp_path, "[a]\nioengine=dirstat\nfilesize=4k\nnrfiles=5\nloops=3\n")
    assert doc["filestream"][0]["limit"] == 15
    with pytest.raises(UsageError, match="loops cannot be translated.*EEXIST"):
        doc_of(tmp_path, "[a]\nioengine=dircreate\nfilesize=4k\nloops=2\n")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        # HOWTO directory: "You can specify a number of directories by separating the names
        # with a ':' character" (assigned to the clones).
        ("[a]\nioengine=filestat\nfilesize=4k\ndirectory=/x:/y\n", "directory cannot"),
        # HOWTO filesize: "May be a range".
        ("[a]\nioengine=filestat\nfilesize=1k-4k\n", "filesize cannot.*range"),
        ("[a]\nioengine=filestat\n", "neither filesize nor size"),
        ("[a]\nioengine=filestat\nfilesize=4k\nrw=randread\n", "rw cannot"),
        ("[a]\nioengine=filestat\nfilesize=4k\nbs=8k\n", "option bs cannot be translated"),
        (
            "[a]\nioengine=filestat\nfilesize=4k\nruntime=2\n[b]\nioengine=filestat\n"
            "filesize=4k\nruntime=3\n",
            "different runtimes",
        ),  # fmt: skip
    ],
)
def test_what_does_not_translate_is_one_sentence_naming_the_option(tmp_path, text, match):
    with pytest.raises(UsageError, match=match):
        doc_of(tmp_path, text)


def test_a_job_file_mixing_file_and_io_engines_is_refused(tmp_path):
    p = job(tmp_path, "[a]\nioengine=filestat\nfilesize=4k\n[b]\nioengine=psync\nrw=read\n")
    with pytest.raises(UsageError, match=r"job \[b\] does IO while \[a\] uses ioengine=filestat"):
        translate(p)


def test_import_fio_writes_a_file_workload_that_files_run_reads(tmp_path, capsys):
    p = job(tmp_path, f"[global]\ndirectory={tmp_path}\n" + EXAMPLES["dirstat"])
    out = tmp_path / "w.toml"
    assert main(["import-fio", str(p), "-o", str(out)]) == 0
    text = out.read_text()
    assert "# Run it with: tilemark files run" in text
    doc = tomllib.loads(text)
    w = parse_file_workload(doc, "w.toml")
    assert [s.ops for s in w.streams][0] == (("statdir", 1.0),)
    assert w.filesets[0].kind == "dirs" and w.streams[0].select == ("sequential", 0.0)
    assert toml_text(translate(p)) == text  # the same translation both ways


def test_tilemark_run_refuses_a_block_flag_for_file_jobs(tmp_path, capsys):
    p = job(tmp_path, EXAMPLES["dirstat"])
    assert main(["run", str(p), "--qd", "4"]) == 2
    err = capsys.readouterr().err
    assert "--qd applies to block workloads" in err and "Traceback" not in err
