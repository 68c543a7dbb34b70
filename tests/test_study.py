"""The scaling study's choice of tile counts, on synthetic step outcomes (no IO): linear mode
with confirmation, blips, --search by doubling and bisection, and --tiles parsing."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from tilemark.cli.tiles import MAX_TILES, Step, Study, parse_tile_counts
from tilemark.errors import UsageError


def step(n: int, passed: bool) -> Step:
    return Step(
        tiles=n,
        run_id=f"run-{n}",
        run_dir=f"/results/run-{n}",
        passed=passed,
        complete=True,
        failed=[] if passed else [f"t{n}.oltp: data read p99 <= 30 ms (window: 41.00 ms)"],
        score=float(n) if passed else n * 0.8,
        applications=[],
        total={},
    )


def drive(study: Study, passes: Callable[[int], bool], limit: int = 1000) -> list[int]:
    """Run the study against a storage whose verdict for n tiles is passes(n); the counts run."""
    ran: list[int] = []
    while (n := study.next_count()) is not None:
        assert n in study.counts, n
        assert n not in study.steps, f"{n} tiles asked for twice"
        ran.append(n)
        study.record(step(n, passes(n)))
        assert len(ran) <= limit, ran
    return ran


def capacity(k: int) -> Callable[[int], bool]:
    return lambda n: n <= k


# -----------------------------------------------------------------------------------------------
# Linear


@pytest.mark.parametrize("k", range(0, 9))
def test_linear_stops_after_two_failures_in_a_row_with_confirm_1(k):
    study = Study(list(range(1, 9)), search=False, confirm=1)
    ran = drive(study, capacity(k))
    assert ran == list(range(1, min(k + 2, 8) + 1))
    assert study.max_passing() == (k or None)
    if k <= 6:
        assert [study.steps[n].passed for n in ran[-2:]] == [False, False]


@pytest.mark.parametrize("k", range(0, 9))
def test_linear_stops_at_the_first_failure_with_confirm_0(k):
    study = Study(list(range(1, 9)), search=False, confirm=0)
    ran = drive(study, capacity(k))
    assert ran == list(range(1, min(k + 1, 8) + 1))
    assert study.max_passing() == (k or None)


def test_linear_confirm_2_needs_three_failures_in_a_row():
    study = Study(list(range(1, 9)), search=False, confirm=2)
    assert drive(study, capacity(3)) == [1, 2, 3, 4, 5, 6]
    assert study.max_passing() == 3


def test_a_failing_blip_followed_by_passes_continues_the_study():
    # 3 fails once (noise), 4..6 pass, 7 and 8 fail: the capacity is 6.
    study = Study(list(range(1, 9)), search=False, confirm=1)
    ran = drive(study, lambda n: n != 3 and n <= 6)
    assert ran == [1, 2, 3, 4, 5, 6, 7, 8]
    assert study.max_passing() == 6


def test_a_blip_does_not_count_towards_confirmation_after_a_pass():
    # fail, pass, fail, fail: the pass resets the count, the last two confirm.
    study = Study(list(range(1, 11)), search=False, confirm=1)
    ran = drive(study, lambda n: n in (1, 2, 4))
    assert ran == [1, 2, 3, 4, 5, 6]
    assert study.max_passing() == 4


def test_linear_with_confirm_0_stops_at_a_blip():
    study = Study(list(range(1, 9)), search=False, confirm=0)
    assert drive(study, lambda n: n != 3) == [1, 2, 3]
    assert study.max_passing() == 2


def test_linear_over_a_list_of_counts():
    study = Study([1, 2, 4, 8, 16], search=False, confirm=1)
    assert drive(study, capacity(5)) == [1, 2, 4, 8, 16]
    assert study.max_passing() == 4


def test_max_passing_ignores_passes_after_the_confirmed_failure():
    # Recorded out of band (e.g. a resumed study): 5 passing after 3 and 4 failed is not used.
    study = Study(list(range(1, 9)), search=False, confirm=1)
    for n, ok in [(1, True), (2, True), (3, False), (4, False), (5, True)]:
        study.record(step(n, ok))
    assert study.next_count() is None
    assert study.max_passing() == 2


def test_nothing_run_yet():
    for search in (False, True):
        study = Study([2, 3, 4], search=search, confirm=1)
        assert study.max_passing() is None
        assert study.next_count() == 2


# -----------------------------------------------------------------------------------------------
# Search


@pytest.mark.parametrize("k", range(0, 65))
def test_search_finds_the_capacity_in_about_2_log2_runs(k):
    counts = list(range(1, 65))
    study = Study(counts, search=True, confirm=1)
    ran = drive(study, capacity(k))
    assert study.max_passing() == (k or None)
    assert len(ran) <= 2 * math.log2(64), ran
    # The answer is proven: k passed, and k + 1 failed unless k is the top of the range.
    if k:
        assert study.steps[k].passed
    if k < 64:
        assert not study.steps[k + 1].passed


def test_search_doubles_then_bisects():
    study = Study(list(range(1, 65)), search=True, confirm=1)
    assert drive(study, capacity(37)) == [1, 2, 4, 8, 16, 32, 64, 48, 40, 36, 38, 37]
    assert study.max_passing() == 37


def test_search_stops_when_one_tile_fails():
    study = Study(list(range(1, 65)), search=True, confirm=1)
    assert drive(study, capacity(0)) == [1]
    assert study.max_passing() is None


def test_search_runs_only_the_given_counts():
    study = Study([1, 2, 4, 8, 16, 32], search=True, confirm=1)
    ran = drive(study, capacity(11))
    assert ran == [1, 2, 4, 8, 16]
    assert study.max_passing() == 8


def test_search_from_a_range_not_starting_at_1():
    study = Study(list(range(3, 20)), search=True, confirm=1)
    ran = drive(study, capacity(11))
    assert ran[:3] == [3, 6, 12]
    assert study.max_passing() == 11
    assert len(ran) <= 2 * math.ceil(math.log2(17))


@pytest.mark.parametrize("k", [1, 5, 100, 255, 256])
def test_search_over_the_whole_range(k):
    study = Study(parse_tile_counts(f"1..{MAX_TILES}"), search=True, confirm=1)
    ran = drive(study, capacity(k))
    assert study.max_passing() == k
    assert len(ran) <= 2 * math.log2(MAX_TILES)


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
