"""All the targets of a run at once: each inspected with its own safety checks (targets.py),
every device written named in a `--destroy-data` of its own, every one locked for the run.

A `--destroy-data` entry that names no target of the run is refused (it would otherwise
suggest a device may be written that the run never touches, or hide a typo), and so is one
file or device given twice under two names.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator, Sequence

from tilemark import targets
from tilemark.errors import UsageError
from tilemark.targets.header import HEADER_READ_TIMEOUT_S, TargetInfo
from tilemark.targets.spec import TargetSpec, per_tile


def _rdev(path: str) -> int | None:
    """The device number of a block device path (through symlinks), else None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_rdev if stat.S_ISBLK(st.st_mode) else None


def destroy_for(path: str, destroy_data: Sequence[str]) -> str | None:
    """The --destroy-data entry that names the device at `path` (by device number, so a
    symlink names its device), the only entry when none does, else None."""
    rdev = _rdev(path)
    if rdev is None:
        return None
    for entry in destroy_data:
        if _rdev(entry) == rdev:
            return entry
    # One entry naming something else: targets.py says it does not name this device.
    return destroy_data[0] if len(destroy_data) == 1 else None


def check_destroy_named(destroy_data: Sequence[str], infos: Sequence[TargetInfo]) -> None:
    """Every --destroy-data entry must name a block device among the targets."""
    devices = {_rdev(i.path) for i in infos if i.kind == "block"}
    for entry in destroy_data:
        rdev = _rdev(entry)
        if rdev is None:
            if any(os.path.realpath(entry) == os.path.realpath(i.path) for i in infos):
                raise UsageError(
                    f"--destroy-data applies to block devices only; target {entry} is not one."
                )
            raise UsageError(
                f"--destroy-data {entry} is not a block device; name the devices among the "
                f"targets the run writes ({_listed(infos)})."
            )
        if rdev not in devices:
            raise UsageError(
                f"--destroy-data {entry} names none of the targets ({_listed(infos)}); name "
                "only devices this run uses."
            )


def _listed(infos: Sequence[TargetInfo]) -> str:
    return ", ".join(i.path for i in infos)


def inspect_targets(
    specs: Sequence[TargetSpec],
    *,
    writes: Sequence[bool],
    direct: bool,
    destroy_data: Sequence[str] | None = None,
    force: bool = False,
    fill: bool = False,
    size_flag: str = "--size",
    io_timeout_s: float = HEADER_READ_TIMEOUT_S,
) -> list[TargetInfo]:
    """Inspect every target (`writes[i]`: whether the run writes target i); never writes."""
    destroy = list(destroy_data or [])
    for spec in specs:
        if per_tile(spec.path):
            # tile runs replace it (workload/tilelayout.py expand_targets) before they get here
            raise UsageError(
                f"target {spec.name}: {{tile}} in its path gives each tile a file of its own, "
                "which only tile runs have (run --tiles, scale); name one file here."
            )
    infos = []
    for spec, written in zip(specs, writes, strict=True):
        info = targets.inspect_target(
            spec.path,
            size=spec.size,
            writes=written,
            direct=direct,
            destroy_data=destroy_for(spec.path, destroy),
            force=force,
            size_flag=size_flag,
            fill=fill,
            io_timeout_s=io_timeout_s,
        )
        info.name = spec.name
        infos.append(info)
    check_distinct(infos)
    check_destroy_named(destroy, infos)
    return infos


def check_distinct(infos: Sequence[TargetInfo]) -> None:
    """No file or device may be two targets (a symlink and its file, two names of a disk)."""
    seen: dict[str, TargetInfo] = {}
    for info in infos:
        key = targets.lock_key(info)
        if key in seen:
            raise UsageError(
                f"targets {seen[key].path} and {info.path} are the same "
                f"{'device' if info.kind == 'block' else 'file'}; name each target once."
            )
        seen[key] = info


@contextlib.contextmanager
def lock_targets(infos: Sequence[TargetInfo], argv: list[str]) -> Iterator[None]:
    """Hold every target for the run or study (UsageError naming the first one taken)."""
    with contextlib.ExitStack() as stack:
        for info in infos:
            stack.enter_context(targets.lock_target(info, argv))
        yield
