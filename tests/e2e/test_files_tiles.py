"""File applications in tiles and file runs in the run store (docs/files.md, docs/tiles.md),
end to end with real IO on a tmp directory: a tile holding a block application and a file
application reports both, counts the file operations the disk shows afterwards, and fails the
file application's impossible QoS; a file run is stored, listed by `tilemark runs` and
rendered by `tilemark report`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("tilemark._engine", reason="the engine is not built (make build)")

from tilemark.cli import main  # noqa: E402

pytestmark = [pytest.mark.quick, pytest.mark.cost(13)]

BLOCK_PROFILE = """
[profile]
name = "reader"
metric = "iops('r')"
metric_unit = "IOPS"
[scale]
iops = 200
[[stream]]
name = "r"
rate = "iops"
rw = "randread"
bs = "4k"
arrival = "constant"
[qos.read_p99]
stream = "r"
op = "read"
stat = "p99"
max_ms = 1000
"""

# Messages created, appended to and deleted; a stat whose bound no storage meets.
FILE_WORKLOAD = """
name = "mailish"
[[fileset]]
name = "mail"
path = "/unused"
files = 200
prealloc = 50
size = "4k"
[[filestream]]
name = "mail"
fileset = "mail"
sequence = "create,append,close,open,read,close,delete,stat"
threads = 2
append = "4k"
unit = "messages"
[qos.messages]
stream = "mail"
op = "loop"
stat = "rate"
min_rate = 1
[qos.stat_max]
stream = "mail"
op = "stat"
stat = "max"
max_ms = 100000
"""


def _entries(root: Path) -> int:
    return sum(1 for p in root.iterdir() if p.name.startswith("f"))


def test_a_tile_holds_a_block_app_and_a_file_app(tmp_path, capsys):
    (tmp_path / "reader.toml").write_text(BLOCK_PROFILE)
    (tmp_path / "mailish.toml").write_text(FILE_WORKLOAD)
    sets = tmp_path / "sets"
    sets.mkdir()
    (tmp_path / "tile.toml").write_text(
        '[tile]\nname = "mixed"\n[[app]]\nprofile = "reader.toml"\n'
        f'[[app]]\nfiles = "mailish.toml"\nname = "mail"\ndir = "{sets}"\n'
    )
    results = tmp_path / "results"
    status = main([
        "run", "--tiles", "2", "--tile", str(tmp_path / "tile.toml"),
        "--target", str(tmp_path / "t.dat"), "--capacity", "8m", "--duration", "2",
        "--warmup", "0", "--max-duration", "8", "--json", "--results", str(results),
        # The impossible bound: no stat returns in a picosecond.
        "--set", "mail.qos.stat_max.max_ms=0.000000001",
    ])  # fmt: skip
    out, err = capsys.readouterr()
    doc = json.loads(out)
    apps = doc["summary"]["applications"]
    assert status == 3, err  # QoS failed, the run itself went fine
    # An extended run stops once decided, and the file applications are judged over the
    # block run's measurement (to an interval: the file run's are cut on the same 1 s).
    assert doc["summary"]["ended_by"] == "decided"
    measured = apps["measurement"]["measured_s"]
    assert measured < 5 and abs(doc["summary"]["files"]["seconds"] - measured) < 0.5
    got = {(i["tile"], i["app"]): i for i in apps["instances"]}
    assert set(got) == {(1, "reader"), (2, "reader"), (1, "mail"), (2, "mail")}
    for k in (1, 2):
        block, files = got[(k, "reader")], got[(k, "mail")]
        assert block["passed"] and block["metric"] > 100, block
        assert files["metric_unit"] == "messages/s" and files["metric"] > 0
        assert not files["passed"] and files["verdict"] == "fail"
        assert [c["criterion"] for c in files["criteria"] if not c["passed"]] == ["stat_max"]
        assert any("stat max" in f for f in files["failed"])
    assert not apps["passed"] and any(f.startswith("t1.mail: ") for f in apps["failed"])
    per_app = {a["app"]: a for a in apps["applications"]}
    assert per_app["mail"]["instances"] == 2 and per_app["mail"]["passed"] is False
    # Each tile copy has its own set directory inside the one handed over, and what is on
    # disk is the prepared half plus creates minus deletes, as the engine counted.
    files = doc["summary"]["files"]
    for k in (1, 2):
        root = sets / f"t{k}.mail.mail"
        stream = next(s for s in files["streams"] if s["name"] == f"t{k}.mail.mail")
        assert stream["app"] == f"t{k}.mail"
        ops = {o["op"]: o["ops"] for o in stream["ops"]}
        assert ops["create"] > 0 and ops["delete"] > 0
        # The window is the block run's; the disk also shows the file run's last moments.
        whole = stream["run_ops"]
        assert whole["create"] >= ops["create"] and whole["delete"] >= ops["delete"]
        assert _entries(root) == 100 + whole["create"] - whole["delete"]
        state = next(f for f in files["filesets"] if f["name"] == f"t{k}.mail.mail")
        assert state["files"] == _entries(root)
    assert sorted(p.name for p in sets.iterdir()) == ["t1.mail.mail", "t2.mail.mail"]
    # Stored with the run; the report has the file-operations section.
    run_id = doc["run_id"]
    stored = json.loads((results / run_id / "run.json").read_text())
    assert stored["summary"]["files"]["streams"][0]["ops"]
    assert main(["report", run_id, "--results", str(results)]) == 0
    html = (results / run_id / "report.html").read_text()
    assert "File operations" in html and "t1.mail.mail" in html


def test_a_file_run_is_stored_listed_and_reported(tmp_path, capsys):
    w = tmp_path / "w.toml"
    timed = 'name = "mailish"\nduration = "0.6s"\ninterval = "0.2s"'
    w.write_text(FILE_WORKLOAD.replace("/unused", str(tmp_path / "set")).replace(
        'name = "mailish"', timed, 1))  # fmt: skip
    results = tmp_path / "results"
    assert main(["files", "run", str(w), "--results", str(results)]) == 0
    out = capsys.readouterr().out
    run_id = next(line.split()[1] for line in out.splitlines() if line.startswith("run "))
    doc = json.loads((results / run_id / "run.json").read_text())
    assert doc["kind"] == "files" and doc["status"] == "complete"
    mail = doc["summary"]["files"]["streams"][0]
    ops = {o["op"]: o["ops"] for o in mail["ops"]}
    assert doc["summary"]["total"]["ops"] == sum(ops.values())
    assert _entries(tmp_path / "set") == 100 + ops["create"] - ops["delete"]
    assert main(["runs", "--results", str(results)]) == 0
    listing = capsys.readouterr().out
    assert run_id in listing and "files" in listing
    assert main(["report", run_id, "--results", str(results)]) == 0
    html = (results / run_id / "report.html").read_text()
    assert "File operations" in html and "messages" in html
    import pyarrow.parquet as pq

    rows = pq.read_table(results / run_id / "file_intervals.parquet").to_pylist()
    assert sum(r["ops"] for r in rows if r["op"] == "create") == ops["create"]
    assert {r["op"] for r in rows} >= {"create", "delete", "loop"}
    # `export --csv` writes the operations and their intervals.
    assert main(["export", run_id, "--results", str(results), "--csv", str(tmp_path / "csv")]) == 0
    exported = (tmp_path / "csv" / "file_ops.csv").read_text().splitlines()
    assert exported[0].startswith("stream,app,op,ops") and len(exported) == 1 + len(mail["ops"])
    assert (tmp_path / "csv" / "file_intervals.csv").exists()
    from tilemark import api

    run = api.open_run(run_id, results)
    assert dict(zip(*run.file_ops_df()[["op", "ops"]].T.values, strict=True)) == ops
    assert len(run.file_intervals_df()) == len(rows)


# Small pages read at a constant 20 a second, 80% of them from a fifth of the files: a
# target rate (so the application counts in the score) and loose bounds.
WEB_WORKLOAD = """
name = "webish"
[[fileset]]
name = "htdocs"
path = "/unused"
depth = 1
width = 4
files = 100
size = "4k"
[[filestream]]
name = "pages"
fileset = "htdocs"
sequence = "open,read,close"
threads = 2
select = "hot:0.2:0.8"
rate = 20
arrival = "constant"
unit = "pages"
[qos.pages]
stream = "pages"
op = "loop"
stat = "rate"
min_rate = 10
[qos.page_p99]
stream = "pages"
op = "loop"
stat = "p99"
max_ms = 10000
"""


def _files_only_tile(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "mailish.toml").write_text(FILE_WORKLOAD)
    (tmp_path / "webish.toml").write_text(WEB_WORKLOAD)
    sets = tmp_path / "sets"
    sets.mkdir()
    tile = tmp_path / "nas.toml"
    tile.write_text(
        '[tile]\nname = "nas"\n'
        f'[[app]]\nfiles = "mailish.toml"\nname = "mail"\ndir = "{sets}"\n'
        f'[[app]]\nfiles = "webish.toml"\nname = "web"\ndir = "{sets}"\n'
    )
    return tile, sets


def test_a_tile_of_file_applications_only_runs_without_a_target(tmp_path, capsys):
    tile, sets = _files_only_tile(tmp_path)
    results = tmp_path / "results"
    status = main(["run", "--tiles", "2", "--tile", str(tile), "--duration", "2", "--interval",
                   "0.25", "--warmup", "0", "--json", "--results", str(results)])  # fmt: skip
    out, err = capsys.readouterr()
    assert status == 0, err
    doc = json.loads(out)
    apps = doc["summary"]["applications"]
    # No block stream ran; the engine kept the run's time and the file run was the IO.
    assert doc["summary"]["streams"] == [] and "no block streams" in err
    # The live view's lines show the file streams.
    assert any(ln.startswith("[measure") and "t2.web.pages" in ln for ln in err.splitlines())
    assert apps["tiles"] == 2 and apps["verdict"] == "pass" and apps["passed"]
    got = {(i["tile"], i["app"]): i for i in apps["instances"]}
    assert set(got) == {(k, a) for k in (1, 2) for a in ("mail", "web")}
    measured = apps["measurement"]["measured_s"]
    assert abs(doc["summary"]["files"]["seconds"] - measured) < 0.5
    # The run's rate is its file operations' (ops/s as IOPS, as a file run's).
    ops = sum(o["ops"] for s in doc["summary"]["files"]["streams"] for o in s["ops"])
    assert doc["summary"]["total"]["iops"] == pytest.approx(ops / measured, rel=0.2)
    for k in (1, 2):
        assert got[(k, "mail")]["metric"] > 0 and got[(k, "mail")]["ratio"] is None
        web = got[(k, "web")]
        assert web["metric_unit"] == "pages/s" and web["target_metric"] == 20
        assert 0.8 < web["ratio"] <= 1.05, web
        # Every criterion carries its interval (the rate, as a share of its 10/s minimum:
        # batch means of its 8 intervals).
        pages = next(c for c in web["criteria"] if c["criterion"] == "pages")
        assert pages["decision"] == "pass"
        assert 1 < pages["ci_low"] <= pages["value"] <= pages["ci_high"] < 2.5, pages
    # The score: per tile the geometric mean of the applications with a target (web).
    assert apps["score"] == pytest.approx(got[(1, "web")]["ratio"] + got[(2, "web")]["ratio"])
    per_app = {a["app"]: a for a in apps["applications"]}
    assert per_app["web"]["worst_latency_ms"]["page_p99"] > 0
    assert sorted(p.name for p in sets.iterdir()) == [
        f"t{k}.{a}" for k in (1, 2) for a in ("mail.mail", "web.htdocs")
    ]
    run_id = doc["run_id"]
    assert main(["report", run_id, "--results", str(results)]) == 0
    assert "t2.web.pages" in (results / run_id / "report.html").read_text()
    # A target is for block applications: refused in one sentence, nothing made.
    status = main(["run", "--tiles", "1", "--tile", str(tile), "--target",
                   str(tmp_path / "t.dat"), "--duration", "1"])  # fmt: skip
    assert status == 2 and not (tmp_path / "t.dat").exists()
    assert "file applications only" in capsys.readouterr().err


def test_a_scaling_study_of_file_applications_only(tmp_path, capsys):
    tile, _ = _files_only_tile(tmp_path)
    results = tmp_path / "results"
    status = main(["scale", str(tile), "--tiles", "1..2", "--duration", "1", "--warmup", "0",
                   "--max-duration", "1", "--results", str(results)])  # fmt: skip
    out, err = capsys.readouterr()
    assert status == 0, err
    (study_dir,) = (results / "studies").iterdir()
    study = json.loads((study_dir / "study.json").read_text())
    assert [s["tiles"] for s in study["steps"]] == [1, 2]
    assert all(s["passed"] for s in study["steps"]) and study["max_passing_tiles"] == 2
    assert study["steps"][1]["score"] == pytest.approx(2, rel=0.2)
    apps = {a["app"] for a in study["steps"][1]["applications"]}
    assert apps == {"mail", "web"}
    assert main(["report", study_dir.name, "--results", str(results)]) == 0


def test_a_hot_set_takes_its_share_of_the_picks(tmp_path, capsys):
    # 2,000 one-byte appends, each to a file opened by the hot-set selection: what each file
    # grew by is how often it was picked (one thread: no file is ever busy).
    w = tmp_path / "hot.toml"
    w.write_text(f"""
name = "hot"
duration = "20s"
[[fileset]]
name = "s"
path = "{tmp_path / "set"}"
depth = 1
width = 5
files = 100
size = "0"
[[filestream]]
name = "hot"
sequence = "open,append,close"
select = "hot:0.2:0.8"
append = "1"
limit = 2000
""")
    assert main(["files", "run", str(w), "--results", str(tmp_path / "r")]) == 0
    sizes = sorted((p.stat().st_size for p in (tmp_path / "set").rglob("f*")), reverse=True)
    assert len(sizes) == 100 and sum(sizes) == 2000
    share = sum(sizes[:20]) / 2000
    assert 0.75 < share < 0.85, share  # 0.8 +- 5 standard deviations
    # The hot files are spread over the set's five directories.
    hot = sorted((p for p in (tmp_path / "set").rglob("f*")), key=lambda p: -p.stat().st_size)
    assert len({p.parent.name for p in hot[:20]}) == 5


@pytest.mark.cluster
def test_a_cluster_run_of_file_applications_is_refused_before_anything_is_made(tmp_path, capsys):
    pytest.importorskip("distributed", reason="cluster runs need distributed (make build)")
    tile, sets = _files_only_tile(tmp_path)
    status = main(["run", "--tiles", "1", "--tile", str(tile), "--cluster", "local:1",
                   "--duration", "1", "--results", str(tmp_path / "results")])  # fmt: skip
    assert status == 2
    assert "a --cluster run of a tile holding one is refused" in capsys.readouterr().err
    assert list(sets.iterdir()) == [] and not (tmp_path / "results").exists()
