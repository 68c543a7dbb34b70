"""Typer commands whose options come from the option table (tilemark/options.py).

`table_command` gives a function with a synthesized signature, one keyword parameter per option
of the command's modes, that typer turns into click options; the body receives the given values
by parameter name. `check_mode` refuses options that do not apply to the mode the user chose.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from tilemark.errors import UsageError
from tilemark.options import OPTIONS, Option

Body = Callable[[typer.Context, dict[str, Any]], None]


def command_options(modes: set[str]) -> list[Option]:
    """The options a command offers: those accepted in any of its modes, one per flag."""
    seen: set[str] = set()
    out = []
    for o in OPTIONS:
        if o.flag and o.modes & modes and o.flag not in seen:
            seen.add(o.flag)
            out.append(o)
    return out


def _typer_param(o: Option) -> inspect.Parameter:
    names = f"{o.flag}/{o.off_flag}" if o.off_flag else o.flag
    info = typer.Option(names, metavar=o.metavar, help=o.help_text(), show_default=False)
    if o.kind == "switch":
        annotation: Any = Annotated[bool, info]
        default: Any = o.off_flag is not None and o.default == "on"
    elif o.kind == "list":
        annotation, default = Annotated[list[str] | None, info], None
    elif o.kind == "int":
        annotation, default = Annotated[int | None, info], None
    else:
        annotation, default = Annotated[str | None, info], None
    return inspect.Parameter(
        o.param, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default
    )


def table_command(
    name: str,
    doc: str,
    modes: set[str],
    body: Body,
    arguments: list[inspect.Parameter] = (),  # type: ignore[assignment]
) -> Callable[..., None]:
    """A typer command function offering every table option of `modes`, plus `arguments`."""

    def command(ctx: typer.Context, **values: Any) -> None:
        body(ctx, values)

    params = [
        inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context),
        *arguments,
        *(_typer_param(o) for o in command_options(modes)),
    ]
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__name__ = command.__qualname__ = name
    command.__doc__ = doc
    return command


def argument(name: str, metavar: str, help: str) -> inspect.Parameter:
    """An optional positional argument (a file) of a table command."""
    info = typer.Argument(metavar=metavar, help=help, show_default=False)
    return inspect.Parameter(
        name,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        annotation=Annotated[Path | None, info],
        default=None,
    )


def given(o: Option, value: Any) -> bool:
    """True when the user set the option (a switch that is on by default counts when off)."""
    if o.kind == "switch":
        return value != (o.off_flag is not None and o.default == "on")
    return value is not None and value != []


def given_options(values: dict[str, Any], modes: set[str]) -> list[Option]:
    """The options of `modes` the user set, in table order."""
    return [o for o in command_options(modes) if o.param in values and given(o, values[o.param])]


def check_mode(
    values: dict[str, Any], mode: str, command_modes: set[str], clash: Callable[[Option], str]
) -> None:
    """Refuse any option the user set that the chosen mode does not take; `clash(option)` is
    the sentence to say. Also: --force needs --destroy-data."""
    for o in given_options(values, command_modes):
        if mode not in o.modes:
            raise UsageError(clash(o))
    if values.get("force") and values.get("destroy_data") is None and not values.get("cluster"):
        raise UsageError(
            "--force only applies together with --destroy-data PATH (or --cluster, where it "
            "accepts host clocks more than one interval apart)."
        )
