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
