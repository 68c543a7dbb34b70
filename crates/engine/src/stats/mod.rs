//! Measurement: histograms, per-stream per-op counters, interval snapshots.

pub mod frame;
pub mod histogram;

pub use histogram::Histogram;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

/// Kinds of operation a stream issues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum OpKind {
    Read = 0,
    Write = 1,
    Sync = 2,
    /// Only replayed IO lists discard (replay.rs); results show the kind for those streams.
    Discard = 3,
}

/// Op kinds counted per stream (the array length of `StreamStats::ops`).
pub const KINDS: usize = 4;

impl OpKind {
    /// The kinds every stream reports.
    pub const ALL: [OpKind; 3] = [OpKind::Read, OpKind::Write, OpKind::Sync];

    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::Sync => "sync",
            OpKind::Discard => "discard",
        }
    }
}

/// Counters for one op kind of one stream over one interval (or a whole run).
#[derive(Clone, Debug, Default)]
pub struct OpStats {
    pub ops: u64,
    pub bytes: u64,
    /// (errno, count), few distinct values in practice.
    pub errors: Vec<(i32, u64)>,
    /// submit -> complete
    pub service: Histogram,
    /// intended issue time -> complete; only kept for open-loop streams.
    pub response: Option<Histogram>,
}

/// Add error counts `(errno, count)` into `into`, one entry per errno.
pub fn add_errors(into: &mut Vec<(i32, u64)>, from: &[(i32, u64)]) {
    for &(errno, n) in from {
        match into.iter_mut().find(|e| e.0 == errno) {
            Some(e) => e.1 += n,
            None => into.push((errno, n)),
        }
    }
}

impl OpStats {
    pub fn new(open_loop: bool) -> Self {
        OpStats {
            response: open_loop.then(Histogram::new),
            ..Default::default()
        }
    }

    /// Count one completed IO of `bytes`: its service time and, where the stream keeps one
    /// (open loop), its response time.
    #[inline(always)]
    pub fn count(&mut self, bytes: u64, service_ns: u64, response_ns: Option<u64>) {
        self.ops += 1;
        self.bytes += bytes;
        self.service.record(service_ns);
        if let (Some(r), Some(ns)) = (self.response.as_mut(), response_ns) {
            r.record(ns);
        }
    }

    pub fn add_error(&mut self, errno: i32) {
        match self.errors.iter_mut().find(|e| e.0 == errno) {
            Some(e) => e.1 += 1,
            None => self.errors.push((errno, 1)),
        }
    }

    pub fn error_count(&self) -> u64 {
        self.errors.iter().map(|e| e.1).sum()
    }

    /// Zero, keeping its shape (response histogram or not) and memory.
    pub fn clear(&mut self) {
        self.ops = 0;
        self.bytes = 0;
        self.errors.clear();
        self.service.clear();
        if let Some(r) = self.response.as_mut() {
            r.clear();
        }
    }

    pub fn merge(&mut self, other: &OpStats) {
        self.ops += other.ops;
        self.bytes += other.bytes;
        add_errors(&mut self.errors, &other.errors);
        self.service.merge(&other.service);
        if let (Some(mine), Some(theirs)) = (&mut self.response, &other.response) {
            mine.merge(theirs);
        }
    }
}

impl Serialize for OpStats {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(5))?;
        m.serialize_entry("ops", &self.ops)?;
        m.serialize_entry("bytes", &self.bytes)?;
        let errors: std::collections::BTreeMap<String, u64> = self
            .errors
            .iter()
            .map(|(e, n)| (e.to_string(), *n))
            .collect();
        m.serialize_entry("errors", &errors)?;
        m.serialize_entry("service", &self.service)?;
        m.serialize_entry("response", &self.response)?;
        m.end()
    }
}

/// What one stream did on one of its regions, for streams over several targets (so results
/// can be broken down per target). One-region streams keep none: their target is known.
#[derive(Clone, Debug, Default)]
pub struct RegionStats {
    pub ops: [OpStats; KINDS],
}

impl RegionStats {
    fn new(open_loop: bool) -> Self {
        RegionStats {
            ops: std::array::from_fn(|_| OpStats::new(open_loop)),
        }
    }

    #[inline]
    pub fn op(&mut self, kind: OpKind) -> &mut OpStats {
        &mut self.ops[kind as usize]
    }

    fn clear(&mut self) {
        self.ops.iter_mut().for_each(OpStats::clear);
    }
}

/// How a replayed IO list kept to its recorded times (streams with `ios` only).
#[derive(Clone, Debug, Default)]
pub struct ReplayStats {
    /// Records issued (every op kind).
    pub issued: u64,
    /// Timed replay: submission minus recorded time of every record issued.
    pub lateness: Option<Histogram>,
    /// Run time of the first and last submission, and the recorded (due) times of the first
    /// and last record issued (the stream's start plus the record's time, loops included).
    pub first_submit_ns: Option<u64>,
    pub last_submit_ns: u64,
    pub first_due_ns: Option<u64>,
    pub last_due_ns: u64,
}

impl ReplayStats {
    pub fn new(timed: bool) -> Self {
        ReplayStats {
            lateness: timed.then(Histogram::new),
            ..Default::default()
        }
    }

    fn clear(&mut self) {
        let mut lateness = self.lateness.take();
        if let Some(h) = lateness.as_mut() {
            h.clear();
        }
        *self = ReplayStats {
            lateness,
            ..Default::default()
        };
    }

    /// One record issued at `now`, recorded for `due`.
    #[inline]
    pub fn issued(&mut self, now: u64, due: u64) {
        self.issued += 1;
        self.first_submit_ns.get_or_insert(now);
        self.last_submit_ns = now;
        self.first_due_ns.get_or_insert(due);
        self.last_due_ns = due;
        if let Some(h) = self.lateness.as_mut() {
            h.record(now.saturating_sub(due));
        }
    }

    pub fn merge(&mut self, other: &ReplayStats) {
        self.issued += other.issued;
        if let (Some(mine), Some(theirs)) = (&mut self.lateness, &other.lateness) {
            mine.merge(theirs);
        }
        let min = |a: Option<u64>, b: Option<u64>| a.into_iter().chain(b).min();
        self.first_submit_ns = min(self.first_submit_ns, other.first_submit_ns);
        self.first_due_ns = min(self.first_due_ns, other.first_due_ns);
        self.last_submit_ns = self.last_submit_ns.max(other.last_submit_ns);
        self.last_due_ns = self.last_due_ns.max(other.last_due_ns);
    }
}

impl Serialize for ReplayStats {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let some = self.issued > 0;
        let mut m = s.serialize_map(Some(6))?;
        m.serialize_entry("issued", &self.issued)?;
        m.serialize_entry("lateness", &self.lateness)?;
        m.serialize_entry("first_submit_ns", &self.first_submit_ns)?;
        m.serialize_entry("last_submit_ns", &some.then_some(self.last_submit_ns))?;
        m.serialize_entry("first_due_ns", &self.first_due_ns)?;
        m.serialize_entry("last_due_ns", &some.then_some(self.last_due_ns))?;
        m.end()
    }
}

/// Everything measured for one stream over one interval (or a whole phase).
#[derive(Clone, Debug, Default)]
pub struct StreamStats {
    pub ops: [OpStats; KINDS],
    /// Streams replaying an IO list: how the replay kept time.
    pub replay: Option<Box<ReplayStats>>,
    /// Per region (in the stream's region order), when the stream has more than one.
    pub regions: Vec<RegionStats>,
    /// Open loop: largest (submit - intended) seen.
    pub lag_max_ns: u64,
    /// Open loop: IOs due but not yet submitted when the interval ended.
    pub behind_ios: u64,
    /// Open loop: IOs submitted more than `LATE_NS` after their intended time.
    pub ios_issued_late: u64,
    /// IOs in flight when the interval ended (a level, like `behind_ios`).
    pub inflight: u64,
    /// Age of the oldest IO in flight when the interval ended, 0 if none (a level).
    pub oldest_inflight_ns: u64,
    /// Run time at which the stream finished its byte limit (its last IO completed); 0 while
    /// it has not. Summaries rate such a stream over its own time, as fio rates a job.
    pub done_ns: u64,
    /// The stream's IOs at its share's priority (plan.rs `ioprio_share`) counted apart too,
    /// as fio reports the latency of each priority (clat_prio); None without a share.
    pub ioprio_other: Option<Box<RegionStats>>,
}

/// An open-loop IO submitted later than this after its intended time counts as late.
pub const LATE_NS: u64 = 1_000_000;

impl StreamStats {
    pub fn new(open_loop: bool) -> Self {
        StreamStats {
            ops: std::array::from_fn(|_| OpStats::new(open_loop)),
            ..Default::default()
        }
    }

    /// Statistics of a stream replaying an IO list (`timed`: it keeps issue lateness).
    pub fn with_replay(mut self, timed: bool) -> Self {
        self.replay = Some(Box::new(ReplayStats::new(timed)));
        self
    }

    /// Statistics that also count the IOs at a share's priority apart.
    pub fn with_prio_share(mut self, open_loop: bool) -> Self {
        self.ioprio_other = Some(Box::new(RegionStats::new(open_loop)));
        self
    }

    /// Statistics of a stream over `regions` regions: per-region counters only when there
    /// are several.
    pub fn with_regions(open_loop: bool, regions: usize) -> Self {
        let mut stats = StreamStats::new(open_loop);
        if regions > 1 {
            stats.regions = (0..regions).map(|_| RegionStats::new(open_loop)).collect();
        }
        stats
    }

    #[inline]
    pub fn op(&mut self, kind: OpKind) -> &mut OpStats {
        &mut self.ops[kind as usize]
    }

    /// As new (same shape: regions, replay, priority share), keeping the memory its
    /// histograms have grown: a worker reuses an interval's statistics for a later interval
    /// of the same stream instead of allocating them again (worker.rs `emit`).
    pub fn clear(&mut self) {
        // Every field named, so a field added later cannot be left out of the reset.
        let StreamStats {
            ops,
            replay,
            regions,
            lag_max_ns,
            behind_ios,
            ios_issued_late,
            inflight,
            oldest_inflight_ns,
            done_ns,
            ioprio_other,
        } = self;
        ops.iter_mut().for_each(OpStats::clear);
        regions.iter_mut().for_each(RegionStats::clear);
        if let Some(r) = replay.as_mut() {
            r.clear();
        }
        if let Some(p) = ioprio_other.as_mut() {
            p.clear();
        }
        for level in [
            lag_max_ns,
            behind_ios,
            ios_issued_late,
            inflight,
            oldest_inflight_ns,
        ] {
            *level = 0;
        }
        *done_ns = 0;
    }

    /// Fold an interval into running totals.
    pub fn merge(&mut self, other: &StreamStats) {
        for (mine, theirs) in self.ops.iter_mut().zip(&other.ops) {
            mine.merge(theirs);
        }
        for (mine, theirs) in self.regions.iter_mut().zip(&other.regions) {
            for (a, b) in mine.ops.iter_mut().zip(&theirs.ops) {
                a.merge(b);
            }
        }
        if let (Some(mine), Some(theirs)) = (&mut self.replay, &other.replay) {
            mine.merge(theirs);
        }
        self.lag_max_ns = self.lag_max_ns.max(other.lag_max_ns);
        // Levels, not sums: the latest one stands.
        self.behind_ios = other.behind_ios;
        self.inflight = other.inflight;
        self.oldest_inflight_ns = other.oldest_inflight_ns;
        self.ios_issued_late += other.ios_issued_late;
        self.done_ns = self.done_ns.max(other.done_ns);
        if let (Some(mine), Some(theirs)) = (&mut self.ioprio_other, &other.ioprio_other) {
            for (a, b) in mine.ops.iter_mut().zip(&theirs.ops) {
                a.merge(b);
            }
        }
    }

    pub fn total_ops(&self) -> u64 {
        self.ops.iter().map(|o| o.ops).sum()
    }

    pub fn total_bytes(&self) -> u64 {
        self.ops.iter().map(|o| o.bytes).sum()
    }

    pub fn total_errors(&self) -> u64 {
        self.ops.iter().map(|o| o.error_count()).sum()
    }
}

/// A stream's stats tagged with its index in the plan, serialized for Python.
pub struct IndexedStats<'a> {
    pub stream: usize,
    pub stats: &'a StreamStats,
    /// Totals report `ios_issued_late`; intervals report `behind_ios`.
    pub totals: bool,
    /// The plan target of each region (for the per-target breakdown); empty for one region.
    pub targets: &'a [usize],
}

/// One region's counters, named by its plan target.
struct TargetPart<'a> {
    target: usize,
    stats: &'a RegionStats,
}

impl Serialize for TargetPart<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("target", &self.target)?;
        for k in OpKind::ALL {
            m.serialize_entry(k.name(), &self.stats.ops[k as usize])?;
        }
        m.end()
    }
}

/// The reads and writes of a stream at its share's priority (syncs carry no priority).
struct PrioPart<'a>(&'a RegionStats);

impl Serialize for PrioPart<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        for k in [OpKind::Read, OpKind::Write] {
            m.serialize_entry(k.name(), &self.0.ops[k as usize])?;
        }
        m.end()
    }
}

impl Serialize for IndexedStats<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("stream", &self.stream)?;
        for k in OpKind::ALL {
            m.serialize_entry(k.name(), &self.stats.ops[k as usize])?;
        }
        if let Some(replay) = &self.stats.replay {
            // Only replayed IO lists discard: other streams' output stays as it was.
            let k = OpKind::Discard;
            m.serialize_entry(k.name(), &self.stats.ops[k as usize])?;
            m.serialize_entry("replay", replay)?;
        }
        m.serialize_entry("lag_max_ns", &self.stats.lag_max_ns)?;
        if self.stats.done_ns > 0 {
            m.serialize_entry("done_ns", &self.stats.done_ns)?;
        }
        if let Some(other) = &self.stats.ioprio_other {
            // Only streams with an ioprio_share: other streams' output stays as it was.
            m.serialize_entry("ioprio_other", &PrioPart(other))?;
        }
        if self.totals {
            m.serialize_entry("ios_issued_late", &self.stats.ios_issued_late)?;
        } else {
            m.serialize_entry("behind_ios", &self.stats.behind_ios)?;
            m.serialize_entry("inflight", &self.stats.inflight)?;
            m.serialize_entry("oldest_inflight_ns", &self.stats.oldest_inflight_ns)?;
            m.serialize_entry("ios_issued_late", &self.stats.ios_issued_late)?;
        }
        if !self.stats.regions.is_empty() {
            let parts: Vec<TargetPart> = self
                .stats
                .regions
                .iter()
                .zip(self.targets)
                .map(|(stats, &target)| TargetPart { target, stats })
                .collect();
            m.serialize_entry("targets", &parts)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(s: &StreamStats) -> String {
        let targets = [0, 1];
        let shown = IndexedStats {
            stream: 3,
            stats: s,
            totals: false,
            targets: &targets[..s.regions.len().min(2)],
        };
        serde_json::to_string(&shown).unwrap()
    }

    #[test]
    fn cleared_statistics_show_as_new_ones_of_the_same_shape() {
        let new = || {
            StreamStats::with_regions(true, 2)
                .with_prio_share(true)
                .with_replay(true)
        };
        let mut used = new();
        for kind in OpKind::ALL {
            let op = used.op(kind);
            op.ops += 3;
            op.bytes += 12288;
            op.add_error(5);
            op.service.record(40_000);
            op.response.as_mut().unwrap().record(90_000);
        }
        used.regions[1].op(OpKind::Read).service.record(7_000);
        used.ioprio_other.as_mut().unwrap().op(OpKind::Write).ops += 1;
        used.replay.as_mut().unwrap().issued(5_000, 4_000);
        used.lag_max_ns = 9;
        used.behind_ios = 2;
        used.ios_issued_late = 1;
        used.inflight = 4;
        used.oldest_inflight_ns = 77;
        used.done_ns = 1_000;
        assert_ne!(shown(&used), shown(&new()));
        used.clear();
        assert_eq!(shown(&used), shown(&new()));
    }
}
