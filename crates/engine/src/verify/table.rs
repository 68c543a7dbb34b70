//! The generation table: one 32-bit word per verification block of a target, shared by every
//! engine thread, saying what the block should hold and whether a write to it is in flight.
//! With a journal it lives in a file mapped into memory (`MAP_SHARED`), so every update is in
//! the page cache the moment it is made: a run killed with SIGKILL leaves the journal exact,
//! and `msync` makes it durable for a power loss.
//!
//! Word layout (bit 0 first): generation (16 bits, the last one issued, modulo 65536) |
//! span (4) | in flight (8; 255 = too many to count: the block is never judged again) |
//! written in this run | unknown (a write failed, or more than 16 overlapped) | pool copy among
//! the acceptable contents | durable (the writes were O_DSYNC).
//!
//! A block is *busy* while writes to it are in flight. The first write of a busy period sets
//! span to 0; each overlapping write adds one; when the last completes the block holds one of
//! generations [gen - span, gen], or sectors of them. Reads are judged only if no write was in
//! flight when they were issued and none was issued before they completed (the generation did
//! not move): a block with a write in flight is never judged.
//!
//! Memory and disk: 4 bytes per block, 1 GiB per TiB of target at 4 KiB blocks; the journal
//! file is sparse, so blocks never written take no disk space.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU32, Ordering};

pub const JOURNAL_MAGIC: &[u8] = b"TILEMARK-JOURNAL\n";
/// The journal's header page; the words follow it.
pub const JOURNAL_HEADER: usize = 4096;

const SPAN_SHIFT: u32 = 16;
const SPAN_MAX: u32 = 15;
const INFLIGHT_SHIFT: u32 = 20;
const INFLIGHT_MAX: u32 = 255;
const WRITTEN: u32 = 1 << 28;
const UNKNOWN: u32 = 1 << 29;
const POOL: u32 = 1 << 30;
const DURABLE: u32 = 1 << 31;

/// One block's word, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Word(pub u32);

impl Word {
    pub fn gen(self) -> u16 {
        self.0 as u16
    }
    pub fn span(self) -> u16 {
        ((self.0 >> SPAN_SHIFT) & SPAN_MAX) as u16
    }
    pub fn inflight(self) -> u32 {
        (self.0 >> INFLIGHT_SHIFT) & INFLIGHT_MAX
    }
    pub fn written(self) -> bool {
        self.0 & WRITTEN != 0
    }
    pub fn unknown(self) -> bool {
        self.0 & UNKNOWN != 0
    }
    pub fn pool(self) -> bool {
        self.0 & POOL != 0
    }
    pub fn durable(self) -> bool {
        self.0 & DURABLE != 0
    }
    /// Neither in flight nor unknown: what the block holds is known exactly.
    pub fn settled(self) -> bool {
        self.inflight() == 0 && !self.unknown()
    }
}

enum Backing {
    Heap(Box<[AtomicU32]>),
    /// A mapping of a journal file: `ptr` to `len` bytes; the words start at JOURNAL_HEADER.
    Map {
        ptr: *mut libc::c_void,
        len: usize,
        file: File,
    },
}

// SAFETY: the mapping is owned by the table and only reached through atomics.
unsafe impl Send for Backing {}
unsafe impl Sync for Backing {}

pub struct GenTable {
    backing: Backing,
    blocks: usize,
}

impl GenTable {
    /// A table in memory (no journal): every block starts as not written in this run.
    pub fn in_memory(blocks: usize) -> GenTable {
        let words = (0..blocks).map(|_| AtomicU32::new(0)).collect();
        GenTable {
            backing: Backing::Heap(words),
            blocks,
        }
    }

    /// Create a journal file for `blocks` blocks with a JSON header, mapped for writing.
    pub fn create_journal(path: &str, blocks: usize, header: &str) -> io::Result<GenTable> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)?;
        file.write_all_at(&header_page(header)?, 0)?;
        let len = JOURNAL_HEADER + 4 * blocks;
        file.set_len(len as u64)?;
        Self::map(file, len, blocks, true)
    }

    /// Open a journal to read: (table, its JSON header).
    pub fn open_journal(path: &str) -> io::Result<(GenTable, String)> {
        let file = File::open(path)?;
        let len = file.metadata()?.len() as usize;
        let mut page = vec![0u8; JOURNAL_HEADER];
        if len < JOURNAL_HEADER {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "journal too short",
            ));
        }
        file.read_exact_at(&mut page, 0)?;
        if !page.starts_with(JOURNAL_MAGIC) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a tilemark journal",
            ));
        }
        let text = &page[JOURNAL_MAGIC.len()..];
        let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
        let header = String::from_utf8_lossy(&text[..end]).into_owned();
        let blocks = (len - JOURNAL_HEADER) / 4;
        Ok((Self::map(file, len, blocks, false)?, header))
    }

    fn map(file: File, len: usize, blocks: usize, shared: bool) -> io::Result<GenTable> {
        let flags = if shared {
            libc::MAP_SHARED
        } else {
            libc::MAP_PRIVATE // read only: copy-on-write pages that are never written
        };
        // SAFETY: mapping a file we hold open, `len` bytes from offset 0; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(GenTable {
            backing: Backing::Map { ptr, len, file },
            blocks,
        })
    }

    pub fn len(&self) -> usize {
        self.blocks
    }

    pub fn is_empty(&self) -> bool {
        self.blocks == 0
    }

    fn words(&self) -> &[AtomicU32] {
        match &self.backing {
            Backing::Heap(w) => w,
            // SAFETY: the mapping is JOURNAL_HEADER + 4 * blocks bytes, page aligned, alive as
            // long as self; AtomicU32 has the size and alignment of u32.
            Backing::Map { ptr, .. } => unsafe {
                std::slice::from_raw_parts(
                    (*ptr as *const u8).add(JOURNAL_HEADER) as *const AtomicU32,
                    self.blocks,
                )
            },
        }
    }

    #[inline]
    pub fn word(&self, block: usize) -> Word {
        Word(self.words()[block].load(Ordering::SeqCst))
    }

    fn update(&self, block: usize, f: impl Fn(u32) -> Option<u32>) -> u32 {
        let w = &self.words()[block];
        let mut old = w.load(Ordering::SeqCst);
        loop {
            let Some(new) = f(old) else { return old };
            match w.compare_exchange_weak(old, new, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return new,
                Err(seen) => old = seen,
            }
        }
    }

    /// A write to `block` is about to be issued: its generation.
    pub fn begin_write(&self, block: usize, pool: bool, durable: bool) -> u16 {
        Word(self.update(block, |w| {
            let old = Word(w);
            let gen = old.gen().wrapping_add(1) as u32;
            let inflight = old.inflight();
            if inflight == INFLIGHT_MAX {
                // Untracked from now on: count generations only.
                return Some((w & !0xFFFF) | gen);
            }
            let mut new = gen | WRITTEN | ((inflight + 1) << INFLIGHT_SHIFT);
            if inflight == 0 {
                // A busy period begins: what it leaves is its own writes only.
                new |= if pool { POOL } else { 0 } | if durable { DURABLE } else { 0 };
            } else {
                let span = old.span() as u32 + 1;
                new |= (span.min(SPAN_MAX) << SPAN_SHIFT) | (w & (UNKNOWN | POOL | DURABLE));
                if span > SPAN_MAX {
                    new |= UNKNOWN;
                }
                new |= if pool { POOL } else { 0 };
                if !durable {
                    new &= !DURABLE;
                }
            }
            Some(new)
        }))
        .gen()
    }

    /// A write to `block` completed (`ok`) or failed.
    pub fn end_write(&self, block: usize, ok: bool) {
        self.update(block, |w| {
            let old = Word(w);
            let inflight = old.inflight();
            if inflight == INFLIGHT_MAX || inflight == 0 {
                return None;
            }
            let mut new =
                (w & !(INFLIGHT_MAX << INFLIGHT_SHIFT)) | ((inflight - 1) << INFLIGHT_SHIFT);
            if !ok {
                new = (new | UNKNOWN) & !DURABLE;
            }
            Some(new)
        });
    }

    /// Write the mapped words to the file and wait for it (a journal; nothing otherwise).
    pub fn sync(&self) -> io::Result<()> {
        if let Backing::Map { ptr, len, .. } = &self.backing {
            // SAFETY: the whole live mapping.
            if unsafe { libc::msync(*ptr, *len, libc::MS_SYNC) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// Rewrite the journal's JSON header (e.g. when the run ends) and make everything durable.
    pub fn rewrite_header(&self, header: &str) -> io::Result<()> {
        if let Backing::Map { file, .. } = &self.backing {
            self.sync()?;
            file.write_all_at(&header_page(header)?, 0)?;
            file.sync_data()?;
        }
        Ok(())
    }
}

impl Drop for GenTable {
    fn drop(&mut self) {
        if let Backing::Map { ptr, len, .. } = &self.backing {
            // SAFETY: unmapping our own mapping once; no reference outlives self.
            unsafe { libc::munmap(*ptr, *len) };
        }
    }
}

fn header_page(header: &str) -> io::Result<Vec<u8>> {
    let mut page = JOURNAL_MAGIC.to_vec();
    page.extend_from_slice(header.as_bytes());
    if page.len() > JOURNAL_HEADER {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "journal header too long",
        ));
    }
    page.resize(JOURNAL_HEADER, 0);
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_write_settles_on_its_generation() {
        let t = GenTable::in_memory(4);
        assert!(!t.word(1).written());
        let g = t.begin_write(1, false, true);
        assert_eq!(
            (g, t.word(1).inflight(), t.word(1).settled()),
            (1, 1, false)
        );
        t.end_write(1, true);
        let w = t.word(1);
        assert_eq!(
            (w.gen(), w.span(), w.settled(), w.durable()),
            (1, 0, true, true)
        );
    }

    #[test]
    fn overlapping_writes_leave_a_span_and_a_failure_leaves_the_block_unknown() {
        let t = GenTable::in_memory(1);
        t.begin_write(0, false, false);
        t.begin_write(0, true, false);
        t.begin_write(0, false, false);
        t.end_write(0, true);
        t.end_write(0, true);
        assert!(!t.word(0).settled());
        t.end_write(0, true);
        let w = t.word(0);
        assert_eq!(
            (w.gen(), w.span(), w.pool(), w.settled()),
            (3, 2, true, true)
        );
        // The next busy period starts afresh; a failed write in it leaves the block unknown.
        t.begin_write(0, false, false);
        assert_eq!(t.word(0).span(), 0);
        t.end_write(0, false);
        assert!(t.word(0).unknown() && t.word(0).inflight() == 0);
        t.begin_write(0, false, false);
        t.end_write(0, true);
        assert!(t.word(0).settled());
    }

    #[test]
    fn a_journal_keeps_its_words_in_the_file() {
        let dir = std::env::temp_dir().join(format!("tilemark-journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("j").to_string_lossy().into_owned();
        {
            let t = GenTable::create_journal(&path, 1000, r#"{"epoch":3}"#).unwrap();
            t.begin_write(999, false, false);
            t.end_write(999, true);
            t.begin_write(5, false, false); // in flight when the "process dies"
        }
        let (t, header) = GenTable::open_journal(&path).unwrap();
        assert_eq!(header, r#"{"epoch":3}"#);
        assert_eq!(t.len(), 1000);
        assert!(t.word(999).settled() && t.word(999).gen() == 1);
        assert_eq!(t.word(5).inflight(), 1);
        assert!(!t.word(0).written());
        // Sparse: blocks never written take no space.
        use std::os::unix::fs::MetadataExt;
        assert!(std::fs::metadata(&path).unwrap().blocks() * 512 <= 3 * 4096 + 4096);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
