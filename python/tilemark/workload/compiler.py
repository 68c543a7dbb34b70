"""A validated Workload on its inspected targets -> the engine plan (docs/engine-boundary.md).

Here are the checks that need the target: O_DIRECT alignment, region bounds, verification of
what the data area holds. Everything fails as a UsageError before any IO.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from tilemark.engine import PLAN_VERSION
from tilemark.engine import Plan as EnginePlan
from tilemark.errors import UsageError
from tilemark.targets import data as targetdata
from tilemark.targets.header import TargetInfo, default_align
from tilemark.units import format_size
from tilemark.workload import placement
from tilemark.workload.dedupe import set_pools
from tilemark.workload.gates import gate_indices
from tilemark.workload.limits import check_memory
from tilemark.workload.pacing import plan_fields
from tilemark.workload.plan import StreamSpec, Workload


def stream_seed(run_seed: int, index: int) -> int:
    """A stream's seed derived from the run seed, stable across runs and Python versions."""
    digest = hashlib.blake2b(f"tilemark:{run_seed}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1  # 63 bits: safe as a JSON integer everywhere


def _pattern_plan(stream: StreamSpec) -> dict[str, Any]:
    if stream.random_pct == 0:
        return {"kind": "sequential"}
    kind, _, arg = stream.pattern.partition(":")
    if kind == "zipf":
        return {"kind": "zipf", "theta": float(arg)}
    if kind == "hotspot":
        io_pct, region_pct = arg.split("/")
        return {"kind": "hotspot", "io_pct": float(io_pct), "region_pct": float(region_pct)}
    if kind == "zoned":
        zones = [zone.split("/") for zone in arg.split(":")]
        return {"kind": "zoned", "zones": [[float(io), float(region)] for io, region in zones]}
    if kind == "sequence":
        return placement.pattern_plan(stream.pattern) or {"kind": "random"}
    return {"kind": "random"}


def _sync_plan(sync: str) -> dict[str, Any]:
    if sync.endswith(":group"):
        return {"kind": "fsync", "every": 1, "data": sync.startswith("fdatasync"), "group": True}
    if sync.startswith("fsync:"):
        return {"kind": "fsync", "every": int(sync.split(":")[1])}
    if sync.startswith("fdatasync:"):
        return {"kind": "fsync", "every": int(sync.split(":")[1]), "data": True}
    return {"kind": sync}


def _arrival_plan(stream: StreamSpec) -> dict[str, Any]:
    if stream.arrival == "closed":
        return {"kind": "closed"}
    arrival: dict[str, Any] = {"kind": "open", "dist": stream.arrival}
    if stream.rate_iops is not None:
        arrival["rate_iops"] = stream.rate_iops
    else:
        arrival["rate_bps"] = stream.rate_bytes
    if stream.batch > 1:
        arrival["batch"] = stream.batch
        if stream.batch_gap_s > 0:
            arrival["batch_gap_ns"] = stream.batch_gap_s * 1e9
    return arrival


def _check_stream_on_target(stream: StreamSpec, target: TargetInfo, direct_align: int) -> None:
    """Region and alignment checks that need the inspected target."""
    label = stream.label
    data_length = target.data_length
    if stream.offset >= data_length:
        raise UsageError(
            f"{label('offset')} {format_size(stream.offset)} is outside the target's data area "
            f"of {format_size(data_length)} ({target.path})."
        )
    length = stream.length if stream.length is not None else data_length - stream.offset
    if stream.offset + length > data_length:
        raise UsageError(
            f"{label('length')}: region offset {format_size(stream.offset)} + length "
            f"{format_size(length)} ends past the target's data area of "
            f"{format_size(data_length)} ({target.path}); shrink it or raise --size."
        )
    largest = max(size for size, _ in stream.sizes)
    if largest > length:
        raise UsageError(
            f"{label('bs')} {format_size(largest)} is larger than the stream's region of "
            f"{format_size(length)}."
        )
    if direct_align:
        for size, _ in stream.sizes:
            if size % direct_align:
                raise UsageError(
                    f"{label('bs')} {size} bytes is not a multiple of {direct_align}, the O_DIRECT "
                    f"alignment of {target.path}; use a multiple of it or --buffered."
                )
        if stream.align is not None and stream.align % direct_align:
            raise UsageError(
                f"{label('align')} {stream.align} is not a multiple of {direct_align}, the "
                f"O_DIRECT alignment of {target.path}; use a multiple of it or --buffered."
            )
        if stream.offset % direct_align:
            raise UsageError(
                f"{label('offset')} {stream.offset} is not a multiple of {direct_align}, the "
                f"O_DIRECT alignment of {target.path}; use a multiple of it or --buffered."
            )


def _stream_verify_block(
    workload: Workload, stream: StreamSpec, verify: list[dict[str, Any] | None]
) -> int | None:
    """A stream's verification block (one per stream, _check_verify), None without --verify."""
    spec = verify[workload.stream_targets(stream)[0]]
    return None if spec is None else spec["block_size"]


def _check_verify(workload: Workload, infos: list[TargetInfo]) -> list[dict[str, Any] | None]:
    """--verify: every target's verification settings for the plan (its epoch and journal are
    set when the run starts), after checking the workload fits verification blocks."""

    if not workload.verify:
        return [None] * len(infos)
    if not workload.writes():
        for target in infos:
            reason = targetdata.nothing_to_check(target)
            if reason is not None:
                raise UsageError(
                    f"--verify has nothing to check against: {reason}, or add writes to the "
                    "workload."
                )
    blocks = [targetdata.block_size(target) for target in infos]
    for stream in workload.streams:
        label = stream.label
        sizes = sorted({blocks[t] for t in workload.stream_targets(stream)})
        if len(sizes) > 1:
            raise UsageError(
                f"stream '{stream.name}' spans targets whose verification blocks differ "
                f"({' and '.join(map(str, sizes))} bytes, their O_DIRECT alignments); --verify "
                "needs one block size per stream: give it targets of one kind."
            )
        block = sizes[0]
        overhead = 64 + 8 * (block // 512 - 1)
        max_compress = int(100 * (1 - overhead / block))
        for size, _ in stream.sizes:
            if size % block:
                raise UsageError(
                    f"{label('bs')} {size} bytes is not a whole number of {block}-byte "
                    "verification blocks; --verify needs IO sizes in whole blocks."
                )
        if stream.align is not None and stream.align % block:
            raise UsageError(
                f"{label('align')} {stream.align} is not a multiple of the {block}-byte "
                "verification block; --verify needs whole blocks."
            )
        if stream.offset % block:
            raise UsageError(
                f"{label('offset')} {stream.offset} is not a multiple of the {block}-byte "
                "verification block; --verify needs whole blocks."
            )
        if stream.writes() and stream.compress_pct > max_compress:
            raise UsageError(
                f"{label('compress')} {stream.compress_pct:g} is more than --verify allows: at "
                f"most {max_compress} (each {block}-byte block carries {overhead} bytes of "
                "verification header and stamps, which do not compress)."
            )
    return [
        {
            "target_id": 0,  # set with the epoch when the run starts (targetdata.begin_run)
            "epoch": 0,
            "block_size": block,
            "prior": targetdata.prior(target.data),
            "journal": None,
        }
        for target, block in zip(infos, blocks, strict=True)
    ]


def _advice(workload: Workload) -> list[str | None]:
    """fadvise = "pattern": per target, the advice fio's fadvise_hint=1 gives a job (ioengines.c
    td_io_open_file): "random" when every stream on it is random, "sequential" when every one
    is sequential, none when they differ (one open file carries one advice) or IO is direct."""
    if workload.direct or workload.fadvise != "pattern":
        return [None] * len(workload.targets)
    kinds: list[set[str]] = [set() for _ in workload.targets]
    for stream in workload.streams:
        kind = "random" if stream.random_pct > 0 else "sequential"
        for t in workload.stream_targets(stream):
            kinds[t].add(kind)
    return [next(iter(k)) if len(k) == 1 else None for k in kinds]


def _direct_align(workload: Workload, target: TargetInfo) -> int:
    """The O_DIRECT alignment a target imposes (0 for buffered IO), checked to be usable."""
    if not workload.direct:
        return 0
    if target.dio_alignment == 0:
        raise UsageError(
            f"target {target.path} does not support O_DIRECT (tmpfs and some network "
            f"filesystems do not); run with --buffered or set direct = false."
        )
    if target.data_offset % target.dio_alignment:
        raise UsageError(
            f"target {target.path} needs O_DIRECT alignment {target.dio_alignment}, which its "
            f"data offset {target.data_offset} does not meet; run with --buffered."
        )
    return target.dio_alignment


def _io_limit(stream: StreamSpec, regions: list[dict[str, Any]]) -> int | None:
    """Bytes after which the stream stops: io_size, or its region's length, times passes (over
    several targets, the regions together)."""
    if stream.io_size is None and stream.passes is None:
        return None
    base = stream.io_size if stream.io_size is not None else sum(r["length"] for r in regions)
    return base * (stream.passes or 1)


def _order_and_priority(spec: StreamSpec) -> dict[str, Any]:
    """Plan fields of runs per random offset and IO priorities, only when set (plans without
    them read as before)."""
    fields: dict[str, Any] = {}
    if spec.run_length is not None and spec.run_length > 1:
        fields["run_length"] = spec.run_length
    if spec.priority is not None:
        fields["ioprio"] = {"class": spec.priority[0], "level": spec.priority[1]}
    if spec.priority_share is not None:
        pct, klass, level = spec.priority_share
        fields["ioprio_share"] = {"pct": pct, "class": klass, "level": level}
    return fields


def _phase_ms(seconds: float | None) -> int | None:
    return None if seconds is None else round(seconds * 1000)


def compile_plan(workload: Workload, infos: list[TargetInfo] | TargetInfo) -> EnginePlan:
    """The engine plan (docs/engine-boundary.md) for a workload on its inspected targets
    (`infos[i]` is `workload.targets[i]`; one TargetInfo for a one-target workload)."""
    if not isinstance(infos, list):
        infos = [infos]
    if len(infos) != len(workload.targets):
        raise ValueError(f"{len(workload.targets)} targets, {len(infos)} inspected")
    aligns = [_direct_align(workload, info) for info in infos]
    if workload.sqpoll and workload.backend != "uring":
        raise UsageError(
            f"sqpoll needs the uring backend (--backend uring), not {workload.backend}."
        )
    # One thread per CPU it may use: the listed ones when pinned, else the machine's.
    cpus = len(workload.cpus) or os.cpu_count() or 1
    threads = workload.threads or max(1, min(cpus, len(workload.streams)))
    verify = _check_verify(workload, infos)
    streams = []
    for index, stream in enumerate(workload.streams):
        on = workload.stream_targets(stream)
        regions = []
        for t in on:
            _check_stream_on_target(stream, infos[t], aligns[t])
            length = (
                stream.length if stream.length is not None else infos[t].data_length - stream.offset
            )
            regions.append({"target": t, "offset": stream.offset, "length": length})
        burst = None
        if stream.burst is not None:
            burst = {"ios": stream.burst[0], "delay_ms": stream.burst[1]}
        streams.append(
            {
                "name": stream.name,
                "regions": regions,
                "spread": stream.spread,
                "start_ms": _phase_ms(stream.start_s),
                "stop_ms": _phase_ms(stream.stop_s),
                "read_pct": stream.read_pct,
                "sizes": [[size, weight] for size, weight in stream.sizes],
                "pattern": _pattern_plan(stream),
                "random_pct": stream.random_pct,
                "align": stream.align or max(default_align(infos[t].dio_alignment) for t in on),
                "qd": stream.qd,
                "arrival": _arrival_plan(stream),
                "burst": burst,
                "sync": _sync_plan(stream.sync),
                **({"writeback": True} if stream.writeback else {}),
                **({"skip": list(stream.skip)} if stream.skip else {}),
                "compress_pct": stream.compress_pct,
                "dedupe_ratio": stream.dedupe,
                "seed": stream.seed
                if stream.seed is not None
                else stream_seed(workload.seed, index),
            }
        )
    for index, (stream, spec) in enumerate(zip(streams, workload.streams, strict=True)):
        if spec.after:  # only when set: plans without gates read as before
            stream["after"] = gate_indices(workload.streams, index)
        stream.update(plan_fields(workload.streams, index))
        limit = _io_limit(spec, stream["regions"])
        if limit is not None:  # only when set: plans without them read as before
            stream["io_limit"] = limit
        if spec.cursors != "shared":
            stream["cursors"] = spec.cursors
        stream.update(_order_and_priority(spec))
        placement.check_regions(spec, stream["regions"])
        stream.update(placement.plan_fields(spec))
        if spec.invalidate == "pass" and not workload.direct:
            stream["invalidate_each_pass"] = True
    set_pools(
        workload.streams,
        streams,
        [_stream_verify_block(workload, spec, verify) for spec in workload.streams],
    )
    compiled: EnginePlan = {
        "plan_version": PLAN_VERSION,
        "backend": workload.backend,
        "threads": threads,
        "interval_ms": round(workload.interval_s * 1000),
        "start_at_ns": None,
        "warmup_ms": round(workload.warmup_s * 1000),
        "duration_ms": None if workload.duration_s is None else round(workload.duration_s * 1000),
        "poll_us": workload.poll_us,
        "cpus": list(workload.cpus),
        "sqpoll": workload.sqpoll,
        "max_errors": workload.max_errors,
        "io_timeout_ms": round(workload.io_timeout_s * 1000) or None,
        "targets": [
            {
                **info.plan_target(),
                "name": spec.name,
                "direct": workload.direct,
                **({"verify": v} if v else {}),
                **({"fadvise": a} if a else {}),
            }
            for spec, info, v, a in zip(
                workload.targets, infos, verify, _advice(workload), strict=True
            )
        ],
        "streams": streams,
    }
    check_memory(dict(compiled))  # refused before any IO when it would not fit
    return compiled
