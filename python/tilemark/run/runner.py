"""Running a compiled plan: prepare the target, drive the engine, store what it measured.

Used by `tilemark run` and by every step of `tilemark scale`. Interrupting a run (Ctrl-C,
SIGTERM) stops the engine in order: the intervals measured so far are written and the run is
marked incomplete. On a cluster's targets (runtargets.RemoteTargets) `prepare` and `run_plan`
hand over to the cluster, which shares `drive`, `summarize_run` and `store_run`.

Longer than 600 lines because that shared sequence (store, signals, monitor, live view,
telemetry, storage verdict) is one piece: split, each part would take all the others' state.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import msgspec
from rich.console import Console

from tilemark import engine, heap, targets
from tilemark.analysis.changepoints import ChangeTracker
from tilemark.analysis.qos import WindowFeed
from tilemark.console import say
from tilemark.errors import RunError, UsageError, excerpt
from tilemark.hist import Histogram
from tilemark.interrupts import INTERRUPTS, Interrupted, SignalStopper, status_of
from tilemark.options.parsers import cpu_list
from tilemark.run import datareduction, pertarget
from tilemark.run.live import LiveDisplay, stream_groups
from tilemark.run.outcome import RunOutcome
from tilemark.run.overhead import tool_overhead
from tilemark.run.priority import front_end_yields
from tilemark.run.summary import errors_text, summarize
from tilemark.run.where import RemoteTargets, Targets
from tilemark.store.results import EnginePoller, kernel_messages
from tilemark.store.rundir import RunWriter
from tilemark.store.rundoc import STORAGE_FAILED
from tilemark.targets import data as targetdata
from tilemark.targets import verification
from tilemark.telemetry import kmsg
from tilemark.telemetry import prometheus as metrics
from tilemark.telemetry import sampler as tm
from tilemark.trace.accuracy import failure as replay_failure
from tilemark.units import format_size
from tilemark.workload import plan

POLL_S = 0.2
# What the live view says when a monitor ends a run early.
ENDED_BY = {
    "decided": "every QoS criterion is decided: stopping the run",
    "steady": "steady state reached: stopping the run",
    "fio-steady": "fio's steady-state criterion is met: stopping the run",
}


def _fill_reporter(tty: bool) -> targets.Progress:
    last_line = [""]

    def report(path: str, done: int, total: int) -> None:
        line = (
            f"preparing {path}: filled {format_size(done)} of {format_size(total)} "
            f"({100 * done / total:.0f}%)"
        )
        if tty:
            end = "\n" if done >= total else ""
            sys.stderr.write("\r" + line.ljust(len(last_line[0])) + end)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
        last_line[0] = line

    return report


def _describe(compiled: dict[str, Any], infos: list[targets.TargetInfo]) -> str:
    mode = "O_DIRECT" if all(i.direct for i in infos) else "buffered"
    timing = (
        "until every stream is done"
        if compiled["duration_ms"] is None
        else f"{compiled['duration_ms'] / 1000:g}s"
    )
    if compiled["warmup_ms"]:
        timing = f"{compiled['warmup_ms'] / 1000:g}s warm-up + {timing}"
    count = len(compiled["streams"])
    if not infos:
        return f"no block streams (the engine keeps time), {timing}"
    if len(infos) == 1:
        where = f"{infos[0].path} ({format_size(infos[0].data_length)}, {mode})"
    else:
        shown = ", ".join(
            f"{i.name} {i.path} ({format_size(i.data_length)})" if i.name != i.path else i.path
            for i in infos
        )
        where = f"{len(infos)} targets: {shown}, {mode}"
    listed = compiled.get("cpus") or []  # thread i runs on listed[i % len]
    cpus = sorted({listed[i % len(listed)] for i in range(compiled["threads"])} if listed else [])
    pinned = f" on CPU{'s' if len(cpus) > 1 else ''} {cpu_list(cpus)}" if cpus else ""

    return (
        f"{count} stream{'s' if count != 1 else ''} on {where}, backend {compiled['backend']}, "
        f"{compiled['threads']} thread{'s' if compiled['threads'] != 1 else ''}{pinned}, {timing}"
    )


def prepare(infos: Targets, console: Console) -> None:
    """Create/fill every target so reads never hit holes; Interrupted (128 + the signal) when
    a signal stops it (what was filled is kept)."""
    if isinstance(infos, RemoteTargets):
        infos.prepare(console)
        return
    try:
        for info in infos:
            if info.will_fill:
                if info.fill_device:
                    todo, verb = info.data_length, "filling"
                else:
                    todo = info.file_data_length - info.filled_length
                    verb = "creating" if not info.exists else "filling"
                what = f"{verb} {info.path}"
                if info.grows_from is not None:
                    what = (
                        f"growing {info.path} from {format_size(info.grows_from)} to "
                        f"{format_size(info.file_data_length)} (a larger size was asked for)"
                    )
                console.print(
                    f"{what}: writing {format_size(todo)} so reads never hit holes", markup=False
                )
            targets.prepare_target(info, progress=_fill_reporter(console.is_terminal))
    except INTERRUPTS as e:
        console.print(
            "interrupted while preparing the target; the part already filled is kept and "
            "reused next time",
            markup=False,
        )
        raise Interrupted(status_of(e)) from None


Analyzer = Callable[[dict[str, Any], dict[str, Any], dict[str, Any]], None]


class RunMonitor(Protocol):
    """Watches a run's snapshots as they arrive and may end it early once its question is
    answered (a QoS decision); a run ended so is complete."""

    def add(self, snapshots: list[engine.Snapshot]) -> None: ...

    def should_stop(self) -> str | None: ...

    def messages(self) -> list[str]:
        """Progress lines to show since the last call (rounds of a steady-state run)."""
        ...


def run_plan(
    workload: plan.Workload,
    infos: Targets,
    compiled: dict[str, Any],
    *,
    results: Path,
    argv: list[str],
    console: Console,
    kind: str = "run",
    analyze: Analyzer | None = None,
    monitor: RunMonitor | None = None,
    note: str | None = None,
    label: str | None = None,
    apps: dict[int, str] | None = None,
    before_start: Callable[[Path, dict[str, Any]], None] | None = None,
    on_start: Callable[[], None] | None = None,
    live_rows: Callable[[], list[dict[str, Any]]] | None = None,
) -> RunOutcome:
    """Run a compiled plan on its prepared targets and store it.

    `monitor` sees every batch of interval snapshots as it arrives (nothing is kept here, so
    memory does not grow with the run) and may end the run early; `analyze(plan, result,
    summary)` may add to the summary before it is stored (application metrics, QoS verdicts);
    `before_start(run_dir, plan)` may put files the plan names into the run directory (a
    replay's IO lists) and set their paths in the plan before the engine starts;
    `on_start()` runs right after the engine started (a tile's file applications start there),
    `live_rows()` gives rows the live view shows after the engine's streams (their file streams).
    """
    if isinstance(infos, RemoteTargets):
        if before_start is not None:
            raise UsageError("a replayed trace runs on this host; it cannot run on a --cluster.")
        return infos.run(
            workload,
            compiled,
            results=results,
            argv=argv,
            console=console,
            kind=kind,
            analyze=analyze,
            monitor=monitor,
            note=note,
            label=label,
            apps=apps,
        )
    try:
        results.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--results {results} cannot be created: {e.strerror}.") from None
    # From here on a signal stops the run in order (the engine stops at once if it came
    # before it started): the run directory is never left half made.
    with heap.frozen(), SignalStopper() as stopper:
        telemetry = tm.Telemetry(compiled, [i.path for i in infos])
        try:
            writer = RunWriter(
                results,
                plan=compiled,
                workload=workload.to_json(),
                targets=[i.record() for i in infos],
                argv=argv,
                kind=kind,
                telemetry=telemetry.record(),
                label=label,
            )
        except OSError as e:
            raise RunError(f"cannot write results under {results}: {e.strerror or e}.") from None
        telemetry.run_id = writer.run_id
        try:
            rewrite = targetdata.begin_plan(infos, compiled, writer.path)
            if before_start is not None:
                before_start(writer.path, compiled)
                rewrite = True
            if rewrite:
                writer.rewrite()  # the plan's verification settings, a replay's IO lists
            reduction = datareduction.measure(compiled)
        except BaseException as e:
            writer.finish(None, summary=None, complete=False, error=f"{type(e).__name__}: {e}")
            raise
        served = metrics.current()
        if served is not None:
            served.run_started(writer.run_id, compiled, apps or {})
        extra = f"; {note}" if note else ""
        labelled = f" ({label})" if label else ""
        say(console, f"run {writer.run_id}{labelled}: {_describe(compiled, infos)}{extra}")
        target_notes = [note for i in infos for note in i.notes()]
        for info in infos:
            if compiled["backend"] != "null" and info.precondition_note():
                # The null backend touches no storage: its preconditioning does not matter.
                target_notes.append(str(info.precondition_note()))
        for target_note in target_notes + telemetry.notes:
            say(console, f"note: {target_note}")
        print_reduction(reduction, console)

        if not workload.keep_cache:
            for t in compiled["targets"]:
                if t["direct"]:
                    continue
                try:
                    targets.drop_cached(t["path"], t["offset"], t["length"])
                except OSError as e:
                    console.print(
                        f"note: the page cache of {t['path']} could not be dropped "
                        f"({e.strerror or e}); buffered reads may start warm",
                        markup=False,
                        soft_wrap=True,
                    )
        changes = ChangeTracker()
        lateness = Histogram()
        try:
            handle = engine.start(compiled)
        except engine.EngineError as e:
            writer.finish(None, summary=None, complete=False, error=str(e))
            raise
        stopper.attach(handle)
        if on_start is not None:
            try:
                on_start()
            except BaseException as e:
                handle.stop()
                handle.wait(30.0)
                writer.finish(None, summary=None, complete=False, error=str(e))
                raise
        with front_end_yields():  # the sampler and the live view inherit it
            telemetry.start()
            result, error, ended_by = drive(
                handle,
                writer,
                compiled,
                console,
                console.is_terminal,
                stopper,
                monitor,
                telemetry,
                changes,
                lateness,
                live_rows,
            )
        summary = summarize_run(writer, compiled, result, error, ended_by, changes, analyze)
        summary["issue_lateness"] = lateness_summary(lateness)
        summary["hosts"] = summary["cluster"] = None  # one host (cluster/hosts.py: many)
        summary["telemetry"] = tm.summarize_telemetry(summary, telemetry.totals, telemetry.devices)
        kernel = kmsg.summary(telemetry.kernel_records)
        if kernel is not None:
            summary["telemetry"]["kernel"] = kernel
        summary["tool_bound"] = tm.tool_bound(summary, summary["telemetry"]["host"])
        summary["overhead"] = tool_overhead(
            summary,
            summary["telemetry"]["host"],
            summary["telemetry"]["devices"],
            msgspec.convert(result or {}, EnginePoller).poller,
        )
        # The first target's record (none: no target); every target's is in run.json.
        pre = infos[0] if infos else None
        summary["preconditioning"] = pre and {"target": pre.path, "record": pre.preconditioning}
        data_summaries(summary, result, compiled, reduction)
        if target_notes or telemetry.notes:
            summary["notes"] = [*target_notes, *telemetry.notes, *summary.get("notes", [])]
        outcome = store_run(writer, compiled, result, summary, stopper, ended_by)
        outcome.notes_shown = tuple(target_notes + telemetry.notes)
    stuck = stuck_in_kernel(compiled, result)
    if stuck:
        say(console, f"note: {stuck}")
    return outcome


def lateness_summary(h: Histogram) -> dict[str, Any] | None:
    """run.json `summary.issue_lateness`: how long after its intended time every open-loop IO
    of the measurement was submitted (the tool's own delay, all streams merged; the engine
    keeps it per thread; frames and JSON snapshots both carry it). None without open-loop
    IOs."""
    if not h.n:
        return None
    stats = h.stats()
    return {"ios": h.n, **{f"{k}_us": v / 1e3 for k, v in stats.items() if v is not None}}


def stuck_in_kernel(compiled: dict[str, Any], result: dict[str, Any]) -> str | None:
    """What to say when the psync backend left threads waiting in the kernel for IOs the
    device never answered: the run is stored, but no process can end while one of its
    threads waits there (io_uring's requests do not hold the process)."""
    hung = int(result.get("hung_count") or len(result.get("hung") or []))
    if compiled.get("backend") != "psync" or not hung:
        return None
    return (
        f"{hung} IO thread(s) of the psync backend are stuck in the kernel on IOs the device "
        "never answered: the run is stored, but this process ends only when the device "
        "answers or fails them (kill -9 cannot end it sooner; the uring backend does not wait)"
    )


def summarize_run(
    writer: RunWriter,
    compiled: dict[str, Any],
    result: dict[str, Any] | None,
    error: str | None,
    ended_by: str | None,
    changes: ChangeTracker,
    analyze: Analyzer | None,
) -> dict[str, Any]:
    """The summary of what `drive` returned (failing the stored run on an engine error, or
    when summarizing fails, with the engine's result kept)."""
    if error is not None or result is None:
        writer.finish(None, summary=None, complete=False, error=error)
        raise engine.EngineError(str(error))
    try:
        summary = summarize(compiled, result)
        summary["change_points"] = change_points(changes, result, summary)
        if analyze is not None:
            analyze(compiled, result, summary)
    except Exception as e:
        # Keep the engine's result on disk even if summarizing it fails.
        writer.finish(result, summary=None, complete=False, error=f"summary failed: {e}")
        raise
    if ended_by is not None:
        summary["ended_by"] = ended_by
    return summary


def store_run(
    writer: RunWriter,
    compiled: dict[str, Any],
    result: dict[str, Any],
    summary: dict[str, Any],
    stopper: SignalStopper,
    ended_by: str | None,
    *,
    cut_short: str | None = None,
) -> RunOutcome:
    """Finish the run directory (its status from how the run ended and whether the storage
    failed it) and say how it went. `cut_short` is why a run that ended by itself is still
    incomplete and failed (a cluster host lost)."""
    complete = (
        (bool(result.get("complete")) or ended_by is not None)
        and stopper.signum is None
        and cut_short is None
    )
    storage_failure, storage_error = storage_verdict(result, summary)
    run_dir = writer.finish(
        result,
        summary=summary,
        complete=complete,
        error=storage_error,
        storage_failure=storage_failure,
    )
    status = str(writer.doc.get("status"))
    failed = status in ("failed", *STORAGE_FAILED)
    return RunOutcome(
        run_id=writer.run_id,
        run_dir=Path(run_dir),
        compiled=compiled,
        result=result,
        summary=summary,
        complete=status == "complete",
        exit_status=stopper.exit_status or (1 if failed or cut_short else None),
        catalog_error=writer.catalog_error,
        ended_by=ended_by,
        error=writer.doc.get("error") if failed else cut_short,
        status=status,
    )


def print_reduction(reduction: dict[str, Any] | None, console: Console) -> None:
    """The data reduction measured at run start (datareduction.py), one line per setting."""
    for setting in (reduction or {}).get("settings") or []:
        streams = setting["streams"]
        more = f" and {len(streams) - 5} more" if len(streams) > 5 else ""
        say(
            console,
            f"data: {datareduction.describe(setting)} measured on "
            f"{format_size(setting['sample_bytes'])} as "
            f"{'stream' if len(streams) == 1 else 'streams'} {', '.join(streams[:5])}{more} "
            f"{'writes' if len(streams) == 1 else 'write'} it",
        )


def data_summaries(
    summary: dict[str, Any],
    result: dict[str, Any],
    compiled: dict[str, Any],
    reduction: dict[str, Any] | None,
) -> None:
    """summary.verification (what verified reads found) and summary.data_reduction."""
    summary["verification"] = verification.run_summary(result, compiled)
    summary["data_reduction"] = (
        None
        if reduction is None
        else {**reduction, "overall": datareduction.overall(reduction, summary)}
    )


def change_points(
    changes: ChangeTracker, result: dict[str, Any], summary: dict[str, Any]
) -> list[dict[str, Any]] | None:
    """The run's change points; a failure to find them is a note, never a lost run."""
    try:
        return changes.detect(result.get("started_at_ns"))
    except Exception as e:
        summary.setdefault("notes", []).append(f"change points could not be computed: {e}")
        return None


def storage_verdict(
    result: dict[str, Any], summary: dict[str, Any]
) -> tuple[str | None, str | None]:
    """Whether the storage under test failed the run: ("hung", why) when an IO never
    completed, ("data-errors", why) when verification found data it should not hold,
    ("errors", why) when IOs failed, else (None, None). Failing storage fails the
    run, like Jetstress, where one error fails the test."""
    hung = result.get("hung") or []
    if result.get("stop_reason") == "hung" or hung:
        first = hung[0] if hung else {}
        shown = ""
        if first:
            names = summary.get("streams") or []
            stream = first.get("stream")
            name = (
                names[stream]["name"] if isinstance(stream, int) and stream < len(names) else stream
            )
            shown = (
                f": stream {name} {first.get('op', 'IO')} at offset {first.get('offset')} "
                f"outstanding {first.get('age_ns', 0) / 1e9:.1f} s"
            )
        more = f" (+{len(hung) - 1} more)" if len(hung) > 1 else ""
        why = f"{max(len(hung), 1)} IO(s) never completed{shown}{more}"
        return "hung", why + kernel_said(summary)
    data = verification.verdict(summary)
    if data is not None:
        return "data-errors", data
    skipped = replay_failure(summary.get("replay"))
    if skipped is not None:
        # Not the storage's failure: the run could not do what it had to (stored "failed").
        return None, skipped
    total = summary.get("total") or {}
    if total.get("errors"):
        named = errors_text(total.get("errors_by_name") or {})
        why = f"{total['errors']:,} IOs failed ({named})"
        if result.get("stop_reason") == "errors":
            why += "; the run stopped when they exceeded --max-errors"
        return "errors", why + kernel_said(summary)
    return None, None


def kernel_said(summary: dict[str, Any]) -> str:
    """What the kernel logged about the run's devices, for a storage failure's sentence: how
    many messages, and the first (run.json keeps the first KEEP: summary.telemetry.kernel)."""
    # one host's run: summary.telemetry; a cluster's: each host's (summary.hosts[].telemetry)
    places = [("", summary.get("telemetry"))] + [
        (f"{h['name']}: ", h.get("telemetry")) for h in summary.get("hosts") or []
    ]
    n, first = 0, ""
    for where, telemetry in places:
        kernel = kernel_messages(telemetry)
        if kernel is not None and kernel.messages:
            n += kernel.count
            first = first or where + excerpt(kernel.messages[0].message, 160)
    if not n:
        return ""
    return f"; the kernel logged {n:,} message(s) about its devices, the first: {first}"


class Polled(NamedTuple):
    """One poll's intervals as each consumer reads them: `live` the live view's group
    aggregates (every stream on the JSON path), `streams` every stream (the monitors, the
    metrics endpoint), `targets` per target with each group's `targets` part (a run over
    several targets on the frames path; None otherwise: the live view splits `live`)."""

    live: list[dict[str, Any]]
    streams: list[dict[str, Any]]
    targets: list[dict[str, Any]] | None


def frames_describe(compiled: dict[str, Any], per_stream: bool) -> bool:
    """Whether the frames' aggregates give every consumer what the JSON snapshots gave: not
    when a stream spreads over several targets of a run over several (its per-target parts
    are not aggregated), nor, when a consumer reads every stream, for replayed streams (their
    discards and replay counters) or streams with an ioprio_share (their share's counters),
    which a group leaves out. Nor for a plan without streams (a tile of file applications
    only): its frames have no rows, and the interval log keeps the JSON path's empty form."""
    streams = compiled.get("streams") or []
    if not streams:
        return False
    if len(compiled.get("targets") or []) > 1 and any(
        len(set(pertarget.stream_targets(s))) > 1 for s in streams
    ):
        return False
    return not (per_stream and any(s.get("ios") or s.get("ioprio_share") for s in streams))


def frame_sets(compiled: dict[str, Any], per_stream: bool) -> dict[str, list[int]]:
    """The further group sets a run's consumers need (engine.Handle.set_group_sets), by name:
    "streams", a group per plan stream (the monitors and metrics endpoint read every stream),
    and "targets", a group per target (the per-target log and live rows of a run over several
    targets; each stream on one, frames_describe)."""
    streams = compiled.get("streams") or []
    sets: dict[str, list[int]] = {}
    if per_stream:
        sets["streams"] = list(range(len(streams)))
    if len(compiled.get("targets") or []) > 1:
        sets["targets"] = [pertarget.stream_targets(s)[0] for s in streams]
    return sets


def target_snapshot(snap: dict[str, Any]) -> dict[str, Any]:
    """A per-target set's snapshot as pertarget reads a stream over several targets: each
    group's counters also as its one `targets` part."""
    for group in snap["streams"]:
        group["targets"] = [{"target": group["stream"], **group}]
    return snap


def drive(
    handle: engine.Handle | Any,
    writer: RunWriter,
    compiled: dict[str, Any],
    console: Console,
    tty: bool,
    stopper: SignalStopper,
    monitor: RunMonitor | None = None,
    telemetry: tm.Telemetry | None = None,
    changes: ChangeTracker | None = None,
    lateness: Histogram | None = None,
    live_rows: Callable[[], list[dict[str, Any]]] | None = None,
) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """Poll the engine until it ends, storing and showing snapshots;
    (result, engine error, why the monitor ended it)."""
    noted = 0
    ended_by: str | None = None
    store_stopped = False

    served = metrics.current()
    getattr(monitor, "attach", lambda *_: None)(handle, compiled)  # run/fio_groups.py

    def sample(snapshots: list[dict[str, Any]], final: bool = False) -> None:
        if telemetry is not None:
            writer.add_telemetry(*telemetry.rows(snapshots, final=final))
            display.telemetry(telemetry.live_line())
            if served is not None and telemetry.latest is not None:
                served.observe_telemetry(telemetry.latest["devices"], telemetry.latest["host"])

    # The engine builds the interval rows and the per-group aggregates itself (issue 25), and
    # the aggregates each other consumer reads (`frame_sets`): the QoS and steady-state
    # monitors and the metrics endpoint per stream, a run over several targets per target.
    # JSON snapshots remain for a handle without frames (a cluster's, tests' fakes) and the
    # plans whose streams the aggregates do not describe fully (`frames_describe`).
    # TILEMARK_ENGINE_SNAPSHOTS=json forces the JSON snapshots (bench/streams.py measures both,
    # tests/test_frames_consumers.py checks both paths store and decide the same).
    per_stream = monitor is not None or served is not None
    frames = (
        os.environ.get("TILEMARK_ENGINE_SNAPSHOTS") != "json"
        and hasattr(handle, "poll_frames")
        and hasattr(handle, "set_group_sets")
        and frames_describe(compiled, per_stream)
    )
    stream_set, target_set = None, None

    def poll() -> Polled:
        if not frames:
            snapshots = handle.poll()
            if lateness is not None:
                for snap in snapshots:
                    if snap.get("phase") == "measure" and snap.get("lateness"):
                        lateness.merge(Histogram.from_json(snap["lateness"]))
            return Polled(snapshots, snapshots, None)
        batch = handle.poll_frames()
        per_target = None
        if target_set is not None:
            per_target = [target_snapshot(f.set_snapshot(target_set)) for f in batch]
        writer.add_frames(batch, per_target)
        if lateness is not None:
            for frame in batch:
                if frame.phase == "measure":
                    lateness.merge(Histogram.from_json(frame.groups.get("lateness")))
        live = [frame.groups for frame in batch]
        streams = live if stream_set is None else [per_stream_of(f) for f in batch]
        return Polled(live, streams, per_target)

    def per_stream_of(frame: engine.Frame) -> Any:
        if frame.batch is None:
            return frame.set_snapshot(stream_set)
        return WindowFeed(frame.start_ns, frame.end_ns, frame.batch, frame.window_snapshot())

    def take(polled: Polled) -> None:
        nonlocal ended_by
        if not frames:
            writer.add_snapshots(polled.live)
        if served is not None:
            served.observe(polled.streams)
        sample(polled.live)
        display.update(polled.live, targets=polled.targets)
        if changes is not None:
            changes.add(polled.live)
        if monitor is not None:
            monitor.add(polled.streams)
            for line in monitor.messages():
                display.note(line)
            if ended_by is None and stopper.signum is None:
                ended_by = monitor.should_stop()
                if ended_by is not None:
                    display.note(ENDED_BY.get(ended_by, f"stopping: {ended_by}"))
                    handle.stop()

    try:
        with LiveDisplay(compiled, console, tty=tty, extra=live_rows) as display:
            if frames:
                group_of, group_plan = stream_groups(compiled)
                handle.set_groups(group_of)
                sets = frame_sets(compiled, per_stream)
                handle.set_group_sets(list(sets.values()))
                stream_set = list(sets).index("streams") if "streams" in sets else None
                target_set = list(sets).index("targets") if "targets" in sets else None
                window_engine = getattr(monitor, "window_engine", None)
                if (
                    stream_set is not None
                    and served is None
                    and window_engine is not None
                    and hasattr(handle, "set_window")
                ):
                    # The QoS monitor is the only reader per stream: the engine merges its
                    # windows, instead of a document per stream per interval (issue 25).
                    handle.set_window(stream_set, window_engine(handle.window_snapshot))
                display.show_groups(group_plan)
            while True:
                finished = handle.wait(POLL_S)
                polled = poll()
                if polled.live:
                    take(polled)
                if writer.failure is not None and not store_stopped:
                    # Measuring on without storing would lose what follows: stop now.
                    store_stopped = True
                    handle.stop()
                    display.note(f"stopping: {writer.failure}")
                if stopper.count > noted:
                    display.note(
                        "stopping: finishing in-flight IOs, the results so far are kept"
                        if noted == 0
                        else "already stopping; the results so far are kept"
                    )
                    noted = stopper.count
                if finished:
                    break
            if telemetry is not None:
                telemetry.stop()
            # Snapshots published while the run ended.
            polled = poll()
            if polled.live:
                take(polled)
            sample([], final=True)
        if served is not None:
            served.run_ended()
        return handle.result(), None, ended_by
    except engine.EngineError as e:
        if telemetry is not None:
            telemetry.stop()
        return None, str(e), None
    except BaseException as e:
        # Whatever went wrong on our side, stop the IO and keep what was measured.
        handle.stop()
        handle.wait(30.0)
        if telemetry is not None:
            telemetry.stop()
        try:
            polled = poll()
            if not frames:
                writer.add_snapshots(polled.live)
            if telemetry is not None:
                writer.add_telemetry(*telemetry.rows(polled.live, final=True))
        finally:
            writer.finish(None, summary=None, complete=False, error=f"{type(e).__name__}: {e}")
        raise
