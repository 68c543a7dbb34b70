"""`tilemark example`: every shipped example runs end to end in its quick form, writes the
outputs its README names for the seed's tables and figures, and the command lists, shows and
plans them; bad use is one sentence."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tilemark.cli import main
from tilemark.example import EXAMPLES_DIR, find_example, list_examples

from .test_report_browser import check_report

pytestmark = [pytest.mark.cost(55)]

# Every test of the session's example runs is in this file, and `make test` hands whole files
# to its workers (--dist loadfile): the examples run once, not once per worker.

SHIPPED = (
    "000-esg-mixed-workload",
    "001-dmx-orion-sweep",
    "002-v7000-iometer-compression-tiering",
    "003-vmmark-hdd-vs-flash",
    "004-netapp-esrp-decay",
)


def test_the_shipped_examples_are_the_seed_studies_tilemark_can_run_today():
    assert [e.name for e in list_examples()] == list(SHIPPED)
    assert (EXAMPLES_DIR.parents[2] / "examples").resolve() == EXAMPLES_DIR.resolve()


@pytest.mark.parametrize("name", SHIPPED)
def test_every_example_runs_quick_and_writes_what_its_readme_names(example_runs, name):
    example = find_example(name)
    readme = example.readme.read_text()
    done = example_runs[name]
    assert [r.step.name for r in done] == [s.name for s in example.steps], "every step ran"
    for r in done:
        # 3 is an answer (QoS failed on this machine), not a failure of the example.
        assert r.status in (0, 3), (r.step.name, r.argv)
        assert "--quick" not in r.argv and r.argv[r.argv.index("--results") + 1]
        for output, path in r.outputs:
            assert path.is_file() and path.stat().st_size > 0, (output.seed, path)
            assert output.seed in readme, f"the README maps {output.seed!r}"
            assert f"`{output.file}`" in readme, f"the README names {output.file}"
    # The README states the exact command of each step (its first words and the tile file).
    for step in example.steps:
        assert f"tilemark {step.args[0]} " in readme


def _study(done, step: str) -> dict:
    r = next(r for r in done if r.step.name == step)
    return json.loads((r.study / "study.json").read_text())


def test_the_seed_002_example_measures_the_data_it_compresses_and_tiering_before_after(
    example_runs,
):
    done = {r.step.name: r for r in example_runs["002-v7000-iometer-compression-tiering"]}
    test1 = json.loads((done["test1"].study / "run.json").read_text())
    (app,) = test1["summary"]["applications"]["instances"]
    assert app["profile"] == "iometer-512b-5050" and app["iops"] > 0
    ratios = {}
    for name in ("incompressible", "compressible"):
        run = json.loads((done[name].study / "run.json").read_text())
        assert len(run["plan"]["streams"]) == 32  # the seed's 32 workers
        ratios[name] = run["summary"]["data_reduction"]["overall"]["zstd"]
    assert ratios["incompressible"] == pytest.approx(1.0, abs=0.02)
    assert ratios["compressible"] == pytest.approx(1 / 0.68, rel=0.1)  # 32% compressible
    gain = done["compression-gain"]
    assert gain.argv[1:3] == [done["incompressible"].study.name, done["compressible"].study.name]
    tiering = json.loads((done["tiering"].study / "study.json").read_text())
    assert [s["repetition"] for s in tiering["steps"]] == [1, 2]
    html = done["before-after"].outputs[0][1].read_text()
    assert tiering["first_run_id"] in html and tiering["last_run_id"] in html


def test_the_seed_004_example_repeats_jetstress_with_a_timed_checksum_pass(example_runs):
    study = _study(example_runs["004-netapp-esrp-decay"], "runs")
    assert [s["repetition"] for s in study["steps"]] == list(range(1, 8))
    by_name = {(m["metric"], m["scope"]): m for m in study["metrics"]}
    passes = by_name[("verification pass", "total")]["values"]
    assert len(passes) == 7 and all(v is not None and v > 0 for v in passes)
    assert by_name[("verification findings", "total")]["values"] == [0] * 7
    assert study["verdict"] in ("stable", "decaying", "improving", "inconclusive")
    # Database and log on their own targets, each checked by its own pass.
    first = json.loads((Path(study["steps"][0]["run_dir"]) / "run.json").read_text())
    assert [t["name"] for t in first["plan"]["targets"]] == ["db", "log"]
    assert len(first["verify_passes"]) == 2
    assert all(p["total"] == 0 and p["checked"] > 0 for p in first["verify_passes"])


def test_the_seed_000_tile_ran_each_tile_count_with_the_seeds_applications(example_runs):
    study = _study(example_runs["000-esg-mixed-workload"], "tiles")
    assert [s["tiles"] for s in study["steps"]] == [1, 2]
    apps = [a["app"] for a in study["tile"]["applications"]]
    assert apps == ["exchange", "oltp", "olap", "web", "backup"]
    assert study["tile"]["applications"][0]["scale"]["mailboxes"] == 5067  # Table 1's one tile
    one = {a["app"]: a for a in study["steps"][0]["applications"]}
    assert one["exchange"]["metric_unit"] == "mailboxes"
    assert one["exchange"]["iops"] > 0.5 * 5067 * 0.12  # open loop: the seed's load was offered
    assert one["backup"]["metric_unit"] == "MB/s" and one["olap"]["metric_unit"] == "MB/s"
    assert (study["steps"][0]["total"]["iops"]) > 0


def test_the_seed_001_sweep_has_front_and_back_end_per_io_size(example_runs):
    (r,) = example_runs["001-dmx-orion-sweep"]
    with open(r.study / "points.csv") as f:
        points = list(csv.DictReader(f))
    assert sorted({int(p["bs"]) for p in points}) == [8192, 1 << 20]
    assert sorted({int(p["qd"]) for p in points}) == [1, 4]
    for p in points:
        assert float(p["iops"]) > 0 and p["read"] == "100.0"
        # The back end as the host sees it: the devices under the file (none on tmpfs).
        assert "device_iops" in p


def test_the_seed_003_comparison_has_flash_against_hdd(example_runs):
    done = example_runs["003-vmmark-hdd-vs-flash"]
    hdd, flash = _study(done, "hdd"), _study(done, "flash")
    assert (hdd["label"], flash["label"]) == ("HDD", "flash")
    assert hdd["tile"]["applications"] == flash["tile"]["applications"]
    compare = next(r for r in done if r.step.name == "compare")
    assert compare.argv[1:3] == [hdd["study_id"], flash["study_id"]]
    html = compare.outputs[0][1].read_text()
    assert hdd["study_id"] in html and flash["study_id"] in html


def test_the_command_lists_shows_and_plans_examples(capsys, tmp_path):
    assert main(["example"]) == 0
    listed = capsys.readouterr().out
    assert all(n in listed for n in SHIPPED)
    assert main(["example", "show", "1"]) == 0
    shown = capsys.readouterr().out
    assert "Figure 1: FA Director IOPS" in shown and "quick form (--quick):" in shown
    # The README is rendered, not printed raw: no Markdown heading marks or code fences, and
    # its prose wraps at a readable width even on a pipe.
    assert "```" not in shown and not any(line.startswith("#") for line in shown.splitlines())
    assert max(len(line) for line in shown.split("files:")[0].splitlines()) <= 100
    args = ["example", "run", "003", "--target", "/dev/h", "--target", str(tmp_path / "f.dat"),
            "--destroy-data", "/dev/h", "--dry-run", "--results", str(tmp_path), "--",
            "--capacity", "2t", "--duration", "10m"]  # fmt: skip
    assert main(args) == 0
    hdd, flash, compare = capsys.readouterr().out.strip().splitlines()
    assert "--target /dev/h --capacity 2t" in hdd and "--destroy-data /dev/h" in hdd
    assert "--duration 10m" in flash and "--destroy-data" not in flash
    assert compare.startswith("tilemark compare '{study:hdd}'") and "--capacity" not in compare
    assert not any(tmp_path.iterdir()), "a dry run writes nothing"


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "nope", "--target", "x"], "unknown example 'nope' (examples: 000-esg"),
        (["run", "003", "--target", "x"], "needs 2 target(s): give --target for hdd, then flash"),
        (["run", "000"], "--target is required"),
        (["run", "000", "--target", "x", "--destroy-data", "y"], "--destroy-data y must name"),
        (["run", "000", "--target", "x", "--", "oops"], "after --, give tilemark flags"),
        (["run", "000", "--target", "x", "--force"], "--force only applies together with"),
    ],
)
def test_bad_use_is_one_sentence_exit_2(capsys, args, message):
    assert main(["example", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


EXAMPLE_REPORTS = [
    "example-000-esg-mixed-workload-tiles",
    "example-001-dmx-orion-sweep-sweep",
    "example-003-vmmark-hdd-vs-flash-hdd",
    "example-003-vmmark-hdd-vs-flash-flash",
    "example-003-vmmark-hdd-vs-flash-compare",
]


@pytest.fixture(scope="module")
def example_reports(example_runs) -> dict[str, Path]:
    """The HTML reports of every shipped example's quick run, as its steps wrote them: the
    report.html a study step writes in its study directory, and the report files a step
    writes (the files a user of `tilemark example run NAME` opens)."""
    from tilemark.report import REPORT_FILE

    paths: dict[str, Path] = {}
    for name, done in example_runs.items():
        for step in done:
            key = f"example-{name}-{step.step.name}"
            if step.study is not None and step.step.makes == "study":
                paths[key] = step.study / REPORT_FILE
            elif step.step.makes == "file":
                for _output, path in step.outputs:
                    if path.suffix == ".html":
                        paths[key] = path
    return paths


@pytest.mark.browser
@pytest.mark.parametrize("kind", EXAMPLE_REPORTS)
def test_every_example_report_renders(browser, example_reports, kind, tmp_path):
    """The reports of every shipped example's quick run in a real browser (what a user of
    `tilemark example run NAME` opens)."""
    assert set(EXAMPLE_REPORTS) <= set(example_reports), sorted(example_reports)
    assert example_reports[kind].is_file(), example_reports[kind]
    check_report(browser, example_reports[kind], kind, tmp_path)
