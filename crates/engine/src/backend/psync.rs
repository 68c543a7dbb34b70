//! `psync`: portable pread/pwrite/fsync on a pool of worker threads, one request per worker at a
//! time, so `max_inflight` workers give a real queue depth without any async IO interface.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{
    discard_kind, uncached_kind, Backend, Completion, DiscardKind, IoReq, Op, UncachedKind,
    PUNCH_HOLE_MODE, SYNC_RANGE_WRITE,
};
use crate::clock::RunClock;
use crate::stop::Bell;

/// Workers per engine thread at most; deeper queues wait in the request queue.
const MAX_WORKERS: usize = 256;
/// The block device discard ioctl, `_IO(0x12, 119)`: takes [start, length] in bytes.
const BLKDISCARD: libc::c_ulong = 0x1277;

struct Shared {
    requests: Mutex<(VecDeque<SendReq>, bool)>,
    request_ready: Condvar,
    completions: Mutex<Vec<Completion>>,
    completion_ready: Condvar,
    /// The doorbell rang (`bell`): the engine thread's wait returns without a completion.
    rung: AtomicBool,
}

#[derive(Clone, Copy)]
struct SendReq(IoReq);
// SAFETY: the buffer pointer is owned by the engine thread, which keeps it alive and untouched
// until this request's completion is reaped.
unsafe impl Send for SendReq {}

pub struct PsyncBackend {
    shared: Arc<Shared>,
    pending: Vec<SendReq>,
    workers: Vec<JoinHandle<()>>,
    /// Requests handed to the workers and not yet reaped.
    outstanding: usize,
}

impl PsyncBackend {
    /// The workers use their own duplicates of `files`, shared among them and closed when the
    /// last worker exits: a worker detached while stuck in a system call (see Drop) keeps its
    /// file open, so the fd number cannot be reused for another file under it.
    pub fn new(files: &[RawFd], max_inflight: usize) -> io::Result<Self> {
        let files: Arc<Vec<WorkerFile>> = Arc::new(
            files
                .iter()
                .map(|&fd| {
                    // SAFETY: fcntl(F_DUPFD_CLOEXEC) on a valid fd returns a new fd we own.
                    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
                    if dup < 0 {
                        return Err(io::Error::last_os_error());
                    }
                    // SAFETY: dup is a fresh fd owned by nobody else.
                    Ok(WorkerFile {
                        fd: unsafe { OwnedFd::from_raw_fd(dup) },
                        discard: discard_kind(fd),
                        uncached: OnceLock::new(),
                    })
                })
                .collect::<io::Result<_>>()?,
        );
        let shared = Arc::new(Shared {
            requests: Mutex::new((VecDeque::new(), false)),
            request_ready: Condvar::new(),
            completions: Mutex::new(Vec::new()),
            completion_ready: Condvar::new(),
            rung: AtomicBool::new(false),
        });
        let workers = (0..max_inflight.clamp(1, MAX_WORKERS))
            .map(|_| {
                let shared = shared.clone();
                let files = files.clone();
                std::thread::spawn(move || worker(&shared, &files))
            })
            .collect();
        Ok(PsyncBackend {
            shared,
            pending: Vec::new(),
            workers,
            outstanding: 0,
        })
    }
}

/// ioprio_set(2)'s `which` for one thread (`who` 0: the calling one).
const IOPRIO_WHO_PROCESS: libc::c_int = 1;

/// Give the calling thread IO priority `value` (IOPRIO_PRIO_VALUE): pread and pwrite take no
/// priority of their own, the kernel gives their IO the issuing thread's (init_sync_kiocb).
fn set_thread_ioprio(value: u16) -> io::Result<()> {
    // SAFETY: ioprio_set only changes this thread's IO priority.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            0,
            value as libc::c_int,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A worker's view of one file of the table.
struct WorkerFile {
    fd: OwnedFd,
    discard: DiscardKind,
    /// How its uncached writes are made, probed at the first (backend/mod.rs).
    uncached: OnceLock<UncachedKind>,
}

fn worker(shared: &Shared, files: &[WorkerFile]) {
    // The priority this thread issues at: 0 (none) until a request asks for another.
    let mut ioprio = 0u16;
    loop {
        let req = {
            let mut q = shared.requests.lock().unwrap();
            loop {
                if q.1 {
                    return;
                }
                if let Some(r) = q.0.pop_front() {
                    break r.0;
                }
                q = shared.request_ready.wait(q).unwrap();
            }
        };
        let file = &files[req.file as usize];
        let fd = file.fd.as_raw_fd();
        if req.ioprio != ioprio && req.op.moves_data() {
            if let Err(e) = set_thread_ioprio(req.ioprio) {
                complete(
                    shared,
                    req.user_data,
                    -e.raw_os_error().unwrap_or(libc::EINVAL),
                );
                continue;
            }
            ioprio = req.ioprio;
        }
        // SAFETY: buf is valid for len bytes until this completion is reaped (see SendReq); the
        // discard range is two u64 the ioctl only reads.
        let ret = unsafe {
            match req.op {
                Op::Read => libc::pread(fd, req.buf.cast(), req.len as usize, req.offset as i64),
                Op::Write => libc::pwrite(fd, req.buf.cast(), req.len as usize, req.offset as i64),
                Op::WriteUncached => match file.uncached.get_or_init(|| uncached_kind(fd)) {
                    UncachedKind::Dontcache => {
                        let iov = libc::iovec {
                            iov_base: req.buf.cast(),
                            iov_len: req.len as usize,
                        };
                        libc::pwritev2(fd, &iov, 1, req.offset as i64, super::RWF_DONTCACHE)
                    }
                    UncachedKind::SyncRange => {
                        let len = req.len as usize;
                        let n = libc::pwrite(fd, req.buf.cast(), len, req.offset as i64);
                        if n == len as isize {
                            let started = libc::sync_file_range(
                                fd,
                                req.offset as i64,
                                len as i64,
                                SYNC_RANGE_WRITE,
                            );
                            if started < 0 {
                                -1
                            } else {
                                n
                            }
                        } else {
                            n
                        }
                    }
                },
                Op::Fsync => libc::fsync(fd) as isize,
                Op::Discard => match file.discard {
                    DiscardKind::PunchHole => {
                        libc::fallocate(fd, PUNCH_HOLE_MODE, req.offset as i64, req.len as i64)
                            as isize
                    }
                    DiscardKind::BlockDiscard => {
                        let range = [req.offset, req.len as u64];
                        libc::ioctl(fd, BLKDISCARD, range.as_ptr()) as isize
                    }
                },
                Op::Fdatasync => libc::fdatasync(fd) as isize,
            }
        };
        let result = if ret < 0 {
            -io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO)
        } else {
            ret as i32
        };
        complete(shared, req.user_data, result);
    }
}

fn complete(shared: &Shared, user_data: u64, result: i32) {
    shared
        .completions
        .lock()
        .unwrap()
        .push(Completion { user_data, result });
    shared.completion_ready.notify_one();
}

impl Backend for PsyncBackend {
    fn queue(&mut self, req: IoReq) -> io::Result<()> {
        self.pending.push(SendReq(req));
        Ok(())
    }

    fn submit(
        &mut self,
        out: &mut Vec<Completion>,
        wait_until: Option<u64>,
        clock: &RunClock,
    ) -> io::Result<()> {
        if !self.pending.is_empty() {
            let n = self.pending.len();
            self.outstanding += n;
            self.shared
                .requests
                .lock()
                .unwrap()
                .0
                .extend(self.pending.drain(..));
            if n == 1 {
                self.shared.request_ready.notify_one();
            } else {
                self.shared.request_ready.notify_all();
            }
        }
        let mut done = self.shared.completions.lock().unwrap();
        if let Some(deadline) = wait_until {
            // The bell's flag is looked at under the lock it takes before notifying: a ring
            // between the look and the wait still wakes it.
            while done.is_empty() && !self.shared.rung.swap(false, Ordering::AcqRel) {
                let now = clock.now();
                if now >= deadline {
                    break;
                }
                done = self
                    .shared
                    .completion_ready
                    .wait_timeout(done, Duration::from_nanos(deadline - now))
                    .unwrap()
                    .0;
            }
        }
        self.outstanding -= done.len();
        out.append(&mut done);
        Ok(())
    }

    fn bell(&mut self) -> io::Result<Option<Bell>> {
        let shared = self.shared.clone();
        Ok(Some(Arc::new(move || {
            shared.rung.store(true, Ordering::Release);
            drop(shared.completions.lock());
            shared.completion_ready.notify_all();
        })))
    }
}

impl Drop for PsyncBackend {
    fn drop(&mut self) {
        let never_started = {
            let mut q = self.shared.requests.lock().unwrap();
            q.1 = true;
            let n = q.0.len();
            q.0.clear();
            n
        };
        self.shared.request_ready.notify_all();
        let finished = self.shared.completions.lock().unwrap().len();
        if self.outstanding > never_started + finished {
            // Some worker is still inside pread/pwrite/fsync on a device that stopped
            // answering (the engine gave up on those IOs and leaked their buffers). Joining
            // would block until the device answers, maybe never: detach the workers instead.
            // Each exits on its own when its call returns and sees the shutdown flag; until
            // then it holds the shared queue and its own duplicates of the files.
            self.workers.clear();
            return;
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}
