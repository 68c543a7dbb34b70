"""What the run and study commands share: consoles, JSON output, the result and QoS lines."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from tilemark import targets
from tilemark.console import make_console, say
from tilemark.wording import counted

if TYPE_CHECKING:
    from tilemark.run.outcome import RunOutcome

# What prints a finished run (run.live, analysis.tiles, telemetry: pyarrow and more) is imported
# by the functions that print one: every command imports this module, and bad input must be
# refused before those load (the CLI starts in < 0.3 s).

DEFAULT_TARGET = f"{targets.DEFAULT_DATA_DIR}/scratch.dat"
from tilemark.options.typed import DEFAULT_RESULTS  # noqa: E402, F401  (one definition)

# Exit statuses (docs/results-schema.md): 0 ok, 1 a run failed, 2 bad input, 3 QoS failed,
# 128 + signal when interrupted.
EXIT_QOS = 3
KERNEL_SHOWN = 5  # kernel messages printed after a run; run.json and the report keep 20


def argv_of(ctx: typer.Context) -> list[str]:
    """The command line as the user typed it (recorded with every run)."""
    return (ctx.obj or {}).get("argv") or ["tilemark", *sys.argv[1:]]


def consoles(json_out: bool) -> tuple[Console, Console]:
    """(out, err): tables go to stdout, or to stderr when stdout carries JSON."""
    err = make_console(stderr=True)
    return (err if json_out else make_console(stderr=False)), err


def write_json(outcome: RunOutcome, body: dict[str, Any]) -> None:
    """The machine-readable result of a run on stdout."""
    doc = {
        "run_id": outcome.run_id,
        "run_dir": str(outcome.run_dir.resolve()),
        "complete": outcome.complete,
        **body,
    }
    from tilemark.store.rundoc import dumps_indented

    sys.stdout.write(dumps_indented(doc) + "\n")
    sys.stdout.flush()


def print_run(outcome: RunOutcome, out: Console, err: Console) -> None:
    """The final per-stream table, where results are, and how the run ended."""
    from tilemark.analysis.changepoints import change_text
    from tilemark.run import datareduction
    from tilemark.run.live import (
        front_back_table,
        host_line,
        hosts_table,
        results_table,
        targets_table,
    )
    from tilemark.run.overhead import overhead_line
    from tilemark.store.results import kernel_messages
    from tilemark.targets import verification
    from tilemark.telemetry.sampler import tool_bound_line

    status_word = {"errors": "IO errors", "hung": "IO hung", "data-errors": "data errors"}.get(
        outcome.status, outcome.status
    )
    title = f"run {outcome.run_id} ({status_word})"
    if outcome.compiled["streams"]:  # none: a tile of file applications only (its own table)
        out.print(results_table(outcome.compiled, outcome.summary, title))
    else:
        say(out, title)
    per_target = targets_table(outcome.summary)
    if per_target is not None:
        out.print(per_target)
    hosts = outcome.summary.get("hosts")
    if hosts:
        out.print(hosts_table([("", h) for h in hosts], "per host (merged above)"))
    front_back = front_back_table(outcome.summary)
    if front_back is not None:
        out.print(front_back)
    host = host_line(outcome.summary)
    if host is not None:
        say(out, host)
    overhead = overhead_line(outcome.summary.get("overhead"))
    if overhead is not None:
        say(out, overhead)
    bound = tool_bound_line(outcome.summary.get("tool_bound"))
    if bound is not None:
        say(err, bound)
    out.print(f"results: {outcome.run_dir}", markup=False)
    pre = outcome.summary.get("preconditioning") or {}
    if pre.get("record"):
        shown = targets.describe_precondition(pre["record"])
        out.print(f"target preconditioned {shown}", markup=False)
    checked = outcome.summary.get("verification")
    if checked is not None:
        say(out, verification.line(checked))
        for f in checked["listed"][:5]:
            say(err, f"finding: {verification.finding_text(f)}")
    reduction = (outcome.summary.get("data_reduction") or {}).get("overall")
    if reduction:
        out.print(f"data written: {datareduction.describe(reduction)}", markup=False)
    for change in outcome.summary.get("change_points") or []:
        out.print(f"change: {change_text(change)}", markup=False)
    kernel = kernel_messages(outcome.summary.get("telemetry"))
    if kernel is not None:
        for m in kernel.messages[:KERNEL_SHOWN]:
            err.print(f"kernel: {m.message}", markup=False, soft_wrap=True)
        if kernel.count > KERNEL_SHOWN:
            say(err, f"kernel: {kernel.count - KERNEL_SHOWN:,} more (run.json, the report)")
    for note in outcome.summary.get("notes") or []:
        if note not in outcome.notes_shown:  # said once, as the run started
            say(err, f"note: {note}")
    if outcome.catalog_error:
        err.print(
            f"note: the run is saved but not yet in the catalog ({outcome.catalog_error}); "
            "`tilemark runs` adds it",
            markup=False,
        )
    if outcome.error:
        err.print(f"run failed: {outcome.error}", markup=False)
    elif outcome.exit_status is not None:
        err.print("interrupted: results kept, marked incomplete", markup=False)


def qos_lines(apps: dict[str, Any], *, indent: str = "  ") -> list[str]:
    """One line per application that did not pass: its worst criterion with margin and CI,
    whether it failed or is inconclusive (its interval straddles the limit: not a failure for
    certain), and how many more of its criteria did not pass."""
    from tilemark.analysis.tiles import margin_text

    lines = []
    for a in apps["applications"]:
        if a["passed"] or a.get("worst") is None:
            continue
        w = a["worst"]
        more = a.get("failed_criteria", 1) - 1
        where = f" in tile {w['tile']}" if apps.get("tiles", 1) > 1 else ""
        inconclusive = a.get("verdict") == "noise"
        state = "inconclusive" if inconclusive else "fails"
        tail = f", +{more} more" + (" inconclusive" if inconclusive else "") if more > 0 else ""
        lines.append(f"{indent}{a['app']} {state}: {margin_text(w)}{where}{tail}")
    return lines


def verdict_line(apps: dict[str, Any]) -> str:
    """The tile run's QoS in one line."""
    score = f", score {apps['score']:.2f}" if apps["score"] is not None else ""
    m = apps.get("measurement") or {}
    took = ""
    if m.get("extended"):
        took = f" (measured {m['measured_s']:.0f} s of up to {m['max_duration_s']:.0f} s to decide)"
    tiles = counted(apps["tiles"], "tile")
    if apps["passed"]:
        every = (
            "the application" if len(apps.get("applications") or []) == 1 else "every application"
        )
        return f"QoS: {every} in {tiles} passes{score}{took}"
    if apps.get("verdict") == "noise":
        return (
            f"QoS: inconclusive in {tiles}{score}{took}: no criterion failed for certain, but "
            "one's confidence interval straddles its limit, so it does not pass"
        )
    return f"QoS: FAIL in {tiles}{score}{took}"
