"""Deleting runs: `tilemark runs rm` and `tilemark runs prune`.

Only a tilemark run directory is ever deleted: a directory directly under the results
directory, named like a run id, holding run.json and nothing but files tilemark writes there.
A run whose process is still running is never deleted. Its catalog row goes with it.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tilemark.errors import UsageError
from tilemark.interrupts import SignalStopper
from tilemark.run.pertarget import TARGETS_FILE, TARGETS_LOG
from tilemark.store import catalog
from tilemark.store.array import ARRAY_FILE
from tilemark.store.layout import (
    INTERVAL_LOG,
    INTERVAL_PARTS_DIR,
    INTERVALS_FILE,
    describe_os_error,
)
from tilemark.store.rundir import RESERVE_FILE
from tilemark.store.rundoc import RUN_JSON, RunState, StoreError, inspect_run
from tilemark.telemetry.sampler import TELEMETRY_FILES

# What tilemark writes into a run directory (report.html: `tilemark report`'s default).
RUN_FILES = {
    RUN_JSON,
    INTERVALS_FILE,
    INTERVAL_LOG,
    RESERVE_FILE,
    "report.html",
    ARRAY_FILE,  # tilemark attach
    *TELEMETRY_FILES,
    TARGETS_FILE,
    TARGETS_LOG,
}
TEMPORARY = re.compile(r"^\..+\.tmp$")
PART = re.compile(r"^part-\d+\.parquet$")
# verify.journal, verify.1.journal, ...: a verified run's journals (targets/data.py).
JOURNAL = re.compile(r"^verify(\.\d+)?\.journal$")
# A cluster run keeps each host's part in hosts/NAME/ (cluster/hosts.py): the same files.
HOSTS_DIR = "hosts"
AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
MAX_AGE_DAYS = 36_500
# A run directory being deleted is first renamed to a dot name, which listings skip: a run
# is either listed whole or gone, never half deleted.
DELETING_PREFIX = ".deleting-"


@dataclass
class Candidate:
    """A run directory that may be deleted, or `refusal` saying why not."""

    state: RunState
    size: int
    refusal: str | None = None

    @property
    def run_id(self) -> str:
        return self.state.run_dir.name


def parse_age(text: str, option: str = "--older-than") -> timedelta:
    """'30d', '12h', '90m', '2w', '45s' as a timedelta."""
    m = AGE.match(text or "")
    if not m:
        raise UsageError(
            f"{option} must be a number with a unit s, m, h, d or w (e.g. 30d, 12h), not {text!r}."
        )
    seconds = float(m.group(1)) * AGE_UNITS[m.group(2)]
    if seconds > MAX_AGE_DAYS * 86400:
        raise UsageError(
            f"{option} must be at most {MAX_AGE_DAYS}d (100 years; no run is older), "
            f"got {text.strip()}."
        )
    return timedelta(seconds=seconds)


def _size(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def _ours(name: str) -> bool:
    return name in RUN_FILES or bool(TEMPORARY.match(name) or JOURNAL.match(name))


def _foreign_entries(run_dir: Path, *, hosts: bool = True) -> list[str]:
    """Entries of a run directory (or of a host's part, `hosts=False`) that tilemark does not
    write there."""
    out = []
    for entry in sorted(run_dir.iterdir()):
        name = entry.name
        if entry.is_symlink():
            out.append(name)
        elif entry.is_file() and _ours(name):
            continue
        elif entry.is_dir() and name == INTERVAL_PARTS_DIR:
            out.extend(
                f"{name}/{p.name}"
                for p in sorted(entry.iterdir())
                if p.is_symlink() or not (PART.match(p.name) or TEMPORARY.match(p.name))
            )
        elif entry.is_dir() and name == HOSTS_DIR and hosts:
            for host in sorted(entry.iterdir()):
                if host.is_symlink() or not host.is_dir():
                    out.append(f"{name}/{host.name}")
                else:
                    out += [f"{name}/{host.name}/{f}" for f in _foreign_entries(host, hosts=False)]
        else:
            out.append(name)
    return out


def examine(run_dir: Path) -> Candidate:
    """Whether a directory may be deleted as a tilemark run, and its size."""
    state = inspect_run(run_dir)
    refusal = None
    if run_dir.is_symlink():
        # Deleting through it would delete what it points to, wherever that is.
        target = os.readlink(run_dir)
        return Candidate(
            state,
            0,
            f"run {run_dir.name} is a symbolic link (to {target}); tilemark deletes only run "
            "directories it made: remove the link, or prune where it points",
        )
    others = _foreign_entries(run_dir)
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        refusal = (
            f"run {run_dir.name} holds files tilemark did not write ({shown}); move them out first"
        )
    elif state.status == "running":
        pid = ((state.doc or {}).get("process") or {}).get("pid")
        refusal = f"run {run_dir.name} is still running" + (f" (process {pid})" if pid else "")
    return Candidate(state, _size(run_dir), refusal)


def find_run(results_root: Path, name: str) -> Path:
    """The run directory of an exact run id (or a run directory) under results_root."""
    root = Path(results_root)
    given = Path(name)
    path = given if given.is_absolute() or given.parent != Path(".") else root / name
    if path.is_symlink() or not (path / RUN_JSON).is_file():
        raise UsageError(
            f"no run {name!r} under {root}: give the exact run id `tilemark runs` shows."
        )
    if path.resolve().parent != root.resolve():
        raise UsageError(f"{name} is not a run directory directly under --results {root}.")
    if not catalog.RUN_ID.match(path.name):
        raise UsageError(f"{name} is not named like a tilemark run (yyyymmdd-hhmmss-xxxx).")
    return path


def older_than(results_root: Path, age: timedelta, now: datetime | None = None) -> list[Path]:
    """Run directories started more than `age` ago, oldest first."""
    now = now or datetime.now(UTC)
    cutoff = (now - age).astimezone(UTC).replace(tzinfo=None)
    out = []
    for run_dir in catalog.run_dirs(Path(results_root)):
        if not catalog.RUN_ID.match(run_dir.name):
            continue
        started = catalog.started_at(run_dir)
        if started is not None and started < cutoff:
            out.append((started, run_dir))
    return [d for _, d in sorted(out)]


@dataclass
class Deletion:
    """What `delete` did: the runs deleted (all, unless a signal stopped it between two), a
    note when the catalog could not be updated, and 128 + the signal that stopped it."""

    deleted: list[Candidate]
    note: str | None
    exit_status: int | None = None


def delete(results_root: Path, candidates: list[Candidate]) -> Deletion:
    """Delete the run directories (renamed aside first), then their catalog rows. A signal
    never cuts a run in half: the run being deleted is finished and the next is not begun."""
    root = Path(results_root)
    deleted: list[Candidate] = []
    with SignalStopper() as stopper:
        try:
            for c in candidates:
                if stopper.signum is not None:
                    break
                run_dir = c.state.run_dir
                aside = root / f"{DELETING_PREFIX}{run_dir.name}-{secrets.token_hex(2)}"
                try:
                    os.rename(run_dir, aside)
                except OSError as exc:
                    raise StoreError(
                        f"run {run_dir.name} cannot be deleted: {describe_os_error(exc)}"
                    ) from exc
                deleted.append(c)
                try:
                    shutil.rmtree(aside)
                except OSError as exc:
                    raise StoreError(
                        f"run {run_dir.name} was only partly deleted: {describe_os_error(exc)}; "
                        f"what remains is in {aside}"
                    ) from exc
        finally:
            try:
                catalog.forget(root, [c.state.run_dir for c in deleted])
                note = None
            except catalog.CatalogError as exc:
                note = f"the catalog keeps their rows until the next `tilemark runs` ({exc})"
        return Deletion(deleted, note, stopper.exit_status)
