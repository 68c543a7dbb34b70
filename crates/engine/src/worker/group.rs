//! Group commit: a log stream whose commits share writes and flushes (plan.rs
//! `SyncMode::Fsync { group }`).
//!
//! A database's sessions commit by appending their log records and waiting until a flush makes
//! them durable. One flush at a time runs, and it serves every commit waiting when it starts:
//! as the device slows, more commits wait for each flush, and the log gets fewer, larger writes
//! and fewer flushes (PostgreSQL's XLogFlush, InnoDB's and RocksDB's group commit). A stream
//! that writes and syncs each commit on its own instead falls behind where the application
//! would not (docs/learn.md: the 60 tps study).
//!
//! Each arrival of the stream is a commit: its size and offset drawn as any write's, appended
//! one after another. A round is one write covering the commits waiting when it starts, each
//! starting where the one before ended or inside it (up to the stream's buffer), and, once it
//! completed, its sync. Commits that come due
//! meanwhile wait for the next round. The stream counts a commit as one write of its bytes,
//! recorded when its round's sync completes: its response time runs from the commit's
//! intended time to that completion (what the application waits for), its service time from
//! the round's write submission. Its syncs count the flushes. The device sees the rounds.

use super::Worker;
use crate::backend::{IoReq, Op};
use crate::error::Result;
use crate::stats::{OpKind, OpStats, LATE_NS};
use crate::stream::Commit;

impl Worker {
    /// A commit of group stream `s` intended at `intended` came due at `now`: it waits for
    /// the next round.
    pub(super) fn group_due(&mut self, s: usize, now: u64, intended: u64) {
        let st = &mut self.streams[s];
        let io = st.next_io();
        let lag = now.saturating_sub(intended);
        st.interval.lag_max_ns = st.interval.lag_max_ns.max(lag);
        if lag > LATE_NS {
            st.interval.ios_issued_late += 1;
        }
        self.lateness.record(lag);
        let group = st.group.as_mut().expect("a group stream");
        group.waiting.push_back(Commit { intended, io });
        group.commits += 1;
    }

    /// With no round in flight, start one: one write of the commits waiting, as many as
    /// follow each other in one file and fit the stream's buffer.
    pub(super) fn group_round(&mut self, s: usize, now: u64) -> Result<()> {
        let st = &mut self.streams[s];
        let limit = st.write_buf_size() as u64;
        let group = st.group.as_mut().expect("a group stream");
        if group.in_flight || group.waiting.is_empty() {
            return Ok(());
        }
        let first = *group.waiting.front().expect("a commit waits");
        // The round writes from the first commit's offset to the end of the last: commits that
        // start where the one before ended, or inside it (a log rewriting its last, partly
        // filled page, as PostgreSQL's WAL does: the learned `skip = "-8k"`), join it.
        let mut len = 0u64;
        while let Some(c) = group.waiting.front() {
            let start = c.io.offset.wrapping_sub(first.io.offset);
            let follows = c.io.file == first.io.file && c.io.offset >= first.io.offset;
            let end = len.max(start.saturating_add(c.io.len as u64));
            if !follows || start > len || (len > 0 && end > limit) {
                break;
            }
            len = end;
            let c = group.waiting.pop_front().expect("a commit waits");
            group.round.push(c);
        }
        group.in_flight = true;
        group.round_submitted = now;
        group.rounds += 1;
        let len = len as u32;
        let mut buf = st.take_buf(OpKind::Write, len);
        let req = IoReq {
            user_data: 0,
            file: first.io.file,
            op: Op::Write,
            buf: buf.as_mut_ptr(),
            len,
            offset: first.io.offset,
            ioprio: first.io.ioprio,
        };
        let slot = self.queue_io(
            s,
            first.io.region,
            OpKind::Write,
            Some(buf),
            req,
            now,
            first.intended,
        )?;
        self.slots[slot as usize].group = true;
        Ok(())
    }

    /// The first pass over a completion of a group stream's round (its write, or its sync):
    /// a failed write, or the sync, ends the round.
    pub(super) fn group_released(&mut self, s: usize, kind: OpKind, result: i32) {
        let group = self.streams[s].group.as_mut().expect("a group stream");
        if kind == OpKind::Write && result >= 0 {
            return; // its sync follows (on_write_done)
        }
        group.in_flight = false;
        group.failed = (result < 0).then_some(-result);
        std::mem::swap(&mut group.ended, &mut group.round);
        group.round.clear();
    }

    /// Count a group stream's completion at `now` (its kind, its result): a round's sync as a
    /// sync and each of its commits as a write (or, failed, an error of each).
    #[cold]
    #[inline(never)]
    pub(super) fn record_group(&mut self, slot: u32, result: i32, now: u64) {
        let slot = &self.slots[slot as usize];
        let st = &mut self.streams[slot.stream as usize];
        let group = st.group.as_mut().expect("a group stream");
        if slot.kind == OpKind::Write && result >= 0 {
            return; // counted with its sync
        }
        let submitted = group.round_submitted;
        let failed = group.failed.take();
        let mut commits = std::mem::take(&mut group.ended);
        if slot.kind == OpKind::Sync {
            super::record(
                st.interval.op(OpKind::Sync),
                result,
                OpKind::Sync,
                now,
                slot,
            );
        }
        record_commits(
            st.interval.op(OpKind::Write),
            &commits,
            failed,
            submitted,
            now,
        );
        commits.clear();
        st.group.as_mut().expect("a group stream").ended = commits; // its room, for next time
    }
}

fn record_commits(
    op: &mut OpStats,
    commits: &[Commit],
    failed: Option<i32>,
    submitted: u64,
    now: u64,
) {
    for c in commits {
        if let Some(errno) = failed {
            op.add_error(errno);
            continue;
        }
        op.count(
            c.io.len as u64,
            now.saturating_sub(submitted),
            Some(now.saturating_sub(c.intended)),
        );
    }
}
