"""Tile files: `[tile]` and its `[[app]]` tables (a profile with overrides, or a trace replayed
as an application), the default tile, one profile as a tile, and `--set APP.KEY=VALUE`
overrides (docs/tiles.md). Profiles themselves are workload/apps.py; trace applications
trace/tileapp.py."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from tilemark.errors import UsageError
from tilemark.options import parse_name
from tilemark.workload.apps import (
    DEFAULT_TILE,
    WHOLE_APP,
    Profile,
    TileApp,
    TileSpec,
    load_profile,
    profile_dirs,
    split_targets,
)
from tilemark.workload.tomlfile import read_toml


def default_tile(overrides: dict[str, dict[str, Any]] | None = None) -> TileSpec:
    """mail + oltp + dss + web + backup, like the ESG Lab tile (seed 000)."""
    overrides = overrides or {}
    _check_override_targets(overrides, list(DEFAULT_TILE))
    apps = []
    for n in DEFAULT_TILE:
        profile = load_profile(n)
        rest, mapped = split_targets(overrides.get(n, {}), profile, f"--set {n}")
        apps.append(TileApp(profile.with_overrides(rest), n, mapped))
    return TileSpec("default", apps)


def load_tile(path: str, overrides: dict[str, dict[str, Any]] | None = None) -> TileSpec:
    """A tile file: `[tile] name`, then `[[app]] profile = "mail"` with optional `name` and
    a `[app.scale]` / `[app.qos]` table of overrides."""
    overrides = overrides or {}
    p = Path(path)
    doc = read_toml(p, "tile file")
    unknown = sorted(set(doc) - {"tile", "app"})
    if unknown:
        raise UsageError(f"tile file {path}: unknown key '{unknown[0]}' (allowed: tile, app).")
    head = doc.get("tile", {})
    if not isinstance(head, dict):
        raise UsageError(f'tile file {path}: [tile] must be a table (e.g. name = "mine").')
    apps_doc = doc.get("app")
    if not isinstance(apps_doc, list) or not apps_doc:
        raise UsageError(f'tile file {path} has no [[app]] tables (e.g. profile = "mail").')
    apps: list[TileApp] = []
    file_apps: list[Any] = []
    for i, a in enumerate(apps_doc):
        here = f"tile file {path} [[app]] {i + 1}"
        if not isinstance(a, dict):
            raise UsageError(f"{here} must be a table.")
        if "trace" in a:
            apps.append(_trace_app(a, p, here, overrides))
            continue
        if "files" in a:
            from tilemark.files.tileapps import parse_file_app

            file_apps.append(parse_file_app(a, p, here, overrides))
            continue
        bad = sorted(set(a) - {"profile", "name", "scale", "qos", "target", "host"})
        if bad:
            raise UsageError(
                f"{here}: unknown key '{bad[0]}' (allowed: profile, name, scale, qos, target, "
                f"host; or trace instead of profile)."
            )
        host = a.get("host")
        if host is not None and not (isinstance(host, str) and host):
            raise UsageError(f"{here}: host must be a host or worker name, got {host!r}.")
        if not isinstance(a.get("profile"), str):
            raise UsageError(
                f"{here}: profile is required (a built-in name or a .toml path), or trace "
                "(a trace file to replay)."
            )
        profile = load_profile(_relative(a["profile"], p))
        label = a.get("name", profile.name)
        if not isinstance(label, str) or not label:
            raise UsageError(f"{here}: name must be a string, got {label!r}.")
        scale, qos = a.get("scale", {}), a.get("qos", {})
        if not isinstance(scale, dict):
            raise UsageError(
                f"{here}: scale must be a table of knobs, e.g. scale = {{ iops = 500 }}."
            )
        if not isinstance(qos, dict) or not all(isinstance(v, dict) for v in qos.values()):
            raise UsageError(
                f"{here}: qos must be a table of criteria, "
                "e.g. qos = { read_avg = { max_ms = 5 } }."
            )
        file_over: dict[str, Any] = dict(scale)
        for cid, limits in qos.items():
            for attr, v in limits.items():
                file_over[f"qos.{cid}.{attr}"] = v
        mapped = _file_targets(a.get("target"), profile, here)
        try:
            tuned = profile.with_overrides(file_over)
        except UsageError as e:
            raise UsageError(f"{here}: {e}") from None
        rest, set_targets = split_targets(overrides.get(label, {}), profile, f"--set {label}")
        apps.append(TileApp(tuned.with_overrides(rest), label, {**mapped, **set_targets}, host))
    labels = [a.label for a in apps] + [a.label for a in file_apps]
    if len(set(labels)) != len(labels):
        raise UsageError(
            f"tile file {path}: application names must be unique; set name = ... ({labels})."
        )
    _check_override_targets(overrides, labels)
    name = head.get("name", p.stem)
    if not isinstance(name, str) or not name:
        raise UsageError(f"tile file {path}: [tile] name must be a string, got {name!r}.")
    return TileSpec(name, apps, source=str(p), file_apps=file_apps)


def _trace_app(
    a: dict[str, Any], tile_file: Path, here: str, overrides: dict[str, dict[str, Any]]
) -> TileApp:
    """`[[app]] trace = "pg.parquet"`: a trace replayed as an application (trace/tileapp.py)."""
    from tilemark.trace.tileapp import APP_KEYS, trace_profile  # numpy and pyarrow: only here

    bad = sorted(set(a) - set(APP_KEYS))
    if bad:
        raise UsageError(
            f"{here}: unknown key '{bad[0]}' (allowed with trace: {', '.join(APP_KEYS)})."
        )
    if not isinstance(a["trace"], str) or not a["trace"]:
        raise UsageError(f"{here}: trace must be a trace file's path (tilemark's Parquet format).")
    path = Path(a["trace"])
    if not path.is_absolute():
        path = tile_file.parent / path  # beside the tile file, as profile paths are
    if not path.is_file():
        raise UsageError(f"{here}: trace {path} does not exist.")
    label = a.get("name", re.sub(r"[^A-Za-z0-9_-]", "_", path.stem)[:40] or "trace")
    if not isinstance(label, str) or not label:
        raise UsageError(f"{here}: name must be a string, got {label!r}.")
    weight = a.get("capacity_weight", 1)
    if not isinstance(weight, int | float) or isinstance(weight, bool) or weight <= 0:
        raise UsageError(f"{here}: capacity_weight must be a number above 0.")
    qos = a.get("qos", {})
    if not isinstance(qos, dict) or not all(isinstance(v, dict) for v in qos.values()):
        raise UsageError(
            f"{here}: qos must be a table of criteria, e.g. qos = {{ read_p99 = {{ op = "
            '"read", stat = "p99", max_ms = 20 }}.'
        )
    host = a.get("host")
    if host is not None and not (isinstance(host, str) and host):
        raise UsageError(f"{here}: host must be a host or worker name, got {host!r}.")
    profile = trace_profile(path, a.get("speed", 1.0), weight, label, qos, here)
    mapped = _file_targets(a.get("target"), profile, here)
    rest, set_targets = split_targets(overrides.get(label, {}), profile, f"--set {label}")
    return TileApp(profile.with_overrides(rest), label, {**mapped, **set_targets}, host)


def _file_targets(value: Any, profile: Profile, here: str) -> dict[str, str]:
    """A tile file's `target`: a name (the whole application) or {stream: name}."""
    if value is None:
        return {}
    if isinstance(value, str):
        return {WHOLE_APP: parse_name(value, f"{here}: target")}
    if not isinstance(value, dict) or not value:
        raise UsageError(
            f"{here}: target must be a target name or a table of them by stream, e.g. target = "
            f'{{ db = "db1", log = "log1" }}.'
        )
    streams = [s.name for s in profile.streams]
    out = {}
    for stream, name in value.items():
        if stream not in streams:
            raise UsageError(
                f"{here}: target.{stream}: {profile.name} has no stream '{stream}' (streams: "
                f"{', '.join(streams)})."
            )
        out[stream] = parse_name(name, f"{here}: target.{stream}")
    return out


def load_tile_or_profile(name: str, overrides: dict[str, dict[str, Any]] | None = None) -> TileSpec:
    """A tile file, or one profile (a built-in or $TILEMARK_PROFILES name, or a profile file)
    as a tile of that one application: `tilemark scale jetstress-2010 --knob mailboxes`."""
    path = Path(name)
    if path.is_file():
        doc = read_toml(path, "tile file")
        if "profile" in doc and "app" not in doc:
            return profile_tile(name, overrides)
        return load_tile(name, overrides)
    if path.suffix != ".toml" and os.sep not in name:
        if any((d / f"{name}.toml").is_file() for d in profile_dirs()):
            return profile_tile(name, overrides)
    return load_tile(name, overrides)  # says the tile file does not exist


def profile_tile(name: str, overrides: dict[str, dict[str, Any]] | None = None) -> TileSpec:
    """A tile of one application: the profile `name`, labelled with its own name."""
    overrides = overrides or {}
    profile = load_profile(name)
    _check_override_targets(overrides, [profile.name])
    rest, mapped = split_targets(overrides.get(profile.name, {}), profile, f"--set {profile.name}")
    tuned = profile.with_overrides(rest)
    return TileSpec(profile.name, [TileApp(tuned, profile.name, mapped)], source=profile.path)


def _relative(profile: str, tile_file: Path) -> str:
    if profile.endswith(".toml") and not os.path.isabs(profile):
        return str(tile_file.parent / profile)
    return profile


def _check_override_targets(overrides: dict[str, Any], labels: list[str]) -> None:
    for app in overrides:
        if app not in labels:
            raise UsageError(
                f"--set {app}.…: the tile has no application '{app}' (it has: {', '.join(labels)})."
            )


def parse_sets(items: list[str]) -> dict[str, dict[str, Any]]:
    """`--set APP.KNOB=VALUE` / `--set APP.qos.ID.max_ms=VALUE` into {app: {key: value}}."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        key, eq, value = item.partition("=")
        app, dot, rest = key.strip().partition(".")
        if not eq or not dot or not rest or not value.strip():
            raise UsageError(f"--set {item!r}: use APP.KNOB=VALUE, e.g. mail.mailboxes=2000.")
        out.setdefault(app, {})[rest] = value.strip()
    return out
