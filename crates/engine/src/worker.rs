//! One engine thread: an event loop serving many streams over one backend.
//!
//! Closed-loop streams refill their queue as completions arrive; open-loop streams and burst
//! delays wake from a timer heap. IOs are attributed to the interval in which they complete.
//!
//! The clock is read once per loop turn, right after the backend returns: that reading is the
//! completion time of everything just reaped and the submission time of everything issued in
//! the following turn, which reaches the device with the next backend call a few hundred
//! nanoseconds later. A turn is one system call on io_uring: it submits, reaps, and sleeps
//! only if nothing has completed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;

use crate::backend::{yield_cpu, Backend, Completion, IoReq, Op};
use crate::buf::AlignedBuf;
use crate::clock::RunClock;
use crate::error::{EngineError, Result};
use crate::flow::Admit;
use crate::stats::{Histogram, OpKind, OpStats, StreamStats, LATE_NS};
use crate::stop::{StopReason, StopSignal};
use crate::stream::{BurstState, StreamState};
use crate::verify::{Findings, TargetVerify};
use verify::{unix_now_s, IoCheck};
use wake::WakeLateness;

/// Longest single wait, so a stop request is noticed promptly.
pub(crate) const MAX_WAIT_NS: u64 = 50_000_000;
/// Longest wait while a stream waits for streams of other threads to end (fio looks every
/// 100 ms: backend.c run_threads).
pub(crate) const GATE_POLL_NS: u64 = 1_000_000;
/// Set in a timer's stream index when the timer ends a flow_sleep (flow.rs Admit::Sleep): the
/// thread then sleeps until it however close it is, as fio's job sleeps in usleep, instead of
/// staying awake as for an open-loop issue time (wake.rs). Stream indices stay far below it.
const SLEEP_TIMER: u32 = 1 << 31;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Warmup,
    Measure,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Warmup => "warmup",
            Phase::Measure => "measure",
        }
    }

    fn of(clock: &RunClock, start: u64) -> Phase {
        if start < clock.warmup_ns {
            Phase::Warmup
        } else {
            Phase::Measure
        }
    }
}

/// What a thread reports at every interval boundary.
pub struct IntervalMsg {
    pub thread: usize,
    pub interval: u64,
    pub phase: Phase,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Boxed, so that gathering, ordering and handing back 10,000 streams' statistics (1.5 KiB
    /// each) moves pointers, not the statistics (issue 25: a sixth of `poll_frames`).
    pub streams: Vec<(usize, Box<StreamStats>)>,
    /// Issue lateness (submission minus intended time) of every open-loop IO the thread
    /// issued in the interval: one histogram per thread, not per stream (issue 25).
    pub lateness: Histogram,
    /// The thread's last interval.
    pub last: bool,
}

/// Measurement-phase totals per stream, folded from the interval messages by whoever receives
/// them (the engine's aggregator), not by the engine threads: with 500 streams on a thread,
/// merging every stream's histograms into its totals at each interval boundary held the thread
/// for 1.5-8 ms, and the open-loop IOs due meanwhile went out late (bench/README.md).
#[derive(Debug)]
pub struct Totals {
    streams: Vec<StreamStats>,
}

impl Totals {
    /// Empty totals, one per plan stream, shaped as that stream's statistics.
    pub fn new(empty: Vec<StreamStats>) -> Self {
        Totals { streams: empty }
    }

    /// Fold an interval in, if it belongs to the measurement phase.
    pub fn add(&mut self, msg: &IntervalMsg) {
        if msg.phase == Phase::Measure {
            for (i, stats) in &msg.streams {
                self.streams[*i].merge(stats);
            }
        }
    }

    pub fn streams(&self) -> &[StreamStats] {
        &self.streams
    }
}

struct Slot {
    stream: u32,
    /// Region of the stream the IO went to (its target): completions and hung IOs need it.
    region: u32,
    /// With verification: the blocks the IO covers and what they held at issue (verify.rs).
    check: Option<Box<IoCheck>>,
    kind: OpKind,
    buf: Option<AlignedBuf>,
    intended: u64,
    submitted: u64,
    /// Absolute offset and length, to name an IO that hangs.
    offset: u64,
    len: u32,
    /// Issued at its stream's share priority (plan.rs `ioprio_share`): counted apart too.
    other_prio: bool,
    /// The write or sync of a group-commit round (group.rs): counted per commit.
    group: bool,
}

pub struct ThreadResult {
    /// What the reads of verified targets found.
    pub findings: Findings,
    pub end_ns: u64,
    /// Why the run stopped early, as this thread saw it when it ended (None: planned end).
    pub stop_reason: Option<StopReason>,
    pub hung: Vec<HungIo>,
    /// How long its backend ran with spinning allowed and batched submissions (uring).
    pub modes: Option<crate::backend::judge::ModeShares>,
    /// Timers still set when it ended (tests: a stream has one at a time, not one per IO).
    #[cfg(test)]
    pub timers_left: usize,
}

pub struct Worker {
    id: usize,
    streams: Vec<StreamState>,
    /// Issue lateness of the open-loop IOs of the current interval (IntervalMsg::lateness).
    lateness: Histogram,
    backend: Box<dyn Backend>,
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    timers: BinaryHeap<Reverse<(u64, u32)>>,
    ready: Vec<u32>,
    /// Reaped by the last backend call.
    completions: Vec<Completion>,
    /// Released (buffers and queue room given back), statistics not yet recorded; their
    /// slots stay taken until then.
    released: Vec<Completion>,
    inflight: usize,
    /// Requests queued since the last backend call.
    unsubmitted: usize,
    /// How late timed wake-ups come: how early to ask for one, and when not to sleep (wake.rs).
    wake: WakeLateness,
    limits: Limits,
    /// With an IO timeout: when to look for hung IOs next.
    next_hung_check: u64,
    /// Scratch for in-flight scans: which slots are free.
    free_mask: Vec<bool>,
    /// Verified targets by plan index (empty when nothing is verified).
    verify: Vec<Option<Arc<TargetVerify>>>,
    findings: Findings,
    /// Seconds since 1970 at run time 0, for the time written into verified blocks.
    unix_zero_s: u64,
    /// Streams that gave back write buffers whose data must be prepared again.
    to_prepare: Vec<u32>,
    /// Checks of completed IOs, kept for reuse (boxed: they move in and out of slots).
    #[allow(clippy::vec_box)]
    spare_checks: Vec<Box<IoCheck>>,
    interval: u64,
    interval_start: u64,
    boundary: u64,
    /// The run's stop signal: stream stops asked from outside, and when streams start and end.
    signals: Arc<StopSignal>,
    /// Its `events` count last looked at.
    events_seen: u64,
    /// Streams waiting for others to end (plan.rs `after`).
    gated: Vec<u32>,
    /// A stream ended in the last record_released.
    stream_ended: bool,
    /// Interval statistics given back by the receiver once merged (`with_recycling`).
    recycled: Option<Receiver<Recycled>>,
    /// The batch given back that the streams' next fresh statistics come from: entry k is
    /// stream k's (the receiver gives a thread's streams back in plan order, this thread's
    /// order), taken out as each stream is handed over.
    spare: Vec<Option<(usize, Box<StreamStats>)>>,
    /// The interval being handed over, stream by stream (`begin_handover`).
    handover: Option<Handover>,
}

/// A closed interval whose statistics the streams hand over one by one, each at its next
/// event (an IO issued or completed, a timer, a stop) or in the slices the loop sweeps between
/// IOs, rather than all at once at the boundary: with 5,000 streams on a thread, closing them
/// together held the thread 10-15 ms at every boundary, and the open-loop IOs due meanwhile
/// went out that late (bench/streams.py, 10,000 streams: issue lateness p99 of 2-3 ms). A
/// stream's counters up to its handover are the interval's, since nothing of it happened
/// between the boundary and its handover; its levels (IOs in flight, the oldest one's age,
/// IOs due and not issued) are taken as at the boundary.
struct Handover {
    interval: u64,
    phase: Phase,
    start_ns: u64,
    end_ns: u64,
    last: bool,
    /// Age at the boundary of each stream's oldest IO in flight.
    oldest: Vec<u64>,
    lateness: Histogram,
    streams: Vec<(usize, Box<StreamStats>)>,
    /// Streams before this one have been handed over or looked at by the sweep.
    next: usize,
}

/// How long one sweep of the handover may hold the thread before it looks at its timers and
/// completions again.
const HANDOVER_SLICE_NS: u64 = 5_000;

/// What a worker's statistics of one interval are, sent to the receiver and, once merged,
/// sent back to be reused (`Worker::with_recycling`).
pub type Recycled = Vec<(usize, Box<StreamStats>)>;

impl Worker {
    pub fn new(id: usize, streams: Vec<StreamState>, backend: Box<dyn Backend>) -> Self {
        Worker {
            lateness: Histogram::new(),
            id,
            streams,
            backend,
            slots: Vec::new(),
            free_slots: Vec::new(),
            timers: BinaryHeap::new(),
            ready: Vec::new(),
            completions: Vec::with_capacity(256),
            released: Vec::with_capacity(256),
            inflight: 0,
            unsubmitted: 0,
            wake: WakeLateness::default(),
            limits: Limits::default(),
            next_hung_check: 0,
            free_mask: Vec::new(),
            verify: Vec::new(),
            findings: Findings::default(),
            unix_zero_s: 0,
            to_prepare: Vec::new(),
            spare_checks: Vec::new(),
            interval: 0,
            interval_start: 0,
            boundary: 0,
            signals: Arc::default(),
            events_seen: 0,
            gated: Vec::new(),
            stream_ended: false,
            recycled: None,
            spare: Vec::new(),
            handover: None,
        }
    }

    /// Reuse the interval statistics the receiver gives back on `rx` (once merged) for the
    /// same streams' later intervals. A fresh interval's statistics are otherwise allocated
    /// at every boundary, and grown IO by IO, by this thread, and freed by the receiver's: with
    /// thousands of streams that is thousands of allocations per boundary, and every free on
    /// the other thread takes this thread's allocator arena lock, which this thread then
    /// waits for in the IO path (bench/streams.py: issue lateness of milliseconds).
    pub fn with_recycling(mut self, rx: Receiver<Recycled>) -> Self {
        self.recycled = Some(rx);
        self
    }

    /// Stop the run on too many errors or a hung IO.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Verify the targets that have a `TargetVerify` (indexed by plan target).
    pub fn with_verify(mut self, verify: Vec<Option<Arc<TargetVerify>>>) -> Self {
        self.verify = verify;
        self
    }

    pub fn run(mut self, clock: RunClock, tx: Sender<IntervalMsg>) -> Result<ThreadResult> {
        // Open-loop schedules need timers that fire when asked, not up to 50 us late (the
        // default timer slack), or every intended issue time turns into queueing delay.
        // SAFETY: prctl with PR_SET_TIMERSLACK only changes this thread's timer slack.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        // Sleep until the common start time (run time 0), in short steps so stop() still works.
        while !clock.is_manual() && crate::clock::monotonic_ns() < clock.origin_ns {
            if clock.stopping() {
                break;
            }
            let left = clock.origin_ns.saturating_sub(crate::clock::monotonic_ns());
            std::thread::sleep(std::time::Duration::from_nanos(left.min(MAX_WAIT_NS)));
        }
        self.boundary = clock.boundary_after(0);
        self.unix_zero_s = unix_now_s().saturating_sub(clock.now() / 1_000_000_000);
        self.signals = clock.stop.clone();
        // A stream stopped or ended on another thread wakes this one from its sleep at once
        // (stop.rs); without a bell it is seen within MAX_WAIT_NS.
        if let Some(bell) = self
            .backend
            .bell()
            .map_err(|e| EngineError::io("making the engine thread's doorbell", e))?
        {
            self.signals.add_bell(bell);
        }
        for i in 0..self.streams.len() {
            if self.streams[i].gate.is_some() {
                self.gated.push(i as u32);
                continue;
            }
            self.start_stream(i);
        }
        let outcome = self.event_loop(&clock, &tx);
        // Whatever happened, reap what is in flight before buffers can be freed.
        let hung = self.drain(&clock, &tx);
        let end_ns = clock.now().max(self.interval_start);
        self.emit(&clock, &tx, end_ns, true);
        for st in &self.streams {
            if st.gate.is_none() && !st.ended {
                // Still running when the run ended (its duration, or a stop).
                self.signals.mark_ended(st.index, end_ns);
            }
        }
        outcome?;
        Ok(ThreadResult {
            findings: std::mem::take(&mut self.findings),
            end_ns,
            stop_reason: clock.stop.reason(),
            hung: hung?,
            modes: self.backend.mode_shares(),
            #[cfg(test)]
            timers_left: self.timers.len(),
        })
    }

    /// Schedule stream `i`'s first IO at its phase's start (and a look at its stop time, when
    /// it has one, to record its end).
    fn start_stream(&mut self, i: usize) {
        let st = &self.streams[i];
        self.signals.mark_started(st.index, st.start_ns);
        if st.stop_ns != u64::MAX && st.replay.is_none() {
            self.timers.push(Reverse((st.stop_ns, i as u32)));
        }
        {
            if st.replay.is_some() && st.is_open_loop() {
                // A timed replay looks at its list when its phase starts (replay.rs).
                self.timers.push(Reverse((st.start_ns, i as u32)));
            } else if st.is_open_loop() {
                // An open-loop schedule starts at the stream's start (next_due).
                let due = st.schedule.as_ref().expect("open loop").next_due();
                self.timers.push(Reverse((due, i as u32)));
            } else if st.start_ns > 0 {
                // A closed loop fills its queue when its phase starts.
                self.timers.push(Reverse((st.start_ns, i as u32)));
            } else {
                self.mark_ready(i);
            }
        }
    }

    /// Streams ended or were asked to stop (on any thread): stop those of this thread that
    /// were asked to, and start those whose streams to wait for have all ended.
    #[cold]
    #[inline(never)]
    fn on_events(&mut self, now: u64) {
        // Stopping a stream here may end it, which may open a gate: until nothing changes.
        while self.events_seen != self.signals.events() || self.stream_ended {
            self.stream_ended = false;
            self.events_seen = self.signals.events();
            self.look_at_events(now);
        }
    }

    fn look_at_events(&mut self, now: u64) {
        for i in 0..self.streams.len() {
            let st = &self.streams[i];
            if !st.stopped && self.signals.stop_requested(st.index) {
                self.stop_stream(i, now);
            }
        }
        let mut k = 0;
        while k < self.gated.len() {
            let s = self.gated[k] as usize;
            let gate = self.streams[s].gate.as_ref().expect("a waiting stream");
            if gate.after.iter().all(|&j| self.signals.ended(j).is_some()) {
                self.gated.swap_remove(k);
                self.streams[s].open_gate(now);
                self.start_stream(s);
            } else {
                k += 1;
            }
        }
    }

    /// Stop stream `s` at `now` (asked from outside): it issues nothing more, and has ended
    /// once its IOs in flight have completed. A stream still waiting for others never starts.
    fn stop_stream(&mut self, s: usize, now: u64) {
        self.hand_over(s);
        let st = &mut self.streams[s];
        st.stopped = true;
        if st.gate.is_some() {
            self.gated.retain(|&g| g as usize != s);
            st.gate = None;
            st.start_ns = 0;
            st.stop_ns = 0;
            st.ended = true;
            self.signals.mark_ended(st.index, now);
            return;
        }
        st.stop_ns = st.stop_ns.min(now);
        if st.settled() && !st.ended {
            end_stream(st, &self.signals, now);
        }
    }

    fn finished(&self, clock: &RunClock, now: u64) -> bool {
        clock.stopping()
            || clock.end_ns.is_some_and(|e| now >= e)
            || (self.inflight == 0
                // A thread without streams (a plan of none) keeps time until the end.
                && !self.streams.is_empty()
                && self.streams.iter().all(|s| {
                    // A run without an end lasts until every stream is done: its byte limit
                    // used up, or (phases) its stop time passed; any run, until every stream
                    // is done or stopped from outside.
                    let done =
                        s.exhausted() || s.stopped || (clock.end_ns.is_none() && now >= s.stop_ns);
                    done && s.settled()
                }))
    }

    /// The next time the loop must run even if nothing completes, and whether it is an
    /// open-loop issue time (which must not be missed by a late wake-up).
    fn deadline(&self, clock: &RunClock, now: u64) -> (u64, bool) {
        let mut deadline = self.boundary.min(now + MAX_WAIT_NS);
        if let Some(e) = clock.end_ns {
            deadline = deadline.min(e);
        }
        if self.limits.io_timeout_ns.is_some() {
            deadline = deadline.min(self.next_hung_check.max(now + 1));
        }
        if !self.gated.is_empty() {
            deadline = deadline.min(now + GATE_POLL_NS);
        }
        match self.timers.peek() {
            // A flow_sleep is a sleep (flow.rs Admit::Sleep), not an issue time to meet.
            Some(&Reverse((due, s))) if due <= deadline => (due, s & SLEEP_TIMER == 0),
            _ => (deadline, false),
        }
    }

    fn event_loop(&mut self, clock: &RunClock, tx: &Sender<IntervalMsg>) -> Result<()> {
        let mut now = clock.now();
        loop {
            // Completions reaped by the last backend call belong to the interval of `now`.
            self.emit_due(clock, tx, now);
            self.release_completions(now);
            if self.signals.events() != self.events_seen {
                // A stream ended or a stop was asked for (any thread), before issuing more.
                self.on_events(now);
            }
            if self.finished(clock, now) {
                self.record_released(clock, now);
                return Ok(());
            }
            while let Some(&Reverse((due, s))) = self.timers.peek() {
                if due > now {
                    break;
                }
                self.timers.pop();
                let st = &mut self.streams[(s & !SLEEP_TIMER) as usize];
                if st.timer_due == due {
                    st.timer_due = u64::MAX;
                }
                self.on_timer((s & !SLEEP_TIMER) as usize, now)?;
            }
            while let Some(s) = self.ready.pop() {
                self.streams[s as usize].queued_ready = false;
                self.fill_closed(s as usize, now)?;
            }
            // Hand the new IOs to the device first; the statistics of the completions that
            // made room for them are recorded while the device works. This is also fio's
            // order (submit, account, then reap): completions that arrive meanwhile are taken
            // without sleeping.
            if self.unsubmitted > 0 {
                self.submit(clock, None)?;
            }
            self.record_released(clock, now);
            if self.stream_ended {
                // A stream of this thread just ended: start what waited for it at `now`,
                // before any wait (its timer is due now, so the wait does not sleep).
                self.on_events(now);
            }
            if self.limits.io_timeout_ns.is_some() && now >= self.next_hung_check {
                self.check_hung(clock, now);
            }
            if self.handover.is_some() {
                // A closed interval still being handed over: a slice of it, then round the
                // loop again without sleeping, reaping what has completed meanwhile.
                self.sweep_handover(clock, tx);
                if self.handover.is_some() && self.completions.is_empty() {
                    if self.backend.completions_ready() {
                        self.submit(clock, None)?;
                    }
                    now = clock.now();
                    continue;
                }
            }
            if self.completions.is_empty() && !clock.stopping() {
                self.wait(clock, now)?;
            }
            now = clock.now();
        }
    }

    /// Nothing has completed: sleep until something does or the next deadline, waking early
    /// enough for an open-loop issue time to be met, or stay awake when the issue time is too
    /// close for a sleep to pay (wake.rs).
    fn wait(&mut self, clock: &RunClock, now: u64) -> Result<()> {
        let (deadline, timed) = self.deadline(clock, now);
        let (early, min_sleep) = if timed {
            (self.wake.early_ns(), self.wake.min_sleep_ns())
        } else {
            (0, 0)
        };
        if deadline > now + early + min_sleep {
            let wake_at = deadline - early;
            self.submit(clock, Some(wake_at))?;
            let woke = clock.now();
            if self.completions.is_empty() && woke >= wake_at {
                // Woken by the deadline, not by a completion: how late was it?
                self.wake.observe(wake_at, woke);
            }
        } else if self.backend.completions_ready() {
            // An issue time is closer than a wake-up from sleep would reliably be: stay awake
            // (the loop goes round, reading the clock) and only reap what has completed. No
            // PAUSE instruction: in a VM a pause loop makes the hypervisor deschedule the vCPU.
            self.submit(clock, None)?;
        } else {
            // Awake with nothing to reap: give the CPU to whatever else is ready to run on it,
            // such as the device's completion work (it returns at once if nothing is). Without
            // it, with that work on this CPU, an IO waited up to a scheduler slice: open-loop
            // service p99 of 1.4-2.5 ms against 45 us with it (bench/README.md).
            yield_cpu();
        }
        Ok(())
    }

    fn submit(&mut self, clock: &RunClock, wait_until: Option<u64>) -> Result<()> {
        self.unsubmitted = 0;
        self.backend
            .submit(&mut self.completions, wait_until, clock)
            .map_err(|e| EngineError::io("submitting IO", e))
    }

    fn mark_ready(&mut self, s: usize) {
        let st = &mut self.streams[s];
        if !st.queued_ready {
            st.queued_ready = true;
            self.ready.push(s as u32);
        }
    }

    /// Closed loop: keep the queue full (inside the stream's phase).
    fn fill_closed(&mut self, s: usize, now: u64) -> Result<()> {
        if !self.streams[s].active(now) {
            return Ok(());
        }
        if self.streams[s].replay.is_some() {
            return self.replay_fill(s, now);
        }
        if self.streams[s].pending_fsyncs > 0 {
            self.issue_fsyncs(s, now)?;
        }
        if self.streams[s].pacing.is_some() {
            return self.fill_paced(s, now);
        }
        while self.streams[s].can_issue() {
            self.issue_data(s, now, now)?;
        }
        Ok(())
    }

    /// fill_closed of a stream with pacing: each IO as its flow admits it (flow.rs). Out of
    /// line, so the loop of the others stays as it was.
    #[inline(never)]
    fn fill_paced(&mut self, s: usize, now: u64) -> Result<()> {
        while self.streams[s].can_issue() {
            if !self.flow_admits(s, now) {
                break;
            }
            self.issue_data(s, now, now)?;
        }
        Ok(())
    }

    /// May stream `s` (in a flow group) issue an IO now? When it may not, it looks again when
    /// an IO of it completes or at the timer set here (flow.rs).
    fn flow_admits(&mut self, s: usize, now: u64) -> bool {
        let st = &mut self.streams[s];
        let inflight = st.inflight;
        let Some(flow) = st.pacing.as_mut().and_then(|p| p.flow.as_mut()) else {
            return true;
        };
        match flow.admit(now, inflight) {
            Admit::Go => true,
            Admit::Wait(again) => {
                if let Some(t) = again {
                    self.timers.push(Reverse((t, s as u32)));
                }
                false
            }
            Admit::Sleep(t) => {
                self.timers.push(Reverse((t, s as u32 | SLEEP_TIMER)));
                false
            }
        }
    }

    fn on_timer(&mut self, s: usize, now: u64) -> Result<()> {
        self.hand_over(s);
        let st = &mut self.streams[s];
        if now >= st.stop_ns && !st.ended && st.settled() {
            // Its stop time came with nothing in flight (open loop, or the timer set at it).
            end_stream(st, &self.signals, now);
            self.stream_ended = true;
        }
        let st = &mut self.streams[s];
        if st.burst_state == BurstState::Sleeping {
            st.wake_from_burst();
        }
        if !st.is_open_loop() {
            self.mark_ready(s);
            return Ok(());
        }
        if st.replay.is_some() {
            return self.replay_timed(s, now);
        }
        self.issue_fsyncs(s, now)?;
        loop {
            let st = &mut self.streams[s];
            let sched = st.schedule.as_ref().expect("open loop");
            let due = sched.next_due();
            if due > now
                || due >= st.stop_ns
                || st.exhausted()
                || st.burst_state != BurstState::Active
            {
                break;
            }
            if st.group.is_some() {
                // A commit: it waits for the next round (group.rs), never blocked.
                let StreamState { schedule, rng, .. } = st;
                let intended = schedule.as_mut().expect("open loop").take(rng);
                self.group_due(s, now, intended);
                continue;
            }
            if st.inflight >= st.qd {
                // Due but at the in-flight cap: the IO waits (its response time keeps growing)
                // and is issued when a slot frees. Never dropped.
                st.blocked = true;
                return Ok(());
            }
            let intended = {
                let st = &mut self.streams[s];
                let StreamState { schedule, rng, .. } = st;
                schedule.as_mut().expect("open loop").take(rng)
            };
            self.issue_data(s, now, intended)?;
        }
        if self.streams[s].group.is_some() {
            self.group_round(s, now)?;
        }
        let st = &mut self.streams[s];
        let due = st.schedule.as_ref().expect("open loop").next_due();
        // Once per issue time: a completion that wakes the stream early (a sync owed, a
        // blocked IO, a group round) must not add a second timer for it, or every write of a
        // log stream would add one for good.
        if !st.exhausted()
            && st.burst_state == BurstState::Active
            && due < st.stop_ns
            && due != st.timer_due
        {
            st.timer_due = due;
            self.timers.push(Reverse((due, s as u32)));
        }
        Ok(())
    }

    fn take_slot(&mut self) -> u32 {
        self.free_slots.pop().unwrap_or_else(|| {
            self.slots.push(Slot {
                stream: 0,
                region: 0,
                check: None,
                kind: OpKind::Read,
                buf: None,
                intended: 0,
                submitted: 0,
                offset: 0,
                len: 0,
                other_prio: false,
                group: false,
            });
            (self.slots.len() - 1) as u32
        })
    }

    #[inline(always)]
    fn issue_data(&mut self, s: usize, now: u64, intended: u64) -> Result<()> {
        self.hand_over(s);
        let st = &mut self.streams[s];
        let io = st.next_io();
        if let Some(r) = st.invalidate_due.take() {
            // fio drops the cache when it picks the offset that starts a new pass, on the
            // job's thread, before it issues that IO (io_u.c loop_cache_invalidate).
            st.drop_region_cache(r);
        }
        let st = &mut self.streams[s];
        let mut buf = st.take_buf(io.kind, io.len);
        let target = st.regions[io.region as usize].target as usize;
        let check = match self.verify.get(target) {
            Some(Some(_)) => {
                let dsync = io.kind == OpKind::Write && st.dsync;
                let stream = st.index;
                self.verify_issue(
                    target, &mut buf, io.kind, io.offset, io.len, stream, dsync, now,
                )
            }
            _ => None,
        };
        let st = &mut self.streams[s];
        let req = IoReq {
            user_data: 0,
            file: io.file,
            op: if io.kind == OpKind::Read {
                Op::Read
            } else if st.writeback {
                Op::WriteUncached
            } else {
                Op::Write
            },
            buf: buf.as_mut_ptr(),
            len: io.len,
            offset: io.offset,
            ioprio: io.ioprio,
        };
        if st.is_open_loop() {
            let lag = now.saturating_sub(intended);
            st.interval.lag_max_ns = st.interval.lag_max_ns.max(lag);
            if lag > LATE_NS {
                st.interval.ios_issued_late += 1;
            }
            self.lateness.record(lag);
        }
        let other_prio = io.ioprio != st.ioprio();
        let slot = self.queue_io(s, io.region, io.kind, Some(buf), req, now, intended)?;
        if check.is_some() {
            self.slots[slot as usize].check = check;
        }
        if other_prio {
            self.slots[slot as usize].other_prio = true;
        }
        Ok(())
    }

    fn issue_fsyncs(&mut self, s: usize, now: u64) -> Result<()> {
        self.hand_over(s);
        while self.streams[s].pending_fsyncs > 0 {
            let st = &mut self.streams[s];
            st.pending_fsyncs -= 1;
            let region = st.fsync_region;
            let req = IoReq {
                user_data: 0,
                file: st.regions[region as usize].file,
                op: if st.fsync_data {
                    Op::Fdatasync
                } else {
                    Op::Fsync
                },
                buf: std::ptr::null_mut(),
                len: 0,
                offset: 0,
                // fio issues syncs without a priority (engines/io_uring.c fio_ioring_prep).
                ioprio: 0,
            };
            let slot = self.queue_io(s, region, OpKind::Sync, None, req, now, now)?;
            if self.streams[s].group.is_some() {
                self.slots[slot as usize].group = true;
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn queue_io(
        &mut self,
        s: usize,
        region: u32,
        kind: OpKind,
        buf: Option<AlignedBuf>,
        mut req: IoReq,
        now: u64,
        intended: u64,
    ) -> Result<u32> {
        let slot_id = self.take_slot();
        req.user_data = slot_id as u64;
        let slot = &mut self.slots[slot_id as usize];
        slot.stream = s as u32;
        slot.region = region;
        slot.kind = kind;
        slot.buf = buf;
        slot.intended = intended;
        slot.submitted = now;
        slot.offset = req.offset;
        slot.len = req.len;
        slot.other_prio = false;
        slot.group = false;
        self.backend
            .queue(req)
            .map_err(|e| EngineError::io("queueing IO", e))?;
        self.streams[s].inflight += 1;
        self.inflight += 1;
        self.unsubmitted += 1;
        Ok(slot_id)
    }

    /// Close every interval that ended before `now`. The interval that reaches the planned end
    /// stays open, so IOs drained after the end land in it rather than in a sliver of their own.
    fn emit_due(&mut self, clock: &RunClock, tx: &Sender<IntervalMsg>, now: u64) {
        while now >= self.boundary && clock.end_ns.is_none_or(|e| self.boundary < e) {
            let b = self.boundary;
            self.begin_handover(clock, tx, b, false);
        }
    }

    /// First pass over the completions just reaped, completed at `now`: give back their
    /// buffers and queue room, so streams can issue again in this loop turn (closed loop via
    /// `ready`, a blocked open-loop stream via an immediate timer). Their statistics are
    /// recorded by `record_released` after the new IOs are submitted.
    fn release_completions(&mut self, now: u64) {
        if self.completions.is_empty() {
            return;
        }
        for i in 0..self.completions.len() {
            let c = self.completions[i];
            // Before anything of the interval of `now` happens to the stream.
            self.hand_over(self.slots[c.user_data as usize].stream as usize);
            let slot = &mut self.slots[c.user_data as usize];
            let s = slot.stream as usize;
            let kind = slot.kind;
            let region = slot.region;
            // A read still to be judged keeps its buffer until record_released.
            let keep = kind == OpKind::Read && slot.check.is_some();
            let buf = if keep { None } else { slot.buf.take() };
            let used = slot.len;
            self.inflight -= 1;
            let st = &mut self.streams[s];
            st.inflight -= 1;
            if let Some(b) = buf {
                if kind == OpKind::Write && !st.has_written_bufs() {
                    self.to_prepare.push(s as u32);
                }
                st.return_buf(kind, b, used);
            }
            if kind == OpKind::Write && c.result >= 0 {
                st.on_write_done(region);
            }
            if slot_group(&self.slots, c.user_data) {
                self.group_released(s, kind, c.result);
            }
            let st = &mut self.streams[s];
            if let Some(replay) = st.replay.as_mut() {
                // Afap issues a record once as many IOs have completed as had when it was
                // recorded, failed ones included (they completed, as far as order goes).
                replay.completed += 1;
            }
            if let Some(delay) = st.burst_drained() {
                self.timers.push(Reverse((now + delay, s as u32)));
            } else if st.is_open_loop() {
                if st.blocked
                    || st.pending_fsyncs > 0
                    || st.group.as_ref().is_some_and(|g| g.ready())
                {
                    st.blocked = false;
                    self.timers.push(Reverse((now, s as u32)));
                }
            } else {
                self.mark_ready(s);
            }
        }
        debug_assert!(self.released.is_empty());
        std::mem::swap(&mut self.completions, &mut self.released);
    }

    /// Second pass: count and time the released completions (in the interval of `now`, their
    /// completion time), then free their slots.
    fn record_released(&mut self, clock: &RunClock, now: u64) {
        if self.released.is_empty() {
            return;
        }
        let mut errors = 0;
        if !self.verify.is_empty() {
            errors += self.check_released(now);
        }
        for i in 0..self.released.len() {
            let c = self.released[i];
            let slot = &self.slots[c.user_data as usize];
            let kind = slot.kind;
            errors += (c.result < 0) as u64;
            if slot.group {
                let stream = slot.stream as usize;
                self.record_group(c.user_data as u32, c.result, now);
                self.free_slots.push(c.user_data as u32);
                self.end_if_settled(stream, now);
                continue;
            }
            let stats = &mut self.streams[slot.stream as usize].interval;
            record(stats.op(kind), c.result, kind, now, slot);
            if !stats.regions.is_empty() {
                record_region(stats, c.result, kind, now, slot);
            }
            if slot.other_prio {
                record_other_prio(stats, c.result, kind, now, slot);
            }
            self.free_slots.push(c.user_data as u32);
            self.end_if_settled(slot_stream(&self.slots, c.user_data), now);
        }
        self.released.clear();
        // Fresh data for the write buffers given back, while the device works.
        while let Some(s) = self.to_prepare.pop() {
            self.streams[s as usize].prepare_written();
        }
        if errors > 0 {
            let total = clock.stop.add_errors(errors);
            if self.limits.max_errors.is_some_and(|m| total > m) {
                let findings = self.findings.total > 0;
                clock.stop.stop(if findings {
                    StopReason::Findings
                } else {
                    StopReason::Errors
                });
            }
        }
    }

    /// Close the current interval at `end` and send it, every stream handed over now.
    /// End stream `s` if its byte limit is used up or its stop time passed, and nothing of
    /// it is left to complete.
    #[inline(always)]
    fn end_if_settled(&mut self, s: usize, now: u64) {
        let st = &mut self.streams[s];
        // Usually false at the first test, as the check of the byte limit alone was.
        if (st.exhausted() || now >= st.stop_ns) && !st.ended && st.settled() {
            end_stream(st, &self.signals, now);
            self.stream_ended = true;
        }
    }

    fn emit(&mut self, clock: &RunClock, tx: &Sender<IntervalMsg>, end: u64, last: bool) {
        self.begin_handover(clock, tx, end, last);
        self.finish_handover(tx);
    }

    /// Close the current interval at `end`: the streams hand its statistics over from now on
    /// (`Handover`), and it is sent once the last has.
    fn begin_handover(&mut self, clock: &RunClock, tx: &Sender<IntervalMsg>, end: u64, last: bool) {
        self.finish_handover(tx);
        if let Some(rx) = &self.recycled {
            if let Ok(given) = rx.try_recv() {
                self.spare = given.into_iter().map(Some).collect();
            }
        }
        self.handover = Some(Handover {
            interval: self.interval,
            phase: Phase::of(clock, self.interval_start),
            start_ns: self.interval_start,
            end_ns: end,
            last,
            oldest: self.oldest_inflight(end),
            lateness: std::mem::take(&mut self.lateness),
            streams: Vec::with_capacity(self.streams.len()),
            next: 0,
        });
        self.interval += 1;
        self.interval_start = end;
        self.boundary = clock.boundary_after(end);
        if self.streams.is_empty() {
            self.send_handover(tx);
        }
    }

    /// Stream `s` hands over the interval being closed, if it has not yet: before anything of
    /// the new interval happens to it.
    #[inline(always)]
    fn hand_over(&mut self, s: usize) {
        if self.streams[s].stats_interval != self.interval {
            self.hand_over_stream(s);
        }
    }

    #[inline(never)]
    fn hand_over_stream(&mut self, s: usize) {
        let h = self
            .handover
            .as_mut()
            .expect("an interval is being handed over");
        let st = &mut self.streams[s];
        st.stats_interval = self.interval;
        // The finished statistics go out in the box of this stream's spare ones (from the
        // interval before last, given back), which become the stream's new interval.
        let spare = self
            .spare
            .get_mut(s)
            .and_then(|slot| slot.take_if(|(index, _)| *index == st.index));
        let mut stats = match spare {
            Some((_, mut boxed)) => {
                boxed.clear();
                boxed
            }
            None => Box::new(st.new_stats()),
        };
        std::mem::swap(&mut *stats, &mut st.interval);
        stats.inflight = st.inflight as u64;
        stats.oldest_inflight_ns = h.oldest[s];
        if st.is_open_loop() {
            stats.behind_ios = st.behind(h.end_ns);
        }
        h.streams.push((st.index, stats));
    }

    /// Hand over streams for about HANDOVER_SLICE_NS; send the interval once all have.
    fn sweep_handover(&mut self, clock: &RunClock, tx: &Sender<IntervalMsg>) {
        let Some(h) = &self.handover else { return };
        let mut s = h.next;
        let until = clock.now() + HANDOVER_SLICE_NS;
        while s < self.streams.len() {
            let end = (s + 8).min(self.streams.len());
            for k in s..end {
                self.hand_over(k);
            }
            s = end;
            if clock.now() >= until {
                break;
            }
        }
        let h = self.handover.as_mut().expect("still there");
        h.next = s;
        if h.streams.len() == self.streams.len() {
            self.send_handover(tx);
        }
    }

    /// Hand over every stream left and send the interval.
    fn finish_handover(&mut self, tx: &Sender<IntervalMsg>) {
        if self.handover.is_none() {
            return;
        }
        for s in 0..self.streams.len() {
            self.hand_over(s);
        }
        self.send_handover(tx);
    }

    fn send_handover(&mut self, tx: &Sender<IntervalMsg>) {
        let Some(h) = self.handover.take() else {
            return;
        };
        debug_assert_eq!(h.streams.len(), self.streams.len());
        // The receiver only goes away when the engine is dropped; nothing to report then.
        let _ = tx.send(IntervalMsg {
            thread: self.id,
            interval: h.interval,
            phase: h.phase,
            start_ns: h.start_ns,
            end_ns: h.end_ns,
            streams: h.streams,
            lateness: h.lateness,
            last: h.last,
        });
    }
}

/// Stream `st` has ended at `now`: its limit used up (`done`, reported as `done_ns`), its stop
/// time passed or a stop asked for, and nothing of it in flight. Recorded for the run's
/// result and for the streams waiting for it.
#[cold]
#[inline(never)]
fn end_stream(st: &mut StreamState, signals: &StopSignal, now: u64) {
    st.ended = true;
    if st.exhausted() && !st.done {
        st.done = true;
        st.interval.done_ns = now;
    }
    if let Some(pacing) = st.pacing.as_mut() {
        if let Some(flow) = pacing.flow.as_mut() {
            flow.leave();
        }
        if let Some(on_end) = &pacing.on_end {
            // Ending first: a stream this stops, ended on another thread (woken at once by its
            // doorbell), must not stop this one in return before `mark_ended` below.
            signals.mark_ending(st.index);
            signals.stop_on_end(on_end, now);
        }
    }
    signals.mark_ended(st.index, now);
}

fn slot_stream(slots: &[Slot], user_data: u64) -> usize {
    slots[user_data as usize].stream as usize
}

#[inline(always)]
fn slot_group(slots: &[Slot], user_data: u64) -> bool {
    slots[user_data as usize].group
}

/// Count one completion (of an IO in `slot`, completed at `now`) in `op`.
#[inline(always)]
fn record(op: &mut OpStats, result: i32, kind: OpKind, now: u64, slot: &Slot) {
    if result < 0 {
        op.add_error(-result);
        return;
    }
    let bytes = match kind {
        OpKind::Sync => 0,
        // A discard completes with 0: its bytes are the range it gave back.
        OpKind::Discard => slot.len as u64,
        OpKind::Read | OpKind::Write => result as u64,
    };
    op.count(
        bytes,
        now.saturating_sub(slot.submitted),
        Some(now.saturating_sub(slot.intended)),
    );
}

/// A stream over several targets also counts each IO for its target. Kept out of line, so a
/// one-target stream's path (the common one) stays as short as it was.
#[cold]
#[inline(never)]
fn record_region(stats: &mut StreamStats, result: i32, kind: OpKind, now: u64, slot: &Slot) {
    record(
        stats.regions[slot.region as usize].op(kind),
        result,
        kind,
        now,
        slot,
    );
}

/// An IO at its stream's share priority is also counted apart (fio's clat_prio). Out of
/// line: streams without a share never call it.
#[cold]
#[inline(never)]
fn record_other_prio(stats: &mut StreamStats, result: i32, kind: OpKind, now: u64, slot: &Slot) {
    if let Some(other) = stats.ioprio_other.as_mut() {
        record(other.op(kind), result, kind, now, slot);
    }
}

#[cfg(test)]
mod frame_tests;
#[cfg(test)]
mod gate_tests;
mod group;
#[cfg(test)]
mod group_tests;
mod limits;
#[cfg(test)]
mod pace_tests;
mod replay;
#[cfg(test)]
mod replay_tests;
#[cfg(test)]
mod tests;
mod verify;
#[cfg(test)]
mod verify_tests;
mod wake;

pub use limits::{HungIo, Limits};
