"""Options shared by `tilemark run --tiles` and `tilemark scale`, defined once so their names,
help and defaults cannot drift apart."""

from __future__ import annotations

from typing import Annotated

import typer

CapacityOpt = Annotated[
    str | None,
    typer.Option(
        "--capacity",
        metavar="SIZE",
        help="Space the tiles may use on the target, split over the largest tile count "
        "(default: min(2 GiB, 10% of free space)).",
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="APP.KNOB=VALUE",
        help="Override a profile knob or QoS limit, e.g. mail.mailboxes=2000 or "
        "oltp.qos.read_avg.max_ms=5 (repeatable).",
    ),
]
QosIntervalOpt = Annotated[
    str | None,
    typer.Option(
        "--qos-interval",
        metavar="TIME",
        help="Window for per-interval QoS criteria (default 60s, at most a quarter of the run).",
    ),
]
