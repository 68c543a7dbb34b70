"""Python face of the Rust engine: plan (dict) in, snapshots and result (dicts) out.

The engine runs on its own threads without the GIL; `poll()` returns the interval snapshots
finished since the last call. Formats are documented in docs/engine-boundary.md.
"""

from __future__ import annotations

import json
from typing import Any

from tilemark import _engine

EngineError = _engine.EngineError
PLAN_VERSION: int = _engine.PLAN_VERSION


class Handle:
    """A running engine plan."""

    def __init__(self, run: _engine.Run, plan: dict[str, Any]):
        self._run = run
        self.plan = plan

    def poll(self) -> list[dict[str, Any]]:
        """Interval snapshots completed since the last poll, oldest first."""
        return json.loads(self._run.poll())

    def stop(self) -> None:
        """Stop early; the partial interval is still reported and the result marked incomplete."""
        self._run.stop()

    def wait(self, timeout_s: float) -> bool:
        """Wait up to timeout_s for the run to end; True if it has."""
        return self._run.wait(float(timeout_s))

    def done(self) -> bool:
        return self._run.done()

    def result(self) -> dict[str, Any]:
        """Block until the run ends and return its result (measurement-phase totals)."""
        return json.loads(self._run.result())


def start(plan: dict[str, Any]) -> Handle:
    """Start a plan. Raises EngineError with a clear message if the engine rejects it."""
    plan = {"plan_version": PLAN_VERSION, **plan}
    return Handle(_engine.start(json.dumps(plan)), plan)


def fill(path: str, offset: int, length: int, *, direct: bool = True, seed: int = 1) -> int:
    """Write incompressible data over [offset, offset+length) so later reads never hit holes."""
    return _engine.fill(str(path), int(offset), int(length), bool(direct), int(seed))


def dio_alignment(path: str) -> int:
    """O_DIRECT alignment required for `path` in bytes, or 0 if O_DIRECT is unsupported."""
    return _engine.dio_alignment(str(path))


def version() -> str:
    return _engine.version()
