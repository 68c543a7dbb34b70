"""What a scaling study's answer is worth, in words: the terminal headline (cli/scale.py) and
the report's verdict (report/study_report.py) say the same thing from study.json.

An answer is a number with its caveats (docs/studies.md, What an answer is worth):

- at the top of the range: "at least 4 (the range's top)" -- every step up to it passed;
- bounded by an inconclusive step: "10 (11 inconclusive)" -- the capacity lies between them;
- bounded by a failure that measured the host: "at least 1 (host-bound)";
- tool-bound steps that passed are listed: their passes stand.
"""

from __future__ import annotations

from typing import Any

from tilemark.store.results import FirstFailure, StudyDoc
from tilemark.wording import counted


def is_knob(doc: StudyDoc) -> bool:
    return doc.kind == "knob"


def answer_key(doc: StudyDoc) -> str:
    """The study.json field of the answer (and with `_runs`, of each repeat's)."""
    return "max_passing_value" if is_knob(doc) else "max_passing_tiles"


def answer(doc: StudyDoc) -> float | None:
    """The study's answer: the largest passing knob value or tile count (None: none passed)."""
    return doc.max_passing_value if is_knob(doc) else doc.max_passing_tiles


def answer_runs(doc: StudyDoc) -> list[Any]:
    """Each repeat's answer."""
    runs = doc.max_passing_value_runs if is_knob(doc) else doc.max_passing_tiles_runs
    return list(runs or [])


def value_text(value: float | None) -> str:
    """A tile count or knob value as people read it: 4, 5625, 0.25."""
    if value is None:
        return "none"
    return f"{int(value)}" if float(value).is_integer() else f"{value:g}"


def step_name(doc: StudyDoc, value: float) -> str:
    """'3 tiles', 'mail.mailboxes=6000'."""
    if is_knob(doc):
        return f"{doc.knob}={value_text(value)}"
    return counted(int(value), "tile")


def answer_phrase(doc: StudyDoc) -> str:
    """The answer and its caveats in a few words: '4', 'at least 4 (the range's top)',
    '10 (11 inconclusive)', 'at least 1 (host-bound)', 'none'."""
    best = answer(doc)
    if best is None:
        return "none"
    caveats = []
    lower_bound = False
    if doc.limited_by_range:
        lower_bound = True
        caveats.append("the range's top")
    if doc.host_bound:
        lower_bound = True
        caveats.append("host-bound")
    if doc.inconclusive_at is not None:
        caveats.append(f"{value_text(doc.inconclusive_at)} inconclusive")
    shown = ("at least " if lower_bound else "") + value_text(best)
    return shown + (f" ({'; '.join(caveats)})" if caveats else "")


def caveat_notes(doc: StudyDoc) -> list[str]:
    """One sentence per caveat of the answer: what it means and what was done about it."""
    return [text for text, _warns in caveats(doc)]


def caveats(doc: StudyDoc) -> list[tuple[str, bool]]:
    """caveat_notes with whether each warns (an answer that is a range, a host-bound bound,
    tool-bound runs) or only informs (the range's top)."""
    best = answer(doc)
    notes: list[tuple[str, bool]] = []
    flag = "--knob-range" if is_knob(doc) else "--tiles"
    if doc.limited_by_range and best is not None:
        notes.append(
            (
                f"{step_name(doc, best)} is the top of the range and passed: the storage may "
                f"carry more; widen {flag} to find where QoS fails",
                False,
            )
        )
    first = doc.first_failure or FirstFailure()
    at = first.value if is_knob(doc) else first.tiles
    if doc.inconclusive_at is not None:
        longer = " even measured for longer" if first.longer_window else ""
        text = (
            f"{step_name(doc, doc.inconclusive_at)} was inconclusive{longer}: a QoS "
            "criterion's confidence interval straddles its limit"
        )
        if best is not None:
            text += (
                f", so the capacity lies between {value_text(best)} and "
                f"{value_text(doc.inconclusive_at)}"
            )
        notes.append((text, True))
    if doc.host_bound and at is not None:
        runs = sum((first.votes or {}).values())
        if best is not None:
            text = (
                f"{step_name(doc, at)} failed only in runs that measured the host, not the "
                f"storage (tool-bound: host CPU above 85% or the engine behind its schedule; "
                f"{counted(runs, 'run')}): the storage carries at least {value_text(best)}; a "
                "less busy or faster load host would show how much more"
            )
        else:
            text = (
                f"{step_name(doc, at)} failed only in runs that measured the host, not the "
                f"storage (tool-bound, {counted(runs, 'run')}): the host, not the storage, may "
                "be what failed"
            )
        notes.append((text, True))
    passed_bound = [
        v
        for v in doc.tool_bound_steps or []
        if best is not None and v <= best and not (doc.host_bound and v == at)
    ]
    if passed_bound:
        axis = doc.knob if is_knob(doc) else "tiles"
        listed = ", ".join(value_text(v) for v in passed_bound)
        notes.append(
            (
                f"tool-bound runs at {axis} {listed} (host CPU above 85% or the engine behind "
                "its schedule): their passes stand, since a busy host only makes QoS harder "
                "to meet",
                True,
            )
        )
    return notes
