"""The `tilemark` command line: one module per subcommand, errors as one sentence."""

from __future__ import annotations

import re
import sys

import typer
from typer import _click as click  # typer vendors click; parse errors are its exceptions

from tilemark.cli.attach import attach_command
from tilemark.cli.compare import compare
from tilemark.cli.example import example_app
from tilemark.cli.export import export
from tilemark.cli.fio import import_fio
from tilemark.cli.points import curve, matrix, sweep
from tilemark.cli.precondition import precondition_command
from tilemark.cli.profiles import profiles_app
from tilemark.cli.repeat import repeat
from tilemark.cli.replay import replay_command
from tilemark.cli.report import report
from tilemark.cli.run import run
from tilemark.cli.runs import runs_app
from tilemark.cli.scale import scale
from tilemark.cli.studies import studies
from tilemark.cli.trace import trace_app
from tilemark.cli.verify import verify
from tilemark.engine import EngineError
from tilemark.errors import RunError, UsageError
from tilemark.store import StoreError

USAGE_EXIT = 2
FAILURE_EXIT = 1

app = typer.Typer(
    name="tilemark",
    help="Mixed-workload storage benchmark: how much real application load does it carry?",
    # Plain errors and help: users paste them into tickets and scripts parse them.
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    add_completion=False,
    no_args_is_help=True,
)
app.command("run", no_args_is_help=True)(run)
app.add_typer(runs_app, name="runs")
app.command("studies")(studies)
app.command("scale", no_args_is_help=True)(scale)
app.command("repeat", no_args_is_help=True)(repeat)
app.command("sweep", no_args_is_help=True)(sweep)
app.command("matrix", no_args_is_help=True)(matrix)
app.command("curve", no_args_is_help=True)(curve)
app.command("precondition", no_args_is_help=True)(precondition_command)
app.command("report", no_args_is_help=True)(report)
app.command("compare", no_args_is_help=True)(compare)
app.command("replay", no_args_is_help=True)(replay_command)
app.command("export", no_args_is_help=True)(export)
app.command("verify", no_args_is_help=True)(verify)
app.command("attach", no_args_is_help=True)(attach_command)
app.command("import-fio", no_args_is_help=True)(import_fio)
app.add_typer(profiles_app, name="profiles")
app.add_typer(example_app, name="example")
app.add_typer(trace_app, name="trace")


def _error(message: str) -> None:
    message = message.strip()
    if message and message[-1] not in ".!?":
        message += "."
    print(f"tilemark: error: {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI and return the exit status (2 bad input, 1 failure)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) > 1 and args[0] == "repeat" and re.fullmatch(r"-\d+(\.\d*)?", args[1]):
        # The parser would take a negative count for an unknown option.
        from tilemark.study.repeat import MAX_REPETITIONS

        _error(
            f"N (the number of repetitions) must be an integer from 1 to {MAX_REPETITIONS}, "
            f"got {args[1]}"
        )
        return USAGE_EXIT
    command = typer.main.get_command(app)
    try:
        status = command.main(
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
    except (EngineError, RunError, StoreError) as e:
        _error(str(e))
        return FAILURE_EXIT
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    return status if isinstance(status, int) else 0
