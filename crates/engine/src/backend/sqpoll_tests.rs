//! A ring with a kernel thread polling its submission queue (`sqpoll`): the thread exists, the
//! requests it takes complete with the right data, and a submission queue filled faster than
//! the thread drains it waits for room instead of failing or dropping requests.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::time::Duration;

use super::uring::UringBackend;
use super::{Backend, Completion, IoReq, Op};
use crate::clock::{monotonic_ns, RunClock};

const BS: usize = 4096;

/// A file of `blocks` 4 KiB blocks, block i filled with byte i.
fn blocks_file(blocks: usize) -> (std::path::PathBuf, std::fs::File) {
    let path =
        std::env::temp_dir().join(format!("tilemark-sqpoll-{}-{blocks}", std::process::id()));
    let mut f = std::fs::File::create(&path).unwrap();
    for i in 0..blocks {
        f.write_all(&[i as u8; BS]).unwrap();
    }
    (path.clone(), std::fs::File::open(&path).unwrap())
}

/// The names of this process's threads.
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|c| c.trim().to_string())
        .collect()
}

/// Queue `op` of block i from `bufs[i]` for every block, 4 in flight at most (a ring of 16
/// entries, filled before any wait), then submit until all completed: (request, result),
/// sorted.
fn queue_all_then_reap(b: &mut UringBackend, op: Op, bufs: &mut [Vec<u8>]) -> Vec<(u64, i32)> {
    for (i, buf) in bufs.iter_mut().enumerate() {
        b.queue(IoReq {
            user_data: i as u64,
            file: 0,
            op,
            buf: buf.as_mut_ptr(),
            len: BS as u32,
            offset: (i * BS) as u64,
            ioprio: 0,
        })
        .unwrap();
    }
    let clock = RunClock::monotonic(monotonic_ns(), 0, None, 1_000_000_000);
    let mut out: Vec<Completion> = Vec::new();
    let deadline = monotonic_ns() + 10_000_000_000;
    while out.len() < bufs.len() && monotonic_ns() < deadline {
        b.submit(&mut out, Some(clock.now() + 10_000_000), &clock)
            .unwrap();
    }
    let mut done: Vec<(u64, i32)> = out.iter().map(|c| (c.user_data, c.result)).collect();
    done.sort_unstable();
    done
}

#[test]
fn reads_queued_faster_than_the_kernel_thread_takes_them_all_complete_with_their_data() {
    let blocks = 40;
    let (path, file) = blocks_file(blocks);
    // 4 in flight at most: a ring of 16 entries, filled with 40 requests before any wait.
    let mut b = UringBackend::with_sqpoll(&[file.as_raw_fd()], 4, Duration::ZERO, true).unwrap();
    let mut bufs = vec![vec![0xffu8; BS]; blocks];
    let done = queue_all_then_reap(&mut b, Op::Read, &mut bufs);
    // The kernel's submission thread names itself once it runs.
    assert!(
        thread_names().iter().any(|n| n.starts_with("iou-sqp-")),
        "the kernel's submission thread: {:?}",
        thread_names()
    );
    let expected: Vec<(u64, i32)> = (0..blocks as u64).map(|i| (i, BS as i32)).collect();
    assert_eq!(done, expected);
    for (i, buf) in bufs.iter().enumerate() {
        assert!(buf.iter().all(|&x| x == i as u8), "block {i} read back");
    }
    drop(b);
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn linked_uncached_writes_queued_faster_than_the_thread_takes_them_complete_whole() {
    // Uncached writes made as a write and a sync_file_range, linked (a file that refuses
    // RWF_DONTCACHE, as tmpfs does): 24 of them, 48 entries, into a ring of 16 before any wait.
    // Each request completes once with the write's byte count, and the file holds the data:
    // a link the SQPOLL thread took apart would leave a sync_file_range on its own or a write
    // whose completion has no request.
    let blocks = 24; // a file of its own: blocks_file names it by its size
    let (path, _) = blocks_file(blocks);
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let mut b = UringBackend::with_sqpoll(&[file.as_raw_fd()], 4, Duration::ZERO, true).unwrap();
    b.set_uncached(0, super::UncachedKind::SyncRange);
    let mut bufs: Vec<Vec<u8>> = (0..blocks).map(|i| vec![!(i as u8); BS]).collect();
    let done = queue_all_then_reap(&mut b, Op::WriteUncached, &mut bufs);
    let expected: Vec<(u64, i32)> = (0..blocks as u64).map(|i| (i, BS as i32)).collect();
    assert_eq!(done, expected);
    drop(b);
    let back = std::fs::read(&path).unwrap();
    for i in 0..blocks {
        assert!(
            back[i * BS..(i + 1) * BS].iter().all(|&x| x == !(i as u8)),
            "block {i}"
        );
    }
    std::fs::remove_file(&path).unwrap();
}
