"""Workload specs (TOML, flags) -> validated Workload -> the plan of docs/engine-boundary.md."""

from __future__ import annotations

import json
import textwrap

import pytest

from tilemark.errors import UsageError
from tilemark.targets.header import TargetInfo
from tilemark.workload import compiler, plan
from tilemark.workload.defaults import default_workload_doc

GIB = 1 << 30
MIB = 1 << 20


def target(data_length: int = GIB, dio_alignment: int = 4096, **kw) -> TargetInfo:
    """An inspected tilemark file target, without touching the disk."""
    fields = {
        "path": "/data/tm.dat",
        "kind": "file",
        "data_offset": 4096,
        "data_length": data_length,
        "direct": True,
        "dio_alignment": dio_alignment,
        "exists": True,
        "tilemark": True,
        "file_data_length": data_length,
        "filled_length": data_length,
    }
    fields.update(kw)
    return TargetInfo(**fields)


def flags(**stream) -> plan.Workload:
    """A workload as the CLI builds it from flags (one stream, labels say --flag)."""
    run_keys = {k: stream.pop(k) for k in list(stream) if k in plan.RUN_KEYS and k != "name"}
    doc = {"target": "/data/tm.dat", **run_keys, "stream": [stream]}
    return plan.parse_workload(doc, source="flags", flag_keys=frozenset(stream) | set(run_keys))


def toml_workload(tmp_path, text: str) -> plan.Workload:
    path = tmp_path / "w.toml"
    path.write_text(textwrap.dedent(text))
    return plan.parse_workload(plan.load_toml(path), source=str(path))


def test_flags_compile_to_the_documented_plan(monkeypatch):
    monkeypatch.setattr(compiler.os, "cpu_count", lambda: 8)
    workload = flags(rw="randrw", read="70", bs="8k", qd="16")
    compiled = compiler.compile_plan(workload, target())
    stream_seed = compiled["streams"][0].pop("seed")
    assert compiled == {
        "plan_version": plan.PLAN_VERSION,  # the engine's newest (docs/engine-boundary.md)
        "backend": "uring",
        "threads": 1,
        "interval_ms": 1000,
        "start_at_ns": None,
        "warmup_ms": 0,
        "duration_ms": 60000,
        "poll_us": 0,
        "cpus": [],  # the kernel places the engine threads
        "sqpoll": False,
        "max_errors": 0,  # the first IO error stops the run
        "io_timeout_ms": 30000,
        "targets": [
            {"name": "tm", "path": "/data/tm.dat", "offset": 4096, "length": GIB, "direct": True}
        ],
        "streams": [
            {
                "name": "randrw",
                "regions": [{"target": 0, "offset": 0, "length": GIB}],
                "spread": "uniform",
                "start_ms": None,
                "stop_ms": None,
                "read_pct": 70.0,
                "sizes": [[8192, 1.0]],
                "pattern": {"kind": "random"},
                "random_pct": 100.0,
                "align": 4096,
                "qd": 16,
                "arrival": {"kind": "closed"},
                "burst": None,
                "sync": {"kind": "none"},
                "compress_pct": 0.0,
                "dedupe_ratio": 1.0,
            }
        ],
    }
    assert isinstance(stream_seed, int) and 0 <= stream_seed < 2**63
    json.dumps(compiled)  # plain data only


def test_mixed_rw_reads_half_by_default_like_fio():
    assert flags(rw="randrw").streams[0].read_pct == 50.0
    assert flags(rw="rw").streams[0].read_pct == 50.0
    assert flags(rw="randwrite").streams[0].read_pct == 0.0
    assert flags().streams[0].rw == "randread"
    # A read share alone implies a random mix.
    only_read = flags(read="70").streams[0]
    assert (only_read.rw, only_read.read_pct) == ("randrw", 70.0)


def test_sequential_and_partly_random_placement():
    seq = compiler.compile_plan(flags(rw="write", bs="64k"), target())["streams"][0]
    assert seq["pattern"] == {"kind": "sequential"} and seq["random_pct"] == 0.0
    iometer = compiler.compile_plan(flags(rw="read", random="30"), target())["streams"][0]
    assert iometer["pattern"] == {"kind": "random"} and iometer["random_pct"] == 30.0
    explicit = compiler.compile_plan(flags(rw="write", pattern="sequential"), target())["streams"][
        0
    ]
    assert explicit["pattern"] == {"kind": "sequential"}


def test_toml_with_defaults_and_streams(tmp_path, monkeypatch):
    monkeypatch.setattr(compiler.os, "cpu_count", lambda: 8)
    workload = toml_workload(
        tmp_path,
        """
        name = "mail"
        target = "/data/tm.dat"
        size = "2g"
        duration = "2m"
        warmup = "10s"
        interval = "500ms"
        backend = "psync"
        direct = true
        seed = 42

        [defaults]
        qd = 4
        compress = 50

        [[stream]]
        name = "db"
        rw = "randrw"
        read = 60
        bs = [["32k", 90], ["64k", 10]]
        pattern = "hotspot:80/20"
        rate = "1.2k"
        arrival = "poisson"
        length = "1g"

        [[stream]]
        name = "log"
        rw = "write"
        bs = "8k"
        sync = "fsync:8"
        rate_bytes = "10MB/s"
        offset = "1g"
        length = "64m"
        burst = "10/5ms"
        qd = 1

        [[stream]]
        name = "scan"
        rw = "read"
        bs = "256k"
        pattern = "sequential"
        """,
    )
    assert workload.name == "mail" and workload.targets[0].size == 2 * GIB
    compiled = compiler.compile_plan(workload, target(2 * GIB))
    assert compiled["backend"] == "psync"
    assert compiled["threads"] == 3
    assert compiled["interval_ms"] == 500
    assert compiled["warmup_ms"] == 10_000 and compiled["duration_ms"] == 120_000
    db, log, scan = compiled["streams"]
    assert db["qd"] == 4 and db["compress_pct"] == 50.0  # from [defaults]
    assert db["read_pct"] == 60.0
    assert db["sizes"] == [[32768, 90.0], [65536, 10.0]]
    assert db["pattern"] == {"kind": "hotspot", "io_pct": 80.0, "region_pct": 20.0}
    assert db["arrival"] == {"kind": "open", "dist": "poisson", "rate_iops": 1200.0}
    assert (db["regions"][0]["offset"], db["regions"][0]["length"]) == (0, GIB)
    assert log["qd"] == 1  # the stream's own value beats [defaults]
    assert log["sync"] == {"kind": "fsync", "every": 8}
    assert log["arrival"] == {"kind": "open", "dist": "constant", "rate_bps": 10e6}
    assert log["burst"] == {"ios": 10, "delay_ms": 5.0}
    assert (log["regions"][0]["offset"], log["regions"][0]["length"]) == (GIB, 64 * MIB)
    assert scan["pattern"] == {"kind": "sequential"}
    # default: the whole data area
    assert (scan["regions"][0]["offset"], scan["regions"][0]["length"]) == (0, 2 * GIB)
    json.dumps(workload.to_json())


def test_zipf_pattern_and_names_default_to_rw(tmp_path):
    workload = toml_workload(
        tmp_path,
        """
        target = "/t"
        [[stream]]
        rw = "randread"
        pattern = "zipf:1.2"
        [[stream]]
        rw = "randread"
        [[stream]]
        rw = "write"
        """,
    )
    assert [s.name for s in workload.streams] == ["randread.0", "randread.1", "write"]
    compiled = compiler.compile_plan(workload, target())
    assert compiled["streams"][0]["pattern"] == {"kind": "zipf", "theta": 1.2}


def test_stream_seeds_derive_from_the_run_seed():
    two = {"target": "/t", "stream": [{"name": "a"}, {"name": "b"}]}
    first = compiler.compile_plan(plan.parse_workload(two, source="flags"), target())
    again = compiler.compile_plan(plan.parse_workload(two, source="flags"), target())
    other = compiler.compile_plan(plan.parse_workload({**two, "seed": 7}, source="flags"), target())
    seeds = [s["seed"] for s in first["streams"]]
    assert seeds == [s["seed"] for s in again["streams"]]  # reproducible
    assert seeds[0] != seeds[1]
    assert seeds != [s["seed"] for s in other["streams"]]
    pinned = {"target": "/t", "stream": [{"name": "a", "seed": 5}]}
    assert (
        compiler.compile_plan(plan.parse_workload(pinned, source="x"), target())["streams"][0][
            "seed"
        ]
        == 5
    )


def test_default_align_is_at_least_4k_and_follows_large_dio_alignment():
    assert compiler.compile_plan(flags(), target(dio_alignment=512))["streams"][0]["align"] == 4096
    device = target(dio_alignment=8192, kind="block", data_offset=0, tilemark=False)
    assert compiler.compile_plan(flags(bs="8k"), device)["streams"][0]["align"] == 8192
    # A file's 4 KiB header cannot meet an 8 KiB O_DIRECT alignment.
    assert "data offset 4096" in compile_error(flags(bs="8k"), target(dio_alignment=8192))


def test_buffered_allows_unaligned_sizes():
    compiled = compiler.compile_plan(flags(bs="1000", direct=False), target())
    assert compiled["targets"][0]["direct"] is False
    assert compiled["streams"][0]["sizes"] == [[1000, 1.0]]


def test_default_workload_fits_its_target():
    doc = default_workload_doc("/data/scratch.dat", 2 * GIB)
    workload = plan.parse_workload(doc, source="default")
    compiled = compiler.compile_plan(workload, target(2 * GIB))
    assert [s["name"] for s in compiled["streams"]] == ["oltp", "log", "dss", "lookup", "web"]
    assert compiled["duration_ms"] == 30_000 and compiled["warmup_ms"] == 5_000
    kinds = {s["name"]: s["arrival"]["kind"] for s in compiled["streams"]}
    assert kinds == {
        "oltp": "closed",
        "log": "open",
        "dss": "closed",
        "lookup": "open",
        "web": "closed",
    }
    for s in compiled["streams"]:
        (region,) = s["regions"]
        assert region["offset"] + region["length"] <= 2 * GIB
        assert all(size % 4096 == 0 for size, _ in s["sizes"])
    # Smallest default size (64 MiB) still compiles.
    small = plan.parse_workload(default_workload_doc("/t", 64 * MIB), source="default")
    compiler.compile_plan(small, target(64 * MIB))


# --- bad input: every case is a UsageError that names the field --------------------------------


@pytest.mark.parametrize(
    ("stream", "message"),
    [
        ({"name": "log", "qd": 0}, "stream 'log': qd must be an integer from 1 to 4096, got 0."),
        ({"name": "log", "qd": -3}, "stream 'log': qd must be an integer from 1 to 4096, got -3."),
        ({"name": "log", "qd": 5000}, "stream 'log': qd must be an integer from 1 to 4096"),
        ({"name": "log", "qd": "deep"}, "stream 'log': qd must be an integer"),
        ({"name": "db", "rw": "randrw", "read": 170}, "stream 'db': read must be a percentage"),
        ({"name": "db", "rw": "randrw", "read": -1}, "stream 'db': read must be a percentage"),
        ({"name": "db", "rw": "read", "read": 70}, "stream 'db': read is 70 but rw read"),
        ({"name": "db", "rate": 0}, "stream 'db': rate must be an IO rate above 0"),
        ({"name": "db", "rate": -10}, "stream 'db': rate must be an IO rate above 0"),
        ({"name": "db", "rate_bytes": "0MB/s"}, "stream 'db': rate_bytes must be a byte rate"),
        ({"name": "db", "rate": 10, "rate_bytes": "1m"}, "cannot both be set"),
        ({"name": "db", "bs": "8q"}, "stream 'db': bs must be a size"),
        ({"name": "db", "bs": "3g"}, "stream 'db': bs sizes must be from 1 byte to 2 GiB"),
        ({"name": "db", "rw": "randomread"}, "stream 'db': rw must be one of read, write"),
        ({"name": "db", "pattern": "gauss"}, "stream 'db': pattern must be uniform, sequential"),
        ({"name": "db", "pattern": "zipf:0"}, "stream 'db': pattern zipf theta must be above 0"),
        ({"name": "db", "pattern": "hotspot:90/100"}, "stream 'db': pattern hotspot:IO/REGION"),
        ({"name": "db", "rw": "read", "pattern": "zipf:1.1"}, "stream 'db': pattern zipf:1.1"),
        ({"name": "db", "pattern": "sequential"}, "stream 'db': pattern sequential conflicts"),
        ({"name": "db", "arrival": "bursty"}, "stream 'db': arrival must be one of closed"),
        ({"name": "db", "arrival": "poisson"}, "stream 'db': arrival poisson is an open loop"),
        ({"name": "db", "arrival": "closed", "rate": 5}, "stream 'db': arrival closed keeps"),
        ({"name": "db", "sync": "fsync:0"}, "stream 'db': sync must be none, dsync, fsync"),
        ({"name": "db", "sync": "always"}, "stream 'db': sync must be none, dsync, fsync"),
        ({"name": "db", "sync": "fsync:groups"}, "stream 'db': sync must be none, dsync, fsync"),
        (
            {"name": "db", "rw": "write", "sync": "fdatasync:group"},
            "stream 'db': sync fdatasync:group (group commit) needs an open-loop arrival: give "
            "rate.",
        ),
        (
            {"name": "db", "rw": "randwrite", "rate": 100, "sync": "fdatasync:group"},
            "(group commit) needs sequential writes",
        ),
        (
            {"name": "db", "rw": "rw", "rate": 100, "sync": "fdatasync:group"},
            "(group commit) needs writes only: rw write (it has 50% reads)",
        ),
        (
            {"name": "db", "rate": 100, "batch_gap": "1ms"},
            "stream 'db': batch_gap spreads a batch's IOs apart: it needs batch above 1 (it is 1)",
        ),
        (
            {"name": "db", "rate": 100, "batch": 10, "batch_gap": "20ms"},
            "stream 'db': batch_gap 20 ms leaves no time between batches at 100 IOPS in batches "
            "of 10; it must be below 11.11 ms",
        ),
        (
            {"name": "db", "rate_bytes": "400k", "bs": "4k", "batch": 2, "batch_gap": "25ms"},
            "at 100 IOPS in batches of 2; it must be below 20 ms",
        ),
        ({"name": "db", "rate": 100, "batch": 4, "batch_gap": "soon"}, "batch_gap must be a"),
        ({"name": "db", "burst": "10"}, "stream 'db': burst must be IOS/DELAY"),
        ({"name": "db", "burst": "0/5ms"}, "stream 'db': burst must be IOS/DELAY"),
        ({"name": "db", "burst": "4/soon"}, "stream 'db': burst must be IOS/DELAY"),
        (
            {"name": "db", "compress": 100},
            "stream 'db': compress must be a percentage from 0 to 99",
        ),
        ({"name": "db", "random": "half"}, "stream 'db': random must be a percentage"),
        ({"name": "db", "length": 0}, "stream 'db': length must be above 0"),
        ({"name": "db", "offset": "1x"}, "stream 'db': offset must be a size"),
        ({"name": "db", "align": 0}, "stream 'db': align must be above 0"),
        ({"name": "db", "seed": -1}, "stream 'db': seed must be an integer"),
        ({"name": "bad name"}, "stream 1: name must be 1 to 64 letters"),
    ],
)
def test_bad_stream_fields(stream, message):
    with pytest.raises(UsageError) as err:
        plan.parse_workload({"target": "/t", "stream": [stream]}, source="w.toml")
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("top", "message"),
    [
        ({"duration": 0}, "duration must be above 0"),
        ({"duration": "-5s"}, "duration must be a duration"),
        ({"warmup": "soon"}, "warmup must be a duration"),
        ({"interval": "0"}, "interval must be at least 1ms"),
        ({"backend": "aio"}, "backend must be one of uring, psync, null, got 'aio'."),
        ({"threads": 0}, "threads must be an integer from 1 to 1024, got 0."),
        ({"direct": "yes"}, "direct must be true or false, got 'yes'."),
        ({"size": "lots"}, "size must be a size"),
        ({"size": 0}, "size must be above 0"),
        ({"seed": "x"}, "seed must be an integer"),
        ({"target": 5}, "target must be a path"),
        ({"cpus": "x-1"}, "cpus must list CPU numbers from 0 to 1023, such as 0-3,6 or [0, 2]"),
        ({"cpus": [0, 1024]}, "cpus must list CPU numbers from 0 to 1023"),
        ({"cpus": [0, True]}, "cpus must list CPU numbers"),
        ({"cpus": ""}, "cpus must list CPU numbers"),
        ({"cpus": "3-1"}, "cpus range 3-1 runs backwards; write it low-high."),
    ],
)
def test_bad_run_fields(top, message):
    with pytest.raises(UsageError) as err:
        plan.parse_workload({"target": "/t", **top, "stream": [{}]}, source="w.toml")
    assert message in str(err.value)


def test_unknown_toml_keys_say_which_and_list_the_allowed(tmp_path):
    with pytest.raises(UsageError) as err:
        toml_workload(tmp_path, 'target = "/t"\n[[stream]]\nname = "db"\nqdepth = 4\n')
    assert "stream 'db': unknown key 'qdepth'; allowed keys are name, rw, read, bs" in str(
        err.value
    )
    with pytest.raises(UsageError, match=r"unknown key 'runtime'; allowed keys are name, target"):
        toml_workload(tmp_path, 'target = "/t"\nruntime = 5\n[[stream]]\n')
    with pytest.raises(UsageError, match=r"^\[defaults\]: unknown key 'iodepth'"):
        toml_workload(tmp_path, 'target = "/t"\n[defaults]\niodepth = 4\n[[stream]]\n')


def test_file_level_problems(tmp_path):
    with pytest.raises(UsageError, match="workload file .* does not exist"):
        plan.load_toml(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("target = \n")
    with pytest.raises(UsageError, match="is not valid TOML"):
        plan.load_toml(broken)
    with pytest.raises(UsageError, match="has no streams"):
        plan.parse_workload({"target": "/t"}, source="w.toml")
    with pytest.raises(UsageError, match="target is required"):
        plan.parse_workload({"stream": [{}]}, source="w.toml")
    with pytest.raises(UsageError, match="'db' is used twice"):
        plan.parse_workload({"target": "/t", "stream": [{"name": "db"}] * 2}, source="w.toml")


def test_flag_messages_name_the_flag():
    with pytest.raises(UsageError, match=r"^--qd must be an integer from 1 to 4096, got 0\.$"):
        flags(qd="0")
    with pytest.raises(UsageError, match=r"^--rate-bytes must be a byte rate"):
        flags(rate_bytes="fast")
    with pytest.raises(UsageError, match=r"^--arrival poisson .* needs --rate \(IOPS\)"):
        flags(arrival="poisson")
    with pytest.raises(UsageError, match=r"^--duration must be above 0"):
        flags(duration="0")


# --- checks against the inspected target -------------------------------------------------------


def compile_error(workload: plan.Workload, info: TargetInfo) -> str:
    with pytest.raises(UsageError) as err:
        compiler.compile_plan(workload, info)
    return str(err.value)


def test_bs_must_meet_the_dio_alignment_under_o_direct():
    message = compile_error(flags(bs="512"), target(dio_alignment=4096))
    assert message.startswith("--bs 512 bytes is not a multiple of 4096")
    assert "--buffered" in message
    mix = plan.parse_workload(
        {"target": "/t", "stream": [{"name": "web", "bs": "4k:50,6k:50"}]}, source="w.toml"
    )
    assert compile_error(mix, target()).startswith("stream 'web': bs 6144 bytes")


def test_align_and_offset_must_meet_the_dio_alignment():
    assert compile_error(flags(align="6k"), target()).startswith("--align 6144 is not a multiple")
    assert compile_error(flags(offset="1k"), target()).startswith("--offset 1024 is not a multiple")


def test_region_must_lie_inside_the_target():
    assert "outside the target's data area" in compile_error(flags(offset="2g"), target(GIB))
    message = compile_error(flags(offset="512m", length="768m"), target(GIB))
    assert message.startswith("--length: region offset 512 MiB + length 768 MiB ends past")
    assert "larger than the stream's region" in compile_error(
        flags(bs="1m", length="64k"), target(GIB)
    )


def test_o_direct_unsupported_is_reported_with_the_fix():
    message = compile_error(flags(), target(dio_alignment=0))
    assert "does not support O_DIRECT" in message and "--buffered" in message
    compiler.compile_plan(flags(direct=False), target(dio_alignment=0))


def test_io_size_and_passes_end_a_stream_by_its_bytes():
    # io_size, passes x the region, or io_size x passes: the engine's io_limit.
    doc = {
        "target": "/data/tm.dat",
        "duration": 10,
        "stream": [
            {"name": "bytes", "io_size": "8m"},
            {"name": "pass", "length": "64m", "passes": 2},
            {"name": "both", "io_size": "1m", "passes": 3},
            {"name": "time"},
        ],
    }
    w = plan.parse_workload(doc, source="w.toml")
    compiled = compiler.compile_plan(w, target())
    limits = [s.get("io_limit") for s in compiled["streams"]]
    assert limits == [8 * MIB, 128 * MIB, 3 * MIB, None]
    assert compiled["duration_ms"] == 10_000  # a stream without a limit: the run's time


def test_a_workload_whose_streams_all_end_by_themselves_runs_until_they_are_done():
    doc = {
        "target": "/data/tm.dat",
        "stream": [
            {"name": "a", "io_size": "8m"},
            {"name": "b", "start": "1s", "stop": "2s"},
        ],
    }
    w = plan.parse_workload(doc, source="w.toml")
    assert w.duration_s is None
    assert compiler.compile_plan(w, target())["duration_ms"] is None
    # A duration given is a cap; streams with stop times alone keep the default duration.
    assert plan.parse_workload({**doc, "duration": 5}, source="w.toml").duration_s == 5
    doc["stream"][0] = {"name": "a", "stop": "3s"}
    assert plan.parse_workload(doc, source="w.toml").duration_s == plan.DEFAULT_DURATION_S


@pytest.mark.parametrize(
    "stream, message",
    [
        ({"io_size": 0}, "io_size must be above 0"),
        ({"io_size": "lots"}, "io_size must be a size"),
        ({"passes": 0}, "passes must be an integer from 1"),
        ({"passes": 1.5}, "passes must be an integer from 1"),
    ],
)
def test_bad_byte_limits(stream, message):
    with pytest.raises(UsageError, match=message):
        plan.parse_workload({"target": "/x", "stream": [stream]}, source="w.toml")


def test_zoned_pattern_and_per_op_cursors_compile_to_the_engine_plan():
    w = plan.parse_workload(
        {
            "target": "/data/tm.dat",
            "stream": [
                {"name": "z", "rw": "randread", "pattern": "zoned:50/5:30/15:20/80"},
                {"name": "m", "rw": "rw", "cursors": "per-op"},
            ],
        },
        source="w.toml",
    )
    z, m = compiler.compile_plan(w, target())["streams"]
    assert z["pattern"] == {"kind": "zoned", "zones": [[50.0, 5.0], [30.0, 15.0], [20.0, 80.0]]}
    assert "cursors" not in z and m["cursors"] == "per-op"
    for bad in ("zoned:50/5:30/15", "zoned:50/0:50/100", "zoned:abc"):
        with pytest.raises(UsageError, match="needs zones whose IO shares and REGION shares"):
            plan.parse_workload(
                {"target": "/x", "stream": [{"rw": "randread", "pattern": bad}]}, source="w"
            )


def test_runs_and_priorities_compile_to_plan_4_fields_only_when_set(tmp_path):
    # docs/engine-boundary.md, plan 4: run_length, ioprio, ioprio_share.
    workload = toml_workload(
        tmp_path,
        """
        target = "/data/tm.dat"
        [[stream]]
        name = "s"
        rw = "randread"
        run_length = 8
        priority = "be/7"
        priority_share = "20:rt/0"
        [[stream]]
        name = "plain"
        rw = "randread"
        """,
    )
    s, plain = compiler.compile_plan(workload, target())["streams"]
    assert s["run_length"] == 8
    assert s["ioprio"] == {"class": "be", "level": 7}
    assert s["ioprio_share"] == {"pct": 20.0, "class": "rt", "level": 0}
    assert not {"run_length", "ioprio", "ioprio_share"} & set(plain)


def test_group_commit_compiles_to_a_joined_log():
    workload = plan.parse_workload(
        {
            "target": "/t",
            "stream": [
                {"name": "wal", "rw": "write", "bs": "8k", "rate": 60, "sync": "FDATASYNC:group"},
                {"name": "log", "rw": "write", "rate": 60, "sync": "fsync:group"},
            ],
        },
        source="w.toml",
    )
    wal, log = compiler.compile_plan(workload, target(GIB))["streams"]
    assert wal["sync"] == {"kind": "fsync", "every": 1, "data": True, "group": True}
    assert log["sync"] == {"kind": "fsync", "every": 1, "data": False, "group": True}


def test_spread_batches_compile_to_their_gap_in_ns():
    workload = plan.parse_workload(
        {
            "target": "/t",
            "stream": [
                {"name": "wb", "rw": "randwrite", "rate": 35, "batch": 99, "batch_gap": "1.5ms"},
                {"name": "at_once", "rw": "randwrite", "rate": 35, "batch": 99},
            ],
        },
        source="w.toml",
    )
    wb, at_once = compiler.compile_plan(workload, target(GIB))["streams"]
    assert wb["arrival"]["batch"] == 99 and wb["arrival"]["batch_gap_ns"] == pytest.approx(1.5e6)
    assert "batch_gap_ns" not in at_once["arrival"]


def test_cpus_are_listed_in_order_and_set_one_thread_per_cpu(monkeypatch):
    monkeypatch.setattr(compiler.os, "cpu_count", lambda: 8)
    monkeypatch.setattr(compiler.os, "sched_getaffinity", lambda pid: set(range(8)))
    doc = {"target": "/t", "cpus": "4-5,1", "stream": [{"name": f"s{i}"} for i in range(5)]}
    workload = plan.parse_workload(doc, source="w.toml")
    assert workload.cpus == (4, 5, 1)
    compiled = compiler.compile_plan(workload, target())
    assert (compiled["cpus"], compiled["threads"]) == ([4, 5, 1], 3)
    listed = plan.parse_workload({**doc, "cpus": [2, 0]}, source="w.toml")
    assert listed.cpus == (2, 0)
    threads = plan.parse_workload({**doc, "threads": 4}, source="w.toml")
    assert compiler.compile_plan(threads, target())["threads"] == 4, "threads as asked"
    unpinned = plan.parse_workload({k: v for k, v in doc.items() if k != "cpus"}, source="w")
    assert compiler.compile_plan(unpinned, target())["threads"] == 5
    monkeypatch.setattr(compiler.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 6})
    with pytest.raises(UsageError, match=r"cpus: CPU 4 is not one this process may run on "
                       r"\(it may use 0-3,6\)\."):  # fmt: skip
        plan.parse_workload(doc, source="w.toml")


def test_sqpoll_is_asked_of_the_uring_backend_only():
    assert compiler.compile_plan(flags(sqpoll=True), target())["sqpoll"] is True
    with pytest.raises(UsageError, match=r"sqpoll needs the uring backend \(--backend uring\), "
                       r"not psync\."):  # fmt: skip
        compiler.compile_plan(flags(sqpoll=True, backend="psync"), target())
