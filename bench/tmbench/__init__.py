"""What the benchmark scripts under bench/ share, one module per concern.

- `common`: the repository's paths, small helpers (sizes, text of files and commands, medians
  and spreads), `SetupError`;
- `proc`: child processes and their CPU: process trees, a child run sampled every 0.1 s, the
  CPU window inside a measurement phase, load average and pressure stall information;
- `machine`: the machine notes every result carries (CPU, kernel, scheduler facts, the block
  device and filesystem under the target);
- `loopdev`: the RAM disk (a loop device over random bytes in /dev/shm) and the kernel's unbound
  workqueues pinned to one CPU;
- `tools`: running tilemark and fio and reading their output;
- `results`: writing a results file pair (JSON and Markdown) under its standard name.

A script run as `python bench/x.py` has bench/ first on sys.path, so it imports this package
by name. The names below are the package's whole interface, for `import tmbench`.
"""

from tmbench.common import (
    BENCH,
    DEFAULT_FIO,
    LOGS,
    REPO,
    RESULTS_DIR,
    SCRATCH,
    SETTLE_S,
    TILEMARK_RESULTS,
    WORK,
    SetupError,
    median_or_none,
    parse_size,
    positive_float,
    ratio,
    read_text,
    rel,
    rmdir_retrying,
    run_text,
    settle,
    spread,
    tracefs_lost_events,
)
from tmbench.loopdev import (
    DEVICE_REGION_ALIGN,
    RAMDISK_IMAGE,
    attached_loops,
    fill_random,
    pinned_workqueues,
    ramdisk,
)
from tmbench.machine import block_device, loop_notes, machine_notes, scheduler_notes
from tmbench.proc import (
    CLK_TCK,
    SAMPLE_INTERVAL_S,
    WINDOW_MARGIN_S,
    ChildRun,
    cpu_us_per_io,
    load_now,
    psi_some,
    run_child,
    tree_cpu_ticks,
    tree_pids,
    window_cpu,
)
from tmbench.results import results_stem, write_results
from tmbench.tools import (
    HEADER_SIZE,
    MARKER,
    Settings,
    check_fio,
    check_tilemark,
    find_tilemark,
    parse_fio,
    parse_tilemark,
    read_header,
)

__all__ = [
    "BENCH",
    "CLK_TCK",
    "DEFAULT_FIO",
    "DEVICE_REGION_ALIGN",
    "HEADER_SIZE",
    "LOGS",
    "MARKER",
    "RAMDISK_IMAGE",
    "REPO",
    "RESULTS_DIR",
    "SAMPLE_INTERVAL_S",
    "SCRATCH",
    "SETTLE_S",
    "TILEMARK_RESULTS",
    "WINDOW_MARGIN_S",
    "WORK",
    "ChildRun",
    "Settings",
    "SetupError",
    "attached_loops",
    "block_device",
    "check_fio",
    "check_tilemark",
    "cpu_us_per_io",
    "fill_random",
    "find_tilemark",
    "load_now",
    "loop_notes",
    "machine_notes",
    "median_or_none",
    "parse_fio",
    "parse_size",
    "parse_tilemark",
    "pinned_workqueues",
    "positive_float",
    "psi_some",
    "ramdisk",
    "ratio",
    "read_header",
    "read_text",
    "rel",
    "results_stem",
    "rmdir_retrying",
    "run_child",
    "run_text",
    "scheduler_notes",
    "settle",
    "spread",
    "tracefs_lost_events",
    "tree_cpu_ticks",
    "tree_pids",
    "window_cpu",
    "write_results",
]
