//! `null`: completes every request immediately without IO. Measures the harness itself
//! (op generation, timing, accounting), the counterpart of fio's null ioengine.

use std::io;
use std::time::Duration;

use super::{Backend, Completion, IoReq, Op};

#[derive(Default)]
pub struct NullBackend {
    done: Vec<Completion>,
}

impl Backend for NullBackend {
    fn queue(&mut self, req: IoReq) -> io::Result<()> {
        let result = if req.op == Op::Fsync {
            0
        } else {
            req.len as i32
        };
        self.done.push(Completion {
            user_data: req.user_data,
            result,
        });
        Ok(())
    }

    fn submit_and_reap(
        &mut self,
        out: &mut Vec<Completion>,
        _min_complete: usize,
        _timeout: Duration,
    ) -> io::Result<()> {
        out.append(&mut self.done);
        Ok(())
    }
}
