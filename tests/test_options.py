"""The option table: every flag is accepted where it applies and refused where it does not,
the keys of workload files and profiles come from it, docs/options.md is generated from it, and
the bugs that repeated option lists caused stay fixed."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("tilemark._engine", reason="the engine is not built (make build)")

from tilemark.cli import main  # noqa: E402
from tilemark.options import (  # noqa: E402
    OPTIONS,
    PROFILE_STREAM_KEYS,
    RUN,
    RUN_KEYS,
    SCALE,
    STREAM_KEYS,
    TILES,
    markdown,
)
from tilemark.workload import apps, compiler, plan  # noqa: E402

DOCS = Path(__file__).resolve().parent.parent / "docs" / "options.md"

# A valid value for every flag, so only the mode decides whether it is accepted.
SAMPLE = {
    "--target": None,
    "--size": "4m",
    "--duration": "1",
    "--warmup": "0",
    "--interval": "1",
    "--backend": "null",
    "--threads": "1",
    "--poll-us": "5",
    "--seed": "3",
    "--name": "s",
    "--rw": "randread",
    "--read": "100",
    "--bs": "4k",
    "--pattern": "uniform",
    "--random": "100",
    "--qd": "2",
    "--rate": "100",
    "--rate-bytes": "1m",
    "--arrival": "poisson",
    "--burst": "2/1ms",
    "--sync": "none",
    "--offset": "0",
    "--length": "1m",
    "--align": "4k",
    "--compress": "10",
    "--copies": "2",
    "--tiles": "1",
    "--tile": "/nonexistent/tile.toml",
    "--capacity": "64m",
    "--set": "oltp.iops=10",
    "--qos-interval": "1",
    "--max-duration": "2",
    "--destroy-data": "/dev/nonexistent",
    "--results": None,
}


def cli(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def flag_args(o, tmp_path: Path) -> list[str]:
    if o.kind == "switch":
        return [o.off_flag if o.default == "on" else o.flag]
    value = SAMPLE.get(o.flag, "1")
    return [o.flag, value if value is not None else str(tmp_path / "x")]


@pytest.mark.parametrize(
    "o",
    [o for o in OPTIONS if o.flag and o.modes & {RUN, TILES} and o.key not in ("tiles", "target")],
    ids=lambda o: o.flag,
)
def test_run_refuses_a_flag_of_the_other_mode_naming_it(tmp_path, capsys, o):
    """`run --tiles` refuses workload-only flags and plain `run` refuses tile-only ones; each
    with one sentence naming the flag, exit 2, before any IO. (run --tiles used to ignore
    --poll-us, --offset, --length, --align, --compress and --name silently.)"""
    from tilemark.cli.params import check_mode
    from tilemark.cli.run import _clash

    target = tmp_path / "t.dat"
    base = ["run", "--target", str(target), "--results", str(tmp_path / "r")]
    value = True if o.kind == "switch" else ["x"] if o.kind == "list" else "1"
    for mode, extra in ((RUN, []), (TILES, ["--tiles", "1"])):
        if mode in o.modes:
            given = {o.param: value, "destroy_data": "/dev/x"}  # --force needs it
            check_mode(given, mode, {RUN, TILES}, _clash(mode))  # accepted
            continue
        status, out, err = cli(capsys, *base, *extra, *flag_args(o, tmp_path))
        clash = "applies to tile runs" in err or "cannot be combined with" in err
        assert status == 2 and clash and o.flag in err, (mode, err)
        assert err.count("\n") == 1 and "Traceback" not in err
        assert not target.exists()


def test_force_without_destroy_data_is_refused_in_every_mode(tmp_path, capsys):
    target = str(tmp_path / "t.dat")
    for args in (
        ["run", "--target", target, "--force"],
        ["run", "--tiles", "1", "--target", target, "--force"],
        ["scale", "--target", target, "--force"],
    ):
        status, _, err = cli(capsys, *args)
        assert status == 2 and "--force only applies together with --destroy-data" in err, args
    assert not Path(target).exists()


def test_scale_offers_every_tile_and_study_option_and_poll_us():
    from tilemark.cli.params import command_options

    flags = {o.flag for o in command_options({SCALE})}
    assert {"--poll-us", "--max-duration", "--confirm-runs", "--repeat", "--knob"} <= flags
    assert "--rw" not in flags and "--size" not in flags


def test_run_tiles_applies_poll_us_and_max_duration(tmp_path, capsys, fake_engine):
    _, started = fake_engine
    status, _, err = cli(
        capsys,
        *("run", "--tiles", "1", "--target", str(tmp_path / "t.dat"), "--capacity", "64m"),
        *("--duration", "2", "--warmup", "0", "--poll-us", "7", "--max-duration", "5"),
        *("--backend", "null", "--results", str(tmp_path / "r")),
    )
    assert status in (0, 3), err
    (handle,) = started
    assert handle.plan["poll_us"] == 7
    assert handle.plan["duration_ms"] == 5000  # planned for --max-duration


def test_scale_applies_poll_us(tmp_path, capsys, fake_engine):
    options, started = fake_engine
    status, _, err = cli(
        capsys,
        *("scale", "--tiles", "1", "--target", str(tmp_path / "t.dat"), "--capacity", "64m"),
        *("--duration", "1", "--warmup", "0", "--poll-us", "9", "--backend", "null"),
        *("--no-settle", "--no-report", "--results", str(tmp_path / "r")),
    )
    assert status in (0, 3), err
    assert started and all(h.plan["poll_us"] == 9 for h in started)


def test_workload_keys_come_from_the_table():
    assert set(plan.RUN_KEYS) == {o.key for o in OPTIONS if o.scope == "run" and o.toml}
    assert set(STREAM_KEYS) == {o.key for o in OPTIONS if o.scope == "stream" and o.toml}
    assert "copies" in STREAM_KEYS and "seed" in STREAM_KEYS and "poll_us" in RUN_KEYS
    # Profiles place streams themselves and derive seeds per run.
    assert set(apps.APP_STREAM_KEYS) == {"name", "region", "copies"} | set(PROFILE_STREAM_KEYS)
    assert not {"offset", "length", "seed"} & set(PROFILE_STREAM_KEYS)


def test_every_flag_is_unique_per_command():
    from tilemark.cli.params import command_options

    for modes in ({RUN, TILES}, {SCALE}):
        flags = [o.flag for o in command_options(modes)]
        assert len(flags) == len(set(flags)), flags


def test_docs_options_md_is_generated_from_the_table():
    assert DOCS.read_text() == markdown(), "run `make docs` to regenerate docs/options.md"


def test_copies_make_identical_streams_with_their_own_seeds(tmp_path):
    path = tmp_path / "workers.toml"
    path.write_text(
        textwrap.dedent(
            """
            target = "/tmp/x.dat"
            [[stream]]
            name = "worker"
            rw = "randrw"
            read = 70
            bs = "4k"
            copies = 4
            [[stream]]
            name = "log"
            rw = "write"
            """
        )
    )
    w = plan.parse_workload(plan.load_toml(path), source=str(path))
    names = [s.name for s in w.streams]
    assert names == ["worker@0", "worker@1", "worker@2", "worker@3", "log"]
    assert {(s.rw, s.read_pct, s.sizes[0][0]) for s in w.streams[:4]} == {("randrw", 70.0, 4096)}
    from tilemark.targets.header import TargetInfo

    info = TargetInfo("/tmp/x.dat", "file", 4096, 1 << 30, True, 4096, False)
    compiled = compiler.compile_plan(w, info)
    seeds = [s["seed"] for s in compiled["streams"]]
    assert len(set(seeds)) == len(seeds)


@pytest.mark.parametrize("copies, named", [(0, "copies"), (20_001, "copies"), ("x", "copies")])
def test_bad_copies_is_a_usage_error_naming_the_stream(copies, named):
    from tilemark.errors import UsageError

    doc = {"target": "/tmp/x.dat", "stream": [{"name": "w", "copies": copies}]}
    with pytest.raises(UsageError, match=f"stream 'w': {named}"):
        plan.parse_workload(doc, source="w.toml")


def test_copy_names_never_collide_and_copies_go_past_256():
    # With plain numeric suffixes copy 10 of `s1` and copy 0 of `s11` were both `s110`.
    doc = {
        "target": "/tmp/x.dat",
        "stream": [
            {"name": "s1", "copies": 11},
            {"name": "s11", "copies": 2},
            {"name": "s110"},
            {"name": "big", "copies": 5000},
        ],
    }
    w = plan.parse_workload(doc, source="w.toml")
    names = [s.name for s in w.streams]
    assert len(names) == len(set(names)) == 11 + 2 + 1 + 5000
    assert ("s1@10", "s11@0", "s110", "big@4999") == (names[10], names[11], names[13], names[-1])


def test_copies_beyond_what_a_run_holds_are_refused_with_the_total():
    from tilemark.errors import UsageError

    doc = {"target": "/tmp/x.dat", "stream": [{"name": n, "copies": 15_000} for n in ("a", "b")]}
    with pytest.raises(UsageError, match="has 30,000 streams; one run holds at most 20,000"):
        plan.parse_workload(doc, source="w.toml")


def test_copies_flag_runs_n_streams(tmp_path, capsys, fake_engine):
    _, started = fake_engine
    status, out, err = cli(
        capsys,
        *("run", "--target", str(tmp_path / "t.dat"), "--size", "4m", "--duration", "1"),
        *("--backend", "null", "--copies", "3", "--name", "w", "--json"),
        *("--results", str(tmp_path / "r")),
    )
    assert status == 0, err
    assert [s["name"] for s in started[0].plan["streams"]] == ["w@0", "w@1", "w@2"]
    assert len(json.loads(out)["summary"]["streams"]) == 3


def test_typed_options_have_one_field_per_option_of_their_scope():
    """The option table produces the typed options: each scope's frozen dataclass has exactly
    the keys of that scope's command-line options, so neither can drift from the other."""
    import dataclasses

    from tilemark.options import OPTIONS
    from tilemark.options.typed import SCOPES

    for scope, kind in SCOPES.items():
        keys = {o.key for o in OPTIONS if o.scope == scope and o.flag}
        assert {f.name for f in dataclasses.fields(kind)} == keys, scope
        assert kind.__dataclass_params__.frozen


def test_options_are_parsed_once_at_the_edge_with_the_flag_sentences():
    from tilemark.errors import UsageError
    from tilemark.options import SCALE
    from tilemark.options.typed import Options

    opts = Options.from_values(
        {"confirm": "3", "settle": False, "sets": ["mail.mailboxes=5"], "duration": "10s"}, SCALE
    )
    assert opts.study.confirm == 3 and opts.study.settle is False
    assert opts.tile.set == ("mail.mailboxes=5",)
    assert opts.workload.run == {"duration": "10s"}  # laid over workload files as typed
    with pytest.raises(UsageError, match="--confirm must be an integer"):
        Options.from_values({"confirm": "x"}, SCALE)
