"""File applications in tiles: a file workload (varmail, webserver, fileserver, build or a TOML
file of [[fileset]] and [[filestream]], docs/files.md) as an application of a tile beside block
profiles (docs/tiles.md).

    [[app]]
    files = "varmail"           # a built-in file workload or a path relative to the tile file
    name = "mailfs"             # optional label (default: the workload's name)
    dir = "/mnt/nas/tm"         # the directory handed over: tile k's sets are DIR/t{k}.{name}.{set}
    qos = { fsync_p99 = { max_ms = 20 } }   # the workload's [qos.ID] limits, overridden

Its metric is the loops per second of its application stream (the first sequence whose `unit`
names something, messages for varmail, pages for webserver; else the first sequence; else all
its operations per second) and its QoS the workload's [qos.ID] criteria, judged like the block
applications' over the measurement window after the warm-up, plus: any failed operation fails
the instance.

Why a file run beside the block run rather than one engine run of both: the engine's block run
and its file run are separate thread sets with their own plans and interval formats (block
intervals are Arrow frames per stream, file intervals OpStats per operation). Starting the
file run right after the block engine started, on the same interval, and stopping it when the
block run ends (by its duration, a QoS decision, a signal) gives the file applications the
same measurement window within milliseconds, with no change to either engine (another change
is adding operations to the file engine now).
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilemark.errors import UsageError

APP_KEYS = ("files", "name", "dir", "qos", "host")


@dataclass(frozen=True)
class FileTileApp:
    """A file application of a tile: its workload document and where its sets go."""

    label: str
    doc: dict[str, Any]  # the workload's TOML document, QoS overrides applied
    directory: str  # the directory handed over
    source: str  # built-in name or path

    @property
    def name(self) -> str:
        return str(self.doc.get("name", self.label))

    def metric_stream(self) -> tuple[str | None, str]:
        """(the stream whose loops are the metric, its unit); (None, "ops") for a mix only."""
        streams = self.doc["filestream"]
        seqs = [s for s in streams if "sequence" in s]
        named = [s for s in seqs if s.get("unit", "loops") != "loops"]
        if named or seqs:
            s = (named or seqs)[0]
            return str(s["name"]), str(s.get("unit", "loops"))
        return None, "ops"


def _raw_workload(source: str, tile_file: Path | None) -> tuple[dict[str, Any], str]:
    from tilemark.files.run import BUILTIN, builtin_path
    from tilemark.workload.tomlfile import load_toml

    path = Path(source)
    if tile_file is not None and not path.is_absolute():
        path = tile_file.parent / path
    if source in BUILTIN and not path.exists():
        path = builtin_path(source)
    if not path.exists():
        raise UsageError(
            f"file workload {source} not found; name one of {', '.join(BUILTIN)} or a TOML file "
            "with [[fileset]] and [[filestream]] tables."
        )
    doc = load_toml(path)
    if "fileset" not in doc or "filestream" not in doc:
        raise UsageError(f"file workload {path} needs [[fileset]] and [[filestream]] tables.")
    return doc, str(path)


def parse_file_app(
    a: dict[str, Any], tile_file: Path | None, here: str, sets: dict[str, dict[str, Any]]
) -> FileTileApp:
    """An `[[app]]` with `files = ...`; `--set LABEL.dir=DIR`, `--set LABEL.qos.ID.max_ms=N`
    override the file's values."""
    from tilemark.files.spec import parse_file_workload

    bad = sorted(set(a) - set(APP_KEYS))
    if bad:
        raise UsageError(f"{here}: unknown key '{bad[0]}' (a file application takes "
                         f"{', '.join(APP_KEYS)}).")  # fmt: skip
    if a.get("host") is not None:
        raise UsageError(f"{here}: a file application runs on this host; host is not allowed.")
    if not isinstance(a.get("files"), str):
        raise UsageError(f"{here}: files must name a file workload (varmail, webserver, ...).")
    doc, source = _raw_workload(a["files"], tile_file)
    doc = copy.deepcopy(doc)
    label = a.get("name", doc.get("name", Path(a["files"]).stem))
    if not isinstance(label, str) or not label or "." in label:
        raise UsageError(f"{here}: name must be a string without '.', got {label!r}.")
    qos = dict(a.get("qos") or {})
    if not isinstance(qos, dict) or not all(isinstance(v, dict) for v in qos.values()):
        raise UsageError(f"{here}: qos must be a table of criteria, e.g. "
                         "qos = { fsync_p99 = { max_ms = 20 } }.")  # fmt: skip
    directory = a.get("dir")
    for key, value in sets.get(label, {}).items():
        if key == "dir":
            directory = value
        elif key.startswith("qos.") and key.count(".") == 2:
            _, cid, attr = key.split(".")
            try:
                qos.setdefault(cid, {})[attr] = float(value)
            except ValueError:
                raise UsageError(f"--set {label}.{key}: {value!r} is not a number.") from None
        else:
            raise UsageError(
                f"--set {label}.{key}: a file application takes dir and qos.ID.max_ms or "
                "qos.ID.min_rate."
            )
    table = doc.setdefault("qos", {})
    for cid, limits in qos.items():
        if cid not in table:
            raise UsageError(
                f"{here}: qos '{cid}' is not a criterion of {source} "
                f"({', '.join(table) or 'it has none'})."
            )
        table[cid].update(limits)
    if not isinstance(directory, str) or not directory:
        raise UsageError(
            f"{here}: dir is required: the directory handed over for the sets of file "
            f"application {label} (or --set {label}.dir=DIR)."
        )
    if not os.path.isdir(directory):
        raise UsageError(f"{here}: dir {directory} is not a directory; name one that exists.")
    try:
        parse_file_workload(copy.deepcopy(doc), f"file workload {source}")
    except UsageError as e:
        raise UsageError(f"{here}: {e}") from None
    return FileTileApp(label, doc, os.path.abspath(directory), source)


def tile_workload(apps: list[FileTileApp], tiles: int, *, duration_s: float, interval_s: float):
    """One file workload of every file application of `tiles` tiles: tile k's copy of
    application L has its sets in DIR/t{k}.{L}.{set} and its streams and QoS named
    t{k}.{L}.{name}."""
    from tilemark.files.spec import parse_file_workload

    sets: list[dict[str, Any]] = []
    streams: list[dict[str, Any]] = []
    qos: dict[str, Any] = {}
    backend = None
    for k in range(1, tiles + 1):
        for app in apps:
            prefix = f"t{k}.{app.label}."
            doc = copy.deepcopy(app.doc)
            only = doc["fileset"][0]["name"] if len(doc["fileset"]) == 1 else None
            for f in doc["fileset"]:
                f["path"] = os.path.join(app.directory, prefix + f["name"])
                f["name"] = prefix + f["name"]
                sets.append(f)
            for i, s in enumerate(doc["filestream"]):
                s["fileset"] = prefix + s.get("fileset", only)
                s["name"] = prefix + s["name"]
                s.setdefault("seed", 1 + i)
                s["seed"] += 1_000_003 * (k - 1)  # copies draw apart, a run to the next alike
                streams.append(s)
            for cid, t in (doc.get("qos") or {}).items():
                qos[prefix + cid] = {**t, "stream": prefix + t["stream"]}
            backend = backend or doc.get("backend")
    whole = {
        "name": "tile-files",
        "duration": duration_s,
        "interval": interval_s,
        "backend": backend or "psync",
        "fileset": sets,
        "filestream": streams,
        "qos": qos,
    }
    return parse_file_workload(whole, "the tile's file applications")
