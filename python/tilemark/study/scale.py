"""Scaling studies: how many tiles, or how much of one application, the storage carries.

- `TileCountStudy` runs tile counts in order (linear: stop once a count fails and `confirm`
  more fail too; the answer is the largest passing count below that) or searches them
  (doubling from the smallest count until one fails, then bisection between the last pass and
  the first failure).
- `KnobStudy` keeps the tile count and searches one numeric profile knob (`mail.mailboxes`):
  the largest value at which every application of the tile meets QoS while the others run at
  their profile load. It starts from the profile's value, doubles (or halves) until the
  verdict changes, then bisects to `precision`.

Both re-check a failed step below a passing one (the framework's RECHECK), and every step's
verdict is the majority of its runs (base.run_study). Their answers carry their caveats
(study/answers.py words them): the range's top (`limited_by_range`: the storage may carry
more), an inconclusive step bounding the answer (`inconclusive_at`, after the framework ran it
with a longer window), a bounding failure that measured the host (`host_bound`), and every step
whose run was tool-bound (`tool_bound_steps`).
"""

from __future__ import annotations

import dataclasses
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tilemark.errors import UsageError
from tilemark.run.outcome import RunOutcome
from tilemark.run.tiles import (
    TileRunSettings,
    run_tiles,
    tiles_plan,
)
from tilemark.run.where import Targets
from tilemark.study.base import (
    EXTEND,
    NEW,
    RECHECK,
    Attempt,
    StepBook,
    StepRecord,
    StepSpec,
    Study,
)
from tilemark.study.scaleargs import (  # noqa: F401  (parse_knob is part of this module's API)
    parse_knob,
    parse_knob_range,
    parse_tile_counts,
)
from tilemark.wording import counted
from tilemark.workload.apps import TileSpec

DEFAULT_COUNTS = "1..8"
# An inconclusive step that bounds the answer is run again measuring up to this many times as
# long (its confidence intervals narrow by about the square root).
LONGER_WINDOW = 2


def tile_definition(tile: TileSpec, settings: TileRunSettings) -> dict[str, Any]:
    """What every tile study records about its tile and how its runs were set up."""
    timing = settings.record()
    return {
        "tile": {
            "name": tile.name,
            "source": tile.source,
            "applications": [
                {
                    "app": a.label,
                    "profile": a.profile.name,
                    "scale": a.profile.scale,
                    "qos": [c.__dict__ for c in a.profile.qos],
                }
                for a in tile.apps
            ]
            + [
                {
                    "app": a.label,
                    "profile": a.name,
                    "kind": "files",
                    "files": a.source,
                    "dir": a.directory,
                    "qos": a.doc.get("qos") or {},
                }
                for a in tile.file_apps
            ],
        },
        "target": settings.target,
        "capacity": settings.capacity,
        **timing,
    }


HOST_FIELDS = (
    "name",
    "status",
    "streams",
    "iops",
    "mbps",
    "p99_ms",
    "errors",
    "clock_offset_ms",
    "clock_uncertainty_ms",
    "start_late_ms",
)


def host_rows(summary: dict[str, Any]) -> list[dict[str, Any]] | None:
    """A cluster run's per-host figures as a study step keeps them (None on one host)."""
    hosts = summary.get("hosts")
    if not hosts:
        return None
    return [{k: h.get(k) for k in HOST_FIELDS} for h in hosts]


def attempt_of(outcome: RunOutcome, reason: str) -> Attempt:
    """A tile run as one attempt of a step: its verdict and the results a study keeps."""
    apps = outcome.summary["applications"]
    measurement = apps.get("measurement") or {}
    detail = {
        "failed": apps["failed"]
        if outcome.complete
        else [f"run failed: {outcome.error}" if outcome.error else "run interrupted"],
        "undecided": apps.get("undecided", []),
        "deciding": apps.get("deciding"),
        "score": apps["score"],
        "applications": apps["applications"],
        "total": outcome.summary["total"],
        "instances": [
            {k: v for k, v in i.items() if k not in ("verdicts", "criteria")}
            for i in apps["instances"]
        ],
        "measured_s": measurement.get("measured_s"),
        "extended": measurement.get("extended", False),
        "steady": measurement.get("steady"),
        "measurement": measurement,
        "error": outcome.error,
        "hosts": host_rows(outcome.summary),
        "tool_bound": outcome.summary.get("tool_bound"),
    }
    return Attempt(
        run_id=outcome.run_id,
        run_dir=str(outcome.run_dir),
        verdict=apps["verdict"] if outcome.complete else None,
        complete=outcome.complete,
        interrupted=outcome.exit_status,
        reason=reason,
        detail=detail,
    )


class TileStepRunner:
    """Runs a step of a tile study: N tiles of the step's tile on the prepared targets.
    `run_options` are run_tiles's keyword arguments (max_tiles, results, argv, console)."""

    def __init__(
        self,
        tile_of: Callable[[StepSpec], TileSpec],
        settings: TileRunSettings,
        infos: Targets,
        *,
        label: str | None = None,
        **run_options: Any,
    ):
        self.tile_of = tile_of
        self.settings = settings
        self.infos = infos
        self.label = label
        self.run_options = {"kind": "scale-step", **run_options}

    def run(self, spec: StepSpec, reason: str) -> Attempt:
        settings = self.settings
        if reason == EXTEND:  # an inconclusive step: measure up to twice as long to decide it
            settings = dataclasses.replace(
                settings, max_duration=LONGER_WINDOW * settings.max_duration_s
            )
        outcome = run_tiles(
            self.tile_of(spec),
            spec.params["tiles"],
            settings,
            self.infos,
            label=f"{self.label}, {spec.label}" if self.label else None,
            **self.run_options,
        )
        return attempt_of(outcome, reason)


class _TileStudy(Study):
    """What tile-count and knob studies share: steps are tile runs judged by QoS."""

    def __init__(self, definition: dict[str, Any]):
        self._definition = definition

    def definition(self) -> dict[str, Any]:
        return dict(self._definition)

    def step_json(self, step: StepRecord) -> dict[str, Any]:
        out = super().step_json(step)
        deciding = step.deciding()
        detail = deciding.detail if deciding else {}
        for k in (
            "failed",
            "undecided",
            "deciding",
            "score",
            "applications",
            "total",
            "instances",
            "measured_s",
            "extended",
            "steady",
            "hosts",
        ):
            out[k] = detail.get(k)
        if not out["complete"] and not detail.get("failed"):
            out["failed"] = ["run interrupted"]
        return out

    @staticmethod
    def _failure(step: StepRecord | None, **where: Any) -> dict[str, Any] | None:
        if step is None:
            return None
        detail = (step.deciding() or Attempt("", "", None, False)).detail
        return {
            **where,
            "failed": detail.get("failed") or [],
            "deciding": detail.get("deciding"),
            "within_noise": step.within_noise,
            "host_bound": step.host_bound,
            "tool_bound": step.tool_bound,
            "longer_window": step.extended,
            "votes": step.votes(),
        }

    def _shown(self, key: float) -> float:
        return key

    @abstractmethod
    def bounding(self, book: StepBook) -> StepRecord | None:
        """The failed step that bounds the answer (the lowest failure above it)."""

    def inconclusive_step(self, book: StepBook) -> StepRecord | None:
        step = self.bounding(book)
        return step if step is not None and step.within_noise else None

    def caveats(self, book: StepBook, best: float | None, top: float) -> dict[str, Any]:
        """What the answer is worth: the range's top, an inconclusive or host-bound bounding
        step, and the steps whose runs measured the host (module doc)."""
        bounding = self.bounding(book)
        return {
            "limited_by_range": best is not None and best >= top,
            "inconclusive_at": self._shown(bounding.key)
            if bounding is not None and bounding.within_noise
            else None,
            "host_bound": bounding is not None and bounding.host_bound,
            "tool_bound_steps": [self._shown(s.key) for s in book.by_key() if s.tool_bound],
        }


class TileCountStudy(_TileStudy):
    """How many tiles pass QoS (module doc)."""

    kind = "scale"
    answer_key = "max_passing_tiles"

    def __init__(
        self, counts: list[int], *, search: bool, confirm: int, definition: dict[str, Any]
    ):
        super().__init__(
            {
                **definition,
                "kind": self.kind,
                "tile_counts": counts,
                "mode": "search" if search else "linear",
                "confirm": confirm,
            }
        )
        self.counts = counts
        self.search = search
        self.confirm = confirm

    def spec(self, n: int) -> StepSpec:
        return StepSpec(key=n, label=counted(n, "tile"), params={"tiles": n})

    def next_step(self, book: StepBook) -> tuple[StepSpec, str] | None:
        recheck = book.recheck_candidate()
        if recheck is not None:
            return recheck.spec, RECHECK
        n = self._next_search(book) if self.search else self._next_linear(book)
        return None if n is None else (self.spec(n), NEW)

    def _next_linear(self, book: StepBook) -> int | None:
        fails_in_a_row = 0
        for n in self.counts:
            step = book.get(n)
            if step is None:
                return n
            fails_in_a_row = 0 if step.passed else fails_in_a_row + 1
            if fails_in_a_row > self.confirm:
                return None
        return None

    def _next_search(self, book: StepBook) -> int | None:
        # Doubling from the smallest count until a failure, then bisection between the last
        # pass and the first failure; candidates are restricted to the given counts.
        lo, hi = self.counts[0], self.counts[-1]
        passed = [s.key for s in book if s.passed]
        failed = [s.key for s in book if not s.passed]
        best = max(passed, default=None)
        worst = min((n for n in failed if best is None or n > best), default=None)
        if best is None:
            return None if lo in book else lo
        if worst is None:
            if best >= hi:
                return None
            return self._nearest(min(int(best) * 2, hi), book)
        candidates = [n for n in self.counts if best < n < worst and n not in book]
        if not candidates:
            return None
        return candidates[len(candidates) // 2]

    def _nearest(self, n: int, book: StepBook) -> int | None:
        options = [c for c in self.counts if c not in book and c >= n]
        return options[0] if options else None

    def max_passing(self, book: StepBook) -> int | None:
        passed = [int(s.key) for s in book if s.passed]
        if not passed:
            return None
        if self.search:
            return max(passed)
        # Linear: the largest passing count below the confirmed failure.
        best = None
        fails_in_a_row = 0
        for n in self.counts:
            step = book.get(n)
            if step is None:
                break
            if step.passed:
                best, fails_in_a_row = n, 0
            else:
                fails_in_a_row += 1
                if fails_in_a_row > self.confirm:
                    break
        return best

    def _shown(self, key: float) -> float:
        return int(key)

    def bounding(self, book: StepBook) -> StepRecord | None:
        best = self.max_passing(book)
        return next((s for s in book.by_key() if s.failed and (best is None or s.key > best)), None)

    def answer(self, book: StepBook) -> dict[str, Any]:
        best = self.max_passing(book)
        at_best = book.get(best) if best is not None else None
        bounding = self.bounding(book)
        deciding = at_best.deciding() if at_best else None
        return {
            "max_passing_tiles": best,
            "score_at_max": deciding.detail.get("score") if deciding else None,
            "first_failure": self._failure(bounding, tiles=int(bounding.key) if bounding else None),
            "non_monotonic": book.non_monotonic(),
            **self.caveats(book, best, self.counts[-1]),
        }

    def step_json(self, step: StepRecord) -> dict[str, Any]:
        return {"tiles": int(step.key), **super().step_json(step)}


class KnobStudy(_TileStudy):
    """The largest value of one profile knob at which the tile passes QoS (module doc)."""

    kind = "knob"
    answer_key = "max_passing_value"

    def __init__(
        self,
        knob: str,
        start: float,
        *,
        low: float,
        high: float,
        precision_pct: float,
        tiles: int,
        definition: dict[str, Any],
    ):
        self.knob = knob
        self.start = start
        self.low = low
        self.high = high
        self.precision = precision_pct / 100.0
        self.tiles = tiles
        # Counts of things (mailboxes, IOPS) search whole numbers; small factors do not.
        self.integral = float(start).is_integer() and start >= 10 and low >= 1
        super().__init__(
            {
                **definition,
                "kind": self.kind,
                "knob": knob,
                "knob_start": start,
                "knob_range": [low, high],
                "knob_precision_pct": precision_pct,
                "tiles_per_step": tiles,
                "mode": "search",
            }
        )

    def spec(self, value: float) -> StepSpec:
        shown = f"{value:g}" if not self.integral else f"{int(value)}"
        return StepSpec(
            key=value,
            label=f"{self.knob}={shown}",
            params={"tiles": self.tiles, "set": f"{self.knob}={shown}"},
        )

    def _round(self, value: float) -> float:
        value = min(max(value, self.low), self.high)
        if self.integral:
            return float(max(1, round(value)))
        return float(f"{value:.4g}")

    def _bracket(self, book: StepBook) -> tuple[float | None, float | None]:
        passed = [s.key for s in book.decided() if s.passed]
        failed = [s.key for s in book.decided() if s.failed]
        best = max(passed, default=None)
        worst = min((k for k in failed if best is None or k > best), default=None)
        return best, worst

    def _close(self, best: float, worst: float) -> bool:
        if self.integral and worst - best <= 1:
            return True
        return (worst - best) / best <= self.precision

    def next_step(self, book: StepBook) -> tuple[StepSpec, str] | None:
        recheck = book.recheck_candidate()
        if recheck is not None:
            return recheck.spec, RECHECK
        value = self._next(book)
        return None if value is None else (self.spec(value), NEW)

    def _next(self, book: StepBook) -> float | None:
        if not len(book):
            return self._round(self.start)
        best, worst = self._bracket(book)
        if best is None:
            lowest = min(s.key for s in book.decided())
            if lowest <= self.low:
                return None  # even the lowest value allowed fails
            candidate = self._round(lowest / 2)
        elif worst is None:
            if best >= self.high:
                return None
            candidate = self._round(best * 2)
        else:
            if self._close(best, worst):
                return None
            candidate = self._round((best + worst) / 2)
            if not best < candidate < worst:
                return None
        return None if candidate in book else candidate

    def bounding(self, book: StepBook) -> StepRecord | None:
        _, worst = self._bracket(book)
        return book.get(worst) if worst is not None else None

    def answer(self, book: StepBook) -> dict[str, Any]:
        best, worst = self._bracket(book)
        bounding = self.bounding(book)
        at_best = book.get(best) if best is not None else None
        deciding = at_best.deciding() if at_best else None
        return {
            "max_passing_value": best,
            "first_failing_value": worst,
            "score_at_max": deciding.detail.get("score") if deciding else None,
            "first_failure": self._failure(bounding, value=worst),
            "non_monotonic": book.non_monotonic(),
            **self.caveats(book, best, self.high),
        }

    def step_json(self, step: StepRecord) -> dict[str, Any]:
        return {"value": step.key, "tiles": self.tiles, **super().step_json(step)}


# -----------------------------------------------------------------------------------------------
# Setting up and running a tile study (what `tilemark scale` calls)


@dataclass
class TileStudySetup:
    """A tile study ready to run: how to make the study, which tile each step runs, and the
    tiles whose extremes must compile before any IO."""

    tile: TileSpec
    settings: TileRunSettings
    counts: list[int]
    make_study: Callable[[], Study]
    tile_of: Callable[[StepSpec], TileSpec]
    extremes: list[TileSpec]

    @property
    def max_tiles(self) -> int:
        return self.counts[-1]

    def check_compiles(self, infos: Targets) -> None:
        """Every step compiles if the extremes do; a UsageError otherwise, before any IO."""
        for t in self.extremes:
            for n in (self.counts[0], self.max_tiles):
                tiles_plan(t, n, self.settings, infos, max_tiles=self.max_tiles)


def tile_count_setup(
    tile: TileSpec, settings: TileRunSettings, counts: list[int], *, search: bool, confirm: int
) -> TileStudySetup:
    """How many tiles pass: linear or by search over `counts`."""
    definition = tile_definition(tile, settings)
    return TileStudySetup(
        tile,
        settings,
        counts,
        lambda: TileCountStudy(counts, search=search, confirm=confirm, definition=definition),
        lambda spec: tile,
        [tile],
    )


def knob_setup(
    tile_of_sets: Callable[[list[str]], TileSpec],
    settings: TileRunSettings,
    counts: list[int],
    *,
    knob: str,
    knob_range: str | None,
    precision_pct: float,
) -> TileStudySetup:
    """The largest value of `knob` at which the tile passes; `tile_of_sets(extra_sets)` loads
    the tile with the user's --set overrides plus `extra_sets`."""
    if len(counts) != 1:
        raise UsageError(
            "--knob keeps the tile count fixed while it searches the knob; give one count "
            f"with --tiles N, got {','.join(map(str, counts))}."
        )
    if precision_pct <= 0:
        raise UsageError(f"--knob-precision must be above 0, got {precision_pct:g}.")
    tile = tile_of_sets([])
    app, name, start = parse_knob(knob, tile)
    low, high = parse_knob_range(knob_range, start)
    definition = tile_definition(tile, settings)

    def make_study() -> KnobStudy:
        return KnobStudy(
            f"{app}.{name}",
            start,
            low=low,
            high=high,
            precision_pct=precision_pct,
            tiles=counts[0],
            definition=definition,
        )

    def tile_of(spec: StepSpec) -> TileSpec:
        return tile_of_sets([spec.params["set"]])

    probe = make_study()
    extremes = [tile_of(probe.spec(v)) for v in (low, high)]
    return TileStudySetup(tile, settings, counts, make_study, tile_of, extremes)
