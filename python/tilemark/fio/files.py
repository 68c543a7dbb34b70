"""fio job files of the file engines as tilemark file workloads (docs/files.md, docs/fio.md).

fio's `filecreate`, `filestat` and `filedelete` engines make one metadata call per file of a
job (`nrfiles` files of `filesize`, per clone of `numjobs`, in `directory`) and the job ends
when every file was handled once. Each job becomes a file set of numjobs x nrfiles entries in
DIRECTORY/<job name> and a stream of numjobs threads limited to as many operations:

| fio | tilemark |
|---|---|
| `ioengine=filecreate` | prealloc 0, sequence "create,close" (fio opens with O_CREAT and closes) |
| `ioengine=filestat` | prealloc 100, ops "stat" (fstatat; fio's `stat_type` is ignored, noted) |
| `ioengine=filedelete` | prealloc 100, ops "delete" (unlinkat) |
| `nrfiles`, `numjobs`, `filesize` | files = numjobs x nrfiles, size = filesize, threads = numjobs |
| `directory` | the set lives in DIRECTORY/<job name> (default: the current directory) |
| `runtime` with `time_based` | duration, no limit (files are picked at random, not in order) |

fio picks files in order and each exactly once; tilemark picks an idle file at random, so with
a limit every file is handled once only for create and delete (each removes the file from the
candidates); a stat limit stats as many files, some twice. Options about how fio opens and
allocates files (`create_on_open`, `openfiles`, `fallocate`, `unlink`, `thread`,
`filename_format`, `stat_type`) have no counterpart and are noted; any other option is refused.
"""

from __future__ import annotations

import os
import re
from typing import Any

from tilemark.errors import UsageError
from tilemark.fio.jobfile import Job, parse
from tilemark.fio.values import parse_int, parse_size, parse_time_us

ENGINES = {
    "filecreate": {"prealloc": 0, "sequence": "create,close"},
    "filestat": {"prealloc": 100, "ops": "stat"},
    "filedelete": {"prealloc": 100, "ops": "delete"},
}
NOTED = {
    "create_on_open": "tilemark creates files during the run (create ops) whatever it says",
    "openfiles": "tilemark closes each file right after creating it",
    "fallocate": "files tilemark creates are empty; prepared ones are written whole",
    "unlink": "tilemark keeps a set between runs and makes it good again (docs/files.md)",
    "thread": "tilemark's streams are threads",
    "filename_format": "tilemark names its files f00000000, f00000001, ...",
    "stat_type": "tilemark's stat is fstatat without following links",
    "group_reporting": "tilemark reports per stream",
}
USED = {"ioengine", "nrfiles", "nr_files", "numjobs", "filesize", "directory", "runtime",
        "time_based", "name", "description"}  # fmt: skip


def is_fio_job_file(path: str) -> bool:
    """True for a file named *.fio or *.job (what `tilemark files run` translates)."""
    return path.endswith((".fio", ".job"))


def _value(job: Job, key: str) -> tuple[str | None, str]:
    opt = job.get(key)
    return (opt.value, opt.where) if opt else (None, job.where)


def _job_doc(job: Job, notes: list[str]) -> tuple[dict[str, Any], dict[str, Any], float | None]:
    engine, where = _value(job, "ioengine")
    if engine not in ENGINES:
        raise UsageError(
            f"{where}: job [{job.name}] uses ioengine={engine or 'psync'}; `tilemark files run` "
            f"translates fio's file engines ({', '.join(ENGINES)}), `tilemark run` the others."
        )
    for opt in job.options:
        if opt.key in NOTED:
            notes.append(f"{opt.where}: {opt.key} has no counterpart: {NOTED[opt.key]}")
        elif opt.key not in USED:
            raise UsageError(
                f"{opt.where}: fio option {opt.key} has no meaning for a file workload in "
                "tilemark (docs/files.md lists what translates)."
            )
    nrfiles = 1
    for key in ("nrfiles", "nr_files"):
        v, w = _value(job, key)
        if v is not None:
            nrfiles = parse_int(v, f"{w}: {key}")
    numjobs = 1
    v, w = _value(job, "numjobs")
    if v is not None:
        numjobs = parse_int(v, f"{w}: numjobs")
    if nrfiles < 1 or numjobs < 1 or numjobs > 1024:
        raise UsageError(f"{job.where}: job [{job.name}] needs nrfiles >= 1, numjobs 1 to 1024.")
    size_text, w = _value(job, "filesize")
    if size_text is None:
        raise UsageError(f"{job.where}: job [{job.name}] has no filesize; fio needs one too.")
    if "-" in size_text or ":" in size_text:
        raise UsageError(f"{w}: filesize {size_text} is a range; give one size.")
    size = parse_size(size_text, f"{w}: filesize")
    directory, _ = _value(job, "directory")
    if directory and ":" in directory:
        raise UsageError(f"{job.where}: directory lists several directories; name one.")
    base = directory or os.getcwd()
    set_name = re.sub(r"[^A-Za-z0-9_.:+-]", "_", job.name)[:64] or "job"
    fileset = {
        "name": set_name,
        "path": os.path.join(base, set_name),
        "files": nrfiles * numjobs,
        "prealloc": ENGINES[engine]["prealloc"],
        "size": str(size),
    }
    stream: dict[str, Any] = {"name": set_name, "fileset": set_name, "threads": numjobs}
    stream.update({k: v for k, v in ENGINES[engine].items() if k != "prealloc"})
    runtime = None
    time_based = job.get("time_based") is not None
    rt, w = _value(job, "runtime")
    if rt is not None:
        runtime = parse_time_us(rt, f"{w}: runtime") / 1e6
    if not (time_based and runtime):
        stream["limit"] = nrfiles * numjobs
    return fileset, stream, runtime if time_based else None


def translate_file_jobs(path: str) -> tuple[dict[str, Any], list[str]]:
    """A file workload document from a fio job file of file-engine jobs, and notes."""
    jobs = parse(path)
    notes: list[str] = []
    sets, streams, durations = [], [], []
    for job in jobs:
        fileset, stream, duration = _job_doc(job, notes)
        if any(s["name"] == fileset["name"] for s in sets):
            raise UsageError(f"{job.where}: two jobs are named [{job.name}]; name each once.")
        sets.append(fileset)
        streams.append(stream)
        durations.append(duration)
    # fio runs the jobs at once; a run of limits ends when all are done (1 h at most).
    timed = [d for d in durations if d]
    duration = max(timed) if timed and len(timed) == len(durations) else 3600.0
    doc = {
        "name": re.sub(r"[^A-Za-z0-9_.:+-]", "_", os.path.basename(path))[:64] or "fio",
        "duration": duration,
        "fileset": sets,
        "filestream": streams,
    }
    return doc, notes
