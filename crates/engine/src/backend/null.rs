//! `null`: completes every request immediately without IO. Measures the harness itself
//! (op generation, timing, accounting), the counterpart of fio's null ioengine.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{Backend, Completion, IoReq};
use crate::clock::RunClock;
use crate::stop::Bell;

#[derive(Default)]
pub struct NullBackend {
    done: Vec<Completion>,
    /// Set by the doorbell (`bell`), which also unparks the waiting thread.
    rung: Arc<AtomicBool>,
}

impl Backend for NullBackend {
    fn queue(&mut self, req: IoReq) -> io::Result<()> {
        let result = if req.op.moves_data() {
            req.len as i32
        } else {
            0
        };
        self.done.push(Completion {
            user_data: req.user_data,
            result,
        });
        Ok(())
    }

    fn submit(
        &mut self,
        out: &mut Vec<Completion>,
        wait_until: Option<u64>,
        clock: &RunClock,
    ) -> io::Result<()> {
        if let (true, Some(deadline)) = (self.done.is_empty(), wait_until) {
            // Nothing can complete later: only time passes, until the deadline or the bell.
            if clock.is_manual() {
                clock.sleep_until(deadline);
            } else {
                while !self.rung.swap(false, Ordering::AcqRel) {
                    let now = clock.now();
                    if now >= deadline {
                        break;
                    }
                    std::thread::park_timeout(Duration::from_nanos(deadline - now));
                }
            }
        }
        if out.is_empty() {
            // The common case: hand over the whole vector instead of copying it.
            std::mem::swap(out, &mut self.done);
        } else {
            out.append(&mut self.done);
        }
        Ok(())
    }

    fn completions_ready(&mut self) -> bool {
        !self.done.is_empty()
    }

    fn bell(&mut self) -> io::Result<Option<Bell>> {
        let (rung, thread) = (self.rung.clone(), std::thread::current());
        Ok(Some(Arc::new(move || {
            rung.store(true, Ordering::Release);
            thread.unpark();
        })))
    }
}
