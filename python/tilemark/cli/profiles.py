"""`tilemark profiles`: the application profiles a tile can hold, and what each one does."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from tilemark.console import make_console
from tilemark.options import copy_names
from tilemark.units import format_size
from tilemark.workload.apps import list_profiles, load_profile, profile_dirs, stream_specs
from tilemark.workload.plan import StreamSpec

profiles_app = typer.Typer(
    help="List built-in and user application profiles ($TILEMARK_PROFILES adds directories).",
    invoke_without_command=True,
    no_args_is_help=False,
)


@profiles_app.callback()
def profiles(
    ctx: typer.Context,
    json_out: Annotated[bool, typer.Option("--json", help="Print the list as JSON.")] = False,
) -> None:
    """List profiles: name, kind, metric, scale knobs."""
    if ctx.invoked_subcommand is not None:
        return
    found = list_profiles()
    if json_out:
        rows = [
            {
                "name": p.name,
                "kind": p.kind,
                "description": p.description,
                "metric_unit": p.metric_unit,
                "scale": p.scale,
                "path": p.path,
            }
            for p in found
        ]
        print(json.dumps(rows, indent=2))
        return
    table = Table(title="application profiles", title_justify="left")
    for col in ("name", "kind", "metric", "scale knobs", "description"):
        table.add_column(col)
    for p in found:
        knobs = ", ".join(f"{k}={v:g}" for k, v in p.scale.items())
        table.add_row(p.name, p.kind, p.metric_unit, knobs, p.description)
    console = make_console(stderr=False)
    console.print(table)
    console.print("searched: " + ", ".join(str(d) for d in profile_dirs()), markup=False)


@profiles_app.command("show")
def show(
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="Profile name or path to a .toml file.")
    ],
    json_out: Annotated[bool, typer.Option("--json", help="Print the profile as JSON.")] = False,
) -> None:
    """A profile's streams, scale knobs, metric, QoS criteria and sources."""
    p = load_profile(name)
    rates = p.rates()
    if json_out:
        doc = {
            "name": p.name,
            "kind": p.kind,
            "description": p.description,
            "path": p.path,
            "metric": p.metric,
            "metric_unit": p.metric_unit,
            "scale": p.scale,
            "capacity_weight": p.capacity_weight,
            "streams": [
                {
                    "name": s.name,
                    "copies": s.copies,
                    "region": s.region,
                    **s.table,
                    "rate": rates[copy_names(s.name, s.copies)[0]],
                }
                for s in p.streams
            ],
            "qos": [c.__dict__ for c in p.qos],
            "learned": p.learned,
            "evidence": p.evidence,
        }
        print(json.dumps(doc, indent=2, default=list))
        return
    console = make_console(stderr=False)
    console.print(f"{p.name} ({p.kind}): {p.description}", markup=False)
    console.print(f"file: {p.path}", markup=False)
    console.print(f"metric: {p.metric}  [{p.metric_unit}]", markup=False)
    console.print(
        "scale: " + (", ".join(f"{k} = {v:g}" for k, v in p.scale.items()) or "none"), markup=False
    )
    streams = Table(title="streams", title_justify="left")
    for col in (
        "stream",
        "region",
        "rw",
        "read %",
        "bs",
        "pattern",
        "arrival",
        "rate",
        "qd",
        "sync",
    ):
        streams.add_column(col)
    for s, spec in zip(p.streams, stream_specs(p), strict=True):
        r = rates[copy_names(s.name, s.copies)[0]]
        rate = (
            (f"{r['iops']:g} IOPS" if "iops" in r else f"{format_size(r['bps'])}/s")
            if r
            else "closed loop"
        )
        name = s.name if s.copies == 1 else f"{s.name} x{s.copies}"
        t = s.table
        streams.add_row(
            name,
            f"{s.region[0]:g}-{s.region[1]:g}",
            str(t.get("rw", "randread")),
            str(t.get("read", "")),
            str(t.get("bs", "4k")),
            str(
                t.get("pattern", "uniform" if "rand" in str(t.get("rw", "rand")) else "sequential")
            ),
            _arrival_words(spec),
            rate,
            str(s.qd or "default"),
            str(t.get("sync", "none")),
        )
    console.print(streams)
    if p.qos:
        qos = Table(
            title="QoS (all must pass; latency is response time for open-loop streams)",
            title_justify="left",
        )
        for col in ("id", "criterion", "checked"):
            qos.add_column(col)
        for c in p.qos:
            qos.add_row(
                c.id, c.describe(), "window and every interval" if c.per_interval else "window"
            )
        console.print(qos)
    for line in _provenance(p):
        console.print(line, markup=False)


def _arrival_words(spec: StreamSpec) -> str:
    """'poisson, batches of 98.8 (1.2ms apart)': the arrival kind and its batching."""
    words = spec.arrival
    if spec.batch > 1:
        gap = f"{spec.batch_gap_s * 1e3:g}ms apart" if spec.batch_gap_s else "at once"
        words += f", batches of {spec.batch:g} ({gap})"
    return words


def _scores(table: dict) -> str:
    """'overall 0.93; below 0.90: seek_distance 0.64, latency 0.61' from a fidelity table."""
    props = {k: v for k, v in table.items() if isinstance(v, float) and k != "overall"}
    low = sorted((v, k) for k, v in props.items() if v < 0.90)
    overall = table.get("overall")
    text = f"overall {overall:.3f}" if isinstance(overall, float) else "overall n/a"
    if low:
        text += "; below 0.90: " + ", ".join(f"{k} {v:.3f}" for v, k in low)
    elif props:
        text += f"; every property >= 0.90 (lowest {min(props.values()):.3f})"
    return text


def _provenance(p) -> list[str]:
    """Where the profile comes from: a learned profile's source and fidelity, a built-in's
    evidence, or its comments."""
    out = []
    learned = p.learned
    if learned:
        for src in learned.get("source", []):
            out.append(
                f"learned from: {src.get('path')} ({src.get('rows')} requests over "
                f"{src.get('span_s')} s, device {src.get('device')}, fingerprint "
                f"{str(src.get('fingerprint'))[:16]})"
            )
        cap = learned.get("capacity")
        if isinstance(cap, int):
            out.append(
                f"capacity per tile: {format_size(cap)} (run with --capacity {cap} per tile for "
                "the trace's footprint)"
            )
        if "model_bytes" in learned:
            out.append(
                f"model: {learned['model_bytes']} bytes = {learned.get('model_share', 0):.2%} of "
                f"the trace's {format_size(learned.get('trace_bytes', 0))}"
            )
        fid = learned.get("fidelity")
        if isinstance(fid, dict):
            out.append(f"fidelity against {fid.get('reference')}: {_scores(fid)}")
        else:
            out.append(
                "fidelity: not measured yet (tilemark fidelity TRACE RUN.parquet --record FILE)"
            )
        rates = {name: r["iops"] for name, r in p.rates().items()}
        for name, info in (learned.get("stream") or {}).items():
            rounds = info.get("rounds_iops") if isinstance(info, dict) else None
            if isinstance(rounds, int | float) and rounds > 0 and name in rates:
                out.append(
                    f"{name}: {rates[name]:.4g} commits a second behind the trace's "
                    f"{rounds:.4g} writes ({rates[name] / rounds:.2f} to a round: group "
                    "commit, docs/learn.md)"
                )
        for note in learned.get("notes", []):
            out.append(f"note: {note}")
    for app, table in (p.evidence or {}).items():
        out.append(f"evidence against {app}: {_scores(table)} ({table.get('source', '')})")
    if not learned:
        out.append("sources: see the comments in the profile file")
    return out
