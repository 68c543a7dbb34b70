"""fio's file and directory engines as tilemark file workloads (docs/fio.md, docs/files.md).

fio's `filecreate`, `filestat`, `filedelete`, `dircreate`, `dirstat` and `dirdelete` engines
(engines/fileoperations.c) make one metadata call per file of a job and do no IO: `nrfiles`
files (or directories) per clone of `numjobs`, each handled once, in order, timed from before
the call to after it. Each job becomes a file set of numjobs x nrfiles entries in
DIRECTORY/<job name> and a file stream of numjobs threads that takes the entries in order
(`select = "sequential"`) and ends after numjobs x nrfiles operations:

| fio engine (its call) | set | stream |
|---|---|---|
| filecreate (open O_CREAT, then close) | kind files, prealloc 0 | sequence "create,close" |
| filestat (stat / lstat / statx) | kind files, prealloc 100 | ops "stat" |
| filedelete (unlink) | kind files, prealloc 100 | ops "delete" |
| dircreate (mkdir) | kind dirs, prealloc 0 | ops "mkdir" |
| dirstat (stat of a directory) | kind dirs, prealloc 100 | ops "statdir" |
| dirdelete (rmdir) | kind dirs, prealloc 100 | ops "rmdir" |

`tilemark run JOB.fio` and `tilemark files run JOB.fio` run such a job file as a file workload;
`tilemark import-fio JOB.fio` writes it as a file-workload TOML (`tilemark files run` runs it).
A job file that mixes these engines with IO engines is refused (two workloads, two runs).
Every option either keeps fio's meaning, is named in a note saying what differs, or is refused
by name in one sentence.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from tilemark.errors import UsageError
from tilemark.fio.jobfile import Job, parse
from tilemark.fio.options import REPORTING
from tilemark.fio.values import parse_bool, parse_int, parse_size, parse_time_us

# engine -> (set kind, prealloc %, stream keys, the call fio makes)
ENGINES: dict[str, tuple[str, int, dict[str, str], str]] = {
    "filecreate": ("files", 0, {"sequence": "create,close"}, "open(O_CREAT)"),
    "filestat": ("files", 100, {"ops": "stat"}, "stat"),
    "filedelete": ("files", 100, {"ops": "delete"}, "unlink"),
    "dircreate": ("dirs", 0, {"ops": "mkdir"}, "mkdir"),
    "dirstat": ("dirs", 100, {"ops": "statdir"}, "stat"),
    "dirdelete": ("dirs", 100, {"ops": "rmdir"}, "rmdir"),
}
STAT_ENGINES = ("filestat", "dirstat")  # the ones a repeated pass does again unchanged
GROUP = "file and directory engines"  # the corpus table's group for their refusals

# Options read here; any other option outside NOTED and REPORTING is refused.
USED = frozenset({
    "ioengine", "nrfiles", "nr_files", "numjobs", "filesize", "size", "directory", "runtime",
    "time_based", "loops", "name", "stat_type", "create_on_open", "openfiles", "unlink",
    "fallocate", "rw", "readwrite", "create_fsync",
})  # fmt: skip
# Options with no counterpart whose difference is said in a note.
NOTED = {
    "filename_format": "tilemark names its entries f00000000, f00000001, ... in "
    "DIRECTORY/<job name>, whatever format fio would use",
    "group_reporting": "tilemark reports each job as one stream, its clones together",
}


class FileJobProblem(UsageError):
    """A refusal that names its option (for the corpus table's counts)."""

    def __init__(self, key: str, where: str, why: str) -> None:
        super().__init__(f"{where}: fio option {key} cannot be translated: {why}.")
        self.key, self.where, self.why = key, where, why


def engine_of(job: Job) -> str | None:
    """The job's ioengine when it is one of the file and directory engines."""
    opt = job.get("ioengine")
    return opt.value if opt is not None and opt.value in ENGINES else None


def holds_file_jobs(jobs: list[Job]) -> bool:
    """True when every job uses a file or directory engine, False when none does; a job file
    mixing them is refused (one sentence)."""
    mine = [j for j in jobs if engine_of(j)]
    if mine and len(mine) != len(jobs):
        other = next(j for j in jobs if not engine_of(j))
        opt = other.get("ioengine")
        raise FileJobProblem(
            "ioengine",
            opt.where if opt else other.where,
            f"job [{other.name}] does IO while [{mine[0].name}] uses "
            f"ioengine={engine_of(mine[0])}; tilemark runs file and directory engines as a file "
            "workload and IO engines as a block workload, so split the job file in two",
        )
    return bool(mine)


def is_file_job_file(path: str | os.PathLike[str]) -> bool:
    """True for a fio job file (*.fio, *.job) whose jobs all use file or directory engines."""
    if not str(path).endswith((".fio", ".job")):
        return False
    return holds_file_jobs(parse(path))


def _value(job: Job, key: str) -> tuple[str | None, str]:
    opt = job.get(key)
    return (opt.value, opt.where) if opt else (None, job.where)


def _count(job: Job, keys: tuple[str, ...], default: int, lo: int, hi: int) -> int:
    for key in keys:
        v, w = _value(job, key)
        if v is not None:
            n = parse_int(v, f"{w}: {key}")
            if not isinstance(n, int) or not lo <= n <= hi:
                raise FileJobProblem(key, w, f"it must be {lo} to {hi:,} here, got {v}")
            return n
    return default


def _notes(job: Job, engine: str, notes: list[str]) -> None:
    """What differs from fio, said once per option and job."""
    kind = ENGINES[engine][0]
    thing = "directory" if kind == "dirs" else "file"
    # Engine-wide notes carry no job name: a job file of six jobs says each once.
    if engine == "filecreate":
        notes.append(
            "ioengine=filecreate: fio opens each file with O_CREAT|O_RDWR, mode 0600, and "
            "times the open only; tilemark creates with O_CREAT|O_EXCL, mode 0644, and times "
            "the close too (its own row)"
        )
    if engine == "dircreate":
        notes.append(
            "ioengine=dircreate: fio passes S_IFDIR as mkdir's mode (permissions 0000); "
            "tilemark's mkdir makes 0755 directories"
        )
    if engine in ("dirstat", "dirdelete"):
        notes.append(
            f"ioengine={engine}: fio makes the directories with mode 0700 when the job starts; "
            "tilemark's prepare makes them with 0755 before the run"
        )
    if engine in STAT_ENGINES:
        stat_type, _ = _value(job, "stat_type")
        call = {"lstat": "lstat", "statx": "statx(STATX_ALL)"}.get(stat_type or "", "stat")
        notes.append(
            f"ioengine={engine}: fio calls {call} on a path; tilemark stats by name in its "
            "parent directory without following links (fstatat on psync, statx of the basic "
            "fields on uring): the same lookup, a set holding no links"
        )
    for opt in job.options:
        if opt.key == "create_on_open" and engine in ("filecreate", "dircreate"):
            notes.append(
                f"{opt.where}: create_on_open: tilemark creates every {thing} during the run, "
                "each call timed, which is what fio times with or without it"
            )
        elif opt.key == "openfiles" and engine == "filecreate":
            notes.append(
                f"{opt.where}: openfiles: tilemark closes each file right after creating it, "
                "as fio does once a file's filesize is done"
            )
        elif opt.key == "fallocate" and kind == "files" and ENGINES[engine][1]:
            notes.append(
                f"{opt.where}: fallocate: tilemark's prepare writes each file whole (random "
                "data) whatever fio's fallocate mode"
            )
        elif opt.key == "unlink" and parse_bool(opt.value, f"{opt.where}: unlink"):
            notes.append(
                f"{opt.where}: unlink: tilemark keeps the set after the run and makes it good "
                "again before the next (docs/files.md)"
            )
        elif opt.key in NOTED:
            notes.append(f"{opt.where}: {opt.key}: {NOTED[opt.key]}")


def _job_doc(
    job: Job, notes: list[str]
) -> tuple[dict[str, Any], dict[str, Any], tuple[float | None, bool]]:
    """The set and stream of one job, and (its runtime in s or None, time_based)."""
    engine = engine_of(job)
    if engine is None:
        engine_text, where = _value(job, "ioengine")
        raise UsageError(
            f"{where}: job [{job.name}] uses ioengine={engine_text or 'psync'}; `tilemark files "
            f"run` translates fio's file and directory engines ({', '.join(ENGINES)}), "
            "`tilemark run` the others."
        )
    kind, prealloc, stream_keys, call = ENGINES[engine]
    for opt in job.options:
        if opt.key not in USED and opt.key not in NOTED and opt.key not in REPORTING:
            raise FileJobProblem(
                opt.key,
                opt.where,
                f"it has no meaning for ioengine={engine} in tilemark's file workloads "
                "(docs/fio.md lists what translates)",
            )
    rw, w = _value(job, "rw")
    rw = rw if rw is not None else _value(job, "readwrite")[0]
    if rw is not None and rw not in ("read", "write"):
        raise FileJobProblem(
            "rw", w, f"with ioengine={engine} it only says whether fio reports the {call} "
            "latency as a read or a write; give read or write"
        )  # fmt: skip
    nrfiles = _count(job, ("nrfiles", "nr_files"), 1, 1, 10_000_000)
    numjobs = _count(job, ("numjobs",), 1, 1, 1024)
    if nrfiles * numjobs > 10_000_000:
        raise FileJobProblem(
            "nrfiles", _value(job, "nrfiles")[1], "nrfiles x numjobs is over tilemark's 10,000,000 "
            "entries of a set"
        )  # fmt: skip
    size_text, w = _value(job, "filesize")
    if size_text is None:
        total, w = _value(job, "size")
        if total is None:
            raise FileJobProblem(
                "filesize", job.where, f"job [{job.name}] has neither filesize nor size; fio "
                "needs one to run"
            )  # fmt: skip
        if "%" in total:
            raise FileJobProblem("size", w, "a share of a device names no file size")
        # HOWTO nrfiles: files are size divided by nrfiles unless filesize is given.
        size = parse_size(total, f"{w}: size") // nrfiles
    elif "-" in size_text or ":" in size_text:
        raise FileJobProblem("filesize", w, f"{size_text} is a range; give one size")
    else:
        size = parse_size(size_text, f"{w}: filesize")
    directory, w = _value(job, "directory")
    if directory and ":" in directory.replace("\\:", ""):
        raise FileJobProblem(
            "directory", w, "it lists several directories for the clones; tilemark places a "
            "job's set in one"
        )  # fmt: skip
    base = directory.replace("\\:", ":") if directory else os.getcwd()
    name = re.sub(r"[^A-Za-z0-9_.:+-]", "_", job.name)[:64] or "job"
    fileset = {
        "name": name,
        "path": os.path.join(base, name),
        "files": nrfiles * numjobs,
        "prealloc": prealloc,
        "size": str(size if kind == "files" else 0),
    }
    if kind == "dirs":
        fileset["kind"] = "dirs"
    elif prealloc:
        # filesetup.c extend_file(): fio fsyncs each file it lays out unless create_fsync=0
        # (HOWTO create_fsync: "This is the default"). Unlinking a file still in the page cache
        # is another operation than unlinking one on disk (ext4 here: ~15 us against ~1 ms).
        v, w = _value(job, "create_fsync")
        fileset["sync"] = v is None or parse_bool(v, f"{w}: create_fsync")
        if fileset["sync"]:
            notes.append(
                f"ioengine={engine}: fio fsyncs each file it lays out (create_fsync, on by "
                "default); tilemark's prepare ends with a syncfs of the set's file system, so "
                "the files are on disk when the run starts, as fio's are"
            )
    stream: dict[str, Any] = {
        "name": name, "fileset": name, **stream_keys, "threads": numjobs, "select": "sequential",
    }  # fmt: skip
    time_based = job.get("time_based") is not None and parse_bool(
        _value(job, "time_based")[0], f"{_value(job, 'time_based')[1]}: time_based"
    )
    runtime = None
    rt, w = _value(job, "runtime")
    if rt is not None:
        runtime = parse_time_us(rt, f"{w}: runtime") / 1e6 or None
    loops = _count(job, ("loops",), 1, 1, 1_000_000)
    if engine not in STAT_ENGINES and (loops > 1 or (time_based and runtime)):
        key = "loops" if loops > 1 else "time_based"
        again = {
            "filecreate": "its later passes open files that exist (O_CREAT without O_EXCL)",
            "filedelete": "its later passes unlink files that are gone (ENOENT)",
            "dircreate": "its later passes mkdir directories that exist (EEXIST)",
            "dirdelete": "its later passes rmdir directories that are gone (ENOENT)",
        }[engine]
        raise FileJobProblem(
            key, _value(job, key)[1], f"fio repeats the job over the same {kind}: {again}, "
            "which tilemark does not imitate; handle each once"
        )  # fmt: skip
    if not (time_based and runtime):
        stream["limit"] = nrfiles * numjobs * loops
    _notes(job, engine, notes)
    return fileset, stream, (runtime, bool(time_based and runtime))


def translate_file_jobs(
    path: str | os.PathLike[str], jobs: list[Job] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """A file workload document (the TOML layout `tilemark files run` reads) from a fio job
    file of file and directory engine jobs, and the notes on what differs."""
    if jobs is None:
        jobs = parse(path)
    holds_file_jobs(jobs)
    notes: list[str] = []
    sets, streams, runtimes = [], [], []
    for job in jobs:
        fileset, stream, runtime = _job_doc(job, notes)
        if any(s["name"] == fileset["name"] for s in sets):
            raise UsageError(f"{job.where}: two jobs are named [{job.name}]; name each once.")
        sets.append(fileset)
        streams.append(stream)
        runtimes.append(runtime)
    # fio runs the jobs at once, each for its own runtime; a file run has one duration.
    given = {r for r, _ in runtimes if r}
    if len(given) > 1:
        raise FileJobProblem(
            "runtime", jobs[0].where, "the jobs have different runtimes and a tilemark file "
            "run has one duration; give them the same"
        )  # fmt: skip
    if given and not all(r for r, _ in runtimes):
        raise FileJobProblem(
            "runtime", jobs[0].where, "some jobs have a runtime and others do not, and a "
            "tilemark file run has one duration; give every job the same"
        )  # fmt: skip
    # Jobs with a limit end when done; an hour bounds a run that never would.
    duration = given.pop() if given else 3600.0
    doc = {
        "name": re.sub(r"[^A-Za-z0-9_.:+-]", "_", Path(path).stem)[:64] or "fio",
        "duration": duration,
        "fileset": sets,
        "filestream": streams,
    }
    notes.append(
        "each job is a file set in DIRECTORY/<job name> (fio's files would be "
        "$jobname.$jobnum.$filenum in DIRECTORY) handled in order, every entry once, by "
        "numjobs threads sharing one cursor (fio gives each clone nrfiles of its own)"
    )
    return doc, list(dict.fromkeys(notes))


def toml_text(doc: dict[str, Any], source: str, notes: list[str]) -> str:
    """The file workload as a TOML file (`tilemark files run` reads it), notes on top."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return repr(v)
        return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = [f"# Translated from the fio job file {source} by tilemark import-fio."]
    lines += [f"# note: {note}" for note in notes]
    lines += ["# Run it with: tilemark files run THIS.toml [--dir DIR]", ""]
    lines += [f"{k} = {value(v)}" for k, v in doc.items() if not isinstance(v, list)]
    for key in ("fileset", "filestream"):
        for table in doc[key]:
            lines += ["", f"[[{key}]]"] + [f"{k} = {value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"
