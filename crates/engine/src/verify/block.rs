//! The verification block: a 64-byte header at the start of every block, an 8-byte stamp at
//! the start of every other 512-byte sector, and the judging of a block read back against what
//! it should hold. The format is documented in docs/verification.md.
//!
//! Header (little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 0..8 | magic `TMVERIFY` |
//! | 8..16 | target identity |
//! | 16..24 | the block's offset in the target's data area (pool copies: the pool index) |
//! | 24..28 | epoch: the verified run that wrote it (0: the fill) |
//! | 28..32 | generation of the block within its epoch (modulo 65536) |
//! | 32..40 | content key (the random bytes regenerate from it) |
//! | 40..42 | writing stream (0xFFFF: the fill, 0xFFFE: a pool copy) |
//! | 42 | format version (1) |
//! | 43 | flags: 1 pool copy, 2 fill |
//! | 44..46 | random bytes in the block (the layout of its zeros) |
//! | 46..48 | sectors in the block |
//! | 48..52 | when it was written, seconds since 1970 (0 for pool copies) |
//! | 52..56 | CRC32C of bytes 64..end (stamps and data) |
//! | 56..60 | reserved, 0 |
//! | 60..64 | CRC32C of bytes 0..60 |
//!
//! Sector k >= 1 starts with the content key of the write that wrote it, so a block whose
//! sectors come from two writes (torn) is told from one with damaged bytes (corrupt).

use serde::Serialize;

use crate::layout::{BlockKind, Layout, SECTOR};
pub use crate::layout::{HEADER_LEN, STAMP_LEN};

pub const MAGIC: [u8; 8] = *b"TMVERIFY";
pub const VERSION: u8 = 1;
pub const FLAG_POOL: u8 = 1;
pub const FLAG_FILL: u8 = 2;
pub const FILL_STREAM: u16 = 0xFFFF;
pub const POOL_STREAM: u16 = 0xFFFE;

fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Write what a block's header holds before it is known where the block goes: stamps, key,
/// layout and the data checksum; a pool copy is finished here (its header names no offset).
/// `block` holds its random bytes already.
pub fn prepare(block: &mut [u8], layout: &Layout, key: u64, kind: BlockKind, target_id: u64) {
    for s in 1..layout.sectors() {
        put_u64(block, s * SECTOR, key);
    }
    block[..8].copy_from_slice(&MAGIC);
    put_u64(block, 32, key);
    block[42] = VERSION;
    put_u16(block, 44, layout.rand_bytes as u16);
    put_u16(block, 46, layout.sectors() as u16);
    put_u32(block, 56, 0);
    let crc = crc32c::crc32c(&block[HEADER_LEN..]);
    put_u32(block, 52, crc);
    match kind {
        BlockKind::Unique => block[43] = 0,
        BlockKind::Pool(k) => {
            block[43] = FLAG_POOL;
            stamp(block, target_id, k, 0, 0, POOL_STREAM, 0);
        }
    }
}

/// Is this prepared block a pool copy (its header is complete already)?
pub fn is_pool(block: &[u8]) -> bool {
    block[43] & FLAG_POOL != 0
}

/// A pool copy prepared for one target and written to another (by a stream spread over
/// several targets) names the target it lands on, keeping its pool index.
pub fn retarget_pool(block: &mut [u8], target_id: u64) {
    if u64_at(block, 8) != target_id {
        let k = u64_at(block, 16);
        stamp(block, target_id, k, 0, 0, POOL_STREAM, 0);
    }
}

/// Finish a prepared block's header with where it goes and which write it is.
pub fn stamp(
    block: &mut [u8],
    target_id: u64,
    offset: u64,
    epoch: u32,
    gen: u32,
    stream: u16,
    written_at_s: u32,
) {
    put_u64(block, 8, target_id);
    put_u64(block, 16, offset);
    put_u32(block, 24, epoch);
    put_u32(block, 28, gen);
    put_u16(block, 40, stream);
    put_u32(block, 48, written_at_s);
    let crc = crc32c::crc32c(&block[..60]);
    put_u32(block, 60, crc);
}

/// A decoded header, as findings report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Header {
    pub target_id: u64,
    pub offset: u64,
    pub epoch: u32,
    pub gen: u32,
    pub key: u64,
    pub stream: u16,
    pub flags: u8,
    pub rand_bytes: u16,
    pub sectors: u16,
    pub written_at_s: u32,
    pub payload_crc: u32,
}

impl Header {
    pub fn is_pool(&self) -> bool {
        self.flags & FLAG_POOL != 0
    }
    pub fn is_fill(&self) -> bool {
        self.flags & FLAG_FILL != 0
    }
}

enum Decoded {
    NotTilemark,
    Damaged,
    Ok(Header),
}

fn decode(block: &[u8]) -> Decoded {
    if block.len() < HEADER_LEN {
        return Decoded::NotTilemark;
    }
    if block[..8] != MAGIC {
        // A few flipped bits in the magic are damage to a tilemark block, not foreign data.
        let flipped: u32 = block[..8]
            .iter()
            .zip(MAGIC)
            .map(|(a, b)| (a ^ b).count_ones())
            .sum();
        return if flipped <= 4 {
            Decoded::Damaged
        } else {
            Decoded::NotTilemark
        };
    }
    if crc32c::crc32c(&block[..60]) != u32_at(block, 60) || block[42] != VERSION {
        return Decoded::Damaged;
    }
    Decoded::Ok(Header {
        target_id: u64_at(block, 8),
        offset: u64_at(block, 16),
        epoch: u32_at(block, 24),
        gen: u32_at(block, 28),
        key: u64_at(block, 32),
        stream: u16_at(block, 40),
        flags: block[43],
        rand_bytes: u16_at(block, 44),
        sectors: u16_at(block, 46),
        written_at_s: u32_at(block, 48),
        payload_crc: u32_at(block, 52),
    })
}

/// The kinds of finding (docs/verification.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    /// Bytes changed: a checksum fails and the sectors are not whole writes.
    Corrupt,
    /// The block is whole but names another offset or another target.
    Misdirected,
    /// The block is whole but older than the last acknowledged write: a lost write.
    Stale,
    /// The sectors are whole but come from different writes.
    Torn,
    /// Not tilemark data, or a generation that was never written.
    Unexpected,
}

impl Class {
    pub const ALL: [Class; 5] = [
        Class::Corrupt,
        Class::Misdirected,
        Class::Stale,
        Class::Torn,
        Class::Unexpected,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Class::Corrupt => "corrupt",
            Class::Misdirected => "misdirected",
            Class::Stale => "stale",
            Class::Torn => "torn",
            Class::Unexpected => "unexpected",
        }
    }
}

/// What a block should hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Expect {
    /// Written in epoch `epoch` and acknowledged: one of generations [gen - span, gen] (modulo
    /// 65536); with `pool`, a pool copy also fits. Several writes overlapped when span > 0,
    /// and then sectors of each may be left.
    Exact {
        epoch: u32,
        gen: u16,
        span: u16,
        pool: bool,
    },
    /// Written in epoch `epoch` but not judged exactly (a write in flight at a crash, a failed
    /// write): any whole block of this target and offset from this epoch or before, torn or not.
    Loose { epoch: u32 },
    /// Not written in the run: the fill or a block of any epoch before `before_epoch`.
    Prior { before_epoch: u32 },
}

/// The judgement of one block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    /// Sector 0 is not a tilemark header.
    NotTilemark,
    /// A whole block of this target and offset from an epoch after the expected one (a later
    /// run rewrote it).
    Later(u32),
    Finding {
        class: Class,
        found: Option<Header>,
        detail: String,
    },
}

fn finding(class: Class, found: Option<Header>, detail: String) -> Verdict {
    Verdict::Finding {
        class,
        found,
        detail,
    }
}

/// Judge a block read back from `offset` of the target `target_id` against `expect`.
pub fn judge(block: &[u8], target_id: u64, offset: u64, expect: &Expect) -> Verdict {
    let h = match decode(block) {
        Decoded::NotTilemark => return Verdict::NotTilemark,
        Decoded::Damaged => {
            return finding(
                Class::Corrupt,
                None,
                "the block header's checksum fails".into(),
            )
        }
        Decoded::Ok(h) => h,
    };
    if h.sectors as usize * SECTOR != block.len()
        || h.rand_bytes as usize > block.len() - Layout::overhead_of(block.len(), true)
    {
        let detail = format!(
            "the header describes {} sectors, not {}",
            h.sectors,
            block.len() / SECTOR
        );
        return finding(Class::Corrupt, Some(h), detail);
    }
    if crc32c::crc32c(&block[HEADER_LEN..]) != h.payload_crc {
        let layout = Layout {
            block: block.len(),
            verify: true,
            rand_bytes: h.rand_bytes as usize,
        };
        return match torn_sectors(block, &layout, h.key) {
            Some(_) if overlap_allowed(expect) => Verdict::Ok,
            Some(foreign) => finding(
                Class::Torn,
                Some(h),
                format!(
                    "sectors {} hold another write of the block",
                    ranges(&foreign)
                ),
            ),
            None => finding(
                Class::Corrupt,
                Some(h),
                "the data checksum fails and the sectors are not whole writes".into(),
            ),
        };
    }
    if h.target_id != target_id {
        let detail = format!("the block belongs to another target ({:016x})", h.target_id);
        return finding(Class::Misdirected, Some(h), detail);
    }
    if h.is_pool() {
        return match expect {
            Expect::Exact {
                pool: false, gen, ..
            } => finding(
                Class::Stale,
                Some(h),
                format!("a deduplication pool copy, not generation {gen}"),
            ),
            _ => Verdict::Ok,
        };
    }
    if h.offset != offset {
        let detail = format!("the block was written for offset {}", h.offset);
        return finding(Class::Misdirected, Some(h), detail);
    }
    match *expect {
        Expect::Exact {
            epoch, gen, span, ..
        } => {
            if h.epoch > epoch {
                return Verdict::Later(h.epoch);
            }
            if h.epoch < epoch {
                let detail = format!(
                    "holds epoch {} generation {}, older than the acknowledged generation {gen} of epoch {epoch}",
                    h.epoch, h.gen
                );
                return finding(Class::Stale, Some(h), detail);
            }
            let behind = gen.wrapping_sub(h.gen as u16);
            if behind <= span {
                Verdict::Ok
            } else if behind < 0x8000 {
                let detail = format!(
                    "holds generation {}, {} older than the acknowledged generation {gen}",
                    h.gen,
                    behind - span
                );
                finding(Class::Stale, Some(h), detail)
            } else {
                let detail = format!(
                    "holds generation {}, newer than any written (last {gen})",
                    h.gen
                );
                finding(Class::Unexpected, Some(h), detail)
            }
        }
        Expect::Loose { epoch }
        | Expect::Prior {
            before_epoch: epoch,
        } if h.epoch > epoch => Verdict::Later(h.epoch),
        Expect::Prior { before_epoch } if h.epoch == before_epoch => {
            let detail = format!(
                "holds generation {} of this run's epoch, but the run never wrote the block",
                h.gen
            );
            finding(Class::Unexpected, Some(h), detail)
        }
        _ => Verdict::Ok,
    }
}

fn overlap_allowed(expect: &Expect) -> bool {
    matches!(
        expect,
        Expect::Loose { .. } | Expect::Exact { span: 1.., .. }
    )
}

/// When every sector of a block holds whole data of the write its key names and more than
/// one key is present, the sectors whose key differs from sector 0's; None otherwise.
fn torn_sectors(block: &[u8], layout: &Layout, key0: u64) -> Option<Vec<usize>> {
    let mut foreign = Vec::new();
    for s in 0..layout.sectors() {
        let key = if s == 0 {
            key0
        } else {
            u64_at(block, s * SECTOR)
        };
        if !layout.sector_matches(block, s, key) {
            return None;
        }
        if key != key0 {
            foreign.push(s);
        }
    }
    (!foreign.is_empty()).then_some(foreign)
}

/// "1-3, 6" for sectors [1, 2, 3, 6].
fn ranges(v: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{BlockGen, DedupePlan};

    const T: u64 = 0xABCD;

    /// A block written for `offset`, epoch `epoch`, generation `gen`.
    fn written(offset: u64, epoch: u32, gen: u32, compress: f64) -> Vec<u8> {
        let mut gen_ = BlockGen::new(
            Layout::new(4096, compress, true),
            None,
            T,
            offset ^ gen as u64,
        );
        let mut b = vec![0u8; 4096];
        gen_.prepare(&mut b);
        stamp(&mut b, T, offset, epoch, gen, 3, 1_700_000_000);
        b
    }

    fn exact(gen: u16) -> Expect {
        Expect::Exact {
            epoch: 2,
            gen,
            span: 0,
            pool: false,
        }
    }

    fn class(v: Verdict) -> Option<Class> {
        match v {
            Verdict::Finding { class, .. } => Some(class),
            _ => None,
        }
    }

    #[test]
    fn a_whole_block_passes_and_each_damage_has_its_class() {
        let b = written(8192, 2, 5, 50.0);
        assert_eq!(judge(&b, T, 8192, &exact(5)), Verdict::Ok);
        // One flipped bit anywhere.
        for at in [3usize, 100, 1000, 4095] {
            let mut c = b.clone();
            c[at] ^= 0x10;
            let v = judge(&c, T, 8192, &exact(5));
            assert_eq!(class(v.clone()), Some(Class::Corrupt), "bit at {at}: {v:?}");
        }
        // An older generation: a lost write.
        let old = written(8192, 2, 4, 50.0);
        assert_eq!(class(judge(&old, T, 8192, &exact(5))), Some(Class::Stale));
        assert_eq!(
            class(judge(&written(8192, 1, 9, 50.0), T, 8192, &exact(5))),
            Some(Class::Stale)
        );
        // Another offset's block, another target's.
        assert_eq!(
            class(judge(&written(4096, 2, 5, 50.0), T, 8192, &exact(5))),
            Some(Class::Misdirected)
        );
        let mut other = written(8192, 2, 5, 50.0);
        stamp(&mut other, T + 1, 8192, 2, 5, 3, 0);
        assert_eq!(
            class(judge(&other, T, 8192, &exact(5))),
            Some(Class::Misdirected)
        );
        // Half the sectors from an earlier write: torn.
        let mut torn = b.clone();
        torn[2048..].copy_from_slice(&old[2048..]);
        let v = judge(&torn, T, 8192, &exact(5));
        assert_eq!(class(v.clone()), Some(Class::Torn), "{v:?}");
        // Not tilemark data at all; a generation never written.
        assert_eq!(
            judge(&[7u8; 4096], T, 8192, &exact(5)),
            Verdict::NotTilemark
        );
        assert_eq!(
            class(judge(&written(8192, 2, 9, 50.0), T, 8192, &exact(5))),
            Some(Class::Unexpected)
        );
    }

    #[test]
    fn overlapping_writes_accept_any_of_their_generations_and_their_sector_mixes() {
        let a = written(0, 2, 6, 0.0);
        let b = written(0, 2, 7, 0.0);
        let two = Expect::Exact {
            epoch: 2,
            gen: 7,
            span: 1,
            pool: false,
        };
        assert_eq!(judge(&a, T, 0, &two), Verdict::Ok);
        assert_eq!(judge(&b, T, 0, &two), Verdict::Ok);
        let mut mix = a.clone();
        mix[1024..1536].copy_from_slice(&b[1024..1536]);
        assert_eq!(judge(&mix, T, 0, &two), Verdict::Ok);
        assert_eq!(
            class(judge(&written(0, 2, 5, 0.0), T, 0, &two)),
            Some(Class::Stale)
        );
    }

    #[test]
    fn prior_content_and_later_epochs() {
        let fill = written(0, 0, 0, 0.0);
        assert_eq!(
            judge(&fill, T, 0, &Expect::Prior { before_epoch: 3 }),
            Verdict::Ok
        );
        assert_eq!(
            judge(
                &written(0, 4, 1, 0.0),
                T,
                0,
                &Expect::Prior { before_epoch: 3 }
            ),
            Verdict::Later(4)
        );
        assert_eq!(
            class(judge(
                &written(0, 3, 1, 0.0),
                T,
                0,
                &Expect::Prior { before_epoch: 3 }
            )),
            Some(Class::Unexpected)
        );
        assert_eq!(
            judge(&written(0, 3, 1, 0.0), T, 0, &Expect::Loose { epoch: 3 }),
            Verdict::Ok
        );
    }

    #[test]
    fn pool_copies_are_identical_everywhere_and_fit_where_a_copy_was_written() {
        let plan = DedupePlan::new(2.0, 64);
        let mut g1 = BlockGen::new(Layout::new(4096, 0.0, true), plan.clone(), T, 1);
        let mut g2 = BlockGen::new(Layout::new(4096, 0.0, true), plan, T, 2);
        let (mut a, mut b) = (vec![0u8; 4096 * 4], vec![0u8; 4096 * 4]);
        g1.prepare(&mut a);
        g2.prepare(&mut b);
        // Block 1 of each is the first pool copy (the share is spread exactly).
        assert!(is_pool(&a[4096..8192]) && a[4096..8192] == b[4096..8192]);
        let pool_ok = Expect::Exact {
            epoch: 1,
            gen: 3,
            span: 0,
            pool: true,
        };
        assert_eq!(judge(&a[4096..8192], T, 123 * 4096, &pool_ok), Verdict::Ok);
        assert_eq!(
            class(judge(&a[4096..8192], T, 0, &exact(3))),
            Some(Class::Stale)
        );
    }

    #[test]
    fn sector_ranges_read_well() {
        assert_eq!(ranges(&[1, 2, 3, 6]), "1-3, 6");
        assert_eq!(ranges(&[4, 5, 6, 7]), "4-7");
    }
}
