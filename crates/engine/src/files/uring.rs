//! File operations through io_uring (IORING_OP_OPENAT, CLOSE, STATX, UNLINKAT, RENAMEAT,
//! MKDIRAT, READ, WRITE, FSYNC, FALLOCATE, FTRUNCATE): one engine thread per stream drives
//! `threads` slots, each a client with one operation in flight, so a stream of 64 clients
//! costs one thread instead of 64. A call with no opcode in this kernel (setattr has none in
//! any: there is no IORING_OP_UTIMENSAT; ftruncate came in 6.9, mkdirat in 5.15) is made by the
//! stream's thread itself, timed and counted the same way.
//!
//! A slot follows the same rules as a psync thread (run.rs): each operation expands into the
//! calls it needs (an open before a read with nothing held, a close of the oldest before an
//! open with `openfiles` held), each call is counted as the operation it is, and whole-file
//! reads and long appends go on in `io_size` calls timed as one operation.
//!
//! Longer than 600 lines because the slot's state machine (expand an operation into calls,
//! submit a call, complete it) reads best as one piece: the three halves share every field.

use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use io_uring::{opcode, types, IoUring};

use super::run::Shared;
use super::table::{OpMix, Picker, Taken};
use super::{ops, EntryName, FileOp, FilePlan, FileStreamSpec};
use crate::rng::Rng;

/// A call of an operation, resolved to an entry and an fd only when it is submitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Call {
    CloseOldest,
    CloseLast,
    Open,
    Create,
    /// stat, delete, mkdir, rmdir, statdir, setattr (FileOp::by_name).
    ByName(FileOp),
    Read,
    Append,
    Fsync,
    /// truncate, fallocate: a held file's size changes.
    Resize(FileOp),
    Rename,
}

/// The call a slot has in flight.
#[derive(Clone, Copy, Debug)]
enum Pending {
    Open {
        entry: usize,
        size: u64,
    },
    Create {
        entry: usize,
    },
    Close {
        entry: usize,
        size: u64,
    },
    ByName {
        op: FileOp,
        taken: Taken,
    },
    Resize {
        op: FileOp,
        entry: usize,
        fd: RawFd,
        base: u64,
    },
    Read {
        entry: usize,
        fd: RawFd,
        done: u64,
    },
    Append {
        entry: usize,
        fd: RawFd,
        base: u64,
        done: u64,
    },
    Fsync {
        entry: usize,
    },
    Rename {
        from: usize,
        to: usize,
        size: u64,
    },
}

struct Held {
    entry: usize,
    fd: RawFd,
    size: u64,
}

struct Slot {
    tid: usize,
    mix: OpMix,
    rng: Rng,
    held: VecDeque<Held>,
    calls: VecDeque<Call>,
    /// The operation of the mix or sequence the calls belong to.
    op: FileOp,
    pending: Option<Pending>,
    /// When the call in flight (a chunked read or append: its first call) began.
    started: u64,
    intended: Option<u64>,
    /// Open loop: the next operation is due then.
    waiting: Option<(u64, FileOp)>,
    /// The stream's budget (limit) is used up: the slot starts nothing more.
    finished: bool,
    loop_start: u64,
    /// The name the call in flight reads (it must live until the call completes).
    name: EntryName,
    /// A rename's new name.
    name2: EntryName,
    statx: Box<libc::statx>,
    buf: Vec<u8>,
}

pub(super) struct UringStream {
    stream: usize,
    fileset: usize,
    shared: Arc<Shared>,
    ring: IoUring,
    slots: Vec<Slot>,
    picker: Picker,
    entries: u64,
    openfiles: usize,
    write: bool,
    read_size: u64,
    append_size: u64,
    truncate_size: u64,
    sequence: bool,
    /// This kernel has IORING_OP_MKDIRAT (5.15) and IORING_OP_FTRUNCATE (6.9).
    has_mkdirat: bool,
    has_ftruncate: bool,
}

/// Skips a slot may take in a row before the others get their turn.
const MAX_SKIPS: usize = 64;

impl UringStream {
    pub(super) fn new(
        stream: usize,
        first_tid: usize,
        s: &FileStreamSpec,
        plan: &FilePlan,
        shared: Arc<Shared>,
    ) -> std::io::Result<Self> {
        let ring = IoUring::new((s.threads.next_power_of_two().max(8)) as u32)?;
        let buf_len = s.io_size.min(s.append_size.max(s.read_size).max(4096)) as usize;
        let slots = (0..s.threads)
            .map(|k| {
                let mut rng = Rng::new(s.seed.wrapping_add((k as u64).wrapping_mul(0x9E37_79B9)));
                let mut buf = vec![0u8; buf_len.max(s.io_size.min(1 << 20) as usize)];
                rng.fill_bytes(&mut buf);
                Slot {
                    tid: first_tid + k,
                    mix: OpMix::new(&s.ops, s.sequence),
                    rng,
                    held: VecDeque::new(),
                    calls: VecDeque::new(),
                    op: FileOp::Open,
                    pending: None,
                    started: 0,
                    intended: None,
                    waiting: None,
                    finished: false,
                    loop_start: 0,
                    name: EntryName::default(),
                    name2: EntryName::default(),
                    // SAFETY: statx is plain data; zero is a valid value.
                    statx: Box::new(unsafe { std::mem::zeroed() }),
                    buf,
                }
            })
            .collect();
        let entries = plan.filesets[s.fileset].entries.len();
        let mut probe = io_uring::Probe::new();
        let probed = ring.submitter().register_probe(&mut probe).is_ok();
        let has = |code| probed && probe.is_supported(code);
        Ok(UringStream {
            has_mkdirat: has(opcode::MkDirAt::CODE),
            has_ftruncate: has(opcode::Ftruncate::CODE),
            truncate_size: s.truncate_size,
            stream,
            fileset: s.fileset,
            ring,
            slots,
            picker: Picker::new(&s.select, entries, &shared.cursors[stream]),
            entries: entries as u64,
            openfiles: s.openfiles,
            write: s.ops.iter().any(|o| o.0.writes()),
            read_size: s.read_size,
            append_size: s.append_size,
            sequence: s.sequence,
            shared,
        })
    }

    pub(super) fn run(&mut self) {
        let mut inflight = 0usize;
        let mut done = Vec::new();
        loop {
            let stopping = self.shared.stop.load(Ordering::Acquire);
            for k in 0..self.slots.len() {
                if self.advance(k, stopping) {
                    inflight += 1;
                }
            }
            if inflight == 0 {
                if stopping || self.slots.iter().all(|s| s.finished) {
                    break;
                }
                // Nothing in flight: every slot waits for its due time (or skipped MAX_SKIPS
                // times and tries again).
                let now = self.shared.now();
                let due = self
                    .slots
                    .iter()
                    .filter_map(|s| s.waiting.map(|w| w.0))
                    .min();
                match due {
                    Some(d) if d > now => {
                        std::thread::sleep(Duration::from_nanos((d - now).min(10_000_000)))
                    }
                    _ => std::thread::yield_now(),
                }
                continue;
            }
            let waiting = self
                .slots
                .iter()
                .filter_map(|s| s.waiting.map(|w| w.0))
                .min();
            let wait = match waiting {
                Some(d) => d.saturating_sub(self.shared.now()).min(10_000_000),
                None => 10_000_000, // look at the stop flag at least every 10 ms
            };
            let ts = types::Timespec::from(Duration::from_nanos(wait.max(1)));
            let args = types::SubmitArgs::new().timespec(&ts);
            match self.ring.submitter().submit_with_args(1, &args) {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ETIME | libc::EINTR | libc::EBUSY)
                    ) => {}
                Err(e) => panic!("io_uring submit failed: {e}"),
            }
            done.clear();
            done.extend(
                self.ring
                    .completion()
                    .map(|c| (c.user_data() as usize, c.result())),
            );
            for &(k, res) in &done {
                inflight -= 1;
                if self.complete(k, res) {
                    inflight += 1;
                }
            }
        }
        for k in 0..self.slots.len() {
            for h in std::mem::take(&mut self.slots[k].held) {
                let _ = ops::close(h.fd);
                self.shared.tables[self.fileset]
                    .lock()
                    .unwrap()
                    .release(h.entry, true, h.size);
            }
        }
        self.shared.running.fetch_sub(1, Ordering::AcqRel);
    }

    /// Start the next call of slot `k` if it is idle; true if one was submitted.
    fn advance(&mut self, k: usize, stopping: bool) -> bool {
        for _ in 0..MAX_SKIPS {
            let now = self.shared.now();
            let s = &mut self.slots[k];
            if s.pending.is_some() {
                return false;
            }
            if stopping || s.finished {
                s.calls.clear();
                return false;
            }
            if let Some((due, op)) = s.waiting {
                if now < due {
                    return false;
                }
                s.waiting = None;
                s.loop_start = now;
                self.expand(k, op);
            } else if s.calls.is_empty() {
                let (op, first) = s.mix.next(&mut s.rng);
                if first {
                    if self.sequence && s.loop_start > 0 {
                        self.shared.end_loop(s.tid, s.loop_start, s.intended);
                        s.loop_start = 0;
                    }
                    if !self.shared.take_budget(self.stream) {
                        s.finished = true;
                        return false;
                    }
                    if let Some(sched) = &self.shared.schedules[self.stream] {
                        let due = sched.lock().unwrap().take();
                        s.intended = Some(due);
                        if due > now {
                            s.waiting = Some((due, op));
                            return false;
                        }
                    }
                    s.loop_start = now;
                }
                self.expand(k, op);
            }
            let call = self.slots[k].calls.pop_front().expect("expanded");
            if self.submit(k, call) {
                return true;
            }
        }
        false
    }

    fn expand(&mut self, k: usize, op: FileOp) {
        let s = &mut self.slots[k];
        s.op = op;
        match op {
            FileOp::Open | FileOp::Create => {
                if s.held.len() >= self.openfiles {
                    s.calls.push_back(Call::CloseOldest);
                }
                s.calls.push_back(if op == FileOp::Open {
                    Call::Open
                } else {
                    Call::Create
                });
            }
            FileOp::Close => s.calls.push_back(Call::CloseLast),
            FileOp::Rename => s.calls.push_back(Call::Rename),
            op if op.by_name() => s.calls.push_back(Call::ByName(op)),
            _ => {
                if s.held.is_empty() {
                    s.calls.push_back(Call::Open);
                }
                s.calls.push_back(match op {
                    FileOp::Read => Call::Read,
                    FileOp::Append => Call::Append,
                    FileOp::Fsync => Call::Fsync,
                    _ => Call::Resize(op),
                });
            }
        }
    }

    /// Nothing to act on: count the operation skipped and drop the rest of its calls.
    fn skip(&mut self, k: usize, call_op: FileOp) {
        let s = &mut self.slots[k];
        self.shared.skip(s.tid, call_op);
        if s.op != call_op {
            self.shared.skip(s.tid, s.op);
        }
        s.calls.clear();
    }

    /// Resolve a call and queue it; false if it found nothing to act on (skipped).
    fn submit(&mut self, k: usize, call: Call) -> bool {
        let now = self.shared.now();
        let table = &self.shared.tables[self.fileset];
        let (sqe, pending) = match call {
            Call::CloseOldest | Call::CloseLast => {
                let s = &mut self.slots[k];
                let h = if call == Call::CloseOldest {
                    s.held.pop_front()
                } else {
                    s.held.pop_back()
                };
                let Some(h) = h else {
                    self.skip(k, FileOp::Close);
                    return false;
                };
                (
                    opcode::Close::new(types::Fd(h.fd)).build(),
                    Pending::Close {
                        entry: h.entry,
                        size: h.size,
                    },
                )
            }
            Call::Open | Call::Create => {
                let pick = if call == Call::Create {
                    let start = self.picker.free_start(&mut self.slots[k].rng);
                    table
                        .lock()
                        .unwrap()
                        .take_free_entry(start)
                        .map(|(i, d)| (i, d, 0))
                } else {
                    let start = self.picker.pick(&mut self.slots[k].rng);
                    table.lock().unwrap().take_existing_entry(start)
                };
                let op = if call == Call::Open {
                    FileOp::Open
                } else {
                    FileOp::Create
                };
                let Some((entry, dir, size)) = pick else {
                    self.skip(k, op);
                    return false;
                };
                let dir = types::Fd(self.shared.dirs[self.fileset][dir as usize]);
                let s = &mut self.slots[k];
                s.name = EntryName::new(entry);
                let name = s.name.as_ptr();
                let base = libc::O_NOFOLLOW | libc::O_CLOEXEC;
                if call == Call::Open {
                    let mode = if self.write {
                        libc::O_RDWR
                    } else {
                        libc::O_RDONLY
                    };
                    (
                        opcode::OpenAt::new(dir, name).flags(base | mode).build(),
                        Pending::Open { entry, size },
                    )
                } else {
                    (
                        opcode::OpenAt::new(dir, name)
                            .flags(base | libc::O_RDWR | libc::O_CREAT | libc::O_EXCL)
                            .mode(0o644)
                            .build(),
                        Pending::Create { entry },
                    )
                }
            }
            Call::ByName(op) => {
                let start = if op == FileOp::Mkdir {
                    self.picker.free_start(&mut self.slots[k].rng)
                } else {
                    self.picker.pick(&mut self.slots[k].rng)
                };
                let Some(taken) = table.lock().unwrap().take_for(op, start) else {
                    self.skip(k, op);
                    return false;
                };
                let dir_fd = self.shared.dirs[self.fileset][taken.1 as usize];
                let dir = types::Fd(dir_fd);
                let s = &mut self.slots[k];
                s.name = EntryName::new(taken.0);
                let name = s.name.as_ptr();
                let pending = Pending::ByName { op, taken };
                let sqe = match op {
                    FileOp::Stat | FileOp::Statdir => opcode::Statx::new(
                        dir,
                        name,
                        (&mut *s.statx as *mut libc::statx).cast::<types::statx>(),
                    )
                    .flags(libc::AT_SYMLINK_NOFOLLOW)
                    .mask(libc::STATX_BASIC_STATS)
                    .build(),
                    FileOp::Delete => opcode::UnlinkAt::new(dir, name).build(),
                    FileOp::Rmdir => opcode::UnlinkAt::new(dir, name)
                        .flags(libc::AT_REMOVEDIR)
                        .build(),
                    FileOp::Mkdir if self.has_mkdirat => {
                        opcode::MkDirAt::new(dir, name).mode(0o755).build()
                    }
                    _ => {
                        // setattr (no opcode), mkdir on a kernel before 5.15.
                        let r = if op == FileOp::Mkdir {
                            ops::mkdir(dir_fd, &s.name)
                        } else {
                            ops::setattr(dir_fd, &s.name)
                        };
                        self.inline(k, now, pending, r.map(|_| 0));
                        return false;
                    }
                };
                (sqe, pending)
            }
            Call::Rename => {
                let start = self.picker.pick(&mut self.slots[k].rng);
                let free_start = self.slots[k].rng.below(self.entries) as usize;
                let pair = table.lock().unwrap().take_rename_pair(start, free_start);
                let Some((from, to)) = pair else {
                    self.skip(k, FileOp::Rename);
                    return false;
                };
                let ((i, from_dir, size), (j, to_dir)) = (from, to);
                let dirs = &self.shared.dirs[self.fileset];
                let (a, b) = (
                    types::Fd(dirs[from_dir as usize]),
                    types::Fd(dirs[to_dir as usize]),
                );
                let s = &mut self.slots[k];
                s.name = EntryName::new(i);
                s.name2 = EntryName::new(j);
                (
                    opcode::RenameAt::new(a, s.name.as_ptr(), b, s.name2.as_ptr())
                        .flags(libc::RENAME_NOREPLACE)
                        .build(),
                    Pending::Rename {
                        from: i,
                        to: j,
                        size,
                    },
                )
            }
            Call::Read | Call::Append | Call::Fsync | Call::Resize(_) => {
                let s = &mut self.slots[k];
                let h = s
                    .held
                    .back()
                    .expect("an open file before its read, append, fsync or resize");
                let (fd, entry, size) = (h.fd, h.entry, h.size);
                match call {
                    Call::Read => (
                        self.read_sqe(k, fd, 0),
                        Pending::Read { entry, fd, done: 0 },
                    ),
                    Call::Append => (
                        self.write_sqe(k, fd, size, 0),
                        Pending::Append {
                            entry,
                            fd,
                            base: size,
                            done: 0,
                        },
                    ),
                    Call::Fsync => (
                        opcode::Fsync::new(types::Fd(fd)).build(),
                        Pending::Fsync { entry },
                    ),
                    Call::Resize(op) => {
                        let pending = Pending::Resize {
                            op,
                            entry,
                            fd,
                            base: size,
                        };
                        let sqe = match op {
                            FileOp::Fallocate => {
                                opcode::Fallocate::new(types::Fd(fd), self.append_size)
                                    .offset(size)
                                    .build()
                            }
                            _ if self.has_ftruncate => {
                                opcode::Ftruncate::new(types::Fd(fd), self.truncate_size).build()
                            }
                            _ => {
                                let r = ops::truncate(fd, self.truncate_size).map(|_| 0);
                                self.inline(k, now, pending, r);
                                return false;
                            }
                        };
                        (sqe, pending)
                    }
                    _ => unreachable!("a call on the held file"),
                }
            }
        };
        let s = &mut self.slots[k];
        s.started = now;
        s.pending = Some(pending);
        self.push(k, sqe);
        true
    }

    /// A call made by the stream's thread itself (no opcode for it): counted as if it had
    /// completed through the ring at once.
    fn inline(&mut self, k: usize, started: u64, pending: Pending, r: std::io::Result<u64>) {
        self.slots[k].started = started;
        let res = match r {
            Ok(n) => n as i32,
            Err(e) => -e.raw_os_error().unwrap_or(libc::EIO),
        };
        let queued = self.finish(k, pending, res);
        debug_assert!(!queued, "an inline call has no follow-up");
    }

    fn read_sqe(&mut self, k: usize, fd: RawFd, done: u64) -> io_uring::squeue::Entry {
        let s = &mut self.slots[k];
        let want = if self.read_size == 0 {
            s.buf.len() as u64
        } else {
            (self.read_size - done).min(s.buf.len() as u64)
        };
        opcode::Read::new(types::Fd(fd), s.buf.as_mut_ptr(), want as u32)
            .offset(done)
            .build()
    }

    fn write_sqe(&mut self, k: usize, fd: RawFd, base: u64, done: u64) -> io_uring::squeue::Entry {
        let s = &mut self.slots[k];
        let want = (self.append_size - done).min(s.buf.len() as u64);
        opcode::Write::new(types::Fd(fd), s.buf.as_ptr(), want as u32)
            .offset(base + done)
            .build()
    }

    fn push(&mut self, k: usize, sqe: io_uring::squeue::Entry) {
        let sqe = sqe.user_data(k as u64);
        // SAFETY: every buffer and name the entry points to is owned by slot k and left
        // alone until its completion is reaped (one call in flight per slot).
        unsafe {
            while self.ring.submission().push(&sqe).is_err() {
                let _ = self.ring.submit();
            }
        }
    }

    fn record(&self, k: usize, op: FileOp, res: std::result::Result<u64, i32>, entry: usize) {
        let s = &self.slots[k];
        let response = (!self.sequence).then_some(s.intended).flatten();
        self.shared
            .record(s.tid, self.fileset, op, s.started, res, entry, response);
    }

    fn release(&self, entry: usize, exists: bool, size: u64) {
        self.shared.tables[self.fileset]
            .lock()
            .unwrap()
            .release(entry, exists, size);
    }

    /// A call of slot `k` completed with `res`; true if it queued a follow-up call (the next
    /// chunk of a read or append, or the next call of the operation).
    fn complete(&mut self, k: usize, res: i32) -> bool {
        let pending = self.slots[k].pending.take().expect("a call in flight");
        if self.finish(k, pending, res) {
            return true;
        }
        // The operation's next call, or the next operation.
        let stopping = self.shared.stop.load(Ordering::Acquire);
        self.advance(k, stopping)
    }

    /// Count call `pending` of slot `k` that ended with `res` and give back what it held; true
    /// if it queued a follow-up (the next chunk of a read or append).
    fn finish(&mut self, k: usize, pending: Pending, res: i32) -> bool {
        let err = (res < 0).then_some(-res);
        match pending {
            Pending::Open { entry, size } => {
                self.record(k, FileOp::Open, err.map_or(Ok(0), Err), entry);
                if err.is_none() {
                    self.slots[k].held.push_back(Held {
                        entry,
                        fd: res,
                        size,
                    });
                } else {
                    self.release(entry, true, size);
                    let s = &mut self.slots[k];
                    if s.op != FileOp::Open {
                        self.shared.skip(s.tid, s.op);
                    }
                    s.calls.clear();
                }
            }
            Pending::Create { entry } => {
                self.record(k, FileOp::Create, err.map_or(Ok(0), Err), entry);
                if err.is_none() {
                    self.slots[k].held.push_back(Held {
                        entry,
                        fd: res,
                        size: 0,
                    });
                } else {
                    self.release(entry, false, 0);
                }
            }
            Pending::Close { entry, size } => {
                self.record(k, FileOp::Close, err.map_or(Ok(0), Err), entry);
                self.release(entry, true, size);
            }
            Pending::ByName { op, taken } => {
                self.record(k, op, err.map_or(Ok(0), Err), taken.0);
                self.shared.tables[self.fileset]
                    .lock()
                    .unwrap()
                    .release_after(op, taken, err.is_none());
            }
            Pending::Resize {
                op,
                entry,
                fd,
                base,
            } => {
                let bytes = if op == FileOp::Fallocate {
                    self.append_size
                } else {
                    0
                };
                self.record(k, op, err.map_or(Ok(bytes), Err), entry);
                let size = match (op, err) {
                    (FileOp::Fallocate, None) => base + self.append_size,
                    (_, None) => self.truncate_size,
                    _ => super::psync::held_size(fd, base),
                };
                if let Some(h) = self.slots[k].held.back_mut() {
                    h.size = size;
                }
            }
            Pending::Read { entry, fd, done } => {
                if let Some(e) = err {
                    self.record(k, FileOp::Read, Err(e), entry);
                } else {
                    let done = done + res as u64;
                    let more = res > 0 && (self.read_size == 0 || done < self.read_size);
                    if more && !self.shared.stop.load(Ordering::Acquire) {
                        let sqe = self.read_sqe(k, fd, done);
                        self.slots[k].pending = Some(Pending::Read { entry, fd, done });
                        self.push(k, sqe);
                        return true;
                    }
                    self.record(k, FileOp::Read, Ok(done), entry);
                }
            }
            Pending::Append {
                entry,
                fd,
                base,
                done,
            } => {
                if let Some(e) = err {
                    self.record(k, FileOp::Append, Err(e), entry);
                    // A failed append may have written part: the file says how much.
                    if let Some(h) = self.slots[k].held.back_mut() {
                        h.size = super::psync::held_size(fd, base);
                    }
                } else {
                    let done = done + res as u64;
                    if res > 0 && done < self.append_size {
                        let sqe = self.write_sqe(k, fd, base, done);
                        self.slots[k].pending = Some(Pending::Append {
                            entry,
                            fd,
                            base,
                            done,
                        });
                        self.push(k, sqe);
                        return true;
                    }
                    if let Some(h) = self.slots[k].held.back_mut() {
                        h.size = base + done;
                    }
                    self.record(k, FileOp::Append, Ok(done), entry);
                }
            }
            Pending::Rename { from, to, size } => {
                self.record(k, FileOp::Rename, err.map_or(Ok(0), Err), from);
                self.release(from, err.is_some(), size);
                self.release(to, err.is_none(), size);
            }
            Pending::Fsync { entry } => {
                self.record(k, FileOp::Fsync, err.map_or(Ok(0), Err), entry);
            }
        }
        false
    }
}
