//! The geometry of a block tilemark writes: its size in 512-byte sectors, where the
//! verification header and sector stamps sit, and how many random bytes each sector carries.
//! Both the write data (data.rs) and the verification format (verify/block.rs) build on it;
//! it depends on neither.

pub const SECTOR: usize = 512;
/// Bytes of the verification header at the start of a verified block (verify/block.rs).
pub const HEADER_LEN: usize = 64;
/// Bytes of the stamp at the start of every other sector of a verified block.
pub const STAMP_LEN: usize = 8;

/// How the bytes of one block are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Block size in bytes: a multiple of 512, at most MAX_BLOCK.
    pub block: usize,
    /// Blocks carry a verification header and sector stamps.
    pub verify: bool,
    /// Random bytes per block (a multiple of 8), spread over the sectors; the rest is zeros.
    pub rand_bytes: usize,
}

impl Layout {
    /// The layout for a compressible share `compress_pct` (0..100) of each block.
    pub fn new(block: usize, compress_pct: f64, verify: bool) -> Layout {
        let overhead = Self::overhead_of(block, verify);
        let incompressible =
            (block as f64 * (100.0 - compress_pct) / 100.0 / 8.0).round() as usize * 8;
        let rand_bytes = incompressible
            .saturating_sub(overhead)
            .min(block - overhead);
        Layout {
            block,
            verify,
            rand_bytes,
        }
    }

    /// Bytes of a block taken by the verification header and stamps.
    pub fn overhead_of(block: usize, verify: bool) -> usize {
        if verify {
            HEADER_LEN + STAMP_LEN * (block / SECTOR - 1)
        } else {
            0
        }
    }

    pub fn sectors(&self) -> usize {
        self.block / SECTOR
    }

    /// Where sector `s`'s own bytes begin (after the header or stamp).
    fn sector_start(&self, s: usize) -> usize {
        let skip = match (self.verify, s) {
            (false, _) => 0,
            (true, 0) => HEADER_LEN,
            (true, _) => STAMP_LEN,
        };
        s * SECTOR + skip
    }

    /// The random run of each sector as (start, length) in the block: the random bytes spread
    /// as evenly as 8-byte words allow, earlier sectors taking the remainder.
    pub fn random_runs(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let sectors = self.sectors();
        let mut left = self.rand_bytes;
        (0..sectors).map(move |s| {
            let start = self.sector_start(s);
            let capacity = (s + 1) * SECTOR - start;
            let share = (left / 8).div_ceil(sectors - s) * 8;
            let len = share.min(capacity).min(left);
            left -= len;
            (start, len)
        })
    }
}

/// What one prepared block is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKind {
    Unique,
    Pool(u64),
}
