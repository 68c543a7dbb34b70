//! The system calls of file operations (psync: one call at a time on the calling thread), all
//! relative to a directory fd opened beneath the set's root.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;

use super::EntryName;

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn c(name: &str) -> CString {
    CString::new(name).expect("entry names hold no NUL")
}

/// struct open_how (linux/openat2.h); libc's is non-exhaustive.
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// Open a directory beneath `root_fd` without following any link on the way and without
/// leaving it (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, Linux 5.6).
pub fn open_dir_beneath(root_fd: RawFd, rel: &str) -> io::Result<RawFd> {
    let path = c(if rel.is_empty() { "." } else { rel });
    let how = OpenHow {
        flags: (libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC | libc::O_NOFOLLOW) as u64,
        mode: 0,
        resolve: libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS,
    };
    // SAFETY: path and how live across the call; the kernel copies `how` (size given).
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root_fd,
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(fd as RawFd)
    }
}

/// Open the root directory itself (a link there is refused: O_NOFOLLOW).
pub fn open_root(path: &str) -> io::Result<RawFd> {
    let p = c(path);
    // SAFETY: a valid C string; the fd returned is owned by the caller.
    check(unsafe {
        libc::open(
            p.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
        )
    })
}

pub fn open(dir: RawFd, name: &EntryName, write: bool) -> io::Result<RawFd> {
    let mode = if write { libc::O_RDWR } else { libc::O_RDONLY };
    // SAFETY: a valid C string and a directory fd owned by the run.
    check(unsafe {
        libc::openat(
            dir,
            name.as_ptr(),
            mode | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    })
}

pub fn create(dir: RawFd, name: &EntryName) -> io::Result<RawFd> {
    // SAFETY: as `open`; O_EXCL never opens what exists (a planted link included).
    check(unsafe {
        libc::openat(
            dir,
            name.as_ptr(),
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o644 as libc::c_uint,
        )
    })
}

pub fn close(fd: RawFd) -> io::Result<()> {
    // SAFETY: the fd is owned by the thread's open-file list, which drops it here.
    check(unsafe { libc::close(fd) }).map(|_| ())
}

/// Size of a file by name, links not followed.
pub fn stat(dir: RawFd, name: &EntryName) -> io::Result<u64> {
    // SAFETY: st is written by the kernel; a valid C string and directory fd.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    check(unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) })?;
    Ok(st.st_size as u64)
}

pub fn unlink(dir: RawFd, name: &EntryName) -> io::Result<()> {
    // SAFETY: a valid C string and directory fd; a name without a slash stays in `dir`.
    check(unsafe { libc::unlinkat(dir, name.as_ptr(), 0) }).map(|_| ())
}

/// Rename a file to a name that must not exist (RENAME_NOREPLACE: never over a file).
pub fn rename(from_dir: RawFd, from: &EntryName, to_dir: RawFd, to: &EntryName) -> io::Result<()> {
    // SAFETY: valid C strings and directory fds; names without a slash stay in their dirs.
    check(unsafe {
        libc::renameat2(
            from_dir,
            from.as_ptr(),
            to_dir,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    })
    .map(|_| ())
}

pub fn fsync(fd: RawFd) -> io::Result<()> {
    // SAFETY: an open fd.
    check(unsafe { libc::fsync(fd) }).map(|_| ())
}

/// Read `len` bytes from offset 0 (0: until end of file) in calls of at most `buf.len()`;
/// bytes read.
pub fn read(fd: RawFd, len: u64, buf: &mut [u8]) -> io::Result<u64> {
    let mut done = 0u64;
    loop {
        let want = if len == 0 {
            buf.len()
        } else {
            (len - done).min(buf.len() as u64) as usize
        };
        if want == 0 {
            return Ok(done);
        }
        // SAFETY: buf holds at least `want` bytes.
        let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), want, done as i64) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Ok(done);
        }
        done += n as u64;
    }
}

/// Write `len` bytes at `offset` in calls of at most `buf.len()`; bytes written.
pub fn write_at(fd: RawFd, offset: u64, len: u64, buf: &[u8]) -> io::Result<u64> {
    let mut done = 0u64;
    while done < len {
        let want = (len - done).min(buf.len() as u64) as usize;
        // SAFETY: buf holds at least `want` bytes.
        let n = unsafe { libc::pwrite(fd, buf.as_ptr().cast(), want, (offset + done) as i64) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        done += n as u64;
    }
    Ok(done)
}

/// Make an empty directory by the entry's name (mode 0755; never over anything: EEXIST).
pub fn mkdir(dir: RawFd, name: &EntryName) -> io::Result<()> {
    // SAFETY: a valid C string and directory fd; a name without a slash stays in `dir`.
    check(unsafe { libc::mkdirat(dir, name.as_ptr(), 0o755) }).map(|_| ())
}

/// Remove an empty directory by the entry's name (a link or a file by that name: ENOTDIR).
pub fn rmdir(dir: RawFd, name: &EntryName) -> io::Result<()> {
    // SAFETY: as `unlink`.
    check(unsafe { libc::unlinkat(dir, name.as_ptr(), libc::AT_REMOVEDIR) }).map(|_| ())
}

/// The times `setattr` sets: access time left alone, modification time now.
pub const SETATTR_TIMES: [libc::timespec; 2] = [
    libc::timespec {
        tv_sec: 0,
        tv_nsec: libc::UTIME_OMIT,
    },
    libc::timespec {
        tv_sec: 0,
        tv_nsec: libc::UTIME_NOW,
    },
];

/// Set a file's modification time to now by name, links not followed (vdbench's setattr:
/// Java's File.setLastModified, a utimensat that keeps the access time).
pub fn setattr(dir: RawFd, name: &EntryName) -> io::Result<()> {
    // SAFETY: a valid C string, directory fd and two timespecs.
    check(unsafe {
        libc::utimensat(
            dir,
            name.as_ptr(),
            SETATTR_TIMES.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })
    .map(|_| ())
}

/// Set an open file's size.
pub fn truncate(fd: RawFd, size: u64) -> io::Result<()> {
    // SAFETY: an open fd.
    check(unsafe { libc::ftruncate(fd, size as libc::off_t) }).map(|_| ())
}

/// Allocate `len` bytes at `offset` of an open file (mode 0: the size grows to cover them).
pub fn fallocate(fd: RawFd, offset: u64, len: u64) -> io::Result<()> {
    // SAFETY: an open fd.
    check(unsafe { libc::fallocate(fd, 0, offset as libc::off_t, len as libc::off_t) }).map(|_| ())
}
