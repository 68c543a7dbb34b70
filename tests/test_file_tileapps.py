"""File applications in tile files (docs/tiles.md, "File applications"): how tile k's copy is
named and placed, and each wrong input refused in one sentence before anything is made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tilemark.errors import UsageError
from tilemark.files.tileapps import tile_workload
from tilemark.workload.tilefile import load_tile, parse_sets


def tile_file(tmp_path: Path, app: str, block: bool = True) -> Path:
    head = '[tile]\nname = "t"\n' + ('[[app]]\nprofile = "oltp"\n' if block else "")
    path = tmp_path / "tile.toml"
    path.write_text(head + "[[app]]\n" + app)
    return path


def test_each_tile_copy_has_its_own_sets_and_names(tmp_path):
    tile = load_tile(str(tile_file(tmp_path, f'files = "varmail"\ndir = "{tmp_path}"\n')))
    (app,) = tile.file_apps
    assert app.label == "varmail" and app.metric_stream() == ("mail", "messages")
    w = tile_workload(tile.file_apps, 2, duration_s=5, interval_s=1)
    assert [f.path for f in w.filesets] == [
        f"{tmp_path}/t{k}.varmail.{s}" for k in (1, 2) for s in ("mail", "log")
    ]
    assert [s.name for s in w.streams] == [
        f"t{k}.varmail.{s}" for k in (1, 2) for s in ("mail", "log")
    ]
    assert [s.fileset for s in w.streams] == [f.name for f in w.filesets]
    assert {q.name: q.stream for q in w.qos} == {
        f"t{k}.varmail.{q}": f"t{k}.varmail.mail" for k in (1, 2) for q in ("messages", "fsync_p99")
    }
    # Copies draw apart (seeds), and the whole file run outlasts the block run.
    assert len({s.seed for s in w.streams}) == 4 and w.duration_s == 5


def test_set_overrides_dir_and_qos_limits(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    path = tile_file(tmp_path, 'files = "webserver"\nname = "web2"\ndir = "/nonexistent"\n')
    sets = parse_sets([f"web2.dir={other}", "web2.qos.page_p99.max_ms=7"])
    (app,) = load_tile(str(path), sets).file_apps
    assert app.directory == str(other) and app.doc["qos"]["page_p99"]["max_ms"] == 7.0
    assert app.metric_stream() == ("pages", "pages")


@pytest.mark.parametrize(
    ("app", "block", "match"),
    [
        ('files = "varmail"\n', True, "dir is required"),
        ('files = "varmail"\ndir = "/nonexistent/x"\n', True, "is not a directory"),
        ('files = "nosuch"\ndir = "{tmp}"\n', True, "file workload nosuch not found"),
        ('files = "varmail"\ndir = "{tmp}"\nqos = {{ nope = {{ max_ms = 1 }} }}\n', True,
         "qos 'nope' is not a criterion"),
        ('files = "varmail"\ndir = "{tmp}"\nqos = {{ fsync_p99 = {{ max_ms = -1 }} }}\n', True,
         "max_ms must be > 0"),
        ('files = "varmail"\ndir = "{tmp}"\nscale = {{ x = 1 }}\n', True, "unknown key 'scale'"),
        ('files = "varmail"\n', False, "dir is required"),
    ],
)  # fmt: skip
def test_wrong_file_apps_are_one_sentence(tmp_path, app, block, match):
    path = tile_file(tmp_path, app.format(tmp=tmp_path), block)
    with pytest.raises(UsageError, match=match) as e:
        load_tile(str(path))
    assert "\n" not in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tile.toml"]  # nothing made


def test_a_set_override_of_an_unknown_key_is_refused(tmp_path):
    path = tile_file(tmp_path, f'files = "varmail"\ndir = "{tmp_path}"\n')
    with pytest.raises(UsageError, match="a file application takes dir and qos"):
        load_tile(str(path), parse_sets(["varmail.threads=4"]))
    with pytest.raises(UsageError, match="'fast' is not a number"):
        load_tile(str(path), parse_sets(["varmail.qos.fsync_p99.max_ms=fast"]))


def _interval(w, index: int, fsync_ms: float, loops: int) -> dict:
    """An engine interval snapshot: every stream `loops` loops, each op `loops` times, fsync
    taking `fsync_ms`."""
    from tilemark.files.spec import OPS
    from tilemark.hist import Histogram

    def op(n: int, ms: float) -> dict:
        h = Histogram()
        h.record(int(ms * 1e6), n)
        return {"ops": n, "bytes": 0, "errors": {}, "service": h.to_json(), "response": None}

    streams = [
        {
            "ops": {o: op(loops, fsync_ms if o == "fsync" else 0.01) for o in OPS},
            "skipped": dict.fromkeys(OPS, 0),
            "loops": op(loops, fsync_ms) if s.sequence else None,
        }
        for s in w.streams
    ]
    return {"index": index, "start_ns": index * 10**9, "end_ns": (index + 1) * 10**9,
            "streams": streams}  # fmt: skip


def test_a_file_failure_decides_an_extended_run_and_the_window_is_the_block_runs(tmp_path):
    from tilemark.files.tilerun import FileCompanion, file_instances

    tile = load_tile(str(tile_file(tmp_path, f'files = "varmail"\ndir = "{tmp_path}"\n')))
    c = FileCompanion(tile.file_apps, 1, warmup_s=1, max_duration_s=4, interval_s=1)
    # Warm-up (slow fsyncs, not judged), two measured seconds, then a tail after the block
    # run's measurement (slow again, not judged).
    shape = [(500, 10), (1, 200), (1, 200), (500, 10)]
    c.raw = [json.dumps(_interval(c.workload, k, ms, n)) for k, (ms, n) in enumerate(shape)]
    seen = []
    for measured in (1.0, 2.0):  # the window grows as the block run measures on
        block = {"instances": [], "applications": [], "undecided": ["t1.oltp: read_p99"]}
        c.judge_so_far(block, tile.file_apps, measured_s=measured)
        (i,) = block["instances"]
        seen.append((i["metric"], c._live.seconds))
        assert block["passed"] is True and block["verdict"] == "pass"
    assert seen == [(pytest.approx(200), 1.0), (pytest.approx(200), 2.0)]
    assert i["metric_unit"] == "messages/s"
    # The run's end judges the same window from scratch, with the same answer.
    (final,), files = file_instances(c)
    assert final["metric"] == pytest.approx(200) and files["seconds"] == 2.0
    # The same window with slow fsyncs: a decided failure, whatever the block run's
    # undecided criteria turn out to be.
    shape[2] = (500, 200)
    c.raw = [json.dumps(_interval(c.workload, k, ms, n)) for k, (ms, n) in enumerate(shape)]
    c._live, c._live_next = None, 0
    block = {"instances": [], "applications": [], "undecided": ["t1.oltp: read_p99"]}
    c.judge_so_far(block, tile.file_apps, measured_s=2.0)
    assert block["verdict"] == "fail" and block["passed"] is False
    assert block["failed"] == ["t1.varmail: mail fsync p99 <= 50 ms (window: 500.00 ms)"]
    assert block["applications"][0]["app"] == "varmail"


def test_a_tile_of_file_applications_only_has_no_block_streams(tmp_path):
    from tilemark.run.tiles import TileRunSettings, tile_workload

    path = tile_file(tmp_path, f'files = "varmail"\ndir = "{tmp_path}"\n', block=False)
    tile = load_tile(str(path))
    assert not tile.block and [a.label for a in tile.file_apps] == ["varmail"]
    settings = TileRunSettings([], 0, duration=3, warmup=1, interval=0.5, max_duration=6)
    workload, layout = tile_workload(tile, 2, settings, max_tiles=2, infos=[])
    # The engine keeps time only: no target, no stream, the tile run's timing.
    assert (workload.targets, workload.streams, layout.tags) == ([], [], [])
    assert (workload.duration_s, workload.warmup_s, workload.interval_s) == (6, 1, 0.5)
    from tilemark.workload.compiler import compile_plan

    plan = compile_plan(workload, [])
    assert plan["backend"] == "null" and plan["threads"] == 1 and plan["streams"] == []


def _snap(w, index: int, loops: int, fsync: list[tuple[float, int]]) -> dict:
    """An engine interval snapshot: every stream `loops` loops; fsyncs taking `fsync` (ms,
    count) pairs, every other operation 0.01 ms."""
    from tilemark.files.spec import OPS
    from tilemark.hist import Histogram

    def op(samples: list[tuple[float, int]]) -> dict:
        h = Histogram()
        for ms, n in samples:
            h.record(int(ms * 1e6), n)
        return {"ops": h.n, "bytes": 0, "errors": {}, "service": h.to_json(), "response": None}

    streams = [
        {
            "ops": {o: op(fsync if o == "fsync" else [(0.01, loops)]) for o in OPS},
            "skipped": dict.fromkeys(OPS, 0),
            "loops": op([(1.0, loops)]) if s.sequence else None,
        }
        for s in w.streams
    ]
    return {"index": index, "start_ns": index * 10**9, "end_ns": (index + 1) * 10**9,
            "streams": streams}  # fmt: skip


def _judged(tmp_path, shape) -> dict:
    from tilemark.files.tilerun import FileCompanion, file_instances

    tile = load_tile(str(tile_file(tmp_path, f'files = "varmail"\ndir = "{tmp_path}"\n')))
    c = FileCompanion(tile.file_apps, 1, warmup_s=0, max_duration_s=8, interval_s=1)
    c.raw = [json.dumps(_snap(c.workload, k, *s)) for k, s in enumerate(shape)]
    (i,), _ = file_instances(c)
    return i


def test_file_criteria_carry_confidence_intervals_and_may_be_inconclusive(tmp_path):
    # varmail: messages >= 100/s, fsync p99 <= 50 ms. Eight steady seconds of 150 messages
    # with fast fsyncs: both decided, the rate's interval a point.
    steady = _judged(tmp_path, [(150, [(5.0, 150)])] * 8)
    got = {c["criterion"]: c for c in steady["criteria"]}
    assert steady["verdict"] == "pass" and steady["undecided"] == []
    assert got["messages"]["value"] == pytest.approx(1.5)
    assert got["messages"]["ci_low"] == pytest.approx(1.5)
    assert got["fsync_p99"]["decision"] == "pass" and got["fsync_p99"]["samples"] == 1200
    # 105 messages/s on average, but 60 and 150 in turn: its 95% interval (batch means of
    # the seconds) straddles 100/s, so the rate is inconclusive, not a pass. And 40 fsyncs,
    # one of 100 ms: too few to bound their p99 below 50 ms (order statistics).
    noisy = _judged(tmp_path, [(60 if k % 2 else 150, [(5.0, 5)] + [(100.0, 1)] * (k == 3))
                               for k in range(8)])  # fmt: skip
    got = {c["criterion"]: c for c in noisy["criteria"]}
    assert got["messages"]["value"] == pytest.approx(1.05)
    assert got["messages"]["decision"] == "inconclusive"
    assert got["messages"]["ci_low"] < 1 < got["messages"]["ci_high"]
    assert got["fsync_p99"]["decision"] == "inconclusive" and not got["fsync_p99"]["ci_bounded"]
    assert noisy["verdict"] == "noise" and not noisy["passed"]
    assert sorted(noisy["undecided"]) == ["fsync_p99", "messages"]
    assert any("inconclusive: 95% CI" in f and "%" in f for f in noisy["failed"])
    # Decidedly short: 50 and 70 in turn.
    short = _judged(tmp_path, [(50 if k % 2 else 70, [(5.0, 50)]) for k in range(8)])
    got = {c["criterion"]: c for c in short["criteria"]}
    assert got["messages"]["decision"] == "fail" and short["verdict"] == "fail"
    assert got["messages"]["ci_high"] < 1


def test_an_inconclusive_file_criterion_keeps_an_extended_run_measuring(tmp_path):
    from tilemark.files.tilerun import FileCompanion

    tile = load_tile(str(tile_file(tmp_path, f'files = "varmail"\ndir = "{tmp_path}"\n')))
    c = FileCompanion(tile.file_apps, 1, warmup_s=0, max_duration_s=8, interval_s=1)
    shape = [(60 if k % 2 else 150, [(5.0, 50)]) for k in range(8)]
    c.raw = [json.dumps(_snap(c.workload, k, *s)) for k, s in enumerate(shape)]
    block = {"instances": [], "applications": [], "undecided": []}
    c.judge_so_far(block, tile.file_apps, measured_s=8.0)
    # What QosMonitor reads: not failed, but undecided, so the run measures on.
    assert block["verdict"] == "noise" and block["undecided"] == ["t1.varmail: messages"]


def test_the_live_view_shows_the_file_streams_beside_the_block_ones(tmp_path):
    import io

    from rich.console import Console

    from tilemark.files.tilerun import FileCompanion
    from tilemark.run.live import LiveDisplay

    tile = load_tile(str(tile_file(tmp_path, f'files = "varmail"\ndir = "{tmp_path}"\n')))
    c = FileCompanion(tile.file_apps, 1, warmup_s=1, max_duration_s=8, interval_s=1)
    c.raw = [json.dumps(_snap(c.workload, k, 150, [(5.0, 150)])) for k in range(2)]
    plan = {"streams": [], "warmup_ms": 1000, "duration_ms": 8000}
    block = {"interval": 1, "phase": "measure", "start_ns": 10**9, "end_ns": 2 * 10**9,
             "streams": []}  # fmt: skip
    for tty in (False, True):
        out = io.StringIO()
        console = Console(file=out, force_terminal=tty, width=160)
        c._live_shown = 0
        with LiveDisplay(plan, console, tty=tty, extra=c.live_rows) as display:
            display.update([block])
        text = out.getvalue()
        # The newest file interval (_snap: each of the 15 operations 150 times a second):
        # 2,250 operations/s per stream; mail's p50/p99 are its loop's (1 ms), in messages.
        assert "t1.varmail.mail" in text and "t1.varmail.log" in text
        if tty:
            assert "files 150 messages/s" in text and "2,250" in text
        else:
            assert "t1.varmail.mail 2,250 IOPS p50 1.00ms p99 1.00ms" in text
