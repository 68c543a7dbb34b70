"""`tilemark runs` lists stored runs as a table or JSON."""

import json

import typer
from typer.testing import CliRunner

from engine_data import plan, result_for, simple_snapshots
from tilemark.cli.runs import runs
from tilemark.store import RunWriter
from tilemark.summary import summarize

app = typer.Typer()
app.command("runs")(runs)


@app.command("version")
def _version() -> None:
    """A second command so that `runs` is dispatched by name, as in the real CLI."""


def store_one_run(root):
    w = RunWriter(root, plan=plan(), workload={"name": "w"}, targets=[], argv=["tilemark"])
    snaps = simple_snapshots(2)
    w.add_snapshots(snaps)
    res = result_for([{"stream": 0, "read": snaps[0]["streams"][0]["read"]}], seconds=1.0)
    w.finish(res, summary=summarize(w.plan, res), complete=True)
    return w


def test_no_results_directory_is_a_friendly_message(tmp_path):
    out = CliRunner().invoke(app, ["runs", "--results", str(tmp_path / "none")])
    assert out.exit_code == 0
    assert f"no runs under {tmp_path / 'none'}" in out.output


def test_table_and_json(tmp_path):
    root = tmp_path / "results"
    w = store_one_run(root)
    table = CliRunner().invoke(app, ["runs", "--results", str(root)], env={"COLUMNS": "250"})
    assert table.exit_code == 0, table.output
    assert w.run_id in table.output and "complete" in table.output and "psync" in table.output

    listed = CliRunner().invoke(app, ["runs", "--results", str(root), "--json"])
    assert listed.exit_code == 0
    (row,) = json.loads(listed.output)
    assert row["run_id"] == w.run_id
    assert row["total_iops"] == 50.0  # 50 reads in a 1 s window


def test_narrow_terminal_keeps_ids_whole_and_names_the_run_directory(tmp_path):
    root = tmp_path / "results"
    w = store_one_run(root)
    out = CliRunner().invoke(app, ["runs", "--results", str(root)], env={"COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    assert w.run_id in out.output and "…" not in out.output
    assert f"run directories: {root.resolve()}/<id>" in out.output
    table_lines = [line for line in out.output.splitlines() if w.run_id in line or "IOPS" in line]
    assert table_lines and max(len(line) for line in table_lines) <= 80
