"""How many PostgreSQL instances fit on a device? Measured with pgbench, predicted with a
learned profile (issue 24's acceptance test).

On a device of known capacity (apprigs.delayed_device with `serial`: nbdkit serves one request
at a time, each taking the delay, so the device does at most 1000/delay IOs per second
whatever the queue depth; below ext4 and a loop device, so writeback meets it too):

1. measured: N = 1, 2, 3, ... PostgreSQL instances (each its own data directory, port, socket
   and memory cgroup, pgbench scaled past its memory) run `pgbench -R RATE -L LIMIT` at once;
   the SLO is pgbench's own: at most 5% of every instance's transactions late (above LIMIT, or
   skipped for being late at their start). The answer is the largest N that meets it.
2. predicted: instance 1 alone, captured at RATE, learned (`tilemark learn --unit tps=...
   --layout compact`), then `tilemark scale` of that profile on a fresh device of the same
   kind: the largest tile count whose QoS passes. A tile gets one instance's data directory
   (tables, indexes and WAL, `du -sb`) per target; the learned sync-write (WAL) streams run on
   a target file of their own, a file per tile (`--target wal=.../wal-{tile}.dat`), as each
   PostgreSQL instance's WAL is in files of its own (an fdatasync covers a whole file: on the
   tile's shared file it waited for the data writeback of every tile, and on one WAL file for
   every tile the tiles' log writes queued on its lock; `--shared-wal` keeps that layout).

The SLO's storage side: a transaction waits for its reads and its commit's WAL write and
flush, so the learned profile's read and sync-write streams get a response-time objective at
the SLO's percentile (p95), calibrated at one instance: the limit of each is its p95 at one
tile times LIMIT / (the transactions' p95 at one instance, from pgbench's per-transaction
log, schedule lag included): the storage may slow down by the factor the application's
transactions had left before the limit (docs/learn.md, from an application's SLO to storage
QoS). With `--calibration affine` (the default) only the part of that p95 that is waiting
scales: C, the transactions' p95 of the same instance on storage that adds almost nothing, is
measured too, and the factor is (LIMIT - C) / (P1 - C); the report gives the answer under
both. The learned profile's own `throughput >= 95%` per stream says the device keeps up at all.

    sudo .venv/bin/python bench/pg_capacity.py --rates 40,80 --max 5 [--keep]

writes bench/results/DATE-vm-pg-capacity.{md,json} with both curves per RATE.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import apprigs as rigs  # noqa: E402
import fidelity as fid  # noqa: E402

SLO_LATE = 0.05
MIB = 1 << 20


def parse_pgbench(text: str) -> dict[str, float]:
    """tps, latency average, late and skipped transactions from pgbench's report."""
    out: dict[str, float] = {}
    if m := re.search(r"tps = ([\d.]+)", text):
        out["tps"] = float(m.group(1))
    if m := re.search(r"latency average = ([\d.]+) ms", text):
        out["latency_ms"] = float(m.group(1))
    if m := re.search(r"latency stddev = ([\d.]+) ms", text):
        out["latency_sd_ms"] = float(m.group(1))
    if m := re.search(r"actually processed: (\d+)", text):
        out["processed"] = float(m.group(1))
    if m := re.search(r"skipped: (\d+)", text):
        out["skipped"] = float(m.group(1))
    if m := re.search(r"latency limit: (\d+)/(\d+)", text):
        out["late"] = float(m.group(1))
        out["counted"] = float(m.group(2))
    total = out.get("processed", 0) + out.get("skipped", 0)
    out["late_share"] = (out.get("late", 0) + out.get("skipped", 0)) / total if total else 1.0
    return out


def measured(pgs: list[rigs.Postgres], n: int, rate: float, limit: float, seconds: float,
             logdir: Path, tag: str = "") -> dict:  # fmt: skip
    """N instances running pgbench -R -L at once: each one's result and the SLO verdict
    (`tag` tells repeated runs' logs apart)."""
    procs = []
    for i, pg in enumerate(pgs[:n]):
        cmd = pg.pgbench("-c", "4", "-j", "2", "-R", f"{rate:g}", "-L", f"{limit:g}",
                         "-T", f"{seconds:g}", "-l",
                         f"--log-prefix={logdir / f'n{n}{tag}-i{i}'}")  # fmt: skip
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))  # fmt: skip
    results = [parse_pgbench(p.communicate(timeout=seconds + 300)[0]) for p in procs]
    for i, r in enumerate(results):
        if (p95 := log_p95(logdir, f"n{n}{tag}-i{i}")) is not None:
            r["p95_ms"] = p95
    worst = max(r["late_share"] for r in results)
    return {
        "n": n,
        "instances": results,
        "worst_late_share": worst,
        "mean_latency_ms": sum(r.get("latency_ms", 0) for r in results) / n,
        "passes": worst <= SLO_LATE,
        "pressure": rigs.pressure(),
    }


def pgbench_logdir(work: Path, name: str = "pglog") -> Path:
    """A directory on the host's disk (not the measured device) pgbench may log into."""
    d = work / name
    d.mkdir(exist_ok=True)
    shutil.chown(d, "postgres", "postgres")
    return d


def log_p95(logdir: Path, prefix: str) -> float | None:
    """The 95th percentile (ms) of the transactions' latency in pgbench's per-transaction logs
    (`-l`; under -R measured from the scheduled start, so schedule lag counts, as in -L's
    late count); a transaction skipped for being late counts as later than any."""
    lat: list[float] = []
    for f in logdir.glob(f"{prefix}.*"):
        for line in f.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3:
                lat.append(float("inf") if parts[2] == "skipped" else float(parts[2]) / 1000)
    if not lat:
        return None
    lat.sort()
    return lat[min(len(lat) - 1, int(0.95 * len(lat)))]


def tx_p95(instance: dict) -> float:
    """An instance's transactions' p95 (ms): from pgbench's log, else mean + 1.645 sd."""
    if "p95_ms" in instance:
        return instance["p95_ms"]
    return instance.get("latency_ms", 0) + 1.645 * instance.get("latency_sd_ms", 0)


def one_rate(work: Path, args: argparse.Namespace, rate: float) -> dict[str, Any]:
    out: dict[str, Any] = {"rate": rate, "limit_ms": args.limit, "measured": [], "predicted": {}}
    with contextlib.ExitStack() as stack:
        dev = stack.enter_context(rigs.delayed_device(
            work, "6G", rdelay_ms=args.delay_ms, wdelay_ms=args.delay_ms, serial=True))  # fmt: skip
        fs = stack.enter_context(rigs.ext4(dev.loop, work / "fs"))
        out["device"] = f"nbdkit memory, delay {args.delay_ms} ms per read and write, one at a time"
        pgs = []
        for i in range(args.max):
            cg = stack.enter_context(rigs.memory_cgroup(f"pg{i}", args.memcg_mb << 20))
            pg = stack.enter_context(rigs.postgres(fs / f"pg{i}", args.port + i, cgroup=cg))
            rigs.pgbench_init(pg, args.scale)
            pgs.append(pg)
        rigs.drop_caches(fs, dev.loop)
        # calibration and learning: instance 0 alone, captured in its steady state
        span = args.seconds + 2 * fid.LEAD_S
        cmd = pgs[0].pgbench("-c", "4", "-j", "2", "-R", f"{rate:g}", "-L", f"{args.limit:g}",
                             "-T", f"{span:g}")  # fmt: skip
        summary = fid.capture(dev, work / "one.parquet", cmd, args.seconds)
        one = parse_pgbench(summary)
        out["calibration"] = one
        # the instance's data footprint (tables, indexes and WAL): what a tile stands for
        out["footprint_bytes"] = data_footprint(pgs[0].data)
        for n in range(1, args.max + 1):
            step = measured(pgs, n, rate, args.limit, args.seconds, pgbench_logdir(work))
            out["measured"].append(step)
            print(f"rate {rate}: {n} instance(s): worst late {step['worst_late_share']:.1%}",
                  file=sys.stderr)  # fmt: skip
            if not step["passes"] and n >= 2 and not out["measured"][-2]["passes"]:
                break  # two failing counts in a row
        # P1, the calibration's transactions' p95 at one instance, from --p1-runs runs: one
        # run's p95 moves with the host's stalls, and the factor with it (docs/learn.md).
        out["p1_runs"] = [tx_p95(out["measured"][0]["instances"][0])]
        for k in range(1, args.p1_runs):
            again = measured(pgs, 1, rate, args.limit, args.seconds, pgbench_logdir(work),
                             tag=f"-p1r{k}")  # fmt: skip
            out["p1_runs"].append(tx_p95(again["instances"][0]))
        stack.close()  # instances stopped, device unmounted: the prediction gets a fresh one
    if args.calibration == "affine":
        out["fast_storage"] = fast_storage(work, args, rate)
    passing = [m["n"] for m in out["measured"] if m["passes"]]
    out["measured_answer"] = max(passing) if passing else 0
    # prediction: the profile learned from instance 0 alone, its waited streams' response
    # time limits calibrated at one tile (docs/learn.md, from an application's SLO to QoS)
    learned = work / "learned.toml"
    tps = one.get("tps", rate)
    done = fid.run([fid.tilemark(), "learn", str(work / "one.parquet"), "-o", str(learned),
                    "--force", "--unit", f"tps={tps:.6g}", "--wait", "p95=1000000",
                    "--layout", "compact"])  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    p95_tx = statistics.median(out["p1_runs"])
    factors = calibrations(args.limit, p95_tx, out.get("fast_storage"))
    factor = factors.get(args.calibration, factors["proportional"])
    out["predicted"]["transaction_p95_ms_at_1"] = p95_tx
    out["predicted"]["factors"] = factors
    out["predicted"]["factor"] = factor
    out["predicted"]["profile"] = learned.read_text()
    out["predicted"]["learned_capacity"] = fid.capacity_of(learned)
    # each tile gets one instance's data footprint, on the data file and on the WAL file
    # alike (regions are fractions of the capacity, so the learned areas stretch to it)
    cap = -(-out["footprint_bytes"] // MIB) * MIB
    out["predicted"]["tile_capacity"] = cap
    wal = wal_streams(learned)
    out["predicted"]["wal_streams"] = wal
    with contextlib.ExitStack() as stack:
        work2 = work / "predict"
        work2.mkdir()
        delay = args.delay_ms
        dev = stack.enter_context(
            rigs.delayed_device(work2, "6G", rdelay_ms=delay, wdelay_ms=delay, serial=True)
        )
        fs = stack.enter_context(rigs.ext4(dev.loop, work2 / "fs"))

        def scale(tiles: str, sets: list[str]) -> tuple[list[str], dict]:
            # PostgreSQL's WAL lives in files of its own, each instance's its own: the learned
            # log stream gets a target of its own, a file per tile ({tile}), so its
            # fdatasyncs wait for its own writes only, not for the data file's writeback
            # stream nor another tile's log (an fdatasync covers the whole file, and writers
            # of one file queue on its lock; --shared-wal: one file for every tile, as before)
            targets = ["--target", f"data={fs / 'tm.dat'}"]
            if wal:
                wal_path = fs / ("wal.dat" if args.shared_wal else "wal-{tile}.dat")
                targets += ["--target", f"wal={wal_path}", "--set", "learned.target=data"]
                targets += [x for w in wal for x in ("--set", f"learned.{w}.target=wal")]
            cmd = [fid.tilemark(), "scale", str(learned), *targets,
                   "--capacity", str(cap * (args.max + 2)), "--tiles", tiles,
                   "--duration", f"{args.seconds:g}s", "--warmup", "5s", "--confirm", "2",
                   "--no-settle", "--qos-interval", f"{args.seconds / 4:g}s",
                   "--results", str(work / "results"), "--json", *sets]  # fmt: skip
            done = fid.run(cmd)
            try:
                return cmd, json.loads(done.stdout)
            except json.JSONDecodeError:
                out["predicted"]["error"] = done.stderr[-2000:]
                return cmd, {}

        # calibration: one tile, the response times the application's 1-instance run had
        # room to grow from (factor = LIMIT / its transactions' p95)
        # the tile side's p95s at one tile, per criterion the median of --p1-runs runs
        runs = []
        for _ in range(args.p1_runs):
            _, cal = scale("1..1", [])
            _, cal_steps = predicted_answer(cal)
            runs.append(cal_steps[0]["worst"] if cal_steps else {})
        out["predicted"]["at_one_tile_runs"] = runs
        at_one = {
            crit: statistics.median(r[crit] for r in runs if crit in r)
            for crit in sorted({c for r in runs for c in r})
        }
        sets = []
        for crit, value in at_one.items():
            limit = value * factor
            sets += ["--set", f"learned.qos.{crit}.max_ms={limit:.4g}"]
        out["predicted"]["at_one_tile_p95_ms"] = at_one
        out["predicted"]["limits_ms"] = {c: v * factor for c, v in at_one.items()}
        out["predicted"]["pressure"] = rigs.pressure()
        command, study = scale(f"1..{args.max + 2}", sets)
        out["predicted"]["command"] = " ".join(command)
        out["predicted"]["study"] = study
    return out


def fast_storage(work: Path, args: argparse.Namespace, rate: float) -> dict:
    """One instance's pgbench at RATE on storage that adds almost nothing (the same rig, scale
    and memory cgroup; nbdkit without the delay or the one-at-a-time filter): its
    transactions' p95 there is what they spend apart from waiting for the measured device
    (CPU, locks, the client's previous transaction), the affine calibration's constant."""
    with contextlib.ExitStack() as stack:
        dev = stack.enter_context(
            rigs.delayed_device(work / "fast", "6G", rdelay_ms=0, wdelay_ms=0)
        )
        fs = stack.enter_context(rigs.ext4(dev.loop, work / "fast" / "fs"))
        cg = stack.enter_context(rigs.memory_cgroup("pgfast", args.memcg_mb << 20))
        pg = stack.enter_context(rigs.postgres(fs / "pg", args.port, cgroup=cg))
        rigs.pgbench_init(pg, args.scale)
        rigs.drop_caches(fs, dev.loop)
        step = measured([pg], 1, rate, args.limit, args.seconds, pgbench_logdir(work, "fastlog"))
    one = step["instances"][0]
    return {"p95_ms": tx_p95(one), "late_share": one["late_share"], "tps": one.get("tps"),
            "pressure": step["pressure"]}  # fmt: skip


def calibrations(limit: float, p95_at_1: float, fast: dict | None) -> dict[str, float]:
    """How far the waited streams' p95 may grow from one tile, by calibration:

    - proportional: LIMIT / P1, as if a transaction's p95 were all storage waiting;
    - affine: (LIMIT - C) / (P1 - C), C the transactions' p95 on storage that adds almost
      nothing (`fast_storage`): only the part of P1 that is waiting scales with the storage.
    Affine is absent without C, or when C is not below P1 (nothing to scale)."""
    out = {"proportional": limit / max(p95_at_1, 1e-3)}
    if fast and fast.get("p95_ms") is not None and fast["p95_ms"] < p95_at_1 < limit:
        out["affine"] = (limit - fast["p95_ms"]) / (p95_at_1 - fast["p95_ms"])
    return out


def answer_under(steps: list[dict], limits: dict[str, float]) -> int:
    """The largest tile count whose steps, and every smaller count's, pass under stricter
    latency limits than the study ran with: a step passes if it passed and every waited
    stream's worst p95 is within its limit (the study's own steps, judged again)."""
    ok: dict[int, bool] = {}
    for st in steps:
        passes = bool(st["passed"]) and all(
            v <= limits[k] for k, v in st["worst"].items() if k in limits
        )
        ok[st["tiles"]] = ok.get(st["tiles"], True) and passes
    answer = 0
    for n in sorted(ok):
        if not ok[n]:
            break
        answer = n
    return answer


def data_footprint(data: Path) -> int:
    """Bytes of an instance's data directory (tables, indexes, WAL), as `du -sb` counts."""
    done = subprocess.run(["du", "-sb", str(data)], capture_output=True, text=True, check=True)
    return int(done.stdout.split()[0])


def wal_streams(profile: Path) -> list[str]:
    """The learned profile's streams that fdatasync their writes (a database's log)."""
    import tomllib

    doc = tomllib.loads(profile.read_text())
    return [s["name"] for s in doc.get("stream", []) if str(s.get("sync", "")).startswith(
        ("fdatasync", "fsync"))]  # fmt: skip


def predicted_answer(study: dict) -> tuple[int | None, list[dict]]:
    """(largest passing tile count, per step: count, verdict, failed criteria, the worst
    value of every latency criterion over the step's tiles)."""
    steps = []
    for step in study.get("steps", []):
        worst: dict[str, float] = {}
        for app in step.get("applications", []):
            for c in app.get("criteria", []):
                if c.get("unit") == "ms" or str(c.get("criterion", "")).endswith(("_p95", "_p99")):
                    name = c["criterion"]
                    worst[name] = max(worst.get(name, 0.0), float(c.get("value") or 0.0))
        steps.append({"tiles": step.get("tiles"), "passed": step.get("passed"),
                      "failed": step.get("failed", []), "worst": worst})  # fmt: skip
    return study.get("max_passing_tiles"), steps


def report(results: list[dict], args: argparse.Namespace) -> str:
    lines = [f"# How many PostgreSQL instances fit? ({datetime.now():%Y-%m-%d %H:%M})", "",
             f"`{' '.join(sys.argv)}`; SLO: at most {SLO_LATE:.0%} of every instance's "
             f"transactions late (above -L {args.limit:g} ms or skipped).", ""]  # fmt: skip
    for r in results:
        pred, steps = predicted_answer(r["predicted"].get("study", {}))
        lines += [f"## RATE {r['rate']:g} tps per instance", "",
                  f"device: {r.get('device')}; calibration (1 instance, captured): "
                  f"{r.get('calibration')}", "",
                  f"**measured: {r['measured_answer']} instance(s); predicted: {pred} "
                  "tile(s)**", "",
                  "| N | worst late share | mean latency (ms) | tps per instance | pass | "
                  "pressure |", "|---|---|---|---|---|---|"]  # fmt: skip
        for m in r["measured"]:
            tps = ", ".join(f"{i.get('tps', 0):.1f}" for i in m["instances"])
            lines.append(f"| {m['n']} | {m['worst_late_share']:.1%} | "
                         f"{m['mean_latency_ms']:.1f} | {tps} | {m['passes']} | "
                         f"{m['pressure']} |")  # fmt: skip
        p = r["predicted"]
        lines += ["", *calibration_lines(r, steps)]
        runs = ", ".join(f"{v:.1f}" for v in r.get("p1_runs", []))
        tile_runs = "; ".join(
            ", ".join(f"{k} {v:.1f}" for k, v in run.items())
            for run in p.get("at_one_tile_runs", [])
        )
        lines += ["", f"prediction: transactions' p95 at 1 instance "
                  f"{p.get('transaction_p95_ms_at_1', 0):.1f} ms (pgbench's log; median of "
                  f"the runs {runs} ms), waited streams' p95 at 1 tile the median per stream "
                  f"of the runs ({tile_runs} ms); room to "
                  f"the limit x{p.get('factor', 0):.2f}; waited streams' p95 at 1 tile "
                  f"{ {k: round(v, 1) for k, v in p.get('at_one_tile_p95_ms', {}).items()} } ms, "
                  f"limits { {k: round(v, 1) for k, v in p.get('limits_ms', {}).items()} } ms; "
                  f"tile capacity {p.get('tile_capacity', 0) / MIB:.0f} MiB (the instance's "
                  f"data directory; learned {p.get('learned_capacity', 0) / MIB:.0f} MiB), "
                  f"WAL streams on a file of their own "
                  f"({'one for every tile' if args.shared_wal else 'one per tile'}): "
                  f"{p.get('wal_streams')}; "
                  f"pressure before the prediction {p.get('pressure')}; "
                  f"`{p.get('command')}`",
                  "", "| tiles | pass | worst p95 response (ms) per waited stream | failed |",
                  "|---|---|---|---|"]  # fmt: skip
        for s in steps:
            worst = ", ".join(f"{k} {v:.1f}" for k, v in s["worst"].items())
            lines.append(f"| {s['tiles']} | {s['passed']} | {worst} | {s['failed']} |")
        if "error" in r["predicted"]:
            lines += ["", "```", r["predicted"]["error"], "```"]
        lines += ["", *curves(r, steps, args.limit), ""]
    return "\n".join(lines)


def calibration_lines(r: dict, steps: list[dict]) -> list[str]:
    """Each calibration's factor and the answer the same study gives under it (the study ran
    with the loosest, so a stricter one is its steps judged again)."""
    p = r["predicted"]
    factors, used = p.get("factors") or {}, p.get("factor")
    at_one = p.get("at_one_tile_p95_ms", {})
    rows = []
    for name in ("proportional", "affine"):
        if name not in factors:
            continue
        f = factors[name]
        limits = {k: v * f for k, v in at_one.items()}
        fast = r.get("fast_storage") or {}
        extra = (f", C = {fast.get('p95_ms', 0):.1f} ms at fast storage ({fast})"
                 if name == "affine" else "")  # fmt: skip
        rows.append(f"- calibration {name}: x{f:.2f}{extra}; predicted "
                    f"{answer_under(steps, limits)} tile(s)"
                    f"{' (the study ran with it)' if f == used else ''}")  # fmt: skip
    return rows


def curves(r: dict, steps: list[dict], limit: float) -> list[str]:
    """Both curves side by side, each as latency relative to its own limit (1.00 = at the
    SLO): instances by their transactions' p95 (pgbench's log, worst instance) against -L,
    tiles by their worst waited stream's p95 against its calibrated limit."""
    limits = r["predicted"].get("limits_ms", {})
    by_n = {m["n"]: m for m in r["measured"]}
    by_t = {s["tiles"]: s for s in steps}
    rows = ["### Both curves: latency against instances and against tiles", "",
            "| count | instances: worst p95 / -L | worst late share | pass | "
            "tiles: worst waited p95 / limit | pass |", "|---|---|---|---|---|---|"]  # fmt: skip
    for n in sorted(set(by_n) | set(by_t)):
        m, t = by_n.get(n), by_t.get(n)
        inst = late = ok_i = tile = ok_t = "-"
        if m:
            p95 = max(tx_p95(i) for i in m["instances"])
            inst, late, ok_i = f"{p95 / limit:.2f}", f"{m['worst_late_share']:.1%}", m["passes"]
        if t:
            ratios = [v / limits[k] for k, v in t["worst"].items() if limits.get(k)]
            tile = f"{max(ratios):.2f}" if ratios else "-"
            ok_t = t["passed"]
        rows.append(f"| {n} | {inst} | {late} | {ok_i} | {tile} | {ok_t} |")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="20,40")
    ap.add_argument("--limit", type=float, default=100.0, help="pgbench -L (ms)")
    ap.add_argument("--max", type=int, default=5, help="most instances")
    ap.add_argument("--scale", type=int, default=4)
    ap.add_argument("--memcg-mb", type=int, default=48)
    ap.add_argument("--delay-ms", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--p1-runs", type=int, default=3,
                    help="runs at one instance and at one tile, median p95s calibrate")  # fmt: skip
    ap.add_argument("--port", type=int, default=54400)
    ap.add_argument("--calibration", choices=("affine", "proportional"), default="affine",
                    help="how the application's room to its limit maps to the storage's "
                         "(docs/learn.md); both answers are reported when affine runs")  # fmt: skip
    ap.add_argument("--shared-wal", action="store_true",
                    help="one WAL file for every tile (default: a file per tile)")  # fmt: skip
    ap.add_argument("--out", default=None)
    ap.add_argument("--keep", action="store_true",
                    help="keep the work directory (trace, profile, run results)")  # fmt: skip
    args = ap.parse_args()
    results = []
    stem = args.out or f"{datetime.now():%Y-%m-%d-%H%M%S}-vm-pg-capacity"
    fid.RESULTS.mkdir(parents=True, exist_ok=True)
    for rate in (float(x) for x in args.rates.split(",")):
        work = Path(tempfile.mkdtemp(prefix="tm-pgcap-", dir="/var/tmp"))
        work.chmod(0o755)
        try:
            results.append(one_rate(work, args, rate))
        finally:
            if args.keep:
                print(f"kept {work}", file=sys.stderr)
            else:
                subprocess.run(["rm", "-rf", str(work)], check=False)
        # written after every rate, so a run stopped in the second keeps the first
        (fid.RESULTS / f"{stem}.md").write_text(report(results, args))
        (fid.RESULTS / f"{stem}.json").write_text(json.dumps(results, indent=1, default=str))
    print(fid.RESULTS / f"{stem}.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
