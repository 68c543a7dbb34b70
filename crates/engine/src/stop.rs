//! Why a run ends before its planned end, shared by its engine threads and by the handle that
//! can stop it. The first reason given wins; the run's IO error total lives here too, because
//! `max_errors` counts errors over every thread.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};

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
}

impl StopSignal {
    /// Ask every thread to stop; the first reason given is the one reported.
    pub fn stop(&self, reason: StopReason) {
        let _ = self
            .reason
            .compare_exchange(0, reason as u8, Ordering::AcqRel, Ordering::Acquire);
        self.stopped.store(true, Ordering::Release);
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
