"""Tile runs and studies through the CLI on the fake engine (synthetic latencies, no engine IO):
a step measures longer while a percentile's confidence interval straddles its limit, failing
steps are confirmed, whole studies repeat, a knob is searched, and storage settles after a fill.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("tilemark._engine", reason="the engine is not built (make build)")

from tilemark.cli import main  # noqa: E402

MS = 1_000_000

READER = """
[profile]
name = "reader"
description = "random reads at a fixed rate"
metric = "iops('r')"
metric_unit = "IOPS"

[scale]
iops = 100

[[stream]]
name = "r"
rw = "randread"
bs = "4k"
rate = "iops"
qd = 16

[qos.read_p99]
stream = "r"
op = "read"
stat = "p99"
max_ms = 10
"""


@pytest.fixture
def tile(tmp_path) -> Path:
    (tmp_path / "reader.toml").write_text(READER)
    path = tmp_path / "tile.toml"
    path.write_text('[tile]\nname = "readers"\n[[app]]\nprofile = "reader.toml"\n')
    return path


def cli(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def common(tmp_path: Path) -> list[str]:
    return [
        *("--target", str(tmp_path / "t.dat"), "--capacity", "8m", "--warmup", "0"),
        *("--results", str(tmp_path / "results")),
    ]


def tail(fraction_slow: int):
    """Per interval: 100 - k reads at 1 ms and k at 50 ms (a k% tail)."""
    return lambda stream, interval, plan: (
        [1 * MS] * (100 - fraction_slow) + [50 * MS] * (fraction_slow)
    )


def run_tiles(capsys, tmp_path, tile, *extra):
    status, out, err = cli(
        capsys,
        *("run", "--tiles", "1", "--tile", str(tile), *common(tmp_path)),
        *("--duration", "3", "--json", *extra),
    )
    return status, json.loads(out), err


# -----------------------------------------------------------------------------------------------
# Measure longer while undecided


def test_a_step_is_extended_until_a_straddling_p99_is_decided(tmp_path, capsys, fake_engine, tile):
    # A 2% tail at 50 ms: after 3 s (306 reads) the p99's CI still reaches down to 1 ms; with
    # every second more reads it narrows, and it lies wholly above 10 ms after about 5 s.
    options, started = fake_engine
    options.update(intervals=None, latencies=tail(2))
    status, doc, err = run_tiles(capsys, tmp_path, tile, "--max-duration", "12")
    apps = doc["summary"]["applications"]
    assert status == 3, err
    assert apps["verdict"] == "fail" and apps["undecided"] == []
    m = apps["measurement"]
    assert 4 <= m["measured_s"] <= 7 and m["extended"] is True and m["max_duration_s"] == 12
    assert doc["summary"]["ended_by"] == "decided" and doc["complete"] is True
    (c,) = [c for c in apps["instances"][0]["criteria"] if c["criterion"] == "read_p99"]
    assert c["decision"] == "fail" and c["ci_low"] > 10 and c["margin_pct"] > 0
    assert started[0].plan["duration_ms"] == 12_000
    assert "QoS: FAIL in 1 tile," in err and "s of up to 12 s to decide" in err


def test_a_step_still_undecided_at_max_duration_fails_within_noise(
    tmp_path, capsys, fake_engine, tile
):
    # Exactly a 1% tail: the p99 sits on the edge of the slow reads, its CI always straddles.
    options, _ = fake_engine
    options.update(intervals=None, latencies=tail(1))
    status, doc, err = run_tiles(capsys, tmp_path, tile, "--max-duration", "6")
    apps = doc["summary"]["applications"]
    assert status == 3
    assert apps["verdict"] == "noise" and apps["undecided"] == ["t1.reader: read_p99"]
    assert apps["measurement"]["measured_s"] == pytest.approx(6)
    (failed,) = apps["instances"][0]["failed"]
    assert "inconclusive: 95% CI" in failed
    assert "ended_by" not in doc["summary"]
    assert "QoS: inconclusive in 1 tile" in err


def test_a_decided_step_stops_at_its_duration(tmp_path, capsys, fake_engine, tile):
    options, _ = fake_engine
    options.update(intervals=None, latencies=tail(0))
    status, doc, err = run_tiles(capsys, tmp_path, tile, "--max-duration", "12")
    apps = doc["summary"]["applications"]
    assert status == 0, err
    assert apps["verdict"] == "pass" and apps["measurement"]["measured_s"] == pytest.approx(3)
    assert apps["measurement"]["extended"] is False


def test_run_tiles_measures_exactly_its_duration_by_default(tmp_path, capsys, fake_engine, tile):
    options, started = fake_engine
    options.update(intervals=None, latencies=tail(1))
    status, doc, _ = run_tiles(capsys, tmp_path, tile)
    assert status == 3 and doc["summary"]["applications"]["verdict"] == "noise"
    assert started[0].plan["duration_ms"] == 3000


# -----------------------------------------------------------------------------------------------
# Studies


def scale(capsys, tmp_path, tile, *extra):
    status, out, err = cli(
        capsys,
        *("scale", str(tile), *common(tmp_path), "--duration", "2", "--json"),
        *("--no-report", *extra),
    )
    return status, json.loads(out), out, err


def slow_from(tiles: int):
    """Every read at 50 ms once the plan holds `tiles` tiles, else at 1 ms."""

    def latencies(stream, interval, plan):
        return [(50 if len(plan["streams"]) >= tiles else 1) * MS] * 100

    return latencies


def test_scale_confirms_a_failing_step_and_records_every_run(tmp_path, capsys, fake_engine, tile):
    options, _ = fake_engine
    options.update(intervals=None, latencies=slow_from(3))
    status, doc, out, err = scale(capsys, tmp_path, tile, "--tiles", "1..5", "--confirm", "0")
    assert status == 0, err
    assert doc["max_passing_tiles"] == 2 and doc["confirm_runs"] == 1
    three = doc["steps"][-1]
    assert three["tiles"] == 3 and three["verdict"] == "fail"
    assert [r["reason"] for r in three["runs"]] == ["new", "confirm"]
    assert three["votes"] == {"pass": 0, "fail": 2, "noise": 0}
    assert doc["runs_used"] == 4 and len({r["run_id"] for r in three["runs"]}) == 2
    for r in three["runs"]:
        stored = json.loads((Path(r["run_dir"]) / "run.json").read_text())
        assert stored["kind"] == "scale-step" and stored["complete"] is True
    deciding = doc["first_failure"]["deciding"]
    assert deciding["criterion"] == "read_p99" and deciding["app"] == "reader"
    assert deciding["value"] == pytest.approx(50, rel=0.01) and deciding["limit"] == 10
    assert deciding["margin_pct"] == pytest.approx(400, rel=0.01)
    # One line per failing application, and a headline naming the deciding criterion.
    assert "reader: read_p99 50" in err and "(+400%" in err
    assert "decided at 3 tiles by reader: read_p99" in err
    assert doc["max_passing_tiles_runs"] == [2] and doc["stable"] is True


def test_scale_repeats_the_whole_study(tmp_path, capsys, fake_engine, tile):
    options, _ = fake_engine
    options.update(intervals=None, latencies=slow_from(3))
    status, doc, _, err = scale(
        capsys, tmp_path, tile, "--tiles", "1..4", "--confirm", "0", "--repeat", "2"
    )
    assert status == 0, err
    assert doc["max_passing_tiles_runs"] == [2, 2] and doc["stable"] is True
    assert [s["repeat"] for s in doc["steps"]] == [1, 1, 1, 2, 2, 2]
    assert "2 repeats: 2, 2 (all agree)" in err


def test_scale_with_no_passing_count_exits_3(tmp_path, capsys, fake_engine, tile):
    options, _ = fake_engine
    options.update(intervals=None, latencies=slow_from(1))
    status, doc, _, err = scale(capsys, tmp_path, tile, "--tiles", "1..3", "--confirm-runs", "0")
    assert status == 3
    assert doc["max_passing_tiles"] is None and "no tile count passes QoS" in err


def test_scale_searches_a_knob(tmp_path, capsys, fake_engine, tile):
    # The storage keeps reads at 1 ms up to 420 IOs/s and at 50 ms above.
    def latencies(stream, interval, plan):
        rate = plan["streams"][0]["arrival"].get("rate_iops", 0)  # the settle probe: none
        return [(1 if rate <= 420 else 50) * MS] * 100

    options, _ = fake_engine
    options.update(intervals=None, latencies=latencies)
    status, doc, _, err = scale(
        capsys, tmp_path, tile, "--knob", "reader.iops", "--confirm-runs", "0"
    )
    assert status == 0, err
    assert doc["kind"] == "knob" and doc["knob"] == "reader.iops" and doc["tiles_per_step"] == 1
    assert 400 <= doc["max_passing_value"] <= 420 < doc["first_failing_value"]
    values = [s["value"] for s in doc["steps"]]
    assert values[:3] == [100, 200, 400] and all(v == int(v) for v in values)
    assert "max reader.iops at 1 tile: " in err


@pytest.mark.parametrize(
    "args, named",
    [
        (["--knob", "reader"], "APP.KNOB"),
        (["--knob", "nosuch.iops"], "no application 'nosuch'"),
        (["--knob", "reader.nosuch"], "no scale knob 'nosuch'"),
        (["--knob", "reader.iops", "--tiles", "1..2"], "one count"),
        (["--knob", "reader.iops", "--knob-range", "200..100"], "--knob-range"),
        (["--knob", "reader.iops", "--knob-range", "200..300"], "does not contain"),
        (["--knob-precision", "5"], "add --knob"),
        (["--confirm-runs", "-1"], "--confirm-runs"),
        (["--repeat", "0"], "--repeat"),
        (["--max-duration", "1"], "shorter than --duration"),
    ],
)
def test_bad_study_options_are_one_line_exit_2_before_any_io(tmp_path, capsys, tile, args, named):
    status, out, err = cli(capsys, "scale", str(tile), *common(tmp_path), "--duration", "2", *args)
    assert status == 2 and out == "" and "Traceback" not in err
    assert err.count("\n") == 1 and named in err, err
    assert not (tmp_path / "t.dat").exists() and not (tmp_path / "results").exists()


def test_scale_settles_after_filling_a_new_target(tmp_path, capsys, fake_engine, tile):
    options, started = fake_engine
    options.update(intervals=None)
    status, doc, _, err = scale(capsys, tmp_path, tile, "--tiles", "1", "--settle-max", "30")
    assert status == 0, err
    probe = started[0].plan
    assert [s["name"] for s in probe["streams"]] == ["settle"]
    assert probe["streams"][0]["qd"] == 1 and probe["streams"][0]["read_pct"] == 100
    settle = doc["settle"]
    assert settle["steady"] is True and len(settle["rounds_mean_ms"]) == 5
    assert started[0].stopped  # ended as soon as the window was steady
    assert "settled" in err

    # The target is filled now: the next study does not settle again.
    status, doc, _, err = scale(capsys, tmp_path, tile, "--tiles", "1")
    assert status == 0 and doc["settle"] is None


def test_a_decided_failure_stops_an_extended_step_at_once(tmp_path, capsys, fake_engine, tile):
    # Read p99 decidedly over its limit from the start, while the mean (limit 100 ms, mean
    # about 50 ms with a wide spread) cannot be decided: the failure alone decides the step.
    (tmp_path / "reader.toml").write_text(
        READER + '\n[qos.read_avg]\nstream = "r"\nop = "read"\nstat = "mean"\nmax_ms = 51\n'
    )
    options, _ = fake_engine
    options.update(intervals=None, latencies=lambda s, i, p: [1 * MS] * 50 + [100 * MS] * 50)
    status, doc, err = run_tiles(capsys, tmp_path, tile, "--max-duration", "12")
    apps = doc["summary"]["applications"]
    assert status == 3 and apps["verdict"] == "fail"
    assert apps["measurement"]["measured_s"] == pytest.approx(3)
    assert doc["summary"]["ended_by"] == "decided"
