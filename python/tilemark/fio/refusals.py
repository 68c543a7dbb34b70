"""A job that cannot be translated, found while its stream is built (layout.py, jobfiles.py),
the size wording those refusals and the translation share, and the characters a target name
may hold."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from tilemark.fio.job import Problem

if TYPE_CHECKING:
    from tilemark.fio.job import FioJob

# What a target name may hold (workload names); anything else in a file's name becomes "_".
NOT_IN_NAMES = re.compile(r"[^A-Za-z0-9_.:+-]")


class StreamProblem(Exception):
    """A job that cannot be translated, found while building its stream."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.why)
        self.problem = problem


def refuse(job: FioJob, opt: Any, why: str, group: str, key: str | None = None) -> StreamProblem:
    where = opt.where if opt is not None else job.where
    name = key or (opt.key if opt is not None else "job")
    return StreamProblem(Problem(name, where, why, group))


def fmt_size(n: int) -> str:
    """Bytes in the largest binary unit that divides them: 10g, 128k, 512."""
    for suffix, unit in (("t", 1 << 40), ("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if n and n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)
