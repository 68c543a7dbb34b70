"""fio's options of jobs that pace or end each other, read into a job (fio/pace.py uses them;
a module of its own so that job.py reads them without importing pace.py, which imports it)."""

from __future__ import annotations

from typing import Any

from tilemark.errors import UsageError
from tilemark.fio import values
from tilemark.fio.jobfile import Option

KEYS = ("flow", "flow_id", "flow_sleep", "exit_what")
EXIT_WHATS = ("group", "stonewall", "all")
FLOW_MAX_WEIGHT = 1000  # fio's flow.h


def read(pace: dict[str, Any], key: str, opt: Option) -> None:
    """One of KEYS into a job's `pace` (raises UsageError on a malformed value): flow 0 to
    FLOW_MAX_WEIGHT (options.c maxval), flow_id and flow_sleep (us) whole numbers, exit_what
    one of EXIT_WHATS."""
    label = f"{opt.where}: fio option {opt.key}"
    text = (opt.value or "").strip()
    if key == "exit_what":
        if text not in EXIT_WHATS:
            raise UsageError(f"{label} must be group, stonewall or all, got {opt.value!r}.")
        pace["exit_what"] = text
        return
    value = values.parse_int(text, label, kb_base=1000)
    high = FLOW_MAX_WEIGHT if key == "flow" else (1 << 31) - 1
    if isinstance(value, values.Percent) or not 0 <= value <= high:
        raise UsageError(f"{label} must be a whole number from 0 to {high}, got {opt.value!r}.")
    pace[key] = value
    pace[f"{key}_opt"] = opt
