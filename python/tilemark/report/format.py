"""Text shared by every report kind: numbers, pass/fail marks, criteria, streams, provenance."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import msgspec

import tilemark
from tilemark import wording
from tilemark.report.base import Cell
from tilemark.report.data import RunData
from tilemark.store import results
from tilemark.targets.header import describe_precondition
from tilemark.telemetry.sampler import TELEMETRY_FILES
from tilemark.units import format_size


def num(value: float | None) -> str:
    """1,234 / 12.3 / 0.123 / '-'."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    a = abs(value)
    if a >= 1000 or float(value).is_integer():
        return f"{value:,.0f}"
    if a >= 10:
        return f"{value:.1f}"
    if a >= 0.1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def ms(value: float | None) -> str:
    """'1.23 ms' or '-'."""
    return "-" if value is None else f"{num(value)} ms"


def mark(passed: bool) -> Cell:
    """The QoS cell of a table row: green 'pass' or red 'FAIL'."""
    return Cell("pass", "pass") if passed else Cell("FAIL", "fail")


def criterion_value(v: results.QosVerdict) -> str:
    """What a QoS verdict measured, in the criterion's unit."""
    if v.value is None:
        return "-"
    if v.unit == "fraction":
        return f"{v.value:.1%} of target"
    if v.unit == "ms":
        return f"{v.value:.2f} ms"
    return f"{num(v.value)} {v.unit}"


def criterion_limit(v: results.QosVerdict) -> str:
    """The limit of a QoS verdict: '<= 20 ms', '>= 95%'."""
    limit: Any = v.limit  # a verdict always has its limit
    if v.unit == "fraction":
        return f">= {limit:.0%}"
    if v.unit == "ms":
        return f"<= {limit:g} ms"
    return f"{limit:g} {v.unit}"


def describe_stream(s: results.PlanStream) -> str:
    """One line per plan stream: mix, sizes, pattern, queue depth, arrival."""
    sizes = s.sizes or []
    if len(sizes) == 1:
        size_text = format_size(sizes[0][0])
    else:
        size_text = "mix " + "/".join(format_size(sz) for sz, _ in sizes)
    pattern = (s.pattern or {}).get("kind", "?")
    arrival = s.arrival or results.Arrival()
    if s.ios:  # a replayed trace
        arrival_text = f"trace replayed {s.ios.get('mode', 'timed')}"
    elif arrival.kind == "open":
        rate = (
            f"{num(arrival.rate_iops)} IOPS"
            if arrival.rate_iops
            else f"{num((arrival.rate_bps or 0) / 1e6)} MB/s"
        )
        arrival_text = f"open loop {rate} {arrival.dist or ''}".strip()
    else:
        arrival_text = "closed loop"
    sync = sync_words(s.sync or results.SyncMode())
    sync_text = "" if sync == "none" else f", {sync}"
    read_pct = s.read_pct if s.read_pct is not None else 0
    return (
        f"{s.name}: {num(read_pct)}% read, {size_text}, {pattern}, "
        f"qd {s.qd}, {arrival_text}{sync_text}"
    )


def sync_words(sync: results.SyncMode) -> str:
    """A plan stream's sync mode in words: none, dsync, fdatasync every 8 writes, group
    commit (fdatasync), ..."""
    if sync.kind != "fsync":
        return sync.kind
    name = "fdatasync" if sync.data else "fsync"
    if sync.group:
        return f"group commit ({name})"
    return name if sync.every == 1 else f"{name} every {sync.every} writes"


def workload_title(run: RunData) -> str:
    """What a run ran, for its headline (wording.workload_title)."""
    return wording.workload_title(run.doc.get("workload"), (run.plan or {}).get("streams") or [])


def _device_text(dev: results.Device | None) -> tuple[str, str]:
    if dev is None or dev == results.Device():
        return "device", "none (no block device under the target)"
    kind = {True: "rotational", False: "non-rotational"}.get(dev.rotational, "")  # type: ignore[arg-type]
    model = " ".join(x for x in (dev.vendor, dev.model) if x)
    size = format_size(dev.size_bytes) if dev.size_bytes else ""
    parts = [f"{dev.dev_path or dev.name}", model, dev.transport or "", kind, size]
    return "device", ", ".join(p for p in parts if p)


def tested_on(run: RunData) -> list[tuple[str, str]]:
    """What and where: host, kernel, device, filesystem, scheduler, tilemark version."""
    doc = run.typed
    env = doc.environment or results.Environment()
    out: list[tuple[str, str]] = []
    targets = env.targets or [results.EnvTarget(path=t.path) for t in doc.targets or []]
    for t in targets:
        fs = ", ".join(
            x
            for x in (
                t.fs_type,
                f"mounted at {t.mount_point}" if t.mount_point else None,
                f"from {t.mount_source}" if t.mount_source else None,
            )
            if x
        )
        out.append(("target", f"{t.path} ({t.kind or 'unknown kind'})"))
        out.append(("filesystem", fs or "-"))
        out.append(_device_text(t.device))
        out.append(("IO scheduler", (t.device.scheduler if t.device else None) or "-"))
    mem = env.memory_bytes
    cpu = env.cpu_model or "-"
    cpus = env.cpu_usable or env.cpu_count
    out.append(
        (
            "host",
            f"{env.hostname or '-'}: {cpu}"
            + (f", {cpus} CPUs" if cpus else "")
            + (f", {format_size(mem)} RAM" if mem else ""),
        )
    )
    out.append(("kernel", " ".join(x for x in (env.kernel, env.os) if x) or "-"))
    plan = doc.plan or results.Plan()
    io = "O_DIRECT" if all(t.direct for t in plan.targets or []) else "buffered"
    out.append(("engine", f"{plan.backend or '-'} backend, {io}"))
    out.append(
        (
            "tilemark",
            f"{doc.tilemark_version or '-'}"
            + (f" (engine {doc.engine_version})" if doc.engine_version else ""),
        )
    )
    for t in doc.targets or []:
        if t.kind == "block" or t.preconditioning is not msgspec.UNSET:
            out.append(("preconditioned", describe_precondition(t.preconditioning or None)))
    out.append(("started", str(doc.started_at or "-")))
    return out


def run_links(run: RunData) -> list[tuple[str, Path]]:
    """A run's raw files (run.json, intervals and telemetry when written), labelled by run
    id."""
    out = [(f"{run.run_id}/run.json", run.run_dir / "run.json")]
    path = run.intervals_path()
    if path.exists():
        out.append((f"{run.run_id}/{path.name}", path))
    for name in TELEMETRY_FILES:  # the devices underneath and the host (telemetry)
        if (run.run_dir / name).is_file():
            out.append((f"{run.run_id}/{name}", run.run_dir / name))
    return out


def generated_by() -> str:
    """Who made the report (the HTML header adds when)."""
    return f"tilemark {tilemark.__version__}"


def steady_cell(state: results.StepSteady | None) -> str:
    """A step's steady state in a few characters: the window's rounds, or 'no (N rounds)'."""
    if state is None:
        return "-"
    if state.steady:
        w: Any = state.window  # a steady step always has its window
        return f"rounds {w.first_round}-{w.last_round}"
    if state.rule_met:
        return "rate not reached"
    return f"no ({state.rounds} rounds)"
