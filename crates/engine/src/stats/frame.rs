//! One interval as finished data (issue 25): the rows of the interval log, column by column in
//! Arrow's memory layout, and per-group aggregates, built here so that Python receives a few
//! buffers per interval instead of one JSON document per stream.
//!
//! With 10,000 streams the JSON snapshot was about 10,000 objects each holding two histograms;
//! Python parsed it, built a dict per stream and op kind, recomputed every percentile and
//! wrote the histograms back out as JSON text for the log (0.39 ms per stream per interval,
//! more than a CPU at one interval a second). The rows here are exactly what
//! `python/tilemark/store/intervals.py` `snapshot_rows` made (same columns, same values, the
//! same JSON text in `errors_json` and the histogram columns), so the files stay as they were.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::histogram::bucket_value;
use super::{add_errors, Histogram, OpKind, OpStats, StreamStats, KINDS};

/// Arrow validity bitmap (LSB first), with its null count.
#[derive(Clone, Debug, Default)]
pub struct Bitmap {
    pub bytes: Vec<u8>,
    pub len: usize,
    pub nulls: usize,
}

impl Bitmap {
    pub fn push(&mut self, valid: bool) {
        if self.len % 8 == 0 {
            self.bytes.push(0);
        }
        if valid {
            self.bytes[self.len / 8] |= 1 << (self.len % 8);
        } else {
            self.nulls += 1;
        }
        self.len += 1;
    }

    pub fn is_valid(&self, i: usize) -> bool {
        self.bytes[i / 8] & (1 << (i % 8)) != 0
    }
}

/// A nullable UTF-8 column: validity, i32 offsets, data.
#[derive(Clone, Debug)]
pub struct StrColumn {
    pub valid: Bitmap,
    pub offsets: Vec<i32>,
    pub data: Vec<u8>,
}

impl Default for StrColumn {
    fn default() -> Self {
        StrColumn {
            valid: Bitmap::default(),
            offsets: vec![0],
            data: Vec::new(),
        }
    }
}

impl StrColumn {
    pub fn push(&mut self, value: Option<&str>) {
        if let Some(v) = value {
            self.data.extend_from_slice(v.as_bytes());
        }
        self.end(value.is_some());
    }

    /// Append a value written straight into the data buffer by `write`.
    fn push_with(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        write(&mut self.data);
        self.end(true);
    }

    fn end(&mut self, valid: bool) {
        self.valid.push(valid);
        self.offsets.push(self.data.len() as i32);
    }

    pub fn get(&self, i: usize) -> Option<&str> {
        if !self.valid.is_valid(i) {
            return None;
        }
        let (a, b) = (self.offsets[i] as usize, self.offsets[i + 1] as usize);
        std::str::from_utf8(&self.data[a..b]).ok()
    }
}

/// A nullable f64 column (a null holds 0.0).
#[derive(Clone, Debug, Default)]
pub struct F64Column {
    pub valid: Bitmap,
    pub values: Vec<f64>,
}

impl F64Column {
    pub fn push(&mut self, value: Option<f64>) {
        self.valid.push(value.is_some());
        self.values.push(value.unwrap_or(0.0));
    }

    pub fn get(&self, i: usize) -> Option<f64> {
        self.valid.is_valid(i).then(|| self.values[i])
    }
}

/// The latency statistics of the interval rows, in this order (hist.py LATENCY_STATS).
pub const LATENCY_STATS: [&str; 5] = ["mean", "p50", "p99", "p999", "max"];

/// The interval log's rows of one interval (intervals.py INTERVAL_SCHEMA without `run_id`,
/// which Python adds): one per stream and op kind with ops or errors, and one with op null for
/// a stream that had neither, so its lag and backlog are not lost.
#[derive(Clone, Debug, Default)]
pub struct IntervalRows {
    pub stream: Vec<i32>,
    pub stream_name: StrColumn,
    pub op: StrColumn,
    pub ops: Vec<i64>,
    pub bytes: Vec<i64>,
    pub errors: Vec<i64>,
    pub errors_json: StrColumn,
    /// In LATENCY_STATS order, microseconds.
    pub service: [F64Column; 5],
    pub response: [F64Column; 5],
    pub lag_max_ns: Vec<i64>,
    pub behind_ios: Vec<i64>,
    pub service_hist: StrColumn,
    pub response_hist: StrColumn,
}

impl IntervalRows {
    pub fn len(&self) -> usize {
        self.stream.len()
    }

    pub fn is_empty(&self) -> bool {
        self.stream.is_empty()
    }

    fn reserve(&mut self, rows: usize) {
        for v in [&mut self.ops, &mut self.bytes, &mut self.errors] {
            v.reserve(rows);
        }
        self.lag_max_ns.reserve(rows);
        self.behind_ios.reserve(rows);
        self.stream.reserve(rows);
        for c in [&mut self.service_hist, &mut self.response_hist] {
            c.offsets.reserve(rows);
            c.data.reserve(rows * 256);
        }
        for c in self.service.iter_mut().chain(self.response.iter_mut()) {
            c.values.reserve(rows);
        }
    }

    fn push_stream(&mut self, index: usize, name: &str, s: &StreamStats) {
        let before = self.len();
        let kinds: &[OpKind] = if s.replay.is_some() {
            &[OpKind::Read, OpKind::Write, OpKind::Sync, OpKind::Discard]
        } else {
            &OpKind::ALL
        };
        for &kind in kinds {
            let op = &s.ops[kind as usize];
            let errors = op.error_count();
            if op.ops == 0 && errors == 0 {
                continue;
            }
            self.push_head(index, name, s);
            self.op.push(Some(kind.name()));
            self.ops.push(op.ops as i64);
            self.bytes.push(op.bytes as i64);
            self.errors.push(errors as i64);
            self.errors_json
                .push_with(|out| errors_json(&op.errors, out));
            push_stats(&mut self.service, Some(&op.service));
            push_stats(&mut self.response, op.response.as_ref());
            self.service_hist
                .push_with(|out| hist_json(&op.service, out));
            match &op.response {
                Some(h) => self.response_hist.push_with(|out| hist_json(h, out)),
                None => self.response_hist.push(None),
            }
        }
        if self.len() == before {
            self.push_head(index, name, s);
            self.op.push(None);
            self.ops.push(0);
            self.bytes.push(0);
            self.errors.push(0);
            self.errors_json.push(None);
            push_stats(&mut self.service, None);
            push_stats(&mut self.response, None);
            self.service_hist.push(None);
            self.response_hist.push(None);
        }
    }

    fn push_head(&mut self, index: usize, name: &str, s: &StreamStats) {
        self.stream.push(index as i32);
        self.stream_name.push(Some(name));
        self.lag_max_ns.push(s.lag_max_ns as i64);
        self.behind_ios.push(s.behind_ios as i64);
    }
}

fn push_stats(columns: &mut [F64Column; 5], hist: Option<&Histogram>) {
    let stats = match hist {
        Some(h) if h.count() > 0 => latency_stats(h).map(|v| v.map(|ns| ns / 1e3)),
        _ => [None; 5],
    };
    for (column, value) in columns.iter_mut().zip(stats) {
        column.push(value);
    }
}

/// LATENCY_STATS of a histogram in ns, computed as hist.py `Histogram.stats` computes them
/// (its percentile rank included), so a value here equals the one Python made before.
pub fn latency_stats(h: &Histogram) -> [Option<f64>; 5] {
    if h.count() == 0 {
        return [None; 5];
    }
    let [p50, p99, p999] = py_percentiles(h, [50.0, 99.0, 99.9]);
    [
        Some(h.sum() as f64 / h.count() as f64),
        p50,
        p99,
        p999,
        Some(h.max() as f64),
    ]
}

/// `py_percentile` of several increasing percentiles in one pass over the buckets (10,000
/// streams' histograms each interval: one scan each instead of three).
pub fn py_percentiles<const N: usize>(h: &Histogram, ps: [f64; N]) -> [Option<f64>; N] {
    let n = h.count();
    let mut out = [None; N];
    if n == 0 {
        return out;
    }
    let clamp = |v: f64| v.max(h.min() as f64).min(h.max() as f64);
    let ranks = ps.map(|p| (-py_floordiv(-(n as f64) * p, 100.0)).max(1.0));
    let mut next = 0;
    while next < N && ps[next] >= 100.0 {
        out[next] = Some(h.max() as f64);
        next += 1;
    }
    let mut seen = 0u64;
    for (idx, c) in h.buckets() {
        seen += c;
        while next < N && seen as f64 >= ranks[next] {
            out[next] = Some(clamp(bucket_value(idx)));
            next += 1;
        }
        if next == N {
            break;
        }
    }
    for slot in out.iter_mut().skip(next) {
        *slot = Some(h.max() as f64);
    }
    out
}

/// hist.py `percentile`: the bucket holding the rank `max(1, -(-n * p // 100))`-th value,
/// with Python's float floor division (so ranks agree where float rounding is close).
pub fn py_percentile(h: &Histogram, p: f64) -> Option<f64> {
    let n = h.count();
    if n == 0 {
        return None;
    }
    if p >= 100.0 {
        return Some(h.max() as f64);
    }
    let rank = (-py_floordiv(-(n as f64) * p, 100.0)).max(1.0);
    let mut seen = 0u64;
    for (idx, c) in h.buckets() {
        seen += c;
        if seen as f64 >= rank {
            return Some(bucket_value(idx).max(h.min() as f64).min(h.max() as f64));
        }
    }
    Some(h.max() as f64)
}

/// CPython's float `//` (floatobject.c `_float_div_mod`).
fn py_floordiv(vx: f64, wx: f64) -> f64 {
    let mut m = vx % wx;
    let mut div = (vx - m) / wx;
    if m != 0.0 && ((wx < 0.0) != (m < 0.0)) {
        m += wx;
        div -= 1.0;
    }
    let _ = m;
    if div != 0.0 {
        let mut floordiv = div.floor();
        if div - floordiv > 0.5 {
            floordiv += 1.0;
        }
        floordiv
    } else {
        (0.0f64).copysign(vx / wx)
    }
}

/// `json.dumps(errors, sort_keys=True)` of {errno text: count}: keys sorted as text.
fn errors_json(errors: &[(i32, u64)], out: &mut Vec<u8>) {
    let mut sorted: Vec<(String, u64)> = errors.iter().map(|(e, n)| (e.to_string(), *n)).collect();
    sorted.sort();
    let mut s = String::from("{");
    for (i, (k, n)) in sorted.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "\"{k}\": {n}");
    }
    s.push('}');
    out.extend_from_slice(s.as_bytes());
}

/// The histogram's compact JSON (what Python wrote with separators (",", ":")).
fn hist_json(h: &Histogram, out: &mut Vec<u8>) {
    serde_json::to_writer(out, h).expect("a histogram serializes");
}

/// What one group of streams (an application, or the copies of one stream) did in an
/// interval, every member's statistics merged: what the live view and the change-point tracker
/// read instead of every stream.
#[derive(Clone, Debug, Default)]
pub struct GroupStats {
    pub streams: u64,
    pub ops: [OpStats; KINDS],
    /// Per op kind: the latency as QoS and reports use it (hist.py `latency_hist`): each
    /// member's response histogram where it has one (open loop), else its service histogram.
    pub latency: [Histogram; KINDS],
    /// Whether any member keeps response times (open loop).
    pub open_loop: bool,
    pub lag_max_ns: u64,
    pub behind_ios: u64,
    pub ios_issued_late: u64,
    pub inflight: u64,
    /// The oldest IO in flight of any member at the interval's end (age, ns; 0: none).
    pub oldest_inflight_ns: u64,
    /// The latest run time at which a member finished its byte limit (0: none has).
    pub done_ns: u64,
}

impl GroupStats {
    pub fn add(&mut self, s: &StreamStats) {
        self.streams += 1;
        for k in 0..KINDS {
            let op = &s.ops[k];
            self.ops[k].ops += op.ops;
            self.ops[k].bytes += op.bytes;
            add_errors(&mut self.ops[k].errors, &op.errors);
            merge_growing(&mut self.ops[k].service, &op.service);
            match &op.response {
                Some(r) => {
                    self.open_loop = true;
                    merge_growing(&mut self.latency[k], r);
                }
                None => merge_growing(&mut self.latency[k], &op.service),
            }
        }
        self.lag_max_ns = self.lag_max_ns.max(s.lag_max_ns);
        self.behind_ios += s.behind_ios;
        self.ios_issued_late += s.ios_issued_late;
        self.inflight += s.inflight;
        self.oldest_inflight_ns = self.oldest_inflight_ns.max(s.oldest_inflight_ns);
        self.done_ns = self.done_ns.max(s.done_ns);
    }
}

impl GroupStats {
    /// Fold the same group's aggregate of a later interval in: a QoS window of several
    /// intervals (`Window`), merged as analysis/merging.py MergedSnapshot merges snapshots:
    /// counts and histograms added, the largest lag, late IOs summed, and the backlog levels
    /// (behind, in flight, oldest in flight) of the latest interval the group had members in.
    pub fn add_interval(&mut self, later: &GroupStats) {
        if later.streams == 0 {
            return;
        }
        self.streams = self.streams.max(later.streams);
        for k in 0..KINDS {
            let (mine, theirs) = (&mut self.ops[k], &later.ops[k]);
            mine.ops += theirs.ops;
            mine.bytes += theirs.bytes;
            add_errors(&mut mine.errors, &theirs.errors);
            merge_growing(&mut mine.service, &theirs.service);
            merge_growing(&mut self.latency[k], &later.latency[k]);
        }
        self.open_loop |= later.open_loop;
        self.lag_max_ns = self.lag_max_ns.max(later.lag_max_ns);
        self.ios_issued_late += later.ios_issued_late;
        self.behind_ios = later.behind_ios;
        self.inflight = later.inflight;
        self.oldest_inflight_ns = later.oldest_inflight_ns;
        self.done_ns = self.done_ns.max(later.done_ns);
    }
}

/// One group set's aggregates merged over consecutive measurement intervals until they span a
/// QoS window (`Aggregator::set_window`): what a tile run's QoS monitor keeps per stream
/// (analysis/qos.py SnapshotCompactor), built here instead of from a JSON document per stream
/// per interval.
#[derive(Clone, Debug)]
pub struct Window {
    pub first_interval: u64,
    pub interval: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    pub groups: Vec<GroupStats>,
    pub lateness: Histogram,
}

impl Window {
    pub fn new(
        interval: u64,
        (start_ns, end_ns): (u64, u64),
        groups: Vec<GroupStats>,
        lateness: &Histogram,
    ) -> Window {
        Window {
            first_interval: interval,
            interval,
            start_ns,
            end_ns,
            groups,
            lateness: lateness.clone(),
        }
    }

    /// Whether the window spans `window_ns` (to the microsecond, as SnapshotCompactor
    /// compares seconds to 1e-6).
    pub fn spans(&self, window_ns: u64) -> bool {
        self.end_ns - self.start_ns + 1000 >= window_ns
    }

    /// Fold a later interval's aggregates of the same set in.
    pub fn add(&mut self, interval: u64, end_ns: u64, groups: &[GroupStats], lateness: &Histogram) {
        self.interval = interval;
        self.end_ns = end_ns;
        if self.groups.len() < groups.len() {
            self.groups.resize_with(groups.len(), GroupStats::default);
        }
        for (mine, theirs) in self.groups.iter_mut().zip(groups) {
            mine.add_interval(theirs);
        }
        merge_growing(&mut self.lateness, lateness);
    }

    /// The window as a measurement snapshot whose "streams" are the groups that had members
    /// (`"stream"` the group's index), as Python's `Frame.set_snapshot` gives an interval's.
    pub fn snapshot_json(&self) -> String {
        snapshot_json(
            (self.interval, "measure", self.start_ns, self.end_ns),
            self.groups
                .iter()
                .enumerate()
                .filter(|(_, g)| g.streams > 0)
                .map(|(index, stats)| GroupJson { index, stats }),
            &self.lateness,
        )
    }
}

/// Per group with IOs of an op kind: `[group, op, ops, latency sum ns]`, the latency being the
/// members' response time where they have one, else their service time (the count and sum a
/// QoS mean's batch-means confidence interval takes per interval: analysis/confidence.py).
pub fn batch_json(groups: &[GroupStats]) -> String {
    let mut out = String::from("[");
    for (index, g) in groups.iter().enumerate() {
        for kind in OpKind::ALL {
            let k = kind as usize;
            if g.ops[k].ops == 0 {
                continue;
            }
            if out.len() > 1 {
                out.push(',');
            }
            let _ = write!(
                out,
                "[{index},\"{}\",{},{}]",
                kind.name(),
                g.ops[k].ops,
                g.latency[k].sum()
            );
        }
    }
    out.push(']');
    out
}

/// `into.merge(from)`, growing `into` at least twofold when it must grow: a group's fresh
/// histograms merged 250 members' one exact step at a time, reallocating and zero-filling
/// (a third of `poll_frames` at 10,000 streams, py-spy --native).
fn merge_growing(into: &mut Histogram, from: &Histogram) {
    if from.count() > 0 && from.bucket_len() > into.bucket_len() {
        into.reserve_buckets(from.bucket_len().max(into.bucket_len() * 2));
    }
    into.merge(from);
}

/// A group serialized like a stream of a JSON snapshot (`"stream"` is the group's index), with
/// `"response"` the merged latency when any member is open loop.
struct GroupJson<'a> {
    index: usize,
    stats: &'a GroupStats,
}

struct GroupOpJson<'a> {
    op: &'a OpStats,
    latency: Option<&'a Histogram>,
}

impl Serialize for GroupOpJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let errors: BTreeMap<String, u64> = self
            .op
            .errors
            .iter()
            .map(|(e, n)| (e.to_string(), *n))
            .collect();
        let mut m = s.serialize_map(Some(5))?;
        m.serialize_entry("ops", &self.op.ops)?;
        m.serialize_entry("bytes", &self.op.bytes)?;
        m.serialize_entry("errors", &errors)?;
        m.serialize_entry("service", &self.op.service)?;
        m.serialize_entry("response", &self.latency)?;
        m.end()
    }
}

impl Serialize for GroupJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let g = self.stats;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("stream", &self.index)?;
        m.serialize_entry("streams", &g.streams)?;
        for k in OpKind::ALL {
            let i = k as usize;
            let op = GroupOpJson {
                op: &g.ops[i],
                latency: g.open_loop.then_some(&g.latency[i]),
            };
            m.serialize_entry(k.name(), &op)?;
        }
        m.serialize_entry("lag_max_ns", &g.lag_max_ns)?;
        if g.done_ns > 0 {
            // As a stream's snapshot has it: only once done.
            m.serialize_entry("done_ns", &g.done_ns)?;
        }
        m.serialize_entry("behind_ios", &g.behind_ios)?;
        m.serialize_entry("inflight", &g.inflight)?;
        m.serialize_entry("oldest_inflight_ns", &g.oldest_inflight_ns)?;
        m.serialize_entry("ios_issued_late", &g.ios_issued_late)?;
        m.end()
    }
}

/// One finished interval: its rows for the log and its group aggregates.
#[derive(Clone, Debug)]
pub struct Frame {
    pub interval: u64,
    pub phase: &'static str,
    pub start_ns: u64,
    pub end_ns: u64,
    pub rows: IntervalRows,
    pub groups: Vec<GroupStats>,
    /// The aggregates of further group sets (`Frame::add_sets`), in the order they were set:
    /// what the run's other consumers read (the QoS and steady-state monitors per stream, the
    /// metrics endpoint), each set a partition of its own.
    pub sets: Vec<Vec<GroupStats>>,
    /// Issue lateness of every open-loop IO of the interval (all streams, all threads).
    pub lateness: Histogram,
    /// Of a measurement interval, when a set is windowed (`Aggregator::set_window`): that
    /// set's per-interval counts (`batch_json`), and its window's snapshot when this interval
    /// closed one. The set itself is then left empty.
    pub batch: Option<String>,
    pub window: Option<String>,
    /// `groups_json` and `sets_json`, made ahead by `encode` (on the engine's aggregation
    /// thread, so the consumer that takes the frame only hands the text over).
    pub encoded: Option<(String, Vec<String>)>,
}

impl Frame {
    /// Build the frame of one interval (run time `start_ns..end_ns`) from its streams (in plan
    /// order). `group_of[i]` is the group of plan stream i; `groups` how many there are.
    pub fn build(
        interval: u64,
        phase: &'static str,
        (start_ns, end_ns): (u64, u64),
        streams: &[(usize, Box<StreamStats>)],
        names: &[String],
        (group_of, groups): (&[u32], usize),
    ) -> Frame {
        let mut rows = IntervalRows::default();
        // About one row and two histograms' text (a few hundred bytes each) per stream: grown
        // once here rather than by doubling through every column.
        rows.reserve(streams.len());
        let mut aggregates = vec![GroupStats::default(); groups];
        for (i, s) in streams {
            let name = names.get(*i).map(String::as_str).unwrap_or("");
            rows.push_stream(*i, name, s);
            if let Some(g) = group_of
                .get(*i)
                .and_then(|&g| aggregates.get_mut(g as usize))
            {
                g.add(s);
            }
        }
        Frame {
            interval,
            phase,
            start_ns,
            end_ns,
            rows,
            groups: aggregates,
            sets: Vec::new(),
            lateness: Histogram::new(),
            batch: None,
            window: None,
            encoded: None,
        }
    }

    /// Make `groups_json` and `sets_json` now, for `take_json`.
    pub fn encode(&mut self) {
        self.encoded = Some((self.groups_json(), self.sets_json()));
    }

    /// The group aggregates' and every further set's JSON snapshots: those `encode` made, or
    /// made now.
    pub fn take_json(&mut self) -> (String, Vec<String>) {
        self.encoded
            .take()
            .unwrap_or_else(|| (self.groups_json(), self.sets_json()))
    }

    /// Aggregate `streams` (those `build` had) into further group sets, each `(group_of,
    /// groups)` as in `build`; a stream past the end of `group_of` (or given a group index
    /// out of range) is in no group of that set.
    pub fn add_sets(&mut self, streams: &[(usize, Box<StreamStats>)], sets: &[(Vec<u32>, usize)]) {
        for (group_of, groups) in sets {
            let mut aggregates = vec![GroupStats::default(); *groups];
            for (i, s) in streams {
                if let Some(g) = group_of
                    .get(*i)
                    .and_then(|&g| aggregates.get_mut(g as usize))
                {
                    g.add(s);
                }
            }
            self.sets.push(aggregates);
        }
    }

    /// Every further set's aggregates as JSON snapshots (as `groups_json`), in set order.
    pub fn sets_json(&self) -> Vec<String> {
        self.sets
            .iter()
            .map(|set| self.snapshot_json(set))
            .collect()
    }

    /// The group aggregates as a JSON snapshot whose "streams" are the groups.
    pub fn groups_json(&self) -> String {
        self.snapshot_json(&self.groups)
    }

    fn snapshot_json(&self, groups: &[GroupStats]) -> String {
        snapshot_json(
            (self.interval, self.phase, self.start_ns, self.end_ns),
            groups
                .iter()
                .enumerate()
                .map(|(index, stats)| GroupJson { index, stats }),
            &self.lateness,
        )
    }
}

/// A snapshot document of groups: (interval, phase, start_ns, end_ns), the groups as streams.
fn snapshot_json<'a>(
    (interval, phase, start_ns, end_ns): (u64, &'static str, u64, u64),
    streams: impl Iterator<Item = GroupJson<'a>>,
    lateness: &Histogram,
) -> String {
    #[derive(Serialize)]
    struct Snap<'a> {
        interval: u64,
        phase: &'static str,
        start_ns: u64,
        end_ns: u64,
        streams: Vec<GroupJson<'a>>,
        lateness: &'a Histogram,
    }
    let snap = Snap {
        interval,
        phase,
        start_ns,
        end_ns,
        streams: streams.collect(),
        lateness,
    };
    serde_json::to_string(&snap).expect("groups serialize")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_division_matches_python() {
        // Values checked against CPython 3.11.
        assert_eq!(py_floordiv(-99900.00000000001, 100.0), -1000.0);
        assert_eq!(py_floordiv(-50.0 * 3.0, 100.0), -2.0);
        assert_eq!(py_floordiv(-99.0 * 7.0, 100.0), -7.0);
        assert_eq!(py_floordiv(-99.9 * 10_000.0, 100.0), -9990.0);
        assert_eq!(py_floordiv(-(3.0f64) * 99.9, 100.0), -3.0);
        assert_eq!(py_floordiv(-1000.0 * 99.9, 100.0), -999.0);
    }

    #[test]
    fn one_pass_percentiles_equal_one_at_a_time() {
        let mut h = Histogram::new();
        for v in [5u64, 900, 1_000, 25_000, 25_001, 3_000_000, 77, 77, 1 << 30] {
            h.record(v);
        }
        for n in 0..50u64 {
            h.record(1_000 + n * 997);
        }
        let ps = [50.0, 99.0, 99.9];
        let one = py_percentiles(&h, ps);
        let each = ps.map(|p| py_percentile(&h, p));
        assert_eq!(one, each);
        assert_eq!(py_percentiles(&Histogram::new(), ps), [None; 3]);
    }

    #[test]
    fn errors_json_sorts_errno_as_text() {
        let mut out = Vec::new();
        errors_json(&[(5, 1), (11, 2)], &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), r#"{"11": 2, "5": 1}"#);
        let mut empty = Vec::new();
        errors_json(&[], &mut empty);
        assert_eq!(empty, b"{}");
    }
}
