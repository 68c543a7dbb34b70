"""HostTargets: a workload's targets inspected on every host of a cluster, and the run across
them.

It stands where the list of TargetInfo stands for one host (runtargets.RemoteTargets): read as a
sequence it holds one ClusterTarget per workload target (true of every host), and the command
locks, prepares, compiles and runs through it. Compiling places the workload (placement.py),
compiles each host's part against that host's inspected targets, and joins them into the
run's plan: the original workload's streams and targets with their indexes, the shared
absolute start and, under `hosts`, each host's own plan. Running stores one run whose
intervals and result are the hosts' merged, with each host's intervals, telemetry and
verification journals under hosts/NAME/ and its summary in the run's `hosts` list
(docs/results-schema.md, Cluster runs).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from tilemark import engine, targets
from tilemark.analysis.changepoints import ChangeTracker
from tilemark.cluster import placement
from tilemark.cluster.handle import ClusterHandle, HostRun, HostsLine, host_dir_name
from tilemark.cluster.session import Session
from tilemark.console import say
from tilemark.errors import RunError, UsageError
from tilemark.hist import Histogram, latency_hist
from tilemark.run import datareduction
from tilemark.run.outcome import RunOutcome
from tilemark.run.runner import (
    SignalStopper,
    data_summaries,
    drive,
    print_reduction,
    store_run,
    summarize_run,
)
from tilemark.run.summary import summarize
from tilemark.run.where import RemoteTargets
from tilemark.store.rundir import RunWriter
from tilemark.targets.spec import TargetSpec
from tilemark.targets.verification import run_summary
from tilemark.telemetry import prometheus as metrics
from tilemark.units import format_size
from tilemark.workload import compiler, plan

HOSTS_DIR = "hosts"
START_MARGIN_S = 1.0  # the start time is this far ahead of the last host's engine start
START_NOTE_MS = 1.0  # engines that started further apart than this get a note


@dataclass
class ClusterTarget(targets.TargetInfo):
    """One workload target across the hosts, as layouts and checks read a target: its path as
    given ({host}/{worker} unexpanded), the smallest data area and the largest O_DIRECT
    alignment of any host; `on_hosts` holds each host's own inspection."""

    on_hosts: dict[str, targets.TargetInfo] = field(default_factory=dict)

    @classmethod
    def of(cls, spec: TargetSpec, on_hosts: dict[str, targets.TargetInfo]) -> ClusterTarget:
        infos = list(on_hosts.values())
        first = infos[0]
        base = {f.name: getattr(first, f.name) for f in dataclasses.fields(targets.TargetInfo)}
        base.update(
            path=spec.path,
            name=spec.name,
            data_length=min(i.data_length for i in infos),
            dio_alignment=max(i.dio_alignment for i in infos),
            direct=all(i.direct for i in infos),
            exists=all(i.exists for i in infos),
        )
        return cls(**base, on_hosts=dict(on_hosts))

    @property
    def will_fill(self) -> bool:
        return any(i.will_fill for i in self.on_hosts.values())

    def notes(self) -> list[str]:
        return [f"{host}: {n}" for host, i in self.on_hosts.items() for n in i.notes()]

    def record(self) -> dict[str, Any]:
        """The target as the workload names it, and each host's record of it."""
        return {
            **super().record(),
            "hosts": [{"host": host, **i.record()} for host, i in self.on_hosts.items()],
        }


def inspect_hosts(
    session: Session, specs: Sequence[TargetSpec], options: dict[str, Any]
) -> HostTargets:
    """Inspect the workload's targets on every host (each host's own {host}/{worker} paths;
    every --destroy-data entry is expanded the same way and checked on each host against that
    host's devices). Any refusal stops everything."""
    placement.check_targets(specs, session.hosts)
    per_host = []
    for i, host in enumerate(session.hosts):
        own = dict(options)
        if own.get("destroy_data"):
            own["destroy_data"] = [placement.expand(d, host) for d in own["destroy_data"]]
        mine = [dataclasses.replace(s, path=placement.expand(s.path, host)) for s in specs]
        try:
            per_host.append(session.each("inspect", mine, own, hosts=[i])[0])
        except BaseException:
            session.each("forget")
            raise
    return HostTargets(session, list(specs), per_host)


class HostTargets(RemoteTargets):
    """A workload's targets on every host of the session (module doc)."""

    def __init__(
        self, session: Session, specs: list[TargetSpec], per_host: list[list[targets.TargetInfo]]
    ):
        self.session = session
        self.specs = specs
        self.per_host: list[list[targets.TargetInfo]] = []
        self.infos: list[targets.TargetInfo] = []
        self._take(per_host)

    def _take(self, per_host: list[list[targets.TargetInfo]]) -> None:
        self.per_host = per_host
        names = [h.name for h in self.session.hosts]
        self.infos = [
            ClusterTarget.of(spec, {n: infos[i] for n, infos in zip(names, per_host, strict=True)})
            for i, spec in enumerate(self.specs)
        ]

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
            for h, infos in zip(self.session.hosts, self.per_host, strict=True)
            for i in infos
            if i.will_fill
        ]
        if filling:
            console.print(
                f"preparing {len(filling)} target(s) so reads never hit holes: "
                + ", ".join(filling),
                markup=False,
                soft_wrap=True,
            )
        self._take(self.session.each("prepare"))
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
            compiled = compiler.compile_plan(w.workload, self.per_host[w.index])
            for local, g in enumerate(w.streams):
                if workload.streams[g].seed is None:
                    # Hosts running the same stream do not replay the same offsets.
                    seed = compiler.stream_seed(workload.seed, g)
                    compiled["streams"][local]["seed"] = (
                        seed if w.index == 0 else compiler.stream_seed(seed, w.index)
                    )
            host_plans.append((w, compiled))
        return joined_plan(host_plans, self.infos)

    # running

    def run(self, workload: plan.Workload, compiled: engine.Plan, **options: Any) -> RunOutcome:
        return run_on_hosts(self, workload, dict(compiled), **options)


def joined_plan(
    host_plans: list[tuple[placement.HostWork, dict[str, Any]]],
    views: Sequence[targets.TargetInfo],
) -> dict[str, Any]:
    """The run's plan: the workload's targets (paths as given, each host's under `hosts`) and
    streams (each from the first host running it), and each host's plan under `hosts`. Every
    host has every target at the same index, so streams' regions need no renumbering."""
    first = host_plans[0][1]
    streams: dict[int, dict[str, Any]] = {}
    for w, p in host_plans:
        for local, g in enumerate(w.streams):
            streams.setdefault(g, p["streams"][local])
    joined_targets = []
    for i, t in enumerate(first["targets"]):
        on_hosts = [
            {
                "host": w.host.name,
                **{k: p["targets"][i][k] for k in ("path", "offset", "length")},
            }
            for w, p in host_plans
        ]
        joined = {
            **t,
            "path": views[i].path,
            "length": min(h["length"] for h in on_hosts),
            "hosts": on_hosts,
        }
        if t.get("verify"):
            # The setting only: each host's identity, epoch and journal are in its own plan.
            joined["verify"] = {
                **dict.fromkeys(t["verify"]),
                "block_size": t["verify"]["block_size"],
            }
        joined_targets.append(joined)
    return {
        **{k: v for k, v in first.items() if k not in ("targets", "streams")},
        "threads": sum(p["threads"] for _, p in host_plans),
        "targets": joined_targets,
        "streams": [streams[g] for g in sorted(streams)],
        "hosts": [{"name": w.host.name, "streams": w.streams, "plan": p} for w, p in host_plans],
    }


def _describe(compiled: dict[str, Any], info: HostTargets) -> str:
    timing = (
        "until every stream is done"
        if compiled["duration_ms"] is None
        else f"{compiled['duration_ms'] / 1000:g}s"
    )
    if compiled["warmup_ms"]:
        timing = f"{compiled['warmup_ms'] / 1000:g}s warm-up + {timing}"
    names = ", ".join(h["name"] for h in compiled["hosts"])
    count = len(compiled["streams"])
    hosts = len(compiled["hosts"])
    shown = ", ".join(f"{t.path} ({format_size(t.data_length)})" for t in info.infos)
    return (
        f"{count} stream{'s' if count != 1 else ''} on {hosts} host{'s' if hosts != 1 else ''} "
        f"({names}), target{'s' if len(info.infos) != 1 else ''} {shown} on each, "
        f"{'O_DIRECT' if all(t.direct for t in info.infos) else 'buffered'}, backend "
        f"{compiled['backend']}, {timing}"
    )


def host_summaries(
    handle: ClusterHandle, session: Session, infos: dict[str, list[targets.TargetInfo]]
) -> list[dict[str, Any]]:
    """The summary's `hosts` list: per host its name, targets (its own part of each), IOPS,
    MB/s, errors, p99, verification, clock offset, start instant and status."""
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
        paths = [t["path"] for t in r.plan["targets"]]
        verification = run_summary(result, handle.plan)
        if verification is not None:
            verification["journals"] = r.journals
            verification["journal"] = r.journals[0] if r.journals else None
        entry = {
            "name": r.host.name,
            "hostname": r.host.hostname,
            "worker": r.host.worker,
            "address": r.host.address,
            "pid": r.host.pid,
            "status": _host_status(r, result),
            "lost": r.lost,
            "lost_at_ns": r.lost_at_ns,
            "targets": [{**t, "path": paths[t["target"]]} for t in own.get("targets") or []],
            "streams": [handle.plan["streams"][g]["name"] for g in r.streams],
            "intervals": r.intervals,
            "iops": total.get("iops"),
            "mbps": total.get("mbps"),
            "read_iops": total.get("read_iops"),
            "write_iops": total.get("write_iops"),
            "errors": total.get("errors"),
            "p99_ms": None if p99 is None else p99 / 1e6,
            "verification": verification,
            "clock_offset_ms": None if offset is None else offset.offset_ns / 1e6,
            "clock_uncertainty_ms": None if offset is None else offset.uncertainty_ns / 1e6,
            "started_at_ns": started,
            "start_late_ms": None if not started else (started - handle.start_at_ns) / 1e6,
            "dir": f"{HOSTS_DIR}/{host_dir_name(r.host.name)}",
            "telemetry": r.extra.get("telemetry"),
        }
        if r.host.name in infos:
            entry["target_records"] = [i.record() for i in infos[r.host.name]]
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
    by_name = {h.name: i for h, i in zip(session.hosts, info.per_host, strict=True)}
    agents = {h.name: a for h, a in zip(session.hosts, session.agents, strict=True)}
    hosts = {h.name: h for h in session.hosts}
    # From here on a signal stops the run in order (the engines stop as they start if it
    # came before): the run directory is never left half made.
    with SignalStopper() as stopper:
        try:
            writer = RunWriter(
                results,
                plan=compiled,
                workload=workload.to_json(),
                targets=[i.record() for i in info.infos],
                argv=argv,
                kind=kind,
                label=label,
            )
        except OSError as e:
            raise RunError(f"cannot write results under {results}: {e.strerror or e}.") from None
        try:
            reduction = datareduction.measure(compiled)
        except BaseException as e:
            writer.finish(None, summary=None, complete=False, error=f"{type(e).__name__}: {e}")
            raise
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
        target_notes = [n for t in info.infos for n in t.notes()]
        for line in clock_notes + target_notes:
            say(console, f"note: {line}")
        print_reduction(reduction, console)

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
        try:
            handle.start()
        except (engine.EngineError, UsageError) as e:
            handle.seal()
            writer.finish(None, summary=None, complete=False, error=str(e))
            raise
        writer.rewrite()  # each host's plan with what its start decided (epochs, journals)
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
        problems += handle.fetch_journals()
        summary = summarize_run(writer, compiled, result, error, ended_by, changes, analyze)
        summary["hosts"] = host_summaries(handle, session, by_name)
        # Devices and host CPU are per host (summary.hosts[].telemetry).
        summary["telemetry"] = summary["tool_bound"] = None
        data_summaries(summary, result, compiled, reduction)
        if summary["verification"] is not None:
            journals = [j for r in handle.runs for j in r.journals]
            summary["verification"].update(
                journals=journals, journal=journals[0] if journals else None
            )
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
    """lost, failed (its engine failed), errors, hung or data-errors (its storage failed the
    run), else ok (it ran until the run ended, whoever ended it)."""
    if r.lost:
        return "lost"
    if r.error:
        return "failed"
    if ((result.get("verification") or {}).get("total") or 0) > 0:
        return "data-errors"
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
