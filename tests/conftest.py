"""Fixtures shared by the test modules: `fake_engine` (tests/fake_engine.py)."""

pytest_plugins = ["fake_engine"]
