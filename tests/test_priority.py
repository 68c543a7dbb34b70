"""run/priority.py: the front end runs below the engine's priority while a run measures."""

from __future__ import annotations

import os
import threading

from tilemark.run.priority import NICE_STEP, front_end_yields


def nice_of(tid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, tid)


def test_the_front_end_and_the_threads_it_starts_yield_and_the_engine_does_not():
    me = threading.get_native_id()
    before = nice_of(me)
    started_before = threading.Event()
    seen: dict[str, int] = {}

    def engine_like():  # started before: as the engine's threads are
        seen["engine"] = nice_of(threading.get_native_id())
        started_before.wait(5)
        seen["engine_during"] = nice_of(threading.get_native_id())

    engine = threading.Thread(target=engine_like)
    engine.start()
    with front_end_yields():
        assert nice_of(me) == before + NICE_STEP
        sampler = threading.Thread(
            target=lambda: seen.update(sampler=nice_of(threading.get_native_id()))
        )
        sampler.start()
        sampler.join()
        started_before.set()
        engine.join()
        # A second run inside does not lower it further.
        with front_end_yields():
            assert nice_of(me) == before + NICE_STEP
    assert seen == {"engine": before, "engine_during": before, "sampler": before + NICE_STEP}
    if os.geteuid() == 0:  # lowering a nice value back needs CAP_SYS_NICE
        assert nice_of(me) == before


def test_benchmarks_can_turn_it_off(monkeypatch):
    monkeypatch.setenv("TILEMARK_FRONT_END_NICE", "0")
    me = threading.get_native_id()
    before = nice_of(me)
    with front_end_yields():
        assert nice_of(me) == before
