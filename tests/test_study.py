"""The study framework and the scaling studies on a fake step runner (no IO): linear mode with
confirmation and blips, --search by doubling and bisection, confirm re-runs and majority votes,
re-checks of non-monotonic answers, repeated studies, the knob search, and --tiles parsing."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

from tilemark.errors import UsageError
from tilemark.run.tiles import MAX_TILES
from tilemark.study import (
    CONFIRM,
    EXTEND,
    NEW,
    RECHECK,
    Attempt,
    KnobStudy,
    StepSpec,
    TileCountStudy,
    combine,
    majority,
    parse_tile_counts,
    run_study,
)

Verdict = bool | str  # True/False, or "noise" (failed within noise)


class NullRecord:
    """A study record kept in memory; counts how often study.json would be written."""

    path = Path("/nonexistent/study")

    def __init__(self) -> None:
        self.saves = 0
        self.doc: dict = {}

    def save(self, body: dict, *, complete: bool) -> dict:
        self.saves += 1
        self.doc = {**body, "complete": complete}
        return self.doc


class FakeRunner:
    """A storage whose verdict for the k-th run (0-based) of a step is verdict(key, k); the run
    was tool-bound (measured the host) when tool_bound(key, k)."""

    def __init__(
        self,
        verdict: Callable[[float, int], Verdict],
        tool_bound: Callable[[float, int], bool] | None = None,
    ):
        self.verdict = verdict
        self.tool_bound = tool_bound or (lambda key, k: False)
        self.ran: list[tuple[float, str]] = []

    def run(self, spec: StepSpec, reason: str) -> Attempt:
        k = sum(1 for key, _ in self.ran if key == spec.key)
        self.ran.append((spec.key, reason))
        v = self.verdict(spec.key, k)
        verdict = v if isinstance(v, str) else ("pass" if v else "fail")
        return Attempt(
            run_id=f"run-{len(self.ran)}",
            run_dir=f"/results/run-{len(self.ran)}",
            verdict=verdict,
            complete=True,
            reason=reason,
            detail={
                "score": float(spec.key),
                "failed": [] if verdict == "pass" else [f"{spec.label}: read p99 (window)"],
                "tool_bound": {"tool_bound": self.tool_bound(spec.key, k), "reasons": []},
            },
        )


def tiles(counts, *, search=False, confirm=1) -> Callable[[], TileCountStudy]:
    return lambda: TileCountStudy(list(counts), search=search, confirm=confirm, definition={})


def drive(make, verdict, *, confirm_runs=0, repeat=1, tool_bound=None):
    runner = FakeRunner(verdict, tool_bound)
    record = NullRecord()
    outcome = run_study(make, runner, record, confirm_runs=confirm_runs, repeat=repeat)
    assert outcome.interrupted is None
    assert record.saves == len(runner.ran) + 1  # after every run, and at the end
    return runner.ran, outcome.doc


def capacity(k: int) -> Callable[[float, int], bool]:
    return lambda n, _: n <= k


def keys(ran, reason=None) -> list[float]:
    return [k for k, r in ran if reason is None or r == reason]


def step(doc: dict, n: int, repeat: int = 1) -> dict:
    return next(s for s in doc["steps"] if s["tiles"] == n and s["repeat"] == repeat)


# -----------------------------------------------------------------------------------------------
# Linear


@pytest.mark.parametrize("k", range(0, 9))
def test_linear_stops_after_two_failures_in_a_row_with_confirm_1(k):
    ran, doc = drive(tiles(range(1, 9)), capacity(k))
    assert keys(ran) == list(range(1, min(k + 2, 8) + 1))
    assert doc["max_passing_tiles"] == (k or None)
    if k <= 6:
        assert [step(doc, n)["passed"] for n in keys(ran)[-2:]] == [False, False]


@pytest.mark.parametrize("k", range(0, 9))
def test_linear_stops_at_the_first_failure_with_confirm_0(k):
    ran, doc = drive(tiles(range(1, 9), confirm=0), capacity(k))
    assert keys(ran) == list(range(1, min(k + 1, 8) + 1))
    assert doc["max_passing_tiles"] == (k or None)


def test_linear_confirm_2_needs_three_failures_in_a_row():
    ran, doc = drive(tiles(range(1, 9), confirm=2), capacity(3))
    assert keys(ran) == [1, 2, 3, 4, 5, 6]
    assert doc["max_passing_tiles"] == 3


def test_a_failing_blip_followed_by_passes_continues_the_study_and_is_rechecked():
    # 3 fails (noise), 4..6 pass, 7 and 8 fail: the capacity is 6. 3 failing below a pass is
    # not monotonic, so it is re-checked once; it fails again and stays a recorded blip.
    ran, doc = drive(tiles(range(1, 9)), lambda n, _: n != 3 and n <= 6)
    assert ran == [(1, NEW), (2, NEW), (3, NEW), (4, NEW), (3, RECHECK)] + [
        (n, NEW) for n in (5, 6, 7, 8)
    ]
    assert doc["max_passing_tiles"] == 6
    assert step(doc, 3)["rechecked"] and step(doc, 3)["votes"]["fail"] == 2
    assert doc["non_monotonic"] == [{"failed": 3, "passed_above": 4}]


def test_a_blip_does_not_count_towards_confirmation_after_a_pass():
    # fail, pass, fail, fail: the pass resets the count, the last two confirm.
    ran, doc = drive(tiles(range(1, 11)), lambda n, _: n in (1, 2, 4))
    assert keys(ran, NEW) == [1, 2, 3, 4, 5, 6]
    assert keys(ran, RECHECK) == [3]
    assert doc["max_passing_tiles"] == 4


def test_a_recheck_that_passes_removes_the_blip():
    # 3 fails on its first run only: after 4 passes it is re-checked, passes, and a tie of one
    # pass and one fail takes a third run, which passes too.
    ran, doc = drive(tiles(range(1, 7)), lambda n, k: n <= 5 and not (n == 3 and k == 0))
    assert [r for n, r in ran if n == 3] == [NEW, RECHECK, CONFIRM]
    assert step(doc, 3)["verdict"] == "pass" and step(doc, 3)["votes"]["pass"] == 2
    assert doc["non_monotonic"] == [] and doc["max_passing_tiles"] == 5


def test_linear_with_confirm_0_stops_at_a_blip():
    ran, doc = drive(tiles(range(1, 9), confirm=0), lambda n, _: n != 3)
    assert keys(ran) == [1, 2, 3]
    assert doc["max_passing_tiles"] == 2


def test_linear_over_a_list_of_counts():
    ran, doc = drive(tiles([1, 2, 4, 8, 16]), capacity(5))
    assert keys(ran) == [1, 2, 4, 8, 16]
    assert doc["max_passing_tiles"] == 4


def test_the_answer_ignores_passes_above_the_confirmed_failure():
    # 3 and 4 fail; 5 (reached by a larger --confirm) passes but the answer stays 2.
    study = TileCountStudy(list(range(1, 9)), search=False, confirm=1, definition={})
    ran, doc = drive(lambda: study, lambda n, k: n in (1, 2, 5))
    assert keys(ran, NEW) == [1, 2, 3, 4]
    assert doc["max_passing_tiles"] == 2


def test_nothing_run_yet():
    from tilemark.study import StepBook

    for search in (False, True):
        study = TileCountStudy([2, 3, 4], search=search, confirm=1, definition={})
        assert study.answer(StepBook())["max_passing_tiles"] is None
        assert study.next_step(StepBook())[0].key == 2


# -----------------------------------------------------------------------------------------------
# Search


@pytest.mark.parametrize("k", range(0, 65))
def test_search_finds_the_capacity_in_about_2_log2_runs(k):
    ran, doc = drive(tiles(range(1, 65), search=True), capacity(k))
    assert doc["max_passing_tiles"] == (k or None)
    assert len(ran) <= 2 * math.log2(64), ran
    # The answer is proven: k passed, and k + 1 failed unless k is the top of the range.
    if k:
        assert step(doc, k)["passed"]
    if k < 64:
        assert not step(doc, k + 1)["passed"]


def test_search_doubles_then_bisects():
    ran, doc = drive(tiles(range(1, 65), search=True), capacity(37))
    assert keys(ran) == [1, 2, 4, 8, 16, 32, 64, 48, 40, 36, 38, 37]
    assert doc["max_passing_tiles"] == 37


def test_search_stops_when_one_tile_fails():
    ran, doc = drive(tiles(range(1, 65), search=True), capacity(0))
    assert keys(ran) == [1]
    assert doc["max_passing_tiles"] is None


def test_search_runs_only_the_given_counts():
    ran, doc = drive(tiles([1, 2, 4, 8, 16, 32], search=True), capacity(11))
    assert keys(ran) == [1, 2, 4, 8, 16]
    assert doc["max_passing_tiles"] == 8


def test_search_from_a_range_not_starting_at_1():
    ran, doc = drive(tiles(range(3, 20), search=True), capacity(11))
    assert keys(ran)[:3] == [3, 6, 12]
    assert doc["max_passing_tiles"] == 11
    assert len(ran) <= 2 * math.ceil(math.log2(17))


@pytest.mark.parametrize("k", [1, 5, 100, 255, 256])
def test_search_over_the_whole_range(k):
    ran, doc = drive(tiles(parse_tile_counts(f"1..{MAX_TILES}"), search=True), capacity(k))
    assert doc["max_passing_tiles"] == k
    assert len(ran) <= 2 * math.log2(MAX_TILES)


# -----------------------------------------------------------------------------------------------
# Confirm before believing


@pytest.mark.parametrize(
    "runs, verdict, reasons",
    [
        (["pass"], "pass", [NEW]),
        (["fail", "fail"], "fail", [NEW, CONFIRM]),
        (["fail", "pass", "pass"], "pass", [NEW, CONFIRM, CONFIRM]),
        (["fail", "pass", "fail"], "fail", [NEW, CONFIRM, CONFIRM]),
        # Inconclusive twice: the step bounds the answer, so it is measured again with a longer
        # window, and that inconclusive run is confirmed with a longer window too.
        (["noise", "noise", "noise", "noise"], "fail", [NEW, CONFIRM, EXTEND, EXTEND]),
    ],
)
def test_a_failing_step_is_confirmed_and_the_majority_decides(runs, verdict, reasons):
    ran, doc = drive(tiles([1]), lambda n, k: runs[k], confirm_runs=1)
    assert [r for _, r in ran] == reasons
    s = step(doc, 1)
    assert s["verdict"] == verdict and len(s["runs"]) == len(reasons)
    assert [r["verdict"] for r in s["runs"]] == runs
    # The step's run is one that agrees with its verdict.
    assert next(r for r in s["runs"] if r["run_id"] == s["run_id"])["passed"] == (verdict == "pass")
    assert s["within_noise"] == (runs[0] == "noise")


def test_majority_rule():
    def a(v):
        return Attempt("r", "d", v, True)

    assert majority([a("pass")], 1) == "pass"
    assert majority([a("fail")], 1) is None  # needs its confirmation run
    assert majority([a("fail")], 0) == "fail"
    assert majority([a("fail"), a("pass")], 1) is None  # a tie takes one more run
    assert majority([a("fail"), a("fail"), a("pass")], 2) == "fail"
    assert majority([a("fail"), a("pass"), a("pass")], 2) == "pass"
    assert majority([a(None)], 1) is None
    assert majority([Attempt("r", "d", "fail", False)], 0) is None  # interrupted runs don't vote


def test_confirm_runs_cost_only_failing_steps():
    ran, doc = drive(tiles(range(1, 9)), capacity(4), confirm_runs=2)
    assert keys(ran, NEW) == [1, 2, 3, 4, 5, 6]
    assert keys(ran, CONFIRM) == [5, 5, 6, 6]
    assert doc["runs_used"] == 10 and doc["max_passing_tiles"] == 4


# -----------------------------------------------------------------------------------------------
# Repeats


def test_repeats_report_the_distribution_median_and_stability():
    answers = iter([4, 5, 4])
    current = {}

    def make():
        current["k"] = next(answers)
        return TileCountStudy(list(range(1, 9)), search=False, confirm=0, definition={})

    _, doc = drive(make, lambda n, _: n <= current["k"], repeat=3)
    assert doc["max_passing_tiles_runs"] == [4, 5, 4]
    assert doc["distribution"] == {"4": 2, "5": 1}
    assert doc["max_passing_tiles"] == 4 and doc["stable"] is False
    assert [r["max_passing_tiles"] for r in doc["repeats"]] == [4, 5, 4]
    assert sorted({s["repeat"] for s in doc["steps"]}) == [1, 2, 3]


def test_combine_ranks_no_answer_lowest_and_takes_the_lower_median():
    assert combine([{"a": 3}, {"a": None}], "a")["a"] is None
    assert combine([{"a": 3}, {"a": 5}], "a")["a"] == 3
    assert combine([{"a": None}, {"a": 4}, {"a": 4}], "a")["a"] == 4
    assert combine([{"a": 2}, {"a": 2}], "a")["stable"] is True


# -----------------------------------------------------------------------------------------------
# Knob search


def knob(start=1000.0, *, low=None, high=None, precision=5.0):
    return lambda: KnobStudy(
        "mail.mailboxes",
        start,
        low=low if low is not None else start / 64,
        high=high if high is not None else start * 1024,
        precision_pct=precision,
        tiles=1,
        definition={},
    )


@pytest.mark.parametrize("limit", [1000, 1500, 2840, 7777, 999_999])
def test_knob_search_doubles_then_bisects_to_the_precision(limit):
    ran, doc = drive(knob(), lambda v, _: v <= limit)
    best, worst = doc["max_passing_value"], doc["first_failing_value"]
    assert best <= limit < (worst if worst is not None else math.inf)
    if worst is not None:
        assert worst - best <= max(1, 0.05 * best)
    assert all(float(v).is_integer() for v in keys(ran))  # mailboxes are whole numbers
    assert len(ran) <= 2 * math.log2(1024) + 2


def test_knob_search_halves_when_the_profile_value_fails():
    ran, doc = drive(knob(), lambda v, _: v <= 300)
    assert keys(ran)[:3] == [1000, 500, 250]
    assert 285 <= doc["max_passing_value"] <= 300 < doc["first_failing_value"]


def test_knob_search_with_nothing_passing_stops_at_the_low_end():
    ran, doc = drive(knob(low=100), lambda v, _: False)
    assert keys(ran) == [1000, 500, 250, 125, 100]
    assert doc["max_passing_value"] is None


def test_knob_search_stops_at_the_high_end():
    _, doc = drive(knob(high=3000), lambda v, _: True)
    assert doc["max_passing_value"] == 3000 and doc["limited_by_range"] is True


def test_knob_search_of_a_small_factor_keeps_fractions():
    ran, doc = drive(knob(0.12, precision=2), lambda v, _: v <= 0.5)
    assert 0.49 <= doc["max_passing_value"] <= 0.5
    assert any(not float(v).is_integer() for v in keys(ran))


def test_knob_steps_carry_the_override():
    study = knob()()
    spec = study.spec(2000.0)
    assert spec.params == {"tiles": 1, "set": "mail.mailboxes=2000"}
    assert spec.label == "mail.mailboxes=2000"


# -----------------------------------------------------------------------------------------------
# --tiles


@pytest.mark.parametrize(
    "text, counts",
    [
        ("1..8", [1, 2, 3, 4, 5, 6, 7, 8]),
        ("1,2,4", [1, 2, 4]),
        ("4", [4]),
        (" 2 .. 4 ", [2, 3, 4]),
        ("8, 1,4,4", [1, 4, 8]),
        ("256", [256]),
        ("3..3", [3]),
    ],
)
def test_parse_tile_counts_accepts(text, counts):
    assert parse_tile_counts(text) == counts


@pytest.mark.parametrize(
    "text", ["0..3", "a", "3..1", "0", "1..257", "", "1,,2", "-1..3", "1-8", "1.5", "1..8,9"]
)
def test_parse_tile_counts_rejects_with_a_usage_error_naming_tiles(text):
    with pytest.raises(UsageError) as e:
        parse_tile_counts(text)
    assert str(e.value).startswith("--tiles ")
    assert repr(text.strip()) in str(e.value)


# -----------------------------------------------------------------------------------------------
# What an answer is worth: the range's top, inconclusive and host-bound steps


@pytest.mark.parametrize("search", [False, True])
def test_an_answer_at_the_top_of_the_range_is_limited_by_it(search):
    _, doc = drive(tiles(range(1, 5), search=search), capacity(99))
    assert doc["max_passing_tiles"] == 4 and doc["limited_by_range"] is True
    _, doc = drive(tiles(range(1, 5), search=search), capacity(3))
    assert doc["max_passing_tiles"] == 3 and doc["limited_by_range"] is False


def test_an_inconclusive_step_bounding_the_answer_is_measured_longer_and_then_decides():
    # 3 is inconclusive on its first runs (4 fails for certain), and passes once measured
    # longer: the study goes on (5 fails too) and the answer is 3, decided.
    ran, doc = drive(
        tiles(range(1, 8)),
        lambda n, k: n <= 2 or (n == 3 and k >= 2) or ("noise" if n == 3 else False),
        confirm_runs=1,
    )
    assert [r for n, r in ran if n == 3] == [NEW, CONFIRM, EXTEND]
    assert keys(ran, NEW) == [1, 2, 3, 4, 5]
    assert step(doc, 3)["verdict"] == "pass" and step(doc, 3)["longer_window"] is True
    assert doc["max_passing_tiles"] == 3 and doc["inconclusive_at"] is None
    # Only the step that bounds the answer is measured longer, not every failed one.
    assert [n for n, r in ran if r == EXTEND] == [3]


def test_an_answer_bounded_by_a_step_that_stays_inconclusive_is_a_range():
    ran, doc = drive(tiles(range(1, 8)), lambda n, k: n <= 2 or "noise", confirm_runs=0)
    # 3 and 4 fail within noise (linear, --confirm 1); 3 bounds the answer and is run once more
    # with a longer window; it stays inconclusive.
    assert ran == [(1, NEW), (2, NEW), (3, NEW), (4, NEW), (3, EXTEND)]
    assert doc["max_passing_tiles"] == 2 and doc["inconclusive_at"] == 3
    assert doc["first_failure"]["within_noise"] is True
    assert doc["first_failure"]["longer_window"] is True


def test_a_decided_failure_is_not_measured_longer():
    ran, doc = drive(tiles(range(1, 8)), capacity(2), confirm_runs=1)
    assert EXTEND not in [r for _, r in ran]
    assert doc["inconclusive_at"] is None and doc["host_bound"] is False


def test_a_tool_bound_failure_is_run_again_even_without_confirm_runs():
    # Every run of 3 and above measured the host (tool-bound) and failed.
    ran, doc = drive(
        tiles(range(1, 8)), capacity(2), confirm_runs=0, tool_bound=lambda n, k: n >= 3
    )
    assert [r for n, r in ran if n == 3] == [NEW, CONFIRM]
    assert doc["max_passing_tiles"] == 2
    assert doc["host_bound"] is True and doc["first_failure"]["host_bound"] is True
    assert doc["tool_bound_steps"] == [3, 4]


def test_a_tool_bound_failure_that_fails_again_on_a_free_host_is_a_storage_failure():
    ran, doc = drive(
        tiles(range(1, 8)), capacity(2), confirm_runs=0, tool_bound=lambda n, k: n == 3 and k == 0
    )
    assert [r for n, r in ran if n == 3] == [NEW, CONFIRM]
    assert doc["max_passing_tiles"] == 2 and doc["host_bound"] is False


def test_tool_bound_passes_are_believed_and_listed():
    _, doc = drive(tiles(range(1, 5)), capacity(2), tool_bound=lambda n, k: n == 1)
    assert doc["max_passing_tiles"] == 2 and doc["host_bound"] is False
    assert doc["tool_bound_steps"] == [1]
    assert step(doc, 1)["tool_bound"] is True and step(doc, 2)["tool_bound"] is False


def test_knob_search_bounded_by_an_inconclusive_value_answers_a_range():
    ran, doc = drive(knob(), lambda v, _: True if v <= 1500 else "noise")
    assert doc["max_passing_value"] <= 1500 < doc["first_failing_value"]
    assert doc["inconclusive_at"] == doc["first_failing_value"]
    assert [v for v, r in ran if r == EXTEND] == [doc["first_failing_value"]]


def test_knob_search_caveats_at_the_top_and_host_bound():
    _, doc = drive(knob(high=3000), lambda v, _: True)
    assert doc["limited_by_range"] is True and doc["host_bound"] is False
    _, doc = drive(knob(), lambda v, _: v <= 1500, tool_bound=lambda v, _: v > 1500)
    assert doc["host_bound"] is True and doc["limited_by_range"] is False


def test_an_extended_step_runs_with_a_longer_window(monkeypatch):
    from tilemark.run.tiles import TileRunSettings
    from tilemark.study import scale as scale_module

    seen = []

    class Outcome:
        complete, error, exit_status, run_id, run_dir = True, None, None, "r", "/d"
        summary = {
            "applications": {"failed": [], "score": 1.0, "applications": [], "instances": [],
                             "verdict": "pass"},
            "total": {},
        }  # fmt: skip

    def fake_run_tiles(tile, n, settings, infos, **kw):
        seen.append(settings.max_duration_s)
        return Outcome()

    monkeypatch.setattr(scale_module, "run_tiles", fake_run_tiles)
    settings = TileRunSettings([], 1 << 20, duration=2, warmup=0, max_duration=8)
    runner = scale_module.TileStepRunner(lambda spec: None, settings, None)
    spec = StepSpec(1, "1 tile(s)", {"tiles": 1})
    runner.run(spec, NEW)
    runner.run(spec, EXTEND)
    assert seen == [8.0, 16.0]
