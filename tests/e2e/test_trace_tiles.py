"""A trace as an application of a tile (`[[app]] trace = ...`, trace/tileapp.py): N tiles
replay N copies of the trace at disjoint offsets beside the profiles, at the trace's own
times; a scaling study asks how many of them fit. Small files, a few seconds each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilemark.cli import main
from tilemark.trace.iolist import read_list

from .test_replay import mixed_trace

pytestmark = pytest.mark.quick

MiB = 1 << 20


def tile_file(tmp: Path, trace: Path, extra: str = "") -> Path:
    path = tmp / "tile.toml"
    path.write_text(
        f'[tile]\nname = "traced"\n\n[[app]]\nprofile = "web"\n\n'
        f'[[app]]\ntrace = "{trace.name}"\nname = "pg"\ncapacity_weight = 2\n{extra}'
    )
    return path


def run_tiles(tmp: Path, tile: Path, tiles: int, capsys, *extra: str) -> tuple[int, dict, str]:
    status = main(
        ["run", "--tiles", str(tiles), "--tile", str(tile), "--target", str(tmp / "t.dat"),
         "--capacity", "64m", "--duration", "2", "--warmup", "0.5", "--interval", "0.5",
         "--results", str(tmp / "results"), "--json", *extra]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert out.strip(), err
    doc = json.loads(out[out.index("{") :])
    return status, json.loads((Path(doc["run_dir"]) / "run.json").read_text()), err


def test_tiles_replay_the_trace_in_each_tile_at_its_own_rate(tmp_path, capsys):
    trace = mixed_trace(tmp_path / "pg.parquet", 300, 1.0)  # 300 IOs a second, looped
    status, run, err = run_tiles(tmp_path, tile_file(tmp_path, trace), 2, capsys)
    assert status in (0, 3), err
    plan = run["plan"]
    replays = [s for s in plan["streams"] if s.get("ios")]
    assert [s["name"] for s in replays] == ["t1.pg.replay", "t2.pg.replay"]
    # disjoint regions, one per tile, inside the application's share of its tile
    regions = sorted((s["regions"][0]["offset"], s["regions"][0]["length"]) for s in replays)
    assert regions[0][0] + regions[0][1] <= regions[1][0]
    layout = run["summary"]["applications"]["layout"]["regions"]
    for (offset, length), tile in zip(regions, (1, 2), strict=True):
        (share,) = [r for r in layout if r["tile"] == tile and r["app"] == "pg"]
        assert share["offset"] <= offset and offset + length <= share["offset"] + share["length"]
    # the list in the run directory is the trace, remapped into the region
    listed = Path(replays[0]["ios"]["path"])
    assert listed.parent.name == "replay" and listed.parent.parent.name == run["run_id"]
    records = read_list(listed)
    data = records[records["op"] < 2]  # reads and writes
    assert len(records) == replays[0]["ios"]["count"] >= 300
    assert (data["offset"] + data["len"] <= regions[0][1]).all()
    # each tile's replay kept the trace's pace over the measurement (2 s of a 300/s trace,
    # 270 of them reads and writes): the engine counted them
    by_name = {s["name"]: s for s in run["summary"]["streams"]}
    for s in replays:
        ios = by_name[s["name"]]["read"]["ops"] + by_name[s["name"]]["write"]["ops"]
        assert 400 <= ios <= 620, (s["name"], ios)
    # the trace application's default QoS: the replay kept the trace's pace, in every tile
    pace = [
        c
        for i in run["summary"]["applications"]["instances"]
        if i["app"] == "pg"
        for c in i["criteria"]
    ]
    assert [c["criterion"] for c in pace] == ["pace", "pace"]
    assert all(c["value"] > 0.9 for c in pace), pace


def test_a_trace_app_latency_limit_fails_its_tiles(tmp_path, capsys):
    trace = mixed_trace(tmp_path / "pg.parquet", 200, 1.0)
    tight = '[app.qos.read_p99]\nop = "read"\nstat = "p99"\nmax_ms = 0.0001\n'
    status, run, err = run_tiles(tmp_path, tile_file(tmp_path, trace, tight), 1, capsys)
    assert status == 3, err  # an answer: QoS failed
    (pg,) = [i for i in run["summary"]["applications"]["instances"] if i["app"] == "pg"]
    assert not pg["passed"] and any("read p99" in f for f in pg["failed"]), pg["failed"]


def test_a_trace_app_refuses_what_it_cannot_replay(tmp_path, capsys):
    trace = mixed_trace(tmp_path / "pg.parquet", 50, 1.0)
    bad = tile_file(tmp_path, trace, 'profile = "web"\n')
    assert main(["run", "--tiles", "1", "--tile", str(bad), "--target", str(tmp_path / "t.dat"),
                 "--capacity", "64m", "--duration", "1"]) == 2  # fmt: skip
    assert "unknown key 'profile' (allowed with trace:" in capsys.readouterr().err
    missing = tmp_path / "tile2.toml"
    missing.write_text('[[app]]\ntrace = "nope.parquet"\n')
    assert main(["run", "--tiles", "1", "--tile", str(missing), "--target",
                 str(tmp_path / "t.dat"), "--capacity", "64m", "--duration", "1"]) == 2  # fmt: skip
    assert "nope.parquet does not exist" in capsys.readouterr().err
    slow = tile_file(tmp_path, trace, "speed = 0\n")
    assert main(["run", "--tiles", "1", "--tile", str(slow), "--target", str(tmp_path / "t.dat"),
                 "--capacity", "64m", "--duration", "1"]) == 2  # fmt: skip
    assert "speed must be a number above 0" in capsys.readouterr().err
    assert not (tmp_path / "t.dat").exists()
