"""Reading TOML files (workloads, profiles, tiles): anything wrong with one is one UsageError
naming the file, never a traceback or a huge message."""

from __future__ import annotations

import os
import tomllib
from typing import Any

from tilemark.errors import UsageError
from tilemark.units import MIB, format_size

__all__ = ["MAX_TOML_BYTES", "load_toml", "read_toml"]


# Workload, profile and tile files are read whole: a bound keeps a wrong file (an image, a log)
# from filling memory and the parser's time (seconds per 10 MB). 10,000 streams of a few keys
# each fit in about 1 MB.
MAX_TOML_BYTES = 4 * MIB


def read_toml(path: str | os.PathLike[str], what: str) -> dict[str, Any]:
    """Read a TOML file (workload, profile, tile); anything wrong is one UsageError naming
    `what` and the file."""
    try:
        with open(path, "rb") as f:
            text = f.read(MAX_TOML_BYTES + 1)
        if len(text) > MAX_TOML_BYTES:
            raise UsageError(
                f"{what} {path} is larger than {format_size(MAX_TOML_BYTES)}; a workload, "
                "profile or tile file is a few kB (10,000 streams fit in about 1 MB)."
            )
        return tomllib.loads(text.decode("utf-8"))
    except RecursionError:
        raise UsageError(
            f"{what} {path} nests tables or arrays too deeply to read; TOML files of tilemark "
            "nest a few levels."
        ) from None
    except FileNotFoundError:
        raise UsageError(f"{what} {path} does not exist.") from None
    except IsADirectoryError:
        raise UsageError(f"{what} {path} is a directory; name a .toml file.") from None
    except UnicodeDecodeError as e:
        byte = e.object[e.start : e.start + 1].hex()
        raise UsageError(
            f"{what} {path} is not UTF-8 text (byte 0x{byte} at offset {e.start}); "
            "TOML files must be UTF-8."
        ) from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{what} {path} is not valid TOML: {e}.") from None
    except OSError as e:
        raise UsageError(f"{what} {path} cannot be read: {e.strerror}.") from None


def load_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a workload TOML file; a missing or malformed file is a UsageError."""
    return read_toml(path, "workload file")
