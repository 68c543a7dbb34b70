"""Reading a large run.json, typed: which library (the typed-core issue asks for the choice
with a measured reason: the load time of a large summary).

A real run.json (a short null-backend run) is grown to N streams by repeating its stream
entries (summary, engine result, plan), then read 30 times by each candidate:

- `json only`: json.loads alone, the floor of any reader that walks dicts afterwards (the shape
  walk tilemark had before these classes added to it);
- `msgspec`: msgspec.json.decode straight into store/results.py's RunDoc (types checked);
- `json+msgspec.convert`: json.loads, then msgspec.convert of the dict (after migrations);
- `pydantic`: the same classes as pydantic models (built from RunDoc's fields), validated from
  JSON; with its import time, which a light command would pay.

    .venv/bin/python bench/results_schema.py --streams 1000
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tmbench as tb

ROOT = tb.REPO
SCHEMA = "tilemark-bench-results-schema/1"


def _grown_doc(streams: int) -> bytes:
    work = Path(tempfile.mkdtemp(prefix="tilemark-schema-"))
    out = subprocess.run(
        [str(ROOT / ".venv/bin/tilemark"), "run", "--target", str(work / "t.dat"), "--size",
         "8m", "--rw", "randrw", "--duration", "0.3", "--interval", "0.1", "--backend", "null",
         "--results", str(work / "r"), "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    run_dir = Path(json.loads(out.stdout)["run_dir"])
    doc = json.loads((run_dir / "run.json").read_text())
    one = doc["summary"]["streams"][0]
    doc["summary"]["streams"] = [{**one, "name": f"s{i}", "stream": i} for i in range(streams)]
    res = doc["result"]["streams"][0]
    doc["result"]["streams"] = [{**res, "stream": i} for i in range(streams)]
    plan_stream = doc["plan"]["streams"][0]
    doc["plan"]["streams"] = [{**plan_stream, "name": f"s{i}"} for i in range(streams)]
    return json.dumps(doc).encode()


def _time(fn, reps: int) -> dict[str, float]:
    fn()  # warm
    samples = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1e3)
    return {"min_ms": min(samples), "median_ms": statistics.median(samples)}


def _import_ms(module: str) -> float:
    code = (
        f"import time; t=time.perf_counter(); import {module}; print((time.perf_counter()-t)*1e3)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout)


def _pydantic_model(struct: type, cache: dict) -> type:
    """The pydantic twin of a msgspec Struct (same fields and types, defaults None)."""
    import typing

    import msgspec
    import pydantic

    if struct in cache:
        return cache[struct]
    info = msgspec.inspect.type_info(struct)
    fields = {}
    hints = typing.get_type_hints(struct)
    for f in info.fields:
        hint = hints[f.name]
        args = typing.get_args(hint)
        inner = [a for a in args if a is not type(None)]

        def twin(t: object) -> object:
            if isinstance(t, type) and issubclass(t, msgspec.Struct):
                return _pydantic_model(t, cache)
            origin = typing.get_origin(t)
            if origin is list:
                return list[twin(typing.get_args(t)[0])]  # type: ignore[misc]
            return t

        t = twin(inner[0]) if len(inner) == 1 else hint
        fields[f.name] = (t | None if len(inner) == 1 else t, None)
    model = pydantic.create_model(struct.__name__, **fields)  # type: ignore[call-overload]
    cache[struct] = model
    return model


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--out", default=str(tb.RESULTS_DIR))
    args = ap.parse_args()
    import msgspec

    from tilemark.store.results import RunDoc

    data = _grown_doc(args.streams)

    class Listed(msgspec.Struct):  # what a listing reads: everything but the engine's result
        run_id: str | None = None
        status: str | None = None
        summary: dict | None = None

    rows = {
        "json only": _time(lambda: json.loads(data), args.reps),
        "msgspec, listing fields": _time(lambda: msgspec.json.decode(data, type=Listed), args.reps),
        "msgspec": _time(lambda: msgspec.json.decode(data, type=RunDoc), args.reps),
        "json+msgspec.convert": _time(lambda: msgspec.convert(json.loads(data), RunDoc), args.reps),
    }
    try:  # not a tilemark dependency: compared when it is installed
        model = _pydantic_model(RunDoc, {})
    except ImportError:
        print("results_schema: pydantic is not installed; its row is left out", file=sys.stderr)
    else:
        rows["pydantic"] = _time(lambda: model.model_validate_json(data), args.reps)
    imports = {}
    for m in ("msgspec", "pydantic", "json"):
        try:
            imports[m] = _import_ms(m)
        except subprocess.CalledProcessError:
            pass  # not installed
    now = dt.datetime.now()
    stamp = now.strftime("%Y-%m-%d-%H%M%S")
    tilemark = str(ROOT / ".venv/bin/tilemark")
    doc = {
        "schema": SCHEMA,
        "date": stamp,
        "machine": tb.machine_notes(tb.Settings(tilemark, tb.DEFAULT_FIO))
        | {"host": platform.node(), "cpus": os.cpu_count(), "load": os.getloadavg()},
        "document_bytes": len(data),
        "streams": args.streams,
        "reps": args.reps,
        "decode": rows,
        "import_ms": imports,
    }
    lines = [
        f"# Reading a run.json of {args.streams} streams ({len(data) / 1e6:.1f} MB), typed",
        "",
        f"{stamp}, {platform.node()}, load {os.getloadavg()[0]:.2f}; {args.reps} reads each.",
        "",
        "| reader | min ms | median ms |",
        "|---|---|---|",
        *(f"| {k} | {v['min_ms']:.1f} | {v['median_ms']:.1f} |" for k, v in rows.items()),
        "",
        "| import | ms |",
        "|---|---|",
        *(f"| {k} | {v:.1f} |" for k, v in imports.items()),
    ]
    markdown = "\n".join(lines) + "\n"
    tb.write_results(Path(args.out), "results-schema", doc, markdown, when=now, indent=2)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
