//! Target preparation helpers: filling files with real data and finding O_DIRECT alignment.

use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};

use crate::buf::AlignedBuf;
use crate::data::{BlockGen, Layout};
use crate::error::{EngineError, Result};
use crate::rng::Rng;
use crate::verify::block as header;

const FILL_CHUNK: usize = 4 << 20;

/// Fill with verifiable blocks: generation 0 of epoch 0, by the fill (docs/verification.md).
#[derive(Clone, Copy, Debug)]
pub struct FillVerify {
    pub target_id: u64,
    pub block_size: usize,
    /// Where the target's data area starts: block offsets are relative to it.
    pub data_offset: u64,
}

/// Write incompressible, non-repeating data over `[offset, offset+length)` so later reads never
/// hit holes or zero pages; with `verify`, every block is a verifiable fill block. Uses O_DIRECT
/// when asked and supported, else buffered writes and a final fdatasync. Returns bytes written.
pub fn fill(
    path: &str,
    offset: u64,
    length: u64,
    direct: bool,
    seed: u64,
    verify: Option<FillVerify>,
) -> Result<u64> {
    if let Some(v) = verify {
        let b = v.block_size as u64;
        if v.block_size > crate::data::MAX_BLOCK
            || b % 512 != 0
            || length % b != 0
            || offset < v.data_offset
            || (offset - v.data_offset) % b != 0
        {
            return Err(EngineError::Plan(format!(
                "a verifiable fill needs whole {b}-byte blocks of the data area at {}, got offset {offset} length {length}",
                v.data_offset
            )));
        }
    }
    let open = |flags| {
        OpenOptions::new()
            .write(true)
            .custom_flags(flags)
            .open(path)
    };
    let (file, direct) = match (direct, open(if direct { libc::O_DIRECT } else { 0 })) {
        (true, Err(e)) if e.raw_os_error() == Some(libc::EINVAL) => (open(0), false),
        (d, f) => (f, d),
    };
    let file = file.map_err(|e| EngineError::io(format!("cannot open {path} to fill it"), e))?;
    let mut rng = Rng::new(seed);
    let mut buf = AlignedBuf::new(FILL_CHUNK);
    rng.fill_bytes(buf.as_mut_slice());
    let mut blocks = verify.map(|v| {
        let layout = Layout::new(v.block_size, 0.0, true);
        (v, BlockGen::new(layout, None, v.target_id, seed))
    });
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as u32;
    let mut written = 0u64;
    while written < length {
        let n = (length - written).min(FILL_CHUNK as u64) as usize;
        let pos = offset + written;
        match &mut blocks {
            Some((v, gen)) => {
                for (i, block) in buf.as_mut_slice()[..n]
                    .chunks_exact_mut(v.block_size)
                    .enumerate()
                {
                    let at = pos - v.data_offset + (i * v.block_size) as u64;
                    fill_block(block, gen, v.target_id, at, now_s);
                }
            }
            None => {
                // Re-stamp every 4 KiB so no block repeats (defeats dedupe on the target).
                for block in buf.as_mut_slice()[..n].chunks_mut(4096) {
                    let k = block.len().min(8);
                    block[..k].copy_from_slice(&rng.next_u64().to_le_bytes()[..k]);
                }
            }
        }
        let res = if direct && n % 4096 != 0 {
            // A tail that O_DIRECT cannot write: finish it buffered.
            let f = OpenOptions::new().write(true).open(path);
            f.and_then(|f| f.write_all_at(&buf.as_slice()[..n], pos).map(|_| n))
        } else {
            file.write_at(&buf.as_slice()[..n], pos)
        };
        match res {
            Ok(0) => {
                return Err(EngineError::io(
                    format!("filling {path}"),
                    io::Error::new(io::ErrorKind::WriteZero, "wrote 0 bytes"),
                ))
            }
            Ok(k) => written += k as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(EngineError::io(
                    format!("filling {path} at offset {pos}"),
                    e,
                ))
            }
        }
    }
    // SAFETY: fd is valid for the life of `file`.
    if unsafe { libc::fdatasync(file.as_raw_fd()) } != 0 {
        return Err(EngineError::io(
            format!("syncing {path}"),
            io::Error::last_os_error(),
        ));
    }
    Ok(written)
}

/// One verifiable fill block for data-area offset `at`.
fn fill_block(block: &mut [u8], gen: &mut BlockGen, target_id: u64, at: u64, now_s: u32) {
    gen.prepare(block); // a unique block: the generator has no dedupe plan
    block[43] |= header::FLAG_FILL;
    header::stamp(block, target_id, at, 0, 0, header::FILL_STREAM, now_s);
}

/// O_DIRECT offset/size alignment for `path` in bytes; 0 if O_DIRECT is not supported there.
/// Uses STATX_DIOALIGN (Linux 6.1+), else the block device's logical block size, else 4096.
pub fn dio_alignment(path: &str) -> Result<u64> {
    let cpath = std::ffi::CString::new(path)
        .map_err(|_| EngineError::Plan(format!("path {path:?} contains a NUL byte")))?;
    // SAFETY: statx writes into a zeroed struct we own; cpath is NUL-terminated.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let rc = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            cpath.as_ptr(),
            0,
            libc::STATX_TYPE | libc::STATX_DIOALIGN,
            &mut stx,
        )
    };
    if rc != 0 {
        return Err(EngineError::io(
            format!("cannot stat {path}"),
            io::Error::last_os_error(),
        ));
    }
    let is_block = std::fs::metadata(path)
        .map(|m| m.file_type().is_block_device())
        .unwrap_or(false);
    if stx.stx_mask & libc::STATX_DIOALIGN != 0 && !is_block {
        // 0 here means the filesystem does not support O_DIRECT on this file.
        return Ok(stx.stx_dio_offset_align as u64);
    }
    if (stx.stx_mode as u32 & libc::S_IFMT) == libc::S_IFDIR {
        // Filesystems report STATX_DIOALIGN for regular files only (ext4, xfs): ask a file
        // of this directory, an unnamed O_TMPFILE that vanishes on close, so a directory
        // answers what a new file there will (512 on ext4 over a 512-byte-sector disk, not a
        // guessed 4096 that refuses IO sizes the filesystem takes).
        if let Some(align) = tmpfile_dio_alignment(&cpath) {
            return Ok(align);
        }
    }
    if is_block {
        let f = OpenOptions::new()
            .read(true)
            .open(path)
            .map_err(|e| EngineError::io(format!("cannot open {path}"), e))?;
        let mut lbs: libc::c_int = 0;
        // SAFETY: BLKSSZGET writes one int.
        if unsafe { libc::ioctl(f.as_raw_fd(), libc::BLKSSZGET, &mut lbs) } == 0 && lbs > 0 {
            return Ok(lbs as u64);
        }
    }
    Ok(4096)
}

/// STATX_DIOALIGN of an unnamed temporary file in directory `dir` (nothing is left behind);
/// None where O_TMPFILE or STATX_DIOALIGN is not supported.
fn tmpfile_dio_alignment(dir: &std::ffi::CStr) -> Option<u64> {
    // SAFETY: open with a NUL-terminated path; the fd is closed below.
    let fd = unsafe {
        libc::open(
            dir.as_ptr(),
            libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: statx on our fd (AT_EMPTY_PATH) into a zeroed struct we own.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let empty = c"";
    let rc = unsafe {
        libc::statx(
            fd,
            empty.as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut stx,
        )
    };
    // SAFETY: fd is ours and open.
    unsafe { libc::close(fd) };
    (rc == 0 && stx.stx_mask & libc::STATX_DIOALIGN != 0).then_some(stx.stx_dio_offset_align as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn tmpfile(name: &str, len: u64) -> String {
        let dir = std::env::temp_dir().join(format!("tilemark-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(len).unwrap();
        p.to_string_lossy().into_owned()
    }

    #[test]
    fn fill_writes_every_byte_with_incompressible_data() {
        let path = tmpfile("fill.dat", 9 << 20);
        let n = fill(&path, 4096, (9 << 20) - 4096, true, 1, None).unwrap();
        assert_eq!(n, (9 << 20) - 4096);
        let mut data = Vec::new();
        std::fs::File::open(&path)
            .unwrap()
            .read_to_end(&mut data)
            .unwrap();
        assert!(
            data[..4096].iter().all(|&b| b == 0),
            "header area untouched"
        );
        let body = &data[4096..];
        let zeros = body.iter().filter(|&&b| b == 0).count();
        assert!(
            (zeros as f64 / body.len() as f64) < 0.01,
            "random data, not zeros"
        );
        let blocks: std::collections::HashSet<&[u8]> = body.chunks(4096).collect();
        assert_eq!(blocks.len(), body.len() / 4096, "no 4 KiB block repeats");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_verifiable_fill_is_generation_zero_of_every_block() {
        use crate::verify::block::{judge, Expect, Verdict};
        let path = tmpfile("vfill.dat", 4096 + (1 << 20));
        let v = FillVerify {
            target_id: 77,
            block_size: 4096,
            data_offset: 4096,
        };
        fill(&path, 4096, 1 << 20, true, 3, Some(v)).unwrap();
        let data = std::fs::read(&path).unwrap();
        let prior = Expect::Prior { before_epoch: 1 };
        for (i, block) in data[4096..].chunks(4096).enumerate() {
            assert_eq!(
                judge(block, 77, i as u64 * 4096, &prior),
                Verdict::Ok,
                "block {i}"
            );
        }
        let distinct: std::collections::HashSet<&[u8]> = data[4096..].chunks(4096).collect();
        assert_eq!(distinct.len(), 256);
        // A misplaced fill is refused.
        assert!(fill(&path, 4096 + 512, 4096, true, 3, Some(v)).is_err());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn dio_alignment_of_a_file_is_a_power_of_two() {
        let path = tmpfile("align.dat", 4096);
        let a = dio_alignment(&path).unwrap();
        assert!(a == 0 || a.is_power_of_two(), "{a}");
        assert!(dio_alignment("/nonexistent/x").is_err());
    }

    #[test]
    fn a_directory_answers_what_a_new_file_there_does() {
        // ext4 and xfs report STATX_DIOALIGN for regular files only; the directory's answer
        // is a new file's, not a guess, and probing leaves no file behind. The directory is
        // this test's own: the other tests create and remove files in the shared one at the
        // same time, so counting its entries there races with them.
        let path = tmpfile("probe-dir/new.dat", 4096);
        let dir = std::path::Path::new(&path)
            .parent()
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        let before = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(before, 1);
        assert_eq!(dio_alignment(&dir).unwrap(), dio_alignment(&path).unwrap());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), before);
        std::fs::remove_file(&path).unwrap();
        std::fs::remove_dir(&dir).unwrap();
    }
}
