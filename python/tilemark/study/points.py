"""Studies of one workload's parameters: a sweep, and Orion's matrix.

Each point of such a study is one stored run of a workload compiled for that point (the same
target, timing and backend for every point); its verdict is None (a measurement, nothing to
confirm). `PointStudy` runs the points in order and its answer is the table of points;
`SweepStudy` (IO size x queue depth x read % x region, a Cartesian product) and `MatrixStudy`
(small random IOs at outstanding-IO levels x large sequential streams) say what a point is and
how the answer reads. `WorkloadStepRunner` runs a step's workload; curve.py uses it too.

The lists a user gives are parsed here (`parse_list`): `8k,64k,1m`, and `1,2,4,...,256`, where
`...` continues the doubling (or the even step) of the two values before it up to the value
after it.
"""

from __future__ import annotations

import itertools
import re
from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from tilemark.analysis.qos import SnapshotCompactor
from tilemark.errors import UsageError
from tilemark.hist import Histogram, latency_hist
from tilemark.options import MAX_QD, parse_bs, parse_int
from tilemark.run.outcome import RunOutcome
from tilemark.run.runner import run_plan
from tilemark.run.where import Targets, compile_on
from tilemark.study.base import NEW, Attempt, StepBook, StepRecord, StepSpec, Study
from tilemark.telemetry import sampler as telemetry
from tilemark.units import format_size, parse_percent, parse_size
from tilemark.workload import plan

MAX_POINTS = 500  # a larger sweep needs --yes
MAX_STREAMS = 64  # large streams of a matrix row
NS_PER_MS = 1e6

# -----------------------------------------------------------------------------------------------
# lists


def _expand(values: list[float | str], flag: str, example: str) -> list[float]:
    """Numbers with `...` items continued up to the value after them: three or more values
    before with a constant ratio (1,2,4,...,64) keep multiplying; otherwise the last two values'
    difference keeps adding (10,20,...,100)."""
    out: list[float] = []
    i = 0
    while i < len(values):
        v = values[i]
        if v != "...":
            out.append(float(v))
            i += 1
            continue
        if len(out) < 2 or i + 1 >= len(values) or values[i + 1] == "...":
            raise UsageError(
                f"{flag}: '...' continues the values before it up to the one after it, "
                f"e.g. {example}."
            )
        a, b, end = out[-2], out[-1], float(values[i + 1])
        geometric = len(out) >= 3 and out[-3] > 0 and a / out[-3] == b / a and b / a > 1
        if b <= a:
            raise UsageError(
                f"{flag}: '...' needs rising values before it, e.g. {example}; got "
                f"{a:g},{b:g},...,{end:g}."
            )
        nxt = b * (b / a) if geometric else b + (b - a)
        while nxt < end - 1e-9:
            out.append(nxt)
            nxt = nxt * (b / a) if geometric else nxt + (b - a)
        i += 1  # the end value is appended as a plain item next
    return out


def parse_list(
    text: object,
    flag: str,
    item: Callable[[str, str], Any],
    what: str,
    example: str,
    *,
    ellipsis: bool = False,
) -> list[Any]:
    """A comma-separated list of values parsed by `item(text, label)`; one sentence naming
    `flag` when it is empty or a value is not `what`. Duplicates are dropped, order kept."""
    raw = str(text if text is not None else "").strip()
    parts = [p.strip() for p in raw.split(",")] if raw else []
    if not parts or any(not p for p in parts):
        raise UsageError(
            f"{flag} must be a comma-separated list of {what} such as {example}, got {raw!r}."
        )
    values: list[Any] = []
    if ellipsis and "..." in parts:
        numbers: list[float | str] = []
        for p in parts:
            numbers.append(p if p == "..." else _item(item, p, flag, what, example))
        parts_out: list[Any] = [
            item(str(int(v)) if v.is_integer() else f"{v:g}", flag)
            for v in _expand(numbers, flag, example)
        ]
    else:
        parts_out = [_item(item, p, flag, what, example) for p in parts]
    for v in parts_out:
        if v not in values:
            values.append(v)
    return values


def _item(item: Callable[[str, str], Any], text: str, flag: str, what: str, example: str) -> Any:
    try:
        return item(text, flag)
    except UsageError:
        raise UsageError(
            f"{flag} must be a comma-separated list of {what} such as {example}; {text!r} is not "
            "one."
        ) from None


def size_item(text: str, label: str) -> int:
    """One IO size (no weighted mix)."""
    sizes = parse_bs(text, label)
    if len(sizes) != 1:
        raise UsageError(f"{label} must be one size, got {text!r}.")
    return sizes[0][0]


def qd_item(text: str, label: str) -> int:
    return parse_int(text, label, 1, MAX_QD)


def count_item(high: int) -> Callable[[str, str], int]:
    return lambda text, label: parse_int(text, label, 0, high)


def percent_item(text: str, label: str) -> float:
    return parse_percent(text, label)


def region_item(text: str, label: str) -> tuple[str, float]:
    """'1g' -> ('bytes', 1 GiB); '50%' -> ('pct', 50)."""
    if text.strip().endswith("%"):
        pct = parse_percent(text, label)
        if pct <= 0:
            raise UsageError(f"{label} percentages must be above 0, got {text!r}.")
        return ("pct", pct)
    size = parse_size(text, label)
    if size <= 0:
        raise UsageError(f"{label} sizes must be above 0, got {text!r}.")
    return ("bytes", float(size))


def region_text(region: tuple[str, float]) -> str:
    kind, value = region
    return f"{value:g}%" if kind == "pct" else format_size(int(value))


def region_bytes(region: tuple[str, float], data_length: int, align: int = 1 << 20) -> int:
    """The region's length on a data area: a percentage is rounded down to `align` (1 MiB)."""
    kind, value = region
    if kind == "pct":
        length = int(data_length * value / 100.0)
        return max(align, length // align * align) if length >= align else length
    return int(value)


# -----------------------------------------------------------------------------------------------
# running a step's workload


class _Collector:
    """A run monitor that keeps what a verdict needs (merged snapshots), never stopping."""

    def __init__(self) -> None:
        self.compactor = SnapshotCompactor(window_s=1e12)

    def add(self, snapshots: list[dict[str, Any]]) -> None:
        self.compactor.extend(snapshots)

    def should_stop(self) -> str | None:
        return None

    def messages(self) -> list[str]:
        return []


def group_stats(outcome: RunOutcome, indices: list[int]) -> dict[str, Any]:
    """Rates and latency (response time: queueing included in open loop) of some streams."""
    wanted = set(indices)
    by_stream = {s["stream"]: s for s in outcome.summary.get("streams", [])}
    iops = sum((by_stream.get(i) or {}).get("total", {}).get("iops", 0.0) for i in wanted)
    mbps = sum((by_stream.get(i) or {}).get("total", {}).get("mbps", 0.0) for i in wanted)
    h = Histogram()
    for s in (outcome.result or {}).get("streams", []):
        if s["stream"] in wanted:
            for op in ("read", "write"):
                h.merge(latency_hist(s.get(op)))

    def ms(p: float) -> float | None:
        v = h.percentile(p)
        return None if v is None else v / NS_PER_MS

    return {
        "iops": iops,
        "mbps": mbps,
        "mean_ms": None if h.mean() is None else h.mean() / NS_PER_MS,
        "p50_ms": ms(50.0),
        "p99_ms": ms(99.0),
        "p999_ms": ms(99.9),
        "ios": h.n,
    }


# Attempt -> (verdict, extra detail) for judged steps (curve --slo); None: a measurement.
Judge = Callable[[StepSpec, RunOutcome, SnapshotCompactor], tuple[str | None, dict[str, Any]]]


class WorkloadStepRunner:
    """Runs a step: the workload `workload_of(spec)` on the inspected, prepared targets. The
    step's results are `group_stats` of each of `groups_of(spec)` (name -> stream indices)."""

    def __init__(
        self,
        workload_of: Callable[[StepSpec], plan.Workload],
        groups_of: Callable[[StepSpec], dict[str, list[int]]],
        infos: Targets,
        *,
        results: Path,
        argv: list[str],
        console: Console,
        kind: str,
        judge: Judge | None = None,
        label: str | None = None,
    ):
        self.workload_of = workload_of
        self.groups_of = groups_of
        self.infos = infos
        self.results = results
        self.argv = argv
        self.console = console
        self.kind = kind
        self.judge = judge
        self.label = label  # the study's --label; each run is labelled with it and its point

    def run(self, spec: StepSpec, reason: str) -> Attempt:
        workload = self.workload_of(spec)
        compiled = compile_on(workload, self.infos)
        collector = _Collector()
        outcome = run_plan(
            workload,
            self.infos,
            compiled,
            results=self.results,
            argv=self.argv,
            console=self.console,
            kind=self.kind,
            monitor=collector,
            note=spec.label,
            label=f"{self.label}, {spec.label}" if self.label else None,
        )
        detail: dict[str, Any] = {
            "groups": {g: group_stats(outcome, idx) for g, idx in self.groups_of(spec).items()},
            "total": outcome.summary.get("total"),
            "device": telemetry.back_end(outcome.summary),
            "tool_bound": outcome.summary.get("tool_bound"),
            "measured_s": outcome.summary.get("duration_s"),
            "error": outcome.error,
            "status": outcome.status,
        }
        verdict = None
        if self.judge is not None and outcome.complete:
            verdict, extra = self.judge(spec, outcome, collector.compactor)
            detail.update(extra)
        return Attempt(
            run_id=outcome.run_id,
            run_dir=str(outcome.run_dir),
            verdict=verdict,
            complete=outcome.complete,
            interrupted=outcome.exit_status,
            reason=reason,
            detail=detail,
        )


def workload_from(
    run_doc: dict[str, Any], streams: list[dict[str, Any]], flag_keys: set[str]
) -> plan.Workload:
    """A validated workload of run-wide keys and stream tables."""
    return plan.parse_workload(
        {**run_doc, "stream": streams}, source="flags", flag_keys=frozenset(flag_keys)
    )


# -----------------------------------------------------------------------------------------------
# the studies


class PointStudy(Study):
    """Points run once each, in order; the answer is the table of points."""

    answer_key = "points_measured"

    def __init__(self, specs: list[StepSpec], definition: dict[str, Any]):
        self.specs = specs
        self._definition = definition

    def definition(self) -> dict[str, Any]:
        return {**self._definition, "kind": self.kind}

    def next_step(self, book: StepBook) -> tuple[StepSpec, str] | None:
        for spec in self.specs:
            if spec.key not in book:
                return spec, NEW
        return None

    @abstractmethod
    def point(self, step: StepRecord) -> dict[str, Any]:
        """A step's row of the points table (each study kind has its columns)."""

    def answer(self, book: StepBook) -> dict[str, Any]:
        steps = book.by_key()
        return {
            "points_measured": sum(1 for s in steps if s.attempts and s.attempts[-1].complete),
            "points": [self.point(s) for s in steps],
        }

    def step_json(self, step: StepRecord) -> dict[str, Any]:
        out = super().step_json(step)
        last = step.deciding()
        detail = last.detail if last else {}
        return {
            **out,
            "point": dict(step.spec.params.get("point", {})),
            "groups": detail.get("groups"),
            "total": detail.get("total"),
            "device": detail.get("device"),
            "tool_bound": detail.get("tool_bound"),
            "measured_s": detail.get("measured_s"),
            "error": detail.get("error"),
        }


def _stats(step: StepRecord, group: str) -> dict[str, Any]:
    last = step.deciding()
    return ((last.detail if last else {}).get("groups") or {}).get(group) or {}


def _run_id(step: StepRecord) -> str | None:
    deciding = step.deciding()
    return deciding.run_id if deciding else None


def device_fields(step: StepRecord) -> dict[str, Any]:
    """What the devices serving the target did at a point (telemetry.back_end: null without
    device telemetry), and whether the run measured the host rather than the storage."""
    deciding = step.deciding()
    detail = deciding.detail if deciding else {}
    device = detail.get("device") or {}
    return {
        "device_iops": device.get("device_iops"),
        "device_util": device.get("device_util"),
        "device_mbps": device.get("device_mbps"),
        "tool_bound": bool((detail.get("tool_bound") or {}).get("tool_bound")),
    }


@dataclass(frozen=True)
class SweepAxes:
    bs: list[int]
    qd: list[int]
    read: list[float]
    region: list[tuple[str, float]]

    def points(self) -> list[dict[str, Any]]:
        return [
            {"bs": b, "qd": q, "read": r, "region": region_text(g), "region_spec": list(g)}
            for b, q, r, g in itertools.product(self.bs, self.qd, self.read, self.region)
        ]

    def varied(self) -> list[str]:
        return [
            name
            for name, values in (
                ("bs", self.bs),
                ("qd", self.qd),
                ("read", self.read),
                ("region", self.region),
            )
            if len(values) > 1
        ]


def point_label(p: dict[str, Any]) -> str:
    return f"{format_size(p['bs'])} QD{p['qd']} read {p['read']:g}% region {p['region']}"


class SweepStudy(PointStudy):
    """One stream's parameters swept over lists (Cartesian product)."""

    kind = "sweep"

    def __init__(self, axes: SweepAxes, definition: dict[str, Any]):
        specs = [
            StepSpec(key=i + 1, label=point_label(p), params={"point": p})
            for i, p in enumerate(axes.points())
        ]
        super().__init__(
            specs,
            {
                **definition,
                "axes": {
                    "bs": axes.bs,
                    "qd": axes.qd,
                    "read": axes.read,
                    "region": [region_text(g) for g in axes.region],
                },
                "varied": axes.varied(),
            },
        )

    def point(self, step: StepRecord) -> dict[str, Any]:
        p = step.spec.params["point"]
        s = _stats(step, "stream")
        return {
            "bs": p["bs"],
            "qd": p["qd"],
            "read": p["read"],
            "region": p["region"],
            "iops": s.get("iops"),
            "mbps": s.get("mbps"),
            "p50_ms": s.get("p50_ms"),
            "p99_ms": s.get("p99_ms"),
            **device_fields(step),
            "run_id": _run_id(step),
        }


def sweep_stream(p: dict[str, Any], pattern: str | None, length: int, extra: dict[str, Any]):
    """The stream table of a sweep point."""
    read = p["read"]
    table: dict[str, Any] = {"name": "stream", "bs": p["bs"], "qd": p["qd"], **extra}
    if pattern == "sequential":
        table["rw"] = "read" if read == 100 else "write" if read == 0 else "rw"
        if table["rw"] == "rw":
            table["read"] = read
    else:
        table["rw"] = "randread" if read == 100 else "randwrite" if read == 0 else "randrw"
        if table["rw"] == "randrw":
            table["read"] = read
        if pattern is not None:
            table["pattern"] = pattern
    table["offset"] = 0
    table["length"] = length
    return table


class MatrixStudy(PointStudy):
    """Orion's matrix: small random IOs at outstanding-IO levels x large sequential streams.
    The key orders the cells row by row: large streams, then small levels."""

    kind = "matrix"
    answer_key = "cells_measured"

    def __init__(self, small: list[int], large: list[int], definition: dict[str, Any]):
        self.small = small
        self.large = large
        specs = []
        for li, n_large in enumerate(large):
            for si, qd in enumerate(small):
                if qd == 0 and n_large == 0:
                    continue  # no IO at all
                specs.append(
                    StepSpec(
                        key=li * 10_000 + si + 1,
                        label=f"small QD{qd} x {n_large} large stream(s)",
                        params={"point": {"small": qd, "large": n_large}},
                    )
                )
        super().__init__(specs, {**definition, "small_levels": small, "large_levels": large})

    def point(self, step: StepRecord) -> dict[str, Any]:
        p = step.spec.params["point"]
        small, large = _stats(step, "small"), _stats(step, "large")
        return {
            "small": p["small"],
            "large": p["large"],
            "small_iops": small.get("iops") if p["small"] else None,
            "small_mbps": small.get("mbps") if p["small"] else None,
            "small_latency_ms": small.get("mean_ms") if p["small"] else None,
            "small_p99_ms": small.get("p99_ms") if p["small"] else None,
            "large_mbps": large.get("mbps") if p["large"] else None,
            "large_iops": large.get("iops") if p["large"] else None,
            **device_fields(step),
            "run_id": _run_id(step),
        }

    def answer(self, book: StepBook) -> dict[str, Any]:
        out = super().answer(book)
        cells = {(p["large"], p["small"]): p for p in out["points"]}

        def grid(field: str) -> list[list[float | None]]:
            return [[(cells.get((n, q)) or {}).get(field) for q in self.small] for n in self.large]

        return {
            "cells_measured": out["points_measured"],
            "small_levels": self.small,
            "large_levels": self.large,
            "small_iops": grid("small_iops"),
            "large_mbps": grid("large_mbps"),
            "small_latency_ms": grid("small_latency_ms"),
            "points": out["points"],
        }


def matrix_streams(
    small_qd: int,
    large: int,
    *,
    small_bs: int,
    small_read: float,
    large_bs: int,
    large_read: float,
    large_qd: int,
    areas: list[tuple[str | None, int]],
    extra: dict[str, Any],
) -> list[dict[str, Any]]:
    """The streams of one matrix cell: 'small' random IOs over the whole data area of every
    target, and 'large0'.. sequential streams each on its own slice (so they do not read each
    other's data from a cache). `areas` are the targets' (name, data length); over several
    targets, as Orion over its LUNs, the small IOs spread over all of them and the large
    streams go to the targets in round robin (large stream i on target i mod T)."""
    streams = []
    if small_qd:
        rw = "randread" if small_read == 100 else "randwrite" if small_read == 0 else "randrw"
        small = {"name": "small", "rw": rw, "bs": small_bs, "qd": small_qd, **extra}
        if rw == "randrw":
            small["read"] = small_read
        streams.append(small)
    if large:
        unit = 1 << 20
        rw = "read" if large_read == 100 else "write" if large_read == 0 else "rw"
        for i in range(large):
            name, data_length = areas[i % len(areas)]
            here = len(range(i % len(areas), large, len(areas)))  # large streams on the target
            slice_len = data_length // here // unit * unit
            if slice_len < large_bs:
                raise UsageError(
                    f"--large-streams {large}: each large stream gets 1/{here} of a target's "
                    f"data area ({format_size(data_length)}), less than one "
                    f"{format_size(large_bs)} IO; raise --size or use fewer streams."
                )
            s = {
                "name": f"large{i}",
                "rw": rw,
                "bs": large_bs,
                "qd": large_qd,
                "offset": (i // len(areas)) * slice_len,
                "length": slice_len,
                **extra,
            }
            if name is not None:
                s["target"] = name
            if rw == "rw":
                s["read"] = large_read
            streams.append(s)
    return streams


def matrix_groups(streams: list[dict[str, Any]]) -> dict[str, list[int]]:
    return {
        "small": [i for i, s in enumerate(streams) if s["name"] == "small"],
        "large": [i for i, s in enumerate(streams) if re.fullmatch(r"large\d+", s["name"])],
    }
