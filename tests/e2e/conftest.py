"""Fixtures of the end-to-end tests: every shipped example run once in its quick form
(test_examples.py: its outputs and reports), and a headless Chromium for the report tests."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tilemark.cli import main
from tilemark.example import StepResult, list_examples, plan_example, run_example


@pytest.fixture(scope="session")
def example_runs(tmp_path_factory) -> dict[str, list[StepResult]]:
    """Example name -> what each of its steps did, run with --quick on files in a temporary
    directory (real IO: small files, a second or so per step)."""
    root = tmp_path_factory.mktemp("examples")
    out: dict[str, list[StepResult]] = {}
    for example in list_examples():
        (root / example.name).mkdir()
        results = root / example.name / "results"
        targets = [str(root / example.name / f"{t}.dat") for t in example.targets]
        plan = plan_example(example, targets, quick=True, results=results)
        out[example.name] = run_example(plan, results, main, print)
    return out


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
