"""The cluster's pure parts (docs/cluster.md): --cluster and TLS options, placement of
workloads and tiles on hosts, merging hosts' counters, and the clock-offset rule."""

from __future__ import annotations

import pytest

from tilemark.cluster import merge, placement
from tilemark.cluster.session import ClockOffset, Session, check_versions, parse_spec, tls_files
from tilemark.errors import UsageError
from tilemark.hist import Histogram
from tilemark.options.typed import ClusterOptions
from tilemark.workload.plan import parse_workload

HOSTS = [
    placement.Host("a-0", "a", "0", "tcp://127.0.0.1:1"),
    placement.Host("a-1", "a", "1", "tcp://127.0.0.1:2"),
    placement.Host("b", "b", "w9", "tcp://127.0.0.1:3"),
]


def workload(target: str | list[str] = "/data/tm-{host}-{worker}.dat", **pins: str):
    streams = [{"name": n, "rw": "randread", **({"host": pins[n]} if n in pins else {})}
               for n in ("db", "log", "scan")]  # fmt: skip
    return parse_workload({"target": target, "stream": streams}, source="test")


def test_cluster_specs_are_local_n_or_a_tls_address() -> None:
    assert parse_spec("local:3").workers == 3
    assert parse_spec("tls://sched.example:8786").address == "tls://sched.example:8786"
    for bad in ("local:0", "local:65", "tcp://h:1", "tls://h", "h:8786", "local"):
        with pytest.raises(UsageError, match="--cluster"):
            parse_spec(bad)


def test_tls_files_come_as_a_set_and_only_for_tls(tmp_path) -> None:
    pem = tmp_path / "x.pem"
    pem.write_text("x")
    tls = parse_spec("tls://h:1")
    assert tls_files(ClusterOptions(), tls) == {}
    with pytest.raises(UsageError, match="--tls-key is missing"):
        tls_files(ClusterOptions(tls_ca=str(pem), tls_cert=str(pem)), tls)
    with pytest.raises(UsageError, match="--tls-ca applies to tls:// clusters"):
        tls_files(ClusterOptions(tls_ca=str(pem)), parse_spec("local:2"))
    with pytest.raises(UsageError, match="--tls-cert .* is not a readable file"):
        tls_files(ClusterOptions(tls_ca=str(pem), tls_cert="/nope", tls_key=str(pem)), tls)


def test_streams_run_everywhere_unless_pinned_and_targets_are_per_host() -> None:
    w = workload(log="b", scan="a-1")
    owners = placement.stream_owners(w, HOSTS)
    assert owners == [{0, 1, 2}, {2}, {1}]
    works = placement.place(w, HOSTS, owners)
    assert [(x.host.name, x.streams) for x in works] == [
        ("a-0", [0]),
        ("a-1", [0, 2]),
        ("b", [0, 1]),
    ]
    assert [[t.path for t in x.workload.targets] for x in works] == [
        ["/data/tm-a-0.dat"],
        ["/data/tm-a-1.dat"],
        ["/data/tm-b-w9.dat"],
    ]
    assert all(s.host is None for x in works for s in x.workload.streams)


def test_every_host_has_every_target_by_name_and_index_with_its_own_paths() -> None:
    w = workload(["db=/data/db-{host}-{worker}.dat", "log=/data/log-{worker}.dat"], log="b")
    works = placement.place(w, HOSTS, placement.stream_owners(w, HOSTS))
    assert [[(t.name, t.path) for t in x.workload.targets] for x in works] == [
        [("db", "/data/db-a-0.dat"), ("log", "/data/log-0.dat")],
        [("db", "/data/db-a-1.dat"), ("log", "/data/log-1.dat")],
        [("db", "/data/db-b-w9.dat"), ("log", "/data/log-w9.dat")],
    ]
    # A path without {worker} is one file for both workers on machine a, whichever target.
    w = workload(["db=/data/db-{worker}.dat", "log=/data/log-{host}.dat"])
    with pytest.raises(UsageError, match=r"--target /data/log-\{host\}.dat names the same file"):
        placement.check_targets(w.targets, HOSTS)


def test_a_pin_names_a_worker_or_a_machine_running_one() -> None:
    assert placement.stream_owners(workload(db="w9"), HOSTS)[0] == {2}
    with pytest.raises(UsageError, match="stream 'db': host 'a' runs 2 workers"):
        placement.stream_owners(workload(db="a"), HOSTS)
    with pytest.raises(UsageError, match="stream 'db': host 'c' is not in the cluster"):
        placement.stream_owners(workload(db="c"), HOSTS)


def test_one_file_for_two_workers_of_a_machine_is_refused() -> None:
    w = workload(target="/data/tm-{host}.dat")
    with pytest.raises(
        UsageError, match=r"same file for workers 0 and 1 on host a; put \{worker\}"
    ):
        placement.place(w, HOSTS, placement.stream_owners(w, HOSTS))


def test_tiles_go_round_robin_unless_the_tile_file_places_an_application() -> None:
    w = workload(log="b")
    assert placement.tile_owners(w, [1, 2, 4], HOSTS) == [{0}, {2}, {0}]
    w = workload()
    assert placement.tile_owners(w, [1, 2, 3], HOSTS) == [{0}, {1}, {2}]


def _op(ops: int, values: list[int], errors: dict | None = None) -> dict:
    h = Histogram()
    for v in values:
        h.record(v)
    return {"ops": ops, "bytes": ops * 4096, "errors": errors or {}, "service": h.to_json(),
            "response": None}  # fmt: skip


def test_merged_counters_are_the_sum_and_histograms_merge_bucket_by_bucket() -> None:
    a = {"stream": 0, "read": _op(2, [100_000, 200_000], {"5": 1}), "write": None, "sync": None,
         "lag_max_ns": 7, "behind_ios": 1}  # fmt: skip
    b = {"stream": 0, "read": _op(3, [150_000, 9_000_000, 300]), "write": _op(1, [50]),
         "sync": None, "lag_max_ns": 3, "behind_ios": 2}  # fmt: skip
    host_b = merge.globalize([{**b, "stream": 1}], [5, 0])  # host b's local 1 is global 0
    [m] = merge.merge_streams([a], host_b)
    assert m["read"]["ops"] == 5 and m["read"]["bytes"] == 5 * 4096
    assert m["read"]["errors"] == {"5": 1}
    assert m["write"]["ops"] == 1
    assert m["lag_max_ns"] == 7 and m["behind_ios"] == 3
    whole = Histogram()
    for v in (100_000, 200_000, 150_000, 9_000_000, 300):
        whole.record(v)
    assert m["read"]["service"] == whole.to_json()
    assert Histogram.from_json(m["read"]["service"]).percentile(99) == whole.percentile(99)


def test_a_lost_hosts_totals_are_its_measured_intervals() -> None:
    totals = merge.Totals()
    stream = {"stream": 0, "read": _op(4, [1000] * 4), "write": None, "sync": None,
              "lag_max_ns": 0, "inflight": 3}  # fmt: skip
    totals.add({"interval": 0, "phase": "warmup", "start_ns": 0, "end_ns": 10, "streams": [stream]})
    for k in (1, 2):
        totals.add({"interval": k, "phase": "measure", "start_ns": 10 * k, "end_ns": 10 * k + 10,
                    "streams": [stream]})  # fmt: skip
    result = totals.result(started_at_ns=5)
    assert result["stop_reason"] == "lost" and not result["complete"]
    assert (result["measure_start_ns"], result["measure_end_ns"]) == (10, 30)
    assert result["streams"][0]["read"]["ops"] == 8
    assert "inflight" not in result["streams"][0]


def test_clock_offsets_warn_above_1ms_and_refuse_above_an_interval_unless_forced() -> None:
    session = Session(None, spec="test")
    session.offsets = {
        "near": ClockOffset(300_000, 400_000),
        "far": ClockOffset(3_000_000, 400_000),
    }
    [note] = session.clock_notes(1.0)
    assert note.startswith("host far's clock is +3.000 ms (+-0.200 ms) off")
    with pytest.raises(UsageError, match="more than one interval .* pass --force"):
        session.clock_notes(0.002)
    session.force = True
    assert len(session.clock_notes(0.002)) == 1


def test_hosts_with_another_plan_format_are_refused() -> None:
    import tilemark
    from tilemark import engine

    ident = {
        "hostname": "b",
        "worker": "w9",
        "tilemark_version": tilemark.__version__,
        "engine_version": engine.version(),
        "plan_version": engine.PLAN_VERSION + 1,
    }
    with pytest.raises(UsageError, match="host b .* runs plan format"):
        check_versions([ident])


def test_a_stream_over_several_targets_merges_its_parts_target_by_target() -> None:
    def part(target: int, values: list[int]) -> dict:
        return {"target": target, "read": _op(len(values), values), "write": None, "sync": None}

    a = {"stream": 0, "read": _op(3, [100, 200, 300]), "write": None, "sync": None,
         "targets": [part(0, [100, 200]), part(1, [300])]}  # fmt: skip
    b = {"stream": 0, "read": _op(2, [400, 500]), "write": None, "sync": None,
         "targets": [part(1, [400, 500])]}  # fmt: skip
    [m] = merge.merge_streams([a], [b])
    assert [(p["target"], p["read"]["ops"]) for p in m["targets"]] == [(0, 2), (1, 3)]
    assert Histogram.from_json(m["targets"][1]["read"]["service"]).n == 3
    assert m["read"]["ops"] == sum(p["read"]["ops"] for p in m["targets"])


def test_verification_counts_add_and_findings_keep_run_time_order() -> None:
    def found(checked: int, times: list[int], host: str) -> dict:
        findings = [{"class": "corrupt", "offset": 0, "time_ns": t, "host": host} for t in times]
        return {"checked": checked, "skipped": 1, "not_tilemark": 0, "later": 0,
                "total": len(times), "by_class": {"corrupt": len(times)} if times else {},
                "findings": findings}  # fmt: skip

    merged = merge.merge_verification([found(10, [5, 9], "a"), None, found(7, [6], "b")])
    assert merged is not None
    assert (merged["checked"], merged["skipped"], merged["total"]) == (17, 2, 3)
    assert merged["by_class"] == {"corrupt": 3}
    assert [f["host"] for f in merged["findings"]] == ["a", "b", "a"]
    assert merge.merge_verification([None, None]) is None
