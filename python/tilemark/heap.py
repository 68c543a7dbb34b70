"""The cyclic garbage collector around tilemark's big heaps.

A run of 10,000 streams holds millions of small dicts and lists (the plan, the workload, the
targets' records), none of them in a reference cycle. Python's cyclic collector rescans every
tracked object at each full collection, and allocations set collections off: in a 10,000-stream
run they took 2.4 s of the front end's CPU, 0.5 s at a time at the end of the run (measured with
gc.callbacks; bench/streams.py). Two tools:

- `no_gc()`: no collection while a large acyclic document is parsed (JSON of a run);
- `frozen()`: for the length of a run, what the set-up built is moved out of the collector's
  sight (`gc.freeze`), so collections during and after the measurement scan only what was
  allocated since; it goes back afterwards (`gc.unfreeze`), so a program that runs many runs
  through the API collects their garbage as before.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """No cyclic collection inside (the previous setting comes back)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextlib.contextmanager
def frozen() -> Iterator[None]:
    """Everything allocated so far is left out of cyclic collections inside."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
