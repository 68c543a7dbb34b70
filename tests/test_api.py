"""tilemark.api: the worked example of docs/python.md runs as written, and the API refuses bad
input with the CLI's sentences."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tilemark import api
from tilemark.errors import UsageError

DOC = Path(__file__).resolve().parents[1] / "docs" / "python.md"


def doc_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_python_docs_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    blocks = doc_blocks()
    assert len(blocks) == 2
    scope: dict = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), scope)  # noqa: S102 (our own documentation)
    run, mixed, study = scope["run"], scope["mixed"], scope["study"]
    # The runs are real: bytes on disk and counts that agree between tables.
    assert (tmp_path / "scratch.dat").stat().st_size == 4096 + 64 * 2**20
    streams = {(r["stream"], r["op"]): r for r in mixed.streams().to_pylist()}
    assert set(streams) == {("oltp", "read"), ("oltp", "write"), ("log", "write")}
    assert 150 <= streams[("log", "write")]["ops"] <= 250  # 200/s for 1 s
    # A percentile of merged histograms lies between the parts' own percentiles.
    parts = [mixed.percentile(99.9, stream=s, op=o) for s, o in streams]
    assert min(parts) <= scope["both"] <= max(parts)
    steps = study.steps().to_pylist()
    passing = [s["key"] for s in steps if s["verdict"] == "pass"]
    # On a loaded 2-core machine even null IO can miss a latency limit: the answer is what
    # the steps say, whatever they say.
    assert study.answer == (max(passing) if passing else None)
    assert [r.id for r in study.runs()] == [s["run_id"] for s in steps]
    assert run.doc["argv"][0] == "tilemark.api.run"


def test_streams_and_percentiles_agree_with_the_summary(tmp_path):
    run = api.run(
        target=str(tmp_path / "t.dat"),
        size="16m",
        rw="randrw",
        qd=4,
        duration="1s",
        results=str(tmp_path / "r"),
    )
    summary = run.summary["streams"][0]
    table = {r["op"]: r for r in run.streams().to_pylist()}
    for op in ("read", "write"):
        assert table[op]["ops"] == summary[op]["ops"]
        # Closed loop: the latency is service time, as the summary reports it.
        assert table[op]["p99_ms"] == pytest.approx(summary[op]["service"]["p99_ms"], rel=1e-9)
    both = run.histogram()
    assert both.n == summary["read"]["ops"] + summary["write"]["ops"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"qd": 0}, "--qd"),
        ({"frobnicate": 1}, "frobnicate is not an option of run"),
        ({"tile_count": 2}, "tile runs are api.tiles"),
        ({"rw": "sideways"}, "--rw"),
    ],
)
def test_bad_options_are_the_cli_sentences(tmp_path, kwargs, message):
    with pytest.raises(UsageError, match=message):
        api.run(target=str(tmp_path / "t.dat"), size="16m", results=str(tmp_path / "r"), **kwargs)
    assert not (tmp_path / "t.dat").exists()  # refused before any IO


def test_opening_what_is_not_there(tmp_path):
    with pytest.raises(Exception, match="no run|not found|No run"):
        api.open_run("20990101-000000-zzzz", results=tmp_path)
    run = api.run(
        target=str(tmp_path / "t.dat"), size="16m", duration="0.5s", results=str(tmp_path / "r")
    )
    with pytest.raises(UsageError, match="has no stream 'nope'"):
        run.percentile(99, stream="nope")
    with pytest.raises(UsageError, match="is a run; use open_run"):
        api.open_study(run.id, results=tmp_path / "r")


def test_every_command_is_a_python_call(tmp_path):
    """tiles, repeat, sweep, matrix, curve and precondition run through the same commands as
    the CLI (null backend: only tilemark's own work), and each stores what it says."""
    target, results = str(tmp_path / "t.dat"), str(tmp_path / "r")
    fast = {"duration": "0.3s", "interval": "0.1s", "backend": "null"}
    tiles = api.tiles(1, target=target, capacity="64m", warmup="0", **fast, results=results)
    apps = tiles.summary["applications"]
    assert {a["app"] for a in apps["applications"]} == {"mail", "oltp", "dss", "web", "backup"}
    assert tiles.doc["argv"][0] == "tilemark.api.tiles"
    sweep = api.sweep(target=target, size="8m", sweep_qd="1,2", **fast, results=results)
    assert [p["qd"] for p in sweep.doc["points"]] == [1, 2]
    assert (sweep.dir / "points.csv").is_file()  # stored by the command, not the CLI
    matrix = api.matrix(
        target=target, size="8m", small_qd="1", large_streams="0,1", **fast, results=results
    )
    assert matrix.doc["large_levels"] == [0, 1] and len(matrix.runs()) == 2
    repeat = api.repeat(2, target=target, size="8m", rw="randread", **fast, results=results)
    assert len(repeat.runs()) == 2 and repeat.doc["kind"] == "repeat"
    records = api.precondition(
        precondition_targets=[str(tmp_path / "p.dat")], size="8m", passes=1, results=results
    )
    assert records[0]["passes_completed"] == 1 and records[0]["data_length"] == 8 * 2**20
    with pytest.raises(UsageError, match="--small-qd"):
        api.matrix(target=target, small_qd="", results=results)
