//! File operations with plain system calls: one engine thread per stream thread, each with
//! one operation at a time (the counting rules are run.rs's).

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use super::run::Shared;
use super::table::{Kind, OpMix, Picker, Table};
use super::{ops, EntryName, FileOp, FilePlan, FileStreamSpec};
use crate::rng::Rng;

/// A file a thread holds open.
struct Held {
    entry: usize,
    fd: RawFd,
    size: u64,
}

pub(super) struct Worker {
    stream: usize,
    tid: usize,
    fileset: usize,
    shared: Arc<Shared>,
    mix: OpMix,
    picker: Picker,
    rng: Rng,
    held: VecDeque<Held>,
    openfiles: usize,
    write: bool,
    read_size: u64,
    append_size: u64,
    truncate_size: u64,
    buf: Vec<u8>,
    /// Intended start of the current open-loop operation or loop.
    intended: Option<u64>,
    loop_start: u64,
}

impl Worker {
    pub(super) fn new(
        stream: usize,
        tid: usize,
        k: usize,
        s: &FileStreamSpec,
        plan: &FilePlan,
        shared: Arc<Shared>,
    ) -> Self {
        let mut rng = Rng::new(s.seed.wrapping_add((k as u64).wrapping_mul(0x9E37_79B9)));
        let buf_len = s.io_size.min(s.append_size.max(s.read_size).max(4096)) as usize;
        let mut buf = vec![0u8; buf_len.max(s.io_size.min(1 << 20) as usize)];
        rng.fill_bytes(&mut buf); // incompressible appends
        Worker {
            stream,
            tid,
            fileset: s.fileset,
            mix: OpMix::new(&s.ops, s.sequence),
            picker: Picker::new(
                &s.select,
                plan.filesets[s.fileset].entries.len(),
                &shared.cursors[stream],
            ),
            rng,
            held: VecDeque::new(),
            openfiles: s.openfiles,
            write: s.ops.iter().any(|o| o.0.writes()),
            read_size: s.read_size,
            append_size: s.append_size,
            truncate_size: s.truncate_size,
            buf,
            intended: None,
            loop_start: 0,
            shared,
        }
    }

    pub(super) fn run(&mut self) {
        while !self.shared.stop.load(Ordering::Acquire) {
            let (op, first) = self.mix.next(&mut self.rng);
            if first {
                if self.mix.loop_len() > 1 && self.loop_start > 0 {
                    self.end_loop();
                }
                if !self.shared.take_budget(self.stream) || !self.wait_turn() {
                    break;
                }
                self.loop_start = self.shared.now();
            }
            self.step(op);
        }
        for h in std::mem::take(&mut self.held) {
            let _ = ops::close(h.fd);
            self.table().release(h.entry, true, h.size);
        }
        self.shared.running.fetch_sub(1, Ordering::AcqRel);
    }

    /// Open loop: sleep until the next intended time (false if the run stopped meanwhile).
    fn wait_turn(&mut self) -> bool {
        let Some(sched) = &self.shared.schedules[self.stream] else {
            return true;
        };
        let due = sched.lock().unwrap().take();
        self.intended = Some(due);
        loop {
            if self.shared.stop.load(Ordering::Acquire) {
                return false;
            }
            let now = self.shared.now();
            if now >= due {
                return true;
            }
            std::thread::sleep(Duration::from_nanos((due - now).min(10_000_000)));
        }
    }

    fn end_loop(&mut self) {
        self.shared
            .end_loop(self.tid, self.loop_start, self.intended);
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.shared.tables[self.fileset].lock().unwrap()
    }

    fn dir_fd(&self, dir: u32) -> RawFd {
        self.shared.dirs[self.fileset][dir as usize]
    }

    fn record(&self, op: FileOp, t0: u64, result: &io::Result<u64>, entry: usize) {
        let result = match result {
            Ok(n) => Ok(*n),
            Err(e) => Err(e.raw_os_error().unwrap_or(libc::EIO)),
        };
        let response = (self.mix.loop_len() == 1)
            .then_some(self.intended)
            .flatten();
        self.shared
            .record(self.tid, self.fileset, op, t0, result, entry, response);
    }

    fn skip(&self, op: FileOp) {
        self.shared.skip(self.tid, op);
    }

    fn step(&mut self, op: FileOp) {
        match op {
            FileOp::Open => {
                self.open_one();
            }
            FileOp::Create => self.create_one(),
            FileOp::Close => match self.held.pop_back() {
                Some(h) => self.close_held(h),
                None => self.skip(op),
            },
            op if op.by_name() => self.by_name(op),
            FileOp::Rename => {
                let start = self.picker.pick(&mut self.rng);
                let free_start = self.rng.below(self.picker_len()) as usize;
                let Some((from, to)) = self.table().take_rename_pair(start, free_start) else {
                    return self.skip(op);
                };
                let ((i, from_dir, size), (j, to_dir)) = (from, to);
                let (fd_a, fd_b) = (self.dir_fd(from_dir), self.dir_fd(to_dir));
                let t0 = self.shared.now();
                let r = ops::rename(fd_a, &EntryName::new(i), fd_b, &EntryName::new(j)).map(|_| 0);
                self.record(op, t0, &r, i);
                let mut t = self.table();
                t.release(i, r.is_err(), size);
                t.release(j, r.is_ok(), size);
            }
            _ => {
                if self.held.is_empty() && !self.open_one() {
                    return self.skip(op);
                }
                let h = self.held.back_mut().expect("a held file");
                let (fd, entry, size) = (h.fd, h.entry, h.size);
                let t0 = self.shared.now();
                let r = match op {
                    FileOp::Read => ops::read(fd, self.read_size, &mut self.buf),
                    FileOp::Append => ops::write_at(fd, size, self.append_size, &self.buf),
                    FileOp::Truncate => ops::truncate(fd, self.truncate_size).map(|_| 0),
                    FileOp::Fallocate => {
                        ops::fallocate(fd, size, self.append_size).map(|_| self.append_size)
                    }
                    _ => ops::fsync(fd).map(|_| 0),
                };
                self.record(op, t0, &r, entry);
                if matches!(op, FileOp::Truncate | FileOp::Fallocate) {
                    let h = self.held.back_mut().expect("a held file");
                    h.size = match (op, &r) {
                        (FileOp::Truncate, Ok(_)) => self.truncate_size,
                        (FileOp::Fallocate, Ok(_)) => size + self.append_size,
                        // A failed call leaves the size the file says it has.
                        _ => held_size(fd, size),
                    };
                } else if op == FileOp::Append {
                    let h = self.held.back_mut().expect("a held file");
                    h.size = match r {
                        Ok(n) => size + n,
                        // A failed append may have written part: the file says how much.
                        Err(_) => held_size(fd, size),
                    };
                }
            }
        }
    }

    /// An operation on an entry by its name (FileOp::by_name): take the entry, make the
    /// call, count it, give the entry back as the call left it.
    fn by_name(&mut self, op: FileOp) {
        if matches!(op, FileOp::Stat | FileOp::Statdir) && self.shared.fixed[self.fileset].is_some()
        {
            return self.stat_fixed(op);
        }
        let start = if op == FileOp::Mkdir {
            self.picker.free_start(&mut self.rng)
        } else {
            self.picker.pick(&mut self.rng)
        };
        let Some(taken) = self.table().take_for(op, start) else {
            return self.skip(op);
        };
        let (i, dir, _) = taken;
        let (dir, name) = (self.dir_fd(dir), EntryName::new(i));
        let t0 = self.shared.now();
        let r = match op {
            FileOp::Delete => ops::unlink(dir, &name),
            FileOp::Mkdir => ops::mkdir(dir, &name),
            FileOp::Rmdir => ops::rmdir(dir, &name),
            FileOp::Setattr => ops::setattr(dir, &name),
            _ => ops::stat(dir, &name).map(|_| ()),
        }
        .map(|_| 0);
        self.record(op, t0, &r, i);
        self.table().release_after(op, taken, r.is_ok());
    }

    /// A stat in a set whose entries cannot change (`Shared::fixed`): no lock, no busy mark.
    fn stat_fixed(&mut self, op: FileOp) {
        let kind = if op == FileOp::Statdir {
            Kind::Dir
        } else {
            Kind::File
        };
        let start = self.picker.pick(&mut self.rng);
        let fixed = self.shared.fixed[self.fileset].as_ref();
        let Some((i, dir)) = fixed.and_then(|f| f.pick(start, kind)) else {
            return self.skip(op);
        };
        let (dir, name) = (self.dir_fd(dir), EntryName::new(i));
        let t0 = self.shared.now();
        let r = ops::stat(dir, &name).map(|_| 0);
        self.record(op, t0, &r, i);
    }

    fn make_room(&mut self) {
        while self.held.len() >= self.openfiles {
            let h = self.held.pop_front().expect("a held file");
            self.close_held(h);
        }
    }

    fn close_held(&mut self, h: Held) {
        let t0 = self.shared.now();
        let r = ops::close(h.fd).map(|_| 0);
        self.record(FileOp::Close, t0, &r, h.entry);
        self.table().release(h.entry, true, h.size);
    }

    /// Open an existing file and hold it; false if none is free to open or the open failed.
    fn open_one(&mut self) -> bool {
        self.make_room();
        let start = self.picker.pick(&mut self.rng);
        let Some((i, dir, size)) = self.table().take_existing_entry(start) else {
            self.skip(FileOp::Open);
            return false;
        };
        let (dir, name) = (self.dir_fd(dir), EntryName::new(i));
        let t0 = self.shared.now();
        let r = ops::open(dir, &name, self.write);
        self.record(
            FileOp::Open,
            t0,
            &r.as_ref().map(|_| 0).map_err(clone_err),
            i,
        );
        match r {
            Ok(fd) => {
                self.held.push_back(Held { entry: i, fd, size });
                true
            }
            Err(_) => {
                self.table().release(i, true, size);
                false
            }
        }
    }

    fn create_one(&mut self) {
        self.make_room();
        let start = self.picker.free_start(&mut self.rng);
        let Some((i, dir)) = self.table().take_free_entry(start) else {
            return self.skip(FileOp::Create);
        };
        let (dir, name) = (self.dir_fd(dir), EntryName::new(i));
        let t0 = self.shared.now();
        let r = ops::create(dir, &name);
        self.record(
            FileOp::Create,
            t0,
            &r.as_ref().map(|_| 0).map_err(clone_err),
            i,
        );
        match r {
            Ok(fd) => self.held.push_back(Held {
                entry: i,
                fd,
                size: 0,
            }),
            Err(_) => self.table().release(i, false, 0),
        }
    }

    fn picker_len(&self) -> u64 {
        self.table().entries.len() as u64
    }
}

fn clone_err(e: &io::Error) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error().unwrap_or(libc::EIO))
}

/// The size of held file `fd` as the file system says (after a failed call may have changed
/// part of it); `size` if even that fails.
pub(super) fn held_size(fd: RawFd, size: u64) -> u64 {
    std::fs::File::from(dup_fd(fd))
        .metadata()
        .map(|m| m.len())
        .unwrap_or(size)
}

/// A duplicate of `fd` the caller owns (to fstat through `File` without closing `fd`).
fn dup_fd(fd: RawFd) -> std::os::fd::OwnedFd {
    use std::os::fd::{BorrowedFd, OwnedFd};
    // SAFETY: fd is open for the duration of this call (held by the thread).
    let b = unsafe { BorrowedFd::borrow_raw(fd) };
    b.try_clone_to_owned().unwrap_or_else(|_| {
        // Fall back to /dev/null: metadata then reports 0 and the size stays as it was.
        OwnedFd::from(std::fs::File::open("/dev/null").expect("/dev/null"))
    })
}
