"""The shapes of two fio values with rules of their own: `bssplit` (size mixes) and
`random_distribution` (placement), read as fio's options.c and io_u.c read them (fio commit
f5344384), in tilemark's terms."""

from __future__ import annotations

import re

from tilemark.errors import UsageError
from tilemark.fio import values


class Refused(Exception):
    """A value fio accepts that tilemark cannot honour: one clause, and its group."""

    def __init__(self, why: str, group: str = "no tilemark equivalent") -> None:
        super().__init__(why)
        self.why, self.group = why, group


def bssplit(text: str, label: str, kb_base: int) -> list[tuple[int, float]]:
    """fio's bssplit (options.c bssplit_ddir, io_u.c get_next_buflen): entries sorted by
    share, an empty or 0 share splits what is left evenly (whole percents), shares past 100
    are never drawn, and what is missing up to 100 goes to the last entry in that order."""
    entries: list[tuple[int, int | None]] = []
    for part in text.split(":"):
        if not part:
            break
        size_text, slash, share = part.partition("/")
        size = values.parse_size(size_text, label, kb_base=kb_base)
        if size == 0:
            raise UsageError(f"{label} sizes must be above 0, got {text!r}.")
        perc: int | None = None
        if slash:
            if not re.fullmatch(r"\s*\d*\s*", share):
                # fio's atoi() reads "abc" as 0, "split the rest": never what was meant.
                raise UsageError(
                    f"{label} shares must be whole percents (SIZE/PERCENT, or SIZE/ to "
                    f"split what is left), got {share!r} in {text!r}."
                )
            perc = min(int(share), 100) if share.strip() else 0
            perc = perc or None
        entries.append((size, perc))
    if not entries:
        raise UsageError(f"{label} must list SIZE/PERCENT entries, got {text!r}.")
    given = sum(p for _, p in entries if p is not None)
    missing = sum(1 for _, p in entries if p is None)
    if given > 100 and missing:
        raise UsageError(
            f"{label} shares add up to {given} with entries left to fill; fio allows "
            f"at most 100 in total, got {text!r}."
        )
    if missing:
        each = 100 if (missing == 1 and len(entries) == 1) else (100 - given) // missing
        entries = [(s, p if p is not None else each) for s, p in entries]
    ordered = sorted(entries, key=lambda e: e[1])  # qsort by share, ascending
    total = sum(p for _, p in ordered)
    shares = [p for _, p in ordered]
    if total != 100:
        ties = len({p for p in shares}) != len(shares)
        if ties:
            raise Refused(
                f"its shares add up to {total}, and fio hands the difference to whichever "
                "entry its sort puts last, which for equal shares depends on the C library; "
                "make the shares add up to 100",
                "malformed values",
            )
        cumulative, effective = 0, []
        for p in shares:
            share = min(cumulative + p, 100) - min(cumulative, 100)
            cumulative += p
            effective.append(share)
        effective[-1] += max(0, 100 - cumulative)
        shares = effective
    low = min(s for s, _ in ordered)
    for size, _ in ordered:
        if size % low:
            raise Refused(
                f"{size} bytes is not a multiple of its smallest size {low}, and fio rounds "
                "such sizes down to one (unless bs_unaligned)",
                "malformed values",
            )
    out = [(size, float(share)) for (size, _), share in zip(ordered, shares, strict=True) if share]
    # Written back in the file's order, which reads better.
    order = [size for size, _ in entries]
    return sorted(out, key=lambda e: order.index(e[0]))


def distribution(text: str, label: str) -> str:
    """fio's random_distribution (HOWTO random_distribution), in tilemark's words."""
    kind, _, arg = text.partition(":")
    if kind == "random":
        return "uniform"
    if kind == "zipf":
        theta_text, _, center = arg.partition(":")
        if center:
            raise Refused(
                f"{text} moves the hot spot (a center); tilemark's zipf starts it "
                "at no particular place",
                "placement",
            )
        try:
            theta = float(theta_text) if theta_text else 1.1  # FIO_DEF_ZIPF
        except ValueError:
            raise UsageError(f"{label} zipf needs a number (zipf:1.2), got {text!r}.") from None
        if not (theta > 0) or theta == 1.0 or theta != theta:
            raise UsageError(
                f"{label} zipf theta must be above 0 and not 1 (fio refuses 1), got {text!r}."
            )
        return f"zipf:{theta:g}"
    if kind == "zoned":
        return _zoned(label, text, arg)
    if kind in ("pareto", "normal", "gauss", "zoned_abs", "sequence"):
        raise Refused(
            f"{kind} placement has no tilemark pattern (uniform, zipf and a hot zone translate)",
            "placement",
        )
    raise UsageError(
        f"{label} must be random, zipf[:THETA], pareto, normal, zoned or zoned_abs, got {text!r}."
    )


def _zoned(label: str, text: str, arg: str) -> str:
    zones: list[tuple[int, int | None]] = []
    for part in arg.split(":"):
        if not part:
            break
        io_text, slash, size_text = part.partition("/")
        if not io_text.strip().isdigit() or not re.fullmatch(r"\s*\d*\s*", size_text):
            raise UsageError(
                f"{label} zoned needs whole IO/SIZE percentages such as "
                f"zoned:60/10:40/90, got {text!r}."
            )
        size = int(size_text) if size_text.strip() else 0
        zones.append((int(io_text), size or None))
    io_total = sum(io for io, _ in zones)
    if io_total != 100:
        raise UsageError(
            f"{label} zone IO shares must add up to 100 (fio refuses others), got "
            f"{io_total} in {text!r}."
        )
    sized = sum(s for _, s in zones if s is not None)
    missing = sum(1 for _, s in zones if s is None)
    if sized > 100:
        raise UsageError(f"{label} zone sizes add up to more than 100, got {text!r}.")
    if missing:
        each = (100 - sized) // missing
        zones = [(io, s if s is not None else each) for io, s in zones]
    if sum(s for _, s in zones) != 100:
        raise Refused(
            f"its zones cover {sum(s for _, s in zones)}% of the file, and fio "
            "then leaves the rest untouched",
            "placement",
        )
    if len(zones) == 1:
        return "uniform"
    if len(zones) == 2 and zones[0][1] < 100:
        (io, size), _ = zones
        return f"hotspot:{io:g}/{size:g}"
    if any(size == 0 for _, size in zones):
        raise Refused(f"{text} has a zone of no size, which fio never reaches", "placement")
    return "zoned:" + ":".join(f"{io:g}/{size:g}" for io, size in zones)
