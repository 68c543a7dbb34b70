"""Preparing a file set under the directory the user handed over, and refusing what is unsafe.

Safety (docs/reliability.md, design.md Safety), one sentence each, nothing written first:
- the set's path must not climb with '..' (spec.py) and must not be a symbolic link;
- an existing directory is used only when it is empty or carries tilemark's marker
  (`.tilemark-fileset`, JSON with the set's description), and it may hold only the
  directories and files tilemark names (`dNN`, `fNNNNNNNN`): a link or a foreign file inside
  refuses the set;
- a read-only mount, more files and directories than free inodes, or more bytes than free
  space refuse it before anything is created.
Every directory is opened relative to its parent with O_NOFOLLOW and every file is created
with O_EXCL | O_NOFOLLOW relative to its directory, so a link planted while preparing is never
followed. Nothing outside the set's directory is created, changed or deleted.

A set of `kind = "dirs"` has empty directories where a set of files has files (entries named
the same); a run's mkdir makes such directories in any set, and making the set good again
removes them (rmdir: only empty ones, a directory with anything in it is refused as foreign).

A set whose marker matches its description is reused: its entries are compared with what
they should be (which exist, their sizes) and only the difference is made good (files a run
created are deleted, deleted ones made again, appended ones rewritten). A set made with another
description is emptied (only tilemark's names) and made anew.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import random
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass

from tilemark.errors import RunError, UsageError
from tilemark.files.spec import MAX_DEPTH, MAX_FILES, MAX_WIDTH, FilesetSpec
from tilemark.units import format_size

MARKER = ".tilemark-fileset"
MARKER_VERSION = 1
ENTRY_RE = re.compile(r"f(\d{8})")
DIR_RE = re.compile(r"d(\d{2,4})")
CHUNK = 1 << 20
DIR_ENTRY = -1  # in a walk's sizes: the entry is an (empty) directory
NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

Progress = Callable[[int, int], None]  # (files written so far, files to write)


def entry_name(i: int) -> str:
    return f"f{i:08d}"


def leaf_dirs(spec: FilesetSpec) -> list[str]:
    """The directories files live in, relative to the set's root ('' is the root)."""
    digits = max(2, len(str(spec.width - 1)))
    dirs = [""]
    for _ in range(spec.depth):
        dirs = [f"{d}/d{k:0{digits}d}".lstrip("/") for d in dirs for k in range(spec.width)]
    return dirs


def layout(spec: FilesetSpec) -> list[tuple[int, int | None]]:
    """Per entry: (leaf directory index, size if the entry exists after prepare, else None).
    Entry i lives in directory i % dirs; the first `prealloc` percent of entries exist; sizes
    are drawn from the set's seed, so the same description gives the same set."""
    rng = random.Random(spec.seed)
    ndirs = spec.width**spec.depth
    present = round(spec.files * spec.prealloc / 100)
    if spec.kind == "dirs":
        return [(i % ndirs, 0 if i < present else None) for i in range(spec.files)]
    return [(i % ndirs, spec.size.draw(rng) if i < present else None) for i in range(spec.files)]


@dataclass(frozen=True)
class PreparedSet:
    """A prepared file set: its layout as it is on disk now, and what preparing it took."""

    spec: FilesetSpec
    dirs: tuple[str, ...]
    entries: tuple[tuple[int, int | None], ...]
    reused: bool
    created: int
    rewritten: int
    removed: int
    seconds: float

    @property
    def files(self) -> int:
        if self.spec.kind == "dirs":
            return 0
        return sum(1 for _, s in self.entries if s is not None)

    @property
    def entry_dirs(self) -> int:
        """Entries that are directories (a set of kind "dirs")."""
        if self.spec.kind != "dirs":
            return 0
        return sum(1 for _, s in self.entries if s is not None)

    @property
    def bytes(self) -> int:
        return sum(s for _, s in self.entries if s is not None)


def _refuse(spec: FilesetSpec, what: str) -> UsageError:
    return UsageError(f"fileset '{spec.name}': {what}")


def _read_marker(spec: FilesetSpec, root_fd: int) -> dict | None:
    try:
        fd = os.open(MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root_fd)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _refuse(
                spec,
                f"{spec.path}/{MARKER} is a symbolic link; a set's marker is a file "
                "tilemark wrote, remove the link.",
            ) from None
        raise
    try:
        raw = os.read(fd, 1 << 16)
    finally:
        os.close(fd)
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict) or doc.get("tilemark_fileset") != MARKER_VERSION:
            raise ValueError
        d = doc.get("description")
        if not isinstance(d, dict):
            raise ValueError
        # What a walk of the old set relies on (a marker edited by hand must not crash it).
        for key, hi in (("depth", MAX_DEPTH), ("width", MAX_WIDTH), ("files", MAX_FILES)):
            v = d.get(key)
            lo = 0 if key == "depth" else 1
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError
    except (ValueError, RecursionError):
        raise _refuse(
            spec,
            f"{spec.path}/{MARKER} is not a tilemark file set marker; remove the "
            "directory's contents yourself or name another directory.",
        ) from None
    return doc


def _write_marker(spec: FilesetSpec, root_fd: int, state: str) -> None:
    doc = {
        "tilemark_fileset": MARKER_VERSION,
        "name": spec.name,
        "description": spec.description(),
        "state": state,
        "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    tmp = MARKER + ".tmp"
    try:
        os.unlink(tmp, dir_fd=root_fd)
    except FileNotFoundError:
        pass
    fd = os.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
        dir_fd=root_fd,
    )  # fmt: skip
    try:
        os.write(fd, json.dumps(doc, indent=2).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, MARKER, src_dir_fd=root_fd, dst_dir_fd=root_fd)


def _open_root(spec: FilesetSpec) -> tuple[int | None, bool]:
    """(fd of the set's directory or None if it does not exist yet, whether it existed)."""
    try:
        st = os.lstat(spec.path)
    except FileNotFoundError:
        parent = os.path.dirname(spec.path)
        if not os.path.isdir(parent):
            raise _refuse(
                spec,
                f"the directory above {spec.path} does not exist; tilemark creates the "
                "set's own directory only.",
            ) from None
        return None, False
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(
            spec, f"{spec.path} is a symbolic link; name the directory it points to instead."
        )
    if not stat.S_ISDIR(st.st_mode):
        raise _refuse(spec, f"{spec.path} is not a directory; a file set lives in a directory.")
    return os.open(spec.path, NOFOLLOW_DIR), True


def _subdir(fd: int, name: str) -> int:
    return os.open(name, NOFOLLOW_DIR, dir_fd=fd)


def _walk(
    spec: FilesetSpec, root_fd: int, depth: int, width: int, files: int
) -> tuple[dict[int, int], set[str]]:
    """What a set of this shape holds now: sizes of existing entries, and the directories
    present. Anything else (a link, a foreign name, an entry in the wrong place) refuses."""
    ndirs = width**depth
    dirs = leaf_dirs(FilesetSpec(spec.name, spec.path, depth, width, files, 0, spec.size, 0))
    index = {d: k for k, d in enumerate(dirs)}
    digits = max(2, len(str(width - 1)))
    found: dict[int, int] = {}
    present: set[str] = set()

    def visit(fd: int, rel: str, level: int) -> None:
        present.add(rel)
        with os.scandir(fd) as it:
            for e in it:
                where = f"{spec.path}/{rel}/{e.name}".replace("//", "/")
                if rel == "" and e.name in (MARKER, MARKER + ".tmp"):
                    continue
                if e.is_symlink():
                    raise _refuse(
                        spec,
                        f"{where} is a symbolic link; a file set holds only the "
                        "directories and files tilemark made, so remove it.",
                    )
                if level < depth:
                    m = DIR_RE.fullmatch(e.name)
                    if m and len(m.group(1)) == digits and int(m.group(1)) < width and \
                            e.is_dir(follow_symlinks=False):  # fmt: skip
                        sub = _subdir(fd, e.name)
                        try:
                            visit(sub, f"{rel}/{e.name}".lstrip("/"), level + 1)
                        finally:
                            os.close(sub)
                        continue
                else:
                    m = ENTRY_RE.fullmatch(e.name)
                    is_dir = e.is_dir(follow_symlinks=False)
                    if m and (is_dir or e.is_file(follow_symlinks=False)):
                        i = int(m.group(1))
                        if i < files and i % ndirs == index[rel]:
                            if not is_dir:
                                found[i] = e.stat(follow_symlinks=False).st_size
                                continue
                            sub = _subdir(fd, e.name)
                            try:
                                inside = os.listdir(sub)
                            finally:
                                os.close(sub)
                            if not inside:
                                found[i] = DIR_ENTRY
                                continue
                            where = f"{where}/{sorted(inside)[0]}"
                raise _refuse(
                    spec,
                    f"{where} was not made by tilemark (a file set holds only the "
                    "directories and files tilemark names); move it out of the set.",
                )

    visit(root_fd, "", 0)
    return found, present


def _check_capacity(spec: FilesetSpec, where: str, inodes: int, space: int, writes: bool) -> None:
    try:
        vfs = os.statvfs(where)
    except OSError as e:
        raise RunError(f"fileset '{spec.name}': cannot inspect {where}: {e.strerror}.") from None
    if vfs.f_flag & os.ST_RDONLY and writes:
        raise _refuse(
            spec,
            f"{spec.path} is on a read-only mount; a file set that is created or "
            "written needs a writable file system.",
        )
    # f_files == 0: no fixed inode count (tmpfs without nr_inodes, btrfs).
    if vfs.f_files and inodes > vfs.f_favail:
        raise _refuse(
            spec,
            f"{spec.files:,} files in {spec.width**spec.depth:,} directories need "
            f"{inodes:,} more inodes but the file system of {spec.path} has {vfs.f_favail:,} "
            "free; use fewer files or a larger file system.",
        )
    free = vfs.f_bavail * vfs.f_frsize
    if space > free:
        raise _refuse(
            spec,
            f"the files need {format_size(space)} more but the file system of "
            f"{spec.path} has {format_size(free)} free; use fewer or smaller files.",
        )


def _write_entry(dir_fd: int, name: str, size: int, data: bytes, exists: bool) -> None:
    flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    flags |= os.O_TRUNC if exists else os.O_CREAT | os.O_EXCL
    fd = os.open(name, flags, 0o644, dir_fd=dir_fd)
    try:
        done = 0
        while done < size:
            done += os.write(fd, data[: min(len(data), size - done)])
    finally:
        os.close(fd)


def _empty(spec: FilesetSpec, root_fd: int, old: dict) -> int:
    """Remove a set made with another description: only what its walk says is tilemark's."""
    depth, width, files = int(old["depth"]), int(old["width"]), int(old["files"])
    found, present = _walk(spec, root_fd, depth, width, files)
    old_dirs = leaf_dirs(FilesetSpec(spec.name, spec.path, depth, width, files, 0, spec.size, 0))
    for i, size in found.items():
        rel = old_dirs[i % len(old_dirs)]
        fd = _subpath(root_fd, rel)
        try:
            _remove_entry(fd, i, size)
        finally:
            if fd != root_fd:
                os.close(fd)
    for rel in sorted(present, key=lambda r: -r.count("/")):
        if rel:
            parent, _, name = rel.rpartition("/")
            pfd = _subpath(root_fd, parent)
            try:
                os.rmdir(name, dir_fd=pfd)
            finally:
                if pfd != root_fd:
                    os.close(pfd)
    return len(found)


def _remove_entry(dir_fd: int, i: int, found_size: int) -> None:
    """Remove entry i as the walk found it: a file, or an empty directory."""
    if found_size == DIR_ENTRY:
        os.rmdir(entry_name(i), dir_fd=dir_fd)
    else:
        os.unlink(entry_name(i), dir_fd=dir_fd)


def _subpath(root_fd: int, rel: str, make: bool = False) -> int:
    """fd of directory `rel` beneath the root, one component at a time without links."""
    fd = root_fd
    for part in [p for p in rel.split("/") if p]:
        if make:
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
        nxt = _subdir(fd, part)
        if fd != root_fd:
            os.close(fd)
        fd = nxt
    return fd


def prepare_fileset(
    spec: FilesetSpec, *, writes: bool = True, progress: Progress | None = None
) -> PreparedSet:
    """Create the set (or make an existing one of tilemark's match its description), after
    the safety checks. `writes`: the workload will create, append or delete (a read-only
    mount is then refused even when the set is ready)."""
    t0 = time.monotonic()
    want = layout(spec)
    dirs = leaf_dirs(spec)
    root_fd, existed = _open_root(spec)
    try:
        marker = _read_marker(spec, root_fd) if root_fd is not None else None
        if root_fd is not None and marker is None and os.listdir(root_fd):
            first = sorted(os.listdir(root_fd))[0]
            raise _refuse(
                spec,
                f"{spec.path} holds files tilemark did not create (such as {first!r}); "
                "name an empty directory or one tilemark made a file set in.",
            )
        same = marker is not None and marker["description"] == spec.description()
        found: dict[int, int] = {}
        present: set[str] = set()
        if marker is not None and same:
            found, present = _walk(spec, root_fd, spec.depth, spec.width, spec.files)
        elif marker is not None:
            _walk(  # checks the old set is all tilemark's before anything is removed
                spec, root_fd, *(int(marker["description"][k]) for k in ("depth", "width", "files"))
            )
        want_size = (lambda s: DIR_ENTRY) if spec.kind == "dirs" else (lambda s: s)  # noqa: E731
        to_write = [
            i
            for i, (_, size) in enumerate(want)
            if size is not None and found.get(i) != want_size(size)
        ]
        to_remove = [i for i in found if want[i][1] is None]
        missing_dirs = [d for d in _all_dirs(dirs) if d not in present]
        # Every entry may exist during a run (creates), each directory and the marker too.
        inodes = len(want) - len(found) + len(missing_dirs) + (marker is None)
        space = sum(want[i][1] or 0 for i in to_write) - sum(
            max(found.get(i, 0), 0) for i in to_write
        )
        changes = bool(to_write or to_remove or missing_dirs or not same)
        where = spec.path if existed else os.path.dirname(spec.path)
        _check_capacity(spec, where, inodes, max(space, 0), writes or changes)
        if not changes:
            if spec.sync:
                _syncfs(spec, root_fd)
            return PreparedSet(spec, tuple(dirs), tuple(want), True, 0, 0, 0,
                               time.monotonic() - t0)  # fmt: skip
        if root_fd is None:
            try:
                os.mkdir(spec.path, 0o755)
            except OSError as e:
                raise RunError(
                    f"fileset '{spec.name}': cannot create {spec.path}: {e.strerror}."
                ) from None
            root_fd = os.open(spec.path, NOFOLLOW_DIR)
        removed = 0
        try:
            _write_marker(spec, root_fd, "preparing")
            if marker is not None and not same:
                removed += _empty(spec, root_fd, marker["description"])
                found, to_write = {}, [i for i, (_, s) in enumerate(want) if s is not None]
                to_remove = []
            dir_fds = [_subpath(root_fd, d, make=True) for d in dirs]
            try:
                for i in to_remove:
                    _remove_entry(dir_fds[want[i][0]], i, found[i])
                    removed += 1
                data = os.urandom(min(CHUNK, max((s or 0) for _, s in want) or 1))
                for k, i in enumerate(to_write):
                    d, size = want[i]
                    # An entry of the other kind (a file where a directory belongs, a
                    # directory a run's mkdir made) goes first.
                    other = i in found and (found[i] == DIR_ENTRY) != (spec.kind == "dirs")
                    if other:
                        _remove_entry(dir_fds[d], i, found[i])
                    if spec.kind == "dirs":
                        os.mkdir(entry_name(i), 0o755, dir_fd=dir_fds[d])
                    else:
                        _write_entry(
                            dir_fds[d], entry_name(i), size or 0, data, i in found and not other
                        )
                    if progress is not None and (k % 1000 == 999 or k == len(to_write) - 1):
                        progress(k + 1, len(to_write))
            finally:
                for fd in dir_fds:
                    if fd != root_fd:
                        os.close(fd)
            os.fsync(root_fd)
            _write_marker(spec, root_fd, "ready")
        except UsageError:
            raise
        except OSError as e:
            name = f" ({e.filename})" if e.filename else ""
            raise RunError(
                f"fileset '{spec.name}': preparing {spec.path} failed: {e.strerror or e}{name}."
            ) from None
        created = sum(1 for i in to_write if i not in found)
        if spec.sync:
            _syncfs(spec, root_fd)
        return PreparedSet(
            spec, tuple(dirs), tuple(want), marker is not None and same, created,
            len(to_write) - created, removed, time.monotonic() - t0,
        )  # fmt: skip
    finally:
        if root_fd is not None:
            os.close(root_fd)


def _syncfs(spec: FilesetSpec, fd: int) -> None:
    """Write the file system's dirty data to disk (syncfs(2)): a set with `sync = true` starts
    its run on disk, as fio's files do after its layout (create_fsync, on by default)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syncfs(fd) != 0:
        e = ctypes.get_errno()
        raise RunError(f"fileset '{spec.name}': syncfs of {spec.path} failed: {os.strerror(e)}.")


def _all_dirs(leaves: list[str]) -> list[str]:
    """Every directory of the tree (the root '' included), parents before children."""
    out: dict[str, None] = {"": None}
    for leaf in leaves:
        parts = leaf.split("/") if leaf else []
        for k in range(1, len(parts) + 1):
            out["/".join(parts[:k])] = None
    return list(out)
