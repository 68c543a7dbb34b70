//! Uncached writes (`Op::WriteUncached`) start their writeback when they complete, in both ways
//! a file can make them, on both backends that do IO. The page cache says so: cachestat(2)
//! (Linux 6.5) counts a range's cached, dirty and under-writeback pages. A plain page-cache
//! write of the same range, the control, leaves its pages dirty for the flusher.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::Duration;

use super::uring::UringBackend;
use super::{complete_one, open_backend, uncached_kind, Backend, IoReq, Op, UncachedKind};
use crate::clock::{monotonic_ns, RunClock};
use crate::plan::BackendKind;

const KIB: u64 = 1024;
const AT: u64 = 128 * KIB;
const LEN: u32 = 64 * 1024;

/// cachestat(2)'s counts of a range, in pages.
#[repr(C)]
#[derive(Debug, Default)]
struct CacheStat {
    cache: u64,
    dirty: u64,
    writeback: u64,
    evicted: u64,
    recently_evicted: u64,
}

fn cachestat(file: &std::fs::File, off: u64, len: u64) -> CacheStat {
    const SYS_CACHESTAT: libc::c_long = 451;
    let range = [off, len];
    let mut st = CacheStat::default();
    // SAFETY: the range and the result are owned here and sized as the kernel expects.
    let ret = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            file.as_raw_fd(),
            range.as_ptr(),
            &mut st as *mut CacheStat,
            0,
        )
    };
    assert_eq!(ret, 0, "cachestat: {}", std::io::Error::last_os_error());
    st
}

/// A 1 MiB file of 7s in `dir`, written out and dropped from the page cache.
fn cold_file(dir: PathBuf, name: &str) -> (PathBuf, std::fs::File) {
    let path = dir.join(format!("tilemark-uncached-{}-{name}", std::process::id()));
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(&vec![7u8; 1 << 20]).unwrap();
    f.sync_all().unwrap();
    // SAFETY: advice on a file owned here.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    let rw = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    (path, rw)
}

/// `op` of LEN bytes at AT from `buf`: its completion's result.
fn one_io(backend: &mut dyn Backend, op: Op, user_data: u64, buf: &mut [u8]) -> i32 {
    let req = IoReq {
        user_data,
        file: 0,
        op,
        buf: buf.as_mut_ptr(),
        len: LEN,
        offset: AT,
        ioprio: 0,
    };
    complete_one(backend, req).result
}

fn uring_with(file: &std::fs::File, kind: Option<UncachedKind>) -> Box<UringBackend> {
    let mut b = Box::new(UringBackend::new(&[file.as_raw_fd()], 4, Duration::ZERO).unwrap());
    if let Some(kind) = kind {
        b.set_uncached(0, kind);
    }
    b
}

#[test]
fn a_file_system_file_takes_dontcache_and_tmpfs_does_not() {
    let (path, file) = cold_file(std::env::temp_dir(), "probe");
    // Linux 6.14 added the flag for ext4, xfs and btrfs; the machines this runs on are newer.
    assert_eq!(uncached_kind(file.as_raw_fd()), UncachedKind::Dontcache);
    std::fs::remove_file(path).unwrap();
    let (path, file) = cold_file("/dev/shm".into(), "probe");
    assert_eq!(uncached_kind(file.as_raw_fd()), UncachedKind::SyncRange);
    std::fs::remove_file(path).unwrap();
}

#[test]
fn io_uring_uncached_writes_start_their_writeback_either_way() {
    for kind in [UncachedKind::SyncRange, UncachedKind::Dontcache] {
        let (path, file) = cold_file(std::env::temp_dir(), &format!("uring-{kind:?}"));
        let mut data = vec![0xA5u8; LEN as usize];
        // The control: a plain page-cache write leaves its 16 pages dirty.
        let mut b = uring_with(&file, Some(kind));
        assert_eq!(one_io(b.as_mut(), Op::Write, 1, &mut data), LEN as i32);
        let before = cachestat(&file, AT, LEN as u64);
        assert_eq!(before.dirty, 16, "{kind:?} control: {before:?}");
        file.sync_all().unwrap();
        // The uncached write of the same range: nothing dirty when it completes.
        data.fill(0x5A);
        let result = one_io(b.as_mut(), Op::WriteUncached, 2, &mut data);
        assert_eq!(
            result, LEN as i32,
            "{kind:?}: the request moved the write's bytes"
        );
        let after = cachestat(&file, AT, LEN as u64);
        assert_eq!(after.dirty, 0, "{kind:?}: writeback started: {after:?}");
        file.sync_all().unwrap();
        let mut back = vec![0u8; LEN as usize];
        assert_eq!(one_io(b.as_mut(), Op::Read, 3, &mut back), LEN as i32);
        assert!(
            back.iter().all(|&x| x == 0x5A),
            "{kind:?}: the data is the write's"
        );
        drop(b);
        std::fs::remove_file(path).unwrap();
    }
}

#[test]
fn io_uring_a_failed_write_completes_its_request_once_with_the_writes_error() {
    let (path, _) = cold_file(std::env::temp_dir(), "ro");
    let read_only = std::fs::File::open(&path).unwrap();
    let mut b = uring_with(&read_only, Some(UncachedKind::SyncRange));
    let mut data = vec![1u8; LEN as usize];
    // The write fails (EBADF), the kernel cancels its sync_file_range: one completion, the
    // write's error, and the request number is free again for the next request.
    for user_data in [5, 5] {
        let r = one_io(b.as_mut(), Op::WriteUncached, user_data, &mut data);
        assert_eq!(r, -libc::EBADF);
    }
    assert_eq!(one_io(b.as_mut(), Op::Read, 5, &mut data), LEN as i32);
    let mut out = Vec::new();
    let clock = RunClock::monotonic(monotonic_ns(), 0, None, 1_000_000_000);
    b.submit(&mut out, None, &clock).unwrap();
    assert!(out.is_empty(), "no stray completion: {out:?}");
    drop(b);
    std::fs::remove_file(path).unwrap();
}

#[test]
fn psync_uncached_writes_complete_everywhere_and_start_their_writeback() {
    for dir in [std::env::temp_dir(), PathBuf::from("/dev/shm")] {
        let (path, file) = cold_file(dir, "psync");
        let mut b = open_backend(
            BackendKind::Psync,
            &[file.as_raw_fd()],
            1,
            Duration::ZERO,
            false,
        )
        .unwrap();
        let mut data = vec![0x3Cu8; LEN as usize];
        let r = one_io(b.as_mut(), Op::WriteUncached, 0, &mut data);
        assert_eq!(r, LEN as i32, "{path:?}");
        // tmpfs has no device to write back to: its pages stay as they are.
        if !path.starts_with("/dev/shm") {
            let st = cachestat(&file, AT, LEN as u64);
            assert_eq!(st.dirty, 0, "{path:?}: {st:?}");
        }
        drop(b);
        std::fs::remove_file(path).unwrap();
    }
}
