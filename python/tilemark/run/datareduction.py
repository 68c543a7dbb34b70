"""How far the data a run writes reduces: compressibility with zstd and lz4 and dedupability
of 4 KiB blocks, measured when the run starts on a sample the engine generates exactly as its
streams write (docs/verification.md, Data reduction).

The sample of each distinct data setting (block size, compress, dedupe, verification) is
SAMPLE_BYTES long and laid out as a region of that size: its dedupe pool is scaled to the
sample as it is to a stream's region, so the sample has the stream's ratio.
"""

from __future__ import annotations

import hashlib
from typing import Any

from tilemark import engine

SAMPLE_BYTES = 8 << 20
DEDUPE_UNIT = 4096
ZSTD_LEVEL = 3  # zstd's default level
SAMPLE_SEED = 0x7464_7265_6475_6365


def measure_data(block: int, compress_pct: float, dedupe: float, verify: bool) -> dict[str, Any]:
    """Ratios of one data setting: zstd and lz4 (input / compressed) and dedupe (4 KiB blocks /
    distinct 4 KiB blocks)."""
    import lz4.frame
    import zstandard

    data = engine.sample_blocks(
        block, compress_pct, dedupe, verify, SAMPLE_BYTES // block, SAMPLE_SEED
    )
    zstd = len(data) / len(zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(data))
    lz4_ratio = len(data) / len(lz4.frame.compress(data))
    units = len(data) // DEDUPE_UNIT
    distinct = {
        hashlib.blake2b(data[i * DEDUPE_UNIT : (i + 1) * DEDUPE_UNIT], digest_size=16).digest()
        for i in range(units)
    }
    return {
        "compress_pct": compress_pct,
        "dedupe_ratio": dedupe,
        "block_size": block,
        "verify": verify,
        "sample_bytes": len(data),
        "zstd": zstd,
        "lz4": lz4_ratio,
        "dedupe": units / len(distinct),
    }


def measure(plan: dict[str, Any]) -> dict[str, Any] | None:
    """The data reduction of a plan's writing streams (None when nothing writes): one
    measurement per distinct data setting, and which streams use it."""
    settings: dict[tuple[int, float, float, bool], list[str]] = {}
    for stream in plan.get("streams") or []:
        if float(stream.get("read_pct", 100.0)) >= 100.0:
            continue
        # Plan 2 lists a stream's regions (every target of a stream is verified alike); plan 1
        # named one target.
        regions = stream.get("regions") or [{"target": stream.get("target", 0)}]
        verify = (plan["targets"][int(regions[0]["target"])] or {}).get("verify")
        block = int(verify["block_size"]) if verify else DEDUPE_UNIT
        key = (
            block,
            float(stream.get("compress_pct") or 0.0),
            float(stream.get("dedupe_ratio") or 1.0),
            verify is not None,
        )
        settings.setdefault(key, []).append(str(stream["name"]))
    if not settings:
        return None
    measured = []
    for (block, compress_pct, dedupe, verify), names in settings.items():
        measured.append({**measure_data(block, compress_pct, dedupe, verify), "streams": names})
    return {"settings": measured}


def overall(reduction: dict[str, Any] | None, summary: dict[str, Any]) -> dict[str, Any] | None:
    """The run's ratios: each setting weighted by the bytes its streams wrote (the first
    setting's when nothing was written)."""
    if not reduction:
        return None
    written = {s["name"]: ((s.get("write") or {}).get("bytes") or 0) for s in summary["streams"]}
    total = {"zstd": 0.0, "lz4": 0.0, "dedupe": 0.0}
    weight = 0.0
    for setting in reduction["settings"]:
        w = float(sum(written.get(n, 0) for n in setting["streams"]))
        weight += w
        for key in total:
            total[key] += w / setting[key]  # bytes after reduction
    if weight == 0:
        first = reduction["settings"][0]
        return {key: first[key] for key in total}
    return {key: weight / after for key, after in total.items()}


def describe(ratios: dict[str, Any]) -> str:
    """'zstd 2.00:1, lz4 1.98:1, dedupe 1.00:1'."""
    return (
        f"zstd {ratios['zstd']:.2f}:1, lz4 {ratios['lz4']:.2f}:1, dedupe {ratios['dedupe']:.2f}:1"
    )
