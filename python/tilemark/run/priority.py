"""The front end gives way to the engine while a run measures.

The engine's threads issue open-loop IOs at their intended times; the front end (this Python
thread, the telemetry sampler, the live view) wakes once per poll and then works in bursts:
an interval's rows, the live view, the monitors. On a host with as many CPUs as engine
threads (the development VM: 2 and 2), a burst that lands on an engine thread's CPU holds that
thread back until the scheduler switches, and its IOs go out late: the lateness the engine
records is then the front end's, not the storage's. So while the engine runs, the front end's
threads run at a nice value `NICE_STEP` above the engine's: when both want a CPU the engine
gets about three quarters of it, and a woken engine thread preempts a front-end burst rather
than waiting for it. The front end keeps the rest, which is far more than it needs at one poll
per interval; it only yields sooner.

Linux sets nice values per thread: the threads this thread starts inside (the telemetry
sampler, the live view's refresher) inherit it, the engine's threads (started before) do not.
Raising a nice value needs no privilege; lowering it back does (CAP_SYS_NICE): a caller
without it keeps the raised value after the run, and a later run does not raise it further.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

# Nice 5 against the engine's 0: CFS/EEVDF weights 335 and 1024.
NICE_STEP = 5


def nice_step() -> int:
    """NICE_STEP, or TILEMARK_FRONT_END_NICE (0 turns it off: benchmarks measure both)."""
    value = os.environ.get("TILEMARK_FRONT_END_NICE", "")
    return int(value) if value.isdigit() else NICE_STEP


@contextlib.contextmanager
def front_end_yields() -> Iterator[None]:
    """This thread (and the threads it starts inside) at a lower priority than the engine's
    threads, restored afterwards where the process may."""
    tid = threading.get_native_id()
    try:
        before = os.getpriority(os.PRIO_PROCESS, tid)
    except OSError:
        yield
        return
    lowered = False
    step = nice_step()
    if step and before < step:
        try:
            os.setpriority(os.PRIO_PROCESS, tid, before + step)
            lowered = True
        except OSError:
            pass
    try:
        yield
    finally:
        if lowered:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, tid, before)
