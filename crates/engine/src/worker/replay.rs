//! Replay in the worker: a stream with an IO list issues its records instead of generated IO
//! (replay.rs has the list and the cursor over it). Timed lists are open loop, their records
//! due at their times; afap and qd lists fill a queue like a closed loop, afap holding each
//! record until its dependencies have completed.

use std::cmp::Reverse;

use super::Worker;
use crate::backend::{IoReq, Op};
use crate::error::{EngineError, Result};
use crate::plan::ReplayMode;
use crate::replay::{RecOp, Record};
use crate::stats::{OpKind, LATE_NS};

fn list_error(e: std::io::Error) -> EngineError {
    EngineError::io("reading a replayed IO list", e)
}

impl Worker {
    /// Timed replay: issue every record due by `now`, then wait for the next one. A record due
    /// while `qd` IOs are in flight waits for a slot (late, never dropped), like an open-loop
    /// IO; a completion wakes the stream again. With `deps`, a record due before its
    /// dependencies completed waits for them the same way.
    pub(super) fn replay_timed(&mut self, s: usize, now: u64) -> Result<()> {
        let mut issued_at: Option<u64> = None; // recorded time of the last record issued here
        loop {
            let st = &mut self.streams[s];
            let full = st.inflight >= st.qd;
            let cursor = st.replay.as_mut().expect("a replaying stream");
            let Some(rec) = cursor.peek().map_err(list_error)? else {
                return Ok(());
            };
            let due = cursor.due_ns(&rec);
            if due > now {
                self.timers.push(Reverse((due, s as u32)));
                return Ok(());
            }
            if issued_at.is_some_and(|t| cursor.splits(t, &rec)) {
                // Recorded apart from the one just issued: submit that first, and come back
                // on the event loop's next turn (a timer due just after now).
                self.timers.push(Reverse((now + 1, s as u32)));
                return Ok(());
            }
            // A record held for its dependencies, like one held for a slot, is woken by the
            // next completion and counts as late when it goes.
            if full || cursor.waits_for_deps(&rec) {
                st.blocked = true;
                return Ok(());
            }
            cursor.advance().map_err(list_error)?;
            issued_at = Some(rec.time_ns);
            self.issue_record(s, now, due, rec, true)?;
        }
    }

    /// Afap and qd replay: keep up to `qd` records in flight in list order; afap issues a
    /// record only once its dependencies have completed.
    pub(super) fn replay_fill(&mut self, s: usize, now: u64) -> Result<()> {
        loop {
            let st = &mut self.streams[s];
            if !st.can_issue() {
                return Ok(());
            }
            let cursor = st.replay.as_mut().expect("a replaying stream");
            let Some(rec) = cursor.peek().map_err(list_error)? else {
                return Ok(());
            };
            if cursor.mode() == ReplayMode::Afap && !cursor.deps_met(&rec) {
                return Ok(());
            }
            let due = cursor.due_ns(&rec);
            cursor.advance().map_err(list_error)?;
            self.issue_record(s, now, due, rec, false)?;
        }
    }

    /// Issue one record as what it is: a read, a write (durable when it completes if FUA, by
    /// the target's O_DSYNC file), a flush (fsync) or a discard.
    fn issue_record(
        &mut self,
        s: usize,
        now: u64,
        due: u64,
        rec: Record,
        timed: bool,
    ) -> Result<()> {
        self.hand_over(s);
        let st = &mut self.streams[s];
        let region = &st.regions[0];
        let offset = region.base + rec.offset;
        let (kind, op, file) = match rec.op {
            RecOp::Read => (OpKind::Read, Op::Read, region.file),
            RecOp::Write if rec.fua() => (OpKind::Write, Op::Write, region.file_dsync),
            RecOp::Write if rec.writeback() => {
                (OpKind::Write, Op::WriteUncached, region.file_buffered)
            }
            RecOp::Write => (OpKind::Write, Op::Write, region.file),
            RecOp::Flush => (OpKind::Sync, Op::Fsync, region.file),
            RecOp::Discard => (OpKind::Discard, Op::Discard, region.file),
        };
        let mut buf = match kind {
            OpKind::Read | OpKind::Write => Some(st.take_buf(kind, rec.len)),
            _ => None,
        };
        let req = IoReq {
            user_data: 0,
            file,
            op,
            buf: buf
                .as_mut()
                .map_or(std::ptr::null_mut(), |b| b.as_mut_ptr()),
            len: if op == Op::Fsync { 0 } else { rec.len },
            offset: if op == Op::Fsync { 0 } else { offset },
            ioprio: if op.moves_data() { st.ioprio() } else { 0 },
        };
        if timed {
            let lag = now.saturating_sub(due);
            st.interval.lag_max_ns = st.interval.lag_max_ns.max(lag);
            if lag > LATE_NS {
                st.interval.ios_issued_late += 1;
            }
        }
        if let Some(stats) = st.interval.replay.as_mut() {
            stats.issued(now, due);
        }
        // Response time runs from the recorded time in a timed replay; otherwise it is the
        // service time (closed loop).
        let intended = if timed { due } else { now };
        self.queue_io(s, 0, kind, buf, req, now, intended)?;
        Ok(())
    }
}
