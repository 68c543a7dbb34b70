"""tilemark from Python: run workloads and scaling studies, open stored runs and studies, and
read their intervals, summaries and histograms as Arrow tables or pandas DataFrames
(docs/python.md).

The CLI's `run` and `scale` are built on this module: they parse the command line into the
same option values (tilemark/options.py), call `execute_workload` / `execute_scale`, and print.
Keyword arguments here are the option table's keys (`rw="randread"`, `qd=32`, `duration="10s"`),
validated exactly as the flags are, with the same one-sentence UsageError for bad values.

Percentiles always come from merged histograms, never from averaged percentiles.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from rich.console import Console

from tilemark import cluster, fio, targets
from tilemark.errors import UsageError
from tilemark.hist import Histogram
from tilemark.options import OPTIONS, RUN, SCALE, label_of, option, safety
from tilemark.report.data import (
    DATA_OPS,
    RunData,
    StudyData,
    load_source,
    merged_run_hist,
)
from tilemark.run.outcome import RunOutcome
from tilemark.run.runner import prepare, run_plan
from tilemark.run.steady import (
    NOT_PER_REPETITION,
    RoundMonitor,
    steady_settings,
    steady_workload,
)
from tilemark.run.where import Targets, inspect_and_compile, lock
from tilemark.store import catalog
from tilemark.targets.spec import split_name
from tilemark.telemetry import prometheus as metrics
from tilemark.units import parse_size
from tilemark.workload import plan

DEFAULT_RESULTS = Path("tilemark-results")
DEFAULT_TARGET = f"{targets.DEFAULT_DATA_DIR}/scratch.dat"


# -----------------------------------------------------------------------------------------------
# Option values, as the CLI passes them


def values_from(flags: dict[str, Any], mode: str) -> dict[str, Any]:
    """Keyword arguments (option keys) as the CLI's option values for `mode`; an unknown or
    inapplicable name is a UsageError naming it."""
    by_name = {}
    for o in OPTIONS:
        if o.flag and mode in o.modes:
            by_name.setdefault(o.key, o)
            by_name.setdefault(o.param, o)
    values: dict[str, Any] = {}
    for name, value in flags.items():
        o = by_name.get(name)
        if o is None:
            raise UsageError(
                f"{name} is not an option of {mode}; see docs/options.md for the keys "
                f"(e.g. rw, bs, qd, duration)."
            )
        if o.kind == "list" and isinstance(value, str):
            value = [value]
        elif o.kind not in ("switch", "list", "int") and value is not None:
            value = str(value) if not isinstance(value, str) else value
        values[o.param] = value
    return values


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def build_workload(
    workload_file: Path | None,
    run_flags: dict[str, Any],
    stream_flags: dict[str, Any],
    *,
    use_default: bool,
    overridden: list[str] | None = None,
    notes: list[str] | None = None,
) -> plan.Workload:
    """The validated workload from a TOML file, a fio job file, the built-in default, or flags
    alone. `overridden` receives 'flag value overrides key = value' for flags that replace
    values of the workload file; `notes` what the translation of a fio job file (JOB.fio)
    changed."""
    flag_keys = frozenset(run_flags) | frozenset(stream_flags)
    if use_default:
        if workload_file is not None:
            raise UsageError(
                "--default runs the built-in workload and cannot be combined with a workload "
                f"file ({workload_file}); pass one or the other."
            )
        if stream_flags:
            key = next(iter(stream_flags))
            raise UsageError(
                f"{_flag(key)} sets a single stream and cannot be combined with --default, "
                "which runs several; write a workload file to change its streams."
            )
        target = run_flags.get("target", DEFAULT_TARGET)
        if "size" in run_flags:
            size = parse_size(run_flags["size"], "--size")
        else:
            # Every target gets the same layout: the smallest default size fits them all.
            paths = [split_name(t)[1] for t in ([target] if isinstance(target, str) else target)]
            size = min(targets.default_size(p) for p in paths)
        doc = plan.default_workload_doc(target, size)
        doc.update({key: value for key, value in run_flags.items() if key != "size"})
        return plan.parse_workload(doc, source="default", flag_keys=flag_keys)

    if workload_file is not None:
        if workload_file.suffix == ".fio":
            translation = fio.translate(workload_file)
            doc = translation.doc
            if notes is not None:
                notes += translation.notes
        else:
            doc = plan.load_toml(workload_file)
        if overridden is not None:
            overridden += _overrides(doc, run_flags)
        doc.update(run_flags)
        if stream_flags:
            tables = doc.get("stream")
            if not (isinstance(tables, list) and len(tables) == 1 and isinstance(tables[0], dict)):
                count = len(tables) if isinstance(tables, list) else 0
                key = next(iter(stream_flags))
                raise UsageError(
                    f"{_flag(key)} sets a single stream, but {workload_file} has {count} "
                    "streams; set it in the file ([defaults] applies to every stream)."
                )
            if overridden is not None:
                overridden += _overrides(tables[0], stream_flags)
            tables[0].update(stream_flags)
        return plan.parse_workload(doc, source=str(workload_file), flag_keys=flag_keys)

    doc = {**run_flags, "stream": [dict(stream_flags)]}
    return plan.parse_workload(doc, source="flags", flag_keys=flag_keys)


def _overrides(table: dict[str, Any], flags: dict[str, Any]) -> list[str]:
    return [
        f"{_flag(k)} {v} overrides {k} = {table[k]!r}"
        for k, v in flags.items()
        if k in table and str(table[k]) != str(v)
    ]


def _scoped(values: dict[str, Any], scope: str, mode: str) -> dict[str, Any]:
    from tilemark.cli.params import scoped  # the CLI's reading of option values

    return scoped(values, scope, mode)


def workload_setup(
    values: dict[str, Any], workload_file: Path | None, *, until_steady: bool = False
) -> tuple[plan.Workload, Targets, dict[str, Any], list[str], list[str]]:
    """The workload of a file, --default or the flags; its targets inspected and its plan
    compiled (no IO yet); which flags overrode values of the file; notes on the workload."""
    given = _scoped(values, "run", RUN)
    run_flags = {k: v for k, v in given.items() if option("run", k).toml}
    if values.get("buffered"):
        run_flags["direct"] = False
    stream_flags = _scoped(values, "stream", RUN)
    overridden: list[str] = []
    notes: list[str] = []
    workload = build_workload(
        workload_file,
        run_flags,
        stream_flags,
        use_default=bool(values.get("use_default")),
        overridden=overridden,
        notes=notes,
    )
    steady = steady_settings(values)
    if steady is not None:
        if not until_steady:
            raise UsageError(NOT_PER_REPETITION)
        workload = steady_workload(workload, steady)
    infos, compiled = inspect_and_compile(workload, **safety(values))
    return workload, infos, compiled, overridden, notes


def execute_workload(
    values: dict[str, Any],
    workload_file: Path | None,
    *,
    argv: list[str],
    console: Console,
) -> RunOutcome | int:
    """Validate, prepare the target, run and store a workload; the stored run's outcome, or
    130 when interrupted while the target was being prepared. Notes go to `console`."""
    workload, infos, compiled, overridden, notes = workload_setup(
        values, workload_file, until_steady=True
    )
    label = label_of(values)
    metrics.from_values(values)
    steady = steady_settings(values)
    monitor = RoundMonitor(compiled, steady) if steady is not None else None
    for note in notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)
    if overridden:
        console.print(
            f"note: {'; '.join(overridden)} in {workload_file}", markup=False, soft_wrap=True
        )
    results = Path(values.get("results") or DEFAULT_RESULTS)
    with lock(infos, argv):
        if not prepare(infos, console):
            return 130
        return run_plan(
            workload,
            infos,
            compiled,
            results=results,
            argv=argv,
            console=console,
            label=label,
            analyze=monitor.analyze if monitor is not None else None,
            monitor=monitor,
            note=steady.describe() if steady is not None else None,
        )


# -----------------------------------------------------------------------------------------------
# Stored results


def _to_pandas(table: pa.Table) -> Any:
    try:
        import pandas  # noqa: F401  (pyarrow converts; the import only checks it is there)
    except ImportError:
        raise ImportError(
            "DataFrames need pandas: pip install 'tilemark[pandas]' (or pandas)."
        ) from None
    return table.to_pandas()


class Run:
    """A stored run: run.json, its intervals and its histograms."""

    def __init__(self, data: RunData):
        self._data = data

    def __repr__(self) -> str:
        return f"<tilemark Run {self.id} {self.status}>"

    @property
    def id(self) -> str:
        return self._data.run_id

    @property
    def dir(self) -> Path:
        return self._data.run_dir

    @property
    def status(self) -> str:
        """complete, incomplete, errors, hung, failed, killed, damaged or running."""
        return self._data.status

    @property
    def doc(self) -> dict[str, Any]:
        """run.json as stored (docs/results-schema.md)."""
        return self._data.doc

    @property
    def summary(self) -> dict[str, Any] | None:
        return self._data.summary

    @property
    def stream_names(self) -> list[str]:
        return self._data.stream_names

    def intervals(self, columns: list[str] | None = None) -> pa.Table:
        """One row per interval, stream and op (intervals.parquet; docs/results-schema.md)."""
        return self._data.read_intervals(columns)

    def intervals_df(self, columns: list[str] | None = None) -> Any:
        """`intervals()` as a pandas DataFrame."""
        return _to_pandas(self.intervals(columns))

    def streams(self) -> pa.Table:
        """The measurement window per stream and op: ops, IOPS, MB/s, errors and latency in ms
        (response time for open-loop streams, else service time)."""
        rows = []
        for i, name in enumerate(self.stream_names):
            for op in DATA_OPS:
                h = self.histogram(i, op)
                s = ((self.summary or {}).get("streams") or [{}] * (i + 1))[i].get(op) or {}
                if not h.n and not s.get("ops"):
                    continue
                rows.append(
                    {
                        "stream": name,
                        "op": op,
                        "ops": s.get("ops"),
                        "iops": s.get("iops"),
                        "mbps": s.get("mbps"),
                        "mean_ms": _ms(h.mean()),
                        "p50_ms": _ms(h.percentile(50.0)),
                        "p99_ms": _ms(h.percentile(99.0)),
                        "p999_ms": _ms(h.percentile(99.9)),
                        "max_ms": _ms(float(h.max)) if h.n else None,
                    }
                )
        return pa.Table.from_pylist(rows)

    def streams_df(self) -> Any:
        """`streams()` as a pandas DataFrame."""
        return _to_pandas(self.streams())

    def _stream_indexes(self, stream: str | int | list[str | int] | None) -> list[int] | None:
        if stream is None:
            return None
        wanted = stream if isinstance(stream, list) else [stream]
        out = []
        for s in wanted:
            if isinstance(s, int):
                if not 0 <= s < len(self.stream_names):
                    raise UsageError(f"stream {s} does not exist in run {self.id}.")
                out.append(s)
            elif s in self.stream_names:
                out.append(self.stream_names.index(s))
            else:
                names = ", ".join(self.stream_names)
                raise UsageError(f"run {self.id} has no stream {s!r}; its streams: {names}.")
        return out

    def histogram(
        self,
        stream: str | int | list[str | int] | None = None,
        op: str | None = None,
        kind: str = "response",
    ) -> Histogram:
        """The measurement window's latency histogram (ns) of some streams (all when None) and
        one op (read, write, sync; both data ops when None), merged. `kind` is `response`
        (from the intended issue time; service time for closed-loop streams) or `service`."""
        if op is not None and op not in ("read", "write", "sync"):
            raise UsageError(f"op must be read, write or sync, got {op!r}.")
        if kind not in ("response", "service"):
            raise UsageError(f"kind must be response or service, got {kind!r}.")
        return merged_run_hist(self._data, self._stream_indexes(stream), op, kind)

    def percentile(
        self,
        p: float,
        stream: str | int | list[str | int] | None = None,
        op: str | None = None,
        kind: str = "response",
    ) -> float | None:
        """The p-th percentile latency in ms of the merged histogram (None without IOs)."""
        return _ms(self.histogram(stream, op, kind).percentile(float(p)))


def _ms(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e6


class Study:
    """A stored study: study.json and the runs of its steps."""

    def __init__(self, data: StudyData):
        self._data = data

    def __repr__(self) -> str:
        return f"<tilemark Study {self.id} {self.doc.get('kind')}>"

    @property
    def id(self) -> str:
        return self._data.study_id

    @property
    def dir(self) -> Path:
        return self._data.study_dir

    @property
    def doc(self) -> dict[str, Any]:
        """study.json as stored (docs/studies.md)."""
        return self._data.doc

    @property
    def answer(self) -> float | None:
        """The largest passing tile count (or knob value), None when no step passed."""
        return self._data.answer

    def steps(self) -> pa.Table:
        """One row per run of every step: its key, repetition, verdict and run id."""
        rows = [
            {
                "key": s.key,
                "repeat": s.repeat,
                "verdict": s.step.get("verdict"),
                "run_id": s.step.get("run_id"),
            }
            for s in self._data.steps
        ]
        return pa.Table.from_pylist(rows)

    def runs(self) -> list[Run]:
        """The stored runs of the study's steps, in order (missing ones left out)."""
        return [Run(s.run) for s in self._data.steps if s.run is not None]


def open_run(name: str | Path, results: str | Path = DEFAULT_RESULTS) -> Run:
    """A stored run by directory, run id or unique id prefix."""
    source = load_source(str(name), Path(results))
    if not isinstance(source, RunData):
        raise UsageError(f"{name} is a study; use open_study.")
    return Run(source)


def open_study(name: str | Path, results: str | Path = DEFAULT_RESULTS) -> Study:
    """A stored study by directory, study id or unique id prefix."""
    source = load_source(str(name), Path(results))
    if not isinstance(source, StudyData):
        raise UsageError(f"{name} is a run; use open_run.")
    return Study(source)


def runs(results: str | Path = DEFAULT_RESULTS) -> pa.Table:
    """The catalog of stored runs (what `tilemark runs` lists), newest first."""
    return pa.Table.from_pylist(catalog.list_runs(Path(results)))


# -----------------------------------------------------------------------------------------------
# Running


@dataclass
class _Quiet:
    """Where progress goes: nowhere (default), or stderr with verbose=True."""

    verbose: bool

    def console(self) -> Console:
        if self.verbose:
            return Console(stderr=True, highlight=False)
        return Console(file=io.StringIO(), highlight=False)


def _argv(command: str, path: str | Path | None, flags: dict[str, Any]) -> list[str]:
    """How the run is recorded in run.json's argv: the API call and its arguments."""
    return [
        f"tilemark.api.{command}",
        *([str(path)] if path else []),
        *(f"{k}={v}" for k, v in flags.items()),
    ]


def run(
    workload: str | Path | None = None,
    *,
    results: str | Path = DEFAULT_RESULTS,
    verbose: bool = False,
    **flags: Any,
) -> Run:
    """Run a workload file (TOML or fio job), or one stream described by option keys
    (`run(target="t.dat", size="1g", rw="randread", qd=32, duration="10s")`), and return the
    stored run. Safety is the CLI's: `destroy_data="/dev/sdX"` to write a device. A failed or
    interrupted run is returned too: check `status`."""
    values = values_from(flags, RUN)
    if values.get("tile_count") is not None or values.get("tile_file") is not None:
        raise UsageError(
            "tile runs are api.scale(counts=N) here (tilemark run --tiles N on the command "
            "line); api.run runs workloads."
        )
    values["results"] = str(results)
    path = Path(workload) if workload is not None else None
    argv = [
        "tilemark.api.run",
        *([str(path)] if path else []),
        *(f"{k}={v}" for k, v in flags.items()),
    ]
    with cluster.opened(values):
        outcome = execute_workload(values, path, argv=argv, console=_Quiet(verbose).console())
    if isinstance(outcome, int):
        raise KeyboardInterrupt
    return open_run(outcome.run_dir, results)


def scale(
    tile: str | Path | None = None,
    *,
    results: str | Path = DEFAULT_RESULTS,
    verbose: bool = False,
    **flags: Any,
) -> Study:
    """A scaling study (`tilemark scale`): tile counts (`counts="1..4"`) or a knob search
    (`knob="mail.mailboxes"`), with the option keys of scale; returns the stored study."""
    from tilemark.study.scale import execute_scale

    values = values_from(flags, SCALE)
    values["results"] = str(results)
    argv = [
        "tilemark.api.scale",
        *([str(tile)] if tile else []),
        *(f"{k}={v}" for k, v in flags.items()),
    ]
    with cluster.opened(values):
        outcome, _ = execute_scale(
            values,
            Path(tile) if tile else None,
            argv=argv,
            console=_Quiet(verbose).console(),
            events=None,
        )
    if isinstance(outcome, int):
        raise KeyboardInterrupt
    return open_study(outcome.path, results)
