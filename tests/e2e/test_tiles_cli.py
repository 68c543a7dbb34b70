"""`tilemark run --tiles N`, `tilemark scale` and `tilemark profiles` end to end, with real IO
on a small file: per-application results in the JSON and in run.json, a stored study, and
one-line usage errors before any IO."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tilemark._engine", reason="the engine is not built (make build)")

from tilemark.cli import main  # noqa: E402
from tilemark.workload.apps import DEFAULT_TILE, load_profile  # noqa: E402

pytestmark = [pytest.mark.cost(15)]

MIB = 1 << 20
CAPACITY = "512m"
LATENCY_QOS = {
    "mail": ["db_read_avg", "log_write_avg"],
    "oltp": ["read_avg", "read_p99", "redo_write_avg"],
    "dss": ["read_p99"],
    "web": ["read_avg", "read_p99"],
    "backup": [],
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """One directory (and one filled target) for the IO tests of this module."""
    return tmp_path_factory.mktemp("tiles")


def cli(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def without_verdicts(apps: dict) -> dict:
    out = {k: v for k, v in apps.items() if k != "layout"}
    out["instances"] = [{k: v for k, v in i.items() if k != "verdicts"} for i in apps["instances"]]
    return out


# -----------------------------------------------------------------------------------------------
# run --tiles


@pytest.mark.quick
def test_run_two_tiles_reports_every_application_instance(workdir, capsys):
    results = workdir / "results"
    status, out, err = cli(
        capsys,
        "run",
        "--tiles",
        "2",
        "--target",
        str(workdir / "t.dat"),
        "--capacity",
        CAPACITY,
        "--duration",
        "3",
        "--warmup",
        "1",
        "--json",
        "--set",
        "dss.mibps=20",
        "--set",
        "backup.mibps=10",
        "--results",
        str(results),
    )
    doc = json.loads(out)  # stdout is only the JSON document
    # A tile run whose QoS fails exits 3 (the run itself went fine).
    assert status == (0 if doc["summary"]["applications"]["passed"] else 3), err
    assert doc["complete"] is True
    run_dir = Path(doc["run_dir"])
    assert run_dir.parent == results.resolve() and run_dir.name == doc["run_id"]
    summary = doc["summary"]
    apps = summary["applications"]
    assert apps["tiles"] == 2
    assert "layout" not in apps

    instances = apps["instances"]
    assert [(i["tile"], i["app"]) for i in instances] == [
        (t, a) for t in (1, 2) for a in DEFAULT_TILE
    ]
    streams = {s["name"]: s for s in summary["streams"]}
    assert len(streams) == 2 * 12
    targets = {"mail": 1000, "oltp": 1000, "dss": 20 * MIB / 1e6, "web": 500, "backup": 10.48576}
    for i in instances:
        profile = load_profile(i["app"])
        assert i["profile"] == i["app"] and i["metric_unit"] == profile.metric_unit
        assert "verdicts" not in i
        assert isinstance(i["passed"], bool) and i["passed"] == (not i["failed"])
        assert i["errors"] == 0
        assert sorted(i["latency_ms"]) == sorted(LATENCY_QOS[i["app"]])
        assert i["target_metric"] == pytest.approx(targets[i["app"]], rel=1e-6)
        assert i["ratio"] == pytest.approx(i["metric"] / i["target_metric"])
        mine = [streams[f"t{i['tile']}.{i['app']}.{n}"] for n in profile.stream_names()]
        assert i["iops"] == pytest.approx(sum(s["total"]["iops"] for s in mine))
        assert i["mbps"] == pytest.approx(sum(s["total"]["mbps"] for s in mine))
        assert i["iops"] > 0
        # Half the requested rate is far below what any test machine does at these rates.
        assert i["metric"] > 0.5 * i["target_metric"], i
        assert set(i["streams"]) == set(profile.stream_names())
    by = {(i["tile"], i["app"]): i for i in instances}
    for t in (1, 2):
        assert by[(t, "oltp")]["metric"] == pytest.approx(
            streams[f"t{t}.oltp.data"]["total"]["iops"]
        )
        db_iops = streams[f"t{t}.mail.db"]["total"]["iops"]
        assert abs(by[(t, "mail")]["metric"] - math.floor(db_iops / 0.12)) <= 1

    per_app = {a["app"]: a for a in apps["applications"]}
    assert list(per_app) == list(DEFAULT_TILE)
    for name, a in per_app.items():
        mine = [i for i in instances if i["app"] == name]
        assert a["instances"] == 2
        assert a["metric_total"] == pytest.approx(sum(i["metric"] for i in mine))
        assert a["passed"] == all(i["passed"] for i in mine)
        for cid in LATENCY_QOS[name]:
            assert a["worst_latency_ms"][cid] == max(i["latency_ms"][cid] for i in mine)
    assert apps["passed"] == all(i["passed"] for i in instances)
    assert apps["failed"] == [
        f"t{i['tile']}.{i['app']}: {f}" for i in instances for f in i["failed"]
    ]
    geo = {
        t: math.exp(sum(math.log(by[(t, a)]["ratio"]) for a in DEFAULT_TILE) / len(DEFAULT_TILE))
        for t in (1, 2)
    }
    assert apps["score"] == pytest.approx(geo[1] + geo[2])

    # run.json holds the same applications section, with the verdicts and the layout.
    stored = json.loads((run_dir / "run.json").read_text())
    assert stored["run_id"] == doc["run_id"] and stored["kind"] == "tiles"
    stored_apps = stored["summary"]["applications"]
    assert without_verdicts(stored_apps) == apps
    for i in stored_apps["instances"]:
        ids = {v["criterion"] for v in i["verdicts"]}
        assert ids == {c.id for c in load_profile(i["app"]).qos}
        assert i["passed"] == all(v["passed"] for v in i["verdicts"])
    layout = stored_apps["layout"]
    assert layout["tile"] == "default" and layout["max_tiles"] == 2
    assert layout["capacity"] == 512 * MIB
    assert len(layout["regions"]) == 10
    plan_names = [s["name"] for s in stored["plan"]["streams"]]
    assert len(layout["streams"]) == len(plan_names) == 24
    for tag in layout["streams"]:
        assert plan_names[tag["index"]] == f"t{tag['tile']}.{tag['app']}.{tag['stream']}"
        assert tag["profile"] == tag["app"]
    # The overrides reached the plan: dss scans at 20 * 0.9 / 4 MiB/s, backup at 10 MiB/s.
    rates = {s["name"]: s["arrival"] for s in stored["plan"]["streams"]}
    assert rates["t2.dss.scan3"]["rate_bps"] == pytest.approx(4.5 * MIB)
    assert rates["t1.backup.stream"]["rate_bps"] == pytest.approx(10 * MIB)


# -----------------------------------------------------------------------------------------------
# scale

SMALL_RATES = [
    "mail.mailboxes=200",
    "oltp.iops=100",
    "dss.mibps=40",
    "web.iops=50",
    "backup.mibps=10",
]
# The default tile with QoS limits no healthy machine misses at the small rates above, so the
# study's verdicts do not depend on how busy the test machine is. (dss's throughput limit is
# also relaxed because of the window-edge bug pinned in test_apps.py.)
RELAXED_TILE = """\
[tile]
name = "relaxed"

[[app]]
profile = "mail"
[app.qos]
db_read_avg = { max_ms = 2000 }
log_write_avg = { max_ms = 2000 }
db_iops = { min_fraction = 0.5 }

[[app]]
profile = "oltp"
[app.qos]
read_avg = { max_ms = 2000 }
read_p99 = { max_ms = 2000 }
redo_write_avg = { max_ms = 2000 }
data_iops = { min_fraction = 0.5 }

[[app]]
profile = "dss"
[app.qos]
throughput = { min_fraction = 0.5 }
read_p99 = { max_ms = 2000 }

[[app]]
profile = "web"
[app.qos]
read_avg = { max_ms = 2000 }
read_p99 = { max_ms = 2000 }
iops = { min_fraction = 0.5 }

[[app]]
profile = "backup"
[app.qos]
throughput = { min_fraction = 0.5 }
"""


def test_scale_stores_a_study_linking_its_runs(workdir, capsys):
    results = workdir / "results"
    tile_file = workdir / "relaxed.toml"
    tile_file.write_text(RELAXED_TILE)
    sets = [x for item in SMALL_RATES for x in ("--set", item)]
    status, out, err = cli(
        capsys,
        "scale",
        str(tile_file),
        "--target",
        str(workdir / "t.dat"),
        "--capacity",
        CAPACITY,
        "--tiles",
        "1..2",
        "--duration",
        "1.5",
        "--warmup",
        "0.5",
        "--json",
        *sets,
        "--results",
        str(results),
    )
    assert status == 0, err
    doc = json.loads(out)
    assert doc["kind"] == "scale" and doc["mode"] == "linear" and doc["confirm"] == 1
    assert doc["complete"] is True
    assert doc["tile"]["name"] == "relaxed" and doc["tile"]["source"] == str(tile_file)
    assert doc["tile_counts"] == [1, 2]
    assert doc["capacity"] == 512 * MIB
    apps = {a["app"]: a for a in doc["tile"]["applications"]}
    assert list(apps) == list(DEFAULT_TILE)
    assert apps["mail"]["scale"]["mailboxes"] == 200 and apps["oltp"]["scale"]["iops"] == 100
    assert {q["id"]: q["max_ms"] for q in apps["oltp"]["qos"]}["read_p99"] == 2000
    steps = doc["steps"]
    assert [s["tiles"] for s in steps] == [1, 2]
    assert doc["runs_used"] == 2
    assert [s["passed"] for s in steps] == [True, True], [s["failed"] for s in steps]
    assert doc["max_passing_tiles"] == 2
    assert doc["score_at_max"] == steps[1]["score"] == pytest.approx(2, rel=0.3)
    assert doc["first_failure"] is None

    regions = {}
    for s in steps:
        run_dir = Path(s["run_dir"])
        assert run_dir.is_dir() and run_dir.name == s["run_id"]
        stored = json.loads((run_dir / "run.json").read_text())
        assert stored["kind"] == "scale-step" and stored["run_id"] == s["run_id"]
        stored_apps = stored["summary"]["applications"]
        assert stored_apps["tiles"] == s["tiles"] and stored_apps["passed"] == s["passed"]
        assert [(i["tile"], i["app"]) for i in s["instances"]] == [
            (t, a) for t in range(1, s["tiles"] + 1) for a in DEFAULT_TILE
        ]
        assert [a["app"] for a in s["applications"]] == list(DEFAULT_TILE)
        # Every step is laid out for the largest count, so tile 1 uses the same bytes.
        assert stored_apps["layout"]["max_tiles"] == 2
        regions[s["tiles"]] = [r for r in stored_apps["layout"]["regions"] if r["tile"] == 1]
    assert regions[1] == regions[2]

    study_json = results / "studies" / doc["study_id"] / "study.json"
    assert json.loads(study_json.read_text()) == doc


# -----------------------------------------------------------------------------------------------
# Bad input: exit 2, one line naming the field, no IO


def _bad_cases():
    base = ["--capacity", CAPACITY, "--duration", "1", "--warmup", "0"]
    return [
        pytest.param(["run", "--tiles", "0", *base], ["--tiles", "0"], id="tiles-0"),
        pytest.param(["scale", "--tiles", "3..1", *base], ["--tiles", "3..1"], id="scale-3..1"),
        pytest.param(["scale", "--tiles", "a", *base], ["--tiles", "'a'"], id="scale-a"),
        pytest.param(
            ["run", "--tiles", "1", "--set", "mail.nosuchknob=1", *base],
            ["mail", "nosuchknob"],
            id="unknown-knob",
        ),
        pytest.param(
            ["run", "--tiles", "1", "--set", "nosuchapp.iops=1", *base],
            ["nosuchapp"],
            id="unknown-app",
        ),
        pytest.param(
            ["scale", "--tiles", "1..2", "--set", "oltp.qos.nosuch.max_ms=1", *base],
            ["oltp", "nosuch"],
            id="unknown-criterion",
        ),
        pytest.param(
            ["run", "--tiles", "1", "--tile", "{tmp}/missing.toml", *base],
            ["tile file", "missing.toml"],
            id="missing-tile-file",
        ),
        pytest.param(
            ["run", "--tiles", "1", "--rw", "randread", *base],
            ["--tiles", "cannot be combined"],
            id="stream-option-clash",
        ),
        pytest.param(
            ["run", "--tiles", "1", "--size", "1g", *base], ["--tiles", "--size"], id="size-clash"
        ),
        pytest.param(["run", "--capacity", "1g"], ["--capacity", "--tiles"], id="no-tiles"),
        pytest.param(
            ["run", "--tiles", "1", "--capacity", "5m"], ["--capacity", "5 MiB"], id="capacity-5m"
        ),
        pytest.param(
            ["scale", "--tiles", "1..8", "--capacity", "60m"],
            ["--capacity", "8 tile"],
            id="scale-capacity-60m",
        ),
        pytest.param(["run", "--tiles", "1", "--capacity", "1k"], ["--capacity"], id="capacity-1k"),
        pytest.param(
            ["scale", "--tiles", "1..2", "--confirm", "-1", *base], ["--confirm"], id="confirm"
        ),
    ]


@pytest.mark.parametrize("args, named", _bad_cases())
@pytest.mark.quick
def test_bad_input_is_one_line_exit_2_before_any_io(tmp_path, capsys, args, named):
    target = tmp_path / "t.dat"
    results = tmp_path / "results"
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    status, out, err = cli(capsys, *args, "--target", str(target), "--results", str(results))
    assert status == 2, err
    assert out == ""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("tilemark: error: ")
    for word in named:
        assert word in lines[0], lines[0]
    assert not target.exists() and not results.exists()


def test_bad_input_from_the_installed_command_has_no_traceback(tmp_path):
    exe = Path(sys.executable).with_name("tilemark")
    if not exe.exists():
        pytest.skip(f"{exe} is not installed")
    proc = subprocess.run(
        [str(exe), "run", "--tiles", "1", "--target", "t.dat", "--set", "mail.nosuchknob=1"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "nosuchknob" in proc.stderr
    assert list(tmp_path.iterdir()) == []


# -----------------------------------------------------------------------------------------------
# profiles

BUILTIN = sorted(
    [
        "backup", "database", "dss", "fileserver", "mail", "oltp", "streaming-read",
        "streaming-write", "web", "workstation",
        # faithful to the seed studies (docs/tiles.md)
        "esg-backup", "iometer-4k-7030", "iometer-512b-5050", "iometer-webserver",
        "jetstress-2010", "orion-dss", "orion-oltp", "vmmark-mail", "vmmark-standby",
        "vmmark-web",
    ]
)  # fmt: skip


@pytest.mark.quick
def test_profiles_lists_every_built_in(capsys):
    status, out, err = cli(capsys, "profiles")
    assert status == 0, err
    for name in BUILTIN:
        assert f" {name} " in out, name
    assert "mailboxes=1000" in out and "searched:" in out
    status, out, _ = cli(capsys, "profiles", "--json")
    assert status == 0
    rows = json.loads(out)
    assert [r["name"] for r in rows] == BUILTIN
    assert {r["name"]: r["kind"] for r in rows}["oltp"] == "application"
    assert {r["name"]: r["scale"] for r in rows}["web"] == {"iops": 500}


def test_profiles_show_mail_json_has_streams_rates_and_qos_ids(capsys):
    status, out, err = cli(capsys, "profiles", "show", "mail", "--json")
    assert status == 0, err
    doc = json.loads(out)
    assert doc["name"] == "mail" and doc["metric_unit"] == "mailboxes"
    assert doc["scale"] == {"mailboxes": 1000, "iops_per_mailbox": 0.12}
    assert [q["id"] for q in doc["qos"]] == ["db_read_avg", "log_write_avg", "db_iops"]
    qos = {q["id"]: q for q in doc["qos"]}
    assert qos["db_read_avg"]["max_ms"] == 20 and qos["db_iops"]["min_fraction"] == 1.0
    streams = {s["name"]: s for s in doc["streams"]}
    assert list(streams) == ["db", "log", "bdm"]
    assert streams["db"]["rate"] == {"iops": pytest.approx(120)}
    assert streams["log"]["rate"] == {"iops": pytest.approx(12)}
    assert streams["bdm"]["rate"] == {"bps": MIB}
    assert streams["db"]["region"] == [0.0, 0.95]


def test_profiles_show_text_and_unknown_name(capsys):
    status, out, _ = cli(capsys, "profiles", "show", "oltp")
    assert status == 0
    for word in ("read_avg", "read_p99", "redo_write_avg", "data_iops", "1000 IOPS", "250 IOPS"):
        assert word in out, word
    assert "evidence against postgresql: overall 0.768; below 0.90: sync_share 0.294" in out
    status, out, err = cli(capsys, "profiles", "show", "nosuch")
    assert status == 2 and out == ""
    assert err.strip().splitlines() == [
        "tilemark: error: unknown profile 'nosuch' (known: " + ", ".join(BUILTIN) + ")."
    ]


@pytest.mark.quick
def test_an_existing_target_keeps_its_size_unless_a_larger_one_is_asked_for(tmp_path, capsys):
    """issue 29: the default capacity silently grew a 64 MiB target to 2 GiB. An existing
    target's size is the default; growing it is asked for, and said."""
    target, results = tmp_path / "t.dat", tmp_path / "r"
    fast = ["--duration", "0.3", "--interval", "0.1", "--warmup", "0", "--backend", "null",
            "--results", str(results)]  # fmt: skip
    status, _, err = cli(capsys, "run", "--target", str(target), "--size", "64m", "--rw", "read",
                         *fast)  # fmt: skip
    assert status == 0, err
    assert target.stat().st_size == 4096 + 64 * MIB
    status, _, err = cli(capsys, "run", "--tiles", "1", "--target", str(target), *fast)
    assert status in (0, 3), err
    assert target.stat().st_size == 4096 + 64 * MIB  # the tiles fit the existing 64 MiB
    assert "growing" not in err
    status, _, err = cli(capsys, "run", "--tiles", "1", "--target", str(target),
                         "--capacity", "96m", *fast)  # fmt: skip
    assert status in (0, 3), err
    assert target.stat().st_size == 4096 + 96 * MIB
    assert f"growing {target} from 64 MiB to 96 MiB (a larger size was asked for)" in err


def test_oltp_evidence_is_the_committed_benchmark_result():
    """oltp's [evidence.postgresql] scores are bench/fidelity.py's, as its results file has
    them (the table of the built-in profile against PostgreSQL), property by property."""
    profile = load_profile("oltp")
    evidence = profile.evidence["postgresql"]
    results = Path(__file__).resolve().parents[2] / evidence["source"].split("; ")[-1]
    text = results.read_text()
    table = text.split("### built-in `oltp` against postgresql", 1)[1].split("<details>", 1)[0]
    measured = {}
    for line in table.splitlines():
        cells = [c.strip().strip("*") for c in line.strip("|").split("|")]
        if len(cells) == 2 and cells[1].replace(".", "", 1).isdigit():
            measured[cells[0]] = float(cells[1])
    scores = {k: v for k, v in evidence.items() if isinstance(v, float)}
    assert len(measured) == 17 and scores == measured
