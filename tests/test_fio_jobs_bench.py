"""bench/fio_jobs.py's job text: what it keeps of a fio example and what it replaces, so that
both tools run the same job for a bounded time. No benchmark runs here: `runnable` only
rewrites text (fio's HOWTO: "exit_what" ends a job's group by a job's own count, and a strided
"random_sequence_stride" refuses time_based in the translation, so such files keep their
counts)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import fio_jobs  # noqa: E402


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


def test_a_timed_example_runs_time_based_without_its_counts(tmp_path):
    job = tmp_path / "j.fio"
    job.write_text("[j]\nrw=read\nnumber_ios=1000\nio_size=1m\nsize=1g\nruntime=30\n")
    lines = _lines(fio_jobs.runnable(job, "/dev/x", 4096, 2, 1))
    assert "time_based" in lines and "runtime=2" in lines and "ramp_time=1" in lines
    assert "number_ios=1000" not in lines and "io_size=1m" not in lines
    assert "runtime=30" not in lines and "size=1g" not in lines


def test_an_example_ending_by_exit_what_keeps_its_counts_and_no_time_based(tmp_path):
    job = tmp_path / "exitwhat.fio"
    job.write_text(
        "[slow]\nrw=read\nthinktime=2000\nnumber_ios=1000\nexit_what=stonewall\n"
        "[fast]\nrw=randrw\nrate=300\nruntime=30\n"
    )
    lines = _lines(fio_jobs.runnable(job, "/dev/x", 4096, 2, 1))
    assert "number_ios=1000" in lines and "exit_what=stonewall" in lines
    assert not any(line.startswith(("time_based", "runtime", "ramp_time")) for line in lines)
    assert "filename=/dev/x" in lines and "size=4096" in lines


def test_a_strided_sequence_keeps_io_size_and_a_repeating_one_is_timed(tmp_path):
    strided = tmp_path / "s.fio"
    strided.write_text(
        "[j]\nrw=randread\nio_size=24k\nrandom_distribution=sequence:2,0,1\n"
        "random_sequence_stride=1\n"
    )
    lines = _lines(fio_jobs.runnable(strided, "/dev/x", 4096, 2, 1))
    assert "io_size=24k" in lines and "time_based" not in lines
    repeating = tmp_path / "r.fio"
    repeating.write_text(strided.read_text().replace("stride=1", "stride=0"))
    assert "time_based" in _lines(fio_jobs.runnable(repeating, "/dev/x", 4096, 2, 1))


def test_a_steady_state_file_keeps_group_reporting_and_others_drop_it(tmp_path):
    # HOWTO steadystate: "When the job finishes, fio reports ... for the group when
    # group_reporting is set"; tilemark's criterion holds for the group's streams together.
    steady = tmp_path / "ss.fio"
    steady.write_text("[global]\ngroup_reporting\n[j]\nrw=write\nss=iops:10%\nss_dur=30s\n")
    assert "group_reporting" in _lines(fio_jobs.runnable(steady, "/dev/x", 4096, 2, 1))
    plain = tmp_path / "p.fio"
    plain.write_text("[global]\ngroup_reporting\n[j]\nrw=write\n")
    assert "group_reporting" not in _lines(fio_jobs.runnable(plain, "/dev/x", 4096, 2, 1))
