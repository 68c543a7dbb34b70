//! `psync`: portable pread/pwrite/fsync on a pool of worker threads, one request per worker at a
//! time, so `max_inflight` workers give a real queue depth without any async IO interface.

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Backend, Completion, IoReq, Op};
use crate::clock::RunClock;

/// Workers per engine thread at most; deeper queues wait in the request queue.
const MAX_WORKERS: usize = 256;

struct Shared {
    requests: Mutex<(VecDeque<SendReq>, bool)>,
    request_ready: Condvar,
    completions: Mutex<Vec<Completion>>,
    completion_ready: Condvar,
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
}

impl PsyncBackend {
    pub fn new(files: &[RawFd], max_inflight: usize) -> Self {
        let shared = Arc::new(Shared {
            requests: Mutex::new((VecDeque::new(), false)),
            request_ready: Condvar::new(),
            completions: Mutex::new(Vec::new()),
            completion_ready: Condvar::new(),
        });
        let workers = (0..max_inflight.clamp(1, MAX_WORKERS))
            .map(|_| {
                let shared = shared.clone();
                let files = files.to_vec();
                std::thread::spawn(move || worker(&shared, &files))
            })
            .collect();
        PsyncBackend {
            shared,
            pending: Vec::new(),
            workers,
        }
    }
}

fn worker(shared: &Shared, files: &[RawFd]) {
    loop {
        let req = {
            let mut q = shared.requests.lock().unwrap();
            loop {
                if let Some(r) = q.0.pop_front() {
                    break r.0;
                }
                if q.1 {
                    return;
                }
                q = shared.request_ready.wait(q).unwrap();
            }
        };
        let fd = files[req.file as usize];
        // SAFETY: buf is valid for len bytes until this completion is reaped (see SendReq).
        let ret = unsafe {
            match req.op {
                Op::Read => libc::pread(fd, req.buf.cast(), req.len as usize, req.offset as i64),
                Op::Write => libc::pwrite(fd, req.buf.cast(), req.len as usize, req.offset as i64),
                Op::Fsync => libc::fsync(fd) as isize,
            }
        };
        let result = if ret < 0 {
            -io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO)
        } else {
            ret as i32
        };
        shared.completions.lock().unwrap().push(Completion {
            user_data: req.user_data,
            result,
        });
        shared.completion_ready.notify_one();
    }
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
            while done.is_empty() {
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
        out.append(&mut done);
        Ok(())
    }
}

impl Drop for PsyncBackend {
    fn drop(&mut self) {
        self.shared.requests.lock().unwrap().1 = true;
        self.shared.request_ready.notify_all();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}
