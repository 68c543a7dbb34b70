"""CSV export: interval rows and summaries of a run (or a study's steps), for spreadsheets.

intervals.csv holds every intervals.parquet column except the histogram JSON; streams.csv one
row per stream; tile runs add applications.csv, instances.csv and qos.csv; runs with
telemetry add devices.csv and host.csv (the columns of devices.parquet and host.parquet), runs
with attached storage counters array.csv (array.parquet's columns, plus `time` and `t_s`). A
scaling study exports steps.csv and study_applications.csv; a repeat study repetitions.csv (one
row per repetition and metric: value, change from the first) and trends.csv (one row per
metric: trend, interval, verdict); a sweep, matrix or curve points.csv (a matrix also its three
matrices). Numbers are written unrounded.
"""

from __future__ import annotations

import contextlib
import csv
import io
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv

from tilemark.report.base import Report
from tilemark.report.data import RunData, StudyData
from tilemark.report.telemetry import read_rows
from tilemark.run.pertarget import TARGETS_FILE, TARGETS_LOG
from tilemark.store import results
from tilemark.store.array import ArrayUnreadable, read_array
from tilemark.store.intervals import INTERVAL_SCHEMA
from tilemark.store.outputs import OutputDir
from tilemark.store.rundoc import iso_utc
from tilemark.telemetry import sampler as tm

HISTOGRAM_COLUMNS = ("service_hist", "response_hist")


@contextlib.contextmanager
def _text(out: OutputDir, name: str) -> Iterator[io.TextIOWrapper]:
    with out.file(name) as raw:
        f = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        yield f
        f.flush()
        f.detach()  # the output file closes itself when `out.file` ends


def _write_rows(out: OutputDir, name: str, rows: list[dict[str, Any]]) -> Path:
    columns: list[str] = []
    for r in rows:
        for k in r:
            if k not in columns:
                columns.append(k)
    with _text(out, name) as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow({k: "" if v is None else v for k, v in r.items()})
    return out.path / name


def interval_table(run: RunData) -> pa.Table:
    """Interval rows without the histogram JSON columns."""
    columns = [n for n in INTERVAL_SCHEMA.names if n not in HISTOGRAM_COLUMNS]
    return run.read_intervals(columns)


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def _latency_stats(lat: results.Latency | None) -> dict[str, float | None]:
    """mean_ms, p50_ms, p99_ms, p999_ms, max_ms of a latency summary (None when absent)."""
    lat = lat or results.Latency()
    return {
        "mean_ms": lat.mean_ms,
        "p50_ms": lat.p50_ms,
        "p99_ms": lat.p99_ms,
        "p999_ms": lat.p999_ms,
        "max_ms": lat.max_ms,
    }


def stream_rows(run: RunData) -> list[dict[str, Any]]:
    """One row per stream of the summary: rates, counts and latencies per op kind."""
    apps = run.app_of_stream()
    summary = run.typed.summary
    rows = []
    for s in (summary.streams if summary else None) or []:
        row: dict[str, Any] = {"run_id": run.run_id, "stream": s.stream, "name": s.name}
        if apps:
            row["application"] = apps.get(s.stream)  # type: ignore[arg-type]
        total = s.total or results.Rates()
        row.update(arrival=s.arrival, target_iops=s.target_iops, iops=total.iops, mbps=total.mbps)
        for op, o in (("read", s.read), ("write", s.write), ("sync", s.sync)):
            o = o or results.OpSummary()
            row[f"{op}_ops"] = _or(o.ops, 0)
            row[f"{op}_bytes"] = _or(o.bytes, 0)
            row[f"{op}_iops"] = _or(o.iops, 0.0)
            row[f"{op}_mbps"] = _or(o.mbps, 0.0)
            row[f"{op}_errors"] = sum((o.errors or {}).values())
            for kind, lat in (("service", o.service), ("response", o.response)):
                row.update({f"{op}_{kind}_{k}": v for k, v in _latency_stats(lat).items()})
        row["lag_max_ms"] = s.lag_max_ms
        row["ios_issued_late"] = s.ios_issued_late
        rows.append(row)
    return rows


def application_rows(run: RunData) -> tuple[list[dict], list[dict], list[dict]]:
    """Per application, per instance and per QoS verdict rows of a tile run."""
    apps = run.applications or {}
    per_app = []
    for a in apps.get("applications", []):
        row = {k: v for k, v in a.items() if k != "worst_latency_ms"}
        row["run_id"] = run.run_id
        for cid, v in (a.get("worst_latency_ms") or {}).items():
            row[f"worst_{cid}_ms"] = v
        per_app.append(row)
    instances, verdicts = [], []
    for i in apps.get("instances", []):
        row = {
            "run_id": run.run_id,
            **{k: v for k, v in i.items() if k not in ("streams", "verdicts", "latency_ms")},
        }
        row["failed"] = "; ".join(i.get("failed", []))
        for cid, v in (i.get("latency_ms") or {}).items():
            row[f"{cid}_ms"] = v
        instances.append(row)
        for v in i.get("verdicts", []):
            verdicts.append({"run_id": run.run_id, "tile": i["tile"], "app": i["app"], **v})
    return per_app, instances, verdicts


def _flat(target: dict[str, Any]) -> dict[str, Any]:
    """A summary.targets entry as one CSV row (latencies as read_p99_ms, ...)."""
    row = {k: v for k, v in target.items() if not isinstance(v, dict | list)}
    row["streams"] = " ".join(target.get("streams") or [])
    for op in ("read", "write"):
        for k, v in (target.get(f"{op}_latency") or {}).items():
            row[f"{op}_{k}"] = v
    return row


def _file_csvs(run: RunData, out: OutputDir) -> list[Path]:
    """A run with file streams: file_ops.csv (per stream and operation over the measurement)
    and file_intervals.csv (file_intervals.parquet as it is)."""
    from tilemark.files.window import FILE_INTERVALS, read_intervals

    summary = run.typed.summary
    files = summary.files if summary else None
    if files is None:
        return []
    rows = [
        {
            "stream": s.name,
            "app": s.app,
            "op": o.op,
            "ops": o.ops,
            "bytes": o.bytes,
            "skipped": o.skipped,
            "rate": o.rate,
            "mean_us": o.mean_us,
            "p50_us": o.p50_us,
            "p99_us": o.p99_us,
            "p999_us": o.p999_us,
            "max_us": o.max_us,
            "errors": sum((o.errors or {}).values()),
        }
        for s in files.streams or []
        for o in s.ops or []
    ]
    written = [_write_rows(out, "file_ops.csv", rows)]
    name = (run.typed.files.file_intervals if run.typed.files else None) or FILE_INTERVALS
    intervals = read_intervals(run.run_dir / name)
    if intervals:
        written.append(_write_rows(out, "file_intervals.csv", intervals))
    return written


def array_rows(run: RunData) -> list[dict[str, Any]]:
    """The counters attached to a run (array.parquet), with their time as ISO 8601 and in
    seconds since the run started; [] when none are attached or the file cannot be read."""
    try:
        rows, _sources = read_array(run.run_dir)
    except ArrayUnreadable:
        return []
    out = []
    for r in rows:
        moment = datetime.fromtimestamp(r["time_ns"] / 1e9, tz=UTC)
        out.append({**r, "time": iso_utc(moment), "t_s": r["t_ns"] / 1e9})
    return out


class CsvExporter:
    """Writes the CSV files of a run or a study into a directory."""

    def export(self, report: Report, dest: Path, *, force: bool = False) -> list[Path]:
        """The CSV files, written as store.outputs does (no links followed, no foreign file
        replaced unless `force`)."""
        with OutputDir(Path(dest), force=force, what="--csv file") as out:
            source = report.source
            if isinstance(source, StudyData):
                return self._study(source, out)
            return self._run(source, out)

    def _run(self, run: RunData, out: OutputDir) -> list[Path]:
        written = []
        with out.file("intervals.csv") as f:
            pacsv.write_csv(interval_table(run), f)
        written.append(out.path / "intervals.csv")
        written.append(_write_rows(out, "streams.csv", stream_rows(run)))
        if run.is_tile_run:
            per_app, instances, verdicts = application_rows(run)
            written.append(_write_rows(out, "applications.csv", per_app))
            written.append(_write_rows(out, "instances.csv", instances))
            written.append(_write_rows(out, "qos.csv", verdicts))
        summary = run.typed.summary
        if len((summary.targets if summary else None) or []) > 1:
            # Every field of summary.targets as written, one column each (_flat).
            targets = run.summary["targets"]  # type: ignore[index]
            written.append(_write_rows(out, "targets.csv", [_flat(t) for t in targets]))
        for final, log, name in (
            (tm.DEVICES_FILE, tm.DEVICES_LOG, "devices.csv"),
            (tm.HOST_FILE, tm.HOST_LOG, "host.csv"),
            (TARGETS_FILE, TARGETS_LOG, "target_intervals.csv"),
        ):
            rows = read_rows(run.run_dir, final, log)
            if rows:
                written.append(_write_rows(out, name, rows))
        counters = array_rows(run)
        if counters:
            written.append(_write_rows(out, "array.csv", counters))
        written += _file_csvs(run, out)
        return written

    def _repeat(self, study: StudyData, out: OutputDir) -> list[Path]:
        doc = study.typed
        reps = doc.repetitions_complete or []
        by_rep = {s.typed.repetition: s.typed for s in study.steps}
        values, trends = [], []
        for m in doc.metrics or []:
            head = {"study_id": study.study_id, "metric": m.metric, "scope": m.scope}
            for n, value, change in zip(reps, m.values or [], m.change_pct or [], strict=True):
                step = by_rep.get(n)
                values.append(
                    {
                        **head,
                        "repetition": n,
                        "run_id": step.run_id if step else None,
                        "unit": m.unit,
                        "value": value,
                        "change_from_first_pct": change,
                    }
                )
            t = m.trend or results.Trend()
            low, high = t.slope_ci_pct or (None, None)
            trends.append(
                {
                    **head,
                    "unit": m.unit,
                    "better": m.better,
                    "headline": m.headline,
                    "repetitions": t.n,
                    "last_vs_first_pct": t.last_vs_first_pct,
                    "slope_pct_per_repetition": t.slope_pct,
                    "slope_ci_low_pct": low,
                    "slope_ci_high_pct": high,
                    "verdict": m.verdict,
                }
            )
        return [
            _write_rows(out, "repetitions.csv", values),
            _write_rows(out, "trends.csv", trends),
        ]

    def _study(self, study: StudyData, out: OutputDir) -> list[Path]:
        if study.typed.kind == "repeat":
            return self._repeat(study, out)
        if study.typed.kind in ("sweep", "matrix", "curve"):
            return point_csvs(study.typed, out)
        steps, apps = [], []
        for st in study.steps:
            s, step = st.step, st.typed
            steps.append(
                {
                    "study_id": study.study_id,
                    "tiles": st.tiles,
                    "run_id": step.run_id,
                    "passed": step.passed,
                    "complete": step.complete,
                    "score": step.score,
                    # Every total as written (errors_by_name too), one column each.
                    **{f"total_{k}": v for k, v in (s.get("total") or {}).items()},
                    "failed": "; ".join(step.failed or []),
                }
            )
            # Every field of a step's application as written, one column each.
            for a in s.get("applications") or []:
                row = {"study_id": study.study_id, "tiles": st.tiles}
                row.update({k: v for k, v in a.items() if k != "worst_latency_ms"})
                for cid, v in (a.get("worst_latency_ms") or {}).items():
                    row[f"worst_{cid}_ms"] = v
                apps.append(row)
        return [
            _write_rows(out, "steps.csv", steps),
            _write_rows(out, "study_applications.csv", apps),
        ]


def point_csvs(doc: results.StudyDoc, out: OutputDir) -> list[Path]:
    """A sweep's, matrix's or curve's points.csv; a matrix also gets Orion's three matrices
    (small_iops.csv, large_mbps.csv, small_latency_ms.csv: rows are large streams, columns
    small outstanding IOs)."""
    written = []
    points = doc.points or []
    if points:  # a row per point, a column per field of the points table (docs/studies.md)
        fields = [k for k in points[0] if not isinstance(points[0][k], dict | list)]
        rows = [{k: p.get(k) for k in fields} for p in points]
        written.append(_write_rows(out, "points.csv", rows))
    if doc.kind == "matrix":
        large: list[Any] = doc.large_levels or []
        for name, matrix in (
            ("small_iops", doc.small_iops),
            ("large_mbps", doc.large_mbps),
            ("small_latency_ms", doc.small_latency_ms),
        ):
            path = out.path / f"{name}.csv"
            with _text(out, f"{name}.csv") as f:
                w = csv.writer(f)
                w.writerow(["large streams \\ small QD", *(doc.small_levels or [])])
                for n, row in zip(large, matrix or [], strict=True):
                    w.writerow([n, *("" if v is None else f"{v:.6g}" for v in row)])
            written.append(path)
    return written
