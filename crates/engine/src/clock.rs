//! The run clock: nanoseconds since the run's start, shared by every engine thread.
//!
//! It reads CLOCK_MONOTONIC directly (one vDSO call, no `Instant` arithmetic: the worker reads
//! it once per loop turn, which at millions of IOs per second is a visible share of the harness
//! cost) and it is the clock io_uring's absolute timeouts use, so a deadline on this clock can be
//! handed to the kernel as is. Tests use a manual clock instead, which only moves when a
//! backend waits, so schedules can be checked by counting IOs rather than by timing them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::stop::StopSignal;

/// A clock's current time in nanoseconds.
#[inline(always)]
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec; the clocks used here always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC in nanoseconds.
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time of the calling thread, ns (a system call, not the vDSO: for occasional use).
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CLOCK_REALTIME in nanoseconds since the epoch (the wall clock hosts agree on).
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// Longest single sleep while waiting for an absolute start, so a stop is seen promptly.
const START_WAIT_STEP_NS: u64 = 50_000_000;
/// The last stretch before an absolute start is spun rather than slept: a thread that is
/// already running when the instant comes does not wait for the scheduler to wake it, which
/// on a busy host can take milliseconds.
const START_SPIN_NS: u64 = 2_000_000;

/// Sleep until the wall clock reads `at_ns` (CLOCK_REALTIME, ns since the epoch) or `stop` is
/// set. Each step is an absolute clock_nanosleep (TIMER_ABSTIME) on CLOCK_REALTIME, the last
/// one to START_SPIN_NS before `at_ns`, after which the thread spins on the clock: the wake-up
/// follows the wall clock, including any step NTP makes while waiting, rather than a delay
/// computed once from it. Where allowed (root, CAP_SYS_NICE) the calling thread waits at the
/// lowest real-time priority, so a busy host's ordinary threads cannot delay its wake-up; the
/// spin is bounded on the monotonic clock, so a wall clock stepped back cannot stretch it.
/// Meant for a thread that ends soon after (the engine's start thread).
pub fn sleep_until_realtime(at_ns: u64, stop: &StopSignal) {
    // Wake when asked, not up to 50 us late (the default timer slack).
    // SAFETY: prctl with PR_SET_TIMERSLACK only changes this thread's timer slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    let lowest_fifo = libc::sched_param { sched_priority: 1 };
    // SAFETY: pid 0 is this thread; the param is valid. Failure (unprivileged) changes nothing.
    unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &lowest_fifo) };
    loop {
        let now = realtime_ns();
        if now >= at_ns || stop.is_stopped() {
            return;
        }
        if now + START_SPIN_NS >= at_ns {
            let give_up = monotonic_ns() + 2 * START_SPIN_NS;
            while realtime_ns() < at_ns && !stop.is_stopped() && monotonic_ns() < give_up {
                std::hint::spin_loop();
            }
            return;
        }
        let until = (at_ns - START_SPIN_NS).min(now + START_WAIT_STEP_NS);
        let ts = libc::timespec {
            tv_sec: (until / 1_000_000_000) as libc::time_t,
            tv_nsec: (until % 1_000_000_000) as libc::c_long,
        };
        // SAFETY: ts is a valid timespec; with TIMER_ABSTIME the remainder pointer is unused
        // and may be null. An early return (EINTR) just goes round the loop again.
        unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_REALTIME,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
    }
}

#[derive(Clone, Debug)]
enum Source {
    Monotonic,
    /// Test time: moves only through `sleep_until` / `advance_to`.
    Manual(Arc<AtomicU64>),
}

/// Shared timing of a run.
#[derive(Clone, Debug)]
pub struct RunClock {
    /// CLOCK_MONOTONIC at run time 0.
    pub origin_ns: u64,
    pub warmup_ns: u64,
    pub end_ns: Option<u64>,
    pub interval_ns: u64,
    pub stop: Arc<StopSignal>,
    source: Source,
}

impl RunClock {
    /// A clock on CLOCK_MONOTONIC whose time 0 is `origin_ns` (may lie in the future).
    pub fn monotonic(
        origin_ns: u64,
        warmup_ns: u64,
        end_ns: Option<u64>,
        interval_ns: u64,
    ) -> Self {
        RunClock {
            origin_ns,
            warmup_ns,
            end_ns,
            interval_ns,
            stop: Arc::default(),
            source: Source::Monotonic,
        }
    }

    /// A clock that stands still until a backend waits on it (tests).
    pub fn manual(warmup_ns: u64, end_ns: Option<u64>, interval_ns: u64) -> Self {
        RunClock {
            origin_ns: 0,
            warmup_ns,
            end_ns,
            interval_ns,
            stop: Arc::default(),
            source: Source::Manual(Arc::new(AtomicU64::new(0))),
        }
    }

    pub fn is_manual(&self) -> bool {
        matches!(self.source, Source::Manual(_))
    }

    /// Nanoseconds since run time 0 (0 before it).
    #[inline]
    pub fn now(&self) -> u64 {
        match &self.source {
            Source::Monotonic => monotonic_ns().saturating_sub(self.origin_ns),
            Source::Manual(t) => t.load(Ordering::Relaxed),
        }
    }

    pub fn stopping(&self) -> bool {
        self.stop.is_stopped()
    }

    /// CLOCK_MONOTONIC time of run time `t` (for absolute kernel timeouts).
    pub fn to_monotonic(&self, t: u64) -> u64 {
        self.origin_ns + t
    }

    /// Manual clock: move time forward to `t` (never backwards). No effect on a real clock.
    pub fn advance_to(&self, t: u64) {
        if let Source::Manual(c) = &self.source {
            c.fetch_max(t, Ordering::Relaxed);
        }
    }

    /// Sleep until run time `t` (a real clock sleeps, a manual one jumps there).
    pub fn sleep_until(&self, t: u64) {
        match &self.source {
            Source::Monotonic => {
                let now = self.now();
                if t > now {
                    std::thread::sleep(Duration::from_nanos(t - now));
                }
            }
            Source::Manual(_) => self.advance_to(t),
        }
    }

    /// End of the interval that starts at `start`.
    pub fn boundary_after(&self, start: u64) -> u64 {
        if start < self.warmup_ns {
            (start + self.interval_ns).min(self.warmup_ns)
        } else {
            start + self.interval_ns
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_forward_and_only_when_told() {
        let c = RunClock::manual(0, None, 1000);
        assert_eq!(c.now(), 0);
        c.sleep_until(500);
        assert_eq!(c.now(), 500);
        c.advance_to(100);
        assert_eq!(c.now(), 500, "never backwards");
        let shared = c.clone();
        shared.advance_to(700);
        assert_eq!(c.now(), 700, "clones share the time");
    }

    #[test]
    fn monotonic_clock_counts_from_its_origin() {
        let origin = monotonic_ns();
        let c = RunClock::monotonic(origin + 3_600_000_000_000, 0, None, 1000);
        assert_eq!(c.now(), 0, "before time 0");
        let c = RunClock::monotonic(origin, 0, None, 1000);
        let (a, b) = (c.now(), c.now());
        assert!(b >= a);
        assert_eq!(c.to_monotonic(5), origin + 5);
    }

    #[test]
    fn realtime_sleep_wakes_at_the_instant_or_on_stop() {
        let stop = StopSignal::default();
        let at = realtime_ns() + 30_000_000;
        sleep_until_realtime(at, &stop);
        let woke = realtime_ns();
        assert!(woke >= at, "never early");
        assert!(woke - at < 20_000_000, "woke {} ns late", woke - at);
        stop.stop(crate::stop::StopReason::Requested);
        let before = realtime_ns();
        sleep_until_realtime(before + 3_600_000_000_000, &stop);
        assert!(
            realtime_ns() - before < 1_000_000_000,
            "a stop ends the wait"
        );
    }

    #[test]
    fn intervals_stop_at_the_end_of_warmup() {
        let c = RunClock::manual(1500, None, 1000);
        assert_eq!(c.boundary_after(0), 1000);
        assert_eq!(c.boundary_after(1000), 1500);
        assert_eq!(c.boundary_after(1500), 2500);
    }
}
