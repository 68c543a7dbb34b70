"""`tilemark repeat N`: the same workload (or N tiles) run N times, and how it decays.

Every option of `tilemark run` works after `repeat N` (each repetition is such a run), plus
`--pause TIME` and `--between CMD` between repetitions. The study runs on the framework
(study/repeat.py); this module parses, calls and prints: the table of repetitions, the trend of
the key metrics (with two repetitions, their before/after change), the verdict (stable /
decaying / improving / inconclusive) and the `compare` command for the first and last
repetition. Exit status: 0 when every repetition ran, 1 when a run failed, 3 when a tile
repetition failed QoS (said in a sentence), the --between command's status when it failed,
128 + signal when interrupted; what ran is always kept.
"""

from __future__ import annotations

import inspect
import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from tilemark.cli.common import EXIT_QOS, argv_of, consoles
from tilemark.cli.params import table_command
from tilemark.cli.run import WORKLOAD_ARG, run_mode
from tilemark.console import say
from tilemark.interrupts import Interrupted
from tilemark.options import MAX_REPETITIONS, REPEAT, RUN, TILES, parse_int
from tilemark.options.typed import Options
from tilemark.wording import counted, signed_pct

if TYPE_CHECKING:
    from tilemark.study import StepRecord, StepSpec
    from tilemark.study.base import Attempt

# The study (engine, store, analysis) and the report load once the options are checked: bad
# input is refused without them.


class _Progress:
    """One line per repetition as it starts, and its IOPS when it ends (stderr)."""

    def __init__(self, console: Console, count: int):
        self.console = console
        self.count = count

    def starting(self, spec: StepSpec, reason: str, repeat: int, attempt: int) -> None:
        self.console.print(f"repeat: repetition {int(spec.key)} of {self.count}", markup=False)

    def finished(self, step: StepRecord, attempt: Attempt) -> None:
        total = attempt.detail.get("total") or {}
        state = "" if attempt.complete else f" ({attempt.detail.get('status') or 'incomplete'})"
        self.console.print(
            f"repeat: repetition {int(step.key)}: {total.get('iops', 0):,.0f} IOPS, "
            f"{total.get('mbps', 0):,.1f} MB/s{state}",
            markup=False,
        )


def _repeat(ctx: typer.Context, values: dict[str, Any]) -> None:
    count = parse_int(values.pop("count_arg"), "N (the number of repetitions)", 1, MAX_REPETITIONS)
    workload_file = values.pop("workload_file")
    # repeat's own options, kept apart while the rest is checked as `run` checks it
    own = {k: values.pop(k) for k in ("pause", "between", "write_report") if k in values}
    mode = run_mode(values, workload_file, {RUN, TILES})
    opts = Options.from_values({**values, **own}, mode)
    out, err = consoles(opts.output.json)
    from tilemark.cli.scale import write_study_report
    from tilemark.commands import repeat as repeat_command

    try:
        outcome = repeat_command.run(
            count,
            opts,
            workload_file,
            argv=argv_of(ctx),
            console=err,
            events=_Progress(err, count),
        )
    except Interrupted as e:
        raise typer.Exit(e.status) from None
    doc = outcome.doc
    results = opts.output.results
    if opts.output.json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    out.print(repetitions_table(doc))
    for line in trend_lines(doc):
        say(out, line)
    out.print(f"study: {outcome.path}", markup=False)
    if doc.get("first_run_id") and doc.get("last_run_id"):
        out.print(
            f"first vs last: tilemark compare {doc['first_run_id']} {doc['last_run_id']} "
            f"--results {results}",
            markup=False,
        )
    if opts.output.report and doc["steps"]:
        write_study_report(outcome.path, results, err, out)
    if outcome.stopped:
        err.print(
            f"repeat stopped: {outcome.stopped}; the repetitions that ran are kept", markup=False
        )
    elif outcome.interrupted is not None:
        why = "a run failed" if outcome.interrupted == 1 else "interrupted"
        err.print(f"{why}: the repetitions so far are kept, the study is incomplete", markup=False)
    if outcome.interrupted is not None:
        raise typer.Exit(outcome.interrupted)
    failed_qos = [s["repetition"] for s in doc["steps"] if s.get("qos") not in (None, "pass")]
    if failed_qos:
        err.print(
            f"exit status {EXIT_QOS}: QoS failed in {_repetitions(failed_qos)} (an answer about "
            "the storage, not an error of tilemark)",
            markup=False,
        )
        raise typer.Exit(EXIT_QOS)


# -----------------------------------------------------------------------------------------------
# Terminal output

# Columns of the repetitions table: (metric, scope) -> header.
TABLE_METRICS = (
    ("IOPS", "IOPS"),
    ("MB/s", "MB/s"),
    ("read latency mean", "read mean ms"),
    ("read latency p99", "read p99 ms"),
    ("write latency mean", "write mean ms"),
    ("write latency p99", "write p99 ms"),
    ("verification pass", "verify s"),
)


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "ms":
        return f"{value:.3g}" if value < 100 else f"{value:,.0f}"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.3g}"


def repetitions_table(doc: dict[str, Any]) -> Table:
    """Per repetition: its run, the total metrics, IOPS as % change from the first, status."""
    label = f" ({doc['label']})" if doc.get("label") else ""
    table = Table(
        title=f"repeat study {doc['study_id']}{label}: {len(doc['steps'])} of "
        f"{counted(doc['repetitions'], 'repetition')}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    by_key = {(m["metric"], m["scope"]): m for m in doc.get("metrics") or []}
    shown = [(name, head) for name, head in TABLE_METRICS if (name, "total") in by_key]
    table.add_column("rep", justify="right")
    # Run ids stay whole however narrow the terminal (`tilemark compare` takes them).
    longest = max((len(st.get("run_id") or "-") for st in doc["steps"]), default=3)
    table.add_column("run", no_wrap=True, min_width=longest)
    for _, head in shown:
        table.add_column(head, justify="right")
    table.add_column("IOPS vs 1st", justify="right")
    table.add_column("status", min_width=10, overflow="fold")
    complete = doc.get("repetitions_complete") or []
    iops = by_key.get(("IOPS", "total"))
    for step in doc["steps"]:
        n = step["repetition"]
        metrics = {(m["metric"], m["scope"]): m for m in step.get("metrics") or []}
        row = [str(n), step.get("run_id") or "-"]
        for name, _ in shown:
            m = metrics.get((name, "total"))
            row.append(_fmt(m["value"] if m else None, m["unit"] if m else ""))
        change = None
        if iops is not None and n in complete:
            change = iops["change_pct"][complete.index(n)]
        row.append("-" if change is None else signed_pct(change))
        status = step.get("status") or ("complete" if step.get("complete") else "incomplete")
        if step.get("qos") is not None:
            status += f", QoS {step['qos']}"
        if step.get("tool_bound"):
            status += ", tool-bound"
        row.append(status)
        table.add_row(*row)
    return table


def _repetitions(numbers: list[int]) -> str:
    """'repetition 2', 'repetitions 1, 3'."""
    return ("repetition " if len(numbers) == 1 else "repetitions ") + ", ".join(map(str, numbers))


def trend_text(m: dict[str, Any]) -> str:
    """'IOPS: 1,000 -> 700 (-30.0%), trend -6.9%/rep (95% CI -13.3..-0.4%): decaying', or
    with two repetitions 'IOPS: 1,000 -> 700 (-30.0%, 95% CI -31.2..-28.8%, beyond noise):
    decaying'."""
    scope = "" if m["scope"] == "total" else f" ({m['scope']})"
    values = [v for v in m["values"] if v is not None]
    unit = f" {m['unit']}" if m["unit"] == "ms" else ""
    first_last = ""
    if values:
        first_last = f"{_fmt(values[0], m['unit'])} -> {_fmt(values[-1], m['unit'])}{unit}"
    text = f"{m['metric']}{scope}: {first_last}"
    paired = m.get("before_after")
    if paired:
        low, high = paired["ci_pct"]
        noise = "beyond noise" if paired["beyond_noise"] else "within noise"
        text += (
            f" ({signed_pct(paired['change_pct'])}, 95% CI {signed_pct(low)}..{signed_pct(high)},"
            f" {noise})"
        )
        return text + f": {paired['verdict']}"
    t = m.get("trend")
    if not t:
        return f"{text} (no trend: too few repetitions)"
    change = t.get("last_vs_first_pct")
    if change is not None:
        text += f" ({signed_pct(change)})"
    low, high = t["slope_ci_pct"]
    if t.get("slope_pct") is not None and low is not None and high is not None:
        text += (
            f", trend {signed_pct(t['slope_pct'])}/rep "
            f"(95% CI {signed_pct(low)}..{signed_pct(high)})"
        )
    return text + (f": {m['verdict']}" if m.get("verdict") else "")


def trend_lines(doc: dict[str, Any]) -> list[str]:
    """The headline metrics' trends (or before/after changes), any other metric that moved,
    the verdict with what decided it, and the tool-bound repetitions."""
    metrics = doc.get("metrics") or []
    lines = [trend_text(m) for m in metrics if m["headline"]]
    moved = [
        m for m in metrics if not m["headline"] and m.get("verdict") in ("decaying", "improving")
    ]
    lines += [trend_text(m) for m in moved]
    v = doc.get("verdict")
    complete = len(doc.get("repetitions_complete") or [])
    floor = doc.get("noise_floor_pct") or 5
    why = f", decided by {doc['deciding_metric']}" if doc.get("deciding_metric") else ""
    if v is None and complete < 2:
        lines.append(
            f"verdict: none ({counted(complete, 'complete repetition')}: nothing to compare; "
            "two compare before and after, three or more give a trend)"
        )
    elif v is None:
        lines.append(
            f"verdict: none ({counted(complete, 'complete repetition')}, but their runs hold no "
            "interval data to put an interval on the change)"
        )
    elif complete == 2:
        lines.append(
            f"verdict: {v}, before vs after{why} (95% CI of each change from the spread within "
            f"each run; noise floor {floor:g}%)"
        )
    else:
        lines.append(
            f"verdict: {v} over {complete} repetitions{why} (95% CI of the trend, noise floor "
            f"{floor:g}% from first to last)"
        )
    if v == "inconclusive":
        lines.append(
            f"  inconclusive: the interval allows a change beyond {floor:g}% either way; more "
            "repetitions (or longer ones) narrow it"
        )
    bound = doc.get("tool_bound_repetitions") or []
    if bound:
        lines.append(
            f"  tool-bound: {_repetitions(bound)} measured the host (CPU above 85% or the "
            "engine behind its schedule): those numbers describe the host, not the storage"
        )
    if not doc.get("complete"):
        lines.append(f"incomplete: {complete} of {doc['repetitions']} repetitions complete")
    return lines


COUNT_ARG = inspect.Parameter(
    "count_arg",
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    annotation=Annotated[
        str, typer.Argument(metavar="N", help="How many times to run the workload (1 or more).")
    ],
)

repeat = table_command(
    "repeat",
    "Run the same workload (or --tiles N) N times and report its decay: metrics per "
    "repetition, change from the first, trend and a verdict (stable, decaying, improving, "
    "inconclusive); two repetitions are compared as before and after.",
    {RUN, TILES, REPEAT},
    _repeat,
    [COUNT_ARG, WORKLOAD_ARG],
)
