//! Token-based flow control between streams (plan.rs `flow`, fio's `flow`/`flow_id`/
//! `flow_sleep`; fio's flow.c at commit f5344384).
//!
//! Streams of one flow group keep the IOs they issue in proportion to their weights, across
//! engine threads. The group holds two shared counters: the IOs its streams have issued (plus
//! one, as fio starts it, so the first ratio is defined) and the sum of its running streams'
//! weights. Before each IO a stream compares its own count's share of the group's count with
//! its weight's share of the group's weight; when it is ahead (`count / group > weight /
//! total`) it issues nothing, waits for its IOs in flight to complete (fio's `io_u_quiesce`),
//! then `sleep_us` (fio's `usleep(flow_sleep)`), and looks again. With `sleep_us` 0 it looks
//! again at its engine thread's next loop turn (fio spins), and after that, while it stays
//! ahead, after 1, 2, 4 ... up to 128 us (`SPIN_BACKOFF_MAX_NS`). fio's job spins on a CPU of
//! its own and issues its IOs from that thread; a tilemark engine thread that spins (it stays
//! awake for waits shorter than its wake-up lead, worker/wake.rs) holds the CPU that the other
//! stream's engine and psync worker threads need, until the scheduler's tick: on the
//! development VM's file rig fio's butterfly.fio ran at 2,105 IOPS paced against 16,360
//! unpaced, fio 11,873 against 23,797, with tilemark's p99 at 4 ms (docs/fio.md). Backing
//! off lets the thread sleep once the other stream takes longer than a spin is worth. A stream joins its group when it
//! starts (its weight added) and leaves it when it ends (its count and weight taken back), as
//! fio's `flow_init_job`/`flow_exit_job` do at a job's thread start and exit.
//!
//! Streams without a flow never reach this module: the IO path tests one `Option`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::plan::{FlowSpec, OnEndSpec, StreamSpec};

/// What paces a stream or follows its end (plan.rs `flow`, `on_end`): one pointer on the
/// stream, None for the streams without either, which test only that on their way.
#[derive(Debug, Default)]
pub struct Pacing {
    pub flow: Option<Flow>,
    pub on_end: Option<OnEndSpec>,
}

/// One flow group's shared counters.
#[derive(Debug)]
pub struct FlowGroup {
    /// IOs issued by its streams (those still running), plus one.
    issued: AtomicU64,
    /// The weights of its running streams.
    total_weight: AtomicU64,
}

impl Default for FlowGroup {
    fn default() -> Self {
        FlowGroup {
            issued: AtomicU64::new(1),
            total_weight: AtomicU64::new(0),
        }
    }
}

/// Where a stream held back by its flow is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hold {
    /// Not held: it looks at the counters before each IO.
    No,
    /// Ahead: waiting for its IOs in flight to complete before it sleeps.
    Draining,
    /// Sleeping until this run time (ns), then it looks again.
    Until(u64),
}

/// A stream's side of its flow group.
#[derive(Debug)]
pub struct Flow {
    group: Arc<FlowGroup>,
    weight: u64,
    sleep_ns: u64,
    /// IOs this stream has issued while in the group.
    issued: u64,
    joined: bool,
    hold: Hold,
    /// Times it was found ahead (each followed by a sleep).
    pub holds: u64,
    /// Holds since it last issued (the backoff of `sleep_us` 0).
    streak: u32,
}

/// The longest look-again delay of a stream held with `sleep_us` 0: longer than the most an
/// engine thread stays awake for (worker/wake.rs, twice MAX_EARLY_NS), so it then sleeps.
pub const SPIN_BACKOFF_MAX_NS: u64 = 128_000;

/// What the stream should do now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Issue the IO (already counted).
    Go,
    /// Issue nothing; look again when an IO completes or at the given run time (a timer to
    /// set), whichever the stream is waiting for.
    Wait(Option<u64>),
    /// Issue nothing; look again at the given run time, `sleep_us` after the stream was found
    /// ahead with nothing in flight. fio's job sleeps there (`usleep(flow_sleep)`, which gives
    /// its CPU up however short it is), so the engine thread sleeps too rather than stay awake
    /// for a wait shorter than its wake-up lead (worker/wake.rs): awake, it held the CPU the
    /// other streams' threads needed (butterfly.fio with flow_sleep=10 on the RAM disk: see
    /// docs/fio.md, "The eight examples added last").
    Sleep(u64),
}

impl Flow {
    /// Join the group (the stream starts).
    fn join(&mut self) {
        if !self.joined {
            self.joined = true;
            self.group
                .total_weight
                .fetch_add(self.weight, Ordering::AcqRel);
        }
    }

    /// Leave the group (the stream ended): its IOs and weight no longer count.
    pub fn leave(&mut self) {
        if self.joined {
            self.joined = false;
            self.group.issued.fetch_sub(self.issued, Ordering::AcqRel);
            self.group
                .total_weight
                .fetch_sub(self.weight, Ordering::AcqRel);
            self.issued = 0;
        }
    }

    /// May the stream issue one IO at `now`, with `inflight` of its IOs outstanding? Counts
    /// the IO when it may (flow.c `flow_threshold_exceeded`).
    pub fn admit(&mut self, now: u64, inflight: u32) -> Admit {
        // It joins at its first IO, as a fio job at its thread's start (a stream whose phase
        // starts later does not hold the group back before then).
        self.join();
        match self.hold {
            Hold::Until(t) if now < t => return Admit::Wait(None),
            Hold::Draining if inflight > 0 => return Admit::Wait(None),
            Hold::Draining => return self.sleep(now),
            _ => self.hold = Hold::No,
        }
        let group = self.group.issued.load(Ordering::Relaxed);
        let total = self.group.total_weight.load(Ordering::Relaxed);
        // issued / group > weight / total, in integers (fio compares the two as doubles).
        if (self.issued as u128) * (total as u128) > (self.weight as u128) * (group as u128) {
            self.holds += 1;
            self.streak = self.streak.saturating_add(1);
            if self.sleep_ns > 0 && inflight > 0 {
                self.hold = Hold::Draining;
                return Admit::Wait(None);
            }
            return self.sleep(now);
        }
        self.group.issued.fetch_add(1, Ordering::AcqRel);
        self.issued += 1;
        self.streak = 0;
        Admit::Go
    }

    fn sleep(&mut self, now: u64) -> Admit {
        // At least 1 ns: the next loop turn (a timer due at `now` would fire in this one).
        let wait = if self.sleep_ns > 0 {
            self.sleep_ns
        } else if self.streak <= 1 {
            1
        } else {
            (1000u64 << (self.streak - 2).min(16)).min(SPIN_BACKOFF_MAX_NS)
        };
        let until = now + wait;
        self.hold = Hold::Until(until);
        if self.sleep_ns > 0 {
            Admit::Sleep(until)
        } else {
            Admit::Wait(Some(until))
        }
    }
}

/// The run's flow groups by plan id, shared by the streams of every engine thread.
#[derive(Debug, Default)]
pub struct Groups {
    by_id: HashMap<u32, Arc<FlowGroup>>,
}

impl Groups {
    /// The pacing of a stream made from `spec` (None with neither flow nor on_end).
    pub fn pacing_for(&mut self, spec: &StreamSpec) -> Option<Box<Pacing>> {
        if spec.flow.is_none() && spec.on_end.is_none() {
            return None;
        }
        let flow = spec.flow.map(|f: FlowSpec| Flow {
            group: self.by_id.entry(f.group).or_default().clone(),
            weight: f.weight as u64,
            sleep_ns: f.sleep_us.saturating_mul(1000),
            issued: 0,
            joined: false,
            hold: Hold::No,
            holds: 0,
            streak: 0,
        });
        Some(Box::new(Pacing {
            flow,
            on_end: spec.on_end.clone(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(group: &Arc<FlowGroup>, weight: u64, sleep_ns: u64) -> Flow {
        Flow {
            group: group.clone(),
            weight,
            sleep_ns,
            issued: 0,
            joined: false,
            hold: Hold::No,
            holds: 0,
            streak: 0,
        }
    }

    #[test]
    fn two_streams_taking_turns_issue_in_their_weights_ratio() {
        // flow.fio: weights 8 and 1, each asking for an IO in turn whenever not held.
        let g = Arc::new(FlowGroup::default());
        let (mut a, mut b) = (flow(&g, 8, 0), flow(&g, 1, 0));
        a.join();
        b.join();
        assert_eq!(g.total_weight.load(Ordering::Relaxed), 9);
        let (mut na, mut nb) = (0u64, 0u64);
        for t in 0..90_000u64 {
            // A turn per microsecond each (the held stream's look-again backs off to 128 us).
            if a.admit(t * 2000, 0) == Admit::Go {
                na += 1;
            }
            if b.admit(t * 2000 + 1000, 0) == Admit::Go {
                nb += 1;
            }
        }
        let ratio = na as f64 / nb as f64;
        assert!((ratio - 8.0).abs() < 0.01, "{na} / {nb} = {ratio}");
    }

    #[test]
    fn a_stream_ahead_drains_its_ios_then_sleeps_before_it_looks_again() {
        let g = Arc::new(FlowGroup::default());
        let (mut a, mut b) = (flow(&g, 1, 1000), flow(&g, 1, 1000));
        a.join();
        b.join();
        // The group's count starts at 1 (flow.c): 1 of 2 is not above 1 of 2, 2 of 3 is.
        assert_eq!(a.admit(0, 0), Admit::Go);
        assert_eq!(a.admit(0, 1), Admit::Go);
        assert_eq!(a.admit(0, 2), Admit::Wait(None), "ahead with IOs in flight");
        assert_eq!(a.admit(5, 1), Admit::Wait(None));
        assert_eq!(a.admit(10, 0), Admit::Sleep(1010), "drained: sleeps");
        assert_eq!(b.admit(20, 0), Admit::Go);
        assert_eq!(b.admit(20, 0), Admit::Go);
        assert_eq!(a.admit(500, 0), Admit::Wait(None), "still asleep");
        assert_eq!(a.admit(1010, 0), Admit::Go, "even again: goes");
        assert_eq!(a.holds, 1);
    }

    #[test]
    fn a_stream_held_without_a_sleep_looks_again_at_once_then_backs_off() {
        // flow_sleep=0 (HOWTO flow_sleep: "The period of time, in microseconds, to wait after
        // the flow counter has exceeded its proportion before retrying operations"): first at
        // the next loop turn, then 1, 2, 4 ... us up to the cap while still ahead; an IO
        // issued starts over.
        let g = Arc::new(FlowGroup::default());
        let (mut a, mut b) = (flow(&g, 1, 0), flow(&g, 1, 0));
        a.join();
        b.join();
        assert_eq!(a.admit(0, 0), Admit::Go);
        assert_eq!(a.admit(0, 0), Admit::Go);
        let mut now = 10;
        let mut waits = Vec::new();
        for _ in 0..10 {
            let Admit::Wait(Some(until)) = a.admit(now, 0) else {
                panic!("ahead: held with a timer");
            };
            waits.push(until - now);
            now = until;
        }
        assert_eq!(
            waits,
            [1, 1000, 2000, 4000, 8000, 16000, 32000, 64000, 128_000, 128_000]
        );
        assert_eq!(b.admit(now, 0), Admit::Go);
        assert_eq!(b.admit(now, 0), Admit::Go);
        assert_eq!(a.admit(now, 0), Admit::Go, "even again: goes");
        assert_eq!(a.admit(now, 0), Admit::Go);
        assert_eq!(
            a.admit(now + 1, 0),
            Admit::Wait(Some(now + 2)),
            "starts over"
        );
        assert_eq!(a.holds, 11);
    }

    #[test]
    fn a_stream_that_left_no_longer_holds_the_others_back() {
        let g = Arc::new(FlowGroup::default());
        let (mut a, mut b) = (flow(&g, 1, 0), flow(&g, 1, 0));
        a.join();
        b.join();
        assert_eq!(a.admit(0, 0), Admit::Go);
        assert_eq!(a.admit(0, 0), Admit::Go);
        assert!(matches!(a.admit(1, 0), Admit::Wait(_)));
        b.leave();
        for t in 2..100 {
            // Its 1 ns look-again has passed at every t.
            assert_eq!(a.admit(t, 0), Admit::Go, "alone in its group at {t}");
        }
        assert_eq!(g.total_weight.load(Ordering::Relaxed), 1);
    }
}
