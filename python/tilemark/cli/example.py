"""`tilemark example`: the seed studies as commands to run (tilemark/example.py)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tilemark.cli.common import DEFAULT_RESULTS
from tilemark.console import make_console
from tilemark.errors import UsageError
from tilemark.example import find_example, list_examples, plan_example, run_example

example_app = typer.Typer(
    help="The seed studies as examples: list them, show one, run one (--quick: in seconds).",
    invoke_without_command=True,
    no_args_is_help=False,
)


@example_app.callback()
def examples(ctx: typer.Context) -> None:
    """List the examples: name, seed, what they reproduce."""
    if ctx.invoked_subcommand is not None:
        return
    table = Table(title="examples (tilemark example show NAME)", title_justify="left")
    for col in ("name", "seed", "targets", "steps", "title"):
        table.add_column(col)
    for e in list_examples():
        steps = ", ".join(s.args[0] for s in e.steps)
        table.add_row(e.name, e.seed, ", ".join(e.targets), steps, e.title)
    console = make_console(stderr=False)
    console.print(table)


README_WIDTH = 100


def step_outcome(status: int) -> str:
    """What a step's exit status means, in words (docs/results-schema.md, exit statuses)."""
    words = {
        0: "done (exit 0)",
        1: "a run failed (exit 1)",
        2: "bad input (exit 2)",
        3: "QoS failed (exit 3): an answer, not an error",
    }
    if status in words:
        return words[status]
    return f"interrupted (exit {status})" if status > 128 else f"exit {status}"


def _shown(argv: list[str]) -> str:
    return "tilemark " + shlex.join(argv)


@example_app.command("show")
def show(
    name: Annotated[str, typer.Argument(metavar="NAME", help="Example name or seed number.")],
) -> None:
    """An example's README (setup, commands, outputs by the seed's captions) and its files."""
    from rich.markdown import Markdown

    e = find_example(name)
    console = make_console(stderr=False)
    # Rendered, not raw: headings, lists, tables and code blocks as a terminal shows them;
    # prose at most README_WIDTH wide (a pipe has no width) and without trailing padding.
    with console.capture() as captured:
        console.print(
            Markdown(e.readme.read_text(encoding="utf-8").rstrip()),
            width=min(console.width, README_WIDTH),
        )
    for line in captured.get().splitlines():
        console.file.write(line.rstrip() + "\n")
    lines = ["", f"files: {e.directory}"]
    lines += [f"  {f}" for f in sorted(p.name for p in e.directory.iterdir())]
    placeholders = [f"<{t}>" for t in e.targets]
    for quick in (False, True):
        plan = plan_example(e, placeholders, quick=quick, results=DEFAULT_RESULTS)
        lines += ["", "quick form (--quick):" if quick else "commands:"]
        lines += ["  " + _shown(argv) for argv in plan.commands]
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


@example_app.command(
    "run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
)
def run(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="Example name or seed number.")],
    target: Annotated[
        list[str] | None,
        typer.Option(
            "--target",
            metavar="PATH",
            help="Where the example runs (repeat for examples with several targets, in the "
            "order `tilemark example` lists them). Files are created; a block device needs "
            "--destroy-data.",
        ),
    ] = None,
    quick: Annotated[
        bool,
        typer.Option(
            "--quick",
            help="Scale durations, sizes and steps down (seconds on a small file) to check "
            "the example end to end; the numbers are not the seed's.",
        ),
    ] = False,
    destroy_data: Annotated[
        list[str] | None,
        typer.Option(
            "--destroy-data",
            metavar="PATH",
            help="Allow writing the block device PATH (one of the targets); destroys its data.",
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="With --destroy-data: as for tilemark run.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the commands; run nothing.")
    ] = False,
    results: Annotated[
        Path, typer.Option("--results", metavar="DIR", help="Results directory.")
    ] = DEFAULT_RESULTS,
) -> None:
    """Run an example's commands in order; flags after -- (e.g. -- --capacity 2t) replace the
    steps' own or are added to the steps that use a target."""
    from tilemark.cli import main

    e = find_example(name)
    if not target:
        raise UsageError(
            f"--target is required: example {e.name} runs on {len(e.targets)} target(s) "
            f"({', '.join(e.targets)})."
        )
    plan = plan_example(
        e,
        target,
        quick=quick,
        results=results,
        extra=ctx.args,
        destroy_data=destroy_data or [],
        force=force,
    )
    if dry_run:
        for argv in plan.commands:
            typer.echo(_shown(argv))
        return
    done = run_example(plan, results, main, lambda line: typer.echo(line, err=True))
    typer.echo("")
    typer.echo(f"example {e.name} (seed {e.seed}){' --quick' if quick else ''}:")
    for r in done:
        typer.echo(f"  {r.step.name}: {step_outcome(r.status)}")
        if r.study is not None:
            typer.echo(f"    study: {r.study}")
        for out, path in r.outputs:
            mark = "" if path.exists() else " (missing)"
            typer.echo(f"    {out.seed} -> {path}{mark}")
    failed = next((r.status for r in done if r.status not in (0, 3)), None)
    if failed is not None:
        raise typer.Exit(failed)
    qos = [r.step.name for r in done if r.status == 3]
    if qos:
        typer.echo(
            f"exit status 3: QoS failed in {', '.join(qos)}; a failed QoS is an answer about "
            "the storage (how much it carries), not an error of the example",
            err=True,
        )
        raise typer.Exit(3)  # QoS failed somewhere: an answer, reported like `scale` does
