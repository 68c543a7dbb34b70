"""Block devices as targets: what uses them (mounts, swap, holders), what they carry
(partition tables, filesystem signatures) and whether tilemark may write them: only when named
in `--destroy-data`, and not when in use or formatted unless `--force` (design.md, Safety).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

from tilemark.errors import UsageError
from tilemark.telemetry import envinfo

_SIGNATURE_READ = 68 * 1024  # covers every magic checked below (btrfs sits at 64 KiB + 64)

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


def block_device_size(path: str) -> int:
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


def check_block_writable(
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
