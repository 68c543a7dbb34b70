"""Fixtures of the end-to-end tests: every shipped example run once in its quick form
(test_examples.py: its outputs and reports), and a headless Chromium for the report tests."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tilemark.cli import main
from tilemark.example import StepResult, list_examples, plan_example, run_example

# Examples run in a Python process of their own while this one runs the others: most of an
# example's time is spent waiting (measured windows, settling, syncing what it stores), so two
# at a time take little more than the longer of the two.
IN_SUBPROCESS = ("003-vmmark-hdd-vs-flash", "004-netapp-esrp-decay")

RUN_EXAMPLES = """
import pickle, sys
from pathlib import Path
from tilemark.cli import main
from tilemark.example import find_example, plan_example, run_example
root, out = Path(sys.argv[1]), {}
for name in sys.argv[3:]:
    example = find_example(name)
    results = root / name / "results"
    targets = [str(root / name / f"{t}.dat") for t in example.targets]
    plan = plan_example(example, targets, quick=True, results=results)
    out[name] = run_example(plan, results, main, print)
Path(sys.argv[2]).write_bytes(pickle.dumps(out))
"""


@pytest.fixture(scope="session")
def example_runs(tmp_path_factory) -> dict[str, list[StepResult]]:
    """Example name -> what each of its steps did, run with --quick on files in a temporary
    directory (real IO: small files, a second or so per step)."""
    root = tmp_path_factory.mktemp("examples")
    out: dict[str, list[StepResult]] = {}
    for example in list_examples():
        (root / example.name).mkdir()
    there = [e.name for e in list_examples() if e.name in IN_SUBPROCESS]
    with open(root / "subprocess-output.txt", "w") as log:
        other = subprocess.Popen(
            [sys.executable, "-c", RUN_EXAMPLES, str(root), str(root / "runs.pickle"), *there],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            for example in list_examples():
                if example.name in there:
                    continue
                results = root / example.name / "results"
                targets = [str(root / example.name / f"{t}.dat") for t in example.targets]
                plan = plan_example(example, targets, quick=True, results=results)
                out[example.name] = run_example(plan, results, main, print)
        finally:
            status = other.wait()
    assert status == 0, (root / "subprocess-output.txt").read_text()[-4000:]
    out.update(pickle.loads((root / "runs.pickle").read_bytes()))
    return {e.name: out[e.name] for e in list_examples()}


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
RENDER_TIMEOUT_MS = 30_000


@pytest.fixture(scope="module")
def browser() -> Iterator:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is missing: apt-get install chromium (scripts/system-deps.sh)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed: pip install playwright")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()
