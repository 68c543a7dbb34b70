"""fio job files as tilemark workloads (docs/fio.md).

A job file is translated whole or not at all. Each fio job becomes one stream (`numjobs`
clones become copies, or one stream per clone where clones differ in where they go); the
jobs run as fio runs them: at once, or in phases (`stonewall`, `wait_for`, `startdelay`, a
job's own runtime). Every option either keeps fio's meaning, is named in a note saying what
tilemark does instead, or is refused by name with one sentence: a translation that silently
changed the job would measure something else, and the user would blame one of the tools.

fio's defaults are not tilemark's, so they are written out: buffered IO with the psync engine,
sequential reads of 4 KiB, one IO in flight, offsets aligned to the smallest block size.

Reading a job's options is job.py (bssplit and placement: shapes.py, value syntax: values.py),
where its IO goes layout.py, when it runs schedule.py.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilemark.errors import UsageError
from tilemark.fio import datareduce, gates, pace, patterns, strides, verifyfill
from tilemark.fio.job import FIXABLE, FioJob, Problem, read_job
from tilemark.fio.jobfile import Job, parse, redact_included
from tilemark.fio.layout import StreamProblem, fmt_size, place, refuse
from tilemark.fio.notes import NULLS, job_notes
from tilemark.fio.options import ENGINES
from tilemark.fio.schedule import Schedule, schedule
from tilemark.fio.steady import steadystate
from tilemark.units import MAX_BYTE_RATE, MAX_IOPS

_NAME = re.compile(r"[^A-Za-z0-9_.:+-]")
PLACEHOLDER_TARGET = "/fio-translation-check"  # only to validate a doc that names no target


@dataclass
class Translation:
    """A workload document (the TOML layout `tilemark run` reads) and what the user must know."""

    doc: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    source: str = ""


@dataclass
class Outcome:
    """Everything the translation found: the document when it succeeded, else every
    problem (the corpus table in docs/fio.md counts them all)."""

    translation: Translation | None
    problems: list[Problem]


def translate(path: str | os.PathLike[str], sections: tuple[str, ...] = ()) -> Translation:
    """The tilemark workload equivalent to a fio job file, or a UsageError naming the first
    option that cannot be translated (never quoting a file the job file includes).
    `sections`: only those jobs, as fio's --section."""
    parsed = parse(path, sections)
    try:
        outcome = _translate(path, parsed)
        if outcome.translation is None:
            raise UsageError(first_problem(outcome.problems).sentence())
        return outcome.translation
    except UsageError as e:
        raise redact_included(e, parsed) from None


def examine(path: str | os.PathLike[str], sections: tuple[str, ...] = ()) -> Outcome:
    """Every problem of a job file (for the corpus table); parse errors are one problem."""
    try:
        parsed = parse(path, sections)
    except UsageError as e:
        return Outcome(None, [Problem("job file", str(path), str(e), "job file syntax", str(e))])
    return _translate(path, parsed)


def first_problem(problems: list[Problem]) -> Problem:
    """The problem a refusal names: the engine first (the rest of a job for another engine is
    beside the point), then what no edit of the values would cure, then the first in the
    file."""
    return sorted(problems, key=lambda p: (p.key != "ioengine", p.group in FIXABLE, _line(p)))[0]


def _line(problem: Problem) -> tuple[str, int]:
    file, _, line = problem.where.rpartition(":")
    return (file, int(line)) if line.isdigit() else (problem.where, 0)


def _translate(path: str | os.PathLike[str], parsed: list[Job]) -> Outcome:
    from tilemark.fio import fileengines

    try:
        if fileengines.holds_file_jobs(parsed):  # a file workload (fio/fileengines.py)
            doc, notes = fileengines.translate_file_jobs(path, parsed)
            return Outcome(Translation(doc=doc, notes=notes, source=str(path)), [])
    except fileengines.FileJobProblem as p:
        return Outcome(None, [Problem(p.key, p.where, p.why, fileengines.GROUP)])
    except UsageError as e:  # a malformed value in a file-engine job
        return Outcome(None, [Problem("job file", str(path), str(e), "malformed values", str(e))])
    jobs = [read_job(job) for job in parsed]
    problems = [p for job in jobs for p in job.problems]
    notes: list[str] = []
    if problems:
        return Outcome(None, problems)
    plan = gates.reschedule(jobs, parsed, schedule(jobs, [_new_group(job) for job in parsed]))
    problems += plan.problems
    names = _stream_names(jobs, notes)
    doc: dict[str, Any] = {"name": _NAME.sub("_", Path(path).stem)[:64] or "fio"}
    problems += _run_wide(jobs, doc, notes)
    tables: list[dict[str, Any]] = []
    for job, name in zip(jobs, names, strict=True):
        try:
            tables.append(_stream(job, name))
        except StreamProblem as p:
            problems.append(p.problem)
    if problems:
        return Outcome(None, problems)
    problems += place(jobs, tables, doc, notes)
    if problems:
        return Outcome(None, problems)
    clone_names = [[clone["name"] for clone in t["clones"]] for t in tables]
    if isinstance(plan, gates.GatedSchedule):
        problems += gates.rules(jobs, parsed, clone_names, plan, doc, notes)
    else:
        problems += steadystate(jobs, parsed, clone_names, plan, doc, notes)
    if problems:
        return Outcome(None, problems)
    streams = _phases(jobs, tables, plan, doc, notes)
    if isinstance(plan, gates.GatedSchedule):
        gates.name_after(streams, jobs, plan, clone_names, notes)
    problems += pace.apply(jobs, parsed, plan, streams, clone_names, notes)
    if problems:
        return Outcome(None, problems)
    doc["stream"] = [_ordered(t) for t in streams]
    notes += job_notes(jobs)
    words = sorted(
        {w for job in parsed for o in job.options for w in o.substituted if not w.startswith("${")}
    )
    if words:
        notes.append(
            f"{', '.join(words)} took this machine's values; fio reads them on the "
            "machine where the job runs"
        )
    _check(path, doc)
    return Outcome(Translation(doc=doc, notes=_unique(notes), source=str(path)), [])


def _new_group(job: Job) -> bool:
    """new_group (a reporting group, which bounds exitall) in force for the job."""
    opt = job.get("new_group")
    return opt is not None and (opt.value or "1").strip() != "0"


def _stream_names(jobs: list[FioJob], notes: list[str]) -> list[str]:
    """Unique stream names: fio's job names (which fio lets repeat, e.g. `name=` in
    [global]); a repeated one gets its section's name."""
    base = [_NAME.sub("_", job.name)[:60] or "job" for job in jobs]
    names = []
    for job, name in zip(jobs, base, strict=True):
        if base.count(name) > 1:
            section = _NAME.sub("_", job.section)[:30] or "job"
            name = name if name == section else f"{name[:29]}.{section}"
        while name in names:
            name = f"{name}.{len(names)}"
        names.append(name)
    if names != base:
        repeated = sorted({n for n in base if base.count(n) > 1})
        notes.append(
            f"fio lets jobs share a name ({', '.join(repeated)}); the streams are named "
            f"{', '.join(names)}"
        )
    return names


def _run_wide(jobs: list[FioJob], doc: dict[str, Any], notes: list[str]) -> list[Problem]:
    """backend, direct, keep_cache and verify apply to a whole tilemark run."""
    problems: list[Problem] = []
    settings = {
        "backend": [ENGINES[j.engine] for j in jobs],
        "direct": [j.direct for j in jobs],
        "keep_cache": [not j.invalidate and not j.direct for j in jobs],
        "verify": [j.verify is not None for j in jobs],
    }
    opts = {
        "backend": lambda j: j.where,
        "direct": lambda j: j.direct_opt.where if j.direct_opt else j.where,
        "keep_cache": lambda j: j.invalidate_opt.where if j.invalidate_opt else j.where,
        "verify": lambda j: j.verify_opt.where if j.verify_opt else j.where,
    }
    fio_key = {
        "backend": "ioengine",
        "direct": "direct",
        "keep_cache": "invalidate",
        "verify": "verify",
    }
    if set(settings["backend"]) == {"psync", "uring"}:
        settings["backend"] = ["uring"] * len(jobs)
        notes.append(pace.MIXED_ENGINES_NOTE)
    for key, values_ in settings.items():
        if len(set(values_)) > 1:
            a = jobs[0]
            b = next(j for j, v in zip(jobs, values_, strict=True) if v != values_[0])
            problems.append(
                Problem(
                    fio_key[key],
                    opts[key](b),
                    f"jobs {a.name} and {b.name} differ in it, and in tilemark {key} applies "
                    "to the whole run; translate them as separate files",
                    "settings that differ between jobs",
                )
            )
            continue
        value = values_[0]
        if key in ("backend", "direct") or value:
            doc[key] = value
    # fio's default fadvise_hint=1 advises each job's own pattern when it opens the file;
    # tilemark's fadvise = "pattern" does so per target (see notes.py for where it cannot).
    buffered = [j for j in jobs if not j.direct and j.engine not in ("null", "cpp_null")]
    if buffered and all(j.advises_its_pattern() for j in buffered):
        doc["fadvise"] = "pattern"
    return problems


def _fmt_ms(us: int) -> str:
    """Microseconds as an exact millisecond duration: 2000 -> '2ms', 1500 -> '1.5ms'."""
    whole, frac = divmod(us, 1000)
    return f"{whole}.{frac:03d}".rstrip("0").rstrip(".") + "ms"


def _depth(job: FioJob) -> int:
    """fio's iodepth as the IOs the storage sees in flight."""
    if job.sync_engine():
        job.notes.append(
            f"ioengine={job.engine} runs on tilemark's psync backend: the same one pread or "
            "pwrite at a time, issued by a worker thread that the stream's engine thread "
            "hands each IO to (so a device that stops answering cannot hold the engine), "
            "where fio issues it from the job's own thread; the two thread wake-ups per IO "
            "lower the rate a fast device reaches"
        )
        if job.iodepth > 1:
            job.notes.append(
                f"iodepth={job.iodepth} with ioengine={job.engine}: fio's sync engines do one "
                "IO at a time, and so does the translation"
            )
        return 1
    if job.engine == "libaio" and not job.direct and job.iodepth > 1:
        job.notes.append(
            "buffered libaio is synchronous on Linux (fio HOWTO, ioengine libaio: queued "
            f"behaviour needs direct=1), so iodepth={job.iodepth} runs one IO at a time, as "
            "qd 1; fio's latency (lat, from when it prepared the IO, io_u.c get_io_u) also "
            f"counts the IO's wait in fio's queue, which it reaps only when {job.iodepth} are "
            f"done (backend.c), so fio reports about {job.iodepth} times tilemark's latency "
            "for the same IO rate"
        )
        return 1
    if job.engine in ("libaio", "posixaio"):
        job.notes.append(f"ioengine={job.engine} runs on io_uring at the same queue depth")
    return job.iodepth


def _stream(job: FioJob, name: str) -> dict[str, Any]:
    """The stream table of one job (placement and phases are added later)."""
    table: dict[str, Any] = {"name": name, "rw": job.rw}
    read_pct: float = job.read_pct
    sizes = job.sizes
    if len(sizes) == 1:
        table["bs"] = fmt_size(sizes[0][0])
    else:
        table["bs"] = ",".join(f"{fmt_size(s)}:{w:g}" for s, w in sizes)
    random = job.is_random()
    # fio aligns random offsets to blockalign, by default (and always for sequential IO) to
    # the smallest block size (init.c fixup_options); tilemark's default is 4 KiB or more.
    align = job.blockalign if (random and job.blockalign) else job.min_bs()
    table["align"] = fmt_size(align)
    table["qd"] = _depth(job)
    if random and job.distribution != "uniform":
        table["pattern"] = job.distribution
    if job.percentage_random is not None:
        if random:
            if job.percentage_random < 100:
                table["random"] = job.percentage_random
            if job.percentage_random == 0 and "pattern" in table:
                del table["pattern"]
        else:
            job.notes.append(
                f"percentage_random applies to random rw modes only (HOWTO "
                f"percentage_random); fio ignores it for rw={job.rw}, and so does "
                "the translation"
            )
    if job.rate is not None:
        read_pct = _rate(job, table)
    if job.time_based and not job.direct and job.invalidate and job.engine not in NULLS:
        if not random or not job.norandommap:
            # fio drops the file's cache between passes of a time_based job: when a
            # sequential job wraps, when a random job's map is full (io_u.c
            # loop_cache_invalidate); with norandommap a random job never ends a pass.
            table["invalidate"] = "pass"
    if job.mixed():
        table["read"] = float(read_pct)
        if not random or job.percentage_random not in (None, 100):
            # fio keeps one sequential position per direction (io_u.c, last_pos[ddir]).
            table["cursors"] = "per-op"
    if job.thinktime_us:
        table["burst"] = f"{job.thinktime_blocks}/{_fmt_ms(job.thinktime_us)}"
        if table["qd"] > 1 and not job.thinktime_issue:
            job.notes.append(
                "fio counts completed IOs toward thinktime_blocks "
                "(thinktime_blocks_type=complete), so at iodepth>1 it may issue a few more "
                "before it pauses; tilemark issues exactly thinktime_blocks, waits for them, "
                "then pauses"
            )
        if job.thinktime_spin_us:
            job.notes.append(
                "thinktime_spin busy-waits part of the pause; tilemark sleeps all of it"
            )
    _sync(job, table)
    strides.stream_fields(job, table, refuse)
    patterns.stream_fields(job, table, refuse)
    if job.compress:
        if job.compress >= 100:
            raise refuse(
                job,
                job.compress_opt,
                "fio writes all-zero blocks; tilemark's write data is at most 99% compressible",
                "write data content",
            )
        table["compress"] = float(job.compress)
    if job.dedupe:
        if job.dedupe >= 100:
            raise refuse(
                job,
                job.dedupe_opt,
                "every block a copy has no dedupe ratio; tilemark's is at most 100:1",
                "write data content",
            )
        table["dedupe"] = round(100 / (100 - job.dedupe), 6)
    datareduce.stream_fields(job, table, refuse)
    verifyfill.stream_fields(job, table, refuse, verify_set=job.verify_opt is not None)
    if job.rate_min is not None:
        job.notes.append(
            f"{job.rate_min.key}: fio ends the job if its rate falls "
            "below the minimum; tilemark runs on and reports the rate it reached"
        )
    return table


def _rate(job: FioJob, table: dict[str, Any]) -> float:
    """fio caps each direction at its own rate (rate=READ,WRITE); on a mix the caps, not
    rwmixread, decide the share of reads (measured with fio 3.33: rwmixread=60 rate_iops=1000
    gives 1000 reads and 1000 writes per second). Returns the read share."""
    assert job.rate is not None
    kind, (read, write), opt = job.rate
    read_pct: float = job.read_pct
    if job.rw in ("read", "randread"):
        total = read
    elif job.rw in ("write", "randwrite"):
        total = write
    elif read == 0 and write == 0:
        total = 0
    elif read == 0 or write == 0:
        raise refuse(
            job,
            opt,
            "it paces only one direction of a read/write mix; tilemark paces a stream as a whole",
            "pacing",
        )
    else:
        total = read + write
        read_pct = 100 * read / total
        job.notes.append(
            f"{opt.key}={opt.value} caps reads at {read:g} and writes at "
            f"{write:g} {'IOs' if kind == 'iops' else 'bytes'} per second, which decides the "
            f"mix (measured with fio 3.33); translated as {total:g} in total at "
            f"{read_pct:g}% reads"
        )
    if total == 0:
        return read_pct  # fio: 0 is no limit
    limit = MAX_IOPS if kind == "iops" else MAX_BYTE_RATE
    if total > limit:
        unit = "IOs" if kind == "iops" else "bytes"
        raise StreamProblem(
            Problem(
                opt.key,
                opt.where,
                "",
                "malformed values",
                f"{opt.where}: fio option {opt.key} asks for {total:,} {unit} "
                f"per second; a tilemark stream runs at most {limit:,.0f}.",
            )
        )
    table["rate" if kind == "iops" else "rate_bytes"] = total
    table["arrival"] = "poisson" if job.rate_process == "poisson" else "constant"
    return read_pct


def _sync(job: FioJob, table: dict[str, Any]) -> None:
    if job.fsync and job.sync != "none":
        raise refuse(
            job,
            None,
            "fsync and sync are both set; tilemark syncs a stream's writes one way",
            "sync",
            key="fsync",
        )
    if job.fsync:
        table["sync"] = f"fsync:{job.fsync}"
    elif job.sync != "none":
        table["sync"] = "dsync"
        if job.sync == "sync":
            job.notes.append(
                "sync=1 asks for O_SYNC; tilemark opens with O_DSYNC, which syncs "
                "each write's data but not its file's timestamps"
            )


def _phases(
    jobs: list[FioJob],
    tables: list[dict[str, Any]],
    plan: Schedule,
    doc: dict[str, Any],
    notes: list[str],
) -> list[dict[str, Any]]:
    """Start and stop times, warm-up and duration; the clones' tables, in order."""
    if plan.warmup_s:
        doc["warmup"] = _fmt_s(plan.warmup_s)
    if plan.duration_s is not None:
        doc["duration"] = _fmt_s(plan.duration_s)
    notes += plan.notes
    run_end = None if plan.duration_s is None else plan.warmup_s + plan.duration_s
    out = []
    for table, timing in zip(tables, plan.timings, strict=True):
        for clone in table.pop("clones"):
            if timing.start_s:
                clone["start"] = _fmt_s(timing.start_s)
            if timing.stop_s is not None and (run_end is None or timing.stop_s < run_end):
                clone["stop"] = _fmt_s(timing.stop_s)
            out.append(clone)
    if plan.duration_s is None and not plan.forever:
        notes.append(
            "the run lasts until every stream has done its bytes, as fio's jobs "
            "without time_based do"
        )
    return out


def _fmt_s(seconds: float) -> str:
    """Seconds as tilemark's duration text, exact to the microsecond: 60s, 1.5s."""
    ms = round(seconds * 1e6)
    if ms % 1_000_000 == 0:
        return f"{ms // 1_000_000}s"
    return _fmt_ms(ms)


def _check(path: str | os.PathLike[str], doc: dict[str, Any]) -> None:
    """The translation is a workload tilemark accepts, or a UsageError now: never a workload
    that fails later."""
    from tilemark.workload import plan

    check = dict(doc)
    check.setdefault("target", PLACEHOLDER_TARGET)
    try:
        plan.parse_workload(check, source=str(path))
    except UsageError as e:
        raise UsageError(
            f"fio job file {path} translates into a workload tilemark refuses: "
            f"{str(e).rstrip('.')}."
        ) from None


STREAM_ORDER = (
    "name",
    "rw",
    "read",
    "bs",
    "align",
    "qd",
    "pattern",
    "random",
    "cursors",
    "skip",
    "run_length",
    "invalidate",
    "rate",
    "rate_bytes",
    "arrival",
    "burst",
    "sync",
    "priority",
    "priority_share",
    "priority_by_size",
    "write_bs",
    "zones",
    "compress",
    "dedupe",
    "dedupe_set",
    "dedupe_global",
    "target",
    "offset",
    "length",
    "io_size",
    "passes",
    "after",
    "start",
    "stop",
    "copies",
    "flow",
    "flow_sleep",
    "on_end_stop",
    "on_end_only_started",
)


def _ordered(table: dict[str, Any]) -> dict[str, Any]:
    """A stream table in the order people read one: what, how big, how hard, where, when."""
    out = {key: table[key] for key in STREAM_ORDER if key in table}
    for key in ("offset", "length"):
        if isinstance(out.get(key), int):
            out[key] = fmt_size(out[key])
    if out.get("offset") == "0":
        del out["offset"]
    return out


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _tables(value: Any) -> bool:
    """A list of tables (an array of tables in TOML)."""
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if value != int(value) else f"{value:.1f}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def toml_text(translation: Translation) -> str:
    """The workload as a TOML file, with the notes as comments at the top."""
    if "filestream" in translation.doc:  # fio's file and directory engines
        from tilemark.fio.fileengines import toml_text as file_toml

        return file_toml(translation.doc, translation.source, translation.notes)
    lines = [f"# Translated from the fio job file {translation.source} by tilemark import-fio."]
    lines += [f"# note: {note}" for note in translation.notes]
    lines.append("")
    targets = translation.doc.get("target")
    for key, value in translation.doc.items():
        if key == "stream" or (key == "target" and isinstance(value, list)):
            continue
        if isinstance(value, dict) or _tables(value):
            continue  # a table ([steadystate]) or several: after the run-wide keys
        lines.append(f"{key} = {_toml_value(value)}")
    for key, value in translation.doc.items():
        if isinstance(value, dict):
            lines += ["", f"[{key}]"]
            lines += [f"{k} = {_toml_value(v)}" for k, v in value.items()]
        elif key not in ("stream", "target") and _tables(value):
            for entry in value:  # [[steadystate]] rules (fio/gates.py)
                lines += ["", f"[[{key}]]"]
                lines += [f"{k} = {_toml_value(v)}" for k, v in entry.items()]
    if isinstance(targets, list):
        for entry in targets:
            lines += ["", "[[target]]"]
            lines += [f"{key} = {_toml_value(value)}" for key, value in entry.items()]
    for table in translation.doc["stream"]:
        lines += ["", "[[stream]]"]
        lines += [f"{key} = {_toml_value(value)}" for key, value in table.items()]
    return "\n".join(lines) + "\n"
