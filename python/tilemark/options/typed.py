"""The options a command was given, typed and frozen, built once at the edge.

The CLI (cli/params.py) and the Python API (api.py) both turn what they were given into
option values keyed by parameter name, and `Options.from_values` turns those into one frozen
`Options`: a dataclass per scope of the table, whose fields are that scope's keys. Every value
is parsed here with its option's parser (so a bad value is the same one sentence from the CLI
and the API); nothing below the edge reads a dict of options.

Two scopes stay as given, on purpose: `run` and `stream` options given on the command line
are laid over a workload file (the file's `duration = "2m"` replaced by `--duration 10s`) and
parsed with the file by workload/plan.py, whose messages then name the flag (`--qd`) rather
than the key. `WorkloadFlags` holds them as read-only mappings of TOML key to the value typed.

`None` means "not given": the command that uses an option applies its default (documented in
the table's `default`), because several defaults depend on other options (warm-up of tile runs,
the queue depth of open-loop streams).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tilemark.options.table import OPTIONS, Option

DEFAULT_RESULTS = Path("tilemark-results")


def _frozen(mapping: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class WorkloadFlags:
    """Run-wide and stream options given on the command line, as typed (see the module doc)."""

    run: Mapping[str, Any] = field(default_factory=lambda: _frozen({}))
    stream: Mapping[str, Any] = field(default_factory=lambda: _frozen({}))
    use_default: bool = False  # --default: the built-in workload
    buffered: bool = False  # --buffered: direct = false

    def run_doc(self) -> dict[str, Any]:
        """The run-wide keys given, as a workload file writes them (a new dict to lay over one)."""
        doc = {k: v for k, v in self.run.items() if _option("run", k).toml}
        if self.buffered:
            doc["direct"] = False
        return doc

    @property
    def verify(self) -> bool:
        return bool(self.run.get("verify"))

    def parsed(self, key: str, default: Any) -> Any:
        """A run-wide option given on the command line, parsed (for commands that take no
        workload file: tile runs, scale); `default` when it was not given."""
        if key not in self.run:
            return default
        o = _option("run", key)
        return o.parse(self.run[key], o.flag or key)


@dataclass(frozen=True)
class TileOptions:
    """Tile runs (`run --tiles N`) and scaling studies."""

    tiles: int | None = None
    tile: str | None = None
    capacity: int | None = None
    set: tuple[str, ...] = ()
    qos_interval: float | None = None  # seconds
    max_duration: float | None = None  # seconds


@dataclass(frozen=True)
class StudyOptions:
    """How a study chooses, repeats and judges its steps (scale, repeat, sweep, matrix, curve).
    List-valued options (`counts`, `sweep_qd`, `loads`, ...) stay text: each study parses its
    own list syntax (`1..8`, `1,2,4,...,256`)."""

    counts: str | None = None
    search: bool = False
    confirm: int | None = None
    confirm_runs: int | None = None
    repeat: int | None = None
    knob: str | None = None
    knob_range: str | None = None
    knob_precision: float | None = None
    settle: bool = True
    settle_max: float | None = None
    pause: float | None = None
    between: str | None = None
    sweep_bs: str | None = None
    sweep_qd: str | None = None
    sweep_read: str | None = None
    sweep_region: str | None = None
    yes: bool = False
    small_bs: int | None = None
    small_read: float | None = None
    small_qd: str | None = None
    large_bs: int | None = None
    large_read: float | None = None
    large_streams: str | None = None
    large_qd: int | None = None
    max_qd: int | None = None
    loads: str | None = None
    slo: str | None = None


@dataclass(frozen=True)
class SteadyOptions:
    """`--until-steady`: rounds until the SNIA PTS steady-state rule holds."""

    until_steady: bool = False
    round: float | None = None  # seconds
    max_rounds: int | None = None
    metric: str | None = None


@dataclass(frozen=True)
class PreconditionOptions:
    """`tilemark precondition`."""

    targets: tuple[str, ...] = ()
    passes: int | None = None
    bs: int | None = None


@dataclass(frozen=True)
class Safety:
    """What the user allowed to be written."""

    fill: bool = False
    destroy_data: tuple[str, ...] | None = None
    force: bool = False

    def inspect_kwargs(self) -> dict[str, Any]:
        """As target inspection takes them (targets.sets.inspect_targets)."""
        return {
            "destroy_data": list(self.destroy_data) if self.destroy_data is not None else None,
            "force": self.force,
            "fill": self.fill,
        }


@dataclass(frozen=True)
class ClusterOptions:
    """Which hosts run the plan (docs/cluster.md)."""

    cluster: str | None = None
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None


@dataclass(frozen=True)
class OutputOptions:
    """Where results go and how they are printed."""

    json: bool = False
    report: bool = True
    label: str | None = None
    metrics_port: int | None = None
    metrics_bind: str | None = None
    results: Path = DEFAULT_RESULTS


# scope -> its typed class (run and stream: WorkloadFlags, see the module doc)
SCOPES: dict[str, type] = {
    "tile": TileOptions,
    "study": StudyOptions,
    "steady": SteadyOptions,
    "precondition": PreconditionOptions,
    "safety": Safety,
    "cluster": ClusterOptions,
    "output": OutputOptions,
}


def _option(scope: str, key: str) -> Option:
    for o in OPTIONS:
        if o.scope == scope and o.key == key:
            return o
    raise KeyError(f"{scope}.{key}")


def _given(o: Option, value: Any) -> bool:
    """True when the user set the option (a switch that is on by default counts when off)."""
    if o.kind == "switch":
        return bool(value) != (o.off_flag is not None and o.default == "on")
    return value is not None and value != [] and value != ()


def _typed(o: Option, value: Any) -> Any:
    """One given value, parsed with its option's parser (lists as tuples, switches as bools)."""
    if o.kind == "switch":
        return bool(value)
    if o.kind == "list":
        return tuple(value) if not isinstance(value, str) else (value,)
    if o.kind == "int":
        return int(value)
    if o.key == "results":
        return Path(value)
    return o.parse(value, o.flag or o.key)


def _scope_options(scope: str, mode: str | None) -> dict[str, Option]:
    """key -> option of `scope` offered on the command line (in `mode` when given)."""
    out: dict[str, Option] = {}
    for o in OPTIONS:
        if o.scope == scope and o.flag and (mode is None or mode in o.modes):
            out.setdefault(o.key, o)
    return out


@dataclass(frozen=True)
class Options:
    """Everything a command was given, typed: one frozen object per scope."""

    mode: str
    workload: WorkloadFlags = field(default_factory=WorkloadFlags)
    tile: TileOptions = field(default_factory=TileOptions)
    study: StudyOptions = field(default_factory=StudyOptions)
    steady: SteadyOptions = field(default_factory=SteadyOptions)
    precondition: PreconditionOptions = field(default_factory=PreconditionOptions)
    safety: Safety = field(default_factory=Safety)
    cluster: ClusterOptions = field(default_factory=ClusterOptions)
    output: OutputOptions = field(default_factory=OutputOptions)

    @classmethod
    def from_values(cls, values: Mapping[str, Any], mode: str) -> Options:
        """Parse option values keyed by parameter name (what cli/params and api.values_from
        produce) for `mode`; a bad value is a UsageError naming its flag."""
        built: dict[str, Any] = {}
        for scope, kind in SCOPES.items():
            kwargs = {}
            for key, o in _scope_options(scope, None).items():
                if o.param in values and _given(o, values[o.param]):
                    kwargs[key] = _typed(o, values[o.param])
                elif o.kind == "switch" and o.param in values:
                    kwargs[key] = bool(values[o.param])
            built[scope] = kind(**kwargs)
        run = {
            k: values[o.param]
            for k, o in _scope_options("run", mode).items()
            if o.param in values and _given(o, values[o.param]) and o.toml
        }
        stream = {
            k: values[o.param]
            for k, o in _scope_options("stream", mode).items()
            if o.param in values and _given(o, values[o.param])
        }
        # A bad flag value is refused here, before the command loads the engine and the store
        # (0.5-1 s): the workload layer parses the same values with the same parsers later.
        for scope, given in (("run", run), ("stream", stream)):
            offered = _scope_options(scope, mode)
            for key, value in given.items():
                o = offered[key]
                if o.parse is not None and not isinstance(value, (list, tuple)):
                    o.parse(value, o.flag or key)
        workload = WorkloadFlags(
            run=_frozen(run),
            stream=_frozen(stream),
            use_default=bool(values.get("use_default")),
            buffered=bool(values.get("buffered")),
        )
        return cls(mode=mode, workload=workload, **built)

    def given(self, scope: str, key: str) -> bool:
        """Did the user set option `key` of `scope`?"""
        if scope in ("run", "stream"):
            return key in (self.workload.run if scope == "run" else self.workload.stream)
        value = getattr(getattr(self, scope), key)
        default = next(f.default for f in fields(SCOPES[scope]) if f.name == key)
        return value != default
