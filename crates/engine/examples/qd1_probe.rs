//! The engine's QD1 random-read loop reduced to its system calls, for telling the engine's own
//! costs apart from the machine's: `cargo run --release --example qd1_probe -- /dev/loopN MODE
//! SECONDS`, then the same case with fio (bench/README.md, "QD1 on a VM: where the thread and
//! the device's worker run").
//!
//! One 4 KiB O_DIRECT read at a time at uniformly random aligned offsets, on a ring set up as
//! fio's io_uring engine sets up its ring (`COOP_TASKRUN | SINGLE_ISSUER | DEFER_TASKRUN`).
//! MODE `split`: submit with `io_uring_enter(1, 0, GETEVENTS)`, then wait with `(0, 1,
//! GETEVENTS)` unless the completion is already there (fio's calls). MODE `one`: a single
//! `io_uring_enter(1, 1, GETEVENTS)` that submits and waits (the engine's sleeping wait).
//! Prints IOPS, the thread's CPU per IO, and its voluntary (slept) and involuntary (preempted)
//! context switches per IO.

use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::time::Instant;

use io_uring::{opcode, types, IoUring};

const BS: u64 = 4096;
const GETEVENTS: u32 = 1;
const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(path), Some(mode), Some(secs)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("usage: qd1_probe DEVICE split|one SECONDS");
        std::process::exit(2)
    };
    let secs: f64 = secs.parse().expect("SECONDS is a number");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .expect("readable with O_DIRECT");
    let fd = file.as_raw_fd();
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 to the pointer given.
    if unsafe { libc::ioctl(fd, BLKGETSIZE64, &mut size) } != 0 || size < BS {
        eprintln!("{path}: not a block device of at least 4 KiB");
        std::process::exit(2)
    }
    let blocks = size / BS;
    let mut ring = IoUring::builder()
        .setup_coop_taskrun()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .build(8)
        .expect("io_uring with DEFER_TASKRUN (Linux 6.1+)");
    let layout = std::alloc::Layout::from_size_align(BS as usize, BS as usize).unwrap();
    // SAFETY: a non-zero size; freed at exit.
    let buf = unsafe { std::alloc::alloc(layout) };
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let (cpu0, vol0, invol0) = thread_usage();
    let start = Instant::now();
    let mut ios = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let read = opcode::Read::new(types::Fd(fd), buf, BS as u32)
            .offset((x % blocks) * BS)
            .build();
        // SAFETY: `buf` outlives the request, which completes before the next loop turn.
        unsafe { ring.submission().push(&read).expect("room in the SQ") };
        // SAFETY: the one published entry references the live buffer.
        match mode.as_str() {
            "split" => unsafe {
                ring.submitter()
                    .enter::<libc::sigset_t>(1, 0, GETEVENTS, None)
                    .expect("submit");
                if ring.completion().is_empty() {
                    ring.submitter()
                        .enter::<libc::sigset_t>(0, 1, GETEVENTS, None)
                        .expect("wait");
                }
            },
            "one" => unsafe {
                ring.submitter()
                    .enter::<libc::sigset_t>(1, 1, GETEVENTS, None)
                    .expect("submit and wait");
            },
            other => {
                eprintln!("MODE must be split or one, got {other}");
                std::process::exit(2)
            }
        }
        let cqe: io_uring::cqueue::Entry = ring.completion().next().expect("a completion");
        assert_eq!(cqe.result(), BS as i32, "read result");
        ios += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    let (cpu1, vol1, invol1) = thread_usage();
    let n = ios as f64;
    println!(
        "{mode}: {:.0} IOPS, CPU {:.2} us/IO, slept {:.2} preempted {:.2} times/IO",
        n / secs,
        (cpu1 - cpu0) / n * 1e6,
        (vol1 - vol0) as f64 / n,
        (invol1 - invol0) as f64 / n
    );
}

/// This thread's CPU seconds, voluntary and involuntary context switches.
fn thread_usage() -> (f64, i64, i64) {
    // SAFETY: rusage is plain data; getrusage fills it.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut r) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(r.ru_utime) + secs(r.ru_stime), r.ru_nvcsw, r.ru_nivcsw)
}
