"""The wheel: built by `make wheel`, installed into a fresh virtualenv without a Rust toolchain,
and running real workloads from there (README, "Install with pip")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.wheel, pytest.mark.cost(13)]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    make = subprocess.run(
        ["make", "-s", "wheel", f"WHEEL_DIR={out}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert make.returncode == 0, make.stderr[-3000:]
    (built,) = out.glob("tilemark-*.whl")
    return built


def test_the_wheel_is_abi3_manylinux_and_carries_the_engine(wheel):
    # tilemark-0.1.0-cp311-abi3-manylinux_2_34_x86_64.whl: one wheel for every CPython >= 3.11.
    name = wheel.name
    assert "-cp311-abi3-" in name, name
    assert "manylinux" in name, name
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    assert "tilemark/_engine.abi3.so" in names
    assert "tilemark/cli/__init__.py" in names
    assert not any(n.endswith(".rs") for n in names)


def test_a_fresh_virtualenv_installs_the_wheel_and_runs_without_rust(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    # No pip inside it (ensurepip costs seconds): this suite's pip installs into it (--python).
    venv.create(env_dir, with_pip=False)
    bin_dir = env_dir / "bin"
    # No cargo or rustc on PATH: installing must not build anything.
    clean = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    clean.pop("VIRTUAL_ENV", None)
    # The wheel goes in with pip and no build; its dependencies (pyarrow, DuckDB, ...: 300 MB
    # from PyPI) are the ones this suite's virtualenv installed from the same pyproject, seen
    # through a .pth file, so the test pays for the wheel and not for downloading those again.
    # `pip check` then proves the wheel's declared requirements are met by them. Only the
    # directory is added: the checkout's editable install (a .pth inside it) is not.
    site = next(env_dir.glob("lib/python3*/site-packages"))
    (site / "suite-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip_in_env = [sys.executable, "-m", "pip", "--python", str(bin_dir / "python")]
    pip = subprocess.run(
        [*pip_in_env, "install", "-q", "--no-deps", "--only-binary=:all:", str(wheel)],
        capture_output=True, text=True, env=clean, check=False,
    )  # fmt: skip
    assert pip.returncode == 0, pip.stderr[-3000:]
    check = subprocess.run([*pip_in_env, "check"], capture_output=True, text=True, env=clean)
    assert check.returncode == 0, check.stdout[-3000:]
    results = tmp_path / "results"

    def tilemark(*args: str) -> dict:
        done = subprocess.run(
            [bin_dir / "tilemark", *args, "--results", str(results), "--json"],
            capture_output=True,
            text=True,
            env=clean,
            cwd=tmp_path,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout)

    null = tilemark(
        "run",
        "--target",
        str(tmp_path / "n.dat"),
        "--size",
        "16m",
        "--backend",
        "null",
        "--duration",
        "1",
    )
    assert null["summary"]["total"]["iops"] > 1000
    real = tilemark(
        "run",
        "--target",
        str(tmp_path / "r.dat"),
        "--size",
        "32m",
        "--rw",
        "randrw",
        "--duration",
        "2",
        "--qd",
        "4",
    )
    total = real["summary"]["total"]
    assert total["read_iops"] > 0 and total["write_iops"] > 0
    assert (tmp_path / "r.dat").stat().st_size == 4096 + 32 * 2**20
    profiles = subprocess.run(
        [bin_dir / "tilemark", "profiles"], capture_output=True, text=True, env=clean, check=False
    )
    assert profiles.returncode == 0 and "mail" in profiles.stdout, profiles.stderr
    # The seed studies ship as examples: listed, shown and run from the installed package.
    listed = subprocess.run(
        [bin_dir / "tilemark", "example"], capture_output=True, text=True, env=clean, check=False
    )
    assert listed.returncode == 0 and "001-dmx-orion-sweep" in listed.stdout, listed.stderr
    example = subprocess.run(
        [bin_dir / "tilemark", "example", "run", "001", "--quick", "--target",
         str(tmp_path / "e.dat"), "--results", str(results)],
        capture_output=True, text=True, env=clean, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert example.returncode == 0, example.stderr[-3000:]
    shown = subprocess.run(
        [bin_dir / "tilemark", "example", "show", "000"],
        capture_output=True, text=True, env=clean, check=False,
    )  # fmt: skip
    assert f"files: {env_dir}" in shown.stdout and "esg-tile.toml" in shown.stdout, shown.stderr
    (points,) = (results / "studies").glob("*/points.csv")
    assert len(points.read_text().splitlines()) == 1 + 4
    # The installed package is the wheel's, not this checkout's.
    where = subprocess.run(
        [bin_dir / "python", "-c", "import tilemark, sys; print(tilemark.__file__)"],
        capture_output=True,
        text=True,
        env=clean,
        check=True,
    ).stdout
    assert str(env_dir) in where and str(REPO) not in where
    assert sys.prefix not in where
