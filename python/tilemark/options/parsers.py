"""Parsers of single option values and the limits they enforce.

Each parser checks one value's syntax and raises UsageError with one sentence that names the
field (`label`) and what is allowed. Checks that involve several fields live in
workload/plan.py and workload/compiler.py.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from typing import Any

from tilemark.errors import MAX_QUOTE, UsageError, excerpt
from tilemark.units import (
    GIB,
    parse_duration,
    parse_percent,
    parse_size,
    parse_size_mix,
)

MAX_QD = 4096
MAX_THREADS = 1024
# Copies of one stream: as many as one run holds streams (workload/limits.py MAX_STREAMS; the
# run's total is checked there, with a sentence that says how to spread them).
MAX_COPIES = 20_000
# Copy i of stream NAME is NAME@i. "@" is not a name character (NAME_RE), so a copy's name
# never equals another stream's name or another copy's: with plain suffixes, copy 10 of `s1`
# and copy 0 of `s11` were both `s110`.
COPY_SEPARATOR = "@"
MAX_PASSES = 1_000_000_000
MAX_IO_SIZE = 2 * GIB - 1  # the engine keeps IO sizes in 32-bit buffers
MAX_POLL_US = 1_000_000
MAX_ERRORS = 1 << 53
MAX_IO_TIMEOUT_S = 86_400  # the engine accepts at most a day
STEADY_WINDOW = 5  # rounds in the SNIA PTS steady-state window (analysis/steady.py)
MAX_ROUNDS = 10_000
MAX_REPETITIONS = 1000  # of a repeat study
STEADY_METRICS = ("iops", "p99")

# rw -> (read % or None for a mix, random by default)
RW_MODES: dict[str, tuple[float | None, bool]] = {
    "read": (100.0, False),
    "write": (0.0, False),
    "randread": (100.0, True),
    "randwrite": (0.0, True),
    "rw": (None, False),
    "readwrite": (None, False),
    "randrw": (None, True),
}
ARRIVALS = ("closed", "constant", "poisson")
CURSORS = ("shared", "per-op")
SPREADS = ("uniform", "size")
BACKENDS = ("uring", "psync", "null")
NAME_RE = re.compile(r"[A-Za-z0-9_.:+-]{1,64}")

Parser = Callable[[object, str], Any]


# -----------------------------------------------------------------------------------------------
# Parsers of single values


def shown(value: object) -> str:
    """A value as a message quotes it: strings quoted, numbers bare, a long one cut to its
    start and its length."""
    if isinstance(value, str):
        if len(value) <= MAX_QUOTE:
            return repr(value)
        return f"{value[:MAX_QUOTE]!r}… ({len(value):,} characters)"
    return excerpt(str(value))


def parse_int(value: object, label: str, low: int, high: int) -> int:
    """An integer in [low, high] from an int or a string of digits."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        number = int(value)
    if number is None or not (low <= number <= high):
        got = number if number is not None else shown(value)
        raise UsageError(f"{label} must be an integer from {low} to {high}, got {got}.")
    return number


def int_range(low: int, high: int) -> Parser:
    """A parser of integers from low to high."""
    return lambda value, label: parse_int(value, label, low, high)


MAX_CPU = 1023  # CPU_SETSIZE - 1: the highest CPU an affinity mask names


def parse_cpus(value: object, label: str) -> tuple[int, ...]:
    """A CPU list, as the kernel writes one ("0-3,6") or a TOML list of CPU numbers; in the
    order given, which is the order the engine threads take them in."""
    items: list[object]
    if isinstance(value, str):
        items = [p.strip() for p in value.split(",")]
    elif isinstance(value, list):
        items = list(value)
    else:
        items = []
    cpus: list[int] = []
    for item in items:
        if isinstance(item, int) and not isinstance(item, bool):
            cpus.append(item)
        elif isinstance(item, str) and (m := re.fullmatch(r"(\d+)(?:-(\d+))?", item)):
            low, high = int(m[1]), int(m[2] or m[1])
            if high < low:
                raise UsageError(f"{label} range {item} runs backwards; write it low-high.")
            cpus.extend(range(low, min(high, MAX_CPU + 1) + 1))
        else:
            cpus = []
            break
    if not cpus or any(not 0 <= c <= MAX_CPU for c in cpus):
        raise UsageError(
            f"{label} must list CPU numbers from 0 to {MAX_CPU}, such as 0-3,6 or [0, 2], "
            f"got {shown(value)}."
        )
    # Checked here, before anything is written; the engine checks again where it runs (every
    # host of a --cluster, which must offer the same CPUs).
    allowed = os.sched_getaffinity(0)
    outside = [c for c in cpus if c not in allowed]
    if outside:
        raise UsageError(
            f"{label}: CPU {outside[0]} is not one this process may run on (it may use "
            f"{cpu_list(allowed)})."
        )
    return tuple(cpus)


def cpu_list(cpus: Iterable[int]) -> str:
    """CPUs as the kernel lists them: 0-3,6."""
    runs: list[list[int]] = []
    for c in sorted(set(cpus)):
        if runs and c == runs[-1][-1] + 1:
            runs[-1].append(c)
        else:
            runs.append([c])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


def parse_choice(value: object, label: str, choices: tuple[str, ...]) -> str:
    """One of `choices`, case-insensitive."""
    text = value.strip().lower() if isinstance(value, str) else None
    if text not in choices:
        raise UsageError(f"{label} must be one of {', '.join(choices)}, got {shown(value)}.")
    return text


def choice(choices: tuple[str, ...]) -> Parser:
    """A parser of one of `choices`."""
    return lambda value, label: parse_choice(value, label, choices)


def parse_bool(value: object, label: str) -> bool:
    """true or false (TOML booleans)."""
    if isinstance(value, bool):
        return value
    raise UsageError(f"{label} must be true or false, got {shown(value)}.")


def parse_seed(value: object, label: str) -> int:
    """A seed: an integer that fits a signed 64-bit value."""
    return parse_int(value, label, 0, (1 << 63) - 1)


def parse_name(value: object, label: str) -> str:
    """A stream or workload name: 1 to 64 letters, digits or _.:+- characters."""
    if not (isinstance(value, str) and NAME_RE.fullmatch(value)):
        raise UsageError(
            f"{label} must be 1 to 64 letters, digits or _.:+- characters, got {shown(value)}."
        )
    return value


def parse_stream_name(value: object, label: str) -> str:
    """A stream name: a name, or a copy's name NAME@N as copies and tile layouts make them."""
    if isinstance(value, str) and COPY_SEPARATOR in value:
        base, _, index = value.rpartition(COPY_SEPARATOR)
        if index.isdigit() and len(index) <= 5 and NAME_RE.fullmatch(base):
            return value
    return parse_name(value, label)


def copy_names(name: str, copies: int) -> list[str]:
    """Names of a stream's compiled copies: NAME itself for one, else NAME@0..NAME@{N-1}."""
    if copies == 1:
        return [name]
    return [f"{name}{COPY_SEPARATOR}{i}" for i in range(copies)]


def _names(value: object, label: str, what: str) -> list[str]:
    """A `what` name or a non-empty list of distinct ones."""
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names:
        raise UsageError(
            f"{label} must be a {what} name or a list of one or more {what} names, got "
            f"{shown(value)}."
        )
    for name in names:
        parse_name(name, label)
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise UsageError(f"{label} names {what} '{dup}' twice; name each {what} once.")
    return list(names)


def parse_target_names(value: object, label: str) -> list[str]:
    """A target name or a non-empty list of distinct target names."""
    return _names(value, label, "target")


def parse_stream_names(value: object, label: str) -> list[str]:
    """A stream name or a non-empty list of distinct stream names (`after`)."""
    return _names(value, label, "stream")


def parse_flow(value: object, label: str) -> tuple[str, int]:
    """GROUP:WEIGHT (pace:8) -> (group, weight): the stream's flow group and its weight there."""
    text = value.strip() if isinstance(value, str) else ""
    group, colon, weight = text.rpartition(":")
    if colon and NAME_RE.fullmatch(group) and weight.isdigit() and 1 <= int(weight) <= 1_000_000:
        return group, int(weight)
    raise UsageError(
        f"{label} must be GROUP:WEIGHT, a group name and a weight from 1 to 1000000 (pace:8: "
        f"the streams of group pace issue IOs in the ratio of their weights), got {shown(value)}."
    )


def parse_path(value: object, label: str) -> str:
    """A non-empty path."""
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{label} must be a path, got {shown(value)}.")
    return value


def parse_pattern(value: object, label: str) -> str:
    """uniform | sequential | zipf:THETA | hotspot:IO/REGION, normalized."""
    allowed = (
        "uniform, sequential, zipf:THETA (e.g. zipf:1.2), hotspot:IO/REGION (e.g. hotspot:90/10) "
        "zoned:IO/REGION:IO/REGION... (e.g. zoned:50/5:30/15:20/80) or sequence:B,B,...[:stride]"
    )
    text = value.strip().lower() if isinstance(value, str) else ""
    if text in ("uniform", "random"):
        return "uniform"
    if text == "sequential":
        return text
    if match := re.fullmatch(r"zipf:(\d+(?:\.\d*)?|\.\d+)", text):
        if float(match.group(1)) <= 0:
            raise UsageError(f"{label} zipf theta must be above 0, got {shown(value)}.")
        return f"zipf:{float(match.group(1)):g}"
    if text.startswith("zoned:"):
        return _parse_zoned(text, label, value)
    if text.startswith("sequence:"):
        return parse_sequence(text, label, value)
    if match := re.fullmatch(r"hotspot:(\d+(?:\.\d*)?)/(\d+(?:\.\d*)?)", text):
        io_pct, region_pct = float(match.group(1)), float(match.group(2))
        if not (0 <= io_pct <= 100 and 0 < region_pct < 100):
            raise UsageError(
                f"{label} hotspot:IO/REGION needs IO from 0 to 100 and REGION above 0 and "
                f"below 100 (percent), got {shown(value)}."
            )
        return f"hotspot:{io_pct:g}/{region_pct:g}"
    raise UsageError(f"{label} must be {allowed}, got {shown(value)}.")


# The engine's limit (fiopatterns.rs MAX_SEQUENCE); fio takes 64 (FIO_SEQ_MAX).
MAX_SEQUENCE = 4096


def parse_sequence(text: str, label: str, value: object) -> str:
    """sequence:B,B,...[:stride] (block indices, fio's random_distribution=sequence; with
    :stride each cycle moves on by the sequence's length), normalized."""
    match = re.fullmatch(r"sequence:(\d+(?:,\d+)*)(:stride)?", text.replace(" ", ""))
    blocks = match.group(1).split(",") if match else []
    if not match or len(blocks) > MAX_SEQUENCE:
        raise UsageError(
            f"{label} sequence:B,B,...[:stride] needs 1 to {MAX_SEQUENCE} block indices "
            f"(whole numbers from 0, such as sequence:2,0,1), got {shown(value)}."
        )
    return "sequence:" + ",".join(str(int(b)) for b in blocks) + (match.group(2) or "")


def _parse_zoned(text: str, label: str, value: object) -> str:
    """zoned:IO/REGION:... (fio's zoned distribution): consecutive zones from the region's
    start, IO and REGION percentages each summing to 100, every zone above 0."""
    number = r"(\d+(?:\.\d*)?)"
    parts = text.removeprefix("zoned:").split(":")
    zones = []
    for part in parts:
        match = re.fullmatch(number + "/" + number, part)
        if not match:
            zones = []
            break
        zones.append((float(match.group(1)), float(match.group(2))))
    io = sum(z[0] for z in zones)
    region = sum(z[1] for z in zones)
    if (
        not zones
        or abs(io - 100) > 1e-9
        or abs(region - 100) > 1e-9
        or min(z[1] for z in zones) <= 0
    ):
        raise UsageError(
            f"{label} zoned:IO/REGION:... needs zones whose IO shares and REGION shares each add "
            f"up to 100, every REGION above 0 (e.g. zoned:50/5:30/15:20/80), got {shown(value)}."
        )
    return "zoned:" + ":".join(f"{a:g}/{b:g}" for a, b in zones)


def parse_sync(value: object, label: str) -> str:
    """none | dsync | fsync | fsync:N | fdatasync | fdatasync:N | fsync:group |
    fdatasync:group, normalized (fsync is fsync:1). `group`: group commit, the writes due
    while one is written and synced join into the next write and sync (docs/workloads)."""
    text = value.strip().lower() if isinstance(value, str) else ""
    if text in ("none", "dsync"):
        return text
    if text in ("fsync", "fdatasync"):
        return f"{text}:1"
    if text in ("fsync:group", "fdatasync:group"):
        return text
    if match := re.fullmatch(r"(fsync|fdatasync):(\d+)", text):
        every = int(match.group(2))
        if every >= 1:
            return f"{match.group(1)}:{every}"
    raise UsageError(
        f"{label} must be none, dsync, fsync, fsync:N, fdatasync:N or fdatasync:group (an "
        f"fsync or fdatasync after every N writes, N at least 1; group: group commit), got "
        f"{shown(value)}."
    )


def parse_skip(value: object, label: str) -> tuple[int, int]:
    """SIZE or LO:HI (sizes of one sign, -8k, 16k:4m) -> (lo, hi) bytes, |lo| <= |hi|."""
    text = value.strip().lower() if isinstance(value, str) else ""
    parts = text.split(":") if text else []
    out = []
    for part in parts:
        sign = -1 if part.startswith("-") else 1
        try:
            out.append(sign * parse_size(part.lstrip("-"), label))
        except UsageError:
            out = []
            break
    if len(out) == 1:
        out = [out[0], out[0]]
    if len(out) != 2 or 0 in out or (out[0] < 0) != (out[1] < 0) or abs(out[0]) > abs(out[1]):
        raise UsageError(
            f"{label} must be SIZE or LO:HI, sizes of one sign with |LO| <= |HI| (bytes "
            f"between a sequential IO and the previous one's end: -8k rewrites the last 8 KiB, "
            f"16k:4m skips ahead), got {shown(value)}."
        )
    return out[0], out[1]


PRIORITY_CLASSES = ("none", "rt", "be", "idle")


def parse_priority(value: object, label: str) -> tuple[str, int]:
    """CLASS[/LEVEL] (ionice's classes: rt/0, be/4, idle, none) -> (class, level)."""
    text = value.strip().lower() if isinstance(value, str) else ""
    klass, _, level_text = text.partition("/")
    level = int(level_text) if level_text.isdigit() else (0 if not level_text else -1)
    ok = klass in PRIORITY_CLASSES and (
        0 <= level <= 7 if klass in ("rt", "be") else level == 0 and not level_text
    )
    if not ok:
        raise UsageError(
            f"{label} must be rt/LEVEL or be/LEVEL (LEVEL 0, the highest, to 7), idle or none "
            f"(ionice's classes), got {shown(value)}."
        )
    return klass, level


def parse_priority_share(value: object, label: str) -> tuple[float, str, int]:
    """PCT:CLASS[/LEVEL] (20:rt/0) -> (pct, class, level): that share of IOs at that priority."""
    text = value.strip() if isinstance(value, str) else ""
    pct_text, colon, prio = text.partition(":")
    try:
        pct = float(pct_text.rstrip("%"))
    except ValueError:
        pct = -1.0
    if not colon or not 0 < pct <= 100:
        raise UsageError(
            f"{label} must be PCT:CLASS[/LEVEL], a share above 0 and at most 100 of the "
            f"stream's IOs issued at another priority (20:rt/0), got {shown(value)}."
        )
    klass, level = parse_priority(prio, label)
    return pct, klass, level


def parse_batch(value: object, label: str) -> float:
    """Mean IOs per batch of an open-loop stream: a number from 1 to 1,000,000."""
    value_f = -1.0
    if not isinstance(value, bool) and isinstance(value, int | float | str):
        try:
            value_f = float(value)
        except ValueError:
            pass
    if not (1 <= value_f <= 1e6):
        raise UsageError(
            f"{label} must be the mean IOs per batch, a number from 1 to 1000000, got "
            f"{shown(value)}."
        )
    return value_f


def parse_burst(value: object, label: str) -> tuple[int, float]:
    """IOS/DELAY -> (ios, delay in ms); a bare delay is milliseconds (Iometer's transfer delay)."""
    text = value.strip() if isinstance(value, str) else ""
    ios_text, sep, delay_text = text.partition("/")
    if sep and re.fullmatch(r"\d+", ios_text.strip()) and int(ios_text) >= 1:
        delay_text = delay_text.strip()
        if re.fullmatch(r"[\d.]+", delay_text):
            delay_text += "ms"
        try:
            return int(ios_text), parse_duration(delay_text, label) * 1000.0
        except UsageError:
            pass  # reported below with the burst syntax
    raise UsageError(
        f"{label} must be IOS/DELAY such as 10/5ms (10 IOs, then wait for them and 5 ms), "
        f"got {shown(value)}."
    )


def parse_bs(value: object, label: str) -> list[tuple[int, float]]:
    """A size or a weighted size mix, every size from 1 byte to 2 GiB."""
    sizes = parse_size_mix(value, label)
    for size, _ in sizes:
        if size == 0 or size > MAX_IO_SIZE:
            raise UsageError(f"{label} sizes must be from 1 byte to 2 GiB, got {shown(value)}.")
    return sizes


def positive_size(value: object, label: str) -> int:
    """A size above 0."""
    size = parse_size(value, label)
    if size == 0:
        raise UsageError(f"{label} must be above 0, got {shown(value)}.")
    return size


def parse_compress(value: object, label: str) -> float:
    """A percentage from 0 to 99 (a block cannot be all zeros)."""
    pct = parse_percent(value, label)
    if pct > 99:
        raise UsageError(f"{label} must be a percentage from 0 to 99, got {shown(value)}.")
    return pct


MAX_DEDUPE = 100.0


def parse_dedupe(value: object, label: str) -> float:
    """A dedupe ratio: blocks written per distinct block, from 1 to 100 (2, 2.5 or 2:1)."""
    text = str(value).strip() if isinstance(value, int | float | str) else ""
    match = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)(?::1)?", text)
    ratio = float(match.group(1)) if match and not isinstance(value, bool) else None
    if ratio is None or not (1.0 <= ratio <= MAX_DEDUPE):
        raise UsageError(
            f"{label} must be a ratio from 1 to {MAX_DEDUPE:g} (blocks written per distinct "
            f"block, e.g. 2 or 2:1; 1 = every block unique), got {shown(value)}."
        )
    return ratio


def parse_dedupe_set(value: object, label: str) -> float:
    """The dedupe pool as a percentage of the stream's region, above 0 and at most 100."""
    pct = parse_percent(value, label)
    if pct <= 0:
        raise UsageError(
            f"{label} must be a percentage above 0 and at most 100, got {shown(value)}."
        )
    return pct


def parse_run_duration(value: object, label: str) -> float:
    """A measured duration: above 0, at least 1 ms."""
    seconds = parse_duration(value, label)
    if seconds <= 0 or round(seconds * 1000) < 1:
        raise UsageError(f"{label} must be above 0 (at least 1 ms), got {shown(value)}.")
    return seconds


def parse_interval(value: object, label: str) -> float:
    """A snapshot interval of at least 1 ms."""
    seconds = parse_duration(value, label)
    if round(seconds * 1000) < 1:
        raise UsageError(f"{label} must be at least 1ms, got {shown(value)}.")
    return seconds


def positive_duration(value: object, label: str) -> float:
    """A duration above 0."""
    seconds = parse_duration(value, label)
    if seconds <= 0:
        raise UsageError(f"{label} must be above 0, got {shown(value)}.")
    return seconds


def parse_io_timeout(value: object, label: str) -> float:
    """A duration from 0 (never) to a day."""
    seconds = parse_duration(value, label)
    if seconds > MAX_IO_TIMEOUT_S:
        raise UsageError(f"{label} must be at most 1 day (86400 s), got {shown(value)}.")
    return seconds


MAX_LABEL = 80


def parse_label(value: object, label: str) -> str:
    """A one-line label of 1 to 80 printable characters."""
    text = value.strip() if isinstance(value, str) else ""
    if not text or len(text) > MAX_LABEL or not text.isprintable():
        raise UsageError(
            f"{label} must be 1 to {MAX_LABEL} printable characters on one line, got "
            f"{shown(value)}."
        )
    return text


def parse_max_rounds(value: object, label: str) -> int:
    """At least STEADY_WINDOW rounds: the steady-state window needs that many."""
    try:
        return parse_int(value, label, STEADY_WINDOW, MAX_ROUNDS)
    except UsageError:
        raise UsageError(
            f"{label} must be an integer from {STEADY_WINDOW} to {MAX_ROUNDS} (the steady-state "
            f"window needs {STEADY_WINDOW} rounds), got {shown(value)}."
        ) from None


def parse_command(value: object, label: str) -> str:
    """A shell command: anything but blank (refused here, before the study loads)."""
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{label} must be a shell command, got an empty string.")
    return value


def text(value: object, label: str) -> str:
    """Any text (checked where it is used)."""
    return str(value)
