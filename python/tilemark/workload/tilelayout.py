"""Laying tiles out on targets: N tiles of a tile compiled to a workload document.

Placement: each stream of tile i goes to the target its application maps it to (apps.py:
`target` in a tile file, `--set APP.STREAM.target=NAME`), else to tile i's target: the run's
targets in round robin (tile 1 on the first, tile 2 on the second, ...).

Layout, per target: `capacity` bytes are split into equal slots, one per tile (of the largest
tile count of the study) that places anything there, so tile i uses the same bytes of the same
target whatever N is and a scaling study measures the same data at every step. Inside a tile's
slot each application on that target gets a share proportional to its profile's
`capacity_weight`; inside that, each stream covers its `region = [from, to]` fraction. When an
application's streams are split over targets, the regions of its streams on a target are
stretched over its share there (mail's log alone on a log target uses all of its share). Every
boundary is on 1 MiB. With one target this is the layout of one slot per tile.

A target whose path holds `{tile}` (`--target wal=/fs/wal-{tile}.dat`) gives each tile a file
of its own: tile i's slot is the file with i in its path, from its start, where a shared target
would have it at its i-th slot. The slots are the same size either way, so a study measures the
same data in both. N database instances each write WAL files of their own: an fsync then
waits for its instance's writes only, and writers of different files do not queue on one
file's lock (docs/tiles.md has what that changed, measured).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tilemark.errors import UsageError
from tilemark.options import copy_names
from tilemark.targets.spec import TargetSpec, per_tile, tile_path
from tilemark.units import MIB, format_size
from tilemark.workload.apps import AppStream, TileApp, TileSpec

UNIT = MIB


def tile_target(name: str, k: int) -> str:
    """The name of tile k's file of a per-tile target."""
    return f"{name}.{k}"


@dataclass
class StreamTag:
    """Which tile and application a compiled stream belongs to (and its target)."""

    index: int
    tile: int
    app: str
    profile: str
    stream: str
    target: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class TileLayout:
    """Compiled tiles: a workload document and the tag of every stream."""

    doc: dict[str, Any]
    tags: list[StreamTag]
    regions: list[dict[str, Any]] = field(default_factory=list)

    def instances(self) -> dict[tuple[int, str], dict[str, int]]:
        """(tile, app) -> {stream name: plan index}."""
        out: dict[tuple[int, str], dict[str, int]] = {}
        for t in self.tags:
            out.setdefault((t.tile, t.app), {})[t.stream] = t.index
        return out


def _check_mapping(tile: TileSpec, targets: list[str] | None) -> None:
    """Every mapped target name is a target of the run."""
    for app in tile.apps:
        for stream, name in app.targets.items():
            key = f"{app.label}.target" if stream == "*" else f"{app.label}.{stream}.target"
            if targets is None:
                raise UsageError(
                    f"{key} = {name!r} maps a stream to a target, but the run has one unnamed "
                    "target; pass the targets with --target NAME=PATH."
                )
            if name not in targets:
                raise UsageError(
                    f"{key} = {name!r} is not a target of the run; its targets are "
                    f"{', '.join(targets)}."
                )


def _target_of(app: TileApp, stream: AppStream, tile: int, targets: list[str]) -> str:
    return app.target_of(stream.name) or targets[(tile - 1) % len(targets)]


def _apps_on(tile: TileSpec, k: int, target: str, targets: list[str]) -> list[TileApp]:
    """Applications of tile k with a stream on `target`."""
    return [
        a
        for a in tile.apps
        if any(_target_of(a, s, k, targets) == target for s in a.profile.streams)
    ]


def _slot_mib(weights: list[float]) -> int:
    """The smallest whole number of MiB a slot needs for every weight's share to be >= 1 MiB."""
    total, smallest = sum(weights), min(weights)
    slot = math.ceil(total / smallest - 1e-9)
    while int(slot * UNIT * smallest / total) < UNIT:
        slot += 1
    return slot


def min_capacity(tile: TileSpec, max_tiles: int, targets: list[str] | None = None) -> int:
    """The smallest capacity (of each target) at which every application of every tile gets
    at least 1 MiB."""
    names = targets or ["-"]
    need = 0
    for target in names:
        tiles_on = [k for k in range(1, max_tiles + 1) if _apps_on(tile, k, target, names)]
        for k in tiles_on:
            weights = [a.profile.capacity_weight for a in _apps_on(tile, k, target, names)]
            need = max(need, _slot_mib(weights) * UNIT * len(tiles_on))
    return need


def _tiles_on(tile: TileSpec, max_tiles: int, names: list[str]) -> dict[str, list[int]]:
    """Per target, the tiles (of up to max_tiles) that place a stream on it."""
    return {t: [k for k in range(1, max_tiles + 1) if _apps_on(tile, k, t, names)] for t in names}


def expand_targets(
    tile: TileSpec, specs: list[TargetSpec], capacity: int, max_tiles: int
) -> list[TargetSpec]:
    """The run's targets, each of `capacity` bytes, with a per-tile target replaced by its
    tiles' files (each one slot), in order."""
    if not any(per_tile(t.path) for t in specs):
        return [TargetSpec(t.name, t.path, capacity) for t in specs]
    names = [t.name for t in specs]
    tiles_on = _tiles_on(tile, max_tiles, names)
    out = []
    for t in specs:
        if not per_tile(t.path):
            out.append(TargetSpec(t.name, t.path, capacity))
            continue
        on = tiles_on[t.name]
        slot = capacity // max(len(on), 1) // UNIT * UNIT
        out += [TargetSpec(tile_target(t.name, k), tile_path(t.path, k), slot) for k in on]
    return out


def _stream_span(app: TileApp, streams: list[AppStream]) -> tuple[float, float]:
    """The part of the application's share its streams on one target cover: all of it when
    every stream is there, else the span of their regions (stretched over the share)."""
    if len(streams) == len(app.profile.streams):
        return 0.0, 1.0
    return min(s.region[0] for s in streams), max(s.region[1] for s in streams)


def compile_tiles(
    tile: TileSpec,
    tiles: int,
    *,
    capacity: int,
    max_tiles: int | None = None,
    dio_alignment: int = 0,
    targets: list[str] | None = None,
    own_files: frozenset[str] = frozenset(),
) -> TileLayout:
    """Streams for `tiles` tiles of `tile` laid out in `capacity` bytes of each of `targets`
    (their names; None: one unnamed target), as the module doc says; the targets named in
    `own_files` are per tile (`expand_targets` names their files)."""
    max_tiles = max(max_tiles or tiles, tiles)
    _check_mapping(tile, targets)
    names = targets or ["-"]
    tiles_on = _tiles_on(tile, max_tiles, names)
    tables: list[dict[str, Any]] = []
    tags: list[StreamTag] = []
    regions: list[dict[str, Any]] = []
    for k in range(1, tiles + 1):
        for target in names:
            if k not in tiles_on[target]:
                continue
            slot = capacity // len(tiles_on[target]) // UNIT * UNIT
            offset = tiles_on[target].index(k) * slot
            placed = target
            if target in own_files:
                offset, placed = 0, tile_target(target, k)  # the slot is tile k's own file
            apps = _apps_on(tile, k, target, names)
            weights = sum(a.profile.capacity_weight for a in apps)
            for app in apps:
                share = int(slot * app.profile.capacity_weight / weights) // UNIT * UNIT
                if share < UNIT:
                    where = "" if targets is None else f" on target {target}"
                    raise UsageError(
                        f"--capacity {format_size(capacity)} is too small for {max_tiles} "
                        f"tile(s): {app.label} would get less than 1 MiB{where}; use at least "
                        f"{format_size(min_capacity(tile, max_tiles, targets))}."
                    )
                regions.append(
                    {
                        "tile": k,
                        "app": app.label,
                        **({} if targets is None else {"target": placed}),
                        "offset": offset,
                        "length": share,
                    }
                )
                here = [s for s in app.profile.streams if _target_of(app, s, k, names) == target]
                _app_streams(
                    app, here, k, offset, share, targets and placed, dio_alignment, tables, tags
                )
                offset += share
    doc = {"name": f"{tile.name}-x{tiles}", "stream": tables}
    return TileLayout(doc=doc, tags=tags, regions=regions)


def _app_streams(
    app: TileApp,
    streams: list[AppStream],
    k: int,
    offset: int,
    share: int,
    target: str | None,
    dio_alignment: int,
    tables: list[dict[str, Any]],
    tags: list[StreamTag],
) -> None:
    """The stream tables of one application of tile k, in its share of one target."""
    rates = app.profile.rates()
    span_lo, span_hi = _stream_span(app, streams)
    for s in streams:
        names = copy_names(s.name, s.copies)
        frac_lo = (s.region[0] - span_lo) / (span_hi - span_lo)
        frac_hi = (s.region[1] - span_lo) / (span_hi - span_lo)
        lo = offset + int(share * frac_lo) // UNIT * UNIT
        hi = offset + int(share * frac_hi) // UNIT * UNIT
        if hi <= lo:
            hi = lo + UNIT
        for n in names:
            table = dict(s.table)
            table["name"] = f"t{k}.{app.label}.{n}"
            if app.host is not None:
                table["host"] = app.host  # placed by the tile file (cluster runs)
            table["offset"] = lo
            table["length"] = hi - lo
            if target is not None:
                table["target"] = target
            r = rates[n]
            if "iops" in r:
                table["rate"] = r["iops"]
            if "bps" in r:
                table["rate_bytes"] = r["bps"]
            if s.qd is not None:
                table["qd"] = int(round(app.profile._value(s.qd, f"stream '{s.name}': qd")))
            if dio_alignment and "bs" in table:
                table["bs"] = _fold_small_sizes(table["bs"], dio_alignment)
            if dio_alignment and "align" in table:
                table["align"] = _fold_alignment(table["align"], dio_alignment)
            tags.append(StreamTag(len(tables), k, app.label, app.profile.name, n, target))
            tables.append(table)


def _fold_alignment(align: Any, dio_alignment: int) -> Any:
    """Round a stream's offset alignment up to a multiple of the O_DIRECT alignment (Iometer's
    512-byte sector alignment on a 4 KiB device), as sizes are folded: the profile runs on any
    device, and the plan records what ran."""
    from tilemark.units import parse_size

    value = parse_size(align, "align")
    if value % dio_alignment == 0:
        return align
    return -(-value // dio_alignment) * dio_alignment


def _fold_small_sizes(bs: Any, align: int) -> Any:
    """Round sizes below the O_DIRECT alignment up to it (e.g. the web mix's 512 B on a 4 KiB
    device), so a profile runs on any device; weights are kept."""
    from tilemark.units import parse_size_mix

    mix = parse_size_mix(bs, "bs")
    if all(size >= align for size, _ in mix):
        return bs
    folded: dict[int, float] = {}
    for size, weight in mix:
        s = max(size, align)
        folded[s] = folded.get(s, 0.0) + weight
    return [[s, w] for s, w in sorted(folded.items())]
