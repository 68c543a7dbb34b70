"""The built-in `--default` workload (`tilemark run --default`): five applications sharing one
target, as a workload document for workload/plan.py to parse."""

from __future__ import annotations

from typing import Any

from tilemark.units import MIB


def default_workload_doc(target: str, size: int) -> dict[str, Any]:
    """The built-in `--default` workload: five applications sharing one file, 30 s + 5 s warm-up.

    Each application gets its own region, like separate files on one volume:
    OLTP 8 KiB 70/30 random (40%), log 64 KiB sequential O_DSYNC writes (10%), DSS 128 KiB
    sequential reads (30%), a 4 KiB random-read lookup service at 2000 IOPS Poisson and a web
    server's size mix (20%, shared).
    """
    unit = MIB  # region boundaries on 1 MiB so every O_DIRECT alignment is met

    def part(fraction: float) -> int:
        return max(unit, int(size * fraction) // unit * unit)

    oltp_len, log_len, dss_len = part(0.40), part(0.10), part(0.30)
    shared_offset = oltp_len + log_len + dss_len
    shared_len = size // unit * unit - shared_offset
    return {
        "name": "default",
        "target": target,
        "size": size,
        "duration": "30s",
        "warmup": "5s",
        "stream": [
            {
                "name": "oltp",
                "rw": "randrw",
                "read": 70,
                "bs": "8k",
                "qd": 8,
                "offset": 0,
                "length": oltp_len,
            },
            {
                "name": "log",
                "rw": "write",
                "bs": "64k",
                "qd": 1,
                "rate": 100,
                "arrival": "constant",
                "sync": "dsync",
                "offset": oltp_len,
                "length": log_len,
            },
            {
                "name": "dss",
                "rw": "read",
                "bs": "128k",
                "qd": 4,
                "offset": oltp_len + log_len,
                "length": dss_len,
            },
            {
                "name": "lookup",
                "rw": "randread",
                "bs": "4k",
                "rate": 2000,
                "arrival": "poisson",
                "qd": 32,
                "offset": shared_offset,
                "length": shared_len,
            },
            {
                # Iometer's web-server mix with its sub-4 KiB sizes folded into 4 KiB, so it
                # runs under O_DIRECT on 4 KiB-sector devices too.
                "name": "web",
                "rw": "randread",
                "bs": "4k:68,8k:15,16k:2,32k:6,64k:7,128k:1,512k:1",
                "qd": 2,
                "offset": shared_offset,
                "length": shared_len,
            },
        ],
    }
