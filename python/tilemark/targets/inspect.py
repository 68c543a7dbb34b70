"""Inspecting a target before any IO: what it is (new file, tilemark file, foreign file, block
device), how large its data area is, how IO must be aligned, and whether this run may write it.
`inspect_target` decides everything without writing; prepare.py then creates and fills.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tilemark.errors import UsageError
from tilemark.targets.block import block_device_size, check_block_writable
from tilemark.targets.header import (
    DEFAULT_ALIGN,
    DEFAULT_DATA_DIR,
    DEFAULT_FREE_SHARE,
    DEFAULT_SIZE_CAP,
    DEFAULT_SIZE_MIN,
    HEADER_READ_TIMEOUT_S,
    HEADER_SIZE,
    TargetInfo,
    default_align,
    probe_dio_alignment,
    read_device_doc,
    read_device_record,
    read_header,
)
from tilemark.targets.prepare import hole_bytes
from tilemark.units import MIB, format_size


def _existing_ancestor(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def free_bytes(directory: Path) -> int:
    """Bytes an unprivileged writer may still allocate on the filesystem holding `directory`."""
    st = os.statvfs(_existing_ancestor(directory))
    return st.f_bavail * st.f_frsize


def _is_default_data_dir(directory: Path) -> bool:
    return directory == Path.cwd() / DEFAULT_DATA_DIR


def _check_free_space(directory: Path, needed: int, path: str, size_flag: str) -> None:
    available = free_bytes(directory)
    if needed > available:
        raise UsageError(
            f"not enough free space for target {path}: it needs {format_size(needed)} more, "
            f"{format_size(available)} is free on {_existing_ancestor(directory)}; lower "
            f"{size_flag} or free some space."
        )


def default_size(path: str) -> int:
    """The data area a target gets when the user names no size: an existing target's own
    (never grown unasked: growing a target is --size or --capacity, and said when it happens),
    else min(2 GiB, 10% of the free space)."""
    target = Path(os.path.abspath(os.path.expanduser(path)))
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise UsageError(f"target {target} cannot be examined: {e.strerror}.") from None
    if st is not None and stat.S_ISBLK(st.st_mode):
        return min(DEFAULT_SIZE_CAP, block_device_size(str(target)))
    if st is not None and stat.S_ISREG(st.st_mode):
        header = read_header(str(target))
        if header is None:
            return min(DEFAULT_SIZE_CAP, st.st_size)
        return int(header["data_length"])
    share = int(free_bytes(target.parent) * DEFAULT_FREE_SHARE)
    size = min(DEFAULT_SIZE_CAP, share) // MIB * MIB
    if size < DEFAULT_SIZE_MIN:
        raise UsageError(
            f"not enough free space for the default workload: 10% of the free space near "
            f"{target} is {format_size(share)}, under the {format_size(DEFAULT_SIZE_MIN)} it "
            f"needs; free some space or pass --size."
        )
    return size


def inspect_target(
    path: str,
    *,
    size: int | None,
    writes: bool,
    direct: bool,
    destroy_data: str | None = None,
    force: bool = False,
    size_flag: str = "--size",
    fill: bool = False,
    io_timeout_s: float = HEADER_READ_TIMEOUT_S,
) -> TargetInfo:
    """Check a target against the safety rules and work out its data area; never writes.
    `size_flag` is how messages name the size (--size, or --capacity for tiles); `fill` asks
    to write a block device's data area before the run (a tilemark file is always filled)."""
    target = Path(os.path.abspath(os.path.expanduser(path)))
    shown = str(target)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise UsageError(f"target {shown} cannot be examined: {e.strerror}.") from None
    if st is None and os.path.islink(target):
        # Creating the target would create a file wherever the link points.
        raise UsageError(
            f"target {shown} is a symbolic link to {os.readlink(target)}, which does not exist; "
            "tilemark creates targets only at real paths, so name the file itself."
        )

    if st is not None and stat.S_ISDIR(st.st_mode):
        raise UsageError(
            f"target {shown} is a directory; name a file in it instead, "
            f"e.g. --target {target / 'tilemark.dat'}."
        )
    if st is not None and stat.S_ISBLK(st.st_mode):
        info = _inspect_block(shown, st, size, writes or fill, direct, destroy_data, force)
        info.fill_device = fill
        return info
    if destroy_data is not None:
        raise UsageError(
            f"--destroy-data applies to block devices only; target {shown} is not one."
        )
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise UsageError(
            f"target {shown} is not a regular file or a block device; name a file path."
        )
    if st is None:
        return _inspect_new_file(target, size, direct, size_flag)
    info = _inspect_existing_file(target, st, size, writes, direct, size_flag, io_timeout_s)
    if fill and not info.tilemark:
        raise UsageError(
            f"--fill writes the target, and tilemark never writes a file it did not create "
            f"({shown}); fill it yourself or name a new file."
        )
    return info


def _unit(dio_alignment: int) -> int:
    return default_align(dio_alignment)


def file_dio_alignment(target: Path) -> int:
    """O_DIRECT alignment of a file target: the larger of its filesystem's (probed on the
    directory) and the file's own, so a new file and the same file later run the same sizes."""
    directory = probe_dio_alignment(str(_existing_ancestor(target.parent)))
    if not target.exists():
        return directory
    own = probe_dio_alignment(str(target))
    if directory == 0 or own == 0:
        return 0  # no O_DIRECT on one of them
    return max(directory, own)


def _inspect_new_file(target: Path, size: int | None, direct: bool, size_flag: str) -> TargetInfo:
    shown = str(target)
    directory = target.parent
    make_dir = False
    if not directory.is_dir():
        if directory.exists():
            raise UsageError(f"target {shown}: {directory} is not a directory.")
        if not _is_default_data_dir(directory):
            raise UsageError(
                f"target {shown} is in a directory that does not exist ({directory}); "
                f"create it first or name a file in an existing directory."
            )
        make_dir = True
    if size is None:
        raise UsageError(
            f"--size is required to create target {shown} (e.g. --size 1g), or set size in the "
            f"workload file."
        )
    alignment = file_dio_alignment(target)
    data_length = size // _unit(alignment) * _unit(alignment)
    if data_length == 0:
        raise UsageError(
            f"size must be at least {format_size(_unit(alignment))} for target {shown}, "
            f"got {size} bytes."
        )
    _check_free_space(directory, HEADER_SIZE + data_length, shown, size_flag)
    return TargetInfo(
        path=shown,
        kind="file",
        data_offset=HEADER_SIZE,
        data_length=data_length,
        direct=direct,
        dio_alignment=alignment,
        exists=False,
        tilemark=True,
        file_data_length=data_length,
        filled_length=0,
        make_dir=make_dir,
    )


def _inspect_existing_file(
    target: Path,
    st: os.stat_result,
    size: int | None,
    writes: bool,
    direct: bool,
    size_flag: str,
    io_timeout_s: float = HEADER_READ_TIMEOUT_S,
) -> TargetInfo:
    shown = str(target)
    try:
        header = read_header(shown, io_timeout_s)
    except PermissionError:
        raise UsageError(f"target {shown} cannot be read: permission denied.") from None
    alignment = file_dio_alignment(target)
    if header is None:
        if writes:
            raise UsageError(
                f"refusing to write {shown}: it exists and was not created by tilemark; "
                f"name a new file or remove it."
            )
        if st.st_size == 0:
            raise UsageError(f"target {shown} is empty; a read-only workload needs data to read.")
        if size is not None and size > st.st_size:
            raise UsageError(
                f"size {format_size(size)} is larger than {shown} ({format_size(st.st_size)}); "
                f"tilemark never grows a file it did not create."
            )
        data_length = size if size is not None else st.st_size
        return TargetInfo(
            path=shown,
            kind="file",
            data_offset=0,
            data_length=data_length,
            direct=direct,
            dio_alignment=alignment,
            exists=True,
            tilemark=False,
            holes=hole_bytes(shown, 0, data_length),
        )

    current = header["data_length"]
    # A file cut short after it was filled must not claim data it no longer has.
    # Whole blocks only: a file cut at any byte is refilled from a block boundary.
    block = int((header.get("data") or {}).get("block_size") or DEFAULT_ALIGN)
    present = max(0, st.st_size - HEADER_SIZE) // block * block
    filled = min(header["filled_length"], current, present)
    missing = max(0, min(header["filled_length"], current) - present)
    data_length = current
    if size is not None:
        data_length = size // _unit(alignment) * _unit(alignment)
        if data_length == 0:
            raise UsageError(
                f"size must be at least {format_size(_unit(alignment))} for target {shown}, "
                f"got {size} bytes."
            )
    file_data_length = max(current, data_length)
    if file_data_length > current:
        _check_free_space(target.parent, file_data_length - current, shown, size_flag)
    return TargetInfo(
        path=shown,
        kind="file",
        data_offset=HEADER_SIZE,
        data_length=data_length,
        direct=direct,
        dio_alignment=alignment,
        exists=True,
        tilemark=True,
        file_data_length=file_data_length,
        filled_length=filled,
        grows_from=current if file_data_length > current else None,
        preconditioning=header.get("preconditioning"),
        data=header.get("data"),
        missing_length=missing,
    )


def _inspect_block(
    shown: str,
    st: os.stat_result,
    size: int | None,
    writes: bool,
    direct: bool,
    destroy_data: str | None,
    force: bool,
) -> TargetInfo:
    try:
        device_size = block_device_size(shown)
    except OSError as e:
        raise UsageError(f"block device {shown} cannot be opened: {e.strerror}.") from None
    if device_size == 0:
        raise UsageError(f"block device {shown} has size 0 (an unattached loop device?).")
    if size is not None and size > device_size:
        raise UsageError(
            f"size {format_size(size)} is larger than block device {shown} "
            f"({format_size(device_size)})."
        )
    if writes:
        check_block_writable(shown, st, destroy_data, force)
    return TargetInfo(
        path=shown,
        kind="block",
        data_offset=0,
        data_length=size if size is not None else device_size,
        direct=direct,
        dio_alignment=probe_dio_alignment(shown),
        exists=True,
        tilemark=False,
        preconditioning=read_device_record(st.st_rdev, device_size),
        data=read_device_doc(st.st_rdev, device_size).get("data"),
    )
