"""Trace columns as numpy arrays without going through pandas.

pyarrow's to_numpy(), fill_null(), cast() and scalar() import pandas the first time (to set up
their conversions or to check a value for a pandas type): 0.3-0.6 s on this project's
machines, the better part of a short `tilemark learn` or `tilemark fidelity`. These read the
Arrow buffers directly for the fixed-width and string columns traces hold.
"""

from __future__ import annotations

import numpy as np


def _bits(buffer, offset: int, length: int) -> np.ndarray:
    """An Arrow bitmap (validity or boolean values) as a numpy bool array."""
    bits = np.unpackbits(np.frombuffer(buffer, np.uint8), bitorder="little")
    return bits[offset : offset + length].astype(bool)


def numbers(column, dtype: type, fill: float | bool | None = None) -> np.ndarray:
    """A numeric or boolean Arrow column (chunked or not) as a numpy array of `dtype`, nulls
    as `fill`, read from its buffers (module doc). Other types, and nulls without a `fill`, go
    Arrow's way."""
    import pyarrow as pa

    want = np.dtype(dtype)
    parts = []
    for c in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
        if pa.types.is_boolean(c.type):
            values = _bits(c.buffers()[1], c.offset, len(c))
        elif pa.types.is_integer(c.type) or pa.types.is_floating(c.type):
            own = np.dtype(c.type.to_pandas_dtype())
            skip = c.offset * own.itemsize
            values = np.frombuffer(c.buffers()[1], own, count=len(c), offset=skip)
        else:
            values = None
        if values is None or (c.null_count and fill is None):
            parts.append(c.to_numpy(zero_copy_only=False).astype(want))
            continue
        values = values.astype(want)
        if c.null_count:
            values = np.where(_bits(c.buffers()[0], c.offset, len(c)), values, fill)
        parts.append(values)
    return np.concatenate(parts) if parts else np.empty(0, dtype=want)


def strings(column, null: str | None = None) -> np.ndarray:
    """A string (or dictionary of strings) Arrow column as an object array, `null` for null;
    each distinct string of a chunk converted to Python once rather than once per row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = []
    for chunk in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
        encoded = chunk if pa.types.is_dictionary(chunk.type) else pc.dictionary_encode(chunk)
        values = np.asarray([*encoded.dictionary.to_pylist(), null], dtype=object)
        parts.append(values[numbers(encoded.indices, np.int64, -1)])
    return np.concatenate(parts) if parts else np.empty(0, dtype=object)
