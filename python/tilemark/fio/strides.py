"""fio's `rw=...:N` suffix and IO priorities, read and translated (fio commit f5344384).

The suffix (HOWTO `readwrite`, options.c str_rw_cb): for a sequential mode it is a size
**added** after every IO (ddir_seq_add; holes, or going backwards when negative), for a random
mode the number of IOs before a new random offset is drawn (ddir_seq_nr, the others sequential
after it; HOWTO `rw_sequencer`). They become the stream's `skip` and `run_length`, which the
engine places exactly as fio's io_u.c get_next_seq_offset/get_next_offset do, wrap-arounds
included (docs/engine-boundary.md).

Priorities (HOWTO `prio`, `prioclass`, `cmdprio_percentage`, `cmdprio_class`, `cmdprio`): the
job's class and level become the stream's `priority` (fio's ioprio_value: no class is best
effort), a share of IOs at another one its `priority_share` (cmdprio.c: each IO drawn on its
own; the class defaults to rt, "the highest priority class", the level to 0).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tilemark.errors import UsageError
from tilemark.fio import values
from tilemark.fio.jobfile import Option
from tilemark.fio.shapes import Refused

# `job` arguments are fio.job.FioJob; not imported, because job.py imports this module (and
# layout.py imports job.py), which tests/test_architecture.py keeps free of cycles.
FioJob = Any

PRIORITY_GROUP = "IO priorities and polling"
# fio's priority options this module reads (the hints are refused in options.py).
PRIORITY_KEYS = ("prio", "prioclass", "cmdprio", "cmdprio_class", "cmdprio_percentage")
# ioprio classes by fio's number (os/os-linux.h): 0 (none) is taken as best effort.
CLASSES = {0: "be", 1: "rt", 2: "be", 3: "idle"}
# fio accepts a random suffix up to UINT_MAX (options.c str_rw_cb).
MAX_RUN = (1 << 32) - 1


def read_rw_suffix(job: FioJob, random: bool, suffix: str, opt: Option) -> None:
    """Store the suffix of `rw=MODE:SUFFIX` as fio's str_rw_cb reads it (a decimal with
    fio's units, signed for sequential modes)."""
    label = f"{opt.where}: fio option {opt.key}"
    text = suffix.strip()
    negative = text.startswith("-")
    try:
        magnitude = values.parse_int(text.lstrip("-+"), label, kb_base=job.kb_base)
    except UsageError:
        magnitude = None
    if not isinstance(magnitude, int):
        raise UsageError(
            f"{label} suffix :{suffix} must be a number (fio's rw postfix: IOs per random "
            "offset, or bytes added after each sequential IO, such as -8k)."
        )
    value = -magnitude if negative else magnitude
    if random:
        if not 0 < value <= MAX_RUN:
            raise UsageError(
                f"{label} suffix :{suffix} of a random mode must be the IOs per random offset, "
                f"1 to {MAX_RUN} (fio: randrw postfix parsing out of range)."
            )
        job.run_length, job.seq_add = value, 0
    else:
        job.seq_add, job.run_length = value, 1
    job.suffix_opt = opt


def read_sequencer(opt: Option) -> None:
    """rw_sequencer: sequential is what the suffix does; identical repeats one offset."""
    kind = (opt.value or "").strip().lower()
    if kind == "identical":
        raise Refused(
            "rw_sequencer=identical sends the same offset N times; tilemark's runs continue "
            "sequentially (run_length)",
            "rw suffix",
        )
    if kind != "sequential":
        raise UsageError(
            f"{opt.where}: fio option {opt.key} must be sequential or identical, got {opt.value!r}."
        )


def read_priority(job: FioJob, key: str, opt: Option) -> None:
    """Keep a priority option for `stream_fields` (its meaning depends on the others)."""
    job.priority_opts[key] = opt


def stream_fields(job: FioJob, table: dict[str, Any], refuse: Callable[..., Exception]) -> None:
    """Add the suffix's and the priorities' stream keys to `table`; raise `refuse(...)` for
    what tilemark cannot do as fio does."""
    _suffix(job, table, refuse)
    _priorities(job, table, refuse)


def _suffix(job: FioJob, table: dict[str, Any], refuse: Callable[..., Exception]) -> None:
    opt = job.suffix_opt
    if opt is None:
        return
    if job.run_length > 1:
        table["run_length"] = job.run_length
        job.notes.append(
            f"rw={job.rw}:{job.run_length}: a random offset every {job.run_length} IOs, the "
            "others each after the previous one (HOWTO rw_sequencer=sequential); a run that "
            "reaches the region's end continues from its start, as fio's time_based job does "
            "(fio's other jobs draw a random offset there)"
        )
        return
    add = job.seq_add
    if add == 0:
        return
    align = job.min_bs()
    if add % align:
        raise refuse(
            job,
            opt,
            f"fio adds {add} bytes after each IO, which is not a multiple of the block size "
            f"({align}); tilemark places sequential IOs on multiples of it",
            "rw suffix",
        )
    if job.loops > 1:
        raise refuse(
            job,
            opt,
            f"fio starts each of its {job.loops} loops at the region's start again (backend.c "
            "clear_io_state), and a loop with holes or going backwards ends wherever its bytes "
            "run out; tilemark's passes continue from where the last one ended",
            "rw suffix",
        )
    table["skip"] = fmt_signed(add)
    how = "going backwards" if add < 0 and -add > align else "leaving holes"
    if add < 0 and -add <= align:
        how = "overlapping the previous IO" if -add < align else "repeating the same offset"
    if add > 0 and not job.time_based and job.files and job.size is not None:
        # io_u.c: holes wrap to the start only at the file's end (pos >= real_file_size); a
        # region that ends earlier ends the job (get_next_offset: offset >= io_size).
        per_pass = (job.size - align) // (align + add) + 1 if job.size >= align else 0
        job.notes.append(
            f"rw={job.rw}:{fmt_signed(add)} on {job.files[0]}: fio wraps its holes to the "
            "region's start only where the region ends at the file's end; if the file is "
            f"larger than size={fmt_signed(job.size)}, fio ends the job after one pass of "
            f"{per_pass} IOs (io_u.c get_next_offset), where tilemark wraps and issues all of "
            "its bytes"
        )
    where = f"{fmt_signed(-add)} before" if add < 0 else f"{fmt_signed(add)} after"
    job.notes.append(
        f"rw={job.rw}:{fmt_signed(add)}: each IO starts {where} the previous one's end "
        f"({how}), the first at the region's start; past the region's end from its start, "
        "before its start from its end plus the skip, as fio (io_u.c get_next_seq_offset)"
    )


def fmt_signed(n: int) -> str:
    """Bytes with their sign in the largest binary unit that divides them: -8k, 112k (as
    layout.fmt_size writes sizes)."""
    size = abs(n)
    text = str(size)
    for suffix, unit in (("t", 1 << 40), ("g", 1 << 30), ("m", 1 << 20), ("k", 1 << 10)):
        if size and size % unit == 0:
            text = f"{size // unit}{suffix}"
            break
    return ("-" if n < 0 else "") + text


def _in_range(job: FioJob, opt: Option | None, default: int, top: int, allowed: str) -> int:
    """An option's integer value from 0 to `top` (`default` when not given)."""
    if opt is None:
        return default
    value = _one_value(job, opt)
    if not 0 <= value <= top:
        raise UsageError(f"{opt.where}: fio option {opt.key} must be {allowed}, got {opt.value!r}.")
    return value


def _level(job: FioJob, opt: Option | None, default: int = 0) -> int:
    return _in_range(job, opt, default, 7, "0 (the highest) to 7")


def _klass(job: FioJob, opt: Option | None, default: int) -> int:
    return _in_range(job, opt, default, 3, "0 to 3 (none, rt, be, idle; see ionice(1))")


def _one_value(job: FioJob, opt: Option) -> int:
    """An integer option that may be given per direction (READ,WRITE); both must agree."""
    label = f"{opt.where}: fio option {opt.key}"
    parts = values.per_direction((opt.value or "").strip(), label)
    numbers = {values.parse_int(p, label, kb_base=job.kb_base) for p in parts[:2] if p}
    if len(numbers) != 1:
        raise _PerDirection(opt)
    (number,) = numbers
    assert isinstance(number, int)
    return number


class _PerDirection(Exception):
    def __init__(self, opt: Option) -> None:
        super().__init__(opt.key)
        self.opt = opt


def _priority_text(klass: int, level: int, job: FioJob, opt: Option | None) -> str:
    name = CLASSES[klass]
    if name == "idle":
        if level:
            job.notes.append(
                f"{opt.key if opt else 'prio'}={level} with the idle class: the kernel "
                "gives idle IO no level, so the translation drops it"
            )
        return "idle"
    return f"{name}/{level}"


def _priorities(job: FioJob, table: dict[str, Any], refuse: Callable[..., Exception]) -> None:
    opts = job.priority_opts
    if not opts:
        return
    try:
        _translate_priorities(job, table, opts, refuse)
    except _PerDirection as e:
        raise refuse(
            job,
            e.opt,
            f"{e.opt.key}={e.opt.value} differs for reads and writes; tilemark gives a stream "
            "one priority and one share for both",
            PRIORITY_GROUP,
        ) from None


def _translate_priorities(
    job: FioJob, table: dict[str, Any], opts: dict[str, Option], refuse: Callable[..., Exception]
) -> None:
    own_class, own_level = opts.get("prioclass"), opts.get("prio")
    if own_class is not None or own_level is not None:
        # backend.c: ioprio_set(ioprio_value(class, prio)); ioprio_value takes no class as be.
        klass = _klass(job, own_class, 0)
        table["priority"] = _priority_text(klass, _level(job, own_level), job, own_level)
    cmd = {k: opts[k] for k in ("cmdprio_percentage", "cmdprio_class", "cmdprio") if k in opts}
    if not cmd:
        return
    first = next(iter(cmd.values()))
    if job.engine not in ("io_uring", "libaio"):
        raise UsageError(
            f"{first.where}: fio option {first.key} belongs to the io_uring and libaio engines "
            f"(HOWTO cmdprio_percentage); fio does not know it with ioengine={job.engine}."
        )
    pct_opt = cmd.get("cmdprio_percentage")
    pct = _one_value(job, pct_opt) if pct_opt is not None else 0
    if not 0 <= pct <= 100:
        raise UsageError(
            f"{pct_opt.where if pct_opt else job.where}: fio option cmdprio_percentage must "
            f"be 0 to 100, got {pct_opt.value if pct_opt else pct!r}."
        )
    if pct == 0:
        # cmdprio_class/cmdprio without a percentage change nothing (cmdprio.c: p == 0).
        return
    # HOWTO cmdprio_class: "defaults to the highest priority class"; cmdprio to 0.
    klass = _klass(job, cmd.get("cmdprio_class"), 1)
    level = _level(job, cmd.get("cmdprio"))
    table["priority_share"] = f"{pct}:{_priority_text(klass, level, job, cmd.get('cmdprio'))}"
    job.notes.append(
        f"cmdprio_percentage={pct}: that share of IOs, each drawn on its own, at "
        f"{table['priority_share'].partition(':')[2]}; their rates and latency are reported "
        "apart in the stream's priority summary, as fio's clat_prio, and also in the stream's "
        "own figures"
    )


# -- export --fio: the other way round ---------------------------------------------------------

CLASS_NUMBERS = {"none": 0, "rt": 1, "be": 2, "idle": 3}


def export_suffix(stream: dict[str, Any], notes: list[str]) -> str:
    """The `:N` suffix of a plan stream's fio rw (skip or run_length); notes what fio cannot
    say (a skip range, a skip in a random mode)."""
    name, random = stream["name"], stream["random_pct"] > 0
    skip, runs = stream.get("skip"), stream.get("run_length") or 1
    if random and runs > 1:
        if skip:
            notes.append(f"stream {name}: fio's runs of a random job have no skip; dropped")
        return f":{runs}"
    if not skip:
        return ""
    lo, hi = skip
    if random:
        notes.append(
            f"stream {name}: fio adds a size after sequential jobs' IOs only; its skip "
            f"{lo}..{hi} is dropped"
        )
        return ""
    if lo != hi:
        notes.append(
            f"stream {name}: fio adds one size after each IO; tilemark drew {lo} to "
            f"{hi}, exported as {hi}"
        )
    return f":{hi}"


def export_priority(stream: dict[str, Any], backend: str, notes: list[str]) -> list[str]:
    """fio's prioclass/prio and cmdprio options for a plan stream's ioprio and share."""
    lines = []
    own, share = stream.get("ioprio"), stream.get("ioprio_share")
    if own:
        lines += [f"prioclass={CLASS_NUMBERS[own['class']]}", f"prio={own.get('level', 0)}"]
    if share:
        if backend != "uring":
            notes.append(
                f"stream {stream['name']}: fio's {backend} engine has no "
                "cmdprio_percentage; its share at another priority is dropped"
            )
            return lines
        pct = share["pct"]
        if pct != int(pct):
            notes.append(
                f"stream {stream['name']}: fio takes a whole percent; {pct:g}% is "
                f"exported as {round(pct)}%"
            )
        lines += [
            f"cmdprio_percentage={round(pct)}",
            f"cmdprio_class={CLASS_NUMBERS[share['class']]}",
            f"cmdprio={share.get('level', 0)}",
        ]
    return lines
