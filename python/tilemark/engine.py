"""Python face of the Rust engine: plan (dict) in, snapshots and result (dicts) out.

The engine runs on its own threads without the GIL; `poll()` returns the interval snapshots
finished since the last call. Formats are documented in docs/engine-boundary.md.
"""

from __future__ import annotations

import json
from typing import Any, Literal, NotRequired, TypedDict

from tilemark import _engine
from tilemark.heap import no_gc

EngineError = _engine.EngineError
PLAN_VERSION: int = _engine.PLAN_VERSION

# -----------------------------------------------------------------------------------------------
# The boundary's plain data (docs/engine-boundary.md), typed for the Python side.


class HistogramDoc(TypedDict):
    """A log-linear latency histogram in ns: count, sum, min, max, [[bucket, count], ...]."""

    n: int
    sum: int
    min: int
    max: int
    b: list[list[int]]


class PlanVerify(TypedDict):
    """A verified target (docs/verification.md)."""

    target_id: int
    epoch: int
    block_size: int
    prior: Literal["verified", "mixed", "unknown"]
    journal: str | None


class PlanTarget(TypedDict):
    name: str
    path: str
    offset: int
    length: int
    direct: bool
    verify: NotRequired[PlanVerify | None]
    fadvise: NotRequired[str]  # buffered: "random" | "sequential" (posix_fadvise at open)


class PlanRegion(TypedDict):
    """Where a stream's IOs land on one target (offset relative to the target's)."""

    target: int
    offset: int
    length: int


class PlanStream(TypedDict):
    name: str
    regions: list[PlanRegion]
    spread: Literal["uniform", "size"]
    start_ms: int | None  # run time of the stream's phase; None: from the run's start
    stop_ms: int | None  # None: to the run's end
    after: NotRequired[list[int] | None]  # earlier streams to end first; start/stop from then
    read_pct: float
    sizes: list[list[float]]
    pattern: dict[str, Any]  # {"kind": sequential | random | zipf | hotspot | zoned, ...}
    invalidate_each_pass: NotRequired[bool]  # buffered: drop the cache after every pass
    cursors: NotRequired[Literal["shared", "per-op"]]  # sequential mix: one position or two
    random_pct: float
    align: int
    qd: int
    arrival: dict[str, Any]  # {"kind": "closed"} | {"kind": "open", "rate_iops"|"rate_bps", ...}
    burst: dict[str, float] | None
    sync: dict[str, Any]
    compress_pct: float
    dedupe_ratio: NotRequired[float]
    dedupe_pool: NotRequired[dict[str, int]]  # {blocks, over_blocks, id}: a named pool
    io_limit: NotRequired[int | None]  # bytes after which the stream issues none
    seed: int


class Plan(TypedDict):
    plan_version: int
    backend: Literal["uring", "psync", "null"]
    threads: int
    interval_ms: int
    start_at_ns: int | None
    warmup_ms: int
    duration_ms: int | None
    poll_us: int
    cpus: list[int]  # engine thread i runs on cpus[i % len]; []: the kernel places them
    sqpoll: bool  # uring: a kernel thread polls each ring's submission queue
    targets: list[PlanTarget]
    streams: list[PlanStream]


class OpCounters(TypedDict):
    """One op kind (read, write, sync) of a stream over an interval or the run."""

    ops: int
    bytes: int
    errors: dict[str, int]  # errno -> count
    service: HistogramDoc | None
    response: HistogramDoc | None  # None for closed loop: response time is service time


class TargetCounters(TypedDict):
    """What a stream over several targets did on one of them."""

    target: int
    read: OpCounters
    write: OpCounters
    sync: OpCounters


class StreamCounters(TypedDict):
    stream: int
    read: OpCounters
    write: OpCounters
    sync: OpCounters
    lag_max_ns: int
    behind_ios: NotRequired[int]  # snapshots only
    inflight: NotRequired[int]  # snapshots only
    ios_issued_late: int
    done_ns: NotRequired[int]  # run time it finished its io_limit (totals; absent if it did not)
    ioprio_other: NotRequired[dict[str, OpCounters]]  # read/write at its ioprio_share's priority
    targets: NotRequired[list[TargetCounters]]  # streams over several targets only


class Snapshot(TypedDict):
    interval: int
    phase: Literal["warmup", "measure"]
    start_ns: int
    end_ns: int
    streams: list[StreamCounters]
    lateness: NotRequired[dict[str, Any]]  # issue lateness of the interval's open-loop IOs


class Result(TypedDict):
    complete: bool
    verification: NotRequired[dict[str, Any] | None]
    started_at_ns: int
    measure_start_ns: int
    measure_end_ns: int
    streams: list[StreamCounters]
    spans: NotRequired[list[Span]]  # per stream: when it started and ended


class Span(TypedDict):
    """When a stream started (its phase began) and ended, run time in ns; None: it did not."""

    started_ns: int | None
    ended_ns: int | None
    stopped: NotRequired[bool]  # asked to stop from outside (stop_streams) before the run's end


def _loads(text: str) -> Any:
    """json.loads without the cyclic garbage collector: a document of 10,000 streams allocates
    millions of dicts and lists, and the collections those allocations set off rescanned the
    whole heap again and again (a quarter of the front end's CPU in a 1,000-stream run,
    bench/streams.py). The document holds no cycles; it is collected normally afterwards."""
    with no_gc():
        return json.loads(text)


class Frame:
    """One finished interval as the engine built it (docs/engine-boundary.md, Frames): the
    interval log's rows as Arrow columns, and `groups`, a snapshot whose "streams" are the
    groups of `Handle.set_groups` with every member's statistics merged (each group's
    "response" is its members' latency: response time where they have one, else service).
    Python never holds a dict per stream, unless a consumer asked for one through a further
    group set (`Handle.set_group_sets`, `set_snapshot`: a set with a group per stream)."""

    __slots__ = (
        "interval", "phase", "start_ns", "end_ns", "groups", "_columns", "_sets", "batch",
        "_window",
    )  # fmt: skip

    def __init__(self, raw: tuple) -> None:
        self.interval, self.phase, self.start_ns, self.end_ns, self._columns, groups = raw[:6]
        self._sets: list[str] = list(raw[6]) if len(raw) > 6 else []
        self.groups: Snapshot = _decode(groups)
        # A measurement interval of a run with a windowed set (Handle.set_window): per group
        # and op kind with IOs [group, op, ops, latency sum ns], and the window's snapshot
        # (JSON) when this interval closed one; None otherwise.
        batch = raw[7] if len(raw) > 7 else None
        self.batch: list[list] | None = None if batch is None else _decode(batch)
        self._window: str | None = raw[8] if len(raw) > 8 else None

    def window_snapshot(self) -> Snapshot | None:
        """The window this interval closed (Handle.set_window), in `set_snapshot`'s format."""
        return None if self._window is None else _group_snapshot(self._window)

    def set_snapshot(self, index: int) -> Snapshot:
        """The aggregates of further group set `index` as a snapshot whose "streams" are its
        groups, in the engine's snapshot format (docs/engine-boundary.md): a group without a
        member this interval is left out, as the engine leaves out a stream it did not report,
        and the groups' member count is not kept, so a set with a group per plan stream gives
        the snapshot `Handle.poll` gave."""
        return _group_snapshot(self._sets[index])

    def __len__(self) -> int:
        """Rows of the interval (one per stream and op kind with IOs, or one per idle stream)."""
        return len(self._columns[0][4]) // 4

    def record_batch(self, run_id: str, schema: Any) -> Any:
        """The rows as a pyarrow RecordBatch of `schema` (store/intervals.py INTERVAL_SCHEMA):
        the engine's columns as they are, and the interval's constants."""
        import pyarrow as pa

        n = len(self)
        given = {}
        for name, kind, validity, nulls, values, data in self._columns:
            buffers = [None if validity is None else pa.py_buffer(validity), pa.py_buffer(values)]
            if kind == "utf8":
                buffers.append(pa.py_buffer(data))
            given[name] = pa.Array.from_buffers(_ARROW_TYPES[kind], n, buffers, null_count=nulls)
        constants = {
            "run_id": (run_id, pa.string()),
            "interval": (self.interval, pa.int32()),
            "phase": (self.phase, pa.string()),
            "start_ns": (self.start_ns, pa.int64()),
            "end_ns": (self.end_ns, pa.int64()),
        }
        arrays = []
        for field in schema:
            if field.name in given:
                arrays.append(given[field.name])
            else:
                value, kind = constants[field.name]
                arrays.append(pa.repeat(pa.scalar(value, kind), n))
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _decode(text: str) -> Any:
    """A frame's JSON document. msgspec decodes the same documents a third faster than json
    (1,200 streams' set: 16 ms instead of 24 per interval). The cyclic collector is off while
    it does: a frame of 10,000 streams' 40 groups is 16,000 small lists, whose allocation set
    off a collection in about one frame of seven (12 ms instead of 2; bench/README.md). The
    document holds no cycles; it is freed by reference counts."""
    import msgspec

    with no_gc():
        return msgspec.json.decode(text)


def _group_snapshot(text: str) -> Snapshot:
    """A set's aggregates (JSON) as a snapshot: the groups without a member left out, their
    member counts dropped."""
    snap = _decode(text)
    snap["streams"] = [g for g in snap["streams"] if g.pop("streams")]
    return snap


def _arrow_types() -> dict[str, Any]:
    import pyarrow as pa

    return {"i32": pa.int32(), "i64": pa.int64(), "f64": pa.float64(), "utf8": pa.string()}


class _LazyTypes(dict):
    def __missing__(self, key: str) -> Any:
        self.update(_arrow_types())
        return self[key]


_ARROW_TYPES: dict[str, Any] = _LazyTypes()


class Handle:
    """A running engine plan."""

    def __init__(self, run: _engine.Run, plan: Plan):
        self._run = run
        self.plan = plan

    def poll(self) -> list[Snapshot]:
        """Interval snapshots completed since the last poll, oldest first."""
        return _loads(self._run.poll())

    def set_groups(self, group_of: list[int]) -> None:
        """The group of every plan stream, for the aggregates of `poll_frames`."""
        self._run.set_groups(group_of)

    def set_group_sets(self, sets: list[list[int]]) -> None:
        """Further group sets (the group of every plan stream in each) whose aggregates every
        frame carries too (`Frame.set_snapshot`), replacing any set before."""
        self._run.set_group_sets([[int(g) for g in group_of] for group_of in sets])

    def set_window(self, index: int, window_s: float) -> None:
        """Further group set `index` merged over measurement windows of `window_s` by the
        engine: its measurement frames carry `batch` and, closing a window, `window_snapshot`,
        instead of the set's aggregates (`set_snapshot`)."""
        self._run.set_window(index, window_s)

    def window_snapshot(self) -> Snapshot | None:
        """The window of `set_window` still being filled, as a snapshot; None if none is."""
        text = self._run.window_json()
        return None if text is None else _group_snapshot(text)

    def poll_frames(self) -> list[Frame]:
        """Interval frames completed since the last poll, oldest first (instead of `poll`: the
        rows built by the engine, no JSON per stream)."""
        return [Frame(raw) for raw in self._run.poll_frames()]

    def stop(self) -> None:
        """Stop early; the partial interval is still reported and the result marked incomplete."""
        self._run.stop()

    def stop_streams(self, streams: list[int]) -> None:
        """Stop these plan streams while the run goes on (streams waiting for them start)."""
        self._run.stop_streams([int(i) for i in streams])

    def spans(self) -> list[Span]:
        """When each stream started and ended so far (run time, ns), in plan order."""
        return json.loads(self._run.spans())

    def wait(self, timeout_s: float) -> bool:
        """Wait up to timeout_s for the run to end; True if it has."""
        return self._run.wait(float(timeout_s))

    def done(self) -> bool:
        return self._run.done()

    def result(self) -> Result:
        """Block until the run ends and return its result (measurement-phase totals)."""
        return _loads(self._run.result())


def start(plan: Plan) -> Handle:
    """Start a plan. Raises EngineError with a clear message if the engine rejects it."""
    full: Plan = {"plan_version": PLAN_VERSION, **plan}  # type: ignore[typeddict-item]
    return Handle(_engine.start(json.dumps(full)), full)


def fill(
    path: str,
    offset: int,
    length: int,
    *,
    direct: bool = True,
    seed: int = 1,
    verify: tuple[int, int, int] | None = None,
) -> int:
    """Write incompressible data over [offset, offset+length) so later reads never hit holes;
    `verify` = (target identity, block size, data offset) writes verifiable fill blocks."""
    if verify is None:
        return _engine.fill(str(path), int(offset), int(length), bool(direct), int(seed))
    target_id, block_size, data_offset = verify
    return _engine.fill(
        str(path), int(offset), int(length), bool(direct), int(seed), target_id, block_size,
        data_offset,
    )  # fmt: skip


def sample_blocks(
    block_size: int, compress_pct: float, dedupe_ratio: float, verify: bool, blocks: int, seed: int
) -> bytes:
    """Write data exactly as a stream with these settings writes it (docs/verification.md)."""
    return _engine.sample_blocks(
        int(block_size), float(compress_pct), float(dedupe_ratio), bool(verify), int(blocks),
        int(seed),
    )  # fmt: skip


class PassHandle:
    """A running verification pass over a data area."""

    def __init__(self, handle: _engine.VerifyPass):
        self._handle = handle

    def progress(self) -> tuple[int, int]:
        """(bytes judged so far, bytes in the data area)."""
        return self._handle.progress()

    def stop(self) -> None:
        self._handle.stop()

    def wait(self, timeout_s: float) -> bool:
        return self._handle.wait(float(timeout_s))

    def result(self) -> dict[str, Any]:
        return json.loads(self._handle.result())


def verify_pass(spec: dict[str, Any]) -> PassHandle:
    """Start a verification pass (docs/engine-boundary.md, Verification pass)."""
    return PassHandle(_engine.verify_pass(json.dumps(spec)))


def dio_alignment(path: str) -> int:
    """O_DIRECT alignment required for `path` in bytes, or 0 if O_DIRECT is unsupported."""
    return _engine.dio_alignment(str(path))


def version() -> str:
    return _engine.version()
