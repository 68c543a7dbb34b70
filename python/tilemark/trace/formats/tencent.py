"""Tencent Cloud Block Storage traces (CSV, no header line).

Source: SNIA IOTTA (iotta.snia.org, trace 27917), described in Zhang et al., "OSCA: An
Online-Model Based Cache Allocation Scheme in Cloud Block Storage Systems", USENIX ATC '20:
5584 cloud virtual volumes of one warehouse, 1-10 October 2018, one file per hour. The
publishers' README gives each line as:

    Timestamp,Offset,Size,IOType,VolumeID
    1538323200,1267784,8,1,1283

Timestamp in Unix seconds (the time the IO was issued), Offset and Size in 512-byte sectors,
IOType 0 read and 1 write. The device is the VolumeID.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tilemark.trace.formats.csvbase import INT, Column, CsvReader, CsvSpec, as_text, scaled

NAME = "tencent"
TITLE = "Tencent CBS block trace CSV"
EXAMPLE = "1538323200,1267784,8,1,1283"
ABSOLUTE_TIME = True
SECTOR = 512
_MAX = (1 << 63) - 1


def _convert(c: dict[str, pa.Array]) -> dict[str, Any]:
    return {
        "issue_ns": scaled(c["Timestamp"], 1_000_000_000),
        "op": pc.if_else(pc.equal(as_text(c["IOType"]), "0"), "read", "write"),
        "offset": scaled(c["Offset"], SECTOR),
        "size": scaled(c["Size"], SECTOR),
        "device": as_text(c["VolumeID"]),
    }


SPEC = CsvSpec(
    name=NAME,
    columns=(
        Column("Timestamp", INT, "Unix seconds", _MAX // 1_000_000_000),
        Column("Offset", INT, "512-byte sectors", _MAX // SECTOR),
        Column("Size", INT, "512-byte sectors", _MAX // SECTOR),
        Column("IOType", ("0", "1"), "0 read, 1 write"),
        Column("VolumeID", INT, "the volume"),
    ),
    convert=_convert,
)
NOTES = (
    "Tencent CBS times have 1 s resolution: the requests of one second are all issued at "
    "its start, in file order.",
)


def detect(lines: list[str]) -> bool:
    """Five comma-separated whole numbers, the fourth 0 or 1."""
    return SPEC.detect(lines)


def reader(path: Path, display: str) -> CsvReader:
    return CsvReader(SPEC, path, display)
