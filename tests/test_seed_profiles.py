"""The profiles faithful to the seed studies: each compiles to the rates, sizes, mixes, queue
depths and QoS criteria its file documents, with the seeds' numbers (docs/tiles.md)."""

from __future__ import annotations

import pytest

from engine_data import hist_json
from tilemark.analysis.qos import evaluate, failures
from tilemark.run.tiles import TileRunSettings, tile_workload
from tilemark.targets.header import TargetInfo
from tilemark.targets.spec import TargetSpec
from tilemark.units import parse_size_mix
from tilemark.workload import plan
from tilemark.workload.apps import TileApp, TileSpec, load_profile
from tilemark.workload.tilelayout import compile_tiles

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
MS = 1_000_000
WEB_MIX = "512:22,1k:15,2k:8,4k:23,8k:15,16k:2,32k:6,64k:7,128k:1,512k:1"
SEED_PROFILES = (
    "jetstress-2010",
    "orion-oltp",
    "orion-dss",
    "iometer-512b-5050",
    "iometer-4k-7030",
    "iometer-webserver",
    "esg-backup",
    "vmmark-mail",
    "vmmark-web",
    "vmmark-standby",
)


def tile_of(*names: str, overrides: dict | None = None) -> TileSpec:
    apps = [TileApp(load_profile(n).with_overrides((overrides or {}).get(n, {})), n) for n in names]
    return TileSpec("seed", apps)


def compiled(name: str, overrides: dict | None = None, **kw) -> dict[str, dict]:
    layout = compile_tiles(tile_of(name, overrides={name: overrides or {}}), 1, capacity=GIB, **kw)
    return {s["name"].split(".", 2)[2]: s for s in layout.doc["stream"]}


def criteria(name: str) -> dict[str, dict]:
    return {c.id: c.__dict__ for c in load_profile(name).qos}


@pytest.mark.parametrize("name", SEED_PROFILES)
def test_every_seed_profile_compiles_to_a_plan_on_512_and_4k_devices(name):
    settings = TileRunSettings(
        targets=[TargetSpec("t", "/nonexistent/t.dat")], capacity=GIB, duration=1, warmup=0
    )
    for dio in (512, 4096):
        info = TargetInfo("/nonexistent/t.dat", "file", 4096, GIB, True, dio, False, name="t")
        workload, _ = tile_workload(tile_of(name), 2, settings, max_tiles=2, infos=[info])
        assert isinstance(workload, plan.Workload)
        assert len(workload.streams) == 2 * len(load_profile(name).stream_names())


@pytest.mark.parametrize("name", SEED_PROFILES)
def test_every_seed_profile_cites_a_source_for_its_numbers(name):
    text = load_profile(name).path
    lines = open(text).read().splitlines()
    tagged = [ln for ln in lines if any(t in ln for t in ("[S", "[R", "[P"))]
    assert len(tagged) >= 3, "every default carries its source"


# -----------------------------------------------------------------------------------------------
# Jetstress 2010 (seeds 000 and 004)


def test_jetstress_splits_db_reads_and_writes_from_the_log_and_bdm():
    s = compiled("jetstress-2010")
    assert sorted(s) == ["bdm", "db_read", "db_write", "log"]
    # 1,000 mailboxes x 0.12 IOPS, 3:2 read:write; log at 1/10 of DB transfers.
    assert s["db_read"]["rate"] == pytest.approx(72.0)
    assert s["db_write"]["rate"] == pytest.approx(48.0)
    assert s["log"]["rate"] == pytest.approx(12.0)
    assert (s["db_read"]["rw"], s["db_write"]["rw"], s["log"]["rw"]) == (
        "randread",
        "randwrite",
        "write",
    )
    assert s["db_read"]["bs"] == s["db_write"]["bs"] == "32k"
    assert s["log"]["bs"] == "8k" and s["log"]["sync"] == "dsync"
    assert s["log"]["pattern"] == "sequential"
    # BDM: 256 KiB sequential reads at 5 MB/s (10^6 bytes) per database.
    assert s["bdm"]["bs"] == "256k" and s["bdm"]["pattern"] == "sequential"
    assert s["bdm"]["rate_bytes"] == pytest.approx(5e6)
    # The log has its own region after the database: a separate target later.
    db_end = s["db_read"]["offset"] + s["db_read"]["length"]
    assert s["db_write"]["offset"] == s["db_read"]["offset"] == s["bdm"]["offset"]
    assert s["log"]["offset"] >= db_end


def test_jetstress_knobs_scale_the_seed_000_tile_and_the_maintenance_rate():
    knobs = {"mailboxes": 5067, "db_read_share": 0.5, "databases": 2, "bdm_mbps": 1}
    s = compiled("jetstress-2010", knobs)
    assert s["db_read"]["rate"] + s["db_write"]["rate"] == pytest.approx(5067 * 0.12)
    assert s["db_read"]["rate"] == pytest.approx(s["db_write"]["rate"])
    assert s["log"]["rate"] == pytest.approx(5067 * 0.12 / 10)
    assert s["bdm"]["rate_bytes"] == pytest.approx(2e6)


def test_jetstress_criteria_are_the_averages_and_the_2007_maxima():
    c = criteria("jetstress-2010")
    assert c["db_read_avg"]["stat"] == "mean" and c["db_read_avg"]["max_ms"] == 20
    assert not c["db_read_avg"]["per_interval"]
    assert c["log_write_avg"]["max_ms"] == 10 and c["log_write_avg"]["op"] == "write"
    for cid, stream in (("db_read_max", "db_read"), ("log_write_max", "log")):
        assert c[cid]["max_ms"] == 50 and c[cid]["per_interval"]
        assert c[cid]["stat"] == "mean" and c[cid]["streams"] == (stream,)
    assert c["transactional_iops"]["streams"] == ("db_read", "db_write")
    assert c["transactional_iops"]["min_fraction"] == 1.0
    assert c["bdm_throughput"]["min_fraction"] == 0.95
    assert load_profile("jetstress-2010").metric.startswith("floor(iops('db_read', 'db_write')")


def _rows(read_ms: list[float], index: dict[str, int]) -> list[dict]:
    """One engine row per stream: `read_ms` on db_read, nothing on the others."""
    rows = []
    for name, i in index.items():
        lat = [int(v * MS) for v in read_ms] if name == "db_read" else []
        ops = {}
        for op in ("read", "write", "sync"):
            mine = lat if op == "read" else []
            ops[op] = {
                "ops": len(mine),
                "bytes": len(mine) * 32 * KIB,
                "errors": {},
                "service": hist_json(mine),
                "response": hist_json(mine),
            }
        rows.append({"stream": i, **ops, "lag_max_ns": 0, "behind_ios": 0, "inflight": 0})
    return rows


def test_a_slow_second_fails_the_maximum_while_the_average_passes():
    """Jetstress's maximum is the largest sample of an average: one QoS interval whose mean DB
    read latency is 80 ms fails db_read_max while the window's mean stays under 20 ms."""
    profile = load_profile("jetstress-2010")
    index = {n: i for i, n in enumerate(profile.stream_names())}
    per_second = [[80.0] * 20 if k == 3 else [2.0] * 200 for k in range(8)]
    snaps = [
        {"interval": k, "phase": "measure", "start_ns": k * 10**9, "end_ns": (k + 1) * 10**9,
         "streams": _rows(ms, index)}
        for k, ms in enumerate(per_second)
    ]  # fmt: skip
    result = {
        "measure_start_ns": 0,
        "measure_end_ns": 8 * 10**9,
        "streams": _rows([v for ms in per_second for v in ms], index),
    }
    read_criteria = [c for c in profile.qos if c.id in ("db_read_avg", "db_read_max")]
    verdicts = evaluate(read_criteria, index, snaps, result, qos_interval_s=1.0)
    failed = failures(verdicts)
    assert {v.criterion for v in failed} == {"db_read_max"}
    assert [v.scope for v in failed] == ["interval 4"]
    window_avg = next(v for v in verdicts if v.criterion == "db_read_avg")
    assert window_avg.passed and window_avg.value < 20


# -----------------------------------------------------------------------------------------------
# Orion (seed 000)


def test_orion_oltp_is_8k_random_reads_with_outstanding_ios_as_the_knob():
    for outstanding in (5, 32):
        s = compiled("orion-oltp", {"outstanding": outstanding})["small"]
        assert (s["rw"], s["bs"], s["arrival"], s["qd"]) == (
            "randread",
            "8k",
            "closed",
            outstanding,
        )
        assert "rate" not in s and "rate_bytes" not in s
    c = criteria("orion-oltp")["read_avg"]
    assert (c["stat"], c["max_ms"], c["op"]) == ("mean", 10, "read")


def test_orion_dss_is_1m_random_reads_with_streams_as_the_knob():
    for streams in (4, 12):
        s = compiled("orion-dss", {"streams": streams})["large"]
        assert (s["rw"], s["bs"], s["arrival"], s["qd"]) == ("randread", "1m", "closed", streams)
    assert load_profile("orion-dss").metric == "mbps('large')"
    assert load_profile("orion-dss").qos == []


# -----------------------------------------------------------------------------------------------
# IOMeter (seeds 000 and 002)


@pytest.mark.parametrize(
    "name, workers, bs, read",
    [("iometer-512b-5050", 64, "512", 50), ("iometer-4k-7030", 32, "4k", 70)],
)
def test_seed_002_specs_are_workers_with_one_outstanding_io(name, workers, bs, read):
    s = compiled(name)
    assert sorted(s) == sorted(f"worker@{i}" for i in range(workers))
    for w in s.values():
        assert (w["rw"], w["bs"], w["read"], w["random"]) == ("randrw", bs, read, 100)
        assert (w["arrival"], w["qd"]) == ("closed", 1)


def test_512_byte_alignment_is_kept_where_the_device_allows_it_and_folded_where_not():
    # A 512-byte device runs the seed's 512 B IOs at 512 B alignment.
    at_512 = compiled("iometer-512b-5050", dio_alignment=512)["worker@0"]
    assert (at_512["bs"], at_512["align"]) == ("512", "512")
    # A 4 KiB device: size and alignment round up to 4 KiB (the plan records what ran).
    at_4k = compiled("iometer-512b-5050", dio_alignment=4096)["worker@0"]
    assert parse_size_mix(at_4k["bs"], "bs") == [(4096, 1.0)]
    assert at_4k["align"] == 4096
    web = compiled("iometer-webserver", dio_alignment=512)["worker@0"]
    assert (web["bs"], web["align"], web["rw"]) == (WEB_MIX, "512", "randread")
    assert len(compiled("iometer-webserver")) == 4


# -----------------------------------------------------------------------------------------------
# Backup (seed 000)


def test_backup_asks_for_300_mb_per_s_and_checks_every_interval():
    s = compiled("esg-backup")["stream"]
    assert (s["rw"], s["bs"], s["pattern"]) == ("read", "256k", "sequential")
    assert s["rate_bytes"] == pytest.approx(300e6)
    c = criteria("esg-backup")["throughput"]
    assert (c["stat"], c["min_fraction"], c["per_interval"]) == ("throughput", 1.0, True)


# -----------------------------------------------------------------------------------------------
# VMmark-like tile (seed 003)


def test_vmmark_like_tile_is_mail_web_with_think_time_database_and_standby():
    mail = compiled("vmmark-mail")
    assert mail["db"]["rate"] == pytest.approx(1000 * 0.32)
    assert (mail["db"]["bs"], mail["db"]["read"]) == ("8k", 60)
    assert mail["log"]["rate"] == pytest.approx(32.0) and mail["log"]["sync"] == "dsync"
    c = criteria("vmmark-mail")
    assert (c["db_p95"]["stat"], c["db_p95"]["max_ms"]) == ("p95", 500)
    web = compiled("vmmark-web")
    assert len(web) == 20
    for user in web.values():
        assert (user["arrival"], user["qd"], user["burst"]) == ("closed", 4, "4/250ms")
        assert user["bs"] == WEB_MIX
    standby = compiled("vmmark-standby")["idle"]
    assert standby["rate"] == pytest.approx(1.0)
    assert criteria("vmmark-standby") == {}


# -----------------------------------------------------------------------------------------------
# A profile as a tile of one application (`tilemark scale jetstress-2010 --knob mailboxes`)


def test_a_profile_name_or_file_is_a_tile_of_that_one_application(tmp_path):
    from tilemark.study.scale import parse_knob
    from tilemark.workload.tilefile import load_tile_or_profile

    by_name = load_tile_or_profile("jetstress-2010", {"jetstress-2010": {"mailboxes": "2000"}})
    assert [a.label for a in by_name.apps] == ["jetstress-2010"]
    assert by_name.apps[0].profile.scale["mailboxes"] == 2000
    assert parse_knob("mailboxes", by_name) == ("jetstress-2010", "mailboxes", 2000.0)
    assert parse_knob("jetstress-2010.mailboxes", by_name)[1] == "mailboxes"
    copy = tmp_path / "mine.toml"
    copy.write_text(open(load_profile("orion-oltp").path).read())
    by_file = load_tile_or_profile(str(copy))
    assert [a.profile.name for a in by_file.apps] == ["orion-oltp"]
    tile = tmp_path / "t.toml"
    tile.write_text('[tile]\nname = "two"\n[[app]]\nprofile = "web"\n[[app]]\nprofile = "backup"\n')
    assert [a.label for a in load_tile_or_profile(str(tile)).apps] == ["web", "backup"]


def test_a_name_that_is_neither_a_file_nor_a_profile_says_the_tile_file_is_missing():
    from tilemark.errors import UsageError
    from tilemark.workload.tilefile import load_tile_or_profile

    with pytest.raises(UsageError, match="tile file no-such-thing does not exist"):
        load_tile_or_profile("no-such-thing")
    with pytest.raises(UsageError, match="no application 'mail'"):
        load_tile_or_profile("jetstress-2010", {"mail": {"mailboxes": "1"}})
