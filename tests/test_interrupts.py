"""One signal handler for every phase (tilemark/interrupts.py): outside a stop scope the first
signal unwinds the command and the CLI says so with 128 + signal (the command-line library
turned a KeyboardInterrupt into a silent 130, whatever the signal); inside a scope it stops what
is attached; a scope opened after it stops at once; a second one is never raised."""

from __future__ import annotations

import os
import signal

import pytest

from tilemark import interrupts
from tilemark.cli import main
from tilemark.commands import workload as workload_command


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_while_options_are_checked_is_one_sentence_with_its_status(
    tmp_path, capsys, monkeypatch, signum, status
):
    real_setup = workload_command.setup

    def setup_then_signal(*args, **kwargs):
        os.kill(os.getpid(), signum)
        return real_setup(*args, **kwargs)

    monkeypatch.setattr(workload_command, "setup", setup_then_signal)
    previous = signal.getsignal(signum)
    got = main(["run", "--target", str(tmp_path / "t.dat"), "--size", "1m", "--backend", "null",
                "--duration", "0.2", "--results", str(tmp_path / "r")])  # fmt: skip
    err = capsys.readouterr().err
    assert got == status, err
    assert err.strip() == f"tilemark: error: interrupted by {signal.Signals(signum).name}."
    assert not (tmp_path / "r").exists() and not (tmp_path / "t.dat").exists()
    assert signal.getsignal(signum) is previous  # handlers restored


def test_a_scope_opened_after_a_signal_stops_at_once_and_a_second_signal_is_not_raised():
    stopped = []

    class Handle:
        def stop(self) -> None:
            stopped.append(True)

    with interrupts.handled():
        with pytest.raises(interrupts.Signalled) as raised:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs between two bytecodes
                pass
        assert raised.value.status == 143
        os.kill(os.getpid(), signal.SIGTERM)  # while the first is handled: counted only
        with interrupts.SignalStopper() as scope:
            scope.attach(Handle())
            assert scope.exit_status == 143 and stopped == [True]
    # A new command starts afresh.
    with interrupts.handled(), interrupts.SignalStopper() as scope:
        assert scope.signum is None
