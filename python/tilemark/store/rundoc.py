"""Reading run directories: run.json (migrated to this schema), the files holding a run's
intervals, and a run's real status (running, complete, incomplete, failed, killed, damaged).

The writing side is rundir.py (RunWriter); the catalog (catalog.py) indexes what this module
reads, so neither the catalog nor readers depend on the writer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tilemark
from tilemark.errors import UsageError, excerpt
from tilemark.heap import no_gc
from tilemark.store import process, results
from tilemark.store.layout import SCHEMA_VERSION, atomic_file

if TYPE_CHECKING:  # the readers of interval data (pyarrow) load when data is read
    import pyarrow as pa

    from tilemark.store.intervals import IntervalSource

RUN_JSON = "run.json"

# Upgrades of run.json documents: MIGRATIONS[v] turns a version-v document into version v+1.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    # 2 records the writing process (pid, boot id) to tell killed runs from running ones.
    1: lambda doc: {**doc, "process": None},
    # 3 records the devices under the targets and the host's telemetry (telemetry.py).
    2: lambda doc: {
        **doc,
        "telemetry": None,
        "summary": None
        if doc.get("summary") is None
        else {"telemetry": None, "tool_bound": None, **doc["summary"]},
    },
    # 4 breaks results down per target and gives streams phases (pertarget.py), adds data
    # verification and reduction (summary.verification, summary.data_reduction, verify_passes
    # from tilemark verify, the status data-errors), and records cluster runs: each host's
    # part (`hosts`, summary.hosts, summary.cluster; null for a run on one host).
    3: lambda doc: _cluster_v4(_verify_v4(_per_target_v4(doc))),
}


def _verify_v4(doc: dict[str, Any]) -> dict[str, Any]:
    return {
        **doc,
        "verify_passes": doc.get("verify_passes") or [],
        "summary": None
        if doc.get("summary") is None
        else {"verification": None, "data_reduction": None, **doc["summary"]},
    }


def _cluster_v4(doc: dict[str, Any]) -> dict[str, Any]:
    """4 records a cluster run's hosts (cluster/); an older run ran on one host."""
    return {
        **doc,
        "hosts": None,
        "summary": None
        if doc.get("summary") is None
        else {"hosts": None, "cluster": None, **doc["summary"]},
    }


def _per_target_v4(doc: dict[str, Any]) -> dict[str, Any]:
    """4 breaks results down per target (many targets per run) and rates phased streams over
    their active time. A run of an older tilemark had one target and no phases: its one
    target's figures are its totals (latency per target was not kept: null), and every stream
    was active for the whole measurement."""
    summary = doc.get("summary")
    targets = [{"name": None, **t} if isinstance(t, dict) else t for t in doc.get("targets") or []]
    doc = {**doc, "targets": targets}
    if summary is None:
        return doc
    total = summary.get("total") or {}
    first = (doc.get("plan") or {}).get("targets") or [{}]
    path = first[0].get("path") or (targets[0].get("path") if targets else None)
    duration = summary.get("duration_s")
    streams = [
        {"targets": [path], "start_s": None, "stop_s": None, "active_s": duration, **s}
        for s in summary.get("streams") or []
    ]
    none = dict.fromkeys(("mean_ms", "p50_ms", "p99_ms", "p999_ms", "max_ms"))
    per_target = [
        {
            "target": 0,
            "name": path,
            "path": path,
            "streams": [s.get("name") for s in streams],
            **{k: total.get(k) for k in ("iops", "mbps", "read_iops", "write_iops")},
            **{k: total.get(k) for k in ("read_mbps", "write_mbps")},
            "errors": total.get("errors"),
            "read_latency": dict(none),
            "write_latency": dict(none),
        }
    ]
    return {**doc, "summary": {"targets": per_target, **summary, "streams": streams}}


class StoreError(Exception):
    """A results-store problem, stated in one sentence for the user."""


class RunNotFoundError(StoreError):
    """No run matches the given directory or run id."""


class RunFormatError(StoreError, UsageError):
    """A run.json that this tilemark cannot read (not JSON, unknown or missing
    schema_version, fields of the wrong type): the run is `damaged`; a command given it says
    so in one sentence (exit 2)."""


class IntervalsError(StoreError):
    """A run's interval file cannot be read (truncated, corrupt, or from a newer tilemark)."""


def utc_now_iso() -> str:
    """Current UTC time as ISO 8601 with milliseconds and a Z suffix."""
    return iso_utc(datetime.now(UTC))


def iso_utc(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def dumps_indented(doc: Any) -> str:
    """`json.dumps(doc, indent=2)`, the same text, made by the C encoder and msgspec's
    formatter: the stdlib's indenting encoder is pure Python, and a run.json of 10,000 streams
    (103 MB) took it 11 s against 1.5 s this way (issue 25). A document the formatter cannot
    read (NaN or Infinity, which json writes but JSON has not) takes the stdlib's path."""
    import msgspec

    compact = json.dumps(doc, separators=(",", ":"))
    try:
        return msgspec.json.format(compact, indent=2)
    except msgspec.DecodeError:
        return json.dumps(doc, indent=2)


def write_json_atomic(path: Path, doc: dict[str, Any], *, compact: bool = False) -> None:
    """Write JSON to `path` so readers see the old or the new file, never a torn one; on
    failure the temporary file is removed and the old file is left as it was. Indented for
    people to read, or `compact` (a quarter of the size) when space is short."""
    with atomic_file(path, "w") as f:
        if compact:
            json.dump(doc, f, separators=(",", ":"))
        else:
            f.write(dumps_indented(doc))
        f.write("\n")


def migrate(doc: dict[str, Any], source: str) -> dict[str, Any]:
    """Bring a run.json document to SCHEMA_VERSION, or refuse it with a clear error."""
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise RunFormatError(f"{source} has no integer schema_version; it is not a tilemark run")
    if version > SCHEMA_VERSION:
        raise RunFormatError(
            f"{source} has schema_version {version}, newer than tilemark "
            f"{tilemark.__version__} reads (up to {SCHEMA_VERSION}); upgrade tilemark to read it"
        )
    while version < SCHEMA_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:
            raise RunFormatError(
                f"{source} has schema_version {version}, which tilemark "
                f"{tilemark.__version__} cannot migrate to {SCHEMA_VERSION}"
            )
        doc = step(doc)
        version += 1
        doc["schema_version"] = version
    return doc


def resolve_run_dir(path_or_id: str | Path, results_root: Path | None = None) -> Path:
    """Run directory for a directory, a run.json path, a run id or a unique run id prefix."""
    given = Path(path_or_id)
    if given.name == RUN_JSON and given.is_file():
        return given.parent
    if (given / RUN_JSON).is_file():
        return given
    root = Path(results_root) if results_root is not None else Path("tilemark-results")
    candidate = root / str(path_or_id)
    if (candidate / RUN_JSON).is_file():
        return candidate
    prefix = str(path_or_id)
    matches = (
        sorted(p for p in root.iterdir() if p.name.startswith(prefix) and (p / RUN_JSON).is_file())
        if root.is_dir() and prefix and "/" not in prefix
        else []
    )
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        names = ", ".join(p.name for p in matches[:5])
        raise RunNotFoundError(f"run id {prefix!r} is ambiguous under {root}: {names}")
    raise RunNotFoundError(
        f"no run {str(path_or_id)!r}: not a run directory nor a run id under {root}"
    )


def read_run_json(run_dir: Path) -> dict[str, Any]:
    """The run.json of a run directory, migrated to the current schema."""
    source = Path(run_dir) / RUN_JSON
    try:
        text = source.read_text(encoding="utf-8")
        # No cyclic GC while parsing: see engine._loads (run.json of 10,000 streams).
        with no_gc():
            doc = json.loads(text)
    except FileNotFoundError as exc:
        raise RunNotFoundError(f"{source} does not exist") from exc
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise RunFormatError(f"{source} cannot be read as JSON: {excerpt(str(exc), 200)}") from exc
    if not isinstance(doc, dict):
        raise RunFormatError(f"{source} is not a JSON object; it is not a tilemark run")
    current = doc.get("schema_version") == SCHEMA_VERSION
    doc = migrate(doc, str(source))
    # A current document is checked from its text: msgspec decoding the JSON against the types
    # is several times faster than converting the parsed dicts (a 103 MB run.json of 10,000
    # streams). Text msgspec cannot read (NaN, which json writes) is checked as parsed.
    wrong = results.run_problem(text) if current else "not JSON"
    if wrong is not None and wrong.startswith("not JSON"):
        wrong = results.run_problem(doc)
    if wrong is not None:
        raise RunFormatError(f"{source} cannot be read: its {wrong}")
    return doc


def load_run(path_or_id: str | Path, results_root: Path | None = None) -> dict[str, Any]:
    """The run.json document of a run given by directory or run id, migrated to this schema."""
    return read_run_json(resolve_run_dir(path_or_id, results_root))


def interval_files(run_dir: Path) -> list[Path]:
    """The files holding a run's intervals: intervals.parquet, the log of a run that did not
    finish, or an older tilemark's Parquet parts. A file from a newer schema, or one that
    cannot be read at all, is refused (IntervalsError), never reinterpreted."""
    from tilemark.store.intervals import interval_source

    source = interval_source(run_dir)
    if source.problem is not None:
        raise IntervalsError(f"{Path(run_dir).name}: {source.problem}")
    return source.files


def read_intervals(run_dir: Path, columns: list[str] | None = None) -> pa.Table:
    """Interval rows of a run as one table, from whichever files hold them; IntervalsError
    when none can be read."""
    from tilemark.store.intervals import IntervalsUnreadable, interval_source, read_source

    source = interval_source(run_dir)
    try:
        return read_source(source, columns)
    except IntervalsUnreadable as exc:
        raise IntervalsError(f"{Path(run_dir).name}: {exc}") from exc


# ---------------------------------------------------------------------------------------------
# what a run directory says, as listings and reports show it

STATUSES = (
    "running",
    "complete",
    "incomplete",
    "errors",
    "hung",
    "data-errors",
    "failed",
    "killed",
    "damaged",
)
# Statuses in which the storage under test failed the run (exit status 1).
STORAGE_FAILED = ("errors", "hung", "data-errors")
# A run of an older tilemark (no process record) still "running" this long after its planned
# end was killed: no run outlives its plan by an hour.
UNRECORDED_GRACE = timedelta(hours=1)


@dataclass
class RunState:
    """A run directory as readers see it: run.json (None when unreadable), the status to show,
    and why it is not what run.json says (`problem`).

    status adds two to the ones run.json stores: `killed` (run.json says running but its
    process is gone) and `damaged` (run.json or the intervals cannot be read).
    """

    run_dir: Path
    doc: dict[str, Any] | None
    status: str
    problem: str | None
    intervals: IntervalSource

    @property
    def run_id(self) -> str:
        return str((self.doc or {}).get("run_id") or self.run_dir.name)


def inspect_run(run_dir: Path, doc: dict[str, Any] | None = None) -> RunState:
    """Read a run directory without changing it: its run.json, intervals and real status.
    `doc`: the run.json document as its writer just wrote it, which is not read back (a run of
    10,000 streams writes 100 MB of it: reading and checking it again took 3 s)."""
    from tilemark.store.intervals import interval_source

    run_dir = Path(run_dir)
    intervals = interval_source(run_dir)
    if doc is None:
        try:
            doc = read_run_json(run_dir)
        except StoreError as exc:
            return RunState(run_dir, None, "damaged", str(exc), intervals)
    status = str(doc.get("status") or "running")
    problem = doc.get("error") if status in ("failed", *STORAGE_FAILED) else None
    if status == "running":
        gone = _gone_reason(doc)
        if gone is not None:
            status, problem = "killed", f"the run never finished: {gone}"
    if intervals.problem is not None:
        problem = intervals.problem + (f" (run.json says {status})" if status else "")
        status = "damaged"
    else:
        gone = missing_files(run_dir, doc, intervals)
        if gone:
            verb = "is" if len(gone) == 1 else "are"
            problem = f"{', '.join(gone)} {verb} missing (run.json says {status})"
            status = "damaged"
    return RunState(run_dir, doc, status, problem, intervals)


# run.json `files` keys naming the data files a run writes; each is an Arrow log (.arrows)
# while the run is under way, sealed into its Parquet file when it ends.
DATA_FILE_KEYS = ("intervals", "targets", "devices", "host")


def missing_files(run_dir: Path, doc: dict[str, Any], intervals: IntervalSource) -> list[str]:
    """The data files run.json names that are gone (deleted or lost outside tilemark): neither
    the sealed file nor its log is there. A run writes every one of them from its start."""
    files = doc.get("files") or {}
    gone = []
    for key in DATA_FILE_KEYS:
        name = files.get(key)
        if not name:
            continue
        if key == "intervals":
            present = intervals.kind != "none"
        else:
            log = Path(name).with_suffix(".arrows").name
            present = (run_dir / name).is_file() or (run_dir / log).is_file()
        if not present:
            gone.append(str(name))
    return gone


def _gone_reason(doc: dict[str, Any]) -> str | None:
    record = doc.get("process")
    if record is not None:
        return process.gone_reason(record)
    # Written by a tilemark that did not record its process: judge by the planned end.
    try:
        started = datetime.fromisoformat(str(doc.get("started_at")))
    except ValueError:
        return None
    plan = doc.get("plan") or {}
    planned_ms = int(plan.get("warmup_ms") or 0) + int(plan.get("duration_ms") or 0)
    end = started + timedelta(milliseconds=planned_ms)
    if datetime.now(UTC) - end > UNRECORDED_GRACE:
        return "no process was recorded and its planned end is more than an hour past"
    return None
