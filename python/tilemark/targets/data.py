"""What a target's data area holds, for verification (docs/verification.md).

A tilemark file keeps a `data` record in its header; a block device keeps it in the state
directory next to its preconditioning record. The record says:

- `format`: the verification block format (1), `target_id`: the identity every block names,
  `block_size`: the verification block (4 KiB, or the O_DIRECT alignment when larger);
- `fill`: what the fill wrote: `verifiable` (generation-0 blocks), `random` (an older tilemark
  filled the file with random data, or a fill was cut short), `none` (a device never filled);
- `epoch`: the last verified run that wrote the target (0: only the fill), each run one more;
- `unverified_at_epoch`: the epoch at which a run without --verify last wrote the target
  (`null`: never). Its blocks are not tilemark data, so they cannot be judged.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tilemark.errors import UsageError
from tilemark.targets.header import TargetInfo, read_data_record, write_data_record
from tilemark.units import format_size

FORMAT = 1
DEFAULT_BLOCK = 4096
MAX_BLOCK = 64 * 1024
JOURNAL = "verify.journal"


def journal_name(index: int) -> str:
    """The journal file of a run's target `index` (in its run directory)."""
    return JOURNAL if index == 0 else f"verify.{index}.journal"


def block_size(info: TargetInfo) -> int:
    """The verification block of a target: its record's, else 4 KiB or the O_DIRECT alignment
    when larger."""
    record = info.data
    if record is not None:
        return int(record["block_size"])
    size = max(DEFAULT_BLOCK, info.dio_alignment)
    if size > MAX_BLOCK:
        raise UsageError(
            f"target {info.path} needs O_DIRECT alignment {format_size(size)}, above the "
            f"{format_size(MAX_BLOCK)} verification blocks tilemark writes; --verify cannot be "
            "used on it."
        )
    return size


def new_record(block: int, fill: str) -> dict[str, Any]:
    """A fresh data record: a new target identity, epoch 0."""
    return {
        "format": FORMAT,
        "target_id": secrets.randbits(62),
        "block_size": block,
        "fill": fill,
        "epoch": 0,
        "unverified_at_epoch": None,
    }


def fill_args(record: dict[str, Any] | None, data_offset: int) -> tuple[int, int, int] | None:
    """The engine's `verify` argument of a fill: (target identity, block size, data offset)."""
    if record is None:
        return None
    return int(record["target_id"]), int(record["block_size"]), data_offset


def prior(record: dict[str, Any] | None) -> str:
    """What the blocks a run does not write hold, as the engine judges them: `verified` (every
    block is tilemark data), `mixed` (some are not) or `unknown` (nothing to judge)."""
    if record is None or record.get("fill") == "none" and record.get("epoch", 0) == 0:
        return "unknown"
    if record.get("fill") == "verifiable" and record.get("unverified_at_epoch") is None:
        return "verified"
    return "mixed"


def nothing_to_check(info: TargetInfo) -> str | None:
    """Why a target holds nothing verification can check against (a clause naming the target
    and the way out), or None."""
    record = info.data
    if info.kind == "file" and not info.tilemark:
        return (
            f"target {info.path} was not written by tilemark; use a target tilemark created, "
            "whose blocks carry verification headers"
        )
    if info.kind == "file" and not info.exists:
        return None  # created now, with a verifiable fill
    if info.kind == "file" and (
        record is None or record.get("fill") == "random" and record.get("epoch", 0) == 0
    ):
        return (
            f"target {info.path} was filled by an older tilemark with random data, which "
            "carries no verification headers; remove the file and run again to recreate it "
            "with verifiable data"
        )
    if record is None or prior(record) == "unknown":
        return (
            f"block device {info.path} holds no data tilemark wrote; fill it first "
            f"(--fill --destroy-data {info.path})"
        )
    return None


def begin_run(info: TargetInfo, *, verify: bool, writes: bool, journal: str | None) -> Any:
    """Before a run starts (the target locked): the engine's `verify` settings of the target,
    with the run's epoch (recorded with the target when the run writes), or None without
    --verify. A run that writes without verification is recorded too: its blocks carry no
    headers, so later checks must accept blocks that are not tilemark data."""

    record = read_data_record(info)
    if not verify:
        if writes and record is not None and record.get("unverified_at_epoch") is None:
            record["unverified_at_epoch"] = record["epoch"]
            write_data_record(info, record)
        return None
    if record is None:
        record = new_record(block_size(info), "none")
    spec = {
        "target_id": int(record["target_id"]),
        "epoch": int(record["epoch"]) + 1,
        "block_size": int(record["block_size"]),
        "prior": prior(record),
        "journal": journal if writes else None,
    }
    if writes:
        record["epoch"] = spec["epoch"]
        write_data_record(info, record)
    info.data = record
    return spec


def begin_plan(infos: Sequence[TargetInfo], plan: dict[str, Any], journal_dir: Path) -> bool:
    """begin_run for every target of an engine plan about to run (on the host that holds the
    targets, locked): with --verify, each target's epoch and journal (in `journal_dir`) go
    into the plan's `verify`. True if any did (the stored plan should be rewritten)."""
    writes = plan["backend"] != "null"
    changed = False
    for index, (info, target) in enumerate(zip(infos, plan["targets"], strict=True)):
        on_target = writes and any(
            s["read_pct"] < 100 and any(r["target"] == index for r in s["regions"])
            for s in plan["streams"]
        )
        spec = begin_run(
            info,
            verify=target.get("verify") is not None,
            writes=on_target,
            journal=str((journal_dir / journal_name(index)).resolve()),
        )
        if spec is not None:
            target["verify"] = spec
            changed = True
    return changed
