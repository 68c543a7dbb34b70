//! Verification in the worker: a write's blocks get their headers (and generations) as it is
//! issued; a read's blocks are judged after the next submit, like statistics, while the device
//! works. Nothing here runs for a target without verification.

use std::time::{SystemTime, UNIX_EPOCH};

use super::Worker;
use crate::buf::AlignedBuf;
use crate::stats::OpKind;
use crate::verify::{block, TargetVerify, Word};

/// What an IO to a verified target covers, kept in its slot until it completes.
pub struct IoCheck {
    /// Index of the target in the worker's `verify` table.
    target: usize,
    first_block: usize,
    blocks: usize,
    write: bool,
    /// Reads: each block's word at issue.
    words: Vec<u32>,
}

pub fn unix_now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Worker {
    /// Stamp a write's blocks, or note what a read's blocks held, before the IO is queued.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn verify_issue(
        &mut self,
        target: usize,
        buf: &mut AlignedBuf,
        kind: OpKind,
        abs_offset: u64,
        len: u32,
        stream: usize,
        dsync: bool,
        now: u64,
    ) -> Option<Box<IoCheck>> {
        let v: &TargetVerify = self.verify[target].as_ref().expect("a verified target");
        let blocks = v.blocks(abs_offset - v.offset, len);
        let write = kind == OpKind::Write;
        if !write && !v.check_reads {
            return None;
        }
        let mut check = self.spare_checks.pop().unwrap_or_else(|| {
            Box::new(IoCheck {
                target: 0,
                first_block: 0,
                blocks: 0,
                write: false,
                words: Vec::new(),
            })
        });
        check.target = target;
        check.first_block = blocks.start;
        check.blocks = blocks.len();
        check.write = write;
        check.words.clear();
        if write {
            let b = v.block;
            let unix_s = (self.unix_zero_s + now / 1_000_000_000) as u32;
            let stream = stream.min(0xFFFD) as u16;
            let data = buf.as_mut_slice();
            for (i, blk) in blocks.enumerate() {
                let bytes = &mut data[i * b..(i + 1) * b];
                let pool = block::is_pool(bytes);
                let gen = v.table.begin_write(blk, pool, dsync);
                if pool {
                    block::retarget_pool(bytes, v.spec.target_id);
                } else {
                    let at = (blk * b) as u64;
                    block::stamp(
                        bytes,
                        v.spec.target_id,
                        at,
                        v.spec.epoch,
                        gen as u32,
                        stream,
                        unix_s,
                    );
                }
            }
        } else {
            check.words.extend(blocks.map(|blk| v.table.word(blk).0));
        }
        Some(check)
    }

    /// Settle the writes and judge the reads among the released completions (their slots
    /// still hold them). Returns the findings added.
    pub(super) fn check_released(&mut self, now: u64) -> u64 {
        let before = self.findings.total;
        for i in 0..self.released.len() {
            let c = self.released[i];
            let slot = &mut self.slots[c.user_data as usize];
            let Some(check) = slot.check.take() else {
                continue;
            };
            let v = self.verify[check.target]
                .as_ref()
                .expect("a verified target");
            let whole = c.result == slot.len as i32;
            let blocks = check.first_block..check.first_block + check.blocks;
            if check.write {
                for blk in blocks {
                    v.table.end_write(blk, whole);
                }
            } else {
                let buf = slot
                    .buf
                    .take()
                    .expect("a read being judged keeps its buffer");
                let stream = slot.stream as usize;
                if whole {
                    let data = buf.as_slice();
                    for (k, blk) in blocks.enumerate() {
                        let (w0, w1) = (Word(check.words[k]), v.table.word(blk));
                        // Judged only if no write was in flight at issue and none since.
                        let still = w1.gen() == w0.gen()
                            && w1.written() == w0.written()
                            && w1.inflight() == 0;
                        match v.expect(w0).filter(|_| still) {
                            Some(want) => v.judge_read(
                                &data[k * v.block..(k + 1) * v.block],
                                blk,
                                want,
                                self.streams[stream].index,
                                now,
                                &mut self.findings,
                            ),
                            None => self.findings.skipped += 1,
                        }
                    }
                }
                self.streams[stream].return_buf(OpKind::Read, buf, 0);
            }
            self.spare_checks.push(check);
        }
        self.findings.total - before
    }
}
