"""Exports, reports and translated job files never write through links or over files tilemark
did not write (issue 28), and an `include`d file's content never appears in an error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from report_runs import simple_plan, write_run
from tilemark.cli import main
from tilemark.errors import UsageError
from tilemark.store.outputs import MANIFEST, OutputDir, write_file


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("results")


@pytest.fixture(scope="module")
def run_dir(results) -> Path:
    return write_run(results, simple_plan(("randrw",)), intervals=4, warmup=1)


def victim(tmp_path: Path) -> Path:
    path = tmp_path / "precious"
    path.write_bytes(b"do not touch\n")
    path.chmod(0o600)
    return path


def export(run_dir: Path, results: Path, *args: str) -> int:
    return main(["export", run_dir.name, "--results", str(results), *args])


def test_export_csv_refuses_a_symlink_in_the_directory_and_leaves_its_target(
    run_dir, results, tmp_path, capsys
):
    out = tmp_path / "csv"
    out.mkdir()
    secret = victim(tmp_path)
    (out / "intervals.csv").symlink_to(secret)
    assert export(run_dir, results, "--csv", str(out)) == 2
    err = capsys.readouterr().err
    assert "intervals.csv is a symbolic link; tilemark does not write through links" in err
    assert secret.read_bytes() == b"do not touch\n"
    # --force replaces the link itself; what it pointed to is still untouched.
    assert export(run_dir, results, "--csv", str(out), "--force") == 0
    assert not (out / "intervals.csv").is_symlink()
    assert (out / "intervals.csv").read_text().startswith('"')
    assert secret.read_bytes() == b"do not touch\n"


def test_export_csv_replaces_its_own_files_but_not_the_users(run_dir, results, tmp_path, capsys):
    out = tmp_path / "csv"
    assert export(run_dir, results, "--csv", str(out)) == 0
    first = (out / "streams.csv").read_bytes()
    assert (out / MANIFEST).is_file()
    assert export(run_dir, results, "--csv", str(out)) == 0  # its own files: replaced
    assert (out / "streams.csv").read_bytes() == first
    (out / "streams.csv").write_text("my notes\n")  # now the user's
    assert export(run_dir, results, "--csv", str(out)) == 2
    assert "streams.csv exists and was not written by tilemark" in capsys.readouterr().err
    assert (out / "streams.csv").read_text() == "my notes\n"
    assert export(run_dir, results, "--csv", str(out), "--force") == 0
    assert (out / "streams.csv").read_bytes() == first
    # No temporary file is left behind by either outcome.
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_report_output_refuses_a_foreign_file_and_replaces_its_own(
    run_dir, results, tmp_path, capsys
):
    dest = tmp_path / "report.html"
    dest.write_text("<html>someone's page</html>")
    args = ["report", run_dir.name, "--results", str(results), "-o", str(dest)]
    assert main(args) == 2
    assert "was not written by tilemark" in capsys.readouterr().err
    assert dest.read_text() == "<html>someone's page</html>"
    assert main([*args, "--force"]) == 0
    assert main(args) == 0  # a tilemark report now: replaced without --force
    link = tmp_path / "link.html"
    secret = victim(tmp_path)
    link.symlink_to(secret)
    assert main(["report", run_dir.name, "--results", str(results), "-o", str(link)]) == 2
    assert secret.read_bytes() == b"do not touch\n"


def test_export_fio_does_not_create_a_file_through_a_dangling_link(
    run_dir, results, tmp_path, capsys
):
    link = tmp_path / "job.fio"
    link.symlink_to(tmp_path / "elsewhere.fio")
    assert export(run_dir, results, "--fio", str(link)) == 2
    assert "is a symbolic link" in capsys.readouterr().err
    assert not (tmp_path / "elsewhere.fio").exists()
    plain = tmp_path / "plain.fio"
    assert export(run_dir, results, "--fio", str(plain)) == 0
    assert export(run_dir, results, "--fio", str(plain)) == 0  # its own export: replaced


def test_import_fio_output_never_follows_a_link(tmp_path, capsys):
    job = tmp_path / "j.fio"
    job.write_text("[a]\nrw=randread\nbs=4k\nsize=1m\n")
    link = tmp_path / "out.toml"
    link.symlink_to(tmp_path / "made-through-link.toml")
    assert main(["import-fio", str(job), "-o", str(link)]) == 2
    assert "is a symbolic link" in capsys.readouterr().err
    assert not (tmp_path / "made-through-link.toml").exists()


def test_include_errors_name_the_file_and_line_never_its_content(tmp_path, capsys):
    shadow = tmp_path / "shadow"
    shadow.write_text("root:$6$saltsalt$hashhashhash:19000:0:99999:7:::\n")
    ini = tmp_path / "app.ini"
    ini.write_text("[database]\npassword=hunter2secret\n")
    # the shadow line is not an option; the ini's first line is a [section], which an included
    # file may not hold: either way file and line are named, never what they hold
    for included, why in ((shadow, "content is not shown"), (ini, "holds options only")):
        job = tmp_path / "job.fio"
        job.write_text(f"include {included}\n[a]\nrw=randread\n")
        assert main(["import-fio", str(job)]) == 2
        err = capsys.readouterr().err
        assert f"{included}:1" in err and why in err
        for secret in ("root", "saltsalt", "hashhash", "password", "hunter2", "database"):
            assert secret not in err.replace(str(tmp_path), ""), err


def test_output_dir_writes_nothing_when_the_writer_fails(tmp_path):
    out_dir = tmp_path / "o"
    with pytest.raises(RuntimeError), OutputDir(out_dir) as out:
        with out.file("a.csv") as f:
            f.write(b"half")
            raise RuntimeError("disk full")
    assert sorted(os.listdir(out_dir)) == []


def test_write_file_gives_new_files_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        path = write_file(tmp_path / "x.txt", "hello")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o640
    with pytest.raises(UsageError, match="was not written by tilemark"):
        write_file(tmp_path / "x.txt", "again")
