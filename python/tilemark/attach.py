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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import pyarrow as pa

from tilemark.errors import UsageError
from tilemark.store import RunFormatError, RunNotFoundError, read_intervals, resolve_run_dir
from tilemark.store.array import ARRAY_FILE, ArrayUnreadable, write_array
from tilemark.store.intervals import IntervalsUnreadable
from tilemark.store.rundoc import IntervalsError, inspect_run, iso_utc, utc_now_iso
from tilemark.units import parse_duration

NS = 1_000_000_000
# Header names taken as the timestamp column when --time-column is not given.
TIME_NAMES = re.compile(r"^(ts|epoch)$|time|date", re.IGNORECASE)
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
    """What `attach` did: the source record kept in array.parquet and the notes to print."""

    run_id: str
    path: Path
    source: dict[str, Any]
    notes: list[str] = field(default_factory=list)


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
        tcol = next((h for h in header if TIME_NAMES.search(h)), None)
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
    """array.parquet rows of the samples inside the run, and the source's record."""
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
    if not kept_times:
        first, last = min(data.times_ns) + offset_ns, max(data.times_ns) + offset_ns
        hint = ""
        if data.epoch and min(data.times_ns) / NS > MS_EPOCH:
            hint = " Its timestamps look like epoch milliseconds; they must be epoch seconds."
        raise UsageError(
            f"no row of {data.path} falls inside run {clock.run_id}: the run ran from "
            f"{_when(clock.started_at_ns)} to {_when(clock.started_at_ns + clock.end_ns)}, "
            f"the file's rows (after --offset {offset_s:g}s) from {_when(first)} to "
            f"{_when(last)}; check their time zone, or correct the clock with --offset." + hint
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
        "first_ns": min(kept_times),
        "last_ns": max(kept_times),
        "attached_at": utc_now_iso(),
    }
    return rows, record


def attach(
    name: str,
    csv_path: Path,
    *,
    results: Path,
    offset: str | None = None,
    time_column: str | None = None,
    source: str | None = None,
) -> Attached:
    """Attach a counter CSV to the stored run `name`; everything is checked before the run's
    array.parquet is written."""
    offset_s = parse_offset(offset)
    label = source if source is not None else Path(csv_path).stem
    if not re.fullmatch(r"[A-Za-z0-9_.:+-]{1,64}", label):
        raise UsageError(
            f"--name must be 1 to 64 letters, digits or _.:+- characters, got {label!r}"
            + ("" if source is not None else " (the file's name; choose one with --name)")
            + "."
        )
    clock = run_clock(name, results)
    data = read_counter_csv(Path(csv_path), time_column)
    rows, record = align(clock, data, offset_s, label)
    notes = []
    dropped = record["dropped_before"] + record["dropped_after"]
    if dropped:
        notes.append(
            f"dropped {dropped} of {record['rows_read']} rows outside the run "
            f"({record['dropped_before']} before its start, {record['dropped_after']} after "
            "its end)"
        )
    try:
        path = write_array(clock.run_dir, record, rows)
    except ArrayUnreadable as e:
        raise UsageError(
            f"run {clock.run_id}: {e}; move {ARRAY_FILE} away to attach afresh."
        ) from None
    return Attached(clock.run_id, path, record, notes)
