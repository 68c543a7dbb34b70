"""What the run and study commands share: consoles, JSON output, the result and QoS lines."""

from __future__ import annotations

import sys
from typing import Any

import typer
from rich.console import Console

from tilemark import targets
from tilemark.analysis.changepoints import change_text
from tilemark.analysis.tiles import margin_text
from tilemark.console import make_console
from tilemark.run import datareduction
from tilemark.run.live import front_back_table, host_line, hosts_table, results_table, targets_table
from tilemark.run.outcome import RunOutcome
from tilemark.targets import verification

DEFAULT_TARGET = f"{targets.DEFAULT_DATA_DIR}/scratch.dat"
from tilemark.options.typed import DEFAULT_RESULTS  # noqa: E402, F401  (one definition)

# Exit statuses (docs/results-schema.md): 0 ok, 1 a run failed, 2 bad input, 3 QoS failed,
# 128 + signal when interrupted.
EXIT_QOS = 3


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


# A run of 10,000 late streams has a reason per stream; the terminal shows the first ones.
SHOWN_REASONS = 20


def print_run(outcome: RunOutcome, out: Console, err: Console) -> None:
    """The final per-stream table, where results are, and how the run ended."""
    status_word = {"errors": "IO errors", "hung": "IO hung", "data-errors": "data errors"}.get(
        outcome.status, outcome.status
    )
    title = f"run {outcome.run_id} ({status_word})"
    out.print(results_table(outcome.compiled, outcome.summary, title))
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
        out.print(host, markup=False, soft_wrap=True)
    reasons = (outcome.summary.get("tool_bound") or {}).get("reasons") or []
    for reason in reasons[:SHOWN_REASONS]:
        err.print(f"tool-bound: {reason}", markup=False, soft_wrap=True)
    if len(reasons) > SHOWN_REASONS:
        more = len(reasons) - SHOWN_REASONS
        err.print(f"tool-bound: ... {more:,} more in run.json (summary.tool_bound)", markup=False)
    out.print(f"results: {outcome.run_dir}", markup=False)
    pre = outcome.summary.get("preconditioning") or {}
    if pre.get("record"):
        shown = targets.describe_precondition(pre["record"])
        out.print(f"target preconditioned {shown}", markup=False)
    checked = outcome.summary.get("verification")
    if checked is not None:
        out.print(verification.line(checked), markup=False, soft_wrap=True)
        for f in checked["listed"][:5]:
            err.print(f"finding: {verification.finding_text(f)}", markup=False, soft_wrap=True)
    reduction = (outcome.summary.get("data_reduction") or {}).get("overall")
    if reduction:
        out.print(f"data written: {datareduction.describe(reduction)}", markup=False)
    for change in outcome.summary.get("change_points") or []:
        out.print(f"change: {change_text(change)}", markup=False)
    for note in outcome.summary.get("notes") or []:
        err.print(f"note: {note}", markup=False, soft_wrap=True)
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
    """One line per failing application: its worst criterion with margin and CI, and how many
    more of its criteria failed."""
    lines = []
    for a in apps["applications"]:
        if a["passed"] or a.get("worst") is None:
            continue
        w = a["worst"]
        more = a.get("failed_criteria", 1) - 1
        where = f" in tile {w['tile']}" if apps.get("tiles", 1) > 1 else ""
        tail = f", +{more} more" if more > 0 else ""
        lines.append(f"{indent}{a['app']}: {margin_text(w)}{where}{tail}")
    return lines


def verdict_line(apps: dict[str, Any]) -> str:
    """The tile run's QoS in one line."""
    score = f", score {apps['score']:.2f}" if apps["score"] is not None else ""
    m = apps.get("measurement") or {}
    took = ""
    if m.get("extended"):
        took = f" (measured {m['measured_s']:.0f} s of up to {m['max_duration_s']:.0f} s to decide)"
    if apps["passed"]:
        return f"QoS: every application in {apps['tiles']} tile(s) passes{score}{took}"
    noise = " within noise" if apps.get("verdict") == "noise" else ""
    return f"QoS: FAIL{noise} in {apps['tiles']} tile(s){score}{took}"
