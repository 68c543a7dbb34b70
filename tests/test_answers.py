"""What a scaling study's answer is worth, as the terminal and the report say it: the range's
top, an inconclusive bounding step, a host-bound failure and tool-bound passes (study/answers.py,
cli/scale.py), on studies driven by a scripted step runner (tests/test_study.py)."""

from __future__ import annotations

from test_study import capacity, drive, knob, tiles
from tilemark.cli.common import qos_lines, verdict_line
from tilemark.cli.scale import failure_lines, headline
from tilemark.store.results import read_study
from tilemark.study.answers import answer_phrase, caveat_notes


def test_a_plain_answer_has_no_caveats():
    _, raw = drive(tiles(range(1, 9)), capacity(3))
    doc = read_study(raw)  # as the CLI reads study.json
    assert answer_phrase(doc) == "3"
    assert caveat_notes(doc) == []
    assert headline(doc)[0] == "max passing tiles: 3, score 3.00 (5 runs, linear)"


def test_the_range_top_is_a_lower_bound():
    _, raw = drive(tiles(range(1, 5), search=True), capacity(99))
    doc = read_study(raw)  # as the CLI reads study.json
    assert answer_phrase(doc) == "at least 4 (the range's top)"
    lines = headline(doc)
    assert lines[0].startswith("max passing tiles: at least 4 (the range's top)")
    assert any("widen --tiles" in line for line in lines)


def test_the_knob_range_top_is_a_lower_bound():
    _, raw = drive(knob(high=8000), lambda v, _: True)
    doc = read_study(raw)  # as the CLI reads study.json
    assert answer_phrase(doc) == "at least 8000 (the range's top)"
    assert "widen --knob-range" in " ".join(caveat_notes(doc))
    assert headline(doc)[0].startswith("max mail.mailboxes at 1 tile: at least 8000")


def test_an_inconclusive_bound_makes_the_answer_a_range():
    _, raw = drive(tiles(range(1, 16)), lambda n, k: n <= 10 or "noise", confirm_runs=1)
    doc = read_study(raw)  # as the CLI reads study.json
    assert answer_phrase(doc) == "10 (11 inconclusive)"
    lines = headline(doc)
    assert lines[0].startswith("max passing tiles: 10 (11 inconclusive)")
    note = next(line for line in lines if "11 tiles was inconclusive" in line)
    assert "even measured for longer" in note and "between 10 and 11" in note
    assert (
        failure_lines(doc, raw)[0]
        == "11 tiles: QoS inconclusive (no criterion failed for certain):"
    )


def test_a_host_bound_failure_makes_the_answer_a_lower_bound():
    _, raw = drive(tiles(range(1, 4)), capacity(1), tool_bound=lambda n, k: True)
    doc = read_study(raw)  # as the CLI reads study.json
    assert answer_phrase(doc) == "at least 1 (host-bound)"
    notes = caveat_notes(doc)
    assert any(n.startswith("2 tiles failed only in runs that measured the host") for n in notes)
    # The passing step was tool-bound too: its pass stands, and it is said.
    assert any("tool-bound runs at tiles 1" in n and "passes stand" in n for n in notes)
    assert failure_lines(doc, raw)[0] == "2 tiles fail QoS:"


def test_one_tile_fails_in_the_singular():
    _, raw = drive(tiles(range(1, 4)), capacity(0))
    doc = read_study(raw)  # as the CLI reads study.json
    assert failure_lines(doc, raw)[0] == "1 tile fails QoS:"
    assert headline(doc)[0] == "no tile count passes QoS (2 runs, linear)"


def _app(name, verdict, decision, value, limit, more=0):
    worst = {
        "criterion": "read_p99", "unit": "ms", "value": value, "limit": limit, "decision": decision,
        "margin_pct": (value - limit) / limit * 100, "ci_low": value * 0.8,
        "ci_high": value * 1.2, "ci_bounded": True, "scope": "window", "tile": 2,
    }  # fmt: skip
    return {"app": name, "passed": False, "verdict": verdict, "worst": worst,
            "failed_criteria": 1 + more}  # fmt: skip


def test_inconclusive_criteria_are_listed_as_inconclusive_not_as_failures():
    apps = {
        "tiles": 2,
        "score": 2.0,
        "passed": False,
        "verdict": "fail",
        "applications": [
            _app("oltp", "fail", "fail", 39.1, 30, more=2),
            _app("web", "noise", "inconclusive", 42.2, 50),
        ],
    }
    oltp, web = qos_lines(apps)
    assert (
        oltp.startswith("  oltp fails: read_p99 39.1 ms vs 30 ms limit (+30%") and "+2 more" in oltp
    )
    assert web.startswith("  web inconclusive: read_p99 42.2 ms vs 50 ms limit (-16%")
    assert web.endswith("inconclusive) in tile 2") and "fail" not in web
    assert verdict_line(apps) == "QoS: FAIL in 2 tiles, score 2.00"
    apps["verdict"] = "noise"
    assert verdict_line(apps).startswith("QoS: inconclusive in 2 tiles, score 2.00: no criterion")


def test_counts_take_their_noun_and_changes_never_read_minus_zero():
    from tilemark.wording import counted, signed_pct

    assert counted(1, "tile") == "1 tile" and counted(2, "tile") == "2 tiles"
    assert counted(1, "criterion", "criteria") == "1 criterion"
    assert counted(3.0, "stream") == "3 streams" and counted(1200, "run") == "1,200 runs"
    assert signed_pct(-0.04) == "+0.0%" and signed_pct(-0.4, 0) == "+0%"
    assert signed_pct(12.94) == "+12.9%" and signed_pct(-3) == "-3.0%"


def test_an_example_step_says_what_its_exit_status_means():
    from tilemark.cli.example import step_outcome

    assert step_outcome(0) == "done (exit 0)"
    assert step_outcome(3) == "QoS failed (exit 3): an answer, not an error"
    assert step_outcome(130) == "interrupted (exit 130)"


def test_a_refusal_names_the_fields_that_differ_not_a_cut_off_dict():
    from tilemark.wording import value_differences

    a = {"bs": [4096, 65536], "qd": [1], "read": [100], "region": ["100%"]}
    b = {"bs": [4096], "qd": [1], "read": [100], "region": ["100%"]}
    assert value_differences("axes", a, b) == ["axes.bs (4096, 65536 vs 4096)"]
    stream = {"kind": "random", "size": 4096, "read_pct": 100, "pattern": {"dist": "uniform"}}
    other = {**stream, "pattern": {"dist": "zipf", "theta": 1.2}}
    assert value_differences("stream", stream, other) == [
        "stream.pattern.dist (uniform vs zipf)", "stream.pattern.theta (none vs 1.2)"
    ]  # fmt: skip


def test_prose_wraps_between_words_with_an_indent_and_stays_whole_on_a_pipe():
    import io

    from rich.console import Console

    from tilemark.console import PIPE_WIDTH, say

    text = (
        "tool-bound: host CPU 99% busy on average (above 85%); 8 of 12 open-loop streams "
        "issued more than 1% of their IOs more than 1 ms late, worst t1.oltp.redo 8.4%"
    )
    narrow = Console(file=io.StringIO(), width=60)
    say(narrow, text)
    lines = narrow.file.getvalue().splitlines()
    assert len(lines) > 1 and all(len(line) <= 60 for line in lines)
    assert all(line.startswith("  ") for line in lines[1:])
    assert " ".join(line.strip() for line in lines) == text  # no word cut in two
    pipe = Console(file=io.StringIO(), width=PIPE_WIDTH)
    say(pipe, text)
    assert pipe.file.getvalue() == text + "\n"


def test_a_workload_from_flags_is_named_by_its_stream_not_flags():
    from tilemark.wording import workload_title

    stream = {"name": "randread", "sizes": [[4096, 1.0]], "pattern": {"kind": "uniform"},
              "read_pct": 100, "qd": 4}  # fmt: skip
    assert workload_title({"name": "flags"}, [stream]) == "randread: 100% read, 4 KiB uniform, QD 4"
    assert workload_title({"name": "flags"}, [stream, stream]) == "workload (2 streams)"
    assert workload_title({"name": "oltp-nightly"}, [stream]) == "oltp-nightly"


def test_the_studies_listing_keeps_the_caveats():
    from tilemark.cli.studies import _result

    row = {"kind": "scale", "max_passing_tiles": 4, "answer": "at least 4 (the range's top)"}
    assert _result(row) == "max tiles: at least 4 (the range's top)"
    assert _result({"kind": "scale", "max_passing_tiles": 2, "answer": "2"}) == "max 2 tiles"
    knob_row = {"kind": "knob", "knob": "mail.mailboxes", "max_passing_value": 5625.0,
                "answer": "5625 (6000 inconclusive)"}  # fmt: skip
    assert _result(knob_row) == "max mail.mailboxes: 5625 (6000 inconclusive)"
