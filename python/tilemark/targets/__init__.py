"""Targets: where IO goes, and what tilemark may do to them (design.md, Safety).

- header: what a target is (TargetInfo), the marker header of tilemark files, device records;
- block: block devices (in use? formatted? may they be written?);
- inspect: deciding everything about a target before any IO;
- prepare: creating, growing and filling files, filling devices, dropping cached pages;
- lock: one run per target;
- data: what a target's data area holds, for verification; verification: `tilemark verify`;
- spec: targets as the user names them; sets: all the targets of a run at once;
- precondition: SNIA PTS preconditioning.

This face re-exports what the rest of tilemark uses of the first five; the others are imported
by their own names.
"""

from tilemark.targets.block import MAGICS, in_use_reasons, magic_signatures
from tilemark.targets.header import (
    DEFAULT_DATA_DIR,
    HEADER_SIZE,
    STATE_DIR_ENV,
    TargetInfo,
    default_align,
    describe_precondition,
    encode_header,
    read_header,
    state_dir,
    write_precondition_record,
)
from tilemark.targets.inspect import default_size, inspect_target
from tilemark.targets.lock import TargetLock, lock_key, lock_target
from tilemark.targets.prepare import Progress, drop_cached, fill_region, hole_bytes, prepare_target

__all__ = [
    "DEFAULT_DATA_DIR",
    "HEADER_SIZE",
    "MAGICS",
    "STATE_DIR_ENV",
    "Progress",
    "TargetInfo",
    "TargetLock",
    "default_align",
    "default_size",
    "describe_precondition",
    "drop_cached",
    "encode_header",
    "fill_region",
    "hole_bytes",
    "in_use_reasons",
    "inspect_target",
    "lock_key",
    "lock_target",
    "magic_signatures",
    "prepare_target",
    "read_header",
    "state_dir",
    "write_precondition_record",
]
