"""The Altair charts of a trace report (trace/show.py aggregates their data): throughput,
read share and outstanding IOs over time, the size histogram, the LBA heatmap and the
inter-arrival CDF. Data go through report.charts.dataset, as every report's do."""

from __future__ import annotations

from typing import Any

import altair as alt

from tilemark.report.charts import HEIGHT, WIDTH, Y_TITLES, compact, dataset
from tilemark.trace.schema import OPS

TIME_TITLE = "time since the first issue (s)"
OP_COLORS = dict(zip(OPS, ["#1f77b4", "#d62728", "#9467bd", "#8c564b"], strict=True))


def _op_color(rows: list[dict[str, Any]]) -> alt.Color:
    """The same colour for an operation in every chart; the legend names only those present."""
    present = [op for op in OPS if any(r["op"] == op for r in rows)]
    scale = alt.Scale(domain=present, range=[OP_COLORS[op] for op in present])
    return alt.Color("op:N", title="operation", scale=scale)


def throughput(rows: list[dict[str, Any]]) -> alt.TopLevelMixin:
    """IOPS and MB/s per slice, stacked by operation, one above the other."""
    data = dataset(compact(rows, ("t_s", "op", "iops", "mbps")))
    base = alt.Chart(data).mark_area(opacity=0.85, interpolate="step-after")
    x = alt.X("t_s:Q", title=TIME_TITLE, scale=alt.Scale(nice=False))
    tooltip = [
        alt.Tooltip("op:N", title="operation"),
        alt.Tooltip("t_s:Q", title="t (s)"),
        alt.Tooltip("iops:Q", title="IOPS", format=",.4~g"),
        alt.Tooltip("mbps:Q", title="MB/s", format=",.4~g"),
    ]
    iops = base.encode(
        x=x,
        y=alt.Y("iops:Q", title=Y_TITLES["iops"], stack="zero"),
        color=_op_color(rows),
        tooltip=tooltip,
    ).properties(width=WIDTH, height=HEIGHT // 1.3)
    mbps = base.encode(
        x=x,
        y=alt.Y("mbps:Q", title=Y_TITLES["mbps"], stack="zero"),
        color=_op_color(rows),
        tooltip=tooltip,
    ).properties(width=WIDTH, height=HEIGHT // 1.3)
    return alt.vconcat(iops, mbps).properties(title="IOPS and MB/s over time")


def read_share(rows: list[dict[str, Any]]) -> alt.TopLevelMixin:
    data = dataset(compact(rows, ("t_s", "read_pct")))
    return (
        alt.Chart(data)
        .mark_line(interpolate="step-after", strokeWidth=1.5)
        .encode(
            x=alt.X("t_s:Q", title=TIME_TITLE, scale=alt.Scale(nice=False)),
            y=alt.Y(
                "read_pct:Q", title="reads (% of reads + writes)", scale=alt.Scale(domain=[0, 100])
            ),
            tooltip=[
                alt.Tooltip("t_s:Q", title="t (s)"),
                alt.Tooltip("read_pct:Q", title="reads %", format=".1f"),
            ],
        )
        .properties(title="Read share over time", width=WIDTH, height=HEIGHT)
    )


def outstanding(rows: list[dict[str, Any]]) -> alt.TopLevelMixin:
    data = dataset(compact(rows, ("t_s", "outstanding")))
    return (
        alt.Chart(data)
        .mark_line(interpolate="step-after", strokeWidth=1.5)
        .encode(
            x=alt.X("t_s:Q", title=TIME_TITLE, scale=alt.Scale(nice=False)),
            y=alt.Y("outstanding:Q", title="outstanding IOs (mean per slice)"),
            tooltip=[
                alt.Tooltip("t_s:Q", title="t (s)"),
                alt.Tooltip("outstanding:Q", title="outstanding", format=".2f"),
            ],
        )
        .properties(title="Outstanding IOs over time", width=WIDTH, height=HEIGHT)
    )


def sizes(rows: list[dict[str, Any]]) -> alt.TopLevelMixin:
    data = dataset(compact(rows, ("bucket", "size", "op", "ios")))
    order = [r["size"] for r in sorted(rows, key=lambda r: r["bucket"])]
    order = list(dict.fromkeys(order))
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X(
                "size:O",
                title="IO size (bucket from this size to twice it)",
                sort=order,
                axis=alt.Axis(labelAngle=0),
            ),
            y=alt.Y("ios:Q", title="IOs", stack="zero"),
            color=_op_color(rows),
            tooltip=[
                alt.Tooltip("size:O", title="size from"),
                alt.Tooltip("op:N"),
                alt.Tooltip("ios:Q", title="IOs", format=","),
            ],
        )
        .properties(title="IO size histogram", width=WIDTH, height=HEIGHT)
    )


def lba_heatmap(rows: list[dict[str, Any]]) -> alt.TopLevelMixin:
    data = dataset(compact(rows, ("t_s", "t_end", "off_gib", "off_end", "ios")))
    return (
        alt.Chart(data)
        .mark_rect()
        .encode(
            x=alt.X("t_s:Q", title=TIME_TITLE, scale=alt.Scale(nice=False)),
            x2="t_end:Q",
            y=alt.Y("off_gib:Q", title="offset (GiB)", scale=alt.Scale(nice=False)),
            y2="off_end:Q",
            color=alt.Color("ios:Q", title="IOs", scale=alt.Scale(type="log", scheme="viridis")),
            tooltip=[
                alt.Tooltip("t_s:Q", title="t (s)"),
                alt.Tooltip("off_gib:Q", title="offset (GiB)", format=".3f"),
                alt.Tooltip("ios:Q", title="IOs", format=","),
            ],
        )
        .properties(title="Offset over time (LBA heatmap)", width=WIDTH, height=HEIGHT * 1.3)
    )


def interarrival(rows: list[dict[str, Any]]) -> alt.TopLevelMixin:
    data = dataset(compact(rows, ("us", "share")))
    return (
        alt.Chart(data)
        .mark_line(interpolate="step-after", strokeWidth=1.5)
        .encode(
            x=alt.X(
                "us:Q", title="time between issues (us, log scale)", scale=alt.Scale(type="log")
            ),
            y=alt.Y(
                "share:Q",
                title="share of inter-arrivals <= x",
                scale=alt.Scale(domain=[0, 1]),
                axis=alt.Axis(format="%"),
            ),
            tooltip=[
                alt.Tooltip("us:Q", title="<= us", format=",.4~g"),
                alt.Tooltip("share:Q", title="share", format=".2%"),
            ],
        )
        .properties(title="Inter-arrival time CDF", width=WIDTH, height=HEIGHT)
    )
