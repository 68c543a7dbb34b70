"""`tilemark runs` lists stored runs as a table or JSON; `runs rm` and `runs prune` delete
them; `tilemark studies` lists studies."""

import json
import os
import time
from pathlib import Path

import duckdb
import typer
from typer.testing import CliRunner

from engine_data import plan, result_for, simple_snapshots
from tilemark.cli import main
from tilemark.cli.runs import runs_app
from tilemark.run.summary import summarize
from tilemark.store.rundir import RunWriter

app = typer.Typer()
app.add_typer(runs_app, name="runs")


@app.command("version")
def _version() -> None:
    """A second command so that `runs` is dispatched by name, as in the real CLI."""


def store_one_run(root, kind="run"):
    w = RunWriter(
        root, plan=plan(), workload={"name": "w"}, targets=[], argv=["tilemark"], kind=kind
    )
    snaps = simple_snapshots(2)
    w.add_snapshots(snaps)
    res = result_for([{"stream": 0, "read": snaps[0]["streams"][0]["read"]}], seconds=1.0)
    w.finish(res, summary=summarize(w.plan, res), complete=True)
    return w


def cli(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_no_results_directory_is_a_friendly_message(tmp_path):
    out = CliRunner().invoke(app, ["runs", "--results", str(tmp_path / "none")])
    assert out.exit_code == 0
    assert f"no runs under {tmp_path / 'none'}" in out.output


def test_table_and_json(tmp_path):
    root = tmp_path / "results"
    w = store_one_run(root)
    table = CliRunner().invoke(
        app, ["runs", "--results", str(root)], env={"TILEMARK_COLUMNS": "250"}
    )
    assert table.exit_code == 0, table.output
    assert w.run_id in table.output and "complete" in table.output and "psync" in table.output

    listed = CliRunner().invoke(app, ["runs", "--results", str(root), "--json"])
    assert listed.exit_code == 0
    (row,) = json.loads(listed.output)
    assert row["run_id"] == w.run_id
    assert row["total_iops"] == 50.0  # 50 reads in a 1 s window


def test_narrow_terminal_keeps_ids_whole_shows_kinds_and_names_the_run_directory(tmp_path):
    root = tmp_path / "results"
    runs = [store_one_run(root, kind) for kind in ("run", "tiles", "scale-step")]
    killed = RunWriter(root, plan=plan(), workload={}, targets=[], argv=["x"])
    killed.doc["process"] = {**killed.doc["process"], "pid": 2**22 + 3}  # a process long gone
    from tilemark.store.rundir import write_json_atomic

    write_json_atomic(killed.path / "run.json", killed.doc)
    out = CliRunner().invoke(app, ["runs", "--results", str(root)], env={"TILEMARK_COLUMNS": "80"})
    assert out.exit_code == 0, out.output
    assert all(w.run_id in out.output for w in runs) and "…" not in out.output
    assert f"run directories: {root.resolve()}/<id>" in out.output
    kinds = {w.run_id: line.split()[1] for w in runs for line in out.output.splitlines()
             if line.startswith(w.run_id)}  # fmt: skip
    assert kinds == {runs[0].run_id: "run", runs[1].run_id: "tiles", runs[2].run_id: "step"}
    table_lines = [
        line
        for line in out.output.splitlines()
        if (line[:2] == "20" and " killed: " not in line) or "IOPS" in line
    ]
    assert len(table_lines) == 5 and max(len(line) for line in table_lines) <= 80
    assert f"{killed.run_id} killed: the run never finished: process {2**22 + 3}" in out.output


def test_someone_elses_catalog_is_refused_with_exit_2(tmp_path, capsys):
    root = tmp_path / "results"
    store_one_run(root)
    (root / "catalog.duckdb").unlink()
    con = duckdb.connect(str(root / "catalog.duckdb"))
    con.execute("CREATE TABLE runs AS SELECT 42 AS answer")
    con.close()
    status, out, err = cli(capsys, "runs", "--results", str(root))
    assert status == 2 and out == ""
    assert err.startswith(f"tilemark: error: {root / 'catalog.duckdb'} is a DuckDB database")
    assert len(err.strip().splitlines()) == 1
    con = duckdb.connect(str(root / "catalog.duckdb"), read_only=True)
    assert con.execute("SELECT * FROM runs").fetchall() == [(42,)]
    con.close()


def test_rm_deletes_runs_and_their_catalog_rows(tmp_path, capsys):
    root = tmp_path / "results"
    a, b, c = (store_one_run(root) for _ in range(3))
    status, out, err = cli(capsys, "runs", "rm", "--results", str(root), a.run_id, b.run_id)
    assert status == 0, err
    assert f"deleted {a.run_id}: run, complete" in out and "deleted 2 runs" in out
    assert sorted(p.name for p in root.iterdir()) == sorted(["catalog.duckdb", c.run_id])
    con = duckdb.connect(str(root / "catalog.duckdb"), read_only=True)
    assert con.execute("SELECT run_id FROM runs").fetchall() == [(c.run_id,)]
    assert con.execute("SELECT count(*) FROM run_files").fetchone() == (1,)
    con.close()


def test_rm_refuses_what_is_not_a_whole_tilemark_run_and_deletes_nothing(tmp_path, capsys):
    root = tmp_path / "results"
    keep = store_one_run(root)
    rm = ("runs", "rm", "--results", str(root))
    status, _, err = cli(capsys, *rm, keep.run_id, "20200101-000000-abcd")
    assert status == 2 and "no run '20200101-000000-abcd'" in err and "nothing" not in err
    status, _, err = cli(capsys, *rm, keep.run_id[:-2])  # prefixes are not enough to delete
    assert status == 2
    (keep.path / "notes.txt").write_text("mine")
    status, _, err = cli(capsys, *rm, keep.run_id)
    assert status == 2 and "holds files tilemark did not write (notes.txt)" in err
    (keep.path / "notes.txt").unlink()
    mine = root / "my-results"
    mine.mkdir()
    (mine / "run.json").write_text("{}")
    status, _, err = cli(capsys, *rm, "my-results")
    assert status == 2 and "not named like a tilemark run" in err
    outside = tmp_path / "elsewhere"
    store_one_run(outside)
    (other,) = [d for d in outside.iterdir() if d.is_dir()]
    status, _, err = cli(capsys, *rm, str(other))
    assert status == 2 and "not a run directory directly under --results" in err
    assert keep.path.is_dir() and other.is_dir() and mine.is_dir()
    status, out, _ = cli(capsys, *rm, "--dry-run", keep.run_id)
    assert status == 0 and "would delete" in out and keep.path.is_dir()


def test_prune_deletes_old_runs_only(tmp_path, capsys):
    root = tmp_path / "results"
    old, new = store_one_run(root), store_one_run(root)
    doc = json.loads((old.path / "run.json").read_text())
    doc["started_at"] = "2020-01-01T00:00:00.000Z"
    (old.path / "run.json").write_text(json.dumps(doc))
    status, _, err = cli(capsys, "runs", "prune", "--older-than", "30 days", "--results", str(root))
    assert status == 2 and "--older-than must be a number with a unit" in err
    status, out, err = cli(capsys, "runs", "prune", "--older-than", "30d", "--results", str(root))
    assert status == 0, err
    assert f"deleted {old.run_id}" in out and new.run_id not in out
    assert not old.path.exists() and new.path.is_dir()
    listed = json.loads(cli(capsys, "runs", "--results", str(root), "--json")[1])
    assert [r["run_id"] for r in listed] == [new.run_id]


def write_study(root: Path, study_id: str, run_ids: list[str], **extra) -> Path:
    d = root / "studies" / study_id
    d.mkdir(parents=True)
    doc = {
        "schema_version": 1, "kind": "scale", "study_id": study_id,
        "started_at": f"2026-11-2{len(run_ids)}T10:00:00Z", "tile": {"name": "default"},
        "mode": "linear", "complete": True, "max_passing_tiles": 2,
        "steps": [{"tiles": i + 1, "run_id": r, "run_dir": str(root / r)}
                  for i, r in enumerate(run_ids)],
        **extra,
    }  # fmt: skip
    (d / "study.json").write_text(json.dumps(doc))
    return d


def test_studies_lists_studies_with_steps_and_result(tmp_path, capsys):
    root = tmp_path / "results"
    steps = [store_one_run(root, "scale-step").run_id for _ in range(3)]
    write_study(root, "20261121-100000-aaaa", steps[:1], complete=False, max_passing_tiles=None)
    write_study(root, "20261123-100000-bbbb", steps)
    write_study(root, "20261120-100000-dddd", steps[:1], kind="knob", knob="mail.mailboxes",
                max_passing_tiles=None, max_passing_value=2400.0)  # fmt: skip
    broken = root / "studies" / "20261122-100000-cccc"
    broken.mkdir()
    (broken / "study.json").write_text("{")
    (root / steps[2]).rename(root / ".gone")  # a step whose run was deleted by hand
    os.environ["TILEMARK_COLUMNS"] = "80"
    try:
        status, out, err = cli(capsys, "studies", "--results", str(root))
    finally:
        del os.environ["TILEMARK_COLUMNS"]
    assert status == 0, err
    lines = out.splitlines()
    newest = next(line for line in lines if line.startswith("20261123-100000-bbbb"))
    assert "3 (1 gone)" in newest and "max 2 tiles" in newest and "complete" in newest
    oldest = next(line for line in lines if line.startswith("20261121-100000-aaaa"))
    assert "no tile count passed" in oldest and "incomplete" in oldest
    knob = next(line for line in lines if line.startswith("20261120-100000-dddd"))
    assert "knob" in knob and "max mail.mailboxes=2400" in knob
    assert "20261122-100000-cccc damaged: " in out and "cannot be read as JSON" in out
    table = [line for line in lines if line[:2] == "20" and "damaged:" not in line]
    assert len(table) == 4 and max(len(line) for line in table) <= 80
    status, out, _ = cli(capsys, "runs", "rm", "--results", str(root), steps[0])
    assert status == 0 and "(a step of study 20261123-100000-bbbb)" in out


def test_runs_rm_keeps_catalog_rows_in_step_with_a_listing_in_between(tmp_path, capsys):
    root = tmp_path / "results"
    a = store_one_run(root)
    time.sleep(0.01)
    b = store_one_run(root)
    assert [
        r["run_id"] for r in json.loads(cli(capsys, "runs", "--results", str(root), "--json")[1])
    ] == [b.run_id, a.run_id]
    cli(capsys, "runs", "rm", "--results", str(root), b.run_id)
    listed = json.loads(cli(capsys, "runs", "--results", str(root), "--json")[1])
    assert [r["run_id"] for r in listed] == [a.run_id]


def test_rm_with_the_catalog_held_elsewhere_deletes_nothing_and_says_why(
    tmp_path, capsys, monkeypatch
):
    import subprocess
    import sys

    from tilemark.store import catalog

    root = tmp_path / "results"
    run = store_one_run(root)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
         "print('ready', flush=True); time.sleep(60)", str(root / "catalog.duckdb")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "ready"
        monkeypatch.setattr(catalog, "LOCK_WAIT_S", 0.3)
        status, out, err = cli(capsys, "runs", "rm", "--results", str(root), run.run_id)
    finally:
        holder.kill()
        holder.wait()
    # Whose catalog it is cannot be checked while another process holds it: nothing is deleted.
    assert status == 1 and out == ""
    assert f"in use by another tilemark process (held by process {holder.pid})" in err
    assert run.path.is_dir()


def test_a_catalog_update_failing_after_deletion_is_a_note(tmp_path, capsys, monkeypatch):
    from tilemark.store import catalog

    root = tmp_path / "results"
    gone, kept = store_one_run(root), store_one_run(root)

    def locked(results_root, run_dirs):
        raise catalog.CatalogError("the run catalog is in use by another tilemark process")

    monkeypatch.setattr(catalog, "forget", locked)
    status, out, err = cli(capsys, "runs", "rm", "--results", str(root), gone.run_id)
    assert status == 0 and f"deleted {gone.run_id}" in out
    assert "note: the catalog keeps their rows until the next `tilemark runs`" in err
    monkeypatch.undo()
    listed = json.loads(cli(capsys, "runs", "--results", str(root), "--json")[1])
    assert [r["run_id"] for r in listed] == [kept.run_id]


def test_rm_and_prune_delete_verified_and_cluster_runs_tilemark_wrote(tmp_path, capsys):
    """Issue 28: tilemark's own verified runs (verify.journal) and cluster runs (hosts/NAME/)
    were refused as holding "files tilemark did not write"."""
    root = tmp_path / "results"
    verified, cluster, old = store_one_run(root), store_one_run(root), store_one_run(root)
    (verified.path / "verify.journal").write_bytes(b"TILEMARK-JOURNAL\n{}")
    (verified.path / "verify.1.journal").write_bytes(b"TILEMARK-JOURNAL\n{}")
    host = cluster.path / "hosts" / "h0"
    host.mkdir(parents=True)
    for name in ("intervals.parquet", "devices.parquet", "host.arrows", "verify.journal"):
        (host / name).write_bytes(b"x")
    status, out, err = cli(capsys, "runs", "rm", "--results", str(root), verified.run_id,
                           cluster.run_id)  # fmt: skip
    assert status == 0, err
    assert not verified.path.exists() and not cluster.path.exists()
    # Something foreign anywhere in it still keeps a run from being deleted.
    (old.path / "hosts" / "h0").mkdir(parents=True)
    (old.path / "hosts" / "h0" / "notes.txt").write_text("mine")
    status, _, err = cli(capsys, "runs", "rm", "--results", str(root), old.run_id)
    assert status == 2 and "did not write (hosts/h0/notes.txt)" in err
    assert old.path.is_dir()


def test_prune_leaves_a_symlinked_run_directory_and_its_target_alone(tmp_path, capsys):
    """Issue 28: pruning a run directory that is a link renamed the link to .deleting-... and
    said the run was only partly deleted."""
    root = tmp_path / "results"
    elsewhere = tmp_path / "elsewhere"
    real = store_one_run(elsewhere)
    doc = json.loads((real.path / "run.json").read_text())
    doc["started_at"] = "2020-01-01T00:00:00.000Z"
    (real.path / "run.json").write_text(json.dumps(doc))
    root.mkdir()
    (root / real.run_id).symlink_to(real.path)
    status, out, err = cli(capsys, "runs", "prune", "--older-than", "30d", "--results", str(root))
    assert status == 0, err
    assert f"{real.run_id} is a symbolic link" in out and "partly" not in out + err
    assert sorted(p.name for p in root.iterdir() if p.name != "catalog.duckdb") == [real.run_id]
    assert (root / real.run_id).is_symlink() and (real.path / "run.json").is_file()


def test_a_signal_during_rm_finishes_the_run_being_deleted_and_keeps_the_rest(
    tmp_path, capsys, monkeypatch
):
    import shutil
    import signal

    from tilemark.store import manage

    root = tmp_path / "results"
    runs = [store_one_run(root) for _ in range(3)]
    real_rmtree = shutil.rmtree

    def rmtree_then_sigterm(path, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # arrives in the middle of deleting the first
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(manage.shutil, "rmtree", rmtree_then_sigterm)
    status, out, err = cli(capsys, "runs", "rm", "--results", str(root), *(r.run_id for r in runs))
    assert status == 143, err
    assert f"deleted {runs[0].run_id}" in out and "deleted 1 run" in out
    assert "interrupted: 2 runs not deleted" in err
    assert not runs[0].path.exists() and runs[1].path.is_dir() and runs[2].path.is_dir()
    assert not [p for p in root.iterdir() if p.name.startswith(".deleting-")]
    listed = json.loads(cli(capsys, "runs", "--results", str(root), "--json")[1])
    assert sorted(r["run_id"] for r in listed) == sorted(r.run_id for r in runs[1:])
