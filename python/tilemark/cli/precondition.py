"""`tilemark precondition`: write every target's whole data area sequentially, N passes
(SNIA PTS workload-independent preconditioning), and record it with the target."""

from __future__ import annotations

from typing import Any

import typer

from tilemark.cli.common import argv_of
from tilemark.cli.params import table_command
from tilemark.errors import UsageError
from tilemark.options import PRECONDITION, option
from tilemark.targets.precondition import (
    DEFAULT_BS,
    DEFAULT_PASSES,
    inspect,
    main_console,
    precondition,
)


def _value(values: dict[str, Any], key: str, default: Any) -> Any:
    o = option("precondition", key) if key != "size" else option("run", "size")
    raw = values.get(o.param)
    return default if raw is None else o.parse(raw, o.flag or key)


def _precondition(ctx: typer.Context, values: dict[str, Any]) -> None:
    if values.get("force") and values.get("destroy_data") is None:
        raise UsageError("--force only applies together with --destroy-data PATH.")
    passes = _value(values, "passes", DEFAULT_PASSES)
    bs = _value(values, "bs", DEFAULT_BS)
    size = _value(values, "size", None)
    infos = inspect(
        list(values.get("precondition_targets") or []),
        size=size,
        bs=bs,
        destroy_data=values.get("destroy_data"),
        force=bool(values.get("force")),
    )
    _, status = precondition(infos, passes=passes, bs=bs, argv=argv_of(ctx), console=main_console())
    if status:
        raise typer.Exit(status)


precondition_command = table_command(
    "precondition",
    "Precondition targets as the SNIA PTS prescribes: sequential 128 KiB writes over the whole "
    "data area, twice by default; later runs show the record in their provenance.",
    {PRECONDITION},
    _precondition,
)
