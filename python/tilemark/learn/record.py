"""Fidelity scores written into the profile learned from the reference trace (docs/learn.md)."""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime
from pathlib import Path

from tilemark.errors import UsageError
from tilemark.learn import MARK
from tilemark.learn.traces import fingerprint
from tilemark.learn.write import record_fidelity
from tilemark.trace.fidelity import Accuracy


def record_scores(
    profile: Path,
    a: Path,
    b: Path,
    accs: list[Accuracy],
    score: float | None,
    *,
    same_device: bool,
) -> None:
    """Replace `[learned.fidelity]` of `profile` by the comparison of A (a trace it was
    learned from, checked by fingerprint) with B (a capture of the profile running)."""
    from tilemark.store.outputs import starts_with, write_file

    try:
        text = profile.read_text()
        doc = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"--record {profile} cannot be read as a profile: {e}.") from None
    sources = doc.get("learned", {}).get("source", [])
    if not sources:
        raise UsageError(f"--record {profile} is not a learned profile (no [[learned.source]]).")
    mine = fingerprint(a)
    if mine not in [s.get("fingerprint") for s in sources]:
        raise UsageError(
            f"--record {profile} was not learned from {a} (its fingerprint matches none of the "
            "profile's sources); compare the trace it was learned from."
        )
    scores: dict[str, object] = {
        "measured_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "reference": str(a),
        "compared": str(b),
        "same_device": same_device,
        "overall": round(score, 4) if score is not None else "n/a",
    }
    for x in accs:
        scores[x.property] = round(x.accuracy, 4) if x.accuracy is not None else "n/a"
    write_file(profile, record_fidelity(text, scores), ours=starts_with(MARK), what="profile")
