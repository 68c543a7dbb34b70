"""The `tilemark` command line: one module per subcommand, errors as one sentence."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from typer import _click as click  # typer vendors click; parse errors are its exceptions
from typer.core import TyperGroup

from tilemark.cli.nopandas import without_pandas
from tilemark.errors import RunError, UsageError, bounded
from tilemark.interrupts import INTERRUPTS, Interrupted, handled, signal_name, status_of

USAGE_EXIT = 2
FAILURE_EXIT = 1


@dataclass(frozen=True)
class Entry:
    """A subcommand: where its typer function (or Typer group) lives, and its one-line help,
    so `tilemark --help` lists every command without importing any (tests check the help
    matches the command's own)."""

    module: str
    attr: str
    help: str
    no_args_is_help: bool = True


COMMANDS: dict[str, Entry] = {
    "run": Entry("tilemark.cli.run", "run", "Run a workload: a TOML file, fio-like flags for "
                 "one stream, --default, or --tiles N."),
    "runs": Entry("tilemark.cli.runs", "runs_app", "List stored runs, newest first; `runs rm` "
                  "and `runs prune` delete them.", no_args_is_help=False),
    "studies": Entry("tilemark.cli.studies", "studies", "List stored studies, newest first: "
                     "kind, steps, result, status.", no_args_is_help=False),
    "scale": Entry("tilemark.cli.scale", "scale", "Add tiles until an application's QoS "
                   "fails; report the largest passing count."),
    "repeat": Entry("tilemark.cli.repeat", "repeat", "Run the same workload (or --tiles N) N "
                    "times and report whether it is stable, decaying or improving."),
    "sweep": Entry("tilemark.cli.points", "sweep", "Sweep one stream's IO size, queue depth, "
                   "read % and region."),
    "matrix": Entry("tilemark.cli.points", "matrix", "Orion's matrix: small random IOs at "
                    "outstanding-IO levels against large sequential streams."),
    "curve": Entry("tilemark.cli.points", "curve", "The load/latency curve: the maximum IOPS, "
                   "then offered loads, and the IOPS at a latency objective."),
    "precondition": Entry("tilemark.cli.precondition", "precondition_command", "Precondition "
                          "targets as the SNIA PTS prescribes: sequential write passes."),
    "report": Entry("tilemark.cli.report", "report", "Write a report of a run or a study: "
                    "verdict, charts, tables, provenance."),
    "compare": Entry("tilemark.cli.compare", "compare", "Compare runs or studies of one "
                     "workload, normalized to a baseline."),
    "export": Entry("tilemark.cli.export", "export", "Export interval rows and summaries as "
                    "CSV, or a run as a fio job file."),
    "verify": Entry("tilemark.cli.verify", "verify", "Verify a run's or a target's data: "
                    "MB/s, time taken, findings."),
    "attach": Entry("tilemark.cli.attach", "attach_command", "Attach time-stamped counters "
                    "from the storage side (array statistics) to a run."),
    "import-fio": Entry("tilemark.cli.fio", "import_fio", "Translate a fio job file into a "
                        "tilemark workload (TOML), naming what does not translate."),
    "profiles": Entry("tilemark.cli.profiles", "profiles_app", "List built-in and user "
                      "application profiles; `profiles show NAME` explains one.",
                      no_args_is_help=False),
    "example": Entry("tilemark.cli.example", "example_app", "The seed studies as examples: "
                     "list them, show one, run one.", no_args_is_help=False),
    "trace": Entry("tilemark.cli.trace", "trace_app", "Capture, import and look at block "
                   "traces of real applications (docs/traces.md)."),
    "replay": Entry("tilemark.cli.replay", "replay_command", "Replay block traces against a "
                    "target at their own times, as fast as they allow, or at a depth."),
    "learn": Entry("tilemark.cli.learn", "learn", "Learn a profile from block traces: streams, "
                   "rates, mixes, placement, sync; it runs in tiles (docs/learn.md)."),
    "files": Entry("tilemark.cli.files", "files_app", "File sets and file/metadata workloads: "
                   "prepare a set, run its streams (docs/files.md)."),
    "fidelity": Entry("tilemark.cli.fidelity", "fidelity", "How closely two IO streams agree, "
                      "property by property (docs/fidelity.md)."),
}  # fmt: skip


def load_command(name: str) -> click.Command:
    """The click command of subcommand `name`, importing its module now."""
    import importlib

    entry = COMMANDS[name]
    obj = getattr(importlib.import_module(entry.module), entry.attr)
    if isinstance(obj, typer.Typer):
        obj.rich_markup_mode = None  # plain help for every group, as for the commands
        obj._add_completion = False  # completion is not offered (TYPER_SETTINGS)
        command = typer.main.get_command(obj)
    else:
        single = typer.Typer(**TYPER_SETTINGS)
        single.command(name, no_args_is_help=entry.no_args_is_help)(obj)
        command = typer.main.get_command(single)
    command.name = name
    return command


class _Commands(Mapping[str, click.Command]):
    """Subcommands by name, each loaded on first use (what click's suggestions and lookups
    see as the group's `commands`)."""

    def __init__(self) -> None:
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in COMMANDS:
            raise KeyError(name)
        if name not in self._loaded:
            self._loaded[name] = load_command(name)
        return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS)


class LazyGroup(TyperGroup):
    """The `tilemark` group: a subcommand's module (and the libraries it needs: pyarrow,
    duckdb, altair, scipy) is imported only when that subcommand runs, so `--help`, `runs` or
    `import-fio` do not pay for the others."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.commands = _Commands()  # type: ignore[assignment]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, entry.help) for name, entry in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


TYPER_SETTINGS: dict[str, Any] = {
    # Plain errors and help: users paste them into tickets and scripts parse them.
    "rich_markup_mode": None,
    "pretty_exceptions_enable": False,
    "add_completion": False,
}

app = typer.Typer(
    name="tilemark",
    help="Mixed-workload storage benchmark: how much real application load does it carry?",
    cls=LazyGroup,
    no_args_is_help=True,
    **TYPER_SETTINGS,
)


def _version(value: bool) -> None:
    if value:
        import tilemark

        print(f"tilemark {tilemark.__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Mixed-workload storage benchmark: how much real application load does it carry?"""


def _error(message: str) -> None:
    message = bounded(message.strip())
    if message and message[-1] not in ".!?":
        message += "."
    print(f"tilemark: error: {message}", file=sys.stderr, flush=True)


def _failures() -> tuple[type[Exception], ...]:
    """Failures reported as one sentence with exit 1 (imported only when one happens: the
    store's errors live beside DuckDB)."""
    from tilemark.engine import EngineError
    from tilemark.store.rundoc import StoreError

    return (EngineError, RunError, StoreError)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI and return the exit status (2 bad input, 1 failure)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) > 1 and args[0] == "repeat" and re.fullmatch(r"-\d+(\.\d*)?", args[1]):
        # The parser would take a negative count for an unknown option.
        from tilemark.options import MAX_REPETITIONS

        _error(
            f"N (the number of repetitions) must be an integer from 1 to {MAX_REPETITIONS}, "
            f"got {args[1]}"
        )
        return USAGE_EXIT
    _tolerant_output()
    try:
        with handled(), without_pandas():
            status = typer.main.get_command(app).main(
                args=args,
                prog_name="tilemark",
                standalone_mode=False,
                obj={"argv": ["tilemark", *args]},
            )
    except click.exceptions.NoArgsIsHelpError as e:
        print(e.format_message(), file=sys.stderr)
        return USAGE_EXIT
    except click.exceptions.ClickException as e:
        hint = ""
        ctx = getattr(e, "ctx", None)
        if isinstance(e, click.exceptions.UsageError) and ctx is not None:
            hint = f" (see {ctx.command_path} --help)"
        _error(e.format_message().rstrip(".") + hint)
        return e.exit_code
    except typer.Abort:
        _error("aborted")
        return FAILURE_EXIT
    except UsageError as e:
        _error(str(e))
        return USAGE_EXIT
    except Exception as e:
        if not isinstance(e, _failures()):
            raise
        _error(str(e))
        return FAILURE_EXIT
    except Interrupted as e:
        return e.status
    except INTERRUPTS as e:
        status = status_of(e)
        _error(f"interrupted by {signal_name(status)}")
        return status
    return status if isinstance(status, int) else 0


def _tolerant_output() -> None:
    """Characters the terminal's encoding cannot show (a label in another script under
    PYTHONIOENCODING=ascii or a C locale) are escaped, never an error."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):
                pass  # a stream that cannot change (closed, or not text): leave it
