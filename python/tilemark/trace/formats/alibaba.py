"""Alibaba Cloud's block traces (CSV `io_traces.csv`, no header line).

Source: github.com/alibaba/block-traces (Alibaba Group, 2020; CC BY 4.0): 1000 virtual disks
of the elastic block service of Alibaba Cloud in one Beijing cluster, January 2020; analysed
in Li et al., "An In-Depth Analysis of Cloud Block Storage Workloads in Large-Scale
Production", IISWC 2020. Each line is one request:

    device_id,opcode,offset,length,timestamp
    0,R,126703644672,4096,1577808000000626

opcode `R` or `W`, offset and length in bytes, timestamp in microseconds since the Unix epoch
(when the server received the request). The device is the device_id.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tilemark.trace.formats.csvbase import INT, Column, CsvReader, CsvSpec, as_text, scaled

NAME = "alibaba"
TITLE = "Alibaba block trace CSV"
EXAMPLE = "0,R,126703644672,4096,1577808000000626"
ABSOLUTE_TIME = True
_MAX_NS = (1 << 63) - 1


def _convert(c: dict[str, pa.Array]) -> dict[str, Any]:
    return {
        "issue_ns": scaled(c["timestamp"], 1000),
        "op": pc.if_else(pc.equal(as_text(c["opcode"]), "R"), "read", "write"),
        "offset": c["offset"],
        "size": c["length"],
        "device": as_text(c["device_id"]),
    }


SPEC = CsvSpec(
    name=NAME,
    columns=(
        Column("device_id", INT, "the virtual disk"),
        Column("opcode", ("R", "W"), "the operation"),
        Column("offset", INT, "bytes"),
        Column("length", INT, "bytes"),
        Column("timestamp", INT, "microseconds since 1970", _MAX_NS // 1000),
    ),
    convert=_convert,
    aliases=(("device_id", "opcode", "offset", "length", "timestmap"),),  # the README's header
)
NOTES = ("Alibaba times are microseconds when the server received the request.",)


def detect(lines: list[str]) -> bool:
    """Five comma-separated fields, the second R or W."""
    return SPEC.detect(lines)


def reader(path: Path, display: str) -> CsvReader:
    return CsvReader(SPEC, path, display)
