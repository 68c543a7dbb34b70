"""Many targets per run and phases, on real rigs (issue 9): a stream spread over two files,
Orion's matrix over two loop devices, a phased stream, tiles placed on targets, bad input.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tilemark.cli import main

from .rigs import loop_device, need_root, ram_dir

pytestmark = [pytest.mark.root, pytest.mark.loopdev, pytest.mark.cost(14)]

MiB = 1 << 20
HEADER = 4096  # a tilemark file's data area starts after its marker header


def _results(tmp_path: Path, *args: str) -> tuple[int, Path]:
    results = tmp_path / "results"
    return main([*args, "--results", str(results)]), results


def _run_doc(results: Path) -> tuple[dict, Path]:
    (run_dir,) = [p for p in results.iterdir() if (p / "run.json").is_file()]
    return json.loads((run_dir / "run.json").read_text()), run_dir


def _shm(tmp_path: Path, name: str) -> Path:
    return ram_dir() / f"tilemark-{os.getpid()}-{tmp_path.name}-{name}"


def _blocks(path: Path) -> list[bytes]:
    data = path.read_bytes()[HEADER:]
    return [data[i : i + 4096] for i in range(0, len(data), 4096)]


@pytest.mark.parametrize("spread, share_a", [("uniform", 0.5), ("size", 0.25)])
def test_a_stream_over_two_files_spreads_its_ios_and_writes_both(tmp_path, spread, share_a):
    # 8 MiB and 24 MiB: uniform gives each half the IOs, size a quarter and three quarters.
    # One file on disk, one on tmpfs (no block device: its telemetry says unavailable).
    a, b = tmp_path / "a.dat", _shm(tmp_path, "b.dat")
    try:
        for path, size in ((a, "8m"), (b, "24m")):
            assert main(["run", "--target", str(path), "--size", size, "--buffered",
                         "--rw", "randread", "--duration", "0.1", "--results",
                         str(tmp_path / "fill")]) == 0  # fmt: skip
        before = {p: _blocks(p) for p in (a, b)}
        code, results = _results(
            tmp_path, "run", "--target", f"a={a}", "--target", f"b={b}", "--buffered",
            "--rw", "randwrite", "--qd", "4", "--spread", spread, "--duration", "1",
            "--interval", "250ms", "--json",
        )  # fmt: skip
        assert code == 0
        doc, run_dir = _run_doc(results)
        after = {p: _blocks(p) for p in (a, b)}
    finally:
        b.unlink(missing_ok=True)
    summary = doc["summary"]
    by_name = {t["name"]: t for t in summary["targets"]}
    ops = {n: by_name[n]["write_ops"] for n in ("a", "b")}
    total = ops["a"] + ops["b"]
    assert total > 2000 and total == sum(s["write"]["ops"] for s in summary["streams"])
    assert ops["a"] / total == pytest.approx(share_a, abs=0.03), ops
    # The bytes landed in both files: each has blocks the run rewrote.
    changed = {p: sum(x != y for x, y in zip(before[p], after[p], strict=True)) for p in (a, b)}
    assert changed[a] > 0 and changed[b] > 0
    assert doc["plan"]["streams"][0]["spread"] == spread
    assert [t["name"] for t in doc["plan"]["targets"]] == ["a", "b"]
    notes = " ".join(summary.get("notes") or [])
    assert f"device telemetry unavailable for {b}" in notes
    # Per target and interval, targets.parquet adds up to the summary's counts.
    rows = pq.read_table(run_dir / "targets.parquet").to_pylist()
    measured = [r for r in rows if r["phase"] == "measure" and r["op"] == "write"]
    for name in ("a", "b"):
        assert sum(r["ops"] for r in measured if r["target_name"] == name) == ops[name]
    # export --csv carries the breakdown too.
    assert main(["export", str(run_dir), "--csv", str(tmp_path / "csv")]) == 0
    lines = (tmp_path / "csv" / "targets.csv").read_text().splitlines()
    assert len(lines) == 3 and lines[1].split(",")[1] == "a"
    assert (tmp_path / "csv" / "target_intervals.csv").stat().st_size > 0


def test_a_phased_stream_issues_ios_only_inside_its_phase(tmp_path):
    workload = tmp_path / "phases.toml"
    workload.write_text(
        f'target = "{tmp_path / "t.dat"}"\nsize = "8m"\nduration = "3s"\ninterval = "250ms"\n'
        'direct = false\nbackend = "psync"\n'
        '[[stream]]\nname = "load"\nrw = "randread"\n'
        '[[stream]]\nname = "check"\nrw = "randread"\nstart = "1s"\nstop = "2s"\n'
    )
    code, results = _results(tmp_path, "run", str(workload))
    assert code == 0
    doc, run_dir = _run_doc(results)
    rows = pq.read_table(run_dir / "intervals.parquet").to_pylist()
    per_interval: dict[tuple[int, int], int] = {}
    for r in rows:
        key = (r["interval"], r["start_ns"])
        per_interval.setdefault(key, 0)
        if r["stream_name"] == "check":
            per_interval[key] += r["ops"]
    interval_ns = 250_000_000
    for (_, start), ops in sorted(per_interval.items()):
        end = start + interval_ns
        if end <= 1e9 - interval_ns or start >= 2e9 + interval_ns:
            assert ops == 0, f"IOs in [{start / 1e9}, {end / 1e9}) outside the phase"
        elif 1e9 + interval_ns <= start and end <= 2e9 - interval_ns:
            assert ops > 0, f"no IO in [{start / 1e9}, {end / 1e9}) inside the phase"
    check = next(s for s in doc["summary"]["streams"] if s["name"] == "check")
    assert (check["start_s"], check["stop_s"], check["active_s"]) == (1.0, 2.0, 1.0)
    # Its rate is over its second of activity, not over the three of the run.
    assert check["total"]["iops"] == pytest.approx(check["read"]["ops"] / 1.0)


def test_the_matrix_runs_on_two_loop_devices_as_two_targets(tmp_path):
    need_root()
    images = [_shm(tmp_path, f"m{i}.img") for i in range(2)]
    try:
        with loop_device(images[0], 64 * MiB) as dev0, loop_device(images[1], 64 * MiB) as dev1:
            code, results = _results(
                tmp_path, "matrix", "--target", dev0, "--target", dev1, "--small-qd", "0,2",
                "--large-streams", "0,2", "--large-bs", "256k", "--duration", "0.5",
                "--interval", "250ms", "--no-report", "--json",
            )  # fmt: skip
    finally:
        for image in images:
            image.unlink(missing_ok=True)
    assert code == 0
    (study,) = (results / "studies").iterdir()
    doc = json.loads((study / "study.json").read_text())
    names = {Path(dev0).name, Path(dev1).name}
    for step in doc["steps"]:
        run = json.loads((results / step["run_id"] / "run.json").read_text())
        assert [t["path"] for t in run["plan"]["targets"]] == [dev0, dev1]
        devices = {d["device"]: d for d in run["summary"]["telemetry"]["devices"]}
        assert names <= set(devices), devices.keys()
        for name in names:
            # Small IOs spread over both devices; large stream i goes to target i mod 2.
            assert devices[name]["reads"] > 0, (step["label"], name)
        targets = run["summary"]["targets"]
        assert all(t["read_ops"] > 0 for t in targets)
    large = [s for s in run["plan"]["streams"] if s["name"].startswith("large")]
    assert [s["regions"][0]["target"] for s in large] == [0, 1]


def _tile_plan(results: Path) -> tuple[list[dict], list[dict]]:
    doc, _ = _run_doc(results)
    return doc["plan"]["streams"], doc["plan"]["targets"]


TILE_FAST = ["--warmup", "0", "--duration", "0.5", "--interval", "250ms", "--backend", "null",
             "--capacity", "256m", "--buffered"]  # fmt: skip


def test_tiles_go_to_targets_round_robin_and_as_mapped(tmp_path):
    a, b = tmp_path / "a.dat", tmp_path / "b.dat"
    code, results = _results(
        tmp_path, "run", "--tiles", "2", "--target", f"a={a}", "--target", f"b={b}",
        "--set", "mail.log.target=b", *TILE_FAST,
    )  # fmt: skip
    assert code in (0, 3)  # QoS on the null backend is not the question here
    streams, targets = _tile_plan(results)
    names = [t["name"] for t in targets]
    where = {s["name"]: names[s["regions"][0]["target"]] for s in streams}
    assert where["t1.mail.log"] == "b" and where["t2.mail.log"] == "b"
    assert {t for n, t in where.items() if n.startswith("t1.") and n != "t1.mail.log"} == {"a"}
    assert {t for n, t in where.items() if n.startswith("t2.")} == {"b"}
    # Mapped alone onto b, mail's log is stretched over mail's share there.
    log = next(s for s in streams if s["name"] == "t1.mail.log")["regions"][0]
    assert log["length"] >= 8 * MiB

    # scale: tile 1 measures the same bytes of the same target at every step.
    code, results = _results(
        tmp_path, "scale", "--tiles", "1..2", "--target", f"a={a}", "--target", f"b={b}",
        "--no-settle", "--no-report", *TILE_FAST,
    )  # fmt: skip
    assert code in (0, 3)
    runs = sorted((p for p in results.iterdir() if (p / "run.json").is_file()), key=str)
    plans = [json.loads((p / "run.json").read_text())["plan"] for p in runs]
    by_count: dict[int, dict[str, dict]] = {}
    for plan in plans:
        count = max(int(s["name"].split(".")[0][1:]) for s in plan["streams"])
        by_count[count] = {s["name"]: s["regions"][0] for s in plan["streams"]}
    assert set(by_count) == {1, 2}
    for name, region in by_count[1].items():
        assert by_count[2][name] == region
    assert {r["target"] for n, r in by_count[2].items() if n.startswith("t2.")} == {1}


def test_a_target_path_with_tile_gives_each_tile_a_file_of_its_own(tmp_path, capsys):
    data, logs = tmp_path / "data.dat", str(tmp_path / "log-{tile}.dat")
    pinned = [x for app in ("mail", "oltp", "dss", "web", "backup")
              for x in ("--set", f"{app}.target=data")]  # fmt: skip
    fast = [x for x in TILE_FAST if x not in ("--backend", "null")]  # real IO
    code, results = _results(
        tmp_path, "run", "--tiles", "2", "--target", f"data={data}", "--target", f"log={logs}",
        *pinned, "--set", "mail.log.target=log", *fast,
    )  # fmt: skip
    assert code in (0, 3)
    doc, _ = _run_doc(results)
    by_name = {t["name"]: t for t in doc["summary"]["targets"]}
    assert list(by_name) == ["data", "log.1", "log.2"]
    for k in (1, 2):
        log = by_name[f"log.{k}"]
        assert log["path"] == str(tmp_path / f"log-{k}.dat")
        assert log["streams"] == [f"t{k}.mail.log"] and log["write_ops"] > 0
        # Each file is one tile's slot: half the capacity, from the file's start.
        assert (tmp_path / f"log-{k}.dat").stat().st_size == HEADER + 128 * MiB
        stream = next(s for s in doc["plan"]["streams"] if s["name"] == f"t{k}.mail.log")
        (region,) = stream["regions"]
        assert region["target"] == k and region["offset"] == 0
    assert not (tmp_path / "log-{tile}.dat").exists()

    # Outside a tile run it is one sentence, and nothing is written.
    capsys.readouterr()
    plain = tmp_path / "plain"
    code = main(["run", "--target", str(tmp_path / "x-{tile}.dat"), "--rw", "randread",
                 "--size", "4m", "--duration", "1", "--results", str(plain)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "only tile runs have" in err and "Traceback" not in err, err
    assert not plain.exists() and not list(tmp_path.glob("x-*"))


BAD_INPUT = [
    (["--target", "{t}/a.dat", "--target", "{t}/a.dat"], "is given twice"),
    (["--rw", "randread", "--start", "2s", "--stop", "1s"], "--start 2 s is not before"),
    (["--rw", "randread", "--stop", "10s"], "--stop 10 s is past the end of the run"),
]


@pytest.mark.parametrize("args, sentence", BAD_INPUT)
def test_bad_flags_are_one_sentence_and_write_nothing(tmp_path, capsys, args, sentence):
    args = [a.format(t=tmp_path) for a in args]
    if "--target" not in args:
        args += ["--target", str(tmp_path / "t.dat")]
    code, results = _results(tmp_path, "run", *args, "--size", "4m", "--duration", "2")
    err = capsys.readouterr().err
    assert code == 2 and sentence in err and "Traceback" not in err, err
    assert not results.exists() and not (tmp_path / "t.dat").exists()


BAD_FILES = [
    ('[[target]]\nname = "a"\n', "[[target]] 1 ('a') has no path"),
    ('target = "{t}/a.dat"\n[[stream]]\nrw = "randread"\ntarget = "db9"\n',
     "target 'db9' is not a target of the workload"),
    ('target = "{t}/a.dat"\n[[stream]]\nrw = "randread"\ntarget = []\n',
     "target must be a target name or a list of one or more target names"),
]  # fmt: skip


@pytest.mark.parametrize("text, sentence", BAD_FILES)
def test_bad_workload_files_are_one_sentence_and_write_nothing(tmp_path, capsys, text, sentence):
    workload = tmp_path / "w.toml"
    body = text.format(t=tmp_path)
    if "[[stream]]" not in body:
        body += '[[stream]]\nrw = "randread"\n'
    workload.write_text('size = "4m"\n' + body)
    code, results = _results(tmp_path, "run", str(workload))
    err = capsys.readouterr().err
    assert code == 2 and sentence in err and "Traceback" not in err, err
    assert not results.exists() and not (tmp_path / "a.dat").exists()


def test_destroy_data_naming_no_target_is_refused(tmp_path, capsys):
    need_root()
    image = _shm(tmp_path, "x.img")
    try:
        with loop_device(image, 16 * MiB) as dev:
            code, results = _results(
                tmp_path, "run", "--target", str(tmp_path / "t.dat"), "--size", "4m",
                "--rw", "randwrite", "--destroy-data", dev,
            )  # fmt: skip
    finally:
        image.unlink(missing_ok=True)
    err = capsys.readouterr().err
    assert code == 2 and f"--destroy-data {dev} names none of the targets" in err, err
    assert not results.exists()


def test_a_verified_stream_over_two_targets_with_dedupe_checks_clean_on_both(tmp_path, capsys):
    # One stream spreads verified writes and reads over two files, with deduplicated data:
    # pool copies prepared for the first target and written to the second name the target
    # they land on, so neither the inline checks nor the pass afterwards find anything.
    a, b = tmp_path / "a.dat", tmp_path / "b.dat"
    code, results = _results(
        tmp_path, "run", "--target", f"a={a}", "--target", f"b={b}", "--size", "8m",
        "--rw", "randrw", "--read", "50", "--qd", "8", "--dedupe", "2", "--verify",
        "--duration", "1", "--interval", "250ms", "--json",
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    doc, run_dir = _run_doc(results)
    v = doc["summary"]["verification"]
    assert v["findings"] == 0 and v["checked"] > 500
    assert v["journals"] == ["verify.journal", "verify.1.journal"]
    by_name = {t["name"]: t for t in doc["summary"]["targets"]}
    assert by_name["a"]["write_ops"] > 100 and by_name["b"]["write_ops"] > 100
    capsys.readouterr()
    assert main(["verify", str(run_dir), "--json"]) == 0
    passes = json.loads(capsys.readouterr().out)["passes"]
    assert [p["target"] for p in passes] == [str(a), str(b)]
    assert all(p["total"] == 0 and p["checked"] == 8 * MiB // 4096 for p in passes)
