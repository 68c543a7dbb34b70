"""Fixtures of the end-to-end tests: every shipped example run once in its quick form, shared by
test_examples.py (its outputs) and test_report_browser.py (its reports)."""

from __future__ import annotations

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
