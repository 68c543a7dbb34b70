"""The command registry: every subcommand loads by name, and the CLI's start-up imports none
of the heavy libraries (their cost is paid only by the commands that use them)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tilemark.cli import COMMANDS, load_command, main

HEAVY = ("pyarrow", "duckdb", "altair", "scipy", "pandas", "distributed", "vl_convert")


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_registered_command_loads_under_its_name(name):
    command = load_command(name)
    assert command.name == name
    assert command.help or command.callback.__doc__


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {m.split(".")[0] for m in out.split()}


def test_help_and_version_import_no_heavy_library():
    loaded = _modules_after(
        "import contextlib, io\nfrom tilemark.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['--help']); main(['--version'])"
    )
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_import_fio_imports_no_heavy_library(tmp_path):
    job = tmp_path / "j.fio"
    job.write_text("[a]\nrw=randread\nbs=4k\nsize=1m\n")
    loaded = _modules_after(
        "import contextlib, io\nfrom tilemark.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['import-fio', {str(job)!r}]) == 0"
    )
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_version_and_unknown_commands(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("tilemark ")
    assert main(["rnus"]) == 2
    assert "Did you mean 'runs'" in capsys.readouterr().err


def test_listing_runs_imports_neither_pyarrow_nor_the_report_machinery(tmp_path):
    """`runs` reads the DuckDB catalog; the readers of interval data (pyarrow) and everything
    the report and run commands need stay unloaded."""
    loaded = _modules_after(
        "import contextlib, io\nfrom tilemark.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['runs', '--results', {str(tmp_path)!r}]) == 0"
    )
    assert not loaded & {"pyarrow", "altair", "scipy", "pandas", "distributed", "pydantic"}, sorted(
        loaded & {"pyarrow", "altair", "scipy", "pandas", "distributed", "pydantic"}
    )
