"""The metrics exporter's families from a known state (no IO), and the Grafana dashboard in
contrib/ uses only metrics tilemark serves."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tilemark.telemetry.prometheus import MetricsServer, _Collector

DASHBOARD = Path(__file__).resolve().parents[1] / "contrib" / "grafana" / "tilemark.json"


def hist(values_ns: list[int]) -> dict:
    from tilemark.hist import Histogram

    h = Histogram()
    for v in values_ns:
        h.record(v)
    return h.to_json()


def served() -> dict[str, list]:
    m = MetricsServer()
    plan = {"streams": [{"name": "t1.oltp.data"}, {"name": "t1.oltp.redo"}]}
    m.run_started("run-1", plan, {0: "oltp", 1: "oltp"})
    read = {"ops": 500, "bytes": 500 * 8192, "errors": {}, "service": hist([1_000_000] * 500)}
    write = {
        "ops": 100,
        "bytes": 100 * 4096,
        "errors": {"5": 2},
        "service": hist([3_000_000] * 100),
    }
    none = {"ops": 0, "bytes": 0, "errors": {}, "service": None}
    snap = {
        "interval": 3,
        "phase": "measure",
        "start_ns": 3_000_000_000,
        "end_ns": 3_500_000_000,
        "streams": [
            {
                "stream": 0,
                "read": read,
                "write": none,
                "sync": none,
                "lag_max_ns": 0,
                "inflight": 4,
            },
            {
                "stream": 1,
                "read": none,
                "write": write,
                "sync": none,
                "lag_max_ns": 2_000_000,
                "inflight": 1,
            },
        ],
    }
    m.observe([snap])
    m.observe_telemetry(
        [{"device": "vda", "util_pct": 42.0, "read_iops": 900.0, "write_iops": 180.0}],
        {"cpu_busy_pct": 30.0, "io_some_pct": 5.0},
    )
    m.study_step("scale", "2 tile(s)", 2.0, 1)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(m))
    text = generate_latest(registry).decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def one(samples: list, **labels: str) -> float:
    found = [s.value for s in samples if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (labels, found)
    return found[0]


def test_rates_quantiles_and_counters_of_the_latest_interval():
    f = served()
    # 500 reads in a 0.5 s interval: 1000 IOPS, 8.192 MB/s.
    assert one(f["tilemark_iops"], stream="t1.oltp.data", op="read") == 1000.0
    assert one(f["tilemark_mbps"], stream="t1.oltp.data", op="read") == 500 * 8192 / 0.5 / 1e6
    assert one(f["tilemark_app_iops"], app="oltp", op="write") == 200.0
    p99 = one(f["tilemark_latency_seconds"], stream="t1.oltp.redo", op="write", quantile="0.99")
    assert abs(p99 - 0.003) < 0.003 / 128  # the histogram's resolution
    assert one(f["tilemark_io_errors"], stream="t1.oltp.redo", op="write") == 2
    assert one(f["tilemark_lag_seconds"], stream="t1.oltp.redo") == 0.002
    # No series for ops a stream does not issue.
    assert not [
        s
        for s in f["tilemark_iops"]
        if s.labels["stream"] == "t1.oltp.redo" and s.labels["op"] == "read"
    ]
    assert one(f["tilemark_device_utilization_ratio"], device="vda") == 0.42
    assert one(f["tilemark_study_step"], kind="scale") == 2.0


def test_the_grafana_dashboard_uses_only_served_metrics():
    doc = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p["targets"]]
    exprs += [v["query"] for v in doc["templating"]["list"] if v["type"] == "query"]
    used = {re.sub(r"_total$", "", m) for e in exprs for m in re.findall(r"tilemark_[a-z_]+", e)}
    served_names = set(served())
    assert used and used <= served_names, used - served_names


def test_the_endpoint_says_its_url(tmp_path, capsys):
    import re as re_

    from tilemark.cli import main
    from tilemark.telemetry import prometheus

    args = ["run", "--target", str(tmp_path / "t.dat"), "--size", "4m", "--backend", "null",
            "--duration", "0.3", "--interval", "0.1", "--results", str(tmp_path / "r"),
            "--metrics-port", str(_free_port())]  # fmt: skip
    try:
        assert main(args) == 0
        server = prometheus.current()
        assert server is not None
        err = capsys.readouterr().err
        (url,) = re_.findall(r"metrics: serving (http://127\.0\.0\.1:\d+/metrics)", err)
        assert url == server.url
    finally:
        prometheus.stop()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
