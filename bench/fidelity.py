"""Fidelity of learned profiles to real applications (issue 24): PostgreSQL, RocksDB, SQLite.

For each application: on a device of known capacity (apprigs.delayed_device: nbdkit memory
behind the delay filter, under a loop device, under ext4), capture the application with
`tilemark trace capture`, learn a profile from the capture with `tilemark learn`, run the
learned profile (`tilemark run --tiles 1 --tile learned.toml`) on a file of the same
filesystem, capture that, and compare the two captures with `tilemark fidelity --same-device`.
The built-in `oltp` profile is scored against the PostgreSQL capture the same way (run at the
capture's IO rate).

    sudo .venv/bin/python bench/fidelity.py --apps pg,rocksdb,sqlite --seconds 30 --reps 2

writes bench/results/DATE-vm-fidelity.{md,json}: per application and repetition the
accuracy of every property and the overall score, with /proc/pressure/* before each capture.
The e2e tests (tests/e2e/test_learn_*.py) run the same rounds, smaller and shorter.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import apprigs as rigs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def tilemark() -> str:
    """The tilemark to run: $TILEMARK_BIN when set (an A/B of two builds, e.g. a wrapper
    running another checkout's package), else the one beside this Python."""
    if os.environ.get("TILEMARK_BIN"):
        return os.environ["TILEMARK_BIN"]
    exe = Path(sys.executable).with_name("tilemark")
    return str(exe) if exe.exists() else shutil.which("tilemark") or "tilemark"


@dataclass
class Round:
    """One application captured, learned, run and compared."""

    app: str
    settings: dict[str, Any]
    app_summary: str = ""
    app_metric: float | None = None  # tps, ops/s, orders/s
    learned: str = ""  # the profile text
    learn_output: str = ""
    run_summary: str = ""
    fidelity: dict[str, Any] = field(default_factory=dict)
    oltp_fidelity: dict[str, Any] | None = None
    # The control: the application's trace replayed (timed) on the same device, captured and
    # compared with the trace; issue 24 asks >= 0.98 on every property.
    control: dict[str, Any] | None = None
    # Every control replay, by what the replay timed its IOs by (`tilemark replay --times`:
    # queue or issue), in the order run (alternating; see replay_controls).
    controls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    replay_summary: str = ""
    # Every learned run by build ("this", "base"), in the order run (alternating).
    learned_runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    pressure_app: dict[str, str] = field(default_factory=dict)
    pressure_run: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def scores(self) -> dict[str, float | None]:
        return {p["property"]: p["accuracy"] for p in self.fidelity.get("properties", [])}


def run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


LEAD_S = 1.5  # the command runs this long before the capture starts, and as long after it
WARMUP_S = 3  # pgbench runs this long (whole seconds) before the one captured
PREP_S = 1.0  # the run that creates and fills the learned run's target lasts this long


def capture(
    dev: rigs.Device, out: Path, cmd: list[str], seconds: float, lead_s: float = LEAD_S
) -> str:
    """`tilemark trace capture` of the loop device (not its backing) for `seconds` of the
    middle of `cmd`, which was given `lead_s` more on either side: both the application and the
    learned run are captured in their steady state, without start-up (tilemark's own reads
    of its target's header, pgbench's connections) or wind-down. Returns the capture's
    summary followed by the command's output."""
    args = [tilemark(), "trace", "capture", "--device", dev.loop, "--no-backing", "-o", str(out),
            "--force", "--duration", f"{seconds:g}s"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(lead_s)
        done = run(args)
    finally:
        app_out, _ = proc.communicate(timeout=600)
    if done.returncode != 0 or not out.exists():
        raise RuntimeError(f"capture failed ({done.returncode}): {done.stderr[-800:]}")
    return done.stdout + "\n" + app_out


def learn(trace: Path, out: Path, unit: str | None, max_capacity: str = "1400m") -> str:
    """`tilemark learn`; the tile must fit the 2 GiB filesystem the application leaves."""
    args = [tilemark(), "learn", str(trace), "-o", str(out), "--force", "--max-capacity",
            max_capacity]  # fmt: skip
    if unit:
        args += ["--unit", unit]
    done = run(args)
    if done.returncode != 0:
        raise RuntimeError(f"learn failed ({done.returncode}): {done.stderr[-800:]}")
    return done.stdout


def fidelity(a: Path, b: Path) -> dict[str, Any]:
    done = run([tilemark(), "fidelity", str(a), str(b), "--same-device", "--json"])
    if done.returncode != 0:
        raise RuntimeError(f"fidelity failed ({done.returncode}): {done.stderr[-800:]}")
    return json.loads(done.stdout)


def capacity_of(profile: Path) -> int:
    import tomllib

    doc = tomllib.loads(profile.read_text())
    return int(doc["learned"]["capacity"])


def run_profile(
    dev: rigs.Device, fs: Path, profile: str, capacity: int, seconds: float, out: Path,
    extra: tuple[str, ...] = (), lead_s: float = LEAD_S, prep_s: float = PREP_S,
    exe: str | None = None, own_file: tuple[str, ...] = (),
) -> str:  # fmt: skip
    """The profile as one tile on a file of the device's filesystem, captured. The caller
    has removed the application's files: on the emptied filesystem ext4 lays the target out
    in long extents from the start, so the profile's layout (where its areas lie, how far
    apart) reaches the device as the profile has it, rather than scattered over the holes
    between the application's files. `own_file`: streams (of the profile `learned`) on a
    second file, as a database's log is (an fdatasync covers its whole file)."""
    target = fs / "tilemark-learned.dat"
    rigs.remount(dev.loop, fs)
    results = out.parent / "results"
    targets = ["--target", str(target)]
    if own_file:
        targets = ["--target", f"data={target}", "--target", f"log={fs / 'tilemark-log.dat'}",
                   "--set", "learned.target=data"]  # fmt: skip
        targets += [x for n in own_file for x in ("--set", f"learned.{n}.target=log")]
    base = [exe or tilemark(), "run", "--tiles", "1", "--tile", profile, *targets,
            "--capacity", str(capacity), "--warmup", "0",
            "--results", str(results), *extra]  # fmt: skip
    # Create and fill the target first (a prep_s run), so the capture holds only the profile.
    prep = run([*base, "--duration", f"{prep_s:g}s"])
    if prep.returncode not in (0, 3):
        raise RuntimeError(f"preparing the target failed ({prep.returncode}): {prep.stderr[-800:]}")
    rigs.drop_caches(fs, dev.loop)
    span = f"{seconds + 2 * lead_s:g}s"
    return capture(dev, out, [*base, "--duration", span], seconds, lead_s)


# What the control replays time IOs by, and how many times each (set by main()).
# The default, issue+gaps (--keep-gaps), was better or even on every property for both
# PostgreSQL and RocksDB: docs/fidelity.md, "The control, property by property".
CONTROL_TIMES: tuple[str, ...] = ("issue+gaps",)
CONTROL_REPS = 1
CONTROL_ONLY = False  # capture the application and run the controls only (no learned run)
# The builds that run the learned profile (--base-tilemark adds "base"), and how many times each.
LEARNED_EXES: dict[str, str] = {}
LEARNED_REPS = 1


def replay_control(r: Round, dev: rigs.Device, work: Path) -> None:
    """The controls: CONTROL_REPS replays for each of CONTROL_TIMES, alternating (A B, B A,
    ...) so that a drift of the shared machine's load does not favour one. r.control is the
    first replay timed by the first of CONTROL_TIMES."""
    for rep in range(CONTROL_REPS):
        order = CONTROL_TIMES if rep % 2 == 0 else CONTROL_TIMES[::-1]
        for times in order:
            doc = replay_control_once(r, dev, work, times)
            doc["pressure"] = rigs.pressure()
            r.controls.setdefault(times, []).append(doc)
    r.control = r.controls[CONTROL_TIMES[0]][0]


def replay_control_once(r: Round, dev: rigs.Device, work: Path, times: str) -> dict[str, Any]:
    """The control (docs/fidelity.md): `tilemark replay` of the application's trace at its own
    times on the device it was captured on (the application's filesystem is unmounted by now:
    the replay writes the raw device, as the application's IO did), the whole replay captured
    and compared with the trace. What it loses is the tool's own share of any difference."""
    out = work / f"replay-{times}.parquet"
    results = work / "replay-results"
    # "queue", "issue+deps+gaps+direct": --times, --deps, --keep-gaps, --writes direct
    timing, *extra = times.split("+")
    shutil.rmtree(results, ignore_errors=True)
    replay = [tilemark(), "replay", str(work / "app.parquet"), "--target", dev.loop,
              "--destroy-data", dev.loop, "--force", "--remap", "off", "--times", timing,
              "--results", str(results), *(["--deps"] if "deps" in extra else []),
              *(["--keep-gaps"] if "gaps" in extra else []),
              *(["--writes", "direct"] if "direct" in extra else [])]  # fmt: skip
    args = [tilemark(), "trace", "capture", "--device", dev.loop, "--no-backing", "-o", str(out),
            "--force", "--", *replay]  # fmt: skip
    done = run(args)
    if done.returncode not in (0, 3) or not out.exists():
        raise RuntimeError(f"replay capture failed ({done.returncode}): {done.stderr[-800:]}")
    r.replay_summary = done.stdout + done.stderr[-2000:]
    return fidelity(work / "app.parquet", out)


def pg_round(work: Path, *, seconds: float, scale: int, clients: int, memcg_mb: int,
             rdelay_ms: float, wdelay_ms: float, port: int = 54329,
             oltp: bool = False, lead_s: float = LEAD_S, warmup_s: int = WARMUP_S,
             prep_s: float = PREP_S) -> Round:  # fmt: skip
    """PostgreSQL: pgbench TPC-B-like (data > the memory cgroup), captured, learned, compared.
    `lead_s`: the application and the learned run run this long before and after their
    capture; `warmup_s`: pgbench runs this long before the captured run; `prep_s`: the run
    that creates the learned run's target lasts this long."""
    settings = dict(scale=scale, clients=clients, seconds=seconds, memcg_mb=memcg_mb,
                    rdelay_ms=rdelay_ms, wdelay_ms=wdelay_ms)  # fmt: skip
    r = Round("postgresql", settings)
    t0 = time.monotonic()
    with rigs.delayed_device(work, "2G", rdelay_ms=rdelay_ms, wdelay_ms=wdelay_ms) as dev:
        with rigs.ext4(dev.loop, work / "fs") as fs:
            with rigs.memory_cgroup("pg", memcg_mb << 20) as cg:
                with rigs.postgres(fs / "pg", port, cgroup=cg) as pg:
                    rigs.pgbench_init(pg, scale)
                    rigs.drop_caches(fs, dev.loop)
                    # warm the instance up a little (connections, first checkpoint)
                    run(pg.pgbench("-c", str(clients), "-j", "2", "-T", str(warmup_s)))
                    r.pressure_app = rigs.pressure()
                    span = str(math.ceil(seconds + 2 * lead_s))  # pgbench: whole seconds
                    cmd = pg.pgbench("-c", str(clients), "-j", "2", "-T", span)
                    r.app_summary = capture(dev, work / "app.parquet", cmd, seconds, lead_s)
                    r.app_metric = _number_after(r.app_summary, "tps = ")
            if not CONTROL_ONLY:
                learned_round(r, dev, fs, work, "tps", seconds, lead_s, prep_s)
                if oltp:
                    r.oltp_fidelity = oltp_round(dev, fs, work, capacity_of(work / "learned.toml"),
                                                 seconds)  # fmt: skip
        replay_control(r, dev, work)
    r.seconds = time.monotonic() - t0
    return r


def learned_round(r: Round, dev: rigs.Device, fs: Path, work: Path, unit: str, seconds: float,
                  lead_s: float, prep_s: float) -> None:  # fmt: skip
    """Learn a profile from the capture (its unit: `unit`=app metric), run it on the
    filesystem, capture that and compare it with the application's capture."""
    r.learn_output = learn(work / "app.parquet", work / "learned.toml",
                           f"{unit}={r.app_metric:.6g}" if r.app_metric else None)  # fmt: skip
    r.learned = (work / "learned.toml").read_text()
    cap = capacity_of(work / "learned.toml")
    r.pressure_run = rigs.pressure()
    # Every build of LEARNED_EXES runs the profile LEARNED_REPS times, alternating (A B, B A).
    for rep in range(LEARNED_REPS):
        order = list((LEARNED_EXES or {"this": tilemark()}).items())
        for variant, exe in order if rep % 2 == 0 else order[::-1]:
            out = work / f"run-{variant}-{rep}.parquet"
            summary = run_profile(dev, fs, str(work / "learned.toml"), cap, seconds, out,
                                  lead_s=lead_s, prep_s=prep_s, exe=exe)  # fmt: skip
            doc = fidelity(work / "app.parquet", out)
            doc["pressure"] = rigs.pressure()
            r.learned_runs.setdefault(variant, []).append(doc)
            if variant == "this" and not r.fidelity:
                r.run_summary, r.fidelity = summary, doc


def oltp_round(dev: rigs.Device, fs: Path, work: Path, capacity: int, seconds: float) -> dict:
    """The built-in oltp profile at the PostgreSQL capture's rate, on the same device."""
    import tomllib

    doc = tomllib.loads((work / "learned.toml").read_text())
    rate = float(doc["learned"]["rate_iops"])
    # oltp's data stream carries iops and its redo iops * 0.25: the same total IO rate
    iops = rate / 1.25
    run_profile(dev, fs, "oltp", capacity, seconds, work / "oltp.parquet",
                ("--set", f"oltp.iops={iops:.6g}"))  # fmt: skip
    return fidelity(work / "app.parquet", work / "oltp.parquet")


def rocksdb_round(work: Path, *, seconds: float, num: int, memcg_mb: int, rdelay_ms: float,
                  wdelay_ms: float, lead_s: float = LEAD_S,
                  prep_s: float = PREP_S) -> Round:  # fmt: skip
    """RocksDB db_bench: fillrandom (not captured), then readrandomwriterandom captured
    (`lead_s`, `prep_s`: as in pg_round)."""
    settings = dict(num=num, seconds=seconds, memcg_mb=memcg_mb, rdelay_ms=rdelay_ms,
                    wdelay_ms=wdelay_ms)  # fmt: skip
    r = Round("rocksdb", settings)
    t0 = time.monotonic()
    with rigs.delayed_device(work, "2G", rdelay_ms=rdelay_ms, wdelay_ms=wdelay_ms) as dev:
        with rigs.ext4(dev.loop, work / "fs") as fs:
            db = fs / "rocksdb"
            fill = run(rigs.db_bench_cmd(db, "fillrandom", num=num))
            if fill.returncode != 0:
                raise RuntimeError(f"db_bench fillrandom failed: {fill.stderr[-600:]}")
            rigs.drop_caches(fs, dev.loop)
            with rigs.memory_cgroup("rocksdb", memcg_mb << 20) as cg:
                cmd = rigs.in_cgroup(cg, rigs.db_bench_cmd(
                    db, "readrandomwriterandom", num=num,
                    duration_s=int(seconds + 2 * lead_s + 1),
                    extra=("--readwritepercent=70",)))  # fmt: skip
                r.pressure_app = rigs.pressure()
                r.app_summary = capture(dev, work / "app.parquet", cmd, seconds, lead_s)
            r.app_metric = _ops_per_sec(r.app_summary)
            shutil.rmtree(db)
            if not CONTROL_ONLY:
                learned_round(r, dev, fs, work, "ops", seconds, lead_s, prep_s)
        replay_control(r, dev, work)
    r.seconds = time.monotonic() - t0
    return r


def sqlite_round(work: Path, *, seconds: float, items: int, memcg_mb: int, rdelay_ms: float,
                 wdelay_ms: float, lead_s: float = LEAD_S,
                 prep_s: float = PREP_S) -> Round:  # fmt: skip
    """SQLite (WAL, synchronous=FULL): an order-entry loop, captured, learned, compared
    (`lead_s`, `prep_s`: as in pg_round)."""
    settings = dict(items=items, seconds=seconds, memcg_mb=memcg_mb, rdelay_ms=rdelay_ms,
                    wdelay_ms=wdelay_ms)  # fmt: skip
    r = Round("sqlite", settings)
    t0 = time.monotonic()
    with rigs.delayed_device(work, "1G", rdelay_ms=rdelay_ms, wdelay_ms=wdelay_ms) as dev:
        with rigs.ext4(dev.loop, work / "fs") as fs:
            db = fs / "orders.db"
            load = run(rigs.sqlite_cmd(sys.executable, db, items, 0))
            if load.returncode != 0:
                raise RuntimeError(f"sqlite load failed: {load.stderr[-600:]}")
            rigs.drop_caches(fs, dev.loop)
            with rigs.memory_cgroup("sqlite", memcg_mb << 20) as cg:
                span = seconds + 2 * lead_s
                cmd = rigs.in_cgroup(cg, rigs.sqlite_cmd(sys.executable, db, items, span))
                r.pressure_app = rigs.pressure()
                r.app_summary = capture(dev, work / "app.parquet", cmd, seconds, lead_s)
            for f in fs.glob("orders.db*"):
                f.unlink()
            orders = _number_after(r.app_summary, "orders ")
            r.app_metric = orders / span if orders else None
            unit = f"orders={r.app_metric:.6g}" if r.app_metric else None
            r.learn_output = learn(work / "app.parquet", work / "learned.toml", unit)
            r.learned = (work / "learned.toml").read_text()
            cap = capacity_of(work / "learned.toml")
            r.pressure_run = rigs.pressure()
            r.run_summary = run_profile(dev, fs, str(work / "learned.toml"), cap, seconds,
                                        work / "run.parquet", lead_s=lead_s,
                                        prep_s=prep_s)  # fmt: skip
            r.fidelity = fidelity(work / "app.parquet", work / "run.parquet")
        replay_control(r, dev, work)
    r.seconds = time.monotonic() - t0
    return r


def _number_after(text: str, marker: str) -> float | None:
    at = text.rfind(marker)
    if at < 0:
        return None
    word = text[at + len(marker) :].split()[0]
    try:
        return float(word)
    except ValueError:
        return None


def _ops_per_sec(text: str) -> float | None:
    # "readrandomwriterandom :      12.345 micros/op 81000 ops/sec ..."
    for line in text.splitlines():
        if "ops/sec" in line and "micros/op" in line:
            words = line.split()
            return float(words[words.index("ops/sec") - 1])
    return None


# -----------------------------------------------------------------------------------------------
# report


def table(rounds: list[Round], key: str = "fidelity", goal: float = 0.9) -> str:
    props: list[str] = []
    for r in rounds:
        doc = getattr(r, key) or {}
        for p in doc.get("properties", []):
            if p["property"] not in props:
                props.append(p["property"])
    head = "| property | " + " | ".join(f"rep {i + 1}" for i in range(len(rounds))) + " |"
    lines = [head, "|---|" + "---|" * len(rounds)]
    for prop in props:
        cells = []
        for r in rounds:
            doc = getattr(r, key) or {}
            acc = next((p["accuracy"] for p in doc.get("properties", [])
                        if p["property"] == prop), None)  # fmt: skip
            cells.append("-" if acc is None else (f"**{acc:.3f}**" if acc < goal else f"{acc:.3f}"))
        lines.append(f"| {prop} | " + " | ".join(cells) + " |")
    overall = []
    for r in rounds:
        o = (getattr(r, key) or {}).get("overall")
        overall.append("-" if o is None else f"{o:.3f}")
    lines.append("| **overall** | " + " | ".join(overall) + " |")
    return "\n".join(lines)


def controls_table(runs: dict[str, list[dict[str, Any]]]) -> str:
    """Every run of a round side by side (controls by replay timing, or learned runs by
    build), with the median per kind."""
    import statistics

    cols = [(t, i, doc) for t, docs in runs.items() for i, doc in enumerate(docs)]
    props = [p["property"] for p in cols[0][2].get("properties", [])]
    head = "| property | " + " | ".join(f"{t} {i + 1}" for t, i, _ in cols)
    head += " | " + " | ".join(f"median {t}" for t in runs) + " |"
    n = len(cols) + len(runs)
    lines = [head, "|---|" + "---|" * n]

    def acc(doc: dict[str, Any], prop: str) -> float | None:
        return next((p["accuracy"] for p in doc.get("properties", [])
                     if p["property"] == prop), None)  # fmt: skip

    for prop in [*props, "overall"]:
        get = (lambda d: d.get("overall")) if prop == "overall" else (lambda d: acc(d, prop))  # noqa: E731,B023
        cells = ["-" if get(d) is None else f"{get(d):.3f}" for _, _, d in cols]
        for docs in runs.values():
            vals = [v for v in map(get, docs) if v is not None]
            cells.append(f"**{statistics.median(vals):.3f}**" if vals else "-")
        lines.append(f"| {prop} | " + " | ".join(cells) + " |")
    lines.append("")
    after = [f"{t} {i + 1}: cpu {d.get('pressure', {}).get('cpu', '?')}" for t, i, d in cols]
    lines.append("pressure after each: " + "; ".join(after))
    return "\n".join(lines)


def report(rounds: list[Round], args: argparse.Namespace) -> str:
    by_app: dict[str, list[Round]] = {}
    for r in rounds:
        by_app.setdefault(r.app, []).append(r)
    out = [
        f"# Fidelity of learned profiles to real applications ({datetime.now():%Y-%m-%d %H:%M})",
        "",
        f"`{' '.join(sys.argv)}` on {platform.node()} ({os.cpu_count()} CPUs, kernel "
        f"{platform.release()}); the machine is shared with other agents: /proc/pressure "
        "(some avg10 avg60 avg300) is given before every capture.",
        "",
        "Bold: below the 0.90 goal. Accuracy = 1 - distance (docs/fidelity.md); latency is "
        "compared (same device).",
    ]
    for app, rs in by_app.items():
        out += ["", f"## {app}", "", f"settings: `{rs[0].settings}`", "", table(rs), ""]
        for i, r in enumerate(rs):
            out.append(
                f"- rep {i + 1}: application metric {r.app_metric}, {r.seconds:.0f} s; pressure "
                f"at capture {r.pressure_app}, at the learned run {r.pressure_run}"
            )
        if any(r.control for r in rs):
            out += ["", f"### control: {app}'s trace replayed on the same device (goal >= 0.98)",
                    "", table(rs, "control", 0.98)]  # fmt: skip
        for i, r in enumerate(rs):
            if len(r.controls) > 1 or any(len(v) > 1 for v in r.controls.values()):
                out += ["", f"### controls of rep {i + 1} by replay times (alternated)", "",
                        controls_table(r.controls)]  # fmt: skip
        for i, r in enumerate(rs):
            if len(r.learned_runs) > 1 or any(len(v) > 1 for v in r.learned_runs.values()):
                out += ["", f"### learned runs of rep {i + 1} by build (alternated)", "",
                        controls_table(r.learned_runs)]  # fmt: skip
        if any(r.oltp_fidelity for r in rs):
            out += ["", f"### built-in `oltp` against {app}", "", table(rs, "oltp_fidelity")]
        out += ["", "<details><summary>learned profile (rep 1)</summary>", "", "```toml",
                rs[0].learned.strip(), "```", "</details>"]  # fmt: skip
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--apps", default="pg,rocksdb,sqlite")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--pg-scale", type=int, default=20)
    ap.add_argument("--pg-clients", type=int, default=4)
    ap.add_argument("--memcg-mb", type=int, default=96)
    ap.add_argument("--rdelay-ms", type=int, default=1)
    ap.add_argument("--wdelay-ms", type=int, default=1)
    ap.add_argument("--rocksdb-num", type=int, default=400_000)
    ap.add_argument("--sqlite-items", type=int, default=200_000)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--out", default=None, help="results file stem (default dated)")
    ap.add_argument("--control-times", default="issue+gaps",
                    help="comma-separated `tilemark replay --times` of the controls, each "
                         "+deps for --deps, +gaps for --keep-gaps, +direct for --writes "
                         "direct (issue+deps+gaps)")  # fmt: skip
    ap.add_argument("--control-reps", type=int, default=1, help="control replays per timing")
    ap.add_argument(
        "--base-tilemark",
        default=None,
        help="also run the learned profile with this tilemark (A/B of a build)",
    )
    ap.add_argument("--learned-reps", type=int, default=1, help="learned runs per build")
    ap.add_argument("--control-only", action="store_true",
                    help="capture the application, run the controls only")  # fmt: skip
    args = ap.parse_args()
    global CONTROL_TIMES, CONTROL_REPS, CONTROL_ONLY, LEARNED_EXES, LEARNED_REPS
    LEARNED_EXES = {"this": tilemark()}
    if args.base_tilemark:
        LEARNED_EXES["base"] = args.base_tilemark
    LEARNED_REPS = args.learned_reps
    CONTROL_TIMES = tuple(args.control_times.split(","))
    CONTROL_REPS = args.control_reps
    CONTROL_ONLY = args.control_only
    rounds: list[Round] = []
    failures: list[str] = []
    apps = args.apps.split(",")
    for rep in range(args.reps):
        for app in apps:  # alternate the applications, rep by rep
            work = Path(tempfile.mkdtemp(prefix=f"tm-fid-{app}-", dir="/var/tmp"))
            work.chmod(0o755)  # the postgres user walks into it
            common = dict(seconds=args.seconds, rdelay_ms=args.rdelay_ms,
                          wdelay_ms=args.wdelay_ms, memcg_mb=args.memcg_mb)  # fmt: skip
            try:
                if app == "pg":
                    r = pg_round(work, scale=args.pg_scale, clients=args.pg_clients,
                                 oltp=rep == 0, **common)  # fmt: skip
                elif app == "rocksdb":
                    r = rocksdb_round(work, num=args.rocksdb_num, **common)
                elif app == "sqlite":
                    r = sqlite_round(work, items=args.sqlite_items, **common)
                else:
                    raise SystemExit(f"unknown app {app}")
            except rigs.Unavailable as e:
                print(f"{app}: unavailable: {e}", file=sys.stderr)
                continue
            except RuntimeError as e:  # a step failed: the other rounds are still reported
                failures.append(f"{app} rep {rep + 1}: {e}")
                print(f"{app} rep {rep + 1} failed: {e}", file=sys.stderr)
                continue
            finally:
                if not args.keep:
                    shutil.rmtree(work, ignore_errors=True)
            rounds.append(r)
            print(f"{app} rep {rep + 1}: overall {r.fidelity.get('overall')}", file=sys.stderr)
    stem = args.out or f"{datetime.now():%Y-%m-%d-%H%M%S}-vm-fidelity"
    RESULTS.mkdir(parents=True, exist_ok=True)
    text = report(rounds, args)
    if failures:
        text += "\n## Rounds that failed\n\n" + "".join(f"- {f}\n" for f in failures)
    (RESULTS / f"{stem}.md").write_text(text)
    (RESULTS / f"{stem}.json").write_text(json.dumps([asdict(r) for r in rounds], indent=1))
    print(RESULTS / f"{stem}.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
