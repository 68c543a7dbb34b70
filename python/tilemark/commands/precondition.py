"""`tilemark precondition`: write every target's whole data area sequentially, N passes (SNIA
PTS workload-independent preconditioning), and record it with the target."""

from __future__ import annotations

from rich.console import Console

from tilemark.errors import UsageError
from tilemark.options.typed import Options
from tilemark.targets.precondition import (
    DEFAULT_BS,
    DEFAULT_PASSES,
    Preconditioning,
    inspect,
    precondition,
)


def run(opts: Options, *, argv: list[str], console: Console) -> tuple[list[Preconditioning], int]:
    """Inspect every target (safety checks), then precondition each in turn, locked; (what each
    did, exit status: 0, or 128 + signal when interrupted, the passes so far recorded)."""
    safety = opts.safety
    if safety.force and safety.destroy_data is None:
        raise UsageError("--force only applies together with --destroy-data PATH.")
    given = opts.precondition
    bs = given.bs or DEFAULT_BS
    infos = inspect(
        list(given.targets),
        size=opts.workload.parsed("size", None),
        bs=bs,
        destroy_data=list(safety.destroy_data) if safety.destroy_data is not None else None,
        force=safety.force,
    )
    return precondition(
        infos, passes=given.passes or DEFAULT_PASSES, bs=bs, argv=argv, console=console
    )
