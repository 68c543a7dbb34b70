"""Counters from the storage side, attached to a stored run (`tilemark attach RUN FILE.csv`).

An array's CLI exports time-stamped counters (front-end IOPS per director, back-end disk IOPS,
cache hits, CPU) as CSV: a timestamp column and named numeric columns. Attaching puts them on
the run's clock, so reports show them beside tilemark's intervals (seed 001's front end vs
back end). Timestamps are ISO 8601 (`2026-11-25T04:08:17Z`, `2026-11-25 04:08:17+01:00`; one
without a zone is this host's local time) or epoch seconds. `--offset` corrects the storage's
clock: it is added to every timestamp. Rows outside the run are dropped with a note; bad input
is one UsageError, before anything is written.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import pyarrow as pa

from tilemark.errors import UsageError
from tilemark.store.array import ARRAY_FILE, ArrayUnreadable, write_array
from tilemark.store.intervals import IntervalsUnreadable
from tilemark.store.rundoc import (
    IntervalsError,
    RunFormatError,
    RunNotFoundError,
    inspect_run,
    iso_utc,
    read_intervals,
    resolve_run_dir,
    utc_now_iso,
)
from tilemark.store.studies import STUDY_FILE, read_study, step_run_dir, study_dirs
from tilemark.units import parse_duration

NS = 1_000_000_000
# Header names taken as the timestamp column when --time-column is not given: an exact name
# first, else a word starting with time or date ("Sample Time", "DateTime"; not "Uptime").
TIME_EXACT = ("timestamp", "time", "datetime", "date", "ts", "epoch")
TIME_WORD = re.compile(r"(?<![a-z])(time|date)", re.IGNORECASE)
MISSING = {"", "-", "n/a", "na", "nan", "null", "none"}
MAX_COUNTERS = 256
MS_EPOCH = 1e11  # epoch seconds above this are year 5138: the column is in milliseconds


@dataclass
class CounterFile:
    """A parsed counter CSV: sample times (ns, UTC) and each counter's values."""

    path: str
    time_column: str
    times_ns: list[int]
    counters: dict[str, list[float | None]]
    epoch: bool = False  # timestamps were epoch seconds (else ISO 8601)


@dataclass
class Attached:
    """One run that received counters: the source record kept in its array.parquet."""

    run_id: str
    path: Path
    source: dict[str, Any]


def parse_offset(text: str | None) -> float:
    """--offset: a signed duration in seconds ('2s', '-1.5', '-500ms')."""
    if text is None:
        return 0.0
    raw = text.strip()
    sign = -1.0 if raw.startswith("-") else 1.0
    try:
        return sign * parse_duration(raw.lstrip("+-"), "--offset")
    except UsageError:
        raise UsageError(
            f"--offset must be a duration with an optional sign, such as 2s, -1.5 or -500ms "
            f"(added to the file's timestamps), got {text!r}."
        ) from None


def _timestamp(text: str, where: str) -> tuple[int, bool]:
    """(ns since the epoch, was epoch seconds) of one timestamp cell."""
    value = text.strip()
    try:
        seconds = Decimal(value)  # exact: a float has 256 ns steps at today's epoch
    except InvalidOperation:
        seconds = None
    if seconds is not None and seconds.is_finite():
        return int((seconds * NS).to_integral_value()), True
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"{where}: {value!r} is not a timestamp; use ISO 8601 (2026-11-25T04:08:17Z, "
            "2026-11-25 04:08:17+01:00, or without a zone for this host's local time) or "
            "epoch seconds."
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # this host's local time
    whole = int(moment.timestamp())
    return whole * NS + moment.microsecond * 1000, False


def _number(text: str) -> float | None:
    value = text.strip()
    if value.lower() in MISSING:
        return None
    try:
        number = float(value)
    except ValueError:
        raise ValueError(value) from None
    return number if math.isfinite(number) else None


def read_counter_csv(path: Path, time_column: str | None = None) -> CounterFile:
    """Parse a counter CSV (comma, semicolon or tab separated, a header row first)."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UsageError(f"counter file {path} does not exist.") from None
    except IsADirectoryError:
        raise UsageError(f"counter file {path} is a directory; name a CSV file.") from None
    except UnicodeDecodeError:
        raise UsageError(f"counter file {path} is not UTF-8 text; export it as CSV.") from None
    except OSError as e:
        raise UsageError(f"counter file {path} cannot be read: {e.strerror}.") from None
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2:
        raise UsageError(f"counter file {path} needs a header row and at least one data row.")
    try:
        dialect = csv.Sniffer().sniff(lines[0], delimiters=",;\t")
        delimiter = dialect.delimiter
    except csv.Error:
        delimiter = ","
    rows = list(csv.reader(lines, delimiter=delimiter))
    header = [h.strip() for h in rows[0]]
    if len(set(header)) != len(header) or "" in header:
        raise UsageError(
            f"counter file {path}: every column needs its own name in the header row, got "
            f"{', '.join(repr(h) for h in header)}."
        )
    columns = ", ".join(header)
    if time_column is not None:
        if time_column not in header:
            raise UsageError(
                f"--time-column {time_column!r} is not a column of {path} (columns: {columns})."
            )
        tcol = time_column
    else:
        exact = [h for h in header if h.lower() in TIME_EXACT]
        tcol = next(iter(exact), None) or next((h for h in header if TIME_WORD.search(h)), None)
        if tcol is None:
            raise UsageError(
                f"counter file {path} has no timestamp column (one named like time, "
                f"timestamp or date); name it with --time-column (columns: {columns})."
            )
    names = [h for h in header if h != tcol]
    if not names:
        raise UsageError(f"counter file {path} has no counter columns besides {tcol!r}.")
    if len(names) > MAX_COUNTERS:
        raise UsageError(
            f"counter file {path} has {len(names)} counter columns; at most {MAX_COUNTERS} "
            "are attached at once (split the file)."
        )
    tindex = header.index(tcol)
    times: list[int] = []
    epoch_kinds: set[bool] = set()
    counters: dict[str, list[float | None]] = {n: [] for n in names}
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise UsageError(
                f"counter file {path} line {line} has {len(row)} fields, the header {len(header)}."
            )
        ns, is_epoch = _timestamp(row[tindex], f"counter file {path} line {line}, {tcol}")
        times.append(ns)
        epoch_kinds.add(is_epoch)
        for name, cell in zip(header, row, strict=True):
            if name == tcol:
                continue
            try:
                counters[name].append(_number(cell))
            except ValueError:
                raise UsageError(
                    f"counter file {path}: column {name!r} is not numeric (line {line} has "
                    f"{cell.strip()!r}); keep only numeric columns besides the timestamp."
                ) from None
    if len(epoch_kinds) > 1:
        raise UsageError(
            f"counter file {path}: column {tcol!r} mixes epoch seconds and ISO 8601 timestamps."
        )
    return CounterFile(str(path), tcol, times, counters, epoch=epoch_kinds == {True})


@dataclass
class RunClock:
    """Where a stored run sits on the wall clock, and its intervals."""

    run_id: str
    run_dir: Path
    started_at_ns: int  # CLOCK_REALTIME when the engine started (the intervals' zero)
    intervals: list[tuple[int, int, int, str]]  # (interval, start_ns, end_ns, phase)

    @property
    def end_ns(self) -> int:
        return self.intervals[-1][2]

    def interval_at(self, t_ns: int) -> tuple[int, str]:
        """The interval a sample taken at run time `t_ns` reports on: the one it closes
        (start < t <= end), as a storage counter covers the period before its timestamp; a
        sample at 0 goes to the first interval."""
        lo, hi = 0, len(self.intervals) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.intervals[mid][1] < t_ns:
                lo = mid
            else:
                hi = mid - 1
        interval, _start, _end, phase = self.intervals[lo]
        return interval, phase


def run_clock(name: str, results: Path) -> RunClock:
    """The stored run `name` (id, prefix or directory) with its start and intervals; an
    unknown, running or unreadable run is a UsageError."""
    try:
        run_dir = resolve_run_dir(name, results)
    except RunNotFoundError as e:
        raise UsageError(f"{e}.") from None
    state = inspect_run(run_dir)
    if state.doc is None:
        raise UsageError(f"run {run_dir.name} cannot be read: {state.problem}.")
    if state.status == "running":
        raise UsageError(f"run {run_dir.name} is still running; attach counters once it has ended.")
    result = state.doc.get("result") or {}
    started = result.get("started_at_ns")
    if not isinstance(started, int):
        raise UsageError(
            f"run {run_dir.name} has no engine result (status {state.status}), so where its "
            "intervals sit on the clock is unknown; counters cannot be aligned with it."
        )
    try:
        table = read_intervals(run_dir, ["interval", "start_ns", "end_ns", "phase"])
    except (IntervalsError, IntervalsUnreadable, RunFormatError, OSError, pa.ArrowException) as e:
        raise UsageError(f"run {run_dir.name}: its intervals cannot be read ({e}).") from None
    seen: dict[int, tuple[int, int, int, str]] = {}
    for r in table.to_pylist():
        seen.setdefault(r["interval"], (r["interval"], r["start_ns"], r["end_ns"], r["phase"]))
    if not seen:
        raise UsageError(f"run {run_dir.name} has no intervals to align counters with.")
    return RunClock(run_dir.name, run_dir, started, sorted(seen.values(), key=lambda x: x[1]))


def _when(ns: int) -> str:
    try:
        return iso_utc(datetime.fromtimestamp(ns / NS, tz=UTC))
    except (ValueError, OverflowError, OSError):  # beyond the calendar: say it as a number
        return f"{ns / NS:.6g} s after the epoch"


def align(clock: RunClock, data: CounterFile, offset_s: float, source: str) -> tuple[list, dict]:
    """array.parquet rows of the samples inside the run (none when all miss it), and the
    source's record."""
    offset_ns = int(round(offset_s * NS))
    rows: list[dict[str, Any]] = []
    before = after = 0
    kept_times: list[int] = []
    for k, raw in enumerate(data.times_ns):
        time_ns = raw + offset_ns
        t_ns = time_ns - clock.started_at_ns
        if t_ns < 0:
            before += 1
            continue
        if t_ns > clock.end_ns:
            after += 1
            continue
        kept_times.append(time_ns)
        interval, phase = clock.interval_at(t_ns)
        for name, values in data.counters.items():
            rows.append(
                {
                    "run_id": clock.run_id,
                    "source": source,
                    "counter": name,
                    "time_ns": time_ns,
                    "t_ns": t_ns,
                    "interval": interval,
                    "phase": phase,
                    "value": values[k],
                }
            )
    record = {
        "name": source,
        "file": str(Path(data.path).resolve()),
        "time_column": data.time_column,
        "offset_s": offset_s,
        "counters": list(data.counters),
        "rows_read": len(data.times_ns),
        "rows_kept": len(kept_times),
        "dropped_before": before,
        "dropped_after": after,
        "first_ns": min(kept_times, default=None),
        "last_ns": max(kept_times, default=None),
        "attached_at": utc_now_iso(),
    }
    return rows, record


def _outside(data: CounterFile, offset_s: float, what: str, spans: list[RunClock]) -> UsageError:
    """No row of the file falls inside `what`: say both time spans and the likely cause."""
    offset_ns = int(round(offset_s * NS))
    first, last = min(data.times_ns) + offset_ns, max(data.times_ns) + offset_ns
    start = min(c.started_at_ns for c in spans)
    end = max(c.started_at_ns + c.end_ns for c in spans)
    hint = ""
    if data.epoch and min(data.times_ns) / NS > MS_EPOCH:
        hint = " Its timestamps look like epoch milliseconds; they must be epoch seconds."
    return UsageError(
        f"no row of {data.path} falls inside {what}: it ran from {_when(start)} to "
        f"{_when(end)}, the file's rows (after --offset {offset_s:g}s) from {_when(first)} to "
        f"{_when(last)}; check their time zone, or correct the clock with --offset." + hint
    )


def find_study(name: str, results: Path) -> Path | None:
    """The study directory `name` names (a directory, an id or a unique id prefix), or None."""
    given = Path(name)
    if (given / STUDY_FILE).is_file():
        return given
    found = study_dirs(results)
    exact = [d for d in found if d.name == name]
    prefixed = [d for d in found if d.name.startswith(name)] if "/" not in name else []
    if exact or len(prefixed) == 1:
        return (exact or prefixed)[0]
    if len(prefixed) > 1:
        shown = ", ".join(d.name for d in prefixed[:5])
        raise UsageError(f"study id {name!r} is ambiguous under {results}: {shown}.")
    return None


def _write(clock: RunClock, record: dict[str, Any], rows: list) -> Path:
    try:
        return write_array(clock.run_dir, record, rows)
    except ArrayUnreadable as e:
        raise UsageError(
            f"run {clock.run_id}: {e}; move {ARRAY_FILE} away to attach afresh."
        ) from None


@dataclass
class Outcome:
    """Every run that received counters, and the notes to print."""

    attached: list[Attached]
    notes: list[str]


def attach(
    name: str,
    csv_path: Path,
    *,
    results: Path,
    offset: str | None = None,
    time_column: str | None = None,
    source: str | None = None,
) -> Outcome:
    """Attach a counter CSV to the stored run `name`, or to every run of the study `name` (each
    takes the rows within its span: one export for a whole sweep). Everything is checked
    before any array.parquet is written."""
    offset_s = parse_offset(offset)
    label = source if source is not None else Path(csv_path).stem
    if not re.fullmatch(r"[A-Za-z0-9_.:+-]{1,64}", label):
        raise UsageError(
            f"--name must be 1 to 64 letters, digits or _.:+- characters, got {label!r}"
            + ("" if source is not None else " (the file's name; choose one with --name)")
            + "."
        )
    try:
        resolve_run_dir(name, results)
        study = None
    except RunNotFoundError as e:
        study = find_study(name, results)
        if study is None:
            raise UsageError(f"{e}, nor a study.") from None
    if study is None:
        clock = run_clock(name, results)
        data = read_counter_csv(Path(csv_path), time_column)
        rows, record = align(clock, data, offset_s, label)
        if not rows:
            raise _outside(data, offset_s, f"run {clock.run_id}", [clock])
        notes = []
        dropped = record["dropped_before"] + record["dropped_after"]
        if dropped:
            notes.append(
                f"dropped {dropped} of {record['rows_read']} rows outside the run "
                f"({record['dropped_before']} before its start, {record['dropped_after']} "
                "after its end)"
            )
        return Outcome([Attached(clock.run_id, _write(clock, record, rows), record)], notes)
    return _attach_study(study, results, Path(csv_path), time_column, offset_s, label)


def _attach_study(
    study: Path, results: Path, csv_path: Path, time_column: str | None, offset_s: float, label: str
) -> Outcome:
    """Each run of the study gets the rows within its own span."""
    doc, problem = read_study(study)
    if doc is None:
        raise UsageError(f"study {study.name} is damaged: {problem}.")
    notes: list[str] = []
    clocks: list[RunClock] = []
    seen: set[Path] = set()
    for step in doc.get("steps") or []:
        run_dir = step_run_dir(results, step) if isinstance(step, dict) else None
        if run_dir is None or run_dir.resolve() in seen:
            continue
        seen.add(run_dir.resolve())
        try:
            clocks.append(run_clock(str(run_dir), results))
        except UsageError as e:
            notes.append(f"skipped: {str(e).rstrip('.')}")
    if not clocks:
        raise UsageError(f"study {study.name} has no stored run to attach counters to.")
    data = read_counter_csv(csv_path, time_column)
    aligned = [(c, *align(c, data, offset_s, label)) for c in clocks]
    if not any(rows for _c, rows, _r in aligned):
        raise _outside(data, offset_s, f"any run of study {study.name}", clocks)
    offset_ns = int(round(offset_s * NS))
    inside = sum(
        any(0 <= t + offset_ns - c.started_at_ns <= c.end_ns for c in clocks) for t in data.times_ns
    )
    if inside < len(data.times_ns):
        notes.append(
            f"dropped {len(data.times_ns) - inside} of {len(data.times_ns)} rows outside every "
            f"run of study {study.name}"
        )
    attached = [
        Attached(c.run_id, _write(c, record, rows), record) for c, rows, record in aligned if rows
    ]
    missed = len(clocks) - len(attached)
    if missed:
        notes.append(f"{missed} run(s) of the study had no row inside them")
    return Outcome(attached, notes)
