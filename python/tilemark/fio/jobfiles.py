"""Jobs that do their IO over several files of their own (`nrfiles`, with `filesize`,
`filename_format`, `file_service_type`, `openfiles`): the files fio makes become tilemark
targets of the same names and sizes, and the job's stream spreads its IOs over them.

fio's rules (HOWTO "Target file/device"): a job without `filename` makes `nrfiles` files
named by `filename_format` (default `$jobname.$jobnum.$filenum`) in `directory`; `size` is the
job's IO over all of them, divided between the files unless `filesize` sets each file's size
(then `size` defaults to nrfiles x filesize); `file_service_type` chooses the file of each IO
(roundrobin by default, random, sequential, or skewed choices); `openfiles` (default nrfiles)
caps the files open at once, fio closing and opening files to keep to it.

tilemark's stream over several targets draws the target of each IO uniformly (`spread =
"uniform"`): each file gets the same share of the IOs, as with roundrobin and random, in a
drawn order. What would change what the storage sees is refused: sequential IO (fio takes the
files in turn, each IO continuing its own file's sequence), `file_service_type=sequential` or
a skewed choice, fewer open files than files (fio's opens and closes), several jobs naming the
same files.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from tilemark.fio.refusals import NOT_IN_NAMES, fmt_size, refuse

if TYPE_CHECKING:
    from tilemark.fio.job import FioJob

DEFAULT_FORMAT = "$jobname.$jobnum.$filenum"
MAX_FILES = 4096  # files a translated job may make (targets are opened for the whole run)


def wants_own_files(job: FioJob) -> bool:
    """True for a job whose files fio makes several of, or names by a format."""
    return bool(job.files_opts) and job.files is None


def _count(job: FioJob, key: str, default: int) -> int:
    opt = job.files_opts.get(key)
    if opt is None:
        return default
    value = (opt.value or "").strip()
    if not value.isdigit() or not 1 <= int(value) <= MAX_FILES:
        raise refuse(job, opt, f"it must be a count of files from 1 to {MAX_FILES}", "files")
    return int(value)


def _service(job: FioJob) -> str:
    """file_service_type: the note for roundrobin and random (with their :N), or a refusal."""
    opt = job.files_opts.get("file_service_type")
    value = (opt.value or "").strip() if opt else "roundrobin"
    kind, _, n = value.partition(":")
    if kind not in ("roundrobin", "random", "sequential", "zipf", "pareto", "normal", "gauss"):
        raise refuse(
            job, opt, "fio allows roundrobin, random, sequential, zipf, pareto, normal and gauss "
            "(each with :N)", "files",
        )  # fmt: skip
    if kind not in ("roundrobin", "random"):
        raise refuse(
            job, opt, f"file_service_type={kind} keeps fio on some files more than others "
            "(sequential: one file after the other); tilemark gives each file the same share "
            "of the IOs", "files",
        )  # fmt: skip
    if n and not n.isdigit():
        raise refuse(job, opt, f"the :N of {kind} is a count of IOs, got {n!r}", "files")
    return kind + (f" switching file every {n} IOs" if n else "")


def _file_name(job: FioJob, fmt: str, clone: int, k: int) -> str:
    if "$clientuid" in fmt:
        raise refuse(
            job, job.files_opts.get("filename_format"),
            "$clientuid names files per fio client; tilemark runs no fio clients", "files",
        )  # fmt: skip
    name = fmt.replace("$jobname", job.name).replace("$jobnum", str(clone))
    name = name.replace("$filenum", str(k))
    return str(os.path.join(job.directory, name)) if job.directory else name


def own_files(jobs: list[FioJob], tables: list[dict[str, Any]], doc: dict[str, Any],
              notes: list[str]) -> None:  # fmt: skip
    """Every job's files as targets named and sized as fio makes them; each clone's stream
    spreads its IOs over its own files. Raises layout.StreamProblem for what cannot be kept."""
    targets: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    services = set()
    for job, table in zip(jobs, tables, strict=True):
        nrfiles = _count(job, "nrfiles", 1)
        openfiles = _count(job, "openfiles", nrfiles)
        if openfiles < nrfiles:
            raise refuse(
                job, job.files_opts["openfiles"], f"fio keeps at most {openfiles} of the "
                f"job's {nrfiles} files open, closing and opening files as it goes; tilemark "
                "keeps its targets open for the whole run", "files",
            )  # fmt: skip
        if nrfiles > 1 and not str(table.get("rw", "")).startswith("rand"):
            raise refuse(
                job, job.files_opts["nrfiles"], "a sequential job over several files takes "
                "them in turn, each IO continuing its own file's sequence; a tilemark stream "
                "over several targets draws the target of each IO", "files",
            )  # fmt: skip
        if nrfiles > 1:
            services.add(_service(job))
        if job.filesize is not None:
            size = job.filesize
            total = job.size if job.size is not None else size * nrfiles
        elif job.size is not None:
            size, total = job.size // nrfiles, job.size
        else:
            raise refuse(
                job, None, f"job {job.name} has neither size nor filesize; fio needs one to "
                "make its files, and so does the translation", "files", key="size",
            )  # fmt: skip
        if job.offset:
            raise refuse(job, None, "an offset within files of the job's own is not "
                         "translated with nrfiles", "files", key="offset")  # fmt: skip
        small = min(s for s, _ in job.sizes)
        if size < small or size % small:
            raise refuse(
                job, job.files_opts.get("nrfiles"), f"each file is {fmt_size(size)}, which is "
                f"not a whole number of {fmt_size(small)} IOs", "files",
            )  # fmt: skip
        fmt_opt = job.files_opts.get("filename_format")
        fmt = (fmt_opt.value or "").strip() if fmt_opt else DEFAULT_FORMAT
        clones = []
        for clone in range(job.numjobs):
            names = []
            for k in range(nrfiles):
                path = _file_name(job, fmt, clone, k)
                if path in seen:
                    raise refuse(
                        job, fmt_opt, f"{path} is named by {seen[path]} too: fio shares such a "
                        "file between jobs; tilemark gives a target to the streams that name "
                        "it, each over its own region", "files",
                    )  # fmt: skip
                name = NOT_IN_NAMES.sub("_", os.path.basename(path))[:80] or f"f{len(targets)}"
                seen[path] = f"{job.name} (copy {clone})"
                targets.append({"name": name, "path": path, "size": fmt_size(size)})
                names.append(name)
            copy = dict(table)
            copy.pop("offset", None)
            if job.numjobs > 1:
                copy["name"] = f"{table['name']}{clone}"
            copy["target"] = names if len(names) > 1 else names[0]
            copy["length"] = fmt_size(size)  # each target's region; spread: uniform, the default
            copy.pop("passes", None)
            if not job.time_based:
                limit = job.io_size if job.io_size is not None else total * job.loops
                copy["io_size"] = fmt_size(limit)
            clones.append(copy)
        table["clones"] = clones
    if len({t["name"] for t in targets}) < len(targets):
        raise refuse(jobs[0], None, "two of the jobs' files get the same target name",
                     "files", key="filename_format")  # fmt: skip
    doc["target"] = targets
    count = len(targets)
    notes.append(
        f"fio makes {count} file{'s' if count > 1 else ''} for the jobs (nrfiles, named by "
        "filename_format); tilemark makes targets of the same names and sizes"
        + (
            ", and each stream draws the file of every IO uniformly: every file gets the same "
            f"share of the IOs as with fio's {' and '.join(sorted(services))}, in a drawn order"
            if services
            else ""
        )  # fmt: skip
    )
