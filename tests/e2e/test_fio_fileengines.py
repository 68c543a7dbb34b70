"""fio's dircreate, dirstat and dirdelete examples (examples/*-ioengine.fio at f5344384, as
written) run through `tilemark run JOB.fio` on a temporary directory: what each reports equals
what is on disk afterwards (docs/fio.md "fio's file and directory engines")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("tilemark._engine", reason="the engine is not built (make build)")

from tilemark.cli import main  # noqa: E402

pytestmark = pytest.mark.quick

JOBS = "".join(f"[t{i}]\n" for i in range(6))
DIRCREATE = (
    "[global]\ncreate_on_open=1\nnrfiles=30\nioengine=dircreate\nfallocate=none\n"
    "filesize=4k\nopenfiles=1\n" + JOBS
)
DIRSTAT = "[global]\nioengine=dirstat\nnumjobs=10\nfilesize=4k\nnrfiles=5\nthread\n" + JOBS
DIRDELETE = "[global]\nioengine=dirdelete\nfilesize=4k\nnrfiles=200\nunlink=0\n" + JOBS


def run(capsys, job: Path) -> dict:
    assert main(["run", str(job), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def entries(d: Path) -> tuple[int, int]:
    """(directories, files) named as a set's entries in d."""
    names = [p for p in d.glob("f*")]
    return sum(p.is_dir() for p in names), sum(p.is_file() for p in names)


def ops(stream: dict, op: str) -> int:
    return next(o for o in stream["ops"] if o["op"] == op)["ops"]


def test_fios_directory_examples_make_stat_and_remove_what_they_report(
    tmp_path, capsys, monkeypatch
):
    # fio places its files in the current directory without `directory`; so does tilemark.
    monkeypatch.chdir(tmp_path)
    job = tmp_path / "dircreate-ioengine.fio"
    job.write_text(DIRCREATE)
    r = run(capsys, job)
    assert r["status"] == "complete"
    for s in r["streams"]:
        assert ops(s, "mkdir") == 30  # nrfiles directories, each once (no skip, no error)
        assert entries(tmp_path / s["name"]) == (30, 0)
    job.write_text(DIRSTAT)
    r = run(capsys, job)
    for s, f in zip(r["streams"], r["filesets"], strict=True):
        assert ops(s, "statdir") == 50  # numjobs 10 x nrfiles 5, each once
        assert entries(tmp_path / s["name"]) == (50, 0) == (f["dirs"], f["files"])
    job.write_text(DIRDELETE)
    r = run(capsys, job)
    for s, f in zip(r["streams"], r["filesets"], strict=True):
        assert (
            ops(s, "rmdir") == 200
            and next(o for o in s["ops"] if o["op"] == "rmdir")["errors"] == {}
        )
        assert entries(tmp_path / s["name"]) == (0, 0) == (f["dirs"], f["files"])
