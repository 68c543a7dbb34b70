"""Reading fio job files: sections, options, `include`, variables, as fio reads them.

The format is fio's (HOWTO, "Job file format"), checked against its parser (init.c
`__parse_jobs_ini`, options.c `fio_option_dup_subs` and `fio_keyword_replace`, at fio commit
f5344384):

- An INI file. A line whose first non-blank character is `;` or `#` is a comment; on other
  lines everything from the first `;` or `#` on is dropped (`numjobs=4 ; four threads`).
- A section whose name starts with `global` sets defaults for the jobs after it (a later
  `[global]` changes them for later jobs only); every other section is a job.
- `key=value`, or a bare `key` for a boolean option; keys are case-insensitive.
- `include FILE` reads FILE in place (a name that does not exist relative to the current
  directory is taken relative to the job file); included files hold options only.
- `${VAR}` is the environment variable VAR, and the empty string when VAR is not set.
- `$pagesize`, `$mb_memory` and `$ncpus` (without braces) are this machine's page size,
  memory in MiB and configured CPUs; a value that uses them may be arithmetic (`size=8*
  $mb_memory`), which fio hands to bc: whole numbers, + - * / % ^ and parentheses.

Option names are kept lower case; their meaning is the translator's business.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from tilemark.errors import UsageError

_ENV = re.compile(r"\$\{([^}]+)\}")
MAX_INCLUDE_DEPTH = 8


def _keywords() -> dict[str, str]:
    """fio's reserved keywords and this machine's values (os/os.h, os/os-linux.h)."""
    page = os.sysconf("SC_PAGE_SIZE")
    return {
        "$pagesize": str(page),
        "$mb_memory": str(page * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)),
        "$ncpus": str(max(1, os.sysconf("SC_NPROCESSORS_CONF"))),
    }


@dataclass
class Option:
    """One `key=value` (value None for a bare `key`) and where it was written."""

    key: str
    value: str | None
    where: str  # "job.fio:12"
    included: bool = False  # from an `include`d file: never echoed in an error
    substituted: tuple[str, ...] = ()  # variables and keywords its value was built from
    section: int = 0  # ordinal of the section it was written in (fio sorts within one)


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


def _is_comment(line: str) -> bool:
    return line == "" or line[0] in ";#"


def _strip_end(line: str) -> str:
    """fio's strip_blank_end(): cut at the first ';' or '#', then trailing blanks."""
    for marker in (";", "#"):
        pos = line.find(marker)
        if pos != -1:
            line = line[:pos]
    return line.rstrip()


# What an error says instead of a line of an included file: an `include` can name any file the
# user running tilemark can read (as root, /etc/shadow), and its content must not leak that way.
_NOT_SHOWN = "this line of an included file (its content is not shown)"


def _arithmetic(text: str) -> int | None:
    """bc's integer arithmetic (scale 0) on + - * / % ^ and parentheses; None if not that."""
    tokens = re.findall(r"\d+|[-+*/%^()]|\S", text)
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def atom() -> int:
        token = take() if peek() is not None else ""
        if token == "(":
            value = expr()
            if take() != ")":
                raise ValueError
            return value
        if token == "-":
            return -atom()
        if token.isdigit():
            return int(token)
        raise ValueError

    def power() -> int:
        base = atom()
        if peek() == "^":
            take()
            exponent = power()
            if exponent < 0 or exponent > 64:
                raise ValueError
            return base**exponent
        return base

    def term() -> int:
        value = power()
        while peek() in ("*", "/", "%"):
            op, right = take(), power()
            if op == "*":
                value *= right
            elif right == 0:
                raise ValueError
            else:  # bc truncates toward zero
                quotient = abs(value) // abs(right) * (1 if (value < 0) == (right < 0) else -1)
                value = quotient if op == "/" else value - right * quotient
        return value

    def expr() -> int:
        value = term()
        while peek() in ("+", "-"):
            op, right = take(), term()
            value = value + right if op == "+" else value - right
        return value

    try:
        value = expr()
    except (ValueError, IndexError):
        return None
    return value if pos == len(tokens) else None


def _substitute(line: str, where: str, shown: str) -> tuple[str, tuple[str, ...]]:
    """The option line with ${VAR} and fio's keywords replaced, and the names replaced."""
    used: list[str] = []

    def env(match: re.Match[str]) -> str:
        used.append(match.group(0))
        return os.environ.get(match.group(1), "")

    line = _ENV.sub(env, line)
    replaced = False
    for word, value in _keywords().items():
        if word in line:
            used.append(word)
            line = line.replace(word, value)
            replaced = True
    key, eq, value = line.partition("=")
    # fio hands a value with a keyword and an operator to bc (options.c bc_calc).
    if replaced and eq and re.search(r"[-+*/]", value) and "'" not in value:
        result = _arithmetic(value.strip())
        if result is None:
            raise UsageError(
                f"{where}: {shown} uses {', '.join(used)} in a value that is not whole-number "
                "arithmetic (+ - * / % ^ and parentheses), which is all fio computes there."
            )
        line = f"{key}={result}"
    return line, tuple(used)


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
        line = line.strip()
        if _is_comment(line):
            continue
        line = _strip_end(line)
        if line.startswith("include") and not line.startswith("[") and "=" not in line:
            name = line[len("include") + 1 :].strip()
            if not name:
                raise UsageError(f"{where}: include needs a file name (include FILE).")
            child = Path(name)
            if not child.is_absolute() and not child.exists():
                child = path.parent / name
            for text_, where_, _ in _lines(child, depth + 1):
                if text_.startswith("["):
                    raise UsageError(
                        f"{where_}: an included file holds options only, not [sections]."
                    )
                out.append((text_, where_, True))
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


def parse(path: str | os.PathLike[str], sections: tuple[str, ...] = ()) -> list[Job]:
    """The jobs of a fio job file, each with the global options that apply to it; with
    `sections`, only the jobs of those names (fio's --section; globals always apply)."""
    path = Path(path)
    lines = _lines(path, 0)
    jobs: list[Job] = []
    globals_: list[Option] = []
    current: Job | None = None
    in_global = False
    skipping = False
    names: set[str] = set()
    section = 0
    for line, where, included in lines:
        shown = _NOT_SHOWN if included else f"'{line}'"
        if line.startswith("["):
            if len(line) < 3:
                raise UsageError(f"{where}: {shown} is not a section header like [jobname].")
            # fio's sscanf("[%255[^\n]]") then drops the last character, whatever it is.
            name = line[1:-1]
            if not line.endswith("]"):
                raise UsageError(f"{where}: {shown} is not a section header like [jobname].")
            names.add(name)
            skipping = False
            section += 1
            if name.startswith("global"):
                in_global, current = True, None
            elif sections and name not in sections:
                in_global, current, skipping = False, None, True
            else:
                in_global = False
                current = Job(name=name, where=where, options=list(globals_), included=included)
                jobs.append(current)
            continue
        if skipping:
            continue
        line, used = _substitute(line, where, shown)
        key, eq, value = line.partition("=")
        key = key.strip().lower()
        if not key or " " in key or "\t" in key:
            raise UsageError(f"{where}: {shown} is not an option (key=value or a bare key).")
        opt = Option(
            key=key,
            value=value.strip() if eq else None,
            where=where,
            included=included,
            substituted=used,
            section=section,
        )
        if in_global:
            globals_.append(opt)
        elif current is not None:
            current.options.append(opt)
        elif included:
            raise UsageError(f"{where}: {_NOT_SHOWN} is an option before any [section].")
        else:
            raise UsageError(f"{where}: option '{key}' comes before any [section].")
    missing = [s for s in sections if s not in names]
    if missing:
        raise UsageError(
            f"fio job file {path} has no section [{missing[0]}]; --section names a job of the file."
        )
    if not jobs:
        raise UsageError(f"fio job file {path} defines no job (only [global] or nothing).")
    return jobs
