"""Reading fio job files: sections, options, `include`, environment variables.

The format is fio's (HOWTO, "Job file format"): an INI file whose `[global]` section sets
defaults for the jobs that follow it (a later `[global]` changes them for later jobs only),
one section per job, `key=value` or a bare `key` for a boolean option, comments after `;` or
`#`, `include FILE` lines, and `${VAR}` replaced by the environment variable VAR. Option names
are kept as written (lower case); their meaning is the translator's business.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from tilemark.errors import UsageError

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# fio's own variables, replaced by fio itself rather than from the environment.
_FIO_VARS = {
    "ncpus": lambda: str(os.cpu_count() or 1),
    "pagesize": lambda: str(os.sysconf("SC_PAGE_SIZE")),
}
MAX_INCLUDE_DEPTH = 8


@dataclass
class Option:
    """One `key=value` (value None for a bare `key`) and where it was written."""

    key: str
    value: str | None
    where: str  # "job.fio:12"
    included: bool = False  # from an `include`d file: never echoed in an error


@dataclass
class Job:
    """One job section with the global options in force where it was defined, in order."""

    name: str
    where: str
    options: list[Option] = field(default_factory=list)
    included: bool = False  # its section header is in an `include`d file

    def get(self, key: str) -> Option | None:
        """The last setting of `key` (a job's own setting follows and overrides the global)."""
        found = None
        for opt in self.options:
            if opt.key == key:
                found = opt
        return found


def _strip_comment(line: str) -> str:
    for marker in (";", "#"):
        pos = line.find(marker)
        if pos != -1:
            line = line[:pos]
    return line.strip()


def _expand(text: str, where: str, included: bool) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in os.environ:
            return os.environ[name]
        if name in _FIO_VARS:
            return _FIO_VARS[name]()
        if included:
            raise UsageError(f"{where}: {_NOT_SHOWN} uses an environment variable that is not set.")
        raise UsageError(
            f"{where}: ${{{name}}} is not set in the environment; export it or edit the job file."
        )

    return _VAR.sub(one, text)


# What an error says instead of a line of an included file: an `include` can name any file the
# user running tilemark can read (as root, /etc/shadow), and its content must not leak that way.
_NOT_SHOWN = "this line of an included file (its content is not shown)"


def _lines(path: Path, depth: int) -> list[tuple[str, str, bool]]:
    """(text, where, included) of every meaningful line, with includes read in place."""
    if depth > MAX_INCLUDE_DEPTH:
        raise UsageError(
            f"fio job file {path}: includes nest deeper than {MAX_INCLUDE_DEPTH} levels."
        )
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise UsageError(f"fio job file {path} cannot be read: {e.strerror}.") from None
    included = depth > 0
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        byte = "" if included else f"byte 0x{raw[e.start]:02x} "
        raise UsageError(
            f"fio job file {path} is not UTF-8 text ({byte}at offset {e.start})."
        ) from None
    out: list[tuple[str, str, bool]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{path}:{number}" if included else f"{path.name}:{number}"
        line = _strip_comment(line)
        if not line:
            continue
        line = _expand(line, where, included)
        if line.startswith("include ") or line.startswith("include\t"):
            name = line.split(None, 1)[1].strip()
            child = Path(name) if Path(name).is_absolute() else path.parent / name
            out.extend(_lines(child, depth + 1))
            continue
        out.append((line, where, included))
    return out


def redact_included(error: UsageError, jobs: list[Job]) -> UsageError:
    """`error` as it may be shown: when it is about a line of an included file, or quotes any
    of their content, one sentence that names the file and line only."""
    message = str(error)
    included = [o for j in jobs for o in j.options if o.included]
    included_jobs = [j for j in jobs if j.included]
    for item in [*included, *included_jobs]:
        if message.startswith(f"{item.where}:"):
            return UsageError(f"{item.where}: {_NOT_SHOWN} cannot be translated.")
    secrets = {o.key for o in included} | {o.value or "" for o in included}
    secrets |= {j.name for j in included_jobs}
    if any(len(text) >= 3 and text in message for text in secrets):
        where = (included or included_jobs)[0].where
        return UsageError(
            f"the job file cannot be translated because of an included file ({where} and "
            "after); its content is not shown."
        )
    return error


def parse(path: str | os.PathLike[str]) -> list[Job]:
    """The jobs of a fio job file, each with the global options that apply to it."""
    path = Path(path)
    lines = _lines(path, 0)
    jobs: list[Job] = []
    globals_: list[Option] = []
    current: Job | None = None
    in_global = False
    for line, where, included in lines:
        shown = _NOT_SHOWN if included else f"'{line}'"
        if line.startswith("["):
            if not line.endswith("]") or len(line) < 3:
                raise UsageError(f"{where}: {shown} is not a section header like [jobname].")
            name = line[1:-1].strip()
            if name == "global":
                in_global, current = True, None
            else:
                in_global = False
                current = Job(name=name, where=where, options=list(globals_), included=included)
                jobs.append(current)
            continue
        key, eq, value = line.partition("=")
        key = key.strip().lower()
        if not key or " " in key:
            raise UsageError(f"{where}: {shown} is not an option (key=value or a bare key).")
        opt = Option(key=key, value=value.strip() if eq else None, where=where, included=included)
        if in_global:
            globals_.append(opt)
        elif current is not None:
            current.options.append(opt)
        elif included:
            raise UsageError(f"{where}: {_NOT_SHOWN} is an option before any [section].")
        else:
            raise UsageError(f"{where}: option '{key}' comes before any [section].")
    if not jobs:
        raise UsageError(f"fio job file {path} defines no job (only [global] or nothing).")
    return jobs
