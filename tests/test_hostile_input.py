"""Input that once ended in a traceback or took the machine down (issue 28): each is one
sentence now, quotes at most an excerpt, and is refused before any IO when it asks for more
than the machine holds (docs/reliability.md, Limits)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tilemark.cli import main
from tilemark.errors import MAX_MESSAGE, bounded, excerpt
from tilemark.workload import limits

TILEMARK = str(Path(sys.executable).with_name("tilemark"))


def refused(capsys, *args: str) -> str:
    """The one line of a command refused with exit 2."""
    status = main(list(args))
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert status == 2, err
    assert len(lines) == 1 and lines[0].startswith("tilemark: error: "), err[:2000]
    return lines[0]


def workload(tmp_path: Path, body: str) -> str:
    path = tmp_path / "w.toml"
    path.write_text(f'target = "{tmp_path / "t.dat"}"\nsize = "1m"\n{body}')
    return str(path)


def test_a_workload_nested_thousands_deep_is_one_sentence(tmp_path, capsys):
    path = workload(tmp_path, "x = " + "[" * 5000 + "]" * 5000 + "\n[[stream]]\n")
    line = refused(capsys, "run", path, "--results", str(tmp_path / "r"))
    assert "nests tables or arrays too deeply" in line


@pytest.mark.parametrize(
    "stream",
    ['name = "{big}"', 'pattern = "{big}"', "bogus{big} = 1", 'x = "{big}'],
    ids=["bad name", "bad pattern", "unknown key", "bad toml"],
)
def test_a_huge_value_is_quoted_as_an_excerpt(tmp_path, capsys, stream):
    big = "a" * 3_000_000
    path = workload(tmp_path, "[[stream]]\n" + stream.format(big=big) + "\n")
    line = refused(capsys, "run", path, "--results", str(tmp_path / "r"))
    assert len(line) < 1000 and "a" * 61 not in line, line[:300]


def test_a_workload_file_larger_than_any_workload_is_refused_unread(tmp_path, capsys):
    path = tmp_path / "huge.toml"
    with open(path, "wb") as f:
        f.truncate(64 << 20)  # sparse: 64 MiB of zeros
    line = refused(capsys, "run", str(path), "--results", str(tmp_path / "r"))
    assert "is larger than 4 MiB" in line


def test_messages_are_bounded_however_long_what_they_quote():
    assert excerpt("short") == "short"
    assert excerpt("x" * 100) == "x" * 60 + "… (100 characters)"
    word = "/" + "d" * 1000
    assert bounded(f"cannot read {word} here") == f"cannot read {excerpt(word)} here"
    assert len(bounded("word " * 10_000)) <= MAX_MESSAGE + 30


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--duration", "99999999999999"), ("--warmup", "31d"), ("--duration", "744h")],
)
def test_durations_beyond_thirty_days_are_refused(tmp_path, capsys, flag, value):
    if value.endswith("d"):
        value = "745h"
    line = refused(capsys, "run", "--target", str(tmp_path / "t.dat"), "--size", "1m",
                   "--backend", "null", flag, value, "--results", str(tmp_path / "r"))  # fmt: skip
    assert f"{flag} must be at most 30 days" in line
    assert not (tmp_path / "t.dat").exists()


@pytest.mark.parametrize(("tables", "copies"), [(400, 250), (4000, 250)])
def test_more_streams_than_a_run_holds_are_refused_before_they_are_built(
    tmp_path, capsys, tables, copies
):
    many = tmp_path / "many.toml"
    many.write_text(
        f'target = "{tmp_path / "t.dat"}"\n' + f"[[stream]]\ncopies = {copies}\n" * tables
    )
    line = refused(capsys, "run", str(many), "--results", str(tmp_path / "r"))
    assert f"has {tables * copies:,} streams; one run holds at most 20,000" in line


def test_a_run_that_would_not_fit_in_memory_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(limits, "available_memory", lambda: 2 << 30)
    line = refused(capsys, "run", "--target", str(tmp_path / "t.dat"), "--size", "64m",
                   "--backend", "null", "--qd", "1024", "--bs", "1m", "--copies", "4",
                   "--results", str(tmp_path / "r"))  # fmt: skip
    assert "need about 4.25" in line and "2 GiB available" in line
    assert not (tmp_path / "t.dat").exists()
    # What fits runs: the same streams at qd 16.
    status = main(["run", "--target", str(tmp_path / "t.dat"), "--size", "64m", "--backend",
                   "null", "--qd", "16", "--bs", "1m", "--copies", "4", "--duration", "0.2",
                   "--results", str(tmp_path / "r")])  # fmt: skip
    assert status == 0, capsys.readouterr().err


def test_prune_older_than_a_billion_days_is_one_sentence(tmp_path, capsys):
    (tmp_path / "r").mkdir()
    line = refused(capsys, "runs", "prune", "--older-than", "999999999d",
                   "--results", str(tmp_path / "r"))  # fmt: skip
    assert "--older-than must be at most 36500d" in line


def test_runs_on_an_ascii_terminal_escapes_what_it_cannot_show(tmp_path):
    results = tmp_path / "r"
    made = subprocess.run(
        [TILEMARK, "run", "--target", str(tmp_path / "t.dat"), "--size", "1m", "--backend",
         "null", "--duration", "0.1", "--label", "größe…", "--results", str(results)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "COLUMNS": "160"}
    listed = subprocess.run(
        [TILEMARK, "runs", "--results", str(results)], capture_output=True, env=env
    )
    assert listed.returncode == 0, listed.stderr.decode()
    assert b"gr\\xf6\\xdfe" in listed.stdout and b"Traceback" not in listed.stderr
