"""One HTML report of every kind, built once per test session and shared by the browser tests
(test_report_layout.py looks at each at 1400 px, test_report_browser.py checks that every
chart renders offline).

Both modules need the same runs, studies and reports (run, tiles, scaling and knob studies,
sweep, matrix, curve, the comparisons); building them is most of those modules' time. `make
test` hands whole files to two workers (`-n 2 --dist loadfile`), so the two modules may run in
different processes, at the same time: the reports live in a directory beside the workers'
temporary directories, and each product (a run, a study, a report) is built under a file lock
of its own by whichever worker asks first; the other waits for it or finds it done. Merging
the two modules would share them too, but would keep one worker busy for both modules while
the other has nothing of theirs to do; with one lock per product the two workers, when both
are here, build different reports at the same time.

Runs and point studies run on the null backend (no storage IO, the host's telemetry as
usual); the scaling studies and the runs that only carry counters are synthetic
(tests/report_runs.py). Every report's figures are also checked against the Vega-Lite schema
here (the report itself writes specs without that check).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path

from report_runs import simple_plan, write_knob_study, write_run, write_study
from tilemark.cli import main

# The point studies' runs: long enough for two intervals, on the null backend.
POINT_DURATION = "0.2"


class SharedReports:
    """Products (runs, studies, report files) by name, each built once per session under its
    own lock in `root`; `reports[kind]` is the HTML report of that kind."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def get(self, name: str) -> Path:
        """The product `name`, built now unless a worker of this session already built it."""
        done = self.root / f"{name}.json"
        with open(self.root / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if done.is_file():
                return Path(json.loads(done.read_text())["path"])
            work = self.root / name
            work.mkdir()
            path = PRODUCTS[name](self, work)
            tmp = done.with_suffix(".tmp")
            tmp.write_text(json.dumps({"path": str(path)}))
            os.replace(tmp, done)
            return path

    def __getitem__(self, kind: str) -> Path:
        return self.get(f"html-{kind}")


def shared_root(tmp_path_factory) -> Path:
    """Where a session's shared reports live: beside every worker's temporary directory under
    pytest-xdist, in this process's own one without it (never shared between sessions)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-reports"


# ---------------------------------------------------------------------------------------------
# the products


def _export(source: Path, dest: Path) -> Path:
    from tilemark.report import HtmlExporter, build_report
    from tilemark.report.data import load_source

    report = build_report(load_source(source))
    for figure in report.figures():
        figure.chart.to_dict(validate=True)  # raises on a spec Vega-Lite's schema refuses
    HtmlExporter().export(report, dest)
    return dest


def _new_run(results: Path, args: list[str]) -> Path:
    before = set(results.iterdir()) if results.is_dir() else set()
    assert main([*args, "--results", str(results)]) in (0, 3), args
    (run,) = [p for p in set(results.iterdir()) - before if (p / "run.json").is_file()]
    return run


def _new_study(results: Path, args: list[str]) -> Path:
    studies = results / "studies"
    before = set(studies.iterdir()) if studies.is_dir() else set()
    assert main([*args, "--results", str(results), "--no-report"]) in (0, 3), args
    (study,) = set(studies.iterdir()) - before
    return study


def _workload_run(work: Path, label: str) -> Path:
    workload = work / "w.toml"
    workload.write_text(
        f'target = "{work / "t.dat"}"\nsize = "4m"\nbackend = "null"\nduration = "1s"\n'
        'warmup = "0.3s"\ninterval = "0.1s"\n'
        '[[stream]]\nname = "randrw"\nrw = "randrw"\n'
        '[[stream]]\nname = "seq"\nrw = "read"\nbs = "64k"\n'
    )
    return _new_run(work / "r", ["run", str(workload), "--label", label])


def _attach_mixed_counters(run: Path, where: Path) -> None:
    """Counters of three kinds, as an array exports them: IOs per second, a cache hit ratio
    in % and MB/s; each kind needs its own axis."""
    started = json.loads((run / "run.json").read_text())["result"]["started_at_ns"]
    lines = ["epoch,FA front-end IOPS,cache_hit_pct,backend MB/s"]
    for i in range(1, 21):
        t = started / 1e9 + i * 0.1
        lines.append(f"{t:.3f},{20000 + 100 * i},{90 + i % 5},{150 + i}")
    (where / "array.csv").write_text("\n".join(lines) + "\n")
    cmd = ["attach", str(run), str(where / "array.csv"), "--results", str(run.parent)]
    assert main(cmd) == 0


def _after_run(reports: SharedReports, work: Path) -> Path:
    run = _workload_run(work, "after")
    _attach_mixed_counters(run, work)
    return run


def _tiles_run(reports: SharedReports, work: Path) -> Path:
    args = ["run", "--tiles", "2", "--target", str(work / "tiles.dat"), "--capacity", "64m",
            "--backend", "null", "--duration", "1", "--warmup", "0.3",
            "--interval", "0.1"]  # fmt: skip
    return _new_run(work / "r", args)


def _attached_run(reports: SharedReports, work: Path) -> Path:
    """A synthetic run with 14 counters attached, a sample every 0.5 s (more than a chart
    draws as lines: the report offers a drop-down)."""
    results = work / "r"
    run = write_run(results, simple_plan(("randrw", "seq")), seed=5)
    started = json.loads((run / "run.json").read_text())["result"]["started_at_ns"]
    counters = 14
    lines = ["epoch," + ",".join(f"FA {k} IOPS" for k in range(counters))]
    for i in range(1, 21):
        t = started / 1e9 + i * 0.5
        lines.append(f"{t:.3f}," + ",".join(str(100 * k + i) for k in range(counters)))
    (work / "array.csv").write_text("\n".join(lines) + "\n")
    assert main(["attach", str(run), str(work / "array.csv"), "--results", str(results)]) == 0
    return run


def _targets_run(reports: SharedReports, work: Path) -> Path:
    """A run on two targets with a phased stream: the per-target section and phase rules."""
    workload = work / "w.toml"
    workload.write_text(
        f'target = ["a={work / "a.dat"}", "b={work / "b.dat"}"]\n'
        'size = "4m"\nduration = "1s"\ninterval = "0.1s"\nbackend = "null"\n'
        '[[stream]]\nname = "load"\nrw = "randrw"\n'
        '[[stream]]\nname = "check"\ntarget = "b"\nstart = "0.3s"\nstop = "0.7s"\n'
    )
    return _new_run(work / "r", ["run", str(workload)])


def _point_study(*args: str) -> Callable[[SharedReports, Path], Path]:
    def build(reports: SharedReports, work: Path) -> Path:
        fast = ["--target", str(work / "p.dat"), "--size", "4m", "--backend", "null",
                "--duration", POINT_DURATION, "--interval", "0.1"]  # fmt: skip
        return _new_study(work / "r", [*args, *fast])

    return build


SWEEP = ("sweep", "--bs", "4k,8k,16k,32k,64k,128k", "--qd", "1,2,4")


def _compare(a: str, b: str) -> Callable[[SharedReports, Path], Path]:
    def build(reports: SharedReports, work: Path) -> Path:
        out = work / "compare.html"
        assert main(["compare", str(reports.get(a)), str(reports.get(b)), "-o", str(out)]) == 0
        return out

    return build


def _trace_report(reports: SharedReports, work: Path) -> Path:
    """An imported block trace's report (tilemark trace show --html)."""
    from test_trace_import import blkparse_sample

    (work / "sdb.txt").write_text(blkparse_sample())
    trace, out = work / "t.trace", work / "trace.html"
    assert main(["trace", "import", str(work / "sdb.txt"), "-o", str(trace)]) == 0
    assert main(["trace", "show", str(trace), "--html", str(out)]) == 0
    return out


def _report_of(source: str) -> Callable[[SharedReports, Path], Path]:
    def build(reports: SharedReports, work: Path) -> Path:
        return _export(reports.get(source), work / "report.html")

    return build


PRODUCTS: dict[str, Callable[[SharedReports, Path], Path]] = {
    "run-before": lambda reports, work: _workload_run(work, "before"),
    "run-after": _after_run,
    "run-tiles": _tiles_run,
    "run-attached": _attached_run,
    "run-targets": _targets_run,
    # Synthetic scaling studies (report_runs.py): latency grows with the load.
    "study-scale": lambda reports, work: write_study(work, (1, 2, 3), latency_per_tile=5.0),
    "study-repeated": lambda reports, work: write_study(
        work, (1, 2, 3), latency_per_tile=5.0, confirm_runs=1, repeat=2
    ),
    "study-knob": lambda reports, work: write_knob_study(work),
    "study-repeat": _point_study("repeat", "3"),
    "study-sweep": _point_study(*SWEEP),
    "study-sweep-again": _point_study(*SWEEP),  # the same definition, compared point by point
    "study-matrix": _point_study("matrix", "--small-qd", "0,1,2,4", "--large-streams", "0,1,2"),
    "study-curve": _point_study(
        "curve", "--max-qd", "4", "--loads", "10,50,90", "--slo", "p99<=1ms"
    ),
    "html-run": _report_of("run-before"),
    "html-tiles": _report_of("run-tiles"),
    "html-array": _report_of("run-after"),
    "html-attached": _report_of("run-attached"),
    "html-targets": _report_of("run-targets"),
    "html-scale": _report_of("study-scale"),
    "html-repeated": _report_of("study-repeated"),
    "html-knob": _report_of("study-knob"),
    "html-repeat": _report_of("study-repeat"),
    "html-sweep": _report_of("study-sweep"),
    "html-matrix": _report_of("study-matrix"),
    "html-curve": _report_of("study-curve"),
    "html-compare": _compare("run-before", "run-after"),
    "html-compare-sweep": _compare("study-sweep", "study-sweep-again"),
    "html-trace": _trace_report,
}
