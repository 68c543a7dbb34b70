"""Application profiles and tiles: emulated applications compiled to streams.

A *profile* (TOML, see python/tilemark/profiles/) is a workload plus its scale knobs, its
application metric and its QoS criteria. A *tile* is one instance of each application in a
mix; N tiles are N instances of each, on disjoint regions of the targets. Compiling a tile
count (tilelayout.py) gives an ordinary workload document (plan.py's TOML layout) plus, for
every stream, which tile and application it belongs to, so results can be reported per
application instance.

An application's streams may be mapped to targets by name: in a tile file (`target = "db1"`
for the whole application, `target = { db = "db1", log = "log1" }` per stream) or with
`--set mail.target=db1` / `--set mail.db.target=db1`. Unmapped streams follow their tile
(tilelayout.py: tile i on the targets in round robin).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tilemark.analysis import expr
from tilemark.analysis.qos import LATENCY_STATS, OPS, STATS, Criterion
from tilemark.errors import UsageError
from tilemark.options import MAX_COPIES, PROFILE_STREAM_KEYS, copy_names, parse_name
from tilemark.units import MIB, check_byte_rate, check_iops
from tilemark.workload.plan import StreamSpec, parse_workload
from tilemark.workload.tomlfile import read_toml

BUILTIN_DIR = Path(__file__).parent.parent / "profiles"
USER_DIR_ENV = "TILEMARK_PROFILES"
DEFAULT_TILE = ("mail", "oltp", "dss", "web", "backup")
UNIT = MIB

PROFILE_KEYS = ("name", "description", "kind", "capacity_weight", "metric", "metric_unit")
# A profile stream takes the workload stream keys, except where it is placed (the layout
# decides offset and length) and its seed (derived per run), plus profile-only keys.
APP_STREAM_KEYS = ("name", "region", "copies") + tuple(
    k for k in PROFILE_STREAM_KEYS if k not in ("name", "copies")
)
QOS_KEYS = ("stream", "streams", "op", "stat", "max_ms", "min_fraction", "per_interval")
KINDS = ("application", "workload")


@dataclass
class AppStream:
    """A stream of a profile, with its rate and queue depth still as expressions."""

    name: str
    region: tuple[float, float]
    copies: int
    table: dict[str, Any]  # plan.py stream keys with literal values
    rate: str | float | None = None
    rate_bytes: str | float | None = None
    qd: str | int | None = None
    # A trace application's stream replays this trace (trace/tileapp.py TraceSource).
    trace: Any = None


@dataclass
class Profile:
    """An application profile: streams, scale knobs, metric and QoS."""

    name: str
    description: str
    kind: str
    capacity_weight: float
    metric: str
    metric_unit: str
    scale: dict[str, float]
    streams: list[AppStream]
    qos: list[Criterion]
    path: str
    # `[learned]` of a profile learned from traces (docs/learn.md): its source's fingerprint,
    # the model's size and the fidelity measured; None for a hand-written profile.
    learned: dict[str, Any] | None = None
    # `[evidence.APP]`: how the profile scored against a real application (docs/tiles.md).
    evidence: dict[str, Any] | None = None

    def stream_names(self) -> list[str]:
        """Names of the compiled streams (copy i of NAME is NAME@i)."""
        out = []
        for s in self.streams:
            out += copy_names(s.name, s.copies)
        return out

    def expand(self, names: Iterable[str]) -> list[str]:
        """Compiled stream names for names that may be a stream with copies ('worker' ->
        worker@0..worker@3); raises ExprError for an unknown name."""
        out: list[str] = []
        for name in names:
            base = next((s for s in self.streams if s.name == name), None)
            if base is not None and base.copies > 1:
                out += copy_names(name, base.copies)
            elif name in self.stream_names():
                out.append(name)
            else:
                known = ", ".join(s.name for s in self.streams)
                raise expr.ExprError(f"unknown stream '{name}' (streams: {known})")
        return out

    def rates(self) -> dict[str, dict[str, float]]:
        """Per compiled stream: its target IO rate and/or byte rate at the current scale."""
        out: dict[str, dict[str, float]] = {}
        for s in self.streams:
            r = {}
            if s.rate is not None:
                r["iops"] = self._value(s.rate, f"stream '{s.name}': rate")
                self._bounded(check_iops, r["iops"], f"stream '{s.name}': rate")
            if s.rate_bytes is not None:
                r["bps"] = self._value(s.rate_bytes, f"stream '{s.name}': rate_bytes")
                self._bounded(check_byte_rate, r["bps"], f"stream '{s.name}': rate_bytes")
            names = copy_names(s.name, s.copies)
            for n in names:
                out[n] = r
        return out

    def _value(self, text: str | float | int, field: str) -> float:
        try:
            value = expr.evaluate(text, self.scale)
        except expr.ExprError as e:
            raise UsageError(f"profile {self.path}: {field}: {e}.") from None
        if not (math.isfinite(value) and value > 0):
            raise UsageError(f"profile {self.path}: {field} must come out above 0, got {value:g}.")
        return value

    def _bounded(self, check: Any, value: float, field: str) -> None:
        try:
            check(value, field)
        except UsageError as e:
            raise UsageError(f"profile {self.name}: {e}") from None

    def with_overrides(self, overrides: dict[str, Any]) -> Profile:
        """A copy with scale knobs (`knob`) and QoS limits (`qos.ID.max_ms` etc.) replaced."""
        scale = dict(self.scale)
        qos = {c.id: c for c in self.qos}
        for key, value in overrides.items():
            where = f"override {self.name}.{key}"
            parts = key.split(".")
            if len(parts) == 1:
                if key not in scale:
                    raise UsageError(
                        f"{where}: {self.name} has no scale knob '{key}' "
                        f"(knobs: {', '.join(sorted(scale)) or 'none'})."
                    )
                scale[key] = _number(value, where)
            elif len(parts) == 3 and parts[0] == "qos":
                cid, attr = parts[1], parts[2]
                if cid not in qos:
                    raise UsageError(
                        f"{where}: {self.name} has no QoS criterion '{cid}' "
                        f"(criteria: {', '.join(qos) or 'none'})."
                    )
                if attr not in ("max_ms", "min_fraction"):
                    raise UsageError(f"{where}: only max_ms and min_fraction can be overridden.")
                qos[cid] = replace(qos[cid], **{attr: _number(value, where)})
            else:
                raise UsageError(f"{where}: use KNOB=VALUE or qos.ID.max_ms=VALUE.")
        tuned = replace(self, scale=scale, qos=list(qos.values()))
        try:
            tuned.rates()  # a knob that makes a rate impossible fails here
        except UsageError as e:
            given = ", ".join(f"{self.name}.{k}={v}" for k, v in overrides.items())
            raise UsageError(f"override {given}: {e}") from None
        return tuned


def _number(value: Any, where: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{where} must be a number, got {value!r}.") from None
    if not math.isfinite(v) or v < 0:
        raise UsageError(f"{where} must be a number of 0 or more, got {value!r}.")
    return v


def profile_dirs() -> list[Path]:
    """Where profiles are looked up: $TILEMARK_PROFILES (colon-separated), then built-ins."""
    extra = [Path(p) for p in os.environ.get(USER_DIR_ENV, "").split(":") if p]
    return [*extra, BUILTIN_DIR]


def find_profile(name_or_path: str) -> Path:
    """The file of a profile named by name or path."""
    p = Path(name_or_path)
    if p.suffix == ".toml" or os.sep in name_or_path:
        if not p.is_file():
            raise UsageError(f"profile file {name_or_path} does not exist.")
        return p
    for d in profile_dirs():
        candidate = d / f"{name_or_path}.toml"
        if candidate.is_file():
            return candidate
    known = ", ".join(sorted({f.stem for d in profile_dirs() for f in d.glob("*.toml")}))
    raise UsageError(f"unknown profile '{name_or_path}' (known: {known}).")


def list_profiles() -> list[Profile]:
    """Every profile found, user directories first; a name is listed once."""
    seen: dict[str, Profile] = {}
    for d in profile_dirs():
        for f in sorted(d.glob("*.toml")):
            if f.stem not in seen:
                seen[f.stem] = load_profile(str(f))
    return list(seen.values())


def load_profile(name_or_path: str) -> Profile:
    """Load and validate a profile; errors name the file and the field."""
    path = find_profile(name_or_path)
    where = str(path)
    doc = read_toml(path, "profile")
    _keys(doc, ("profile", "scale", "stream", "qos", "learned", "evidence"), where)
    learned, evidence = doc.get("learned"), doc.get("evidence")
    if learned is not None and not isinstance(learned, dict):
        raise UsageError(f"profile {where}: [learned] must be a table (written by tilemark learn).")
    if evidence is not None and not (
        isinstance(evidence, dict) and all(isinstance(v, dict) for v in evidence.values())
    ):
        raise UsageError(f"profile {where}: [evidence.APP] must be tables of fidelity scores.")
    head = _keys(doc.get("profile", {}), PROFILE_KEYS, f"{where} [profile]")
    for required in ("name", "metric", "metric_unit"):
        if not isinstance(head.get(required), str) or not head[required]:
            raise UsageError(f"profile {where}: [profile] {required} is required (a string).")
    kind = head.get("kind", "application")
    if kind not in KINDS:
        raise UsageError(
            f"profile {where}: [profile] kind must be one of {', '.join(KINDS)}, got {kind!r}."
        )
    weight = head.get("capacity_weight", 1)
    if not isinstance(weight, int | float) or isinstance(weight, bool) or weight <= 0:
        raise UsageError(f"profile {where}: [profile] capacity_weight must be a number above 0.")
    scale = {}
    for k, v in doc.get("scale", {}).items():
        scale[k] = _number(v, f"profile {where}: [scale] {k}")
    tables = doc.get("stream")
    if not isinstance(tables, list) or not tables:
        raise UsageError(f"profile {where} has no [[stream]] tables.")
    streams = [_app_stream(t, i, where) for i, t in enumerate(tables)]
    names = [s.name for s in streams]
    if len(set(names)) != len(names):
        raise UsageError(f"profile {where}: stream names must be unique, got {names}.")
    profile = Profile(
        name=head["name"],
        description=head.get("description", ""),
        kind=kind,
        capacity_weight=float(weight),
        metric=head["metric"],
        metric_unit=head["metric_unit"],
        scale=scale,
        streams=streams,
        qos=[],
        path=where,
        learned=learned,
        evidence=evidence,
    )
    profile.qos = [_criterion(cid, t, profile, where) for cid, t in doc.get("qos", {}).items()]
    # Evaluate every expression once now, so a typo fails at load time with the file named.
    profile.rates()
    for s in streams:
        if isinstance(s.qd, str):
            profile._value(s.qd, f"stream '{s.name}': qd")
    _check_metric(profile)
    _check_streams(profile)
    return profile


def _check_metric(profile: Profile) -> None:
    """Evaluate the metric once with stand-in measurements, so a typo, an unknown stream or an
    unknown function fails at load time rather than after the run."""

    def measure(*streams: str) -> float:
        profile.expand(streams)
        return 1.0

    try:
        bad = expr.names_in(profile.metric) - set(profile.scale)
        if bad:
            raise expr.ExprError(
                f"unknown name(s) {', '.join(sorted(bad))} "
                f"(scale knobs: {', '.join(sorted(profile.scale)) or 'none'})"
            )
        expr.evaluate(profile.metric, profile.scale, {"iops": measure, "mbps": measure})
    except expr.ExprError as e:
        raise UsageError(f"profile {profile.path}: [profile] metric: {e}.") from None


def _check_streams(profile: Profile) -> None:
    """Validate every stream's workload keys (rw, bs, pattern, ...) with the workload parser,
    so a bad one names the profile file."""
    stream_specs(profile)


def stream_specs(profile: Profile) -> list[StreamSpec]:
    """The profile's streams as the workload parser reads them (typed: arrival, batching,
    sync, ...), one per profile stream, at its current scale; a bad key names the profile
    file."""
    rates = profile.rates()
    tables = []
    for s in profile.streams:
        table = {**s.table, "name": s.name}
        r = rates[copy_names(s.name, s.copies)[0]]
        if "iops" in r:
            table["rate"] = r["iops"]
        if "bps" in r:
            table["rate_bytes"] = r["bps"]
        if s.qd is not None:
            table["qd"] = max(1, int(round(profile._value(s.qd, f"stream '{s.name}': qd"))))
        tables.append(table)
    try:
        return parse_workload(
            {"target": profile.path, "stream": tables}, source=profile.path
        ).streams
    except UsageError as e:
        raise UsageError(f"profile {profile.path}: {e}") from None


def _keys(table: Any, allowed: tuple[str, ...], where: str) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise UsageError(f"profile {where} must be a table.")
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise UsageError(
            f"profile {where}: unknown key '{unknown[0]}' (allowed: {', '.join(allowed)})."
        )
    return table


def _app_stream(t: Any, index: int, where: str) -> AppStream:
    name = t.get("name") if isinstance(t, dict) else None
    here = f"{where} [[stream]] {name or index + 1}"
    _keys(t, APP_STREAM_KEYS, here)
    if not isinstance(name, str) or not name:
        raise UsageError(f"profile {here}: name is required.")
    region = t.get("region", [0.0, 1.0])
    if (
        not isinstance(region, list)
        or len(region) != 2
        or not all(isinstance(x, int | float) for x in region)
        or not 0 <= region[0] < region[1] <= 1
    ):
        raise UsageError(f"profile {here}: region must be [from, to] with 0 <= from < to <= 1.")
    copies = t.get("copies", 1)
    if isinstance(copies, bool) or not isinstance(copies, int) or not 1 <= copies <= MAX_COPIES:
        raise UsageError(f"profile {here}: copies must be an integer from 1 to {MAX_COPIES:,}.")
    table = {
        k: v
        for k, v in t.items()
        if k not in ("name", "region", "copies", "rate", "rate_bytes", "qd")
    }
    return AppStream(
        name=name,
        region=(float(region[0]), float(region[1])),
        copies=copies,
        table=table,
        rate=t.get("rate"),
        rate_bytes=t.get("rate_bytes"),
        qd=t.get("qd"),
    )


def _criterion(cid: str, t: Any, profile: Profile, where: str) -> Criterion:
    here = f"{where} [qos.{cid}]"
    _keys(t, QOS_KEYS, here)
    names = t.get("streams", [t["stream"]] if "stream" in t else None)
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise UsageError(f"profile {here}: stream (a name) or streams (a list) is required.")
    try:
        names = profile.expand(names)
    except expr.ExprError as e:
        raise UsageError(f"profile {here}: {e}.") from None
    stat = t.get("stat")
    if stat not in STATS:
        raise UsageError(
            f"profile {here}: stat must be one of {', '.join(sorted(STATS))}, got {stat!r}."
        )
    op = t.get("op")
    if op is not None and op not in OPS:
        raise UsageError(f"profile {here}: op must be one of {', '.join(OPS)}, got {op!r}.")
    if stat in LATENCY_STATS and not isinstance(t.get("max_ms"), int | float):
        raise UsageError(f"profile {here}: a latency criterion needs max_ms (a number).")
    if stat == "throughput" and not isinstance(t.get("min_fraction"), int | float):
        raise UsageError(f"profile {here}: a throughput criterion needs min_fraction (e.g. 0.95).")
    return Criterion(
        id=cid,
        streams=tuple(names),
        stat=stat,
        op=op,
        max_ms=float(t["max_ms"]) if "max_ms" in t else None,
        min_fraction=float(t["min_fraction"]) if "min_fraction" in t else None,
        per_interval=bool(t.get("per_interval", False)),
    )


WHOLE_APP = "*"  # key of TileApp.targets: every stream of the application


@dataclass
class TileApp:
    """One application of a tile: a profile and its overrides."""

    profile: Profile
    label: str  # unique within the tile, e.g. "mail" or "mail2"
    # Target names by profile stream name (WHOLE_APP: every stream); unmapped streams follow
    # their tile's target.
    targets: dict[str, str] = field(default_factory=dict)
    host: str | None = None  # cluster runs: every instance runs on this host

    def target_of(self, stream: str) -> str | None:
        """The target a profile stream is mapped to, or None (its tile's)."""
        return self.targets.get(stream, self.targets.get(WHOLE_APP))


def split_targets(
    overrides: dict[str, Any], profile: Profile, where: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """Target mappings (`target`, `STREAM.target`) taken out of an application's overrides:
    (the rest, {stream or WHOLE_APP: target name})."""
    rest: dict[str, Any] = {}
    mapped: dict[str, str] = {}
    streams = [s.name for s in profile.streams]
    for key, value in overrides.items():
        parts = key.split(".")
        if parts[-1] != "target" or len(parts) > 2:
            rest[key] = value
            continue
        stream = WHOLE_APP if len(parts) == 1 else parts[0]
        if stream != WHOLE_APP and stream not in streams:
            raise UsageError(
                f"{where}.{key}: {profile.name} has no stream '{stream}' (streams: "
                f"{', '.join(streams)})."
            )
        mapped[stream] = parse_name(str(value).strip(), f"{where}.{key}")
    return rest, mapped


@dataclass
class TileSpec:
    """The applications that make up one tile."""

    name: str
    apps: list[TileApp]
    source: str = "default"
    # File applications (files/tileapps.py FileTileApp): file workloads beside the block ones.
    file_apps: list[Any] = field(default_factory=list)

    @property
    def block(self) -> bool:
        """True when the tile has block applications (else only file applications: it needs
        no target, and its block run keeps time only)."""
        return bool(self.apps)

    def total_weight(self) -> float:
        return sum(a.profile.capacity_weight for a in self.apps)
