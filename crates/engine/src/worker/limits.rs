//! How a thread stops by itself and how it ends: the error limit, hung IOs, and a drain that
//! waits for in-flight IOs no longer than the IO timeout (one interval once an IO hung, at most
//! STOP_DRAIN_NS after stop()). IOs that never complete are listed and their buffers leaked,
//! because the kernel may still write into them.

use std::sync::mpsc::Sender;

use serde::Serialize;

use super::{IntervalMsg, Worker, MAX_WAIT_NS};
use crate::clock::RunClock;
use crate::error::Result;
use crate::stop::StopReason;

/// Without an IO timeout, IOs still in flight this long after the planned end are given up
/// on (reported as hung, their buffers leaked).
const DRAIN_LIMIT_NS: u64 = 120_000_000_000;
/// After stop() the drain waits at most this long (or the IO timeout, if shorter): a stop
/// on a device that no longer answers must not block the result.
pub(super) const STOP_DRAIN_NS: u64 = 5_000_000_000;
/// Run-wide limits that make the engine stop by itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    /// Stop once the run's failed IOs (all threads) exceed this.
    pub max_errors: Option<u64>,
    /// An IO outstanding longer than this is hung: stop.
    pub io_timeout_ns: Option<u64>,
}

/// An IO still outstanding when its thread ended.
#[derive(Clone, Debug, Serialize)]
pub struct HungIo {
    pub stream: usize,
    /// The plan target the IO went to (its offset is within it).
    pub target: usize,
    pub op: &'static str,
    pub offset: u64,
    pub len: u32,
    pub age_ns: u64,
}

impl Worker {
    /// After the loop: reap what is in flight, waiting no longer than the IO timeout (shorter
    /// after stop()). Returns the IOs that never completed; their buffers are leaked, because
    /// the kernel may still write into them.
    pub(super) fn drain(
        &mut self,
        clock: &RunClock,
        tx: &Sender<IntervalMsg>,
    ) -> Result<Vec<HungIo>> {
        // While draining, no new data IOs are issued (pending fsyncs are dropped too).
        for s in &mut self.streams {
            s.pending_fsyncs = 0;
        }
        let timeout = self.limits.io_timeout_ns;
        let patience = match clock.stop.reason() {
            Some(StopReason::Requested) => timeout.map_or(STOP_DRAIN_NS, |t| t.min(STOP_DRAIN_NS)),
            // An IO already outlived the timeout: the run has its verdict. IOs still in flight
            // get one interval to complete, not a second full timeout, so a hung device stops
            // the run within the timeout plus one interval.
            Some(StopReason::Hung) => timeout.unwrap_or(DRAIN_LIMIT_NS).min(clock.interval_ns),
            _ => timeout.unwrap_or(DRAIN_LIMIT_NS),
        };
        let mut now = clock.now();
        let limit = now + patience;
        loop {
            self.emit_due(clock, tx, now);
            self.release_completions(now);
            self.record_released(clock, now);
            if self.inflight == 0 {
                return Ok(Vec::new());
            }
            if now >= limit {
                break;
            }
            self.submit(clock, Some((now + MAX_WAIT_NS).min(limit)))?;
            now = clock.now();
        }
        // Still in flight after waiting as long as allowed: hung, unless stop() cut the wait.
        if clock.stop.reason().is_none() {
            clock.stop.stop(StopReason::Hung);
        }
        let mut hung = Vec::with_capacity(self.inflight);
        self.mark_free_slots();
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if self.free_mask[i] {
                continue;
            }
            let st = &self.streams[slot.stream as usize];
            hung.push(HungIo {
                stream: st.index,
                target: st.regions[slot.region as usize].target as usize,
                op: slot.kind.name(),
                offset: slot.offset,
                len: slot.len,
                age_ns: now.saturating_sub(slot.submitted),
            });
            if let Some(buf) = slot.buf.take() {
                std::mem::forget(buf);
            }
        }
        Ok(hung)
    }

    /// Mark in `free_mask` which slots hold no IO.
    fn mark_free_slots(&mut self) {
        self.free_mask.clear();
        self.free_mask.resize(self.slots.len(), false);
        for &f in &self.free_slots {
            self.free_mask[f as usize] = true;
        }
    }

    /// Age of the oldest in-flight IO of every stream of this thread (0: none in flight).
    /// Scans the slot table: done once per interval or per hung check, never per IO.
    pub(super) fn oldest_inflight(&mut self, now: u64) -> Vec<u64> {
        self.mark_free_slots();
        let mut oldest = vec![0; self.streams.len()];
        for (slot, free) in self.slots.iter().zip(&self.free_mask) {
            if !free {
                let age = now.saturating_sub(slot.submitted);
                let o = &mut oldest[slot.stream as usize];
                *o = (*o).max(age);
            }
        }
        oldest
    }

    pub(super) fn check_hung(&mut self, clock: &RunClock, now: u64) {
        let Some(timeout) = self.limits.io_timeout_ns else {
            return;
        };
        // Often enough that a hang is seen soon after the timeout, rarely enough to cost nothing.
        self.next_hung_check = now + (timeout / 4).clamp(1_000_000, MAX_WAIT_NS);
        if self.inflight > 0 && self.oldest_inflight(now).into_iter().any(|a| a > timeout) {
            clock.stop.stop(StopReason::Hung);
        }
    }
}
