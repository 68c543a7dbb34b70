"""`tilemark learn`: a profile that runs in tiles, learned from block traces (docs/learn.md).

traces.py loads the trace(s), model.py splits the IOs into streams and fits each one,
commits.py turns a group-commit log's rounds into its commits, placement.py fits region sizes
and skew by simulating the engine's placement, write.py writes the profile. `learn()` is the
one entry point the CLI calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from tilemark.errors import UsageError

MARK = b"# Learned by tilemark"
MAX_CHUNKS = 64
# A stream is given phases when its rate per chunk varies at least this much (CV): a steady
# stream is one stream, however the chunks fall.
PHASE_CV = 0.25


@dataclass(frozen=True)
class LearnOptions:
    """What `tilemark learn` was asked."""

    traces: tuple[Path, ...]
    output: Path
    name: str | None = None
    chunk_s: float | None = None
    unit: str | None = None  # NAME=PER_SECOND
    device: str | None = None
    wait: str | None = None  # STAT=MS: response-time objective of the streams waited for
    layout: str = "trace"  # trace: areas where the trace had them; compact: end to end
    max_capacity: int | None = None  # bytes: shrink the gaps between areas to fit
    force: bool = False


@dataclass(frozen=True)
class LearnedStream:
    """A learned stream as the summary shows it."""

    name: str
    kind: str
    processes: int
    ios: int
    rate_iops: float
    read_pct: float
    sizes: str
    pattern: str
    random_pct: float
    arrival: str
    qd: int | None
    sync: str
    phases: int


@dataclass(frozen=True)
class LearnResult:
    """What was learned and written."""

    output: Path
    name: str
    streams: tuple[LearnedStream, ...]
    span_s: float
    ios: int
    capacity: int
    model_bytes: int
    trace_bytes: int
    notes: tuple[str, ...] = field(default_factory=tuple)


def parse_unit(text: str) -> tuple[str, float]:
    """`tps=850` -> ("tps", 850.0); UsageError naming --unit otherwise."""
    name, eq, per_s = text.partition("=")
    name = name.strip()
    try:
        rate = float(per_s)
    except ValueError:
        rate = -1.0
    if not eq or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,31}", name) or not rate > 0:
        raise UsageError(
            f"--unit must be NAME=PER_SECOND with a name of letters, digits or _ and a rate "
            f"above 0 (what the traced run achieved), e.g. tps=850; got {text!r}."
        )
    return name, rate


def parse_wait(text: str) -> tuple[str, float]:
    """`p95=20` -> ("p95", 20.0); UsageError naming --wait otherwise."""
    from tilemark.analysis.qos import LATENCY_STATS

    stat, eq, ms = text.partition("=")
    stat = stat.strip().lower()
    try:
        limit = float(ms.strip().removesuffix("ms"))
    except ValueError:
        limit = -1.0
    if not eq or stat not in LATENCY_STATS or not limit > 0:
        raise UsageError(
            f"--wait must be STAT=MS with STAT one of {', '.join(sorted(LATENCY_STATS))} and a "
            f"limit above 0 in ms (e.g. p95=20), got {text!r}."
        )
    return stat, limit


def _chunks(span_s: float, chunk_s: float) -> int:
    """How many chunks of `chunk_s` the trace's span is cut into; UsageError beyond MAX_CHUNKS."""
    chunks = int(np.ceil(span_s / chunk_s))
    if chunks > MAX_CHUNKS:
        raise UsageError(
            f"--chunk {chunk_s:g}s cuts the trace's {span_s:.4g} s into {chunks} chunks; at most "
            f"{MAX_CHUNKS} (use --chunk {span_s / MAX_CHUNKS:.3g}s or longer)."
        )
    return chunks


def _phases(cols, model, chunk_s: float) -> dict[str, list[float]]:
    """Per stream whose rate moves from chunk to chunk: its rate in each chunk."""
    from tilemark.learn.model import families

    span_s = cols.span_ns / 1e9
    chunks = _chunks(span_s, chunk_s)
    if chunks < 2:
        return {}
    rel = (cols.issue - cols.issue[0]) / 1e9
    index = np.minimum((rel // chunk_s).astype(np.int64), chunks - 1)
    fam = families(cols.comm)
    out = {}
    data = cols.data
    for s in model.streams:
        # the stream's IOs: its family and kind (as model.build keyed them)
        if s.kind == "read":
            mine = data & (cols.op == "read") & (fam == s.comm)
        else:
            mine = data & (cols.op == "write") & (fam == s.comm)
        counts = np.bincount(index[mine], minlength=chunks).astype(np.float64)
        widths = np.full(chunks, chunk_s)
        widths[-1] = span_s - chunk_s * (chunks - 1)
        rates = counts / np.maximum(widths, 1e-9)
        if rates.mean() > 0 and rates.std() / rates.mean() >= PHASE_CV:
            scale = s.rate_iops * span_s / max(counts.sum(), 1)  # keep the stream's total
            out[s.name] = [float(r * scale) for r in rates]
    return out


def learn(opts: LearnOptions) -> LearnResult:
    """Learn a profile from `opts.traces` and write it to `opts.output` (module doc)."""
    from tilemark import __version__
    from tilemark.learn import model as model_mod
    from tilemark.learn import traces, write
    from tilemark.store.outputs import check_replaceable, starts_with, write_file

    unit = parse_unit(opts.unit) if opts.unit is not None else None
    wait = parse_wait(opts.wait) if opts.wait is not None else None
    if opts.layout not in ("trace", "compact"):
        raise UsageError(f"--layout must be trace or compact, got {opts.layout!r}.")
    if opts.chunk_s is not None and not opts.chunk_s > 0:
        raise UsageError(f"--chunk must be a duration above 0, got {opts.chunk_s:g} s.")
    name = opts.name or re.sub(r"[^A-Za-z0-9_.:+-]", "_", opts.output.stem)[:64] or "learned"
    from tilemark.options import parse_name

    parse_name(name, "--name")
    ours = starts_with(MARK)
    check_replaceable(opts.output, force=opts.force, ours=ours, what="profile")
    cols = traces.load(list(opts.traces), opts.device)
    if opts.chunk_s:
        _chunks(cols.span_ns / 1e9, opts.chunk_s)  # refused before the model is fitted
    model = model_mod.build(cols, compact=opts.layout == "compact", max_capacity=opts.max_capacity)
    phases = _phases(cols, model, opts.chunk_s) if opts.chunk_s else {}
    if opts.chunk_s and not phases:
        model.notes.append(
            f"no phases: every stream's rate per {opts.chunk_s:g} s chunk varies less than "
            f"{PHASE_CV:.0%} (CV)"
        )
    learned_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    text = write.render(
        model,
        name=name,
        sources=cols.sources,
        unit=unit,
        chunk_s=opts.chunk_s,
        phases=phases or None,
        version=__version__,
        learned_at=learned_at,
        wait=wait,
    )
    trace_bytes = sum(s.file_bytes for s in cols.sources)
    text = write.with_size(text, trace_bytes)
    _check_loads(text, opts.output)
    write_file(opts.output, text, force=opts.force, ours=ours, what="profile")
    from tilemark.learn.write import size_mix

    streams = tuple(
        LearnedStream(
            name=s.name,
            kind=s.kind,
            processes=s.pids,
            ios=s.ios,
            rate_iops=s.rate_iops,
            read_pct=s.read_pct,
            sizes=size_mix(s.sizes),
            pattern=s.pattern,
            random_pct=s.random_pct,
            arrival=s.arrival,
            qd=s.qd,
            sync=s.sync,
            phases=len(phases.get(s.name, [])),
        )
        for s in model.streams
    )
    return LearnResult(
        output=opts.output,
        name=name,
        streams=streams,
        span_s=model.span_s,
        ios=model.ios,
        capacity=model_mod.capacity(model),
        model_bytes=len(text.encode()),
        trace_bytes=trace_bytes,
        notes=tuple(model.notes),
    )


def _check_loads(text: str, output: Path) -> None:
    """The profile loads as any other (a failure here is a bug in learn, said plainly)."""
    import tempfile

    from tilemark.workload.apps import load_profile

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / output.name
        p.write_text(text)
        try:
            load_profile(str(p))
        except UsageError as e:
            raise RuntimeError(f"learn wrote a profile the loader refuses: {e}") from e
