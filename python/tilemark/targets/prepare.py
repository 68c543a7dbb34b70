"""Preparing a target: creating, growing and filling tilemark files (so reads never hit
holes), filling block devices with --fill, and dropping cached pages before buffered runs.
"""

from __future__ import annotations

import datetime as dt
import errno
import os
from collections.abc import Callable
from typing import Any

from tilemark.errors import RunError
from tilemark.targets import data as targetdata
from tilemark.targets.header import (
    HEADER_SIZE,
    HEADER_VERSION,
    TargetInfo,
    fill_seed,
    read_data_record,
    read_header,
    write_data_record,
    write_header,
)
from tilemark.units import MIB, format_size

FILL_CHUNK = 256 * MIB  # small enough to report progress and honour Ctrl-C between chunks


def fill_region(
    path: str,
    offset: int,
    length: int,
    *,
    direct: bool,
    seed: int,
    verify: tuple[int, int, int] | None = None,
) -> int:
    """Write incompressible data over [offset, offset+length) with the engine; with `verify`
    (target identity, block size, data offset), verifiable fill blocks."""
    from tilemark import engine

    return engine.fill(path, offset, length, direct=direct, seed=seed, verify=verify)


Progress = Callable[[str, int, int], None]  # (path, bytes filled so far, bytes to fill)


def _allocate(fd: int, offset: int, length: int, path: str) -> None:
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as e:
        if e.errno in (errno.EOPNOTSUPP, errno.EINVAL):  # no fallocate here; the fill allocates
            os.ftruncate(fd, max(os.fstat(fd).st_size, offset + length))
        else:
            raise RunError(
                f"cannot allocate {format_size(length)} for target {path}: {e.strerror}."
            ) from None


def hole_bytes(path: str, offset: int, length: int) -> int:
    """Bytes of [offset, offset+length) of a file that are holes (SEEK_HOLE/SEEK_DATA)."""
    holes = 0
    end = offset + length
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return 0
    try:
        pos = offset
        while pos < end:
            try:
                hole = os.lseek(fd, pos, os.SEEK_HOLE)
            except OSError:
                return holes  # no SEEK_HOLE support: nothing known
            if hole >= end:
                break
            try:
                data = os.lseek(fd, hole, os.SEEK_DATA)
            except OSError:  # ENXIO: a hole up to the end of the file
                data = end
            holes += min(data, end) - hole
            pos = data
    finally:
        os.close(fd)
    return holes


def fill_device(info: TargetInfo, progress: Progress | None = None) -> None:
    """--fill of a block device: verifiable fill blocks over its whole data area (its record
    says `random` until the fill is complete)."""
    total = info.data_length
    done = 0
    seed = int.from_bytes(os.urandom(7), "little")
    record = read_data_record(info) or targetdata.new_record(targetdata.block_size(info), "none")
    record["fill"] = "random"
    write_data_record(info, record)
    verify = targetdata.fill_args(record, info.data_offset)
    if total % record["block_size"]:
        verify = None  # a size off the verification block: plain random data
    while done < total:
        length = min(FILL_CHUNK, total - done)
        fill_region(
            info.path,
            info.data_offset + done,
            length,
            direct=info.dio_alignment > 0,
            seed=seed,
            verify=verify,
        )
        done += length
        if progress is not None:
            progress(info.path, done, total)
    if verify is not None:
        record.update(fill="verifiable", unverified_at_epoch=None)
        write_data_record(info, record)


def prepare_target(
    info: TargetInfo, *, progress: Progress | None = None, fill: bool = True
) -> None:
    """Create, grow and fill a tilemark file target as inspected; a block device is filled only
    with --fill; foreign files are left untouched. `fill=False` creates and grows a file
    without filling it (preconditioning writes the data area itself)."""
    if info.kind == "block" and info.fill_device:
        try:
            fill_device(info, progress)
        except OSError as e:
            raise RunError(f"filling {info.path} failed: {e.strerror or e}.") from None
        return
    if info.kind != "file" or not info.tilemark:
        return
    if info.exists and info.filled_length >= info.file_data_length:
        return  # filled and big enough: nothing to write (a read-only run needs no write access)
    path = info.path
    try:
        if info.make_dir:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        if not info.exists:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            header = {
                "version": HEADER_VERSION,
                "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "data_offset": HEADER_SIZE,
                "data_length": info.file_data_length,
                "filled_length": 0,
                "data": targetdata.new_record(targetdata.block_size(info), "verifiable"),
            }
            try:
                write_header(fd, header)
                _allocate(fd, 0, HEADER_SIZE + info.file_data_length, path)
            except BaseException:
                # Leave nothing behind: a half-made file would later read as a foreign one.
                os.close(fd)
                os.unlink(path)
                raise
            info.created = True
        else:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
            header = read_header(path)
            if header is None:
                raise RunError(f"target {path} lost its tilemark marker while being prepared.")
            header["filled_length"] = info.filled_length
            if "data" not in header:
                # Filled by an older tilemark: what it wrote carries no verification headers.
                fill = "random" if header["filled_length"] else "verifiable"
                header["data"] = targetdata.new_record(targetdata.block_size(info), fill)
                write_header(fd, header)
            if info.file_data_length > header["data_length"]:
                old_end = HEADER_SIZE + header["data_length"]
                _allocate(fd, old_end, info.file_data_length - header["data_length"], path)
                header["data_length"] = info.file_data_length
                write_header(fd, header)
        info.data = header["data"]
        try:
            if fill:
                _fill(fd, info, header, progress)
        finally:
            os.close(fd)
    except PermissionError as e:
        raise RunError(f"cannot write target {path}: {e.strerror}.") from None
    except OSError as e:
        raise RunError(f"preparing target {path} failed: {e.strerror or e}.") from None


def _fill(fd: int, info: TargetInfo, header: dict[str, Any], progress: Progress | None) -> None:
    total = info.file_data_length
    filled = info.filled_length
    if filled >= total:
        return
    # Fill around the page cache when the filesystem allows it, so the first reads of the run
    # are not served from memory.
    direct = info.dio_alignment > 0
    to_fill = total - filled
    while filled < total:
        length = min(FILL_CHUNK, total - filled)
        offset = HEADER_SIZE + filled
        fill_region(
            info.path,
            offset,
            length,
            direct=direct,
            seed=fill_seed(header["created_at"], offset),
            verify=targetdata.fill_args(header.get("data"), HEADER_SIZE),
        )
        filled += length
        header["filled_length"] = filled
        write_header(fd, header)
        info.filled_length = filled
        if progress is not None:
            progress(info.path, to_fill - (total - filled), to_fill)


def drop_cached(path: str, offset: int, length: int) -> None:
    """Write back and drop the page cache's pages of [offset, offset + length) of a file or
    block device, so buffered IO starts cold (fio's invalidate). OSError when it cannot."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fdatasync(fd)  # dirty pages are not dropped; write them back first
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
