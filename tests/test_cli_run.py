"""`tilemark run` end to end: exit statuses, one-line errors, JSON output, signals, storage."""

from __future__ import annotations

import json
import os
import signal
import textwrap

import pytest

pytest.importorskip("tilemark._engine", reason="the engine is not built (make build)")

from tilemark.cli import main  # noqa: E402

MIB = 1 << 20


def run_cli(capsys, *args):
    status = main(["run", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def run_workload_json(capsys, workload, tmp_path) -> dict:
    """`tilemark run WORKLOAD --json` on an 8 MiB target in tmp_path; it must exit 0."""
    target, results = str(tmp_path / "t.dat"), str(tmp_path / "results")
    status, out, err = run_cli(capsys, str(workload), "--target", target, "--size", "8m",
                               "--json", "--results", results)  # fmt: skip
    assert status == 0, err
    return json.loads(out)


def assert_one_line_error(err: str, starts: str) -> None:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("tilemark: error: " + starts), lines[0]


def test_bad_input_is_one_sentence_and_exit_2_before_any_io(tmp_path, capsys):
    results = tmp_path / "results"
    target = tmp_path / "t.dat"
    cases = [
        (["--frob", "1"], "No such option: --frob"),
        (["--target", str(target), "--size", "8m", "--qd", "0"], "--qd must be an integer from 1"),
        (["--target", str(target), "--size", "8q"], "--size must be a size"),
        (["--target", str(target)], "--size is required to create target"),
        (["--target", str(tmp_path / "no" / "t.dat"), "--size", "8m"], "target "),
        (["--target", str(tmp_path), "--size", "8m"], f"target {tmp_path} is a directory"),
        (["--target", str(target), "--size", "8m", "--bs", "1000"], "--bs 1000 bytes"),
        (["--default", "--qd", "4"], "--qd sets a single stream"),
        (["--target", str(target), "--force"], "--force only applies"),
        ([str(tmp_path / "missing.toml")], "workload file"),
        (["--target", str(target), "--size", "8m", "--cpus", "1023"], "--cpus: CPU 1023 is not"),
    ]
    for args, starts in cases:
        status, out, err = run_cli(capsys, *args, "--results", str(results))
        assert status == 2, (args, err)
        assert out == ""
        assert_one_line_error(err, starts)
    assert not target.exists() and not results.exists()


def test_bad_flag_values_are_refused_before_the_store_and_engine_load(tmp_path):
    # Refusing `--qd 0` took 0.5-1 s while DuckDB, pyarrow and the run pipeline loaded.
    import subprocess
    import sys

    script = textwrap.dedent(f"""
        import sys
        from tilemark.cli import main
        for args in (["--qd", "0"], ["--rw", "nope"], ["--bs", "0"], ["--rate", "fast"]):
            status = main(["run", "--target", {str(tmp_path / "t.dat")!r}, "--size", "8m", *args])
            assert status == 2, (args, status)
        repeat = main(["repeat", "2", "--target", {str(tmp_path / "t.dat")!r}, "--qd", "0"])
        assert repeat == 2
        print(sorted(m for m in ("duckdb", "pyarrow", "numpy", "altair") if m in sys.modules))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", done.stdout
    assert not (tmp_path / "t.dat").exists()


def test_engine_threads_run_on_the_cpus_given_and_only_they(tmp_path):
    import subprocess
    import sys
    import time

    from tilemark.options.parsers import cpu_list

    allowed = os.sched_getaffinity(0)
    cpu = max(allowed)
    cli = "import sys; from tilemark.cli import main; sys.exit(main())"
    args = ["run", "--target", str(tmp_path / "t.dat"), "--size", "8m", "--backend", "null",
            "--copies", "2", "--duration", "3", "--cpus", str(cpu), "--results",
            str(tmp_path / "results")]  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", cli, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    seen: dict[str, set[str]] = {}
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            for task in (p for p in os.scandir(f"/proc/{proc.pid}/task")):
                try:
                    comm = open(f"{task.path}/comm").read().strip()
                    status = open(f"{task.path}/status").read()
                except OSError:
                    continue
                cpus = next(
                    line.split(":", 1)[1].strip()
                    for line in status.splitlines()
                    if line.startswith("Cpus_allowed_list:")
                )
                seen.setdefault(comm, set()).add(cpus)
            if "tilemark-engine" in seen:
                break
            time.sleep(0.05)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-2000:]
    assert seen.get("tilemark-engine") == {str(cpu)}, seen
    assert seen["python"] == {cpu_list(allowed)}, "the front end stays where the kernel puts it"
    assert f"1 thread on CPU {cpu}," in err


def test_unknown_toml_key_names_key_and_allowed_keys(tmp_path, capsys):
    workload = tmp_path / "w.toml"
    workload.write_text('target = "x.dat"\n[[stream]]\nname = "db"\niodepth = 8\n')
    status, _, err = run_cli(capsys, str(workload))
    assert status == 2
    assert_one_line_error(err, "stream 'db': unknown key 'iodepth'; allowed keys are name, rw")


def test_foreign_file_is_refused_for_writes_and_left_alone(tmp_path, capsys):
    precious = tmp_path / "precious.db"
    precious.write_bytes(b"customer data" * 1000)
    status, _, err = run_cli(capsys, "--target", str(precious), "--rw", "randwrite")
    assert status == 2
    assert_one_line_error(err, f"refusing to write {precious}: it exists and was not created")
    assert precious.read_bytes() == b"customer data" * 1000


def test_run_stores_results_and_prints_only_json_on_stdout(tmp_path, capsys, fake_engine):
    options, started = fake_engine
    options["intervals"] = 3
    results = tmp_path / "results"
    status, out, err = run_cli(
        capsys,
        "--target",
        str(tmp_path / "t.dat"),
        "--size",
        "4m",
        "--qd",
        "8",
        "--duration",
        "3",
        "--json",
        "--results",
        str(results),
    )
    assert status == 0, err
    doc = json.loads(out)
    assert set(doc) == {"run_id", "run_dir", "complete", "summary"}
    assert doc["complete"] is True
    assert doc["summary"]["streams"][0]["name"] == "randread"
    assert doc["summary"]["total"]["iops"] == pytest.approx(100.0)
    plan = started[0].plan
    assert plan["targets"] == [
        {"name": "t", "path": str(tmp_path / "t.dat"), "offset": 4096, "length": 4 * MIB,
         "direct": True}
    ]  # fmt: skip
    assert plan["streams"][0]["qd"] == 8
    run = json.loads((results / doc["run_id"] / "run.json").read_text())
    assert run["status"] == "complete" and run["plan"] == plan
    assert run["targets"][0]["created"] is True
    assert run["workload"]["streams"][0]["qd"] == 8
    assert (results / doc["run_id"] / "intervals.parquet").is_file()
    # Human output went to stderr: one plain line per interval, then the table.
    assert "[measure 1s of 3s] total 100 IOPS 0.4 MB/s | randread 100 IOPS p50 0.20ms" in err
    assert "run " in err and "(complete)" in err


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_stops_the_run_keeps_results_marked_incomplete(
    tmp_path, capsys, fake_engine, signum, status
):
    options, started = fake_engine
    options["intervals"] = 100

    def interrupt(waits):
        if waits in (3, 4):  # a second signal must not lose anything either
            os.kill(os.getpid(), signum)

    options["on_wait"] = interrupt
    previous = signal.getsignal(signum)
    results = tmp_path / "results"
    got, out, err = run_cli(
        capsys,
        "--target",
        str(tmp_path / "t.dat"),
        "--size",
        "1m",
        "--json",
        "--results",
        str(results),
    )
    assert got == status
    assert started[0].stopped and started[0].sent < 100
    doc = json.loads(out)
    assert doc["complete"] is False
    run = json.loads((results / doc["run_id"] / "run.json").read_text())
    assert run["status"] == "incomplete" and run["complete"] is False
    assert run["summary"]["streams"][0]["read"]["ops"] == 100 * started[0].sent
    assert "interrupted: results kept, marked incomplete" in err
    assert signal.getsignal(signum) is previous  # handlers restored


def test_engine_failure_is_one_line_exit_1_and_recorded(tmp_path, capsys, fake_engine):
    options, _ = fake_engine
    options["fail"] = "engine thread 0 failed: io_uring_enter: Bad address"
    results = tmp_path / "results"
    status, out, err = run_cli(
        capsys, "--target", str(tmp_path / "t.dat"), "--size", "1m", "--results", str(results)
    )
    assert status == 1
    assert "tilemark: error: engine thread 0 failed" in err and "Traceback" not in err
    (run_json,) = results.glob("*/run.json")
    run = json.loads(run_json.read_text())
    assert run["status"] == "failed" and "Bad address" in run["error"]


def test_stream_flags_override_a_single_stream_file_only(tmp_path, capsys, fake_engine):
    _, started = fake_engine
    one = tmp_path / "one.toml"
    one.write_text(
        textwrap.dedent(
            f"""
            target = "{tmp_path / "t.dat"}"
            size = "1m"
            duration = 5
            [[stream]]
            name = "db"
            qd = 2
            """
        )
    )
    status, _, err = run_cli(
        capsys, str(one), "--qd", "6", "--duration", "2", "--results", str(tmp_path / "r")
    )
    assert status == 0, err
    assert started[0].plan["streams"][0]["qd"] == 6
    assert started[0].plan["duration_ms"] == 2000
    two = tmp_path / "two.toml"
    two.write_text(one.read_text() + '[[stream]]\nname = "log"\n')
    status, _, err = run_cli(capsys, str(two), "--qd", "6")
    assert status == 2
    assert_one_line_error(err, f"--qd sets a single stream, but {two} has 2 streams")


def test_real_engine_run_from_a_toml_workload(tmp_path, capsys):
    workload = tmp_path / "w.toml"
    workload.write_text(
        textwrap.dedent(
            """
            duration = "1s"
            interval = "500ms"
            [[stream]]
            name = "db"
            rw = "randrw"
            read = 70
            bs = "8k"
            qd = 4
            [[stream]]
            name = "lookup"
            rw = "randread"
            rate = 500
            arrival = "poisson"
            """
        )
    )
    doc = run_workload_json(capsys, workload, tmp_path)
    assert doc["complete"] is True
    db, lookup = doc["summary"]["streams"]
    assert db["read"]["ops"] > 0 and db["write"]["ops"] > 0
    assert lookup["arrival"] == "open" and lookup["target_iops"] == 500.0
    assert lookup["read"]["ops"] > 0 and lookup["write"] is None


def test_streams_that_end_by_their_bytes_end_the_run(tmp_path, capsys):
    # Without a duration, a run of streams with byte limits lasts until they are done, and
    # each stream's rate is over its own time, as fio rates a job that ends by its size.
    workload = tmp_path / "w.toml"
    workload.write_text(
        textwrap.dedent(
            """
            backend = "psync"
            direct = false
            keep_cache = true
            [[stream]]
            name = "pass"
            rw = "write"
            bs = "64k"
            rate = 50
            passes = 2
            length = "1m"
            [[stream]]
            name = "bytes"
            rw = "randread"
            rate = 1000
            io_size = "256k"
            offset = "4m"
            """
        )
    )
    doc = run_workload_json(capsys, workload, tmp_path)
    passes, limited = doc["summary"]["streams"]
    assert passes["write"]["bytes"] == 2 * MIB and passes["write"]["ops"] == 32
    assert limited["read"]["bytes"] == 256 * 1024 and limited["read"]["ops"] == 64
    # 32 writes at 50/s: about 0.64 s, not the default 60 s.
    assert doc["summary"]["duration_s"] < 10
    # 64 reads at 1000/s end long before the writes: their rate is over their own time.
    assert limited["active_s"] < doc["summary"]["duration_s"] / 2
    assert limited["total"]["iops"] == pytest.approx(64 / limited["active_s"])


def test_the_progress_line_counts_time_within_its_phase():
    from tilemark.run.live import phase_clock

    plan = {"warmup_ms": 1000, "duration_ms": 3000}
    # The first interval ends 1 s into the warm-up; the next one 1 s into the measurement
    # (2 s into the run); a run that stops once decided ends in a shorter interval.
    assert phase_clock(plan, 1.0, "warmup") == "warmup 1s of 1s"
    assert phase_clock(plan, 2.0, "measure") == "measure 1s of 3s"
    assert phase_clock({**plan, "duration_ms": 12000}, 4.3, "measure") == "measure 3.3s of 12s"
    assert phase_clock({}, 2.0, "measure") == "measure 2s"


def test_fadvise_pattern_advises_each_buffered_target(tmp_path, capsys):
    # fio advises the kernel of a job's pattern when it opens the file (fadvise_hint=1,
    # ioengines.c td_io_open_file): POSIX_FADV_RANDOM for random IO, SEQUENTIAL otherwise.
    # fadvise = "pattern" does that per target; the engine opens and advises it, and the run
    # records the advice in its plan. A target with both kinds of stream gets none.
    def run(streams: str) -> dict:
        workload = tmp_path / "w.toml"
        workload.write_text(
            'backend = "psync"\ndirect = false\nfadvise = "pattern"\nduration = "300ms"\n' + streams
        )
        doc = run_workload_json(capsys, workload, tmp_path)
        assert doc["summary"]["streams"][0]["read"]["ops"] > 0
        return doc

    random = '[[stream]]\nname = "r"\nrw = "randread"\nqd = 1\n'
    sequential = '[[stream]]\nname = "s"\nrw = "read"\nbs = "64k"\nqd = 1\n'
    for streams, advice in (
        (random, "random"),
        (sequential, "sequential"),
        (random + sequential, None),
    ):
        doc = run(streams)
        newest = max((tmp_path / "results").glob("*/run.json"), key=lambda p: p.stat().st_mtime)
        target = json.loads(newest.read_text())["plan"]["targets"][0]
        assert target.get("fadvise") == advice, (streams, doc["run_id"] if "run_id" in doc else "")
        # Exported as a fio job, fio is told exactly that advice (fadvise_hint=0: none), and
        # the note says fio would drop the cache between passes where this run did not.
        exported = tmp_path / "back.fio"
        exported.unlink(missing_ok=True)
        status = main(
            [
                "export",
                newest.parent.name,
                "--results",
                str(tmp_path / "results"),
                "--fio",
                str(exported),
            ]
        )
        capsys.readouterr()
        assert status == 0
        text = exported.read_text()
        assert f"fadvise_hint={advice or 0}" in text
        assert "loop_cache_invalidate" in text


def _read_bytes() -> int:
    """Bytes this process has had read from storage (task IO accounting, not cache hits)."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("read_bytes:"))


def test_invalidate_pass_reads_each_pass_from_the_storage(tmp_path, capsys):
    # fio's time_based buffered jobs drop the file's cache between passes (io_u.c
    # loop_cache_invalidate), so every pass reads the storage; invalidate = "pass" does the
    # same, where the default reads the region once and then the page cache.
    def device_reads(invalidate: str) -> int:
        workload = tmp_path / f"{invalidate}.toml"
        workload.write_text(
            f'backend = "psync"\ndirect = false\n[[stream]]\nname = "s"\nrw = "read"\n'
            f'bs = "64k"\nqd = 1\nlength = "1m"\npasses = 8\ninvalidate = "{invalidate}"\n'
        )
        before = _read_bytes()
        status, _, err = run_cli(
            capsys,
            str(workload),
            "--target",
            str(tmp_path / "t.dat"),
            "--size",
            "16m",
            "--results",
            str(tmp_path / "results"),
        )
        assert status == 0, err
        return _read_bytes() - before

    once = device_reads("start")
    if once == 0:
        pytest.skip("this file system's reads are not counted in /proc/self/io (tmpfs)")
    assert once < 5 * MIB  # one pass, and what readahead took past the region
    assert device_reads("pass") >= 8 * MIB
