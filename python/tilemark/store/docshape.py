"""The shape readers rely on in run.json and study.json, checked once when a document is read.

Listings, reports, exports and comparisons read these documents by key all over; a document
whose fields have the wrong types (`"summary": "x"`, `"result": {"streams": "no"}`), edited by
hand or damaged, must not crash them. `problem(doc, RUN)` names the first field that is not what
readers expect, and the run (or study) is then `damaged` with that one line, while the rest of
a listing stays usable.

A field may be absent or null unless its shape says `required`; a present one must have its
type. Only the structure readers walk is described: containers and the numbers they do
arithmetic on, not every leaf.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_NAMES = {dict: "an object", list: "a list", str: "a string", bool: "true or false"}


@dataclass(frozen=True)
class Shape:
    """What a value must be: `kind` (dict, list, str, bool, int, "number", or "any"), for
    objects the shapes of their fields, for lists the shape of every item."""

    kind: Any
    fields: dict[str, Shape] = field(default_factory=dict)
    item: Shape | None = None
    required: tuple[str, ...] = ()


ANY = Shape("any")
STR = Shape(str)
INT = Shape(int)
NUM = Shape("number")
BOOL = Shape(bool)


def obj(required: tuple[str, ...] = (), **fields: Shape) -> Shape:
    """An object whose listed fields, when present and not null, have these shapes."""
    return Shape(dict, fields, required=required)


def items(item: Shape) -> Shape:
    """A list whose every item has this shape."""
    return Shape(list, item=item)


def _is(value: Any, kind: Any) -> bool:
    if kind == "any":
        return True
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _shown(kind: Any) -> str:
    if kind == "number":
        return "a number"
    if kind is int:
        return "an integer"
    return _NAMES.get(kind, str(kind))


def _found(value: Any) -> str:
    for kind in (bool, str, dict, list):
        if isinstance(value, kind):
            return _NAMES[kind]
    if isinstance(value, int | float):
        return "a number"
    return type(value).__name__


def problem(value: Any, shape: Shape, where: str = "") -> str | None:
    """'field summary.total is a string, not an object', or None when `value` fits `shape`."""
    if not _is(value, shape.kind):
        return f"field {where or '(the document)'} is {_found(value)}, not {_shown(shape.kind)}"
    if shape.kind is dict:
        for name in shape.required:
            if value.get(name) is None:
                return f"field {_join(where, name)} is missing"
        for name, sub in shape.fields.items():
            child = value.get(name)
            if child is not None:
                found = problem(child, sub, _join(where, name))
                if found is not None:
                    return found
    elif shape.kind is list and shape.item is not None:
        for i, child in enumerate(value):
            if child is None and shape.item.kind is dict:
                return f"field {where}[{i}] is null, not an object"
            if child is not None:
                found = problem(child, shape.item, f"{where}[{i}]")
                if found is not None:
                    return found
    return None


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


# -----------------------------------------------------------------------------------------------
# run.json (docs/results-schema.md)

_LATENCY = obj(**{k: NUM for k in ("mean_ms", "p50_ms", "p99_ms", "p999_ms", "max_ms")})
_RATES = {
    k: NUM
    for k in (
        "iops",
        "mbps",
        "read_iops",
        "write_iops",
        "read_mbps",
        "write_mbps",
        "ops",
        "bytes",
        "errors",
        "duration_s",
    )
}
_TOTAL = obj(**_RATES, errors_by_name=obj(), read_latency=_LATENCY, write_latency=_LATENCY)
_STREAM_SUMMARY = obj(**_RATES, name=STR, targets=items(ANY), read=obj(), write=obj(), sync=obj())
_APP = obj(app=STR, passed=BOOL, criteria=items(obj()), worst=obj(), metric_total=NUM)
_APPLICATIONS = obj(
    applications=items(_APP),
    instances=items(obj()),
    layout=obj(streams=items(obj(index=INT, app=STR))),
    passed=BOOL,
    score=NUM,
    tiles=INT,
    measurement=obj(),
)
SUMMARY = obj(
    total=_TOTAL,
    streams=items(_STREAM_SUMMARY),
    targets=items(obj()),
    applications=_APPLICATIONS,
    duration_s=NUM,
    notes=items(STR),
    verification=obj(listed=items(obj()), by_class=obj(), findings=INT, checked=INT),
    telemetry=obj(),
    tool_bound=obj(reasons=items(STR)),
    change_points=items(obj()),
    hosts=items(obj()),
    cluster=obj(),
    steady_state=obj(),
    data_reduction=obj(),
    preconditioning=obj(),
    verify_pass=obj(),
)
_OP = obj(ops=NUM, bytes=NUM, errors=obj(), service=obj(), response=obj())
RESULT = obj(
    streams=items(obj(("stream",), stream=INT, read=_OP, write=_OP, sync=_OP)),
    complete=BOOL,
    stop_reason=STR,
    hung=items(obj(stream=ANY, age_ns=NUM)),
    verification=obj(findings=items(obj()), by_class=obj()),
    started_at_ns=NUM,
    measure_start_ns=NUM,
)
PLAN = obj(
    streams=items(obj(name=STR, arrival=obj(), regions=items(obj()))),
    targets=items(obj(path=STR, offset=NUM, length=NUM, verify=obj())),
    backend=STR,
    duration_ms=NUM,
    warmup_ms=NUM,
    interval_ms=NUM,
    threads=NUM,
)
RUN = obj(
    run_id=STR,
    kind=STR,
    label=STR,
    status=STR,
    complete=BOOL,
    error=STR,
    argv=items(STR),
    started_at=STR,
    ended_at=STR,
    tilemark_version=STR,
    process=obj(),
    workload=obj(name=STR),
    plan=PLAN,
    targets=items(ANY),
    environment=obj(),
    telemetry=obj(),
    summary=SUMMARY,
    result=RESULT,
    hosts=items(obj(("dir", "name"), dir=STR, name=STR, hostname=STR, plan=PLAN)),
    files=obj(**{k: STR for k in ("intervals", "intervals_log", "targets", "devices", "host")}),
    verify_passes=items(obj()),
)

# -----------------------------------------------------------------------------------------------
# study.json (docs/studies.md)

_STUDY_STEP = obj(
    run_id=STR,
    run_dir=STR,
    label=STR,
    verdict=STR,
    passed=BOOL,
    tiles=NUM,
    key=NUM,
    value=NUM,
    repeat=INT,
    votes=obj(),
    runs=items(obj()),
    applications=items(obj(app=STR)),
    total=obj(**_RATES),
    failed=items(ANY),
)
STUDY = obj(
    study_id=STR,
    kind=STR,
    label=STR,
    complete=BOOL,
    started_at=STR,
    ended_at=STR,
    steps=items(_STUDY_STEP),
    tile=obj(name=STR, applications=items(obj(app=STR))),
    repeats=items(obj(repeat=INT)),
    repeat=INT,
    first_failure=obj(),
    settle=obj(),
    runs_used=INT,
)
