"""Dedupe pools: where a stream's duplicate blocks come from (docs/verification.md, "Data
reduction"). By default the engine sizes a stream's pool itself (about 1/64 of its copies);
`dedupe_set` names the pool's size as a share of the stream's region (fio's
dedupe_working_set_percentage), and `dedupe_global` makes the streams that set it share one pool
with the ratio holding over everything they write together (fio's dedupe_global)."""

from __future__ import annotations

from typing import Any

from tilemark.errors import UsageError
from tilemark.workload.plan import StreamSpec

# The pool id of dedupe_global streams (streams with a pool of their own use index + 1);
# fio/datareduce.py exports it as dedupe_global.
SHARED_POOL = 1 << 32
# Blocks of unverified write data; verified streams use their verification block.
DATA_BLOCK = 4096


def _blocks(plan_stream: dict[str, Any], block: int) -> int:
    return sum(r["length"] for r in plan_stream["regions"]) // block


def set_pools(
    specs: list[StreamSpec], plan_streams: list[dict[str, Any]], verify_blocks: list[int | None]
) -> None:
    """Give every writing stream with `dedupe_set` or `dedupe_global` its `dedupe_pool`.

    `verify_blocks[i]` is stream i's verification block (None without --verify). A stream's pool
    is P = dedupe_set % of its region's blocks; shared streams use P = dedupe_set % of their
    mean region (fio: each job's working set is that share of its own size, made of equal slices
    of every job's data) over the sum of their regions. Copies are then a share (1 - 1/R) + P/N of
    the blocks, which must not pass 1: the pool holds at most the distinct blocks, N / R.
    """
    shared = [i for i, s in enumerate(specs) if s.dedupe_global and s.dedupe > 1 and s.writes()]
    for i, spec in enumerate(specs):
        if spec.dedupe_global and verify_blocks[i] is not None:
            raise UsageError(
                f"{spec.label('dedupe_global')} cannot be used with --verify: a verified block "
                "names its target and offset, so blocks of different streams never match."
            )
    if shared:
        ratios = {specs[i].dedupe for i in shared}
        sets = {specs[i].dedupe_set for i in shared}
        if len(ratios) > 1 or len(sets) > 1:
            raise UsageError(
                f"{specs[shared[0]].label('dedupe_global')}: streams sharing a dedupe pool need "
                "the same dedupe and dedupe_set."
            )
        sizes = [_blocks(plan_streams[i], DATA_BLOCK) for i in shared]
        over = sum(sizes)
        pct = specs[shared[0]].dedupe_set
        pool = round(over / len(shared) * pct / 100) if pct is not None else None
        for i in shared:
            _place(specs[i], plan_streams[i], pool, over, SHARED_POOL)
    for i, spec in enumerate(specs):
        if i in shared or spec.dedupe_set is None or spec.dedupe <= 1 or not spec.writes():
            continue
        blocks = _blocks(plan_streams[i], verify_blocks[i] or DATA_BLOCK)
        # A pool of its own: an id no other stream has (pool content is keyed by it).
        _place(spec, plan_streams[i], round(blocks * spec.dedupe_set / 100), blocks, i + 1)


def _place(
    spec: StreamSpec, stream: dict[str, Any], pool: int | None, over: int, pool_id: int
) -> None:
    """Set one stream's pool, refusing one larger than the distinct blocks it leaves."""
    if pool is None:  # shared, default size: the engine's 1/64 of the copies, over all
        pool = round(over * (1 - 1 / spec.dedupe) / 64)
    pool = max(pool, 1)
    if (1 - 1 / spec.dedupe) + pool / over > 1 + 1e-9:
        raise UsageError(
            f"{spec.label('dedupe_set')} {spec.dedupe_set:g} is more than the distinct share "
            f"of dedupe {spec.dedupe:g}: at most {100 / spec.dedupe:g} (the pool is among the "
            "distinct blocks)."
        )
    stream["dedupe_pool"] = {"blocks": pool, "over_blocks": over, "id": pool_id}
