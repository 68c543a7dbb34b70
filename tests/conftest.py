"""Fixtures shared by the test modules: `fake_engine` (tests/fake_engine.py).

Tests that press Ctrl-C on a tilemark process (SIGINT to a child) need the child to start as it
would from a terminal, with SIGINT at its default action. A test run started in the background
by a non-interactive shell (`make test &`) has SIGINT ignored, and an ignored signal stays
ignored across fork and exec: a child tilemark then ignores Ctrl-C wherever it has no handler
of its own installed (between the runs of a study), and those tests fail for the runner's
reason, not tilemark's. So the test process takes SIGINT back, and its children inherit the
default action.
"""

import signal

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

pytest_plugins = ["fake_engine"]


# -----------------------------------------------------------------------------------------------
# Tiers. Every test under tests/e2e is `e2e` (real IO through the CLI); markers say what else a
# test needs (root, loopdev, blkio, nbd, fio, browser, cluster, wheel). `make check` runs the
# unit tests and the `quick` end-to-end ones; `make test` runs everything, `serial` tests alone
# (their assertions hold timing or CPU to a tolerance that another test on the other core
# could break). At the end each session lists what it ran, per marker.

import pytest  # noqa: E402

TIER_MARKERS = ("e2e", "quick", "serial", "root", "loopdev", "blkio", "nbd", "fio", "browser",
                "cluster", "wheel", "apps")  # fmt: skip


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "/tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)
    items[:] = longest_modules_first(items)


def longest_modules_first(items: list) -> list:
    """The items, whole modules at a time, the modules that declare a `cost` (about how many
    seconds the module takes in `make test`) first, longest first; then the rest in their
    order. `make test` hands modules to its workers in this order (`--dist loadfile
    --no-loadscope-reorder`). xdist's own order (most tests first) left the modules of one long
    test (a real application learned, a scaling study under a throttle: 25-45 s each) to the
    end, where a worker already busy took two of them while the others ran out of work. Every
    worker collects the same order, as xdist requires."""
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def cost(group: list) -> float:
        marker = group[0].get_closest_marker("cost")
        return float(marker.args[0]) if marker else 0.0

    ordered = sorted(modules.values(), key=cost, reverse=True)  # stable: the rest keep order
    return [item for group in ordered for item in group]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    counts: dict[str, dict[str, int]] = {}
    for outcome in ("passed", "failed", "skipped", "error"):
        for report in terminalreporter.stats.get(outcome, []):
            if getattr(report, "when", "call") not in ("call", "setup") or (
                outcome == "passed" and report.when != "call"
            ):
                continue
            keywords = getattr(report, "keywords", {})
            tiers = [m for m in TIER_MARKERS if m in keywords] or ["unit"]
            if "e2e" not in tiers and "unit" not in tiers:
                tiers.insert(0, "unit")
            for tier in tiers:
                counts.setdefault(tier, {}).setdefault(outcome, 0)
                counts[tier][outcome] += 1
    if not counts:
        return
    terminalreporter.write_sep("-", "what this session ran, per marker")
    for tier in ("unit", *TIER_MARKERS):
        if tier in counts:
            parts = ", ".join(f"{n} {k}" for k, n in sorted(counts[tier].items()))
            terminalreporter.write_line(f"{tier:>8}: {parts}")
