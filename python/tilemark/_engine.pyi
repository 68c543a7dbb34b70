"""The Rust engine's Python boundary (crate `tilemark-py`). Formats: docs/engine-boundary.md.

Use `tilemark.engine` rather than this module: it parses the JSON and adds typing.
"""

__version__: str
"""The tilemark package version (the Cargo workspace version)."""

PLAN_VERSION: int
"""The plan format this engine reads (docs/engine-boundary.md)."""

class EngineError(Exception):
    """An engine failure: bad plan, a target that cannot be opened, an io_uring setup error."""

class Run:
    """A running plan. The engine threads run without the GIL."""

    def poll(self) -> str:
        """JSON list of interval snapshots completed since the last poll (may be `[]`)."""
    def stop(self) -> None:
        """Ask the engine to stop: in-flight IOs are reaped (waiting at most 5 s, or the plan's
        io_timeout_ms if shorter), the partial interval is reported."""
    def wait(self, timeout_s: float) -> bool:
        """Block (GIL released) up to `timeout_s` until the run ends; True if it has ended."""
    def done(self) -> bool:
        """True once every engine thread has finished."""
    def result(self) -> str:
        """Block (GIL released) until the run ends; JSON result, or raise EngineError when an
        engine thread failed. Runs stopped by stop(), max_errors or a hung IO return normally:
        the result's stop_reason and hung say why."""

def start(plan_json: str) -> Run:
    """Validate the plan, open the targets and start the engine threads."""

def fill(path: str, offset: int, length: int, direct: bool, seed: int) -> int:
    """Write incompressible data over [offset, offset+length); returns bytes written."""

def dio_alignment(path: str) -> int:
    """O_DIRECT alignment for `path` (STATX_DIOALIGN or logical block size); 0 if none."""

def version() -> str:
    """The engine crate's version."""
