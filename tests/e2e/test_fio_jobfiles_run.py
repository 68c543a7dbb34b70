"""A fio job over several files of its own (nrfiles), translated and run: tilemark makes the
files fio would make (names and sizes) and spreads each job's IOs over its own files
(docs/fio.md, "Several files per job")."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("tilemark._engine", reason="the engine is not built (make build)")

from tilemark.cli import main  # noqa: E402

pytestmark = pytest.mark.quick


def test_nrfiles_jobs_run_over_the_files_fio_would_make(tmp_path, capsys):
    job = tmp_path / "nr.fio"
    job.write_text(
        f"[global]\nrw=randread\nbs=4k\nnrfiles=4\nsize=512k\ndirectory={tmp_path / 'd'}\n"
        "[job]\nnumjobs=2\n"
    )
    (tmp_path / "d").mkdir()
    assert main(["run", str(job), "--results", str(tmp_path / "r"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    run = json.loads((tmp_path / "r" / out["run_id"] / "run.json").read_text())
    names = sorted(p.name for p in (tmp_path / "d").iterdir())
    assert names == [f"job.{c}.{k}" for c in (0, 1) for k in range(4)]
    # each file holds the 128 KiB fio gives it (size / nrfiles), after tilemark's header
    sizes = {p.stat().st_size for p in (tmp_path / "d").iterdir()}
    assert len(sizes) == 1 and 128 << 10 <= sizes.pop() <= (128 << 10) + 8192
    streams = {s["name"]: s["read"]["ops"] for s in run["summary"]["streams"]}
    assert streams == {"job0": 128, "job1": 128}  # size bytes each, in 4 KiB reads
    per_file = {t["name"]: t["read_ops"] for t in run["summary"]["targets"]}
    for c in (0, 1):
        mine = [per_file[f"job.{c}.{k}"] for k in range(4)]
        assert sum(mine) == 128 and min(mine) > 0, mine  # every file of its own, none other
