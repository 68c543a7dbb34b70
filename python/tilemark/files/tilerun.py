"""The file run of a tile run (files/tileapps.py explains why it runs beside the block run):
prepared before the block engine starts, started right after it, stopped when it ends, and
judged per application instance over the same measurement window (after the warm-up)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilemark.analysis.qos import Verdict
from tilemark.analysis.steady import WINDOW
from tilemark.errors import RunError
from tilemark.files.tileapps import FileTileApp, tile_workload

MARGIN_S = 2.0  # the file run is planned this much longer than the block run, which stops it


@dataclass
class FileCompanion:
    """The file applications of `tiles` tiles, as one file run."""

    apps: list[FileTileApp]
    tiles: int
    warmup_s: float
    max_duration_s: float
    interval_s: float
    workload: Any = None
    prepared: list[Any] = field(default_factory=list)
    plan: dict[str, Any] | None = None
    run: Any = None
    # Every interval the file run finished, as compact JSON (parsed one at a time when judged
    # or stored: a parsed interval with its histograms is several times larger).
    raw: list[str] = field(default_factory=list)
    result: dict[str, Any] | None = None
    begin_ns: int | None = None  # the judged window in file-run time (None: from the warm-up)
    until_ns: int | None = None  # where the block run's measurement ended, in file-run time
    run_dir: Path | None = None  # the tile run's directory (set before the engines start)
    _locks: contextlib.ExitStack | None = None
    _live: Any = None  # window.WindowTotals of an extended run's judging so far
    _live_next: int = 0  # the first interval of `raw` not yet in _live
    _live_shown: int = 0  # intervals of `raw` the live view has seen
    _live_rows: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.workload = tile_workload(
            self.apps,
            self.tiles,
            duration_s=self.warmup_s + self.max_duration_s + MARGIN_S,
            interval_s=self.interval_s,
        )

    def prepare(self) -> None:
        """Lock and prepare every set (safety checks first; one sentence each)."""
        from tilemark.files.run import file_plan, lock_sets, prepare_all

        self._locks = lock_sets(self.workload)
        self.prepared = prepare_all(self.workload)
        self.plan = file_plan(self.workload, self.prepared)

    def describe(self) -> str:
        """One line on what was prepared, for the run's console."""
        apps = ", ".join(f"{a.label} ({a.name}) in {a.directory}" for a in self.apps)
        files = sum(p.files for p in self.prepared)
        made = sum(p.created + p.rewritten + p.removed for p in self.prepared)
        seconds = sum(p.seconds for p in self.prepared)
        return (
            f"file applications: {apps}; {len(self.prepared)} sets of {files:,} files for "
            f"{self.tiles} tile{'s' if self.tiles != 1 else ''} ({made:,} files made good in "
            f"{seconds:.1f} s), {len(self.workload.streams)} file streams, backend "
            f"{self.workload.backend}"
        )

    def start(self) -> None:
        from tilemark import _engine

        try:
            self.run = _engine.start_files(json.dumps(self.plan))
        except _engine.EngineError as e:
            raise RunError(f"the tile's file applications could not start: {e}.") from None

    def _take(self) -> None:
        for snap in json.loads(self.run.poll()):
            self.raw.append(json.dumps(snap, separators=(",", ":")))

    def intervals(self) -> Iterator[dict[str, Any]]:
        """The file run's intervals, parsed one at a time."""
        return (json.loads(r) for r in self.raw)

    def live_rows(self) -> list[dict[str, Any]]:
        """The live view's rows of the newest file interval (files/window.py live_rows),
        taken as the block run shows each of its own."""
        from tilemark.files.window import live_rows

        self.poll()
        if self.raw and self._live_shown < len(self.raw):
            self._live_shown = len(self.raw)
            snap = json.loads(self.raw[-1])
            self._live_rows = live_rows(snap, self.workload.streams, int(self.warmup_s * 1e9))
        return self._live_rows

    def poll(self) -> None:
        """Take the intervals the file run finished so far (they do not pile up in the
        engine's queue)."""
        if self.run is not None and self.result is None:
            self._take()

    def judge_so_far(
        self, apps: dict[str, Any], file_apps: list[FileTileApp], measured_s: float
    ) -> None:
        """While an extended tile run decides (run/tiles.py QosMonitor): the file applications
        judged over what the block run measured so far, merged into `apps`: a decided
        failure decides the run, an inconclusive criterion keeps it measuring, as the block
        applications' do. The window only grows, so its totals grow interval by interval (each
        parsed once)."""
        from tilemark.files.window import WindowTotals, in_window

        self.poll()
        self.until_ns = self.from_ns + int(measured_s * 1e9)
        if self._live is None:
            self._live = WindowTotals(len(self.workload.streams))
        while self._live_next < len(self.raw):
            snap = json.loads(self.raw[self._live_next])
            if (int(snap["start_ns"]) + int(snap["end_ns"])) / 2 >= self.until_ns:
                break  # not yet in the window: looked at again next time
            if in_window(snap, self.from_ns, self.until_ns):
                self._live.add(snap)
            self._live_next += 1
        instances, _ = file_instances(self, self._live)
        merge_applications(apps, instances, file_apps)

    def finish(self) -> dict[str, Any] | None:
        """Stop the file run (the block run has ended) and keep its intervals and result."""
        if self.run is None or self.result is not None:
            return self.result
        self.run.stop()
        while not self.run.wait(0.2):
            self._take()
        self._take()
        self.result = json.loads(self.run.result())
        return self.result

    def close(self) -> None:
        if self.run is not None and self.result is None:
            with contextlib.suppress(Exception):
                self.finish()
        if self._locks is not None:
            self._locks.close()
            self._locks = None

    def before(self, inner: Any) -> Any:
        """run_plan's `before_start`: remembers the run directory (the file intervals go
        there), then does what `inner` (a trace application's lists) does."""

        def before_start(run_dir: Path, plan_doc: dict[str, Any]) -> None:
            if inner is not None:
                inner(run_dir, plan_doc)
            self.run_dir = run_dir

        return before_start

    def judging(self, analyze: Any, file_apps: list[FileTileApp]) -> Any:
        """run_plan's `analyze` that, once the block applications are judged, stops the file
        run, judges the file applications, merges them in and writes their intervals."""

        def both(compiled: dict[str, Any], result: dict[str, Any], summary: dict[str, Any]) -> None:
            analyze(compiled, result, summary)
            start, end = result.get("measure_start_ns"), result.get("measure_end_ns")
            if start is not None and end is not None:
                # Block intervals are timed from the block run's start, file intervals from
                # the file run's, a few milliseconds later: the same clock to an interval.
                self.begin_ns, self.until_ns = int(start), int(end)
            steady = (summary["applications"].get("measurement") or {}).get("steady") or {}
            if steady.get("judged_over") == "steady window":
                rounds = summary["steady_state"]["rounds"][-WINDOW:]
                self.begin_ns = int(rounds[0]["start_s"] * 1e9)
                self.until_ns = int(rounds[-1]["end_s"] * 1e9)
            self.finish()
            instances, files = file_instances(self)
            merge_applications(summary["applications"], instances, file_apps)
            summary["files"] = files
            if not compiled["streams"]:
                # Only file applications: the run's rate is theirs, as a file run's is
                # (runs, the scale table), counting every operation; errors stay theirs.
                from tilemark.files.store import total_of

                rates = total_of(files["streams"], files["seconds"])
                summary["total"].update(iops=rates["iops"] or 0.0, mbps=rates["mbps"] or 0.0)
            if self.run_dir is not None and self.raw:
                try:
                    write_file_intervals(self, self.run_dir, self.run_dir.name)
                except OSError as e:
                    summary.setdefault("notes", []).append(
                        f"the file intervals could not be written: {e.strerror or e}"
                    )

        return both

    @property
    def from_ns(self) -> int:
        """Where the judged window begins in file-run time: the end of the warm-up, or the
        steady window's first round (--until-steady)."""
        return int(self.warmup_s * 1e9) if self.begin_ns is None else self.begin_ns


def _verdict(spec: Any, op_doc: dict[str, Any] | None, window: Any, k: int) -> Verdict:
    """A file criterion of stream `k` judged over the window (files/qos.py verdict: with its
    confidence interval from the window's batches), named and described without the tile
    prefix (t1.mailfs.): a rate as the fraction of its minimum achieved, a latency in ms."""
    import dataclasses

    from tilemark.files.qos import verdict

    v = verdict(
        spec,
        op_doc,
        window.seconds,
        latency_batches=window.batches.series([(k, spec.op)]),
        rate_batches=window.batches.series([("rate", k, spec.op)]),
    )
    # The stream is t{k}.{app}.{stream}, the criterion t{k}.{app}.{id}.
    return dataclasses.replace(
        v, criterion=spec.name.split(".", 2)[2], description=v.description.split(".", 2)[2]
    )


def file_instances(
    c: FileCompanion, window: Any = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(application instances as application_results makes them, summary.files), judged over
    `window` (files/window.py WindowTotals) or else the companion's window of its intervals."""
    from tilemark.analysis.qos import undecided
    from tilemark.analysis.qos import worst as worst_of
    from tilemark.analysis.tiles import _latency_columns, _verdict_of, criterion_json, failure_text
    from tilemark.files.run import FilesetState, stream_summary
    from tilemark.files.store import streams_json
    from tilemark.files.window import window_totals

    w = c.workload
    result = c.result or {}
    if window is None:
        window = window_totals(c.intervals(), len(w.streams), c.from_ns, c.until_ns)
    totals, seconds = window.totals(), window.seconds
    by_name = {s.name: t for s, t in zip(w.streams, totals, strict=True)}
    index = {s.name: k for k, s in enumerate(w.streams)}
    summaries = [
        stream_summary(spec, t, seconds) for spec, t in zip(w.streams, totals, strict=True)
    ]
    instances = []
    all_verdicts = []
    for k in range(1, c.tiles + 1):
        for app in c.apps:
            prefix = f"t{k}.{app.label}."
            mine = [s for s in w.streams if s.name.startswith(prefix)]
            docs = [d for s in mine for d in by_name[s.name]["ops"].values()]
            ops = sum(d["ops"] for d in docs)
            nbytes = sum(d["bytes"] for d in docs)
            errors = sum(sum(d["errors"].values()) for d in docs)
            stream, unit = app.metric_stream()
            if stream is None:
                metric = ops / seconds if seconds > 0 else 0.0
                target = None
            else:
                loops = by_name[prefix + stream]["loops"] or {"ops": 0}
                metric = loops["ops"] / seconds if seconds > 0 else 0.0
                spec = next(s for s in mine if s.name == prefix + stream)
                target = spec.rate
            verdicts = []
            for q in w.qos:
                if not q.name.startswith(prefix):
                    continue
                t = by_name[q.stream]
                doc = t["loops"] if q.op == "loop" else t["ops"][q.op]
                verdicts.append(_verdict(q, doc, window, index[q.stream]))
            if errors:
                verdicts.append(Verdict("io_errors", f"no failed file operations, got {errors:,}",
                                        "window", False, float(errors), 0.0, "errors"))  # fmt: skip
            if result.get("stop_reason") == "hung":
                verdicts.append(Verdict("hung", str(result.get("error")), "window", False,
                                        None, 0.0, "errors"))  # fmt: skip
            failed = [v for v in verdicts if not v.passed]
            all_verdicts += verdicts
            wv = worst_of(verdicts)
            instances.append(
                {
                    "tile": k,
                    "app": app.label,
                    "profile": app.name,
                    "kind": "files",
                    "metric": metric,
                    "metric_unit": f"{unit}/s",
                    "target_metric": target,
                    "ratio": metric / target if target else None,
                    "passed": not failed,
                    "verdict": _verdict_of(failed),
                    "failed": [failure_text(v) for v in failed],
                    "undecided": [v.criterion for v in undecided(verdicts)],
                    "worst": None if wv is None else criterion_json(wv),
                    "criteria": [criterion_json(v) for v in verdicts],
                    "latency_ms": _latency_columns(verdicts),
                    "iops": ops / seconds if seconds > 0 else 0.0,
                    "mbps": nbytes / seconds / 1e6 if seconds > 0 else 0.0,
                    "errors": errors,
                    "streams": {},
                    "verdicts": [v.to_json() for v in verdicts],
                }
            )
    apps_of = {s.name: s.name.rsplit(".", 1)[0] for s in w.streams}
    sets = [
        FilesetState(p.spec.name, p.spec.path, f["files"], f["bytes"])
        for p, f in zip(c.prepared, result.get("filesets") or [], strict=False)
    ]
    from dataclasses import asdict

    files = {
        "workload": w.name,
        "backend": w.backend,
        "status": "hung"
        if result.get("stop_reason") == "hung"
        else "errors"
        if result.get("error")
        else "complete",  # noqa: E501
        "error": result.get("error"),
        "seconds": seconds,
        "streams": [
            {**doc, "run_ops": {op: d["ops"] for op, d in engine["ops"].items() if d["ops"]}}
            for doc, engine in zip(
                streams_json(summaries, apps_of), result.get("streams") or [], strict=False
            )
        ],
        "filesets": [asdict(s) for s in sets],
        "qos": [
            {
                "name": f"{i['app']}",
                "criterion": c_["description"],
                "value": c_["value"],
                "passed": c_["passed"],
                "decision": c_["decision"],
                "tile": i["tile"],
            }
            for i in instances
            for c_ in i["criteria"]
        ],  # fmt: skip
        "qos_passed": all(v.passed for v in all_verdicts) if all_verdicts else None,
    }
    return instances, files


def merge_applications(apps: dict[str, Any], instances: list[dict[str, Any]],
                       file_apps: list[FileTileApp]) -> None:  # fmt: skip
    """Add the file applications' instances to a tile run's `applications` (analysis/tiles.py
    application_results): per-application rows, the verdict, the failures and the score."""
    from tilemark.analysis.tiles import (
        _combined_verdict,
        _severity,
        _worst_criteria,
        _worst_of,
        worst_latency,
    )
    from tilemark.analysis.tiles import score as tile_score

    apps["instances"] = sorted(apps["instances"] + instances, key=lambda i: i["tile"])
    apps["tiles"] = max((i["tile"] for i in apps["instances"]), default=0)
    for app in file_apps:
        mine = [i for i in instances if i["app"] == app.label]
        if not mine:
            continue
        apps["applications"].append(
            {
                "app": app.label,
                "profile": app.name,
                "kind": "files",
                "verdict": _combined_verdict(i["verdict"] for i in mine),
                "worst": _worst_of(mine),
                "failed_criteria": sum(len(i["failed"]) for i in mine),
                "criteria": _worst_criteria(mine),
                "metric_unit": mine[0]["metric_unit"],
                "metric_total": sum(i["metric"] for i in mine),
                "metric_per_instance": sum(i["metric"] for i in mine) / len(mine),
                "instances": len(mine),
                "passed": all(i["passed"] for i in mine),
                "worst_latency_ms": worst_latency(mine),
                "iops": sum(i["iops"] for i in mine),
                "mbps": sum(i["mbps"] for i in mine),
            }
        )
    every = apps["instances"]
    failing = [i for i in every if not i["passed"]]
    deciding = max((i for i in failing if i["worst"] is not None),
                   key=lambda i: _severity(i["worst"]), default=None)  # fmt: skip
    apps["passed"] = not failing
    apps["verdict"] = _combined_verdict(i["verdict"] for i in every)
    apps["failed"] = [f"t{i['tile']}.{i['app']}: {f}" for i in every for f in i["failed"]]
    apps["undecided"] = list(apps.get("undecided") or []) + [
        f"t{i['tile']}.{i['app']}: {c}" for i in instances for c in i["undecided"]
    ]
    apps["deciding"] = (
        None if deciding is None
        else {"tile": deciding["tile"], "app": deciding["app"], **deciding["worst"]}
    )  # fmt: skip
    apps["score"] = tile_score(every)


def write_file_intervals(c: FileCompanion, run_dir: Path, run_id: str) -> None:
    """The file streams' intervals of the measurement beside the block intervals."""
    from tilemark.files.window import FILE_INTERVALS, interval_rows, write_intervals

    names = [s.name for s in c.workload.streams]
    write_intervals(
        run_dir / FILE_INTERVALS,
        interval_rows(run_id, c.intervals(), names, int(c.warmup_s * 1e9), c.until_ns),
    )
