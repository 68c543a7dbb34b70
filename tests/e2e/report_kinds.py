"""One HTML report of every kind, each built once, for test_report_browser.py (every chart
renders offline; every report reads cleanly at 1400 px).

Products (runs, studies, report files) are built on first use and remembered: the reports
share their runs and studies (the run and compare reports the same two runs, the sweep and
compare-sweep reports the same sweep). Runs and point studies run on the null backend (no
storage IO, the host's telemetry as usual); the scaling studies and the run that only carries
counters are synthetic (tests/report_runs.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from report_runs import simple_plan, write_knob_study, write_run, write_study
from tilemark.cli import main

# The point studies' runs: long enough for two intervals, on the null backend.
POINT_DURATION = "0.2"


class SharedReports:
    """Products by name, each built once in its own directory under `root`; `reports[kind]` is
    the HTML report of that kind."""

    def __init__(self, root: Path):
        self.root = root
        self.built: dict[str, Path] = {}

    def get(self, name: str) -> Path:
        """The product `name`, built now unless it already was."""
        if name not in self.built:
            work = self.root / name
            work.mkdir(parents=True)
            self.built[name] = PRODUCTS[name](self, work)
        return self.built[name]

    def __getitem__(self, kind: str) -> Path:
        return self.get(f"html-{kind}")


# ---------------------------------------------------------------------------------------------
# the products


def _export(source: Path, dest: Path) -> Path:
    from tilemark.report import HtmlExporter, build_report
    from tilemark.report.data import load_source

    HtmlExporter().export(build_report(load_source(source)), dest)
    return dest


def _new_run(results: Path, args: list[str], ok: tuple[int, ...] = (0, 3)) -> Path:
    before = set(results.iterdir()) if results.is_dir() else set()
    assert main([*args, "--results", str(results)]) in ok, args
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


def _attach_counters(run: Path, where: Path, names: list[str], step_s: float, row) -> None:
    """`tilemark attach` of an array's counters: 20 samples `step_s` apart from the run's
    start, sample i holding `row(i)` (one value per name)."""
    started = json.loads((run / "run.json").read_text())["result"]["started_at_ns"]
    lines = ["epoch," + ",".join(names)]
    for i in range(1, 21):
        lines.append(f"{started / 1e9 + i * step_s:.3f}," + ",".join(map(str, row(i))))
    (where / "array.csv").write_text("\n".join(lines) + "\n")
    cmd = ["attach", str(run), str(where / "array.csv"), "--results", str(run.parent)]
    assert main(cmd) == 0


def _attach_mixed_counters(run: Path, where: Path) -> None:
    """Counters of three kinds, as an array exports them: IOs per second, a cache hit ratio
    in % and MB/s; each kind needs its own axis."""
    names = ["FA front-end IOPS", "cache_hit_pct", "backend MB/s"]
    _attach_counters(run, where, names, 0.1, lambda i: (20000 + 100 * i, 90 + i % 5, 150 + i))


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
    run = write_run(work / "r", simple_plan(("randrw", "seq")), seed=5)
    names = [f"FA {k} IOPS" for k in range(14)]
    _attach_counters(run, work, names, 0.5, lambda i: [100 * k + i for k in range(14)])
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
    return _new_run(work / "r", ["run", str(workload)], ok=(0,))


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
