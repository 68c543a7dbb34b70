//! IO backends behind one small interface, in fio's queue/commit/reap shape.
//!
//! A backend takes requests (`queue`), hands them to the kernel (`submit`, which also collects
//! the completions already available, so the common case is one system call per loop turn),
//! waits for completions when there is nothing else to do (`wait`), and reports completions by
//! `user_data`. Each backend is one file and owns its own options.

#[cfg(test)]
mod bell_tests;
#[cfg(test)]
mod ioprio_tests;
pub(crate) mod judge;
pub mod null;
pub mod psync;
#[cfg(test)]
pub mod script;
#[cfg(test)]
mod sqpoll_tests;
#[cfg(test)]
mod uncached_tests;
pub mod uring;

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::clock::RunClock;
use crate::plan::BackendKind;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Read,
    Write,
    Fsync,
    /// Give `[offset, offset + len)` back: a hole punched in a file, a discard on a block
    /// device (`discard_request` says which, per file).
    Discard,
    /// fdatasync (a stream's `fsync` with `data`).
    Fdatasync,
    /// A page-cache write whose writeback starts at once, without the sync flag
    /// (`UncachedKind`: RWF_DONTCACHE, or a write and sync_file_range).
    WriteUncached,
}

/// RWF_DONTCACHE (linux/fs.h, Linux 6.14): uncached buffered IO.
pub const RWF_DONTCACHE: i32 = 0x80;

impl Op {
    /// True for the flushes: fsync and fdatasync.
    pub fn is_sync(self) -> bool {
        matches!(self, Op::Fsync | Op::Fdatasync)
    }

    /// True for the ops that carry a buffer: reads and writes of any kind.
    pub fn moves_data(self) -> bool {
        matches!(self, Op::Read | Op::Write | Op::WriteUncached)
    }
}

/// How a backend asks the kernel to discard a byte range of a file or block device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiscardKind {
    /// fallocate(PUNCH_HOLE | KEEP_SIZE): a file's blocks are freed, reads return zeros.
    PunchHole,
    /// A block device's discard (BLKDISCARD; io_uring's BLOCK_URING_CMD_DISCARD).
    BlockDiscard,
}

/// fallocate mode of a discard on a file.
pub(crate) const PUNCH_HOLE_MODE: i32 = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;

/// How `fd` is discarded: a block device by its discard, anything else by punching a hole.
pub fn discard_kind(fd: RawFd) -> DiscardKind {
    // SAFETY: fstat writes into a zeroed stat owned here; an invalid fd only makes it fail.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::fstat(fd, &mut st) } == 0;
    if ok && st.st_mode & libc::S_IFMT == libc::S_IFBLK {
        DiscardKind::BlockDiscard
    } else {
        DiscardKind::PunchHole
    }
}

/// How a file's uncached page-cache writes (`Op::WriteUncached`) are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UncachedKind {
    /// One write with RWF_DONTCACHE (Linux 6.14; ext4, xfs, btrfs): the kernel starts the
    /// range's writeback at once and drops its pages once written.
    Dontcache,
    /// Where RWF_DONTCACHE is refused (block devices, tmpfs, kernels before 6.14): a plain
    /// page-cache write, then sync_file_range(SYNC_FILE_RANGE_WRITE) of its range, which starts
    /// the writeback at once in the same way (WB_SYNC_NONE: the requests carry no sync flag).
    /// The pages stay cached, clean, until the kernel reclaims them.
    SyncRange,
}

/// How `fd`'s uncached writes are made: a one-byte page-cache read with RWF_DONTCACHE tells
/// whether the file takes the flag (the kernel checks it before anything else, for reads and
/// writes alike; past the end of a file the read returns 0). Nothing is written.
pub fn uncached_kind(fd: RawFd) -> UncachedKind {
    let mut byte = 0u8;
    let iov = libc::iovec {
        iov_base: (&mut byte as *mut u8).cast(),
        iov_len: 1,
    };
    // SAFETY: the iovec names one writable byte owned here; an unsuitable fd only fails.
    let ret = unsafe { libc::preadv2(fd, &iov, 1, 0, RWF_DONTCACHE) };
    if ret >= 0 {
        UncachedKind::Dontcache
    } else {
        UncachedKind::SyncRange
    }
}

/// sync_file_range's flag that starts the writeback of a range's dirty pages without waiting.
pub(crate) const SYNC_RANGE_WRITE: u32 = libc::SYNC_FILE_RANGE_WRITE;

/// One IO request. `buf` must stay valid until the request's completion is reaped.
#[derive(Clone, Copy, Debug)]
pub struct IoReq {
    pub user_data: u64,
    /// Index into the file table given to `open_backend`.
    pub file: u32,
    pub op: Op,
    pub buf: *mut u8,
    pub len: u32,
    pub offset: u64,
    /// IO priority (IOPRIO_PRIO_VALUE) of a read or write; 0: the thread's own. io_uring
    /// carries it in the SQE; psync sets it on its worker thread (ioprio_set) when it changes.
    pub ioprio: u16,
}

#[derive(Clone, Copy, Debug)]
pub struct Completion {
    pub user_data: u64,
    /// Bytes transferred, or a negative errno.
    pub result: i32,
}

pub trait Backend: Send {
    /// Accept a request. It reaches the device at the next `submit_and_reap` at the latest.
    fn queue(&mut self, req: IoReq) -> io::Result<()>;

    /// Hand queued requests to the device and collect into `out` the completions already
    /// available. With `wait_until`, if none is available, first wait until at least one is or
    /// until `clock` reaches that run time; an early return with none is allowed (the caller
    /// goes round its loop again), a return much later than the deadline is not.
    fn submit(
        &mut self,
        out: &mut Vec<Completion>,
        wait_until: Option<u64>,
        clock: &RunClock,
    ) -> io::Result<()>;

    /// Would `submit` find completions now? A cheap check for a thread that spins instead of
    /// sleeping; may say yes spuriously, never no when one is ready.
    fn completions_ready(&mut self) -> bool {
        true
    }

    /// A doorbell another thread rings to end this backend's wait in `submit` at once (an
    /// early return with no completion), so a stream stopped or ended on another engine thread
    /// is seen now, not at the next deadline (stop.rs). Called on the thread that waits.
    fn bell(&mut self) -> io::Result<Option<crate::stop::Bell>> {
        Ok(None)
    }

    /// How long it ran with spinning allowed and with batched submissions (backends with a
    /// judge: uring.rs); None for the others.
    fn mode_shares(&self) -> Option<judge::ModeShares> {
        None
    }
}

/// Queue `req`, submit, and wait (up to 5 s) for its completion: backend tests.
#[cfg(test)]
pub(crate) fn complete_one(backend: &mut dyn Backend, req: IoReq) -> Completion {
    use crate::clock::monotonic_ns;
    let clock = RunClock::monotonic(monotonic_ns(), 0, None, 1_000_000_000);
    backend.queue(req).unwrap();
    let mut out: Vec<Completion> = Vec::new();
    let deadline = monotonic_ns() + 5_000_000_000;
    while out.is_empty() && monotonic_ns() < deadline {
        backend
            .submit(&mut out, Some(clock.now() + 10_000_000), &clock)
            .unwrap();
    }
    assert_eq!(out.len(), 1, "one completion for request {}", req.user_data);
    assert_eq!(out[0].user_data, req.user_data);
    out[0]
}

/// Open a backend serving the given files, sized for `max_inflight` concurrent requests.
/// `poll` is how long the uring backend may spin for completions before sleeping.
pub fn open_backend(
    kind: BackendKind,
    files: &[RawFd],
    max_inflight: usize,
    poll: Duration,
    sqpoll: bool,
) -> io::Result<Box<dyn Backend>> {
    Ok(match kind {
        BackendKind::Uring => Box::new(uring::UringBackend::with_sqpoll(
            files,
            max_inflight,
            poll,
            sqpoll,
        )?),
        BackendKind::Psync => Box::new(psync::PsyncBackend::new(files, max_inflight)?),
        BackendKind::Null => Box::new(null::NullBackend::default()),
    })
}

/// Let another thread that is ready to run on this CPU run first (returns at once if none is):
/// a thread that spins, waiting for a completion or an issue time, must not hold up the
/// device's completion work when that runs on the same CPU (bench/README.md).
pub(crate) fn yield_cpu() {
    // SAFETY: sched_yield takes no arguments and only affects this thread's scheduling.
    unsafe { libc::sched_yield() };
}
