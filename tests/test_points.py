"""`tilemark sweep`, `matrix` and `curve`: their lists, their refusals of bad input (one
sentence naming the flag, exit 2, nothing written), and whole studies on the null backend (the
engine schedules and completes IOs without touching storage), down to study.json, CSV files,
JSON output and the report.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("tilemark._engine", reason="the engine is not built (make build)")

from tilemark.cli import main  # noqa: E402
from tilemark.errors import UsageError  # noqa: E402
from tilemark.study.curve import parse_slo  # noqa: E402
from tilemark.study.points import parse_list, percent_item, qd_item, size_item  # noqa: E402

pytestmark = [pytest.mark.cost(35)]

FAST = ["--duration", "0.2", "--interval", "0.1", "--backend", "null", "--size", "4m"]


def test_lists_continue_a_doubling_or_an_even_step():
    assert parse_list("1,2,4,...,256", "--qd", qd_item, "q", "x", ellipsis=True) == [
        1, 2, 4, 8, 16, 32, 64, 128, 256,
    ]  # fmt: skip
    reads = parse_list("0,10,...,50,70", "--read", percent_item, "p", "x", ellipsis=True)
    assert reads == [0, 10, 20, 30, 40, 50, 70]
    # Two values step evenly; three with a constant ratio multiply.
    assert parse_list("10,20,...,60", "--qd", qd_item, "q", "x", ellipsis=True) == [
        10, 20, 30, 40, 50, 60,
    ]  # fmt: skip
    assert parse_list("2,4,8,...,32", "--qd", qd_item, "q", "x", ellipsis=True) == [2, 4, 8, 16, 32]
    assert parse_list("8k, 1m,8k", "--bs", size_item, "s", "x") == [8192, 1 << 20]
    sizes = parse_list("8k,16k,32k,...,1m", "--bs", size_item, "s", "x", ellipsis=True)
    assert sizes == [8192 << i for i in range(8)]


def test_slo_parses_bounds_in_ms():
    (c,) = parse_slo("p99<=2ms")
    assert (c.stat, c.max_ms) == ("p99", 2.0)
    slo = parse_slo("p50<=500us, p999<=0.01s,mean<=3")
    assert [(x.stat, x.max_ms) for x in slo] == [("p50", 0.5), ("p999", 10.0), ("mean", 3.0)]
    with pytest.raises(UsageError, match="--slo"):
        parse_slo("p98<=2ms")


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["sweep", "--bs", ""], "--bs"),
        (["sweep", "--bs", "3k,x"], "--bs"),
        (["sweep", "--bs", "4k,,8k"], "--bs"),
        (["sweep", "--qd", "1,0"], "--qd"),
        (["sweep", "--qd", "1,...,8"], "--qd"),
        (["sweep", "--qd", "4,2,...,8"], "--qd"),
        (["sweep", "--read", "0,130"], "--read"),
        (["sweep", "--region", "0%"], "--region"),
        (["sweep", "--region", "1g"], "--region"),  # larger than the 4 MiB data area
        (
            [
                "sweep",
                "--bs",
                "4k,8k,16k,32k,64k",
                "--qd",
                "1,2,4,...,4096",
                "--read",
                "0,30,70,100",
                "--region",
                "50%,100%",
            ],
            "--yes",
        ),  # fmt: skip
        (["sweep", "--bs", "1000"], "--bs"),  # not a multiple of the O_DIRECT alignment
        (["matrix", "--small-qd", ""], "--small-qd"),
        (["matrix", "--small-bs", "1000"], "--small-bs"),
        (["matrix", "--large-bs", "1000", "--large-streams", "0,2"], "--large-bs"),
        (["curve", "--bs", "1000"], "--bs"),
        (["matrix", "--large-streams", "1,x"], "--large-streams"),
        (["matrix", "--small-qd", "0", "--large-streams", "0"], "--small-qd"),
        (["curve", "--slo", "p98<=2ms"], "--slo"),
        (["curve", "--slo", "p99<=0ms"], "--slo"),
        (["curve", "--arrival", "closed"], "--arrival"),
        (["curve", "--loads", "0,50"], "--loads"),
        (["curve", "--rw", "write", "--read", "50"], "--read"),
    ],
)
def test_bad_input_is_one_sentence_naming_the_flag_and_writes_nothing(tmp_path, capsys, args, flag):
    target, results = tmp_path / "t.dat", tmp_path / "results"
    status = main([*args, "--target", str(target), *FAST, "--results", str(results)])
    err = capsys.readouterr().err.strip()
    assert status == 2, err
    assert err.startswith("tilemark: error:") and flag in err, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not target.exists() and not results.exists()


def test_a_flag_of_another_study_is_refused(tmp_path, capsys):
    assert main(["sweep", "--small-qd", "1", "--target", str(tmp_path / "t")]) == 2
    assert "--small-qd" in capsys.readouterr().err


def _study(results: Path) -> tuple[Path, dict]:
    (study_dir,) = (results / "studies").iterdir()
    return study_dir, json.loads((study_dir / "study.json").read_text())


def test_sweep_runs_every_point_and_stores_it(tmp_path, capsys):
    results = tmp_path / "results"
    args = ["sweep", "--target", str(tmp_path / "t.dat"), "--bs", "4k,64k", "--qd", "1,2",
            "--read", "100", "--region", "1m,100%", *FAST, "--results", str(results),
            "--json", "--label", "cache test"]  # fmt: skip
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    points = out["points"]
    assert [(p["bs"], p["qd"], p["region"]) for p in points] == [
        (4096, 1, "1 MiB"), (4096, 1, "100%"), (4096, 2, "1 MiB"), (4096, 2, "100%"),
        (65536, 1, "1 MiB"), (65536, 1, "100%"), (65536, 2, "1 MiB"), (65536, 2, "100%"),
    ]  # fmt: skip
    for p in points:
        assert set(p) == {"bs", "qd", "read", "region", "iops", "mbps", "p50_ms", "p99_ms",
                          "device_iops", "device_util"}  # fmt: skip
        assert p["iops"] > 0 and p["mbps"] == pytest.approx(p["iops"] * p["bs"] / 1e6, rel=1e-6)
    study_dir, doc = _study(results)
    assert doc["kind"] == "sweep" and doc["complete"] and len(doc["steps"]) == 8
    assert doc["varied"] == ["bs", "qd", "region"] and doc["label"] == "cache test"
    for step in doc["steps"]:
        run = json.loads((results / step["run_id"] / "run.json").read_text())
        stream = run["plan"]["streams"][0]
        point = step["point"]
        assert stream["sizes"] == [[point["bs"], 1.0]] and stream["qd"] == point["qd"]
        assert stream["regions"][0]["length"] == (
            1 << 20 if point["region"] == "1 MiB" else 4 << 20
        )
        assert run["label"] == f"cache test, {step['label']}"
    assert (study_dir / "points.csv").read_text().count("\n") == 9
    assert (study_dir / "report.html").stat().st_size > 0


def test_matrix_runs_small_and_large_streams_together(tmp_path, capsys):
    results = tmp_path / "results"
    args = ["matrix", "--target", str(tmp_path / "t.dat"), "--small-qd", "0,1,2",
            "--large-streams", "0,2", *FAST, "--results", str(results), "--json"]  # fmt: skip
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["small_levels"] == [0, 1, 2] and out["large_levels"] == [0, 2]
    # [large][small]; no small IOs in column 0, no large streams in row 0, no cell (0, 0).
    assert out["small_iops"][0][0] is None and out["large_mbps"][0] == [None, None, None]
    assert out["small_iops"][1][0] is None and out["large_mbps"][1][0] > 0
    assert all(v > 0 for v in out["small_iops"][0][1:] + out["small_latency_ms"][1][1:])
    study_dir, doc = _study(results)
    assert [(s["point"]["large"], s["point"]["small"]) for s in doc["steps"]] == [
        (0, 1), (0, 2), (2, 0), (2, 1), (2, 2),
    ]  # fmt: skip
    runs = [json.loads((results / s["run_id"] / "run.json").read_text()) for s in doc["steps"]]
    names = [[st["name"] for st in r["plan"]["streams"]] for r in runs]
    assert names == [["small"], ["small"], ["large0", "large1"], ["small", "large0", "large1"],
                     ["small", "large0", "large1"]]  # fmt: skip
    regions = [st["regions"][0] for st in runs[2]["plan"]["streams"]]
    assert regions[0]["offset"] == 0
    assert regions[1]["offset"] == regions[0]["length"] == 2 << 20
    large = runs[2]["plan"]["streams"]
    assert large[0]["sizes"] == [[1 << 20, 1.0]] and large[0]["pattern"]["kind"] == "sequential"
    csv = (study_dir / "small_iops.csv").read_text().splitlines()
    assert csv[0].endswith(",0,1,2") and csv[1].startswith("0,,")
    exported = tmp_path / "exported"
    assert main(["export", str(study_dir), "--csv", str(exported)]) == 0
    assert (exported / "small_iops.csv").read_text().splitlines() == csv
    assert (exported / "points.csv").read_text().count("\n") == 6


def test_curve_finds_a_maximum_then_offers_loads(tmp_path, capsys):
    results = tmp_path / "results"
    args = ["curve", "--target", str(tmp_path / "t.dat"), "--max-qd", "2", "--loads", "0.1,0.2",
            *FAST, "--results", str(results), "--json"]  # fmt: skip
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    phases = [p["phase"] for p in out["points"]]
    assert phases[-2:] == ["load", "load"] and set(phases[:-2]) == {"max"}
    assert out["max_iops"] == max(p["iops"] for p in out["points"] if p["phase"] == "max")
    assert out["slo_iops"] is None
    for p in out["points"][-2:]:
        assert p["offered_iops"] == pytest.approx(out["max_iops"] * p["offered_pct"] / 100)
        assert p["iops"] == pytest.approx(p["offered_iops"], rel=0.1)
        assert p["p50_ms"] is not None and p["p999_ms"] >= p["p99_ms"] >= p["p50_ms"]
    _, doc = _study(results)
    run = json.loads((results / doc["steps"][-1]["run_id"] / "run.json").read_text())
    arrival = run["plan"]["streams"][0]["arrival"]
    assert arrival["kind"] == "open" and arrival["dist"] == "poisson"


def _sweeps(tmp_path: Path, *lists: list[str]) -> tuple[Path, list[str]]:
    results = tmp_path / "results"
    ids = []
    for extra in lists:
        studies = results / "studies"
        before = set(studies.iterdir()) if studies.is_dir() else set()
        args = ["sweep", "--target", str(tmp_path / "t.dat"), *extra, *FAST,
                "--results", str(results), "--no-report"]  # fmt: skip
        assert main(args) == 0
        (new,) = set(studies.iterdir()) - before
        ids.append(new.name)
    return results, ids


def test_compare_two_sweeps_point_by_point_or_to_one_point(tmp_path, capsys):
    same = ["--bs", "4k,64k", "--qd", "1"]
    results, ids = _sweeps(tmp_path, same, same, ["--bs", "4k", "--qd", "1"])
    capsys.readouterr()
    assert main(["compare", "--results", str(results), ids[0], ids[1], "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "points" and doc["normalized_to"] is None
    by = {(m["metric"], m["scope"]): m["runs"] for m in doc["metrics"]}
    a, b = by[("IOPS", "64KiB/qd1/r100/100%")]
    assert a["normalized"] == 1.0 and b["normalized"] == pytest.approx(b["value"] / a["value"])

    # VMmark style: every value relative to the baseline's first point.
    args = ["compare", "--results", str(results), ids[0], ids[1], "--normalize-to", "1", "--json"]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["normalized_to"] == "4KiB/qd1/r100/100%"
    by = {(m["metric"], m["scope"]): m["runs"] for m in doc["metrics"]}
    ref = by[("IOPS", "4KiB/qd1/r100/100%")][0]["value"]
    for run in by[("IOPS", "64KiB/qd1/r100/100%")]:
        assert run["normalized"] == pytest.approx(run["value"] / ref)
    # The change is still between the sweeps at the same point, not against point 1.
    a, b = by[("IOPS", "64KiB/qd1/r100/100%")]
    assert b["change_pct"] == pytest.approx((b["value"] / a["value"] - 1) * 100)
    # The table prints the normalized values, the baseline's own included.
    args = ["compare", "--results", str(results), ids[0], ids[1], "--normalize-to", "1"]
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "divided by baseline" in table
    row = next(line for line in table.splitlines() if "IOPS 64KiB/qd1/r100/100%" in line)
    cells = row.split()
    assert cells[-3:] == [
        f"{a['normalized']:.2f}", f"{b['normalized']:.2f}", f"({b['change_pct']:+.1f}%)"
    ]  # fmt: skip
    report = tmp_path / "compare.html"
    args = ["compare", "--results", str(results), ids[0], ids[1], "--normalize-to",
            "64KiB/qd1/r100/100%", "-o", str(report)]  # fmt: skip
    assert main(args) == 0 and report.stat().st_size > 0

    for args, flag in (
        ([ids[0], ids[2]], "different definitions"),  # other IO sizes
        ([ids[0], ids[1], "--normalize-to", "9"], "--normalize-to"),
    ):
        capsys.readouterr()
        assert main(["compare", "--results", str(results), *args]) == 2
        err = capsys.readouterr().err
        assert flag in err and len(err.strip().splitlines()) == 1, err


def test_sigterm_keeps_the_points_measured_so_far(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    exe = Path(sys.executable).with_name("tilemark")
    results = tmp_path / "results"
    cmd = [str(exe), "sweep", "--target", str(tmp_path / "t.dat"), "--bs", "4k,8k,16k,32k",
           "--backend", "null", "--size", "4m", "--duration", "1", "--interval", "0.25",
           "--results", str(results), "--no-report"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    studies = results / "studies"
    deadline = time.monotonic() + 60
    # Once the first point is in study.json and the second point's run directory exists, the
    # second one is running: stop it a little into its measurement. (Stopping 0.3 s after the
    # first point alone could, on a loaded machine, land before the second run measured
    # anything.)
    while time.monotonic() < deadline:
        found = list(studies.glob("*/study.json")) if studies.is_dir() else []
        listed = results.iterdir() if results.is_dir() else []
        runs = [d for d in listed if d.is_dir() and d.name != "studies"]
        if found and json.loads(found[0].read_text() or "{}").get("steps") and len(runs) >= 2:
            break
        time.sleep(0.05)
    time.sleep(0.4)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    _, doc = _study(results)
    assert doc["complete"] is False and 1 <= len(doc["steps"]) < 4
    first = doc["steps"][0]
    assert first["complete"] and doc["points"][0]["iops"] > 0
    last = json.loads((results / doc["steps"][-1]["run_id"] / "run.json").read_text())
    assert last["status"] == "incomplete" and last["summary"]["total"]["iops"] > 0


def test_the_knee_is_where_p99_stays_above_twice_its_low_load_value():
    from tilemark.study.base import Attempt, StepBook, StepRecord, StepSpec
    from tilemark.study.curve import CurveStudy

    study = CurveStudy(loads_pct=[10, 20, 50, 80, 90, 100], max_qd=4, slo=[], definition={})
    book = StepBook()

    def add(params: dict, iops: float, p99: float) -> None:
        spec = StepSpec(len(book) + 1, "", params)
        stats = {"iops": iops, "p99_ms": p99, "p50_ms": p99 / 4, "p999_ms": p99 * 2}
        attempt = Attempt("r", "d", None, True, detail={"groups": {"stream": stats}})
        book.add(StepRecord(spec, 1, 0, [attempt]))

    add({"phase": "max", "qd": 1}, 1000, 1.0)
    add({"phase": "max", "qd": 2}, 1010, 1.0)
    # A noisy light load (10%), the low-load p99 at 20%, a blip at 50%, then queueing from 90%.
    for pct, p99 in ((10, 9.0), (20, 1.0), (50, 3.0), (80, 1.5), (90, 2.5), (100, 8.0)):
        add({"phase": "load", "pct": pct, "rate": 10.1 * pct, "qd": 64}, 10 * pct, p99)
    answer = study.answer(book)
    assert answer["max_iops"] == 1010 and answer["qd_at_max"] == 2
    assert answer["knee"]["offered_pct"] == 90 and answer["knee"]["base_p99_ms"] == 1.0
    assert study.next_step(book) is None  # no SLO: the loads were the last steps


@pytest.mark.parametrize(
    ("kind", "args", "metric", "point"),
    [
        ("matrix", ["--small-qd", "0,1", "--large-streams", "0,1"], "large MB/s", "L1/S0"),
        ("curve", ["--max-qd", "2", "--loads", "0.1,0.2"], "IOPS", "0.2%"),
    ],
)
def test_compare_matrices_and_curves_point_by_point(tmp_path, capsys, kind, args, metric, point):
    results = tmp_path / "results"
    studies = results / "studies"
    ids = []
    for _ in range(2):
        before = set(studies.iterdir()) if studies.is_dir() else set()
        cmd = [kind, "--target", str(tmp_path / "t.dat"), *args, *FAST, "--results",
               str(results), "--no-report"]  # fmt: skip
        assert main(cmd) == 0
        ids += [p.name for p in set(studies.iterdir()) - before]
    capsys.readouterr()
    assert main(["compare", "--results", str(results), *ids, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    by = {(m["metric"], m["scope"]): m["runs"] for m in doc["metrics"]}
    base, other = by[(metric, point)]
    assert base["normalized"] == 1.0
    assert other["normalized"] == pytest.approx(other["value"] / base["value"])
    if kind == "curve":
        assert ("max IOPS", "total") in by


def test_a_sweep_says_how_many_points_and_how_long_before_any_io(tmp_path, capsys):
    """issue 29: `--bs 8k,16k,...,64k` steps by addition (8 points, not 4); the count and the
    time it will take are printed before the first point runs."""
    status = main(["sweep", "--bs", "8k,16k,...,64k", "--target", str(tmp_path / "t.dat"),
                   *FAST, "--results", str(tmp_path / "r")])  # fmt: skip
    err = capsys.readouterr().err
    assert status == 0, err
    first = err.splitlines()[0]
    assert first.startswith("sweep: 8 points, about ") and "measured per point" in first, first
