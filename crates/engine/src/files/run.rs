//! Running a file plan: one OS thread per stream thread (psync: each has one operation
//! outstanding), per-thread counters taken by a collector every interval, and the result.
//!
//! Counting rule: every system call a stream makes is counted as the operation it is. A read,
//! append or fsync needs an open file: with none open the thread opens one first (counted as
//! an open); an open or create with `openfiles` already open closes the oldest first (counted
//! as a close). An operation that finds nothing to act on (no file to delete, no free entry to
//! create, nothing open to close) is counted as skipped, not as done.

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use super::table::{OpMix, Picker, Table};
use super::{entry_name, ops, EntryName, FileArrival, FileOp, FilePlan, FileStreamSpec, FILE_OPS};
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
    /// Per file set: its directory fds (closed when the run is dropped).
    pub(super) dirs: Vec<Vec<RawFd>>,
    names: Vec<String>,
    /// Per engine thread: its counters since the last interval.
    thread_stats: Vec<Mutex<FileStats>>,
    pub(super) schedules: Vec<Option<Mutex<Schedule>>>,
    /// Per stream: operations or loops it may still start (FileStreamSpec::limit).
    pub(super) budgets: Vec<Option<AtomicU64>>,
    pub(super) running: AtomicUsize,
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
                    o.ops += 1;
                    o.bytes += bytes;
                    o.service.record(t1 - t0);
                    if let (Some(r), Some(i)) = (o.response.as_mut(), response) {
                        r.record(t1.saturating_sub(i));
                    }
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
        let t0 = monotonic_ns();
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            failure: Mutex::new(None),
            errors: AtomicU64::new(0),
            max_errors: plan.max_errors,
            tables: plan
                .filesets
                .iter()
                .map(|fs| Mutex::new(Table::new(&fs.entries)))
                .collect(),
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
            budgets: plan
                .streams
                .iter()
                .map(|s| s.limit.map(AtomicU64::new))
                .collect(),
            running: AtomicUsize::new(nthreads),
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
                    let mut worker = Worker::new(si, tid, k, s, &plan, shared.clone());
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
            let end = plan.duration_ms.map(|d| d * 1_000_000);
            let sequence = sequence.clone();
            std::thread::Builder::new()
                .name("tm-files-collect".into())
                .spawn(move || collect(&shared, &out, &streams, &sequence, interval, end))
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
        for h in self.threads.drain(..) {
            h.join()
                .map_err(|_| EngineError::Thread("a file stream thread panicked".into()))?;
        }
        if let Some(c) = self.collector.take() {
            c.join()
                .map_err(|_| EngineError::Thread("the file run's collector panicked".into()))?;
        }
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
                serde_json::json!({"name": name, "files": t.present, "bytes": t.bytes()})
            })
            .collect();
        let failure = self.shared.failure.lock().unwrap().clone();
        let doc = serde_json::json!({
            "streams": streams.iter().map(|s| serde_json::to_value(s).unwrap()).collect::<Vec<_>>(),
            "stop_reason": if failure.is_some() { "errors" } else { o.stop_reason },
            "error": failure,
            "errors": self.shared.errors.load(Ordering::Relaxed),
            "elapsed_ns": o.elapsed_ns,
            "filesets": filesets,
        });
        Ok(doc.to_string())
    }
}

impl Drop for FileRun {
    fn drop(&mut self) {
        self.stop();
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
        if let Some(c) = self.collector.take() {
            let _ = c.join();
        }
        for fd in self.shared.dirs.iter().flatten() {
            let _ = ops::close(*fd);
        }
    }
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
            // Let the threads finish the operation they are in, so it is counted.
            shared.stop.store(true, Ordering::Release);
            while shared.running.load(Ordering::Acquire) > 0 {
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

/// A file a thread holds open.
struct Held {
    entry: usize,
    fd: RawFd,
    size: u64,
}

struct Worker {
    stream: usize,
    tid: usize,
    fileset: usize,
    shared: Arc<Shared>,
    mix: OpMix,
    picker: Picker,
    rng: Rng,
    held: VecDeque<Held>,
    openfiles: usize,
    write: bool,
    read_size: u64,
    append_size: u64,
    buf: Vec<u8>,
    /// Intended start of the current open-loop operation or loop.
    intended: Option<u64>,
    loop_start: u64,
}

impl Worker {
    fn new(
        stream: usize,
        tid: usize,
        k: usize,
        s: &FileStreamSpec,
        plan: &FilePlan,
        shared: Arc<Shared>,
    ) -> Self {
        let mut rng = Rng::new(s.seed.wrapping_add((k as u64).wrapping_mul(0x9E37_79B9)));
        let buf_len = s.io_size.min(s.append_size.max(s.read_size).max(4096)) as usize;
        let mut buf = vec![0u8; buf_len.max(s.io_size.min(1 << 20) as usize)];
        rng.fill_bytes(&mut buf); // incompressible appends
        Worker {
            stream,
            tid,
            fileset: s.fileset,
            mix: OpMix::new(&s.ops, s.sequence),
            picker: Picker::new(&s.select, plan.filesets[s.fileset].entries.len()),
            rng,
            held: VecDeque::new(),
            openfiles: s.openfiles,
            write: s.ops.iter().any(|o| o.0.writes()),
            read_size: s.read_size,
            append_size: s.append_size,
            buf,
            intended: None,
            loop_start: 0,
            shared,
        }
    }

    fn run(&mut self) {
        while !self.shared.stop.load(Ordering::Acquire) {
            let (op, first) = self.mix.next(&mut self.rng);
            if first {
                if self.mix.loop_len() > 1 && self.loop_start > 0 {
                    self.end_loop();
                }
                if !self.shared.take_budget(self.stream) || !self.wait_turn() {
                    break;
                }
                self.loop_start = self.shared.now();
            }
            self.step(op);
        }
        for h in std::mem::take(&mut self.held) {
            let _ = ops::close(h.fd);
            self.table().release(h.entry, true, h.size);
        }
        self.shared.running.fetch_sub(1, Ordering::AcqRel);
    }

    /// Open loop: sleep until the next intended time (false if the run stopped meanwhile).
    fn wait_turn(&mut self) -> bool {
        let Some(sched) = &self.shared.schedules[self.stream] else {
            return true;
        };
        let due = sched.lock().unwrap().take();
        self.intended = Some(due);
        loop {
            if self.shared.stop.load(Ordering::Acquire) {
                return false;
            }
            let now = self.shared.now();
            if now >= due {
                return true;
            }
            std::thread::sleep(Duration::from_nanos((due - now).min(10_000_000)));
        }
    }

    fn end_loop(&mut self) {
        self.shared
            .end_loop(self.tid, self.loop_start, self.intended);
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.shared.tables[self.fileset].lock().unwrap()
    }

    fn dir_fd(&self, dir: u32) -> RawFd {
        self.shared.dirs[self.fileset][dir as usize]
    }

    fn record(&self, op: FileOp, t0: u64, result: &io::Result<u64>, entry: usize) {
        let result = match result {
            Ok(n) => Ok(*n),
            Err(e) => Err(e.raw_os_error().unwrap_or(libc::EIO)),
        };
        let response = (self.mix.loop_len() == 1)
            .then_some(self.intended)
            .flatten();
        self.shared
            .record(self.tid, self.fileset, op, t0, result, entry, response);
    }

    fn skip(&self, op: FileOp) {
        self.shared.skip(self.tid, op);
    }

    fn step(&mut self, op: FileOp) {
        match op {
            FileOp::Open => {
                self.open_one();
            }
            FileOp::Create => self.create_one(),
            FileOp::Close => match self.held.pop_back() {
                Some(h) => self.close_held(h),
                None => self.skip(op),
            },
            FileOp::Stat => {
                let start = self.picker.pick(&mut self.rng);
                let Some((i, dir, size)) = self.table().take_existing_entry(start) else {
                    return self.skip(op);
                };
                let (dir, name) = (self.dir_fd(dir), EntryName::new(i));
                let t0 = self.shared.now();
                let r = ops::stat(dir, &name).map(|_| 0);
                self.record(op, t0, &r, i);
                self.table().release(i, true, size);
            }
            FileOp::Delete => {
                let start = self.picker.pick(&mut self.rng);
                let Some((i, dir, size)) = self.table().take_existing_entry(start) else {
                    return self.skip(op);
                };
                let (dir, name) = (self.dir_fd(dir), EntryName::new(i));
                let t0 = self.shared.now();
                let r = ops::unlink(dir, &name).map(|_| 0);
                self.record(op, t0, &r, i);
                self.table().release(i, r.is_err(), size);
            }
            FileOp::Read | FileOp::Append | FileOp::Fsync => {
                if self.held.is_empty() && !self.open_one() {
                    return self.skip(op);
                }
                let h = self.held.back_mut().expect("a held file");
                let (fd, entry, size) = (h.fd, h.entry, h.size);
                let t0 = self.shared.now();
                let r = match op {
                    FileOp::Read => ops::read(fd, self.read_size, &mut self.buf),
                    FileOp::Append => ops::write_at(fd, size, self.append_size, &self.buf),
                    _ => ops::fsync(fd).map(|_| 0),
                };
                self.record(op, t0, &r, entry);
                if op == FileOp::Append {
                    let h = self.held.back_mut().expect("a held file");
                    h.size = match r {
                        Ok(n) => size + n,
                        // A failed append may have written part: the file says how much.
                        Err(_) => std::fs::File::from(dup_fd(fd))
                            .metadata()
                            .map(|m| m.len())
                            .unwrap_or(size),
                    };
                }
            }
        }
    }

    fn make_room(&mut self) {
        while self.held.len() >= self.openfiles {
            let h = self.held.pop_front().expect("a held file");
            self.close_held(h);
        }
    }

    fn close_held(&mut self, h: Held) {
        let t0 = self.shared.now();
        let r = ops::close(h.fd).map(|_| 0);
        self.record(FileOp::Close, t0, &r, h.entry);
        self.table().release(h.entry, true, h.size);
    }

    /// Open an existing file and hold it; false if none is free to open or the open failed.
    fn open_one(&mut self) -> bool {
        self.make_room();
        let start = self.picker.pick(&mut self.rng);
        let Some((i, dir, size)) = self.table().take_existing_entry(start) else {
            self.skip(FileOp::Open);
            return false;
        };
        let (dir, name) = (self.dir_fd(dir), EntryName::new(i));
        let t0 = self.shared.now();
        let r = ops::open(dir, &name, self.write);
        self.record(
            FileOp::Open,
            t0,
            &r.as_ref().map(|_| 0).map_err(clone_err),
            i,
        );
        match r {
            Ok(fd) => {
                self.held.push_back(Held { entry: i, fd, size });
                true
            }
            Err(_) => {
                self.table().release(i, true, size);
                false
            }
        }
    }

    fn create_one(&mut self) {
        self.make_room();
        let start = self.rng.below(self.picker_len()) as usize;
        let Some((i, dir)) = self.table().take_free_entry(start) else {
            return self.skip(FileOp::Create);
        };
        let (dir, name) = (self.dir_fd(dir), EntryName::new(i));
        let t0 = self.shared.now();
        let r = ops::create(dir, &name);
        self.record(
            FileOp::Create,
            t0,
            &r.as_ref().map(|_| 0).map_err(clone_err),
            i,
        );
        match r {
            Ok(fd) => self.held.push_back(Held {
                entry: i,
                fd,
                size: 0,
            }),
            Err(_) => self.table().release(i, false, 0),
        }
    }

    fn picker_len(&self) -> u64 {
        self.table().entries.len() as u64
    }
}

fn clone_err(e: &io::Error) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error().unwrap_or(libc::EIO))
}

/// A duplicate of `fd` the caller owns (to fstat through `File` without closing `fd`).
fn dup_fd(fd: RawFd) -> std::os::fd::OwnedFd {
    use std::os::fd::{BorrowedFd, OwnedFd};
    // SAFETY: fd is open for the duration of this call (held by the thread).
    let b = unsafe { BorrowedFd::borrow_raw(fd) };
    b.try_clone_to_owned().unwrap_or_else(|_| {
        // Fall back to /dev/null: metadata then reports 0 and the size stays as it was.
        OwnedFd::from(std::fs::File::open("/dev/null").expect("/dev/null"))
    })
}
