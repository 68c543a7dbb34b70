"""fio's `verify_pattern` and `fill_device`, read and translated (fio commit f5344384; HOWTO
"Verification" and "I/O size"; options.c str_verify_pattern_cb, init.c, filesetup.c). Together
they make fio's surface-scan example: write a whole file or device, then read it all back and
check every block.

`verify_pattern` fills each block after fio's verification header with a pattern that the
read-back checks. tilemark writes its own verifiable blocks (header, sector stamps, CRC32C over
random bytes: docs/verification.md) and checks every read of them, so with a header-checking
`verify` the check fio means is kept and the note says what is written instead. Without
`verify`, fio checks the pattern alone (str_verify_pattern_cb sets verify=pattern), which is
refused as `verify=pattern` is; with `verify=0` the pattern is only write data, refused as
`buffer_pattern` is.

`fill_device=1` (`fill_fs`) without `size` writes until ENOSPC: for a regular file, until the
file system is full (filesetup.c takes its free space); with `size`, fio writes that size
(init.c sets the "really large" size only when none is given). tilemark never fills a file
system: the job writes the target's whole data area once (the target's size, --size, by
default min(2 GiB, 10% of free space); a block device's whole data area, as fio writes the
whole device), and the note says so. HOWTO: it "only makes sense with sequential write", so
other rw modes are refused.
"""

from __future__ import annotations

from typing import Any

from tilemark.errors import UsageError
from tilemark.fio import values
from tilemark.fio.jobfile import Option

# `job` is fio.job.FioJob (not imported: job.py imports this module).
FioJob = Any

KEYS = ("verify_pattern", "fill_device")


def _label(opt: Option) -> str:
    return f"{opt.where}: fio option {opt.key}"


def fills(job: FioJob) -> bool:
    """fill_device=1 (or fill_fs=1) in force."""
    opt = job.data_opts.get("fill_device")
    return opt is not None and values.parse_bool(opt.value, _label(opt))


def stream_fields(job: FioJob, table: dict[str, Any], refuse: Any, verify_set: bool) -> None:
    """Notes for verify_pattern and fill_device; refusals where fio means something else.

    `verify_set`: the job file sets `verify` for this job (to anything, 0 included)."""
    pattern = job.data_opts.get("verify_pattern")
    if pattern is not None:
        if not (pattern.value or "").strip():
            raise UsageError(f'{_label(pattern)} needs a pattern (fio: 0xaa555aa5, "abcd", %o).')
        if job.verify is None:
            raise refuse(
                job,
                pattern,
                "without a header-checking verify fio writes this pattern and checks only it "
                "(verify=pattern)"
                if not verify_set
                else "with verify=0 fio only fills its write buffers with the pattern",
                "verification other than tilemark's",
            )
        job.notes.append(
            f"verify_pattern={pattern.value.strip()}: fio fills each block after its header "
            "with the pattern and checks it when reading back; tilemark writes its own "
            "verifiable blocks (a header naming target, offset and write, a stamp in every "
            "512-byte sector, random bytes under a CRC32C) and checks every read of them, so "
            "the blocks are checked as fio means, but the data differs: a repeated pattern "
            "compresses and dedupes almost entirely, tilemark's blocks as compress and dedupe "
            "say (by default not at all)"
        )
    if not fills(job):
        return
    opt = job.data_opts["fill_device"]
    if job.rw != "write":
        raise refuse(
            job,
            opt,
            f"it writes until the device is full, which fio says only makes sense with "
            f"sequential writes (rw=write), not rw={job.rw}",
            "placement",
        )
    if job.size_opt is not None:
        job.notes.append(
            f"{opt.key}=1 with size: fio writes size bytes unless the file system fills "
            "first (ENOSPC); tilemark creates the target at its size before the run"
        )
        return
    job.notes.append(
        f"{opt.key}=1: fio writes until the device or file system is full (ENOSPC); tilemark "
        "never fills a file system and writes the target's whole data area once instead: a "
        "block device's, or a file's at --size (default min(2 GiB, 10% of free space))"
    )
