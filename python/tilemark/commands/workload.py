"""`tilemark run` with a workload: a TOML file, a fio job file, --default, or flags describing
one stream. Validates everything before any IO, then locks, prepares, runs and stores."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from tilemark import cluster, fio, targets
from tilemark.commands import held
from tilemark.console import say
from tilemark.errors import UsageError
from tilemark.options.typed import Options
from tilemark.run.fio_groups import FioGroupsMonitor
from tilemark.run.fio_steady import FioSteadyMonitor
from tilemark.run.outcome import RunOutcome
from tilemark.run.runner import run_plan
from tilemark.run.steady import NOT_PER_REPETITION, RoundMonitor, steady_settings, steady_workload
from tilemark.run.where import Targets, inspect_and_compile
from tilemark.targets.spec import split_name
from tilemark.telemetry import prometheus
from tilemark.units import parse_size
from tilemark.workload import plan
from tilemark.workload.defaults import default_workload_doc

DEFAULT_TARGET = f"{targets.DEFAULT_DATA_DIR}/scratch.dat"


FIO_STEADY_ALONE = (
    "[steadystate] (fio's steady-state rule) ends a `tilemark run` of the workload; it does not "
    "combine with --until-steady, and repeat, tiles and studies measure for their own times."
)


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
        doc = default_workload_doc(target, size)
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


@dataclass(frozen=True)
class WorkloadSetup:
    """A workload checked and compiled on its inspected targets: nothing written yet."""

    workload: plan.Workload
    infos: Targets
    compiled: dict[str, Any]
    overridden: tuple[str, ...]  # 'flag value overrides key = value' in the workload file
    notes: tuple[str, ...]  # what a fio job file's translation changed

    def print_notes(self, console: Console, workload_file: Path | None) -> None:
        for note in self.notes:
            say(console, f"note: {note}")
        if self.overridden:
            console.print(
                f"note: {'; '.join(self.overridden)} in {workload_file}",
                markup=False,
                soft_wrap=True,
            )


def setup(
    opts: Options, workload_file: Path | None, *, until_steady: bool = False
) -> WorkloadSetup:
    """The workload of a file, --default or the flags; its targets inspected and its plan
    compiled (no IO yet). `until_steady` False refuses --until-steady (repeat measures each
    repetition for --duration)."""
    overridden: list[str] = []
    notes: list[str] = []
    workload = build_workload(
        workload_file,
        opts.workload.run_doc(),
        dict(opts.workload.stream),
        use_default=opts.workload.use_default,
        overridden=overridden,
        notes=notes,
    )
    steady = steady_settings(opts)
    if steady is not None:
        if not until_steady:
            raise UsageError(NOT_PER_REPETITION)
        workload = steady_workload(workload, steady)
    fio_rules = workload.steadystate is not None or bool(workload.stream_rules)
    if fio_rules and (steady is not None or not until_steady):
        raise UsageError(FIO_STEADY_ALONE)
    infos, compiled = inspect_and_compile(workload, **opts.safety.inspect_kwargs())
    return WorkloadSetup(workload, infos, compiled, tuple(overridden), tuple(notes))


def run(
    opts: Options, workload_file: Path | None, *, argv: list[str], console: Console
) -> RunOutcome:
    """Validate, lock and prepare the targets, run and store a workload (on the cluster of
    --cluster when given); the stored run's outcome. Notes go to `console`; Interrupted when
    Ctrl-C stops the preparation."""
    with cluster.opened(opts.cluster, force=opts.safety.force):
        ready = setup(opts, workload_file, until_steady=True)
        prometheus.from_options(opts.output, console)
        steady = steady_settings(opts)
        monitor: RoundMonitor | FioSteadyMonitor | FioGroupsMonitor | None = None
        if steady is not None:
            monitor = RoundMonitor(ready.compiled, steady)
        elif ready.workload.stream_rules:
            if opts.cluster.cluster:
                raise UsageError(
                    "[[steadystate]] rules with ends = 'streams' stop streams of one engine; "
                    "they are not available with --cluster."
                )
            monitor = FioGroupsMonitor.for_workload(ready.workload)
        elif ready.workload.steadystate is not None:
            monitor = FioSteadyMonitor.for_workload(ready.workload)
        ready.print_notes(console, workload_file)
        with held(ready.infos, argv, console):
            return run_plan(
                ready.workload,
                ready.infos,
                ready.compiled,
                results=opts.output.results,
                argv=argv,
                console=console,
                label=opts.output.label,
                analyze=monitor.analyze if monitor is not None else None,
                monitor=monitor,
                note=steady.describe()
                if steady is not None
                else ready.workload.steadystate.describe()
                if ready.workload.steadystate is not None
                else None,
            )
