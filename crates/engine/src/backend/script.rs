//! A scripted backend for tests, the counterpart of hyperfine's mock executor: IOs complete
//! after a fixed latency on the run's manual clock, or fail, or never complete, as a test says.
//! Waiting advances the manual clock to the next completion or the deadline, so a run is a
//! deterministic discrete-event simulation: tests count IOs instead of timing them.

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex};

use super::{Backend, Completion, IoReq, Op};
use crate::clock::RunClock;
use crate::stop::StopReason;

/// Simulated time after which a run is taken to be stuck.
const RUNAWAY_NS: u64 = 3_600_000_000_000;

/// How a scripted backend treats the requests it is given.
#[derive(Clone, Debug, Default)]
pub struct Script {
    /// Time from submission to completion, ns.
    pub latency_ns: u64,
    /// Fail every n-th data request (1-based) with `fail_errno`; 0 = never.
    pub fail_every: u64,
    pub fail_errno: i32,
    /// Requests from this one on (0-based, data and fsync) never complete.
    pub hang_from: Option<u64>,
    /// Call stop() on the run once its clock reaches this time, as a user would.
    pub stop_at_ns: Option<u64>,
    /// Requests of this IO priority take this time instead of `latency_ns`.
    pub prio_latency: Option<(u16, u64)>,
}

/// What a test can inspect after (or during) a run.
#[derive(Debug, Default)]
pub struct Log {
    /// Requests taken, by op.
    pub reads: u64,
    pub writes: u64,
    pub fsyncs: u64,
    pub discards: u64,
    /// Every request in the order taken: (op, offset, len, file).
    pub requests: Vec<(Op, u64, u32, u32)>,
    /// Run time at which each request was taken (submitted), in the same order.
    pub times: Vec<u64>,
    /// Of those: fdatasyncs; and of the writes: uncached page-cache writes.
    pub fdatasyncs: u64,
    pub uncached_writes: u64,
    /// Calls to `submit`, and those that waited.
    pub submits: u64,
    pub waits: u64,
    /// Offsets of the data requests in the order taken.
    pub offsets: Vec<u64>,
    /// File-table index of every request (data and fsync) in the order taken.
    pub files: Vec<u32>,
    /// Requests given to the backend that have not completed.
    pub outstanding: u64,
}

pub struct ScriptBackend {
    script: Script,
    log: Arc<Mutex<Log>>,
    /// Queued since the last submit (the buffer is never touched, so not kept), with the
    /// time each will take.
    queued: Vec<(u64, Op, u32, u64, u32, u64)>,
    /// Submitted: (completion time or None for never, completion), in submission order.
    inflight: VecDeque<(Option<u64>, Completion)>,
    taken: u64,
    data_taken: u64,
}

impl ScriptBackend {
    pub fn new(script: Script) -> (Self, Arc<Mutex<Log>>) {
        let log = Arc::new(Mutex::new(Log::default()));
        let backend = ScriptBackend {
            script,
            log: log.clone(),
            queued: Vec::new(),
            inflight: VecDeque::new(),
            taken: 0,
            data_taken: 0,
        };
        (backend, log)
    }

    fn collect(&mut self, now: u64, out: &mut Vec<Completion>) {
        let before = out.len();
        self.inflight.retain(|&(at, c)| {
            if at.is_some_and(|t| t <= now) {
                out.push(c);
                false
            } else {
                true
            }
        });
        self.log.lock().unwrap().outstanding -= (out.len() - before) as u64;
    }
}

impl Backend for ScriptBackend {
    fn queue(&mut self, req: IoReq) -> io::Result<()> {
        let latency = match self.script.prio_latency {
            Some((prio, ns)) if prio == req.ioprio => ns,
            _ => self.script.latency_ns,
        };
        self.queued.push((
            req.user_data,
            req.op,
            req.len,
            req.offset,
            req.file,
            latency,
        ));
        Ok(())
    }

    fn submit(
        &mut self,
        out: &mut Vec<Completion>,
        wait_until: Option<u64>,
        clock: &RunClock,
    ) -> io::Result<()> {
        let now = clock.now();
        let mut log = self.log.lock().unwrap();
        log.submits += 1;
        for (user_data, op, len, offset, file, latency) in self.queued.drain(..) {
            log.files.push(file);
            log.requests.push((op, offset, len, file));
            log.times.push(now);
            let hangs = self.script.hang_from.is_some_and(|h| self.taken >= h);
            self.taken += 1;
            let mut result = len as i32;
            match op {
                Op::Read => log.reads += 1,
                Op::Write => log.writes += 1,
                Op::WriteUncached => {
                    log.writes += 1;
                    log.uncached_writes += 1;
                }
                Op::Fdatasync => {
                    log.fsyncs += 1;
                    log.fdatasyncs += 1;
                    result = 0;
                }
                Op::Fsync => {
                    log.fsyncs += 1;
                    result = 0;
                }
                Op::Discard => {
                    log.discards += 1;
                    result = 0;
                }
            }
            if op.moves_data() {
                log.offsets.push(offset);
                self.data_taken += 1;
                let every = self.script.fail_every;
                if every > 0 && self.data_taken % every == 0 {
                    result = -self.script.fail_errno;
                }
            }
            let at = (!hangs).then_some(now + latency);
            let completion = Completion { user_data, result };
            self.inflight.push_back((at, completion));
            log.outstanding += 1;
        }
        drop(log);
        self.collect(now, out);
        if let (true, Some(deadline)) = (out.is_empty(), wait_until) {
            self.log.lock().unwrap().waits += 1;
            let next = self.inflight.iter().filter_map(|&(at, _)| at).min();
            clock.advance_to(next.map_or(deadline, |t| t.min(deadline)));
            self.collect(clock.now(), out);
        }
        // A run that should have ended makes its test fail rather than hang.
        assert!(
            clock.now() < RUNAWAY_NS,
            "the simulated run did not end within an hour"
        );
        if self.script.stop_at_ns.is_some_and(|t| clock.now() >= t) {
            clock.stop.stop(StopReason::Requested);
        }
        Ok(())
    }
}
