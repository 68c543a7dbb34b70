"""The study framework: a study is a sequence of stored runs with a purpose.

A study (a `Study` subclass) chooses its steps one at a time from what its steps so far gave
(`next_step`), and turns them into an answer (`answer`). A `StepRunner` runs a step and returns
an `Attempt`: one stored run and, for judged studies, its verdict. `run_study` drives both:

- **Confirm before believing.** A step whose first run fails is run `confirm_runs` more times;
  the majority of its runs decides, and a tie gets one more run. A passing first run is
  believed. Every run is stored and listed in study.json with why it ran.
- **Re-check what does not add up.** A study may ask to run a step again (a failed tile count
  below a passing one); the extra run joins that step's vote.
- **A tool-bound failure is run again.** A failing run that measured the host rather than the
  storage (`summary.tool_bound`) is confirmed even with `confirm_runs` 0; a step whose every
  failing run was tool-bound is `host_bound`, and an answer it bounds says so.
- **An inconclusive answer gets a longer look.** When the study is done and the step that bounds
  its answer failed only within noise (`Study.inconclusive_step`), that step is run again with
  a longer window (reason `extend`) before answering; those runs alone then decide it, and
  one still inconclusive makes the answer a range ("10 (11 inconclusive)").
- **Repeat the whole study** `repeat` times; the answers are reported as a distribution.
- **Keep what ran.** study.json is rewritten after every run (atomically), so an interrupted
  study keeps its steps and says it is incomplete.

Kinds of study are small modules on this: scale.py (tile count, or a profile knob, by linear
search or doubling and bisection), points.py (a sweep, an Orion matrix: steps are workloads that
the runner compiles), curve.py (a rate ladder with bisection).
docs/studies.md describes the design and the study.json format.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import tilemark
from tilemark.interrupts import INTERRUPTS, SignalStopper, status_of
from tilemark.store.rundir import allocate_dir
from tilemark.store.rundoc import utc_now_iso, write_json_atomic
from tilemark.telemetry import prometheus as metrics

STUDY_SCHEMA_VERSION = 2
STUDY_FILE = "study.json"
STUDIES_DIR = "studies"

PASS, FAIL, NOISE = "pass", "fail", "noise"
# Why a run of a step happened: its first run, confirming a failure, re-checking a failure
# below a pass, or measuring the inconclusive step that bounds the answer for longer.
NEW, CONFIRM, RECHECK, EXTEND = "new", "confirm", "recheck", "extend"


@dataclass(frozen=True)
class StepSpec:
    """What to run: the step's position on the study's axis and what the runner needs."""

    key: float  # tile count, knob value, ... (orders the steps)
    label: str  # "3 tiles", "mail.mailboxes=2000"
    params: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass
class Attempt:
    """One stored run of a step."""

    run_id: str
    run_dir: str
    verdict: str | None  # pass | fail | noise (failed within noise); None: not judged
    complete: bool
    interrupted: int | None = None  # exit status (128 + signal) when a signal ended it
    reason: str = NEW
    detail: dict[str, Any] = field(default_factory=dict)  # the study's results of this run

    @property
    def passed(self) -> bool:
        return self.verdict == PASS

    @property
    def tool_bound(self) -> bool:
        """The run measured the host rather than the storage (telemetry.sampler.tool_bound)."""
        return bool((self.detail.get("tool_bound") or {}).get("tool_bound"))

    @property
    def judged(self) -> bool:
        """A complete run with a verdict: it votes."""
        return self.complete and self.verdict is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "run_dir": self.run_dir,
            "verdict": self.verdict,
            "passed": self.passed,
            "complete": self.complete,
            "reason": self.reason,
            "tool_bound": self.tool_bound,
            **{k: self.detail[k] for k in ("measured_s", "extended", "steady") if k in self.detail},
        }


def majority(attempts: list[Attempt], confirm_runs: int) -> str | None:
    """A step's verdict from its runs: `pass`, `fail`, or None when it needs another run.

    A first run that passes decides. After a failing first run, `confirm_runs` more runs are
    needed; then the majority decides and a tie needs one more run.
    """
    judged = [a for a in attempts if a.complete and a.verdict is not None]
    if not judged:
        return None
    passes = sum(a.passed for a in judged)
    fails = len(judged) - passes
    if len(judged) == 1 and passes:
        return PASS
    if not judged[0].passed and len(judged) < 1 + confirm_runs:
        return None
    if passes == fails:
        return None
    return PASS if passes > fails else FAIL


@dataclass
class StepRecord:
    """A step and every run of it."""

    spec: StepSpec
    repeat: int
    confirm_runs: int
    attempts: list[Attempt] = field(default_factory=list)
    rechecked: bool = False
    extended: bool = False  # run again with a longer window (EXTEND) because it was inconclusive

    @property
    def key(self) -> float:
        return self.spec.key

    def voting(self) -> list[Attempt]:
        """The runs whose votes decide the step: once a run with a longer window is judged,
        it and every run after it (they carry more samples than the shorter runs before, and
        a later re-check still counts); else all of them."""
        first = next((i for i, a in enumerate(self.attempts) if a.reason == EXTEND), None)
        if first is None:
            return self.attempts
        later = self.attempts[first:]
        return later if any(a.judged and a.reason == EXTEND for a in later) else self.attempts

    @property
    def verdict(self) -> str | None:
        """pass | fail once decided; None while runs are missing (or not judged)."""
        runs = self.voting()
        first = next((a for a in runs if a.judged), None)
        confirm = self.confirm_runs
        if first is not None and not first.passed and first.tool_bound:
            confirm = max(confirm, 1)  # a failure that measured the host is always run again
        return majority(runs, confirm)

    @property
    def passed(self) -> bool:
        return self.verdict == PASS

    @property
    def failed(self) -> bool:
        return self.verdict == FAIL

    def votes(self) -> dict[str, int]:
        out = {PASS: 0, FAIL: 0, NOISE: 0}
        for a in self.attempts:
            if a.complete and a.verdict is not None:
                out[a.verdict] += 1
        return out

    def deciding(self) -> Attempt | None:
        """The run that stands for the step: the first one that agrees with its verdict."""
        verdict = self.verdict
        for a in self.voting():
            if verdict is None or (a.passed == (verdict == PASS) and a.complete):
                return a
        return self.attempts[-1] if self.attempts else None

    def _failing(self) -> list[Attempt]:
        return [a for a in self.voting() if a.judged and not a.passed]

    @property
    def within_noise(self) -> bool:
        """Failed, but every failing run failed only within noise: inconclusive."""
        failing = self._failing()
        return self.failed and bool(failing) and all(a.verdict == NOISE for a in failing)

    @property
    def host_bound(self) -> bool:
        """Failed, but every failing run was tool-bound: the host may be what failed."""
        failing = self._failing()
        return self.failed and bool(failing) and all(a.tool_bound for a in failing)

    @property
    def tool_bound(self) -> bool:
        """The run that stands for the step was tool-bound."""
        deciding = self.deciding()
        return deciding is not None and deciding.tool_bound


class StepBook:
    """The steps of one repetition of a study, by key, in the order they first ran."""

    def __init__(self) -> None:
        self._steps: dict[float, StepRecord] = {}

    def __contains__(self, key: float) -> bool:
        return key in self._steps

    def __getitem__(self, key: float) -> StepRecord:
        return self._steps[key]

    def __iter__(self) -> Iterator[StepRecord]:
        return iter(self._steps.values())

    def __len__(self) -> int:
        return len(self._steps)

    def get(self, key: float) -> StepRecord | None:
        return self._steps.get(key)

    def add(self, step: StepRecord) -> StepRecord:
        self._steps[step.key] = step
        return step

    def discard(self, key: float) -> None:
        """Forget a step that never ran."""
        self._steps.pop(key, None)

    def by_key(self) -> list[StepRecord]:
        return [self._steps[k] for k in sorted(self._steps)]

    def decided(self) -> list[StepRecord]:
        return [s for s in self.by_key() if s.verdict is not None]

    def recheck_candidate(self) -> StepRecord | None:
        """A failed step below a passing one that has not been re-checked yet: the storage's
        answer is not monotonic there, so one more run of the failed step is due."""
        passed = [s.key for s in self.decided() if s.passed]
        if not passed:
            return None
        highest_pass = max(passed)
        for s in self.decided():
            if s.failed and s.key < highest_pass and not s.rechecked:
                return s
        return None

    def non_monotonic(self) -> list[dict[str, float]]:
        """Every (failed, passed above it) pair that remains after re-checks."""
        out = []
        steps = self.decided()
        for s in steps:
            if s.failed:
                above = [p.key for p in steps if p.passed and p.key > s.key]
                if above:
                    out.append({"failed": s.key, "passed_above": min(above)})
        return out


class Study(ABC):
    """A kind of study: its steps, its answer and how both are recorded."""

    kind: str = "study"
    # The answer's main value, reported as a distribution over repeats (e.g. max_passing_tiles).
    answer_key: str = "answer"
    # Whether study.json reports the answer over whole-study repeats (distribution, median,
    # `stable`); a study that is itself a series of repetitions reports its own answer only.
    combines_repeats: bool = True

    @abstractmethod
    def definition(self) -> dict[str, Any]:
        """How the study runs, as recorded in study.json."""

    @abstractmethod
    def next_step(self, book: StepBook) -> tuple[StepSpec, str] | None:
        """The next step to run and why (NEW or RECHECK), or None when the study is done."""

    @abstractmethod
    def answer(self, book: StepBook) -> dict[str, Any]:
        """The answer of one repetition; must hold `answer_key`."""

    def inconclusive_step(self, book: StepBook) -> StepRecord | None:
        """The step that bounds the answer when it failed only within noise: the driver runs
        it again with a longer window (once) before the study answers. None by default."""
        return None

    def step_json(self, step: StepRecord) -> dict[str, Any]:
        """A step as study.json keeps it (the study adds its own results)."""
        deciding = step.deciding()
        return {
            "key": step.key,
            "label": step.spec.label,
            "repeat": step.repeat,
            "verdict": step.verdict,
            "passed": step.passed,
            "within_noise": step.within_noise,
            "host_bound": step.host_bound,
            "tool_bound": step.tool_bound,
            "votes": step.votes(),
            "rechecked": step.rechecked,
            "longer_window": step.extended,
            "run_id": deciding.run_id if deciding else None,
            "run_dir": deciding.run_dir if deciding else None,
            "complete": all(a.complete for a in step.attempts),
            "runs": [a.to_json() for a in step.attempts],
        }


class StudyStopped(Exception):
    """Raised by a step runner before it starts a run, to end the study there (a command
    between repetitions failed, a signal during a pause): what ran is kept, the study is
    incomplete, and `status` is the exit status."""

    def __init__(self, status: int, why: str):
        super().__init__(why)
        self.status = status
        self.why = why


class StepRunner(Protocol):
    """Runs one step: a stored run and its verdict."""

    def run(self, spec: StepSpec, reason: str) -> Attempt: ...


class StudyEvents(Protocol):
    """What the driver tells the caller as it goes (progress lines on a terminal)."""

    def starting(self, spec: StepSpec, reason: str, repeat: int, attempt: int) -> None: ...

    def finished(self, step: StepRecord, attempt: Attempt) -> None: ...


class StudyRecord:
    """study.json of one study, in its own directory under <results>/studies/."""

    def __init__(self, results: Path, base: dict[str, Any]):
        self.study_id, self.path, started = allocate_dir(Path(results) / STUDIES_DIR)
        self.base = {
            "schema_version": STUDY_SCHEMA_VERSION,
            "study_id": self.study_id,
            "tilemark_version": tilemark.__version__,
            "started_at": started,
            **base,
        }

    def save(self, body: dict[str, Any], *, complete: bool) -> dict[str, Any]:
        doc = {**self.base, "complete": complete, "ended_at": utc_now_iso(), **body}
        write_json_atomic(self.path / STUDY_FILE, doc)
        return doc


@dataclass
class StudyOutcome:
    """How a study ended: its study.json document and the exit status of an interruption."""

    doc: dict[str, Any]
    path: Path
    interrupted: int | None
    stopped: str | None = None  # why a StudyStopped ended it


def combine(answers: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """The answer over repeats: each repeat's value, how often each value came, the median
    (the lower one of an even count: a capacity must not be overstated) and whether all agree."""
    values = [a.get(key) for a in answers]
    distribution: dict[str, int] = {}
    for v in values:
        distribution[str(v)] = distribution.get(str(v), 0) + 1
    # None (nothing passed) ranks below every value.
    ordered = sorted(values, key=lambda v: (v is not None, v or 0))
    median = ordered[(len(ordered) - 1) // 2] if ordered else None
    return {
        f"{key}_runs": values,
        "distribution": distribution,
        key: median,
        "stable": len(set(map(str, values))) == 1,
    }


def run_study(
    make_study: Callable[[], Study],
    runner: StepRunner,
    record: StudyRecord,
    *,
    confirm_runs: int,
    repeat: int = 1,
    events: StudyEvents | None = None,
    extra: Callable[[], dict[str, Any]] | None = None,
) -> StudyOutcome:
    """Run a study `repeat` times, confirming failures and re-checking what the study asks;
    study.json is saved after every run. `extra()` adds fields (e.g. settling) to study.json."""
    books: list[tuple[Study, StepBook]] = []
    interrupted: int | None = None
    stopped: str | None = None

    def save(complete: bool) -> dict[str, Any]:
        body = _body(books, extra() if extra else {})
        if stopped is not None:
            body["stopped"] = stopped
        return record.save(body, complete=complete)

    # The whole study is a stop scope: a signal between two runs (no run under way to stop in
    # order) is recorded, never raised in the middle of saving study.json, and ends the study
    # before its next run; one during a run stops that run, which is stored incomplete.
    with SignalStopper() as stopper:
        for r in range(1, repeat + 1):
            study, book = make_study(), StepBook()
            books.append((study, book))
            while interrupted is None and (chosen := _next_step(study, book)) is not None:
                spec, reason = chosen
                step = book.get(spec.key) or book.add(StepRecord(spec, r, confirm_runs))
                if reason == RECHECK:
                    step.rechecked = True
                if reason == EXTEND:
                    step.extended = True
                while True:
                    if stopper.exit_status is not None:
                        interrupted = stopper.exit_status
                        break
                    try:
                        if events is not None:
                            events.starting(spec, reason, r, len(step.attempts) + 1)
                        served = metrics.current()
                        if served is not None:
                            served.study_step(
                                getattr(study, "kind", "study"), spec.label, float(spec.key), r
                            )
                        attempt = runner.run(spec, reason)
                    except StudyStopped as stop:
                        interrupted, stopped = stop.status, stop.why
                        break
                    except INTERRUPTS as stop:  # where no handler could be installed
                        interrupted = status_of(stop)
                        break
                    step.attempts.append(attempt)
                    save(False)
                    if events is not None:
                        events.finished(step, attempt)
                    if attempt.interrupted is not None or stopper.exit_status is not None:
                        interrupted = attempt.interrupted or stopper.exit_status
                        break
                    if attempt.verdict is None or step.verdict is not None:
                        break
                    if reason != EXTEND:  # runs that confirm a longer look are longer too
                        reason = CONFIRM
                if not step.attempts:
                    book.discard(spec.key)  # stopped before its first run
            if interrupted is not None:
                break
    doc = save(interrupted is None)
    return StudyOutcome(doc, record.path, interrupted, stopped)


def _next_step(study: Study, book: StepBook) -> tuple[StepSpec, str] | None:
    """The study's next step; when it has none, the inconclusive step that bounds its answer,
    once, with a longer window."""
    chosen = study.next_step(book)
    if chosen is not None:
        return chosen
    undecided = study.inconclusive_step(book)
    if undecided is not None and not undecided.extended:
        return undecided.spec, EXTEND
    return None


def _body(books: list[tuple[Study, StepBook]], extra: dict[str, Any]) -> dict[str, Any]:
    if not books:
        return {"steps": [], **extra}
    study = books[0][0]
    answers = [s.answer(b) for s, b in books]
    if not study.combines_repeats:
        return {
            **study.definition(),
            **extra,
            **answers[-1],
            "runs_used": sum(len(step.attempts) for _, b in books for step in b),
            "steps": [s.step_json(step) for s, b in books for step in b],
        }
    combined = combine(answers, study.answer_key)
    # The headline fields come from the first repeat whose answer is the median.
    median = combined[study.answer_key]
    chosen = next((a for a in answers if a.get(study.answer_key) == median), answers[0])
    steps = [s.step_json(step) for s, b in books for step in b]
    return {
        **study.definition(),
        **extra,
        **chosen,
        **combined,
        "repeats": [{"repeat": i + 1, **a} for i, a in enumerate(answers)],
        "runs_used": sum(len(step.attempts) for _, b in books for step in b),
        "steps": steps,
    }
