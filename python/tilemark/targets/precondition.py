"""`tilemark precondition`: SNIA PTS workload-independent preconditioning (WIPC).

Flash and thin-provisioned storage behave differently once every block has been written: a
result from fresh storage does not last. The SNIA Solid State Storage PTS prepares a device
by writing its whole user capacity twice with sequential 128 KiB writes (methodology section
7). Here each pass is one engine run: a sequential write stream over the whole data area
whose IO limit is exactly the data area (plus, when the area is not a whole number of blocks,
a second stream for its tail), so a pass writes every byte once, through the same backend,
O_DIRECT and safety checks as `tilemark run`. Incompressible data, queue depth QD.

Targets are checked as `run` checks them (a new file is created at --size, an existing
tilemark file keeps its header, a block device needs --destroy-data, foreign files are
refused) before any IO. Afterwards the target carries a record (when, how, bytes written, MB/s
per pass; targets.write_precondition_record) that every later run shows in its provenance.
Ctrl-C or SIGTERM stops the pass in order: the target's record is left as it was (a pass that
did not cover the whole area is no preconditioning) and the exit status is 128 + the signal.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn

import tilemark
from tilemark import engine, targets
from tilemark.console import make_console
from tilemark.errors import RunError, UsageError
from tilemark.interrupts import SignalStopper
from tilemark.run.summary import errors_by_name, errors_text
from tilemark.targets import data as targetdata
from tilemark.targets import sets as targetset
from tilemark.units import format_size
from tilemark.workload import compiler, plan

DEFAULT_PASSES = 2
DEFAULT_BS = 128 * 1024
QD = 32
HOW = "SNIA PTS workload-independent preconditioning: sequential writes over the data area"
PLAIN_EVERY_S = 10.0  # a plain progress line at least this often (and every 10%)


@dataclass
class Pass:
    """One pass over a target's data area."""

    index: int  # 1-based
    bytes: int = 0
    seconds: float = 0.0
    complete: bool = False

    @property
    def mbps(self) -> float:
        return self.bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0


@dataclass
class Preconditioning:
    """What preconditioning one target did."""

    info: targets.TargetInfo
    passes: list[Pass] = field(default_factory=list)
    interrupted: int | None = None

    @property
    def bytes_written(self) -> int:
        return sum(p.bytes for p in self.passes)

    def record(self, *, bs: int, passes_asked: int) -> dict[str, Any]:
        """The record kept with the target (docs/results-schema.md, Preconditioning)."""
        done = [p for p in self.passes if p.complete]
        return {
            "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "how": HOW,
            "pattern": "sequential",
            "bs": bs,
            "qd": QD,
            "direct": self.info.direct,
            "passes": passes_asked,
            "passes_completed": len(done),
            "data_length": self.info.data_length,
            "bytes_written": self.bytes_written,
            "mbps_per_pass": [round(p.mbps, 1) for p in done],
            "seconds": round(sum(p.seconds for p in self.passes), 2),
            "tilemark_version": tilemark.__version__,
        }


def inspect(
    paths: list[str], *, size: int | None, bs: int, destroy_data: list[str] | None, force: bool
) -> list[targets.TargetInfo]:
    """Check every target as `run` does and plan its first pass (no IO yet)."""
    if not paths:
        raise UsageError("--target is required: a file (created at --size) or a block device.")
    destroy = list(destroy_data or [])
    infos = []
    for path in paths:
        info = targets.inspect_target(
            path,
            size=size,
            writes=True,
            direct=True,
            destroy_data=targetset.destroy_for(path, destroy),
            force=force,
        )
        if info.kind == "file":
            info.data_length = info.file_data_length  # the whole data area, whatever --size
        info.direct = info.dio_alignment > 0
        pass_plan(info, bs)  # bad block sizes are refused before any target is written
        infos.append(info)
    targetset.check_distinct(infos)
    targetset.check_destroy_named(destroy, infos)
    return infos


def pass_plan(info: targets.TargetInfo, bs: int) -> engine.Plan:
    """One pass: sequential writes of `bs` over the data area, each byte exactly once."""
    align = max(info.dio_alignment, 1) if info.direct else 1
    if bs % align:
        raise UsageError(
            f"--bs {bs} is not a multiple of {align}, the O_DIRECT alignment of {info.path}; "
            "use a multiple of it (default 128k)."
        )
    whole = info.data_length // bs * bs
    tail = info.data_length - whole
    streams: list[dict[str, Any]] = []
    if whole:
        streams.append({"name": "precondition", "rw": "write", "bs": bs, "qd": QD, "length": whole})
    if tail:
        streams.append(
            {"name": "tail", "rw": "write", "bs": tail, "qd": 1, "offset": whole, "length": tail}
        )
    # Whole verification blocks are written verifiable, so the target stays checkable.
    block = targetdata.block_size(info)
    verify = bs % block == 0 and tail % block == 0
    doc = {
        "target": info.path,
        "duration": 1,  # replaced below: a pass ends when its IO limit is written
        "interval": 1,
        "direct": info.direct,
        "threads": 1,
        "verify": verify,
        "stream": streams,
    }
    try:
        compiled = compiler.compile_plan(plan.parse_workload(doc, source="precondition"), [info])
    except UsageError as e:
        raise UsageError(f"--bs {bs}: {e}") from None
    compiled["duration_ms"] = None
    for stream in compiled["streams"]:
        stream["io_limit"] = stream["regions"][0]["length"]  # type: ignore[typeddict-unknown-key]
    return compiled


Reporter = Callable[[Pass, int], None]  # (the pass so far, bytes per pass)


def run_pass(info: targets.TargetInfo, compiled: engine.Plan, p: Pass, report: Reporter) -> int:
    """Write one pass; None when it completed, else 128 + the signal that stopped it."""
    started = time.monotonic()
    with SignalStopper() as stopper:
        handle = engine.start(compiled)
        stopper.attach(handle)
        while True:
            finished = handle.wait(0.25)
            for snap in handle.poll():
                p.bytes += sum(int(s["write"]["bytes"]) for s in snap["streams"])
            p.seconds = time.monotonic() - started
            report(p, info.data_length)
            if finished:
                break
        result = handle.result()
        if not info.direct and stopper.signum is None:
            _flush(info.path)  # buffered writes count once they reach the storage
        p.seconds = time.monotonic() - started
        failed = errors_by_name(*(s.get("write") for s in result["streams"]))
        if failed:
            raise RunError(
                f"preconditioning {info.path} failed: writes failed ({errors_text(failed)})."
            )
        p.complete = stopper.signum is None and p.bytes >= info.data_length
        return stopper.exit_status or 0


def _flush(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ProgressView:
    """Bytes, MB/s, ETA and pass k of N: a rich progress bar on a terminal, plain lines
    otherwise (every 10% or PLAIN_EVERY_S)."""

    def __init__(self, console: Console, passes: int):
        self.console = console
        self.passes = passes
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._last = (0.0, -1)

    def start(self, info: targets.TargetInfo, p: Pass) -> None:
        label = f"{info.path}: pass {p.index} of {self.passes}"
        if self.console.is_terminal:
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[status]}"),
                console=self.console,
            )
            self._progress.start()
            self._task = self._progress.add_task(label, total=info.data_length, status="")
        else:
            self._last = (time.monotonic(), -1)
            self.console.file.write(f"preconditioning {label}\n")

    def __call__(self, p: Pass, total: int) -> None:
        rate = p.bytes / p.seconds if p.seconds > 0 else 0.0
        eta = f"{(total - p.bytes) / rate:,.0f} s" if rate > 0 else "-"
        status = (
            f"{format_size(p.bytes)} of {format_size(total)} "
            f"({100 * p.bytes / total:.0f}%), {rate / 1e6:,.0f} MB/s, ETA {eta}"
        )
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=p.bytes, status=status)
            return
        tenth = int(10 * p.bytes / total)
        now = time.monotonic()
        if tenth > self._last[1] or now - self._last[0] >= PLAIN_EVERY_S:
            self._last = (now, tenth)
            self.console.file.write(f"  pass {p.index} of {self.passes}: {status}\n")
            self.console.file.flush()

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.refresh()  # the last update, not the last timed redraw
            self._progress.stop()
            self._progress = None


def precondition(
    infos: list[targets.TargetInfo], *, passes: int, bs: int, argv: list[str], console: Console
) -> tuple[list[Preconditioning], int]:
    """Precondition every target in turn; (what each did, exit status)."""
    out: list[Preconditioning] = []
    for info in infos:
        done = Preconditioning(info)
        out.append(done)
        with targets.lock_target(info, argv):
            targets.prepare_target(info, fill=False)
            compiled = pass_plan(info, bs)
            verify = compiled["targets"][0].get("verify") is not None
            spec = targetdata.begin_run(info, verify=verify, writes=True, journal=None)
            if spec is not None:
                compiled["targets"][0]["verify"] = spec
            console.print(
                f"preconditioning {info.path} ({format_size(info.data_length)}, "
                f"{'O_DIRECT' if info.direct else 'buffered'}): {passes} pass(es) of "
                f"{format_size(bs)} sequential writes, queue depth {QD}",
                markup=False,
            )
            view = ProgressView(console, passes)
            for index in range(1, passes + 1):
                p = Pass(index)
                done.passes.append(p)
                view.start(info, p)
                try:
                    status = run_pass(info, compiled, p, view)
                finally:
                    view.stop()
                if status:
                    done.interrupted = status
                    console.print(
                        f"interrupted in pass {index}: {format_size(p.bytes)} of "
                        f"{format_size(info.data_length)} written; the target's preconditioning "
                        "record is left as it was",
                        markup=False,
                    )
                    return out, status
                console.print(
                    f"pass {index} of {passes}: {format_size(p.bytes)} in {p.seconds:.1f} s, "
                    f"{p.mbps:,.0f} MB/s",
                    markup=False,
                )
            targets.write_precondition_record(info, done.record(bs=bs, passes_asked=passes))
            where = "its header" if info.kind == "file" else str(targets.state_dir())
            shown = targets.describe_precondition(info.preconditioning)
            console.print(f"recorded in {where}: {shown}", markup=False)
    return out, 0


def main_console() -> Console:
    """Progress on stderr (stdout stays free for what scripts read)."""
    return make_console(stderr=True)
