"""The results documents as typed classes: run.json, its summary, and study.json.

One definition serves three purposes:
- reading: `read_run(bytes)` / `read_study(bytes)` decode a document and check it against these
  classes in one pass (msgspec), so a field of the wrong type is found once, when the document is
  read, and named in one sentence ("field summary.total is a string, not an object");
- using: readers (the catalog, reports, compare, export) get attributes with types instead of
  `.get("literal")` on nested dicts, and a renamed field fails where the class is used;
- documenting: docs/results-schema.md's field tables are generated from the classes and their
  field docs (`python -m tilemark.store.results`), as docs/options.md is from the option table.

Why msgspec (bench/results_schema.py; bench/results/*-results-schema.md): a 6 MB run.json of
1,000 streams decodes typed in about the time json.loads alone takes (both are dominated by the
engine result's histograms; 158-195 ms against 247-295 ms with the machine lightly loaded), a
reader that needs only the listing fields decodes in 16-24 ms because msgspec skips the rest
without building it, and pydantic was slower than either (319-351 ms) with a heavier import.
The same classes check the shape, so the dict walk they replace (store/docshape.py) is gone.

The classes describe what readers walk: containers, the numbers they do arithmetic on, and the
strings they show. Fields they do not read stay loose (`dict[str, Any]`), and unknown fields are
kept out of the typed view but never refused, so an older reader opens a newer writer's
document; `schema_version` and rundoc.MIGRATIONS handle the rest. Every field is optional
(`None`) unless it is what identifies the document.

Longer than 600 lines because every class of every results document lives here, next to the
reader and the generator of docs/results-schema.md: one file is the schema, and splitting it
by document would split classes that run.json and study.json share (Rates, QoS criteria).
"""

from __future__ import annotations

from typing import Any

import msgspec

SCHEMA_DOC_VERSION = 1  # the generated documentation's layout, not the results format


class _Struct(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Every results class: keyword fields, absent means default."""


class Latency(_Struct):
    """Latency statistics of a set of IOs, from merged histograms (ms)."""

    mean_ms: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    p999_ms: float | None = None
    max_ms: float | None = None


class OpSummary(_Struct):
    """One op kind of one stream over the measurement window."""

    ops: int | float | None = None  # counts stay integers (CSV export writes them as read)
    bytes: int | float | None = None
    iops: float | None = None
    mbps: float | None = None
    errors: dict[str, Any] | None = None  # errno name -> count
    service: Latency | None = None  # submission to completion
    response: Latency | None = None  # intended issue time to completion (open loop)


class Rates(_Struct):
    """Rates of the whole run (or a target, a host)."""

    iops: float | None = None
    mbps: float | None = None
    read_iops: float | None = None
    write_iops: float | None = None
    read_mbps: float | None = None
    write_mbps: float | None = None
    ops: float | None = None
    bytes: float | None = None
    errors: float | None = None
    duration_s: float | None = None


class Total(Rates):
    """The run as a whole: rates, errors by errno name, read and write latency."""

    errors_by_name: dict[str, Any] | None = None
    read_latency: Latency | None = None
    write_latency: Latency | None = None


class StreamSummary(Rates):
    """One stream of the plan over the measurement window."""

    name: str | None = None
    stream: int | None = None
    arrival: str | None = None  # closed | constant | poisson | replay
    target_iops: float | None = None
    targets: list[Any] | None = None
    read: OpSummary | None = None
    write: OpSummary | None = None
    sync: OpSummary | None = None
    total: Rates | None = None  # iops, mbps of the stream's reads and writes
    lag_max_ms: float | None = None
    ios_issued_late: int | None = None
    # IO priority (docs/options.md `priority`): class, level, and with `priority_share` the
    # share's class, level, pct, the IOs done at it, their measured_pct, and their own read
    # and write summaries (rates, latency: fio's clat_prio).
    priority: dict[str, Any] | None = None


class AppResult(_Struct):
    """One application of a tile run: its verdict and its metric."""

    app: str | None = None
    passed: bool | None = None
    criteria: list[dict[str, Any]] | None = None
    worst: dict[str, Any] | None = None
    metric_total: float | None = None
    metric_unit: str | None = None
    instances: int | float | None = None  # instances of the application (one per tile)
    worst_latency_ms: dict[str, float | None] | None = None  # QoS criterion -> worst instance
    iops: float | None = None
    mbps: float | None = None


class QosVerdict(_Struct):
    """One QoS criterion of an application instance in one scope (the window, an interval)."""

    criterion: str | None = None
    description: str | None = None
    scope: str | None = None  # window | interval N
    passed: bool | None = None
    value: int | float | None = None
    limit: float | None = None
    unit: str | None = None  # ms | fraction | errors ...


class AppInstance(_Struct):
    """One application instance (one tile's copy of an application) of a tile run."""

    tile: int | None = None
    app: str | None = None
    metric: float | None = None
    metric_unit: str | None = None
    target_metric: float | None = None
    latency_ms: dict[str, float | None] | None = None  # QoS criterion -> value
    iops: float | None = None
    mbps: float | None = None
    errors: int | float | None = None
    passed: bool | None = None
    verdicts: list[QosVerdict] | None = None


class LayoutStream(_Struct):
    index: int | None = None
    app: str | None = None


class Layout(_Struct):
    tile: str | None = None  # the tile's name
    streams: list[LayoutStream] | None = None


class Applications(_Struct):
    """The `applications` section of a tile run's summary (QoS per application)."""

    applications: list[AppResult] | None = None
    instances: list[AppInstance] | None = None
    layout: Layout | None = None
    passed: bool | None = None
    score: float | None = None
    tiles: int | None = None
    failed: list[Any] | None = None  # the failed criteria
    qos_interval_s: float | None = None
    measurement: dict[str, Any] | None = None


class Verification(_Struct):
    listed: list[dict[str, Any]] | None = None
    by_class: dict[str, Any] | None = None
    findings: int | None = None
    checked: int | None = None


class ToolBound(_Struct):
    """Whether the host, not the storage, limited the run, and why."""

    tool_bound: bool | None = None
    reasons: list[str] | None = None


class FileOpResult(_Struct):
    """One operation of one file stream over the measurement (docs/files.md)."""

    op: str | None = None  # open, read, close, stat, create, append, fsync, delete, rename
    ops: int | None = None
    bytes: int | None = None
    skipped: int | None = None  # found nothing to act on: counted apart, not timed
    errors: dict[str, Any] | None = None  # errno name -> count
    rate: float | None = None  # ops/s over the measurement
    mean_us: float | None = None
    p50_us: float | None = None
    p99_us: float | None = None
    p999_us: float | None = None
    max_us: float | None = None


class FileStreamResult(_Struct):
    """One file stream: its operations and, for a sequence, its whole loops (the app unit)."""

    name: str | None = None
    fileset: str | None = None
    app: str | None = None  # a tile run's application instance (t1.mailfs); None otherwise
    unit: str | None = None  # what a loop is: loops, messages, pages
    loops: int | None = None
    loop_rate: float | None = None  # loops/s: messages/s, pages/s
    loop_p99_us: float | None = None
    ops: list[FileOpResult] | None = None
    # A tile run: op -> operations over the whole file run (its warm-up and the moments after
    # the block run ended included), which is what the disk shows afterwards.
    run_ops: dict[str, Any] | None = None


class FilesetResult(_Struct):
    """A file set as the run left it (the engine's count) and how it was prepared."""

    name: str | None = None
    path: str | None = None
    files: int | None = None
    bytes: int | None = None
    prepared: dict[str, Any] | None = None  # files, bytes, reused, created, rewritten, removed


class FileQos(_Struct):
    """One QoS criterion of a file run (files/qos.py QosVerdict)."""

    name: str | None = None
    criterion: str | None = None
    value: float | None = None  # ms, or per second; None when nothing was measured
    passed: bool | None = None
    decision: str | None = None  # pass | fail | inconclusive (95% interval straddles the limit)
    ci_low: float | None = None  # the 95% interval of `value`, same unit
    ci_high: float | None = None


class DeviceViewResult(_Struct):
    """A block device under a file run's sets over the run (files/devices.py: iostat -x's
    figures from /proc/diskstats, flushes per second, the mean write size)."""

    name: str | None = None
    dev: str | None = None  # major:minor
    filesets: list[str] | None = None
    read_iops: float | None = None
    write_iops: float | None = None
    write_mbps: float | None = None
    write_kib_avg: float | None = None
    w_await_ms: float | None = None
    flushes_s: float | None = None  # None: the kernel does not count flushes
    util_pct: float | None = None


class FsFigureResult(_Struct):
    name: str | None = None  # e.g. "log writes/s", "written MiB", "READ mean rtt ms"
    value: float | None = None


class FsResult(_Struct):
    """The file system's own figures beneath a file run (files/fsstats.py): ext4's bytes
    written, xfs's transactions, log and directory operations, btrfs's commits, an NFS
    client's per-operation calls and times."""

    mount: str | None = None
    fstype: str | None = None
    source: str | None = None
    filesets: list[str] | None = None
    figures: list[FsFigureResult] | None = None
    written_bytes: int | None = None  # ext4: what the file system wrote to its device


class FilesSummary(_Struct):
    """run.json `summary.files`: the file streams of a file run or of a tile run's file apps."""

    workload: str | None = None
    backend: str | None = None  # psync | uring
    status: str | None = None  # complete | errors | hung | interrupted
    error: str | None = None
    seconds: float | None = None  # the measurement (a tile run: after its warm-up)
    streams: list[FileStreamResult] | None = None
    filesets: list[FilesetResult] | None = None
    qos: list[FileQos] | None = None
    qos_passed: bool | None = None
    devices: list[DeviceViewResult] | None = None  # the block devices beneath (iostat -x view)
    filesystems: list[FsResult] | None = None  # the file systems' own figures, where kept


class TargetSummary(Rates):
    """One target of the run over the measurement window (run/pertarget.py)."""

    target: int | None = None  # its index in the plan
    name: str | None = None
    path: str | None = None
    streams: list[str] | None = None  # the streams on it
    read_latency: Latency | None = None
    write_latency: Latency | None = None


class Lateness(_Struct):
    """How late IOs were issued against their recorded time (microseconds)."""

    mean_us: float | None = None
    p50_us: float | None = None
    p99_us: float | None = None
    max_us: float | None = None


class ReplayStream(_Struct):
    """One replayed stream: IOs issued against the trace's records, rate, lateness."""

    name: str | None = None
    records: int | float | None = None  # IOs in one pass of the stream's list
    issued: int | float | None = None
    skipped: int | float | None = None  # None when the replay did not end on its own
    not_reached: int | float | None = None
    trace_iops: float | None = None
    achieved_iops: float | None = None
    rate_error_pct: float | None = None
    lateness: Lateness | None = None


class Replay(_Struct):
    """run.json `summary.replay` of `tilemark replay` (trace/accuracy.py; docs/replay.md)."""

    mode: str | None = None  # timed | afap | qd
    verdict: str | None = None  # the accuracy sentence
    streams: list[ReplayStream] | None = None


class FrontBack(_Struct):
    """One row of summary.telemetry.front_vs_back: tilemark's rates (the front end) or a
    device's beneath it (the back end), over the measurement (telemetry/sampler.py)."""

    side: str | None = None  # front end | back end
    name: str | None = None
    depth: int | None = None  # 0 serves the target; deeper devices are under it
    targets: list[str] | None = None
    read_iops: float | None = None
    read_iops_ratio: float | None = None  # device / tilemark
    write_iops: float | None = None
    write_iops_ratio: float | None = None
    read_mbps: float | None = None
    write_mbps: float | None = None
    util_pct: float | None = None


class DeviceTotals(_Struct):
    """One device of summary.telemetry.devices: iostat -x figures over the measurement."""

    device: str | None = None
    dev: str | None = None  # major:minor
    kind: str | None = None
    depth: int | None = None
    targets: list[str] | None = None  # the targets it serves
    read_iops: float | None = None
    write_iops: float | None = None
    read_mbps: float | None = None
    write_mbps: float | None = None
    read_merges_s: float | None = None
    write_merges_s: float | None = None
    r_await_ms: float | None = None
    w_await_ms: float | None = None
    aqu_sz: float | None = None
    util_pct: float | None = None


class KernelMessage(_Struct):
    """A kernel log record about one of the run's devices or target files (telemetry/
    kmsg.py): seconds since boot, level (0 emergency .. 7 debug), its first line."""

    t_s: float
    level: int
    message: str


class KernelMessages(_Struct):
    """run.json `summary.telemetry.kernel`: what the kernel logged about the run's devices
    while it ran (present when it logged anything): how many, and the first 20."""

    count: int
    messages: list[KernelMessage]


def kernel_messages(telemetry: dict[str, Any] | None) -> KernelMessages | None:
    """The kernel messages of a `summary.telemetry` document (a host's in a cluster), typed."""
    if not telemetry or not telemetry.get("kernel"):
        return None
    return msgspec.convert(telemetry["kernel"], KernelMessages)


class SummaryTelemetry(_Struct):
    """run.json `summary.telemetry`: devices, front end vs back end, host totals, kernel
    messages."""

    devices: list[DeviceTotals] | None = None
    front_vs_back: list[FrontBack] | None = None
    host: dict[str, Any] | None = None
    kernel: KernelMessages | None = None


class HostCpu(_Struct):
    """The CPU figures of `summary.telemetry.host` (telemetry/sampler.py Totals), each in % of
    one CPU over the measurement: the engine's IO threads, its aggregation thread (0 where it
    has none) and the whole process."""

    engine_cpu_pct: float | None = None
    aggregate_cpu_pct: float | None = None
    process_cpu_pct: float | None = None

    @classmethod
    def of(cls, host: dict[str, Any] | None) -> HostCpu:
        """The CPU figures of a host document (its other figures left out)."""
        return msgspec.convert(host or {}, cls)


class SteadyRound(_Struct):
    """One round of an until-steady run (run/steady.py Round)."""

    index: int | None = None  # 1-based
    start_s: float | None = None
    end_s: float | None = None
    value: float | None = None  # the tracked metric
    ops: int | None = None  # data IOs completed


class SteadyState(_Struct):
    """run.json `summary.steady_state` of `run --until-steady` (docs/steady-state.md)."""

    metric: str | None = None  # iops | p99
    unit: str | None = None
    round_s: float | None = None
    max_rounds: int | None = None
    rule: str | None = None
    rounds: list[SteadyRound] | None = None
    steady: bool | None = None
    rule_met: bool | None = None
    window: SteadyWindow | None = None  # the last rounds the rule was judged over
    verdict: str | None = None
    # The engine result's streams over the steady window (histograms, as `result` has them).
    window_streams: list[dict[str, Any]] | None = None


class ServiceAboveDevice(_Struct):
    """One direction of summary.overhead.service: tilemark's mean service time against the
    block layer's of the device serving the target (run/overhead.py)."""

    op: str | None = None  # read | write
    device: str | None = None
    ios: int | None = None  # tilemark's IOs in this direction
    device_ios: int | None = None  # the device's (within 5% of tilemark's, or no row)
    mean_us: float | None = None  # submission to reaping, tilemark's clock
    device_mean_us: float | None = None  # diskstats ticks per IO (iostat's r_await, w_await)
    above_device_us: float | None = None  # the difference: above the device


class Overhead(_Struct):
    """run.json `summary.overhead`: what tilemark's own machinery cost (run/overhead.py)."""

    ios: int | None = None  # data IOs over the measurement
    cpu_per_io_us: float | None = None  # the process's CPU time per IO
    engine_cpu_per_io_us: float | None = None  # the engine threads' share of it
    aggregate_cpu_pct: float | None = None  # the engine's aggregation thread, % of one CPU
    front_end_cpu_pct: float | None = None  # the rest of the process, % of one CPU
    issue_lateness_p50_us: float | None = None  # open-loop IOs (summary.issue_lateness)
    issue_lateness_p99_us: float | None = None
    service: list[ServiceAboveDevice] | None = None
    # The IO threads' time (uring) with spinning allowed and with batched submissions, %.
    spin_allowed_pct: float | None = None
    batched_pct: float | None = None


class Summary(_Struct):
    """run.json `summary`: what the run measured (docs/results-schema.md)."""

    total: Total | None = None
    streams: list[StreamSummary] | None = None
    targets: list[TargetSummary] | None = None
    applications: Applications | None = None
    duration_s: float | None = None
    notes: list[str] | None = None
    verification: Verification | None = None
    telemetry: SummaryTelemetry | None = None
    tool_bound: ToolBound | None = None
    change_points: list[dict[str, Any]] | None = None
    hosts: list[dict[str, Any]] | None = None
    cluster: dict[str, Any] | None = None
    steady_state: SteadyState | None = None
    # fio's steady-state rule ([steadystate]; run/fio_steady.py): met, met_at_s, samples, window.
    fio_steady_state: dict[str, Any] | None = None
    data_reduction: dict[str, Any] | None = None
    preconditioning: dict[str, Any] | None = None
    verify_pass: dict[str, Any] | None = None
    replay: Replay | None = None
    # Open-loop IOs' submission minus intended time, all streams merged: ios, mean_us, p50_us,
    # p99_us, p999_us, max_us (runs whose intervals the engine built; issue 25).
    issue_lateness: dict[str, Any] | None = None
    files: FilesSummary | None = None  # file streams (`tilemark files run`, file apps of tiles)
    overhead: Overhead | None = None  # CPU per IO, lateness, time above the device


class ResultOp(_Struct):
    ops: float | None = None
    bytes: float | None = None
    errors: dict[str, Any] | None = None
    service: dict[str, Any] | None = None  # the engine's histogram document
    response: dict[str, Any] | None = None


class ResultStream(_Struct):
    stream: int
    read: ResultOp | None = None
    write: ResultOp | None = None
    sync: ResultOp | None = None


class HungIo(_Struct):
    stream: Any = None
    age_ns: float | None = None


class EngineVerification(_Struct):
    findings: list[dict[str, Any]] | None = None
    by_class: dict[str, Any] | None = None


class PollerModes(_Struct):
    """run.json `result.poller[]`: one IO thread's time in its poller's modes."""

    seconds: float | None = None
    spin_allowed_pct: float | None = None
    batched_pct: float | None = None


class EnginePoller(_Struct):
    """The engine result's `poller` alone, read without the per-stream totals."""

    poller: list[PollerModes] = msgspec.field(default_factory=list)


class StreamSpan(_Struct):
    """run.json `result.spans[]`: when one plan stream started and ended (run time, ns), and
    whether it was stopped by a stop_streams or another stream's on_end."""

    started_ns: int | None = None
    ended_ns: int | None = None
    stopped: bool = False


class EngineResult(_Struct):
    """run.json `result`: the engine's final result (docs/engine-boundary.md)."""

    streams: list[ResultStream] | None = None
    complete: bool | None = None
    stop_reason: str | None = None
    hung: list[HungIo] | None = None
    verification: EngineVerification | None = None
    started_at_ns: float | None = None
    measure_start_ns: float | None = None
    poller: list[PollerModes] | None = None
    spans: list[StreamSpan] | None = None  # in plan order


class Arrival(_Struct):
    """How a plan stream issues IOs: closed loop, or open loop at a rate."""

    kind: str | None = None  # closed | open
    rate_iops: float | None = None
    rate_bps: float | None = None
    dist: str | None = None  # poisson | uniform ...
    batch: float | None = None  # open loop: mean IOs per batch
    batch_gap_ns: float | None = None  # mean gap between a batch's IOs (None: at once)


class SyncMode(_Struct):
    """How a plan stream makes its writes durable (docs/engine-boundary.md, `sync`)."""

    kind: str = "none"  # none | dsync | fsync
    every: int = 1  # fsync: after this many writes
    data: bool = False  # fsync: fdatasync
    group: bool = False  # fsync: group commit (crates/engine/src/worker/group.rs)


class PlanStream(_Struct):
    """One stream of the engine plan (docs/engine-boundary.md, Plan)."""

    name: str | None = None
    target: int | None = None
    start_ms: int | float | None = None  # a phased stream starts (run time) ...
    stop_ms: int | float | None = None  # ... and stops
    after: list[int] | None = None  # the streams it waits for (plan indices)
    read_pct: int | float | None = None
    sizes: list[tuple[int | float, float]] | None = None  # [size in bytes, weight]
    pattern: dict[str, Any] | None = None  # kind: random | sequential | ...
    qd: int | None = None
    arrival: Arrival | None = None
    sync: SyncMode | None = None
    ios: dict[str, Any] | None = None  # a replayed trace's IO list (mode: timed | afap | qd)
    regions: list[dict[str, Any]] | None = None


class PlanTarget(_Struct):
    path: str | None = None
    offset: float | None = None
    length: float | None = None
    direct: bool | None = None  # O_DIRECT
    verify: dict[str, Any] | None = None


class Plan(_Struct):
    """run.json `plan`: the engine plan that ran (docs/engine-boundary.md)."""

    streams: list[PlanStream] | None = None
    targets: list[PlanTarget] | None = None
    backend: str | None = None
    duration_ms: float | None = None
    warmup_ms: float | None = None
    interval_ms: float | None = None
    threads: float | None = None
    file_streams: list[dict[str, Any]] | None = None  # a file run's streams (kind "files")


class Host(_Struct):
    dir: str
    name: str
    hostname: str | None = None
    plan: Plan | None = None


class Files(_Struct):
    intervals: str | None = None
    intervals_log: str | None = None
    targets: str | None = None
    devices: str | None = None
    host: str | None = None
    file_intervals: str | None = None  # file streams' intervals per operation (Parquet)


class Workload(_Struct):
    name: str | None = None


class VerifyPass(_Struct):
    """A verification pass over a run's data (`tilemark verify --run`; docs/verification.md)."""

    started_at: str | None = None
    bytes: int | float | None = None
    seconds: float | None = None
    mbps: float | None = None
    total: int | float | None = None  # findings
    by_class: dict[str, Any] | None = None  # finding class -> count


class Device(_Struct):
    """environment.targets[].device: the disk under a target (telemetry/envinfo.py)."""

    name: str | None = None
    dev_path: str | None = None  # /dev/vda
    model: str | None = None
    vendor: str | None = None
    transport: str | None = None  # virtio_blk, nvme, sd, loop, device-mapper, md
    rotational: bool | None = None
    scheduler: str | None = None  # the active IO scheduler
    size_bytes: int | float | None = None


class EnvTarget(_Struct):
    """environment.targets[]: a target path, its filesystem and the disk beneath."""

    path: str | None = None
    kind: str | None = None  # file | directory | block | other | missing
    fs_type: str | None = None
    mount_point: str | None = None
    mount_source: str | None = None
    device: Device | None = None


class Environment(_Struct):
    """run.json `environment`: the host and targets a run ran on (telemetry/envinfo.py)."""

    hostname: str | None = None
    kernel: str | None = None  # uname -sr
    os: str | None = None
    cpu_model: str | None = None
    cpu_count: int | None = None
    cpu_usable: int | None = None  # CPUs this process may run on
    memory_bytes: int | float | None = None
    targets: list[EnvTarget] | None = None


class RunTarget(_Struct):
    """run.json `targets[]`: a target as prepared."""

    path: str | None = None
    kind: str | None = None
    # Absent (UNSET) in runs written before preconditioning was recorded, which reports tell
    # apart from null (never preconditioned).
    preconditioning: dict[str, Any] | None | msgspec.UnsetType = msgspec.UNSET  # its record


class RunDoc(_Struct):
    """run.json: one run (docs/results-schema.md)."""

    schema_version: int | None = None
    run_id: str | None = None
    kind: str | None = (
        None  # run | tiles | scale-step | repeat-step | sweep-step | replay | files ...
    )
    label: str | None = None
    status: str | None = None  # running | complete | incomplete | errors | hung | failed ...
    complete: bool | None = None
    error: str | None = None
    argv: list[str] | None = None
    started_at: str | None = None
    ended_at: str | None = None
    tilemark_version: str | None = None
    engine_version: str | None = None  # null when the engine was not importable
    process: dict[str, Any] | None = None
    workload: Workload | None = None
    plan: Plan | None = None
    targets: list[RunTarget] | None = None
    environment: Environment | None = None
    telemetry: dict[str, Any] | None = None
    summary: Summary | None = None
    result: EngineResult | None = None
    hosts: list[Host] | None = None
    files: Files | None = None
    verify_passes: list[VerifyPass] | None = None


class StepCriterion(_Struct):
    """One whole-window QoS criterion of a step's application: the instance nearest to (or
    furthest past) its limit (analysis/tiles.py criterion_json)."""

    criterion: str | None = None
    decision: str | None = None  # pass | fail | inconclusive
    passed: bool | None = None
    value: int | float | None = None
    limit: float | None = None
    unit: str | None = None  # ms | fraction | ...
    margin_pct: float | None = None  # (value - limit) / limit, in %
    ci_low: float | None = None
    ci_high: float | None = None
    ci_bounded: bool | None = None  # false: too few samples for the interval
    tile: int | None = None


class StepApp(_Struct):
    """One application of a tile study's step: metric, verdict and QoS latencies."""

    app: str | None = None
    profile: str | None = None
    verdict: str | None = None  # pass | fail | noise (failed only within noise)
    passed: bool | None = None
    worst: dict[str, Any] | None = None  # its deciding criterion (criterion_json and tile)
    failed_criteria: int | float | None = None
    criteria: list[StepCriterion] | None = None
    metric_total: float | None = None
    metric_unit: str | None = None
    worst_latency_ms: dict[str, float | None] | None = None  # criterion id -> worst instance
    iops: float | None = None
    mbps: float | None = None


class SteadyWindow(_Struct):
    """The rounds the steady-state rule held over (analysis/steady.py WindowCheck)."""

    first_round: int | None = None
    last_round: int | None = None
    mean: float | None = None
    range_pct: float | None = None
    slope_pct: float | None = None
    slope_per_round: float | None = None  # the least-squares line across the window ...
    intercept: float | None = None  # ... and its value at the window's first round


class StepSteady(_Struct):
    """A study step's steady state with --until-steady (run/tiles.py; steady-state.md)."""

    steady: bool | None = None
    rule_met: bool | None = None  # the rule held, but an open-loop rate was not reached
    rounds: int | None = None  # rounds measured
    judged_over: str | None = None  # steady window | whole run
    window: SteadyWindow | None = None
    verdict: str | None = None


class StepRun(_Struct):
    """One run of a study's step (study.json `steps[].runs`)."""

    run_id: str | None = None
    run_dir: str | None = None
    verdict: str | None = None
    passed: bool | None = None
    reason: str | None = None  # new | confirm | recheck | extend
    measured_s: float | None = None
    steady: StepSteady | None = None  # the run's steady state (format.steady_cell)


class StudyStep(Rates):
    """One run of a study's step (study.json `steps`)."""

    run_id: str | None = None
    run_dir: str | None = None
    label: str | None = None
    verdict: str | None = None
    passed: bool | None = None
    complete: bool | None = None  # the step's run ran its whole measurement
    # Tile studies: whether the host, not the storage, limited a run of the step; point
    # studies: the run's summary.tool_bound (tool_bound, reasons).
    tool_bound: bool | dict[str, Any] | None = None
    hosts: list[dict[str, Any]] | None = None  # a cluster step's hosts (summary.hosts)
    tiles: int | float | None = None
    key: float | None = None
    value: int | float | None = None
    repeat: int | None = None
    votes: dict[str, Any] | None = None
    runs: list[StepRun] | None = None
    applications: list[StepApp] | None = None
    total: Rates | None = None
    failed: list[Any] | None = None
    score: float | None = None
    within_noise: bool | None = None  # failed only within noise
    instances: list[dict[str, Any]] | None = None  # per application instance (app, metric, ...)
    steady: StepSteady | None = None  # with --until-steady; else null
    repetition: int | None = None  # repeat studies: the repetition's number
    status: str | None = None  # repeat and point studies: the run's status
    change_points: list[dict[str, Any]] | None = None  # repeat studies: the run's


class QosLimit(_Struct):
    """One QoS criterion of an application profile as a tile study records it."""

    id: str | None = None
    # Every field of analysis/qos.py Criterion: compare tells tiles apart by all of them.
    streams: list[str] | None = None
    stat: str | None = None  # p99, mean, throughput ...
    op: str | None = None  # read | write; null: both
    max_ms: float | None = None
    min_fraction: float | None = None
    per_interval: bool | None = None


class TileApp(_Struct):
    """One application of a study's tile: profile, scale knobs and QoS criteria."""

    app: str | None = None
    profile: str | None = None
    scale: dict[str, float] | None = None  # knob -> value (block applications)
    # Block applications list their criteria; file applications keep their QoS table as read.
    qos: list[QosLimit] | dict[str, Any] | None = None


class StudyTile(_Struct):
    name: str | None = None
    applications: list[TileApp] | None = None


class FirstFailure(_Struct):
    """The failed step that bounds a study's answer."""

    tiles: int | float | None = None
    value: int | float | None = None
    failed: list[str] | None = None  # criterion texts
    deciding: dict[str, Any] | None = None  # criterion_json with app and tile (margin_text)
    within_noise: bool | None = None
    host_bound: bool | None = None
    longer_window: bool | None = None
    votes: dict[str, int | float] | None = None  # pass | fail | noise -> runs


class NonMonotonic(_Struct):
    """A failed step with a passing one above it, left after re-checks."""

    failed: float | None = None
    passed_above: float | None = None


class UntilSteady(_Struct):
    """--until-steady: every step measured in rounds until steady (steady-state.md)."""

    round_s: float | None = None
    max_rounds: int | float | None = None
    metric: str | None = None


class Settle(_Struct):
    """The settling probe after a fill: how long it ran and whether read latency settled."""

    seconds: float | None = None
    steady: bool | None = None


class StudyRepeat(_Struct):
    """One repetition of a tile study: its answer fields."""

    repeat: int | None = None
    max_passing_tiles: int | float | None = None
    max_passing_value: int | float | None = None
    score_at_max: float | None = None
    first_failure: FirstFailure | None = None


class Trend(_Struct):
    """A metric's least-squares trend over the repetitions (% of the first per repetition)."""

    n: int | None = None  # repetitions fitted
    slope_pct: float | None = None
    slope_ci_pct: list[float | None] | None = None  # 95% interval of slope_pct
    last_vs_first_pct: float | None = None


class BeforeAfter(_Struct):
    """Two repetitions: the change from before to after with its 95% interval."""

    change_pct: float | None = None
    ci_pct: list[float | None] | None = None
    beyond_noise: bool | None = None
    verdict: str | None = None


class RepeatMetric(_Struct):
    """One metric of a repeat study over its complete repetitions (study/repeat.py decay)."""

    metric: str | None = None  # IOPS, MB/s, read mean ms, ...
    scope: str | None = None  # total, a stream or an application
    unit: str | None = None
    better: str | None = None  # higher | lower
    headline: bool | None = None  # decides the study's verdict
    values: list[float | None] | None = None  # per complete repetition
    change_pct: list[float | None] | None = None  # change from the first repetition
    trend: Trend | None = None
    before_after: BeforeAfter | None = None
    verdict: str | None = None


class PointsWorkload(_Struct):
    """What every point of a sweep, matrix or curve shares."""

    duration: float | None = None  # seconds measured per point
    warmup: float | None = None
    interval: float | None = None
    backend: str | None = None
    direct: bool | None = None


class SweepAxes(_Struct):
    """The lists a sweep crosses."""

    bs: list[int | float] | None = None  # bytes
    qd: list[int | float] | None = None
    read: list[float] | None = None  # read %
    region: list[str] | None = None  # as given


class StudyDoc(_Struct):
    """study.json: a study and its steps (docs/studies.md); the kind says which study."""

    study_id: str | None = None
    kind: str | None = None  # scale | knob | repeat | sweep | matrix | curve
    label: str | None = None
    complete: bool | None = None
    started_at: str | None = None
    ended_at: str | None = None
    steps: list[StudyStep] | None = None
    tile: StudyTile | None = None
    repeats: list[StudyRepeat] | None = None
    repeat: int | None = None
    first_failure: FirstFailure | None = None
    settle: Settle | None = None
    runs_used: int | None = None
    # Tile studies (scale, knob): how every step ran.
    duration: float | None = None  # seconds measured per step
    max_duration: float | None = None  # up to this while a step is undecided
    warmup: float | None = None
    qos_interval_s: float | None = None
    until_steady: UntilSteady | None = None
    confirm_runs: int | float | None = None  # runs that confirm a failure
    mode: str | None = None  # scale: linear | search; repeat: workload | tiles
    tile_counts: list[Any] | None = None  # scale: the tile counts
    knob: str | None = None  # knob studies: the knob, where it starts and its range
    knob_start: float | None = None
    knob_range: list[float] | None = None
    knob_precision_pct: float | None = None
    tiles_per_step: int | float | None = None
    # The answer of a tile study: the median over repeats, each repeat's, how often each came.
    max_passing_tiles: int | float | None = None
    max_passing_value: int | float | None = None
    max_passing_tiles_runs: list[int | float | None] | None = None
    max_passing_value_runs: list[int | float | None] | None = None
    distribution: dict[str, int | float] | None = None  # answer (as text) -> repeats
    stable: bool | None = None  # every repeat found the same answer
    score_at_max: float | None = None
    host_bound: bool | None = None
    inconclusive_at: float | None = None
    limited_by_range: bool | None = None  # the answer is the top of the range and passed
    tool_bound_steps: list[int | float] | None = None  # steps with tool-bound runs
    non_monotonic: list[NonMonotonic] | None = None
    stopped: str | None = None  # why a stopped study ended early (a failing --between, a signal)
    # Repeat studies: how they ran and the decay verdict.
    repetitions: int | None = None
    pause_s: float | None = None
    between: str | None = None  # the command run between repetitions
    workload: str | PointsWorkload | None = None  # repeat: its name; points: what they share
    noise_floor_pct: float | None = None
    verdict: str | None = None  # stable | decaying | improving | inconclusive
    deciding_metric: str | None = None
    tool_bound_repetitions: list[int] | None = None
    repetitions_complete: list[int] | None = None
    metrics: list[RepeatMetric] | None = None
    # Sweeps, matrices and curves: the points table (one row per point; docs/studies.md) ...
    points: list[dict[str, Any]] | None = None
    # ... a sweep's axes ...
    axes: SweepAxes | None = None
    varied: list[str] | None = None  # the axes with more than one value
    pattern: Any = None
    # ... a matrix's definition and its [large][small] matrices ...
    small_levels: list[int | float] | None = None  # small-IO queue depths
    large_levels: list[int | float] | None = None  # large streams
    small_bs: int | float | None = None
    small_read: float | None = None
    large_bs: int | float | None = None
    large_read: float | None = None
    large_qd: int | float | None = None
    cells_measured: int | None = None
    small_iops: list[list[float | None]] | None = None
    large_mbps: list[list[float | None]] | None = None
    small_latency_ms: list[list[float | None]] | None = None
    # ... and a curve's definition and answer.
    loads_pct: list[float] | None = None
    slo: str | None = None  # p99<=1ms,...
    slo_precision_pct: float | None = None
    knee_rule: str | None = None
    max_iops: float | None = None
    qd_at_max: int | float | None = None
    slo_iops: float | None = None
    knee: dict[str, Any] | None = None  # the point the knee is at (iops, offered_pct, ...)


# -----------------------------------------------------------------------------------------------
# Reading


class DocumentError(ValueError):
    """A document that is not JSON, or whose fields do not have the types readers rely on;
    the message is one sentence naming the first wrong field."""


_TYPE_NAMES = {
    "object": "an object",
    "array": "a list",
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "null": "null",
}


def _sentence(e: msgspec.ValidationError) -> str:
    """msgspec's 'Expected `object`, got `str` - at `$.summary.total`' as 'field summary.total
    is a string, not an object'."""
    text = str(e)
    where = text.rsplit(" - at `$", 1)[1].rstrip("`") if " - at `$" in text else ""
    where = where.lstrip(".").replace("][", "].[") or "(the document)"
    head = text.split(" - at ", 1)[0]
    if head.startswith("Expected `") and "`, got `" in head:
        want, got = head[len("Expected `") :].split("`, got `", 1)
        kinds = [w.strip() for w in want.split("|") if w.strip() != "null"] or ["null"]
        if "int" in kinds and "float" in kinds:  # int | float: a count kept as written
            kinds.remove("int")
        want = " or ".join(_TYPE_NAMES.get(w, w) for w in kinds)
        got = got.rstrip("`")
        got = "a number" if got in ("int", "float") else _TYPE_NAMES.get(got, got)
        return f"field {where} is {got}, not {want}"
    return f"field {where}: {head}"


def _decode(data: bytes | str | dict[str, Any], kind: type) -> Any:
    try:
        if isinstance(data, dict):
            return msgspec.convert(data, kind)
        return msgspec.json.decode(data, type=kind)
    except msgspec.ValidationError as e:
        raise DocumentError(_sentence(e)) from None
    except msgspec.DecodeError as e:
        raise DocumentError(f"not JSON ({e})") from None
    except RecursionError:
        raise DocumentError("nested too deep to be a tilemark document") from None


def read_run(data: bytes | str | dict[str, Any]) -> RunDoc:
    """A run.json document (bytes, text, or an already migrated dict), typed; DocumentError."""
    return _decode(data, RunDoc)


def read_study(data: bytes | str | dict[str, Any]) -> StudyDoc:
    """A study.json document, typed; DocumentError naming the first wrong field."""
    return _decode(data, StudyDoc)


def read_summary(data: dict[str, Any] | None) -> Summary | None:
    """A run's summary as the run pipeline holds it (a dict), typed; DocumentError."""
    return None if data is None else _decode(data, Summary)


def run_problem(doc: bytes | str | dict[str, Any]) -> str | None:
    """The first field of a run.json document (its text or parsed) that readers cannot use, or
    None."""
    try:
        read_run(doc)
    except DocumentError as e:
        return str(e)
    return None


def study_problem(doc: dict[str, Any]) -> str | None:
    """The first field of a study.json document that readers cannot use, or None."""
    try:
        read_study(doc)
    except DocumentError as e:
        return str(e)
    return None


# -----------------------------------------------------------------------------------------------
# docs/results-schema.md, the typed fields section

_BEGIN = "<!-- typed fields: generated by `python -m tilemark.store.results`; do not edit -->"
_END = "<!-- end of the typed fields -->"
DOCUMENTS = (RunDoc, StudyDoc)


def _classes() -> list[type]:
    """Every class a document reaches, in the order a reader meets them."""
    import typing

    seen: list[type] = []

    def visit(kind: type) -> None:
        if kind in seen:
            return
        seen.append(kind)
        for hint in typing.get_type_hints(kind).values():
            for arg in _leaves(hint):
                if isinstance(arg, type) and issubclass(arg, _Struct):
                    visit(arg)

    for doc in DOCUMENTS:
        visit(doc)
    return seen


def _leaves(hint: Any) -> list[Any]:
    import typing

    args = typing.get_args(hint)
    if not args:
        return [hint]
    return [leaf for a in args for leaf in _leaves(a)]


def _type_text(hint: Any) -> str:
    """`list[StreamSummary]`, `dict[str, Any]`, `float` (None left out: every field may be)."""
    import typing

    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if args and origin in (typing.Union, __import__("types").UnionType):
        shown = [a for a in args if a not in (type(None), msgspec.UnsetType)]  # absent is None
        return " or ".join(_type_text(a) for a in shown)
    if args:
        return f"{getattr(origin, '__name__', origin)}[{', '.join(_type_text(a) for a in args)}]"
    if hint is Any:
        return "Any"
    return getattr(hint, "__name__", str(hint))


def _field_notes() -> dict[tuple[str, str], str]:
    """(class, field) -> the comment written after the field in this file."""
    import inspect
    import re

    notes: dict[tuple[str, str], str] = {}
    current = None
    for line in inspect.getsource(__import__(__name__, fromlist=["x"])).splitlines():
        m = re.match(r"class (\w+)\(", line)
        if m:
            current = m.group(1)
            continue
        m = re.match(r"    (\w+): [^#]+#\s*(.+)$", line)
        if current and m:
            notes[(current, m.group(1))] = m.group(2).strip()
    return notes


def markdown() -> str:
    """The generated section of docs/results-schema.md: every class and field readers use."""
    import typing

    notes = _field_notes()
    lines = [
        _BEGIN,
        "",
        "## Typed fields (store/results.py)",
        "",
        "The fields tilemark's readers rely on, with their types; a document whose field has",
        "another type is `damaged`, named in one sentence. Every field may be absent or null.",
        "`dict` fields are kept as read (their keys are described above).",
    ]
    for kind in _classes():
        doc = (kind.__doc__ or "").strip().splitlines()[0] if kind.__doc__ else ""
        lines += ["", f"### {kind.__name__}", ""]
        if doc:
            lines += [doc, ""]
        lines += ["| field | type | note |", "|---|---|---|"]
        for name, hint in typing.get_type_hints(kind).items():
            note = notes.get((kind.__name__, name), "").replace("|", "\\|")
            lines.append(f"| `{name}` | `{_type_text(hint)}` | {note} |")
    lines += ["", _END]
    return "\n".join(lines) + "\n"


def update_docs(text: str) -> str:
    """docs/results-schema.md with its generated section replaced (appended when missing)."""
    section = markdown()
    if _BEGIN in text and _END in text:
        head, rest = text.split(_BEGIN, 1)
        _, tail = rest.split(_END, 1)
        return head + section.rstrip("\n") + tail
    return text.rstrip("\n") + "\n\n" + section


if __name__ == "__main__":
    import sys
    from pathlib import Path

    from tilemark.store import results as module  # the classes under their own names

    docs = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    if docs is None:
        sys.stdout.write(module.markdown())
    else:
        docs.write_text(module.update_docs(docs.read_text()))
