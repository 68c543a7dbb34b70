"""Every option of tilemark's workload and study commands, once (like fio's options.c).

An entry names the option's key (the TOML key and the Python name), its command-line flag, its
scope, the commands that take the flag, a parser for its syntax, the default shown to users and
its help. From this table come: the keys a workload file and a profile stream accept
(`RUN_KEYS`, `STREAM_KEYS`), the typer parameters of `run` and `scale` (cli/params.py), the
check that rejects a flag given to a command or mode it does not apply to, and docs/options.md
(`python -m tilemark.options`).

Scopes:
- `run`: run-wide workload settings (top level of a workload file).
- `stream`: one stream's IO (a `[[stream]]` or `[defaults]` table; the flags describe one stream).
- `tile`: tile runs (`run --tiles N`) and scaling studies.
- `study`: how a study chooses, repeats and judges its steps.
- `steady`: `--until-steady` on `run`, `run --tiles` and `scale` (rounds until the SNIA PTS
  steady-state rule holds; for a study, in every step).
- `safety`, `output`: what may be written, where results go and how they are printed.
- `cluster`: which hosts run the plan (docs/cluster.md).

Modes (`modes`): `run` is `tilemark run` with a workload, `tiles` is `tilemark run --tiles N`,
`scale` is `tilemark scale`, `repeat` is `tilemark repeat N` (which also takes every option of
`run` and `tiles`: each repetition is such a run); `sweep`, `matrix` and `curve` are the studies
of one workload's parameters (study/points.py, study/curve.py); `precondition` is
`tilemark precondition`.

Parsers (parsers.py) check one value's syntax and raise UsageError with one sentence that names
the field (`label`) and what is allowed. Checks that involve several fields live in plan.py.
typed.py turns the values a command was given into frozen, typed options, once, at the edge.

Longer than 600 lines because it is the table itself: one entry per option, read as data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tilemark.options.parsers import (
    ARRIVALS,
    BACKENDS,
    CURSORS,
    MAX_COPIES,
    MAX_ERRORS,
    MAX_PASSES,
    MAX_POLL_US,
    MAX_QD,
    MAX_THREADS,
    RW_MODES,
    SPREADS,
    STEADY_METRICS,
    Parser,
    choice,
    int_range,
    parse_batch,
    parse_bool,
    parse_bs,
    parse_burst,
    parse_command,
    parse_compress,
    parse_cpus,
    parse_dedupe,
    parse_dedupe_set,
    parse_flow,
    parse_interval,
    parse_io_timeout,
    parse_label,
    parse_max_rounds,
    parse_name,
    parse_path,
    parse_pattern,
    parse_priority,
    parse_priority_share,
    parse_run_duration,
    parse_seed,
    parse_skip,
    parse_stream_names,
    parse_sync,
    parse_target_names,
    positive_duration,
    positive_size,
    text,
)
from tilemark.options.placement import parse_priority_by_size, parse_zones
from tilemark.units import (
    parse_byte_rate,
    parse_duration,
    parse_iops,
    parse_percent,
    parse_size,
)

# -----------------------------------------------------------------------------------------------
# The table


@dataclass(frozen=True)
class Option:
    """One option: where it may appear and how its value is read."""

    key: str  # TOML key and Python name
    scope: str  # run | stream | tile | study | safety | output
    help: str
    flag: str | None = None  # None: workload/profile files only
    metavar: str | None = None
    modes: frozenset[str] = frozenset()  # run | tiles | scale: where the flag is accepted
    toml: bool = False  # a key of workload files (top level for run scope, streams for stream)
    profile: bool = True  # stream scope: also a key of profile streams
    parse: Parser = text
    default: str | None = None  # as shown in help and docs
    kind: str = "value"  # value | switch (--x / --no-x or --x) | list (repeatable) | int
    off_flag: str | None = None  # switch: the negative flag, e.g. --no-report
    dest: str | None = None  # the CLI parameter name when `key` is taken by another scope

    @property
    def param(self) -> str:
        """The Python parameter name of the flag."""
        return self.dest or self.key

    def help_text(self) -> str:
        if self.default is None:
            return self.help
        return f"{self.help.rstrip('.')} (default {self.default})."


RUN, TILES, SCALE, REPEAT = "run", "tiles", "scale", "repeat"
SWEEP, MATRIX, CURVE = "sweep", "matrix", "curve"
POINT_STUDIES = frozenset({SWEEP, MATRIX, CURVE})  # studies of one workload's parameters
PRECONDITION = "precondition"
ALL = frozenset({RUN, TILES, SCALE}) | POINT_STUDIES
MODES = (RUN, TILES, SCALE, REPEAT, SWEEP, MATRIX, CURVE, PRECONDITION)
WORKLOAD = frozenset({RUN})
TILE_MODES = frozenset({TILES, SCALE})
STEADY_MODES = WORKLOAD | TILE_MODES  # run, run --tiles and every step of scale


def _o(key: str, scope: str, help: str, **kw: Any) -> Option:
    modes = kw.pop("modes", frozenset())
    return Option(key, scope, help, modes=frozenset(modes), **kw)


OPTIONS: tuple[Option, ...] = (
    # -- run-wide -------------------------------------------------------------------------------
    _o("name", "run", "Workload name (default: the workload file's stem).", toml=True,
       parse=parse_name),
    _o("default", "run", "Run the built-in mixed workload (OLTP, log, DSS, lookup, web; 5s "
       "warm-up + 30s) on a file of min(2 GiB, 10% of free space).", flag="--default",
       modes=WORKLOAD, kind="switch", dest="use_default"),
    _o("target", "run", "File (created and filled if missing) or block device; repeat it for "
       "several targets (streams spread over all of them unless they name theirs). NAME=PATH "
       "names a target (default: the file name without its extension, e.g. loop3). In a tile run "
       "a path with {tile} gives each tile a file of its own (wal={tile}.dat).",
       flag="--target", metavar="[NAME=]PATH", modes=ALL, toml=True, kind="list"),
    _o("size", "run", "Data area to use or create, e.g. 1g (binary units).", flag="--size",
       metavar="SIZE", modes=WORKLOAD | POINT_STUDIES | {PRECONDITION}, toml=True,
       parse=positive_size,
       default="the existing data area, else min(2 GiB, 10% of free space)"),
    _o("duration", "run", "Measured time after warm-up: 60, 90s, 2m. A workload whose streams "
       "all end by themselves (io_size or passes, or stop) and that gives no duration runs "
       "until every stream is done.", flag="--duration",
       metavar="TIME", modes=ALL, toml=True, parse=parse_run_duration,
       default="60s"),
    _o("warmup", "run", "Warm-up before measuring, excluded from results.", flag="--warmup",
       metavar="TIME", modes=ALL, toml=True, parse=parse_duration,
       default="0; tile runs and scale steps 10s"),
    _o("interval", "run", "Snapshot interval.", flag="--interval", metavar="TIME", modes=ALL,
       toml=True, parse=parse_interval, default="1s"),
    _o("backend", "run", "IO backend: uring, psync or null.", flag="--backend", metavar="NAME",
       modes=ALL, toml=True, parse=choice(BACKENDS), default="uring"),
    _o("threads", "run", "Engine threads.", flag="--threads", metavar="N", modes=ALL, toml=True,
       parse=int_range(1, MAX_THREADS), default="min(CPUs, streams)"),
    _o("cpus", "run", "Pin the engine threads to these CPUs, thread i to the i-th in turn, as "
       "fio's cpus_allowed (with cpus_allowed_policy=split): 0-3,6. Threads default to one per "
       "listed CPU. Unpinned, the kernel places them, and at low queue depth where it puts a "
       "thread beside the device's completion work can decide the IOPS (bench/README.md, "
       "'QD1 asleep: where the thread runs').", flag="--cpus", metavar="LIST", modes=ALL,
       toml=True, parse=parse_cpus, default="none (the kernel places the threads)"),
    _o("sqpoll", "run", "uring: give each engine thread's ring a kernel thread that polls its "
       "submission queue (IORING_SETUP_SQPOLL, fio's sqthread_poll): submitting costs no system "
       "call while it polls (it sleeps after 1 s without requests), at the price of that "
       "thread's CPU, counted in the run's CPU per IO.", flag="--sqpoll", modes=ALL,
       kind="switch", toml=True, parse=parse_bool, default="off"),
    _o("direct", "run", "O_DIRECT IO (false: use the page cache).", toml=True, parse=parse_bool,
       default="true"),
    _o("buffered", "run", "Use the page cache (no O_DIRECT); sets direct = false.",
       flag="--buffered", modes=ALL, kind="switch"),
    _o("keep_cache", "run", "Buffered IO: start with the target's pages as the page cache holds "
       "them. By default they are written back and dropped before the run, as fio does "
       "(invalidate=1), so a run does not measure what an earlier one left cached.",
       flag="--keep-cache", modes=WORKLOAD, kind="switch", toml=True, parse=parse_bool,
       default="off"),
    _o("fadvise", "run", "Buffered IO: advise the kernel of each target's access pattern when "
       "it is opened, as fio does by default (fadvise_hint=1): pattern gives POSIX_FADV_RANDOM "
       "when every stream on the target is random (readahead off) and POSIX_FADV_SEQUENTIAL "
       "when every one is sequential (readahead doubled); none leaves readahead to the kernel.",
       toml=True, parse=choice(("none", "pattern")), default="none"),
    _o("poll_us", "run", "uring: spin up to US microseconds for completions before sleeping; "
       "0 spins adaptively, only while it catches completions that sleeping would wake late "
       "for (bench/README.md).", flag="--poll-us", metavar="US", modes=ALL, toml=True,
       parse=int_range(0, MAX_POLL_US), default="0 (adaptive)"),
    _o("seed", "run", "Run seed; stream seeds derive from it.", flag="--seed", metavar="N",
       modes=ALL, toml=True, parse=parse_seed, default="1"),
    _o("max_errors", "run", "Stop the run once more than N IOs have failed (with --verify, "
       "data findings count too); -1 never stops. Any failed IO fails the run (exit 1); like "
       "fio's default and Jetstress, the first one ends it.", flag="--max-errors", metavar="N",
       modes=ALL, toml=True,
       parse=int_range(-1, MAX_ERRORS), default="0"),
    _o("io_timeout", "run", "An IO outstanding longer than this is hung: the run stops and is "
       "stored as hung, naming the IO; 0 never.", flag="--io-timeout", metavar="TIME",
       modes=ALL, toml=True, parse=parse_io_timeout, default="30s"),
    # -- one stream -----------------------------------------------------------------------------
    _o("name", "stream", "Stream name.", flag="--name", metavar="NAME", modes=WORKLOAD,
       toml=True, parse=parse_name, default="the rw mode", dest="stream_name"),
    _o("rw", "stream", "read, write, randread, randwrite, rw/readwrite (sequential mix), randrw.",
       flag="--rw", metavar="MODE", modes=WORKLOAD | {CURVE}, toml=True,
       parse=choice(tuple(RW_MODES)),
       default="randread"),
    _o("read", "stream", "Read percentage of a mix.", flag="--read", metavar="PCT",
       modes=WORKLOAD | {CURVE}, toml=True, parse=parse_percent, default="50"),
    _o("bs", "stream", "IO size or weighted mix '512:22,1k:15,4k:23'.", flag="--bs",
       metavar="SIZE[:W,...]", modes=WORKLOAD | {CURVE}, toml=True, parse=parse_bs, default="4k"),
    _o("pattern", "stream", "Random placement: uniform, zipf:1.2, hotspot:90/10, or zones from "
       "the region's start as fio's zoned, zoned:50/5:30/15:20/80 (IO%/REGION% each).",
       flag="--pattern", metavar="PATTERN", modes=WORKLOAD | {SWEEP, CURVE}, toml=True,
       parse=parse_pattern,
       default="uniform"),
    _o("cursors", "stream", "Sequential position of a read/write mix: shared (every IO continues "
       "where the last one ended) or per-op (reads continue reads and writes continue writes, "
       "each from the region's start, as fio's rw=rw).", toml=True, parse=choice(CURSORS),
       default="shared"),
    _o("invalidate", "stream", "Buffered IO: when the stream's cached pages are written back and "
       "dropped: start (before the run, unless keep_cache) or pass (also each time the stream "
       "has done its region's length, as fio's time_based jobs do between passes; a block "
       "device is flushed whole, a file's region is dropped).", toml=True,
       parse=choice(("start", "pass")), default="start"),
    _o("random", "stream", "Share of IOs placed randomly, the rest sequential.", flag="--random",
       metavar="PCT", modes=WORKLOAD, toml=True, parse=parse_percent,
       default="100 for rand*, else 0"),
    _o("qd", "stream", "Queue depth 1..4096 (closed loop: IOs in flight; open loop: cap).",
       flag="--qd", metavar="N", modes=WORKLOAD, toml=True, parse=int_range(1, MAX_QD),
       default="1 closed loop, 64 open loop"),
    _o("rate", "stream", "Open loop at this IO rate, e.g. 4000.", flag="--rate", metavar="IOPS",
       modes=WORKLOAD, toml=True, parse=parse_iops),
    _o("rate_bytes", "stream", "Open loop at this byte rate: 100MB/s (10^6), 100MiB/s or 100m "
       "(binary).", flag="--rate-bytes", metavar="RATE", modes=WORKLOAD, toml=True,
       parse=parse_byte_rate),
    _o("arrival", "stream", "closed, constant or poisson. Open-loop streams start out of step: "
       "each one's first IO is due at a random point of its first gap.", flag="--arrival",
       metavar="KIND",
       modes=WORKLOAD | {CURVE}, toml=True, parse=choice(ARRIVALS),
       default="closed without a rate, constant with one"),
    _o("burst", "stream", "Issue IOS IOs, wait for them, pause: 10/5ms.", flag="--burst",
       metavar="IOS/DELAY", modes=WORKLOAD, toml=True, parse=parse_burst),
    _o("sync", "stream", "Write sync: none, dsync, fsync, fsync:N, fdatasync:N, or "
       "fdatasync:group (group commit: writes due while one is written and synced join the "
       "next, as a database's log).",
       flag="--sync", metavar="MODE", modes=WORKLOAD, toml=True, parse=parse_sync,
       default="none"),
    _o("batch", "stream", "Open loop: IOs arrive in batches of this mean size (geometric), "
       "each batch at once, at the same rate: bursty arrivals (inter-arrival CV about "
       "sqrt(2 * batch - 1)).", flag="--batch", metavar="N", modes=WORKLOAD, toml=True,
       parse=parse_batch, default="1"),
    _o("batch_gap", "stream", "With batch: the IOs of a batch come this far apart on average "
       "(exponential for poisson, fixed for constant) instead of at once, and the gap after a "
       "batch shrinks to keep the rate, so it must stay below batch / (batch - 1) mean gaps. "
       "Learned profiles fit it: a checkpointer's runs of writes, a device's service time "
       "apart.", flag="--batch-gap", metavar="DURATION", modes=WORKLOAD, toml=True,
       parse=parse_duration, default="0"),
    _o("skip", "stream", "Where a sequential IO starts: SIZE or LO:HI bytes after the previous "
       "one's end (log-uniform between LO and HI); negative overlaps it (a log rewriting its "
       "last page: -8k) or goes backwards (-8k with 4k IOs, fio's rw=read:-8k), positive skips "
       "ahead (a sorted writeback sweep: 16k:4m; fio's rw=write:16k). A region's first IO is "
       "at its start; before the start the stream continues from the end plus the skip, past "
       "the end from the start.",
       flag="--skip", metavar="LO[:HI]", modes=WORKLOAD, toml=True, parse=parse_skip,
       default="0 (contiguous)"),
    _o("run_length", "stream", "IOs per random offset: a random IO starts a run of N, the "
       "others each where the previous one ended (plus skip), as fio's rw=randread:N; at the "
       "region's end a run continues from its start.", toml=True, parse=int_range(1, 1 << 32),
       default="1 (every random IO drawn)"),
    _o("priority", "stream", "IO priority of the stream's reads and writes, ionice's classes: "
       "rt/LEVEL, be/LEVEL (0 highest to 7), idle or none; io_uring carries it in every IO, "
       "psync sets it on its IO thread (ioprio_set). rt needs root (CAP_SYS_ADMIN).",
       toml=True, parse=parse_priority, default="none (the thread's own)"),
    _o("priority_share", "stream", "PCT:CLASS[/LEVEL]: that share of the stream's IOs, drawn "
       "one by one, at another priority (fio's cmdprio_percentage): 20:rt/0.", toml=True,
       parse=parse_priority_share, default="none"),
    _o("priority_by_size", "stream", "OP:SIZE:PCT:CLASS[/LEVEL][+HINT],...: that share of the "
       "reads or writes of that size at that priority (and priority hint, e.g. a command "
       "duration limit), the rest at the stream's (fio's cmdprio_bssplit): "
       "read:64k:25:rt/1,read:64k:75:idle.", toml=True, parse=parse_priority_by_size,
       default="none"),
    _o("write_bs", "stream", "Size or weighted mix of the stream's writes when it differs from "
       "its reads' (bs), as fio's bs=4k,64k.", toml=True, parse=parse_bs,
       default="bs"),
    _o("zones", "stream", "Strided zones of a sequential stream, SIZE:SKIP or "
       "SIZE:RANGE:SKIP: SIZE bytes in a zone of RANGE bytes (default SIZE) from the region's "
       "start, then the next zone RANGE + SKIP further, back at the start past the region's end "
       "(fio's zonemode=strided): 256m:2g.", toml=True, parse=parse_zones, default="none"),
    _o("writeback", "stream", "Writes go through the page cache uncached (RWF_DONTCACHE, "
       "Linux 6.14+): the kernel writes them back at once, asynchronously, as an application's "
       "page-cache writeback reaches the device.", toml=True, parse=parse_bool,
       default="false"),
    _o("offset", "stream", "Region start within the data area.", flag="--offset", metavar="SIZE",
       modes=WORKLOAD, toml=True, profile=False, parse=parse_size, default="0"),
    _o("length", "stream", "Region length.", flag="--length", metavar="SIZE", modes=WORKLOAD,
       toml=True, profile=False, parse=positive_size, default="to the end of the data area"),
    _o("align", "stream", "Offset alignment.", flag="--align", metavar="SIZE", modes=WORKLOAD,
       toml=True, parse=positive_size, default="the O_DIRECT alignment, at least 4k"),
    _o("compress", "stream", "Share of every written block that compresses away (zeros), 0..99; "
       "measured with zstd and lz4 at run start (docs/verification.md).", flag="--compress",
       metavar="PCT", modes=WORKLOAD | POINT_STUDIES, toml=True, parse=parse_compress, default="0"),
    _o("copies", "stream", "Identical copies of the stream (Iometer workers), named NAME@0, "
       "NAME@1, ...", flag="--copies", metavar="N", modes=WORKLOAD, toml=True,
       parse=int_range(1, MAX_COPIES), default="1"),
    _o("seed", "stream", "Stream seed (copies add their index).", toml=True, profile=False,
       parse=parse_seed, default="derived from the run seed"),
    # -- a stream's targets and phase (many targets per run; phases within a run) ---------------
    _o("target", "stream", "The target (a name of the workload's targets) or list of targets the "
       "stream's IOs go to.", toml=True, profile=False, parse=parse_target_names,
       default="every target of the workload"),
    _o("spread", "stream", "How a stream over several targets spreads its IOs: uniform (each "
       "target equally often, as Orion over its LUNs) or size (in proportion to the targets' "
       "data areas).", flag="--spread", metavar="HOW", modes=WORKLOAD | POINT_STUDIES, toml=True,
       profile=False, parse=choice(SPREADS), default="uniform"),
    _o("start", "stream", "Run time (warm-up included, as the live view and the report's time "
       "axis count it) at which the stream starts issuing IO: 5m.", flag="--start",
       metavar="TIME", modes=WORKLOAD, toml=True, parse=parse_duration, default="0"),
    _o("stop", "stream", "Run time at which the stream stops issuing IO: 20m.", flag="--stop",
       metavar="TIME", modes=WORKLOAD, toml=True, parse=positive_duration,
       default="the end of the run"),
    _o("after", "stream", "A stream (or list of streams) defined before this one that must "
       "all have ended, by their io_size, passes or stop (or a [[steadystate]] rule ending "
       "them), before this stream starts: fio's stonewall. Its start and stop then count from "
       "that moment, and so does its rate.", toml=True, profile=False,
       parse=parse_stream_names, default="none (start at start)"),
    _o("flow", "stream", "GROUP:WEIGHT: the closed-loop streams of a flow group issue IOs in "
       "the ratio of their weights, on any engine thread (fio's flow_id and flow): pace:8 and "
       "pace:1 issue 8 IOs to 1. A stream ahead waits for its IOs in flight, then flow_sleep, "
       "and looks again.", toml=True, profile=False, parse=parse_flow, default="none"),
    _o("flow_sleep", "stream", "How long a stream ahead of its flow group waits (after its IOs "
       "in flight completed) before it looks again (fio's flow_sleep): 1ms; 0 looks again at "
       "once.", toml=True, profile=False, parse=parse_duration, default="0"),
    _o("on_end_stop", "stream", "A stream (or list of streams) stopped when this one ends, for "
       "any reason (fio's exitall); a stream stopped before it started never starts.",
       toml=True, profile=False, parse=parse_stream_names, default="none"),
    _o("on_end_only_started", "stream", "on_end_stop stops only the streams that have started "
       "by then; those still waiting (after, start) run later (fio's exit_what=stonewall).",
       toml=True, profile=False, parse=parse_bool, default="false"),
    _o("io_size", "stream", "Bytes of IO (reads and writes) after which the stream stops "
       "issuing, like fio's io_size: 10g (times passes when both are given).",
       flag="--io-size", metavar="SIZE", modes=WORKLOAD, toml=True, profile=False,
       parse=positive_size, default="no limit"),
    _o("passes", "stream", "Passes over the stream's region after which it stops issuing "
       "(region length x passes bytes, or io_size x passes), like fio's size and loops.",
       flag="--passes", metavar="N", modes=WORKLOAD, toml=True, profile=False,
       parse=int_range(1, MAX_PASSES), default="no limit"),
    # -- data verification and reduction (docs/verification.md) ---------------------------------
    _o("verify", "run", "Write verifiable blocks (target, offset, generation, checksums) and "
       "check every read of a block whose content is known; a finding (corrupt, misdirected, "
       "stale, torn, unexpected) fails the run. Writing runs keep a journal for `tilemark "
       "verify RUN`.", flag="--verify", modes=ALL, kind="switch", toml=True, parse=parse_bool,
       default="off"),
    _o("dedupe", "stream", "Dedupe ratio of write data: blocks written per distinct 4 KiB "
       "block, 1..100 (2 or 2:1: half the blocks are copies); measured at run start.",
       flag="--dedupe", metavar="RATIO", modes=WORKLOAD | POINT_STUDIES, toml=True,
       parse=parse_dedupe, default="1"),
    _o("dedupe_set", "stream", "The pool dedupe copies are drawn from, as a percentage of the "
       "stream's region (fio's dedupe working set), at most 100 / dedupe.", toml=True,
       parse=parse_dedupe_set, default="about 1/64 of the copies"),
    _o("dedupe_global", "stream", "Streams that set it draw their dedupe copies from one "
       "pool (fio's dedupe_global): the ratio holds over what they write together, not "
       "on each target alone.", toml=True, parse=parse_bool, default="false"),
    _o("host", "stream", "Cluster runs: the host (worker name or host name) this stream runs "
       "on; unpinned streams run on every host.", toml=True, profile=False, parse=parse_path),
    # -- tiles ----------------------------------------------------------------------------------
    _o("tiles", "tile", "Run N tiles of emulated applications (the default tile, or --tile "
       "FILE) instead of a workload.", flag="--tiles", metavar="N", modes={RUN, TILES},
       kind="int", dest="tile_count"),
    _o("tile", "tile", "Tile file: which applications a tile holds; or a profile (name or "
       "file) as a tile of that one application.", flag="--tile",
       metavar="TILE.toml", modes={RUN, TILES}, dest="tile_file"),
    _o("capacity", "tile", "Space the tiles may use on the target, split over the largest tile "
       "count.", flag="--capacity", metavar="SIZE", modes=TILE_MODES, parse=positive_size,
       default="min(2 GiB, 10% of free space)"),
    _o("set", "tile", "Override a profile knob or QoS limit, e.g. mail.mailboxes=2000 or "
       "oltp.qos.read_avg.max_ms=5 (repeatable).", flag="--set", metavar="APP.KNOB=VALUE",
       modes=TILE_MODES, kind="list", dest="sets"),
    _o("qos_interval", "tile", "Window for per-interval QoS criteria.", flag="--qos-interval",
       metavar="TIME", modes=TILE_MODES, parse=positive_duration,
       default="60s, at most a quarter of the run"),
    _o("max_duration", "tile", "Measure longer, up to TIME, while a QoS criterion's confidence "
       "interval straddles its limit.", flag="--max-duration", metavar="TIME",
       modes=TILE_MODES, parse=positive_duration,
       default="scale: 4x --duration; run --tiles: --duration"),
    # -- studies --------------------------------------------------------------------------------
    _o("counts", "study", "Tile counts: a range 1..8 or a list 1,2,4,8.", flag="--tiles",
       metavar="RANGE", modes={SCALE}, default="1..8"),
    _o("search", "study", "Find the largest passing count by doubling, then bisection.",
       flag="--search", modes={SCALE}, kind="switch"),
    _o("confirm", "study", "Linear search: failing counts in a row after the first that end "
       "the study.", flag="--confirm", metavar="N", modes={SCALE}, parse=int_range(0, 64),
       default="1"),
    _o("confirm_runs", "study", "Re-runs of a failing step before its failure counts (the "
       "majority of its runs decides).", flag="--confirm-runs", metavar="N", modes={SCALE, CURVE},
       parse=int_range(0, 16), default="1"),
    _o("repeat", "study", "Run the whole study N times and report the distribution of its "
       "answer.", flag="--repeat", metavar="N", modes={SCALE} | POINT_STUDIES,
       parse=int_range(1, 100),
       default="1"),
    _o("knob", "study", "Search this numeric profile knob (APP.KNOB, e.g. mail.mailboxes) "
       "instead of the tile count: the largest value at which every application meets QoS.",
       flag="--knob", metavar="APP.KNOB", modes={SCALE}),
    _o("knob_range", "study", "Values the knob search may try, LOW..HIGH.", flag="--knob-range",
       metavar="LOW..HIGH", modes={SCALE}, default="the profile value / 64 .. x 1024"),
    _o("knob_precision", "study", "Stop the knob search when the passing and failing values "
       "are this close (percent).", flag="--knob-precision", metavar="PCT", modes={SCALE},
       parse=parse_percent, default="5"),
    _o("settle", "study", "After filling the target, probe read latency until it is steady "
       "before the first step.", flag="--settle", off_flag="--no-settle", modes={SCALE},
       kind="switch", default="on"),
    _o("settle_max", "study", "Longest settling probe.", flag="--settle-max", metavar="TIME",
       modes={SCALE}, parse=positive_duration, default="60s"),
    _o("pause", "study", "Wait this long between repetitions (a countdown is shown; Ctrl-C "
       "keeps the repetitions that ran): 30m, 24h.", flag="--pause", metavar="TIME",
       modes={REPEAT}, parse=parse_duration, default="0"),
    _o("between", "study", "Shell command run between repetitions (after the pause), its "
       "output shown; a failing command stops the repeat, keeping what ran, with its exit "
       "status.", flag="--between", metavar="CMD", modes={REPEAT}, parse=parse_command),
    # -- sweeps, matrices and curves (one workload's parameters) --------------------------------
    _o("sweep_bs", "study", "IO sizes to sweep, e.g. 8k,16k,32k,64k or 8k,16k,32k,...,1m.",
       flag="--bs", metavar="LIST", modes={SWEEP}, default="4k"),
    _o("sweep_qd", "study", "Queue depths to sweep: 1,2,4,8 or 1,2,4,...,256 ('...' continues "
       "a constant ratio of three values, else the step of two, up to the value after it).",
       flag="--qd", metavar="LIST", modes={SWEEP}, default="1"),
    _o("sweep_read", "study", "Read percentages to sweep, e.g. 0,30,70,100.", flag="--read",
       metavar="LIST", modes={SWEEP}, default="100"),
    _o("sweep_region", "study", "Regions to sweep, each from the start of the data area: a size "
       "(1g: a hot region the cache may hold) or a percentage of the data area (100%).",
       flag="--region", metavar="LIST", modes={SWEEP}, default="100%"),
    _o("yes", "study", "Run a sweep of more than 500 points.", flag="--yes", modes={SWEEP},
       kind="switch"),
    _o("small_bs", "study", "Matrix: size of the small random IOs.", flag="--small-bs",
       metavar="SIZE", modes={MATRIX}, parse=positive_size, default="8k"),
    _o("small_read", "study", "Matrix: read percentage of the small random IOs.",
       flag="--small-read", metavar="PCT", modes={MATRIX}, parse=parse_percent, default="100"),
    _o("small_qd", "study", "Matrix: outstanding small IOs per column (0: none).",
       flag="--small-qd", metavar="LIST", modes={MATRIX}, default="0,1,2,4,...,32"),
    _o("large_bs", "study", "Matrix: size of the large sequential IOs.", flag="--large-bs",
       metavar="SIZE", modes={MATRIX}, parse=positive_size, default="1m"),
    _o("large_read", "study", "Matrix: read percentage of the large sequential streams.",
       flag="--large-read", metavar="PCT", modes={MATRIX}, parse=parse_percent, default="100"),
    _o("large_streams", "study", "Matrix: large sequential streams per row (0: none), each on "
       "its own slice of the data area.", flag="--large-streams", metavar="LIST",
       modes={MATRIX}, default="0,1,2,4"),
    _o("large_qd", "study", "Matrix: queue depth of each large stream.", flag="--large-qd",
       metavar="N", modes={MATRIX}, parse=int_range(1, MAX_QD), default="1"),
    _o("max_qd", "study", "Curve: highest queue depth of the search for the maximum IOPS.",
       flag="--max-qd", metavar="N", modes={CURVE}, parse=int_range(1, MAX_QD), default="256"),
    _o("loads", "study", "Curve: offered loads in percent of the maximum IOPS.",
       flag="--loads", metavar="LIST", modes={CURVE}, default="10,20,...,100,110"),
    _o("slo", "study", "Curve: find the highest rate that meets this objective, to 1% of the "
       "maximum, e.g. 'p99<=2ms' (mean, p50, p90, p95, p99, p999 or max; several joined by ,).",
       flag="--slo", metavar="STAT<=TIME", modes={CURVE}),
    # -- steady state ---------------------------------------------------------------------------
    _o("until_steady", "steady", "Measure in rounds until the SNIA PTS steady-state rule holds "
       "over the last 5 rounds (range <= 20% of their mean, least-squares slope <= 10%), at most "
       "--max-rounds; the summary then covers those 5 rounds.", flag="--until-steady",
       modes=STEADY_MODES, kind="switch"),
    _o("round", "steady", "Length of one round (a whole number of --interval).", flag="--round",
       metavar="TIME", modes=STEADY_MODES, parse=positive_duration, default="60s",
       dest="round_time"),
    _o("max_rounds", "steady", "Rounds after which a run that is not steady ends (SNIA PTS: "
       "25).", flag="--max-rounds", metavar="N", modes=STEADY_MODES, parse=parse_max_rounds,
       default="25"),
    _o("metric", "steady", "The tracked metric: iops (all streams) or p99 (latency of all "
       "reads and writes, merged).", flag="--metric", metavar="NAME", modes=STEADY_MODES,
       parse=choice(STEADY_METRICS), default="iops", dest="steady_metric"),
    # -- preconditioning -------------------------------------------------------------------------
    _o("targets", "precondition", "File (created at --size if missing) or block device to "
       "precondition (repeatable).", flag="--target", metavar="PATH", modes={PRECONDITION},
       kind="list", dest="precondition_targets"),
    _o("passes", "precondition", "Sequential write passes over the whole data area.",
       flag="--passes", metavar="N", modes={PRECONDITION}, parse=int_range(1, 100),
       default="2, as SNIA PTS"),
    _o("bs", "precondition", "Write size.", flag="--bs", metavar="SIZE", modes={PRECONDITION},
       parse=positive_size, default="128k", dest="precondition_bs"),
    # -- safety ---------------------------------------------------------------------------------
    _o("fill", "safety", "Write the whole data area of a block device before the run, so reads "
       "never hit unwritten (thin or trimmed) regions; needs --destroy-data. tilemark files are "
       "always filled.", flag="--fill", modes=ALL, kind="switch"),
    _o("destroy_data", "safety", "Allow writing the block device PATH (must name a target; "
       "repeat it for every device written); destroys its data.", flag="--destroy-data",
       metavar="PATH", modes=ALL | {PRECONDITION}, kind="list"),
    _o("force", "safety", "With --destroy-data: write even if the device is in use or carries "
       "a partition table or filesystem signature.", flag="--force", modes=ALL | {PRECONDITION},
       kind="switch"),
    # -- cluster (many hosts, one run: docs/cluster.md) -----------------------------------------
    _o("cluster", "cluster", "Run on many hosts as one run: local:N (N worker processes on this "
       "machine, loopback only) or tls://HOST:PORT (a Dask scheduler; mutual TLS). --force "
       "accepts host clocks more than one interval apart.", flag="--cluster", metavar="SPEC",
       modes=ALL),
    _o("tls_ca", "cluster", "tls:// clusters: CA certificate that signed the scheduler's and "
       "workers' certificates.", flag="--tls-ca", metavar="PEM", modes=ALL,
       default="Dask's config (distributed.comm.tls.ca-file)"),
    _o("tls_cert", "cluster", "tls:// clusters: this client's certificate.", flag="--tls-cert",
       metavar="PEM", modes=ALL, default="Dask's config (distributed.comm.tls.client.cert)"),
    _o("tls_key", "cluster", "tls:// clusters: this client's private key.", flag="--tls-key",
       metavar="PEM", modes=ALL, default="Dask's config (distributed.comm.tls.client.key)"),
    # -- output ---------------------------------------------------------------------------------
    _o("json", "output", "Print only the JSON summary on stdout (tables go to stderr).",
       flag="--json", modes=ALL, kind="switch", dest="json_out"),
    _o("report", "output", "Write report.html in the study directory.", flag="--report",
       off_flag="--no-report", modes={SCALE, REPEAT} | POINT_STUDIES, kind="switch", default="on",
       dest="write_report"),
    _o("label", "output", "A label for the run or study ('before tiering'), stored with it and "
       "shown by `runs`, `studies`, reports and `compare`.", flag="--label", metavar="TEXT",
       modes={RUN, TILES, SCALE, REPEAT} | POINT_STUDIES, parse=parse_label),
    _o("metrics_port", "output", "Serve Prometheus metrics of the running run or study on this "
       "port (per stream and application IOPS, MB/s, latency quantiles, errors, lag, device "
       "utilization, study progress; docs/metrics.md).", flag="--metrics-port", metavar="PORT",
       modes=ALL, parse=int_range(1, 65535)),
    _o("metrics_bind", "output", "Address the metrics endpoint listens on.", flag="--metrics-bind",
       metavar="ADDR", modes=ALL, parse=text, default="127.0.0.1 (this host only)"),
    _o("results", "output", "Results directory.", flag="--results", metavar="DIR", modes=ALL,
       default="tilemark-results"),
)  # fmt: skip


def options(scope: str | None = None, *, mode: str | None = None) -> list[Option]:
    """Options of a scope and/or accepted in a mode, in table order."""
    return [
        o
        for o in OPTIONS
        if (scope is None or o.scope == scope) and (mode is None or mode in o.modes)
    ]


def option(scope: str, key: str) -> Option:
    """The option `key` of `scope`."""
    for o in OPTIONS:
        if o.scope == scope and o.key == key:
            return o
    raise KeyError(f"{scope}.{key}")


def _keys(scope: str, **filters: bool) -> tuple[str, ...]:
    return tuple(
        o.key
        for o in OPTIONS
        if o.scope == scope and all(getattr(o, k) == v for k, v in filters.items())
    )


# Keys of workload files: run-wide keys at the top level, stream keys in [[stream]]/[defaults].
RUN_KEYS = _keys("run", toml=True)
STREAM_KEYS = _keys("stream", toml=True)
# A profile stream takes the workload stream keys except where it is placed (the layout decides
# offset and length) and its seed (derived per run).
PROFILE_STREAM_KEYS = _keys("stream", toml=True, profile=True)


def flag_of(param: str) -> str:
    """The flag of a CLI parameter name (for messages)."""
    for o in OPTIONS:
        if o.param == param and o.flag:
            return o.flag
    return "--" + param.replace("_", "-")


# -----------------------------------------------------------------------------------------------
# docs/options.md


def markdown() -> str:
    """docs/options.md: every option by scope."""
    titles = {
        "run": "Run-wide (workload file top level)",
        "stream": "Streams (`[[stream]]` and `[defaults]` tables; flags describe one stream)",
        "tile": "Tiles (`run --tiles N` and `scale`)",
        "study": "Studies (`scale`, `repeat`, `sweep`, `matrix`, `curve`)",
        "steady": "Steady state (`--until-steady` on run, run --tiles and scale)",
        "precondition": "Preconditioning (`tilemark precondition`)",
        "safety": "Safety",
        "cluster": "Cluster (many hosts, one run; docs/cluster.md)",
        "output": "Output",
    }
    lines = [
        "# Options",
        "",
        "Generated from `python/tilemark/options/table.py` by `python -m tilemark.options` "
        "(`make docs`); do not edit by hand.",
        "",
        "Modes: `run` = `tilemark run` with a workload, `tiles` = `tilemark run --tiles N`, "
        "`scale` = `tilemark scale`, `repeat` = `tilemark repeat N` (which also takes every "
        "option of `run` and `tiles`); `sweep`, `matrix` and `curve` are those studies; "
        "`precondition` = `tilemark precondition`. A flag given where it does not apply is "
        "refused with one sentence.",
    ]
    for scope, title in titles.items():
        lines += ["", f"## {title}", "", "| key | flag | modes | default | meaning |"]
        lines.append("|---|---|---|---|---|")
        for o in options(scope):
            key = f"`{o.key}`" if o.toml else "-"
            flag = f"`{o.flag}`" if o.flag else "-"
            if o.flag and o.metavar:
                flag = f"`{o.flag} {o.metavar}`"
            if o.off_flag:
                flag += f" / `{o.off_flag}`"
            modes = ", ".join(m for m in MODES if m in o.modes) or "files only"
            default = o.default or "-"
            lines.append(f"| {key} | {flag} | {modes} | {default} | {o.help} |")
    return "\n".join(lines) + "\n"
