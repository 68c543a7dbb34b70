//! Running a plan: open targets, spread streams over threads, collect interval snapshots and
//! the final result.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;

use crate::backend::open_backend;
use crate::clock::{monotonic_ns, realtime_ns, sleep_until_realtime, RunClock};
use crate::error::{EngineError, Result};
use crate::plan::{BackendKind, Plan, SyncMode};
use crate::replay::{self, Cursor, ListInfo};
use crate::stats::frame::{batch_json, Frame, Window};
use crate::stats::{IndexedStats, StreamStats};
use crate::stop::{Span, StopReason, StopSignal};
use crate::stream::{BlockStamp, StreamState, TargetFiles};
use crate::verify::{Findings, TargetVerify};
use crate::worker::{HungIo, IntervalMsg, Limits, Phase, Recycled, ThreadResult, Totals, Worker};

/// How often a journal with synced writes on its target is made durable (msync).
const JOURNAL_SYNC: Duration = Duration::from_millis(100);

/// The result lists at most this many hung IOs (the oldest), plus their total count.
const HUNG_LISTED: usize = 64;

/// Name of the thread that merges the engine threads' interval messages: the run's totals
/// per stream, the intervals' frames (rows, group aggregates, QoS windows). Its CPU is the
/// engine's, apart from the IO threads' ("tilemark-engine") and from the front end's. (A
/// thread's name on Linux is at most 15 bytes; telemetry finds its threads by name.)
pub const AGGREGATE_THREAD: &str = "tilemark-agg";

/// A started run.
pub struct Engine {
    plan: Plan,
    warmup_ns: u64,
    /// CLOCK_REALTIME when run time 0 began (0 until the start instant is reached).
    started_at_ns: Arc<AtomicU64>,
    /// Sleeps until the plan's absolute start, then releases the workers.
    starter: Option<JoinHandle<()>>,
    threads: Vec<JoinHandle<Result<ThreadResult>>>,
    control: Control,
    /// Interval messages merged as they arrive, on a thread of their own
    /// (`AGGREGATE_THREAD`), not on the caller of `poll_frames`.
    aggregator: Arc<Mutex<Aggregator>>,
    /// That thread; it ends once every engine thread has ended (the channel's last sender
    /// gone) and the last message is merged.
    aggregate: Option<JoinHandle<()>>,
    /// The aggregation thread panicked (the result says so).
    aggregate_failed: bool,
    /// Kept open until every thread has been joined: the threads use their raw fds. (io_uring
    /// holds its own references to registered files, and psync workers use duplicates, so
    /// closing these is safe even when IOs hung.)
    _files: Vec<File>,
    /// Verified targets by plan index, and the thread keeping their journals durable.
    verifiers: Vec<Option<Arc<TargetVerify>>>,
    journal_sync: Option<JoinHandle<()>>,
    result: Option<Result<String>>,
}

/// Stop and wait for a run from any thread.
#[derive(Clone)]
pub struct Control {
    stop: Arc<StopSignal>,
    finished: Arc<(Mutex<usize>, Condvar)>,
    nthreads: usize,
}

impl Control {
    /// Ask every thread to stop; in-flight IOs are reaped and the partial interval reported.
    pub fn stop(&self) {
        self.stop.stop(StopReason::Requested);
    }

    pub fn is_done(&self) -> bool {
        *self.finished.0.lock().unwrap() >= self.nthreads
    }

    /// Stop plan streams `which` while the run goes on: each issues nothing more and has ended
    /// once its IOs in flight complete (streams waiting for it may then start); one still
    /// waiting for others never starts. Returns how many of the indices name streams.
    pub fn stop_streams(&self, which: &[usize]) -> usize {
        self.stop.stop_streams(which)
    }

    /// When each stream started and ended so far (run time, ns), in plan order.
    pub fn spans(&self) -> Vec<Span> {
        self.stop.spans()
    }

    /// Wait up to `timeout` for the run to end; true if it has.
    pub fn wait(&self, timeout: Duration) -> bool {
        let (count, cv) = &*self.finished;
        let guard = count.lock().unwrap();
        let (guard, _) = cv
            .wait_timeout_while(guard, timeout, |n| *n < self.nthreads)
            .unwrap();
        *guard >= self.nthreads
    }
}

/// Signals completion of a thread even if it panics.
struct FinishGuard(Arc<(Mutex<usize>, Condvar)>);

impl Drop for FinishGuard {
    fn drop(&mut self) {
        let (count, cv) = &*self.0;
        *count.lock().unwrap() += 1;
        cv.notify_all();
    }
}

/// Give `advice` for the whole of an open target (the advice belongs to the open file, as
/// fio's fadvise_hint does to each job's: ioengines.c td_io_open_file).
fn advise(file: &File, advice: crate::plan::Fadvise, path: &str) -> Result<()> {
    let flag = match advice {
        crate::plan::Fadvise::Random => libc::POSIX_FADV_RANDOM,
        crate::plan::Fadvise::Sequential => libc::POSIX_FADV_SEQUENTIAL,
    };
    // SAFETY: posix_fadvise only advises the kernel about this open file's pages.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, flag) };
    if rc != 0 {
        return Err(EngineError::io(
            format!("cannot advise the kernel about target {path}"),
            std::io::Error::from_raw_os_error(rc),
        ));
    }
    Ok(())
}

impl Engine {
    /// Validate, open targets, set up a backend per thread, and start.
    pub fn start(plan: Plan) -> Result<Engine> {
        plan.validate()?;
        // Replayed IO lists are checked record by record before anything is opened: what
        // they hold decides how the targets are opened.
        let lists: Vec<Option<ListInfo>> = plan
            .streams
            .iter()
            .map(|s| {
                s.ios
                    .as_ref()
                    .map(|ios| replay::check(ios, s.regions[0].length, s.align, &s.name))
                    .transpose()
            })
            .collect::<Result<_>>()?;
        // File table: per target a plain fd, plus an O_DSYNC fd if any stream asks for it.
        let mut files = Vec::new();
        let mut target_files = Vec::with_capacity(plan.targets.len());
        for (ti, t) in plan.targets.iter().enumerate() {
            let on_target = || {
                plan.streams
                    .iter()
                    .zip(&lists)
                    .filter(move |(s, _)| s.uses_target(ti))
            };
            let writes = on_target().any(|(s, list)| list.map_or(s.writes(), |l| l.writes));
            let wants_dsync = on_target()
                .any(|(s, list)| s.sync == SyncMode::Dsync || list.is_some_and(|l| l.fua));
            let wants_buffered = t.direct
                && on_target()
                    .any(|(s, list)| list.map_or(s.writeback && s.writes(), |l| l.writeback));
            let open = |dsync: bool, direct: bool| -> Result<File> {
                let mut flags = 0;
                if direct {
                    flags |= libc::O_DIRECT;
                }
                if dsync {
                    flags |= libc::O_DSYNC;
                }
                OpenOptions::new()
                    .read(true)
                    .write(writes)
                    .custom_flags(flags)
                    .open(&t.path)
                    .map_err(|e| EngineError::io(format!("cannot open target {}", t.path), e))
            };
            let file = files.len() as u32;
            files.push(open(false, t.direct)?);
            let file_dsync = if wants_dsync {
                files.push(open(true, t.direct)?);
                files.len() as u32 - 1
            } else {
                file
            };
            if let (Some(advice), false) = (t.fadvise, t.direct) {
                for f in &files[file as usize..] {
                    advise(f, advice, &t.path)?;
                }
            }
            let file_buffered = if wants_buffered {
                files.push(open(false, false)?);
                files.len() as u32 - 1
            } else {
                file
            };
            target_files.push(TargetFiles {
                raw_fd: -1,
                is_block: false,
                offset: t.offset,
                file,
                file_dsync,
                file_buffered,
                verify: t.verify.as_ref().map(|v| BlockStamp {
                    target_id: v.target_id,
                    block: v.block_size as usize,
                    epoch: v.epoch,
                }),
            });
        }
        let raw: Vec<RawFd> = files.iter().map(|f| f.as_raw_fd()).collect();
        for tf in &mut target_files {
            let plain = &files[tf.file as usize];
            tf.raw_fd = plain.as_raw_fd();
            tf.is_block = plain
                .metadata()
                .map(|m| std::os::unix::fs::FileTypeExt::is_block_device(&m.file_type()))
                .unwrap_or(false);
        }

        let check_reads = plan.backend != BackendKind::Null;
        let mut verifiers: Vec<Option<Arc<TargetVerify>>> = Vec::new();
        for (ti, t) in plan.targets.iter().enumerate() {
            verifiers.push(match &t.verify {
                Some(spec) => Some(Arc::new(TargetVerify::new(
                    ti,
                    t.offset,
                    spec.clone(),
                    t.length,
                    check_reads,
                )?)),
                None => None,
            });
        }
        let any_verify = verifiers.iter().any(Option::is_some);

        let nthreads = plan.threads.min(plan.streams.len()).max(1);
        let mut per_thread: Vec<Vec<StreamState>> = (0..nthreads).map(|_| Vec::new()).collect();
        let mut empty_totals = Vec::with_capacity(plan.streams.len());
        let mut flows = crate::flow::Groups::default();
        for (i, spec) in plan.streams.iter().enumerate() {
            let mut state = StreamState::new(i, spec, &target_files);
            state.pacing = flows.pacing_for(spec);
            if let (Some(ios), Some(info)) = (&spec.ios, lists[i]) {
                let (start, stop) = spec.active_ns();
                state.attach_replay(Cursor::open(ios, start, stop, &spec.name)?, info);
            }
            empty_totals.push(state.new_stats());
            per_thread[i % nthreads].push(state);
        }
        // Each thread sets up its own backend (an io_uring ring belongs to the thread that
        // submits to it), reports whether that worked, then waits for the common clock.
        let (tx, rx) = channel();
        let finished = Arc::new((Mutex::new(0usize), Condvar::new()));
        let stop = Arc::new(StopSignal::for_streams(plan.streams.len()));
        let limits = Limits {
            max_errors: plan.max_errors,
            io_timeout_ns: plan.io_timeout_ns(),
        };
        let mut threads = Vec::with_capacity(nthreads);
        let mut setups = Vec::with_capacity(nthreads);
        let mut gos = Vec::with_capacity(nthreads);
        let mut give_back = Vec::with_capacity(nthreads);
        for (id, streams) in per_thread.into_iter().enumerate() {
            let (recycle_tx, recycle_rx) = channel::<Recycled>();
            give_back.push(recycle_tx);
            // In-flight bound: every stream's cap plus one fsync each.
            let max_inflight: usize = streams.iter().map(|s| s.qd as usize + 1).sum();
            let (setup_tx, setup_rx) = channel::<std::result::Result<(), String>>();
            let (go_tx, go_rx) = channel::<Option<RunClock>>();
            let raw = raw.clone();
            let kind = plan.backend;
            let poll = Duration::from_micros(plan.poll_us);
            let sqpoll = plan.sqpoll;
            // The thread pins itself before its backend is set up, so the ring and the
            // buffers it first touches are made on the CPU it will run on.
            let cpu = (!plan.cpus.is_empty()).then(|| plan.cpus[id % plan.cpus.len()]);
            let tx = tx.clone();
            let guard = FinishGuard(finished.clone());
            let verify = if any_verify {
                verifiers.clone()
            } else {
                Vec::new()
            };
            let handle = std::thread::Builder::new()
                .name("tilemark-engine".into())
                .spawn(move || {
                    let _guard = guard;
                    if let Some(cpu) = cpu {
                        if let Err(e) = crate::affinity::pin_current_thread(cpu) {
                            let msg =
                                format!("cpus: cannot pin engine thread {id} to CPU {cpu}: {e}");
                            let _ = setup_tx.send(Err(msg.clone()));
                            return Err(EngineError::Thread(msg));
                        }
                    }
                    let backend = match open_backend(kind, &raw, max_inflight, poll, sqpoll) {
                        Ok(b) => {
                            let _ = setup_tx.send(Ok(()));
                            b
                        }
                        Err(e) => {
                            let msg = format!("{kind:?} backend: {e}");
                            let _ = setup_tx.send(Err(msg.clone()));
                            return Err(EngineError::Thread(msg));
                        }
                    };
                    match go_rx.recv() {
                        Ok(Some(clock)) => Worker::new(id, streams, backend)
                            .with_limits(limits)
                            .with_verify(verify)
                            .with_recycling(recycle_rx)
                            .run(clock, tx),
                        _ => Err(EngineError::Thread("engine start cancelled".into())),
                    }
                })
                .map_err(|e| EngineError::io("spawning engine thread", e))?;
            threads.push(handle);
            setups.push(setup_rx);
            gos.push(go_tx);
        }
        let failures: Vec<String> = setups
            .iter()
            .filter_map(|rx| match rx.recv() {
                Ok(Ok(())) => None,
                Ok(Err(msg)) => Some(msg),
                Err(_) => Some("an engine thread exited during setup".into()),
            })
            .collect();
        if !failures.is_empty() {
            for go in &gos {
                let _ = go.send(None);
            }
            for h in threads {
                let _ = h.join();
            }
            return Err(EngineError::Thread(failures.join("; ")));
        }

        // Start time: now, or an absolute CLOCK_REALTIME instant shared by every host of a
        // multi-host run. A starter thread sleeps until that instant (clock_nanosleep with
        // TIMER_ABSTIME, so a host's engine wakes when its wall clock reads it, not after a delay
        // computed from it), then fixes run time 0 on the monotonic clock and releases the
        // workers. `started_at_ns` records the wall-clock instant it really woke.
        let warmup_ns = plan.warmup_ms * 1_000_000;
        let end_ns = plan.duration_ms.map(|d| warmup_ns + d * 1_000_000);
        let interval_ns = plan.interval_ms * 1_000_000;
        let started_at_ns = Arc::new(AtomicU64::new(0));
        let release = {
            let stop = stop.clone();
            let started_at_ns = started_at_ns.clone();
            move || {
                let started = realtime_ns();
                let mut clock = RunClock::monotonic(monotonic_ns(), warmup_ns, end_ns, interval_ns);
                clock.stop = stop;
                started_at_ns.store(started, Ordering::Release);
                for go in &gos {
                    let _ = go.send(Some(clock.clone()));
                }
            }
        };
        let starter = match plan.start_at_ns {
            None => {
                release();
                None
            }
            Some(at_ns) => {
                let stop = stop.clone();
                let spawned = std::thread::Builder::new()
                    .name("tilemark-start".into())
                    .spawn(move || {
                        sleep_until_realtime(at_ns, &stop);
                        release();
                    })
                    .map_err(|e| EngineError::io("spawning the engine's start thread", e))?;
                Some(spawned)
            }
        };
        let journal_sync = start_journal_sync(
            &plan,
            &verifiers,
            Arc::new(Control {
                stop: stop.clone(),
                finished: finished.clone(),
                nthreads,
            }),
        );
        let mut aggregator =
            Aggregator::new(nthreads, stream_targets(&plan), Totals::new(empty_totals));
        aggregator.names = plan.streams.iter().map(|s| s.name.clone()).collect();
        aggregator.give_back = give_back;
        let aggregator = Arc::new(Mutex::new(aggregator));
        let aggregate = {
            let aggregator = aggregator.clone();
            std::thread::Builder::new()
                .name(AGGREGATE_THREAD.into())
                .spawn(move || aggregate(rx, &aggregator))
                .map_err(|e| EngineError::io("spawning the engine's aggregation thread", e))?
        };
        Ok(Engine {
            aggregator,
            aggregate: Some(aggregate),
            aggregate_failed: false,
            plan,
            warmup_ns,
            started_at_ns,
            starter,
            threads,
            control: Control {
                stop,
                finished,
                nthreads,
            },
            _files: files,
            verifiers,
            journal_sync,
            result: None,
        })
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// A handle to stop or wait for the run without borrowing the engine.
    pub fn control(&self) -> Control {
        self.control.clone()
    }

    pub fn stop(&self) {
        self.control.stop();
    }

    pub fn is_done(&self) -> bool {
        self.control.is_done()
    }

    pub fn wait(&self, timeout: Duration) -> bool {
        self.control.wait(timeout)
    }

    /// Once every engine thread has ended, wait for the aggregation thread to merge what they
    /// sent last, so a poll after the run ended (`wait`, `is_done`) gets every interval.
    fn settle(&mut self) {
        if self.control.is_done() {
            if let Some(h) = self.aggregate.take() {
                self.aggregate_failed |= h.join().is_err();
            }
        }
    }

    /// Interval snapshots completed since the last call, as a JSON array.
    pub fn poll_json(&mut self) -> String {
        self.settle();
        self.aggregator.lock().unwrap().take_ready_json()
    }

    /// Group of every plan stream for the frames' aggregates (`groups` groups; every stream
    /// in group 0 until set). Streams past the list's end are in no group.
    pub fn set_groups(&mut self, group_of: Vec<u32>) {
        let groups = group_of.iter().map(|&g| g as usize + 1).max().unwrap_or(0);
        let mut a = self.aggregator.lock().unwrap();
        a.group_of = group_of;
        a.groups = groups;
    }

    /// Further group sets whose aggregates every frame carries besides `set_groups`' (each a
    /// list of group indices per plan stream, as there), replacing any set before.
    pub fn set_group_sets(&mut self, sets: Vec<Vec<u32>>) {
        self.aggregator.lock().unwrap().sets = sets
            .into_iter()
            .map(|group_of| {
                let groups = group_of.iter().map(|&g| g as usize + 1).max().unwrap_or(0);
                (group_of, groups)
            })
            .collect();
    }

    /// Merge further group set `set` (`set_group_sets`) over measurement windows of
    /// `window_ns` instead of handing it over per interval: a measurement frame then carries
    /// that set's per-interval counts and, when it closes a window, the window's snapshot
    /// (stats/frame.rs Window), and the set's own aggregates are left empty. The window being
    /// filled is `window_json`'s.
    pub fn set_window(&mut self, set: usize, window_ns: u64) {
        let mut a = self.aggregator.lock().unwrap();
        a.window = Some((set, window_ns.max(1)));
        a.filling = None;
    }

    /// The window being filled (measurement intervals not yet in a window frame) as a
    /// snapshot; None when there is none.
    pub fn window_json(&self) -> Option<String> {
        let a = self.aggregator.lock().unwrap();
        a.filling.as_ref().map(Window::snapshot_json)
    }

    /// Interval frames completed since the last call (instead of `poll_json`: the rows of
    /// every stream as columns, and the group aggregates; stats/frame.rs). From the first
    /// call on, the aggregation thread builds each frame as its interval completes, so this
    /// call only hands them over; a run is polled one way, frames or JSON.
    pub fn poll_frames(&mut self) -> Vec<Frame> {
        self.settle();
        let mut a = self.aggregator.lock().unwrap();
        a.build_frames = true;
        let mut frames = std::mem::take(&mut a.built);
        frames.extend(a.take_ready_frames());
        frames
    }

    /// `poll_frames` and `poll_json` of the same intervals at once (tests compare what the two
    /// paths make of the same data).
    pub fn poll_frames_and_json(&mut self) -> (Vec<Frame>, String) {
        self.settle();
        let mut a = self.aggregator.lock().unwrap();
        let ready = a.take_ready();
        let json = a.json_of(&ready);
        (a.frames_of(ready), json)
    }

    /// Block until the run ends; the result as JSON (measurement-phase totals per stream).
    pub fn result_json(&mut self) -> Result<String> {
        if let Some(r) = &self.result {
            return clone_result(r);
        }
        if let Some(starter) = self.starter.take() {
            let _ = starter.join();
        }
        let mut end_ns = 0;
        let mut stop_reason = None;
        let mut hung = Vec::new();
        let mut poller = Vec::new();
        let mut errors = Vec::new();
        let mut findings = Findings::default();
        for h in self.threads.drain(..) {
            match h.join() {
                Ok(Ok(r)) => {
                    findings.merge(r.findings);
                    end_ns = end_ns.max(r.end_ns);
                    stop_reason = stop_reason.or(r.stop_reason);
                    hung.extend(r.hung);
                    poller.extend(r.modes);
                }
                Ok(Err(e)) => errors.push(e.to_string()),
                Err(_) => errors.push("an engine thread panicked".into()),
            }
        }
        // Every interval has been sent once the threads have ended, and the aggregation
        // thread ends once it has merged the last (the totals are folded as they arrive).
        self.settle();
        if self.aggregate_failed {
            errors.push("the engine's aggregation thread panicked".into());
        }
        let aggregator = self.aggregator.clone();
        let aggregator = aggregator.lock().unwrap();
        if let Some(h) = self.journal_sync.take() {
            let _ = h.join();
        }
        for (t, v) in self.plan.targets.iter().zip(&self.verifiers) {
            if let Some(v) = v {
                if let Err(e) = v.close(t.length) {
                    errors.push(e.to_string());
                }
            }
        }
        findings.findings.sort_by_key(|f| (f.time_ns, f.offset));
        let verification = self
            .verifiers
            .iter()
            .any(Option::is_some)
            .then_some(findings);
        let result = if errors.is_empty() {
            let targets = aggregator.stream_targets.clone();
            let streams: Vec<IndexedStats> = aggregator
                .totals
                .streams()
                .iter()
                .enumerate()
                .map(|(i, s)| IndexedStats {
                    stream: i,
                    stats: s,
                    totals: true,
                    targets: &targets[i],
                })
                .collect();
            let measure_start = self.warmup_ns.min(end_ns);
            let hung_count = hung.len();
            hung.sort_by_key(|h| std::cmp::Reverse(h.age_ns));
            hung.truncate(HUNG_LISTED);
            serde_json::to_string(&ResultJson {
                complete: stop_reason.is_none(),
                stop_reason: stop_reason.map(StopReason::name),
                started_at_ns: self.started_at_ns.load(Ordering::Acquire),
                measure_start_ns: measure_start,
                measure_end_ns: end_ns,
                streams,
                spans: self.control.spans(),
                hung,
                hung_count,
                verification,
                poller,
            })
            .map_err(|e| EngineError::Thread(format!("serializing result: {e}")))
        } else {
            Err(EngineError::Thread(errors.join("; ")))
        };
        let out = clone_result(&result);
        self.result = Some(result);
        out
    }
}

/// The plan target of every region of every stream with more than one (for the per-target
/// breakdown of results); empty for one-region streams.
fn stream_targets(plan: &Plan) -> Vec<Vec<usize>> {
    plan.streams
        .iter()
        .map(|s| match s.regions.len() {
            1 => Vec::new(),
            _ => s.regions.iter().map(|r| r.target).collect(),
        })
        .collect()
}

/// A thread that makes the journals of targets with synced writes (dsync, fsync) durable every
/// JOURNAL_SYNC while the run lasts, so a power loss loses at most that much of them.
fn start_journal_sync(
    plan: &Plan,
    verifiers: &[Option<Arc<TargetVerify>>],
    control: Arc<Control>,
) -> Option<JoinHandle<()>> {
    let synced: Vec<Arc<TargetVerify>> = verifiers
        .iter()
        .flatten()
        .filter(|v| v.spec.journal.is_some())
        .filter(|v| {
            plan.streams
                .iter()
                .any(|s| s.uses_target(v.index) && s.writes() && s.sync != SyncMode::None)
        })
        .cloned()
        .collect();
    if synced.is_empty() {
        return None;
    }
    std::thread::Builder::new()
        .name("tilemark-journal".into())
        .spawn(move || {
            while !control.wait(JOURNAL_SYNC) {
                for v in &synced {
                    // A failed msync leaves the journal as durable as the kernel made it.
                    let _ = v.table.sync();
                }
            }
        })
        .ok()
}

fn clone_result(r: &Result<String>) -> Result<String> {
    match r {
        Ok(s) => Ok(s.clone()),
        Err(e) => Err(EngineError::Thread(e.to_string())),
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop();
        if let Some(starter) = self.starter.take() {
            let _ = starter.join();
        }
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
        // The engine threads' senders are gone: the aggregation thread ends.
        if let Some(h) = self.aggregate.take() {
            let _ = h.join();
        }
    }
}

#[derive(Serialize)]
struct ResultJson<'a> {
    complete: bool,
    stop_reason: Option<&'static str>,
    started_at_ns: u64,
    measure_start_ns: u64,
    measure_end_ns: u64,
    streams: Vec<IndexedStats<'a>>,
    /// When each stream started (its phase began: its start time, or when the streams it
    /// waited for had ended) and ended (its limit used up, its stop time, a stop, or the run's
    /// end; its IOs completed); null when it never did.
    spans: Vec<Span>,
    /// The oldest IOs still outstanding when the run ended, at most HUNG_LISTED.
    hung: Vec<HungIo>,
    hung_count: usize,
    /// Verified targets: blocks judged and findings (null when nothing is verified).
    verification: Option<Findings>,
    /// Per IO thread with a poller's judge (uring): how long it ran with spinning allowed
    /// and with batched submissions (backend/judge.rs); empty for the other backends.
    poller: Vec<crate::backend::judge::ModeShares>,
}

/// Merges per-thread interval messages into one snapshot per interval. Interval k is ready
/// once every thread has sent k or has ended before k.
struct Aggregator {
    nstreams: usize,
    /// Plan targets of each stream's regions (empty for one region).
    stream_targets: Vec<Vec<usize>>,
    pending: BTreeMap<u64, Partial>,
    /// Measurement-phase totals per stream, folded here rather than on the engine threads.
    totals: Totals,
    last_sent: Vec<Option<u64>>,
    ended_at: Vec<Option<u64>>,
    /// Stream names, for the frames' rows.
    names: Vec<String>,
    /// Group of each stream and how many groups (frames' aggregates).
    group_of: Vec<u32>,
    groups: usize,
    /// Further group sets (`Engine::set_group_sets`): group of each stream, how many groups.
    sets: Vec<(Vec<u32>, usize)>,
    /// Per engine thread, where its streams' interval statistics go back once merged, to be
    /// reused (Worker::with_recycling; stream i runs on thread i % threads). Empty: dropped.
    give_back: Vec<std::sync::mpsc::Sender<Recycled>>,
    /// A further group set merged over QoS windows instead of handed over per interval
    /// (`Engine::set_window`): (set index, window ns), and the window being filled.
    window: Option<(usize, u64)>,
    filling: Option<Window>,
    /// Set by the first `Engine::poll_frames`: build each interval's frame as soon as it is
    /// complete, into `built`, until the next poll takes them.
    build_frames: bool,
    built: Vec<Frame>,
}

/// The aggregation thread: merge every interval message as it arrives, and build the frames
/// of completed intervals once a consumer reads frames. Runs until every engine thread has
/// ended. Holding the lock only while it merges, it never waits on a consumer.
fn aggregate(rx: Receiver<IntervalMsg>, aggregator: &Mutex<Aggregator>) {
    yield_to_io_threads();
    while let Ok(msg) = rx.recv() {
        let mut a = aggregator.lock().unwrap();
        a.add(msg);
        while let Ok(msg) = rx.try_recv() {
            a.add(msg);
        }
        if a.build_frames {
            let mut frames = a.take_ready_frames();
            frames.iter_mut().for_each(Frame::encode);
            a.built.extend(frames);
        }
    }
}

/// How much lower than the IO threads' the aggregation thread's priority is (nice): the
/// front end's step (python/tilemark/run/priority.py). Its work, an interval's frame in one
/// burst after each interval's end, used to run on the front end's thread at that priority;
/// on a host with as many CPUs as IO threads a burst at theirs would hold an IO thread back
/// and its open-loop IOs would go out late.
const AGGREGATE_NICE_STEP: i32 = 5;

/// Lower the calling thread's priority by AGGREGATE_NICE_STEP (Linux sets nice per thread).
/// Raising a nice value needs no privilege; where it fails the thread runs as it was.
fn yield_to_io_threads() {
    // SAFETY: gettid and get/setpriority take and return plain integers.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        *libc::__errno_location() = 0;
        let now = libc::getpriority(libc::PRIO_PROCESS, tid);
        if *libc::__errno_location() == 0 {
            libc::setpriority(libc::PRIO_PROCESS, tid, now + AGGREGATE_NICE_STEP);
        }
    }
}

struct Partial {
    phase: Phase,
    start_ns: u64,
    end_ns: u64,
    streams: Vec<(usize, Box<StreamStats>)>,
    /// Every thread's issue lateness merged.
    lateness: crate::stats::Histogram,
}

#[derive(Serialize)]
struct SnapshotJson<'a> {
    interval: u64,
    phase: &'static str,
    start_ns: u64,
    end_ns: u64,
    streams: Vec<IndexedStats<'a>>,
    /// Issue lateness of the interval's open-loop IOs, every thread's merged.
    lateness: &'a crate::stats::Histogram,
}

impl Aggregator {
    fn new(nthreads: usize, stream_targets: Vec<Vec<usize>>, totals: Totals) -> Self {
        let nstreams = stream_targets.len();
        Aggregator {
            names: (0..nstreams).map(|i| i.to_string()).collect(),
            group_of: vec![0; nstreams],
            groups: 1,
            sets: Vec::new(),
            give_back: Vec::new(),
            nstreams,
            stream_targets,
            pending: BTreeMap::new(),
            totals,
            last_sent: vec![None; nthreads],
            ended_at: vec![None; nthreads],
            window: None,
            filling: None,
            build_frames: false,
            built: Vec::new(),
        }
    }

    fn add(&mut self, msg: IntervalMsg) {
        self.totals.add(&msg);
        self.last_sent[msg.thread] = Some(msg.interval);
        if msg.last {
            self.ended_at[msg.thread] = Some(msg.interval);
        }
        let p = self.pending.entry(msg.interval).or_insert_with(|| Partial {
            phase: msg.phase,
            start_ns: msg.start_ns,
            end_ns: msg.end_ns,
            streams: Vec::with_capacity(self.nstreams),
            lateness: Default::default(),
        });
        p.lateness.merge(&msg.lateness);
        p.start_ns = p.start_ns.min(msg.start_ns);
        p.end_ns = p.end_ns.max(msg.end_ns);
        p.streams.extend(msg.streams);
    }

    fn ready(&self, k: u64) -> bool {
        (0..self.last_sent.len()).all(|t| {
            self.last_sent[t].is_some_and(|l| l >= k) || self.ended_at[t].is_some_and(|e| e < k)
        })
    }

    /// Intervals every thread has sent (or ended before), oldest first, streams in plan order.
    fn take_ready(&mut self) -> Vec<(u64, Partial)> {
        let mut out = Vec::new();
        while let Some((&k, _)) = self.pending.first_key_value() {
            if !self.ready(k) {
                break;
            }
            let mut p = self.pending.remove(&k).expect("present");
            p.streams.sort_unstable_by_key(|(i, _)| *i);
            out.push((k, p));
        }
        out
    }

    fn take_ready_frames(&mut self) -> Vec<Frame> {
        let ready = self.take_ready();
        self.frames_of(ready)
    }

    fn frames_of(&mut self, ready: Vec<(u64, Partial)>) -> Vec<Frame> {
        ready
            .into_iter()
            .map(|(k, p)| {
                let mut frame = Frame::build(
                    k,
                    p.phase.name(),
                    (p.start_ns, p.end_ns),
                    &p.streams,
                    &self.names,
                    (&self.group_of, self.groups),
                );
                frame.add_sets(&p.streams, &self.sets);
                frame.lateness = p.lateness;
                if p.phase == Phase::Measure {
                    self.fill_window(&mut frame);
                }
                self.give_back(p.streams);
                frame
            })
            .collect()
    }

    /// A measurement frame's windowed set goes into the window being filled, leaving the frame
    /// its per-interval counts, and the window's snapshot once it spans the window.
    fn fill_window(&mut self, frame: &mut Frame) {
        let Some((set, window_ns)) = self.window else {
            return;
        };
        let Some(groups) = frame.sets.get_mut(set).map(std::mem::take) else {
            return;
        };
        frame.batch = Some(batch_json(&groups));
        let filling = match self.filling.take() {
            None => Window::new(
                frame.interval,
                (frame.start_ns, frame.end_ns),
                groups,
                &frame.lateness,
            ),
            Some(mut w) => {
                w.add(frame.interval, frame.end_ns, &groups, &frame.lateness);
                w
            }
        };
        if filling.spans(window_ns) {
            frame.window = Some(filling.snapshot_json());
        } else {
            self.filling = Some(filling);
        }
    }

    /// Hand merged interval statistics back to the threads that made them, for reuse. A
    /// thread that has ended has dropped its receiver; its statistics are freed here then.
    fn give_back(&self, streams: Vec<(usize, Box<StreamStats>)>) {
        let threads = self.give_back.len();
        if threads == 0 {
            return;
        }
        let mut per_thread: Vec<Recycled> = (0..threads)
            .map(|_| Vec::with_capacity(streams.len() / threads + 1))
            .collect();
        for (i, stats) in streams {
            per_thread[i % threads].push((i, stats));
        }
        for (tx, given) in self.give_back.iter().zip(per_thread) {
            if !given.is_empty() {
                let _ = tx.send(given);
            }
        }
    }

    fn take_ready_json(&mut self) -> String {
        let ready = self.take_ready();
        let json = self.json_of(&ready);
        for (_, p) in ready {
            self.give_back(p.streams);
        }
        json
    }

    fn json_of(&self, ready: &[(u64, Partial)]) -> String {
        let mut out = Vec::new();
        for (k, p) in ready {
            let k = *k;
            let snap = SnapshotJson {
                interval: k,
                phase: p.phase.name(),
                start_ns: p.start_ns,
                end_ns: p.end_ns,
                streams: p
                    .streams
                    .iter()
                    .map(|(i, s)| IndexedStats {
                        stream: *i,
                        stats: s,
                        totals: false,
                        targets: &self.stream_targets[*i],
                    })
                    .collect(),
                lateness: &p.lateness,
            };
            out.push(serde_json::to_string(&snap).expect("snapshot serializes"));
        }
        format!("[{}]", out.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An interval message from `thread` carrying `ops` reads for each of `streams`.
    fn msg(thread: usize, interval: u64, streams: &[usize], ops: u64, last: bool) -> IntervalMsg {
        let streams = streams
            .iter()
            .map(|&i| {
                let mut s = StreamStats::new(false);
                s.ops[0].ops = ops;
                (i, Box::new(s))
            })
            .collect();
        IntervalMsg {
            thread,
            interval,
            phase: Phase::Measure,
            start_ns: interval * 1000 + thread as u64,
            end_ns: (interval + 1) * 1000 + thread as u64,
            streams,
            lateness: Default::default(),
            last,
        }
    }

    fn aggregator(nthreads: usize, nstreams: usize) -> Aggregator {
        Aggregator::new(
            nthreads,
            vec![Vec::new(); nstreams],
            Totals::new(vec![StreamStats::new(false); nstreams]),
        )
    }

    fn take(agg: &mut Aggregator) -> Vec<serde_json::Value> {
        serde_json::from_str::<Vec<serde_json::Value>>(&agg.take_ready_json()).unwrap()
    }

    #[test]
    fn an_interval_is_published_once_every_thread_has_sent_it() {
        let mut agg = aggregator(2, 3);
        agg.add(msg(0, 0, &[0, 2], 5, false));
        assert!(
            take(&mut agg).is_empty(),
            "thread 1 has not reported interval 0"
        );
        agg.add(msg(0, 1, &[0, 2], 6, false));
        agg.add(msg(1, 0, &[1], 7, false));
        let ready = take(&mut agg);
        assert_eq!(ready.len(), 1);
        let snap = &ready[0];
        assert_eq!(snap["interval"], 0);
        // Streams of both threads, in plan order; the snapshot spans both threads' intervals.
        let ops: Vec<(u64, u64)> = snap["streams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["stream"].as_u64().unwrap(),
                    s["read"]["ops"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(ops, [(0, 5), (1, 7), (2, 5)]);
        assert_eq!(
            (snap["start_ns"].as_u64(), snap["end_ns"].as_u64()),
            (Some(0), Some(1001))
        );
        assert!(take(&mut agg).is_empty(), "published once");
    }

    #[test]
    fn a_thread_that_ended_does_not_hold_back_later_intervals() {
        let mut agg = aggregator(2, 2);
        agg.add(msg(1, 0, &[1], 1, false));
        agg.add(msg(1, 1, &[1], 1, true));
        for k in 0..4 {
            agg.add(msg(0, k, &[0], 2, false));
        }
        let intervals: Vec<u64> = take(&mut agg)
            .iter()
            .map(|s| s["interval"].as_u64().unwrap())
            .collect();
        assert_eq!(intervals, [0, 1, 2, 3]);
    }

    #[test]
    fn a_windowed_set_is_merged_over_its_window_and_counted_per_interval() {
        const S: u64 = 1_000_000_000;
        // One thread, three streams, a set with a group per stream, windows of 2 s; interval 0
        // is warm-up. Stream s does 10 * k + s reads in interval k, each at (k + 1) us, with
        // a backlog of k; stream 2 has no statistics in interval 3.
        let interval = |k: u64| {
            let streams = (0..3usize)
                .filter(|&i| !(i == 2 && k == 3))
                .map(|i| {
                    let mut s = StreamStats::new(false);
                    s.ops[0].ops = 10 * k + i as u64;
                    for _ in 0..s.ops[0].ops {
                        s.ops[0].service.record((k + 1) * 1000);
                    }
                    s.behind_ios = k;
                    (i, Box::new(s))
                })
                .collect();
            IntervalMsg {
                thread: 0,
                interval: k,
                phase: if k == 0 {
                    Phase::Warmup
                } else {
                    Phase::Measure
                },
                start_ns: k * S,
                end_ns: (k + 1) * S,
                streams,
                lateness: Default::default(),
                last: k == 5,
            }
        };
        let mut agg = aggregator(1, 3);
        agg.sets = vec![(vec![0, 1, 2], 3)];
        agg.window = Some((0, 2 * S));
        let mut frames = Vec::new();
        for k in 0..6 {
            agg.add(interval(k));
            frames.extend(agg.take_ready_frames());
        }
        let json = |t: &str| serde_json::from_str::<serde_json::Value>(t).unwrap();
        // The warm-up is handed over per interval, as before.
        assert!(frames[0].batch.is_none() && frames[0].window.is_none());
        assert_eq!(frames[0].sets[0].len(), 3);
        // Each measurement interval: per group and op kind with IOs, its count and latency sum.
        let batch = json(frames[3].batch.as_deref().unwrap());
        assert_eq!(
            batch,
            serde_json::json!([[0, "read", 30, 30 * 4000], [1, "read", 31, 31 * 4000]])
        );
        assert!(
            frames[3].sets[0].is_empty(),
            "the set itself is not handed over"
        );
        // Windows close at intervals 2 and 4; interval 5 is still being filled.
        let closed: Vec<bool> = frames.iter().map(|f| f.window.is_some()).collect();
        assert_eq!(closed, [false, false, true, false, true, false]);
        let w = json(frames[4].window.as_deref().unwrap());
        assert_eq!(
            (w["start_ns"].as_u64(), w["end_ns"].as_u64()),
            (Some(3 * S), Some(5 * S))
        );
        assert_eq!(
            (w["interval"].as_u64(), w["phase"].as_str()),
            (Some(4), Some("measure"))
        );
        let by: Vec<(u64, u64, u64, u64)> = w["streams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                let read = &g["read"];
                (
                    read["ops"].as_u64().unwrap(),
                    read["service"]["n"].as_u64().unwrap(),
                    read["service"]["sum"].as_u64().unwrap(),
                    g["behind_ios"].as_u64().unwrap(),
                )
            })
            .collect();
        // Intervals 3 and 4 summed; the backlog of the latest interval with the stream in it.
        assert_eq!(
            by,
            [
                (70, 70, 30 * 4000 + 40 * 5000, 4),
                (72, 72, 31 * 4000 + 41 * 5000, 4),
                (42, 42, 42 * 5000, 4)
            ]
        );
        let filling = json(&agg.filling.as_ref().unwrap().snapshot_json());
        assert_eq!(filling["start_ns"].as_u64(), Some(5 * S));
        assert_eq!(filling["streams"][0]["read"]["ops"].as_u64(), Some(50));
    }

    #[test]
    fn totals_fold_the_measurement_intervals_of_every_thread_and_leave_out_the_warmup() {
        let mut agg = aggregator(2, 3);
        let mut warmup = msg(0, 0, &[0, 2], 100, false);
        warmup.phase = Phase::Warmup;
        agg.add(warmup);
        agg.add(msg(1, 0, &[1], 100, false));
        agg.add(msg(0, 1, &[0, 2], 5, false));
        agg.add(msg(0, 2, &[0, 2], 6, true));
        agg.add(msg(1, 1, &[1], 7, true));
        let reads: Vec<u64> = agg.totals.streams().iter().map(|s| s.ops[0].ops).collect();
        assert_eq!(reads, [11, 107, 11]);
    }
}

#[cfg(test)]
mod start_tests {
    use super::*;

    fn null_plan(start_at_ns: Option<u64>) -> Plan {
        let start = start_at_ns.map_or("null".to_string(), |t| t.to_string());
        Plan::from_json(&format!(
            r#"{{"plan_version": {v}, "backend": "null", "threads": 1, "interval_ms": 20,
            "start_at_ns": {start}, "warmup_ms": 0, "duration_ms": 40, "poll_us": 0,
            "targets": [{{"path": "/dev/null", "offset": 0, "length": 1048576, "direct": false}}],
            "streams": [{{"name": "s", "regions": [{{"target": 0, "offset": 0, "length": 1048576}}],
              "read_pct": 100.0, "sizes": [[4096, 1.0]], "pattern": {{"kind": "random"}},
              "random_pct": 100.0, "align": 4096, "qd": 1, "arrival": {{"kind": "closed"}},
              "burst": null, "sync": {{"kind": "none"}}, "compress_pct": 0.0, "seed": 1}}]}}"#,
            v = crate::plan::PLAN_VERSION
        ))
        .unwrap()
    }

    /// The CPU lists (`Cpus_allowed_list`) of this process's engine threads.
    fn engine_thread_cpus() -> Vec<String> {
        let mut lists = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if comm.trim() != "tilemark-engine" {
                continue;
            }
            let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
            if let Some(l) = status.lines().find(|l| l.starts_with("Cpus_allowed_list:")) {
                lists.push(l["Cpus_allowed_list:".len()..].trim().to_string());
            }
        }
        lists
    }

    #[test]
    fn engine_threads_run_on_the_plans_cpus_in_turn() {
        let allowed = crate::affinity::allowed_cpus().unwrap();
        let (first, last) = (allowed[0], *allowed.last().unwrap());
        let mut plan = null_plan(None);
        plan.threads = 3;
        plan.duration_ms = Some(400);
        plan.streams = (0..3)
            .map(|i| {
                let mut s = plan.streams[0].clone();
                s.name = format!("s{i}");
                s
            })
            .collect();
        plan.cpus = vec![last, first];
        let mut engine = Engine::start(plan).unwrap();
        std::thread::sleep(Duration::from_millis(150));
        // Other tests' engines run in this process too, unpinned: count the pinned ones.
        let lists = engine_thread_cpus();
        let on = |cpu: usize| lists.iter().filter(|l| **l == cpu.to_string()).count();
        if first != last {
            assert_eq!(
                (on(last), on(first)),
                (2, 1),
                "threads 0 and 2 on {last}, 1 on {first}: {lists:?}"
            );
        } else {
            assert!(on(first) >= 3, "{lists:?}");
        }
        while !engine.wait(Duration::from_millis(100)) {}
        engine.result_json().unwrap();
    }

    fn started_at(engine: &mut Engine) -> u64 {
        let result: serde_json::Value =
            serde_json::from_str(&engine.result_json().unwrap()).unwrap();
        result["started_at_ns"].as_u64().unwrap()
    }

    #[test]
    fn an_absolute_start_waits_for_the_wall_clock_and_records_when_it_began() {
        let at = realtime_ns() + 150_000_000;
        let mut engine = Engine::start(null_plan(Some(at))).unwrap();
        assert!(
            realtime_ns() < at,
            "start() returns at once; the starter thread does the waiting"
        );
        assert!(
            !engine.wait(Duration::from_millis(50)),
            "nothing runs before the start"
        );
        let started = started_at(&mut engine);
        assert!(started >= at, "started {} ns early", at - started);
        assert!(
            started - at < 50_000_000,
            "started {} ns late",
            started - at
        );
    }

    #[test]
    fn a_stop_before_the_start_ends_the_run_without_waiting() {
        let at = realtime_ns() + 3_600_000_000_000;
        let mut engine = Engine::start(null_plan(Some(at))).unwrap();
        engine.stop();
        assert!(
            engine.wait(Duration::from_secs(5)),
            "the run ends soon after stop()"
        );
        assert!(started_at(&mut engine) < at);
    }

    #[test]
    fn without_a_start_instant_the_run_starts_now() {
        let before = realtime_ns();
        let mut engine = Engine::start(null_plan(None)).unwrap();
        let started = started_at(&mut engine);
        assert!(started >= before && started - before < 1_000_000_000);
    }

    #[test]
    fn the_aggregation_thread_builds_every_frame_once_frames_are_read() {
        let v = crate::plan::PLAN_VERSION;
        let stream = |i: usize| {
            format!(
                r#"{{"name": "s{i}", "regions": [{{"target": 0, "offset": 0, "length": 1048576}}],
                "read_pct": 100.0, "sizes": [[4096, 1.0]], "pattern": {{"kind": "random"}},
                "random_pct": 100.0, "align": 4096, "qd": 1, "arrival": {{"kind": "closed"}},
                "burst": null, "sync": {{"kind": "none"}}, "compress_pct": 0.0, "seed": {i}}}"#
            )
        };
        let streams: Vec<String> = (0..3).map(stream).collect();
        let plan = Plan::from_json(&format!(
            r#"{{"plan_version": {v}, "backend": "null", "threads": 2, "interval_ms": 20,
            "warmup_ms": 20, "duration_ms": 100, "poll_us": 0,
            "targets": [{{"path": "/dev/null", "offset": 0, "length": 1048576, "direct": false}}],
            "streams": [{}]}}"#,
            streams.join(",")
        ))
        .unwrap();
        let mut engine = Engine::start(plan).unwrap();
        let mut frames = engine.poll_frames();
        let result: serde_json::Value =
            serde_json::from_str(&engine.result_json().unwrap()).unwrap();
        let built = engine.aggregator.lock().unwrap().built.len();
        frames.extend(engine.poll_frames());
        assert!(built > 0, "no frame was built ahead of the poll");
        assert!(frames
            .iter()
            .all(|f| f.encoded.is_some() || f.interval == 0));
        let intervals: Vec<u64> = frames.iter().map(|f| f.interval).collect();
        let expected: Vec<u64> = (0..intervals.len() as u64).collect();
        assert_eq!(intervals, expected, "every interval once, in order");
        // The measured rows add up to the result's totals, stream by stream.
        let mut measured = [0i64; 3];
        for f in frames.iter().filter(|f| f.phase == "measure") {
            for (i, ops) in f.rows.stream.iter().zip(&f.rows.ops) {
                measured[*i as usize] += ops;
            }
        }
        for (i, m) in measured.iter().enumerate() {
            let total = result["streams"][i]["read"]["ops"].as_i64().unwrap();
            assert!(total > 0);
            assert_eq!(*m, total, "stream {i}");
        }
    }

    #[test]
    fn a_plan_without_streams_keeps_time_until_its_end() {
        let v = crate::plan::PLAN_VERSION;
        let doc = |duration: &str| {
            format!(
                r#"{{"plan_version": {v}, "backend": "null", "threads": 4, "interval_ms": 50,
                "warmup_ms": 50, "duration_ms": {duration}, "poll_us": 0, "targets": [],
                "streams": []}}"#
            )
        };
        let err = Plan::from_json(&doc("null")).and_then(Engine::start).err();
        assert!(err.is_some_and(|e| e.to_string().contains("needs a duration")));
        let begun = monotonic_ns();
        let mut engine = Engine::start(Plan::from_json(&doc("200")).unwrap()).unwrap();
        assert!(engine.wait(Duration::from_secs(5)));
        let took = monotonic_ns() - begun;
        assert!(
            took >= 250_000_000,
            "ended after {took} ns, before warm-up + duration"
        );
        let snaps: serde_json::Value = serde_json::from_str(&engine.poll_json()).unwrap();
        let snaps = snaps.as_array().unwrap();
        // One warm-up interval and four measured ones, each with no streams.
        assert_eq!(snaps.len(), 5, "{snaps:?}");
        assert!(snaps
            .iter()
            .all(|s| s["streams"].as_array().unwrap().is_empty()));
        let result: serde_json::Value =
            serde_json::from_str(&engine.result_json().unwrap()).unwrap();
        assert_eq!(result["complete"], true);
        let measured = result["measure_end_ns"].as_u64().unwrap()
            - result["measure_start_ns"].as_u64().unwrap();
        assert!((190_000_000..400_000_000).contains(&measured), "{measured}");
    }
}
