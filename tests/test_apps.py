"""Application profiles and tiles: built-ins compile to their documented streams, overrides,
disjoint 1 MiB-aligned regions, O_DIRECT size folding, and one-sentence errors for bad files."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from engine_data import hist_json
from tilemark.analysis.qos import evaluate, failures
from tilemark.errors import UsageError
from tilemark.run.tiles import TileRunSettings, tile_workload
from tilemark.targets.header import TargetInfo
from tilemark.targets.spec import TargetSpec
from tilemark.units import parse_size_mix
from tilemark.workload import plan
from tilemark.workload.apps import (
    BUILTIN_DIR,
    DEFAULT_TILE,
    TileApp,
    TileSpec,
    list_profiles,
    load_profile,
)
from tilemark.workload.tilefile import default_tile, load_tile, parse_sets
from tilemark.workload.tilelayout import compile_tiles, expand_targets

KIB = 1 << 10
MIB = 1 << 20


def _info(path: str = "/nonexistent/t.dat", length: int = 1 << 30) -> TargetInfo:
    """An inspected 4 KiB-aligned file target (no IO)."""
    return TargetInfo(path, "file", 4096, length, True, 4096, False, name="t")


GIB = 1 << 30
BUILTIN = sorted(p.stem for p in BUILTIN_DIR.glob("*.toml"))
APPLICATIONS = ("mail", "oltp", "dss", "web", "backup")
IOMETER = ("database", "fileserver", "streaming-read", "streaming-write", "workstation")
# Profiles faithful to the seed studies (tests/test_seed_profiles.py checks them).
SEED_APPLICATIONS = ("jetstress-2010", "esg-backup", "vmmark-mail", "vmmark-standby")
SEED_WORKLOADS = (
    "orion-oltp",
    "orion-dss",
    "iometer-512b-5050",
    "iometer-4k-7030",
    "iometer-webserver",
    "vmmark-web",
)
# Keys of a profile's [[stream]] that compile_tiles derives or drops instead of copying.
DERIVED = {"name", "region", "copies", "rate", "rate_bytes", "qd"}


def one_app_tile(name: str, overrides: dict | None = None) -> TileSpec:
    return TileSpec(name, [TileApp(load_profile(name).with_overrides(overrides or {}), name)])


def streams_by_name(layout) -> dict[str, dict]:
    return {s["name"]: s for s in layout.doc["stream"]}


@pytest.mark.parametrize("module", ["tilemark.run.tiles", "tilemark.run.runner"])
def test_tilerun_imports_on_its_own(module):
    """Regression: runner -> cli.live -> cli/__init__ -> cli.profiles -> runner was circular."""
    proc = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr.strip().splitlines()[-1]


# -----------------------------------------------------------------------------------------------
# Built-in profiles


def test_the_built_in_set_is_the_applications_iometer_specs_and_seed_profiles():
    assert BUILTIN == sorted(APPLICATIONS + IOMETER + SEED_APPLICATIONS + SEED_WORKLOADS)
    assert DEFAULT_TILE == APPLICATIONS
    assert sorted(p.name for p in list_profiles()) == BUILTIN
    kinds = {p.name: p.kind for p in list_profiles()}
    applications = set(APPLICATIONS + SEED_APPLICATIONS)
    assert {n for n, k in kinds.items() if k == "application"} == applications
    assert {n for n, k in kinds.items() if k == "workload"} == set(IOMETER + SEED_WORKLOADS)


@pytest.mark.parametrize("name", BUILTIN)
def test_every_built_in_profile_loads_and_compiles_alone_and_through_the_plan(name):
    profile = load_profile(name)
    assert profile.name == name
    assert profile.path == str(BUILTIN_DIR / f"{name}.toml")
    layout = compile_tiles(one_app_tile(name), 2, capacity=64 * MIB)
    assert [s["name"] for s in layout.doc["stream"]] == [
        f"t{t}.{name}.{s}" for t in (1, 2) for s in profile.stream_names()
    ]
    settings = TileRunSettings(
        targets=[TargetSpec("t", "/nonexistent/t.dat")], capacity=64 * MIB, duration=1, warmup=0
    )
    workload, _ = tile_workload(one_app_tile(name), 2, settings, max_tiles=2, infos=[_info()])
    assert len(workload.streams) == 2 * len(profile.stream_names())


@pytest.mark.parametrize("name", APPLICATIONS)
def test_compiled_streams_copy_every_literal_key_of_the_toml(name):
    """What the TOML says about a stream's IO shape reaches the plan unchanged, in the default
    tile and in a tile of that one application."""
    doc = tomllib.loads((BUILTIN_DIR / f"{name}.toml").read_text())
    for tile in (default_tile(), one_app_tile(name)):
        compiled = streams_by_name(compile_tiles(tile, 1, capacity=GIB))
        mine = {k: v for k, v in compiled.items() if k.startswith(f"t1.{name}.")}
        assert sorted(mine) == sorted(f"t1.{name}.{t['name']}" for t in doc["stream"])
        for table in doc["stream"]:
            stream = mine[f"t1.{name}.{table['name']}"]
            for key, value in table.items():
                if key not in DERIVED:
                    assert stream[key] == value, (table["name"], key)
            expected = (set(table) - DERIVED) | {"name", "offset", "length"}
            expected |= {k for k in ("rate", "rate_bytes", "qd") if k in table}
            assert set(stream) == expected, table["name"]


# name -> {stream: (iops, bytes/s, qd)}, from the TOML comments and methodology 11.1.
DOCUMENTED = {
    "mail": {"db": (120.0, None, None), "log": (12.0, None, None), "bdm": (None, 1 * MIB, None)},
    "oltp": {"data": (1000.0, None, None), "redo": (250.0, None, None)},
    "dss": {
        **{f"scan{i}": (None, 45 * MIB, 4) for i in range(4)},
        "random": (None, 20 * MIB, 4),
    },
    "web": {"content": (500.0, None, None)},
    "backup": {"stream": (None, 100 * MIB, 8)},
}


@pytest.mark.parametrize("name", APPLICATIONS)
@pytest.mark.parametrize("alone", [False, True], ids=["default-tile", "alone"])
def test_application_rates_and_queue_depths_are_the_documented_ones(name, alone):
    tile = one_app_tile(name) if alone else default_tile()
    layout = compile_tiles(tile, 3, capacity=4 * GIB)
    compiled = streams_by_name(layout)
    for t in (1, 2, 3):
        for stream, (iops, bps, qd) in DOCUMENTED[name].items():
            s = compiled[f"t{t}.{name}.{stream}"]
            assert s.get("rate") == (pytest.approx(iops) if iops else None), stream
            assert s.get("rate_bytes") == (pytest.approx(bps) if bps else None), stream
            assert s.get("qd") == qd, stream
            assert s["arrival"] in ("poisson", "constant"), "applications are open loop"


def test_dss_is_four_scans_plus_random_summing_to_200_mib_per_s():
    compiled = streams_by_name(compile_tiles(one_app_tile("dss"), 1, capacity=GIB))
    scans = [compiled[f"t1.dss.scan{i}"] for i in range(4)]
    random_ = compiled["t1.dss.random"]
    assert all(s["pattern"] == "sequential" and s["bs"] == "1m" for s in scans)
    assert random_["rw"] == "randread" and random_["bs"] == "1m"
    total = sum(s["rate_bytes"] for s in [*scans, random_])
    assert total == pytest.approx(200 * MIB)
    assert random_["rate_bytes"] == pytest.approx(0.1 * total)
    # The four scans split the DSS region in quarters; the random stream covers all of it.
    lo = min(s["offset"] for s in scans)
    hi = max(s["offset"] + s["length"] for s in scans)
    assert (random_["offset"], random_["offset"] + random_["length"]) == (lo, hi)
    spans = sorted((s["offset"], s["offset"] + s["length"]) for s in scans)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_web_mix_has_a_mean_of_about_15_7_kib():
    web = streams_by_name(compile_tiles(one_app_tile("web"), 1, capacity=GIB))["t1.web.content"]
    mix = parse_size_mix(web["bs"], "bs")
    assert sum(w for _, w in mix) == 100
    sizes_kib = [0.5, 1, 2, 4, 8, 16, 32, 64, 128, 512]
    assert [s for s, _ in mix] == [int(k * KIB) for k in sizes_kib]
    mean = sum(s * w for s, w in mix) / 100
    assert mean / KIB == pytest.approx(15.66, abs=0.01)
    assert 500 * mean / MIB == pytest.approx(7.65, abs=0.01)


@pytest.mark.parametrize("name", IOMETER)
def test_iometer_specs_are_four_closed_loop_workers_with_qd_outstanding(name):
    for outstanding, overrides in ((4, {}), (16, {"outstanding": "16"})):
        layout = compile_tiles(one_app_tile(name, overrides), 1, capacity=256 * MIB)
        streams = layout.doc["stream"]
        assert [s["name"] for s in streams] == [f"t1.{name}.worker@{i}" for i in range(4)]
        for s in streams:
            assert s["arrival"] == "closed"
            assert s["qd"] == outstanding
            assert "rate" not in s and "rate_bytes" not in s
        assert load_profile(name).rates() == {f"worker@{i}": {} for i in range(4)}


# -----------------------------------------------------------------------------------------------
# Overrides (--set)


def test_parse_sets_groups_by_application():
    assert parse_sets(
        ["mail.mailboxes=2000", " oltp.qos.read_avg.max_ms = 5 ", "mail.iops_per_mailbox=0.2"]
    ) == {
        "mail": {"mailboxes": "2000", "iops_per_mailbox": "0.2"},
        "oltp": {"qos.read_avg.max_ms": "5"},
    }
    assert parse_sets([]) == {}


@pytest.mark.parametrize("item", ["mail", "mail.mailboxes", "mail.=3", "=3", "mail.mailboxes="])
def test_parse_sets_rejects_malformed_items(item):
    with pytest.raises(UsageError, match=r"--set .*APP\.KNOB=VALUE"):
        parse_sets([item])


def test_overrides_change_rates_and_qos_limits():
    sets = parse_sets(
        [
            "mail.mailboxes=2000",
            "oltp.iops=400",
            "dss.mibps=40",
            "backup.mibps=10",
            "oltp.qos.read_avg.max_ms=5",
            "web.qos.iops.min_fraction=0.8",
        ]
    )
    tile = default_tile(sets)
    compiled = streams_by_name(compile_tiles(tile, 1, capacity=GIB))
    assert compiled["t1.mail.db"]["rate"] == pytest.approx(240)
    assert compiled["t1.mail.log"]["rate"] == pytest.approx(24)
    assert compiled["t1.oltp.data"]["rate"] == pytest.approx(400)
    assert compiled["t1.oltp.redo"]["rate"] == pytest.approx(100)
    assert compiled["t1.dss.scan0"]["rate_bytes"] == pytest.approx(9 * MIB)
    assert compiled["t1.dss.random"]["rate_bytes"] == pytest.approx(4 * MIB)
    assert compiled["t1.backup.stream"]["rate_bytes"] == pytest.approx(10 * MIB)
    assert compiled["t1.web.content"]["rate"] == pytest.approx(500), "untouched"
    qos = {a.label: {c.id: c for c in a.profile.qos} for a in tile.apps}
    assert qos["oltp"]["read_avg"].max_ms == 5
    assert qos["oltp"]["read_p99"].max_ms == 30, "untouched"
    assert qos["web"]["iops"].min_fraction == 0.8
    # The built-in profile itself is unchanged.
    assert load_profile("mail").scale["mailboxes"] == 1000


@pytest.mark.parametrize(
    "item, named",
    [
        ("mail.nosuchknob=1", "nosuchknob"),
        ("nosuchapp.iops=1", "nosuchapp"),
        ("oltp.qos.nosuchcriterion.max_ms=1", "nosuchcriterion"),
        ("oltp.qos.read_avg.stat=p99", "max_ms and min_fraction"),
        ("mail.mailboxes=lots", "mail.mailboxes"),
        ("mail.mailboxes=-5", "mail.mailboxes"),
        ("mail.a.b=1", "mail.a.b"),
    ],
)
def test_bad_override_is_a_usage_error_naming_it(item, named):
    with pytest.raises(UsageError) as e:
        default_tile(parse_sets([item]))
    assert named in str(e.value)


def test_override_to_zero_rate_fails_naming_the_override_profile_and_stream():
    # Found when the tile is built, before anything is compiled or run.
    with pytest.raises(
        UsageError,
        match=r"override mail\.mailboxes=0: .*mail\.toml: stream 'db': rate must come out above 0",
    ):
        compile_tiles(default_tile(parse_sets(["mail.mailboxes=0"])), 1, capacity=GIB)


def test_override_to_an_impossible_rate_is_refused_like_rate():
    with pytest.raises(UsageError, match=r"override mail\.mailboxes=1e12: .*at most 10,000,000"):
        default_tile(parse_sets(["mail.mailboxes=1e12"]))


# -----------------------------------------------------------------------------------------------
# Region layout

CAPACITIES = [256 * MIB, GIB + 12345, 10 * GIB + 7 * MIB + 3, 3 * (1 << 40) + 1]


def mixed_tile() -> TileSpec:
    """The default tile plus an Iometer spec and a second mail, so weights are uneven."""
    tile = default_tile()
    tile.apps.append(TileApp(load_profile("fileserver"), "fileserver"))
    tile.apps.append(TileApp(load_profile("mail"), "mail2"))
    return tile


@pytest.mark.parametrize(
    "make_tile, capacity",
    [(default_tile, c) for c in CAPACITIES] + [(mixed_tile, c) for c in CAPACITIES[1:]],
    ids=[f"default-{c}" for c in CAPACITIES] + [f"mixed-{c}" for c in CAPACITIES[1:]],
)
def test_instances_are_disjoint_inside_capacity_and_on_mib_boundaries(make_tile, capacity):
    tile = make_tile()
    for n in range(1, 9):
        layout = compile_tiles(tile, n, capacity=capacity, max_tiles=8)
        streams = layout.doc["stream"]
        assert len(layout.tags) == len(streams)
        assert {(t.tile, t.app) for t in layout.tags} == {
            (k, a.label) for k in range(1, n + 1) for a in tile.apps
        }
        for tag, s in zip(layout.tags, streams, strict=True):
            assert s["name"] == f"t{tag.tile}.{tag.app}.{tag.stream}"
            assert s["offset"] % MIB == 0 and s["length"] % MIB == 0, s
            assert s["length"] >= MIB
            assert 0 <= s["offset"] and s["offset"] + s["length"] <= capacity, s
        # Every stream lies in its instance's region; regions never overlap.
        regions = {(r["tile"], r["app"]): r for r in layout.regions}
        assert len(regions) == len(layout.regions) == n * len(tile.apps)
        for tag, s in zip(layout.tags, streams, strict=True):
            r = regions[(tag.tile, tag.app)]
            assert r["offset"] <= s["offset"]
            assert s["offset"] + s["length"] <= r["offset"] + r["length"]
        spans = sorted((r["offset"], r["offset"] + r["length"]) for r in layout.regions)
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            assert end <= start
        for r in layout.regions:
            assert r["offset"] % MIB == 0 and r["length"] % MIB == 0
        # And directly, stream by stream, across instances.
        for i, (a, sa) in enumerate(zip(layout.tags, streams, strict=True)):
            for b, sb in zip(layout.tags[i + 1 :], streams[i + 1 :], strict=True):
                if (a.tile, a.app) == (b.tile, b.app):
                    continue
                overlap = min(sa["offset"] + sa["length"], sb["offset"] + sb["length"]) - max(
                    sa["offset"], sb["offset"]
                )
                assert overlap <= 0, (sa["name"], sb["name"])


@pytest.mark.parametrize("capacity", CAPACITIES)
def test_tile_k_uses_the_same_bytes_whatever_the_tile_count(capacity):
    tile = default_tile()
    layouts = {n: compile_tiles(tile, n, capacity=capacity, max_tiles=8) for n in range(1, 9)}
    for k in range(1, 9):
        regions = [[r for r in layouts[n].regions if r["tile"] == k] for n in range(k, 9)]
        streams = [
            [s for s in layouts[n].doc["stream"] if s["name"].startswith(f"t{k}.")]
            for n in range(k, 9)
        ]
        assert regions[0] and all(r == regions[0] for r in regions), k
        assert streams[0] and all(s == streams[0] for s in streams), k
    # Tile slots follow each other: tile k starts where slot k - 1 ends.
    starts = [min(r["offset"] for r in layouts[8].regions if r["tile"] == k) for k in range(1, 9)]
    slot = starts[1] - starts[0]
    assert starts == [k * slot for k in range(8)]
    assert slot == capacity // 8 // MIB * MIB


def test_shares_follow_capacity_weights():
    layout = compile_tiles(default_tile(), 1, capacity=58_500 * MIB)
    share = {r["app"]: r["length"] for r in layout.regions}
    weights = {a.label: a.profile.capacity_weight for a in default_tile().apps}
    assert weights == {"mail": 25, "oltp": 5.5, "dss": 20, "web": 3, "backup": 5}
    for app, w in weights.items():
        assert share[app] == pytest.approx(w * 1000 * MIB, abs=MIB), app
    # mail: db and bdm share [0, 0.95) of the mail region, the log is the last 5 %.
    s = streams_by_name(layout)
    assert s["t1.mail.db"]["offset"] == s["t1.mail.bdm"]["offset"] == 0
    assert s["t1.mail.db"]["length"] == s["t1.mail.bdm"]["length"] == 23_750 * MIB
    assert s["t1.mail.log"]["offset"] == 23_750 * MIB
    assert s["t1.mail.log"]["length"] == 1250 * MIB


def test_offsets_and_lengths_are_integers():
    layout = compile_tiles(default_tile(), 2, capacity=GIB)
    for s in layout.doc["stream"]:
        assert type(s["offset"]) is int and type(s["length"]) is int, s["name"]
    for r in layout.regions:
        assert type(r["offset"]) is int and type(r["length"]) is int, r


@pytest.mark.parametrize("tiles, capacity", [(1, 5 * MIB), (8, 60 * MIB), (1, 4 * KIB)])
def test_capacity_too_small_is_a_usage_error_naming_capacity(tiles, capacity):
    with pytest.raises(UsageError, match=r"^--capacity .* is too small for \d+ tile"):
        compile_tiles(default_tile(), tiles, capacity=capacity)


@pytest.mark.parametrize("tiles, capacity", [(1, 5 * MIB), (8, 60 * MIB)])
def test_the_suggested_minimum_capacity_is_enough(tiles, capacity):
    with pytest.raises(UsageError) as e:
        compile_tiles(default_tile(), tiles, capacity=capacity)
    m = re.search(r"use at least ([\d.]+) MiB", str(e.value))
    assert m, str(e.value)
    suggested = int(float(m[1]) * MIB) + 1
    compile_tiles(default_tile(), tiles, capacity=suggested)


def test_smallest_capacity_that_fits_gives_every_app_at_least_1_mib():
    # web has the smallest weight (3 of 58.5): it needs a 20 MiB slot (19.5 floored up).
    layout = compile_tiles(default_tile(), 1, capacity=20 * MIB)
    assert min(r["length"] for r in layout.regions) == MIB
    with pytest.raises(UsageError, match="--capacity"):
        compile_tiles(default_tile(), 1, capacity=19 * MIB)


# -----------------------------------------------------------------------------------------------
# O_DIRECT alignment


def web_bs(dio_alignment: int) -> object:
    layout = compile_tiles(one_app_tile("web"), 1, capacity=GIB, dio_alignment=dio_alignment)
    return streams_by_name(layout)["t1.web.content"]["bs"]


def test_sizes_below_dio_alignment_are_folded_up_keeping_the_weights():
    original = parse_size_mix(web_bs(0), "bs")
    folded = parse_size_mix(web_bs(4096), "bs")
    assert min(s for s, _ in folded) == 4096
    assert sum(w for _, w in folded) == pytest.approx(sum(w for _, w in original)) == 100
    assert dict(folded)[4096] == pytest.approx(22 + 15 + 8 + 23)
    assert {s: w for s, w in folded if s > 4096} == {s: w for s, w in original if s > 4096}
    # At 512 B nothing changes; streams without small sizes are left alone.
    assert web_bs(512) == "512:22,1k:15,2k:8,4k:23,8k:15,16k:2,32k:6,64k:7,128k:1,512k:1"
    mail = streams_by_name(compile_tiles(one_app_tile("mail"), 1, capacity=GIB, dio_alignment=4096))
    assert mail["t1.mail.db"]["bs"] == "32k"


def test_folded_mix_is_a_valid_plan_on_a_4k_device():
    settings = TileRunSettings(
        targets=[TargetSpec("t", "/nonexistent/t.dat")], capacity=GIB, duration=1, warmup=0
    )
    workload, _ = tile_workload(default_tile(), 1, settings, max_tiles=1, infos=[_info()])
    assert isinstance(workload, plan.Workload)


def test_a_target_with_tile_in_its_path_gives_each_tile_its_own_file_of_one_slot():
    pinned = [f"{app}.target=data" for app in ("mail", "oltp", "dss", "web", "backup")]
    tile = default_tile(parse_sets(["mail.log.target=log", *pinned]))
    names = ["data", "log"]
    shared = compile_tiles(tile, 3, capacity=GIB, max_tiles=4, targets=names)
    own = compile_tiles(
        tile, 3, capacity=GIB, max_tiles=4, targets=names, own_files=frozenset({"log"})
    )
    logs = {r["tile"]: r for r in shared.regions if r["target"] == "log"}
    own_logs = {r["tile"]: r for r in own.regions if r["target"].startswith("log")}
    # The same slot of the same size, in tile k's own file from its start.
    assert {k: r["length"] for k, r in own_logs.items()} == {k: 256 * MIB for k in (1, 2, 3)}
    assert {k: r["length"] for k, r in logs.items()} == {k: 256 * MIB for k in (1, 2, 3)}
    assert [logs[k]["offset"] for k in (1, 2, 3)] == [0, 256 * MIB, 512 * MIB]
    assert {k: (r["target"], r["offset"]) for k, r in own_logs.items()} == {
        k: (f"log.{k}", 0) for k in (1, 2, 3)
    }
    streams = streams_by_name(own)
    assert streams["t2.mail.log"]["target"] == "log.2" and streams["t2.mail.log"]["offset"] == 0
    assert streams["t2.mail.db"]["target"] == "data"
    # Everything else is laid out as on the shared target.
    assert [r for r in own.regions if r["target"] == "data"] == [
        r for r in shared.regions if r["target"] == "data"
    ]
    specs = [TargetSpec("data", "/x/d.dat"), TargetSpec("log", "/x/log-{tile}.dat")]
    assert [t.to_json() for t in expand_targets(tile, specs, GIB, 4)] == [
        {"name": "data", "path": "/x/d.dat", "size": GIB},
        *[{"name": f"log.{k}", "path": f"/x/log-{k}.dat", "size": 256 * MIB} for k in (1, 2, 3, 4)],
    ]
    # Through a tile run's workload: the files are its targets.
    settings = TileRunSettings(targets=specs, capacity=GIB, duration=1, warmup=0)
    workload, _ = tile_workload(tile, 2, settings, max_tiles=4, infos=[_info()] * 5)
    assert [(t.name, t.path, t.size) for t in workload.targets] == [
        ("data", "/x/d.dat", GIB),
        *[(f"log.{k}", f"/x/log-{k}.dat", 256 * MIB) for k in (1, 2, 3, 4)],
    ]


# -----------------------------------------------------------------------------------------------
# A low-rate application and window edges

MS = 1_000_000


def _opdata(n: int) -> dict:
    lat = [2 * MS] * n
    return {
        "ops": n,
        "bytes": n * MIB,
        "errors": {},
        "service": hist_json(lat),
        "response": hist_json(lat),
    }


def _empty() -> dict:
    return _opdata(0)


def test_low_rate_dss_is_not_failed_by_one_io_per_stream_at_the_window_edge():
    """dss at 20 MiB/s: each scan issues 4.5 IOs/s at constant rate, so at the end of a 1 s
    warm-up + 3 s window all four scans have an IO that came due 0.2 ms before the end."""
    dss = load_profile("dss").with_overrides({"mibps": 20})
    index = {n: i for i, n in enumerate(dss.stream_names())}
    # (scan ops per 1-s interval, random ops); the last interval ends with one IO behind per scan
    per_interval = [(5, 3, "warmup"), (4, 3, "measure"), (5, 0, "measure"), (4, 0, "measure")]
    snaps = []
    for k, (scan_ops, random_ops, phase) in enumerate(per_interval):
        last = k == len(per_interval) - 1
        rows = []
        for name, i in index.items():
            n = random_ops if name == "random" else scan_ops
            rows.append(
                {
                    "stream": i,
                    "read": _opdata(n),
                    "write": _empty(),
                    "sync": _empty(),
                    "lag_max_ns": 0,
                    "behind_ios": 1 if last and name != "random" else 0,
                    "inflight": 0,
                }
            )
        snaps.append(
            {
                "interval": k,
                "phase": phase,
                "start_ns": k * 1_000_000_000,
                "end_ns": (k + 1) * 1_000_000_000,
                "streams": rows,
            }
        )
    measured = [s for s in snaps if s["phase"] == "measure"]
    result = {
        "complete": True,
        "started_at_ns": 0,
        "measure_start_ns": measured[0]["start_ns"],
        "measure_end_ns": measured[-1]["end_ns"],
        "streams": [
            {
                "stream": i,
                "read": _opdata(sum(s["streams"][i]["read"]["ops"] for s in measured)),
                "write": _empty(),
                "sync": _empty(),
                "lag_max_ns": 0,
                "ios_issued_late": 0,
            }
            for i in index.values()
        ],
    }
    verdicts = evaluate(dss.qos, index, snaps, result, qos_interval_s=1.0)
    assert [v.scope for v in verdicts if v.criterion == "throughput"][:2] == [
        "window",
        "interval 1",
    ]
    assert failures(verdicts) == []


# -----------------------------------------------------------------------------------------------
# Bad profile files

GOOD_PROFILE = """\
[profile]
name = "mini"
metric = "iops('db')"
metric_unit = "IOPS"

[scale]
iops = 10

[[stream]]
name = "db"
rw = "randread"
bs = "4k"
rate = "iops"
arrival = "poisson"

[qos.read_avg]
stream = "db"
op = "read"
stat = "mean"
max_ms = 20
"""


def write_profile(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return str(path)


def test_the_good_profile_loads(tmp_path):
    p = load_profile(write_profile(tmp_path, "good", GOOD_PROFILE))
    assert (p.name, p.stream_names(), p.rates()) == ("mini", ["db"], {"db": {"iops": 10.0}})
    assert [(c.id, c.stat, c.max_ms) for c in p.qos] == [("read_avg", "mean", 20.0)]


BAD_PROFILES = {
    "unknown_key": (
        ('metric_unit = "IOPS"', 'metric_unit = "IOPS"\ncolour = "red"'),
        ["[profile]", "colour"],
    ),
    "unknown_stream_key": (('bs = "4k"', 'bs = "4k"\nspeed = 3'), ["[[stream]] db", "speed"]),
    "missing_metric": (("metric = \"iops('db')\"\n", ""), ["[profile]", "metric"]),
    "missing_metric_unit": (('metric_unit = "IOPS"\n', ""), ["metric_unit"]),
    "bad_region": (
        ('rw = "randread"', 'region = [0.5, 0.2]\nrw = "randread"'),
        ["[[stream]] db", "region"],
    ),
    "region_past_one": (
        ('rw = "randread"', 'region = [0.0, 1.5]\nrw = "randread"'),
        ["[[stream]] db", "region"],
    ),
    "qos_unknown_stream": (
        ('stream = "db"\nop', 'stream = "nope"\nop'),
        ["[qos.read_avg]", "nope"],
    ),
    "latency_without_max_ms": (("max_ms = 20\n", ""), ["[qos.read_avg]", "max_ms"]),
    "bad_stat": (('stat = "mean"', 'stat = "p42"'), ["[qos.read_avg]", "stat", "p42"]),
    "rate_unknown_name": (('rate = "iops"', 'rate = "iopz * 2"'), ["rate", "iopz"]),
    "qd_unknown_name": (('rate = "iops"', 'rate = "iops"\nqd = "depth"'), ["qd", "depth"]),
    "metric_unknown_name": (
        ("metric = \"iops('db')\"", "metric = \"iops('db') / per_user\""),
        ["metric", "per_user"],
    ),
    "rate_unparsable": (('rate = "iops"', 'rate = "iops *"'), ["rate", "iops *"]),
    "rate_not_positive": (('rate = "iops"', 'rate = "iops - 10"'), ["rate", "above 0"]),
    "scale_not_a_number": (("iops = 10", 'iops = "ten"'), ["[scale] iops"]),
    "bad_kind": (('metric_unit = "IOPS"', 'metric_unit = "IOPS"\nkind = "app"'), ["kind"]),
    "bad_weight": (
        ('metric_unit = "IOPS"', 'metric_unit = "IOPS"\ncapacity_weight = 0'),
        ["capacity_weight"],
    ),
    "bad_copies": (('rw = "randread"', 'copies = 0\nrw = "randread"'), ["copies"]),
    "throughput_without_min_fraction": (
        ('stat = "mean"\nmax_ms = 20', 'stat = "throughput"'),
        ["[qos.read_avg]", "min_fraction"],
    ),
    "duplicate_stream": (
        ("[qos.read_avg]", '[[stream]]\nname = "db"\nrw = "read"\n\n[qos.read_avg]'),
        ["unique", "db"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_PROFILES))
def test_bad_profile_is_a_usage_error_naming_the_file_and_the_field(tmp_path, case):
    (old, new), named = BAD_PROFILES[case]
    assert old in GOOD_PROFILE, case
    path = write_profile(tmp_path, case, GOOD_PROFILE.replace(old, new, 1))
    with pytest.raises(UsageError) as e:
        load_profile(path)
    message = str(e.value)
    assert path in message
    for word in named:
        assert word in message, (case, message)


def test_invalid_toml_names_the_file_and_the_line(tmp_path):
    path = write_profile(tmp_path, "broken", GOOD_PROFILE + "\n[[stream]\n")
    with pytest.raises(UsageError, match=r"is not valid TOML: .*line 22") as e:
        load_profile(path)
    assert path in str(e.value)


def test_no_streams_names_the_file(tmp_path):
    path = write_profile(tmp_path, "empty", GOOD_PROFILE.split("[[stream]]")[0])
    with pytest.raises(UsageError, match=r"has no \[\[stream\]\] tables") as e:
        load_profile(path)
    assert path in str(e.value)


def test_unknown_profile_name_lists_the_known_ones():
    with pytest.raises(UsageError, match=r"unknown profile 'nosuch' \(known: backup, database"):
        load_profile("nosuch")
    with pytest.raises(UsageError, match="does not exist"):
        load_profile("/nonexistent/dir/p.toml")


def test_unparsable_metric_is_a_usage_error(tmp_path):
    text = GOOD_PROFILE.replace("metric = \"iops('db')\"", "metric = \"iops('db'\"")
    path = write_profile(tmp_path, "metric_syntax", text)
    with pytest.raises(UsageError) as e:
        load_profile(path)
    assert path in str(e.value) and "metric" in str(e.value)


@pytest.mark.parametrize(
    "metric, named", [("iops('nosuch')", "nosuch"), ("latency('db')", "latency")]
)
def test_metric_with_an_unknown_stream_or_function_is_rejected_at_load(tmp_path, metric, named):
    text = GOOD_PROFILE.replace("metric = \"iops('db')\"", f'metric = "{metric}"')
    path = write_profile(tmp_path, "metric_ref", text)
    with pytest.raises(UsageError) as e:
        load_profile(path)
    assert path in str(e.value) and named in str(e.value)


def test_user_profile_directory_shadows_and_extends_built_ins(tmp_path, monkeypatch):
    write_profile(tmp_path, "mini", GOOD_PROFILE)
    write_profile(tmp_path, "web", GOOD_PROFILE.replace('name = "mini"', 'name = "web"'))
    monkeypatch.setenv("TILEMARK_PROFILES", str(tmp_path))
    found = {p.name: p for p in list_profiles()}
    assert set(found) == {*BUILTIN, "mini"}
    assert found["web"].path == str(tmp_path / "web.toml")
    assert load_profile("web").stream_names() == ["db"]


# -----------------------------------------------------------------------------------------------
# Tile files


def write_tile(tmp_path: Path, text: str, name: str = "tile") -> str:
    path = tmp_path / f"{name}.toml"
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_tile_file_with_names_overrides_and_a_relative_profile(tmp_path):
    write_profile(tmp_path, "mini", GOOD_PROFILE)
    path = write_tile(
        tmp_path,
        """
        [tile]
        name = "two-mails"

        [[app]]
        profile = "mail"
        [app.scale]
        mailboxes = 500
        [app.qos.db_read_avg]
        max_ms = 5

        [[app]]
        profile = "mail"
        name = "mail2"

        [[app]]
        profile = "mini.toml"
        """,
    )
    tile = load_tile(path, parse_sets(["mail2.mailboxes=3000"]))
    assert (tile.name, tile.source) == ("two-mails", path)
    assert [a.label for a in tile.apps] == ["mail", "mail2", "mini"]
    compiled = streams_by_name(compile_tiles(tile, 1, capacity=GIB))
    assert compiled["t1.mail.db"]["rate"] == pytest.approx(60)
    assert compiled["t1.mail2.db"]["rate"] == pytest.approx(360)
    assert compiled["t1.mini.db"]["rate"] == pytest.approx(10)
    qos = {a.label: {c.id: c.max_ms for c in a.profile.qos} for a in tile.apps}
    assert qos["mail"]["db_read_avg"] == 5 and qos["mail2"]["db_read_avg"] == 20


def test_tile_name_defaults_to_the_file_stem(tmp_path):
    tile = load_tile(write_tile(tmp_path, '[[app]]\nprofile = "web"\n', name="webonly"))
    assert tile.name == "webonly" and [a.label for a in tile.apps] == ["web"]


BAD_TILES = {
    "unknown_key": ('[tile]\nname = "x"\n[[app]]\nprofile = "mail"\n[extra]\na = 1\n', ["extra"]),
    "unknown_app_key": ('[[app]]\nprofile = "mail"\nweight = 3\n', ["[[app]] 1", "weight"]),
    "missing_profile": (
        '[[app]]\nprofile = "mail"\n[[app]]\nname = "m"\n',
        ["[[app]] 2", "profile"],
    ),
    "duplicate_names": (
        '[[app]]\nprofile = "mail"\n[[app]]\nprofile = "mail"\n',
        ["unique", "mail"],
    ),
    "no_apps": ('[tile]\nname = "x"\n', ["[[app]]"]),
    "invalid_toml": ("[[app]\n", ["not valid TOML", "line 1"]),
}


@pytest.mark.parametrize("case", sorted(BAD_TILES))
def test_bad_tile_file_is_a_usage_error_naming_the_file_and_the_field(tmp_path, case):
    text, named = BAD_TILES[case]
    path = write_tile(tmp_path, text, name=case)
    with pytest.raises(UsageError) as e:
        load_tile(path)
    message = str(e.value)
    assert message.startswith(f"tile file {path}"), message
    for word in named:
        assert word in message, (case, message)


def test_missing_tile_file_and_unknown_app_in_set(tmp_path):
    with pytest.raises(UsageError, match=r"tile file .*missing\.toml does not exist"):
        load_tile(str(tmp_path / "missing.toml"))
    path = write_tile(tmp_path, '[[app]]\nprofile = "mail"\n')
    with pytest.raises(UsageError, match=r"no application 'oltp' \(it has: mail\)"):
        load_tile(path, parse_sets(["oltp.iops=1"]))


@pytest.mark.parametrize(
    "text",
    [
        '[[app]]\nprofile = "mail"\nscale = 3\n',
        '[[app]]\nprofile = "mail"\nqos = { db_read_avg = 3 }\n',
        'tile = 3\n[[app]]\nprofile = "mail"\n',
    ],
    ids=["scale", "qos", "tile"],
)
def test_tile_file_tables_of_the_wrong_type_are_usage_errors(tmp_path, text):
    path = write_tile(tmp_path, text, name="wrong_type")
    with pytest.raises(UsageError) as e:
        load_tile(path)
    assert path in str(e.value)


def test_unknown_knob_in_a_tile_file_names_the_tile_file(tmp_path):
    path = write_tile(tmp_path, '[[app]]\nprofile = "mail"\n[app.scale]\nnope = 3\n')
    with pytest.raises(UsageError) as e:
        load_tile(path)
    assert "nope" in str(e.value) and path in str(e.value)
