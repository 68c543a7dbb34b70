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

def fill(
    path: str,
    offset: int,
    length: int,
    direct: bool,
    seed: int,
    target_id: int | None = None,
    block_size: int = 4096,
    data_offset: int = 0,
) -> int:
    """Write incompressible data over [offset, offset+length); returns bytes written. With
    `target_id`, verifiable fill blocks (docs/verification.md) whose offsets count from
    `data_offset`."""

def sample_blocks(
    block_size: int, compress_pct: float, dedupe_ratio: float, verify: bool, blocks: int, seed: int
) -> bytes:
    """`blocks` blocks of write data exactly as a stream with these settings writes them."""

class VerifyPass:
    """A running verification pass (its reader threads run without the GIL)."""

    def progress(self) -> tuple[int, int]:
        """(bytes judged so far, bytes in the data area)."""
    def stop(self) -> None:
        """Stop early; the result says how much was read."""
    def wait(self, timeout_s: float) -> bool:
        """Block (GIL released) up to `timeout_s`; True once the pass has ended."""
    def result(self) -> str:
        """Block until the pass ends; its JSON result (docs/engine-boundary.md)."""

def verify_pass(spec_json: str) -> VerifyPass:
    """Start a verification pass over a data area (docs/engine-boundary.md)."""

def dio_alignment(path: str) -> int:
    """O_DIRECT alignment for `path` (STATX_DIOALIGN or logical block size); 0 if none."""

def version() -> str:
    """The engine crate's version."""

FILE_PLAN_VERSION: int
"""The file plan format this engine reads (docs/files.md)."""

class FileRun:
    """A running file plan (file and metadata operations over prepared file sets)."""

    def poll(self) -> str:
        """JSON list of interval snapshots completed since the last poll (may be `[]`)."""
    def stop(self) -> None:
        """Ask every thread to stop after the operation it is in; the partial interval is
        reported."""
    def wait(self, timeout_s: float) -> bool:
        """Block (GIL released) up to `timeout_s` until the run ends; True if it has ended."""
    def result(self) -> str:
        """Block (GIL released) until the run ends; JSON totals per stream, stop_reason, the
        first failing operation (`error`) and the sets' files and bytes as left."""

def start_files(plan_json: str) -> FileRun:
    """Validate a file plan, open its sets' directories (no links) and start its threads."""
