//! `uring`: io_uring, one ring per engine thread, files registered once so the kernel skips the
//! per-IO file lookup. Submitting, reaping and (when nothing has completed) waiting share one
//! `io_uring_enter` per loop turn.
//!
//! Waits carry no timeout of their own. A wait with a timeout arms and cancels a kernel timer
//! every time the thread sleeps, which in a VM means reprogramming the virtual APIC timer (a
//! VM exit) twice per IO at low queue depth. Instead a timeout request sits in the ring for the
//! next deadline the engine cares about (an interval boundary, an open-loop issue time, or at
//! most 50 ms ahead so a stop request is noticed) and is replaced only when it fires or when an
//! earlier deadline comes up.
//!
//! Every `unsafe` push into the submission queue is in `push`, with its SAFETY note.

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use io_uring::{opcode, squeue, types, IoUring};

use super::{Backend, Completion, IoReq, Op};
use crate::clock::RunClock;

/// io_uring_enter flag: process completions (and deferred task work) before returning.
const IORING_ENTER_GETEVENTS: u32 = 1;
/// `user_data` of a timeout request: this bit plus its index in `timers`. IO requests carry
/// slot numbers, far below it.
const TIMER_TAG: u64 = 1 << 63;
/// At most this many timeout requests in the ring; beyond, a wait passes its own timeout.
const MAX_TIMERS: usize = 4;

pub struct UringBackend {
    ring: IoUring,
    /// Spin this long for completions before sleeping (0 = never spin).
    poll: Duration,
    /// The ring flags pending completion work in the SQ ring (IORING_SETUP_TASKRUN_FLAG).
    taskrun_flag: bool,
    /// CLOCK_MONOTONIC deadlines of the timeout requests in the ring, by slot.
    timers: [Option<u64>; MAX_TIMERS],
    /// Each timeout's timespec, which the kernel reads when it takes the request from the SQ.
    /// The backend is boxed, so these addresses are stable.
    timer_ts: [types::Timespec; MAX_TIMERS],
}

impl UringBackend {
    /// Set up a ring. Must be called on the thread that will use it: the ring is created
    /// single-issuer with deferred task work (as fio does), so completion work runs only when
    /// this thread asks for events, not as interrupts to whatever it is doing.
    pub fn new(files: &[RawFd], max_inflight: usize, poll: Duration) -> io::Result<Self> {
        let entries = ((max_inflight + MAX_TIMERS).max(8) as u32)
            .next_power_of_two()
            .min(4096);
        // Completions may exceed the SQ size when many streams are open loop; let the kernel
        // keep overflowed CQEs rather than drop them (NODROP is default since 5.5).
        let tuned = IoUring::builder()
            .setup_cqsize(entries * 4)
            .setup_coop_taskrun()
            .setup_taskrun_flag()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(entries);
        // Kernels before 6.1 lack DEFER_TASKRUN: fall back to a plain ring.
        let taskrun_flag = tuned.is_ok();
        let ring = match tuned {
            Ok(ring) => ring,
            Err(_) => IoUring::builder()
                .setup_cqsize(entries * 4)
                .build(entries)
                .map_err(|e| io::Error::new(e.kind(), format!("io_uring setup failed: {e}")))?,
        };
        if !files.is_empty() {
            ring.submitter().register_files(files)?;
        }
        Ok(UringBackend {
            ring,
            poll,
            taskrun_flag,
            timers: [None; MAX_TIMERS],
            timer_ts: std::array::from_fn(|_| types::Timespec::new()),
        })
    }

    fn push(&mut self, entry: &squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: the buffer named in `entry` is owned by the engine's slot table and neither
            // moved nor freed until this request's completion has been reaped (worker.rs). A
            // timeout's timespec is its `timer_ts` slot, rewritten only after its completion.
            let pushed = unsafe { self.ring.submission().push(entry) };
            if pushed.is_ok() {
                return Ok(());
            }
            // SQ full: hand what we have to the kernel and retry.
            self.ring.submit()?;
        }
    }

    /// Make sure a timeout request fires by `deadline` (CLOCK_MONOTONIC ns). False if too many
    /// are pending already; the caller then waits with its own timeout.
    fn arm_timer(&mut self, deadline: u64) -> io::Result<bool> {
        if self.timers.iter().flatten().any(|&t| t <= deadline) {
            return Ok(true);
        }
        let Some(i) = self.timers.iter().position(Option::is_none) else {
            return Ok(false);
        };
        self.timer_ts[i] = types::Timespec::new()
            .sec(deadline / 1_000_000_000)
            .nsec((deadline % 1_000_000_000) as u32);
        let entry = opcode::Timeout::new(&self.timer_ts[i])
            .flags(types::TimeoutFlags::ABS)
            .build()
            .user_data(TIMER_TAG | i as u64);
        self.push(&entry)?;
        self.timers[i] = Some(deadline);
        Ok(true)
    }

    fn submit_pending(&mut self) -> io::Result<()> {
        let pending = self.ring.submission().len() as u32;
        // SAFETY: no argument is passed; published entries reference live buffers (see push).
        ok_or_interrupted(unsafe { self.enter(pending, 0) })
    }

    /// Move completions from the CQ to `out`; fired timers leave the pending list.
    fn reap(&mut self, out: &mut Vec<Completion>) {
        for cqe in self.ring.completion() {
            let user_data = cqe.user_data();
            if user_data & TIMER_TAG != 0 {
                self.timers[(user_data & !TIMER_TAG) as usize] = None;
            } else {
                out.push(Completion {
                    user_data,
                    result: cqe.result(),
                });
            }
        }
    }

    fn cq_empty(&mut self) -> bool {
        self.ring.completion().is_empty()
    }
}

impl Backend for UringBackend {
    fn queue(&mut self, req: IoReq) -> io::Result<()> {
        let fd = types::Fixed(req.file);
        let entry = match req.op {
            Op::Read => opcode::Read::new(fd, req.buf, req.len)
                .offset(req.offset)
                .build(),
            Op::Write => opcode::Write::new(fd, req.buf, req.len)
                .offset(req.offset)
                .build(),
            Op::Fsync => opcode::Fsync::new(fd).build(),
        };
        self.push(&entry.user_data(req.user_data))
    }

    fn submit(
        &mut self,
        out: &mut Vec<Completion>,
        wait_until: Option<u64>,
        clock: &RunClock,
    ) -> io::Result<()> {
        let Some(deadline) = wait_until else {
            // Submit, and run deferred completion work without waiting.
            self.submit_pending()?;
            self.reap(out);
            return Ok(());
        };
        if !self.poll.is_zero() {
            // Optional polling: keep asking for completions for up to `poll` before sleeping.
            // Trades CPU for latency on fast devices (--poll-us).
            self.submit_pending()?;
            let started = Instant::now();
            while self.cq_empty() && started.elapsed() < self.poll {
                self.submit_pending()?;
            }
        }
        if self.cq_empty() {
            let deadline = clock.to_monotonic(deadline);
            if self.arm_timer(deadline)? {
                // One system call submits, runs completion work, and sleeps only if nothing
                // has completed; the timeout request bounds the sleep.
                let pending = self.ring.submission().len() as u32;
                // SAFETY: as in submit_pending.
                ok_or_interrupted(unsafe { self.enter(pending, 1) })?;
            } else {
                let left = deadline.saturating_sub(crate::clock::monotonic_ns());
                let ts = types::Timespec::from(Duration::from_nanos(left));
                let args = types::SubmitArgs::new().timespec(&ts);
                ok_or_interrupted(self.ring.submitter().submit_with_args(1, &args))?;
            }
        }
        self.reap(out);
        Ok(())
    }

    fn completions_ready(&mut self) -> bool {
        // With deferred task work a finished IO shows in the CQ only after the next enter; the
        // kernel flags pending completion work in the SQ ring, readable without a system call.
        !self.taskrun_flag || self.ring.submission().taskrun() || !self.cq_empty()
    }
}

impl UringBackend {
    /// io_uring_enter with GETEVENTS, so deferred completion work runs.
    ///
    /// # Safety
    /// The submission queue's published entries must reference live buffers.
    unsafe fn enter(&self, to_submit: u32, min_complete: u32) -> io::Result<usize> {
        self.ring.submitter().enter::<libc::sigset_t>(
            to_submit,
            min_complete,
            IORING_ENTER_GETEVENTS,
            None,
        )
    }
}

/// Timeouts and interruptions of a wait are not errors: the loop just goes round again.
fn ok_or_interrupted(res: io::Result<usize>) -> io::Result<()> {
    match res {
        Ok(_) => Ok(()),
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ETIME | libc::EINTR | libc::EBUSY)
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}
