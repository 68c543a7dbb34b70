"""One run per target: an advisory lock held for a whole run or study (issue 28 hardened it:
no links followed, nothing written that another user owns)."""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import json
import os
import stat
from pathlib import Path

from tilemark.errors import UsageError
from tilemark.targets.header import TargetInfo

LOCK_DIRS = ("/run/lock/tilemark", os.path.join("/tmp", "tilemark-locks"))


def _owner(uid: int) -> str:
    import pwd  # POSIX only; imported where it is used

    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _open_lock_dir(candidate: str) -> tuple[int | None, str]:
    """(a directory fd, "") for a lock directory that is safe to use, else (None, why not).

    Safe means a real directory (never a symbolic link) owned by root or by the running user,
    and writable by its owner alone or sticky (like /tmp), so that nobody else can rename or
    replace the lock files in it. Lock files are opened relative to the returned fd, so the
    directory cannot be swapped for another between this check and their use."""
    created = False
    try:
        os.mkdir(candidate, 0o1777)
        created = True
    except FileExistsError:
        pass  # whatever is there is checked below
    except OSError as e:
        return None, f"{candidate} cannot be created ({e.strerror})"
    try:
        fd = os.open(candidate, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            return None, f"{candidate} is a link or a file, not a directory"
        return None, f"{candidate} cannot be opened ({e.strerror})"
    if created:
        os.fchmod(fd, 0o1777)  # sticky and open to every user's runs; the umask took bits away
    st = os.fstat(fd)
    problem = ""
    if st.st_uid not in (0, os.geteuid()):
        problem = f"{candidate} belongs to {_owner(st.st_uid)}, not to root or to you"
    elif st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        problem = f"{candidate} is writable by others and not sticky"
    elif not os.access(candidate, os.W_OK | os.X_OK):
        problem = f"{candidate} is not writable by you"
    if problem:
        os.close(fd)
        return None, problem
    return fd, ""


def _lock_dir_fd() -> tuple[int, str]:
    """(directory fd, path) of where target locks live: /run/lock/tilemark when it is safe to
    use, else /tmp/tilemark-locks; UsageError naming what is wrong with each when neither is."""
    refused = []
    for candidate in LOCK_DIRS:
        fd, why = _open_lock_dir(candidate)
        if fd is not None:
            return fd, candidate
        refused.append(why)
    raise UsageError(
        f"no safe directory for target locks: {'; '.join(refused)}; remove or fix it (as its "
        "owner or root) and run again."
    )


def _open_lock_file(dir_fd: int, dir_path: str, name: str) -> tuple[int, bool]:
    """(fd, writable) of the lock file `name` in the lock directory, never following a link.

    A new file is created by us (0644) and holds our record. An existing one is used only when
    it is a plain file with one link; when another user owns it (their run created it) we lock
    it without writing to it. Anything else there is refused with a sentence."""
    path = f"{dir_path}/{name}"
    base = os.O_NOFOLLOW | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC
    for _attempt in range(5):  # the file may vanish between two calls: try again
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | base, 0o644, dir_fd=dir_fd)
            return fd, True
        except FileExistsError:
            pass
        try:
            try:
                fd, read_write = os.open(name, os.O_RDWR | base, dir_fd=dir_fd), True
            except PermissionError:
                fd, read_write = os.open(name, os.O_RDONLY | base, dir_fd=dir_fd), False
        except FileNotFoundError:
            continue
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise UsageError(
                    f"the lock file {path} is a symbolic link; tilemark never follows links "
                    "there. Remove it (as root) and run again."
                ) from None
            raise UsageError(f"the lock file {path} cannot be opened: {e.strerror}.") from None
        st = os.fstat(fd)
        problem = ""
        if not stat.S_ISREG(st.st_mode):
            problem = "is not a regular file"
        elif st.st_nlink != 1:
            problem = f"has {st.st_nlink} hard links (another name points at the same file)"
        if problem:
            os.close(fd)
            raise UsageError(
                f"the lock file {path} {problem}; tilemark uses only plain files it or another "
                "tilemark run created there. Remove it (as root) and run again."
            )
        return fd, read_write and st.st_uid == os.geteuid()
    raise UsageError(f"the lock file {path} keeps disappearing; is another program removing it?")


def lock_key(info: TargetInfo) -> str:
    """The same key for a target however it is named: the device number of a block device,
    else the file's real path."""
    if info.kind == "block":
        rdev = os.stat(info.path).st_rdev
        return f"block-{os.major(rdev)}:{os.minor(rdev)}"
    return "file-" + hashlib.sha256(os.path.realpath(info.path).encode()).hexdigest()[:24]


class TargetLock:
    """An advisory lock on a target for a whole run or study, so two tilemark runs never use
    one target at once (one filling it while the other measures). The lock file records who
    holds it; the kernel drops the lock when the holder exits, however it exits."""

    def __init__(self, info: TargetInfo, argv: list[str]):
        self.info = info
        self.argv = argv
        self.name = f"{lock_key(info)}.lock"
        self.path = Path(LOCK_DIRS[0]) / self.name  # where it is once __enter__ has chosen
        self.fd: int | None = None
        self.writable = False

    def __enter__(self) -> TargetLock:
        import fcntl  # POSIX only; imported where it is used

        dir_fd, dir_path = _lock_dir_fd()
        self.path = Path(dir_path) / self.name
        try:
            fd, writable = _open_lock_file(dir_fd, dir_path, self.name)
        finally:
            os.close(dir_fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self._holder(fd)
            os.close(fd)
            raise UsageError(
                f"target {self.info.path} is in use by another tilemark run ({holder}); wait "
                "for it to end or use another target."
            ) from None
        if writable:
            record = {
                "pid": os.getpid(),
                "argv": self.argv,
                "target": self.info.path,
                "since": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            }
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(record).encode(), 0)
        self.fd, self.writable = fd, writable
        return self

    @staticmethod
    def _holder(fd: int) -> str:
        try:
            record = json.loads(os.pread(fd, 65536, 0) or b"{}")
            command = " ".join(record.get("argv") or [])
            return f"pid {record['pid']}, since {record['since']}: {command}"
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            return "holder unknown"

    def __exit__(self, *exc_info: object) -> None:
        if self.fd is not None:
            if self.writable:
                os.ftruncate(self.fd, 0)
            os.close(self.fd)  # closing releases the flock
            self.fd = None


def lock_target(info: TargetInfo, argv: list[str]) -> TargetLock:
    """`with lock_target(info, argv):` holds the target for the run (UsageError if taken)."""
    return TargetLock(info, argv)
