"""Machines set up differently from the developer's (issue 28): what tilemark needs from the
environment and does not find is one sentence, never pages of tracebacks."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from .rigs import need_root, tilemark_exe


def in_private_mounts(script: str) -> subprocess.CompletedProcess:
    """`script` run by sh in a mount namespace of its own (mounts made there stay there)."""
    need_root()
    if not shutil.which("unshare"):
        pytest.skip("unshare (util-linux) is not installed")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a mount namespace: {probe.stderr.decode().strip()}")
    return subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_local_cluster_without_writable_shared_memory_says_what_is_missing(tmp_path):
    # A read-only tmpfs over /dev/shm, in this namespace only: Dask's worker processes cannot
    # make their semaphores (it printed 152 lines of tracebacks).
    done = in_private_mounts(
        f"mount -t tmpfs -o ro tmpfs /dev/shm && exec {tilemark_exe()} run --cluster local:2 "
        f"--target {tmp_path / 't.dat'} --size 16m --backend null --duration 1 "
        f"--results {tmp_path / 'r'}"
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "tilemark: error: --cluster local:N starts worker processes, which need POSIX shared "
        "memory: Read-only file system creating a semaphore in /dev/shm; mount /dev/shm "
        "writable (a tmpfs) or run without --cluster."
    ]
    assert not (tmp_path / "r").exists()
