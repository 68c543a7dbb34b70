"""Data verification from the front end (docs/verification.md): what a verified run found,
and `tilemark verify RUN_OR_TARGET`, the timed pass that reads a whole data area back.

A run with --verify leaves its generation table in `verify.journal` in the run directory. A
pass over a run checks every block that run wrote against the journal (the exact generation
of every acknowledged write; after a restart of the machine, only O_DSYNC writes are held to
it) and every other block against what the target held before; a pass over a target checks
that every block is whole tilemark data of that target and offset.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilemark import engine, targets
from tilemark.errors import UsageError
from tilemark.interrupts import SignalStopper, signal_name
from tilemark.store import process
from tilemark.store.rundoc import (
    RUN_JSON,
    RunNotFoundError,
    read_run_json,
    resolve_run_dir,
    utc_now_iso,
    write_json_atomic,
)
from tilemark.targets import data as targetdata
from tilemark.units import format_size

LISTED_IN_SUMMARY = 20
JOURNAL_MAGIC = b"TILEMARK-JOURNAL\n"


def count_text(by_class: dict[str, int]) -> str:
    """'corrupt 3, torn 1' (most frequent first), or '0'."""
    items = sorted(by_class.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{name} {count:,}" for name, count in items if count) or "0"


def finding_text(f: dict[str, Any]) -> str:
    """One finding in one line."""
    where = f"offset {f['offset']:,}"
    if f.get("stream") is not None:
        where += f", read by stream {f['stream']}"
    return f"{f['class']} at {where}: {f['detail']}"


def run_summary(result: dict[str, Any] | None, plan: dict[str, Any]) -> dict[str, Any] | None:
    """summary.verification of a run: blocks judged, findings by class, the first findings
    (stream names instead of indices); None without --verify."""
    v = (result or {}).get("verification")
    if v is None:
        return None
    names = [s["name"] for s in plan.get("streams") or []]
    listed = []
    for f in v.get("findings", [])[:LISTED_IN_SUMMARY]:
        stream = f.get("stream")
        named = names[stream] if isinstance(stream, int) and stream < len(names) else stream
        listed.append({**f, "stream": named})
    journals = [
        Path(t["verify"]["journal"]).name
        for t in plan.get("targets") or []
        if (t.get("verify") or {}).get("journal")
    ]
    return {
        "checked": v["checked"],
        "skipped": v["skipped"],
        "not_tilemark": v["not_tilemark"],
        "findings": v["total"],
        "by_class": v["by_class"],
        "listed": listed,
        "journal": journals[0] if journals else None,
        "journals": journals,
    }


def verdict(summary: dict[str, Any]) -> str | None:
    """Why the run failed on its data, or None: one finding fails the run."""
    v = summary.get("verification") or {}
    if not v.get("findings"):
        return None
    first = f"; first: {finding_text(v['listed'][0])}" if v.get("listed") else ""
    return f"{v['findings']:,} data finding(s) ({count_text(v['by_class'])}){first}"


def line(v: dict[str, Any]) -> str:
    """The verification line of a run's output."""
    text = (
        f"verification: {v['checked']:,} blocks read back and checked, "
        f"{v['skipped']:,} not judged (a write in flight), {v['findings']:,} findings"
    )
    if v["findings"]:
        text += f" ({count_text(v['by_class'])})"
    return text


# ---------------------------------------------------------------------------------------------
# The pass


@dataclass
class PassPlan:
    """What a pass reads and judges, and where its result goes."""

    what: str  # "run RUN_ID" or "target PATH"
    path: str
    spec: dict[str, Any]
    info: targets.TargetInfo
    run_dir: Path | None = None
    notes: list[str] | None = None
    missing: int = 0  # bytes of the data area past the end of a file cut short


def _cut_short(spec: dict[str, Any], info: targets.TargetInfo) -> int:
    """Limit a pass over a file to what the file still holds; the bytes of its data area that
    are gone (a file truncated outside tilemark): one finding, `missing`."""
    if info.kind != "file":
        return 0
    size = Path(info.path).stat().st_size
    end = spec["data_offset"] + spec["data_length"]
    if size >= end:
        return 0
    block = spec["block_size"]
    kept = max(0, size - spec["data_offset"]) // block * block
    missing = spec["data_length"] - kept
    spec["data_length"] = kept
    return missing


def missing_finding(p: PassPlan) -> dict[str, Any]:
    """The finding of a data area cut short: where it ends and how much is gone."""
    start = p.spec["data_offset"] + p.spec["data_length"]
    return {
        "class": "missing",
        "offset": start - p.spec["data_offset"],
        "stream": None,
        "detail": (
            f"the data area ends here, {format_size(p.missing)} "
            f"({p.missing // p.spec['block_size']:,} blocks) short of what its header says was "
            "written: the file was cut short outside tilemark"
        ),
    }


JOURNAL_FIELDS = {
    "target_id": int,
    "data_length": int,
    "block_size": int,
    "epoch": int,
    "prior": str,
}


def _journal_header(path: Path) -> dict[str, Any]:
    """The journal's header, checked for the fields a pass needs; a damaged one is a
    sentence (its run cannot be verified against it)."""
    with open(path, "rb") as f:
        raw = f.read(4096)
    if not raw.startswith(JOURNAL_MAGIC):
        raise UsageError(f"{path} is not a tilemark verification journal.")
    damaged = (
        f"the verification journal {path} is damaged (its header is cut short or is not "
        "tilemark's), so this run cannot be verified against it; verify its target instead "
        "(tilemark verify PATH)."
    )
    try:
        header = json.loads(raw[len(JOURNAL_MAGIC) :].split(b"\0", 1)[0])
    except (ValueError, RecursionError):
        raise UsageError(damaged) from None
    if not isinstance(header, dict) or any(
        not isinstance(header.get(k), t) or isinstance(header.get(k), bool)
        for k, t in JOURNAL_FIELDS.items()
    ):
        raise UsageError(damaged)
    return header


def _inspect(path: str) -> targets.TargetInfo:
    return targets.inspect_target(path, size=None, writes=False, direct=True)


def plans_for_run(run_dir: Path, threads: int) -> list[PassPlan]:
    """The passes over the data areas a verified run wrote, one per target it wrote, each
    judged by that target's journal. A cluster run's journals are under hosts/NAME/, with
    the plan of the host whose targets they judge; that host must be this machine."""
    doc = read_run_json(run_dir)  # RunFormatError (one sentence) when it is damaged
    run_id = doc.get("run_id", run_dir.name)
    parts = [("", run_dir, (doc.get("plan") or {}).get("targets") or [])]
    if doc.get("hosts"):
        here = socket.gethostname()
        parts = []
        for host in doc["hosts"]:
            own = run_dir / host["dir"]
            if host.get("hostname") != here and any(own.glob("verify*.journal")):
                raise UsageError(
                    f"run {run_id} wrote its targets on host {host['name']}, which is not this "
                    f"machine; verify them there (tilemark verify PATH on {host['hostname']})."
                )
            host_targets = (host.get("plan") or {}).get("targets") or []
            parts.append((f" host {host['name']}", own, host_targets))
    plans = []
    for where, directory, plan_targets in parts:
        for index, plan_target in enumerate(plan_targets):
            journal = directory / targetdata.journal_name(index)
            if journal.exists():
                what = f"run {run_id}{where}" + (
                    f" target {index}" if len(plan_targets) > 1 else ""
                )
                plans.append(
                    _plan_for_journal(doc, run_id, what, plan_target, journal, threads, run_dir)
                )
    if not plans:
        raise UsageError(
            f"run {run_id} has no verification journal to check against: it ran without "
            "--verify or wrote nothing; verify its target instead (tilemark verify PATH)."
        )
    return plans


def _plan_for_journal(
    doc: dict[str, Any],
    run_id: str,
    what: str,
    plan_target: dict[str, Any],
    journal: Path,
    threads: int,
    run_dir: Path,
) -> PassPlan:
    header = _journal_header(journal)
    info = _inspect(plan_target["path"])
    record = info.data or {}
    if record.get("target_id") != header["target_id"]:
        raise UsageError(
            f"target {info.path} is not the one run {run_id} wrote: it was recreated since "
            "(its identity changed), so nothing of that run is left to verify."
        )
    notes = []
    process_record = doc.get("process") or {}
    rebooted = bool(process_record.get("boot_id")) and (
        process_record.get("boot_id") != process.current().get("boot_id")
    )
    if rebooted:
        notes.append(
            "the machine restarted since the run: writes that were not O_DSYNC may have been "
            "lost with the page cache, so only O_DSYNC writes are held to their generation"
        )
    if not header.get("closed"):
        notes.append("the run did not end cleanly: blocks with a write in flight accept any of it")
    unverified = record.get("unverified_at_epoch")
    spec = {
        "path": info.path,
        "data_offset": int(plan_target["offset"]),
        "data_length": int(header["data_length"]),
        "block_size": int(header["block_size"]),
        "target_id": int(header["target_id"]),
        "direct": info.dio_alignment > 0,
        "threads": threads,
        "epoch": int(header["epoch"]),
        "latest_epoch": int(record.get("epoch", header["epoch"])),
        "prior": header["prior"],
        "foreign_ok": unverified is not None and unverified >= int(header["epoch"]),
        "journal": str(journal),
        "rebooted": rebooted,
    }
    missing = _cut_short(spec, info)
    return PassPlan(what, info.path, spec, info, run_dir=run_dir, notes=notes, missing=missing)


def plan_for_target(path: str, threads: int) -> PassPlan:
    """The pass over a target's whole (filled) data area."""
    info = _inspect(path)
    record = info.data
    why = targetdata.nothing_to_check(info)
    if why is not None or record is None:
        raise UsageError(
            f"nothing to verify: {why or f'target {info.path} holds no tilemark data'}."
        )
    # A file cut short since it was filled: the pass reads what is left, the rest is missing.
    length = info.filled_length + info.missing_length if info.kind == "file" else info.data_length
    prior = targetdata.prior(record)
    spec = {
        "path": info.path,
        "data_offset": info.data_offset,
        "data_length": length // int(record["block_size"]) * int(record["block_size"]),
        "block_size": int(record["block_size"]),
        "target_id": int(record["target_id"]),
        "direct": info.dio_alignment > 0,
        "threads": threads,
        "epoch": int(record["epoch"]) + 1,
        "latest_epoch": int(record["epoch"]),
        "prior": "mixed" if prior == "unknown" else prior,
        "foreign_ok": record.get("unverified_at_epoch") is not None,
        "journal": None,
        "rebooted": False,
    }
    notes = []
    if record.get("fill") != "verifiable":
        notes.append(
            "part of the data area holds data without verification headers (filled by an "
            "older tilemark, or a device never filled): those blocks are counted, not judged"
        )
    if record.get("unverified_at_epoch") is not None:
        notes.append(
            "runs without --verify wrote this target: their blocks carry no headers and are "
            "counted, not judged"
        )
    missing = _cut_short(spec, info)
    return PassPlan(f"target {info.path}", info.path, spec, info, None, notes, missing)


def plan_pass(run_or_target: str, results: Path, threads: int) -> list[PassPlan]:
    """A run (directory or id under `results`: a pass per target it wrote) or a target path."""
    try:
        run_dir = resolve_run_dir(run_or_target, results)
    except RunNotFoundError:
        run_dir = None
    if run_dir is not None:
        return plans_for_run(run_dir, threads)
    if not Path(run_or_target).exists():
        raise UsageError(
            f"{run_or_target} is neither a run (directory or id under {results}) nor a target "
            "(a file or block device)."
        )
    return [plan_for_target(run_or_target, threads)]


Progress = Callable[[int, int, float], None]  # (bytes done, bytes in all, seconds)


def execute(
    p: PassPlan, progress: Progress | None = None, poll_s: float = 0.25, *, lock: bool = True
) -> dict[str, Any]:
    """Run a pass with the target locked (`lock=False`: the caller holds the lock); its result,
    stored with the run it checked."""
    argv = ["tilemark", "verify", p.what]
    started_at = utc_now_iso()
    # A signal stops the pass in order: what it read so far is judged and stored, marked
    # incomplete, with the signal that stopped it.
    with SignalStopper() as stopper:
        with targets.lock_target(p.info, argv) if lock else contextlib.nullcontext():
            handle = engine.verify_pass(p.spec)
            stopper.attach(handle)
            t0 = time.monotonic()
            while not handle.wait(poll_s):
                if progress is not None:
                    progress(*handle.progress(), time.monotonic() - t0)
            result = handle.result()
        if progress is not None:
            progress(*handle.progress(), time.monotonic() - t0)
        result["started_at"] = started_at
        result["target"] = p.path
        if p.missing:  # one finding: the area is gone from one offset on
            result["findings"] = [missing_finding(p), *result["findings"]]
            result["total"] += 1
            result["by_class"] = {**result["by_class"], "missing": 1}
        result["interrupted_by"] = (
            None if stopper.exit_status is None else signal_name(stopper.exit_status)
        )
        result["exit_status"] = stopper.exit_status
        if p.run_dir is not None:
            store(p.run_dir, result)
    return result


def store(run_dir: Path, result: dict[str, Any]) -> None:
    """Append a pass (without its long finding list) to run.json's verify_passes."""
    path = run_dir / RUN_JSON
    doc = json.loads(path.read_text())
    kept = {k: v for k, v in result.items() if k != "findings"}
    kept["listed"] = result.get("findings", [])[:LISTED_IN_SUMMARY]
    doc.setdefault("verify_passes", []).append(kept)
    write_json_atomic(path, doc)


def after_run(outcome: Any, console: Any) -> None:
    """The passes after a verified run of a repeated-run study (Jetstress checks its database
    after every test): timed, stored with the run, and their duration and findings added to
    the run's summary as the study sees it."""
    if not any(outcome.run_dir.rglob("verify*.journal")):  # a cluster's: under hosts/
        return
    results = [execute(p, lock=False) for p in plans_for_run(outcome.run_dir, threads=4)]
    seconds = sum(r["seconds"] for r in results)
    done = sum(r["bytes"] for r in results)
    by_class: dict[str, int] = {}
    for r in results:
        for name, count in r["by_class"].items():
            by_class[name] = by_class.get(name, 0) + count
    outcome.summary["verify_pass"] = {
        "seconds": seconds,
        "mbps": done / seconds / 1e6 if seconds > 0 else 0.0,
        "findings": sum(r["total"] for r in results),
        "by_class": by_class,
    }
    pass_ = outcome.summary["verify_pass"]
    console.print(
        f"verification pass: {format_size(done)} in {seconds:.1f} s "
        f"({pass_['mbps']:,.0f} MB/s), {pass_['findings']:,} findings",
        markup=False,
    )


def progress_printer(label: str) -> Progress:
    """Progress on stderr: one updating line on a terminal, a line every 10% otherwise."""
    tty = sys.stderr.isatty()
    last = [-1, -1]  # tenth of the way shown last, bytes shown last

    def show(done: int, total: int, seconds: float) -> None:
        pct = 100 * done / total if total else 100.0
        if done == last[1] or (not tty and int(pct // 10) == last[0] and done < total):
            return
        last[0], last[1] = int(pct // 10), done
        rate = done / seconds / 1e6 if seconds > 0 else 0.0
        text = (
            f"verifying {label}: {format_size(done)} of {format_size(total)} ({pct:.0f}%), "
            f"{rate:,.0f} MB/s"
        )
        sys.stderr.write(("\r" + text) if tty else text + "\n")
        if tty and done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show
