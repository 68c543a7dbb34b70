"""The target lock never follows links and never writes a file it did not create (issue 28).

A root run takes its lock in a directory other users can write to; an unprivileged user who
plants a link, a hard link or a FIFO there must not make that run truncate or hang on anything.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from tilemark import targets
from tilemark.errors import UsageError

NOBODY = 65534
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as two users")


@pytest.fixture
def lock_dirs(tmp_path, monkeypatch):
    """Two candidate lock directories under tmp_path, in the order tilemark tries them."""
    first, second = tmp_path / "run-lock", tmp_path / "tmp-locks"
    monkeypatch.setattr(targets.lock, "LOCK_DIRS", (str(first), str(second)))
    return first, second


@pytest.fixture
def target(tmp_path):
    path = tmp_path / "target.dat"
    path.write_bytes(b"x" * 4096)
    return SimpleNamespace(kind="file", path=str(path))


def lock_name(target) -> str:
    return f"{targets.lock_key(target)}.lock"


def victim(tmp_path) -> Path:
    """A root-owned 0600 file with content that must survive."""
    path = tmp_path / "shadow"
    path.write_bytes(b"root:secret:19000:0:99999:7:::\n")
    path.chmod(0o600)
    return path


def test_lock_directory_is_created_sticky_and_the_lock_records_its_holder(lock_dirs, target):
    first, _ = lock_dirs
    with targets.lock_target(target, ["tilemark", "run"]) as lock:
        assert lock.path == first / lock_name(target)
        assert stat.S_IMODE(first.stat().st_mode) == 0o1777
        assert b'"argv": ["tilemark", "run"]' in lock.path.read_bytes()
        with pytest.raises(
            UsageError, match=rf"in use by another tilemark run \(pid {os.getpid()}"
        ):
            targets.lock_target(target, ["second"]).__enter__()
    assert lock.path.read_bytes() == b""  # released: the record is cleared


def test_a_symlink_planted_as_the_lock_file_is_refused_and_its_target_untouched(
    lock_dirs, target, tmp_path
):
    first, _ = lock_dirs
    first.mkdir(mode=0o1777)
    first.chmod(0o1777)
    secret = victim(tmp_path)
    before = secret.read_bytes()
    (first / lock_name(target)).symlink_to(secret)
    with pytest.raises(UsageError, match="is a symbolic link; tilemark never follows links"):
        with targets.lock_target(target, ["tilemark", "run"]):
            pass
    assert secret.read_bytes() == before
    # A dangling link (a file that does not exist yet) is not created through either.
    (first / lock_name(target)).unlink()
    (first / lock_name(target)).symlink_to(tmp_path / "created-through-link")
    with pytest.raises(UsageError, match="symbolic link"):
        targets.lock_target(target, ["tilemark"]).__enter__()
    assert not (tmp_path / "created-through-link").exists()


def test_a_hard_link_planted_as_the_lock_file_is_refused(lock_dirs, target, tmp_path):
    first, _ = lock_dirs
    first.mkdir()
    secret = victim(tmp_path)
    before = secret.read_bytes()
    os.link(secret, first / lock_name(target))
    with pytest.raises(UsageError, match="has 2 hard links"):
        targets.lock_target(target, ["tilemark"]).__enter__()
    assert secret.read_bytes() == before


def test_a_fifo_planted_as_the_lock_file_is_refused_without_hanging(lock_dirs, target):
    first, _ = lock_dirs
    first.mkdir()
    os.mkfifo(first / lock_name(target))
    outcome: list[BaseException | None] = []

    def take() -> None:
        try:
            targets.lock_target(target, ["tilemark"]).__enter__()
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            outcome.append(e)

    t = threading.Thread(target=take, daemon=True)
    t.start()
    t.join(10)
    assert outcome, "taking the lock hung on a FIFO"
    assert isinstance(outcome[0], UsageError) and "is not a regular file" in str(outcome[0])


def test_a_lock_directory_that_is_a_symlink_is_not_used(lock_dirs, target, tmp_path):
    first, second = lock_dirs
    elsewhere = tmp_path / "attacker-dir"
    elsewhere.mkdir(mode=0o777)
    first.symlink_to(elsewhere)
    with targets.lock_target(target, ["tilemark"]) as lock:
        assert lock.path == second / lock_name(target)
    assert list(elsewhere.iterdir()) == []


def test_a_world_writable_lock_directory_without_the_sticky_bit_is_not_used(lock_dirs, target):
    first, second = lock_dirs
    first.mkdir()
    first.chmod(0o777)
    with targets.lock_target(target, ["tilemark"]) as lock:
        assert lock.path.parent == second


@root_only
def test_a_lock_directory_owned_by_another_user_is_refused_with_a_sentence(lock_dirs, target):
    for d in lock_dirs:
        d.mkdir(mode=0o755)
        os.chown(d, NOBODY, NOBODY)
    with pytest.raises(UsageError) as caught:
        targets.lock_target(target, ["tilemark"]).__enter__()
    message = str(caught.value)
    assert message.startswith("no safe directory for target locks:")
    assert f"{lock_dirs[0]} belongs to" in message and f"uid {NOBODY}" in message
    assert "\n" not in message


@root_only
def test_another_users_lock_file_is_locked_but_never_written(lock_dirs, target):
    first, _ = lock_dirs
    first.mkdir(mode=0o1777)
    first.chmod(0o1777)
    theirs = first / lock_name(target)
    theirs.write_bytes(b'{"pid": 1, "since": "then", "argv": ["their", "run"]}')
    os.chown(theirs, NOBODY, NOBODY)
    before = theirs.read_bytes()
    with targets.lock_target(target, ["tilemark"]) as lock:
        assert not lock.writable
        assert theirs.read_bytes() == before
        with pytest.raises(UsageError, match="in use by another tilemark run"):
            targets.lock_target(target, ["second"]).__enter__()
    assert theirs.read_bytes() == before
