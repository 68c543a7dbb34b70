"""The RAM disk (a loop device over random bytes in /dev/shm, direct IO) and the kernel's unbound
workqueues pinned to one CPU: a fast, steady device that takes the disk out of a comparison of
engines, and one scheduler state for both tools (bench/README.md, "Other targets")."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tmbench.common import SetupError, run_text
from tmbench.machine import loop_notes

RAMDISK_IMAGE = Path("/dev/shm/tilemark-bench-ram.img")
RAMDISK_FILL_CHUNK = 16 * 2**20
RAMDISK_FREE_MARGIN = 256 * 2**20  # leave this much of /dev/shm (and memory) free
DEVICE_REGION_ALIGN = 128 * 2**10  # device region: whole blocks of the largest case block size
WORKQUEUE_CPUMASK = Path("/sys/devices/virtual/workqueue/cpumask")


def _prog() -> str:
    """The running script's name, for messages (`vs_fio: could not detach ...`)."""
    return Path(sys.argv[0]).stem or "tmbench"


def attached_loops(losetup: str, image: Path) -> list[str]:
    """Loop devices attached to image (`losetup -j`), e.g. ['/dev/loop1']."""
    out = run_text([losetup, "--associated", str(image)]) or ""
    return [ln.split(":", 1)[0] for ln in out.splitlines() if ln.startswith("/dev/")]


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through the finally that detaches the loop device


def fill_random(path: Path, size: int) -> None:
    """Write size random bytes to path (created or truncated, mode 0600)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        done = 0
        while done < size:
            chunk = os.urandom(min(RAMDISK_FILL_CHUNK, size - done))
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view) :]
            done += len(chunk)
    finally:
        os.close(fd)


@contextmanager
def ramdisk(size: int, image: Path | None = None) -> Iterator[dict[str, Any]]:
    """A loop device over SIZE random bytes in tmpfs (`image`, default RAMDISK_IMAGE: a script
    that may run beside vs_fio.py names its own); always detached and removed afterwards, also
    on SIGTERM, SIGHUP or Ctrl-C. Yields what the results record about it."""
    if os.geteuid() != 0:
        raise SetupError("--ramdisk needs root (it attaches a loop device with losetup)")
    losetup = shutil.which("losetup")
    if losetup is None:
        raise SetupError("--ramdisk needs losetup (util-linux), which is not installed")
    if size <= 0 or size % DEVICE_REGION_ALIGN:
        raise SetupError(f"--ramdisk size must be a positive multiple of {DEVICE_REGION_ALIGN}")
    image = image or RAMDISK_IMAGE
    if image.exists():
        attached = attached_loops(losetup, image)
        if attached:
            raise SetupError(
                f"{image} is attached to {', '.join(attached)} (another vs_fio run?); if not, "
                f"clean up with `losetup -d {attached[0]} && rm {image}`"
            )
    old_bytes = image.stat().st_size if image.exists() else 0
    free = shutil.disk_usage(image.parent).free + old_bytes
    if size + RAMDISK_FREE_MARGIN > free:
        raise SetupError(
            f"--ramdisk {size / 2**30:g} GiB does not fit in {image.parent} "
            f"({free / 2**30:.1f} GiB free); choose a smaller size"
        )
    handlers = {sig: signal.signal(sig, _exit_on_signal) for sig in (signal.SIGTERM, signal.SIGHUP)}
    device: str | None = None
    try:
        print(f"creating {image} ({size / 2**30:g} GiB of random data) ...", flush=True)
        started = time.monotonic()
        fill_random(image, size)
        fill_s = time.monotonic() - started
        cmd = [losetup, "--find", "--show", "--direct-io=on", str(image)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if done.returncode != 0 or not done.stdout.strip().startswith("/dev/"):
            raise SetupError(
                f"`{shlex.join(cmd)}` failed (exit {done.returncode}): "
                f"{(done.stderr or done.stdout).strip()}"
            )
        device = done.stdout.strip()
        notes = loop_notes(Path(device).name) or {}
        print(
            f"attached {device} over {image} (direct IO {notes.get('dio')}, backing filesystem "
            f"{notes.get('backing_fstype')})",
            flush=True,
        )
        if notes.get("dio") != "1":
            print(
                f"{_prog()}: warning: {device} does not do direct IO to its backing file "
                f"(dio={notes.get('dio')}); the loop driver goes through the page cache",
                file=sys.stderr,
            )
        yield {
            "image": str(image),
            "image_bytes": size,
            "fill": f"os.urandom, {RAMDISK_FILL_CHUNK // 2**20} MiB chunks",
            "fill_s": round(fill_s, 2),
            "losetup_cmd": cmd,
            "losetup_stderr": done.stderr.strip() or None,
            "device": device,
            **notes,
        }
    finally:
        # A second Ctrl-C must not cut the clean-up short.
        sigint = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            _remove_ramdisk(losetup, image, device)
        finally:
            signal.signal(signal.SIGINT, sigint)
            for sig, handler in handlers.items():
                signal.signal(sig, handler)


def _remove_ramdisk(losetup: str, image: Path, device: str | None) -> None:
    # Also whatever got attached if we were interrupted before losetup printed the device.
    devices = list(dict.fromkeys([d for d in [device] if d] + attached_loops(losetup, image)))
    for dev in devices:
        done = subprocess.run([losetup, "--detach", dev], capture_output=True, text=True)
        if done.returncode != 0:
            print(
                f"{_prog()}: could not detach {dev}: {done.stderr.strip()}; run `losetup -d {dev}`",
                file=sys.stderr,
            )
    # Detaching is lazy while something still holds the device (a killed child's io_uring is
    # torn down asynchronously); wait a little for it to complete.
    deadline = time.monotonic() + 10.0
    while (left := attached_loops(losetup, image)) and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        image.unlink(missing_ok=True)
    except OSError as exc:
        print(f"{_prog()}: could not remove {image}: {exc.strerror}", file=sys.stderr)
    print(
        f"ramdisk: detached {', '.join(devices) or 'nothing'}, removed {image}"
        + (f" (detach still pending after 10 s: {', '.join(left)})" if left else ""),
        flush=True,
    )


@contextmanager
def pinned_workqueues(cpu: int | None) -> Iterator[None]:
    """With --pin: the kernel's unbound workqueues (a loop device's worker among them) on `cpu`
    for the run, restored at exit. Both tools then run where the device's completion work
    runs, one scheduler state for both, so the engines are compared rather than where the
    scheduler happened to put them (bench/README.md, "One scheduler state for both tools")."""
    if cpu is None:
        yield
        return
    if os.geteuid() != 0:
        raise SetupError("--pin needs root (it sets the unbound workqueues' CPU mask)")
    if not 0 <= cpu < (os.cpu_count() or 1):
        raise SetupError(f"--pin must be a CPU number from 0 to {(os.cpu_count() or 1) - 1}")
    old = WORKQUEUE_CPUMASK.read_text().strip()
    WORKQUEUE_CPUMASK.write_text(f"{1 << cpu:x}\n")
    try:
        yield
    finally:
        WORKQUEUE_CPUMASK.write_text(old + "\n")
