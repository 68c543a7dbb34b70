"""The arguments of a scaling study, parsed and checked before any IO: `--tiles` (a range or
a list of tile counts), `--knob APP.KNOB` (a numeric scale knob of one application of the tile,
with its starting value) and `--knob-range LOW..HIGH`. Each mistake is one UsageError naming the
flag (study/scale.py runs the studies)."""

from __future__ import annotations

import math
import re

from tilemark.errors import UsageError
from tilemark.run.tiles import MAX_TILES
from tilemark.workload.apps import TileSpec

KNOB_SPAN_DOWN = 64  # default knob range: the profile's value / 64 .. x 1024
KNOB_SPAN_UP = 1024


def parse_tile_counts(text: str) -> list[int]:
    """'1..8' -> [1..8]; '1,2,4' -> [1, 2, 4]; '4' -> [4]."""
    text = text.strip()
    m = re.fullmatch(r"(\d+)\s*\.\.\s*(\d+)", text)
    if m:
        lo, hi = int(m[1]), int(m[2])
        counts = list(range(lo, hi + 1))
    elif re.fullmatch(r"\d+(\s*,\s*\d+)*", text):
        counts = sorted({int(x) for x in text.split(",")})
    else:
        raise UsageError(f"--tiles must be a range like 1..8 or a list like 1,2,4, got {text!r}.")
    if not counts:
        raise UsageError(f"--tiles range {text!r} is empty; write it low..high, e.g. 1..8.")
    if counts[0] < 1 or counts[-1] > MAX_TILES:
        raise UsageError(f"--tiles counts must be from 1 to {MAX_TILES}, got {text!r}.")
    return counts


def parse_knob(knob: str, tile: TileSpec) -> tuple[str, str, float]:
    """'mail.mailboxes' -> ('mail', 'mailboxes', its current value in the tile); a tile of one
    application also takes the bare knob ('mailboxes')."""
    labels = [a.label for a in tile.apps]
    if "." not in knob.strip() and len(labels) == 1 and knob.strip() in tile.apps[0].profile.scale:
        knob = f"{labels[0]}.{knob.strip()}"
    app, dot, name = knob.strip().partition(".")
    if not dot or not name:
        raise UsageError(f"--knob must be APP.KNOB such as mail.mailboxes, got {knob!r}.")
    found = next((a for a in tile.apps if a.label == app), None)
    if found is None:
        raise UsageError(
            f"--knob {knob}: the tile has no application '{app}' (it has: {', '.join(labels)})."
        )
    if name not in found.profile.scale:
        knobs = ", ".join(sorted(found.profile.scale)) or "none"
        raise UsageError(f"--knob {knob}: {app} has no scale knob '{name}' (knobs: {knobs}).")
    value = float(found.profile.scale[name])
    if not (value > 0 and math.isfinite(value)):
        raise UsageError(
            f"--knob {knob}: its value in the tile is {value:g}; set a positive starting value "
            f"with --set {knob}=VALUE."
        )
    return app, name, value


def parse_knob_range(text: str | None, start: float) -> tuple[float, float]:
    """'LOW..HIGH' -> (low, high); default start / 64 .. start x 1024."""
    if text is None:
        return start / KNOB_SPAN_DOWN, start * KNOB_SPAN_UP
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*\.\.\s*(\d+(?:\.\d*)?)\s*", text)
    if not m or not 0 < float(m[1]) < float(m[2]):
        raise UsageError(
            f"--knob-range must be LOW..HIGH with 0 < LOW < HIGH, e.g. 100..100000, got {text!r}."
        )
    low, high = float(m[1]), float(m[2])
    if not low <= start <= high:
        raise UsageError(
            f"--knob-range {text} does not contain the knob's starting value {start:g}; widen "
            "it or set the start with --set."
        )
    return low, high
