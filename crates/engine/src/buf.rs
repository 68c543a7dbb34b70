//! Page-aligned IO buffers (O_DIRECT needs aligned memory), carved from 2 MiB chunks that the
//! kernel may back with transparent huge pages.
//!
//! Why huge pages: a direct IO pins its buffer's pages and describes them to the block layer
//! page by page, merging only pages that are physically contiguous. With 4 KiB pages from the
//! allocator,
//!
//! - a large IO is split where it reaches the device's segment limit: on a loop device
//!   (`max_segments` 128) a 1,280 KiB write went out as 512 + 512 + 256 KiB, three requests,
//!   while an application writing from the page cache's large folios sends one (RocksDB's
//!   1,280 KiB writes, docs/fidelity.md). From a huge page it goes out whole: 1 device write
//!   per IO against 3, for 122-180 us of CPU per IO against 202-229 (loop device over tmpfs,
//!   QD4, 2 s runs alternated);
//! - pinning and describing a 128 KiB read costs 32 pages' work: engine CPU per IO at 128 KiB
//!   QD8 on the same device, without spinning, 11.2-12.1 us from huge pages against 15.3-16.2
//!   us, at 6-7% more IOPS (three runs each, alternated; bench/README.md).
//!
//! io_uring's registered buffers (pinned once, IOs as READ_FIXED/WRITE_FIXED) would skip the
//! per-IO pinning altogether. Tried on top of huge pages (each chunk registered with a ring on
//! its first IO): 11.8-11.9 us of engine CPU per 128 KiB read against 11.9-12.9, 4 KiB QD32
//! random reads 4.6-4.8 us against 4.6-5.0, three alternated runs each on the same device:
//! nothing beyond the runs' spread, so not kept (a registration outlives its chunk's mapping
//! and needs bookkeeping per ring).
//!
//! Only buffers of 64 KiB and more come from chunks advised as huge pages (`HUGE_FROM`); a
//! smaller IO gains nothing from them, and a huge page is zeroed whole at its first touch.
//! Buffers are packed into shared chunks, so a run of many streams with small buffers uses no
//! more memory than before beyond the last chunk's unused part. A chunk is returned to the
//! system when its last buffer is dropped (a study's runs do not accumulate memory); the chunk
//! being filled is kept and reused from its start, so buffers made and dropped one at a time
//! do not map and unmap memory each time. Where the kernel has transparent huge pages off or
//! finds no free huge page, the chunks are ordinary pages and everything works as before.
//!
//! A buffer is zeroed only where its chunk's bytes were handed out before (a chunk filled again
//! from its start): fresh mappings are zero, and writing zeros into them made every page of
//! every buffer resident at once. 100 default tiles on the null backend (1,200 streams, whose
//! DSS and backup streams hold megabytes of buffers each) took 6.7 GB and 28 s of kernel CPU
//! for a 10 s run that way, 2.2 GB before the chunks; a page no IO touches stays unmapped.

use std::ptr::NonNull;
use std::sync::Mutex;

pub const BUF_ALIGN: usize = 4096;
/// The size and alignment of a transparent huge page on x86-64 and arm64 (4 KiB base pages).
const CHUNK: usize = 2 << 20;

/// An owned, 4 KiB-aligned, zeroed byte buffer. Its address is stable while it lives, which is
/// what lets the kernel hold a pointer to it during an in-flight IO.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    /// Write buffers: bytes at the start holding prepared, never written data (data.rs).
    pub prepared: usize,
}

// SAFETY: AlignedBuf owns its bytes exclusively, like Vec<u8>; the chunk bookkeeping it shares
// with other buffers is behind the arena's mutex.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    pub fn new(len: usize) -> Self {
        let len = len.max(1).next_multiple_of(BUF_ALIGN);
        let (ptr, dirty) = lock().alloc(len);
        // SAFETY: the arena handed out `len` bytes at `ptr`, used by no other buffer; past
        // their first `dirty` bytes they have not been handed out since they were mapped.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, dirty) };
        AlignedBuf {
            ptr,
            len,
            prepared: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for len bytes and uniquely owned.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        lock().free(self.ptr.as_ptr() as usize);
    }
}

/// A mapping of whole huge pages that buffers are carved from, front to back.
struct Chunk {
    base: usize,
    len: usize,
    /// Bytes handed out from the start.
    used: usize,
    /// Bytes from the start handed out at some time since the chunk was mapped (they may hold
    /// a dropped buffer's data); past them the chunk is as mapped, zero.
    dirty: usize,
    /// Buffers from this chunk not yet dropped.
    live: usize,
}

struct Arena {
    chunks: Vec<Chunk>,
    /// Base of the chunk new buffers of up to a chunk's half come from: [small, huge].
    filling: [Option<usize>; 2],
}

static ARENA: Mutex<Arena> = Mutex::new(Arena {
    chunks: Vec::new(),
    filling: [None, None],
});

/// Buffers from this size on come from chunks advised as huge pages; smaller ones (4-32 KiB:
/// one or a few pages an IO, nothing for huge pages to merge) from chunks of ordinary pages.
/// Each huge page is zeroed whole by the kernel when first touched: 100 default tiles (1,200
/// streams, most of them with 4-8 KiB buffers packed together) took 1.45 GB and issued IOs up
/// to a second late at the start of a run, against 0.44 GB and 1.4 ms with 4 KiB pages.
const HUGE_FROM: usize = 64 << 10;

fn lock() -> std::sync::MutexGuard<'static, Arena> {
    // The arena's state is consistent between statements; a panic elsewhere cannot break it.
    ARENA.lock().unwrap_or_else(|e| e.into_inner())
}

impl Arena {
    /// `len` bytes for a buffer, and how many of them from its start may be non-zero.
    fn alloc(&mut self, len: usize) -> (NonNull<u8>, usize) {
        if len > CHUNK / 2 {
            // A large buffer gets chunks of its own: packing it would strand the rest.
            let base = map_into(&mut self.chunks, len.next_multiple_of(CHUNK), true);
            let chunk = self.chunks.last_mut().expect("just mapped");
            chunk.used = len;
            chunk.dirty = len;
            chunk.live = 1;
            return (ptr(base), 0);
        }
        let room = |c: &Chunk| c.len - c.used >= len;
        let huge = len >= HUGE_FROM;
        let chunk = match self.filling[huge as usize]
            .and_then(|b| self.chunks.iter().position(|c| c.base == b))
        {
            Some(i) if room(&self.chunks[i]) => i,
            _ => {
                // The chunk being filled is full: a new one. The old one goes when its last
                // buffer does.
                let base = map_into(&mut self.chunks, CHUNK, huge);
                self.filling[huge as usize] = Some(base);
                self.chunks.len() - 1
            }
        };
        let c = &mut self.chunks[chunk];
        let offset = c.used;
        let dirty = c.dirty.saturating_sub(offset).min(len);
        c.used += len;
        c.dirty = c.dirty.max(c.used);
        c.live += 1;
        (ptr(c.base + offset), dirty)
    }

    fn free(&mut self, at: usize) {
        let i = self
            .chunks
            .iter()
            .position(|c| (c.base..c.base + c.len).contains(&at))
            .expect("a buffer's chunk is mapped while the buffer lives");
        let c = &mut self.chunks[i];
        c.live -= 1;
        if c.live > 0 {
            return;
        }
        if self.filling.contains(&Some(c.base)) {
            c.used = 0; // kept, and filled again from the start
            return;
        }
        let c = self.chunks.swap_remove(i);
        // SAFETY: the chunk was mapped by `map_into` with this base and length, and no buffer
        // points into it any more.
        unsafe { libc::munmap(c.base as *mut libc::c_void, c.len) };
    }
}

fn ptr(at: usize) -> NonNull<u8> {
    NonNull::new(at as *mut u8).expect("mapped memory is not at address 0")
}

/// Map `len` bytes (a multiple of CHUNK) at a CHUNK-aligned address, ask for huge pages when
/// `huge`, and record the chunk; its base address.
fn map_into(chunks: &mut Vec<Chunk>, len: usize, huge: bool) -> usize {
    // Map one chunk more than needed and trim both ends to the aligned part.
    let span = len + CHUNK;
    // SAFETY: an anonymous private mapping at an address the kernel picks; nothing is aliased.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        let layout = std::alloc::Layout::from_size_align(len, CHUNK).expect("chunk layout");
        std::alloc::handle_alloc_error(layout);
    }
    let start = raw as usize;
    let base = start.next_multiple_of(CHUNK);
    // SAFETY: both ranges are inside the mapping just made and outside [base, base + len).
    unsafe {
        if base > start {
            libc::munmap(raw, base - start);
        }
        let tail = start + span - (base + len);
        if tail > 0 {
            libc::munmap((base + len) as *mut libc::c_void, tail);
        }
        // Before any page is touched: a page faulted in as a small page stays one. Advice
        // only; where transparent huge pages are off it changes nothing.
        if huge {
            libc::madvise(base as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
        }
    }
    chunks.push(Chunk {
        base,
        len,
        used: 0,
        dirty: 0,
        live: 0,
    });
    base
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_zeroed_and_apart_and_their_chunks_go_with_them() {
        // Tests run in parallel and share the arena: every check is on these buffers alone.
        let mut bufs: Vec<AlignedBuf> = (0..700).map(|i| AlignedBuf::new(1 + i * 37)).collect();
        for (i, b) in bufs.iter_mut().enumerate() {
            assert_eq!(b.as_mut_ptr() as usize % BUF_ALIGN, 0);
            assert_eq!(b.len(), (1 + i * 37).next_multiple_of(BUF_ALIGN));
            assert!(b.as_slice().iter().all(|&x| x == 0), "zeroed");
            b.as_mut_slice().fill((i % 251) as u8 + 1);
        }
        // No two overlap: every buffer still holds its own byte.
        for (i, b) in bufs.iter().enumerate() {
            assert!(
                b.as_slice().iter().all(|&x| x == (i % 251) as u8 + 1),
                "buffer {i}"
            );
        }
        let mut spans: Vec<(usize, usize)> = bufs
            .iter()
            .map(|b| (b.as_slice().as_ptr() as usize, b.len()))
            .collect();
        spans.sort();
        assert!(spans.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0));
        drop(bufs);
        // A buffer made after the drop is zeroed again, though its bytes may be reused.
        let b = AlignedBuf::new(8192);
        assert!(b.as_slice().iter().all(|&x| x == 0));
    }

    #[test]
    fn a_large_buffer_has_whole_huge_pages_of_its_own_returned_when_it_goes() {
        let big = AlignedBuf::new(3 << 20);
        let at = big.as_slice().as_ptr() as usize;
        assert_eq!(at % CHUNK, 0, "starts a huge page");
        assert_eq!(big.len(), 3 << 20);
        {
            let a = lock();
            let c = a.chunks.iter().find(|c| c.base == at).expect("its chunk");
            assert_eq!((c.len, c.live), (4 << 20, 1));
        }
        drop(big);
        assert!(lock().chunks.iter().all(|c| c.base != at), "unmapped");
    }

    /// Whether the mapping holding `at` is advised as huge pages (smaps' VmFlags `hg`).
    fn advised_huge(at: usize) -> bool {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((lo, hi)) = range.split_once('-') {
                    if let (Ok(lo), Ok(hi)) =
                        (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                    {
                        inside = (lo..hi).contains(&at);
                        continue;
                    }
                }
            }
            if inside {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return flags.split_whitespace().any(|f| f == "hg");
                }
            }
        }
        panic!("no mapping holds {at:#x}");
    }

    #[test]
    fn only_buffers_of_64_kib_and_more_come_from_huge_page_chunks() {
        let small = AlignedBuf::new(8 << 10);
        let mid = AlignedBuf::new(128 << 10);
        let large = AlignedBuf::new(3 << 20);
        assert!(!advised_huge(small.as_slice().as_ptr() as usize));
        assert!(advised_huge(mid.as_slice().as_ptr() as usize));
        assert!(advised_huge(large.as_slice().as_ptr() as usize));
    }

    /// Pages of `len` bytes at `at` the kernel holds in memory (mincore).
    fn resident_pages(at: *const u8, len: usize) -> usize {
        let page = 4096;
        let mut vec = vec![0u8; len.div_ceil(page)];
        // SAFETY: `at` is page-aligned and the range lies in one live mapping; vec holds a
        // byte per page.
        let rc = unsafe { libc::mincore(at as *mut libc::c_void, len, vec.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore");
        vec.iter().filter(|&&v| v & 1 == 1).count()
    }

    #[test]
    fn a_new_buffer_takes_no_memory_until_it_is_written() {
        // A run's buffers are sized for its largest IO at its full depth; a stream that never
        // writes a buffer's pages (reads, or the null backend) does not make them resident.
        let mut big = AlignedBuf::new(16 << 20);
        let at = big.as_slice().as_ptr();
        assert_eq!(resident_pages(at, big.len()), 0);
        assert!(
            big.as_slice().iter().step_by(4096).all(|&x| x == 0),
            "reads as zero"
        );
        big.as_mut_slice()[..4096].fill(7);
        assert!(resident_pages(at, big.len()) >= 1);
        assert!(big.as_slice()[..4096].iter().all(|&x| x == 7));
    }
}
