"""fio's fixed block sequences, strided zones moving through a file, block sizes per direction
and priorities per block size, read and translated (fio commit f5344384).

- `random_distribution=sequence:2,0,1`, `random_sequence_stride` (HOWTO random_distribution,
  random_sequence_stride; io_u.c __get_next_rand_offset_sequence): the IO numbered n of a
  direction goes to block seq[n % len], plus (n / len) * len with the stride; a block past
  the file's blocks (io_size / bs) ends the job. A stream `pattern = "sequence:..."`.
- `zonemode=strided` with `zonesize`, `zonerange`, `zoneskip` on a sequential job (HOWTO
  zonemode, zonesize, zoneskip; io_u.c setup_strided_zone_mode): zonesize bytes in a zone,
  then on zonerange + zoneskip, back at the start past the file's end. A stream `zones`.
- `bs=R,W`, `bssplit=R,W` (HOWTO blocksize, bssplit): reads' and writes' sizes apart. A
  stream's `bs` and `write_bs`.
- `cmdprio_bssplit` (HOWTO cmdprio_bssplit; engines/cmdprio.c): per direction and block size,
  shares of the IOs at priorities (cmdprio_class/cmdprio, or their own), the rest at the
  job's. A stream's `priority_by_size`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tilemark.errors import UsageError
from tilemark.fio import values
from tilemark.fio.jobfile import Option
from tilemark.fio.strides import fmt_signed as fmt_size

# `job` arguments are fio.job.FioJob; not imported (job.py imports this module).
FioJob = Any

KEYS = ("random_sequence_stride", "cmdprio_bssplit")
# thread_options.h FIO_SEQ_MAX.
FIO_SEQ_MAX = 64
# fio's ioprio classes (os/os-linux.h; 0 is taken as best effort by ioprio_value).
CLASSES = {0: "be", 1: "rt", 2: "be", 3: "idle"}
PRIORITY_GROUP = "IO priorities and polling"


def read(job: FioJob, key: str, opt: Option) -> None:
    """Keep an option of this module for `stream_fields`."""
    if key == "random_sequence_stride":
        job.sequence_stride = values.parse_bool(opt.value, f"{opt.where}: fio option {opt.key}")
    else:
        job.cmdprio_bssplit_opt = opt


def read_sequence(job: FioJob, opt: Option) -> None:
    """random_distribution=sequence:B,B,... as options.c parse_sequence_distribution reads it:
    up to 64 whole numbers from 0."""
    label = f"{opt.where}: fio option {opt.key}"
    body = (opt.value or "").strip().partition(":")[2]
    parts = [p.strip() for p in body.split(",")]
    if not body or any(not re.fullmatch(r"\d+", p) for p in parts):
        raise UsageError(
            f"{label} sequence needs block indices, whole numbers from 0 separated by commas "
            f"(sequence:2,0,1), got {opt.value!r}."
        )
    if len(parts) > FIO_SEQ_MAX:
        raise UsageError(
            f"{label} sequence takes at most {FIO_SEQ_MAX} blocks (fio's FIO_SEQ_MAX), got "
            f"{len(parts)}."
        )
    job.sequence, job.sequence_opt = [int(p) for p in parts], opt


def read_sizes(
    job: FioJob, opt: Option, text: str, parse: Callable[[str], list[tuple[int, float]]]
) -> None:
    """bs or bssplit (`text`), one value for reads and writes or `READ,WRITE[,TRIM]` (HOWTO
    blocksize: "bs=8k,32k means 8k for reads, 32k for writes and trims"); no trims issued."""
    parts = values.per_direction(text, f"{opt.where}: fio option {opt.key}")
    sizes = parse(parts[0])
    write = parse(parts[1]) if len(parts) > 1 else sizes
    job.sizes, job.sizes_opt = sizes, opt
    job.write_sizes = None if write == sizes else write


def stream_fields(job: FioJob, table: dict[str, Any], refuse: Callable[..., Exception]) -> None:
    """Add the stream keys of this module's options to `table`; raise `refuse(...)` for what
    tilemark cannot do as fio does."""
    _sizes(job, table, refuse)
    _sequence(job, table, refuse)
    _priorities_by_size(job, table, refuse)


def fmt_sizes(sizes: list[tuple[int, float]]) -> str:
    """A size mix as a stream's bs: 64k or 64k:40,1m:60."""
    if len(sizes) == 1:
        return fmt_size(sizes[0][0])
    return ",".join(f"{fmt_size(s)}:{w:g}" for s, w in sizes)


def _sizes(job: FioJob, table: dict[str, Any], refuse: Callable[..., Exception]) -> None:
    write = job.write_sizes
    if write is None:
        return
    if job.rw in ("read", "randread"):
        return  # fio's write sizes of a job that does not write are never used
    if job.rw in ("write", "randwrite"):
        table["bs"] = fmt_sizes(write)
        align = min(s for s, _ in write)
    else:
        table["write_bs"] = fmt_sizes(write)
        align = min(min(s for s, _ in write), job.min_bs())
        read_min, write_min = job.min_bs(), min(s for s, _ in write)
        if read_min != write_min:
            what = "offsets" if job.is_random() and not job.blockalign else "sequential offsets"
            job.notes.append(
                f"{job.sizes_opt.key}: fio aligns reads' {what} to the smallest read size "
                f"({fmt_sizes([(read_min, 1)])}) and writes' to the smallest write size "
                f"({fmt_sizes([(write_min, 1)])}); tilemark aligns both to "
                f"{fmt_sizes([(align, 1)])} (init.c fixup_options: ba per direction)"
            )
    if not (job.is_random() and job.blockalign):
        table["align"] = fmt_sizes([(align, 1)])


def _sequence(job: FioJob, table: dict[str, Any], refuse: Callable[..., Exception]) -> None:
    seq = job.sequence
    if seq is None:
        return
    opt = job.sequence_opt
    if not job.is_random():
        return  # fio places a sequential job's IOs sequentially; its distribution is unused
    if job.percentage_random is not None and job.percentage_random < 100:
        raise refuse(
            job,
            opt,
            "fio counts the IOs placed sequentially (percentage_random) in the sequence's "
            "position too (io_issues); tilemark's sequence places every IO",
            "placement",
        )
    if job.run_length > 1:
        raise refuse(
            job, opt, "the rw suffix's runs would place IOs the sequence counts", "placement"
        )
    if job.write_sizes is not None or (job.blockalign and job.blockalign != job.min_bs()):
        raise refuse(
            job,
            opt,
            "fio bounds the sequence's blocks by the smallest size and places them by "
            "blockalign, per direction; tilemark has one block for both",
            "placement",
        )
    bs = job.min_bs()
    stride = job.sequence_stride
    table["pattern"] = "sequence:" + ",".join(map(str, seq)) + (":stride" if stride else "")
    length = job.size if job.size is not None else job.filesize
    if length is not None:
        if job.files is None:
            length -= job.offset
        blocks = length // bs  # io_u.c: max_blocks = f->io_size / min_bs
        if max(seq) >= blocks:
            raise UsageError(
                f"{opt.where}: fio option {opt.key} block {max(seq)} is past the {blocks} "
                f"blocks of {bs} bytes of the job's file (fio: sequence block out of bounds)."
            )
    if not stride:
        job.notes.append(
            f"random_distribution=sequence:{','.join(map(str, seq))}: block indices of "
            f"{bs} bytes in that order again and again, counted for reads and writes each, as "
            "fio's io_issues[ddir] (HOWTO random_sequence_stride=0)"
        )
        return
    if length is None:
        raise refuse(
            job,
            opt,
            "fio ends the job when the strided sequence passes the file's last block, and "
            "the file's size is not given; give size",
            "placement",
        )
    if job.time_based or job.loops > 1 or job.mixed():
        raise refuse(
            job,
            opt,
            "fio ends a strided sequence at the file's last block (io_u.c: block out of "
            "bounds), which time_based, loops and a read/write mix would each have to meet "
            "per direction; only a one-direction job that ends by its bytes translates",
            "placement",
        )
    n = len(seq)
    ios = 0
    while (ios // n) * n + seq[ios % n] < blocks:
        ios += 1
    limit = ios * bs
    if job.io_size is None or limit < job.io_size:
        job.io_size = limit
        job.io_size_opt = opt
    job.notes.append(
        f"random_distribution=sequence:{','.join(map(str, seq))} with random_sequence_stride: "
        f"each cycle moves on by {n} blocks of {bs} bytes; fio ends the job at the first block "
        f"past the file's {blocks}, after {ios} IOs, and so does the translation's byte limit "
        "(io_u.c __get_next_rand_offset_sequence)"
    )


def _entry(
    job: FioJob, opt: Option, text: str, default: tuple[int, int]
) -> tuple[int, int, int, int, int] | None:
    """One cmdprio_bssplit entry, bs/perc[/class/level[/hint]] (options.c
    parse_cmdprio_bssplit_entry): (size, perc, class, level, hint); None for 0 percent."""
    label = f"{opt.where}: fio option {opt.key}"
    match = re.fullmatch(r"([^/]+)/(\d*)(?:/(\d+)/(\d+)(?:/(\d+))?)?", text.strip())
    if not match:
        raise UsageError(
            f"{label} entries are bs/perc, bs/perc/class/level or bs/perc/class/level/hint "
            f"separated by ':', got {text!r}."
        )
    size = values.parse_size(match.group(1), label, kb_base=job.kb_base)
    perc = min(int(match.group(2) or 0), 100)
    klass, level = default
    if match.group(3) is not None:
        klass, level = int(match.group(3)), int(match.group(4))
    hint = int(match.group(5) or 0)
    if klass > 3 or level > 7 or hint > 1023:
        raise UsageError(
            f"{label} class must be 0 to 3, level 0 to 7 and hint 0 to 1023 (ionice(1)), got "
            f"{text!r}."
        )
    return (size, perc, klass, level, hint) if perc else None


def _default_prio(job: FioJob, direction: int) -> tuple[int, int]:
    """cmdprio_class (default rt, cmdprio.c) and cmdprio (default 0) of a direction."""
    out = []
    for key, default, top in (("cmdprio_class", 1, 3), ("cmdprio", 0, 7)):
        opt = job.priority_opts.get(key)
        if opt is None:
            out.append(default)
            continue
        label = f"{opt.where}: fio option {opt.key}"
        parts = values.per_direction((opt.value or "").strip(), label)
        text = parts[min(direction, len(parts) - 1)]
        value = values.parse_int(text, label, kb_base=job.kb_base)
        if not isinstance(value, int) or not 0 <= value <= top:
            raise UsageError(f"{label} must be 0 to {top}, got {opt.value!r}.")
        out.append(value or default if key == "cmdprio_class" else value)
    return out[0], out[1]


def _priorities_by_size(
    job: FioJob, table: dict[str, Any], refuse: Callable[..., Exception]
) -> None:
    opt = job.cmdprio_bssplit_opt
    if opt is None:
        return
    label = f"{opt.where}: fio option {opt.key}"
    if job.engine not in ("io_uring", "libaio"):
        raise UsageError(
            f"{label} belongs to the io_uring and libaio engines (HOWTO cmdprio_bssplit); fio "
            f"does not know it with ioengine={job.engine}."
        )
    if "cmdprio_percentage" in job.priority_opts:
        raise UsageError(
            f"{label} and cmdprio_percentage are mutually exclusive (HOWTO cmdprio_bssplit)."
        )
    parts = values.per_direction((opt.value or "").strip(), label)
    directions = []
    if job.rw not in ("write", "randwrite"):
        directions.append(("read", 0, job.sizes))
    if job.rw not in ("read", "randread"):
        directions.append(("write", 1, job.write_sizes or job.sizes))
    entries = []
    idle_levels = []
    for name, index, sizes in directions:
        text = parts[min(index, len(parts) - 1)]
        totals: dict[int, int] = {}
        for part in text.split(":"):
            if not part:
                break
            entry = _entry(job, opt, part, _default_prio(job, index))
            if entry is None:
                continue
            size, perc, klass, level, hint = entry
            totals[size] = totals.get(size, 0) + perc
            if totals[size] > 100:
                raise UsageError(
                    f"{label} shares of {name}s of {size} bytes add up to more than 100 "
                    "(fio: cmdprio_bssplit total percentage exceeds 100)."
                )
            if size not in {s for s, _ in sizes}:
                continue  # fio looks the entry up by each IO's size: it is never used
            prio = CLASSES[klass]
            if prio == "idle":
                if level:
                    idle_levels.append(f"{name}s of {size} bytes at idle level {level}")
                text_prio = "idle"
            else:
                text_prio = f"{prio}/{level}"
            entries.append(
                f"{name}:{fmt_size(size)}:{perc}:{text_prio}" + (f"+{hint}" if hint else "")
            )
    if not entries:
        return
    table["priority_by_size"] = ",".join(entries)
    job.notes.append(
        f"cmdprio_bssplit: {', '.join(entries)} (direction:size:percent:priority[+hint]), "
        "each IO of that direction and size drawn on its own, the rest at the job's priority "
        "(engines/cmdprio.c fio_cmdprio_set_ioprio); the IOs at another priority are reported "
        "apart all together in the stream's priority summary, where fio's clat_prio keeps one "
        "entry per priority"
    )
    if idle_levels:
        job.notes.append(
            f"cmdprio_bssplit gives {'; '.join(idle_levels)}: fio sends that level with "
            "the idle class; tilemark's idle priority has no level, so those IOs go at idle "
            "level 0"
        )
    if any("+" in e for e in entries):
        job.notes.append(
            "cmdprio_bssplit priority hints (command duration limits) are sent with each IO "
            "as fio sends them (IOPRIO_PRIO_HINT); the device applies them only where command "
            "duration limits are enabled (HOWTO cmdprio_bssplit)"
        )


def strided_zones(job: FioJob, table: dict[str, Any]) -> bool:
    """zonemode=strided on a job larger than one zone: a sequential job's `zones` (True);
    False where the caller refuses it (random IO moving zone after zone)."""
    if job.is_random() or job.zonesize is None:
        return False
    opt = job.zonemode_opt
    zone_range = job.zonerange or job.zonesize  # init.c: zonerange defaults to zonesize
    if job.seq_add:
        raise StridedRefused(
            "fio adds the rw suffix's holes within each zone as well; tilemark's zones move "
            "a plain sequential stream"
        )
    table["zones"] = f"{fmt_size(job.zonesize)}:{fmt_size(zone_range)}:{fmt_size(job.zoneskip)}"
    where = f"{opt.where}: " if opt is not None else ""
    job.notes.append(
        f"{where}zonemode=strided: {fmt_size(job.zonesize)} of sequential IO in a zone of "
        f"{fmt_size(zone_range)} from the region's start, then the next zone "
        f"{fmt_size(zone_range + job.zoneskip)} further, back at the region's start once a "
        "zone would start past its end (io_u.c setup_strided_zone_mode: the zones move "
        "through the whole file, to its end, whatever size says; size counts the bytes); a "
        "zone that runs "
        "past the region's end continues at the region's start, where fio's sequential "
        "offset does not wrap (io_u.c get_next_seq_offset)"
        + (
            "; reads and writes each keep their position in the zone and count their bytes "
            "together, as fio (last_pos[ddir], zone_bytes)"
            if job.mixed()
            else ""
        )
    )
    return True


class StridedRefused(Exception):
    """A strided zone job tilemark cannot run as fio does (the caller words the refusal)."""


# -- export --fio: the other way round ---------------------------------------------------------

CLASS_NUMBERS = {"none": 0, "rt": 1, "be": 2, "idle": 3}


def export_lines(stream: dict[str, Any], backend: str, notes: list[str]) -> list[str]:
    """fio's options for a plan stream's block sequence, strided zones and priorities by
    size (export.py writes the sizes)."""
    lines = []
    pattern = stream["pattern"]
    if pattern["kind"] == "sequence":
        lines.append("random_distribution=sequence:" + ",".join(map(str, pattern["blocks"])))
        lines.append(f"random_sequence_stride={int(pattern.get('stride', False))}")
        notes.append(
            f"stream {stream['name']}: random_distribution=sequence needs a fio that has it "
            "(Debian's fio 3.33 does not; fio's source at f5344384 does)"
        )
    zones = stream.get("zones")
    if zones:
        lines += [
            "zonemode=strided",
            f"zonesize={zones['size']}",
            f"zonerange={zones['range']}",
            f"zoneskip={zones.get('skip', 0)}",
        ]
        notes.append(
            f"stream {stream['name']}: fio's strided zones wrap at the file's end, tilemark's "
            "at the region's; they agree where the region ends at the file's end"
        )
    by_size = stream.get("ioprio_by_size")
    if by_size and backend != "uring":
        notes.append(
            f"stream {stream['name']}: fio's {backend} engine has no cmdprio_bssplit; its "
            "priorities by size are dropped"
        )
    elif by_size:
        per_op: dict[str, list[str]] = {"read": [], "write": []}
        for entry in by_size:
            for share in entry["shares"]:
                fields = [entry["size"], share["pct"], CLASS_NUMBERS[share["class"]],
                          share.get("level", 0)]  # fmt: skip
                if share.get("hint"):
                    fields.append(share["hint"])
                per_op[entry["op"]].append("/".join(f"{f:g}" for f in fields))
        lines.append(f"cmdprio_bssplit={':'.join(per_op['read'])},{':'.join(per_op['write'])}")
    return lines
