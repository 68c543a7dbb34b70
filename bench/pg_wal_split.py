"""One WAL file for every tile, or a file per tile? An A/B of the learned PostgreSQL profile on
bench/pg_capacity.py's rig (issue 24, the 60 tps miss).

pg_capacity.py predicts how many PostgreSQL instances a device carries from tiles of a profile
learned from one instance. Its learned WAL stream (write, then fdatasync) ran on one target file
shared by every tile, where each instance writes WAL files of its own. This runs N tiles of a
profile that pg_capacity.py recorded (its results JSON holds the learned profile and the
calibrated limits), on a fresh device of the same kind (nbdkit memory behind a 1 ms delay,
one request at a time, a loop device, ext4), two ways, alternated (ABBA):

- `shared`: `--target wal=FS/wal.dat`, every tile's WAL stream in its own slot of one file;
- `own`: `--target 'wal=FS/wal-{tile}.dat'`, each tile's WAL stream in a file of its own.

Everything else is the same: the data streams on one data file, the capacity, `tilemark scale
--tiles N..N`, 30 s measured after 5 s of warm-up. `--variant NAME=KNOB=VALUE[,KNOB=VALUE]`
adds a layout: `own` with those `--set`s, or with a stream's key changed in the profile itself
where the KNOB is `@STREAM.KEY` (e.g. `wbqd4=@postgres_writeback.qd=4`), to try a change of
the profile beside the two. Reported per run: each tile's p95 of the
criteria pg_capacity.py calibrates (the WAL stream's write p95 and the read stream's p95),
against the limits that study set, and the CPU pressure.

    sudo .venv/bin/python bench/pg_wal_split.py \\
        --study bench/results/2026-11-28-121442-vm-pg-capacity.json --rate 60 --tiles 2,3

writes bench/results/DATE-vm-pg-wal-split.{md,json}.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import apprigs as rigs  # noqa: E402
import fidelity as fid  # noqa: E402


@dataclass
class Variant:
    """One way to run the tiles: the WAL layout, and what changes in the profile."""

    name: str
    shared_wal: bool = False
    sets: list[str] = field(default_factory=list)  # --set KNOB=VALUE
    edits: list[str] = field(default_factory=list)  # STREAM.KEY=VALUE in the profile itself

    @classmethod
    def parse(cls, text: str) -> Variant:
        """NAME=KNOB=VALUE[,KNOB=VALUE]: `own` with those --sets, or edits where a KNOB is
        @STREAM.KEY."""
        name, _, knobs = text.partition("=")
        given = [k for k in knobs.split(",") if k]
        return cls(
            name,
            sets=[k for k in given if not k.startswith("@")],
            edits=[k[1:] for k in given if k.startswith("@")],
        )


LAYOUTS = {"shared": Variant("shared", shared_wal=True), "own": Variant("own")}


@dataclass
class TileRun:
    """N tiles run one way: each tile's calibrated p95s (ms) by criterion."""

    variant: str
    tiles: int
    rep: int
    p95_ms: dict[int, dict[str, float]] = field(default_factory=dict)
    targets: list[str] = field(default_factory=list)
    pressure_before: dict[str, str] = field(default_factory=dict)
    command: str = ""
    error: str | None = None

    def worst(self, criterion: str) -> float:
        """The largest p95 of a criterion over the tiles (0 where no tile has it)."""
        return max((t[criterion] for t in self.p95_ms.values() if criterion in t), default=0.0)


def run_tiles(variant: Variant, rep: int, fs: Path, work: Path, profile: Path, study: dict,
              tiles: int, seconds: float) -> TileRun:  # fmt: skip
    """N tiles run one way."""
    p = study["predicted"]
    wal = p["wal_streams"]
    path = fs / ("wal.dat" if variant.shared_wal else "wal-{tile}.dat")
    targets = ["--target", f"data={fs / 'tm.dat'}", "--target", f"wal={path}",
               "--set", "learned.target=data"]  # fmt: skip
    targets += [x for knob in variant.sets for x in ("--set", knob)]
    if variant.edits:
        profile = edited(profile, variant.edits, work / f"{variant.name}.toml")
    targets += [x for w in wal for x in ("--set", f"learned.{w}.target=wal")]
    cmd = [fid.tilemark(), "scale", str(profile), *targets,
           "--capacity", str(p["tile_capacity"] * 7), "--tiles", f"{tiles}..{tiles}",
           "--duration", f"{seconds:g}s", "--warmup", "5s", "--confirm", "1", "--no-settle",
           "--results", str(work / "results"), "--json"]  # fmt: skip
    run = TileRun(variant.name, tiles, rep, pressure_before=rigs.pressure(), command=" ".join(cmd))
    done = fid.run(cmd)
    try:
        step = json.loads(done.stdout)["steps"][0]
        doc = json.loads((Path(step["run_dir"]) / "run.json").read_text())
    except (json.JSONDecodeError, KeyError, IndexError, OSError):
        run.error = done.stderr[-2000:]
        return run
    run.p95_ms = {
        inst["tile"]: {
            c["criterion"]: c["value"] for c in inst["criteria"] if c["criterion"].endswith("_p95")
        }
        for inst in doc["summary"]["applications"]["instances"]
    }
    run.targets = [t["name"] for t in doc["summary"]["targets"]]
    return run


def edited(profile: Path, edits: list[str], out: Path) -> Path:
    """The profile with `STREAM.KEY=VALUE` set in that stream's table (the key's line
    replaced, or added after the stream's name when it has none)."""
    blocks = re.split(r"(?m)^(?=\[\[stream\]\])", profile.read_text())
    for edit in edits:
        where, _, value = edit.partition("=")
        stream, _, key = where.rpartition(".")
        hits = [i for i, b in enumerate(blocks) if re.search(rf'(?m)^name = "{stream}"$', b)]
        if len(hits) != 1:
            raise SystemExit(f"--variant: the profile has no stream {stream}")
        block = blocks[hits[0]]
        if re.search(rf"(?m)^{key} = ", block):
            block = re.sub(rf"(?m)^{key} = .*$", f"{key} = {value}", block)
        else:
            block = re.sub(rf'(?m)^(name = "{stream}")$', rf"\1\n{key} = {value}", block)
        blocks[hits[0]] = block
    out.write_text("".join(blocks))
    return out


@dataclass
class SplitStudy:
    """The results document: what ran, how, and every run (written as JSON with asdict)."""

    command: str
    tilemark: str  # $TILEMARK_BIN in an A/B of two builds
    study: str
    rate: float
    limits_ms: dict[str, float]
    reps: int
    variants: list[Variant]
    seconds: float
    runs: list[TileRun]
    machine: dict[str, Any]


def markdown(doc: SplitStudy) -> str:
    limits, runs, variants = doc.limits_ms, doc.runs, [v.name for v in doc.variants]
    lines = [
        "# One WAL file for every tile, or a file per tile (bench/pg_wal_split.py)",
        "",
        f"Command: `{doc.command}` (tilemark: `{doc.tilemark}`). "
        f"Profile and limits: the {doc.rate:g} tps rate of "
        f"{doc.study}. Limits (ms): "
        + ", ".join(f"{k} {v:.1f}" for k, v in limits.items())
        + f". {doc.reps} alternations, {doc.seconds:g} s measured after 5 s of warm-up.",
        "",
        "| tiles | layout | rep | "
        + " | ".join(f"worst {k} (ms)" for k in limits)
        + " | every tile within the limits | CPU pressure before |",
        "|---|---|---|" + "---|" * len(limits) + "---|---|",
    ]
    for r in runs:
        if r.error is not None:
            lines.append(f"| {r.tiles} | {r.variant} | {r.rep} | error: see the JSON |")
            continue
        ok = all(r.worst(k) <= limits[k] for k in limits)
        lines.append(
            f"| {r.tiles} | {r.variant} | {r.rep} | "
            + " | ".join(f"{r.worst(k):.1f}" for k in limits)
            + f" | {'yes' if ok else 'no'} | {r.pressure_before.get('cpu', '-')} |"
        )
    lines += ["", "Medians of the worst tile's p95 per layout:", ""]
    for tiles in sorted({r.tiles for r in runs}):
        for name in variants:
            mine = [r for r in runs if r.tiles == tiles and r.variant == name and r.error is None]
            if mine:
                lines.append(
                    f"- {tiles} tiles, {name}: "
                    + ", ".join(
                        f"{k} {statistics.median(r.worst(k) for r in mine):.1f} ms" for k in limits
                    )
                )
    lines += ["", f"Machine: {json.dumps(doc.machine)}", ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--study", required=True, help="a pg_capacity.py results JSON")
    ap.add_argument("--rate", type=float, required=True, help="which of its rates")
    ap.add_argument("--tiles", default="2,3")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--delay-ms", type=int, default=1)
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=KNOB=VALUE,...")
    ap.add_argument("--layouts", default=",".join(LAYOUTS), help="which of shared, own to run")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    order = [LAYOUTS[x] for x in args.layouts.split(",") if x in LAYOUTS]
    order += [Variant.parse(v) for v in args.variant]
    rates = json.loads(Path(args.study).read_text())
    study = next((r for r in rates if r["rate"] == args.rate), None)
    if study is None:
        print(f"--rate {args.rate:g}: {args.study} has rates "
              f"{', '.join(str(r['rate']) for r in rates)}", file=sys.stderr)  # fmt: skip
        return 2
    work = Path("/var/tmp") / f"tm-walsplit-{datetime.now():%H%M%S}"
    work.mkdir(parents=True)
    profile = work / "learned.toml"
    profile.write_text(study["predicted"]["profile"])
    runs: list[TileRun] = []
    try:
        with contextlib.ExitStack() as stack:
            delay = args.delay_ms
            device = rigs.delayed_device(work, "6G", rdelay_ms=delay, wdelay_ms=delay, serial=True)
            dev = stack.enter_context(device)
            fs = stack.enter_context(rigs.ext4(dev.loop, work / "fs"))
            for tiles in (int(t) for t in args.tiles.split(",")):
                for rep in range(args.reps):
                    for variant in order if rep % 2 == 0 else order[::-1]:
                        r = run_tiles(variant, rep, fs, work, profile, study, tiles, args.seconds)
                        print(r.variant, r.tiles, r.rep, r.error or r.p95_ms, file=sys.stderr,
                              flush=True)  # fmt: skip
                        runs.append(r)
    finally:
        subprocess.run(["rm", "-rf", str(work)], check=False)
    doc = SplitStudy(
        command=" ".join(sys.argv),
        tilemark=fid.tilemark(),
        study=args.study,
        rate=args.rate,
        limits_ms=study["predicted"]["limits_ms"],
        reps=args.reps,
        variants=order,
        seconds=args.seconds,
        runs=runs,
        machine={"kernel": fid.platform.release(), "cpus": fid.os.cpu_count()},
    )
    stem = args.out or f"{datetime.now():%Y-%m-%d-%H%M%S}-vm-pg-wal-split"
    fid.RESULTS.mkdir(parents=True, exist_ok=True)
    (fid.RESULTS / f"{stem}.json").write_text(json.dumps(asdict(doc), indent=1, default=str))
    (fid.RESULTS / f"{stem}.md").write_text(markdown(doc))
    print(fid.RESULTS / f"{stem}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
