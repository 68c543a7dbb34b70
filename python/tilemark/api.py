"""tilemark from Python: run workloads and scaling studies, open stored runs and studies, and
read their intervals, summaries and histograms as Arrow tables or pandas DataFrames
(docs/python.md).

The CLI and this module call the same commands (tilemark.commands): both turn what they were
given into the typed options of tilemark.options.typed through one constructor. Keyword
arguments here are the option table's keys (`rw="randread"`, `qd=32`, `duration="10s"`),
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

from tilemark.commands import Interrupted
from tilemark.commands import points as points_command
from tilemark.commands import precondition as precondition_command
from tilemark.commands import repeat as repeat_command
from tilemark.commands import scale as scale_command
from tilemark.commands import tiles as tiles_command
from tilemark.commands import workload as workload_command
from tilemark.errors import UsageError
from tilemark.hist import Histogram
from tilemark.interrupts import Signalled, handled
from tilemark.options import CURVE, MATRIX, OPTIONS, PRECONDITION, RUN, SCALE, SWEEP, TILES
from tilemark.options.typed import DEFAULT_RESULTS, Options
from tilemark.report.data import (
    DATA_OPS,
    RunData,
    StudyData,
    load_source,
    merged_run_hist,
)
from tilemark.store import catalog

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

    def file_ops(self) -> pa.Table:
        """File streams (a file run, a tile's file applications): per stream and operation over
        the measurement, ops, ops/s (`rate`), bytes, skipped, errors and latency in us."""
        import pyarrow as pa

        files = (self.summary or {}).get("files") or {}
        rows = [
            {"stream": s["name"], "app": s.get("app"), **o,
             "errors": sum((o.get("errors") or {}).values())}
            for s in files.get("streams") or []
            for o in s.get("ops") or []
        ]  # fmt: skip
        return pa.Table.from_pylist(rows)

    def file_ops_df(self) -> Any:
        """`file_ops()` as a pandas DataFrame."""
        return _to_pandas(self.file_ops())

    def file_intervals_df(self) -> Any:
        """file_intervals.parquet (per interval, stream and operation) as a pandas DataFrame."""
        import pyarrow as pa

        from tilemark.files.window import FILE_INTERVALS, read_intervals

        name = (self.doc.get("files") or {}).get("file_intervals") or FILE_INTERVALS
        return _to_pandas(pa.Table.from_pylist(read_intervals(self._data.run_dir / name)))

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


def _options(flags: dict[str, Any], mode: str, results: str | Path) -> Options:
    """Keyword arguments as the typed options of `mode`, through the constructor the CLI uses."""
    values = values_from(flags, mode)
    values["results"] = str(results)
    return Options.from_values(values, mode)


def _ran(call: Any) -> Any:
    """A command's outcome; KeyboardInterrupt when it was interrupted before storing anything.
    SIGINT and SIGTERM are handled as on the command line (tilemark.interrupts) for the call."""
    try:
        with handled():
            return call()
    except (Interrupted, Signalled):
        raise KeyboardInterrupt from None


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
    if "tiles" in flags or "tile_count" in flags:
        raise UsageError(
            "tile runs are api.tiles(N) here (tilemark run --tiles N on the command line); "
            "api.run runs workloads."
        )
    opts = _options(flags, RUN, results)
    path = Path(workload) if workload is not None else None
    argv = _argv("run", path, flags)
    outcome = _ran(
        lambda: workload_command.run(opts, path, argv=argv, console=_Quiet(verbose).console())
    )
    return open_run(outcome.run_dir, results)


def tiles(
    count: int,
    tile: str | Path | None = None,
    *,
    results: str | Path = DEFAULT_RESULTS,
    verbose: bool = False,
    **flags: Any,
) -> Run:
    """`tilemark run --tiles N`: `count` tiles of the default tile (or of `tile`, a tile file
    or a profile), judged per application; the stored run (its summary's `applications`)."""
    flags = {**flags, "tile_count": count, **({"tile_file": str(tile)} if tile else {})}
    opts = _options(flags, TILES, results)
    argv = _argv("tiles", None, flags)
    _, outcome = _ran(lambda: tiles_command.run(opts, argv=argv, console=_Quiet(verbose).console()))
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
    opts = _options(flags, SCALE, results)
    argv = _argv("scale", tile, flags)
    _, outcome = _ran(
        lambda: scale_command.run(
            opts,
            Path(tile) if tile else None,
            argv=argv,
            console=_Quiet(verbose).console(),
            events=None,
        )
    )
    return open_study(outcome.path, results)


def repeat(
    count: int,
    workload: str | Path | None = None,
    *,
    results: str | Path = DEFAULT_RESULTS,
    verbose: bool = False,
    **flags: Any,
) -> Study:
    """`tilemark repeat N`: the workload (or `tiles=N` tiles) run `count` times, studied for
    decay (`pause`, `between` as on the command line); returns the stored study."""
    mode = TILES if flags.get("tiles") or flags.get("tile_count") else RUN
    if "tiles" in flags:
        flags = {**{k: v for k, v in flags.items() if k != "tiles"}, "tile_count": flags["tiles"]}
    opts = _options(flags, mode, results)
    path = Path(workload) if workload is not None else None
    argv = _argv("repeat", path, flags)
    outcome = _ran(
        lambda: repeat_command.run(count, opts, path, argv=argv, console=_Quiet(verbose).console())
    )
    return open_study(outcome.path, results)


def _points(mode: str, results: str | Path, verbose: bool, flags: dict[str, Any]) -> Study:
    opts = _options(flags, mode, results)
    argv = _argv(mode, None, flags)
    outcome = _ran(
        lambda: points_command.COMMANDS[mode](
            opts, argv=argv, console=_Quiet(verbose).console(), progress=lambda total: None
        )
    )
    return open_study(outcome.path, results)


def sweep(*, results: str | Path = DEFAULT_RESULTS, verbose: bool = False, **flags: Any) -> Study:
    """`tilemark sweep`: one run per point of the lists (`sweep_bs="4k,64k"`, `sweep_qd=
    "1,2,4,...,32"`, `sweep_read`, `sweep_region`); returns the stored study."""
    return _points(SWEEP, results, verbose, flags)


def matrix(*, results: str | Path = DEFAULT_RESULTS, verbose: bool = False, **flags: Any) -> Study:
    """`tilemark matrix`: Orion's matrix (`small_qd`, `large_streams`, ...)."""
    return _points(MATRIX, results, verbose, flags)


def curve(*, results: str | Path = DEFAULT_RESULTS, verbose: bool = False, **flags: Any) -> Study:
    """`tilemark curve`: the load/latency curve and, with `slo="p99<=2ms"`, the IOPS at it."""
    return _points(CURVE, results, verbose, flags)


def precondition(
    *, results: str | Path = DEFAULT_RESULTS, verbose: bool = False, **flags: Any
) -> list[dict[str, Any]]:
    """`tilemark precondition` (`precondition_targets=[...]`, `passes`, `size`): each target's
    preconditioning record; KeyboardInterrupt when interrupted (the passes so far recorded)."""
    opts = _options(flags, PRECONDITION, results)
    done, status = precondition_command.run(
        opts, argv=_argv("precondition", None, flags), console=_Quiet(verbose).console()
    )
    if status:
        raise KeyboardInterrupt
    return [d.info.preconditioning for d in done]
