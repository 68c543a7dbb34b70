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
    items[:] = module_order(items)


def module_order(items: list) -> list:
    """The items, whole modules at a time, in the order `make test` hands modules to its
    workers (`--dist loadfile --no-loadscope-reorder`; every worker collects the same order,
    as xdist requires):

    1. modules that declare a `cost` (about how many seconds the module takes in `make
       test`), longest first, then the rest in their order. xdist's own order (most tests
       first) left the modules of one long test (a real application learned: 30-45 s) to the
       end, where a worker already busy took two of them while the others ran out of work;
    2. last, the `blkio` modules, longest first: they hold a throttled device's rate to a few
       percent per second, which the suite's busiest start (three workers building reports,
       Chromium rendering them) breaks: a repetition of test_decay_throttled lost 16-21% of
       its IOs there, and passes alone or after the reports. At the end the other workers
       run short modules, and these mostly wait on the throttle.
    """
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def key(group: list) -> tuple[bool, float]:
        marker = group[0].get_closest_marker("cost")
        cost = float(marker.args[0]) if marker else 0.0
        return group[0].get_closest_marker("blkio") is not None, -cost

    ordered = sorted(modules.values(), key=key)  # stable: the rest keep their order
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
