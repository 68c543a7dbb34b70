"""Live per-interval display of a running plan, and the final results table.

On a terminal the live view is a rich table redrawn each interval; otherwise (a pipe, a log
file, CI) it is one plain line per interval, so logs stay readable. Latency shown is response
time for open-loop streams (what the application waited, from the intended issue time) and
service time for closed-loop streams, where the two are equal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from tilemark.options import COPY_SEPARATOR
from tilemark.run import pertarget
from tilemark.run.summary import errors_by_name, errors_text, interval_rows, phase_ns
from tilemark.store.results import HostCpu
from tilemark.wording import counted


def fmt_ms(value: float | None) -> str:
    """Milliseconds with about three significant digits; '-' when there is no value."""
    if value is None:
        return "-"
    if value < 10:
        return f"{value:.2f}"
    if value < 100:
        return f"{value:.1f}"
    return f"{value:,.0f}"


def fmt_rate(value: float | None, digits: int = 0) -> str:
    """A rate with thousands separators; '-' when there is no value."""
    return "-" if value is None else f"{value:,.{digits}f}"


def phase_text(plan_stream: dict[str, Any], end_s: float | None = None) -> str:
    """A phased stream's phase ('5s-20s'), or where it stands at run time `end_s` ('starts at
    5s', 'ended at 20s'); '' for a stream active over the whole run."""
    if plan_stream.get("after"):  # its phase counts from when others end (plan `after`)
        return "after others end"
    start_ns, stop_ns = phase_ns(plan_stream)
    if not start_ns and stop_ns is None:
        return ""
    start, stop = start_ns / 1e9, None if stop_ns is None else stop_ns / 1e9
    if end_s is not None and end_s <= start:
        return f"starts at {start:g}s"
    if end_s is not None and stop is not None and end_s > stop:
        return f"ended at {stop:g}s"
    return f"{start:g}s-{'end' if stop is None else f'{stop:g}s'}"


def describe_arrival(plan_stream: dict[str, Any]) -> str:
    """'closed qd8' or 'open 2,000/s poisson' for a plan stream."""
    arrival = plan_stream.get("arrival") or {}
    ios = plan_stream.get("ios")
    if ios:  # a replayed trace: its own times (timed) or its order (afap, qd)
        if ios.get("mode") == "timed":
            return f"trace {arrival.get('rate_iops') or 0:,.0f}/s timed"
        return f"trace {ios.get('mode')} qd{plan_stream.get('qd')}"
    if arrival.get("kind") != "open":
        return f"closed qd{plan_stream.get('qd')}"
    if arrival.get("rate_iops") is not None:
        rate = f"{arrival['rate_iops']:,.0f}/s"
    else:
        rate = f"{arrival.get('rate_bps', 0) / 1e6:,.1f} MB/s"
    return f"open {rate} {arrival.get('dist', '')}".rstrip()


GROUP_ABOVE = 8  # more streams than this are shown per application
TABLE_STREAMS = 100  # the final table lists this many streams, then says how many more


def _group_key(name: str) -> str:
    # Tile streams are named t{tile}.{app}.{stream}: group them by application; the copies of
    # a stream (NAME@i) by their stream.
    parts = name.split(".")
    if len(parts) == 3 and parts[0][:1] == "t" and parts[0][1:].isdigit():
        return parts[1]
    return name.split(COPY_SEPARATOR, 1)[0]


def stream_groups(plan: dict[str, Any]) -> tuple[list[int], dict[str, Any]]:
    """The groups the engine aggregates for the live view (engine.Frame.groups): each stream
    alone when there are few, else per application or per stream with its copies. Returns
    the group of every plan stream and a plan whose streams are the groups (the first
    member's plan, named after the group)."""
    streams = plan.get("streams") or []
    keys: dict[str, int] = {}
    group_of = []
    members: list[dict[str, Any]] = []
    for index, s in enumerate(streams):
        name = s.get("name", f"stream{index}")
        key = name if len(streams) <= GROUP_ABOVE else _group_key(name)
        if key not in keys:
            keys[key] = len(members)
            members.append({**s, "name": key})
        group_of.append(keys[key])
    return group_of, {**plan, "streams": members}


def group_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-application rows when there are many streams: IOPS and MB/s summed; latency and lag
    are the worst stream's (a p99 of a group would need merged histograms, so none is made up)."""
    if len(rows) <= GROUP_ABOVE or rows[0].get("aggregated"):
        return rows
    groups: dict[str, dict[str, Any]] = {}
    for row in rows:
        key = _group_key(row["name"])
        g = groups.get(key)
        if g is None:
            groups[key] = g = {**row, "name": key, "streams": 0, "p50_ms": None}
            g["iops"] = g["mbps"] = 0.0
            g["errors"] = g["behind_ios"] = 0
            g["errors_by_name"] = {}
            g["p99_ms"] = g["lag_max_ms"] = None
        g["streams"] += 1
        g["iops"] += row["iops"]
        g["mbps"] += row["mbps"]
        g["errors"] += row["errors"]
        for name, count in (row.get("errors_by_name") or {}).items():
            g["errors_by_name"][name] = g["errors_by_name"].get(name, 0) + count
        g["behind_ios"] += row["behind_ios"] or 0
        for key_ in ("p99_ms", "lag_max_ms"):
            if row[key_] is not None and (g[key_] is None or row[key_] > g[key_]):
                g[key_] = row[key_]
    return list(groups.values())


def target_part(rows: list[dict[str, Any]]) -> str:
    """'targets: db1 1,200 IOPS 9.8 MB/s, log1 ...' for runs with several targets."""
    if len(rows) < 2:
        return ""
    parts = []
    for r in rows:
        part = f"{r['name']} {r['iops']:,.0f} IOPS {r['mbps']:,.1f} MB/s"
        if r["errors"]:
            part += f" errors {r['errors']:,}"
        parts.append(part)
    return "targets: " + ", ".join(parts)


def _seconds(value: float) -> str:
    """Whole seconds for full intervals; a shorter last interval shows its tenth."""
    return f"{value:.0f}s" if abs(value - round(value)) < 0.05 else f"{value:.1f}s"


def phase_clock(plan: dict[str, Any], end_s: float, phase: str) -> str:
    """Where an interval ends within its phase: 'warmup 1s of 2s', 'measure 3s of 10s' (the
    measurement counts from its own start, not the run's)."""
    warmup_s = (plan.get("warmup_ms") or 0) / 1000
    duration_s = (plan.get("duration_ms") or 0) / 1000
    if phase == "measure":
        into, of = end_s - warmup_s, duration_s
        if "duration_ms" in plan and plan["duration_ms"] is None:
            return f"{phase} {_seconds(into)}, until every stream is done"
    else:
        into, of = end_s, warmup_s
    if of <= 0:
        return f"{phase} {_seconds(into)}"
    return f"{phase} {_seconds(into)} of {_seconds(of)}"


def _plan_stream_of(streams: list[dict[str, Any]], row: dict[str, Any]) -> dict[str, Any]:
    """The plan stream of a live row; {} for a row of no plan stream (a file stream)."""
    index = row["stream"]
    return streams[index] if index is not None and index < len(streams) else {}


def plain_line(rows: list[dict[str, Any]], plan: dict[str, Any] | None = None) -> str:
    """One log line for an interval's rows (per application when there are many streams);
    a phased stream outside its phase says where it stands instead of its zeros."""
    if not rows:
        return ""
    # Rows of the engine's group aggregates are merged already: p50 and p99 are the group's.
    grouped = len(rows) > GROUP_ABOVE and not rows[0].get("aggregated")
    first = rows[0]
    total_iops = sum(row["iops"] for row in rows)
    total_mbps = sum(row["mbps"] for row in rows)
    clock = phase_clock(plan or {}, first["end_s"], first["phase"])
    parts = [f"[{clock}] total {total_iops:,.0f} IOPS {total_mbps:,.1f} MB/s"]
    streams = (plan or {}).get("streams") or []
    for row in group_rows(rows):
        plan_stream = _plan_stream_of(streams, row)
        where = phase_text(plan_stream, row["end_s"]) if not grouped else ""
        if where.startswith(("starts", "ended")):
            parts.append(f"{row['name']} {where}")
            continue
        if grouped:
            part = f"{row['name']} {row['iops']:,.0f} IOPS worst p99 {fmt_ms(row['p99_ms'])}ms"
        else:
            part = (
                f"{row['name']} {row['iops']:,.0f} IOPS p50 {fmt_ms(row['p50_ms'])}ms "
                f"p99 {fmt_ms(row['p99_ms'])}ms"
            )
        if row["lag_max_ms"] is not None:
            part += f" lag {fmt_ms(row['lag_max_ms'])}ms"
        if row["errors"]:
            part += f" errors {errors_text(row.get('errors_by_name') or {})}"
        parts.append(part)
    return " | ".join(parts)


class LiveDisplay:
    """Shows interval snapshots as they arrive: a live table on a TTY, plain lines otherwise."""

    def __init__(
        self,
        plan: dict[str, Any],
        console: Console,
        *,
        tty: bool,
        extra: Callable[[], list[dict[str, Any]]] | None = None,
    ):
        self.plan = plan
        self.console = console
        self.tty = tty
        # Rows shown after the newest snapshot's streams (a tile's file streams), in the
        # shape of interval_rows with `stream` None and their own `arrival` text.
        self.extra = extra
        self._live: Live | None = None
        self._rows: list[dict[str, Any]] = []
        self._targets: list[dict[str, Any]] = []
        self._telemetry: str | None = None
        self._aggregated = False

    def __enter__(self) -> LiveDisplay:
        if self.tty:
            self._live = Live(
                self._table(), console=self.console, auto_refresh=False, transient=False
            )
            self._live.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
            self._live = None

    def telemetry(self, line: str | None) -> None:
        """The devices and host line (telemetry.live_line) shown with the next update."""
        self._telemetry = line or None

    def show_groups(self, group_plan: dict[str, Any]) -> None:
        """Snapshots from now on are group aggregates (stream_groups): show them as rows."""
        self.plan = group_plan
        self._aggregated = True

    def update(
        self, snapshots: list[dict[str, Any]], targets: list[dict[str, Any]] | None = None
    ) -> None:
        """Show new snapshots (each one line when not on a TTY, the newest one on a TTY);
        `targets` are their per-target snapshots (runner.target_snapshot) when the snapshots
        are group aggregates of a run over several targets."""
        for i, snapshot in enumerate(snapshots):
            self._rows = interval_rows(self.plan, snapshot)
            if self._aggregated:
                members = [int(g.get("streams", 1)) for g in snapshot.get("streams", [])]
                for row, n in zip(self._rows, members, strict=False):
                    row.update(aggregated=True, streams=n)
            by_target = snapshot if targets is None else targets[i]
            self._targets = pertarget.interval_rows(self.plan, by_target)
            if self.extra is not None and i == len(snapshots) - 1:
                self._rows = self._rows + self.extra()
            if self._live is None:
                # Written directly: a log line must not be wrapped at the console width.
                line = plain_line(self._rows, self.plan)
                if len(self._targets) > 1:
                    line += " | " + target_part(self._targets)
                if self._telemetry and i == len(snapshots) - 1:
                    line += " | " + self._telemetry
                self.console.file.write(line + "\n")
                self.console.file.flush()
        if self._live is not None and snapshots:
            self._live.update(self._table(), refresh=True)

    def note(self, message: str) -> None:
        """Print a message above the live view (or as its own line)."""
        if self._live is None:
            self.console.file.write(message + "\n")
            self.console.file.flush()
        else:
            self.console.print(message, markup=False, highlight=False)

    def _table(self) -> Table:
        if self._rows:
            first = self._rows[0]
            # Intervals are counted from 1, the time within the phase.
            title = (
                f"interval {first['interval'] + 1} · "
                f"{phase_clock(self.plan, first['end_s'], first['phase'])}"
            )
        else:
            title = "starting…"
        table = Table(
            title=title,
            title_justify="left",
            expand=False,
            caption=self._telemetry,
            caption_justify="left",
        )
        table.add_column("stream", no_wrap=True)
        table.add_column("arrival", no_wrap=True)
        table.add_column("IOPS", justify="right")
        table.add_column("MB/s", justify="right")
        table.add_column("p50 ms", justify="right")
        aggregated = bool(self._rows) and bool(self._rows[0].get("aggregated"))
        grouped = len(self._rows) > GROUP_ABOVE and not aggregated
        table.add_column("worst p99 ms" if grouped else "p99 ms", justify="right")
        table.add_column("lag ms", justify="right")
        table.add_column("behind", justify="right")
        table.add_column("errors", justify="right")
        streams = self.plan.get("streams", [])
        for row in group_rows(self._rows):
            plan_stream = _plan_stream_of(streams, row)
            arrival = row.get("arrival") or describe_arrival(plan_stream)
            where = phase_text(plan_stream, row["end_s"])
            table.add_row(
                escape(row["name"]),
                counted(row["streams"], "stream")
                if grouped or row.get("streams", 1) > 1
                else f"{arrival} {where}".rstrip(),
                fmt_rate(row["iops"]),
                fmt_rate(row["mbps"], 1),
                fmt_ms(row["p50_ms"]),
                fmt_ms(row["p99_ms"]),
                fmt_ms(row["lag_max_ms"]),
                str(row["behind_ios"]) if row["lag_max_ms"] is not None else "-",
                Text(errors_text(row.get("errors_by_name") or {}), style="red")
                if row["errors"]
                else "0",
            )
        if len(self._targets) > 1:
            table.add_section()
            for t in self._targets:
                table.add_row(
                    f"target {escape(t['name'])}",
                    "",
                    fmt_rate(t["iops"]),
                    fmt_rate(t["mbps"], 1),
                    "",
                    "",
                    "",
                    "",
                    Text(f"{t['errors']:,}", style="red") if t["errors"] else "0",
                )
        if len(self._rows) > 1:
            table.add_section()
            table.add_row(
                "total",
                "",
                fmt_rate(sum(row["iops"] for row in self._rows)),
                fmt_rate(sum(row["mbps"] for row in self._rows), 1),
                "",
                "",
                "",
                "",
                str(sum(row["errors"] for row in self._rows)),
                style="bold",
            )
        return table


def _latencies(op: dict[str, Any] | None) -> str:
    if not op or not op.get("ops"):
        return "-"
    response = op["response"]
    return "/".join(fmt_ms(response[key]) for key in ("p50_ms", "p99_ms", "p999_ms"))


def results_table(plan: dict[str, Any], summary: dict[str, Any], title: str) -> Table:
    """The final per-stream table of a run's summary (latency in ms: response time)."""
    table = Table(title=title, title_justify="left", caption_justify="left")
    table.caption = (
        "latency in ms, p50/p99/p99.9: response time (from the intended issue time) for open "
        "loop, service time for closed loop; MB/s = 10^6 bytes/s"
    )
    table.add_column("stream", no_wrap=True)
    table.add_column("arrival", no_wrap=True)
    table.add_column("IOPS", justify="right", no_wrap=True)
    table.add_column("MB/s", justify="right", no_wrap=True)
    table.add_column("read ms", justify="right", no_wrap=True)
    table.add_column("write ms", justify="right", no_wrap=True)
    table.add_column("max lag", justify="right", no_wrap=True)
    table.add_column("errors", justify="right", no_wrap=True)
    streams = plan.get("streams", [])
    rows = summary["streams"]
    for row in rows[:TABLE_STREAMS]:
        plan_stream = streams[row["stream"]] if row["stream"] < len(streams) else {}
        named = errors_by_name(*(row.get(kind) for kind in ("read", "write", "sync")))
        table.add_row(
            escape(row["name"]),
            describe_arrival(plan_stream),
            fmt_rate(row["total"]["iops"]),
            fmt_rate(row["total"]["mbps"], 1),
            _latencies(row.get("read")),
            _latencies(row.get("write")),
            fmt_ms(row.get("lag_max_ms")),
            Text(errors_text(named), style="red") if named else "0",
        )
    if len(rows) > TABLE_STREAMS:
        # Rendering 10,000 rows took rich 15 s of CPU after the run (issue 25).
        more = f"... {len(rows) - TABLE_STREAMS:,} more streams: run.json and `tilemark report`"
        table.add_row(more, "", "", "", "", "", "", "")
    total = summary["total"]
    table.add_section()
    table.add_row(
        "total",
        f"{summary['duration_s']:.1f}s measured",
        fmt_rate(total["iops"]),
        fmt_rate(total["mbps"], 1),
        "",
        "",
        "",
        Text(errors_text(total.get("errors_by_name") or {}), style="red")
        if total["errors"]
        else "0",
        style="bold",
    )
    return table


def targets_table(summary: dict[str, Any]) -> Table | None:
    """Per target over the measurement window (runs with several targets): what it received,
    and its read and write latency (merged histograms: response time for open loop)."""
    targets = summary.get("targets") or []
    if len(targets) < 2:
        return None
    table = Table(
        title="per target",
        title_justify="left",
        caption="latency in ms, p50/p99/p99.9; MB/s = 10^6 bytes/s",
        caption_justify="left",
    )
    for name in ("target", "path", "IOPS", "MB/s", "read IOPS", "write IOPS", "read ms",
                 "write ms", "errors"):  # fmt: skip
        table.add_column(name, justify="left" if name in ("target", "path") else "right")
    for t in targets:
        lat = {
            op: "/".join(fmt_ms((t.get(f"{op}_latency") or {}).get(k)) for k in
                         ("p50_ms", "p99_ms", "p999_ms"))
            if t.get(f"{op}_ops") else "-"
            for op in ("read", "write")
        }  # fmt: skip
        table.add_row(
            escape(str(t["name"])),
            escape(str(t.get("path") or "")),
            fmt_rate(t.get("iops")),
            fmt_rate(t.get("mbps"), 1),
            fmt_rate(t.get("read_iops")),
            fmt_rate(t.get("write_iops")),
            lat["read"],
            lat["write"],
            Text(f"{t['errors']:,}", style="red") if t.get("errors") else "0",
        )
    return table


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def front_back_table(summary: dict[str, Any]) -> Table | None:
    """Front end (tilemark) vs back end (each device underneath) over the measurement
    window, read and write separately, with back/front ratios; None without device rows."""
    rows = (summary.get("telemetry") or {}).get("front_vs_back") or []
    if len(rows) < 2:
        return None
    table = Table(
        title="front end (tilemark) vs back end (devices)",
        title_justify="left",
        caption="ratio = device / tilemark: < 1 a cache absorbed IOs, > 1 the device did "
        "more (write penalty, other IO); depth 0 serves the target directly",
        caption_justify="left",
    )
    for name in (
        "",
        "depth",
        "read IOPS",
        "ratio",
        "write IOPS",
        "ratio",
        "read MB/s",
        "write MB/s",
        "util %",
    ):
        table.add_column(name, justify="left" if not name else "right", no_wrap=True)
    for row in rows:
        back = row["side"] == "back end"
        table.add_row(
            escape(row["name"]),
            "" if row["depth"] is None else str(row["depth"]),
            fmt_rate(row.get("read_iops")),
            _ratio(row.get("read_iops_ratio")) if back else "",
            fmt_rate(row.get("write_iops")),
            _ratio(row.get("write_iops_ratio")) if back else "",
            fmt_rate(row.get("read_mbps"), 1),
            fmt_rate(row.get("write_mbps"), 1),
            fmt_rate(row.get("util_pct")) if back else "",
        )
    return table


def host_line(summary: dict[str, Any]) -> str | None:
    """Host CPU, engine CPU and pressure over the measurement window, one line."""
    host = (summary.get("telemetry") or {}).get("host")
    if not host:
        return None
    parts = []
    if host.get("cpu_busy_pct") is not None:
        parts.append(
            f"CPU {host['cpu_busy_pct']:.0f}% busy (user {host['cpu_user_pct']:.0f}%, system "
            f"{host['cpu_system_pct']:.0f}%, iowait {host['cpu_iowait_pct']:.0f}%, steal "
            f"{host['cpu_steal_pct']:.0f}%)"
        )
    cpu = HostCpu.of(host)
    if cpu.engine_cpu_pct is not None:
        parts.append(f"engine threads {cpu.engine_cpu_pct:.0f}% of a CPU")
        if cpu.aggregate_cpu_pct:
            parts.append(f"its aggregation {cpu.aggregate_cpu_pct:.1f}%")
    for res in ("io", "cpu", "memory"):
        value = host.get(f"{res}_some_pct")
        if value is not None:
            parts.append(f"{res} pressure {value:.1f}%")
    return "host: " + ", ".join(parts) if parts else None


def hosts_table(rows: list[tuple[str, dict[str, Any]]], title: str) -> Table:
    """Per host of a cluster run (docs/cluster.md): its part of the load and how it started.
    `rows` are (step, host entry of the summary's `hosts`); step is "" for a single run."""
    table = Table(title=title, title_justify="left")
    steps = any(step for step, _ in rows)
    columns = [("step", "right")] if steps else []
    columns += [
        ("host", "left"),
        ("status", "left"),
        ("streams", "right"),
        ("IOPS", "right"),
        ("MB/s", "right"),
        ("p99 ms", "right"),
        ("errors", "right"),
        ("clock offset ms", "right"),
        ("start ms", "right"),
    ]
    for name, justify in columns:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for step, h in rows:
        offset = h.get("clock_offset_ms")
        late = h.get("start_late_ms")
        cells = [step] if steps else []
        cells += [
            h["name"],
            h.get("status") or "-",
            str(len(h.get("streams") or [])),
            fmt_rate(h.get("iops")),
            fmt_rate(h.get("mbps"), 1),
            fmt_ms(h.get("p99_ms")),
            f"{h.get('errors') or 0:,}",
            "-" if offset is None else f"{offset:+.3f} +-{h.get('clock_uncertainty_ms') or 0:.3f}",
            "-" if late is None else f"+{late:.3f}",
        ]
        table.add_row(*cells)
    return table
