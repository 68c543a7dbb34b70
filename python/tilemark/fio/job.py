"""One fio job read with fio's meaning: every option it sets, with fio's defaults filled in.

`read_job` turns a parsed job section (jobfile.Job: the global options in force, then the
job's own) into a `FioJob`: plain facts in fio's terms (bytes, microseconds, fio's own
defaults), with the options tilemark cannot honour collected as `Problem`s instead of
stopping at the first one, so that a refusal can name the most telling one and the corpus
table can count them all. What those facts become in tilemark is translate.py's business.

Precedence follows fio: a job's own setting overrides [global]; aliases (`rwmixwrite` for
`rwmixread`, `buffered` for `direct`, `timeout` for `runtime`, ...) set the same value, so
the last one written wins. Within one section fio sorts options before applying them, so the
same value set twice there with different values has no defined winner and is refused.

Longer than 600 lines because `FioJob` holds every fio fact the translator reads (a field per
option family) and `read_job` dispatches each option to its family; the families' own rules
live in their modules (strides, patterns, datareduce, verifyfill, paceopts, jobfiles,
values).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tilemark.errors import UsageError
from tilemark.fio import datareduce, paceopts, patterns, strides, values, verifyfill
from tilemark.fio.jobfile import Job, Option
from tilemark.fio.options import (
    BY_DESIGN,
    ENGINE_FAMILIES,
    ENGINE_REASONS,
    ENGINES,
    REFUSED,
    REPORTING,
    RW_MODES,
    SYNC_ENGINES,
    TRIM_MODES,
)
from tilemark.fio.shapes import Refused as _Refused
from tilemark.fio.shapes import bssplit, distribution

# Options of the files a job makes itself (nrfiles, ...: jobfiles.py; nr_files is an alias).
OWN_FILES_KEYS = ("nrfiles", "filename_format", "file_service_type", "openfiles")


@dataclass(frozen=True)
class Problem:
    """Why a job cannot be translated: the option, where, one clause, and its group."""

    key: str
    where: str
    why: str
    group: str
    message: str | None = None  # a whole sentence already (malformed values)

    def sentence(self) -> str:
        """The refusal as the CLI prints it: one sentence naming the option."""
        if self.message is not None:
            return self.message
        return f"{self.where}: fio option {self.key} cannot be translated: {self.why}."


UNSET = "variables the file expects to be set"
FIXABLE = ("malformed values", UNSET)  # what the user can fix in the file or environment

# fio's fadvise_hint values (options.c): 0 none, 1 the job's pattern, or one advice.
FADVISE_HINTS = ("0", "1", "random", "sequential", "noreuse")

# Aliases: a key and the canonical option it sets (rwmixwrite and buffered invert it).
ALIASES = {
    "readwrite": "rw",
    "blocksize": "bs",
    "blocksize_range": "bsrange",
    "blockalign": "ba",
    "timeout": "runtime",
    "fileoffset": "offset",
    "io_limit": "io_size",
    "ratemin": "rate_min",
    "rwmixwrite": "rwmixread",
    "buffered": "direct",
    "wait_for_previous": "stonewall",
    "iodepth_batch": "iodepth_batch_submit",
    "steadystate": "ss",
    "steadystate_duration": "ss_dur",
    "steadystate_ramp_time": "ss_ramp",
    "steadystate_check_interval": "ss_interval",
    "fill_fs": "fill_device",
    "nr_files": "nrfiles",
    "data_placement": "dataplacement",
    "fdp_pli_select": "fdp_pli",
}
_INVERTED = {"rwmixwrite", "buffered"}


@dataclass
class FioJob:
    """A job's options in fio's terms, fio's defaults filled in."""

    section: str
    name: str
    where: str
    rw: str = "read"
    rw_opt: Option | None = None
    read_pct: int = 50
    sizes: list[tuple[int, float]] = field(default_factory=lambda: [(4096, 1.0)])
    sizes_opt: Option | None = None
    blockalign: int | None = None
    iodepth: int = 1
    iodepth_opt: Option | None = None
    numjobs: int = 1
    engine: str = "psync"
    direct: bool = False
    direct_opt: Option | None = None
    invalidate: bool = True
    invalidate_opt: Option | None = None
    # fio's fadvise_hint (options.c, default "1": advise the job's own pattern at open).
    fadvise: str = "1"
    runtime_us: int | None = None
    runtime_opt: Option | None = None
    time_based: bool = False
    ramp_us: int = 0
    ramp_opt: Option | None = None
    startdelay_us: int = 0
    startdelay_opt: Option | None = None
    size: int | None = None
    size_opt: Option | None = None
    offset: int = 0
    offset_increment: int = 0
    filesize: int | None = None
    filesize_opt: Option | None = None
    files: list[str] | None = None
    files_opt: Option | None = None
    directory: str | None = None
    io_size: int | None = None
    io_size_opt: Option | None = None
    number_ios: int | None = None
    number_ios_opt: Option | None = None
    loops: int = 1
    rate: tuple[str, list[int], Option] | None = None  # ("iops" | "bytes", per direction)
    rate_process: str = "linear"
    distribution: str = "uniform"
    distribution_opt: Option | None = None
    percentage_random: int | None = None
    percentage_random_opt: Option | None = None
    norandommap: bool = False
    fsync: int = 0
    sync: str = "none"
    thinktime_us: int = 0
    thinktime_blocks: int = 1
    thinktime_issue: bool = False  # thinktime_blocks_type=issue
    thinktime_spin_us: int = 0
    compress: int | None = None
    compress_opt: Option | None = None
    dedupe: int | None = None
    dedupe_opt: Option | None = None
    verify: str | None = None
    verify_opt: Option | None = None
    do_verify: bool = True
    verify_interval: int | None = None
    stonewall: bool = False
    stonewall_opt: Option | None = None
    wait_for: str | None = None
    wait_for_opt: Option | None = None
    exitall: bool = False
    # flow, flow_id, flow_sleep (and their options), exit_what: read by fio/pace.py
    pace: dict[str, Any] = field(default_factory=dict)
    zonemode: str = "none"
    zonemode_opt: Option | None = None
    zonesize: int | None = None
    zoneskip: int = 0
    zonerange: int | None = None
    rate_min: Option | None = None
    # rw=...:N (strides.py): bytes added after a sequential IO, IOs per random offset.
    seq_add: int = 0
    run_length: int = 1
    suffix_opt: Option | None = None
    priority_opts: dict[str, Option] = field(default_factory=dict)
    data_opts: dict[str, Option] = field(default_factory=dict)  # datareduce.KEYS
    files_opts: dict[str, Option] = field(default_factory=dict)  # OWN_FILES_KEYS
    # patterns.py: writes' sizes apart from reads', a block sequence, priorities by size.
    write_sizes: list[tuple[int, float]] | None = None
    sequence: list[int] | None = None
    sequence_opt: Option | None = None
    sequence_stride: bool = False
    cmdprio_bssplit_opt: Option | None = None
    notes: list[str] = field(default_factory=list)
    by_design: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    kb_base: int = 1024

    def is_random(self) -> bool:
        """fio's td_random(): a rand* rw mode."""
        return self.rw.startswith("rand")

    def advises_its_pattern(self) -> bool:
        """fadvise_hint gives the job's own pattern: 1, or the advice 1 would give."""
        own = "random" if self.is_random() else "sequential"
        return self.fadvise in ("1", own)

    def min_bs(self) -> int:
        return min(size for size, _ in self.sizes)

    def sync_engine(self) -> bool:
        return self.engine in SYNC_ENGINES

    def mixed(self) -> bool:
        return self.rw in ("rw", "randrw")


def _effective(job: Job) -> tuple[dict[str, Option], list[Problem]]:
    """The option in force for every canonical key (the last written), and same-section
    conflicts, which fio resolves in an undefined order."""
    chosen: dict[str, Option] = {}
    section_of: dict[str, int] = {}
    value_of: dict[str, str | None] = {}
    problems: list[Problem] = []
    for opt in job.options:
        key = ALIASES.get(opt.key, opt.key)
        value = opt.value
        if opt.key in _INVERTED and value is not None and value.strip().isdigit():
            value = str(100 - int(value)) if key == "rwmixread" else str(int(value == "0"))
        elif opt.key == "buffered" and value is None:
            value = "0"
        elif value is None:
            value = "1"  # a bare option is a true bool
        if key in chosen and section_of[key] == opt.section and value_of[key] != value:
            first = chosen[key]
            problems.append(
                Problem(
                    opt.key,
                    opt.where,
                    f"it sets the same value as {first.key} ({first.where}) in the same "
                    "section, differently; fio sorts a section's options before applying "
                    "them, so which one wins is not defined",
                    "conflicting options",
                )
            )
        chosen[key], section_of[key], value_of[key] = opt, opt.section, value
    return chosen, problems


def _kb_base(job: Job, opt: Option) -> int:
    """kb_base in force for `opt`: set in its own section (fio applies it first, prio 1) or
    in an earlier one."""
    base = 1024
    for other in job.options:
        if other.key != "kb_base":
            continue
        if other.section == opt.section or other.section < opt.section:
            base = 1000 if (other.value or "").strip() == "1000" else 1024
    return base


def _value(opt: Option) -> str:
    if opt.value is None or opt.value.strip() == "":
        if opt.substituted:
            names = ", ".join(opt.substituted)
            raise _Refused(f"it needs a value (it is {names}, which is empty)", UNSET)
        raise _Refused("it needs a value", "malformed values")
    return opt.value.strip()


def _one(opt: Option) -> str:
    """A value that is the same for reads and writes (fio allows read,write[,trim] lists)."""
    parts = values.per_direction(_value(opt), f"fio option {opt.key}")
    if len(set(parts[:2])) > 1:
        raise _Refused(
            f"separate read and write values ({opt.value}) are not supported; tilemark gives "
            "a stream one value for both",
            "separate read and write settings",
        )
    return parts[0]


def _label(opt: Option) -> str:
    return f"{opt.where}: fio option {opt.key}"


def _int(job: FioJob, opt: Option, low: int = 0) -> int:
    value = values.parse_int(_one(opt), _label(opt), kb_base=job.kb_base)
    if isinstance(value, values.Percent) or value < low:
        raise UsageError(
            f"{_label(opt)} must be a whole number of at least {low}, got {opt.value!r}."
        )
    return value


def _size(job: FioJob, opt: Option, what: str = "a size") -> int:
    value = values.parse_int(_one(opt), _label(opt), kb_base=job.kb_base, percent=True)
    if isinstance(value, values.Percent):
        raise _Refused(
            f"{what} given as a share of the file ({opt.value}) depends on a size tilemark "
            "learns only when it opens the target; give it in bytes",
            "shares of a file",
        )
    return value


def _time(opt: Option, bare_seconds: bool = True) -> int:
    return values.parse_time_us(_value(opt), _label(opt), bare_seconds=bare_seconds)


def _engine(job: FioJob, opt: Option) -> None:
    engine = _value(opt)
    if engine in ENGINES:
        job.engine = engine
        if engine == "cpp_null":
            job.notes.append(
                "ioengine=cpp_null is fio's C++ example of the null engine and runs as null"
            )
        return
    if engine in ENGINE_REASONS:
        raise _Refused(f"ioengine={engine}: {ENGINE_REASONS[engine]}", "ioengine")
    if engine in ("filecreate", "filestat", "filedelete"):
        raise _Refused(
            f"ioengine={engine} makes metadata calls on files; `tilemark files run` runs such "
            "jobs as file workloads (docs/files.md)",
            "ioengine",
        )
    for family, members in ENGINE_FAMILIES.items():
        if engine in members:
            raise _Refused(
                f"ioengine={engine} is {family}, not block or file IO that tilemark issues",
                "ioengine",
            )
    raise _Refused(
        f"ioengine={engine} has no tilemark backend (sync, psync, vsync, pvsync, "
        "pvsync2, libaio, posixaio, io_uring and null translate)",
        "ioengine",
    )


def _rw(job: FioJob, opt: Option) -> None:
    mode, colon, suffix = _value(opt).partition(":")
    if mode in TRIM_MODES:
        raise _Refused(
            f"rw={mode} issues trims, which tilemark does not issue yet (a discard "
            "operation is another branch's work)",
            "trims",
        )
    if mode not in RW_MODES:
        raise UsageError(
            f"{_label(opt)} must be one of {', '.join(RW_MODES)} (or a trim mode), "
            f"got {opt.value!r}."
        )
    job.rw, job.rw_opt = RW_MODES[mode], opt
    if colon:
        strides.read_rw_suffix(job, job.is_random(), suffix, opt)


def _rate(job: FioJob, opt: Option, kind: str) -> None:
    if job.rate is not None:
        raise _Refused(
            f"it is set together with {job.rate[2].key}; fio would honour both, "
            "tilemark paces a stream by one rate",
            "pacing",
        )
    parts = values.per_direction(_value(opt), _label(opt))
    rates = []
    for part in parts[:2]:
        value = values.parse_int(part, _label(opt), kb_base=job.kb_base)
        assert isinstance(value, int)
        rates.append(value)
    if len(rates) == 1:
        rates.append(rates[0])
    job.rate = (kind, rates, opt)


def _verify(job: FioJob, opt: Option) -> None:
    kind = _value(opt).lower()
    if kind in ("0", "none"):
        job.verify, job.verify_opt = None, opt  # set, to nothing (verifyfill.py tells apart)
        return
    if kind in ("pattern", "pattern_hdr", "null"):
        raise _Refused(
            f"verify={kind} checks a fixed pattern or nothing; tilemark writes and "
            "checks its own verifiable blocks",
            "verification other than tilemark's",
        )
    job.verify, job.verify_opt = kind, opt


def _handle(job: FioJob, key: str, opt: Option) -> None:  # noqa: C901 - one table, read in order
    """Apply one option in force to `job`; raises _Refused or UsageError."""
    if key == "name":
        job.name = _value(opt)
    elif key == "rw":
        _rw(job, opt)
    elif key == "rwmixread":
        value = _int(job, opt)
        if value > 100:
            raise UsageError(f"{_label(opt)} must be 0 to 100, got {opt.value!r}.")
        job.read_pct = value if opt.key == "rwmixread" else 100 - value
    elif key == "bs":
        patterns.read_sizes(job, opt, _value(opt), lambda t: [(_block_size(job, opt, t), 1.0)])
    elif key == "bsrange":
        parts = re.split(r"[-:]", _one(opt), maxsplit=1)
        low_text, high_text = parts[0], parts[-1]
        low = values.parse_size(low_text, _label(opt), kb_base=job.kb_base)
        high = values.parse_size(high_text or low_text, _label(opt), kb_base=job.kb_base)
        if low != high:
            raise _Refused(
                "sizes drawn from a range have no tilemark equivalent; use bssplit", "size ranges"
            )
        if low == 0:
            raise UsageError(f"{_label(opt)} must be above 0, got {opt.value!r}.")
        job.sizes, job.sizes_opt = [(low, 1.0)], opt
    elif key == "bssplit":
        patterns.read_sizes(job, opt, _value(opt), lambda t: bssplit(t, _label(opt), job.kb_base))
    elif key == "ba":
        job.blockalign = _size(job, opt)
        if job.blockalign == 0:
            job.blockalign = None
    elif key == "iodepth":
        job.iodepth, job.iodepth_opt = _int(job, opt, 1), opt
        if job.iodepth > 65536:
            raise UsageError(f"{_label(opt)} must be from 1 to 65536, got {opt.value!r}.")
    elif key == "numjobs":
        job.numjobs = _int(job, opt, 1)
    elif key == "ioengine":
        _engine(job, opt)
    elif key == "direct":
        flag = values.parse_bool(opt.value, _label(opt))
        job.direct, job.direct_opt = (flag if opt.key == "direct" else not flag), opt
    elif key == "invalidate":
        job.invalidate, job.invalidate_opt = values.parse_bool(opt.value, _label(opt)), opt
    elif key == "fadvise_hint":
        value = (opt.value or "").strip().lower()
        if value not in FADVISE_HINTS:
            raise UsageError(
                f"{_label(opt)} must be one of {', '.join(FADVISE_HINTS)} (fio's fadvise_hint), "
                f"got {opt.value!r}."
            )
        job.fadvise = value
    elif key == "runtime":
        job.runtime_us, job.runtime_opt = _time(opt), opt
    elif key == "time_based":
        job.time_based = values.parse_bool(opt.value, _label(opt))
    elif key == "ramp_time":
        job.ramp_us, job.ramp_opt = _time(opt), opt
    elif key == "startdelay":
        if re.search(r"\d\s*[-:]\s*\d", _value(opt)):
            raise _Refused("a range makes fio draw each clone's delay at random", "timing")
        job.startdelay_us, job.startdelay_opt = _time(opt), opt
    elif key == "size":
        job.size, job.size_opt = _size(job, opt), opt
        if job.size == 0:
            raise UsageError(f"{_label(opt)} must be above 0, got {opt.value!r}.")
    elif key == "offset":
        job.offset = _size(job, opt, "an offset")
    elif key == "offset_increment":
        job.offset_increment = _size(job, opt, "an offset increment")
    elif key == "filesize":
        if re.search(r"\d\s*[-:]\s*\d", _value(opt)):
            raise _Refused(
                "a range gives files of several sizes; tilemark gives a job one file or region",
                "several files per job (file sets: a later tilemark issue)",
            )
        job.filesize, job.filesize_opt = _size(job, opt), opt
    elif key == "filename":
        names = [n.replace("\\:", ":") for n in re.split(r"(?<!\\):", _value(opt)) if n]
        if len(names) > 1:
            raise _Refused(
                f"several files ({opt.value}) in one job are a file set, a later tilemark feature",
                "several files per job (file sets: a later tilemark issue)",
            )
        job.files, job.files_opt = names, opt
    elif key == "directory":
        dirs = [d.replace("\\:", ":") for d in re.split(r"(?<!\\):", _value(opt)) if d]
        if len(dirs) > 1:
            raise _Refused(
                "several directories spread a job's files over them, a file set",
                "several files per job (file sets: a later tilemark issue)",
            )
        job.directory = dirs[0]
    elif key == "io_size":
        job.io_size, job.io_size_opt = _size(job, opt), opt
    elif key == "number_ios":
        job.number_ios, job.number_ios_opt = _int(job, opt), opt
    elif key == "loops":
        job.loops = _int(job, opt, 1)
    elif key in ("rate_iops", "rate"):
        _rate(job, opt, "iops" if key == "rate_iops" else "bytes")
    elif key == "rate_process":
        process = _value(opt)
        if process not in ("linear", "poisson"):
            raise UsageError(f"{_label(opt)} must be linear or poisson, got {opt.value!r}.")
        job.rate_process = process
    elif key == "random_distribution":
        if _value(opt).startswith("sequence:"):
            patterns.read_sequence(job, opt)
            return
        job.distribution = distribution(_one(opt), _label(opt))
        job.distribution_opt = opt
    elif key == "percentage_random":
        job.percentage_random = values.parse_percent(_one(opt), _label(opt))
        job.percentage_random_opt = opt
    elif key == "norandommap":
        job.norandommap = values.parse_bool(opt.value, _label(opt))
    elif key == "fsync":
        job.fsync = _int(job, opt)
    elif key == "sync":
        text = (opt.value or "1").strip().lower()
        if text in ("0", "none"):
            job.sync = "none"
        elif text in ("1", "sync", "dsync"):
            job.sync = "dsync" if text == "dsync" else "sync"
        else:
            raise UsageError(f"{_label(opt)} must be none, 0, sync, 1 or dsync, got {opt.value!r}.")
    elif key == "thinktime":
        job.thinktime_us = _time(opt, bare_seconds=False)
    elif key == "thinktime_blocks":
        job.thinktime_blocks = _int(job, opt, 1)
    elif key == "thinktime_blocks_type":
        kind = _value(opt)
        if kind not in ("complete", "issue"):
            raise UsageError(f"{_label(opt)} must be complete or issue, got {opt.value!r}.")
        job.thinktime_issue = kind == "issue"
    elif key == "thinktime_spin":
        job.thinktime_spin_us = _time(opt, bare_seconds=False)
    elif key == "buffer_compress_percentage":
        job.compress, job.compress_opt = values.parse_percent(_value(opt), _label(opt)), opt
    elif key == "dedupe_percentage":
        job.dedupe, job.dedupe_opt = values.parse_percent(_value(opt), _label(opt)), opt
    elif key == "verify":
        _verify(job, opt)
    elif key == "do_verify":
        job.do_verify = values.parse_bool(opt.value, _label(opt))
    elif key == "verify_interval":
        job.verify_interval = _size(job, opt)
    elif key == "stonewall":
        job.stonewall, job.stonewall_opt = values.parse_bool(opt.value, _label(opt)), opt
    elif key == "wait_for":
        job.wait_for, job.wait_for_opt = _value(opt), opt
    elif key == "exitall":
        job.exitall = values.parse_bool(opt.value, _label(opt))
    elif key in paceopts.KEYS:
        paceopts.read(job.pace, key, opt)
    elif key == "zonemode":
        mode = _value(opt)
        if mode == "zbd":
            raise _Refused(
                "zoned block devices (write pointers, zone resets) are not modelled by tilemark",
                "zoned block devices",
            )
        if mode not in ("none", "strided"):
            raise UsageError(f"{_label(opt)} must be none, strided or zbd, got {opt.value!r}.")
        job.zonemode, job.zonemode_opt = mode, opt
    elif key == "zonesize":
        job.zonesize = _zone_size(job, opt)
    elif key == "zoneskip":
        job.zoneskip = _zone_size(job, opt)
    elif key == "zonerange":
        job.zonerange = _zone_size(job, opt)
    elif key in ("rate_min", "rate_iops_min"):
        job.rate_min = opt
    elif key == "kb_base":
        if _value(opt) not in ("1000", "1024"):
            raise UsageError(f"{_label(opt)} must be 1000 or 1024, got {opt.value!r}.")
    elif key in datareduce.KEYS or key in verifyfill.KEYS:
        datareduce.read(job, key, opt)
    elif key in patterns.KEYS:
        patterns.read(job, key, opt)
    elif key in OWN_FILES_KEYS:  # checked with the whole job in jobfiles.own_files
        job.files_opts[key] = opt
    elif key in strides.PRIORITY_KEYS:
        strides.read_priority(job, key, opt)
    elif key == "rw_sequencer":
        strides.read_sequencer(opt)
    elif key in REPORTING or key in ("ss", "ss_dur", "ss_ramp", "ss_interval"):
        # ss_* are read with the job's reporting group (steady.py).
        return
    elif key in BY_DESIGN:
        job.by_design.append(f"{opt.key} is not translated, because {BY_DESIGN[key]}")
    elif key in REFUSED:
        reason = REFUSED[key]
        raise _Refused(reason.text, reason.group)
    else:
        raise _Refused("tilemark has no equivalent (docs/fio.md lists what translates)")


def _block_size(job: FioJob, opt: Option, text: str) -> int:
    size = values.parse_size(text, _label(opt), kb_base=job.kb_base)
    if size == 0:
        raise UsageError(f"{_label(opt)} must be above 0 (fio refuses 0), got {opt.value!r}.")
    assert isinstance(size, int)
    return size


def _zone_size(job: FioJob, opt: Option) -> int:
    text = _value(opt)
    if text.lower().endswith("z"):
        raise _Refused("sizes in zones belong to zoned block devices", "zoned block devices")
    return _size(job, opt, "a zone size")


# Options read first, because others are read in their terms (the engine decides what
# iodepth means; kb_base what a size is).
_FIRST = ("ioengine",)


def read_job(job: Job) -> FioJob:
    """A parsed job section in fio's terms; what cannot be translated is in `.problems`."""
    chosen, problems = _effective(job)
    fio_job = FioJob(section=job.name, name=job.name, where=job.where, problems=problems)
    keys = sorted(chosen, key=lambda k: (k not in _FIRST,))
    for key in keys:
        opt = chosen[key]
        fio_job.kb_base = _kb_base(job, opt)
        try:
            _handle(fio_job, key, opt)
        except _Refused as refused:
            fio_job.problems.append(Problem(opt.key, opt.where, refused.why, refused.group))
        except UsageError as e:
            fio_job.problems.append(Problem(opt.key, opt.where, str(e), "malformed values", str(e)))
    fio_job.kb_base = 1024
    return fio_job
