"""What a target is and what it carries: TargetInfo, the marker header of a tilemark file, and
the records tilemark keeps about block devices (preconditioning, data) under its state directory.

A file tilemark creates starts with a 4096-byte marker header (`TILEMARK-TARGET\\n` and a JSON
object, zero padded); its data area follows at offset 4096. Only files carrying the marker are
ever written (design.md, Safety).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilemark.errors import RunError, UsageError
from tilemark.targets.block import block_device_size
from tilemark.units import GIB, MIB, format_size

MARKER = b"TILEMARK-TARGET\n"
HEADER_SIZE = 4096
HEADER_VERSION = 1
DEFAULT_DATA_DIR = "tilemark-data"
DEFAULT_SIZE_CAP = 2 * GIB
DEFAULT_SIZE_MIN = 64 * MIB
DEFAULT_FREE_SHARE = 0.10

# (offset, bytes, what it means) for signatures checked without blkid.

DEFAULT_ALIGN = 4096


@dataclass
class TargetInfo:
    """An inspected target: where the run's data area is and what preparing it involves."""

    path: str  # absolute
    kind: str  # "file" | "block"
    data_offset: int
    data_length: int  # bytes of the data area this run uses
    direct: bool
    dio_alignment: int  # 0: O_DIRECT unsupported
    exists: bool
    tilemark: bool = False  # a file carrying tilemark's marker (or about to)
    file_data_length: int = 0  # the file's data area once prepared (>= data_length)
    filled_length: int = 0  # bytes at the start of the data area already filled
    make_dir: bool = False  # the default data directory has to be created first
    created: bool = False  # set by prepare_target when it created the file
    fill_device: bool = False  # --fill: write the whole data area of a block device first
    holes: int = 0  # foreign file: bytes of its data area that are holes (read as zeros)
    grows_from: int | None = None  # an existing file's data area before this run grows it
    preconditioning: dict[str, Any] | None = None  # the last `tilemark precondition` record
    name: str = ""  # the workload's name for the target (targetspec.py)
    data: dict[str, Any] | None = None  # what the data area holds (targetdata.py)
    # Bytes of the filled data area the file no longer holds: cut short outside tilemark.
    missing_length: int = 0

    @property
    def will_fill(self) -> bool:
        """True when preparing the target writes data (a new or unfilled tilemark file, or a
        block device with --fill)."""
        if self.fill_device:
            return True
        return self.kind == "file" and self.tilemark and self.filled_length < self.file_data_length

    def notes(self) -> list[str]:
        """What a user must know about the data the run reads (shown with the results)."""
        if self.missing_length:
            return [
                f"target {self.path} is {format_size(self.missing_length)} shorter than its "
                "header says was filled (cut short outside tilemark); the missing part was "
                "filled again"
            ]
        if self.kind == "block" and not self.fill_device:
            return [
                f"target {self.path} was not written by tilemark: regions never written (thin-"
                "provisioned or trimmed extents) may read as zeros at memory speed; --fill "
                "(with --destroy-data) writes it first"
            ]
        if self.kind == "file" and not self.tilemark and self.holes:
            return [
                f"target {self.path} was not written by tilemark and {format_size(self.holes)} "
                "of its data area are holes, which read as zeros at memory speed; fill it "
                "yourself or use a file tilemark creates"
            ]
        return []

    def plan_target(self) -> dict[str, Any]:
        """The target entry of the engine plan."""
        return {
            "path": self.path,
            "offset": self.data_offset,
            "length": self.data_length,
            "direct": self.direct,
        }

    def record(self) -> dict[str, Any]:
        """What the run's record keeps about this target."""
        return {
            "name": self.name or None,
            "path": self.path,
            "kind": self.kind,
            "created": self.created,
            "data_offset": self.data_offset,
            "data_length": self.data_length,
            "direct": self.direct,
            "dio_alignment": self.dio_alignment,
            "preconditioning": self.preconditioning,
            "data": self.data,
        }

    @property
    def can_precondition(self) -> bool:
        """True for targets tilemark may write and keeps a preconditioning record for: its own
        files and block devices."""
        return self.kind == "block" or self.tilemark

    def precondition_note(self) -> str | None:
        """The note of a run on a target `tilemark precondition` never wrote."""
        if not self.can_precondition or self.preconditioning is not None:
            return None
        return (
            f"target {self.path} was never preconditioned (SNIA PTS): results on fresh storage "
            "may not last; see `tilemark precondition`"
        )


def probe_dio_alignment(path: str) -> int:
    """O_DIRECT alignment of a file, device or directory (0 if unsupported), from the engine."""
    # Imported on use: the safety checks need no compiled engine.
    from tilemark import engine

    return engine.dio_alignment(path)


def encode_header(header: dict[str, Any]) -> bytes:
    """The 4096-byte marker header for a header dict."""
    body = MARKER + json.dumps(header, sort_keys=True).encode()
    if len(body) > HEADER_SIZE:
        raise ValueError("tilemark header does not fit in 4096 bytes")
    return body.ljust(HEADER_SIZE, b"\0")


# How long the first-block read of a target may take before the storage counts as not
# answering: the run's --io-timeout, but never less than HEADER_READ_FLOOR_S (this one read
# goes through the page cache and may queue behind other work on a slow device).
HEADER_READ_TIMEOUT_S = 30.0
HEADER_READ_FLOOR_S = 5.0


def _read_first_block(path: str, timeout_s: float) -> bytes:
    """The first HEADER_SIZE bytes, on a helper thread: a device that stops answering must not
    hold tilemark before the run's own IO timeout can act (the thread is left behind)."""
    box: dict[str, Any] = {}

    def read() -> None:
        try:
            with open(path, "rb") as f:
                box["raw"] = f.read(HEADER_SIZE)
        except BaseException as e:  # re-raised on the caller's thread
            box["error"] = e

    reader = threading.Thread(target=read, name="tilemark-header-read", daemon=True)
    reader.start()
    if timeout_s > 0:
        timeout_s = max(timeout_s, HEADER_READ_FLOOR_S)
    reader.join(timeout_s if timeout_s > 0 else None)
    if reader.is_alive():
        raise RunError(
            f"target {path} did not answer a {HEADER_SIZE}-byte read of its first block within "
            f"{timeout_s:g} s; the storage may have stopped answering."
        )
    if "error" in box:
        raise box["error"]
    return box["raw"]


def read_header(path: str, timeout_s: float = HEADER_READ_TIMEOUT_S) -> dict[str, Any] | None:
    """The marker header of a file, or None if the file does not start with the marker.
    A read that takes longer than `timeout_s` (at least HEADER_READ_FLOOR_S; 0: no limit) is
    a RunError."""
    try:
        raw = _read_first_block(path, timeout_s)
    except (FileNotFoundError, PermissionError):
        raise
    except OSError as e:
        # Failing storage (EIO on the first block) is a failed run, not a traceback.
        raise RunError(
            f"target {path} cannot be read: {e.strerror or e} (reading its first "
            f"{HEADER_SIZE} bytes failed)."
        ) from None
    if not raw.startswith(MARKER):
        return None
    try:
        header = json.loads(raw[len(MARKER) :].split(b"\0", 1)[0])
        for key in ("version", "data_offset", "data_length", "filled_length"):
            if not isinstance(header[key], int):
                raise ValueError(key)
    except (ValueError, KeyError, TypeError, RecursionError):
        raise UsageError(
            f"target {path} carries tilemark's marker but its header is damaged; remove the "
            f"file and run again to recreate it."
        ) from None
    if header["version"] != HEADER_VERSION or header["data_offset"] != HEADER_SIZE:
        raise UsageError(
            f"target {path} was made by a different tilemark version (header version "
            f"{header['version']}); remove the file and run again to recreate it."
        )
    return header


def write_header(fd: int, header: dict[str, Any]) -> None:
    os.pwrite(fd, encode_header(header), 0)
    os.fsync(fd)


def fill_seed(created_at: str, offset: int) -> int:
    # Distinct per chunk so deduplicating storage cannot collapse the fill data.
    digest = hashlib.blake2b(f"fill:{created_at}:{offset}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


STATE_DIR_ENV = "TILEMARK_STATE_DIR"


def state_dir() -> Path:
    """Where tilemark keeps what it knows about block devices (their preconditioning):
    $TILEMARK_STATE_DIR, else /var/lib/tilemark for root, else ~/.local/state/tilemark."""
    if os.environ.get(STATE_DIR_ENV):
        return Path(os.environ[STATE_DIR_ENV])
    if os.geteuid() == 0:
        return Path("/var/lib/tilemark")
    return Path.home() / ".local" / "state" / "tilemark"


def _device_record_path(rdev: int, size: int) -> Path:
    # The device number and size: a different device attached at the same number (a loop
    # device re-used for another image of another size) does not inherit the record.
    return state_dir() / "devices" / f"{os.major(rdev)}:{os.minor(rdev)}-{size}.json"


def read_device_doc(rdev: int, size: int) -> dict[str, Any]:
    """What the state directory keeps about a block device ({} when nothing)."""
    try:
        doc = json.loads(_device_record_path(rdev, size).read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _update_device_doc(path: str, **fields: Any) -> None:
    st = os.stat(path)
    size = block_device_size(path)
    doc = {**read_device_doc(st.st_rdev, size), "path": path, **fields}
    record_path = _device_record_path(st.st_rdev, size)
    record_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = record_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2))
    os.replace(tmp, record_path)


def read_device_record(rdev: int, size: int) -> dict[str, Any] | None:
    """The preconditioning record of a block device kept in the state directory, if any."""
    return read_device_doc(rdev, size).get("preconditioning")


def read_data_record(info: TargetInfo) -> dict[str, Any] | None:
    """The target's data record as it is now (targetdata.py): from a tilemark file's header,
    a block device's state record; None for other targets."""
    if info.kind == "block":
        st = os.stat(info.path)
        return read_device_doc(st.st_rdev, block_device_size(info.path)).get("data")
    if not info.tilemark or not os.path.exists(info.path):
        return None
    header = read_header(info.path)
    return None if header is None else header.get("data")


def write_data_record(info: TargetInfo, record: dict[str, Any]) -> None:
    """Keep a data record with the target (the rest of its header or record unchanged)."""
    info.data = record
    if info.kind == "block":
        _update_device_doc(info.path, data=record)
        return
    try:
        fd = os.open(info.path, os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        raise RunError(
            f"cannot open target {info.path} to record what it holds: {e.strerror or e}."
        ) from None
    try:
        header = read_header(info.path)
        if header is None:
            raise RunError(f"target {info.path} lost its tilemark marker.")
        header["data"] = record
        write_header(fd, header)
    finally:
        os.close(fd)


def describe_precondition(record: dict[str, Any] | None) -> str:
    """A preconditioning record in one line ('never' when there is none)."""
    if not record:
        return "never (see `tilemark precondition`)"
    speeds = ", ".join(f"{v:,.0f}" for v in record.get("mbps_per_pass") or [])
    return (
        f"{record.get('at')}: {record.get('passes_completed')} pass(es) of "
        f"{format_size(int(record.get('bs', 0)))} sequential writes over "
        f"{format_size(int(record.get('data_length', 0)))}, "
        f"{format_size(int(record.get('bytes_written', 0)))} written"
        + (f" at {speeds} MB/s" if speeds else "")
    )


def write_precondition_record(info: TargetInfo, record: dict[str, Any]) -> None:
    """Keep a preconditioning record with the target: in a tilemark file's header (the rest of
    the header unchanged; a completed pass over the whole data area also counts as its fill),
    for a block device in the state directory (a device has no header)."""
    if info.kind == "block":
        _update_device_doc(info.path, preconditioning=record)
        info.preconditioning = record
        return
    fd = os.open(info.path, os.O_RDWR | os.O_CLOEXEC)
    try:
        header = read_header(info.path)
        if header is None:
            raise RunError(f"target {info.path} lost its tilemark marker while preconditioning.")
        header["preconditioning"] = record
        if record.get("passes_completed", 0) >= 1:
            header["filled_length"] = max(header["filled_length"], record["data_length"])
        write_header(fd, header)
    finally:
        os.close(fd)
    info.preconditioning = record


def default_align(dio_alignment: int) -> int:
    """Offset granularity when a stream sets none: the O_DIRECT alignment, at least 4 KiB.

    4 KiB keeps IOs from straddling pages and 4 KiB physical sectors even where the device
    accepts 512-byte O_DIRECT (fio aligns to the block size for the same reason).
    """
    return max(dio_alignment, DEFAULT_ALIGN)
