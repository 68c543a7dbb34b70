"""Target safety and preparation (design.md, Safety).

- A file tilemark creates starts with a 4096-byte marker header (`TILEMARK-TARGET\\n` and a JSON
  object, zero padded); its data area follows at offset 4096 and is filled before it is used,
  so reads never hit holes. Only files carrying the marker are ever written.
- A file without the marker may be read, never written.
- A block device is written only when named again in `--destroy-data`, and not when it is in
  use (mounted, active swap, held by another device) or carries a partition table or a
  filesystem signature, unless `--force`.

`inspect_target` decides everything without writing; `prepare_target` then creates, grows and
fills files.
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import json
import os
import shutil
import stat
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilemark import envinfo, targetdata
from tilemark.errors import RunError, UsageError
from tilemark.plan import default_align
from tilemark.units import GIB, MIB, format_size

MARKER = b"TILEMARK-TARGET\n"
HEADER_SIZE = 4096
HEADER_VERSION = 1
FILL_CHUNK = 256 * MIB  # small enough to report progress and honour Ctrl-C between chunks
DEFAULT_DATA_DIR = "tilemark-data"
DEFAULT_SIZE_CAP = 2 * GIB
DEFAULT_SIZE_MIN = 64 * MIB
DEFAULT_FREE_SHARE = 0.10
_SIGNATURE_READ = 68 * 1024  # covers every magic checked below (btrfs sits at 64 KiB + 64)

# (offset, bytes, what it means) for signatures checked without blkid.
MAGICS: list[tuple[int, bytes, str]] = [
    (510, b"\x55\xaa", "an MBR/DOS partition table or boot sector (0x55AA at byte 510)"),
    (512, b"EFI PART", "a GPT partition table ('EFI PART' at byte 512)"),
    (1080, b"\x53\xef", "an ext2/3/4 filesystem (magic 0xEF53 at byte 1080)"),
    (0, b"XFSB", "an XFS filesystem ('XFSB' at byte 0)"),
    (65600, b"_BHRfS_M", "a btrfs filesystem ('_BHRfS_M' at byte 65600)"),
    (4086, b"SWAPSPACE2", "a swap area ('SWAPSPACE2' at byte 4086)"),
    (4086, b"SWAP-SPACE", "a swap area ('SWAP-SPACE' at byte 4086)"),
    (0, b"LABELONE", "an LVM physical volume ('LABELONE' at byte 0)"),
    (512, b"LABELONE", "an LVM physical volume ('LABELONE' at byte 512)"),
    (0, b"LUKS\xba\xbe", "a LUKS encrypted volume ('LUKS' magic at byte 0)"),
]


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
    preconditioning: dict[str, Any] | None = None  # the last `tilemark precondition` record
    name: str = ""  # the workload's name for the target (targetspec.py)
    data: dict[str, Any] | None = None  # what the data area holds (targetdata.py)

    @property
    def will_fill(self) -> bool:
        """True when preparing the target writes data (a new or unfilled tilemark file, or a
        block device with --fill)."""
        if self.fill_device:
            return True
        return self.kind == "file" and self.tilemark and self.filled_length < self.file_data_length

    def notes(self) -> list[str]:
        """What a user must know about the data the run reads (shown with the results)."""
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


# ---------------------------------------------------------------------------------------------
# Marker header


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
    except (ValueError, KeyError, TypeError):
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


def _write_header(fd: int, header: dict[str, Any]) -> None:
    os.pwrite(fd, encode_header(header), 0)
    os.fsync(fd)


def _fill_seed(created_at: str, offset: int) -> int:
    # Distinct per chunk so deduplicating storage cannot collapse the fill data.
    digest = hashlib.blake2b(f"fill:{created_at}:{offset}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


# ---------------------------------------------------------------------------------------------
# Free space, directories


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
    """Size for `--default`: min(2 GiB, 10% of free space), or an existing target's size."""
    target = Path(os.path.abspath(os.path.expanduser(path)))
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise UsageError(f"target {target} cannot be examined: {e.strerror}.") from None
    if st is not None and stat.S_ISBLK(st.st_mode):
        return min(DEFAULT_SIZE_CAP, _block_size(str(target)))
    existing = 0
    if st is not None and stat.S_ISREG(st.st_mode):
        header = read_header(str(target))
        if header is None:
            return min(DEFAULT_SIZE_CAP, st.st_size)
        existing = header["data_length"]
    share = int(free_bytes(target.parent) * DEFAULT_FREE_SHARE)
    size = min(DEFAULT_SIZE_CAP, max(existing, share)) // MIB * MIB
    if size < DEFAULT_SIZE_MIN:
        raise UsageError(
            f"not enough free space for the default workload: 10% of the free space near "
            f"{target} is {format_size(share)}, under the {format_size(DEFAULT_SIZE_MIN)} it "
            f"needs; free some space or pass --size."
        )
    return size


# ---------------------------------------------------------------------------------------------
# Block devices


def _block_size(path: str) -> int:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def _read_dev_number(sysfs_dir: Path) -> int | None:
    try:
        major, minor = (sysfs_dir / "dev").read_text().strip().split(":")
        return os.makedev(int(major), int(minor))
    except (OSError, ValueError):
        return None


def related_devices(rdev: int) -> dict[str, int]:
    """The device, its partitions and (recursively) their holders: kernel name -> dev number."""
    found: dict[str, int] = {}
    root = envinfo.sysfs_node(os.major(rdev), os.minor(rdev))
    if root is None:
        return found
    pending = [root]
    while pending:
        directory = pending.pop()
        if directory.name in found:
            continue
        number = _read_dev_number(directory)
        if number is None:
            continue
        found[directory.name] = number
        # Partitions are subdirectories carrying a "partition" file.
        for child in directory.iterdir():
            if (child / "partition").is_file():
                pending.append(child.resolve())
        holders = directory / "holders"
        if holders.is_dir():
            pending.extend((holders / name).resolve() for name in os.listdir(holders))
    return found


def _unescape_mountinfo(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo octal.
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit() and i + 4 <= len(field):
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def in_use_reasons(rdev: int, mountinfo: str | None = None, swaps: str | None = None) -> list[str]:
    """Why a block device is in use: mounts, active swap and holders of it or its partitions."""
    devices = related_devices(rdev)
    numbers = {number: name for name, number in devices.items()}
    numbers.setdefault(rdev, f"{os.major(rdev)}:{os.minor(rdev)}")
    dev_paths = {os.path.realpath(f"/dev/{name}"): name for name in devices}
    reasons: list[str] = []

    if mountinfo is None:
        mountinfo = Path("/proc/self/mountinfo").read_text()
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 10 or "-" not in fields:
            continue
        major, _, minor = fields[2].partition(":")
        mount_point = _unescape_mountinfo(fields[4])
        source = _unescape_mountinfo(fields[fields.index("-") + 2])
        name = numbers.get(os.makedev(int(major), int(minor)))
        if name is None and source.startswith("/dev/"):
            # btrfs and some others show an anonymous dev number; the source names the device.
            name = dev_paths.get(os.path.realpath(source))
        if name is not None:
            reasons.append(f"/dev/{name} is mounted on {mount_point}")

    if swaps is None:
        try:
            swaps = Path("/proc/swaps").read_text()
        except OSError:
            swaps = ""
    for line in swaps.splitlines()[1:]:
        fields = line.split()
        if fields and (name := dev_paths.get(os.path.realpath(fields[0]))) is not None:
            reasons.append(f"/dev/{name} is active swap")

    for name in devices:
        holders_dir = Path(f"/sys/class/block/{name}/holders")
        if holders_dir.is_dir():
            for holder in sorted(os.listdir(holders_dir)):
                reasons.append(f"/dev/{name} is held by {holder} (device-mapper, md or LVM)")
    return reasons


def _blkid_signatures(path: str) -> list[str]:
    blkid = shutil.which("blkid")
    if blkid is None:
        return []
    try:
        done = subprocess.run(
            [blkid, "-p", "-o", "export", path],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    found = []
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        if key == "TYPE" and value:
            found.append(f"a filesystem or volume signature ({value}, found by blkid)")
        elif key == "PTTYPE" and value:
            found.append(f"a partition table ({value}, found by blkid)")
    return found


def magic_signatures(head: bytes) -> list[str]:
    """Partition table and filesystem signatures found in the first bytes of a device."""
    return [
        meaning for offset, magic, meaning in MAGICS if head[offset : offset + len(magic)] == magic
    ]


def device_signatures(path: str) -> list[str]:
    """Signatures on a block device, from blkid (when installed) and tilemark's own check."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        head = os.pread(fd, _SIGNATURE_READ, 0)
    finally:
        os.close(fd)
    found = _blkid_signatures(path)
    for meaning in magic_signatures(head):
        if meaning not in found:
            found.append(meaning)
    return found


def _check_block_writable(
    path: str, st: os.stat_result, destroy_data: str | None, force: bool
) -> None:
    if destroy_data is None:
        raise UsageError(
            f"refusing to write block device {path}: that destroys its data; if you mean it, "
            f"name the device again with --destroy-data {path}."
        )
    try:
        named = os.stat(destroy_data)
    except OSError:
        named = None
    if named is None or not stat.S_ISBLK(named.st_mode) or named.st_rdev != st.st_rdev:
        raise UsageError(
            f"--destroy-data {destroy_data} does not name the target device {path}; "
            f"pass --destroy-data {path}."
        )
    if force:
        return
    in_use = in_use_reasons(st.st_rdev)
    if in_use:
        raise UsageError(
            f"refusing to write block device {path}: it is in use ({'; '.join(in_use)}); "
            f"stop using it first, or add --force to write it anyway."
        )
    signatures = device_signatures(path)
    if signatures:
        raise UsageError(
            f"refusing to write block device {path}: it carries {'; '.join(signatures)}; "
            f"wipe it (wipefs -a {path}) or add --force to destroy it."
        )


# ---------------------------------------------------------------------------------------------
# Inspection


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
    present = max(0, st.st_size - HEADER_SIZE)
    filled = min(header["filled_length"], current, present)
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
        preconditioning=header.get("preconditioning"),
        data=header.get("data"),
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
        device_size = _block_size(shown)
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
        _check_block_writable(shown, st, destroy_data, force)
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
        data=_read_device_doc(st.st_rdev, device_size).get("data"),
    )


# ---------------------------------------------------------------------------------------------
# Preparation


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
                _write_header(fd, header)
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
                _write_header(fd, header)
            if info.file_data_length > header["data_length"]:
                old_end = HEADER_SIZE + header["data_length"]
                _allocate(fd, old_end, info.file_data_length - header["data_length"], path)
                header["data_length"] = info.file_data_length
                _write_header(fd, header)
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
            seed=_fill_seed(header["created_at"], offset),
            verify=targetdata.fill_args(header.get("data"), HEADER_SIZE),
        )
        filled += length
        header["filled_length"] = filled
        _write_header(fd, header)
        info.filled_length = filled
        if progress is not None:
            progress(info.path, to_fill - (total - filled), to_fill)


# ---------------------------------------------------------------------------------------------
# Preconditioning records

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


def _read_device_doc(rdev: int, size: int) -> dict[str, Any]:
    """What the state directory keeps about a block device ({} when nothing)."""
    try:
        doc = json.loads(_device_record_path(rdev, size).read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _update_device_doc(path: str, **fields: Any) -> None:
    st = os.stat(path)
    size = _block_size(path)
    doc = {**_read_device_doc(st.st_rdev, size), "path": path, **fields}
    record_path = _device_record_path(st.st_rdev, size)
    record_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = record_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2))
    os.replace(tmp, record_path)


def read_device_record(rdev: int, size: int) -> dict[str, Any] | None:
    """The preconditioning record of a block device kept in the state directory, if any."""
    return _read_device_doc(rdev, size).get("preconditioning")


def read_data_record(info: TargetInfo) -> dict[str, Any] | None:
    """The target's data record as it is now (targetdata.py): from a tilemark file's header,
    a block device's state record; None for other targets."""
    if info.kind == "block":
        st = os.stat(info.path)
        return _read_device_doc(st.st_rdev, _block_size(info.path)).get("data")
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
        _write_header(fd, header)
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
        _write_header(fd, header)
    finally:
        os.close(fd)
    info.preconditioning = record


# -----------------------------------------------------------------------------------------------
# One run per target


LOCK_DIRS = ("/run/lock/tilemark", os.path.join("/tmp", "tilemark-locks"))


def drop_cached(path: str, offset: int, length: int) -> None:
    """Write back and drop the page cache's pages of [offset, offset + length) of a file or
    block device, so buffered IO starts cold (fio's invalidate). OSError when it cannot."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fdatasync(fd)  # dirty pages are not dropped; write them back first
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


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
        except (OSError, ValueError, KeyError, TypeError):
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
