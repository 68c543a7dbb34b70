"""fio job files in and out: translation of fio's own examples, runs of translated jobs, and
`export --fio` jobs that fio runs (docs/fio.md)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tilemark.cli import main
from tilemark.errors import UsageError
from tilemark.fio import toml_text, translate
from tilemark.workload import plan

EXAMPLES = Path(__file__).parent / "data" / "fio-examples"


def cli(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def streams(path: Path) -> list[dict]:
    return translate(path).doc["stream"]


# fio's examples that translate, with what their one stream must say.
TRANSLATED = {
    "fio-rand-read.fio": {"rw": "randread", "bs": "4k", "qd": 16, "length": "10g"},
    "fio-rand-RW.fio": {"rw": "randrw", "read": 60.0, "qd": 16, "copies": 4},
    "fio-seq-write.fio": {"rw": "write", "bs": "256k", "qd": 16},
    "iometer-file-access-server.fio": {
        "rw": "randrw",
        "read": 80.0,
        "bs": "512:10,1k:5,2k:5,4k:60,8k:2,16k:4,32k:4,64k:10",
        "qd": 64,
    },
    "null.fio": {"rw": "randread", "bs": "4k", "length": "100g"},
    "poisson-rate-submission.fio": {"rw": "randread", "rate": 50.0, "arrival": "poisson"},
    "fixed-rate-submission.fio": {"rw": "read", "rate": 1000.0, "arrival": "constant"},
    "zipf.fio": {"rw": "randread", "pattern": "zipf:0.5"},
}

# fio's examples that cannot be translated, and the option the refusal names.
REFUSED = {
    "jesd219.fio": "random_distribution",  # three zones
    "rand-zones.fio": "random_distribution",
    "ssd-test.fio": "stonewall",
    "tiobench-example.fio": "stonewall",
    "basic-verify.fio": "verify",
    "backwards-read.fio": "rw",  # rw=read:-8k
    "1mbs_clients.fio": "ratemin",
    "cpuio.fio": "ioengine",
}


@pytest.mark.parametrize("name", sorted(TRANSLATED))
def test_fio_examples_translate_to_valid_workloads(name, tmp_path):
    t = translate(EXAMPLES / name)
    (stream,) = t.doc["stream"]
    for key, value in TRANSLATED[name].items():
        assert stream[key] == value, (key, stream)
    # The TOML written by import-fio is a workload tilemark accepts, with the same streams.
    path = tmp_path / "w.toml"
    path.write_text(toml_text(t))
    doc = plan.load_toml(path)
    assert doc["stream"] == t.doc["stream"]
    doc.setdefault("target", str(tmp_path / "t.dat"))
    workload = plan.parse_workload(doc, source=str(path))
    assert len(workload.streams) == stream.get("copies", 1)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_fio_examples_that_cannot_translate_are_refused_by_option(name):
    with pytest.raises(UsageError) as e:
        translate(EXAMPLES / name)
    message = str(e.value)
    assert f"fio option {REFUSED[name]} cannot be translated" in message
    assert message.startswith(f"{name}:")  # names the line
    assert message.count(". ") == 0  # one sentence


def test_fio_defaults_are_written_out():
    # fio does buffered psync IO unless told otherwise; tilemark's defaults differ.
    t = translate(EXAMPLES / "zipf.fio")
    assert t.doc["backend"] == "null"
    assert t.doc["direct"] is False
    t = translate(EXAMPLES / "aio-read.fio")  # buffered=0
    assert t.doc["direct"] is True


def test_invalidate_0_keeps_the_page_cache(tmp_path):
    # fio drops a buffered job's cached pages first (invalidate=1, its default), as tilemark
    # does unless keep_cache is set.
    assert "keep_cache" not in translate(EXAMPLES / "fio-rand-read.fio").doc
    path = write(tmp_path, "[j]\nfilename=/x\nrw=read\ninvalidate=0\n")
    assert translate(path).doc["keep_cache"] is True


def test_jobs_with_their_own_files_get_regions_of_one_target():
    t = translate(EXAMPLES / "aio-read.fio")  # four jobs, no filename, size=512m each
    got = [(s["name"], s["qd"], s.get("offset", "0"), s["length"]) for s in t.doc["stream"]]
    assert got == [
        ("file1", 4, "0", "512m"),
        ("file2", 32, "512m", "512m"),
        ("file3", 8, "1g", "512m"),
        ("file4", 16, "1536m", "512m"),
    ]
    assert t.doc["size"] == "2g"
    assert "target" not in t.doc
    assert any("4 files" in n for n in t.notes)


def write(tmp_path: Path, text: str, name: str = "job.fio") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_global_sections_apply_to_the_jobs_after_them(tmp_path):
    path = write(
        tmp_path,
        "[global]\nbs=8k\nfilename=/x\n[a]\nrw=randread\n[global]\nbs=64k\n[b]\nrw=write\n"
        "[c]\nbs=1m ; own value\n",
    )
    assert [s["bs"] for s in streams(path)] == ["8k", "64k", "1m"]


def test_bssplit_empty_share_takes_the_rest_and_zoned_two_zones_is_a_hotspot(tmp_path):
    path = write(
        tmp_path,
        "[j]\nfilename=/x\nrw=randread\nbssplit=4k/30:64k/\n"
        "random_distribution=zoned:90/10:10/90\n",
    )
    (s,) = streams(path)
    assert s["bs"] == "4k:30,64k:70"
    assert s["pattern"] == "hotspot:90/10"


def test_a_single_rate_on_a_mix_caps_each_direction(tmp_path):
    # Measured with fio 3.33: rwmixread=60 rate_iops=1000 issues 1000 reads and 1000 writes/s.
    path = write(tmp_path, "[j]\nfilename=/x\nrw=randrw\nrwmixread=60\nrate_iops=1000\n")
    t = translate(path)
    (s,) = t.doc["stream"]
    assert (s["rate"], s["read"]) == (2000.0, 50.0)
    assert any("caps reads and writes at 1000 each" in n for n in t.notes)


def test_sync_engines_run_one_io_at_a_time_and_thinktime_is_a_burst(tmp_path):
    path = write(
        tmp_path,
        "[j]\nfilename=/x\nioengine=psync\niodepth=8\nrw=randwrite\nfsync=4\n"
        "thinktime=2000\nthinktime_blocks=10\n",
    )
    t = translate(path)
    (s,) = t.doc["stream"]
    assert (t.doc["backend"], s["qd"], s["sync"], s["burst"]) == ("psync", 1, "fsync:4", "10/2ms")
    assert any("iodepth=8" in n for n in t.notes)


def test_includes_and_environment_variables(tmp_path, monkeypatch):
    write(tmp_path, "bs=16k\n", "common.inc")
    path = write(tmp_path, "[global]\ninclude common.inc\n[j]\nfilename=${DEV}\nrw=read\n")
    monkeypatch.setenv("DEV", "/dev/fake")
    t = translate(path)
    assert (t.doc["target"], t.doc["stream"][0]["bs"]) == ("/dev/fake", "16k")
    monkeypatch.delenv("DEV")
    with pytest.raises(UsageError, match=r"job.fio:4: \$\{DEV\} is not set"):
        translate(path)


@pytest.mark.parametrize(
    "text, message",
    [
        ("[a]\nrw=read\nfilename=/x\n[b]\nrw=read\nfilename=/y\n", "several files"),
        ("[a]\nfilename=/x\nruntime=5\n[b]\nfilename=/x\nruntime=9\n", "differ in runtime"),
        ("[a]\nfilename=/x\nbs=4k,8k\n", "separate read and write values"),
        ("[a]\nfilename=/x\nsize=50%\n", "share of the file"),
        ("[a]\nfilename=/x\nrw=trim\n", "rw=trim is not one of"),
        ("[a]\nfilename=/x\nfrobnicate=3\n", "fio option frobnicate cannot be translated"),
        ("[a]\nrw=read\n", "neither filename nor size"),
        ("rw=read\n[a]\n", "comes before any .section."),
        ("[global]\nrw=read\n", "defines no job"),
        ("[a]\nfilename=/x\n[a]\nfilename=/x\n", "two jobs are named a"),
        ("[a]\nfilename=/x\niodepth=many\n", "iodepth must be a whole number"),
    ],
)
def test_bad_job_files_are_one_sentence(tmp_path, text, message):
    with pytest.raises(UsageError, match=message):
        translate(write(tmp_path, text))


def test_import_fio_writes_a_workload_file_and_names_what_changed(tmp_path, capsys):
    out = tmp_path / "w.toml"
    status, stdout, stderr = cli(
        capsys, "import-fio", str(EXAMPLES / "fio-rand-RW.fio"), "-o", str(out)
    )
    assert status == 0 and stdout.strip() == str(out)
    assert "note: ioengine=libaio runs on io_uring" in stderr
    assert plan.load_toml(out)["stream"][0]["copies"] == 4
    status, _, stderr = cli(capsys, "import-fio", str(EXAMPLES / "fio-rand-RW.fio"), "-o", str(out))
    assert status == 2 and "exists; pass --force" in stderr
    status, _, stderr = cli(capsys, "import-fio", str(EXAMPLES / "ssd-test.fio"))
    assert status == 2 and "stonewall" in stderr and "Traceback" not in stderr
    status, _, stderr = cli(capsys, "import-fio", str(tmp_path / "missing.fio"))
    assert status == 2 and "cannot be read" in stderr


JOB = """; two jobs on one file, in fio's syntax
[global]
ioengine=io_uring
direct=1
time_based
runtime=1
size=16m
filename={path}

[reader]
rw=randread
bs=4k
iodepth=4

[writer]
rw=write
bs=64k
offset=8m
size=8m
rate_iops=200
"""


def _run_dir(results: Path) -> Path:
    (run_dir,) = [p for p in results.iterdir() if (p / "run.json").exists()]
    return run_dir


def test_a_fio_job_file_runs_and_exports_back_to_fio(tmp_path, capsys):
    data = tmp_path / "data.dat"
    job = write(tmp_path, JOB.format(path=data))
    results = tmp_path / "results"
    status, _, stderr = cli(capsys, "run", str(job), "--results", str(results))
    assert status == 0, stderr
    doc = json.loads((_run_dir(results) / "run.json").read_text())
    reader, writer = doc["summary"]["streams"]
    assert reader["read"]["ops"] > 0 and reader["write"] is None
    assert reader["read"]["bytes"] == reader["read"]["ops"] * 4096
    assert writer["write"]["bytes"] == writer["write"]["ops"] * 65536
    assert 150 <= writer["write"]["ops"] <= 250  # 200/s for 1 s, open loop
    assert data.stat().st_size == 4096 + 16 * 2**20  # tilemark's header block + size

    # Exported back: the same IO when translated again, and a job fio runs on the same file.
    exported = tmp_path / "back.fio"
    status, _, stderr = cli(
        capsys, "export", doc["run_id"], "--results", str(results), "--fio", str(exported)
    )
    assert status == 0, stderr
    again = translate(exported).doc["stream"]
    assert [(s["rw"], s["bs"], s["qd"]) for s in again] == [
        ("randread", "4k", 4),
        ("write", "64k", 64),  # an open-loop stream's queue depth cap
    ]
    assert again[1]["rate"] == 200.0
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed (make test installs it with scripts/system-deps.sh)")
    proc = subprocess.run(
        ["fio", "--output-format=json", "--runtime=1", str(exported)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    jobs = {j["jobname"]: j for j in json.loads(proc.stdout[proc.stdout.index("{") :])["jobs"]}
    assert jobs["reader"]["read"]["io_bytes"] == jobs["reader"]["read"]["total_ios"] * 4096
    assert jobs["reader"]["write"]["total_ios"] == 0
    assert jobs["writer"]["write"]["total_ios"] > 0
    assert jobs["writer"]["read"]["total_ios"] == 0
    assert data.stat().st_size == 4096 + 16 * 2**20  # fio stayed inside the data area
    # The header block tilemark wrote is untouched by fio.
    assert translate(exported).doc["stream"][0]["offset"] == "4k"
