"""File runs in the run store: `tilemark files run` writes a run directory like a block run
(run.json with kind "files", its summary's `files` section typed as store/results.py
FilesSummary, the intervals per stream and operation as Parquet) and catalogs it, so
`tilemark runs`, `report` and `compare` see it (docs/files.md)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from tilemark.errors import RunError
from tilemark.files.window import FILE_INTERVALS, interval_rows, write_intervals

STATUS_OF = {
    "complete": "complete",
    "interrupted": "incomplete",
    "errors": "errors",
    "hung": "hung",
}


def plan_record(plan: dict[str, Any]) -> dict[str, Any]:
    """The file plan as run.json keeps it: every key but the sets' entry and directory lists
    (a million-file set would be megabytes), whose counts stand in."""
    sets = [
        {
            "name": f["name"],
            "root": f["root"],
            "dirs": len(f["dirs"]),
            "entries": len(f["entries"]),
            "present": sum(1 for e in f["entries"] if e[1] is not None),
        }
        for f in plan["filesets"]
    ]
    # The block run's keys stay empty (readers of `plan.streams` expect block streams); the
    # file streams are `file_streams`.
    return {**plan, "filesets": sets, "targets": [], "streams": [], "file_streams": plan["streams"]}


def streams_json(streams: Any, apps: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """StreamSummary dataclasses (files/run.py) as FileStreamResult documents."""
    out = []
    for s in streams:
        doc = asdict(s)
        doc["ops"] = [o for o in doc["ops"] if o["ops"] or o["skipped"] or o["errors"]]
        if apps and s.name in apps:
            doc["app"] = apps[s.name]
        out.append(doc)
    return out


def files_summary(r: Any, backend: str) -> dict[str, Any]:
    """summary.files of a FileRunResult (files/run.py)."""
    prepared = {p.spec.name: p for p in r.prepared}
    return {
        "workload": r.workload,
        "backend": backend,
        "status": r.status,
        "error": r.error,
        "seconds": r.seconds,
        "streams": streams_json(r.streams),
        "filesets": [
            {
                **asdict(f),
                "prepared": None
                if f.name not in prepared
                else {
                    "files": prepared[f.name].files,
                    "bytes": prepared[f.name].bytes,
                    "reused": prepared[f.name].reused,
                    "created": prepared[f.name].created,
                    "rewritten": prepared[f.name].rewritten,
                    "removed": prepared[f.name].removed,
                    "seconds": round(prepared[f.name].seconds, 3),
                },
            }
            for f in r.filesets
        ],
        "qos": [asdict(v) for v in r.qos],
        "qos_passed": r.qos_passed,
        "devices": [asdict(d) for d in r.devices],
        "filesystems": [asdict(f) for f in r.filesystems],
    }


def total_of(streams: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """summary.total of file streams: every operation counted (ops/s as `iops`, so the
    catalog's rate column shows it), bytes, errors by errno."""
    ops = sum(o["ops"] for s in streams for o in s["ops"])
    nbytes = sum(o["bytes"] for s in streams for o in s["ops"])
    by_name: dict[str, int] = {}
    for s in streams:
        for o in s["ops"]:
            for k, v in o["errors"].items():
                by_name[k] = by_name.get(k, 0) + v
    rate = lambda v: v / seconds if seconds > 0 else None  # noqa: E731
    return {
        "ops": ops,
        "bytes": nbytes,
        "iops": rate(ops),
        "mbps": None if rate(nbytes) is None else rate(nbytes) / 1e6,
        "errors": sum(by_name.values()),
        "errors_by_name": by_name,
        "duration_s": seconds,
    }


def store_file_run(
    r: Any, plan: dict[str, Any], backend: str, results: Path, argv: list[str]
) -> tuple[str, Path, str | None]:
    """Write the run directory of a finished file run and catalog it: (run id, directory,
    why the catalog could not take it or None)."""
    from tilemark.store.rundir import RunWriter

    targets = [{"name": p.spec.name, "path": p.spec.path, "kind": "fileset"} for p in r.prepared]
    try:
        writer = RunWriter(
            results,
            plan=plan_record(plan),
            workload={"name": r.workload, "kind": "files"},
            targets=targets,
            argv=argv,
            kind="files",
        )
    except OSError as e:
        raise RunError(f"cannot write results under {results}: {e.strerror or e}.") from None
    files = files_summary(r, backend)
    summary = {
        "duration_s": r.seconds,
        "total": total_of(files["streams"], r.seconds),
        "files": files,
    }
    names = [s.name for s in r.streams]
    try:
        write_intervals(
            writer.path / FILE_INTERVALS, interval_rows(writer.run_id, r.intervals, names)
        )
        writer.doc["files"]["file_intervals"] = FILE_INTERVALS
    except OSError as e:
        summary["notes"] = [f"the file intervals could not be written: {e.strerror or e}"]
    storage = STATUS_OF.get(r.status)
    writer.finish(
        None,
        summary=summary,
        complete=r.status == "complete",
        error=r.error,
        storage_failure=storage if storage in ("errors", "hung") else None,
    )
    return writer.run_id, writer.path, writer.catalog_error
