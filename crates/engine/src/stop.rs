//! Why a run ends before its planned end, shared by its engine threads and by the handle that
//! can stop it. The first reason given wins; the run's IO error total lives here too, because
//! `max_errors` counts errors over every thread.
//!
//! The same path stops single streams while the run goes on (`stop_streams`), and carries when
//! each stream started and ended, which streams waiting for others (plan.rs `after`) look at
//! from any thread. Every change bumps `events`: a thread reads that one counter per loop turn
//! and looks further only when it moved. A thread asleep (nothing in flight, its next issue
//! time far off) would see it only at its next wake-up, up to 50 ms later (worker.rs
//! `MAX_WAIT_NS`): so each engine thread registers a doorbell (its backend's, Backend::bell)
//! and every change rings them all, which ends their sleep at once.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

/// Wakes one engine thread from its backend's wait (backend/mod.rs `Backend::bell`).
pub type Bell = Arc<dyn Fn() + Send + Sync>;

/// The registered doorbells.
#[derive(Default)]
struct Bells(Mutex<Vec<Bell>>);

impl std::fmt::Debug for Bells {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map_or(0, |b| b.len());
        write!(f, "Bells({n})")
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// `stop()` was called.
    Requested = 1,
    /// More IO errors than the plan's `max_errors`.
    Errors = 2,
    /// An IO was outstanding longer than the plan's `io_timeout_ms`.
    Hung = 3,
    /// A read of a verified target found data it should not hold (with IO errors, more than
    /// `max_errors`).
    Findings = 4,
}

impl StopReason {
    pub fn name(self) -> &'static str {
        match self {
            StopReason::Requested => "requested",
            StopReason::Errors => "errors",
            StopReason::Hung => "hung",
            StopReason::Findings => "findings",
        }
    }

    fn from_u8(v: u8) -> Option<StopReason> {
        match v {
            1 => Some(StopReason::Requested),
            2 => Some(StopReason::Errors),
            3 => Some(StopReason::Hung),
            4 => Some(StopReason::Findings),
            _ => None,
        }
    }
}

#[derive(Debug, Default)]
pub struct StopSignal {
    stopped: AtomicBool,
    reason: AtomicU8,
    errors: AtomicU64,
    /// Bumped whenever a stream ends or a stream stop is asked for.
    events: AtomicU64,
    /// One per plan stream (empty for a signal made without streams: nothing to record).
    streams: Vec<StreamSignal>,
    /// The engine threads' doorbells, rung at every change.
    bells: Bells,
}

/// When one stream started and ended (run time + 1; 0: not yet), and whether it was asked to
/// stop.
#[derive(Debug, Default)]
struct StreamSignal {
    started: AtomicU64,
    ended: AtomicU64,
    stop: AtomicBool,
    /// Its end is being recorded: its own `on_end` applies before `ended` is set (so that a
    /// stream waiting for it cannot start in between), and a stream that this stops and that
    /// stops it in return must see it as ended already, not stop it.
    ending: AtomicBool,
}

/// A stream's start and end in run time (ns), as the engine reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Span {
    pub started_ns: Option<u64>,
    pub ended_ns: Option<u64>,
    /// Asked to stop from outside (`stop_streams`) while the run went on.
    pub stopped: bool,
}

fn time_of(v: u64) -> Option<u64> {
    v.checked_sub(1)
}

impl StopSignal {
    /// Ask every thread to stop; the first reason given is the one reported.
    pub fn stop(&self, reason: StopReason) {
        let _ = self
            .reason
            .compare_exchange(0, reason as u8, Ordering::AcqRel, Ordering::Acquire);
        self.stopped.store(true, Ordering::Release);
        self.ring();
    }

    /// Register an engine thread's doorbell: every stop, stream stop and stream end rings it.
    pub fn add_bell(&self, bell: Bell) {
        if let Ok(mut bells) = self.bells.0.lock() {
            bells.push(bell);
        }
    }

    /// Wake every engine thread (after the change is visible: each looks at `events` and
    /// `is_stopped` when its wait returns).
    fn ring(&self) {
        if let Ok(bells) = self.bells.0.lock() {
            for bell in bells.iter() {
                bell();
            }
        }
    }

    #[inline]
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    pub fn reason(&self) -> Option<StopReason> {
        StopReason::from_u8(self.reason.load(Ordering::Acquire))
    }

    /// Add `n` failed IOs to the run's total; returns the new total.
    pub fn add_errors(&self, n: u64) -> u64 {
        self.errors.fetch_add(n, Ordering::Relaxed) + n
    }

    /// A signal that also keeps the start, end and stop request of `n` streams.
    pub fn for_streams(n: usize) -> Self {
        StopSignal {
            streams: (0..n).map(|_| StreamSignal::default()).collect(),
            ..Default::default()
        }
    }

    /// Changes to the streams so far (a thread compares it with the count it last saw).
    #[inline(always)]
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::Acquire)
    }

    /// Ask plan streams `which` to stop while the run goes on; indices past the plan's
    /// streams are ignored. Returns how many were known.
    pub fn stop_streams(&self, which: &[usize]) -> usize {
        let mut known = 0;
        for &i in which {
            if let Some(s) = self.streams.get(i) {
                s.stop.store(true, Ordering::Release);
                known += 1;
            }
        }
        self.events.fetch_add(1, Ordering::AcqRel);
        self.ring();
        known
    }

    /// A stream with `on_end` ended at run time `now`: ask its streams to stop (with
    /// `started_only`, those whose phase has begun by `now`); those already ended are left
    /// as they are (not reported as stopped).
    pub fn stop_on_end(&self, on_end: &crate::plan::OnEndSpec, now: u64) {
        for &i in &on_end.stop {
            if let Some(s) = self.streams.get(i) {
                if s.ended.load(Ordering::Acquire) != 0 || s.ending.load(Ordering::Acquire) {
                    continue;
                }
                let started = time_of(s.started.load(Ordering::Acquire)).is_some_and(|t| t <= now);
                if started || !on_end.started_only {
                    s.stop.store(true, Ordering::Release);
                }
            }
        }
        self.events.fetch_add(1, Ordering::AcqRel);
        self.ring();
    }

    pub fn stop_requested(&self, stream: usize) -> bool {
        self.streams
            .get(stream)
            .is_some_and(|s| s.stop.load(Ordering::Acquire))
    }

    /// Stream `stream` started (its phase began) at run time `t`.
    pub fn mark_started(&self, stream: usize, t: u64) {
        if let Some(s) = self.streams.get(stream) {
            s.started.store(t + 1, Ordering::Release);
        }
    }

    /// Stream `stream` is ending: from now on no other stream's `on_end` stops it. Called
    /// before its own `on_end` applies, then `mark_ended`.
    pub fn mark_ending(&self, stream: usize) {
        if let Some(s) = self.streams.get(stream) {
            s.ending.store(true, Ordering::Release);
        }
    }

    /// Stream `stream` ended at run time `t` (the first end recorded stays).
    pub fn mark_ended(&self, stream: usize, t: u64) {
        if let Some(s) = self.streams.get(stream) {
            let _ = s
                .ended
                .compare_exchange(0, t + 1, Ordering::AcqRel, Ordering::Acquire);
            self.events.fetch_add(1, Ordering::AcqRel);
            self.ring();
        }
    }

    pub fn ended(&self, stream: usize) -> Option<u64> {
        self.streams
            .get(stream)
            .and_then(|s| time_of(s.ended.load(Ordering::Acquire)))
    }

    /// Every stream's start and end so far, in plan order.
    pub fn spans(&self) -> Vec<Span> {
        self.streams
            .iter()
            .map(|s| Span {
                started_ns: time_of(s.started.load(Ordering::Acquire)),
                ended_ns: time_of(s.ended.load(Ordering::Acquire)),
                stopped: s.stop.load(Ordering::Acquire),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_ending_is_not_stopped_by_the_streams_its_end_stops() {
        // fio's exitall both ways: 0 ends and stops 1; 1, stopped, ends and would stop 0,
        // which is still recording its end (its on_end applies before its `ended`).
        let s = StopSignal::for_streams(2);
        let stop = |i| crate::plan::OnEndSpec {
            stop: vec![i],
            started_only: false,
        };
        s.mark_ending(0);
        s.stop_on_end(&stop(1), 10);
        assert!(s.stop_requested(1));
        s.mark_ending(1);
        s.stop_on_end(&stop(0), 11); // on 1's thread, before 0's end is recorded
        s.mark_ended(1, 11);
        s.mark_ended(0, 10);
        assert!(!s.stop_requested(0), "0 ended by itself");
        assert_eq!(
            s.spans().iter().map(|p| p.stopped).collect::<Vec<_>>(),
            [false, true]
        );
    }

    #[test]
    fn every_change_rings_every_registered_bell() {
        let s = StopSignal::for_streams(3);
        let rung: Vec<Arc<AtomicU64>> = (0..2).map(|_| Arc::new(AtomicU64::new(0))).collect();
        for r in &rung {
            let r = r.clone();
            s.add_bell(Arc::new(move || {
                r.fetch_add(1, Ordering::Relaxed);
            }));
        }
        let count = || {
            rung.iter()
                .map(|r| r.load(Ordering::Relaxed))
                .collect::<Vec<_>>()
        };
        s.mark_started(0, 5);
        assert_eq!(
            count(),
            [0, 0],
            "a start wakes nobody: no thread waits for it"
        );
        s.mark_ended(0, 10);
        assert_eq!(count(), [1, 1]);
        s.stop_streams(&[1]);
        assert_eq!(count(), [2, 2]);
        let on_end = crate::plan::OnEndSpec {
            stop: vec![2],
            started_only: false,
        };
        s.stop_on_end(&on_end, 20);
        assert_eq!(count(), [3, 3]);
        s.stop(StopReason::Requested);
        assert_eq!(count(), [4, 4]);
    }

    #[test]
    fn the_first_reason_wins() {
        let s = StopSignal::default();
        assert!(!s.is_stopped());
        assert_eq!(s.reason(), None);
        s.stop(StopReason::Hung);
        s.stop(StopReason::Requested);
        assert!(s.is_stopped());
        assert_eq!(s.reason(), Some(StopReason::Hung));
    }

    #[test]
    fn errors_add_up_across_callers() {
        let s = StopSignal::default();
        assert_eq!(s.add_errors(2), 2);
        assert_eq!(s.add_errors(3), 5);
    }
}
