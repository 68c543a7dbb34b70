//! `uring`: io_uring, one ring per engine thread, files registered once so the kernel skips the
//! per-IO file lookup. Submission and completion share one `io_uring_enter` per loop turn.
//!
//! Every `unsafe` push into the submission queue is in `push`, with its SAFETY note.

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use io_uring::{opcode, squeue, types, IoUring};

use super::{Backend, Completion, IoReq, Op};

/// io_uring_enter flag: process completions (and deferred task work) before returning.
const IORING_ENTER_GETEVENTS: u32 = 1;

pub struct UringBackend {
    ring: IoUring,
    /// Spin this long for completions before sleeping (0 = never spin).
    poll: Duration,
}

impl UringBackend {
    /// Set up a ring. Must be called on the thread that will use it: the ring is created
    /// single-issuer with deferred task work (as fio does), so completion work runs only when
    /// this thread asks for events, not as interrupts to whatever it is doing.
    pub fn new(files: &[RawFd], max_inflight: usize, poll: Duration) -> io::Result<Self> {
        let entries = (max_inflight.max(8) as u32).next_power_of_two().min(4096);
        // Completions may exceed the SQ size when many streams are open loop; let the kernel
        // keep overflowed CQEs rather than drop them (NODROP is default since 5.5).
        let tuned = IoUring::builder()
            .setup_cqsize(entries * 4)
            .setup_coop_taskrun()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(entries);
        // Kernels before 6.1 lack DEFER_TASKRUN: fall back to a plain ring.
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
        Ok(UringBackend { ring, poll })
    }

    fn push(&mut self, entry: &squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: the buffer named in `entry` is owned by the engine's slot table and neither
            // moved nor freed until this request's completion has been reaped (worker.rs).
            let pushed = unsafe { self.ring.submission().push(entry) };
            if pushed.is_ok() {
                return Ok(());
            }
            // SQ full: hand what we have to the kernel and retry.
            self.ring.submit()?;
        }
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

    fn submit_and_reap(
        &mut self,
        out: &mut Vec<Completion>,
        min_complete: usize,
        timeout: Duration,
    ) -> io::Result<()> {
        // Submit, and run deferred completion work without waiting: often enough has completed
        // already and the thread need not sleep (a wake-up from idle costs tens of
        // microseconds in a VM).
        let pending = self.ring.submission().len() as u32;
        // SAFETY: no argument is passed; the SQ tail was published when the submission queue
        // handle used by `push` was dropped.
        let res = unsafe { self.enter(pending, 0) };
        ok_or_interrupted(res)?;
        if min_complete > 0 && self.ring.completion().len() < min_complete && !timeout.is_zero() {
            // Optional polling: keep asking for completions for up to `poll` before sleeping.
            // Trades CPU for latency on fast devices (--poll-us).
            if !self.poll.is_zero() {
                let started = Instant::now();
                while self.ring.completion().len() < min_complete && started.elapsed() < self.poll {
                    // SAFETY: as above; nothing new to submit.
                    ok_or_interrupted(unsafe { self.enter(0, 0) })?;
                }
            }
            if self.ring.completion().len() < min_complete {
                let ts = types::Timespec::from(timeout);
                let args = types::SubmitArgs::new().timespec(&ts);
                ok_or_interrupted(self.ring.submitter().submit_with_args(min_complete, &args))?;
            }
        }
        out.extend(self.ring.completion().map(|cqe| Completion {
            user_data: cqe.user_data(),
            result: cqe.result(),
        }));
        Ok(())
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
