"""HostTargets: a target inspected on every host of a cluster, and the run across them.

It stands where a TargetInfo stands for one host (runner.RemoteTargets): the command locks,
prepares, compiles and runs through it. Compiling places the workload (placement.py), compiles
each host's part against that host's inspected target, and joins them into the run's plan: the
original workload's streams with their global indexes, the hosts' targets, the shared absolute
start and, under `hosts`, each host's own plan. Running stores one run whose intervals and
result are the hosts' merged, with each host's intervals and telemetry under hosts/NAME/ and
its summary in the run's `hosts` list (docs/results-schema.md, Cluster runs).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console

from tilemark import engine, metrics, plan, targets
from tilemark import telemetry as tm
from tilemark.analysis.changepoints import ChangeTracker
from tilemark.cluster import placement
from tilemark.cluster.handle import ClusterHandle, HostRun, HostsLine, host_dir_name
from tilemark.cluster.session import Session
from tilemark.errors import RunError, UsageError
from tilemark.hist import Histogram, latency_hist
from tilemark.runner import (
    RemoteTargets,
    RunOutcome,
    SignalStopper,
    drive,
    store_run,
    summarize_run,
)
from tilemark.store import RunWriter
from tilemark.summary import summarize
from tilemark.units import format_size

HOSTS_DIR = "hosts"
START_MARGIN_S = 1.0  # the start time is this far ahead of the last host's engine start
START_NOTE_MS = 1.0  # engines that started further apart than this get a note


def inspect_hosts(session: Session, path: str, options: dict[str, Any]) -> HostTargets:
    """Inspect `path` on every host (each host's own {host}/{worker} path; --destroy-data is
    checked on each host against that host's device). Any refusal stops everything."""
    infos = []
    for i, host in enumerate(session.hosts):
        own = dict(options)
        if own.get("destroy_data"):
            own["destroy_data"] = placement.expand(own["destroy_data"], host)
        try:
            infos.append(session.each("inspect", placement.expand(path, host), own, hosts=[i])[0])
        except BaseException:
            session.each("forget")
            raise
    return HostTargets(session, path, infos)


class HostTargets(RemoteTargets):
    """A target on every host of the session (module doc)."""

    def __init__(self, session: Session, path: str, infos: list[targets.TargetInfo]):
        self.session = session
        self.path = path
        self.infos = infos
        self.data_length = min(i.data_length for i in infos)
        self.dio_alignment = max(i.dio_alignment for i in infos)
        self.direct = all(i.direct for i in infos)
        self.kind = "cluster"
        self.preconditioning = None

    @property
    def will_fill(self) -> bool:
        return any(i.will_fill for i in self.infos)

    def record(self) -> dict[str, Any]:
        """What a study records about its target: the path as given and each host's."""
        return {
            "path": self.path,
            "kind": self.kind,
            "hosts": [
                {"host": h.name, **i.record()}
                for h, i in zip(self.session.hosts, self.infos, strict=True)
            ],
        }

    @contextlib.contextmanager
    def lock(self, argv: list[str]) -> Iterator[None]:
        try:
            self.session.each("lock", argv)
            yield
        finally:
            for agent in self.session.agents:
                with contextlib.suppress(Exception):
                    agent.release().result(timeout=30)

    def prepare(self, console: Console) -> bool:
        filling = [
            f"{h.name}:{i.path}"
            for h, i in zip(self.session.hosts, self.infos, strict=True)
            if i.will_fill
        ]
        if filling:
            console.print(
                f"preparing targets so reads never hit holes on {len(filling)} host(s): "
                + ", ".join(filling),
                markup=False,
                soft_wrap=True,
            )
        self.infos = self.session.each("prepare")
        self.infos = [infos[-1] for infos in self.infos]
        return True

    # compiling

    def compile(self, workload: plan.Workload, groups: list[int] | None) -> engine.Plan:
        hosts = self.session.hosts
        if groups is not None:
            owners = placement.tile_owners(workload, groups, hosts)
        else:
            owners = placement.stream_owners(workload, hosts)
        works = placement.place(workload, hosts, owners)
        self.session.clock_notes(workload.interval_s)  # refuse before any IO
        host_plans = []
        for w in works:
            compiled = plan.compile_plan(w.workload, self.infos[w.index])
            for local, g in enumerate(w.streams):
                if workload.streams[g].seed is None:
                    # Hosts running the same stream do not replay the same offsets.
                    seed = plan.stream_seed(workload.seed, g)
                    compiled["streams"][local]["seed"] = (
                        seed if w.index == 0 else plan.stream_seed(seed, w.index)
                    )
            host_plans.append((w, compiled))
        return joined_plan(host_plans)

    # running

    def run(self, workload: plan.Workload, compiled: engine.Plan, **options: Any) -> RunOutcome:
        return run_on_hosts(self, workload, dict(compiled), **options)


def joined_plan(host_plans: list[tuple[placement.HostWork, dict[str, Any]]]) -> dict[str, Any]:
    """The run's plan: global streams (each from the first host running it), every host's
    targets, and each host's plan under `hosts`."""
    first = host_plans[0][1]
    targets_out: list[dict[str, Any]] = []
    streams: dict[int, dict[str, Any]] = {}
    hosts = []
    for w, p in host_plans:
        base = len(targets_out)
        targets_out += [{**t, "host": w.host.name} for t in p["targets"]]
        for local, g in enumerate(w.streams):
            if g not in streams:
                s = p["streams"][local]
                streams[g] = {**s, "target": base + int(s["target"])}
        hosts.append({"name": w.host.name, "streams": w.streams, "plan": p})
    return {
        **{k: v for k, v in first.items() if k not in ("targets", "streams")},
        "threads": sum(p["threads"] for _, p in host_plans),
        "targets": targets_out,
        "streams": [streams[g] for g in sorted(streams)],
        "hosts": hosts,
    }


def _describe(compiled: dict[str, Any], info: HostTargets) -> str:
    timing = f"{compiled['duration_ms'] / 1000:g}s"
    if compiled["warmup_ms"]:
        timing = f"{compiled['warmup_ms'] / 1000:g}s warm-up + {timing}"
    names = ", ".join(h["name"] for h in compiled["hosts"])
    count = len(compiled["streams"])
    return (
        f"{count} stream{'s' if count != 1 else ''} on {len(compiled['hosts'])} "
        f"host{'s' if len(compiled['hosts']) != 1 else ''} ({names}), "
        f"target {info.path} ({format_size(info.data_length)} each, "
        f"{'O_DIRECT' if info.direct else 'buffered'}), backend {compiled['backend']}, {timing}"
    )


def host_summaries(
    handle: ClusterHandle, session: Session, infos: dict[str, targets.TargetInfo]
) -> list[dict[str, Any]]:
    """The summary's `hosts` list: per host its name, targets, IOPS, MB/s, errors, p99, clock
    offset, start instant and status."""
    out = []
    for r in handle.runs:
        result = r.result or {}
        own = summarize(handle.plan, result) if result else {"total": {}, "streams": []}
        total = own["total"]
        data = [
            latency_hist(s.get(k)) for s in result.get("streams") or [] for k in ("read", "write")
        ]
        merged = Histogram.merged(data)
        p99 = merged.percentile(99.0)
        offset = session.offsets.get(r.host.name)
        started = result.get("started_at_ns")
        telemetry = r.extra.get("telemetry_totals")
        entry = {
            "name": r.host.name,
            "hostname": r.host.hostname,
            "worker": r.host.worker,
            "address": r.host.address,
            "pid": r.host.pid,
            "status": _host_status(r, result),
            "lost": r.lost,
            "lost_at_ns": r.lost_at_ns,
            "targets": [t["path"] for t in r.plan["targets"]],
            "streams": [handle.plan["streams"][g]["name"] for g in r.streams],
            "intervals": r.intervals,
            "iops": total.get("iops"),
            "mbps": total.get("mbps"),
            "read_iops": total.get("read_iops"),
            "write_iops": total.get("write_iops"),
            "errors": total.get("errors"),
            "p99_ms": None if p99 is None else p99 / 1e6,
            "clock_offset_ms": None if offset is None else offset.offset_ns / 1e6,
            "clock_uncertainty_ms": None if offset is None else offset.uncertainty_ns / 1e6,
            "started_at_ns": started,
            "start_late_ms": None if not started else (started - handle.start_at_ns) / 1e6,
            "dir": f"{HOSTS_DIR}/{host_dir_name(r.host.name)}",
        }
        if telemetry:
            entry["telemetry"] = {
                "devices": telemetry["devices"],
                "front_vs_back": tm.front_vs_back(total, telemetry["devices"]),
                "host": telemetry["host"],
            }
        info = infos.get(r.host.name)
        if info is not None:
            entry["target_records"] = [info.record()]
        out.append(entry)
    return out


def run_on_hosts(
    info: HostTargets,
    workload: plan.Workload,
    compiled: dict[str, Any],
    *,
    results: Path,
    argv: list[str],
    console: Console,
    kind: str = "run",
    analyze: Any = None,
    monitor: Any = None,
    note: str | None = None,
    label: str | None = None,
    apps: dict[int, str] | None = None,
) -> RunOutcome:
    """runner.run_plan across hosts: start together, merge, store merged and per host."""
    session = info.session
    try:
        results.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--results {results} cannot be created: {e.strerror}.") from None
    clock_notes = session.clock_notes(workload.interval_s)
    by_name = {h.name: i for h, i in zip(session.hosts, info.infos, strict=True)}
    agents = {h.name: a for h, a in zip(session.hosts, session.agents, strict=True)}
    hosts = {h.name: h for h in session.hosts}
    try:
        writer = RunWriter(
            results,
            plan=compiled,
            workload=workload.to_json(),
            targets=[{**by_name[h["name"]].record(), "host": h["name"]} for h in compiled["hosts"]],
            argv=argv,
            kind=kind,
            label=label,
        )
    except OSError as e:
        raise RunError(f"cannot write results under {results}: {e.strerror or e}.") from None
    runs = [
        HostRun(
            host=hosts[h["name"]],
            agent=agents[h["name"]],
            plan=h["plan"],
            streams=h["streams"],
            store_dir=writer.path / HOSTS_DIR / host_dir_name(h["name"]),
        )
        for h in compiled["hosts"]
    ]
    served = metrics.current()
    if served is not None:
        served.run_started(writer.run_id, compiled, apps or {})
    extra = f"; {note}" if note else ""
    labelled = f" ({label})" if label else ""
    console.print(
        f"run {writer.run_id}{labelled}: {_describe(compiled, info)}{extra}", markup=False
    )
    target_notes = [f"{name}: {n}" for name, i in by_name.items() for n in i.notes()]
    for line in clock_notes + target_notes:
        console.print(f"note: {line}", markup=False, soft_wrap=True)

    # The start time: far enough ahead that every host's engine is set up and sleeping.
    start_at_ns = time.time_ns() + int((START_MARGIN_S + 0.2 * len(runs)) * 1e9)
    compiled["start_at_ns"] = start_at_ns
    for r in runs:
        r.plan["start_at_ns"] = start_at_ns
    handle = ClusterHandle(
        runs,
        compiled,
        run_id=writer.run_id,
        start_at_ns=start_at_ns,
        keep_cache=workload.keep_cache,
    )
    changes = ChangeTracker()
    with SignalStopper() as stopper:
        try:
            handle.start()
        except engine.EngineError as e:
            handle.seal()
            writer.finish(None, summary=None, complete=False, error=str(e))
            raise
        stopper.attach(handle)  # type: ignore[arg-type]
        try:
            result, error, ended_by = drive(
                handle,
                writer,
                compiled,
                console,
                console.is_terminal,
                stopper,
                monitor,
                HostsLine(handle),  # type: ignore[arg-type]
                changes,
            )
        finally:
            problems = handle.seal()
        summary = summarize_run(writer, compiled, result, error, ended_by, changes, analyze)
        summary["hosts"] = host_summaries(handle, session, by_name)
        lost = [r.host.name for r in handle.runs if r.lost]
        notes = [*clock_notes, *target_notes, *handle.notes, *problems]
        for r in handle.runs:
            notes += [f"{r.host.name}: {n}" for n in r.extra.get("telemetry_notes") or []]
        if notes:
            summary["notes"] = [*notes, *summary.get("notes", [])]
        spread = _spread(summary["hosts"])
        if spread is not None and spread > START_NOTE_MS:
            summary.setdefault("notes", []).append(
                f"the hosts' engines started {spread:.1f} ms apart (busy hosts wake late)"
            )
        summary["cluster"] = {
            "spec": session.spec,
            "start_at_ns": start_at_ns,
            "lost": lost,
            "start_spread_ms": spread,
        }
        writer.doc["hosts"] = [
            {**h, "plan": r.plan, "result": r.result}
            for h, r in zip(summary["hosts"], handle.runs, strict=True)
        ]
        return store_run(
            writer, compiled, result, summary, stopper, ended_by, cut_short=_lost_text(handle)
        )


def _host_status(r: HostRun, result: dict[str, Any]) -> str:
    """lost, failed (its engine failed), errors or hung (its storage failed the run), else ok
    (it ran until the run ended, whoever ended it)."""
    if r.lost:
        return "lost"
    if r.error:
        return "failed"
    reason = result.get("stop_reason")
    return str(reason) if reason in ("errors", "hung") else "ok"


def _lost_text(handle: ClusterHandle) -> str | None:
    lost = [f"host {r.host.name} lost ({r.lost})" for r in handle.runs if r.lost]
    if not lost:
        return None
    return "; ".join(lost) + "; every interval received is kept, the run is stored incomplete"


def _spread(hosts: list[dict[str, Any]]) -> float | None:
    """Milliseconds between the first and the last host's engine start."""
    starts = [h["started_at_ns"] for h in hosts if h.get("started_at_ns")]
    return (max(starts) - min(starts)) / 1e6 if len(starts) > 1 else None
