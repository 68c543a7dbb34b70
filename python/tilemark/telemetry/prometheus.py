"""Prometheus metrics of a running tilemark (`--metrics-port PORT`), for dashboards of burn-ins
and long studies (contrib/grafana/tilemark.json; docs/metrics.md).

One HTTP endpoint per tilemark process, served by the official `prometheus-client` library on
loopback unless `--metrics-bind` says otherwise. A study keeps the same endpoint across its
runs. What is served is the state of the latest interval, so a scrape every interval or two
sees every figure:

- per stream and op: IOPS, MB/s, latency quantiles of the interval (from its histogram:
  response time for open-loop streams, else service time), the IOs and errors counted since the
  run started, the largest open-loop lag, IOs in flight;
- per application of a tile run: the same figures merged over its streams;
- per device underneath the target: utilization and IOPS (when telemetry is recorded); host CPU
  busy and IO pressure;
- the run (its id, phase, interval) and the study (kind, step, runs done).

Metric values are plain gauges and counters computed when Prometheus scrapes, so a run that
never gets scraped pays nothing but the bookkeeping of one dictionary per interval.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tilemark.errors import UsageError
from tilemark.hist import Histogram
from tilemark.options.typed import OutputOptions

if TYPE_CHECKING:
    from rich.console import Console

QUANTILES = (0.5, 0.99, 0.999)
DATA_OPS = ("read", "write", "sync")


@dataclass
class _StreamState:
    name: str
    app: str
    ops_total: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DATA_OPS, 0))
    errors_total: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DATA_OPS, 0))
    iops: dict[str, float] = field(default_factory=dict)
    mbps: dict[str, float] = field(default_factory=dict)
    hist: dict[str, Histogram] = field(default_factory=dict)
    lag_s: float = 0.0
    inflight: int = 0


@dataclass
class _State:
    run_id: str = ""
    phase: str = ""
    interval: int = -1
    streams: list[_StreamState] = field(default_factory=list)
    devices: dict[str, dict[str, float]] = field(default_factory=dict)
    host: dict[str, float] = field(default_factory=dict)
    study: dict[str, Any] = field(default_factory=dict)
    runs_done: int = 0


class MetricsServer:
    """The endpoint and the state it serves; `observe_*` calls come from the run's thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = _State()
        self._server: Any = None
        self.address: tuple[str, int] | None = None

    # -- serving ---------------------------------------------------------------------------------

    def start(self, port: int, bind: str) -> None:
        """Listen on bind:port (port 0: any free port); a port that cannot be served is a
        UsageError, before any IO."""
        from prometheus_client import CollectorRegistry, start_http_server

        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self))
        try:
            server, _thread = start_http_server(port, addr=bind, registry=registry)
        except OSError as e:
            raise UsageError(
                f"--metrics-port {port} cannot be served on {bind}: {e.strerror or e}; choose "
                "another port."
            ) from None
        self._server = server
        self.address = (bind, server.server_address[1])

    @property
    def url(self) -> str:
        """Where Prometheus scrapes: 'http://127.0.0.1:9100/metrics'."""
        host, port = self.address or ("127.0.0.1", 0)
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/metrics"

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # -- what the run reports ----------------------------------------------------------------------

    def run_started(self, run_id: str, plan: dict[str, Any], app_of_stream: dict[int, str]) -> None:
        streams = [
            _StreamState(s.get("name", f"stream{i}"), app_of_stream.get(i, ""))
            for i, s in enumerate(plan.get("streams", []))
        ]
        with self._lock:
            self._state.run_id = run_id
            self._state.phase = "starting"
            self._state.interval = -1
            self._state.streams = streams
            self._state.devices = {}
            self._state.host = {}

    def observe(self, snapshots: list[dict[str, Any]]) -> None:
        """The latest interval snapshots of the running engine."""
        with self._lock:
            for snap in snapshots:
                seconds = max(1e-9, (snap["end_ns"] - snap["start_ns"]) / 1e9)
                self._state.interval = int(snap["interval"])
                self._state.phase = str(snap.get("phase", ""))
                for s in snap["streams"]:
                    index = int(s["stream"])
                    if index >= len(self._state.streams):
                        continue
                    st = self._state.streams[index]
                    for op in DATA_OPS:
                        o = s.get(op) or {}
                        ops = int(o.get("ops", 0))
                        st.ops_total[op] += ops
                        st.errors_total[op] += sum(int(v) for v in (o.get("errors") or {}).values())
                        st.iops[op] = ops / seconds
                        st.mbps[op] = int(o.get("bytes", 0)) / seconds / 1e6
                        st.hist[op] = Histogram.from_json(o.get("response") or o.get("service"))
                    st.lag_s = int(s.get("lag_max_ns", 0)) / 1e9
                    st.inflight = int(s.get("inflight", 0))

    def observe_telemetry(self, devices: list[dict[str, Any]], host: dict[str, Any] | None) -> None:
        """The latest telemetry rows (devices underneath, host); see tilemark.telemetry.sampler."""
        with self._lock:
            for row in devices:
                name = str(row.get("device"))
                self._state.devices[name] = {
                    "util": _num(row.get("util_pct")),
                    "read_iops": _num(row.get("read_iops")),
                    "write_iops": _num(row.get("write_iops")),
                }
            if host:
                self._state.host = {
                    "cpu_busy": _num(host.get("cpu_busy_pct")),
                    "io_pressure": _num(host.get("io_some_pct")),
                }

    def run_ended(self) -> None:
        with self._lock:
            self._state.phase = "ended"
            self._state.runs_done += 1

    def study_step(self, kind: str, step: str, key: float, repeat: int) -> None:
        with self._lock:
            self._state.study = {"kind": kind, "step": step, "key": key, "repeat": repeat}

    # -- scraping --------------------------------------------------------------------------------

    def snapshot(self) -> _State:
        """A consistent copy of the state for one scrape."""
        with self._lock:
            s = self._state
            return _State(
                s.run_id,
                s.phase,
                s.interval,
                [
                    _StreamState(
                        st.name,
                        st.app,
                        dict(st.ops_total),
                        dict(st.errors_total),
                        dict(st.iops),
                        dict(st.mbps),
                        dict(st.hist),
                        st.lag_s,
                        st.inflight,
                    )
                    for st in s.streams
                ],
                {k: dict(v) for k, v in s.devices.items()},
                dict(s.host),
                dict(s.study),
                s.runs_done,
            )


def _num(value: Any) -> float:
    return float("nan") if value is None else float(value)


class _Collector:
    """Builds the metric families from one copy of the state when Prometheus scrapes."""

    def __init__(self, server: MetricsServer):
        self.server = server

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        s = self.server.snapshot()
        run = GaugeMetricFamily(
            "tilemark_run_interval", "Index of the latest interval", labels=["run", "phase"]
        )
        run.add_metric([s.run_id, s.phase], s.interval)
        yield run
        done = CounterMetricFamily("tilemark_runs_ended", "Runs this process has ended")
        done.add_metric([], s.runs_done)
        yield done

        labels = ["run", "stream", "app", "op"]
        iops = GaugeMetricFamily(
            "tilemark_iops", "IOs per second in the latest interval", labels=labels
        )
        mbps = GaugeMetricFamily(
            "tilemark_mbps", "MB/s (10^6 bytes) in the latest interval", labels=labels
        )
        latency = GaugeMetricFamily(
            "tilemark_latency_seconds",
            "Latency quantile of the latest interval (response time for open-loop streams, "
            "else service time), from its histogram",
            labels=[*labels, "quantile"],
        )
        ios = CounterMetricFamily(
            "tilemark_ios", "IOs completed since the run started", labels=labels
        )
        errors = CounterMetricFamily(
            "tilemark_io_errors", "IOs failed since the run started", labels=labels
        )
        lag = GaugeMetricFamily(
            "tilemark_lag_seconds",
            "Largest open-loop lag (submission after the intended time) in the latest interval",
            labels=["run", "stream", "app"],
        )
        inflight = GaugeMetricFamily(
            "tilemark_inflight",
            "IOs in flight at the end of the latest interval",
            labels=["run", "stream", "app"],
        )
        apps: dict[tuple[str, str], dict[str, Any]] = {}
        for st in s.streams:
            lag.add_metric([s.run_id, st.name, st.app], st.lag_s)
            inflight.add_metric([s.run_id, st.name, st.app], st.inflight)
            for op in DATA_OPS:
                if not (st.ops_total[op] or st.errors_total[op]):
                    continue  # an op this stream does not issue (reads of a log writer)
                key = [s.run_id, st.name, st.app, op]
                ios.add_metric(key, st.ops_total[op])
                errors.add_metric(key, st.errors_total[op])
                if op not in st.iops:
                    continue
                iops.add_metric(key, st.iops[op])
                mbps.add_metric(key, st.mbps[op])
                h = st.hist.get(op)
                if h is not None and h.n:
                    for q in QUANTILES:
                        latency.add_metric([*key, f"{q:g}"], h.percentile(q * 100) / 1e9)
                if st.app:
                    a = apps.setdefault(
                        (st.app, op), {"iops": 0.0, "mbps": 0.0, "hist": Histogram()}
                    )
                    a["iops"] += st.iops[op]
                    a["mbps"] += st.mbps[op]
                    if h is not None:
                        a["hist"].merge(h)
        yield from (iops, mbps, latency, ios, errors, lag, inflight)

        if apps:
            app_labels = ["run", "app", "op"]
            a_iops = GaugeMetricFamily(
                "tilemark_app_iops", "An application's IOs per second", labels=app_labels
            )
            a_mbps = GaugeMetricFamily(
                "tilemark_app_mbps", "An application's MB/s", labels=app_labels
            )
            a_lat = GaugeMetricFamily(
                "tilemark_app_latency_seconds",
                "Latency quantile of an application's merged histogram in the latest interval",
                labels=[*app_labels, "quantile"],
            )
            for (app, op), a in apps.items():
                a_iops.add_metric([s.run_id, app, op], a["iops"])
                a_mbps.add_metric([s.run_id, app, op], a["mbps"])
                if a["hist"].n:
                    for q in QUANTILES:
                        a_lat.add_metric(
                            [s.run_id, app, op, f"{q:g}"], a["hist"].percentile(q * 100) / 1e9
                        )
            yield from (a_iops, a_mbps, a_lat)

        if s.devices:
            util = GaugeMetricFamily(
                "tilemark_device_utilization_ratio",
                "Share of the latest interval a device underneath the target was busy "
                "(iostat %util / 100)",
                labels=["run", "device"],
            )
            d_iops = GaugeMetricFamily(
                "tilemark_device_iops",
                "A device's completed IOs per second",
                labels=["run", "device", "op"],
            )
            for name, d in s.devices.items():
                util.add_metric([s.run_id, name], d["util"] / 100)
                d_iops.add_metric([s.run_id, name, "read"], d["read_iops"])
                d_iops.add_metric([s.run_id, name, "write"], d["write_iops"])
            yield from (util, d_iops)
        if s.host:
            host = GaugeMetricFamily(
                "tilemark_host_ratio",
                "Host CPU busy and IO pressure (share of the interval)",
                labels=["what"],
            )
            host.add_metric(["cpu_busy"], s.host["cpu_busy"] / 100)
            host.add_metric(["io_pressure"], s.host["io_pressure"] / 100)
            yield host
        if s.study:
            step = GaugeMetricFamily(
                "tilemark_study_step",
                "The running study's current step (its key: a tile count or knob value)",
                labels=["kind", "step", "repeat"],
            )
            step.add_metric(
                [s.study["kind"], s.study["step"], str(s.study["repeat"])], s.study["key"]
            )
            yield step


_SERVER: MetricsServer | None = None


def serve(port: int, bind: str = "127.0.0.1") -> MetricsServer:
    """Start this process' endpoint (once; a second call returns the running one)."""
    global _SERVER
    if _SERVER is None:
        server = MetricsServer()
        server.start(port, bind)
        _SERVER = server
    return _SERVER


def current() -> MetricsServer | None:
    """The endpoint, when --metrics-port started one."""
    return _SERVER


def from_options(output: OutputOptions, console: Console | None = None) -> MetricsServer | None:
    """Start the endpoint when the options ask for one (--metrics-port, --metrics-bind) and
    say where Prometheus (or a person) finds it, on `console`."""
    if output.metrics_port is None:
        return None
    started = _SERVER is None
    server = serve(output.metrics_port, output.metrics_bind or "127.0.0.1")
    if console is not None and started:
        console.print(f"metrics: serving {server.url}", markup=False, highlight=False)
    return server


def stop() -> None:
    global _SERVER
    if _SERVER is not None:
        _SERVER.close()
        _SERVER = None
