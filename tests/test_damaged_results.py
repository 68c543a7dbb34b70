"""Stored results damaged outside tilemark (issue 28): a run.json or study.json whose fields
have the wrong types, or that is random bytes, and a run whose data files were deleted. Each
once crashed `runs` for every run, or `report`/`export`/`compare` with a traceback, or went
unnoticed; now the run or study is `damaged` with a one-line problem, the listing shows the
rest, and a command given it says one sentence (exit 2), or writes what is left and exits 1."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from report_runs import simple_plan, write_run, write_study
from tilemark.cli import main
from tilemark.store import results as result_docs
from tilemark.store.catalog import list_runs
from tilemark.store.rundoc import read_run_json
from tilemark.store.studies import list_studies

DATA = Path(__file__).parent / "data"


def edit(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def one_sentence(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tilemark: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def runs(tmp_path) -> tuple[Path, list[Path]]:
    results = tmp_path / "results"
    dirs = [write_run(results, simple_plan(("randrw",)), intervals=3, warmup=0) for _ in range(3)]
    return results, dirs


WRONG_TYPES = [
    (lambda d: d.update(summary="x"), "field summary is a string, not an object"),
    (lambda d: d.update(result={"streams": "no"}), "field result.streams is a string, not a list"),
    (lambda d: d["summary"]["total"].update(iops="fast"), "summary.total.iops is a string"),
    (lambda d: d["plan"].update(streams=[None]), "field plan.streams[0] is null"),
    (lambda d: d.update(argv=[1, 2]), "field argv[0] is a number, not a string"),
]


@pytest.mark.parametrize(("change", "said"), WRONG_TYPES)
def test_a_run_json_with_wrong_types_is_damaged_and_the_others_list(runs, capsys, change, said):
    results, dirs = runs
    edit(dirs[1] / "run.json", change)
    rows = {r["run_id"]: r for r in list_runs(results)}
    assert [rows[d.name]["status"] for d in dirs] == ["complete", "damaged", "complete"]
    assert said in rows[dirs[1].name]["problem"]
    assert main(["runs", "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert f"{dirs[1].name} damaged: " in out and said in out
    for args in (
        ["report", dirs[1].name, "-o", str(results.parent / "r.html")],
        ["export", dirs[1].name, "--csv", str(results.parent / "csv")],
        ["export", dirs[1].name, "--fio", str(results.parent / "job.fio")],
        ["compare", dirs[0].name, dirs[1].name],
        ["verify", dirs[1].name],
    ):
        assert main([*args, "--results", str(results)]) == 2, args
        line = one_sentence(capsys.readouterr().err)
        assert said in line, (args, line)


def test_every_run_json_tilemark_writes_has_the_shape_readers_rely_on(runs):
    _, dirs = runs
    for run_dir in [*dirs, *sorted((DATA / "results-v1").glob("2*"))]:
        assert result_docs.run_problem(read_run_json(run_dir)) is None


@pytest.fixture
def study(tmp_path) -> tuple[Path, Path]:
    results = tmp_path / "results"
    return results, write_study(results, counts=(1, 2))


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (os.urandom(300), "cannot be read as JSON"),
        (b'{"steps": "all"}', "field steps is a string, not a list"),
        (b'{"steps": [{"tiles": "two"}]}', "field steps[0].tiles is a string, not a number"),
        (b'{"tile": {"applications": 3}}', "field tile.applications is a number, not a list"),
        (b"[" * 100_000 + b"]" * 100_000, "cannot be read as JSON"),
    ],
)
def test_a_damaged_study_json_is_one_sentence_and_lists_as_damaged(study, capsys, content, said):
    results, study_dir = study
    assert result_docs.study_problem(json.loads((study_dir / "study.json").read_text())) is None
    (study_dir / "study.json").write_bytes(content)
    (row,) = list_studies(results)
    assert row["status"] == "damaged" and said in row["problem"]
    for args in (
        ["report", study_dir.name, "-o", str(results.parent / "s.html")],
        ["export", study_dir.name, "--csv", str(results.parent / "csv")],
        ["compare", study_dir.name, study_dir.name],
    ):
        assert main([*args, "--results", str(results)]) == 2, args
        line = one_sentence(capsys.readouterr().err)
        assert f"study {study_dir.name} is damaged" in line and said in line, line
    assert main(["studies", "--results", str(results)]) == 0


@pytest.mark.parametrize("name", ["intervals.parquet", "devices.parquet"])
def test_a_run_whose_data_file_was_deleted_is_damaged_and_says_which(tmp_path, capsys, name):
    results = tmp_path / "results"
    status = main([
        "run", "--target", str(tmp_path / "t.dat"), "--size", "4m", "--backend", "null",
        "--duration", "0.3", "--interval", "0.1", "--results", str(results),
    ])  # fmt: skip
    assert status == 0
    (run_dir,) = results.glob("2*")
    assert (run_dir / name).is_file()
    (run_dir / name).unlink()
    capsys.readouterr()
    (row,) = list_runs(results)
    assert row["status"] == "damaged"
    assert row["problem"] == f"{name} is missing (run.json says complete)"
    # What is left is written, the damage said, and the exit status says the output is short.
    csv = tmp_path / "csv"
    assert main(["export", run_dir.name, "--csv", str(csv), "--results", str(results)]) == 1
    err = capsys.readouterr().err
    assert f"is damaged: {name} is missing" in err and "Traceback" not in err
    assert (csv / "streams.csv").is_file()
    report = ["report", run_dir.name, "-o", str(tmp_path / "r.html"), "--results", str(results)]
    assert main(report) == 1
    assert f"{name} is missing" in capsys.readouterr().err
    assert (tmp_path / "r.html").is_file()
