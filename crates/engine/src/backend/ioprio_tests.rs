//! The IO priority of a request reaches the kernel, on both backends that do IO: the kernel
//! refuses a priority of an invalid class (7) with EINVAL (io_uring: the SQE's ioprio, checked
//! by ioprio_check_cap; psync: ioprio_set on the worker thread), and accepts idle and best
//! effort. A field the backend dropped would make the invalid one succeed.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::time::Duration;

use super::{complete_one, open_backend, IoReq, Op};
use crate::plan::BackendKind;

const IDLE: u16 = 3 << 13;
const BE_7: u16 = (2 << 13) | 7;
const INVALID_CLASS: u16 = 7 << 13;

/// Results of one 4 KiB read per priority in `prios`, issued one after another.
fn read_at_priorities(kind: BackendKind, prios: &[u16]) -> Vec<i32> {
    let path =
        std::env::temp_dir().join(format!("tilemark-ioprio-{}-{kind:?}", std::process::id()));
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(&[7u8; 8192]).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let mut backend = open_backend(kind, &[file.as_raw_fd()], 4, Duration::ZERO, false).unwrap();
    let mut buf = vec![0u8; 4096];
    let mut results = Vec::new();
    for (i, &ioprio) in prios.iter().enumerate() {
        let req = IoReq {
            user_data: i as u64,
            file: 0,
            op: Op::Read,
            buf: buf.as_mut_ptr(),
            len: 4096,
            offset: 4096,
            ioprio,
        };
        results.push(complete_one(backend.as_mut(), req).result);
    }
    drop(backend);
    std::fs::remove_file(&path).unwrap();
    results
}

#[test]
fn io_uring_carries_each_ios_priority_in_its_sqe() {
    let r = read_at_priorities(BackendKind::Uring, &[IDLE, INVALID_CLASS, BE_7, 0]);
    assert_eq!(r, [4096, -libc::EINVAL, 4096, 4096]);
}

#[test]
fn psync_sets_its_worker_threads_priority_before_the_io() {
    // One worker (one IO at a time): it changes its priority between the reads.
    let r = read_at_priorities(BackendKind::Psync, &[IDLE, INVALID_CLASS, BE_7, 0]);
    assert_eq!(r, [4096, -libc::EINVAL, 4096, 4096]);
}
