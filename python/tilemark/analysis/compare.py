"""Comparing runs (or studies) of the same workload, normalized to a baseline.

Scaling studies align on tile counts; sweeps, matrices and curves of the same definition align
point by point, normalized to the baseline's same point or, VMmark style, every value to one
baseline point (`normalize_to`).

Runs are comparable when they ran the same workload: the same streams with the same op mix,
sizes, access pattern, queue depth, arrival and rate, sync mode and compressibility. Where
they ran (device, filesystem, kernel, host, backend) may and usually does differ: that is
what a comparison is for, and it is listed, never refused.

Percentiles come from merged histograms; % change = (value / baseline - 1) * 100.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tilemark.errors import UsageError
from tilemark.hist import Histogram, latency_hist
from tilemark.store import results
from tilemark.units import format_size
from tilemark.wording import signed_pct, value_differences, workload_title

HIGHER = "higher"
LOWER = "lower"

# Plan stream fields that define a workload, and how a user calls them.
WORKLOAD_FIELDS = {
    "read_pct": "read %",
    "sizes": "block sizes",
    "pattern": "access pattern",
    "random_pct": "random %",
    "qd": "queue depth",
    "arrival.kind": "arrival",
    "arrival.dist": "arrival distribution",
    "arrival.rate_iops": "rates",
    "arrival.rate_bps": "rates",
    "burst": "burst",
    "sync": "sync mode",
}
# The data written may differ (compress, dedupe): that is what a comparison of an array's data
# reduction varies. Its measured ratios are compared as metrics, and `data_gain` says what the
# storage made of them.
DATA_RATIOS = (("zstd", "data zstd ratio"), ("dedupe", "data dedupe ratio"))


@dataclass
class Metric:
    """One compared quantity: its value in every run, normalized to the baseline's."""

    name: str
    unit: str
    better: str  # HIGHER or LOWER
    values: list[float | None]
    scope: str = "total"  # "total", an application, or "N tiles"
    normalized: list[float | None] = field(default_factory=list)
    change_pct: list[float | None] = field(default_factory=list)

    def normalize(self, baseline: int) -> None:
        base = self.values[baseline]
        self.normalized = []
        self.change_pct = []
        for v in self.values:
            if v is None or base is None or base == 0:
                self.normalized.append(None)
                self.change_pct.append(None)
            else:
                self.normalized.append(v / base)
                self.change_pct.append((v / base - 1.0) * 100.0)

    def normalize_to(self, reference: float | None, baseline: int) -> None:
        """Every value relative to one reference value (VMmark: the baseline's 1-tile score);
        the change is still from the baseline's own value of this metric."""
        base = self.values[baseline]
        self.normalized = []
        self.change_pct = []
        for v in self.values:
            if v is None or reference is None or reference == 0:
                self.normalized.append(None)
            else:
                self.normalized.append(v / reference)
            if v is None or base is None or base == 0:
                self.change_pct.append(None)
            else:
                self.change_pct.append((v / base - 1.0) * 100.0)

    def to_json(self, names: list[str]) -> dict[str, Any]:
        return {
            "metric": self.name,
            "scope": self.scope,
            "unit": self.unit,
            "better": self.better,
            "runs": [
                {"id": n, "value": v, "normalized": r, "change_pct": c}
                for n, v, r, c in zip(
                    names, self.values, self.normalized, self.change_pct, strict=True
                )
            ],
        }


@dataclass
class Comparison:
    """Aligned runs or studies, the baseline, metrics and the setting differences."""

    kind: str  # "runs", "studies" (scaling) or "points" (sweeps, matrices, curves)
    names: list[str]
    baseline: int
    sources: list[Any]
    metrics: list[Metric]
    differences: list[tuple[str, list[str]]]
    workload: str
    labels: list[str | None] = field(default_factory=list)  # --label of each run or study
    normalized_to: str | None = None  # points: the one baseline point every value is divided by
    data_gain: list[str] = field(default_factory=list)  # runs whose data reduces differently

    @property
    def legend_names(self) -> list[str]:
        """How charts name each run or study: its --label ("before tiering"), its id when it
        has none or labels repeat."""
        labels = self.labels or [None] * len(self.names)
        names = [lb or n for n, lb in zip(self.names, labels, strict=True)]
        return names if len(set(names)) == len(names) else self.shown

    @property
    def shown(self) -> list[str]:
        """Each id with its label: '20261123-101500-ab12 (before tiering)'."""
        labels = self.labels or [None] * len(self.names)
        return [f"{n} ({lb})" if lb else n for n, lb in zip(self.names, labels, strict=True)]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "workload": self.workload,
            "baseline": self.names[self.baseline],
            "normalized_to": self.normalized_to,
            "ids": self.names,
            "labels": self.labels or [None] * len(self.names),
            "metrics": [m.to_json(self.names) for m in self.metrics],
            "differences": [{"field": f, "values": v} for f, v in self.differences],
            "data_gain": self.data_gain,
        }


# ---------------------------------------------------------------------------------------------
# comparability


def _get(d: dict, dotted: str) -> Any:
    for part in dotted.split("."):
        d = (d or {}).get(part) if isinstance(d, dict) else None
    return d


def _show(key: str, value: Any) -> str:
    if value is None:
        return "none"
    if key == "sizes":
        return "+".join(format_size(s) for s, _ in value)
    if key in ("pattern", "sync") and isinstance(value, dict):
        return ":".join(str(v) for v in value.values())
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def workload_differences(a: dict, b: dict) -> list[str]:
    """How plan `b` runs a different workload from plan `a`, in user terms ([] if none)."""
    sa = {s["name"]: s for s in a.get("streams", [])}
    sb = {s["name"]: s for s in b.get("streams", [])}
    diffs: list[str] = []
    pairs = [(n, sa[n], sb[n]) for n in sa if n in sb]
    if list(sa) != list(sb):
        only_a = [n for n in sa if n not in sb]
        only_b = [n for n in sb if n not in sa]
        text = "stream names"
        if only_a or only_b:
            shown = ", ".join(only_a[:3]) or "none"
            shown_b = ", ".join(only_b[:3]) or "none"
            text += f" (only in the first: {shown}; only in the second: {shown_b})"
        diffs.append(text)
        if len(sa) == len(sb):  # renamed streams: still say how they differ, by position
            pairs = [
                (f"{x['name']}/{y['name']}", x, y)
                for x, y in zip(sa.values(), sb.values(), strict=True)
            ]
    for name, x, y in pairs:
        seen: set[str] = set()
        for key, label in WORKLOAD_FIELDS.items():
            va, vb = _get(x, key), _get(y, key)
            if va != vb and label not in seen:
                seen.add(label)
                diffs.append(f"{label} ({name}: {_show(key, va)} vs {_show(key, vb)})")
    return diffs


def _check_comparable(plans: list[tuple[str, dict]]) -> None:
    (base_id, base), *others = plans
    for other_id, plan in others:
        diffs = workload_differences(base, plan)
        if diffs:
            shown = "; ".join(diffs[:6]) + (
                f"; and {len(diffs) - 6} more" if len(diffs) > 6 else ""
            )
            raise UsageError(
                f"runs {base_id} and {other_id} ran different workloads and cannot be compared: "
                f"{shown}."
            )


def _tile_definition(doc: results.StudyDoc) -> dict[str, Any]:
    apps = (doc.tile.applications if doc.tile else None) or []
    return {a.app: {"profile": a.profile, "scale": a.scale, "qos": a.qos} for a in apps}


def _check_studies(studies: list[tuple[str, results.StudyDoc]]) -> None:
    (base_id, base), *others = studies
    tile_a = _tile_definition(base)
    for other_id, doc in others:
        tile_b = _tile_definition(doc)
        diffs = []
        if list(tile_a) != list(tile_b):
            diffs.append(f"applications ({', '.join(tile_a)} vs {', '.join(tile_b)})")
        for app in (x for x in tile_a if x in tile_b):
            for part in ("profile", "scale", "qos"):
                if tile_a[app][part] != tile_b[app][part]:
                    diffs.append(f"{app} {part}")
        if diffs:
            raise UsageError(
                f"studies {base_id} and {other_id} ran different tiles and cannot be compared: "
                f"{'; '.join(diffs[:6])}."
            )


# ---------------------------------------------------------------------------------------------
# metrics


def _merged(result: dict[str, Any] | None, op: str) -> Histogram:
    """The engine result's histograms of one op kind, every stream merged (`result` is kept
    untyped: typing 10,000 streams' histograms takes seconds, see report/data.py)."""
    out = Histogram()
    for s in (result or {}).get("streams", []):
        o = s.get(op)
        if o:
            out.merge(latency_hist(o))
    return out


def run_values(
    summary: results.Summary | None, result: dict[str, Any] | None
) -> dict[tuple[str, str], tuple[float | None, str, str]]:
    """(metric, scope) -> (value, unit, better) of one run: its typed summary and its engine
    result (histograms)."""
    summary = summary or results.Summary()
    total = summary.total or results.Total()
    out: dict[tuple[str, str], tuple[float | None, str, str]] = {}
    apps = summary.applications
    if apps is not None:
        out[("score", "total")] = (apps.score, "", HIGHER)
    out[("IOPS", "total")] = (total.iops, "IOPS", HIGHER)
    out[("MB/s", "total")] = (total.mbps, "MB/s", HIGHER)
    for op in ("read", "write"):
        h = _merged(result, op)
        if h.n:
            out[(f"{op} latency mean", "total")] = (h.mean() / 1e6, "ms", LOWER)
            out[(f"{op} latency p99", "total")] = (h.percentile(99.0) / 1e6, "ms", LOWER)
    if apps is not None:
        for a in apps.applications or []:
            out[(str(a.app), str(a.app))] = (a.metric_total, str(a.metric_unit), HIGHER)
    # File streams (a file run, a tile's file applications): per stream its loops/s (the
    # application unit) and per operation its rate and p99.
    for s in (summary.files.streams if summary.files else None) or []:
        name = str(s.name)
        if s.loops:
            unit = f"{s.unit or 'loops'}/s"
            out[(unit, name)] = (s.loop_rate, unit, HIGHER)
        for o in s.ops or []:
            if o.ops:
                out[(f"{o.op} rate", name)] = (o.rate, "ops/s", HIGHER)
                if o.p99_us is not None:
                    out[(f"{o.op} latency p99", name)] = (o.p99_us / 1e3, "ms", LOWER)
    ratios = (summary.data_reduction or {}).get("overall") or {}
    for key, name in DATA_RATIOS:
        if ratios.get(key) is not None:
            out[(name, "total")] = (ratios[key], ":1", HIGHER)
    return out


def data_gain(names: list[str], metrics: list[Metric], baseline: int) -> list[str]:
    """For each run whose written data reduces differently from the baseline's (by more than
    5%): its ratios and how its throughput and latency changed, the storage's gain from
    reducible data (seed 002: the same workload at 0% and 50% compressible data)."""
    by_name = {m.name: m for m in metrics if m.scope == "total"}
    zstd = by_name.get("data zstd ratio")
    if zstd is None or zstd.values[baseline] is None:
        return []
    out = []
    for i, name in enumerate(names):
        value = zstd.values[i]
        if i == baseline or value is None or abs(value / zstd.values[baseline] - 1) <= 0.05:
            continue
        changes = []
        for metric in ("IOPS", "MB/s", "write latency p99", "read latency p99"):
            m = by_name.get(metric)
            if m is not None and m.change_pct[i] is not None:
                changes.append(f"{metric} {signed_pct(m.change_pct[i])}")
        base = zstd.values[baseline]
        out.append(
            f"{name}: its data compresses {value:.2f}:1 (zstd) against {base:.2f}:1 for the "
            f"baseline; {', '.join(changes)}: what the storage gains from reducible data"
        )
    return out


def _metrics(per_source: list[dict], scope_suffix: str = "") -> list[Metric]:
    keys: list[tuple[str, str]] = []
    for values in per_source:
        for k in values:
            if k not in keys:
                keys.append(k)
    metrics = []
    for name, scope in keys:
        unit, better = next(
            (v[(name, scope)][1:] for v in per_source if (name, scope) in v), ("", HIGHER)
        )
        metrics.append(
            Metric(
                name=name,
                unit=unit,
                better=better,
                values=[v.get((name, scope), (None,))[0] for v in per_source],
                scope=scope + scope_suffix if scope_suffix else scope,
            )
        )
    return metrics


# ---------------------------------------------------------------------------------------------
# environment differences (shown, never refused)


def environment_fields(doc: results.RunDoc) -> dict[str, str]:
    """Where and how a run ran, flattened for a side-by-side table."""
    env = doc.environment or results.Environment()
    t = (env.targets or [None])[0] or results.EnvTarget()
    dev = t.device or results.Device()
    plan = doc.plan or results.Plan()
    rot = dev.rotational
    first_target = (doc.targets or [None])[0] or results.RunTarget()
    return {
        "host": str(env.hostname),
        "kernel": str(env.kernel),
        "os": str(env.os),
        "CPU": str(env.cpu_model),
        "target": str(t.path or first_target.path),
        "filesystem": str(t.fs_type),
        "device": " ".join(str(x) for x in (dev.vendor, dev.model) if x) or "none",
        "transport": str(dev.transport),
        "rotational": "yes" if rot else ("no" if rot is False else "unknown"),
        "IO scheduler": str(dev.scheduler),
        "backend": str(plan.backend),
        "O_DIRECT": "yes" if all(x.direct for x in plan.targets or []) else "no",
        "duration": f"{(plan.duration_ms or 0) / 1000:g} s",
        "warm-up": f"{(plan.warmup_ms or 0) / 1000:g} s",
        "tilemark": str(doc.tilemark_version),
    }


def differences(docs: list[results.RunDoc]) -> list[tuple[str, list[str]]]:
    """Environment and setting fields whose values differ between runs."""
    fields = [
        {k: ("-" if v in ("None", "") else v) for k, v in environment_fields(d).items()}
        for d in docs
    ]
    return [(k, [f[k] for f in fields]) for k in fields[0] if len({f[k] for f in fields}) > 1]


# ---------------------------------------------------------------------------------------------


def compare_runs(runs: list[Any], baseline: int) -> Comparison:
    """Runs (report.data.RunData) of the same workload, normalized to runs[baseline]."""
    order = [baseline] + [i for i in range(len(runs)) if i != baseline]
    _check_comparable([(runs[i].run_id, runs[i].plan) for i in order])
    metrics = _metrics([run_values(r.typed.summary, r.result) for r in runs])
    for m in metrics:
        m.normalize(baseline)
    base = runs[baseline]
    workload = workload_title(base.doc.get("workload"), (base.plan or {}).get("streams") or [])
    gain = data_gain([r.run_id for r in runs], metrics, baseline)
    return Comparison(
        data_gain=gain,
        kind="runs",
        names=[r.run_id for r in runs],
        baseline=baseline,
        sources=runs,
        metrics=metrics,
        differences=differences([r.typed for r in runs]),
        workload=workload,
        labels=[r.typed.label for r in runs],
    )


def compare_studies(studies: list[Any], baseline: int) -> Comparison:
    """Scaling studies of the same tile, aligned on tile counts, normalized to the baseline."""
    order = [baseline] + [i for i in range(len(studies)) if i != baseline]
    _check_studies([(studies[i].study_id, studies[i].typed) for i in order])
    metrics: list[Metric] = [
        Metric(
            "max passing tiles",
            "tiles",
            HIGHER,
            [s.typed.max_passing_tiles for s in studies],
        )
    ]
    counts = sorted({st.tiles for s in studies for st in s.steps})
    for n in counts:
        per = []
        for s in studies:
            step = s.step_at(n)
            run = None if step is None else step.run
            per.append({} if run is None else run_values(run.typed.summary, run.result))
        metrics += [m for m in _metrics(per, f" @ {n} tiles") if m.scope.startswith("total")]
    for m in metrics:
        m.normalize(baseline)
    docs = [s.first_run().typed for s in studies if s.first_run() is not None]
    return Comparison(
        kind="studies",
        names=[s.study_id for s in studies],
        baseline=baseline,
        sources=studies,
        metrics=metrics,
        differences=differences(docs) if len(docs) == len(studies) else [],
        workload=str(studies[baseline].typed.tile.name if studies[baseline].typed.tile else None),
        labels=[s.typed.label for s in studies],
    )


# ---------------------------------------------------------------------------------------------
# sweeps, matrices and curves (study/points.py, study/curve.py)

# What makes two point studies the same study, per kind (study.json fields).
POINT_DEFINITION = {
    "sweep": ("axes", "pattern", "compress"),
    "matrix": (
        "small_levels", "large_levels", "small_bs", "small_read", "large_bs", "large_read",
        "large_qd", "compress",
    ),
    "curve": ("stream", "arrival", "loads_pct", "max_qd", "slo"),
}  # fmt: skip
# Per kind: (point field, metric name, unit, better) compared at every point.
POINT_METRICS = {
    "sweep": (
        ("iops", "IOPS", "IOPS", HIGHER),
        ("mbps", "MB/s", "MB/s", HIGHER),
        ("p50_ms", "p50 latency", "ms", LOWER),
        ("p99_ms", "p99 latency", "ms", LOWER),
    ),
    "matrix": (
        ("small_iops", "small IOPS", "IOPS", HIGHER),
        ("large_mbps", "large MB/s", "MB/s", HIGHER),
        ("small_latency_ms", "small latency", "ms", LOWER),
    ),
    "curve": (
        ("iops", "IOPS", "IOPS", HIGHER),
        ("p50_ms", "p50 response", "ms", LOWER),
        ("p99_ms", "p99 response", "ms", LOWER),
        ("p999_ms", "p99.9 response", "ms", LOWER),
    ),
}


def point_key(kind: str, p: dict[str, Any]) -> str | None:
    """A point's name within its study, the same in every study of the same definition:
    sweep '4KiB/qd1/r100/100%', matrix 'L1/S4' (large streams, small outstanding IOs), curve
    '50%' (offered loads; the search steps of a curve have no counterpart and no name)."""
    if kind == "sweep":
        size = format_size(p["bs"]).replace(" ", "")
        return f"{size}/qd{p['qd']}/r{p['read']:g}/{p['region'].replace(' ', '')}"
    if kind == "matrix":
        return f"L{p['large']}/S{p['small']}"
    if p.get("phase") == "load":
        return f"{p['offered_pct']:g}%"
    return None


def _points_by_key(study: Any) -> dict[str, dict[str, Any]]:
    kind = study.typed.kind
    out = {}
    for p in study.doc.get("points") or []:  # the points table: its fields depend on the kind
        key = point_key(kind, p)
        if key is not None:
            out[key] = p
    return out


def _check_points(studies: list[tuple[str, dict]]) -> None:
    (base_id, base), *others = studies
    kind = base.get("kind")
    for other_id, doc in others:
        if doc.get("kind") != kind:
            raise UsageError(
                f"{base_id} is a {kind} and {other_id} a {doc.get('kind')}; compare studies of "
                "one kind."
            )
        diffs = [
            d
            for f in POINT_DEFINITION[kind]
            if base.get(f) != doc.get(f)
            for d in value_differences(f, base.get(f), doc.get(f))
        ]
        if diffs:
            shown = "; ".join(diffs[:6]) + (
                f"; and {len(diffs) - 6} more" if len(diffs) > 6 else ""
            )
            raise UsageError(
                f"studies {base_id} and {other_id} are {kind} studies of different definitions "
                f"and cannot be compared point by point: {shown}."
            )


def resolve_point(study: Any, point: str) -> str:
    """The key of POINT in a study: its number in the study's points table, or its key."""
    keys = list(_points_by_key(study))
    text = point.strip()
    if text.isdigit():
        points = study.doc.get("points") or []
        n = int(text)
        if 1 <= n <= len(points):
            key = point_key(study.typed.kind, points[n - 1])
            if key is not None:
                return key
    for k in keys:
        if k.lower() == text.lower().replace(" ", ""):
            return k
    shown = ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")
    raise UsageError(
        f"--normalize-to {point!r} is not a point of {study.study_id}; give its number in the "
        f"points table or its name ({shown})."
    )


def compare_points(studies: list[Any], baseline: int, normalize_to: str | None) -> Comparison:
    """Sweeps, matrices or curves of the same definition, point by point, normalized to the
    baseline's same point, or (`normalize_to`) every value to the baseline's one point."""
    order = [baseline] + [i for i in range(len(studies)) if i != baseline]
    _check_points([(studies[i].study_id, studies[i].doc) for i in order])
    kind = str(studies[baseline].typed.kind)
    per_study = [_points_by_key(s) for s in studies]
    keys: list[str] = []
    for points in [per_study[baseline], *per_study]:
        for k in points:
            if k not in keys:
                keys.append(k)
    metrics: list[Metric] = []
    if kind == "curve":
        metrics.append(Metric("max IOPS", "IOPS", HIGHER, [s.typed.max_iops for s in studies]))
        if studies[baseline].typed.slo:
            at_slo = [s.typed.slo_iops for s in studies]
            metrics.append(Metric("IOPS at the SLO", "IOPS", HIGHER, at_slo))
    for k in keys:
        for column, name, unit, better in POINT_METRICS[kind]:
            values = [(points.get(k) or {}).get(column) for points in per_study]
            if all(v is None for v in values):
                continue
            metrics.append(Metric(name, unit, better, values, scope=k))
    if normalize_to is None:
        for m in metrics:
            m.normalize(baseline)
    else:
        ref_key = resolve_point(studies[baseline], normalize_to)
        refs = {m.name: m.values[baseline] for m in metrics if m.scope == ref_key}
        for m in metrics:
            ref = refs.get(m.name, m.values[baseline] if m.scope == "total" else None)
            m.normalize_to(ref, baseline)
    docs = [s.first_run().typed for s in studies if s.first_run() is not None]
    return Comparison(
        kind="points",
        names=[s.study_id for s in studies],
        baseline=baseline,
        sources=studies,
        metrics=metrics,
        differences=differences(docs) if len(docs) == len(studies) else [],
        workload=kind,
        labels=[s.typed.label for s in studies],
        normalized_to=None
        if normalize_to is None
        else resolve_point(studies[baseline], normalize_to),
    )
