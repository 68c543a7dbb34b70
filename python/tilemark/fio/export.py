"""A stored run's engine plan as a fio job file, for cross-checking tilemark against fio.

The job reproduces what the engine was told to do: the same file region (tilemark's data area
starts after the target's header block, so `offset` includes it), sizes, mix, placement, queue
depth, rate and syncs. What fio cannot express is written as a comment at the top, never
dropped silently.
"""

from __future__ import annotations

from typing import Any

from tilemark.fio import datareduce, gates, pace, patterns, strides

BACKEND_ENGINES = {"uring": "io_uring", "psync": "psync", "null": "null"}


def _rw(stream: dict[str, Any]) -> str:
    random = stream["random_pct"] > 0
    read = stream["read_pct"]
    if read >= 100:
        return "randread" if random else "read"
    if read <= 0:
        return "randwrite" if random else "write"
    return "randrw" if random else "rw"


def _split(sizes: list[list[float]]) -> str:
    """tilemark's weighted sizes as fio's bssplit, whose shares are whole percents adding to 100."""
    total = sum(w for _, w in sizes)
    shares = [int(w * 100 // total) for _, w in sizes]
    # Hand the rounding remainder to the largest weights, as whole percents must add up to 100.
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i][1])[: 100 - sum(shares)]:
        shares[i] += 1
    return ":".join(f"{int(size)}/{share}" for (size, _), share in zip(sizes, shares, strict=True))


# The header line that marks a job file as tilemark's, so a new export may replace it.
FIO_EXPORT_MARK = "written by tilemark export --fio"


def job_text(
    plan: dict[str, Any],
    *,
    title: str,
    steadystate: dict[str, Any] | None = None,
    stream_rules: list[dict[str, Any]] | None = None,
) -> str:
    """A fio job file equivalent to an engine plan (plan_version 1 or 2); `steadystate`: the
    workload's `[steadystate]` rule (its JSON), which fio runs as ss, ss_dur, ...;
    `stream_rules`: its rules ending streams (not exported, noted)."""
    from tilemark.fio.steady import export_lines

    notes: list[str] = []
    if stream_rules:
        notes.append(
            f"{len(stream_rules)} steady-state rule(s) ended groups of streams (ends = "
            "'streams'); not exported: the jobs run to their runtime or bytes"
        )
    lines = [f"; {title}", f"; {FIO_EXPORT_MARK}; run it with: fio FILE"]
    body = ["[global]", f"ioengine={BACKEND_ENGINES[plan['backend']]}"]
    ss_lines, ss_notes = export_lines(
        steadystate, [s["name"] for s in plan["streams"]], plan.get("warmup_ms") or 0
    )
    body += ss_lines
    notes += ss_notes
    directs = {t["direct"] for t in plan["targets"]}
    body.append(f"direct={1 if directs == {True} else 0}")
    run_ms = plan.get("duration_ms")  # None: until every stream has done its io_limit
    if plan.get("max_errors") not in (0, None):
        notes.append(f"tilemark allowed {plan['max_errors']} IO errors; fio stops at the first")
    for stream in plan["streams"]:
        # Plan 2 lists a stream's regions (one per target); plan 1 had one target.
        regions = stream.get("regions") or [
            {"target": stream["target"], "offset": stream["offset"], "length": stream["length"]}
        ]
        region = regions[0]
        target = plan["targets"][region["target"]]
        files = ":".join(plan["targets"][r["target"]]["path"] for r in regions)
        rw = _rw(stream)
        rw += strides.export_suffix(stream, notes)
        body += ["", f"[{stream['name']}]", f"filename={files}", f"rw={rw}"]
        if len(regions) > 1:
            body.append("file_service_type=random")
            starts = {plan["targets"][r["target"]]["offset"] + r["offset"] for r in regions}
            if len(starts) > 1 or len({r["length"] for r in regions}) > 1:
                notes.append(
                    f"stream {stream['name']}: its regions differ between targets; fio applies "
                    "the first one's offset and size to every file"
                )
            if stream.get("spread") == "size":
                notes.append(
                    f"stream {stream['name']}: spread by size; fio's file_service_type=random "
                    "picks the files uniformly"
                )
        # fio ramps and times each job from its own start; tilemark's warm-up is the first
        # warmup_ms of the run, and a phase runs from start_ms to stop_ms (run time).
        start = stream.get("start_ms") or 0
        warmup = plan.get("warmup_ms") or 0
        stop = stream.get("stop_ms")
        if stream.get("flow") or stream.get("on_end"):  # paced or ending others (fio/pace.py)
            body += pace.export_lines(stream, plan["streams"], notes)
        if stream.get("after"):  # it started when others ended (fio/gates.py)
            body += gates.export_lines(stream, plan["streams"], notes)
            start, warmup = 0, 0
        if stop is None and run_ms is not None:
            stop = warmup + run_ms
        if start:
            body.append(f"startdelay={start}ms")
        if warmup > start:
            body.append(f"ramp_time={warmup - start}ms")
        # A stream with a byte limit ends by it, as a fio job without time_based does (and by
        # its stop time, whichever is first); the others run for their time.
        if stream.get("io_limit") is None:
            body.append("time_based")
            if not target["direct"] and not stream.get("invalidate_each_pass"):
                notes.append(
                    f"{stream['name']}: fio drops a buffered time_based job's cache after "
                    "every pass (io_u.c loop_cache_invalidate); the tilemark run did so only "
                    "at its start"
                )
        else:
            body.append(f"io_size={stream['io_limit']}")
        if stop is not None:
            body.append(f"runtime={stop - max(start, warmup)}ms")
        if not target["direct"]:
            # fio advises each job's pattern by default; say exactly what tilemark advised.
            body.append(f"fadvise_hint={target.get('fadvise') or 0}")
        if rw.partition(":")[0] in ("rw", "randrw"):
            body.append(f"rwmixread={stream['read_pct']:g}")
        sizes, write = stream["sizes"], stream.get("write_sizes")  # write: fio's bs=R,W
        if len(sizes) == 1 and (write is None or len(write) == 1):
            body.append(f"bs={int(sizes[0][0])}" + (f",{int(write[0][0])}" if write else ""))
        else:
            body.append(f"bssplit={_split(sizes)}" + (f",{_split(write)}" if write else ""))
        body.append(f"blockalign={stream['align']}")
        body.append(f"offset={target['offset'] + region['offset']}")
        if len(regions) > 1:
            # HOWTO size: fio divides `size` between a job's files unless `filesize` gives
            # each its own; both say it: each file's region, and all of them together.
            body.append(f"filesize={region['length']}")
            body.append(f"size={region['length'] * len(regions)}")
        else:
            body.append(f"size={region['length']}")
        if 0 < stream["random_pct"] < 100:
            body.append(f"percentage_random={stream['random_pct']:g}")
        pattern = stream["pattern"]
        if pattern["kind"] == "zipf":
            body.append(f"random_distribution=zipf:{pattern['theta']:g}")
        elif pattern["kind"] == "hotspot":
            io, region = pattern["io_pct"], pattern["region_pct"]
            body.append(
                f"random_distribution=zoned:{io:g}/{region:g}:{100 - io:g}/{100 - region:g}"
            )
        elif pattern["kind"] == "zoned":
            zones = ":".join(f"{io:g}/{region:g}" for io, region in pattern["zones"])
            body.append(f"random_distribution=zoned:{zones}")
        if rw.partition(":")[0] in ("rw", "randrw") and stream["random_pct"] < 100:
            if stream.get("cursors", "shared") == "shared":
                notes.append(
                    f"stream {stream['name']}: its reads and writes continue one sequential "
                    "position; fio keeps one for each (its writes go over what its reads read)"
                )
        if stream["random_pct"] > 0:
            body.append("norandommap")
        body.append(f"iodepth={stream['qd']}")
        arrival = stream["arrival"]
        if arrival["kind"] == "open":
            read = stream["read_pct"] / 100
            total = arrival["rate_iops"]
            # fio caps each direction separately; the caps together give the mix.
            if 0 < read < 1:
                body.append(f"rate_iops={total * read:.0f},{total * (1 - read):.0f}")
            else:
                body.append(f"rate_iops={total:.0f}")
            if arrival.get("dist") == "poisson":
                body.append("rate_process=poisson")
            notes.append(
                f"stream {stream['name']}: tilemark's latency is response time from the intended "
                "issue time; compare it with fio's lat only while the rate is reached"
            )
        sync = stream["sync"]
        if sync["kind"] == "fsync":
            body.append(f"fsync={sync['every']}")
        elif sync["kind"] == "dsync":
            body.append("sync=dsync")
        if stream.get("burst"):
            burst = stream["burst"]
            # fio waits for the IOs in flight before it thinks (backend.c handle_thinktime,
            # io_u_quiesce), as a burst does; counted at issue, as a burst counts them.
            body += [
                f"thinktime={burst['delay_ms'] * 1000:.0f}",
                f"thinktime_blocks={burst['ios']}",
                "thinktime_blocks_type=issue",
            ]
        body += strides.export_priority(stream, plan["backend"], notes)
        body += patterns.export_lines(stream, plan["backend"], notes)
        if stream.get("compress_pct"):
            body.append(f"buffer_compress_percentage={stream['compress_pct']:g}")
            body.append("refill_buffers")
        body += datareduce.export_lines(stream, notes)
    lines += [f"; note: {n}" for n in notes]
    return "\n".join(lines + [""] + body) + "\n"
