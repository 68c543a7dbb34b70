"""SNIA IOTTA's MSR Cambridge traces (CSV, no header line).

Source: Narayanan, Donnelly, Rowstron, "Write Off-Loading: Practical Power Management for
Enterprise Storage", FAST '08; published by SNIA IOTTA (iotta.snia.org, trace 388): 36 volumes
of 13 servers over one week. Each line is one request:

    Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime
    128166372003061629,hm,1,Read,3154509824,24576,41286

Timestamp is a Windows filetime (100 ns ticks since 1601-01-01 UTC), Type `Read` or `Write`,
Offset and Size in bytes, ResponseTime in 100 ns ticks. The device is `<Hostname>_<DiskNumber>`
(the volume names the publishers use: hm_1, web_2, src1_0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tilemark.trace.formats.csvbase import INT, TEXT, Column, CsvReader, CsvSpec, as_text, scaled

NAME = "msr"
TITLE = "SNIA IOTTA MSR Cambridge CSV"
EXAMPLE = "128166372003061629,hm,1,Read,3154509824,24576,41286"
ABSOLUTE_TIME = True
# 100 ns ticks from 1601-01-01 to 1970-01-01.
FILETIME_UNIX_EPOCH = 116_444_736_000_000_000
_MAX_NS = (1 << 63) - 1


def _convert(c: dict[str, pa.Array]) -> dict[str, Any]:
    issue = scaled(pc.subtract(c["Timestamp"], FILETIME_UNIX_EPOCH), 100)
    latency = scaled(c["ResponseTime"], 100)
    device = pc.binary_join_element_wise(as_text(c["Hostname"]), as_text(c["DiskNumber"]), "_")
    return {
        "issue_ns": issue,
        "complete_ns": pc.add_checked(issue, latency),
        "latency_ns": latency,
        "op": pc.if_else(pc.equal(as_text(c["Type"]), "Read"), "read", "write"),
        "offset": c["Offset"],
        "size": c["Size"],
        "device": device,
    }


SPEC = CsvSpec(
    name=NAME,
    columns=(
        Column("Timestamp", INT, "Windows filetime", FILETIME_UNIX_EPOCH + _MAX_NS // 200),
        Column("Hostname", TEXT, "the server"),
        Column("DiskNumber", INT, "the volume of the server"),
        Column("Type", ("Read", "Write"), "the operation"),
        Column("Offset", INT, "bytes"),
        Column("Size", INT, "bytes"),
        Column("ResponseTime", INT, "100 ns ticks", _MAX_NS // 200),
    ),
    convert=_convert,
)
NOTES = ("MSR Cambridge times are Windows filetimes (100 ns resolution).",)


def detect(lines: list[str]) -> bool:
    """Seven comma-separated fields, Type Read or Write."""
    return SPEC.detect(lines)


def reader(path: Path, display: str) -> CsvReader:
    return CsvReader(SPEC, path, display)
