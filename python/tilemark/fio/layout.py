"""Where a translated fio job's IO goes: its file (a target) or, for the files fio makes
itself, a region of one target (several files of a job's own: jobfiles.py); how many bytes it
does before it ends.

fio's rules (HOWTO `filename`, `directory`, `size`, `offset`, `offset_increment`, `filesize`,
`io_size`, `number_ios`, `loops`, `time_based`, `zonemode`): a job without `filename` gets a
file of `size` bytes per clone (of which it uses [offset, size)); a named file is shared by
all clones, which use `size` bytes from `offset` (plus `offset_increment` per clone), the
whole file when size is not given; a job that is not time_based ends after `io_size` bytes
(default `size`) times `loops`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tilemark.fio import jobfiles, patterns
from tilemark.fio.job import FioJob, Problem
from tilemark.fio.refusals import NOT_IN_NAMES, StreamProblem, fmt_size, refuse


def _files(job: FioJob) -> list[str] | None:
    if job.files is None:
        return None
    out = []
    for name in job.files:
        if job.directory and not os.path.isabs(name):
            name = str(Path(job.directory) / name)
        out.append(name)
    return out


def place(
    jobs: list[FioJob], tables: list[dict[str, Any]], doc: dict[str, Any], notes: list[str]
) -> list[Problem]:
    """Files and regions: named files are targets; jobs without one get a file each from fio,
    which the translation lays out as regions of one target."""
    files = [_files(job) for job in jobs]
    named = [f for f in files if f is not None]
    if named and len(named) < len(jobs):
        job = jobs[files.index(None)]
        return [
            Problem(
                "filename",
                job.where,
                f"job {job.name} has no filename (fio makes it "
                "files of its own) while other jobs name theirs; give every job a "
                "filename",
                "files",
            )
        ]
    for job in jobs:
        if job.files_opts and job.files is not None:
            opt = next(iter(job.files_opts.values()))
            why = "a job that names its filename uses that file; nrfiles and the other options "
            why += "for files fio makes do not apply"
            return [refuse(job, opt, why, "files").problem]
    if not named and any(jobfiles.wants_own_files(job) for job in jobs):
        try:
            jobfiles.own_files(jobs, tables, doc, notes)
        except StreamProblem as p:
            return [p.problem]
        return []
    problems: list[Problem] = []
    for job, table in zip(jobs, tables, strict=True):
        try:
            _region(job, table)
        except StreamProblem as p:
            problems.append(p.problem)
    if problems:
        return problems
    if named:
        paths = sorted({f[0] for f in named}, key=[f[0] for f in named].index)
        _named_targets(jobs, tables, [f[0] for f in named], paths, doc)
        return []
    base = 0
    for job, table in zip(jobs, tables, strict=True):
        clones = []
        for clone in range(job.numjobs):
            copy = dict(table)
            if job.numjobs > 1:
                copy["name"] = f"{table['name']}{clone}"
            copy["offset"] = base + job.offset
            copy["length"] = table["length"]
            base += job.offset + table["length"]
            clones.append(copy)
        table["clones"] = clones
    doc["size"] = fmt_size(base)
    count = sum(job.numjobs for job in jobs)
    where = {job.directory for job in jobs if job.directory}
    files = "a file for the job" if count == 1 else f"{count} files, one per job and clone"
    notes.append(
        f"fio makes {files}"
        + (f", in {', '.join(sorted(where))}" if where else "")
        + "; tilemark gives "
        + ("it" if count == 1 else "each")
        + " a region of one target (pass --target)"
        + ("" if count == 1 else ", laid out one after the other")
    )
    return []


def _region(job: FioJob, table: dict[str, Any]) -> None:
    """The job's region (offset, length) and byte limit (io_size, passes), in fio's terms:
    `size` bytes from `offset` (HOWTO size, offset), the whole file when size is not given."""
    length = job.size
    size_limit = None
    if job.filesize is not None:
        if length is not None and length != job.filesize:
            raise refuse(
                job,
                job.filesize_opt,
                "size and filesize differ, which with one file "
                "makes fio wrap or stop early; give one of them",
                "files",
            )
        length = job.filesize
    if job.zonemode == "strided" and job.zonesize is not None:
        if (length is None or length > job.zonesize) and not _zones(job, table):
            stride = (job.zonerange or job.zonesize) + job.zoneskip  # io_u.c: range + skip
            raise refuse(
                job,
                job.zonemode_opt,
                f"fio works in one zone until it has done {fmt_size(job.zonesize)} of IO "
                f"there, then moves {fmt_size(stride)} on to the next (HOWTO zonemode=strided, "
                "zonerange, zoneskip; io_u.c), zone after zone in time; a tilemark stream's "
                "random IOs cover its whole region at once (its sequential ones move zone "
                "by zone, `zones`); only a random job within one zone translates",
                "zones",
            )
    if job.files is None:
        if length is None:
            raise refuse(
                job,
                None,
                f"job {job.name} has neither filename nor size; fio needs "
                "a size to make its files, and so does the translation",
                "files",
                key="size",
            )
        if job.offset >= length:
            raise refuse(
                job, None, "the offset is past the end of the file fio makes", "files", key="offset"
            )
        table["length"] = length - job.offset  # fio: offset caps the file at size - offset
    elif length is not None and "zones" in table:
        # io_u.c setup_strided_zone_mode: zones move through the whole file (they wrap at
        # real_file_size); size only counts the bytes.
        size_limit = length
    elif length is not None:
        table["length"] = length
    if job.time_based:
        return  # fio loops over the region until the runtime is over
    limit = job.io_size if job.io_size is not None else size_limit
    if job.number_ios is not None:
        if len(job.sizes) > 1:
            raise refuse(
                job,
                job.number_ios_opt,
                "a count of IOs of mixed sizes is no fixed number of bytes; give io_size",
                "byte limits",
            )
        by_count = job.number_ios * job.sizes[0][0]
        limit = by_count if limit is None else min(limit, by_count)
    if limit is not None:
        table["io_size"] = fmt_size(limit)
        if job.loops > 1:
            table["passes"] = job.loops
    else:
        table["passes"] = job.loops  # size bytes, or the whole file, per loop


def _zones(job: FioJob, table: dict[str, Any]) -> bool:
    try:
        return patterns.strided_zones(job, table)
    except patterns.StridedRefused as e:
        raise refuse(job, job.zonemode_opt, str(e), "zones") from None


def _named_targets(
    jobs: list[FioJob],
    tables: list[dict[str, Any]],
    files: list[str],
    paths: list[str],
    doc: dict[str, Any],
) -> None:
    ends: dict[str, list[int | None]] = {p: [] for p in paths}
    names = {p: _target_name(p, i, paths) for i, p in enumerate(paths)}
    for job, table, path in zip(jobs, tables, files, strict=True):
        clones = []
        for clone in range(job.numjobs if job.offset_increment else 1):
            copy = dict(table)
            offset = job.offset + clone * job.offset_increment
            if offset:
                copy["offset"] = offset
            if job.offset_increment and job.numjobs > 1:
                copy["name"] = f"{table['name']}{clone}"
            elif job.numjobs > 1:
                copy["copies"] = job.numjobs  # fio: every clone uses the same file and region
            if len(paths) > 1:
                copy["target"] = names[path]
            length = copy.get("length")
            ends[path].append(None if length is None else offset + length)
            clones.append(copy)
        table["clones"] = clones
    if len(paths) == 1:
        doc["target"] = paths[0]
        known = ends[paths[0]]
        if all(e is not None for e in known):
            doc["size"] = fmt_size(max(known))  # type: ignore[type-var]
        return
    targets = []
    for path in paths:
        entry: dict[str, Any] = {"name": names[path], "path": path}
        if all(e is not None for e in ends[path]):
            entry["size"] = fmt_size(max(ends[path]))  # type: ignore[type-var]
        targets.append(entry)
    doc["target"] = targets


def _target_name(path: str, index: int, paths: list[str]) -> str:
    stems = [NOT_IN_NAMES.sub("_", Path(p).stem or Path(p).name)[:60] or "t" for p in paths]
    stem = stems[index]
    return stem if stems.count(stem) == 1 else f"{stem}.{index}"
