"""fio's write data content options, read and translated (fio commit f5344384, HOWTO "Buffers
and memory" and io_u.c fill_io_buffer / get_buf_state, dedupe.c).

fio's `buffer_compress_percentage` fills each `buffer_compress_chunk` (default 512 bytes) of a
write buffer with random bytes, then that share of zeros; tilemark's `compress` lays every
512-byte sector out the same way (random run, zero tail), so the default chunk keeps fio's
meaning and other chunks are noted. `dedupe_percentage` makes that share of write buffers
copies: `dedupe_mode=repeat` (the default) of the previous unique buffer, `working_set` of a
buffer drawn from the job's first unique buffers, `dedupe_working_set_percentage` of its size
(default 5; fio refuses it with the dedupe share above 100, init.c). `dedupe_global` shares that
working set among the jobs that set it (dedupe.c: each job's working set is equal slices of
every job's first unique buffers). They become the stream's `dedupe` (100 / (100 - P)),
`dedupe_set` and `dedupe_global` (docs/verification.md, "Data reduction").
"""

from __future__ import annotations

from typing import Any

from tilemark.errors import UsageError
from tilemark.fio import values
from tilemark.fio.jobfile import Option

# `job` is fio.job.FioJob (not imported: job.py imports this module).
FioJob = Any

KEYS = ("dedupe_mode", "dedupe_working_set_percentage", "dedupe_global", "buffer_compress_chunk")
# options.c defaults.
DEFAULT_WORKING_SET = 5
DEFAULT_CHUNK = 512
DATA = "write data content"


def read(job: FioJob, key: str, opt: Option) -> None:
    """Keep one of KEYS for stream_fields (values are checked there, with the whole job)."""
    job.data_opts[key] = opt


def _label(opt: Option) -> str:
    return f"{opt.where}: fio option {opt.key}"


def _mode(job: FioJob) -> str:
    opt = job.data_opts.get("dedupe_mode")
    if opt is None:
        return "repeat"
    mode = (opt.value or "").strip()
    if mode not in ("repeat", "working_set"):
        raise UsageError(f"{_label(opt)} must be repeat or working_set, got {opt.value!r}.")
    return mode


def _working_set(job: FioJob) -> int:
    opt = job.data_opts.get("dedupe_working_set_percentage")
    return DEFAULT_WORKING_SET if opt is None else values.parse_percent(opt.value, _label(opt))


def _global(job: FioJob) -> bool:
    opt = job.data_opts.get("dedupe_global")
    return opt is not None and values.parse_bool(opt.value, _label(opt))


def stream_fields(job: FioJob, table: dict[str, Any], refuse: Any) -> None:
    """dedupe_set, dedupe_global and the notes on how tilemark's data matches fio's."""
    mode, working_set, shared = _mode(job), _working_set(job), _global(job)
    chunk_opt = job.data_opts.get("buffer_compress_chunk")
    if chunk_opt is not None:
        chunk = values.parse_int(chunk_opt.value, _label(chunk_opt), kb_base=job.kb_base)
        if job.compress and chunk != DEFAULT_CHUNK:
            whole = chunk == 0 or chunk >= max(size for size, _ in job.sizes)
            job.notes.append(
                f"buffer_compress_chunk={chunk_opt.value}: fio puts the random bytes and then "
                f"the zeros of each {'block' if whole else f'{chunk}-byte chunk'}; tilemark "
                "puts them in every 512-byte sector (the same share of zeros, which a "
                "compressor working on units smaller than fio's chunk finds in tilemark's "
                "data and not in fio's)"
            )
    if not job.dedupe:
        if job.data_opts.keys() & {"dedupe_mode", "dedupe_working_set_percentage", "dedupe_global"}:
            job.by_design.append(
                "dedupe_mode, dedupe_working_set_percentage and dedupe_global are not "
                "translated, because fio uses them only with dedupe_percentage"
            )
        return
    if mode == "repeat":
        job.notes.append(
            f"dedupe_percentage={job.dedupe} (dedupe_mode=repeat): fio writes that share of "
            "its buffers as copies of the previous unique buffer; tilemark writes the same "
            f"share of 4 KiB blocks as copies (dedupe {table['dedupe']:g}:1), drawn from a "
            "pool of about 1/64 of the copies, not next to their original"
            + ("; dedupe_global is used by fio only with dedupe_mode=working_set" if shared else "")
        )
        return
    if job.size_opt is None:
        raise UsageError(
            f"{_label(job.data_opts['dedupe_mode'])}=working_set needs size set in the job "
            "(fio: pregenerated dedupe working set requires size to be set)."
        )
    if working_set + job.dedupe > 100:
        opt = job.data_opts.get("dedupe_working_set_percentage") or job.dedupe_opt
        raise UsageError(
            f"{_label(opt)}: dedupe_working_set_percentage={working_set} and "
            f"dedupe_percentage={job.dedupe} add up to more than 100 (fio: impossible to reach "
            "the dedupe percentage, the working set's pages are unique)."
        )
    if working_set == 0:
        opt = job.data_opts.get("dedupe_working_set_percentage")
        raise UsageError(
            f"{_label(opt)}=0 leaves dedupe_mode=working_set no buffers to copy; use 1 to "
            f"{100 - job.dedupe}."
        )
    table["dedupe_set"] = float(working_set)
    if shared:
        table["dedupe_global"] = True
    job.notes.append(
        f"dedupe_percentage={job.dedupe} with dedupe_mode=working_set"
        f" ({working_set}% of size{', shared by the dedupe_global jobs' if shared else ''}):"
        f" tilemark writes the same share of 4 KiB blocks as copies (dedupe "
        f"{table['dedupe']:g}:1, dedupe_set = {working_set}"
        + (", dedupe_global = true" if shared else "")
        + "); fio draws each copy at random from its first unique buffers, tilemark cycles "
        "through a pool of that many blocks of its own, so the distinct blocks written are "
        "the same number"
        + (
            " over all the dedupe_global jobs together, while one job's data alone holds the "
            "whole pool where fio's holds a random part of it (so it dedupes less alone)"
            if shared
            else ""
        )
    )


# workload/dedupe.py's id of the pool dedupe_global streams share.
SHARED_POOL = 1 << 32


def export_lines(stream: dict[str, Any], notes: list[str]) -> list[str]:
    """fio's dedupe options for a plan stream's `dedupe_ratio` and `dedupe_pool` (export
    --fio); a ratio or working set fio's whole percentages cannot say exactly is noted."""
    ratio = float(stream.get("dedupe_ratio") or 1.0)
    if ratio <= 1.0:
        return []
    share = 100 * (1 - 1 / ratio)
    lines = [f"dedupe_percentage={round(share)}"]
    if abs(share - round(share)) > 1e-6:
        notes.append(
            f"stream {stream['name']}: dedupe {ratio:g}:1 is {share:.2f}% copies; fio takes "
            f"whole percentages ({round(share)})"
        )
    pool = stream.get("dedupe_pool")
    if pool is None:
        notes.append(
            f"stream {stream['name']}: fio repeats the previous unique buffer "
            "(dedupe_mode=repeat), tilemark drew copies from a pool of about 1/64 of them"
        )
        return lines
    region = sum(r["length"] for r in stream["regions"]) // 4096
    working_set = 100 * pool["blocks"] / max(region, 1)
    lines += ["dedupe_mode=working_set", f"dedupe_working_set_percentage={round(working_set)}"]
    if pool.get("id") == SHARED_POOL:
        lines.append("dedupe_global=1")
    return lines
