"""A learned model written as a profile TOML file that `load_profile` accepts (docs/learn.md).

The file is plain TOML written here by hand (the project has no TOML writer dependency and the
layout is fixed): `[profile]`, `[scale]`, one `[[stream]]` per learned stream (and per chunk
when the model has phases), `[qos.*]`, then `[learned]` with the source's fingerprint and the
model's size. `[learned.fidelity]` comes last, so `tilemark fidelity ... --record` can replace
it without touching the rest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from tilemark.learn.model import Model, StreamModel
from tilemark.learn.traces import Source

FIDELITY_HEADER = "[learned.fidelity]"
# One profile capacity_weight is 100 GB of data, as in the built-in profiles (oltp's 5.5 is
# 550 GB): a learned profile in a mixed tile gets its share by the same yardstick.
WEIGHT_BYTES = 100e9


def q(value: str) -> str:
    """A TOML basic string."""
    return json.dumps(value)


def value(v: Any) -> str:
    """A TOML value for str, bool, int, float, lists of those and small tables."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return f"{v:.6g}" if abs(v) < 1e15 else f"{v:.6e}"
    if isinstance(v, str):
        return q(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"no TOML form for {v!r}")


def size_text(n: int) -> str:
    for unit, scale in (("m", 1 << 20), ("k", 1 << 10)):
        if n % scale == 0 and n >= scale:
            return f"{n // scale}{unit}"
    return str(n)


def signed_size(n: int) -> str:
    return ("-" if n < 0 else "") + size_text(abs(n))


def size_mix(sizes: list[tuple[int, float]]) -> str:
    if len(sizes) == 1:
        return size_text(sizes[0][0])
    return ",".join(f"{size_text(s)}:{100 * w:.3g}" for s, w in sizes)


def _phase_name(s: StreamModel, start_s: float) -> str:
    return f"{s.name}.p{start_s:g}"


def _phase_names(s: StreamModel, rates: list[float] | None, chunk_s: float | None) -> list[str]:
    if rates is None or chunk_s is None:
        return [s.name]
    return [_phase_name(s, i * chunk_s) for i, r in enumerate(rates) if r > 0]


def _stream_lines(
    s: StreamModel, region: tuple[float, float], rate: float, phase: tuple[float, float] | None
) -> list[str]:
    name = s.name if phase is None else _phase_name(s, phase[0])
    out = ["[[stream]]", f"name = {q(name)}", f"region = [{region[0]:.6f}, {region[1]:.6f}]"]
    writes = s.read_pct < 100
    reads = s.read_pct > 0
    if s.pattern == "sequential":
        rw = "rw" if reads and writes else ("write" if writes else "read")
    else:
        rw = "randrw" if reads and writes else ("randwrite" if writes else "randread")
    out.append(f"rw = {q(rw)}")
    if reads and writes:
        out.append(f"read = {s.read_pct:.3g}")
    out.append(f"bs = {q(size_mix(s.sizes))}")
    if s.pattern != "sequential":
        if s.random_pct < 100:
            out.append(f"random = {s.random_pct:g}")
        out.append(f"pattern = {q(s.pattern)}")
    else:
        out.append('pattern = "sequential"')
    if s.skip is not None:
        lo, hi = s.skip
        out.append(
            f"skip = {q(signed_size(lo) if lo == hi else f'{signed_size(lo)}:{signed_size(hi)}')}"
        )
    out.append(f'rate = "{rate:.6g} * rate"')
    out.append(f"arrival = {q(s.arrival)}")
    if s.batch > 1:
        out.append(f"batch = {s.batch:g}")
        if s.batch_gap_s > 0:
            ms = np.format_float_positional(float(f"{s.batch_gap_s * 1e3:.3g}"), trim="-")
            out.append(f'batch_gap = "{ms}ms"')
    if s.qd is not None:
        out.append(f"qd = {s.qd}")
    if s.sync != "none" and writes:
        out.append(f"sync = {q(s.sync)}")
    if s.writeback and writes:
        out.append("writeback = true")
    if phase is not None:
        out.append(f"start = {q(f'{phase[0]:g}s')}")
        out.append(f"stop = {q(f'{phase[1]:g}s')}")
    return out


def render(
    model: Model,
    *,
    name: str,
    sources: list[Source],
    unit: tuple[str, float] | None,
    chunk_s: float | None,
    phases: dict[str, list[float]] | None,
    version: str,
    learned_at: str,
    wait: tuple[str, float] | None = None,
) -> str:
    """The profile file's text (module doc). `phases`: per stream, its rate in each chunk."""
    from tilemark.learn.model import capacity

    total = capacity(model)
    bounds = [(a.position / total, (a.position + a.length) / total) for a in model.areas]
    emitted = {s.name: _phase_names(s, (phases or {}).get(s.name), chunk_s) for s in model.streams}
    names = [n for s in model.streams for n in emitted[s.name]]
    lines = [
        f"# Learned by tilemark {version} from {', '.join(s.path for s in sources)} "
        f"({learned_at}).",
        "# Rates are the trace's own (rate = 1); regions are fractions of [learned] capacity.",
        "[profile]",
        f"name = {q(name)}",
        f"description = {q(_description(model, sources))}",
        f"capacity_weight = {max(total / WEIGHT_BYTES, 1e-6):.6g}",
    ]
    if unit is not None:
        unit_name, per_s = unit
        ios_per = model.rate_iops / per_s
        lines.append(f'metric = "({_sum_iops(names)}) / ios_per_{unit_name}"')
        lines.append(f"metric_unit = {q(unit_name)}")
    else:
        lines.append(f'metric = "{_sum_iops(names)}"')
        lines.append('metric_unit = "IOPS"')
    lines += ["", "[scale]", "rate = 1                      # multiplier of every learned rate"]
    if unit is not None:
        lines.append(
            f"ios_per_{unit[0]} = {ios_per:.6g}   # the profile's IOs per {unit[0]} at the "
            f"trace's load ({model.rate_iops:.6g} IOPS at {unit[1]:g} {unit[0]}/s)"
        )
    for s in model.streams:
        region = bounds[s.area]
        lines.append("")
        lines.append(
            f"# {s.name}: {s.ios} IOs from {s.pids} process(es) of {s.comm}, {s.kind}; "
            f"{s.sequential_pct:.0f}% sequential, inter-arrival CV {s.interarrival_cv:.2f}"
        )
        for note in s.notes:
            lines.append(f"# {note}")
        rates = (phases or {}).get(s.name)
        if rates is None:
            lines += _stream_lines(s, region, s.rate_iops, None)
            continue
        for i, r in enumerate(rates):
            if r <= 0:
                continue
            assert chunk_s is not None
            lines.append("")
            lines += _stream_lines(s, region, r, (i * chunk_s, (i + 1) * chunk_s))
    lines += _qos(model, emitted, wait)
    lines += ["", "[learned]"]
    learned: dict[str, Any] = {
        "tilemark_version": version,
        "learned_at": learned_at,
        "capacity": total,
        "span_s": round(model.span_s, 3),
        "ios": model.ios,
        "rate_iops": round(model.rate_iops, 3),
    }
    if chunk_s is not None:
        learned["chunk_s"] = chunk_s
    for k, v in learned.items():
        lines.append(f"{k} = {value(v)}")
    lines.append(f"notes = {value(model.notes)}")
    for src in sources:
        lines += ["", "[[learned.source]]"]
        for k in ("path", "rows", "span_s", "file_bytes", "fingerprint", "device"):
            v = getattr(src, k)
            if v is not None:
                lines.append(f"{k} = {value(round(v, 3) if isinstance(v, float) else v)}")
    for s in model.streams:
        lines += ["", f"[learned.stream.{_key(s.name)}]"]
        info = {
            "comm": s.comm,
            "kind": s.kind,
            "ios": s.ios,
            "processes": s.pids,
            "sequential_pct": round(s.sequential_pct, 2),
            "sync_share": round(s.sync_share, 4),
            "fua_share": round(s.fua_share, 4),
            "flushes": s.flushes,
            "interarrival_cv": round(s.interarrival_cv, 3),
        }
        if s.rounds_iops is not None:
            info["rounds_iops"] = round(s.rounds_iops, 3)
        if s.latency_p99_ms is not None:
            info["latency_p99_ms"] = round(s.latency_p99_ms, 3)
        for k, v in info.items():
            lines.append(f"{k} = {value(v)}")
    return "\n".join(lines) + "\n"


def with_size(text: str, trace_bytes: int) -> str:
    """The text with the model's size against its traces' in [learned] (a fixed point: the
    line's own length barely moves the ratio)."""
    for _ in range(3):
        line = (
            f"model_bytes = {len(text.encode())}\ntrace_bytes = {trace_bytes}\n"
            f"model_share = {len(text.encode()) / max(trace_bytes, 1):.4g}\n"
        )
        body = re.sub(r"model_bytes = .*\ntrace_bytes = .*\nmodel_share = .*\n", "", text)
        text = body.replace("[learned]\n", "[learned]\n" + line, 1)
    return text


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else q(name)


def _sum_iops(names: Iterable[str]) -> str:
    return "iops(" + ", ".join(f"'{n}'" for n in names) + ")"


def _description(model: Model, sources: list[Source]) -> str:
    kinds = ", ".join(f"{s.name} {s.rate_iops:.4g} IOPS" for s in model.streams[:4])
    more = f" and {len(model.streams) - 4} more" if len(model.streams) > 4 else ""
    return f"learned from {len(sources)} trace(s), {model.span_s:.4g} s: {kinds}{more}"


WAITED = ("read", "syncwrite")  # kinds of IO an application waits for


def _qos(model: Model, emitted: dict[str, list[str]], wait: tuple[str, float] | None) -> list[str]:
    """Every stream keeps up with its learned rate (the application's demand is met); the
    latency objectives an application's SLO stands for are added by hand or by a tile file
    (docs/learn.md: the SLO mapping)."""
    out = []
    for s in model.streams:
        out += [
            "",
            f"[qos.{_key(s.name + '_rate')}]",
            f"streams = {value(emitted[s.name])}",
            'stat = "throughput"',
            "min_fraction = 0.95",
        ]
        if wait is not None and s.kind in WAITED:
            stat, ms = wait
            out += [
                "",
                f"[qos.{_key(s.name + '_' + stat)}]",
                f"streams = {value(emitted[s.name])}",
                f"op = {q('read' if s.kind == 'read' else 'write')}",
                f"stat = {q(stat)}",
                f"max_ms = {ms:g}                  # --wait: the application waits for these IOs",
            ]
    return out


def record_fidelity(text: str, scores: dict[str, Any]) -> str:
    """The profile text with its `[learned.fidelity]` table replaced by `scores`."""
    head, _, _ = text.partition(FIDELITY_HEADER)
    lines = [FIDELITY_HEADER]
    for k, v in scores.items():
        lines.append(f"{k} = {value(v)}")
    return head.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"
