//! Running a file plan: the engine threads (psync.rs: one per stream thread; uring.rs: one
//! per stream), per-thread counters taken by a collector every interval, and the result.
//!
//! Counting rule: every system call a stream makes is counted as the operation it is. A read,
//! append or fsync needs an open file: with none open the thread opens one first (counted as
//! an open); an open or create with `openfiles` already open closes the oldest first (counted
//! as a close). An operation that finds nothing to act on (no file to delete, no free entry to
//! create, nothing open to close) is counted as skipped, not as done.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use super::table::{FixedSet, Table};
use super::{entry_name, ops, FileArrival, FileOp, FilePlan, FileStreamSpec, FILE_OPS};
use crate::clock::monotonic_ns;
use crate::error::{EngineError, Result};
use crate::rng::Rng;
use crate::stats::OpStats;

/// What one stream (or one thread of it) did over an interval or the run.
#[derive(Clone, Debug, Default)]
pub struct FileStats {
    pub ops: [OpStats; FILE_OPS],
    pub skipped: [u64; FILE_OPS],
    /// Whole loops of a sequence (service: the loop's time; response: from its intended
    /// start, open loop). A mix: unused.
    pub loops: OpStats,
}

impl FileStats {
    fn new(open_loop: bool) -> Self {
        FileStats {
            ops: std::array::from_fn(|_| OpStats::new(open_loop)),
            skipped: [0; FILE_OPS],
            loops: OpStats::new(open_loop),
        }
    }

    fn merge(&mut self, other: &FileStats) {
        for (a, b) in self.ops.iter_mut().zip(&other.ops) {
            a.merge(b);
        }
        for (a, b) in self.skipped.iter_mut().zip(&other.skipped) {
            *a += b;
        }
        self.loops.merge(&other.loops);
    }
}

struct Indexed<'a> {
    stream: usize,
    stats: &'a FileStats,
    sequence: bool,
}

struct PerOp<'a, T>(&'a [T; FILE_OPS]);

impl<T: Serialize> Serialize for PerOp<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(FILE_OPS))?;
        for op in FileOp::ALL {
            m.serialize_entry(op.name(), &self.0[op as usize])?;
        }
        m.end()
    }
}

impl Serialize for Indexed<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(4))?;
        m.serialize_entry("stream", &self.stream)?;
        m.serialize_entry("ops", &PerOp(&self.stats.ops))?;
        m.serialize_entry("skipped", &PerOp(&self.stats.skipped))?;
        m.serialize_entry("loops", &self.sequence.then_some(&self.stats.loops))?;
        m.end()
    }
}

/// Open-loop schedule shared by a stream's threads: intended times in run ns.
pub(super) struct Schedule {
    next_ns: f64,
    gap_ns: f64,
    poisson: bool,
    rng: Rng,
}

impl Schedule {
    pub(super) fn take(&mut self) -> u64 {
        let t = self.next_ns;
        let gap = if self.poisson {
            self.gap_ns * self.rng.exp1()
        } else {
            self.gap_ns
        };
        self.next_ns += gap;
        t as u64
    }
}

pub(super) struct Shared {
    pub(super) stop: AtomicBool,
    /// Why the run stopped early: the first failing operation, named.
    failure: Mutex<Option<String>>,
    errors: AtomicU64,
    max_errors: Option<u64>,
    pub(super) tables: Vec<Mutex<Table>>,
    /// Per file set: its entries when no stream can change which exist (`fixed_sets`).
    pub(super) fixed: Vec<Option<FixedSet>>,
    /// Per file set: its directory fds (closed when the run is dropped).
    pub(super) dirs: Vec<Vec<RawFd>>,
    names: Vec<String>,
    /// Per engine thread: its counters since the last interval.
    thread_stats: Vec<Mutex<FileStats>>,
    pub(super) schedules: Vec<Option<Mutex<Schedule>>>,
    /// Per stream: its place in the entries for sequential selection.
    pub(super) cursors: Vec<Arc<AtomicU64>>,
    /// Per stream: operations or loops it may still start (FileStreamSpec::limit).
    pub(super) budgets: Vec<Option<AtomicU64>>,
    pub(super) running: AtomicUsize,
    /// Threads still in a call `hung_ms` after the run stopped (left behind, never joined).
    hung: AtomicUsize,
    t0: u64,
}

impl Shared {
    pub(super) fn now(&self) -> u64 {
        monotonic_ns() - self.t0
    }

    /// Count one finished operation of engine thread (or uring slot) `tid`: its time since
    /// `t0`, and with `response` (open-loop mix) its time since that intended start. A failure
    /// is counted under its errno and may stop the run (`fail`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record(
        &self,
        tid: usize,
        fileset: usize,
        op: FileOp,
        t0: u64,
        result: std::result::Result<u64, i32>,
        entry: usize,
        response: Option<u64>,
    ) {
        let t1 = self.now();
        let failed = {
            let mut st = self.thread_stats[tid].lock().unwrap();
            let o = &mut st.ops[op as usize];
            match result {
                Ok(bytes) => {
                    o.count(bytes, t1 - t0, response.map(|i| t1.saturating_sub(i)));
                    None
                }
                Err(errno) => {
                    o.add_error(errno);
                    Some(errno)
                }
            }
        };
        if let Some(errno) = failed {
            let e = io::Error::from_raw_os_error(errno);
            let dir = self.tables[fileset].lock().unwrap().entries[entry].dir;
            self.fail(format!(
                "{} of {} (directory {dir}) in file set {} failed: errno {errno} ({e})",
                op.name(),
                entry_name(entry),
                self.names[fileset],
            ));
        }
    }

    /// Take one operation or loop from stream `stream`'s budget; false when it is used up.
    pub(super) fn take_budget(&self, stream: usize) -> bool {
        match &self.budgets[stream] {
            None => true,
            Some(left) => left
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                .is_ok(),
        }
    }

    pub(super) fn skip(&self, tid: usize, op: FileOp) {
        self.thread_stats[tid].lock().unwrap().skipped[op as usize] += 1;
    }

    /// A sequence loop of `tid` that began at `start` (intended at `intended`) ended now.
    pub(super) fn end_loop(&self, tid: usize, start: u64, intended: Option<u64>) {
        let now = self.now();
        let mut st = self.thread_stats[tid].lock().unwrap();
        st.loops.ops += 1;
        st.loops.service.record(now - start);
        if let (Some(r), Some(i)) = (st.loops.response.as_mut(), intended) {
            r.record(now.saturating_sub(i));
        }
    }

    fn fail(&self, what: String) {
        let n = self.errors.fetch_add(1, Ordering::Relaxed) + 1;
        if self.max_errors.is_some_and(|max| n > max) {
            let mut f = self.failure.lock().unwrap();
            if f.is_none() {
                *f = Some(what);
            }
            self.stop.store(true, Ordering::Release);
        }
    }
}

/// A started file plan.
pub struct FileRun {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    collector: Option<JoinHandle<()>>,
    out: Arc<(Mutex<Output>, Condvar)>,
    sequence: Vec<bool>,
}

#[derive(Default)]
struct Output {
    /// Interval snapshots not yet polled (JSON objects).
    pending: Vec<String>,
    totals: Vec<FileStats>,
    finished: bool,
    stop_reason: &'static str,
    elapsed_ns: u64,
}

impl FileRun {
    /// Validate, open the sets' directories and start every thread.
    pub fn start(plan: FilePlan) -> Result<FileRun> {
        plan.validate()?;
        let mut dirs = Vec::new();
        let opened = |dirs: &Vec<Vec<RawFd>>| {
            for fd in dirs.iter().flatten() {
                let _ = ops::close(*fd);
            }
        };
        for fs in &plan.filesets {
            let root = ops::open_root(&fs.root).map_err(|e| {
                opened(&dirs);
                EngineError::io(format!("opening file set root {}", fs.root), e)
            })?;
            let mut fds = Vec::with_capacity(fs.dirs.len());
            for d in &fs.dirs {
                match ops::open_dir_beneath(root, d) {
                    Ok(fd) => fds.push(fd),
                    Err(e) => {
                        let _ = ops::close(root);
                        dirs.push(fds);
                        opened(&dirs);
                        return Err(EngineError::io(
                            format!("opening directory {d:?} beneath {} (no links)", fs.root),
                            e,
                        ));
                    }
                }
            }
            let _ = ops::close(root);
            dirs.push(fds);
        }
        let uring = plan.backend == super::FileBackend::Uring;
        // Engine threads: one per stream thread (psync) or one per stream (uring).
        let nthreads: usize = plan
            .streams
            .iter()
            .map(|s| if uring { 1 } else { s.threads })
            .sum();
        let tables: Vec<Mutex<Table>> = plan
            .filesets
            .iter()
            .map(|fs| {
                let dirs = fs.entry_kind == super::EntryKind::Dirs;
                Mutex::new(Table::with_kind(&fs.entries, dirs))
            })
            .collect();
        let fixed = fixed_sets(&plan)
            .into_iter()
            .zip(&tables)
            .map(|(fixed, t)| fixed.then(|| FixedSet::of(&t.lock().unwrap())))
            .collect();
        let t0 = monotonic_ns();
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            failure: Mutex::new(None),
            errors: AtomicU64::new(0),
            max_errors: plan.max_errors,
            tables,
            fixed,
            dirs,
            names: plan.filesets.iter().map(|f| f.name.clone()).collect(),
            thread_stats: plan
                .streams
                .iter()
                .flat_map(|s| (0..s.threads).map(|_| Mutex::new(FileStats::new(is_open(s)))))
                .collect(),
            schedules: plan
                .streams
                .iter()
                .map(|s| match s.arrival {
                    FileArrival::Closed => None,
                    FileArrival::Open { rate, poisson } => {
                        let mut rng = Rng::new(s.seed ^ 0x005E_ED0F_F11E);
                        let gap_ns = 1e9 / rate;
                        let first = if poisson { rng.exp1() } else { rng.next_f64() };
                        Some(Mutex::new(Schedule {
                            next_ns: first * gap_ns,
                            gap_ns,
                            poisson,
                            rng,
                        }))
                    }
                })
                .collect(),
            cursors: plan.streams.iter().map(|_| Arc::default()).collect(),
            budgets: plan
                .streams
                .iter()
                .map(|s| s.limit.map(AtomicU64::new))
                .collect(),
            running: AtomicUsize::new(nthreads),
            hung: AtomicUsize::new(0),
            t0,
        });
        let out = Arc::new((
            Mutex::new(Output {
                totals: plan
                    .streams
                    .iter()
                    .map(|s| FileStats::new(is_open(s)))
                    .collect(),
                ..Default::default()
            }),
            Condvar::new(),
        ));
        let sequence: Vec<bool> = plan.streams.iter().map(|s| s.sequence).collect();
        let mut threads: Vec<JoinHandle<()>> = Vec::with_capacity(nthreads);
        let mut tid = 0;
        let mut spawned_threads = 0;
        let fail = |threads: Vec<JoinHandle<()>>, started: usize, e: EngineError| {
            shared.stop.store(true, Ordering::Release);
            shared
                .running
                .fetch_sub(nthreads - started, Ordering::AcqRel);
            for h in threads {
                let _ = h.join();
            }
            Err(e)
        };
        for (si, s) in plan.streams.iter().enumerate() {
            let mut bodies: Vec<Box<dyn FnOnce() + Send>> = Vec::new();
            if uring {
                match super::uring::UringStream::new(si, tid, s, &plan, shared.clone()) {
                    Ok(mut u) => bodies.push(Box::new(move || u.run())),
                    Err(e) => {
                        return fail(
                            threads,
                            spawned_threads,
                            EngineError::io("setting up io_uring", e),
                        );
                    }
                }
                tid += s.threads;
            } else {
                for k in 0..s.threads {
                    let mut worker =
                        super::psync::Worker::new(si, tid, k, s, &plan, shared.clone());
                    bodies.push(Box::new(move || worker.run()));
                    tid += 1;
                }
            }
            for body in bodies {
                let spawned = std::thread::Builder::new()
                    .name(format!("tm-files-{spawned_threads}"))
                    .spawn(body);
                match spawned {
                    Ok(h) => threads.push(h),
                    Err(e) => {
                        return fail(
                            threads,
                            spawned_threads,
                            EngineError::io("starting a file stream thread", e),
                        );
                    }
                }
                spawned_threads += 1;
            }
        }
        let collector = {
            let shared = shared.clone();
            let out = out.clone();
            let streams: Vec<(usize, usize)> = {
                let mut first = 0;
                plan.streams
                    .iter()
                    .map(|s| {
                        first += s.threads;
                        (first - s.threads, first)
                    })
                    .collect()
            };
            let interval = plan.interval_ms * 1_000_000;
            let hung_ns = plan.hung_ms * 1_000_000;
            let end = plan.duration_ms.map(|d| d * 1_000_000);
            let sequence = sequence.clone();
            std::thread::Builder::new()
                .name("tm-files-collect".into())
                .spawn(move || collect(&shared, &out, &streams, &sequence, interval, end, hung_ns))
                .map_err(|e| EngineError::io("starting the file run's collector", e))?
        };
        Ok(FileRun {
            shared,
            threads,
            collector: Some(collector),
            out,
            sequence,
        })
    }

    /// Interval snapshots finished since the last poll, as a JSON list.
    pub fn poll_json(&self) -> String {
        let mut o = self.out.0.lock().unwrap();
        let items = std::mem::take(&mut o.pending);
        format!("[{}]", items.join(","))
    }

    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
    }

    /// Wait up to `timeout` for the run to end; true if it has.
    pub fn wait(&self, timeout: Duration) -> bool {
        let (m, cv) = &*self.out;
        let g = m.lock().unwrap();
        let (g, _) = cv.wait_timeout_while(g, timeout, |o| !o.finished).unwrap();
        g.finished
    }

    /// Wait for the end; the result as JSON (totals per stream, why it stopped, the sets'
    /// files and bytes as the engine left them).
    pub fn result_json(&mut self) -> Result<String> {
        if let Some(c) = self.collector.take() {
            c.join()
                .map_err(|_| EngineError::Thread("the file run's collector panicked".into()))?;
        }
        self.join_threads()?;
        let o = self.out.0.lock().unwrap();
        let streams: Vec<Indexed> = o
            .totals
            .iter()
            .enumerate()
            .map(|(i, stats)| Indexed {
                stream: i,
                stats,
                sequence: self.sequence[i],
            })
            .collect();
        let filesets: Vec<serde_json::Value> = self
            .shared
            .tables
            .iter()
            .zip(&self.shared.names)
            .map(|(t, name)| {
                let t = t.lock().unwrap();
                serde_json::json!({
                    "name": name,
                    "files": t.present,
                    "dirs": t.dirs_present(),
                    "bytes": t.bytes(),
                })
            })
            .collect();
        let failure = self.shared.failure.lock().unwrap().clone();
        let doc = serde_json::json!({
            "streams": streams.iter().map(|s| serde_json::to_value(s).unwrap()).collect::<Vec<_>>(),
            "stop_reason": if self.shared.hung.load(Ordering::Acquire) > 0 {
                "hung"
            } else if failure.is_some() {
                "errors"
            } else {
                o.stop_reason
            },
            "hung": self.shared.hung.load(Ordering::Acquire),
            "error": failure,
            "errors": self.shared.errors.load(Ordering::Relaxed),
            "elapsed_ns": o.elapsed_ns,
            "filesets": filesets,
        });
        Ok(doc.to_string())
    }
}

impl FileRun {
    /// Join the engine threads, unless some hung in a call: those are left behind (their
    /// handles dropped), as is every directory fd they may still use.
    fn join_threads(&mut self) -> Result<()> {
        if self.shared.hung.load(Ordering::Acquire) > 0 {
            self.threads.clear();
            return Ok(());
        }
        for h in self.threads.drain(..) {
            h.join()
                .map_err(|_| EngineError::Thread("a file stream thread panicked".into()))?;
        }
        Ok(())
    }
}

impl Drop for FileRun {
    fn drop(&mut self) {
        self.stop();
        if let Some(c) = self.collector.take() {
            let _ = c.join();
        }
        let _ = self.join_threads();
        if self.shared.hung.load(Ordering::Acquire) == 0 {
            for fd in self.shared.dirs.iter().flatten() {
                let _ = ops::close(*fd);
            }
        }
    }
}

/// Per file set: true when no stream on it has an operation that creates, deletes, renames or
/// removes an entry, so which entries exist cannot change during the run.
pub(super) fn fixed_sets(plan: &FilePlan) -> Vec<bool> {
    let changes = |op: FileOp| {
        matches!(
            op,
            FileOp::Create | FileOp::Delete | FileOp::Rename | FileOp::Mkdir | FileOp::Rmdir
        )
    };
    (0..plan.filesets.len())
        .map(|f| {
            !plan
                .streams
                .iter()
                .filter(|s| s.fileset == f)
                .any(|s| s.ops.iter().any(|&(op, _)| changes(op)))
        })
        .collect()
}

fn is_open(s: &FileStreamSpec) -> bool {
    matches!(s.arrival, FileArrival::Open { .. })
}

/// Every interval: take each thread's counters, merge them per stream, queue the snapshot.
/// Ends (with a last, partial interval) when the duration is over, on stop, or when every
/// thread has ended.
fn collect(
    shared: &Shared,
    out: &(Mutex<Output>, Condvar),
    streams: &[(usize, usize)],
    sequence: &[bool],
    interval: u64,
    end: Option<u64>,
    hung_ns: u64,
) {
    let mut index = 0u64;
    let mut start = 0u64;
    loop {
        let boundary = (start + interval).min(end.unwrap_or(u64::MAX));
        loop {
            let now = shared.now();
            if now >= boundary
                || shared.stop.load(Ordering::Acquire)
                || shared.running.load(Ordering::Acquire) == 0
            {
                break;
            }
            std::thread::sleep(Duration::from_nanos((boundary - now).min(5_000_000)));
        }
        let last = shared.now() >= end.unwrap_or(u64::MAX)
            || shared.stop.load(Ordering::Acquire)
            || shared.running.load(Ordering::Acquire) == 0;
        let reason = if shared.stop.load(Ordering::Acquire) {
            "requested"
        } else if shared.running.load(Ordering::Acquire) == 0 {
            "done"
        } else {
            "duration"
        };
        if last {
            // Let the threads finish the operation they are in, so it is counted; a call
            // that does not return within hung_ns is the storage's failure, not a reason to
            // wait for ever (a stopped NFS server, a FIFO planted in the set).
            shared.stop.store(true, Ordering::Release);
            let since = shared.now();
            while shared.running.load(Ordering::Acquire) > 0 {
                if shared.now() - since > hung_ns {
                    let n = shared.running.load(Ordering::Acquire);
                    shared.hung.store(n, Ordering::Release);
                    let mut f = shared.failure.lock().unwrap();
                    if f.is_none() {
                        *f = Some(format!(
                            "{n} file operation(s) did not return within {} ms after the run \
                             stopped; the storage may have stopped answering",
                            hung_ns / 1_000_000
                        ));
                    }
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let now = shared.now();
        let per_stream: Vec<FileStats> = streams
            .iter()
            .map(|&(a, b)| {
                let mut acc: Option<FileStats> = None;
                for m in &shared.thread_stats[a..b] {
                    let mut g = m.lock().unwrap();
                    let fresh = FileStats::new(g.loops.response.is_some());
                    let taken = std::mem::replace(&mut *g, fresh);
                    match &mut acc {
                        None => acc = Some(taken),
                        Some(x) => x.merge(&taken),
                    }
                }
                acc.unwrap_or_default()
            })
            .collect();
        let snap = serde_json::json!({
            "index": index,
            "start_ns": start,
            "end_ns": now,
            "streams": per_stream.iter().enumerate().map(|(i, stats)| {
                serde_json::to_value(Indexed { stream: i, stats, sequence: sequence[i] }).unwrap()
            }).collect::<Vec<_>>(),
        });
        let (m, cv) = out;
        let mut o = m.lock().unwrap();
        o.pending.push(snap.to_string());
        for (t, s) in o.totals.iter_mut().zip(&per_stream) {
            t.merge(s);
        }
        if last {
            o.finished = true;
            o.stop_reason = reason;
            o.elapsed_ns = now;
            cv.notify_all();
            return;
        }
        index += 1;
        start = now;
    }
}
