"""What reports read: runs and studies from the store, time series downsampled for display.

Everything here is plain data (dicts, lists, dataclasses); charts.py draws it. Raw files are
never changed. Percentiles of merged intervals, streams or applications always come from
merged histograms (docs/engine-boundary.md), never from averaging the stored percentiles:
whole-run ones through tilemark.hist, time series ones in DuckDB with the same bucket
arithmetic, because a long run has far too many interval histograms to merge in Python.

Longer than 600 lines because loading a stored run or study and every series a report draws
from it share one rule (merged histograms, never averaged percentiles) and one downsampling.
"""

from __future__ import annotations

import math
import os
import tempfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from tilemark.errors import UsageError
from tilemark.hist import Histogram
from tilemark.store import results
from tilemark.store.intervals import (
    INTERVAL_SCHEMA,
    IntervalSource,
    IntervalsUnreadable,
    interval_source,
    read_source,
    write_parquet,
)
from tilemark.store.rundoc import RunFormatError, StoreError, inspect_run, resolve_run_dir
from tilemark.store.studies import STUDIES_DIR, STUDY_FILE, read_study, step_run_dir

# Time series: at most this many points per series (intervals are merged above it) ...
MAX_POINTS = 600
# ... and at most about this many points over all per-stream series together, so that a
# long run with many streams still gives a report of a few MB that opens fast.
STREAM_POINTS_BUDGET = 30_000
MIN_STREAM_POINTS = 60
# Percentiles of the latency distribution plot.
DISTRIBUTION_PERCENTILES = (50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99)
DATA_OPS = ("read", "write")


# ---------------------------------------------------------------------------------------------
# runs and studies


@dataclass
class RunData:
    """One stored run: its run.json document, where it lives, and what can be read of it.

    `doc["status"]` and `doc["error"]` are what readers show: a run whose process is gone is
    `killed`, one with unreadable files `damaged`, and `error` says why (in memory only; the
    run directory is never changed by reading it).
    """

    run_dir: Path
    doc: dict[str, Any]
    intervals: IntervalSource | None = None  # found in run_dir when not given

    def __post_init__(self) -> None:
        if self.intervals is None:
            self.intervals = interval_source(self.run_dir)

    @classmethod
    def load(cls, run_dir: Path) -> RunData:
        """Read a run directory; RunFormatError when its run.json cannot be read."""
        state = inspect_run(run_dir)
        if state.doc is None:
            raise RunFormatError(f"run {state.run_dir.name} is damaged: {state.problem}")
        doc = state.doc
        if state.status != doc.get("status"):
            doc = {**doc, "status": state.status, "error": state.problem}
        return cls(state.run_dir, doc, state.intervals)

    @cached_property
    def typed(self) -> results.RunDoc:
        """run.json as typed classes (store/results.py); its shape was checked when read.

        Without `result`, the engine's per-stream histograms: typing those took seconds for a
        run of 10,000 streams, and the reports merge them as read (`result`, merged_run_hist).
        """
        return results.read_run({k: v for k, v in self.doc.items() if k != "result"})

    @property
    def status(self) -> str:
        return str(self.typed.status)

    @property
    def problem(self) -> str | None:
        """Why the run is killed, damaged or failed, or None."""
        return self.typed.error

    @property
    def run_id(self) -> str:
        return str(self.typed.run_id or self.run_dir.name)

    @property
    def plan(self) -> dict[str, Any]:
        return self.doc.get("plan") or {}

    @property
    def stream_names(self) -> list[str]:
        streams = (self.typed.plan.streams if self.typed.plan else None) or []
        return [s.name or f"stream{i}" for i, s in enumerate(streams)]

    @property
    def summary(self) -> dict[str, Any] | None:
        return self.doc.get("summary")

    @property
    def result(self) -> dict[str, Any] | None:
        return self.doc.get("result")

    @property
    def environment(self) -> dict[str, Any]:
        return self.doc.get("environment") or {}

    @property
    def applications(self) -> dict[str, Any] | None:
        """The `applications` section of a tile run's summary, else None."""
        return (self.summary or {}).get("applications")

    @property
    def is_tile_run(self) -> bool:
        summary = self.typed.summary
        return summary is not None and summary.applications is not None

    def app_of_stream(self) -> dict[int, str]:
        """Plan stream index -> application label (tile runs; empty otherwise)."""
        apps = self.typed.summary.applications if self.typed.summary else None
        streams = (apps.layout.streams if apps and apps.layout else None) or []
        return {int(t.index): str(t.app) for t in streams}  # type: ignore[arg-type]

    def app_labels(self) -> list[str]:
        """Applications in tile order."""
        apps = self.typed.summary.applications if self.typed.summary else None
        labels = [a.app for a in (apps.applications if apps else None) or []]
        for app in self.app_of_stream().values():
            if app not in labels:
                labels.append(app)
        return labels

    def open_loop_streams(self) -> set[int]:
        streams = (self.typed.plan.streams if self.typed.plan else None) or []
        return {i for i, s in enumerate(streams) if s.arrival and s.arrival.kind == "open"}

    def warmup_s(self) -> float:
        result = self.result or {}
        if result.get("measure_start_ns") is not None:
            return int(result["measure_start_ns"]) / 1e9
        return float((self.typed.plan.warmup_ms if self.typed.plan else None) or 0) / 1e3

    def intervals_path(self) -> Path:
        """The file holding the intervals: intervals.parquet, or the log of a run that did not
        finish (absent when the run kept none)."""
        if self.intervals.path is not None:
            return self.intervals.path
        files = self.typed.files
        return self.run_dir / ((files.intervals if files else None) or "intervals.parquet")

    def read_intervals(self, columns: list[str] | None = None) -> Any:
        """Interval rows as an Arrow table; an empty one when they cannot be read (the run is
        then `damaged` and `problem` says why)."""
        try:
            return read_source(self.intervals, columns)
        except IntervalsUnreadable:
            return INTERVAL_SCHEMA.empty_table().select(columns or INTERVAL_SCHEMA.names)


@dataclass
class StudyStep:
    """One step of a study (a tile count, or a knob value) and the run that stands for it
    (None when its directory is gone)."""

    tiles: int
    step: dict[str, Any]
    run: RunData | None
    typed: results.StudyStep = field(default_factory=results.StudyStep)  # `step`, typed

    @property
    def key(self) -> float:
        """The step's position on the study's axis: its knob value, else its tile count (a
        repetition's number in a repeat study)."""
        step = self.typed
        if step.value is not None:
            return float(step.value)
        return float(step.key if step.key is not None else self.tiles)

    @property
    def repeat(self) -> int:
        return int(self.typed.repeat if self.typed.repeat is not None else 1)


@dataclass
class StudyData:
    """A study: study.json and the runs of its steps."""

    study_dir: Path
    doc: dict[str, Any]
    steps: list[StudyStep] = field(default_factory=list)

    @cached_property
    def typed(self) -> results.StudyDoc:
        """study.json as typed classes (store/results.py); its shape was checked when read."""
        return results.read_study(self.doc)

    @property
    def kind(self) -> str | None:
        return self.typed.kind

    @property
    def study_id(self) -> str:
        return str(self.typed.study_id or self.study_dir.name)

    @property
    def is_knob(self) -> bool:
        return self.typed.kind == "knob"

    @property
    def axis(self) -> str:
        """What the steps vary: 'tiles', or the knob's name."""
        return str(self.typed.knob) if self.is_knob else "tiles"

    @property
    def answer(self) -> float | None:
        """The study's answer: the largest passing tile count or knob value."""
        doc = self.typed
        return doc.max_passing_value if self.is_knob else doc.max_passing_tiles

    @property
    def repeats(self) -> int:
        return int(self.typed.repeat or 1)

    def shown_repeat(self) -> int:
        """The repetition the charts show: the first whose answer is the study's (median)."""
        for r in self.typed.repeats or []:
            if (r.max_passing_value if self.is_knob else r.max_passing_tiles) == self.answer:
                return int(r.repeat)  # type: ignore[arg-type]  (every repeat has its number)
        return 1

    def shown_steps(self) -> list[StudyStep]:
        """The steps of the shown repetition, in axis order."""
        r = self.shown_repeat()
        return sorted((s for s in self.steps if s.repeat == r), key=lambda s: s.key)

    def step_at(self, key: float | None) -> StudyStep | None:
        """The shown repetition's step at `key` (a tile count or a knob value)."""
        if key is None:
            return None
        return next((s for s in self.shown_steps() if s.key == float(key)), None)

    def first_run(self) -> RunData | None:
        return next((s.run for s in self.steps if s.run is not None), None)


Source = RunData | StudyData


def _read_study(study_dir: Path, results_root: Path | None) -> StudyData:
    doc, problem = read_study(study_dir)
    if doc is None:
        raise UsageError(f"study {study_dir.name} is damaged: {problem}.")
    typed = results.read_study(doc)
    # Studies live in <results>/studies/<id>; their step runs in <results>/<run_id>.
    root = results_root if results_root is not None else study_dir.parent.parent
    steps = []
    for step, typed_step in zip(doc.get("steps", []), typed.steps or [], strict=True):
        run = None
        run_dir = step_run_dir(root, step)
        if run_dir is not None:
            try:
                run = RunData.load(run_dir)
            except StoreError:
                pass  # a step whose run.json is damaged is shown like a missing one
        steps.append(StudyStep(int(typed_step.tiles or 0), step, run, typed_step))
    study = StudyData(study_dir, doc, steps)
    study.typed = typed  # the cached property, read once above
    return study


def load_source(name: str | Path, results: Path | None = None) -> Source:
    """A run or a study named by directory, id or unique id prefix."""
    given = Path(name)
    if given.name == STUDY_FILE and given.is_file():
        return _read_study(given.parent, None)
    if (given / STUDY_FILE).is_file():
        return _read_study(given, None)
    if given.name == "run.json" and given.is_file() or (given / "run.json").is_file():
        return RunData.load(resolve_run_dir(given))
    root = Path(results) if results is not None else Path("tilemark-results")
    text = str(name)
    studies_dir = root / STUDIES_DIR
    studies = (
        sorted(p for p in studies_dir.iterdir() if (p / STUDY_FILE).is_file())
        if studies_dir.is_dir() and "/" not in text
        else []
    )
    if (root / text / "run.json").is_file():
        return RunData.load(resolve_run_dir(root / text))
    exact = [p for p in studies if p.name == text]
    if exact:
        return _read_study(exact[0], root)
    runs = (
        sorted(p for p in root.iterdir() if p.name.startswith(text) and (p / "run.json").is_file())
        if root.is_dir() and text and "/" not in text
        else []
    )
    matches = [("run", p) for p in runs] + [
        ("study", p) for p in studies if text and p.name.startswith(text)
    ]
    if len(matches) == 1:
        kind, path = matches[0]
        return RunData.load(path) if kind == "run" else _read_study(path, root)
    if matches:
        shown = ", ".join(f"{p.name} ({k})" for k, p in matches[:5])
        more = f" and {len(matches) - 5} more" if len(matches) > 5 else ""
        raise UsageError(f"{text!r} is ambiguous under {root}: {shown}{more}.")
    raise UsageError(
        f"no run or study {text!r}: not a run or study directory, nor an id under {root}."
    )


def load_run_data(name: str | Path, results: Path | None = None) -> RunData:
    """A run (not a study) named by directory, id or unique id prefix."""
    source = load_source(name, results)
    if not isinstance(source, RunData):
        raise UsageError(f"{name!r} is a study; this command takes a run.")
    return source


def relpath(target: Path, start: Path) -> str:
    """`target` relative to directory `start`, with forward slashes, for links in a report."""
    return Path(os.path.relpath(Path(target).resolve(), Path(start).resolve())).as_posix()


# ---------------------------------------------------------------------------------------------
# whole-run histograms


def _op_hist(op: dict | None, kind: str) -> Histogram:
    if not op:
        return Histogram()
    if kind == "response":
        # Closed loop keeps no response histogram: there response time is service time.
        return Histogram.from_json(op.get("response") or op.get("service"))
    return Histogram.from_json(op.get("service"))


def merged_run_hist(
    run: RunData, streams: list[int] | None, op: str | None, kind: str = "response"
) -> Histogram:
    """Measurement-phase histogram of some streams (all when None) and one op (both: None)."""
    result = run.result or {}
    wanted = None if streams is None else set(streams)
    ops = DATA_OPS if op is None else (op,)
    out = Histogram()
    for s in result.get("streams", []):
        if wanted is not None and int(s["stream"]) not in wanted:
            continue
        for o in ops:
            out.merge(_op_hist(s.get(o), kind))
    return out


def run_groups(run: RunData) -> dict[str, list[int]]:
    """Display groups of plan streams: per application for tile runs, else per stream."""
    if run.is_tile_run:
        groups: dict[str, list[int]] = {a: [] for a in run.app_labels()}
        for index, app in sorted(run.app_of_stream().items()):
            groups.setdefault(app, []).append(index)
        return {g: s for g, s in groups.items() if s}
    return {name: [i] for i, name in enumerate(run.stream_names)}


def distribution_rows(
    run: RunData, groups: dict[str, list[int]], *, label: str = "group"
) -> list[dict[str, Any]]:
    """Latency (ms) at DISTRIBUTION_PERCENTILES of merged histograms, per group and op."""
    rows = []
    for name, streams in groups.items():
        for op in DATA_OPS:
            h = merged_run_hist(run, streams, op)
            if h.n == 0:
                continue
            for p in DISTRIBUTION_PERCENTILES:
                rows.append(
                    {
                        label: name,
                        "op": op,
                        "percentile": p,
                        "nines": -math.log10(1.0 - p / 100.0),
                        "latency_ms": h.percentile(p) / 1e6,
                        "ios": h.n,
                    }
                )
    return rows


def latency_stats_ms(h: Histogram) -> dict[str, float | None]:
    """mean, p50, p99, p99.9, max of a histogram in ms."""

    def ms(v: float | None) -> float | None:
        return None if v is None else v / 1e6

    return {
        "mean": ms(h.mean()),
        "p50": ms(h.percentile(50.0)),
        "p99": ms(h.percentile(99.0)),
        "p999": ms(h.percentile(99.9)),
        "max": ms(float(h.max)) if h.n else None,
    }


# ---------------------------------------------------------------------------------------------
# time series


@dataclass
class SeriesSet:
    """Downsampled time series of a run.

    rows[level] is a list of dicts, one per (group, bin): level "total" (group "total"),
    "app" (tile runs, group = application) and "stream" (group = stream name). Each row has
    t_s (bin middle, seconds since run start), start_s, end_s, phase, iops, read_iops,
    write_iops, mbps, errors, and latency in ms: p50, p99, mean (response time: what the
    application waited; service time for closed loop), svc_p50, svc_p99 (service time),
    read_p50, read_p99, write_p50, write_p99 (response time per op).
    """

    rows: dict[str, list[dict[str, Any]]]
    intervals: int
    intervals_per_point: dict[str, int]
    warmup_s: float
    open_loop: dict[str, set[str]]  # level -> groups with an open-loop stream
    changes: list[dict[str, Any]] = field(default_factory=list)  # summary.change_points
    phases: list[dict[str, Any]] = field(default_factory=list)  # phased streams: {t_s, label}


_HIST_TYPE = '{"n":"UBIGINT","sum":"DOUBLE","min":"UBIGINT","max":"UBIGINT","b":"UINTEGER[][]"}'


def _bin_expr(k: int, warm: int, col: str = "interval") -> str:
    # Bins never straddle the warm-up/measure boundary: warm-up intervals are binned on their
    # own, measured ones start a new bin.
    warm_bins = -(-warm // k)
    return (
        f"(CASE WHEN {col} < {warm} THEN {col} // {k} "
        f"ELSE {warm_bins} + ({col} - {warm}) // {k} END)"
    )


def _points_per_stream(n_streams: int) -> int:
    return max(MIN_STREAM_POINTS, min(MAX_POINTS, STREAM_POINTS_BUDGET // max(n_streams, 1)))


def _parquet_files(run: RunData, spool: Path) -> list[Path]:
    """Parquet files holding a run's intervals; the log of a run that did not finish is
    copied into `spool` as Parquet first (the run directory is never written). [] when the
    intervals cannot be read."""
    source = run.intervals
    if source.problem is not None or source.kind == "none":
        return []
    if source.kind != "log":
        return source.files
    dest = spool / "intervals.parquet"
    write_parquet(source, dest)
    return [dest]


def compute_series(run: RunData) -> SeriesSet:
    """Downsampled per-stream, per-application and total time series of a run."""
    names = run.stream_names
    apps = run.app_of_stream()
    open_streams = run.open_loop_streams()
    spool = tempfile.TemporaryDirectory(prefix="tilemark-report-")
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")
        files = _parquet_files(run, Path(spool.name))
        if files:
            # DuckDB reads Parquet itself, a column at a time: no copy of a long run in memory.
            listed = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
            con.execute(f"CREATE VIEW iv AS SELECT * FROM read_parquet([{listed}])")
        else:
            con.register("iv", INTERVAL_SCHEMA.empty_table())
        n_intervals, warm = con.execute(
            "SELECT count(DISTINCT interval), count(DISTINCT interval) FILTER (phase = 'warmup') "
            "FROM iv"
        ).fetchall()[0]
        n_intervals = int(n_intervals or 0)
        warm = int(warm or 0)
        k_group = max(1, -(-n_intervals // MAX_POINTS))
        k_stream_raw = max(1, -(-n_intervals // _points_per_stream(len(names))))
        k_stream = k_group * -(-k_stream_raw // k_group)
        rows = _series_rows(con, names, apps, open_streams, warm, k_group, k_stream)
    finally:
        con.close()
        spool.cleanup()
    open_groups = {
        "total": {"total"} if open_streams else set(),
        "app": {apps[i] for i in open_streams if i in apps},
        "stream": {names[i] for i in open_streams if i < len(names)},
    }
    levels = {"total": k_group, "stream": k_stream}
    if apps:
        levels["app"] = k_group
    return SeriesSet(
        rows=rows,
        intervals=n_intervals,
        intervals_per_point=levels,
        warmup_s=run.warmup_s(),
        open_loop=open_groups,
        changes=list((run.typed.summary.change_points if run.typed.summary else None) or []),
    )


def _bucket_values(idx: np.ndarray) -> np.ndarray:
    """tilemark.hist.bucket_value of each bucket index: its midpoint in ns (exact below 128).
    A percentile is the bucket holding the ceil(p% * n)-th value, reported by its midpoint
    and clamped to [min, max] (Histogram.percentile)."""
    i = idx.astype(np.int64)
    shift = np.maximum(i // 64 - 1, 0)
    mid = ((i - 64 * shift) << shift) + (np.int64(1) << shift) / 2.0
    return np.where(i < 128, i.astype(np.float64), mid)


def _percentile_rows(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    """(level, grp, bin, op, kind, n, mean_ns, p50_ns, p99_ns) of every group of the merged
    bucket table `lu` and its statistics `lst`.

    The percentile is found by one running sum over all groups' buckets in key order: a
    group's p-th value is the first bucket where the sum passes the group's start plus
    ceil(p% * n) (tilemark.hist.Histogram.percentile). A window function per group did the
    same in DuckDB at several times the cost (10 s of an 18 s report of 25 minutes x 100
    streams).
    """
    keys = "level, grp, bin, op, kind"
    buckets = con.execute(f"SELECT {keys}, idx, cnt FROM lu ORDER BY {keys}, idx").fetchnumpy()
    stats = con.execute(f"SELECT {keys}, n, s, mn, mx FROM lst ORDER BY {keys}").fetchnumpy()
    names = keys.split(", ")
    if len(buckets["idx"]) == 0:
        return []
    changed = np.zeros(len(buckets["idx"]), dtype=bool)
    changed[0] = True
    for k in names:
        col = buckets[k]
        changed[1:] |= col[1:] != col[:-1]
    starts = np.flatnonzero(changed)
    # Every group with values has buckets and statistics: the two tables pair row by row.
    if len(starts) != len(stats["n"]) or not all(
        np.array_equal(buckets[k][starts], stats[k]) for k in names
    ):
        raise AssertionError("histogram buckets and statistics disagree on their groups")
    running = np.cumsum(buckets["cnt"].astype(np.int64))
    base = np.concatenate(([0], running[starts[1:] - 1]))
    n = stats["n"].astype(np.int64)
    lo = stats["mn"].astype(np.float64)
    hi = stats["mx"].astype(np.float64)

    def value(pct: int) -> np.ndarray:
        rank = np.maximum(1, (n * pct + 99) // 100)
        at = np.searchsorted(running, base + rank, side="left")
        return np.minimum(np.maximum(_bucket_values(buckets["idx"][at]), lo), hi)

    mean = stats["s"].astype(np.float64) / n
    return list(
        zip(
            *(stats[k].tolist() for k in names),
            n.tolist(),
            mean.tolist(),
            value(50).tolist(),
            value(99).tolist(),
            strict=True,
        )
    )


LEVELS = ("total", "app", "stream")
OPS = ("read", "write", "all")


def _series_rows(
    con: duckdb.DuckDBPyConnection,
    names: list[str],
    apps: dict[int, str],
    open_streams: set[int],
    warm: int,
    k: int,
    ks: int,
) -> dict[str, list[dict[str, Any]]]:
    """Counts and merged-histogram percentiles per level, group and bin.

    Levels are coded 0 total, 1 application, 2 stream; ops 0 read, 1 write, 2 both; kinds
    0 response time (service time for closed loop, which keeps no response histogram) and
    1 service time. Integer codes and narrow types keep the tens of millions of histogram
    buckets of a long run cheap to group.
    """
    con.execute("SET preserve_insertion_order = false")
    app_labels = sorted(set(apps.values()))
    app_code = [app_labels.index(apps[i]) if i in apps else 0 for i in range(len(names))]
    app_of = f"list_extract([{', '.join(map(str, app_code or [0]))}], stream + 1)"
    closed = [i for i in range(len(names)) if i not in open_streams]
    is_closed = f"list_contains([{', '.join(map(str, closed or [-1]))}], stream)"
    fine = _bin_expr(k, warm)
    coarse = _bin_expr(ks, warm)
    # One parse of every interval histogram; service time is parsed only where it differs.
    con.execute(
        f"""
        CREATE TEMP TABLE parsed AS
        SELECT stream, op, fb, cb, 0 AS kind, from_json(hist, '{_HIST_TYPE}') AS h
        FROM (SELECT stream::UINTEGER AS stream, (op = 'write')::UTINYINT AS op,
                     {fine}::UINTEGER AS fb, {coarse}::UINTEGER AS cb,
                     coalesce(response_hist, service_hist) AS hist
              FROM iv WHERE op IN ('read', 'write') AND ops > 0)
        UNION ALL
        SELECT stream::UINTEGER, (op = 'write')::UTINYINT, {fine}::UINTEGER, {coarse}::UINTEGER,
               1, from_json(service_hist, '{_HIST_TYPE}')
        FROM iv WHERE op IN ('read', 'write') AND ops > 0 AND response_hist IS NOT NULL
        """
    )
    # A group's service time merges its open-loop streams' service histograms with its
    # closed-loop streams' (response = service) ones.
    mixed = bool(open_streams) and bool(closed)
    extra = f"UNION ALL SELECT stream, op, fb, cb, 1, h FROM parsed WHERE kind = 0 AND {is_closed}"
    con.execute(f"CREATE TEMP VIEW hs AS SELECT * FROM parsed {extra if mixed else ''}")
    con.execute(
        """
        CREATE TEMP TABLE u AS
        SELECT stream, op, kind::UTINYINT AS kind, fb, cb,
               b[1]::USMALLINT AS idx, b[2]::UBIGINT AS cnt
        FROM (SELECT stream, op, kind, fb, cb, unnest(h.b) AS b FROM hs WHERE h.n > 0)
        """
    )
    con.execute(
        """
        CREATE TEMP TABLE st AS
        SELECT stream, op, kind, fb, cb, sum(h.n) AS n, sum(h.sum) AS s,
               min(h.min) AS mn, max(h.max) AS mx
        FROM hs WHERE h.n > 0 GROUP BY ALL
        """
    )
    # Roll up per level: total and application per op and fine bin, streams per coarse bin.
    app_level = (
        f"""
            UNION ALL
            SELECT 1, {app_of}, fb, op, kind, {{cols}} FROM {{src}} GROUP BY ALL"""
        if apps
        else ""
    )
    for src, dst, cols in (
        ("u", "lu", "idx, sum(cnt) AS cnt"),
        ("st", "lst", "sum(n) AS n, sum(s) AS s, min(mn) AS mn, max(mx) AS mx"),
    ):
        keys = "idx, " if src == "u" else ""
        merged = "idx, sum(cnt)" if src == "u" else "sum(n), sum(s), min(mn), max(mx)"
        con.execute(
            f"""
            CREATE TEMP TABLE {dst} AS
            WITH per_op AS (
                SELECT 0 AS level, 0 AS grp, fb AS bin, op, kind, {cols}
                FROM {src} GROUP BY level, grp, bin, op, kind {", idx" if keys else ""}
                {app_level.format(cols=cols, src=src)}
            )
            SELECT * FROM per_op
            UNION ALL
            SELECT level, grp, bin, 2, kind, {merged} FROM per_op
            GROUP BY level, grp, bin, kind {", idx" if keys else ""}
            UNION ALL
            SELECT 2, stream, cb, 2, kind, {cols} FROM {src}
            GROUP BY stream, cb, kind {", idx" if keys else ""}
            """
        )
    lat = _percentile_rows(con)
    app_counts = (
        f"""
        UNION ALL
        SELECT 1, {app_of}, fb, sum(rops), sum(wops), sum(dbytes), sum(errors)
        FROM r GROUP BY ALL"""
        if apps
        else ""
    )
    counts = con.execute(
        f"""
        WITH r AS (
            SELECT stream, {fine} AS fb, {coarse} AS cb,
                   CASE WHEN op = 'read' THEN ops ELSE 0 END AS rops,
                   CASE WHEN op = 'write' THEN ops ELSE 0 END AS wops,
                   CASE WHEN op IN ('read', 'write') THEN bytes ELSE 0 END AS dbytes,
                   errors
            FROM iv
        )
        SELECT 0, 0, fb, sum(rops), sum(wops), sum(dbytes), sum(errors) FROM r GROUP BY ALL
        {app_counts}
        UNION ALL
        SELECT 2, stream, cb, sum(rops), sum(wops), sum(dbytes), sum(errors) FROM r GROUP BY ALL
        """
    ).fetchall()
    spans = {}
    for level, expr in (("fine", fine), ("coarse", coarse)):
        for b, start, end, phase in con.execute(
            f"SELECT {expr} AS b, min(start_ns), max(end_ns), min(phase) FROM iv GROUP BY b"
        ).fetchall():
            spans[(level, int(b))] = (int(start), int(end), phase)
    return _assemble(names, app_labels, lat, counts, spans)


def _assemble(
    names: list[str], app_labels: list[str], lat: list[tuple], counts: list[tuple], spans: dict
) -> dict[str, list[dict[str, Any]]]:
    def group_name(level: int, grp: int) -> str:
        if level == 2:
            return names[grp] if 0 <= grp < len(names) else f"stream{grp}"
        if level == 1:
            return app_labels[grp]
        return "total"

    out: dict[tuple[str, str, int], dict[str, Any]] = {}
    for level, grp, b, rops, wops, dbytes, errors in counts:
        level, grp = int(level), int(grp)
        start, end, phase = spans[("coarse" if level == 2 else "fine", int(b))]
        secs = max((end - start) / 1e9, 1e-9)
        ops = int(rops) + int(wops)
        out[(level, grp, int(b))] = {
            "group": group_name(level, grp),
            "bin": int(b),
            "t_s": (start + end) / 2e9,
            "start_s": start / 1e9,
            "end_s": end / 1e9,
            "phase": phase,
            "ops": ops,
            "bytes": int(dbytes),
            "iops": ops / secs,
            "read_iops": int(rops) / secs,
            "write_iops": int(wops) / secs,
            "mbps": int(dbytes) / 1e6 / secs,
            "errors": int(errors),
        }
    for level, grp, b, op, kind, _n, mean_ns, p50, p99 in lat:
        row = out.get((int(level), int(grp), int(b)))
        if row is None:
            continue
        op_name = OPS[int(op)]
        if op_name == "all" and kind == 0:
            row.update(p50=p50 / 1e6, p99=p99 / 1e6, mean=mean_ns / 1e6)
        elif op_name == "all":
            row.update(svc_p50=p50 / 1e6, svc_p99=p99 / 1e6)
        elif kind == 0:
            row.update({f"{op_name}_p50": p50 / 1e6, f"{op_name}_p99": p99 / 1e6})
    levels: dict[str, list[dict[str, Any]]] = {}
    for (level, _grp, _b), row in out.items():
        levels.setdefault(LEVELS[level], []).append(row)
    for rows in levels.values():
        rows.sort(key=lambda r: (r["t_s"], r["group"]))
    return levels
