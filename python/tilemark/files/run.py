"""Running a file workload: prepare its sets, hand the engine a file plan, sum up what every
operation did (docs/files.md)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilemark.errors import RunError, UsageError
from tilemark.files.fileset import PreparedSet, prepare_fileset
from tilemark.files.spec import OPS, FileWorkload
from tilemark.interrupts import SignalStopper

POLL_S = 0.2


@dataclass(frozen=True)
class OpSummary:
    """One operation of one stream over the run."""

    op: str
    ops: int
    bytes: int
    skipped: int
    errors: dict[str, int]  # errno name -> count
    rate: float  # ops/s over the run
    mean_us: float | None
    p50_us: float | None
    p99_us: float | None
    p999_us: float | None
    max_us: float | None


@dataclass(frozen=True)
class StreamSummary:
    name: str
    fileset: str
    ops: tuple[OpSummary, ...]
    loops: int  # whole sequence loops (a mix: 0)
    loop_rate: float
    loop_p99_us: float | None
    unit: str = "loops"  # what a loop is: messages/s, pages/s are loop rates

    def op(self, name: str) -> OpSummary:
        return next(o for o in self.ops if o.op == name)


@dataclass(frozen=True)
class FilesetState:
    """A set as the run left it (the engine's count, to compare with the disk)."""

    name: str
    path: str
    files: int
    bytes: int
    dirs: int = 0  # directory entries (mkdir, or a set of kind "dirs")


@dataclass(frozen=True)
class FileRunResult:
    workload: str
    status: str  # "complete" | "errors" | "hung" | "interrupted"
    error: str | None
    seconds: float
    prepared: tuple[PreparedSet, ...]
    streams: tuple[StreamSummary, ...]
    filesets: tuple[FilesetState, ...]
    intervals: tuple[dict[str, Any], ...]
    exit_status: int | None = None  # interrupted: 128 + the signal
    qos: tuple[Any, ...] = ()  # qos.QosVerdict, in the workload's order
    devices: tuple[Any, ...] = ()  # devices.DeviceView: the block devices under the sets
    plan: dict[str, Any] | None = None  # the engine's file plan that ran (file_plan)
    filesystems: tuple[Any, ...] = ()  # fsstats.FsView: the file systems' own figures

    @property
    def qos_passed(self) -> bool | None:
        """True when every criterion passed, None when the workload has none."""
        return all(v.passed for v in self.qos) if self.qos else None

    def to_json(self) -> dict[str, Any]:
        """The result as plain data (--json)."""
        from dataclasses import asdict

        return {
            "tilemark_file_run": 1,  # first: --json replaces its own files (outputs.starts_with)
            "workload": self.workload,
            "status": self.status,
            "error": self.error,
            "seconds": self.seconds,
            "prepared": [
                {
                    "fileset": p.spec.name,
                    "path": p.spec.path,
                    "files": p.files,
                    "bytes": p.bytes,
                    "reused": p.reused,
                    "created": p.created,
                    "rewritten": p.rewritten,
                    "removed": p.removed,
                    "seconds": round(p.seconds, 3),
                }
                for p in self.prepared
            ],
            "streams": [asdict(s) for s in self.streams],
            "filesets": [asdict(f) for f in self.filesets],
            "qos": [asdict(v) for v in self.qos],
            "qos_passed": self.qos_passed,
            "devices": [asdict(d) for d in self.devices],
            "filesystems": [asdict(f) for f in self.filesystems],
            "intervals": list(self.intervals),
        }


def errno_name(code: str) -> str:
    import errno

    try:
        return errno.errorcode.get(int(code), f"errno {code}")
    except ValueError:
        return code


def file_plan(w: FileWorkload, sets: list[PreparedSet]) -> dict[str, Any]:
    """The engine's file plan (crates/engine/src/files/mod.rs)."""
    from tilemark.engine import _engine

    index = {p.spec.name: k for k, p in enumerate(sets)}
    return {
        "plan_version": _engine.FILE_PLAN_VERSION,
        "backend": w.backend,
        "interval_ms": max(1, round(w.interval_s * 1000)),
        "duration_ms": max(1, round(w.duration_s * 1000)),
        "max_errors": w.max_errors,
        "filesets": [
            {
                "name": p.spec.name,
                "root": p.spec.path,
                "dirs": list(p.dirs),
                "entries": [list(e) for e in p.entries],
                "entry_kind": p.spec.kind,
            }
            for p in sets
        ],
        "streams": [
            {
                "name": s.name,
                "fileset": index[s.fileset],
                "ops": [list(o) for o in s.ops],
                "sequence": s.sequence,
                "select": _select_plan(s.select),
                "threads": s.threads,
                "arrival": {"kind": "closed"}
                if s.rate is None
                else {"kind": "open", "rate": s.rate, "poisson": s.poisson},
                "read_size": s.read,
                "append_size": s.append,
                "truncate_size": s.truncate,
                "io_size": s.io_size,
                "openfiles": s.openfiles,
                "seed": s.seed,
                "limit": s.limit,
            }
            for s in w.streams
        ],
    }


def lock_sets(w: FileWorkload) -> contextlib.ExitStack:
    """`with lock_sets(w):` holds every set of the workload, as block targets are held
    (tilemark.targets.lock): two tilemark processes never prepare or run one set at once."""
    import sys

    from tilemark.targets.header import TargetInfo
    from tilemark.targets.lock import lock_target

    stack = contextlib.ExitStack()
    try:
        for f in w.filesets:
            info = TargetInfo(f.path, "file", 0, 0, False, 0, False, name=f.name)
            stack.enter_context(lock_target(info, list(sys.argv)))
    except BaseException:
        stack.close()
        raise
    return stack


def prepare_all(
    w: FileWorkload, progress: Callable[[str, int, int], None] | None = None
) -> list[PreparedSet]:
    """Prepare every set of the workload (safety checks first, one sentence each)."""
    out = []
    for f in w.filesets:
        writes = any(s.writes for s in w.streams if s.fileset == f.name)
        cb = (lambda done, total, n=f.name: progress(n, done, total)) if progress else None
        out.append(prepare_fileset(f, writes=writes, progress=cb))
    return out


def stream_summary(spec: Any, totals: dict[str, Any], seconds: float) -> StreamSummary:
    """A stream's operations, and its sequence's loops (its unit) with their rate and p99,
    from the engine's per-stream totals over `seconds` (a whole run or a tile's window)."""
    from tilemark.hist import latency_hist

    loops = totals.get("loops") or {"ops": 0}
    p99 = latency_hist(totals["loops"]).percentile(99) if totals.get("loops") else None
    return StreamSummary(
        spec.name,
        spec.fileset,
        tuple(_summarize(totals, seconds, spec.sequence)),
        loops["ops"],
        loops["ops"] / seconds if seconds > 0 else 0.0,
        None if p99 is None else p99 / 1e3,
        spec.unit,
    )


def _summarize(doc: dict[str, Any], seconds: float, sequence: bool) -> list[OpSummary]:
    from tilemark.hist import latency_hist

    out = []
    for op in OPS:
        o = doc["ops"][op]
        h = latency_hist(o)
        us = lambda v: None if v is None else v / 1000.0  # noqa: E731
        out.append(
            OpSummary(
                op=op,
                ops=o["ops"],
                bytes=o["bytes"],
                skipped=doc["skipped"][op],
                errors={errno_name(k): v for k, v in o["errors"].items()},
                rate=o["ops"] / seconds if seconds > 0 else 0.0,
                mean_us=us(h.mean()),
                p50_us=us(h.percentile(50)),
                p99_us=us(h.percentile(99)),
                p999_us=us(h.percentile(99.9)),
                max_us=us(float(h.max) if h.n else None),
            )
        )
    return out


def run_file_workload(
    w: FileWorkload,
    *,
    progress: Callable[[str, int, int], None] | None = None,
    on_interval: Callable[[dict[str, Any]], None] | None = None,
) -> FileRunResult:
    """Prepare the sets, run the streams for the workload's duration, return what happened.
    SIGINT/SIGTERM stop the run in order: what ran is returned as interrupted (with its
    exit_status)."""
    with lock_sets(w):
        return _prepare_and_run(w, progress, on_interval)


def _prepare_and_run(
    w: FileWorkload,
    progress: Callable[[str, int, int], None] | None,
    on_interval: Callable[[dict[str, Any]], None] | None,
) -> FileRunResult:
    from tilemark import _engine
    from tilemark.files import fsstats
    from tilemark.files.devices import device_views, devices_of, read_stats

    sets = prepare_all(w, progress)
    plan = file_plan(w, sets)
    devs = devices_of([(p.spec.name, p.spec.path) for p in sets])
    mounts = fsstats.mounts_of([(p.spec.name, p.spec.path) for p in sets])
    fs_before = fsstats.read_all(mounts)
    before = read_stats(set(devs))
    try:
        run = _engine.start_files(json.dumps(plan))
    except _engine.EngineError as e:
        raise RunError(f"the file workload could not start: {e}.") from None
    intervals: list[dict[str, Any]] = []
    # A stop scope (tilemark.interrupts): SIGINT/SIGTERM stop the engine in order and the
    # measured intervals are kept, as for block runs.
    with SignalStopper() as stopper:
        stopper.attach(run)
        while not run.wait(POLL_S):
            for snap in json.loads(run.poll()):
                intervals.append(snap)
                if on_interval:
                    on_interval(snap)
        for snap in json.loads(run.poll()):
            intervals.append(snap)
            if on_interval:
                on_interval(snap)
        try:
            doc = json.loads(run.result())
        except _engine.EngineError as e:
            raise RunError(f"the file workload failed: {e}.") from None
    seconds = doc["elapsed_ns"] / 1e9
    devices = device_views(devs, before, read_stats(set(devs)), seconds)
    filesystems = fsstats.fs_views(mounts, fs_before, fsstats.read_all(mounts), seconds)
    streams = [
        stream_summary(spec, s, seconds) for spec, s in zip(w.streams, doc["streams"], strict=True)
    ]
    error = doc.get("error")
    if error:
        # errno numbers -> names, as the rest of tilemark says them.
        import re

        error = re.sub(r"errno (\d+)", lambda m: errno_name(m.group(1)), error)
    if doc.get("stop_reason") == "hung":
        status = "hung"
    else:
        status = "errors" if error else "interrupted" if stopper.signum else "complete"
    filesets = tuple(
        FilesetState(p.spec.name, p.spec.path, f["files"], f["bytes"], f.get("dirs", 0))
        for p, f in zip(sets, doc["filesets"], strict=True)
    )
    verdicts = judge_qos(w, doc["streams"], seconds, intervals)
    return FileRunResult(
        w.name, status, error, seconds, tuple(sets), tuple(streams), filesets,
        tuple(intervals), stopper.exit_status, verdicts, devices, plan, filesystems,
    )  # fmt: skip


def judge_qos(
    workload: Any, totals: list[dict[str, Any]], seconds: float, intervals: Any
) -> tuple[Any, ...]:
    """A file run's criteria over its totals (engine OpCounters per stream), each decided with
    the 95% interval of its intervals' batches as in a tile run (verdict), in the criterion's
    own unit (ms, or per second)."""
    from tilemark.files.qos import QosVerdict, verdict
    from tilemark.files.window import window_totals

    window = window_totals(intervals, len(workload.streams))
    index = {s.name: k for k, s in enumerate(workload.streams)}
    out = []
    for q in workload.qos:
        k, t = index[q.stream], totals[index[q.stream]]
        doc = t.get("loops") if q.op == "loop" else t["ops"][q.op]
        v = verdict(q, doc, seconds, window.batches.series([(k, q.op)]),
                    window.batches.series([("rate", k, q.op)]))  # fmt: skip
        unit = q.limit if q.stat == "rate" else 1.0  # a rate's verdict is a share of it
        value, low, high = (None if x is None else x * unit for x in (v.value, v.ci_low, v.ci_high))
        out.append(QosVerdict(q.name, q.describe(), value, v.passed, v.decision, low, high))
    return tuple(out)


def _select_plan(select: tuple[Any, ...]) -> dict[str, Any]:
    """A stream's selection as the engine's plan names it."""
    if select[0] == "zipf":
        return {"kind": "zipf", "theta": select[1]}
    if select[0] == "hot":
        return {"kind": "hot", "share": select[1], "prob": select[2]}
    return {"kind": select[0]}


BUILTIN = ("varmail", "webserver", "fileserver", "build")


def builtin_path(name: str) -> Path:
    """The TOML file of a built-in file workload."""
    return Path(__file__).with_name("profiles") / f"{name}.toml"


def load_file_workload(
    path: str, directory: str | None = None, notes: list[str] | None = None
) -> FileWorkload:
    """A file workload from a TOML file or a built-in name (varmail, webserver, fileserver, build);
    with `directory`, every set lives in DIRECTORY/<set name> instead of its own path. A fio
    job file (*.fio, *.job) of file and directory engine jobs is translated
    (tilemark.fio.fileengines); what differs from fio is appended to `notes`."""
    from tilemark.files.spec import parse_file_workload, parse_fileset_path
    from tilemark.fio.fileengines import translate_file_jobs
    from tilemark.workload.tomlfile import load_toml

    source = builtin_path(path) if path in BUILTIN and not Path(path).exists() else Path(path)
    if path.endswith((".fio", ".job")):
        doc, fio_notes = translate_file_jobs(path)
        if notes is not None:
            notes.extend(fio_notes)
    else:
        doc = load_toml(source)
    if "fileset" not in doc:
        raise UsageError(
            f"workload file {path} has no [[fileset]] table; name a file workload or one of "
            f"{', '.join(BUILTIN)} (docs/files.md)."
        )
    if directory is not None:
        base = parse_fileset_path(directory, "--dir")
        if not os.path.isdir(base):
            raise UsageError(f"--dir {directory} is not a directory; name one that exists.")
        for t in doc["fileset"] if isinstance(doc["fileset"], list) else []:
            if isinstance(t, dict) and isinstance(t.get("name"), str):
                t["path"] = os.path.join(base, t["name"])
    return parse_file_workload(doc, f"workload file {path}")
