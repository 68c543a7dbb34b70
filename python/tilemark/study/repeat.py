"""Repeated runs and their decay: the same workload (or N tiles) run N times, ESRP style.

A `RepeatStudy`'s steps are the repetitions 1..N, not judged (verdict None: nothing to
confirm). Its answer is the decay curve: per key metric its value in every repetition, the
change from the first in %, the least-squares trend per repetition with a 95% interval, and a
verdict, `stable`, `decaying`, `improving` or `inconclusive` (analysis/trend.py). The verdict of
the study is that of its headline metrics (total IOPS and MB/s, mean read and write latency):
decaying if any of them decays. p99s, streams and applications get their own trend and
verdict, shown but not deciding: a tail percentile of one run is too noisy to call storage
decaying on. Two repetitions are a before/after comparison instead (analysis/beforeafter.py):
each headline metric's change with a 95% interval from the spread within each run. Repetitions
whose run was tool-bound (measured the host) are listed with the verdict
(`tool_bound_repetitions`): their numbers describe the host, not the storage.

Between repetitions the `RepeatStepRunner` waits `pause_s` (a countdown; a signal stops the
study there and keeps what ran) and runs the `--between` shell command (its output shown; a
failing command stops the study with that command's exit status).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console

from tilemark.analysis import beforeafter
from tilemark.analysis.compare import run_values
from tilemark.analysis.trend import NOISE_FLOOR_PCT, fit, overall, verdict
from tilemark.interrupts import SignalStopper
from tilemark.options import MAX_REPETITIONS  # noqa: F401  (one definition, checked by the CLI)
from tilemark.run.outcome import RunOutcome
from tilemark.store import results
from tilemark.study.base import NEW, Attempt, StepBook, StepRecord, StepSpec, Study, StudyStopped

# Metrics whose trend decides the study's verdict (run_values names, scope "total").
HEADLINE = ("IOPS", "MB/s", "read latency mean", "write latency mean")
COUNTDOWN_LINE_S = 600.0  # without a terminal, a countdown line every 10 minutes


def repetition_metrics(summary: dict[str, Any], result: dict[str, Any] | None) -> list[dict]:
    """The key metrics of one repetition: totals (latencies from merged histograms), each
    application's metric (tile runs) or each stream's IOPS and latencies (several streams)."""
    values = run_values(results.read_summary(summary), result)
    out = [
        {
            "metric": name,
            "scope": scope,
            "unit": unit,
            "better": better,
            "headline": scope == "total" and name in HEADLINE,
            "value": value,
        }
        for (name, scope), (value, unit, better) in values.items()
    ]
    checked = summary.get("verify_pass")
    if checked is not None:
        # Jetstress's checksum pass slowed from 2 to 10 hours as an array aged (seed 004).
        out.append(_metric("verification pass", "total", "s", "lower", checked["seconds"]))
        out.append(_metric("verification findings", "total", "count", "lower", checked["findings"]))
    streams = summary.get("streams") or []
    apps = (summary.get("applications") or {}).get("applications") or []
    for a in apps:
        out.append(_metric("IOPS", a["app"], "IOPS", "higher", a.get("iops")))
        out.append(_metric("MB/s", a["app"], "MB/s", "higher", a.get("mbps")))
        for criterion, value in (a.get("worst_latency_ms") or {}).items():
            out.append(_metric(f"{criterion} (worst instance)", a["app"], "ms", "lower", value))
    if not apps and len(streams) > 1:
        for s in streams:
            out.append(
                _metric("IOPS", s["name"], "IOPS", "higher", (s.get("total") or {}).get("iops"))
            )
            for op in ("read", "write"):
                response = (s.get(op) or {}).get("response") or {}
                for stat in ("mean", "p99"):
                    value = response.get(f"{stat}_ms")
                    if value is not None:
                        out.append(_metric(f"{op} latency {stat}", s["name"], "ms", "lower", value))
    return out


def _metric(name: str, scope: str, unit: str, better: str, value: float | None) -> dict:
    return {
        "metric": name,
        "scope": scope,
        "unit": unit,
        "better": better,
        "headline": False,
        "value": value,
    }


def attempt_of_run(outcome: RunOutcome, reason: str = NEW) -> Attempt:
    """One repetition as an attempt of its step: its metrics and how it ended."""
    summary = outcome.summary or {}
    apps = summary.get("applications")
    metrics = repetition_metrics(summary, outcome.result)
    # The spread within the run, for a before/after comparison of two repetitions.
    spread = beforeafter.interval_spread(outcome.run_dir) if outcome.complete else {}
    for m in metrics:
        if m["scope"] == "total" and m["metric"] in spread:
            m.update(spread[m["metric"]])
    detail: dict[str, Any] = {
        "metrics": metrics,
        "tool_bound": summary.get("tool_bound"),
        "total": summary.get("total"),
        "measured_s": summary.get("duration_s"),
        "status": outcome.status,
        "error": outcome.error,
        "change_points": summary.get("change_points") or [],
    }
    if apps is not None:
        detail.update(qos=apps.get("verdict"), score=apps.get("score"), failed=apps.get("failed"))
    return Attempt(
        run_id=outcome.run_id,
        run_dir=str(outcome.run_dir),
        verdict=None,
        complete=outcome.complete,
        interrupted=outcome.exit_status,
        reason=reason,
        detail=detail,
    )


class RepeatStudy(Study):
    """N repetitions of one workload and their decay (module doc)."""

    kind = "repeat"
    answer_key = "verdict"
    combines_repeats = False

    def __init__(self, count: int, definition: dict[str, Any]):
        self.count = count
        self._definition = {
            **definition,
            "kind": self.kind,
            "repetitions": count,
            "noise_floor_pct": NOISE_FLOOR_PCT,
        }

    def definition(self) -> dict[str, Any]:
        return dict(self._definition)

    def next_step(self, book: StepBook) -> tuple[StepSpec, str] | None:
        done = len(book)
        if done >= self.count:
            return None
        n = done + 1
        return StepSpec(key=n, label=f"repetition {n}", params={"repetition": n}), NEW

    def step_json(self, step: StepRecord) -> dict[str, Any]:
        out = super().step_json(step)
        attempt = step.attempts[0] if step.attempts else None
        detail = attempt.detail if attempt else {}
        out["repetition"] = int(step.key)
        for k in ("status", "measured_s", "total", "metrics", "qos", "score", "failed", "error"):
            if k in detail:
                out[k] = detail[k]
        out["tool_bound"] = attempt.tool_bound if attempt else False
        out["change_points"] = detail.get("change_points") or []
        return out

    def answer(self, book: StepBook) -> dict[str, Any]:
        return decay([(int(s.key), s.attempts[0]) for s in book.by_key() if s.attempts])


def decay(repetitions: list[tuple[int, Attempt]]) -> dict[str, Any]:
    """The decay curve of the repetitions: every metric's values, change from the first
    repetition in %, trend and verdict; the verdict of the headline metrics."""
    complete = [(n, a) for n, a in repetitions if a.complete]
    order: list[tuple[str, str]] = []
    info: dict[tuple[str, str], dict[str, Any]] = {}
    values: dict[tuple[str, str], dict[int, float]] = {}
    for n, a in complete:
        for m in a.detail.get("metrics") or []:
            key = (m["metric"], m["scope"])
            if key not in info:
                order.append(key)
                info[key] = {k: m[k] for k in ("metric", "scope", "unit", "better", "headline")}
            if m.get("value") is not None:
                values.setdefault(key, {})[n] = float(m["value"])
    numbers = [n for n, _ in complete]
    by_number = dict(complete)
    metrics = []
    for key in order:
        by_rep = values.get(key, {})
        xs = [n for n in numbers if n in by_rep]
        ys = [by_rep[n] for n in xs]
        # A metric missing from some repetition is shown, not trended.
        trend = fit([float(x) for x in xs], ys) if len(xs) == len(numbers) else None
        first = ys[0] if ys else None
        paired = None
        if len(numbers) == 2 and len(xs) == 2:
            paired = beforeafter.compare(
                _entry(by_number[numbers[0]], key), _entry(by_number[numbers[1]], key),
                info[key]["better"],
            )  # fmt: skip
        metrics.append(
            {
                **info[key],
                "values": [by_rep.get(n) for n in numbers],
                "change_pct": [
                    (by_rep[n] / first - 1.0) * 100.0 if n in by_rep and first else None
                    for n in numbers
                ],
                "trend": trend.to_json() if trend else None,
                "before_after": paired,
                "verdict": paired["verdict"] if paired else verdict(trend, info[key]["better"]),
            }
        )
    headline = [m for m in metrics if m["headline"]]
    study_verdict = overall([m["verdict"] for m in headline])
    deciding = _deciding(headline, study_verdict)
    return {
        "verdict": study_verdict,
        "method": "before/after" if len(numbers) == 2 else ("trend" if numbers else None),
        "deciding_metric": deciding,
        "tool_bound_repetitions": [n for n, a in complete if a.tool_bound],
        "repetitions_complete": numbers,
        "first_run_id": complete[0][1].run_id if complete else None,
        "last_run_id": complete[-1][1].run_id if len(complete) > 1 else None,
        "metrics": metrics,
    }


def _entry(attempt: Attempt, key: tuple[str, str]) -> dict[str, Any]:
    """A repetition's entry for one (metric, scope): value and, when known, its spread."""
    return next(
        (m for m in attempt.detail.get("metrics") or [] if (m["metric"], m["scope"]) == key), {}
    )


def _deciding(headline: list[dict[str, Any]], study_verdict: str | None) -> str | None:
    """The headline metric that decided the verdict (decaying, improving or inconclusive):
    the one that moved most in that direction, from first to last."""
    movers = [m for m in headline if m["verdict"] == study_verdict and m["values"]]
    if not movers or study_verdict in (None, "stable"):
        return None

    def moved(m: dict[str, Any]) -> float:
        changes = [c for c in m["change_pct"] if c is not None]
        return abs(changes[-1]) if changes else 0.0

    return max(movers, key=moved)["metric"]


# -----------------------------------------------------------------------------------------------
# Between repetitions


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    hours, rest = divmod(s, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def pause(seconds: float, before: int, console: Console) -> None:
    """Wait `seconds` before repetition `before`, with a countdown; a signal raises
    StudyStopped (what ran is kept)."""
    tty = console.is_terminal
    end = time.monotonic() + seconds
    shown_at = time.monotonic()
    with SignalStopper() as stopper:
        console.print(
            f"pausing {_clock(seconds)} before repetition {before} (Ctrl-C stops here and keeps "
            "what ran)",
            markup=False,
        )
        while stopper.signum is None and (left := end - time.monotonic()) > 0:
            if tty:
                sys.stderr.write(f"\rrepetition {before} in {_clock(left)} ")
                sys.stderr.flush()
            elif time.monotonic() - shown_at >= COUNTDOWN_LINE_S:
                console.print(f"repetition {before} in {_clock(left)}", markup=False)
                shown_at = time.monotonic()
            time.sleep(min(left, 0.2 if tty else 1.0))
    if tty:
        sys.stderr.write("\n")
    if stopper.signum is not None:
        raise StudyStopped(
            stopper.exit_status or 130, f"interrupted during the pause before repetition {before}"
        )


def run_between(command: str, before: int, console: Console) -> None:
    """Run the --between shell command before repetition `before`; its output goes to
    stderr. A failure (or a signal) raises StudyStopped with the command's exit status."""
    try:
        sink: Any = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        sink = None  # no file descriptor (captured output): pass the output on by hand
    with SignalStopper() as stopper:
        console.print(f"before repetition {before}: running {command}", markup=False)
        done = subprocess.run(
            command,
            shell=True,
            stdin=subprocess.DEVNULL,
            stdout=sink if sink is not None else subprocess.PIPE,
            stderr=sink if sink is not None else subprocess.STDOUT,
            text=True,
        )
    if sink is None and done.stdout:
        console.print(done.stdout.rstrip("\n"), markup=False)
    if stopper.signum is not None:
        raise StudyStopped(
            stopper.exit_status or 130,
            f"interrupted during the --between command before repetition {before}",
        )
    if done.returncode != 0:
        status = done.returncode if done.returncode > 0 else 128 - done.returncode
        raise StudyStopped(
            status,
            f"the --between command failed with exit status {status} before repetition "
            f"{before}: {command}",
        )


class RepeatStepRunner:
    """Runs repetition n: pause and --between first (from the second on), then the run."""

    def __init__(
        self,
        run_once: Callable[[int], RunOutcome],
        *,
        pause_s: float,
        between: str | None,
        console: Console,
    ):
        self.run_once = run_once
        self.pause_s = pause_s
        self.between = between
        self.console = console

    def run(self, spec: StepSpec, reason: str) -> Attempt:
        n = int(spec.key)
        if n > 1:
            if self.pause_s > 0:
                pause(self.pause_s, n, self.console)
            if self.between:
                run_between(self.between, n, self.console)
        return attempt_of_run(self.run_once(n), reason)
