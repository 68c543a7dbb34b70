"""Translated fio jobs run (real IO on small files), and `export --fio` gives back a job that
fio runs the same way: the same operations, sizes, bytes and phases (docs/fio.md)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("tilemark._engine", reason="the engine is not built (make build)")

from tilemark.cli import main  # noqa: E402
from tilemark.fio import translate  # noqa: E402

MIB = 1 << 20


def cli(capsys, *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def run_job(capsys, tmp_path: Path, text: str) -> dict:
    job = tmp_path / "job.fio"
    job.write_text(text)
    results = tmp_path / "results"
    status, _, err = cli(capsys, "run", str(job), "--results", str(results))
    assert status == 0, err
    (run_dir,) = [p for p in results.iterdir() if (p / "run.json").exists()]
    return json.loads((run_dir / "run.json").read_text())


def fio_json(job: Path) -> dict:
    proc = subprocess.run(
        ["fio", "--output-format=json", str(job)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout[proc.stdout.index("{") :])


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


@pytest.mark.fio
def test_a_fio_job_file_runs_and_exports_back_to_fio(tmp_path, capsys):
    data = tmp_path / "data.dat"
    doc = run_job(capsys, tmp_path, JOB.format(path=data))
    reader, writer = doc["summary"]["streams"]
    assert reader["read"]["ops"] > 0 and reader["write"] is None
    assert reader["read"]["bytes"] == reader["read"]["ops"] * 4096
    assert writer["write"]["bytes"] == writer["write"]["ops"] * 65536
    assert 150 <= writer["write"]["ops"] <= 250  # 200/s for 1 s, open loop, one in flight
    assert data.stat().st_size == 4096 + 16 * MIB  # tilemark's header block + size

    # Exported back: the same IO when translated again, and a job fio runs on the same file.
    exported = tmp_path / "back.fio"
    results = str(tmp_path / "results")
    status, _, err = cli(
        capsys, "export", doc["run_id"], "--results", results, "--fio", str(exported)
    )
    assert status == 0, err
    again = translate(exported).doc["stream"]
    assert [(s["rw"], s["bs"], s["qd"]) for s in again] == [
        ("randread", "4k", 4),
        ("write", "64k", 1),
    ]
    assert again[1]["rate"] == 200
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed (make test installs it with scripts/system-deps.sh)")
    jobs = {j["jobname"]: j for j in fio_json(exported)["jobs"]}
    assert jobs["reader"]["read"]["io_bytes"] == jobs["reader"]["read"]["total_ios"] * 4096
    assert jobs["reader"]["write"]["total_ios"] == 0
    assert 150 <= jobs["writer"]["write"]["total_ios"] <= 250
    assert jobs["writer"]["read"]["total_ios"] == 0
    assert data.stat().st_size == 4096 + 16 * MIB  # fio stayed inside the data area
    assert translate(exported).doc["stream"][0]["offset"] == "4k"  # the header is untouched


PHASES = """; a sequential fill, then random reads after it (stonewall), each ending by its bytes
[global]
ioengine=psync
direct=1
filename={path}
size=4m
runtime=2

[fill]
rw=write
bs=64k

[check]
stonewall
rw=randread
bs=4k
io_size=1m
"""


@pytest.mark.fio
def test_jobs_that_end_by_their_bytes_in_phases_run_and_round_trip(tmp_path, capsys):
    # fio: the fill writes size bytes once (not time_based: it ends by its bytes or its
    # runtime); the check starts when the fill has ended (stonewall) and reads io_size bytes.
    data = tmp_path / "data.dat"
    doc = run_job(capsys, tmp_path, PHASES.format(path=data))
    fill, check = doc["summary"]["streams"]
    assert fill["write"]["bytes"] == 4 * MIB and fill["write"]["ops"] == 64
    assert check["read"]["bytes"] == MIB and check["read"]["ops"] == 256
    assert check["start_s"] == 2.0  # the fill's runtime: it must have ended by then
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed (make test installs it with scripts/system-deps.sh)")
    exported = tmp_path / "back.fio"
    results = str(tmp_path / "results")
    status, _, err = cli(
        capsys, "export", doc["run_id"], "--results", results, "--fio", str(exported)
    )
    assert status == 0, err
    text = exported.read_text()
    assert "io_size=4194304" in text and "io_size=1048576" in text
    assert "startdelay=2000ms" in text
    # fio issues the same bytes, each job its own.
    jobs = {j["jobname"]: j for j in fio_json(exported)["jobs"]}
    assert jobs["fill"]["write"]["io_bytes"] == 4 * MIB
    assert jobs["check"]["read"]["io_bytes"] == MIB
    assert jobs["check"]["read"]["total_ios"] == 256


@pytest.mark.quick
def test_jobs_on_two_files_run_on_two_targets(tmp_path, capsys):
    # HOWTO filename: jobs "with fixed file paths" each use their own file.
    text = (
        "[global]\ndirect=1\nioengine=io_uring\ntime_based\nruntime=1\nsize=8m\nbs=4k\n"
        f"[a]\nfilename={tmp_path / 'a.dat'}\nrw=randread\n"
        f"[b]\nfilename={tmp_path / 'b.dat'}\nrw=randwrite\n"
    )
    doc = run_job(capsys, tmp_path, text)
    a, b = doc["summary"]["streams"]
    assert (a["targets"], b["targets"]) == (["a"], ["b"])
    assert a["read"]["ops"] > 0 and a["write"] is None
    assert b["write"]["ops"] > 0 and b["read"] is None
    for name in ("a.dat", "b.dat"):
        assert (tmp_path / name).stat().st_size == 4096 + 8 * MIB
