"""Parsing of the sizes, rates, durations and percentages users type.

Rules (the same for CLI flags and workload TOML files):

- Sizes are bytes. Suffixes are binary and case-insensitive, like fio: `k`, `kb`, `kib` all mean
  1024; `m`/`mb`/`mib` 1024**2; `g` 1024**3; `t` 1024**4. `512` is 512 bytes, `1.5m` is
  1572864 bytes. A size must come out as a whole number of bytes.
- IO rates (`rate`) are IOs per second: `4000`, `2.5k` (2500), `1e3`, optionally followed by
  `iops` or `/s`. `k` and `m` are decimal here because they count IOs, not bytes. A stream runs
  at most 10 million IOs per second (MAX_IOPS) and 1 TB/s (MAX_BYTE_RATE): above that the
  engine's schedule is meaningless, and such a number is a typo.
- Byte rates (`rate_bytes`) are bytes per second, optionally followed by `/s`. A unit spelled
  with a `B` but no `i` is decimal and matches the MB/s tilemark reports: `100MB/s` is
  100,000,000 bytes/s. A bare letter or an `iB` unit is binary like fio's `rate=`: `100m` and
  `100MiB/s` are 104,857,600 bytes/s.
- Durations are seconds when bare (`60`), or carry units `ms`, `s`, `m`/`min`, `h`, which may be
  combined: `90s`, `2m`, `1h`, `1m30s`, `500ms`.
- Percentages are numbers from 0 to 100, with or without a trailing `%`.
- Numbers may be written with an exponent (`1e3`, `2.5E6`) wherever a number is expected.

Every parse error is a UsageError that names the field it came from.
"""

from __future__ import annotations

import math
import re

from tilemark.errors import UsageError

KIB = 1 << 10
MIB = 1 << 20
GIB = 1 << 30
TIB = 1 << 40

_BINARY_MULTIPLIERS = {"": 1, "b": 1, "k": KIB, "m": MIB, "g": GIB, "t": TIB}
_NUMBER = r"((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
_SIZE_RE = re.compile(_NUMBER + r"\s*([kmgt]?)(i?b?)", re.IGNORECASE)
_IOPS_RE = re.compile(_NUMBER + r"\s*([km]?)\s*(?:iops|/s)?", re.IGNORECASE)
_BYTE_RATE_RE = re.compile(_NUMBER + r"\s*([kmgt]?)(ib|b)?\s*(?:/s)?", re.IGNORECASE)
_DURATION_PART_RE = re.compile(_NUMBER + r"\s*(ms|s|min|m|h)?", re.IGNORECASE)
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}

MAX_IOPS = 10_000_000.0
# Any duration (a run's measured time, warm-up, a study's pause, a phase's start): 30 days.
MAX_DURATION_S = 30 * 86_400
MAX_BYTE_RATE = 1e12

SIZE_HELP = "a size such as 4k, 8KiB, 1.5m or 512 (bytes; k/m/g/t are binary)"
IOPS_HELP = "an IO rate above 0 such as 4000 or 2.5k (IOs per second)"
BYTE_RATE_HELP = "a byte rate above 0 such as 100MB/s (10^6 bytes), 100MiB/s or 100m (binary)"
DURATION_HELP = "a duration such as 60 (seconds), 90s, 500ms, 2m, 1m30s or 1h"


def _is_number(value: object) -> bool:
    # bool is an int subclass; `true` in a TOML file is never a size or a rate.
    return isinstance(value, int | float) and not isinstance(value, bool)


def _whole_bytes(number: float, field: str, shown: object) -> int:
    if not math.isfinite(number):
        raise UsageError(f"{field} must be {SIZE_HELP}, got {shown!r}.")
    rounded = round(number)
    if abs(number - rounded) > 1e-6:
        raise UsageError(
            f"{field} must be a whole number of bytes, got {shown!r} ({number:g} bytes)."
        )
    return int(rounded)


def parse_size(value: object, field: str) -> int:
    """Bytes from a size such as 4k, 8KiB, 1.5m, 512 or an integer."""
    if _is_number(value):
        if value < 0:
            raise UsageError(f"{field} must not be negative, got {value!r}.")
        return _whole_bytes(float(value), field, value)
    if not isinstance(value, str):
        raise UsageError(f"{field} must be {SIZE_HELP}, got {value!r}.")
    match = _SIZE_RE.fullmatch(value.strip())
    # Allowed spellings: 4k, 4kb, 4kib, 4b; "4ki" and "4ib" are typos, not units.
    if (
        not match
        or match.group(3).lower() not in ("", "b", "ib")
        or (match.group(3).lower() == "ib" and not match.group(2))
    ):
        raise UsageError(f"{field} must be {SIZE_HELP}, got {value!r}.")
    number, letter, _ = match.groups()
    return _whole_bytes(float(number) * _BINARY_MULTIPLIERS[letter.lower()], field, value)


def parse_iops(value: object, field: str) -> float:
    """IOs per second (> 0) from 4000, 2.5k, '4000 iops' or a number."""
    if _is_number(value):
        rate = float(value)
    elif isinstance(value, str) and (match := _IOPS_RE.fullmatch(value.strip())):
        number, letter = match.groups()
        rate = float(number) * {"": 1.0, "k": 1e3, "m": 1e6}[letter.lower()]
    else:
        raise UsageError(f"{field} must be {IOPS_HELP}, got {value!r}.")
    if not (rate > 0 and math.isfinite(rate)):
        raise UsageError(f"{field} must be {IOPS_HELP}, got {value!r}.")
    check_iops(rate, field)
    return rate


def check_iops(rate: float, field: str) -> None:
    """Refuse an IO rate above MAX_IOPS, naming the field."""
    if rate > MAX_IOPS:
        raise UsageError(
            f"{field} asks for {rate:,.0f} IOs/s; a stream runs at most {MAX_IOPS:,.0f} IOs/s."
        )


def check_byte_rate(rate: float, field: str) -> None:
    """Refuse a byte rate above MAX_BYTE_RATE, naming the field."""
    if rate > MAX_BYTE_RATE:
        raise UsageError(
            f"{field} asks for {rate / 1e6:,.0f} MB/s; a stream runs at most "
            f"{MAX_BYTE_RATE / 1e6:,.0f} MB/s."
        )


def parse_byte_rate(value: object, field: str) -> float:
    """Bytes per second (> 0) from 100MB/s (decimal), 100MiB/s or 100m (binary), or a number."""
    if _is_number(value):
        rate = float(value)
    elif isinstance(value, str) and (match := _BYTE_RATE_RE.fullmatch(value.strip())):
        number, letter, unit = match.groups()
        letter = letter.lower()
        if unit is not None and unit.lower() == "b" and letter:
            multiplier = {"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[letter]
        elif unit is not None and unit.lower() == "ib" and not letter:
            raise UsageError(f"{field} must be {BYTE_RATE_HELP}, got {value!r}.")
        else:
            multiplier = float(_BINARY_MULTIPLIERS[letter])
        rate = float(number) * multiplier
    else:
        raise UsageError(f"{field} must be {BYTE_RATE_HELP}, got {value!r}.")
    if not (rate > 0 and math.isfinite(rate)):
        raise UsageError(f"{field} must be {BYTE_RATE_HELP}, got {value!r}.")
    check_byte_rate(rate, field)
    return rate


def parse_duration(value: object, field: str) -> float:
    """Seconds (>= 0) from 60, 90s, 500ms, 2m, 1m30s, 1h or a number of seconds."""
    if _is_number(value):
        seconds = float(value)
    elif isinstance(value, str) and value.strip():
        text = value.strip()
        seconds, position = 0.0, 0
        parts = list(_DURATION_PART_RE.finditer(text))
        for part in parts:
            # Parts must tile the whole string ("1m30s"); a bare number only stands alone.
            if part.start() != position or (part.group(2) is None and len(parts) > 1):
                raise UsageError(f"{field} must be {DURATION_HELP}, got {value!r}.")
            unit = (part.group(2) or "s").lower()
            seconds += float(part.group(1)) * _DURATION_UNITS[unit]
            position = part.end()
        if not parts or position != len(text):
            raise UsageError(f"{field} must be {DURATION_HELP}, got {value!r}.")
    else:
        raise UsageError(f"{field} must be {DURATION_HELP}, got {value!r}.")
    if not (seconds >= 0 and math.isfinite(seconds)):
        raise UsageError(f"{field} must be {DURATION_HELP}, got {value!r}.")
    if seconds > MAX_DURATION_S:
        raise UsageError(
            f"{field} must be at most {MAX_DURATION_S // 86_400} days "
            f"({MAX_DURATION_S:,} s), got {value!r}."
        )
    return seconds


def parse_percent(value: object, field: str) -> float:
    """A percentage from 0 to 100, from 70, 70.5 or '70%'."""
    number: float | None = None
    if _is_number(value):
        number = float(value)
    elif isinstance(value, str):
        text = value.strip().removesuffix("%").strip()
        try:
            number = float(text)
        except ValueError:
            number = None
    if number is None or not (0.0 <= number <= 100.0):
        raise UsageError(f"{field} must be a percentage from 0 to 100, got {value!r}.")
    return number


def parse_size_mix(value: object, field: str) -> list[tuple[int, float]]:
    """Weighted IO sizes from '4k', '512:22,1k:15,4k:23', or a TOML list of [size, weight]."""
    mix_help = "a size such as 8k, or a weighted mix such as '512:22,1k:15,4k:23'"
    if isinstance(value, list):
        pairs = []
        for item in value:
            if not (isinstance(item, list | tuple) and len(item) == 2):
                raise UsageError(
                    f"{field} must be a list of [size, weight] pairs such as "
                    f'[["4k", 60], ["8k", 40]], got {value!r}.'
                )
            pairs.append((item[0], item[1]))
    elif isinstance(value, str) and ("," in value or ":" in value):
        pairs = []
        for item in value.split(","):
            size_text, sep, weight_text = item.partition(":")
            if not sep:
                raise UsageError(f"{field} must be {mix_help}, got {value!r}.")
            pairs.append((size_text.strip(), weight_text.strip()))
    else:
        return [(parse_size(value, field), 1.0)]

    if not pairs:
        raise UsageError(f"{field} must be {mix_help}, got an empty list.")
    mix = []
    for size_value, weight_value in pairs:
        size = parse_size(size_value, field)
        try:
            weight = float(weight_value)
        except (TypeError, ValueError):
            weight = -1.0
        if isinstance(weight_value, bool) or not (weight >= 0 and math.isfinite(weight)):
            raise UsageError(
                f"{field} weight must be a number 0 or above, "
                f"got {weight_value!r} for {size_value!r}."
            )
        mix.append((size, weight))
    if sum(weight for _, weight in mix) <= 0:
        raise UsageError(f"{field} weights must not all be 0, got {value!r}.")
    return mix


def format_size(n_bytes: int | float) -> str:
    """Human size with binary units: 4 KiB, 1.5 GiB, 512 B."""
    n = float(n_bytes)
    for unit, scale in (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(n) >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{int(n)} B"
