"""Files tilemark writes where the user asked (exports, reports, translated job files).

tilemark often runs as root, in directories other users can write to. So an output file is
never written through a symbolic link and never over a file tilemark did not write, unless the
user passes --force:

- every file is written to a new temporary file in its directory (created exclusively, so it
  cannot be a link planted in advance) and renamed over its name; a rename replaces a link
  itself, never what it points to, and a reader never sees half a file;
- an existing file is replaced only when tilemark wrote it: a directory of outputs keeps a
  manifest (`.tilemark-outputs.json`: each file's inode, size and modification time as written),
  a single output file is recognised by the marker its format carries (the generator line of a
  report, the header comment of a translated job). A file edited since counts as the user's.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from tilemark.errors import UsageError

MANIFEST = ".tilemark-outputs.json"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _existing(dest: Path) -> os.stat_result | None:
    try:
        return os.lstat(dest)
    except FileNotFoundError:
        return None


def check_replaceable(
    dest: Path, *, force: bool, ours: Callable[[Path, os.stat_result], bool], what: str
) -> None:
    """UsageError unless writing `dest` replaces nothing but a file tilemark wrote (or force)."""
    st = _existing(dest)
    if st is None:
        return
    if stat.S_ISLNK(st.st_mode):
        if force:
            return  # the rename replaces the link itself, never what it points to
        raise UsageError(
            f"{what} {dest} is a symbolic link; tilemark does not write through links. Remove "
            "it, or pass --force to replace the link itself."
        )
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{what} {dest} exists and is not a regular file; choose another name.")
    if not force and not ours(dest, st):
        raise UsageError(
            f"{what} {dest} exists and was not written by tilemark (or was changed since); pass "
            "--force to replace it."
        )


@contextlib.contextmanager
def replacing(
    dest: Path,
    *,
    force: bool = False,
    ours: Callable[[Path, os.stat_result], bool] = lambda _p, _s: False,
    what: str = "output",
) -> Iterator[BinaryIO]:
    """`with replacing(dest, ...) as f: f.write(...)`: a new file at `dest` once the block ends
    without an exception, nothing at all (the old file intact) when it raises."""
    dest = Path(dest)
    check_replaceable(dest, force=force, ours=ours, what=what)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # what an ordinary new file would get
        with os.fdopen(fd, "wb") as f:
            yield f
        # Checked again right before the rename: something may have appeared meanwhile.
        check_replaceable(dest, force=force, ours=ours, what=what)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_file(
    dest: Path,
    data: bytes | str,
    *,
    force: bool = False,
    ours: Callable[[Path, os.stat_result], bool] = lambda _p, _s: False,
    what: str = "output",
) -> Path:
    """Write `data` (str as UTF-8) to `dest` as `replacing` does; returns dest."""
    with replacing(dest, force=force, ours=ours, what=what) as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(dest)


def starts_with(marker: bytes, within: int = 4096) -> Callable[[Path, os.stat_result], bool]:
    """An ownership test: the file holds `marker` in its first `within` bytes."""

    def test(path: Path, _st: os.stat_result) -> bool:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            return marker in os.pread(fd, within, 0)
        finally:
            os.close(fd)

    return test


def _signature(st: os.stat_result) -> list[int]:
    return [st.st_ino, st.st_size, st.st_mtime_ns]


class OutputDir:
    """A directory of output files (CSV, PNG/SVG): `with OutputDir(d, force=...) as out:` then
    `out.write(name, data)` or `with out.file(name) as f:`; the manifest is saved at the end."""

    def __init__(self, path: Path, *, force: bool = False, what: str = "output"):
        self.path = Path(path)
        self.force = force
        self.what = what
        self.written: list[Path] = []
        self._manifest: dict[str, list[int]] = {}

    def __enter__(self) -> OutputDir:
        self.path.mkdir(parents=True, exist_ok=True)
        self._manifest = self._load_manifest()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.written:
            data = json.dumps(self._manifest, indent=1, sort_keys=True) + "\n"
            write_file(self.path / MANIFEST, data, ours=lambda _p, _s: True, what=self.what)

    def _load_manifest(self) -> dict[str, list[int]]:
        try:
            fd = os.open(self.path / MANIFEST, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return {}
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return {}
            doc = json.loads(os.read(fd, 1 << 20) or b"{}")
        except (ValueError, RecursionError):
            return {}
        finally:
            os.close(fd)
        if not isinstance(doc, dict):
            return {}
        return {k: v for k, v in doc.items() if isinstance(k, str) and isinstance(v, list)}

    def _ours(self, name: str) -> Callable[[Path, os.stat_result], bool]:
        return lambda _p, st: self._manifest.get(name) == _signature(st)

    @contextlib.contextmanager
    def file(self, name: str) -> Iterator[BinaryIO]:
        """A binary file object for the output `name`; replaced in place when the block ends."""
        if "/" in name or name in ("", ".", "..", MANIFEST):
            raise ValueError(f"not an output file name: {name!r}")
        dest = self.path / name
        with replacing(dest, force=self.force, ours=self._ours(name), what=self.what) as f:
            yield f
        self._manifest[name] = _signature(os.lstat(dest))
        self.written.append(dest)

    def write(self, name: str, data: bytes | str) -> Path:
        """Write one whole output file; returns its path."""
        with self.file(name) as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        return self.path / name
