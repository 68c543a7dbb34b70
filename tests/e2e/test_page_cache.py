"""Buffered runs start from a cold page cache (fio's invalidate), unless --keep-cache."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tilemark.cli import main

pytestmark = pytest.mark.skipif(
    shutil.which("fincore") is None, reason="fincore (util-linux) is needed to count cached pages"
)


def cached_pages(path: Path) -> int:
    out = subprocess.run(
        ["fincore", "--raw", "--noheadings", "--output", "PAGES", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(re.findall(r"\d+", out)[0])


def on_page_cache_filesystem(path: Path) -> bool:
    # tmpfs keeps every page in memory whatever is dropped; the test needs a real filesystem.
    fstype = subprocess.run(
        ["findmnt", "-n", "-o", "FSTYPE", "-T", str(path)], capture_output=True, text=True
    ).stdout.strip()
    return fstype not in ("tmpfs", "ramfs", "")


@pytest.mark.parametrize("keep", [False, True])
def test_a_buffered_run_drops_what_an_earlier_one_cached(tmp_path, capsys, keep):
    if not on_page_cache_filesystem(tmp_path):
        pytest.skip(f"{tmp_path} is on tmpfs, whose pages cannot be dropped")
    target = tmp_path / "t.dat"
    results = tmp_path / "results"
    args = ["run", "--target", str(target), "--size", "32m", "--buffered", "--rw", "randread"]
    args += ["--duration", "0.5", "--rate", "20", "--results", str(results)]
    assert main(args) == 0  # creates and fills the file
    target.read_bytes()  # everything cached, as after a fast earlier run
    # Nearly all of it: the kernel may already reclaim a few pages of a file just written (this
    # VM runs DAMON's reclaim; one run found 8,183 of 8,192), and "kept" below allows 5% too.
    assert cached_pages(target) >= 32 * 256 * 0.95
    assert main(args + (["--keep-cache"] if keep else [])) == 0
    capsys.readouterr()
    pages = cached_pages(target)
    if keep:
        # Kept: the run dropped nothing (the kernel may reclaim a few pages under memory
        # pressure from other work, as seen with several test suites running at once).
        assert pages >= 32 * 256 * 0.95, pages
    else:
        # About 10 reads of 4 KiB at 20/s for 0.5 s, plus the header and readahead of each.
        assert pages < 32 * 256 // 4, pages
