//! Write data: what every block tilemark writes holds, so that its compressibility and
//! dedupability are the ones asked for and, with verification, every block can be checked.
//!
//! A block (4 KiB, or the verification block size) is laid out per 512-byte sector: an optional
//! verification header (sector 0) or stamp (other sectors), a run of random bytes, then zeros.
//! The random bytes of a block come from one 64-bit *key* drawn fresh for every block written:
//! word `i` of the block is `POOL[base(key) + i] ^ key`, where POOL is 1 MiB of random words
//! from a fixed seed. Two blocks share no run of bytes longer than chance allows (their keys
//! differ), so no compressor finds more than the zeros, whatever its window; the key alone
//! regenerates a block's random bytes, which is what lets verification tell a torn block
//! (sectors of two writes) from a corrupt one.
//!
//! `compress_pct` is the share of each block that is zeros, counting the verification header and
//! stamps as incompressible. `dedupe_ratio` R makes an exact share of the blocks copies of
//! *pool blocks* (content fixed by a pool index), so blocks written / distinct blocks = R over a
//! region written once; see `DedupePlan`.

use std::sync::OnceLock;

pub use crate::layout::{BlockKind, Layout, SECTOR};
use crate::rng::Rng;
use crate::verify::block as header;

/// Largest verification block: 64 KiB (the target's O_DIRECT alignment when larger than 4 KiB).
pub const MAX_BLOCK: usize = 64 << 10;
const POOL_WORDS: usize = 1 << 17;
const POOL_SEED: u64 = 0x746d_2d70_6f6f_6c01;
/// Each pool block is written about this many times over a region written once.
const DEDUPE_REUSE: f64 = 64.0;

/// The random words every block's content is drawn from. Fixed for all time: blocks written by
/// any tilemark version with this format regenerate from it.
fn pool() -> &'static [u64] {
    static POOL: OnceLock<Vec<u64>> = OnceLock::new();
    POOL.get_or_init(|| {
        let mut rng = Rng::new(POOL_SEED);
        (0..POOL_WORDS + MAX_BLOCK / 8)
            .map(|_| rng.next_u64())
            .collect()
    })
}

/// A 64-bit mix (splitmix64's finalizer): unrelated outputs for nearby inputs.
#[inline]
pub fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Where a block's random words start in the pool.
#[inline]
fn pool_base(key: u64) -> usize {
    (mix64(key) % POOL_WORDS as u64) as usize
}

impl Layout {
    /// Write the random runs of a block with `key` (zeros elsewhere are left as they are: a
    /// stream's buffers always hold the same layout, so they are zero already).
    pub fn fill_random(&self, block: &mut [u8], key: u64) {
        let base = pool_base(key);
        let pool = pool();
        for (start, len) in self.random_runs() {
            let words = &pool[base + start / 8..base + (start + len) / 8];
            for (dst, w) in block[start..start + len].chunks_exact_mut(8).zip(words) {
                dst.copy_from_slice(&(w ^ key).to_le_bytes());
            }
        }
    }

    /// Do bytes `range` of sector `s` hold what a block with `key` holds there? (Random run as
    /// generated, zeros after it.) Used to judge torn blocks, off the hot path.
    pub fn sector_matches(&self, block: &[u8], s: usize, key: u64) -> bool {
        let (start, len) = self.random_runs().nth(s).expect("sector of the block");
        let base = pool_base(key);
        let pool = pool();
        let words = &pool[base + start / 8..base + (start + len) / 8];
        let random_ok = block[start..start + len]
            .chunks_exact(8)
            .zip(words)
            .all(|(b, w)| u64::from_le_bytes(b.try_into().expect("8 bytes")) == w ^ key);
        random_ok && block[start + len..(s + 1) * SECTOR].iter().all(|&b| b == 0)
    }
}

/// Which blocks of a stream are copies of pool blocks, and of which.
///
/// Over a region of N blocks and a ratio R, P = round(N (1 - 1/R) / 64) pool blocks are used,
/// each about 64 times, and a share f = (1 - 1/R) + P/N of the blocks written are copies,
/// spread exactly (block j is a copy when floor((j+1) f) > floor(j f)) and cycling through the
/// pool in order. A region written once then holds N (1 - f) unique blocks plus the P pool
/// blocks: N / R distinct blocks.
#[derive(Clone, Debug, PartialEq)]
pub struct DedupePlan {
    pub fraction: f64,
    pub pool_blocks: u64,
}

impl DedupePlan {
    /// The plan for a region of `region_blocks`; None when `ratio` <= 1 (nothing repeats).
    pub fn new(ratio: f64, region_blocks: u64) -> Option<DedupePlan> {
        if ratio <= 1.0 || region_blocks == 0 {
            return None;
        }
        let dup_share = 1.0 - 1.0 / ratio;
        let pool_blocks = ((region_blocks as f64 * dup_share / DEDUPE_REUSE).round() as u64).max(1);
        let fraction = (dup_share + pool_blocks as f64 / region_blocks as f64).min(1.0);
        Some(DedupePlan {
            fraction,
            pool_blocks,
        })
    }
}

/// A stream's own dedupe pool (plan field `dedupe_pool`, fio's `dedupe_mode=working_set`):
/// `blocks` pool blocks, the ratio holding over `over_blocks` blocks: the stream's region, or
/// the regions of every stream that shares the pool (fio's `dedupe_global`; unverified blocks
/// have target id 0, so streams asking for the same pool write the same pool blocks).
#[derive(Clone, Copy, Debug, serde::Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DedupePool {
    pub blocks: u64,
    pub over_blocks: u64,
    /// Which pool: streams with the same id (on the same target, or unverified) write the same
    /// pool blocks; 0 is the pool of streams without `dedupe_pool`.
    #[serde(default)]
    pub id: u64,
}

impl DedupePool {
    /// The share of blocks that are copies, (1 - 1/R) + P/N: at most 1 for a valid pool.
    pub fn copy_share(&self, ratio: f64) -> f64 {
        (1.0 - 1.0 / ratio) + self.blocks as f64 / self.over_blocks.max(1) as f64
    }
}

impl DedupePlan {
    /// The plan for a given pool: copies cycle through its `blocks` in order, a share
    /// (1 - 1/R) + P/N of the blocks written, so N blocks written (by every stream sharing the
    /// pool) hold N (1 - f) unique blocks plus the P pool blocks: N / R distinct.
    pub fn with_pool(ratio: f64, pool: DedupePool) -> Option<DedupePlan> {
        if ratio <= 1.0 || pool.blocks == 0 {
            return None;
        }
        Some(DedupePlan {
            fraction: pool.copy_share(ratio).min(1.0),
            pool_blocks: pool.blocks,
        })
    }
}

/// The content key of pool block `k` of a target: the same for every stream and every run.
pub fn pool_key(target_id: u64, k: u64) -> u64 {
    mix64(target_id ^ 0x706f_6f6c_626c_6b00 ^ k.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// Prepares the blocks a stream writes: fresh keys, the dedupe schedule, and (with
/// verification) the parts of the header that do not depend on where the block goes.
#[derive(Clone, Debug)]
pub struct BlockGen {
    pub layout: Layout,
    dedupe: Option<DedupePlan>,
    target_id: u64,
    /// Mixed into pool keys (DedupePool::id): pools of different ids share no block.
    pool_salt: u64,
    rng: Rng,
    blocks: u64,
    copies: u64,
}

impl BlockGen {
    pub fn new(layout: Layout, dedupe: Option<DedupePlan>, target_id: u64, seed: u64) -> Self {
        BlockGen {
            layout,
            dedupe,
            target_id,
            pool_salt: 0,
            rng: Rng::new(seed ^ 0x6461_7461_6765_6e00),
            blocks: 0,
            copies: 0,
        }
    }

    /// Draw pool copies from pool `id` (DedupePool::id) instead of the default pool.
    pub fn with_pool_id(mut self, id: u64) -> Self {
        self.pool_salt = if id == 0 {
            0
        } else {
            mix64(id ^ 0x6964_706f_6f6c_0000)
        };
        self
    }

    fn next_kind(&mut self) -> BlockKind {
        let j = self.blocks;
        self.blocks += 1;
        match &self.dedupe {
            Some(plan) => {
                let f = plan.fraction;
                if ((j + 1) as f64 * f).floor() > (j as f64 * f).floor() {
                    let k = self.copies % plan.pool_blocks;
                    self.copies += 1;
                    BlockKind::Pool(k)
                } else {
                    BlockKind::Unique
                }
            }
            None => BlockKind::Unique,
        }
    }

    /// Prepare every whole block of `buf` for writing.
    pub fn prepare(&mut self, buf: &mut [u8]) {
        let b = self.layout.block;
        for block in buf.chunks_exact_mut(b) {
            let kind = self.next_kind();
            let key = match kind {
                BlockKind::Unique => self.rng.next_u64(),
                BlockKind::Pool(k) => pool_key(self.target_id ^ self.pool_salt, k),
            };
            self.layout.fill_random(block, key);
            if self.layout.verify {
                header::prepare(block, &self.layout, key, kind, self.target_id);
            }
        }
    }
}

/// `blocks` blocks as a stream with these settings writes them over a region of that many
/// blocks (headers stamped as for generation 1 of offsets 0, B, 2B...): the sample whose
/// compressibility and dedupability a run measures and records.
pub fn sample(
    block: usize,
    compress_pct: f64,
    dedupe_ratio: f64,
    verify: bool,
    blocks: usize,
    seed: u64,
) -> Vec<u8> {
    let target_id = mix64(seed ^ 0x73616d706c65);
    let layout = Layout::new(block, compress_pct, verify);
    let dedupe = DedupePlan::new(dedupe_ratio, blocks as u64);
    let mut gen = BlockGen::new(layout, dedupe, target_id, seed);
    let mut out = vec![0u8; block * blocks];
    gen.prepare(&mut out);
    if verify {
        for (j, b) in out.chunks_exact_mut(block).enumerate() {
            if !header::is_pool(b) {
                header::stamp(b, target_id, (j * block) as u64, 1, 1, 0, 0);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zeros(b: &[u8]) -> usize {
        b.iter().filter(|&&x| x == 0).count()
    }

    #[test]
    fn the_zero_share_is_the_compress_share_with_and_without_headers() {
        for verify in [false, true] {
            for pct in [0.0, 25.0, 50.0, 75.0, 90.0] {
                let layout = Layout::new(4096, pct, verify);
                let mut gen = BlockGen::new(layout, None, 7, 1);
                let mut buf = vec![0u8; 4096 * 16];
                gen.prepare(&mut buf);
                let incompressible = 1.0 - zeros(&buf) as f64 / buf.len() as f64;
                // Unstamped headers hold some zero bytes of their own (fields set at issue).
                let tolerance = if verify { 0.02 } else { 0.005 };
                assert!(
                    (incompressible - (100.0 - pct) / 100.0).abs() < tolerance,
                    "verify {verify} pct {pct}: {incompressible}"
                );
            }
        }
    }

    #[test]
    fn random_runs_cover_each_sector_and_stay_inside_it() {
        let layout = Layout::new(4096, 50.0, true);
        let runs: Vec<_> = layout.random_runs().collect();
        assert_eq!(runs.len(), 8);
        assert_eq!(runs.iter().map(|r| r.1).sum::<usize>(), layout.rand_bytes);
        for (s, &(start, len)) in runs.iter().enumerate() {
            assert!(start >= s * SECTOR + 8 && start + len <= (s + 1) * SECTOR);
            assert!(len > 0 && len % 8 == 0);
        }
    }

    #[test]
    fn blocks_never_repeat_and_regenerate_from_their_key() {
        let layout = Layout::new(4096, 0.0, false);
        let mut gen = BlockGen::new(layout, None, 0, 3);
        let mut buf = vec![0u8; 4096 * 256];
        gen.prepare(&mut buf);
        let distinct: std::collections::HashSet<&[u8]> = buf.chunks(4096).collect();
        assert_eq!(distinct.len(), 256);
        // No 16-byte run of one block appears in another: nothing for a compressor to match.
        let first: std::collections::HashSet<&[u8]> = buf[..4096].chunks(16).collect();
        assert!(buf[4096..].chunks(16).all(|c| !first.contains(c)));
        // The same key regenerates the same bytes.
        let mut again = vec![0u8; 4096];
        layout.fill_random(&mut again, 42);
        let mut other = vec![0u8; 4096];
        layout.fill_random(&mut other, 42);
        assert_eq!(again, other);
        assert!((0..8).all(|s| layout.sector_matches(&again, s, 42)));
        assert!(!layout.sector_matches(&again, 3, 43));
    }

    #[test]
    fn dedupe_plan_gives_the_ratio_over_a_region_written_once() {
        for (ratio, n) in [(2.0, 4096u64), (4.0, 16384), (1.5, 1000), (10.0, 65536)] {
            let plan = DedupePlan::new(ratio, n).unwrap();
            let layout = Layout::new(4096, 0.0, false);
            let mut gen = BlockGen::new(layout, Some(plan), 9, 5);
            let mut distinct = std::collections::HashSet::new();
            let mut buf = vec![0u8; 4096];
            for _ in 0..n {
                gen.prepare(&mut buf);
                distinct.insert(buf.clone());
            }
            let measured = n as f64 / distinct.len() as f64;
            assert!(
                (measured / ratio - 1.0).abs() < 0.01,
                "ratio {ratio} over {n}: {measured}"
            );
        }
        assert_eq!(DedupePlan::new(1.0, 100), None);
    }

    /// Distinct 4 KiB blocks of `bufs` together.
    fn distinct(bufs: &[&[u8]]) -> usize {
        let set: std::collections::HashSet<&[u8]> =
            bufs.iter().flat_map(|b| b.chunks(4096)).collect();
        set.len()
    }

    #[test]
    fn a_named_pool_keeps_the_ratio_alone_and_shared_by_streams() {
        // fio's dedupe-global.fio, scaled: 2 jobs of N blocks, dedupe_percentage=50
        // (ratio 2), dedupe_working_set_percentage=50 (a pool of N/2), compress 50.
        let n = 1024u64;
        let layout = Layout::new(4096, 50.0, false);
        // One stream, its own pool: N / R distinct, copies from N/2 pool blocks.
        let own = DedupePool {
            blocks: n / 2,
            over_blocks: n,
            id: 0,
        };
        let mut gen = BlockGen::new(layout, DedupePlan::with_pool(2.0, own), 0, 1);
        let mut a = vec![0u8; 4096 * n as usize];
        gen.prepare(&mut a);
        assert_eq!(distinct(&[&a]), (n / 2) as usize);
        // Two streams sharing one pool of N/2 over both regions (2N blocks): 2N / R distinct
        // together, each alone holding its unique blocks and the whole pool.
        let shared = DedupePool {
            blocks: n / 2,
            over_blocks: 2 * n,
            id: 0,
        };
        let mut ga = BlockGen::new(layout, DedupePlan::with_pool(2.0, shared), 0, 1);
        let mut gb = BlockGen::new(layout, DedupePlan::with_pool(2.0, shared), 0, 2);
        let mut b = vec![0u8; 4096 * n as usize];
        ga.prepare(&mut a);
        gb.prepare(&mut b);
        assert_eq!(distinct(&[&a, &b]), n as usize);
        let alone = distinct(&[&a]) as f64;
        assert!((alone - 0.75 * n as f64).abs() <= 2.0, "{alone}");
        // The compressible half is zeros in every block, copies included (random bytes are
        // zero 1 time in 256).
        let zero_share = zeros(&a) as f64 / a.len() as f64;
        assert!((zero_share - 0.5).abs() < 0.005, "{zero_share}");
        // Two streams with pools of their own (different ids) share no block.
        let (one, two) = (DedupePool { id: 1, ..own }, DedupePool { id: 2, ..own });
        let mut g1 = BlockGen::new(layout, DedupePlan::with_pool(2.0, one), 0, 1).with_pool_id(1);
        let mut g2 = BlockGen::new(layout, DedupePlan::with_pool(2.0, two), 0, 2).with_pool_id(2);
        g1.prepare(&mut a);
        g2.prepare(&mut b);
        assert_eq!(distinct(&[&a, &b]), n as usize);
        // A pool larger than the distinct share is refused by the plan; the plan caps it here.
        let too_big = DedupePool {
            blocks: n,
            over_blocks: n,
            id: 0,
        };
        assert!(too_big.copy_share(2.0) > 1.0);
    }
}
