"""Altair (Vega-Lite) charts built from plain data: lists of dicts from report.data.

Every axis names its unit. Data are trimmed to the fields a chart draws and rounded to four
significant digits (display only; exports keep full precision), which keeps a long run's
report to a few MB.

Longer than 600 lines because it is a catalogue of independent chart builders, each a short
function over plain data; they share the axis, unit and rounding rules at the top.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import altair as alt

from tilemark.store import results
from tilemark.wording import signed_pct

WIDTH = 640
SMALL_WIDTH = 300
HEIGHT = 240
SMALL_HEIGHT = 180
THIRD_WIDTH = 250
# More groups than this in one time-series chart: pick one with a drop-down instead.
MAX_LINES = 12
# More lines than this (groups x statistics) in a latency chart: one group at a time.
MAX_LATENCY_LINES = 12
MAX_LOG_TICKS = 9
TIME_TITLE = "time since run start (s)"
LATENCY_TITLE = "latency (ms, log scale)"
PASS_COLORS = alt.Scale(domain=["pass", "fail"], range=["#2e7d32", "#c62828"])
# Axis titles of the throughput fields every report draws.
Y_TITLES = {"iops": "IOPS", "mbps": "MB/s (10^6 B/s)", "score": "score"}
NINES_LABELS = {
    0.30103: "p50",
    1.0: "p90",
    2.0: "p99",
    3.0: "p99.9",
    4.0: "p99.99",
}


# Chart data are referenced by name and attached to specs by with_datasets(): inline values
# would go through Altair's JSON-schema validation row by row, which takes seconds for the
# tens of thousands of points of a long run; named data also let charts share one dataset.
_DATASETS: dict[str, list[dict[str, Any]]] = {}
# Time-series rows keep these fields whatever a chart draws, so that the throughput and
# latency charts of one level share a single dataset.
SERIES_FIELDS = (
    "t_s",
    "group",
    "iops",
    "mbps",
    "p50",
    "p99",
    "svc_p50",
    "svc_p99",
)


def dataset(values: list[dict[str, Any]]) -> alt.Data:
    """Named data for a chart; identical values get the same name."""
    text = json.dumps(values, sort_keys=True, separators=(",", ":"))
    name = "data-" + hashlib.sha256(text.encode()).hexdigest()[:16]
    _DATASETS[name] = values
    return alt.Data(name=name)


def _data_names(node: Any, out: set[str]) -> set[str]:
    if isinstance(node, dict):
        data = node.get("data")
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            out.add(data["name"])
        for v in node.values():
            _data_names(v, out)
    elif isinstance(node, list):
        for v in node:
            _data_names(v, out)
    return out


def with_datasets(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with the values of every dataset it names under top-level `datasets`."""
    names = _data_names(spec, set())
    spec["datasets"] = {n: _DATASETS[n] for n in sorted(names) if n in _DATASETS}
    return spec


def rounded(value: Any) -> Any:
    """Floats to four significant digits; everything else unchanged."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return float(f"{value:.4g}")
    return value


def compact(rows: Iterable[dict[str, Any]], fields: Sequence[str]) -> list[dict[str, Any]]:
    """Only `fields` of each row, floats rounded, missing values left out."""
    out = []
    for r in rows:
        row = {}
        for f in fields:
            v = r.get(f)
            if v is not None:
                row[f] = rounded(v)
        out.append(row)
    return out


def whole_axis(values: Iterable[float], title: str) -> alt.Axis:
    """An axis of whole numbers (tile counts, repetitions, queue depths) labelled only at the
    values themselves: no 1.5 printed as '2' beside the real 2."""
    present = sorted({int(v) for v in values if v is not None and float(v).is_integer()})
    if present and len(present) <= 24:
        return alt.Axis(title=title, values=present, format="d", labelAngle=0)
    return alt.Axis(title=title, tickMinStep=1, format="d", labelOverlap=True, labelAngle=0)


def log_ticks(values: Iterable[float | None]) -> list[float]:
    """Tick values of a log axis over `values`: 1, 2, 5 per decade, or decades only when that
    would be more than MAX_LOG_TICKS; spaced so that labels never collide."""
    seen = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not seen:
        return []
    lo, hi = min(seen), max(seen)
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    ticks = [m * 10.0**e for e in range(first, last + 1) for m in (1, 2, 5)]
    ticks = [t for t in ticks if lo / 2.5 <= t <= hi * 2.5]
    if len(ticks) > MAX_LOG_TICKS:
        ticks = [10.0**e for e in range(first, last + 1)]
    return [float(f"{t:.6g}") for t in ticks]


def log_axis(values: Iterable[float | None], title: str) -> alt.Axis:
    """A log axis labelled at log_ticks (with light grid lines at them only)."""
    ticks = log_ticks(values)
    if not ticks:
        return alt.Axis(title=title, labelOverlap=True)
    return alt.Axis(title=title, values=ticks, format="~g", labelOverlap=True)


# Colours of marked positions on an axis, and the word the subtitle names each by.
MARK_COLORS = {
    "green": "#2e7d32",
    "red": "#c62828",
    "brown": "#6d4c41",
    "purple": "#6a1b9a",
}


def marker_layers(marks: Sequence[dict[str, Any]], *, field: str) -> list[alt.Chart]:
    """Dashed vertical rules at `marks` ({field: x, "label": "max passing 2", "color":
    "green"}): coloured, named in the chart's subtitle (marker_subtitle) and in a tooltip,
    never written into the plot, where a label would sit on the data, an axis or another
    label."""
    if not marks:
        return []
    rows = [
        {field: rounded(m[field]), "label": m["label"], "color": m.get("color", "brown")}
        for m in marks
    ]
    # A layer per mark with its colour fixed: a colour channel would merge with the chart's own
    # (pass/fail, percentiles) in one shared scale.
    return [
        alt.Chart(dataset([r]))
        .mark_rule(strokeDash=[6, 4], strokeWidth=1.5, color=MARK_COLORS[r["color"]])
        .encode(x=f"{field}:Q", tooltip=[alt.Tooltip("label:N", title="marked")])
        for r in rows
    ]


def marker_subtitle(marks: Sequence[dict[str, Any]]) -> str:
    """'dashed: max passing 2 (green), first failure 3 (red)'."""
    if not marks:
        return ""
    return "dashed: " + ", ".join(f"{m['label']} ({m.get('color', 'brown')})" for m in marks)


def _wrapped(text: str, width: int = 48) -> list[str]:
    """A subtitle as lines of at most `width` characters (Vega does not wrap titles)."""
    import textwrap

    return textwrap.wrap(text, width=width, break_long_words=False) or [""]


def _warmup_layer(warmup_s: float) -> alt.Chart | None:
    if warmup_s <= 0:
        return None
    data = dataset([{"start": 0.0, "end": rounded(warmup_s), "label": "warm-up"}])
    band = (
        alt.Chart(data)
        .mark_rect(color="#9e9e9e", opacity=0.15)
        .encode(x=alt.X("start:Q"), x2="end:Q")
    )
    label = (
        alt.Chart(data)
        .mark_text(align="left", baseline="top", dx=3, dy=3, color="#616161", fontSize=10)
        .encode(x="start:Q", y=alt.value(0), text="label:N")
    )
    return band + label


def change_layer(changes: Sequence[dict[str, Any]]) -> alt.Chart | None:
    """Vertical rules where the run changed level (summary.change_points), labelled."""
    from tilemark.analysis.changepoints import change_text

    if not changes:
        return None
    data = dataset(
        [
            {"t_s": rounded(c["t_s"]), "change": change_text(c), "label": _change_label(c)}
            for c in changes
        ]
    )
    rule = (
        alt.Chart(data)
        .mark_rule(color="#6a1b9a", strokeDash=[4, 3], strokeWidth=1.5)
        .encode(x=alt.X("t_s:Q"), tooltip=[alt.Tooltip("change:N", title="change point")])
    )
    label = (
        alt.Chart(data)
        .mark_text(align="left", baseline="top", dx=3, dy=14, color="#6a1b9a", fontSize=10)
        .encode(x="t_s:Q", y=alt.value(0), text="label:N")
    )
    return rule + label


def _change_label(c: dict[str, Any]) -> str:
    word = "IOPS" if c["metric"] == "iops" else "p99"
    pct = c.get("change_pct")
    return f"{word} {signed_pct(pct, 0)}" if pct is not None else word


def phase_layer(phases: Sequence[dict[str, Any]]) -> alt.Chart | None:
    """Dotted rules where phased streams start and stop ({t_s, label}), labelled."""
    if not phases:
        return None
    data = dataset([{"t_s": rounded(p["t_s"]), "label": p["label"]} for p in phases])
    rule = (
        alt.Chart(data)
        .mark_rule(color="#00695c", strokeDash=[1, 3], strokeWidth=1.5)
        .encode(x=alt.X("t_s:Q"), tooltip=[alt.Tooltip("label:N", title="phase")])
    )
    label = (
        alt.Chart(data)
        .mark_text(align="left", baseline="bottom", dx=3, dy=-3, color="#00695c", fontSize=10)
        .encode(x="t_s:Q", y=alt.value(HEIGHT), text="label:N")
    )
    return rule + label


def _layers(
    chart: alt.Chart,
    warmup_s: float,
    changes: Sequence[dict[str, Any]],
    phases: Sequence[dict[str, Any]] = (),
) -> Any:
    """The chart with the warm-up band under it, change-point and phase rules over it."""
    warm = _warmup_layer(warmup_s)
    layered = (warm + chart) if warm is not None else chart
    for rules in (change_layer(changes), phase_layer(phases)):
        if rules is not None:
            layered = layered + rules
    return layered


def _group_picker(groups: list[str], label: str) -> alt.Parameter:
    return alt.param(
        name="pick_" + label.replace(" ", "_"),
        value=groups[0],
        bind=alt.binding_select(options=groups, name=f"{label}: "),
    )


def throughput_over_time(
    rows: list[dict[str, Any]],
    *,
    field: str,
    title: str,
    warmup_s: float,
    group_title: str = "stream",
    stacked: bool = False,
    order: Sequence[str] | None = None,
    changes: Sequence[dict[str, Any]] = (),
    phases: Sequence[dict[str, Any]] = (),
) -> alt.TopLevelMixin:
    """IOPS or MB/s (`field`) per group over time (stacked areas per group when `stacked`),
    with the run's change points and its streams' phases as rules."""
    y_title = Y_TITLES[field]
    groups = _groups(rows, order)
    data = dataset(compact(rows, SERIES_FIELDS))
    base = alt.Chart(data)
    x = alt.X("t_s:Q", title=TIME_TITLE, scale=alt.Scale(nice=False))
    tooltip = [
        alt.Tooltip("group:N", title=group_title),
        alt.Tooltip("t_s:Q", title="t (s)"),
        alt.Tooltip(f"{field}:Q", title=y_title, format=",.4~g"),
    ]
    if stacked:
        mark = base.mark_area(opacity=0.85)
        y = alt.Y(f"{field}:Q", title=y_title, stack="zero")
    else:
        mark = base.mark_line(interpolate="linear", strokeWidth=1.5)
        y = alt.Y(f"{field}:Q", title=y_title)
    picker = None
    if len(groups) > MAX_LINES and not stacked:
        picker = _group_picker(groups, group_title)
        chart = (
            mark.encode(x=x, y=y, tooltip=tooltip)
            .add_params(picker)
            .transform_filter(alt.datum.group == picker)
        )
    else:
        chart = mark.encode(
            x=x, y=y, color=alt.Color("group:N", title=group_title, sort=groups), tooltip=tooltip
        )
    return _layers(chart, warmup_s, changes, phases).properties(
        title=title, width=WIDTH, height=HEIGHT
    )


LATENCY_STATS = {
    "p99": "p99 response",
    "p50": "p50 response",
    "svc_p99": "p99 service",
    "svc_p50": "p50 service",
    "read_p99": "read p99",
    "write_p99": "write p99",
}


def latency_over_time(
    rows: list[dict[str, Any]],
    *,
    stats: Sequence[str],
    title: str,
    warmup_s: float,
    group_title: str = "stream",
    order: Sequence[str] | None = None,
    changes: Sequence[dict[str, Any]] = (),
    phases: Sequence[dict[str, Any]] = (),
) -> alt.TopLevelMixin:
    """Latency percentiles per group over time (log scale); one line per group and stat, with
    the run's change points and its streams' phases as rules."""
    groups = _groups(rows, order)
    data = dataset(compact(rows, tuple(dict.fromkeys((*SERIES_FIELDS, *stats)))))
    labels = {s: LATENCY_STATS.get(s, s) for s in stats}
    folded = (
        alt.Chart(data)
        .transform_fold(list(stats), as_=["stat", "latency_ms"])
        .transform_filter("isValid(datum.latency_ms) && datum.latency_ms > 0")
        .transform_calculate(statistic=_label_expr("datum.stat", labels))
    )
    x = alt.X("t_s:Q", title=TIME_TITLE, scale=alt.Scale(nice=False))
    y = alt.Y(
        "latency_ms:Q",
        scale=alt.Scale(type="log"),
        axis=log_axis((r.get(st) for r in rows for st in stats), LATENCY_TITLE),
    )
    tooltip = [
        alt.Tooltip("group:N", title=group_title),
        alt.Tooltip("statistic:N"),
        alt.Tooltip("t_s:Q", title="t (s)"),
        alt.Tooltip("latency_ms:Q", title="ms", format=",.4~g"),
    ]
    stat_dash = alt.StrokeDash("statistic:N", title="statistic", sort=[labels[s] for s in stats])
    line = folded.mark_line(strokeWidth=1.5)
    # Every group in its own colour, each statistic in its own dash, while that stays
    # readable; beyond MAX_LATENCY_LINES lines colours repeat (12 streams x 4 statistics), so
    # one group is shown at a time, its statistics in colour.
    if len(groups) * len(stats) > MAX_LATENCY_LINES or len(groups) == 1:
        chart = line.encode(
            x=x,
            y=y,
            color=alt.Color("statistic:N", title="statistic", sort=[labels[s] for s in stats]),
            tooltip=tooltip,
        )
        if len(groups) > 1:
            picker = _group_picker(groups, group_title)
            chart = chart.add_params(picker).transform_filter(alt.datum.group == picker)
    else:
        chart = line.encode(
            x=x,
            y=y,
            color=alt.Color("group:N", title=group_title, sort=groups),
            strokeDash=stat_dash,
            tooltip=tooltip,
        )
    return _layers(chart, warmup_s, changes, phases).properties(
        title=title, width=WIDTH, height=HEIGHT
    )


def _groups(rows: list[dict[str, Any]], order: Sequence[str] | None) -> list[str]:
    present = {r["group"] for r in rows}
    known = [g for g in (order or []) if g in present]
    return known + sorted(present - set(known))


def _label_expr(field: str, labels: dict[str, str]) -> str:
    expr = f"{field}"
    for key, label in reversed(list(labels.items())):
        expr = f"{field} === '{key}' ? '{label}' : ({expr})"
    return expr


def _nines_axis() -> alt.Axis:
    values = list(NINES_LABELS)
    label = " : ".join(f"datum.value < {v + 0.01} ? '{name}'" for v, name in NINES_LABELS.items())
    return alt.Axis(values=values, labelExpr=f"{label} : ''", title="percentile", grid=True)


def percentile_plot(
    rows: list[dict[str, Any]], *, title: str, group_field: str = "group", group_title: str
) -> alt.TopLevelMixin:
    """Latency at p50..p99.99 of merged histograms: one line per group and op."""
    rows = [r for r in rows if (r.get("latency_ms") or 0) > 0]  # none at 0 on a log axis
    data = dataset(compact(rows, (group_field, "op", "percentile", "nines", "latency_ms", "ios")))
    base = alt.Chart(data).encode(
        x=alt.X("nines:Q", axis=_nines_axis(), scale=alt.Scale(domain=[0.3, 4.0])),
        y=alt.Y(
            "latency_ms:Q",
            scale=alt.Scale(type="log"),
            axis=log_axis((r.get("latency_ms") for r in rows), LATENCY_TITLE),
        ),
        color=alt.Color(f"{group_field}:N", title=group_title),
        tooltip=[
            alt.Tooltip(f"{group_field}:N", title=group_title),
            alt.Tooltip("op:N"),
            alt.Tooltip("percentile:Q", title="percentile"),
            alt.Tooltip("latency_ms:Q", title="ms", format=",.4~g"),
            alt.Tooltip("ios:Q", title="IOs", format=","),
        ],
    )
    line = base.mark_line(strokeWidth=1.5).encode(strokeDash=alt.StrokeDash("op:N", title="op"))
    chart = line + base.mark_point(size=18, filled=True).encode(
        shape=alt.Shape("op:N", title="op", legend=None)
    )
    return chart.properties(title=title, width=WIDTH, height=HEIGHT)


# ---------------------------------------------------------------------------------------------
# scaling studies


def _small_multiples(
    rows: list[dict[str, Any]],
    key: str,
    draw: Callable[[str, list[dict[str, Any]]], alt.TopLevelMixin],
    *,
    title: str,
) -> alt.TopLevelMixin:
    """One small chart per value of `key` (in order of appearance), two to a row."""
    charts = [
        draw(value, [r for r in rows if r[key] == value]).properties(
            width=SMALL_WIDTH, height=SMALL_HEIGHT
        )
        for value in _ordered(r[key] for r in rows)
    ]
    return alt.concat(*charts, columns=2).properties(title=title)


def _tiles_x(ordinal: bool, title: str = "tiles", values: Iterable[float] | None = None) -> alt.X:
    """The study's axis (field `tiles`: the tile count, or a knob's value titled by the knob):
    ordinal for per-step marks, quantitative for lines over steps (tile counts labelled at
    the counts studied)."""
    if ordinal:
        return alt.X("tiles:O", title=title, axis=alt.Axis(labelAngle=0))
    if title == "tiles":
        return alt.X("tiles:Q", title=title, axis=whole_axis(values or [], title))
    return alt.X("tiles:Q", title=title, axis=alt.Axis(labelOverlap=True))


def scaling_metric(
    rows: list[dict[str, Any]], *, title: str, axis: str = "tiles"
) -> alt.TopLevelMixin:
    """Per application: its metric (own unit) vs tile count, the target dashed."""

    def draw(app: str, mine: list[dict[str, Any]]) -> alt.TopLevelMixin:
        unit = mine[0]["unit"]
        data = dataset(compact(mine, ("app", "tiles", "metric", "target", "verdict", "unit")))
        base = alt.Chart(data).encode(x=_tiles_x(ordinal=True, title=axis))
        y_title = f"{app} ({unit})"
        line = base.mark_line(color="#1565c0").encode(y=alt.Y("metric:Q", title=y_title))
        target = base.mark_line(color="#757575", strokeDash=[4, 3]).encode(y="target:Q")
        points = base.mark_point(filled=True, size=60).encode(
            y="metric:Q",
            color=alt.Color("verdict:N", title="QoS", scale=PASS_COLORS),
            tooltip=[
                alt.Tooltip("tiles:O"),
                alt.Tooltip("metric:Q", title=unit, format=",.4~g"),
                alt.Tooltip("target:Q", title="target", format=",.4~g"),
                alt.Tooltip("verdict:N", title="QoS"),
            ],
        )
        return (line + target + points).properties(title=f"{app}: {unit} (dashed: target)")

    return _small_multiples(rows, "app", draw, title=title)


def scaling_latency(
    rows: list[dict[str, Any]], *, title: str, axis: str = "tiles"
) -> alt.TopLevelMixin:
    """Per application: each latency criterion vs tile count with its QoS limit as a rule."""

    def draw(app: str, mine: list[dict[str, Any]]) -> alt.TopLevelMixin:
        data = dataset(compact(mine, ("app", "criterion", "tiles", "latency_ms", "limit_ms")))
        limits = {(r["criterion"], r["limit_ms"]) for r in mine if r.get("limit_ms") is not None}
        limit_data = dataset(
            [
                {"criterion": c, "limit_ms": rounded(v), "label": f"{c} {v:g} ms"}
                for c, v in sorted(limits)
            ]
        )
        base = alt.Chart(data).encode(
            x=_tiles_x(ordinal=True, title=axis),
            y=alt.Y("latency_ms:Q", title="latency (ms)"),
            color=alt.Color("criterion:N", title="criterion"),
        )
        lines = base.mark_line() + base.mark_point(filled=True, size=40).encode(
            tooltip=[
                alt.Tooltip("criterion:N"),
                alt.Tooltip("tiles:O"),
                alt.Tooltip("latency_ms:Q", title="ms", format=",.4~g"),
                alt.Tooltip("limit_ms:Q", title="QoS limit (ms)"),
            ]
        )
        rule = (
            alt.Chart(limit_data)
            .mark_rule(strokeDash=[5, 4], strokeWidth=1.5)
            .encode(
                y="limit_ms:Q",
                color=alt.Color("criterion:N", title="criterion"),
                tooltip=[alt.Tooltip("label:N", title="QoS limit")],
            )
        )
        # The limits are named in the subtitle, not written on their lines: limits close to
        # each other (5 and 10 ms on a 500 ms axis) would print their labels on top of each
        # other.
        # Non-breaking spaces keep each limit whole when the subtitle wraps.
        listed = [f"{c}\u00a0{v:g}\u00a0ms" for c, v in sorted(limits, key=lambda cv: cv[1])]
        subtitle = _wrapped("dashed QoS limits: " + ", ".join(listed)) if listed else []
        return (lines + rule).properties(
            title=alt.TitleParams(f"{app}: latency", subtitle=subtitle, subtitleFontSize=10)
        )

    return _small_multiples(rows, "app", draw, title=title)


def percentiles_per_app(
    rows: list[dict[str, Any]], *, group_title: str, title: str
) -> alt.TopLevelMixin:
    """Per application (`app` of each row): a small percentile plot of its groups."""
    return _small_multiples(
        rows,
        "app",
        lambda app, mine: percentile_plot(mine, title=app, group_title=group_title),
        title=title,
    )


def scaling_totals(
    rows: list[dict[str, Any]],
    *,
    max_passing: float | None,
    first_failure: float | None,
    title: str,
    axis: str = "tiles",
) -> alt.TopLevelMixin:
    """Total IOPS, MB/s and score vs tile count (or a knob); the saturation point marked."""
    data = dataset(compact(rows, ("tiles", "iops", "mbps", "score", "verdict")))
    marks_rows = []
    if max_passing is not None:
        marks_rows.append(
            {"tiles": max_passing, "label": f"max passing {max_passing:g}", "color": "green"}
        )
    if first_failure is not None:
        marks_rows.append(
            {"tiles": first_failure, "label": f"first failure {first_failure:g}", "color": "red"}
        )
    charts = []
    steps = [r["tiles"] for r in rows if r.get("tiles") is not None]
    for field in ("iops", "mbps", "score"):
        if not any(r.get(field) is not None for r in rows):
            continue
        y_title = Y_TITLES[field]
        base = alt.Chart(data).encode(x=_tiles_x(ordinal=False, title=axis, values=steps))
        line = base.mark_line(color="#1565c0").encode(y=alt.Y(f"{field}:Q", title=y_title))
        points = base.mark_point(filled=True, size=60).encode(
            y=f"{field}:Q",
            color=alt.Color("verdict:N", title="QoS", scale=PASS_COLORS),
            tooltip=[
                alt.Tooltip("tiles:Q"),
                alt.Tooltip(f"{field}:Q", title=y_title, format=",.4~g"),
                alt.Tooltip("verdict:N", title="QoS"),
            ],
        )
        layers = [line, points, *marker_layers(marks_rows, field="tiles")]
        charts.append(
            alt.layer(*layers).properties(
                title=f"{y_title} vs {axis}", width=THIRD_WIDTH, height=SMALL_HEIGHT
            )
        )
    subtitle = marker_subtitle(marks_rows)
    return alt.concat(*charts, columns=3).properties(
        title=alt.TitleParams(title, subtitle=subtitle) if subtitle else title
    )


def scaling_side_by_side(
    rows: list[dict[str, Any]], *, studies: list[str], title: str
) -> alt.TopLevelMixin:
    """Score, IOPS and MB/s vs tile count, one line per study (`group`), QoS by point shape."""
    charts = []
    for field in ("score", "iops", "mbps"):
        y_title = Y_TITLES[field]
        data = dataset(compact(rows, ("tiles", "group", field, "verdict")))
        base = alt.Chart(data).encode(
            x=_tiles_x(ordinal=False, values=[r["tiles"] for r in rows]),
            y=alt.Y(f"{field}:Q", title=y_title),
            color=alt.Color("group:N", title="study", sort=studies),
        )
        points = base.mark_point(filled=True, size=50).encode(
            shape=alt.Shape("verdict:N", title="QoS")
        )
        charts.append(
            (base.mark_line() + points).properties(
                title=f"{y_title} vs tiles", width=SMALL_WIDTH, height=SMALL_HEIGHT
            )
        )
    return alt.concat(*charts, columns=3).properties(title=title)


def stacked_bars(
    rows: list[dict[str, Any]], *, x: str, x_title: str, field: str, title: str
) -> alt.TopLevelMixin:
    """A stacked bar per x value, one segment per group (e.g. MB/s per application)."""
    y_title = Y_TITLES[field]
    data = dataset(compact(rows, (x, "group", field)))
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X(f"{x}:O", title=x_title, axis=alt.Axis(labelAngle=0)),
            y=alt.Y(f"{field}:Q", title=y_title, stack="zero"),
            color=alt.Color("group:N", title="application"),
            tooltip=[
                alt.Tooltip(f"{x}:O", title=x_title),
                alt.Tooltip("group:N", title="application"),
                alt.Tooltip(f"{field}:Q", title=y_title, format=",.4~g"),
            ],
        )
        .properties(title=title, width=SMALL_WIDTH, height=SMALL_HEIGHT)
    )


# ---------------------------------------------------------------------------------------------
# comparisons


def normalized_bars(
    rows: list[dict[str, Any]],
    *,
    runs: list[str],
    title: str,
    x: str = "run",
    x_title: str = "tiles",
) -> alt.TopLevelMixin:
    """One small bar chart per metric: each run's value / the baseline's (rule at 1.00). The
    legend names the runs (their labels); the x axis names what they are compared at."""
    charts = []
    many_points = x != "run" and len(_ordered(r[x] for r in rows)) > 6
    for metric in _ordered(r["metric"] for r in rows):
        mine = [r for r in rows if r["metric"] == metric and r.get("normalized") is not None]
        if not mine:
            continue
        data = dataset(
            compact(mine, ("metric", x, "run", "normalized", "value", "change_pct", "unit"))
        )
        base = alt.Chart(data)
        encode_x = (
            alt.X("run:N", title=None, sort=runs, axis=None)
            if x == "run"
            else alt.X(
                f"{x}:O",
                title=x_title,
                sort=_ordered(r[x] for r in mine),
                axis=alt.Axis(labelAngle=-90 if many_points else 0, labelOverlap=True),
            )
        )
        extra = {} if x == "run" else {"xOffset": alt.XOffset("run:N", sort=runs)}
        bars = base.mark_bar().encode(
            x=encode_x,
            y=alt.Y("normalized:Q", title="relative to baseline (baseline = 1.00)"),
            color=alt.Color("run:N", title="run", sort=runs),
            tooltip=[
                alt.Tooltip("run:N"),
                alt.Tooltip("value:Q", title=mine[0].get("unit") or "value", format=",.4~g"),
                alt.Tooltip("normalized:Q", format=".3f"),
                alt.Tooltip("change_pct:Q", title="change (%)", format="+.1f"),
            ],
            **extra,
        )
        one = alt.Chart(dataset([{"one": 1.0}])).mark_rule(color="#424242").encode(y="one:Q")
        unit = mine[0].get("unit")
        charts.append(
            (bars + one).properties(
                title=f"{metric}" + (f" ({unit})" if unit and unit != metric else ""),
                width=THIRD_WIDTH if x == "run" else (WIDTH if many_points else SMALL_WIDTH + 60),
                height=SMALL_HEIGHT,
            )
        )
    return (
        alt.concat(*charts, columns=3 if x == "run" else (1 if many_points else 2))
        .properties(title=title)
        .configure_legend(orient="bottom", labelLimit=400)
    )


def _ordered(values: Iterable[str]) -> list[str]:
    seen: list[str] = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen


def decay_curve(rows: list[dict[str, Any]], *, title: str) -> alt.TopLevelMixin:
    """Metrics per repetition as % of the first (100 = first), with each metric's
    least-squares trend line dashed: the decay curve of a repeat study."""
    data = dataset([{k: rounded(v) for k, v in r.items()} for r in rows])
    metrics = _ordered(r["metric"] for r in rows)
    base = alt.Chart(data)
    x = alt.X("repetition:Q", axis=whole_axis((r["repetition"] for r in rows), "repetition"))
    color = alt.Color("metric:N", title="metric", sort=metrics)
    tooltip = [
        alt.Tooltip("metric:N"),
        alt.Tooltip("repetition:Q"),
        alt.Tooltip("value:Q", title="value", format=",.4~g"),
        alt.Tooltip("pct:Q", title="% of first", format=".1f"),
    ]
    measured = base.mark_line(point=True, strokeWidth=2).encode(
        x=x,
        y=alt.Y("pct:Q", title="% of the first repetition", scale=alt.Scale(zero=False)),
        color=color,
        tooltip=tooltip,
    )
    trend = (
        base.transform_filter("isValid(datum.trend_pct)")
        .mark_line(strokeDash=[5, 4], strokeWidth=1.2, opacity=0.8)
        .encode(x=x, y="trend_pct:Q", color=color)
    )
    reference = (
        alt.Chart(dataset([{"pct": 100}]))
        .mark_rule(color="#9e9e9e", strokeDash=[2, 2])
        .encode(y="pct:Q")
    )
    return (reference + measured + trend).properties(title=title, width=WIDTH, height=HEIGHT)


def steady_rounds(
    rounds: list[results.SteadyRound],
    window: results.SteadyWindow | None,
    *,
    title: str,
    y_title: str,
) -> alt.TopLevelMixin:
    """The tracked metric per round, as the SNIA PTS reports draw it: the measurement window
    shaded, its mean with the +-10% band, and the least-squares line across the window."""
    points = dataset([{"round": r.index, "value": rounded(r.value)} for r in rounds if r.value])
    last_round: Any = max((r.index for r in rounds), default=1)
    x = alt.X(
        "round:Q",
        title="round",
        scale=alt.Scale(domain=[0.5, last_round + 0.5], nice=False),
        axis=alt.Axis(tickMinStep=1),
    )
    y = alt.Y("value:Q", title=y_title, scale=alt.Scale(zero=False))
    line = (
        alt.Chart(points)
        .mark_line(point=True, strokeWidth=1.5, color="#1565c0")
        .encode(
            x=x,
            y=y,
            tooltip=[
                alt.Tooltip("round:Q"),
                alt.Tooltip("value:Q", title=y_title, format=",.4~g"),
            ],
        )
    )
    if not window:
        return line.properties(title=title, width=WIDTH, height=HEIGHT)
    first: Any = window.first_round  # a judged window has its rounds, mean and line
    last: Any = window.last_round
    mean: Any = window.mean
    shade = (
        alt.Chart(
            dataset([{"start": first - 0.5, "end": last + 0.5, "label": "measurement window"}])
        )
        .mark_rect(color="#9e9e9e", opacity=0.12)
        .encode(x="start:Q", x2="end:Q")
    )
    levels = dataset(
        [
            {"from": first, "to": last, "level": rounded(mean * f), "what": what}
            for f, what in ((1.1, "110% of window mean"), (1.0, "window mean"),
                            (0.9, "90% of window mean"))
        ]
    )  # fmt: skip
    band = (
        alt.Chart(levels)
        .mark_rule(strokeDash=[4, 3], color="#616161")
        .encode(
            x="from:Q",
            x2="to:Q",
            y=alt.Y("level:Q"),
            tooltip=[alt.Tooltip("what:N"), alt.Tooltip("level:Q", format=",.4~g")],
        )
    )
    slope: Any = window.slope_per_round
    intercept: Any = window.intercept
    fit = dataset(
        [
            {"round": first, "fit": rounded(intercept), "what": "least-squares fit"},
            {
                "round": last,
                "fit": rounded(intercept + slope * (last - first)),
                "what": "least-squares fit",
            },
        ]
    )
    slope_line = (
        alt.Chart(fit)
        .mark_line(color="#c62828", strokeWidth=1.5)
        .encode(x="round:Q", y="fit:Q", tooltip=[alt.Tooltip("what:N")])
    )
    return (shade + band + slope_line + line).properties(title=title, width=WIDTH, height=HEIGHT)
