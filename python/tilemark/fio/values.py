"""fio's value syntax, read the way fio's parser reads it, not the way tilemark's units do.

The rules are fio's HOWTO ("Parameter types") checked against its parser (parse.c,
`str_to_decimal`, `get_mult_bytes`, `get_mult_time`, at fio commit f5344384) and fio 3.33:

- Integers are decimal, or hexadecimal with `0x`. A unit suffix multiplies them, for sizes
  and for plain integers alike (`iodepth=1k` is 1024). With `kb_base=1024` (fio's default)
  `k`, `kb`, `ki` mean 1024 and only the full IEC spelling `kib` means 1000 ("opposite
  units, for compatibility with old scripts"); with `kb_base=1000` it is the other way round.
- fio reads the digits before a decimal point and drops the rest: `1.5m` is 1 byte to fio,
  and `bs=1.5k` issues 1-byte IOs. Such values are refused here rather than read either way.
- Times are seconds when bare (microseconds for options such as `thinktime`), with suffixes
  `d`, `h`, `m`, `s`, `ms`/`msec`, `us`/`usec`. fio's HOWTO also lists `sec`, but fio's
  parser reads any other suffix as microseconds (`runtime=30sec` runs for 30 us), so those
  are refused with that sentence.

Every error names the option (`label`) and says what fio allows, in one sentence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tilemark.errors import UsageError

_INT = re.compile(r"(?P<num>\d+)(?P<frac>\.\d*)?(?P<suffix>[A-Za-z%]*)")
_HEX = re.compile(r"0[xX](?P<hex>[0-9a-fA-F]+)")
_POWERS = {"k": 1, "m": 2, "g": 3, "t": 4, "p": 5}
_TIME_US = {"d": 86_400_000_000, "h": 3_600_000_000, "m": 60_000_000, "s": 1_000_000}

SIZE_HELP = "a whole number with an optional unit such as 4k, 64KiB, 10g or 0x1000"


@dataclass(frozen=True)
class Percent:
    """A value written as a share (`50%`), which fio applies to the file or device size."""

    value: int


def unit_multiplier(suffix: str, kb_base: int) -> int | None:
    """The multiplier of a size suffix under `kb_base`, as fio's get_mult_bytes() computes
    it; None for a suffix fio does not know (it would silently read it as 1)."""
    s = suffix.lower()
    if s in ("", "b"):
        return 1
    letter = s[0]
    if letter not in _POWERS:
        return None
    rest = s[1:]
    if rest in ("ib", "ibyte"):  # the IEC spelling: 1024-based only when kb_base=1000
        base = 1024 if kb_base == 1000 else 1000
    elif rest in ("", "b", "i"):  # "ki" is not "kib": fio matches the letter alone
        base = kb_base
    else:
        return None
    return base ** _POWERS[letter]


def parse_int(
    text: str, label: str, *, kb_base: int = 1024, percent: bool = False
) -> int | Percent:
    """An integer with an optional unit suffix, as fio reads sizes and integers."""
    value = text.strip()
    if match := _HEX.fullmatch(value):
        return int(match.group("hex"), 16)
    match = _INT.fullmatch(value)
    if not match:
        raise UsageError(f"{label} must be {SIZE_HELP}, got {text!r}.")
    number = int(match.group("num"))
    if match.group("frac"):
        raise UsageError(
            f"{label} {text!r} has a decimal point, which fio does not read (it takes the "
            f"digits before the point, {number}, and drops the unit); write a whole number "
            "in a smaller unit, such as 1536m for 1.5g."
        )
    suffix = match.group("suffix")
    if suffix == "%":
        if not percent:
            raise UsageError(f"{label} must be {SIZE_HELP}; a share such as {text} is not allowed.")
        return Percent(number)
    multiplier = unit_multiplier(suffix, kb_base)
    if multiplier is None:
        raise UsageError(
            f"{label} {text!r} has a unit fio does not know ({suffix}); fio reads such a value "
            "as a plain number of bytes, so write k, m, g, t or p (KiB etc. with kb_base=1000)."
        )
    return number * multiplier


def parse_size(text: str, label: str, *, kb_base: int = 1024) -> int:
    """A byte count (no share of a file)."""
    value = parse_int(text, label, kb_base=kb_base)
    assert isinstance(value, int)
    return value


def parse_time_us(text: str, label: str, *, bare_seconds: bool = True) -> int:
    """A time in microseconds, as fio's get_mult_time() reads it: bare numbers are seconds
    (`bare_seconds`) or microseconds."""
    value = text.strip()
    match = re.fullmatch(r"(\d+)(\.\d*)?([A-Za-z]*)", value)
    if not match:
        raise UsageError(
            f"{label} must be a whole number with an optional unit d, h, m, s, ms or us "
            f"(e.g. 30s, 500ms), got {text!r}."
        )
    number, frac, suffix = int(match.group(1)), match.group(2), match.group(3).lower()
    if frac:
        raise UsageError(
            f"{label} {text!r} has a decimal point, which fio does not read (it takes "
            f"{number}); write a whole number in a smaller unit, such as 1500ms."
        )
    if suffix == "":
        return number * (1_000_000 if bare_seconds else 1)
    if suffix.startswith("us"):
        return number if suffix in ("us", "usec") else _bad_time(label, text, suffix)
    if suffix.startswith("ms"):
        return number * 1000 if suffix in ("ms", "msec") else _bad_time(label, text, suffix)
    if suffix in _TIME_US:
        return number * _TIME_US[suffix]
    return _bad_time(label, text, suffix)


def _bad_time(label: str, text: str, suffix: str) -> int:
    raise UsageError(
        f"{label} {text!r}: fio reads the unit {suffix!r} as microseconds (its parser knows "
        "only d, h, m, s, ms/msec and us/usec; the HOWTO's 'sec' too is read as "
        "microseconds), so write one of those."
    )


def parse_bool(text: str | None, label: str) -> bool:
    """fio's bool: a bare option is true; otherwise an integer, 0 false and anything else
    true (parse.c reads bools as integers)."""
    if text is None or text.strip() == "":
        return True
    value = text.strip()
    if re.fullmatch(r"\d+", value):
        return int(value) != 0
    raise UsageError(f"{label} must be 0 or 1, got {text!r}.")


def parse_percent(text: str, label: str, *, kb_base: int = 1024) -> int:
    """fio's percentage options: whole numbers from 0 to 100 (maxval 100 in options.c)."""
    value = parse_int(text, label, kb_base=kb_base)
    assert isinstance(value, int)
    if value > 100:
        raise UsageError(f"{label} must be a whole number from 0 to 100, got {text!r}.")
    return value


def per_direction(text: str, label: str) -> list[str]:
    """fio's `read,write,trim` lists: one value for every direction, or one each (an empty
    entry keeps that direction's default, which is refused here as ambiguous)."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) > 3:
        raise UsageError(
            f"{label} takes at most three comma-separated values (read,write,trim), got {text!r}."
        )
    if len(parts) > 1 and any(p == "" for p in parts[:2]):
        raise UsageError(
            f"{label} {text!r} leaves a direction empty, which keeps fio's default for it; "
            "give the read and the write value."
        )
    return parts
