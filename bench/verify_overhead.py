"""The cost of --verify: 4 KiB random 50/50 read/write at QD32 on the ramdisk, with and without
verification (design.md budget: CPU per IO with verification <= 1.3x without, IOPS >= 0.95x).

Uses the tmbench package's machinery: the ramdisk (a loop device over random bytes in /dev/shm,
direct IO, always detached afterwards), the child runner that samples the process tree's CPU,
and the CPU window inside the measurement phase. Method:

- Setup: one tilemark run with --fill --verify writes verifiable blocks over the whole device,
  so every read of the measured runs can be judged (a device never filled has nothing to check
  reads against). Device records go to bench/work/state, not the machine's state directory.
- The two variants alternate, and the one that goes first flips every repetition (ABBA), so
  drift and other load land on both; ratios are formed per repetition from adjacent runs and
  reported as min / median / max. The budget is judged on the median.
- Before every run: sync(), 1 s to settle, and the load average and CPU/IO pressure (PSI) are
  recorded with the run: this machine is shared, and a ratio means little without them.

Results: bench/results/<date>-<time>-<host>-verify.json (every run's numbers and command) and
.md.
Exit 0 when the budget holds, 1 when it does not, 2 when the ramdisk or tilemark is unusable.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import sys
from datetime import datetime
from typing import Any

import tmbench as tb
from tmbench import spread

CPU_LIMIT = 1.3
IOPS_FLOOR = 0.95
STATE = tb.WORK / "state"
VARIANTS = ("plain", "verify")


def command(tm: str, device: str, variant: str, a: argparse.Namespace, seed: int) -> list[str]:
    cmd = [
        tm, "run", "--target", device, "--destroy-data", device, "--size", a.size,
        "--rw", "randrw", "--read", "50", "--bs", "4k", "--qd", "32", "--threads", "1",
        "--duration", f"{a.duration:g}", "--warmup", f"{a.warmup:g}", "--seed", str(seed),
        "--json", "--results", tb.rel(tb.TILEMARK_RESULTS),
    ]  # fmt: skip
    return cmd + (["--verify"] if variant == "verify" else [])


def measure(tm: str, device: str, variant: str, a: argparse.Namespace, rep: int) -> dict:
    tb.settle()
    load = tb.load_now()
    cmd = command(tm, device, variant, a, random.SystemRandom().randrange(1, 2**31))
    child = tb.run_child(cmd, f"verify-{variant}-rep{rep}")
    record: dict[str, Any] = {"variant": variant, "rep": rep, "cmd": cmd, "load": load}
    if child.exit_code != 0:
        record["error"] = f"exit {child.exit_code}: {child.stderr.strip()[-300:]}"
        return record
    parsed = tb.parse_tilemark(child)
    m = parsed["metrics"]
    win = tb.window_cpu(child.samples, *parsed["window"])
    cpu_per_io = tb.cpu_us_per_io(win, m["iops"])
    verification = parsed["raw"]["summary"].get("verification")
    record.update(
        iops=m["iops"],
        ios=m["ios"],
        cpu_us_per_io=cpu_per_io,
        window=win,
        read_p50_us=m["p50_us"],
        write_p50_us=m.get("write_p50_us"),
        verification=verification,
    )
    return record


def summarize(records: list[dict]) -> dict[str, Any]:
    by = {(r["variant"], r["rep"]): r for r in records if "error" not in r}
    iops, cpu = [], []
    for rep in sorted({r["rep"] for r in records}):
        plain, verify = by.get(("plain", rep)), by.get(("verify", rep))
        if plain and verify:
            iops.append(verify["iops"] / plain["iops"])
            if plain["cpu_us_per_io"] and verify["cpu_us_per_io"]:
                cpu.append(verify["cpu_us_per_io"] / plain["cpu_us_per_io"])
    out = {
        "iops_ratio": spread(iops),
        "cpu_per_io_ratio": spread(cpu),
        "plain_iops": spread([r["iops"] for r in by.values() if r["variant"] == "plain"]),
        "verify_iops": spread([r["iops"] for r in by.values() if r["variant"] == "verify"]),
        "plain_cpu_us_per_io": spread(
            [r["cpu_us_per_io"] for r in by.values() if r["variant"] == "plain"]
        ),
        "verify_cpu_us_per_io": spread(
            [r["cpu_us_per_io"] for r in by.values() if r["variant"] == "verify"]
        ),
        "blocks_checked": sum((r.get("verification") or {}).get("checked", 0) for r in by.values()),
        "findings": sum((r.get("verification") or {}).get("findings", 0) for r in by.values()),
    }
    out["budget"] = {
        "cpu_per_io": f"<= {CPU_LIMIT}x",
        "iops": f">= {IOPS_FLOOR}x",
        "passed": bool(
            out["iops_ratio"]
            and out["cpu_per_io_ratio"]
            and out["iops_ratio"]["median"] >= IOPS_FLOOR
            and out["cpu_per_io_ratio"]["median"] <= CPU_LIMIT
        ),
    }
    return out


def markdown(doc: dict[str, Any]) -> str:
    s = doc["summary"]

    def f(d: dict | None, digits: int = 3) -> str:
        if not d:
            return "-"
        return f"{d['median']:.{digits}f} ({d['min']:.{digits}f} .. {d['max']:.{digits}f})"

    lines = [
        f"# --verify overhead, {doc['date']} on {doc['host']}",
        "",
        "4 KiB randrw 50/50, QD32, 1 thread, ramdisk (loop over /dev/shm, direct IO), "
        f"{doc['settings']['duration']:g} s + {doc['settings']['warmup']:g} s warm-up, "
        f"{doc['settings']['reps']} repetitions alternating (ABBA). Median (min .. max).",
        "",
        "| figure | without --verify | with --verify | ratio | budget |",
        "|---|---|---|---|---|",
        f"| IOPS | {f(s['plain_iops'], 0)} | {f(s['verify_iops'], 0)} | "
        f"{f(s['iops_ratio'])} | >= {IOPS_FLOOR} |",
        f"| CPU us per IO (window) | {f(s['plain_cpu_us_per_io'], 2)} | "
        f"{f(s['verify_cpu_us_per_io'], 2)} | {f(s['cpu_per_io_ratio'])} | <= {CPU_LIMIT} |",
        "",
        f"Budget {'passed' if s['budget']['passed'] else 'FAILED'}; "
        f"{s['blocks_checked']:,} blocks read back and checked, {s['findings']} findings.",
        "",
        "Load when each run started (1-min load average, CPU and IO pressure avg10 %):",
        "",
    ]
    for r in doc["runs"]:
        load = r["load"]
        lines.append(
            f"- rep {r['rep']} {r['variant']}: load {' '.join(load['loadavg'])}, cpu "
            f"{load['cpu_some_avg10']}, io {load['io_some_avg10']}"
            + (f", IOPS {r['iops']:,.0f}, {r['cpu_us_per_io']:.2f} us/IO" if "iops" in r else "")
            + (f" (error: {r['error']})" if "error" in r else "")
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ramdisk", type=tb.parse_size, default=tb.parse_size("1g"))
    p.add_argument("--size", default="1g", help="data area used on the ramdisk")
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--reps", type=int, default=6)
    p.add_argument("--tilemark", default=None)
    a = p.parse_args(argv)
    try:
        tm = tb.find_tilemark(a.tilemark)
        STATE.mkdir(parents=True, exist_ok=True)
        os.environ["TILEMARK_STATE_DIR"] = str(STATE)
        with tb.ramdisk(a.ramdisk) as ram:
            device = ram["device"]
            fill = [tm, "run", "--target", device, "--destroy-data", device, "--size", a.size,
                    "--fill", "--rw", "randwrite", "--duration", "0.2", "--verify",
                    "--results", tb.rel(tb.TILEMARK_RESULTS)]  # fmt: skip
            done = tb.run_child(fill, "verify-fill")
            if done.exit_code != 0:
                raise tb.SetupError(f"the verifiable fill failed: {done.stderr.strip()[-300:]}")
            records = []
            for rep in range(1, a.reps + 1):
                order = VARIANTS if rep % 2 else VARIANTS[::-1]
                for variant in order:
                    record = measure(tm, device, variant, a, rep)
                    records.append(record)
                    shown = (
                        f"{record['iops']:,.0f} IOPS, {record['cpu_us_per_io']:.2f} us/IO"
                        if "iops" in record
                        else record["error"]
                    )
                    print(f"rep {rep} {variant}: {shown}, load {record['load']}", flush=True)
            settings = tb.Settings(
                tilemark=tm, fio="", size=0, duration=a.duration, warmup=a.warmup,
                reps=a.reps, target=device, device=True,
            )  # fmt: skip
            notes = tb.machine_notes(settings, {"ramdisk": ram})
    except tb.SetupError as e:
        print(f"verify_overhead: {e}", file=sys.stderr)
        return 2
    now = datetime.now()
    doc = {
        "schema": "tilemark-bench-verify-overhead/1",
        "date": now.strftime("%Y-%m-%d %H:%M"),
        "host": socket.gethostname(),
        "settings": vars(a) | {"ramdisk": a.ramdisk},
        "machine": notes,
        "runs": records,
        "summary": summarize(records),
    }
    json_path, _ = tb.write_results(
        tb.RESULTS_DIR, "verify", doc, markdown(doc), when=now, indent=2
    )
    print(markdown(doc))
    print(f"results: {tb.rel(json_path)}, .md")
    return 0 if doc["summary"]["budget"]["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
