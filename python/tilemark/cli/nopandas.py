"""`tilemark` commands run as if pandas were not installed.

pandas is optional for tilemark (`pip install 'tilemark[pandas]'` for `tilemark.api`'s
DataFrames) and for every library a command uses (pyarrow, DuckDB, Altair, distributed). Yet
where it is installed, pyarrow imports it the first time a process converts values to Arrow
or opens a Parquet dataset, only to ask whether the values are pandas objects: 0.3-0.7 s of a
command's CPU (`python -X importtime`, `tilemark run` of 1 s: pandas 0.38 s of 0.54 s of
imports under the run module). No command hands pyarrow a pandas object, so while a command
runs, `import pandas` fails as it would without pandas, and every library takes its own
without-pandas path. The block is lifted when the command returns (tests run commands in
process), and a process that has pandas already keeps it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.abc import MetaPathFinder


class _NoPandas(MetaPathFinder):
    def find_spec(self, fullname, path, target=None):  # noqa: ANN001 (importlib's protocol)
        if fullname == "pandas" or fullname.startswith("pandas."):
            raise ModuleNotFoundError(
                f"No module named {fullname!r} (tilemark's commands run without pandas)",
                name=fullname,
            )
        return None


@contextmanager
def without_pandas() -> Iterator[None]:
    """`import pandas` raises ModuleNotFoundError inside the block, unless already imported."""
    if "pandas" in sys.modules:
        yield
        return
    gate = _NoPandas()
    sys.meta_path.insert(0, gate)
    try:
        yield
    finally:
        sys.meta_path.remove(gate)
