//! The plan: what to run, as plain data (JSON from Python). See docs/engine-boundary.md.

use serde::Deserialize;

use crate::error::{EngineError, Result};
use crate::verify::VerifySpec;

/// 2: a stream covers a list of regions (target, offset, length) and may start and stop
/// within the run (`regions`, `spread`, `start_ms`, `stop_ms`).
/// 3: a stream may replay a list of recorded IOs (`ios`, docs/engine-boundary.md); plans of
/// version 2 are still read as they were.
/// 4: runs of sequential IOs from each random offset (`run_length`), IO priorities (`ioprio`,
/// `ioprio_share`), and a `skip` that wraps at the region's ends (fio's `rw=...:N`) instead of
/// stopping at its start. Plans of version 2 and 3 are still read; their `skip` is read as
/// version 4 reads it (the first IO of a region starts at its start; going before it
/// continues from its end).
/// 5: a stream may wait for other streams to end before it starts (`after`, fio's stonewall).
/// 6: streams of a flow group keep their IO counts in proportion to their weights (`flow`,
/// fio's flow/flow_id/flow_sleep; flow.rs), and a stream's end may stop other streams
/// (`on_end`, fio's exitall/exit_what); a stream's dedupe copies may come from a pool it
/// names (`dedupe_pool`: `blocks`, `over_blocks`, `id`; fio's dedupe working set, shared by
/// the streams of one id for `dedupe_global`); a fixed sequence of blocks (`pattern` kind
/// `sequence`), strided zones on a sequential stream (`zones`), sizes of writes apart from
/// reads' (`write_sizes`), priorities by direction and size (`ioprio_by_size`) and a priority
/// hint (`hint` of `ioprio`, `ioprio_share`; fiopatterns.rs). Every one optional: absent, a
/// stream runs as in plan 5.
pub const PLAN_VERSION: u32 = 6;
/// The oldest plan version this engine reads.
pub const MIN_PLAN_VERSION: u32 = 2;
/// Upper bound on a stream's queue depth / open-loop in-flight cap.
pub const MAX_QD: u32 = 4096;
/// Upper bound on the regions (targets) of one stream.
pub const MAX_REGIONS: usize = 1024;

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Uring,
    Psync,
    Null,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub plan_version: u32,
    pub backend: BackendKind,
    pub threads: usize,
    pub interval_ms: u64,
    #[serde(default)]
    pub start_at_ns: Option<u64>,
    #[serde(default)]
    pub warmup_ms: u64,
    #[serde(default)]
    pub duration_ms: Option<u64>,
    /// uring: spin up to this many microseconds for completions before sleeping.
    #[serde(default)]
    pub poll_us: u64,
    /// Pin engine thread i to CPU `cpus[i % len]` (fio's cpus_allowed with
    /// cpus_allowed_policy=split); empty = the kernel places the threads.
    #[serde(default)]
    pub cpus: Vec<usize>,
    /// uring: a kernel thread polls each ring's submission queue (IORING_SETUP_SQPOLL, fio's
    /// sqthread_poll).
    #[serde(default)]
    pub sqpoll: bool,
    /// Stop the run once more than this many IOs have failed (all streams, all threads,
    /// warm-up included); None = never.
    #[serde(default)]
    pub max_errors: Option<u64>,
    /// An IO outstanding longer than this is hung: the run stops. None or 0 = no limit.
    #[serde(default)]
    pub io_timeout_ms: Option<u64>,
    pub targets: Vec<Target>,
    pub streams: Vec<StreamSpec>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// How results name the target; the engine only uses it in messages.
    #[serde(default)]
    pub name: String,
    pub path: String,
    #[serde(default)]
    pub offset: u64,
    pub length: u64,
    #[serde(default = "yes")]
    pub direct: bool,
    /// Write verifiable blocks and judge reads (docs/verification.md); None = off.
    #[serde(default)]
    pub verify: Option<VerifySpec>,
    /// Buffered IO: advice given for the target's open files (fio's fadvise_hint); None = none.
    #[serde(default)]
    pub fadvise: Option<Fadvise>,
}

/// posix_fadvise advice for a buffered target's whole range, given when it is opened.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Fadvise {
    /// POSIX_FADV_RANDOM: no readahead.
    Random,
    /// POSIX_FADV_SEQUENTIAL: twice the device's readahead window.
    Sequential,
}

fn yes() -> bool {
    true
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Pattern {
    Sequential,
    Random,
    Zipf {
        theta: f64,
    },
    Hotspot {
        io_pct: f64,
        region_pct: f64,
    },
    /// Consecutive zones from the region's start: [io_pct, region_pct] each, both summing to
    /// 100 (fio's random_distribution=zoned).
    Zoned {
        zones: Vec<(f64, f64)>,
    },
    /// Block indices (of `align` bytes) in a fixed order, again and again; with `stride`
    /// each cycle moves on by the sequence's length (fio's random_distribution=sequence,
    /// random_sequence_stride). Counted per direction, as fio counts io_issues[ddir].
    Sequence {
        blocks: Vec<u64>,
        #[serde(default)]
        stride: bool,
    },
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Dist {
    Constant,
    Poisson,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Arrival {
    Closed,
    Open {
        #[serde(default)]
        rate_iops: Option<f64>,
        #[serde(default)]
        rate_bps: Option<f64>,
        dist: Dist,
        /// The first IO is due exactly when the stream's phase starts, as for every other
        /// stream started with it (clients in step). By default it is due at a random point of
        /// the first gap (stream.rs).
        #[serde(default)]
        in_step: bool,
        /// Mean IOs per batch (learned profiles: bursty arrivals). IOs come in batches of a
        /// geometric size with this mean, every IO of a batch due at once, the batches at
        /// `dist` gaps of the batch's size times the mean gap: the same rate, an inter-arrival
        /// CV of about sqrt(2 * batch - 1). None or 1: one IO at a time.
        #[serde(default)]
        batch: Option<f64>,
        /// With `batch`: the IOs of a batch come this far apart on average (exponential
        /// gaps for Poisson, fixed for constant) instead of at once, and the gap after a
        /// batch's last IO is shortened to keep the rate: a mean of batch * mean gap -
        /// (batch - 1) * batch_gap (exponential for Poisson). The gaps are then a two-phase
        /// hyperexponential (learned profiles fit it: a checkpointer's writes come in runs a
        /// device's service time apart, not all at one instant).
        #[serde(default)]
        batch_gap_ns: Option<f64>,
    },
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Burst {
    pub ios: u32,
    pub delay_ms: f64,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum SyncMode {
    None,
    Dsync,
    Fsync {
        every: u32,
        /// fdatasync rather than fsync (what databases call for their logs): no journal
        /// commit for the timestamps an O_DIRECT write changes.
        #[serde(default)]
        data: bool,
        /// Group commit (`every` 1, open loop, sequential writes): each arrival is a commit,
        /// and the commits that come due while one write and its sync are in flight join
        /// into the next write and sync, as a database's log writer serves the commits
        /// waiting for it with one write and one flush. The stream counts its commits as its
        /// writes (response time: from a commit's intended time to its sync's completion) and
        /// its flushes as its syncs; the device sees the joined writes (worker/group.rs).
        #[serde(default)]
        group: bool,
    },
}

/// An IO priority class (linux/ioprio.h, ionice(1)).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PrioClass {
    None = 0,
    Rt = 1,
    Be = 2,
    Idle = 3,
}

/// An IO priority: a class and, for rt and be, a level 0 (highest) to 7.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct IoPrio {
    pub class: PrioClass,
    #[serde(default)]
    pub level: u8,
    /// A priority hint (linux/ioprio.h IOPRIO_HINT_*, 0 to 1023: command duration limits
    /// 1 to 7); 0: none.
    #[serde(default)]
    pub hint: u16,
}

impl IoPrio {
    /// The 16-bit value an SQE's `ioprio` and ioprio_set(2) take: IOPRIO_PRIO_VALUE.
    pub fn value(self) -> u16 {
        ((self.class as u16) << 13) | (self.hint << 3) | self.level as u16
    }

    pub(crate) fn valid(self) -> bool {
        self.hint < 1024
            && match self.class {
                PrioClass::None | PrioClass::Idle => self.level == 0,
                PrioClass::Rt | PrioClass::Be => self.level <= 7,
            }
    }
}

/// `pct` percent of a stream's IOs, drawn one by one, go at priority `class`/`level`.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct IoPrioShare {
    pub pct: f64,
    pub class: PrioClass,
    #[serde(default)]
    pub level: u8,
    #[serde(default)]
    pub hint: u16,
}

impl IoPrioShare {
    pub fn prio(&self) -> IoPrio {
        IoPrio {
            class: self.class,
            level: self.level,
            hint: self.hint,
        }
    }
}

/// How a stream replaying a list of recorded IOs issues them (docs/engine-boundary.md).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ReplayMode {
    /// Each IO at its recorded time, open loop (`arrival` open; `qd` caps IOs in flight).
    Timed,
    /// Each IO as soon as as many of the stream's IOs have completed as had completed when it
    /// was recorded (`arrival` closed; `qd` caps IOs in flight).
    Afap,
    /// Closed loop at depth `qd`, in recorded order (`arrival` closed).
    Qd,
}

/// A list of recorded IOs a stream replays instead of generating IO (replay.rs has the file
/// format).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct IoListSpec {
    pub path: String,
    /// Records in the file (checked against its header).
    pub count: u64,
    pub mode: ReplayMode,
    /// Replay the list again and again, each pass this many ns after the previous one began
    /// (timed) or as soon as it ends (afap, qd), until the stream's stop or the run's end.
    #[serde(default)]
    pub loop_ns: Option<u64>,
    /// Timed: also hold each record until its dependencies have completed, as afap does (a
    /// record is then issued at its time or, when the target runs behind the recording, once
    /// as many IOs completed as had then). Keeps the closed-loop feedback of the recorded
    /// application: never more IOs in flight at a record than the recording had.
    #[serde(default)]
    pub deps: bool,
    /// Timed: records recorded more than this many ns apart never go to the device in one
    /// submission, even when both are already due (the replay runs late): the device sees
    /// them one loop turn apart, not back to back. 0: every due record in one submission.
    #[serde(default)]
    pub split_ns: u64,
}

/// Where a stream's IOs may land on one target: offset and length relative to the target's
/// offset.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Region {
    pub target: usize,
    #[serde(default)]
    pub offset: u64,
    pub length: u64,
}

/// A stream's place in a flow group (fio's flow_id, flow and flow_sleep): the streams of a
/// group issue IOs in the ratio of their weights; one ahead issues nothing for `sleep_us`
/// once its IOs in flight completed, then looks again (0: at its thread's next loop turn).
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    pub group: u32,
    pub weight: u32,
    #[serde(default)]
    pub sleep_us: u64,
}

/// What a stream's end stops (fio's exitall with exit_what): plan indices of streams asked to
/// stop when it ends, as `stop_streams` asks; with `started_only`, only those that have
/// started by then (a stream still waiting for others, or before its start, is left to run).
/// A stream stopped before it started never starts.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct OnEndSpec {
    pub stop: Vec<usize>,
    #[serde(default)]
    pub started_only: bool,
}

/// How a stream over several regions picks the region of each IO.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Spread {
    /// Every region equally often (Orion over its LUN list).
    #[default]
    Uniform,
    /// In proportion to the regions' lengths (every byte equally often).
    Size,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamSpec {
    pub name: String,
    /// One region per target the stream uses; the region of each IO is drawn by `spread`.
    pub regions: Vec<Region>,
    #[serde(default)]
    pub spread: Spread,
    /// Run time (warm-up included) before which the stream issues nothing; None = 0.
    #[serde(default)]
    pub start_ms: Option<u64>,
    /// Run time from which the stream issues nothing more; None = the end of the run.
    #[serde(default)]
    pub stop_ms: Option<u64>,
    /// Plan indices of earlier streams that must all have ended (byte limit used up, stop
    /// time passed, or stopped from outside; their IOs completed) before this stream starts;
    /// its `start_ms` and `stop_ms` then count from that moment, and so does its rate's
    /// schedule (plan version 5). None: it starts at `start_ms` of the run.
    #[serde(default)]
    pub after: Option<Vec<usize>>,
    /// Token-based flow control with the other streams of its group (plan version 6,
    /// flow.rs). None: not paced by others.
    #[serde(default)]
    pub flow: Option<FlowSpec>,
    /// When this stream ends (for any reason), stop these streams (plan version 6).
    #[serde(default)]
    pub on_end: Option<OnEndSpec>,
    pub read_pct: f64,
    pub sizes: Vec<(u64, f64)>,
    pub pattern: Pattern,
    #[serde(default = "hundred")]
    pub random_pct: f64,
    /// Sequential position of a read/write mix: shared, or one per op kind.
    #[serde(default)]
    pub cursors: Cursors,
    /// Buffered IO: write back and drop the region's cached pages after every pass over it,
    /// as fio's time_based jobs do (io_u.c loop_cache_invalidate).
    #[serde(default)]
    pub invalidate_each_pass: bool,
    pub align: u64,
    pub qd: u32,
    pub arrival: Arrival,
    #[serde(default)]
    pub burst: Option<Burst>,
    #[serde(default = "no_sync")]
    pub sync: SyncMode,
    /// Writes go through the page cache, uncached (RWF_DONTCACHE): the kernel starts their
    /// writeback at once, asynchronously, as an application's page-cache writeback reaches
    /// the device (no sync flag), and drops the pages once written.
    #[serde(default)]
    pub writeback: bool,
    /// Bytes between the end of the previous IO and the start of a sequential one: [lo, hi]
    /// of one sign, log-uniform between them (one value when equal; aligned). Negative
    /// overlaps the previous IO (a log rewriting its last page), positive skips ahead (a
    /// sorted writeback sweep). None: 0, plain sequential.
    #[serde(default)]
    pub skip: Option<(i64, i64)>,
    /// IOs per random offset (fio's `rw=randread:N`, io_u.c `ddir_seq_nr`): a random offset
    /// is drawn for the first IO and then every `run_length` IOs; the IOs between continue
    /// sequentially from the previous one's end (plus `skip`). None or 1: every IO is drawn.
    #[serde(default)]
    pub run_length: Option<u32>,
    /// The IO priority of the stream's IOs (class and level, as ioprio_set(2) takes them);
    /// None: the engine thread's own (the default, class none).
    #[serde(default)]
    pub ioprio: Option<IoPrio>,
    /// A share of the stream's IOs issued at another priority (fio's cmdprio_percentage).
    #[serde(default)]
    pub ioprio_share: Option<IoPrioShare>,
    /// Sizes of the stream's writes when they differ from its reads' (`sizes`), as fio's
    /// bs=R,W and bssplit=R,W; None: `sizes` for both.
    #[serde(default)]
    pub write_sizes: Option<Vec<(u64, f64)>>,
    /// Priorities of IOs by direction and size (fio's cmdprio_bssplit); IOs of other sizes,
    /// and the rest of a size's, at `ioprio`. Not with `ioprio_share`.
    #[serde(default)]
    pub ioprio_by_size: Option<Vec<SizePrio>>,
    /// Strided zones of a sequential stream over one region (fio's zonemode=strided).
    #[serde(default)]
    pub zones: Option<StridedZones>,
    #[serde(default)]
    pub compress_pct: f64,
    /// Blocks written / distinct blocks (1 = every block unique).
    #[serde(default = "one")]
    pub dedupe_ratio: f64,
    /// Where the dedupe copies come from (data.rs `DedupePool`); None: a pool of about 1/64
    /// of the copies over the stream's own region.
    #[serde(default)]
    pub dedupe_pool: Option<crate::data::DedupePool>,
    /// Stop issuing after this many bytes (reads + writes); None = no limit.
    #[serde(default)]
    pub io_limit: Option<u64>,
    /// Replay these recorded IOs instead of generating IO (plan version 3). `read_pct`,
    /// `sizes`, `pattern` and `align` then describe the list (its read share, size mix,
    /// alignment), `arrival` says open (timed) or closed loop.
    #[serde(default)]
    pub ios: Option<IoListSpec>,
    #[serde(default)]
    pub seed: u64,
}

fn zones_valid(zones: &[(f64, f64)]) -> bool {
    let (io, region) = zones
        .iter()
        .fold((0.0, 0.0), |(a, b), &(i, r)| (a + i, b + r));
    !zones.is_empty()
        && zones
            .iter()
            .all(|&(i, r)| i >= 0.0 && r > 0.0 && i.is_finite() && r.is_finite())
        && (io - 100.0).abs() < 1e-6
        && (region - 100.0).abs() < 1e-6
}

/// How a read/write mix continues sequentially.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Cursors {
    /// One position: a read continues where the last IO of either kind ended.
    #[default]
    Shared,
    /// One position per kind: reads continue reads, writes continue writes (fio's rw).
    PerOp,
}

fn hundred() -> f64 {
    100.0
}

fn one() -> f64 {
    1.0
}

/// Largest dedupe ratio a stream may ask for.
pub const MAX_DEDUPE_RATIO: f64 = 100.0;

fn no_sync() -> SyncMode {
    SyncMode::None
}

impl StreamSpec {
    pub fn writes(&self) -> bool {
        self.read_pct < 100.0
    }

    pub fn max_size(&self) -> u64 {
        self.all_sizes().map(|s| s.0).max().unwrap_or(0)
    }

    /// Read and write sizes together (`sizes`, then `write_sizes`).
    pub fn all_sizes(&self) -> impl Iterator<Item = &(u64, f64)> {
        self.sizes.iter().chain(self.write_sizes.iter().flatten())
    }

    /// Does any region of this stream lie on target `t`?
    pub fn uses_target(&self, t: usize) -> bool {
        self.regions.iter().any(|r| r.target == t)
    }

    /// Run time (ns) of the stream's first and past its last IO issue: [start, stop).
    pub fn active_ns(&self) -> (u64, u64) {
        (
            self.start_ms.unwrap_or(0).saturating_mul(1_000_000),
            self.stop_ms
                .map_or(u64::MAX, |s| s.saturating_mul(1_000_000)),
        )
    }

    /// Mean IO size of the weighted size mix.
    pub fn mean_size(&self) -> f64 {
        let mean = |sizes: &[(u64, f64)]| {
            let total: f64 = sizes.iter().map(|s| s.1).sum();
            sizes.iter().map(|s| s.0 as f64 * s.1).sum::<f64>() / total
        };
        match &self.write_sizes {
            Some(w) => {
                let r = self.read_pct / 100.0;
                r * mean(&self.sizes) + (1.0 - r) * mean(w)
            }
            None => mean(&self.sizes),
        }
    }

    /// Intended IO rate for open-loop streams.
    pub fn rate_iops(&self) -> Option<f64> {
        match &self.arrival {
            Arrival::Closed => None,
            Arrival::Open {
                rate_iops: Some(r), ..
            } => Some(*r),
            Arrival::Open {
                rate_bps: Some(b), ..
            } => Some(b / self.mean_size()),
            Arrival::Open { .. } => None,
        }
    }
}

impl Plan {
    pub fn from_json(s: &str) -> Result<Plan> {
        let plan: Plan =
            serde_json::from_str(s).map_err(|e| EngineError::Plan(format!("invalid plan: {e}")))?;
        plan.validate()?;
        Ok(plan)
    }

    /// Checks the engine relies on. The Python front end validates user input with friendlier
    /// messages first; these guard the boundary itself.
    /// The IO timeout in ns, if the plan sets one.
    pub fn io_timeout_ns(&self) -> Option<u64> {
        self.io_timeout_ms.filter(|&t| t > 0).map(|t| t * 1_000_000)
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(EngineError::Plan(m));
        if !(MIN_PLAN_VERSION..=PLAN_VERSION).contains(&self.plan_version) {
            return bad(format!(
                "plan_version {} is not supported (this engine reads {MIN_PLAN_VERSION} to \
                 {PLAN_VERSION})",
                self.plan_version
            ));
        }
        if self.threads == 0 || self.threads > 1024 {
            return bad(format!("threads must be 1..1024, got {}", self.threads));
        }
        if self.interval_ms == 0 {
            return bad("interval_ms must be > 0".into());
        }
        if self.duration_ms == Some(0) {
            return bad("duration_ms must be > 0 (or null to run until stopped)".into());
        }
        if self.io_timeout_ms.is_some_and(|t| t > 86_400_000) {
            return bad(format!(
                "io_timeout_ms must be 0..86400000 (a day) or null, got {}",
                self.io_timeout_ms.unwrap_or(0)
            ));
        }
        if self.poll_us > 1_000_000 {
            return bad(format!("poll_us must be 0..1000000, got {}", self.poll_us));
        }
        if self.sqpoll && self.backend != BackendKind::Uring {
            return bad(format!(
                "sqpoll needs the uring backend, not {}",
                format!("{:?}", self.backend).to_lowercase()
            ));
        }
        if !self.cpus.is_empty() {
            let allowed = crate::affinity::allowed_cpus()
                .map_err(|e| EngineError::io("reading this process's CPU affinity", e))?;
            if let Some(&cpu) = self.cpus.iter().find(|c| !allowed.contains(c)) {
                return bad(format!(
                    "cpus: CPU {cpu} is not one this process may run on (it may use {})",
                    crate::affinity::cpu_list(&allowed)
                ));
            }
        }
        if self.streams.is_empty() && self.duration_ms.is_none() {
            // A plan without streams only keeps time (a tile of file applications runs its
            // file run beside it): it must have an end.
            return bad("a plan without streams needs a duration".into());
        }
        for (i, t) in self.targets.iter().enumerate() {
            if t.length == 0 {
                return bad(format!("target {i} ({}) has length 0", t.path));
            }
            if let Some(v) = &t.verify {
                v.validate(t.length, &format!("target {i} ({})", t.path))?;
            }
        }
        for (i, s) in self.streams.iter().enumerate() {
            let name = &s.name;
            if s.regions.is_empty() {
                return bad(format!("stream '{name}': regions must not be empty"));
            }
            if s.regions.len() > MAX_REGIONS {
                return bad(format!(
                    "stream '{name}': at most {MAX_REGIONS} regions, got {}",
                    s.regions.len()
                ));
            }
            for (k, r) in s.regions.iter().enumerate() {
                let Some(t) = self.targets.get(r.target) else {
                    return bad(format!(
                        "stream '{name}': target {} does not exist",
                        r.target
                    ));
                };
                if r.length == 0 || r.offset.checked_add(r.length).is_none_or(|e| e > t.length) {
                    return bad(format!(
                        "stream '{name}': region offset {} length {} is outside target length {}",
                        r.offset, r.length, t.length
                    ));
                }
                if s.regions[..k].iter().any(|o| o.target == r.target) {
                    return bad(format!(
                        "stream '{name}': target {} is listed twice in its regions",
                        r.target
                    ));
                }
                if s.max_size() > r.length {
                    return bad(format!(
                        "stream '{name}': an IO size is larger than the region on target {}",
                        r.target
                    ));
                }
                // The stream's write data is laid out for one verification block size.
                let block = |t: &Target| t.verify.as_ref().map(|v| v.block_size);
                if block(t) != block(&self.targets[s.regions[0].target]) {
                    return bad(format!(
                        "stream '{name}': its targets must all be verified with one block size, \
                         or none"
                    ));
                }
            }
            let (start, stop) = (s.start_ms.unwrap_or(0), s.stop_ms.unwrap_or(u64::MAX));
            if start >= stop {
                return bad(format!(
                    "stream '{name}': start_ms {start} must be before stop_ms {stop}"
                ));
            }
            if let Some(end) = self.duration_ms.map(|d| d + self.warmup_ms) {
                if start >= end || s.stop_ms.is_some_and(|t| t > end) {
                    return bad(format!(
                        "stream '{name}': start_ms and stop_ms must lie within the run's {end} ms"
                    ));
                }
            }
            if !(0.0..=100.0).contains(&s.read_pct) {
                return bad(format!("stream '{name}': read_pct must be 0..100"));
            }
            if !(0.0..=100.0).contains(&s.random_pct) {
                return bad(format!("stream '{name}': random_pct must be 0..100"));
            }
            if !(0.0..100.0).contains(&s.compress_pct) {
                return bad(format!("stream '{name}': compress_pct must be 0..<100"));
            }
            if !(1.0..=MAX_DEDUPE_RATIO).contains(&s.dedupe_ratio) {
                return bad(format!(
                    "stream '{name}': dedupe_ratio must be 1..{MAX_DEDUPE_RATIO}"
                ));
            }
            if let Some(pool) = &s.dedupe_pool {
                if pool.blocks == 0 || pool.copy_share(s.dedupe_ratio) > 1.0 + 1e-9 {
                    return bad(format!(
                        "stream '{name}': dedupe_pool must hold 1 to over_blocks / dedupe_ratio \
                         blocks"
                    ));
                }
            }
            if let Some(v) = &self.targets[s.regions[0].target].verify {
                let b = v.block_size;
                if s.regions.iter().any(|r| r.offset % b != 0)
                    || s.align % b != 0
                    || s.all_sizes().any(|x| x.0 % b != 0)
                {
                    return bad(format!(
                        "stream '{name}': with verification, offset, align and sizes must be \
                         multiples of the {b}-byte verification block"
                    ));
                }
            }
            if s.qd == 0 || s.qd > MAX_QD {
                return bad(format!(
                    "stream '{name}': qd must be 1..{MAX_QD}, got {}",
                    s.qd
                ));
            }
            if s.align == 0 {
                return bad(format!("stream '{name}': align must be > 0"));
            }
            for sizes in std::iter::once(&s.sizes).chain(s.write_sizes.iter()) {
                if sizes.is_empty()
                    || sizes
                        .iter()
                        .any(|&(sz, w)| sz == 0 || w.is_nan() || w < 0.0)
                {
                    return bad(format!(
                        "stream '{name}': sizes must be non-empty [bytes>0, weight>=0]"
                    ));
                }
                if sizes.iter().map(|x| x.1).sum::<f64>() <= 0.0 {
                    return bad(format!("stream '{name}': size weights sum to 0"));
                }
            }
            validate_fio_patterns(s, self.plan_version)?;
            if s.max_size() > u32::MAX as u64 / 2 {
                return bad(format!("stream '{name}': IO sizes must be under 2 GiB"));
            }
            match &s.pattern {
                Pattern::Zipf { theta } if !(*theta > 0.0 && theta.is_finite()) => {
                    return bad(format!("stream '{name}': zipf theta must be > 0"));
                }
                Pattern::Hotspot { io_pct, region_pct }
                    if !((0.0..=100.0).contains(io_pct)
                        && *region_pct > 0.0
                        && *region_pct < 100.0) =>
                {
                    return bad(format!(
                        "stream '{name}': hotspot needs io_pct 0..100 and region_pct in (0, 100)"
                    ));
                }
                Pattern::Zoned { zones } if !zones_valid(zones) => {
                    return bad(format!(
                        "stream '{name}': zoned needs zones [io_pct >= 0, region_pct > 0] whose \
                         io_pct and region_pct each sum to 100"
                    ));
                }
                _ => {}
            }
            if let Arrival::Open {
                rate_iops,
                rate_bps,
                ..
            } = &s.arrival
            {
                if rate_iops.is_some() == rate_bps.is_some() {
                    return bad(format!(
                        "stream '{name}': open arrival needs exactly one of rate_iops or rate_bps"
                    ));
                }
                let r = s.rate_iops().unwrap_or(0.0);
                if !(r > 0.0 && r.is_finite()) {
                    return bad(format!("stream '{name}': rate must be > 0"));
                }
            }
            if let Some(b) = &s.burst {
                if b.ios == 0 || b.delay_ms.is_nan() || b.delay_ms < 0.0 {
                    return bad(format!(
                        "stream '{name}': burst needs ios > 0 and delay_ms >= 0"
                    ));
                }
            }
            if let SyncMode::Fsync { every: 0, .. } = s.sync {
                return bad(format!("stream '{name}': fsync every must be > 0"));
            }
            if let SyncMode::Fsync {
                group: true, every, ..
            } = s.sync
            {
                self.validate_group(s, every)?;
            }
            if let Arrival::Open { batch: Some(b), .. } = &s.arrival {
                if !(b.is_finite() && (1.0..=1e6).contains(b)) {
                    return bad(format!("stream '{name}': batch must be from 1 to 1e6"));
                }
            }
            if let Arrival::Open {
                batch,
                batch_gap_ns: Some(g),
                ..
            } = &s.arrival
            {
                let b = batch.unwrap_or(1.0);
                if !(g.is_finite() && *g >= 0.0) || b <= 1.0 {
                    return bad(format!(
                        "stream '{name}': batch_gap needs a batch above 1 and is >= 0"
                    ));
                }
                let mean_gap = 1e9 / s.rate_iops().unwrap_or(f64::INFINITY);
                if g * (b - 1.0) >= b * mean_gap {
                    return bad(format!(
                        "stream '{name}': batch_gap {g} ns leaves no gap between batches at \
                         a mean gap of {mean_gap} ns (it must be below batch / (batch - 1) \
                         times it)"
                    ));
                }
            }
            if let Some((lo, hi)) = s.skip {
                if (lo < 0) != (hi < 0) || lo.abs() > hi.abs() || lo == 0 {
                    return bad(format!(
                        "stream '{name}': skip needs lo and hi of one sign, |lo| <= |hi|, not 0"
                    ));
                }
            }
            if s.run_length == Some(0) {
                return bad(format!("stream '{name}': run_length must be at least 1"));
            }
            if s.ioprio.is_some_and(|p| !p.valid())
                || s.ioprio_share.is_some_and(|p| !p.prio().valid())
            {
                return bad(format!(
                    "stream '{name}': an IO priority's level is 0 to 7 for rt and be, 0 for \
                     none and idle"
                ));
            }
            if let Some(share) = s.ioprio_share {
                if !(share.pct > 0.0 && share.pct <= 100.0) {
                    return bad(format!(
                        "stream '{name}': ioprio_share pct must be above 0 and at most 100"
                    ));
                }
            }
            if (s.run_length.is_some() || s.ioprio.is_some() || s.ioprio_share.is_some())
                && self.plan_version < 4
            {
                return bad(format!(
                    "stream '{name}': run_length and ioprio need plan_version 4"
                ));
            }
            if s.writeback && s.sync == SyncMode::Dsync {
                return bad(format!("stream '{name}': writeback writes cannot be dsync"));
            }
            if let Some(after) = &s.after {
                self.validate_after(i, s, after)?;
            }
            if s.flow.is_some() || s.on_end.is_some() {
                self.validate_pacing(s)?;
            }
            if let Some(ios) = &s.ios {
                self.validate_ios(s, ios)?;
            }
        }
        Ok(())
    }

    /// A group-commit stream: commits are writes appended one after another, arriving open
    /// loop, each made durable by the sync that follows the write it joined.
    fn validate_group(&self, s: &StreamSpec, every: u32) -> Result<()> {
        let name = &s.name;
        let why = if every != 1 {
            "syncs after every write (every = 1)"
        } else if !matches!(s.arrival, Arrival::Open { .. }) {
            "an open-loop arrival (a rate)"
        } else if s.read_pct != 0.0 {
            "writes only (read_pct 0)"
        } else if s.pattern != Pattern::Sequential {
            "sequential writes"
        } else if s.burst.is_some() || s.ios.is_some() || s.writeback || s.flow.is_some() {
            "no burst, replayed list, writeback or flow"
        } else if s
            .regions
            .iter()
            .any(|r| self.targets[r.target].verify.is_some())
        {
            "a target without verification"
        } else {
            return Ok(());
        };
        Err(EngineError::Plan(format!(
            "stream '{name}': group commit needs {why}"
        )))
    }

    /// A stream waiting for others: earlier streams only (so no cycle), not a replay (its
    /// list's times are run times).
    fn validate_after(&self, index: usize, s: &StreamSpec, after: &[usize]) -> Result<()> {
        let name = &s.name;
        let bad = |m: String| Err(EngineError::Plan(format!("stream '{name}': {m}")));
        if self.plan_version < 5 {
            return bad("after needs plan_version 5".into());
        }
        if after.is_empty() || after.iter().any(|&j| j >= index) {
            return bad("after names one or more streams before this one".into());
        }
        if s.ios.is_some() {
            return bad("a stream replaying ios cannot wait for other streams".into());
        }
        Ok(())
    }

    /// A stream in a flow group (closed loop, generated IO, weight 1 or more) or stopping
    /// others at its end (plan streams only).
    fn validate_pacing(&self, s: &StreamSpec) -> Result<()> {
        let name = &s.name;
        let bad = |m: String| Err(EngineError::Plan(format!("stream '{name}': {m}")));
        if self.plan_version < 6 {
            return bad("flow and on_end need plan_version 6".into());
        }
        if let Some(f) = s.flow {
            if f.weight == 0 {
                return bad("flow weight must be at least 1".into());
            }
            if !matches!(s.arrival, Arrival::Closed) || s.ios.is_some() {
                return bad("flow paces closed-loop streams that generate IO".into());
            }
        }
        if let Some(on_end) = &s.on_end {
            if on_end.stop.is_empty() || on_end.stop.iter().any(|&j| j >= self.streams.len()) {
                return bad("on_end stop names one or more streams of the plan".into());
            }
        }
        Ok(())
    }

    /// A replaying stream: one unverified region, its mode matching its arrival, and a loop
    /// that ends.
    fn validate_ios(&self, s: &StreamSpec, ios: &IoListSpec) -> Result<()> {
        let name = &s.name;
        let bad = |m: String| Err(EngineError::Plan(format!("stream '{name}': {m}")));
        if self.plan_version < 3 {
            return bad("ios needs plan_version 3".into());
        }
        if s.regions.len() != 1 {
            return bad("a stream replaying ios has exactly one region".into());
        }
        if self.targets[s.regions[0].target].verify.is_some() {
            return bad("a stream replaying ios cannot write to a verified target".into());
        }
        if ios.count == 0 {
            return bad("ios count must be > 0".into());
        }
        let open = matches!(s.arrival, Arrival::Open { .. });
        if open != (ios.mode == ReplayMode::Timed) {
            return bad("ios mode timed needs an open arrival, afap and qd a closed one".into());
        }
        if s.burst.is_some() || s.sync != SyncMode::None || s.io_limit.is_some() {
            return bad("a stream replaying ios takes no burst, sync or io_limit".into());
        }
        if let Some(period) = ios.loop_ns {
            if period == 0 {
                return bad("ios loop_ns must be > 0".into());
            }
            let ends = match ios.mode {
                ReplayMode::Timed => s.stop_ms.is_some() || self.duration_ms.is_some(),
                _ => self.duration_ms.is_some(),
            };
            if !ends {
                return bad(
                    "a looping ios list needs the run's duration_ms (or, timed, stop_ms)".into(),
                );
            }
        }
        Ok(())
    }
}

/// fio's strided zones (plan field `zones`): `size` bytes of IO in a zone of `range` bytes
/// from the region's start, then the next zone starts `range + skip` bytes later, back at the
/// region's start past its end.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StridedZones {
    pub size: u64,
    pub range: u64,
    #[serde(default)]
    pub skip: u64,
}

/// Priorities of the IOs of one direction and size (plan field `ioprio_by_size`): each share
/// drawn in turn from one number 0..100, the rest at the stream's own priority.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SizePrio {
    pub op: SizeOp,
    pub size: u64,
    pub shares: Vec<IoPrioShare>,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SizeOp {
    Read,
    Write,
}

/// Longest block sequence a stream may carry (fio takes 64, FIO_SEQ_MAX).
pub const MAX_SEQUENCE: usize = 4096;

/// Checks of a stream's fiopatterns.rs fields (Plan::validate calls it for every stream).
pub(crate) fn validate_fio_patterns(s: &StreamSpec, plan_version: u32) -> Result<()> {
    let name = &s.name;
    let bad = |m: String| Err(EngineError::Plan(format!("stream '{name}': {m}")));
    let sequence = matches!(s.pattern, Pattern::Sequence { .. });
    let uses = sequence || s.zones.is_some() || s.write_sizes.is_some();
    let uses = uses
        || s.ioprio_by_size.is_some()
        || s.ioprio.is_some_and(|p| p.hint > 0)
        || s.ioprio_share.is_some_and(|p| p.hint > 0);
    if uses && plan_version < 6 {
        return bad(
            "sequence, zones, write_sizes, ioprio_by_size and hints need plan_version 6".into(),
        );
    }
    if let Pattern::Sequence { blocks, .. } = &s.pattern {
        if blocks.is_empty() || blocks.len() > MAX_SEQUENCE {
            return bad(format!("a sequence has 1 to {MAX_SEQUENCE} blocks"));
        }
        if s.random_pct < 100.0 || s.run_length.is_some_and(|n| n > 1) {
            return bad("a sequence places every IO (random_pct 100, no run_length)".into());
        }
    }
    if let Some(z) = s.zones {
        if z.size == 0 || z.range == 0 {
            return bad("zones need size and range above 0".into());
        }
        if s.pattern != Pattern::Sequential || s.skip.is_some() || s.regions.len() != 1 {
            return bad("zones belong to a sequential stream over one region, without skip".into());
        }
    }
    if let Some(by_size) = &s.ioprio_by_size {
        if s.ioprio_share.is_some() || !size_prios_valid(by_size) {
            return bad(
                "ioprio_by_size needs valid priorities whose shares per size sum to at most \
                 100, and no ioprio_share"
                    .into(),
            );
        }
    }
    Ok(())
}

/// Sizes and priorities the plan may not carry: shares of one entry above 100 percent.
fn size_prios_valid(spec: &[SizePrio]) -> bool {
    spec.iter().all(|e| {
        let total: f64 = e.shares.iter().map(|s| s.pct).sum();
        e.size > 0
            && e.shares.iter().all(|s| s.pct > 0.0 && s.prio().valid())
            && total <= 100.0 + 1e-9
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan of two 1 MiB targets and one stream with `stream` keys over the defaults.
    fn plan(stream: serde_json::Value) -> Result<Plan> {
        let mut s = serde_json::json!({"name": "s", "regions": [{"target": 0, "length": 1048576}],
            "read_pct": 100, "sizes": [[4096, 1]], "pattern": {"kind": "random"}, "align": 4096,
            "qd": 1, "arrival": {"kind": "closed"}});
        for (k, v) in stream.as_object().expect("an object") {
            s[k] = v.clone();
        }
        let p = serde_json::json!({"plan_version": 2, "backend": "null", "threads": 1,
            "interval_ms": 100, "warmup_ms": 1000, "duration_ms": 9000,
            "targets": [{"path": "/a", "length": 1048576}, {"path": "/b", "length": 1048576}],
            "streams": [s]});
        Plan::from_json(&p.to_string())
    }

    #[test]
    fn sqpoll_is_a_uring_mode() {
        let with = |backend: &str| {
            Plan::from_json(
                &serde_json::json!({"plan_version": 2, "backend": backend, "threads": 1,
                    "interval_ms": 100, "duration_ms": 100, "targets": [], "streams": [],
                    "sqpoll": true})
                .to_string(),
            )
        };
        assert!(with("uring").expect("uring").sqpoll);
        match with("psync") {
            Err(EngineError::Plan(m)) => assert_eq!(m, "sqpoll needs the uring backend, not psync"),
            other => panic!("expected a plan error, got {other:?}"),
        }
    }

    #[test]
    fn cpus_must_be_ones_the_process_may_run_on() {
        let allowed = crate::affinity::allowed_cpus().unwrap();
        let with = |cpus: Vec<usize>| {
            let mut p: serde_json::Value = serde_json::json!({"plan_version": 2,
                "backend": "null", "threads": 2, "interval_ms": 100, "duration_ms": 100,
                "targets": [], "streams": []});
            p["cpus"] = serde_json::json!(cpus);
            Plan::from_json(&p.to_string())
        };
        let p = with(vec![allowed[0]]).expect("an allowed CPU");
        assert_eq!(p.cpus, vec![allowed[0]]);
        let outside = (0..1024).find(|c| !allowed.contains(c)).unwrap();
        match with(vec![allowed[0], outside]) {
            Err(EngineError::Plan(m)) => assert!(
                m.contains(&format!(
                    "cpus: CPU {outside} is not one this process may run on"
                )) && m.contains(&crate::affinity::cpu_list(&allowed)),
                "{m}"
            ),
            other => panic!("expected a plan error, got {other:?}"),
        }
    }

    fn refused(stream: serde_json::Value, why: &str) {
        match plan(stream) {
            Err(EngineError::Plan(m)) => assert!(m.contains(why), "{m}"),
            other => panic!("expected a plan error about {why}, got {other:?}"),
        }
    }

    #[test]
    fn a_stream_over_both_targets_with_a_phase_is_valid() {
        let p = plan(
            serde_json::json!({"regions": [{"target": 0, "length": 1048576},
            {"target": 1, "offset": 4096, "length": 8192}], "spread": "size",
            "start_ms": 2000, "stop_ms": 10000}),
        )
        .expect("valid");
        let s = &p.streams[0];
        assert_eq!(s.spread, Spread::Size);
        assert_eq!(s.active_ns(), (2_000_000_000, 10_000_000_000));
        assert!(s.uses_target(1));
    }

    #[test]
    fn a_batch_gap_needs_a_batch_and_room_between_batches() {
        let open = |batch: f64, gap: f64| {
            serde_json::json!({"arrival": {"kind": "open", "rate_iops": 1000, "dist": "poisson",
                "batch": batch, "batch_gap_ns": gap}})
        };
        // mean gap 1 ms, batch 4: the IOs of a batch can be up to 4/3 ms apart
        assert!(plan(open(4.0, 1_000_000.0)).is_ok());
        refused(open(4.0, 1_400_000.0), "leaves no gap between batches");
        refused(open(1.0, 1000.0), "batch_gap needs a batch above 1");
        refused(open(4.0, -1.0), "batch_gap needs a batch above 1");
    }

    #[test]
    fn a_stream_waits_only_for_earlier_streams_on_plan_5() {
        let check = |version: u32, after: serde_json::Value| {
            let s = |name: &str, after: serde_json::Value| {
                serde_json::json!({"name": name,
                "regions": [{"target": 0, "length": 1048576}], "read_pct": 100,
                "sizes": [[4096, 1]], "pattern": {"kind": "random"}, "align": 4096, "qd": 1,
                "arrival": {"kind": "closed"}, "after": after})
            };
            let p = serde_json::json!({"plan_version": version, "backend": "null",
                "threads": 1, "interval_ms": 100,
                "targets": [{"path": "/a", "length": 1048576}],
                "streams": [s("a", serde_json::Value::Null), s("b", after)]});
            Plan::from_json(&p.to_string()).map(|p| p.streams[1].after.clone())
        };
        assert_eq!(check(5, serde_json::json!([0])).unwrap(), Some(vec![0]));
        for (version, after, why) in [
            (4, serde_json::json!([0]), "after needs plan_version 5"),
            (5, serde_json::json!([1]), "streams before this one"),
            (5, serde_json::json!([]), "streams before this one"),
        ] {
            match check(version, after) {
                Err(EngineError::Plan(m)) => assert!(m.contains(why), "{m}"),
                other => panic!("expected a plan error about {why}, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_replaying_stream_needs_plan_3_one_region_a_matching_arrival_and_an_end() {
        let ios = |mode: &str, loop_ns: Option<u64>| serde_json::json!({"path": "/l", "count": 3, "mode": mode, "loop_ns": loop_ns});
        let open = serde_json::json!({"kind": "open", "rate_iops": 10, "dist": "constant"});
        // `stream` keys over a closed 4 KiB reader, in a plan of `version` without a duration.
        let check = |version: u32, stream: serde_json::Value| {
            let mut s = serde_json::json!({"name": "s", "regions": [{"target": 0,
                "length": 1048576}], "read_pct": 100, "sizes": [[4096, 1]],
                "pattern": {"kind": "random"}, "align": 4096, "qd": 1,
                "arrival": {"kind": "closed"}});
            for (k, v) in stream.as_object().unwrap() {
                s[k] = v.clone();
            }
            let p = serde_json::json!({"plan_version": version, "backend": "null",
                "threads": 1, "interval_ms": 100,
                "targets": [{"path": "/a", "length": 1048576}, {"path": "/b", "length": 4096}],
                "streams": [s]});
            Plan::from_json(&p.to_string()).map(|_| ())
        };
        let refused =
            |version: u32, stream: serde_json::Value, why: &str| match check(version, stream) {
                Err(EngineError::Plan(m)) => assert!(m.contains(why), "{m}"),
                other => panic!("expected a plan error about {why}, got {other:?}"),
            };
        check(3, serde_json::json!({"ios": ios("qd", None)})).expect("a qd replay");
        check(
            3,
            serde_json::json!({"ios": ios("timed", Some(5)), "arrival": open,
            "stop_ms": 100}),
        )
        .expect("a timed loop that stops");
        refused(
            2,
            serde_json::json!({"ios": ios("qd", None)}),
            "needs plan_version 3",
        );
        let next = PLAN_VERSION + 1;
        refused(
            next,
            serde_json::json!({}),
            &format!("plan_version {next} is not supported"),
        );
        refused(
            3,
            serde_json::json!({"ios": ios("timed", None)}),
            "needs an open arrival",
        );
        refused(
            3,
            serde_json::json!({"ios": ios("afap", None), "arrival": open}),
            "needs an open arrival",
        );
        refused(
            3,
            serde_json::json!({"ios": ios("qd", None), "regions": [
                {"target": 0, "length": 4096}, {"target": 1, "length": 4096}]}),
            "exactly one region",
        );
        refused(
            3,
            serde_json::json!({"ios": ios("timed", Some(5)), "arrival": open}),
            "needs the run's duration_ms",
        );
        refused(
            3,
            serde_json::json!({"ios": ios("afap", Some(5)), "stop_ms": 100}),
            "needs the run's duration_ms",
        );
    }

    #[test]
    fn bad_regions_and_phases_are_refused() {
        refused(
            serde_json::json!({"regions": []}),
            "regions must not be empty",
        );
        refused(
            serde_json::json!({"regions": [{"target": 2, "length": 4096}]}),
            "target 2 does not exist",
        );
        refused(
            serde_json::json!({"regions": [{"target": 0, "length": 4096},
                {"target": 0, "offset": 8192, "length": 4096}]}),
            "listed twice",
        );
        refused(
            serde_json::json!({"regions": [{"target": 1, "offset": 4096, "length": 1048576}]}),
            "outside target length",
        );
        refused(
            serde_json::json!({"start_ms": 5000, "stop_ms": 5000}),
            "must be before stop_ms",
        );
        refused(serde_json::json!({"start_ms": 10000}), "within the run");
        refused(
            serde_json::json!({"pattern": {"kind": "zoned", "zones": [[60, 10], [30, 90]]}}),
            "sum to 100",
        );
        refused(
            serde_json::json!({"pattern": {"kind": "zoned", "zones": [[60, 0], [40, 100]]}}),
            "region_pct > 0",
        );
        refused(serde_json::json!({"stop_ms": 10001}), "within the run");
    }
}
