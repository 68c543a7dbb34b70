"""fio job files as tilemark workloads (docs/fio.md).

Each fio job becomes one stream (`numjobs` clones become copies); every job runs at once, as
fio's jobs do without `stonewall`. The common options translate; options that only change
fio's reporting are listed in a note; everything else is refused by name with one sentence,
because a translation that silently drops what the user wrote measures something else.

fio's defaults are not tilemark's, so they are written out: fio does buffered IO
(`direct=0`) with the `psync` engine at `bs=4k` unless told otherwise.

Longer than 600 lines because it is one table of fio's options and their translations, read
top to bottom against fio's HOWTO; split by option it would scatter rules that are checked
together (the defaults, `[global]` inheritance, the notes).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilemark.errors import UsageError
from tilemark.fio.jobfile import Job, Option, parse, redact_included
from tilemark.units import parse_duration, parse_size

# fio engines and the tilemark backend that issues the same IO.
ASYNC_ENGINES = {"io_uring", "libaio", "posixaio"}
SYNC_ENGINES = {"sync", "psync", "vsync", "pvsync", "pvsync2"}
ENGINES = {**dict.fromkeys(ASYNC_ENGINES, "uring"), **dict.fromkeys(SYNC_ENGINES, "psync")}
ENGINES["null"] = "null"

RW_MODES = {
    "read": "read",
    "write": "write",
    "randread": "randread",
    "randwrite": "randwrite",
    "rw": "rw",
    "readwrite": "rw",
    "randrw": "randrw",
}

# Options that change what fio reports or how it is set up, not the IO it issues.
REPORTING = {
    "description",
    "group_reporting",
    "new_group",
    "thread",
    "gtod_reduce",
    "clocksource",
    "write_bw_log",
    "write_lat_log",
    "write_iops_log",
    "write_hist_log",
    "log_avg_msec",
    "log_hist_msec",
    "log_offset",
    "per_job_logs",
    "percentile_list",
    "clat_percentiles",
    "lat_percentiles",
    "slat_percentiles",
    "disable_lat",
    "disable_clat",
    "disable_slat",
    "disable_bw_measurement",
    "significant_figures",
    "unified_rw_reporting",
    "stats",
    "threads",
}
# Options whose effect tilemark provides by its own design; named in a note with the reason.
BY_DESIGN = {
    "norandommap": "tilemark places random IOs without a map, as fio does with norandommap",
    "randrepeat": "tilemark's placement is fixed by --seed",
    "allrandrepeat": "tilemark's placement is fixed by --seed",
    "randseed": "tilemark's placement is fixed by --seed",
    "iodepth_batch": "tilemark keeps the queue full and submits as completions arrive",
    "iodepth_batch_submit": "tilemark keeps the queue full and submits as completions arrive",
    "iodepth_batch_complete": "tilemark keeps the queue full and submits as completions arrive",
    "iodepth_batch_complete_min": "tilemark keeps the queue full and submits as completions arrive",
    "iodepth_batch_complete_max": "tilemark keeps the queue full and submits as completions arrive",
    "iodepth_low": "tilemark keeps the queue full and submits as completions arrive",
    "io_submit_mode": "a rate runs open loop in tilemark: IOs are issued on schedule",
    "fixedbufs": "tilemark's io_uring backend registers its own buffers as it sees fit",
    "registerfiles": "tilemark's io_uring backend registers its own files as it sees fit",
    "overwrite": "tilemark lays out (fills) a new target before it measures",
    "fallocate": "tilemark lays out (fills) a new target before it measures",
    "create_on_open": "tilemark opens its target once",
    "allow_file_create": "tilemark creates a new target file itself",
    "unlink": "tilemark never deletes a target",
    "refill_buffers": "tilemark generates its own write data",
    "scramble_buffers": "tilemark generates its own write data",
    "end_fsync": "the measurement ends with the last IO; no final fsync is measured",
    "exitall": "all of tilemark's streams end together",
    "kb_base": "sizes are binary (1024), fio's default",
    "random_generator": "tilemark draws offsets with its own generator",
}
# Options refused with a reason more specific than "no equivalent".
REFUSED = {
    "stonewall": "fio runs the jobs after it one group at a time; tilemark runs every stream at "
    "once, so translate each group as its own file",
    "wait_for": "fio runs this job after another; tilemark runs every stream at once, so "
    "translate each group as its own file",
    "startdelay": "tilemark starts every stream together",
    "verify": "tilemark does not verify data yet",
    "do_verify": "tilemark does not verify data yet",
    "verify_pattern": "tilemark does not verify data yet",
    "verify_interval": "tilemark does not verify data yet",
    "fill_device": "tilemark uses a fixed data area (size)",
    "io_size": "tilemark runs for a time (runtime), not for a byte count",
    "io_limit": "tilemark runs for a time (runtime), not for a byte count",
    "number_ios": "tilemark runs for a time (runtime), not for a byte count",
    "filesize": "tilemark gives each stream one region (size)",
    "nrfiles": "tilemark gives each stream one region (size)",
    "zonemode": "tilemark has no zoned access mode",
    "ioscheduler": "tilemark does not change system settings",
    "fdatasync": "tilemark syncs writes with fsync or O_DSYNC only (fsync=N or sync=1)",
    "ratemin": "tilemark reports the rate it reached instead of aborting below a minimum",
    "rate_min": "tilemark reports the rate it reached instead of aborting below a minimum",
    "rate_iops_min": "tilemark reports the rate it reached instead of aborting below a minimum",
    "hipri": "tilemark does not use polled completions",
    "sqthread_poll": "tilemark does not use a kernel submission thread",
    "cpus_allowed": "tilemark places its own threads",
    "cpumask": "tilemark places its own threads",
    "numa_cpu_nodes": "tilemark places its own threads",
    "numa_mem_policy": "tilemark places its own threads",
    "ss": "fio's steady-state termination is not translated",
    "ss_dur": "fio's steady-state termination is not translated",
    "zero_buffers": "tilemark's write data is set with compress (buffer_compress_percentage)",
}


@dataclass
class Translation:
    """A workload document (the TOML layout `tilemark run` reads) and what the user must know."""

    doc: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    source: str = ""


def _refuse(opt: Option, why: str) -> UsageError:
    return UsageError(f"{opt.where}: fio option {opt.key} cannot be translated: {why}.")


def _value(opt: Option) -> str:
    if opt.value is None or opt.value == "":
        raise UsageError(f"{opt.where}: fio option {opt.key} needs a value ({opt.key}=...).")
    return opt.value


def _single(opt: Option) -> str:
    """A value that is the same for reads and writes (fio allows 'read,write' lists)."""
    text = _value(opt)
    if "," in text:
        parts = [p.strip() for p in text.split(",")]
        if len(set(parts)) == 1:
            return parts[0]
        raise _refuse(opt, f"separate read and write values ({text}) are not supported")
    return text


def _flag(opt: Option) -> bool:
    if opt.value is None or opt.value == "":
        return True
    if opt.value.strip() in ("0", "1"):
        return opt.value.strip() == "1"
    raise UsageError(f"{opt.where}: fio option {opt.key} must be 0 or 1, got {opt.value!r}.")


def _int(opt: Option, low: int = 0) -> int:
    text = _single(opt)
    if not re.fullmatch(r"\d+", text) or int(text) < low:
        raise UsageError(
            f"{opt.where}: fio option {opt.key} must be a whole number of at least {low}, "
            f"got {text!r}."
        )
    return int(text)


def _size(opt: Option) -> int:
    text = _single(opt)
    if text.endswith("%"):
        raise _refuse(opt, f"a share of the file ({text}) is not supported; give a size")
    return parse_size(text, f"{opt.where}: fio option {opt.key}")


def _seconds(opt: Option) -> float:
    text = _value(opt)
    if text.endswith("us"):
        return parse_duration(text[:-2] or "0", opt.key) / 1e6
    return parse_duration(text, f"{opt.where}: fio option {opt.key}")


def _percent(opt: Option) -> float:
    value = float(_int(opt))
    if value > 100:
        raise UsageError(f"{opt.where}: fio option {opt.key} must be 0 to 100, got {opt.value!r}.")
    return value


def _bssplit(opt: Option) -> str:
    """fio's 4k/10:64k/50:32k/ (an empty share takes what is left) as tilemark's 4k:10,..."""
    text = _single(opt)
    entries = []
    for part in text.split(":"):
        size_text, _, share = part.partition("/")
        size = parse_size(size_text.strip(), f"{opt.where}: fio option bssplit")
        entries.append((size, float(share) if share.strip() else None))
    given = sum(s for _, s in entries if s is not None)
    empty = [i for i, (_, s) in enumerate(entries) if s is None]
    if given > 100 or (not empty and abs(given - 100) > 1e-9 and given == 0):
        raise UsageError(
            f"{opt.where}: fio option bssplit shares must add up to 100, got {text!r}."
        )
    rest = (100.0 - given) / len(empty) if empty else 0.0
    return ",".join(
        f"{_size_text(size)}:{share if share is not None else rest:g}" for size, share in entries
    )


def _distribution(opt: Option) -> str:
    text = _single(opt)
    kind, _, arg = text.partition(":")
    if kind == "random":
        return "uniform"
    if kind == "zipf" and arg:
        return f"zipf:{arg}"
    if kind == "zoned" and arg:
        zones = [z.partition("/") for z in arg.split(":")]
        if len(zones) == 2:
            (io1, _, region1), (io2, _, region2) = zones
            io1_v, region1_v = float(io1), float(region1)
            if (not io2 or float(io2) == 100 - io1_v) and (
                not region2 or float(region2) == 100 - region1_v
            ):
                return f"hotspot:{io1_v:g}/{region1_v:g}"
        raise _refuse(
            opt,
            f"{text} has {len(zones)} zones; tilemark's hotspot:IO/REGION has one hot zone "
            "and the rest",
        )
    raise _refuse(opt, f"{text} is not uniform (random), zipf or a two-zone zoned distribution")


@dataclass
class _Job:
    """One fio job after reading its options: its stream table, file and run-wide settings."""

    name: str
    where: str
    stream: dict[str, Any]
    numjobs: int
    file: str | None  # a named file or device; None: fio makes one file per clone
    offset: int
    size: int | None
    run: dict[str, tuple[Any, Option | None]]  # run-wide key -> (value, where it was set)
    mixed_rate: tuple[float, str] | None = None  # a single rate on a read/write mix
    ignored: list[str] = field(default_factory=list)


def _read_job(job: Job, notes: list[str]) -> _Job:
    opts: dict[str, Option] = {}
    for opt in job.options:
        opts[opt.key] = opt  # later settings override (the job's own follow [global])
    stream: dict[str, Any] = {}
    run: dict[str, tuple[Any, Option | None]] = {
        "backend": ("psync", None),
        "direct": (False, None),
    }
    name = re.sub(r"[^A-Za-z0-9_.:+-]", "_", job.name)[:60] or "job"
    tj = _Job(name, job.where, stream, 1, None, 0, None, run)
    directory: str | None = None
    sync_engine = True
    time_based = False
    read_pct = 50.0
    rate: tuple[str, float, Option] | None = None
    thinktime: float | None = None
    thinktime_blocks = 1
    for key, opt in opts.items():
        if key == "name":
            tj.name = re.sub(r"[^A-Za-z0-9_.:+-]", "_", _value(opt))[:60] or tj.name
        elif key in ("rw", "readwrite"):
            text = _value(opt)
            mode, _, suffix = text.partition(":")
            if suffix:
                raise _refuse(
                    opt, f"the :{suffix} suffix (skip between sequential IOs) is not supported"
                )
            if mode not in RW_MODES:
                raise _refuse(opt, f"rw={mode} is not one of {', '.join(RW_MODES)}")
            stream["rw"] = RW_MODES[mode]
        elif key == "rwmixread":
            read_pct = _percent(opt)
        elif key == "rwmixwrite":
            read_pct = 100.0 - _percent(opt)
        elif key in ("bs", "blocksize"):
            stream["bs"] = _size_text(_size(opt))
        elif key in ("bsrange", "blocksize_range"):
            low, _, high = _single(opt).partition("-")
            if parse_size(low, opt.key) != parse_size(high or low, opt.key):
                raise _refuse(opt, "uniformly random sizes are not supported; use bssplit")
            stream["bs"] = _size_text(parse_size(low, opt.key))
        elif key == "bssplit":
            stream["bs"] = _bssplit(opt)
        elif key in ("ba", "blockalign"):
            stream["align"] = _size_text(_size(opt))
        elif key == "iodepth":
            stream["qd"] = _int(opt, 1)
        elif key == "numjobs":
            tj.numjobs = _int(opt, 1)
        elif key == "ioengine":
            engine = _value(opt)
            if engine not in ENGINES:
                raise _refuse(
                    opt,
                    f"ioengine={engine} has no tilemark backend (io_uring, libaio, posixaio, "
                    "psync, sync, pvsync and null translate)",
                )
            run["backend"] = (ENGINES[engine], opt)
            sync_engine = engine in SYNC_ENGINES
            if engine in ("libaio", "posixaio"):
                tj.ignored.append(f"ioengine={engine} runs on io_uring at the same queue depth")
        elif key == "invalidate":
            if not _flag(opt):
                run["keep_cache"] = (True, opt)
        elif key == "direct":
            run["direct"] = (_flag(opt), opt)
        elif key == "buffered":
            run["direct"] = (not _flag(opt), opt)
        elif key in ("runtime", "timeout"):
            run["duration"] = (_seconds(opt), opt)
        elif key == "ramp_time":
            run["warmup"] = (_seconds(opt), opt)
        elif key == "time_based":
            time_based = _flag(opt)
        elif key == "size":
            tj.size = _size(opt)
        elif key in ("offset", "fileoffset"):
            tj.offset = _size(opt)
        elif key == "filename":
            text = _value(opt)
            if ":" in text:
                raise _refuse(opt, f"several files ({text}) in one job are not supported")
            tj.file = text
        elif key == "directory":
            directory = _value(opt)
        elif key in ("rate_iops", "rate"):
            if rate is not None:
                raise _refuse(opt, f"it is set together with {rate[0]}; give one of them")
            text = _single(opt)
            if key == "rate_iops":
                value = float(_int(opt, 1))
            else:
                value = float(parse_size(text, f"{opt.where}: fio option rate"))
                if value <= 0:
                    raise UsageError(f"{opt.where}: fio option rate must be above 0.")
            rate = (key, value, opt)
        elif key == "rate_process":
            process = _value(opt)
            if process not in ("linear", "poisson"):
                raise _refuse(opt, f"rate_process={process} is not linear or poisson")
            stream["arrival"] = "constant" if process == "linear" else "poisson"
        elif key == "random_distribution":
            stream["pattern"] = _distribution(opt)
        elif key == "percentage_random":
            stream["random"] = _percent(opt)
        elif key == "fsync":
            every = _int(opt)
            if every:
                stream["sync"] = f"fsync:{every}"
        elif key == "sync":
            text = opt.value or "1"
            if text in ("1", "sync", "dsync"):
                stream["sync"] = "dsync"
                if text != "dsync":
                    tj.ignored.append(
                        "sync=1 (O_SYNC) runs as O_DSYNC, which syncs the data of every write"
                    )
            elif text not in ("0", "none"):
                raise _refuse(opt, f"sync={text} is not 0, 1, sync or dsync")
        elif key == "buffer_compress_percentage":
            stream["compress"] = min(_percent(opt), 99.0)
        elif key == "thinktime":
            thinktime = _seconds_us(opt)
        elif key == "thinktime_blocks":
            thinktime_blocks = _int(opt, 1)
        elif key == "loops":
            if _int(opt, 1) != 1:
                raise _refuse(opt, "tilemark runs for a time (runtime), not a number of passes")
        elif key == "startdelay" and _value(opt).strip() in ("0", "0s"):
            continue
        elif key == "kb_base" and _value(opt).strip() != "1024":
            raise _refuse(opt, "decimal units (kb_base=1000) are not supported")
        elif key in REPORTING:
            continue
        elif key in BY_DESIGN:
            tj.ignored.append(f"{key} ({BY_DESIGN[key]})")
        elif key in REFUSED:
            raise _refuse(opt, REFUSED[key])
        else:
            raise _refuse(opt, "tilemark has no equivalent (docs/fio.md lists what translates)")

    stream.setdefault("rw", "read")  # fio's default rw
    stream.setdefault("bs", "4k")
    if stream["rw"] in ("rw", "randrw"):
        stream["read"] = read_pct
    if sync_engine:
        if stream.get("qd", 1) > 1:
            tj.ignored.append(f"iodepth={stream['qd']} (fio's sync engines do one IO at a time)")
        stream["qd"] = 1
    if thinktime is not None and thinktime > 0:
        stream["burst"] = f"{thinktime_blocks}/{thinktime * 1000:g}ms"
    if rate is not None:
        kind, value, opt = rate
        directions = 2 if stream["rw"] in ("rw", "randrw") and 0 < read_pct < 100 else 1
        total = value * directions
        stream["rate" if kind == "rate_iops" else "rate_bytes"] = (
            total if kind == "rate_iops" else f"{total:g}"
        )
        if directions == 2:
            # Measured with fio 3.33: rwmixread=60 rate_iops=1000 gives 1000 reads and 1000
            # writes per second; each direction is capped, and the caps decide the mix.
            stream["read"] = 50.0
            tj.mixed_rate = (value, opt.key)
        stream.setdefault("arrival", "constant")
    elif "arrival" in stream:
        stream.pop("arrival")  # rate_process without a rate does nothing in fio either
    if time_based and not run["direct"][0] and "norandommap" not in opts:
        notes.append(
            f"job {tj.name}: buffered and time_based, fio drops the page cache after every "
            "pass over the file; tilemark drops it once, before the run (compare with direct=1)"
        )
    if not time_based and "duration" in run:
        notes.append(
            f"job {tj.name}: without time_based fio stops once size bytes are done; tilemark "
            "runs for the whole runtime"
        )
    if tj.file is not None and directory is not None and not os.path.isabs(tj.file):
        tj.file = str(Path(directory) / tj.file)
    return tj


def _seconds_us(opt: Option) -> float:
    """fio's thinktime: microseconds when bare."""
    text = _value(opt)
    if re.fullmatch(r"\d+", text):
        return int(text) / 1e6
    return _seconds(opt)


def _run_value(jobs: list[_Job], key: str) -> tuple[Any, bool]:
    """The one value of a run-wide setting across jobs; refused when jobs differ."""
    values = {repr(j.run[key][0]): j for j in jobs if key in j.run}
    if len(values) > 1:
        a, b = list(values.values())[:2]
        where = next(o for o in (a.run[key][1], b.run[key][1]) if o is not None)
        raise UsageError(
            f"{where.where}: jobs {a.name} and {b.name} differ in {where.key}; in tilemark "
            f"{key} applies to the whole run, so translate them as separate files."
        )
    first = next((j for j in jobs if key in j.run), None)
    return (first.run[key][0], True) if first else (None, False)


def translate(path: str | os.PathLike[str]) -> Translation:
    """The tilemark workload equivalent to a fio job file, or a UsageError naming what is not
    (never quoting a file the job file includes)."""
    parsed = parse(path)
    try:
        return _translate(path, parsed)
    except UsageError as e:
        raise redact_included(e, parsed) from None


def _translate(path: str | os.PathLike[str], parsed: list[Job]) -> Translation:
    notes: list[str] = []
    jobs = [_read_job(job, notes) for job in parsed]
    names = [j.name for j in jobs]
    for name in names:
        if names.count(name) > 1:
            raise UsageError(
                f"fio job file {path}: two jobs are named {name}; tilemark stream names "
                "must differ."
            )
    doc: dict[str, Any] = {"name": re.sub(r"[^A-Za-z0-9_.:+-]", "_", Path(path).stem)[:64] or "fio"}
    for key in ("backend", "direct", "keep_cache", "duration", "warmup"):
        value, present = _run_value(jobs, key)
        if present:
            doc[key] = value
    if "duration" not in doc:
        notes.append("no runtime in the job file: tilemark runs for --duration (default 60s)")

    named = sorted({j.file for j in jobs if j.file is not None})
    own = [j for j in jobs if j.file is None]
    if len(named) > 1 or (named and own):
        files = ", ".join(named + ([f"files of job {own[0].name}"] if own else []))
        raise UsageError(
            f"fio job file {path}: its jobs use several files ({files}); the translation "
            "takes one file per job file, so translate the jobs of each file separately (or "
            "write a workload file with [[target]] tables and a target per stream)."
        )
    tables: list[dict[str, Any]] = []
    if named:
        doc["target"] = named[0]
        ends = [j.offset + j.size for j in jobs if j.size is not None]
        if ends and len(ends) == len(jobs):
            doc["size"] = _size_text(max(ends))
        for j in jobs:
            table = {"name": j.name, **j.stream}
            if j.offset:
                table["offset"] = _size_text(j.offset)
            if j.size is not None:
                table["length"] = _size_text(j.size)
            if j.numjobs > 1:
                table["copies"] = j.numjobs
            tables.append(table)
    else:
        # fio gives every clone of such a job a file of its own: here, a region of its own.
        base = 0
        for j in own:
            if j.size is None:
                raise UsageError(
                    f"{j.where}: job {j.name} has neither filename nor size; fio needs a size "
                    "to create its files, and so does the translation."
                )
            for clone in range(j.numjobs):
                table = {"name": j.name if j.numjobs == 1 else f"{j.name}{clone}", **j.stream}
                if base + j.offset:
                    table["offset"] = _size_text(base + j.offset)
                table["length"] = _size_text(j.size)
                tables.append(table)
                base += j.offset + j.size
        doc["size"] = _size_text(base)
        if len(tables) > 1:
            notes.append(
                f"fio would create {len(tables)} files, one per job and clone; tilemark gives "
                "each a region of one target (--target), laid out one after the other"
            )
    by_note: dict[str, list[str]] = {}
    for j in jobs:
        for item in j.ignored:
            by_note.setdefault(item, []).append(j.name)
        if j.mixed_rate is not None:
            value, key = j.mixed_rate
            notes.append(
                f"job {j.name}: {key}={value:g} caps reads and writes at {value:g} each, which "
                "decides the mix (measured with fio: 50% reads whatever rwmixread says); "
                f"translated as {2 * value:g} in total at 50% reads"
            )
    for item, names in by_note.items():
        label = "every job" if len(names) == len(jobs) > 1 else "job " + ", ".join(names)
        notes.append(item if len(jobs) == 1 else f"{label}: {item}")
    doc["stream"] = [_ordered(t) for t in tables]
    return Translation(doc=doc, notes=_unique(notes), source=str(path))


STREAM_ORDER = (
    "name",
    "rw",
    "read",
    "bs",
    "align",
    "qd",
    "pattern",
    "random",
    "rate",
    "rate_bytes",
    "arrival",
    "burst",
    "sync",
    "compress",
    "offset",
    "length",
    "copies",
)


def _ordered(table: dict[str, Any]) -> dict[str, Any]:
    """A stream table in the order people read one: what, how big, how hard, where."""
    return {key: table[key] for key in STREAM_ORDER if key in table}


def _size_text(n: int) -> str:
    """Bytes in the largest binary unit that divides them: 10g, 128k, 512."""
    for suffix, unit in (("t", 1 << 40), ("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if n and n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)


def _unique(items: list[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:g}" if value != int(value) else f"{value:.1f}"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def toml_text(translation: Translation) -> str:
    """The workload as a TOML file, with the notes as comments at the top."""
    lines = [f"# Translated from the fio job file {translation.source} by tilemark import-fio."]
    lines += [f"# note: {note}" for note in translation.notes]
    lines.append("")
    for key, value in translation.doc.items():
        if key != "stream":
            lines.append(f"{key} = {_toml_value(value)}")
    for table in translation.doc["stream"]:
        lines += ["", "[[stream]]"]
        lines += [f"{key} = {_toml_value(value)}" for key, value in table.items()]
    return "\n".join(lines) + "\n"
