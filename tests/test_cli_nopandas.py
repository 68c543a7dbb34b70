"""`tilemark` commands run without importing pandas (tilemark.cli.nopandas): pyarrow would
load it on a command's first conversion, 0.3-0.7 s of CPU for nothing. The block lasts only
while a command runs: pandas users of `tilemark.api` in the same process still get DataFrames."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tilemark.cli.nopandas import without_pandas

pytestmark = pytest.mark.quick


def test_a_run_and_its_report_load_no_pandas_and_the_api_still_gives_dataframes(tmp_path):
    # A fresh interpreter: the suite's own process may have pandas imported already.
    script = textwrap.dedent(f"""
        import json, sys
        from pathlib import Path
        from tilemark.cli import main
        results = {str(tmp_path / "results")!r}
        runs = main(["run", "--target", {str(tmp_path / "t.dat")!r}, "--size", "8m",
                     "--rw", "randrw", "--duration", "0.3", "--results", results, "--json"])
        (run_json,) = Path(results).glob("*/run.json")
        name = run_json.parent.name
        report = main(["report", name, "--results", results])
        during = "pandas" in sys.modules
        from tilemark import api
        frame = api.open_run(name, results).intervals_df(["ops"])
        print(json.dumps({{"status": [runs, report], "pandas_during": during,
                          "frame": type(frame).__module__, "ops": int(frame["ops"].sum())}}))
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["status"] == [0, 0]
    assert out["pandas_during"] is False
    assert out["frame"].startswith("pandas")
    assert out["ops"] > 0


def test_inside_the_block_pandas_is_missing_and_afterwards_it_is_not():
    script = textwrap.dedent("""
        from tilemark.cli.nopandas import without_pandas
        with without_pandas():
            try:
                import pandas
                inside = "imported"
            except ModuleNotFoundError as e:
                inside = e.name
        import pandas
        print(inside, pandas.__name__)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout.split() == ["pandas", "pandas"], done.stderr[-2000:]


def test_a_process_that_has_pandas_keeps_it():
    pandas = pytest.importorskip("pandas")
    with without_pandas():
        import pandas as again

    assert again is pandas
