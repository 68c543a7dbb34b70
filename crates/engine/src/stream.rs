//! A stream's state: what its next IO is (op kind, size, offset), when it is due (arrival
//! schedule), and the buffers it owns. Pure logic, no IO: unit-testable on its own.

use std::cell::Cell;

use crate::buf::AlignedBuf;
use crate::data::{mix64, BlockGen, DedupePlan, Layout};
use crate::fiopatterns::{sequence_block, SizePrios, ZoneState};
use crate::plan::{Arrival, Cursors, Dist, Pattern, Spread, StreamSpec, SyncMode};
use crate::replay::{Cursor, ListInfo};
use crate::rng::{Rng, Zipf};
use crate::stats::{OpKind, StreamStats};

/// Where random offsets land within a region.
#[derive(Clone, Debug)]
enum Placement {
    Sequential,
    Uniform,
    /// Zipf over blocks, ranks scattered over the region by a bijective multiply-mod so the hot
    /// blocks are not all adjacent.
    Zipf {
        zipf: Zipf,
        scramble: u64,
    },
    Hotspot {
        hot_blocks: u64,
        hot_frac: f64,
    },
    /// Zones from the region's start: cumulative IO share, first block, block count.
    Zoned {
        zones: Vec<(f64, u64, u64)>,
    },
    /// A fixed block sequence (fiopatterns.rs), and the IOs placed so far per direction (in
    /// cells, so placing stays a read of the region for every other placement).
    Sequence {
        blocks: Box<[u64]>,
        stride: bool,
        issued: [Cell<u64>; 2],
    },
}

impl Placement {
    fn new(pattern: &Pattern, blocks: u64) -> Self {
        match pattern {
            Pattern::Sequential => Placement::Sequential,
            Pattern::Random => Placement::Uniform,
            Pattern::Zipf { theta } => Placement::Zipf {
                zipf: Zipf::new(blocks, *theta),
                scramble: coprime_multiplier(blocks),
            },
            Pattern::Hotspot { io_pct, region_pct } => Placement::Hotspot {
                hot_blocks: ((blocks as f64 * region_pct / 100.0) as u64).clamp(1, blocks),
                hot_frac: io_pct / 100.0,
            },
            Pattern::Zoned { zones } => {
                // fio (io_u.c __get_next_rand_offset_zoned): a zone starts at the blocks of
                // the region shares before it and spans its own share of them.
                let (mut io, mut region) = (0.0, 0.0);
                let zones = zones
                    .iter()
                    .map(|&(io_pct, region_pct)| {
                        let first = (blocks as f64 * region / 100.0) as u64;
                        region += region_pct;
                        io += io_pct;
                        let end = ((blocks as f64 * region / 100.0) as u64).min(blocks);
                        (
                            io / 100.0,
                            first.min(blocks - 1),
                            (end - first.min(end)).max(1),
                        )
                    })
                    .collect();
                Placement::Zoned { zones }
            }
            Pattern::Sequence { blocks, stride } => Placement::Sequence {
                blocks: blocks.clone().into_boxed_slice(),
                stride: *stride,
                issued: [Cell::new(0), Cell::new(0)],
            },
        }
    }
}

/// Open-loop schedule: intended issue times, kept in f64 ns so a constant rate never drifts.
#[derive(Clone, Debug)]
pub struct Schedule {
    pub mean_gap_ns: f64,
    pub poisson: bool,
    pub next_intended_ns: f64,
    /// Mean IOs per batch (1: none); IOs of the current batch still to take.
    pub batch_mean: f64,
    pub batch_left: u32,
    /// When the batch after the current one is due.
    pub pending_next: f64,
    /// Mean gap between the IOs of a batch (0: all at once), and then the mean gap from a
    /// batch's last IO to the next batch's first, which keeps the rate (plan.rs `batch_gap_ns`).
    pub batch_gap_ns: f64,
    pub batch_off_ns: f64,
}

impl Schedule {
    /// Intended time of the next IO, then advance the schedule.
    pub fn take(&mut self, rng: &mut Rng) -> u64 {
        let t = self.next_intended_ns;
        if self.batch_mean > 1.0 {
            return self.take_batched(rng);
        }
        let gap = if self.poisson {
            self.mean_gap_ns * rng.exp1()
        } else {
            self.mean_gap_ns
        };
        self.next_intended_ns += gap;
        t as u64
    }

    /// Batched arrivals (plan.rs `batch`): a batch of geometric size is due at once, the
    /// next one its size times the mean gap later (exponential for Poisson).
    #[inline(never)]
    fn take_batched(&mut self, rng: &mut Rng) -> u64 {
        let t = self.next_intended_ns;
        if self.batch_left == 0 {
            let p = 1.0 / self.batch_mean;
            let u = 1.0 - rng.next_f64(); // (0, 1]
            let size = 1.0 + (u.ln() / (1.0 - p).ln()).floor();
            self.batch_left = size.clamp(1.0, 1e6) as u32;
            let gap = self.mean_gap_ns * size;
            self.next_batch_gap(gap, rng);
        }
        self.batch_left -= 1;
        if self.batch_gap_ns > 0.0 {
            // spread batches: every gap is the batch's own or the one after it, each drawn
            // afresh (a two-phase hyperexponential with the stream's mean gap)
            let mean = if self.batch_left == 0 {
                self.batch_off_ns
            } else {
                self.batch_gap_ns
            };
            self.next_intended_ns += if self.poisson {
                mean * rng.exp1()
            } else {
                mean
            };
        } else if self.batch_left == 0 {
            self.next_intended_ns = self.pending_next;
        }
        t as u64
    }

    fn next_batch_gap(&mut self, gap: f64, rng: &mut Rng) {
        let gap = if self.poisson { gap * rng.exp1() } else { gap };
        self.pending_next = self.next_intended_ns + gap;
    }

    pub fn next_due(&self) -> u64 {
        self.next_intended_ns as u64
    }

    /// IOs whose intended time is at or before `now` and that are not yet issued.
    pub fn behind(&self, now: u64) -> u64 {
        if self.next_intended_ns > now as f64 {
            0
        } else {
            ((now as f64 - self.next_intended_ns) / self.mean_gap_ns) as u64 + 1
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BurstState {
    Active,
    /// Burst length reached; waiting for its IOs to complete.
    Draining,
    /// Transfer delay running.
    Sleeping,
}

/// The largest write of a group-commit round (worker/group.rs): PostgreSQL writes its WAL
/// buffers in writes of up to its wal_buffers (16 MiB at most), InnoDB its log buffer (16 MiB
/// by default); commits of a few KiB fill a MiB only far past any latency an SLO allows.
const GROUP_WRITE_MAX: u64 = 1 << 20;

/// A commit waiting for its round, or in one.
#[derive(Clone, Copy, Debug)]
pub struct Commit {
    pub intended: u64,
    pub io: NextIo,
}

/// A group-commit stream's commits (worker/group.rs runs them).
#[derive(Debug, Default)]
pub struct GroupCommit {
    /// Due, waiting for the next round, in order.
    pub(crate) waiting: std::collections::VecDeque<Commit>,
    /// The round in flight: its write, then its sync.
    pub(crate) round: Vec<Commit>,
    /// When the round's write was submitted.
    pub(crate) round_submitted: u64,
    pub(crate) in_flight: bool,
    /// The last round, ended in this loop turn and not yet recorded, and whether its write
    /// or sync failed (its errno).
    pub(crate) ended: Vec<Commit>,
    pub(crate) failed: Option<i32>,
    /// Rounds and commits so far (tests).
    pub rounds: u64,
    pub commits: u64,
}

impl GroupCommit {
    /// Nothing waits and no round is in flight.
    pub fn idle(&self) -> bool {
        self.waiting.is_empty() && !self.in_flight
    }

    /// No round in flight, and commits waiting for one: start it.
    pub fn ready(&self) -> bool {
        !self.in_flight && !self.waiting.is_empty()
    }
}

/// One IO decided by the generator, with where it goes, so issuing it needs no other lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextIo {
    pub kind: OpKind,
    pub len: u32,
    /// Absolute offset in the target's file or device.
    pub offset: u64,
    /// File-table index (the O_DSYNC one for a write of a dsync stream).
    pub file: u32,
    /// Index of the region (in the stream's `regions`) the IO goes to.
    pub region: u32,
    /// Its IO priority (IOPRIO_PRIO_VALUE; 0: the thread's own).
    pub ioprio: u16,
}

/// Where a plan target is in an engine thread's file table, where its data starts, and how
/// its blocks are verified.
#[derive(Clone, Copy, Debug, Default)]
pub struct TargetFiles {
    pub offset: u64,
    /// File-table indices for plain and O_DSYNC access, and for page-cache (writeback) writes.
    pub file: u32,
    pub file_dsync: u32,
    pub file_buffered: u32,
    /// With verification: how the target's blocks are stamped.
    pub verify: Option<BlockStamp>,
    /// The plain file's descriptor, and whether it is a block device (for dropping its cache).
    pub raw_fd: i32,
    pub is_block: bool,
}

/// What a verified target's blocks carry that the stream's block generator needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockStamp {
    pub target_id: u64,
    /// Verification block size in bytes.
    pub block: usize,
    /// The verified run writing (docs/verification.md): part of the content keys' seed.
    pub epoch: u32,
}

/// One region of a stream: which target, where, and its own placement state (a sequential
/// stream keeps one cursor per region).
#[derive(Clone, Debug)]
pub struct RegionState {
    /// Index of the target in the plan.
    pub target: u32,
    pub file: u32,
    pub file_dsync: u32,
    pub file_buffered: u32,
    /// Absolute offset of the region in the target's file or device.
    pub base: u64,
    pub length: u64,
    raw_fd: i32,
    is_block: bool,
    /// Bytes issued in the current pass over the region: [0] for every IO or random IO, per
    /// op kind with per-op cursors (fio counts a pass per direction, io_u.c last_pos[ddir]).
    pass_bytes: [u64; 2],
    /// Candidate block count for random placement (based on the largest size, so every IO fits).
    blocks: u64,
    placement: Placement,
    /// Next sequential offset: [0] for every IO, or per op kind (reads [0], writes [1]).
    seq_next: [u64; 2],
}

impl RegionState {
    #[inline(always)]
    fn random_block(&self, rng: &mut Rng, op: usize) -> u64 {
        match &self.placement {
            Placement::Sequential | Placement::Uniform => rng.below(self.blocks),
            Placement::Zipf { zipf, scramble } => {
                let rank = zipf.sample(rng) - 1;
                ((rank as u128 * *scramble as u128) % self.blocks as u128) as u64
            }
            Placement::Hotspot {
                hot_blocks,
                hot_frac,
            } => {
                let (hot, frac) = (*hot_blocks, *hot_frac);
                if hot >= self.blocks || rng.next_f64() < frac {
                    rng.below(hot)
                } else {
                    hot + rng.below(self.blocks - hot)
                }
            }
            Placement::Zoned { zones } => {
                let u = rng.next_f64();
                let &(_, first, count) = zones
                    .iter()
                    .find(|z| u < z.0)
                    .unwrap_or(zones.last().expect("validated zones"));
                (first + rng.below(count)).min(self.blocks - 1)
            }
            Placement::Sequence {
                blocks,
                stride,
                issued,
            } => {
                let n = issued[op].get();
                issued[op].set(n + 1);
                sequence_block(blocks, *stride, n, self.blocks)
            }
        }
    }
}

/// How the region of each IO of a stream over several regions is drawn.
#[derive(Clone, Debug)]
enum RegionPick {
    /// One region: nothing to draw (next_io does not even ask).
    One,
    Uniform(u64),
    /// Cumulative region lengths: every byte of every region is equally likely to be chosen.
    Size {
        cumulative: Vec<u64>,
        total: u64,
    },
}

impl RegionPick {
    fn new(spec: &StreamSpec) -> Self {
        let n = spec.regions.len();
        if n == 1 {
            return RegionPick::One;
        }
        match spec.spread {
            Spread::Uniform => RegionPick::Uniform(n as u64),
            Spread::Size => {
                let mut total = 0u64;
                let cumulative = spec
                    .regions
                    .iter()
                    .map(|r| {
                        total += r.length;
                        total
                    })
                    .collect();
                RegionPick::Size { cumulative, total }
            }
        }
    }

    /// Out of line: a one-region stream never calls it (its next_io stays as short as before).
    #[inline(never)]
    fn pick(&self, rng: &mut Rng) -> usize {
        match self {
            RegionPick::One => 0,
            RegionPick::Uniform(n) => rng.below(*n) as usize,
            RegionPick::Size { cumulative, total } => {
                let x = rng.below(*total);
                cumulative.partition_point(|&c| c <= x)
            }
        }
    }
}

/// What a stream waiting for others needs when they have ended: whom it waits for, and its
/// phase and first due IO relative to that moment.
#[derive(Clone, Debug)]
pub struct Gate {
    pub after: Vec<usize>,
    pub start_ns: u64,
    pub stop_ns: u64,
    first_due_ns: f64,
}

pub struct StreamState {
    /// Index in the plan.
    pub index: usize,
    pub regions: Vec<RegionState>,
    pick: RegionPick,
    align: u64,
    read_frac: f64,
    random_frac: f64,
    /// Every IO is sequential (the pattern is sequential).
    sequential_only: bool,
    /// plan.rs `skip`: (lo, hi) bytes before a sequential IO.
    skip: Option<(i64, i64)>,
    /// A sequential IO's start is moved (`skip` or `zones`): the one flag the IO path tests.
    moves_sequential: bool,
    /// Some IOs are placed sequentially although the pattern is not (random_pct < 100, or
    /// runs): the one flag the IO path tests for both.
    orders_mixed: bool,
    /// plan.rs `run_length` (1: off), and the IOs left in the current run.
    run_length: u32,
    run_left: u32,
    /// IO priority of its IOs, and (share above 0) the share issued at `ioprio_other`.
    ioprio: u16,
    ioprio_share: f64,
    ioprio_other: u16,
    /// Its IOs' priorities are drawn (a share at another one, or by size).
    draw_prio: bool,
    /// Writes take their sizes from `extras.write_size_cdf`.
    split_sizes: bool,
    size_cdf: Vec<(f64, u32)>,
    /// What only streams using fiopatterns.rs fields need, out of the way of the others.
    extras: Box<Extras>,
    pub qd: u32,
    pub inflight: u32,
    pub schedule: Option<Schedule>,
    /// Open loop: IOs are due at times (a rate schedule, or a timed replay's records).
    open_loop: bool,
    /// A stream replaying a list of recorded IOs (replay.rs): where it is in the list.
    pub replay: Option<Box<Cursor>>,
    /// Run time (ns) from which the stream issues IO, and from which it issues no more.
    pub start_ns: u64,
    pub stop_ns: u64,
    /// Waiting for other streams to end (plan.rs `after`): until then its start and stop are
    /// never, and its schedule's first IO is not due.
    pub gate: Option<Box<Gate>>,
    /// Its flow group and the streams its end stops (plan.rs `flow`, `on_end`; set by
    /// flow::Groups, not by `new`).
    pub pacing: Option<Box<crate::flow::Pacing>>,
    /// The issue time its schedule's timer is set for (u64::MAX: none set by on_timer).
    pub timer_due: u64,
    /// Group commit: its commits waiting and in their round (worker/group.rs).
    pub group: Option<Box<GroupCommit>>,
    /// It has ended (limit, stop time or a stop from outside; its IOs completed), or was
    /// asked to stop from outside.
    pub ended: bool,
    pub stopped: bool,
    burst: Option<(u32, u64)>,
    burst_issued: u32,
    pub burst_state: BurstState,
    fsync_every: u32,
    writes_since_fsync: u32,
    pub pending_fsyncs: u32,
    /// The region whose write completed the last fsync cadence: where pending fsyncs go.
    pub fsync_region: u32,
    pub dsync: bool,
    /// Its fsyncs are fdatasyncs.
    pub fsync_data: bool,
    /// Its writes are uncached page-cache writes (plan.rs `writeback`).
    pub writeback: bool,
    io_limit: Option<u64>,
    bytes_issued: u64,
    /// Its byte limit is used up and its last IO completed (reported once, as `done_ns`).
    pub done: bool,
    /// Reads and writes of a mix continue sequentially each from its own position.
    per_op_cursors: bool,
    /// Drop the region's cached pages after every pass (plan.rs `invalidate_each_pass`).
    invalidate_each_pass: bool,
    /// A pass just ended: the cache of this region is to be dropped before the next IO.
    pub invalidate_due: Option<u32>,
    buf_size: usize,
    read_bufs: Vec<AlignedBuf>,
    /// Write buffers whose data is prepared, and those given back whose first bytes were
    /// written (to prepare again after the next submit, off the submission path).
    write_bufs: Vec<AlignedBuf>,
    written_bufs: Vec<(AlignedBuf, usize)>,
    pub data: BlockGen,
    pub rng: Rng,
    pub interval: StreamStats,
    /// The worker's interval that `interval` counts (worker.rs `Handover`).
    pub stats_interval: u64,
    /// Open loop: an IO is due but the in-flight cap is reached.
    pub blocked: bool,
    pub queued_ready: bool,
}

impl StreamState {
    /// The state of plan stream `index`; `targets` says where every plan target is (and how it
    /// is verified).
    pub fn new(index: usize, spec: &StreamSpec, targets: &[TargetFiles]) -> Self {
        let max_size = spec.max_size();
        let read_cdf = size_cdf(&spec.sizes);
        let write_size_cdf = spec.write_sizes.as_deref().map_or(Vec::new(), size_cdf);
        let regions = spec
            .regions
            .iter()
            .map(|r| {
                let t = targets[r.target];
                let blocks = (r.length - max_size) / spec.align + 1;
                RegionState {
                    target: r.target as u32,
                    file: t.file,
                    file_dsync: t.file_dsync,
                    file_buffered: t.file_buffered,
                    base: t.offset + r.offset,
                    length: r.length,
                    raw_fd: t.raw_fd,
                    is_block: t.is_block,
                    pass_bytes: [0, 0],
                    blocks,
                    placement: Placement::new(&spec.pattern, blocks),
                    seq_next: [0, 0],
                }
            })
            .collect();
        let open = !matches!(spec.arrival, Arrival::Closed);
        let (start_ns, stop_ns) = spec.active_ns();
        let schedule = match &spec.arrival {
            // A replayed list's records say when each IO is due; its rate only describes it.
            _ if spec.ios.is_some() => None,
            Arrival::Closed => None,
            Arrival::Open {
                dist,
                in_step,
                batch,
                batch_gap_ns,
                ..
            } => {
                let mean_gap_ns = 1e9 / spec.rate_iops().expect("validated open rate");
                let batch_mean = batch.unwrap_or(1.0);
                let batch_gap_ns = batch_gap_ns.unwrap_or(0.0);
                let poisson = *dist == Dist::Poisson;
                // The first IO is due at a random point after the stream's phase starts: the
                // streams of a run are independent clients, not one clock. Started together,
                // 1,000 streams at 20 IOPS each issued 1,000 IOs at once every 50 ms, and the
                // queue that burst built up was reported as the storage's response time
                // (bench/README.md). A Poisson stream's first arrival is exponential, as for
                // any Poisson process observed from a fixed time; a constant-rate stream's is
                // uniform over its first gap. Drawn from a generator of its own, so the
                // stream's offsets and sizes do not change with it. `in_step` keeps the old
                // behaviour (the worker tests use it to know every issue time exactly).
                let mut phase =
                    Rng::new(spec.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ !(index as u64));
                let first = if *in_step {
                    0.0
                } else if poisson {
                    phase.exp1()
                } else {
                    phase.next_f64()
                };
                Some(Schedule {
                    mean_gap_ns,
                    poisson,
                    next_intended_ns: start_ns as f64 + first * mean_gap_ns,
                    batch_mean,
                    batch_left: 0,
                    pending_next: 0.0,
                    batch_gap_ns,
                    // validated positive (plan.rs)
                    batch_off_ns: batch_mean * mean_gap_ns - (batch_mean - 1.0) * batch_gap_ns,
                })
            }
        };
        let (fsync_every, fsync_data, group) = match spec.sync {
            SyncMode::Fsync { every, data, group } => (every, data, group),
            _ => (0, false, false),
        };
        let nregions = spec.regions.len();
        let mut state = StreamState {
            index,
            regions,
            pick: RegionPick::new(spec),
            align: spec.align,
            read_frac: spec.read_pct / 100.0,
            random_frac: spec.random_pct / 100.0,
            sequential_only: spec.pattern == Pattern::Sequential,
            skip: spec.skip,
            moves_sequential: spec.skip.is_some() || spec.zones.is_some(),
            orders_mixed: spec.random_pct < 100.0 || spec.run_length.is_some_and(|n| n > 1),
            run_length: spec.run_length.unwrap_or(1),
            run_left: 1,
            ioprio: spec.ioprio.map_or(0, |p| p.value()),
            ioprio_share: spec.ioprio_share.map_or(0.0, |p| p.pct / 100.0),
            ioprio_other: spec.ioprio_share.map_or(0, |p| p.prio().value()),
            draw_prio: spec.ioprio_share.is_some_and(|p| p.pct > 0.0)
                || spec.ioprio_by_size.is_some(),
            split_sizes: !write_size_cdf.is_empty(),
            size_cdf: read_cdf,
            extras: Box::new(Extras {
                size_prios: spec.ioprio_by_size.as_deref().map(SizePrios::new),
                zones: spec.zones.map(ZoneState::new),
                write_size_cdf,
            }),
            qd: spec.qd,
            inflight: 0,
            schedule,
            open_loop: open,
            replay: None,
            start_ns,
            stop_ns,
            gate: None,
            ended: false,
            stopped: false,
            burst: spec
                .burst
                .as_ref()
                .map(|b| (b.ios, (b.delay_ms * 1e6) as u64)),
            burst_issued: 0,
            burst_state: BurstState::Active,
            fsync_every,
            writes_since_fsync: 0,
            pending_fsyncs: 0,
            fsync_region: 0,
            dsync: spec.sync == SyncMode::Dsync,
            fsync_data,
            writeback: spec.writeback,
            io_limit: spec.io_limit,
            bytes_issued: 0,
            done: false,
            per_op_cursors: spec.cursors == Cursors::PerOp,
            invalidate_each_pass: spec.invalidate_each_pass,
            invalidate_due: None,
            // A group-commit round writes several commits at once.
            buf_size: if group {
                max_size.max(GROUP_WRITE_MAX) as usize
            } else {
                max_size as usize
            },
            read_bufs: Vec::new(),
            write_bufs: Vec::new(),
            written_bufs: Vec::new(),
            data: block_gen(spec, targets[spec.regions[0].target].verify),
            rng: Rng::new(spec.seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ index as u64),
            interval: StreamStats::with_regions(open, nregions),
            stats_interval: 0,
            blocked: false,
            queued_ready: false,
            pacing: None,
            timer_due: u64::MAX,
            group: group.then(Box::default),
        };
        state.interval = state.new_stats();
        if let Some(after) = &spec.after {
            let first_due_ns = state.schedule.as_ref().map_or(0.0, |s| s.next_intended_ns);
            state.gate = Some(Box::new(Gate {
                after: after.clone(),
                start_ns,
                stop_ns,
                first_due_ns,
            }));
            state.start_ns = u64::MAX;
            state.stop_ns = u64::MAX;
            if let Some(sched) = state.schedule.as_mut() {
                sched.next_intended_ns = f64::INFINITY;
            }
        }
        state
    }

    /// The streams it waited for have ended at `now`: its phase (and schedule) start from
    /// there. Returns its start.
    pub fn open_gate(&mut self, now: u64) -> u64 {
        let gate = self.gate.take().expect("a waiting stream");
        self.start_ns = now.saturating_add(gate.start_ns);
        self.stop_ns = now.saturating_add(gate.stop_ns);
        if let Some(sched) = self.schedule.as_mut() {
            sched.next_intended_ns = now as f64 + gate.first_due_ns;
        }
        self.start_ns
    }

    pub fn is_open_loop(&self) -> bool {
        self.open_loop
    }

    /// Replay `cursor`'s list instead of generating IO; `info` is what its check found.
    pub fn attach_replay(&mut self, cursor: Cursor, info: ListInfo) {
        self.buf_size = self.buf_size.max(info.max_len as usize);
        self.interval = self.new_stats_for(Some(&cursor));
        self.replay = Some(Box::new(cursor));
    }

    /// Empty statistics shaped for this stream (per-region counters when it has several,
    /// replay counters when it replays a list).
    pub fn new_stats(&self) -> StreamStats {
        self.new_stats_for(self.replay.as_deref())
    }

    fn new_stats_for(&self, replay: Option<&Cursor>) -> StreamStats {
        let mut stats = StreamStats::with_regions(self.is_open_loop(), self.regions.len());
        if self.draw_prio {
            stats = stats.with_prio_share(self.is_open_loop());
        }
        match replay {
            Some(_) => stats.with_replay(self.is_open_loop()),
            None => stats,
        }
    }

    /// True once the stream's IO limit is used up, or its replayed list is done.
    pub fn exhausted(&self) -> bool {
        self.io_limit.is_some_and(|l| self.bytes_issued >= l)
            || self.replay.as_ref().is_some_and(|r| r.done)
    }

    /// Is run time `now` inside the stream's phase [start, stop)?
    #[inline]
    pub fn active(&self, now: u64) -> bool {
        now >= self.start_ns && now < self.stop_ns
    }

    /// Nothing in flight, no sync owed, no commit waiting: the stream may end.
    #[inline]
    pub fn settled(&self) -> bool {
        self.inflight == 0
            && self.pending_fsyncs == 0
            && self.group.as_ref().is_none_or(|g| g.idle())
    }

    /// The size of its write buffers: the largest write it issues.
    pub fn write_buf_size(&self) -> usize {
        self.buf_size
    }

    /// May the stream issue a data IO now (ignoring its schedule and phase)?
    pub fn can_issue(&self) -> bool {
        self.inflight < self.qd && self.burst_state == BurstState::Active && !self.exhausted()
    }

    /// Open loop: IOs due by `now` and not yet issued, counting only those intended before the
    /// stream's stop (nothing is due after it).
    pub fn behind(&mut self, now: u64) -> u64 {
        if let Some(replay) = self.replay.as_mut() {
            // A list that cannot be read here fails the run when the worker next reads it.
            return replay.due_by(now).unwrap_or(0);
        }
        match &self.schedule {
            Some(sched) if !self.exhausted() => {
                sched.behind(now.min(self.stop_ns.saturating_sub(1)))
            }
            _ => 0,
        }
    }

    /// Decide the next data IO and account for it (burst, limit, sequential position).
    /// Inlined into the one place that issues data IOs: no call, no returned struct in memory.
    #[inline(always)]
    pub fn next_io(&mut self) -> NextIo {
        let mut len = self.pick_size();
        let kind = if self.read_frac >= 1.0 || self.rng.next_f64() < self.read_frac {
            OpKind::Read
        } else {
            if self.split_sizes {
                len = self.pick_write_size();
            }
            OpKind::Write
        };
        let sequential = self.sequential_only || (self.orders_mixed && self.draw_sequential());
        let r = if self.regions.len() > 1 {
            self.pick.pick(&mut self.rng)
        } else {
            0
        };
        let region = &mut self.regions[r];
        let cursor = (self.per_op_cursors && kind == OpKind::Write) as usize;
        let offset = if sequential {
            if self.moves_sequential {
                region.seq_next[cursor] = if let Some(range) = self.skip {
                    skipped_start(
                        region.seq_next[cursor],
                        range,
                        self.align,
                        region.length,
                        &mut self.rng,
                    )
                } else {
                    zoned_start(
                        &mut self.extras,
                        region.seq_next[cursor],
                        len,
                        region.length,
                    )
                };
            }
            if region.seq_next[cursor] + len as u64 > region.length {
                // Past the region's end: from its start again (fio's get_next_seq_offset for
                // a time_based job, also with holes and in a run of a random job).
                region.seq_next[cursor] = 0;
            }
            region.seq_next[cursor]
        } else {
            region.random_block(&mut self.rng, kind as usize) * self.align
        };
        region.seq_next[cursor] = (offset + len as u64).next_multiple_of(self.align);
        if self.invalidate_each_pass {
            // A pass is the region's length in bytes: fio's sequential job wraps at the end
            // of the file, its random job when its random map has visited every block.
            let pass = if sequential { cursor } else { 0 };
            region.pass_bytes[pass] += len as u64;
            if region.pass_bytes[pass] > region.length {
                region.pass_bytes[pass] = len as u64;
                self.invalidate_due = Some(r as u32);
            }
        }
        let file = if kind == OpKind::Write && self.dsync {
            region.file_dsync
        } else if kind == OpKind::Write && self.writeback {
            region.file_buffered
        } else {
            region.file
        };
        let offset = region.base + offset;
        self.bytes_issued += len as u64;
        if let Some((ios, _)) = self.burst {
            self.burst_issued += 1;
            if self.burst_issued >= ios {
                self.burst_state = BurstState::Draining;
            }
        }
        let ioprio = if self.draw_prio {
            self.draw_ioprio(kind as usize, len)
        } else {
            self.ioprio
        };
        NextIo {
            kind,
            len,
            offset,
            file,
            region: r as u32,
            ioprio,
        }
    }

    /// Is this IO of a stream with mixed order placed sequentially?
    #[inline(always)]
    fn draw_sequential(&mut self) -> bool {
        if self.run_length > 1 {
            return self.continues_run();
        }
        self.rng.next_f64() >= self.random_frac
    }

    /// With `run_length`: is this IO one of a run (sequential), or does it start one (drawn
    /// as without runs)? fio's get_next_offset: the first IO starts a run (td->ddir_seq_nr
    /// starts at 1), then every run_length-th; `random_pct` decides only at a run's start
    /// (should_do_random is asked only there).
    #[inline(never)]
    fn continues_run(&mut self) -> bool {
        self.run_left -= 1;
        if self.run_left > 0 {
            return true;
        }
        self.run_left = self.run_length;
        self.sequential_only || (self.random_frac < 1.0 && self.rng.next_f64() >= self.random_frac)
    }

    /// The priority of an IO of a stream with a share at another one (fio's cmdprio.c
    /// fio_cmdprio_set_ioprio: each IO drawn on its own); counted in the interval's stats.
    #[inline(never)]
    fn draw_ioprio(&mut self, op: usize, len: u32) -> u16 {
        if let Some(by_size) = &self.extras.size_prios {
            return by_size.draw(op, len, self.ioprio, &mut self.rng);
        }
        if self.rng.next_f64() < self.ioprio_share {
            self.ioprio_other
        } else {
            self.ioprio
        }
    }

    /// The IO priority of the stream's IOs that are not drawn for its share.
    pub fn ioprio(&self) -> u16 {
        self.ioprio
    }

    /// Write back and drop region `r`'s cached pages, as fio's file_invalidate_cache does
    /// between passes: a block device is flushed whole (BLKFLSBUF, which waits for the
    /// writeback), a file's range is dropped (POSIX_FADV_DONTNEED). Failures are ignored, as
    /// fio ignores them ("not a fatal condition").
    pub fn drop_region_cache(&self, r: u32) {
        let region = &self.regions[r as usize];
        /// `_IO(0x12, 97)`: write back and invalidate a block device's buffers.
        const BLKFLSBUF: libc::c_ulong = 0x1261;
        // SAFETY: the fd stays open for the engine's life; the ioctl takes no argument and
        // posix_fadvise only advises the kernel.
        unsafe {
            if region.is_block {
                libc::ioctl(region.raw_fd, BLKFLSBUF, 0);
            } else {
                libc::posix_fadvise(
                    region.raw_fd,
                    region.base as i64,
                    region.length as i64,
                    libc::POSIX_FADV_DONTNEED,
                );
            }
        }
    }

    /// A write's size from `write_sizes` (out of line: streams without them never call it).
    #[inline(never)]
    fn pick_write_size(&mut self) -> u32 {
        let u = self.rng.next_f64();
        let cdf = &self.extras.write_size_cdf;
        cdf.iter()
            .find(|(c, _)| u < *c)
            .unwrap_or(cdf.last().expect("non-empty size mix"))
            .1
    }

    fn pick_size(&mut self) -> u32 {
        if self.size_cdf.len() == 1 {
            return self.size_cdf[0].1;
        }
        let u = self.rng.next_f64();
        self.size_cdf
            .iter()
            .find(|(c, _)| u < *c)
            .unwrap_or(self.size_cdf.last().expect("non-empty size mix"))
            .1
    }

    /// A write to `region` completed: count it toward the fsync cadence.
    pub fn on_write_done(&mut self, region: u32) {
        if self.fsync_every > 0 {
            self.writes_since_fsync += 1;
            if self.writes_since_fsync >= self.fsync_every {
                self.writes_since_fsync = 0;
                self.pending_fsyncs += 1;
                self.fsync_region = region;
            }
        }
    }

    /// After a completion: if a burst has fully drained, the transfer delay starts.
    /// Returns the delay in ns when the stream should now sleep.
    pub fn burst_drained(&mut self) -> Option<u64> {
        match self.burst {
            Some((_, delay)) if self.burst_state == BurstState::Draining && self.inflight == 0 => {
                self.burst_state = BurstState::Sleeping;
                Some(delay)
            }
            _ => None,
        }
    }

    pub fn wake_from_burst(&mut self) {
        self.burst_state = BurstState::Active;
        self.burst_issued = 0;
    }

    /// A buffer for an IO of `len` bytes: reused if one is free, else allocated. A write
    /// buffer's first `len` bytes hold fresh data (data.rs), prepared when the buffer came
    /// back (`prepare_written`), so the submission path only takes it.
    pub fn take_buf(&mut self, kind: OpKind, len: u32) -> AlignedBuf {
        match kind {
            OpKind::Write => {
                let len = len as usize;
                let mut buf = match self.write_bufs.pop() {
                    Some(b) => b,
                    None => match self.written_bufs.pop() {
                        Some((mut b, used)) => {
                            self.prepare(&mut b, used);
                            b
                        }
                        None => AlignedBuf::new(self.buf_size),
                    },
                };
                if buf.prepared < len {
                    let from = buf.prepared;
                    let end = len.next_multiple_of(self.data.layout.block).min(buf.len());
                    self.data.prepare(&mut buf.as_mut_slice()[from..end]);
                    buf.prepared = end;
                }
                buf
            }
            _ => self
                .read_bufs
                .pop()
                .unwrap_or_else(|| AlignedBuf::new(self.buf_size.max(4096))),
        }
    }

    /// Prepare the first `used` bytes of a buffer again (they were written).
    fn prepare(&mut self, buf: &mut AlignedBuf, used: usize) {
        let end = used.next_multiple_of(self.data.layout.block).min(buf.len());
        self.data.prepare(&mut buf.as_mut_slice()[..end]);
        buf.prepared = buf.prepared.max(end);
    }

    /// Give a buffer back; `used` is the IO's length.
    pub fn return_buf(&mut self, kind: OpKind, buf: AlignedBuf, used: u32) {
        match kind {
            OpKind::Write => self.written_bufs.push((buf, used as usize)),
            _ => self.read_bufs.push(buf),
        }
    }

    /// Prepare the data of the write buffers given back since the last call: work done after
    /// the next submit, while the device is busy.
    pub fn prepare_written(&mut self) {
        while let Some((mut buf, used)) = self.written_bufs.pop() {
            self.prepare(&mut buf, used);
            self.write_bufs.push(buf);
        }
    }

    pub fn has_written_bufs(&self) -> bool {
        !self.written_bufs.is_empty()
    }

    /// Bytes held in this stream's idle buffers.
    pub fn buffer_bytes(&self) -> usize {
        (self.read_bufs.len() + self.write_bufs.len() + self.written_bufs.len()) * self.buf_size
    }
}

/// The block generator of a stream: 4 KiB blocks, or the verification block of its targets
/// (the plan requires every target of a stream to be verified alike). Pool copies are
/// prepared for its first target; the worker re-labels one written to another.
///
/// The content keys follow from the stream's seed and, with verification, the epoch: two
/// verified runs with the same seed write different bytes, so a sector left from the earlier
/// run (a torn or lost write) cannot pass for the later one's. Runs stay reproducible: the
/// same seed and epoch give the same keys.
fn block_gen(spec: &StreamSpec, verify: Option<BlockStamp>) -> BlockGen {
    let (target_id, block, epoch) =
        verify.map_or((0, 4096, 0), |v| (v.target_id, v.block, v.epoch));
    let layout = Layout::new(block, spec.compress_pct, verify.is_some());
    let length: u64 = spec.regions.iter().map(|r| r.length).sum();
    let dedupe = match spec.dedupe_pool {
        Some(pool) => DedupePlan::with_pool(spec.dedupe_ratio, pool),
        None => DedupePlan::new(spec.dedupe_ratio, length / block as u64),
    };
    let epoch_salt = if epoch == 0 {
        0
    } else {
        mix64(0x6570_6f63_6800_0000 ^ epoch as u64)
    };
    BlockGen::new(
        layout,
        dedupe,
        target_id,
        spec.seed ^ (spec.regions[0].target as u64) << 32 ^ epoch_salt,
    )
    .with_pool_id(spec.dedupe_pool.map_or(0, |p| p.id))
}

/// What only streams with fiopatterns.rs fields use (boxed: the others' state stays as small
/// as it was).
struct Extras {
    /// plan.rs `ioprio_by_size`.
    size_prios: Option<SizePrios>,
    /// plan.rs `zones`: where the stream is in its strided zones.
    zones: Option<ZoneState>,
    /// plan.rs `write_sizes` (empty: writes take `size_cdf`).
    write_size_cdf: Vec<(f64, u32)>,
}

/// Where a sequential IO of a stream with strided zones starts (out of line: other streams
/// never call it).
#[inline(never)]
fn zoned_start(extras: &mut Extras, prev_end: u64, len: u32, length: u64) -> u64 {
    match extras.zones.as_mut() {
        Some(z) => z.place(prev_end, len as u64, length),
        None => prev_end,
    }
}

/// Cumulative weights of a size mix (sizes of weight 0 left out).
fn size_cdf(sizes: &[(u64, f64)]) -> Vec<(f64, u32)> {
    let total_w: f64 = sizes.iter().map(|s| s.1).sum();
    let mut acc = 0.0;
    sizes
        .iter()
        .filter(|s| s.1 > 0.0)
        .map(|&(size, w)| {
            acc += w / total_w;
            (acc, size as u32)
        })
        .collect()
}

/// Where a sequential IO with a skip starts, `prev_end` being where the previous one ended
/// (fio's get_next_seq_offset with `rw=...:N`): the region's first IO at its start (no skip);
/// a start before the region's start continues from its end plus the skip (a backwards
/// stream wraps to the end). One past the end is the caller's (it wraps to the start).
#[inline(never)]
fn skipped_start(prev_end: u64, range: (i64, i64), align: u64, length: u64, rng: &mut Rng) -> u64 {
    if prev_end == 0 {
        return 0;
    }
    let skip = skip_bytes(range, align, rng);
    match prev_end.checked_add_signed(skip) {
        Some(next) => next,
        None => length.saturating_add_signed(skip),
    }
}

/// A skip drawn from `(lo, hi)`: log-uniform in magnitude between them, their sign, a whole
/// number of `align` (at least one).
#[inline(never)]
fn skip_bytes((lo, hi): (i64, i64), align: u64, rng: &mut Rng) -> i64 {
    let (a, b) = (lo.unsigned_abs() as f64, hi.unsigned_abs() as f64);
    let magnitude = if a == b {
        a
    } else {
        (a.ln() + rng.next_f64() * (b.ln() - a.ln())).exp()
    };
    let aligned = ((magnitude / align as f64).round() as i64).max(1) * align as i64;
    if lo < 0 {
        -aligned
    } else {
        aligned
    }
}

/// A multiplier coprime to `n`, so `rank * m mod n` permutes 0..n.
pub(crate) fn coprime_multiplier(n: u64) -> u64 {
    if n <= 2 {
        return 1;
    }
    let mut m = (0x9E37_79B9_7F4A_7C15u64 % n).max(2);
    while gcd(m, n) != 1 {
        m += 1;
        if m >= n {
            m = 2;
        }
    }
    m
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{Burst, Plan};

    /// A stream spec: a small random-read stream with `extra` fields overriding the defaults.
    fn spec(extra: &str) -> StreamSpec {
        let mut stream: serde_json::Value = serde_json::from_str(
            r#"{"name":"s","regions":[{"target":0,"length":1048576}],"read_pct":100,"sizes":[[4096,1]],
                "pattern":{"kind":"random"},"align":4096,"qd":1,"arrival":{"kind":"closed"},
                "seed":9}"#,
        )
        .unwrap();
        let extra: serde_json::Value =
            serde_json::from_str(&format!("{{{}}}", extra.trim_start_matches(','))).unwrap();
        for (k, v) in extra.as_object().unwrap() {
            stream[k] = v.clone();
        }
        let plan = serde_json::json!({"plan_version":4,"backend":"null","threads":1,"interval_ms":1000,
            "targets":[{"path":"/x","length":1048576},{"path":"/y","length":4194304}],
            "streams":[stream]});
        Plan::from_json(&plan.to_string())
            .unwrap()
            .streams
            .remove(0)
    }

    fn base(extra: &str) -> String {
        extra.to_string()
    }

    /// The state of a spec whose targets all start at offset 0 in file 0.
    fn state(spec: &StreamSpec) -> StreamState {
        StreamState::new(0, spec, &[TargetFiles::default(); 2])
    }

    #[test]
    fn random_offsets_are_aligned_and_inside_region() {
        let mut s = state(&spec(&base(r#","sizes":[[4096,1],[65536,1]]"#)));
        for _ in 0..10_000 {
            let io = s.next_io();
            assert_eq!(io.offset % 4096, 0);
            assert!(io.offset + io.len as u64 <= 1048576);
        }
    }

    #[test]
    fn sequential_wraps_at_region_end() {
        let mut s = state(&spec(&base(
            r#","pattern":{"kind":"sequential"},"sizes":[[262144,1]]"#,
        )));
        let offs: Vec<u64> = (0..6).map(|_| s.next_io().offset).collect();
        assert_eq!(offs, vec![0, 262144, 524288, 786432, 0, 262144]);
    }

    #[test]
    fn size_mix_and_read_share_follow_weights() {
        let mut s = state(&spec(&base(
            r#","read_pct":70,"sizes":[[512,22],[4096,23],[65536,55]]"#,
        )));
        let n = 100_000;
        let (mut reads, mut small, mut mid) = (0, 0, 0);
        for _ in 0..n {
            let io = s.next_io();
            reads += (io.kind == OpKind::Read) as u32;
            small += (io.len == 512) as u32;
            mid += (io.len == 4096) as u32;
        }
        let f = |x: u32| x as f64 / n as f64;
        assert!((f(reads) - 0.70).abs() < 0.01, "reads {}", f(reads));
        assert!((f(small) - 0.22).abs() < 0.01, "512 {}", f(small));
        assert!((f(mid) - 0.23).abs() < 0.01, "4k {}", f(mid));
    }

    #[test]
    fn hotspot_sends_the_share_to_the_hot_region() {
        let mut s = state(&spec(&base(
            r#","pattern":{"kind":"hotspot","io_pct":90,"region_pct":10}"#,
        )));
        let hot_end = 1048576 / 10;
        let n = 50_000;
        let hot = (0..n).filter(|_| s.next_io().offset < hot_end).count();
        assert!(
            (hot as f64 / n as f64 - 0.9).abs() < 0.01,
            "hot share {hot}"
        );
    }

    #[test]
    fn zoned_sends_each_zone_its_share() {
        // fio's zoned:50/5:30/15:20/80 (rand-zones.fio): 50% of the IOs to the first 5% of the
        // region, 30% to the next 15%, 20% to the remaining 80%.
        let mut s = state(&spec(&base(
            r#","pattern":{"kind":"zoned","zones":[[50,5],[30,15],[20,80]]}"#,
        )));
        let (first, second) = (1048576 / 20, 1048576 / 5);
        let n = 100_000;
        let mut counts = [0u32; 3];
        for _ in 0..n {
            let off = s.next_io().offset;
            counts[(off >= first) as usize + (off >= second) as usize] += 1;
        }
        let f = |c: u32| c as f64 / n as f64;
        assert!((f(counts[0]) - 0.5).abs() < 0.01, "{counts:?}");
        assert!((f(counts[1]) - 0.3).abs() < 0.01, "{counts:?}");
        assert!((f(counts[2]) - 0.2).abs() < 0.01, "{counts:?}");
    }

    #[test]
    fn a_new_pass_over_the_region_drops_its_cache_first_when_asked() {
        // fio's time_based buffered jobs drop the file's cache when a sequential job wraps to
        // the start and when a random job's map has visited every block (io_u.c
        // loop_cache_invalidate): a pass is the region's length in bytes (1 MiB of 4k here).
        for pattern in [
            r#","pattern":{"kind":"sequential"},"random_pct":0"#,
            r#","pattern":{"kind":"random"}"#,
        ] {
            let mut s = state(&spec(&format!(r#"{pattern},"invalidate_each_pass":true"#)));
            let due: Vec<usize> = (0..1000)
                .filter(|_| {
                    s.next_io();
                    s.invalidate_due.take().is_some()
                })
                .collect();
            assert_eq!(due, [256, 512, 768], "{pattern}");
            // Not asked: never.
            let mut s = state(&spec(pattern));
            assert!((0..1000).all(|_| {
                s.next_io();
                s.invalidate_due.is_none()
            }));
        }
        // A sequential mix with per-op cursors: reads and writes each pass on their own.
        let mut s = state(&spec(
            r#","read_pct":50,"pattern":{"kind":"sequential"},"random_pct":0,"cursors":"per-op","invalidate_each_pass":true"#,
        ));
        let (mut reads, mut writes) = (0u64, 0u64);
        for _ in 0..2000 {
            let io = s.next_io();
            let done = if io.kind == OpKind::Read {
                &mut reads
            } else {
                &mut writes
            };
            *done += 1;
            if s.invalidate_due.take().is_some() {
                assert_eq!(
                    (*done - 1) % 256,
                    0,
                    "a pass ends after 256 IOs of one kind"
                );
            }
        }
    }

    #[test]
    fn a_mix_continues_each_op_from_its_own_position_with_per_op_cursors() {
        // fio's rw=rw keeps last_pos per direction: reads and writes each go 0, 4k, 8k, ...
        let mut s = state(&spec(&base(
            r#","read_pct":50,"pattern":{"kind":"sequential"},"random_pct":0,"cursors":"per-op""#,
        )));
        let (mut next_read, mut next_write) = (0, 0);
        for _ in 0..1000 {
            let io = s.next_io();
            let next = if io.kind == OpKind::Read {
                &mut next_read
            } else {
                &mut next_write
            };
            assert_eq!(io.offset, *next % 1048576);
            *next += 4096;
        }
        assert!(next_read > 0 && next_write > 0);
        // Shared (the default): one position for both.
        let mut s = state(&spec(&base(
            r#","read_pct":50,"pattern":{"kind":"sequential"},"random_pct":0"#,
        )));
        for i in 0..1000u64 {
            assert_eq!(s.next_io().offset, i * 4096 % 1048576);
        }
    }

    #[test]
    fn zipf_concentrates_on_few_blocks() {
        let mut s = state(&spec(&base(r#","pattern":{"kind":"zipf","theta":1.2}"#)));
        let mut counts = std::collections::HashMap::new();
        for _ in 0..50_000 {
            *counts.entry(s.next_io().offset).or_insert(0u32) += 1;
        }
        let mut v: Vec<u32> = counts.values().copied().collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        let top10: u32 = v.iter().take(10).sum();
        // With theta 1.2 over 256 blocks the 10 hottest take well over half of all IOs.
        assert!(
            top10 as f64 / 50_000.0 > 0.5,
            "top10 share {}",
            top10 as f64 / 50_000.0
        );
    }

    #[test]
    fn partly_random_stream_continues_sequentially() {
        let mut s = state(&spec(&base(r#","random_pct":0"#)));
        let offs: Vec<u64> = (0..4).map(|_| s.next_io().offset).collect();
        assert_eq!(offs, vec![0, 4096, 8192, 12288]);
    }

    #[test]
    fn constant_schedule_has_exact_gaps() {
        let mut s = state(&spec(&base(
            r#","arrival":{"kind":"open","rate_iops":4000,"dist":"constant","in_step":true}"#,
        )));
        let mut rng = Rng::new(1);
        let sched = s.schedule.as_mut().unwrap();
        let times: Vec<u64> = (0..5).map(|_| sched.take(&mut rng)).collect();
        assert_eq!(times, vec![0, 250_000, 500_000, 750_000, 1_000_000]);
        // Next due at 1.25 ms: nothing behind before it, one more every 250 us after.
        assert_eq!(sched.behind(1_000_000), 0);
        assert_eq!(sched.behind(1_250_000), 1);
        assert_eq!(sched.behind(1_749_999), 2);
        assert_eq!(sched.behind(1_750_000), 3);
    }

    #[test]
    fn rate_in_bytes_uses_mean_size() {
        let s = spec(&base(
            r#","sizes":[[4096,1],[12288,1]],"arrival":{"kind":"open","rate_bps":8192000,"dist":"poisson"}"#,
        ));
        assert_eq!(s.rate_iops(), Some(1000.0));
    }

    #[test]
    fn burst_drains_then_sleeps() {
        let mut sp = spec(&base(""));
        sp.burst = Some(Burst {
            ios: 2,
            delay_ms: 5.0,
        });
        sp.qd = 4;
        let mut s = state(&sp);
        s.next_io();
        s.inflight += 1;
        assert!(s.can_issue());
        s.next_io();
        s.inflight += 1;
        assert!(!s.can_issue(), "burst length reached");
        s.inflight = 1;
        assert_eq!(s.burst_drained(), None);
        s.inflight = 0;
        assert_eq!(s.burst_drained(), Some(5_000_000));
        s.wake_from_burst();
        assert!(s.can_issue());
    }

    #[test]
    fn write_buffers_get_fresh_data_and_honour_compressibility() {
        let mut s = state(&spec(&base(
            r#","read_pct":0,"sizes":[[16384,1]],"compress_pct":50"#,
        )));
        let a = s.take_buf(OpKind::Write, 16384);
        let first: Vec<u8> = a.as_slice().to_vec();
        s.return_buf(OpKind::Write, a, 16384);
        assert!(s.has_written_bufs());
        s.prepare_written();
        let b = s.take_buf(OpKind::Write, 16384);
        let blocks: std::collections::HashSet<&[u8]> = first
            .chunks(4096)
            .chain(b.as_slice().chunks(4096))
            .collect();
        assert_eq!(blocks.len(), 8, "fresh data for every write");
        let zeros = b.as_slice().iter().filter(|&&x| x == 0).count();
        assert!((zeros as f64 / 16384.0 - 0.5).abs() < 0.01, "zeros {zeros}");
    }

    /// Two regions: 1 MiB on target 0, 4 MiB on target 1.
    fn two_regions(extra: &str) -> StreamSpec {
        spec(&format!(
            r#","regions":[{{"target":0,"length":1048576}},{{"target":1,"length":4194304}}]{extra}"#
        ))
    }

    /// IOs per region over `n` draws, offsets checked to lie inside their region.
    fn per_region(s: &mut StreamState, n: usize) -> [usize; 2] {
        let mut counts = [0; 2];
        for _ in 0..n {
            let io = s.next_io();
            let region = &s.regions[io.region as usize];
            assert!(io.offset + io.len as u64 <= region.length);
            assert_eq!(io.offset % 4096, 0);
            counts[io.region as usize] += 1;
        }
        counts
    }

    #[test]
    fn uniform_spread_sends_each_region_the_same_share() {
        let mut s = state(&two_regions(""));
        let counts = per_region(&mut s, 100_000);
        let share = counts[0] as f64 / 100_000.0;
        assert!((share - 0.5).abs() < 0.01, "region 0 share {share}");
    }

    #[test]
    fn size_spread_weighs_regions_by_length() {
        let mut s = state(&two_regions(r#","spread":"size""#));
        let counts = per_region(&mut s, 100_000);
        let share = counts[0] as f64 / 100_000.0;
        assert!((share - 0.2).abs() < 0.01, "1 MiB of 5 MiB got {share}");
    }

    #[test]
    fn a_sequential_stream_keeps_a_cursor_per_region() {
        let mut s = state(&two_regions(
            r#","pattern":{"kind":"sequential"},"sizes":[[262144,1]]"#,
        ));
        let mut seen: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
        for _ in 0..40 {
            let io = s.next_io();
            seen[io.region as usize].push(io.offset);
        }
        for (r, offsets) in seen.iter().enumerate() {
            let wrap = s.regions[r].length / 262144;
            let expected: Vec<u64> = (0..offsets.len() as u64)
                .map(|k| (k % wrap) * 262144)
                .collect();
            assert_eq!(offsets, &expected, "region {r}");
        }
        assert!(seen[0].len() > 5 && seen[1].len() > 5, "both regions used");
    }

    #[test]
    fn spread_batches_keep_the_rate_with_their_own_gap_inside_a_batch() {
        // batch 8, in-batch gap 100 ns, mean gap 1000 ns: the gap after a batch is
        // 8 * 1000 - 7 * 100 = 7300 ns on average, 1 gap in 8
        let schedule = |poisson| batches_of_8(poisson, 100.0, 7300.0);
        let mut rng = Rng::new(5);
        let mut s = schedule(false);
        let times: Vec<u64> = (0..200_000).map(|_| s.take(&mut rng)).collect();
        let gaps: Vec<u64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        let inside = gaps.iter().filter(|&&g| g == 100).count() as f64 / gaps.len() as f64;
        let after = gaps.iter().filter(|&&g| g == 7300).count();
        assert_eq!(
            after + (inside * gaps.len() as f64).round() as usize,
            gaps.len()
        );
        assert!((inside - 7.0 / 8.0).abs() < 0.01, "in-batch share {inside}");
        let mean = *times.last().unwrap() as f64 / times.len() as f64;
        assert!(
            (mean / 1000.0 - 1.0).abs() < 0.03,
            "constant: mean gap {mean}"
        );

        // Poisson: exponential gaps of either mean, so the CV is the hyperexponential's,
        // sqrt(2 * (7/8 * 100^2 + 1/8 * 7300^2) / 1000^2 - 1) = 3.51
        let mut s = schedule(true);
        let times: Vec<f64> = (0..400_000).map(|_| s.take(&mut rng) as f64).collect();
        let gaps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        let n = gaps.len() as f64;
        let mean = gaps.iter().sum::<f64>() / n;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n).sqrt();
        assert!(
            (mean / 1000.0 - 1.0).abs() < 0.03,
            "poisson: mean gap {mean}"
        );
        assert!(
            (sd / mean / 3.51 - 1.0).abs() < 0.05,
            "poisson: CV {}",
            sd / mean
        );
        let short = gaps.iter().filter(|&&g| g < 300.0).count() as f64 / n;
        // P(gap < 300): 7/8 (1 - e^-3) + 1/8 (1 - e^(-300/7300)) = 0.837
        assert!((short - 0.837).abs() < 0.01, "gaps under 300 ns {short}");
    }

    /// A schedule at a mean gap of 1000 ns in batches of mean 8, their IOs `gap_ns` apart
    /// and `off_ns` after a batch's last (0, 0: each batch at once).
    fn batches_of_8(poisson: bool, gap_ns: f64, off_ns: f64) -> Schedule {
        Schedule {
            mean_gap_ns: 1000.0,
            poisson,
            next_intended_ns: 0.0,
            batch_mean: 8.0,
            batch_left: 0,
            pending_next: 0.0,
            batch_gap_ns: gap_ns,
            batch_off_ns: off_ns,
        }
    }

    #[test]
    fn batched_arrivals_keep_the_rate_and_come_in_batches_of_the_mean_size() {
        for poisson in [false, true] {
            let mut s = batches_of_8(poisson, 0.0, 0.0);
            let mut rng = Rng::new(3);
            let times: Vec<u64> = (0..200_000).map(|_| s.take(&mut rng)).collect();
            let rate_gap = *times.last().unwrap() as f64 / times.len() as f64;
            assert!(
                (rate_gap / 1000.0 - 1.0).abs() < 0.05,
                "mean gap {rate_gap}"
            );
            let batches = 1 + times.windows(2).filter(|w| w[1] != w[0]).count();
            let mean = times.len() as f64 / batches as f64;
            assert!((mean / 8.0 - 1.0).abs() < 0.05, "mean batch {mean}");
            assert!(times.windows(2).all(|w| w[1] >= w[0]));
        }
    }

    #[test]
    fn regions_carry_their_target_and_absolute_base() {
        let sp = spec(
            r#","regions":[{"target":1,"offset":8192,"length":1048576},{"target":0,"length":1048576}]"#,
        );
        let files = [
            TargetFiles {
                raw_fd: -1,
                is_block: false,
                offset: 4096,
                file: 0,
                file_dsync: 2,
                file_buffered: 2,
                verify: None,
            },
            TargetFiles {
                raw_fd: -1,
                is_block: false,
                offset: 0,
                file: 1,
                file_dsync: 1,
                file_buffered: 1,
                verify: None,
            },
        ];
        let s = StreamState::new(0, &sp, &files);
        let r: Vec<(u32, u32, u32, u64)> = s
            .regions
            .iter()
            .map(|r| (r.target, r.file, r.file_dsync, r.base))
            .collect();
        assert_eq!(r, [(1, 1, 1, 8192), (0, 0, 2, 4096)]);
        assert_eq!(s.new_stats().regions.len(), 2);
        assert!(state(&spec("")).new_stats().regions.is_empty());
    }

    #[test]
    fn an_open_loop_schedule_starts_with_the_phase_and_is_behind_only_until_stop() {
        let mut s = state(&spec(
            r#","arrival":{"kind":"open","rate_iops":1000,"dist":"constant"},"start_ms":100,"stop_ms":200"#,
        ));
        let first = s.schedule.as_ref().unwrap().next_due();
        assert!(
            (100_000_000..101_000_000).contains(&first),
            "the first IO falls in the first 1 ms gap after the start: {first}"
        );
        assert!(!s.active(99_999_999) && s.active(100_000_000) && !s.active(200_000_000));
        assert_eq!(s.behind(50_000_000), 0, "nothing due before start");
        assert_eq!(s.behind(first + 49_500_000), 50);
        assert_eq!(s.behind(900_000_000), 100, "nothing due after stop");
    }

    #[test]
    fn open_loop_streams_start_out_of_step() {
        // 1,000 streams at 20 IOPS (50 ms apart): their first IOs spread over the first 50 ms
        // instead of all falling due at once.
        let gap = 50_000_000u64;
        let firsts = |dist: &str| -> Vec<u64> {
            let sp = spec(&format!(
                r#","arrival":{{"kind":"open","rate_iops":20,"dist":"{dist}"}}"#
            ));
            (0..1000)
                .map(|i| {
                    let st = StreamState::new(i, &sp, &[TargetFiles::default()]);
                    st.schedule.unwrap().next_due()
                })
                .collect()
        };
        let constant = firsts("constant");
        assert!(constant.iter().all(|&t| t < gap));
        let per_tenth = |ts: &[u64]| {
            let mut n = [0u32; 10];
            for &t in ts {
                n[((t * 10 / gap) as usize).min(9)] += 1;
            }
            n
        };
        // Uniform: about 100 in each tenth of the gap.
        assert!(
            per_tenth(&constant)
                .iter()
                .all(|&n| (60..=140).contains(&n)),
            "{:?}",
            per_tenth(&constant)
        );
        // Poisson: exponential first arrivals, mean one gap.
        let poisson = firsts("poisson");
        let mean = poisson.iter().sum::<u64>() as f64 / 1000.0;
        assert!(
            (0.85..1.15).contains(&(mean / gap as f64)),
            "mean first arrival {mean}"
        );
        // Reproducible: the same plan gives the same phases.
        assert_eq!(constant, firsts("constant"));
    }

    /// Offsets of the next `n` IOs.
    fn offsets(s: &mut StreamState, n: usize) -> Vec<u64> {
        (0..n).map(|_| s.next_io().offset).collect()
    }

    #[test]
    fn a_negative_skip_reads_backwards_and_wraps_to_the_regions_end() {
        // fio's examples/backwards-read.fio (rw=read:-8k, bs=4k): the first IO at the start
        // (io_u.c get_next_seq_offset adds nothing while pos is 0), then each 8k before the
        // previous end; before the start, from the end plus the skip (size - 8k), down to 4k.
        let mut s = state(&spec(
            r#","pattern":{"kind":"sequential"},"random_pct":0,"skip":[-8192,-8192]"#,
        ));
        let mib = 1048576u64;
        let mut want = vec![0];
        want.extend((1..255u64).map(|k| mib - 4096 - k * 4096));
        want.extend([0, mib - 8192, mib - 12288]);
        assert_eq!(offsets(&mut s, 258), want);
        // A pass of 255 IOs reads every block once but the last (the wrap lands 8k before
        // the end), as fio's does.
        let mut pass = want[..255].to_vec();
        pass.sort_unstable();
        assert_eq!(pass, (0..255u64).map(|k| k * 4096).collect::<Vec<_>>());
    }

    #[test]
    fn a_positive_skip_leaves_holes_and_wraps_to_the_regions_start() {
        // fio's cross-stripe-verify.fio (rw=write:112k, bs=16k): 16k every 128k; past the
        // end, from the start again (get_next_seq_offset: pos = file_offset).
        let mut s = state(&spec(
            r#","read_pct":0,"sizes":[[16384,1]],"align":16384,"pattern":{"kind":"sequential"},"random_pct":0,"skip":[114688,114688]"#,
        ));
        let want: Vec<u64> = (0..20u64).map(|k| (k % 8) * 131072).collect();
        assert_eq!(offsets(&mut s, 20), want);
        // 4k IOs, 8k holes over 1 MiB: 86 fit (85 * 12k + 4k = 1 MiB), then the start again.
        let mut s = state(&spec(
            r#","pattern":{"kind":"sequential"},"random_pct":0,"skip":[8192,8192]"#,
        ));
        let want: Vec<u64> = (0..200u64).map(|k| (k % 86) * 12288).collect();
        assert_eq!(offsets(&mut s, 200), want);
    }

    #[test]
    fn a_run_length_issues_runs_of_sequential_ios_from_each_random_offset() {
        // fio's rw=randread:8 (HOWTO rw_sequencer: "a sequence of 8 sequential offsets with
        // a random starting point"): IO 0, 8, 16, ... drawn, the others each after the last.
        let mut s = state(&spec(r#","run_length":8"#));
        let offs = offsets(&mut s, 8000);
        let mut starts = std::collections::HashSet::new();
        let mut wrapped = 0;
        for (i, w) in offs.windows(2).enumerate() {
            let next = i + 1;
            if next % 8 == 0 {
                starts.insert(w[1]);
            } else if w[0] + 4096 == 1048576 {
                // The run reached the region's end: from its start, as fio's time_based job.
                assert_eq!(w[1], 0);
                wrapped += 1;
            } else {
                assert_eq!(w[1], w[0] + 4096, "IO {next} continues the run");
            }
        }
        // 1,000 runs over 256 possible starts: nearly all of them are drawn.
        assert!(
            starts.len() > 200,
            "run starts are random: {}",
            starts.len()
        );
        assert!(wrapped < 100, "{wrapped}");
        // Without run_length every IO is drawn: consecutive offsets are rare.
        let mut s = state(&spec(""));
        let offs = offsets(&mut s, 8000);
        let seq = offs.windows(2).filter(|w| w[1] == w[0] + 4096).count();
        assert!(seq < 100, "{seq}");
    }

    #[test]
    fn a_run_starts_sequentially_at_the_random_share_only_at_its_first_io() {
        // percentage_random=0 with randread:4: should_do_random is asked only at a run's
        // start, and says sequential: every IO continues from the last (wrapping at the end).
        let mut s = state(&spec(r#","run_length":4,"random_pct":0"#));
        assert_eq!(
            offsets(&mut s, 300),
            (0..300u64).map(|k| (k % 256) * 4096).collect::<Vec<_>>()
        );
    }

    #[test]
    fn ios_carry_the_streams_priority_and_a_share_at_the_other_one() {
        let idle = 3 << 13;
        let mut s = state(&spec(r#","ioprio":{"class":"idle"}"#));
        assert!((0..1000).all(|_| s.next_io().ioprio == idle));
        assert!(s.interval.ioprio_other.is_none());
        // fio's cmdprio-percentage.fio: prioclass=3, cmdprio_percentage=20, cmdprio_class=1.
        let mut s = state(&spec(
            r#","ioprio":{"class":"idle"},"ioprio_share":{"pct":20,"class":"rt","level":0}"#,
        ));
        let n = 50_000;
        let rt = (0..n)
            .filter(|_| {
                let p = s.next_io().ioprio;
                assert!(p == idle || p == 1 << 13, "{p:#x}");
                p == 1 << 13
            })
            .count();
        assert!((rt as f64 / n as f64 - 0.2).abs() < 0.01, "rt share {rt}");
        assert!(
            s.interval.ioprio_other.is_some(),
            "counted apart at completion"
        );
        // No priority: 0, the thread's own.
        let mut s = state(&spec(""));
        assert_eq!(s.next_io().ioprio, 0);
    }

    #[test]
    fn plans_refuse_priorities_and_runs_the_kernel_or_fio_would_not_take() {
        let plan = |extra: &str, version: u32| {
            let stream: serde_json::Value = serde_json::from_str(&format!(
                r#"{{"name":"s","regions":[{{"target":0,"length":1048576}}],"read_pct":100,
                "sizes":[[4096,1]],"pattern":{{"kind":"random"}},"align":4096,"qd":1,
                "arrival":{{"kind":"closed"}}{extra}}}"#
            ))
            .unwrap();
            let plan = serde_json::json!({"plan_version":version,"backend":"null","threads":1,
                "interval_ms":1000,"targets":[{"path":"/x","length":1048576}],
                "streams":[stream]});
            Plan::from_json(&plan.to_string()).map(|_| ())
        };
        assert!(plan(r#","ioprio":{"class":"be","level":7}"#, 4).is_ok());
        assert!(plan(r#","ioprio_share":{"pct":100,"class":"rt"}"#, 4).is_ok());
        for bad in [
            r#","ioprio":{"class":"be","level":8}"#,
            r#","ioprio":{"class":"idle","level":1}"#,
            r#","ioprio_share":{"pct":0,"class":"rt"}"#,
            r#","ioprio_share":{"pct":101,"class":"rt"}"#,
            r#","run_length":0"#,
        ] {
            assert!(plan(bad, 4).is_err(), "{bad}");
        }
        assert!(
            plan(r#","run_length":8"#, 3).is_err(),
            "needs plan_version 4"
        );
        assert!(plan("", 3).is_ok(), "version 3 plans still read");
    }

    #[test]
    fn coprime_multiplier_permutes() {
        for n in [3u64, 10, 256, 1000, 4097] {
            let m = coprime_multiplier(n);
            let mut seen: Vec<u64> = (0..n).map(|r| (r * m) % n).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>());
        }
    }
}
