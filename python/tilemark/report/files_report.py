"""File streams in reports: the report of a file run (`tilemark files run`, kind "files") and
the file-operations section a tile run with file applications adds to its report. Per
operation of every stream: ops, ops/s, bytes, latency percentiles and errors in a table, and
ops/s and p99 latency per operation over time (file_intervals.parquet)."""

from __future__ import annotations

from typing import Any

from tilemark.report.base import Cell, Figure, Report, Section, Table, Verdict
from tilemark.report.data import RunData
from tilemark.report.format import generated_by, run_links
from tilemark.store import results


def _us(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


def files_table(files: results.FilesSummary) -> Table:
    """Per stream and operation over the measurement; a sequence's loops as op `loop`."""
    rows = []
    for s in files.streams or []:
        label = str(s.name) if not s.app else f"{s.app}.{s.name}"
        for o in s.ops or []:
            errors = ", ".join(f"{k} {v}" for k, v in (o.errors or {}).items())
            rows.append(
                [
                    Cell(label),
                    Cell(str(o.op)),
                    Cell(f"{o.ops:,}", "num"),
                    Cell(f"{o.rate:,.1f}", "num"),
                    Cell(f"{o.bytes:,}", "num"),
                    Cell(_us(o.mean_us), "num"),
                    Cell(_us(o.p50_us), "num"),
                    Cell(_us(o.p99_us), "num"),
                    Cell(_us(o.p999_us), "num"),
                    Cell(_us(o.max_us), "num"),
                    Cell(f"{o.skipped or 0:,}", "num"),
                    Cell(errors or "-", "fail" if errors else ""),
                ]
            )
        if s.loops:
            rows.append(
                [
                    Cell(label),
                    Cell(f"loop ({s.unit or 'loops'})"),
                    Cell(f"{s.loops:,}", "num"),
                    Cell(f"{s.loop_rate:,.1f}", "num"),
                    Cell("-", "num"),
                    Cell("-", "num"),
                    Cell("-", "num"),
                    Cell(_us(s.loop_p99_us), "num"),
                    Cell("-", "num"),
                    Cell("-", "num"),
                    Cell("-", "num"),
                    Cell("-"),
                ]
            )
    columns = ["stream", "op", "ops", "ops/s", "bytes", "mean us", "p50 us", "p99 us",
               "p99.9 us", "max us", "skipped", "errors"]  # fmt: skip
    return Table(
        "file-ops",
        "File operations",
        columns,
        rows,
        caption="Latency is service time (open loop: from each operation's intended start), "
        "from merged histograms; skipped operations found nothing to act on and are not timed.",
    )


def _chart(rows: list[dict[str, Any]], field: str, title: str, log: bool) -> Any:
    import altair as alt

    from tilemark.report.charts import dataset

    data = [
        {"t_s": r["t_s"], "series": f"{r['stream']} {r['op']}", field: r[field]}
        for r in rows
        if r.get(field) is not None
    ]
    scale = alt.Scale(type="log") if log else alt.Scale(zero=True)
    return (
        alt.Chart(dataset(data))
        .mark_line(point=True)
        .encode(
            x=alt.X("t_s:Q", title="time (s)"),
            y=alt.Y(f"{field}:Q", title=title, scale=scale),
            color=alt.Color("series:N", title="stream op", scale=alt.Scale(scheme="category20")),
            tooltip=["series:N", "t_s:Q", f"{field}:Q"],
        )
        .properties(width=640, height=260)
    )


def files_figures(rows: list[dict[str, Any]], prefix: str = "") -> list[Figure]:
    """ops/s and p99 latency per stream and operation over time."""
    if not rows:
        return []
    timed = [r for r in rows if r["ops"]]
    return [
        Figure(
            f"{prefix}file-ops-rate",
            "File operations per second",
            _chart(rows, "ops_s", "ops/s", False),
        ),
        Figure(
            f"{prefix}file-ops-p99",
            "File operation latency (p99)",
            _chart(timed, "p99_us", "p99 latency (us)", True),
            caption="Per interval: the p99 of that interval's operations.",
        ),
    ]  # fmt: skip


def _fig(v: Any, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def beneath_table(files: results.FilesSummary) -> Table | None:
    """What the block devices under the sets did (diskstats, as iostat -x) and the file systems'
    own figures (files/fsstats.py), one row each; None when neither was read (tmpfs)."""
    rows = []
    for d in files.devices or []:
        figures = (
            f"{_fig(d.write_iops, ',.0f')} writes/s of {_fig(d.write_kib_avg, ',.1f')} KiB, "
            f"{_fig(d.write_mbps, ',.1f')} MB/s, {_fig(d.flushes_s, ',.0f')} flushes/s, "
            f"w_await {_fig(d.w_await_ms, ',.2f')} ms, {_fig(d.read_iops, ',.0f')} reads/s, "
            f"util {_fig(d.util_pct, '.0f')}%"
        )
        sets = ", ".join(d.filesets or [])
        rows.append([Cell("device"), Cell(f"{d.name} ({d.dev})"), Cell(sets), Cell(figures)])
    for f in files.filesystems or []:
        figures = ", ".join(f"{x.name} {x.value:,.1f}" for x in f.figures or [])
        rows.append([Cell(f"file system ({f.fstype})"), Cell(f"{f.mount} ({f.source})"),
                     Cell(", ".join(f.filesets or [])), Cell(figures)])  # fmt: skip
    if not rows:
        return None
    return Table(
        "file-beneath",
        "Beneath the file sets",
        ["layer", "name", "under sets", "over the run"],
        rows,
        caption="The block devices under the sets (/proc/diskstats, as iostat -x) and the file "
        "systems' own counters (ext4, xfs, btrfs, NFS) before and after the run: what the "
        "operations became below the file system. Other IO on them is counted too.",
    )


def files_section(run: RunData) -> Section | None:
    """The file-operations section of a run with file streams (None without)."""
    from tilemark.files.window import FILE_INTERVALS, read_intervals

    doc = run.typed
    files = doc.summary.files if doc.summary else None
    if not files:
        return None
    name = (doc.files.file_intervals if doc.files else None) or FILE_INTERVALS
    rows = read_intervals(run.run_dir / name)
    beneath = beneath_table(files)
    items: list[Figure | Table] = [files_table(files), *([beneath] if beneath else [])]
    items += files_figures(rows)
    intro = "; ".join(
        f"set {f.name} ({f.path}): {f.files:,} files, {f.bytes:,} bytes after the run"
        for f in files.filesets or []
    )
    return Section("files", "File operations", items, intro)


def files_report(run: RunData) -> Report:
    """The report of a file run (kind "files")."""
    doc = run.typed
    summary = doc.summary or results.Summary()
    files = summary.files or results.FilesSummary()
    total = summary.total or results.Total()
    status = doc.status or "-"
    facts = [("ops/s", f"{total.iops or 0:,.0f}")]
    for s in files.streams or []:
        if s.loops:
            facts.append((f"{s.unit or 'loops'}/s ({s.name})", f"{s.loop_rate:,.1f}"))
    facts.append(("seconds", f"{files.seconds or 0:.1f}"))
    qos = files.qos or []
    failed = [q for q in qos if not q.passed]
    verdict_status = (
        "fail" if status != "complete" or failed else "pass" if qos else "info"
    )  # fmt: skip
    headline = f"file workload {files.workload or '-'}: {status}"
    if qos:
        headline += (
            f", QoS {'failed: ' + ', '.join(str(q.name) for q in failed) if failed else 'passed'}"
        )
    notes = [
        f"{q.name}: {'pass' if q.passed else 'FAIL'}: {q.criterion} (measured "
        f"{'-' if q.value is None else format(q.value, ',.3f')})"
        for q in qos
    ]
    if doc.error:
        notes.insert(0, str(doc.error))
    verdict = Verdict(
        headline=headline,
        status=verdict_status,
        facts=facts,
        tested=[
            ("workload", str(files.workload or "-")),
            ("backend", str(files.backend or "-")),
            *[("file set", f"{f.name}: {f.path}") for f in files.filesets or []],
        ],
        notes=notes,
    )
    section = files_section(run)
    return Report(
        kind="run",
        title=f"tilemark report: file run {run.run_id}" + (f" ({doc.label})" if doc.label else ""),
        verdict=verdict,
        sections=[section] if section is not None else [],
        details={"plan": run.doc.get("plan"), "environment": run.doc.get("environment")},
        links=run_links(run),
        home=run.run_dir,
        source=run,
        generated_by=generated_by(),
    )
