"""Two learned profiles of one capture, alternated on a fresh rig: which is closer to the
application? bench/fidelity.py --keep leaves a capture (app.parquet) and the profile learned
from it; a change to `tilemark learn` gives a second profile of the same capture. This runs
them A B B A ... (so a drift of the shared machine's load favours neither) on a rig of the
kind the capture was made on (apprigs.delayed_device: nbdkit memory behind the delay filter,
a loop device, ext4), each run captured and compared with the application's capture
(`tilemark fidelity --same-device`), and writes every property of every run with the median
per profile.

    sudo .venv/bin/python bench/fid_ab.py WORK A.toml B.toml \
        --names before,after --reps 2 --out bench/results/DATE-vm-fidelity-NAME-ab

The runs use the capture's rig settings from fidelity.py's defaults (1 ms read and write
delay, 2 GiB), and the capacity of profile A ([learned] capacity) for both.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import apprigs as rigs  # noqa: E402
import fidelity as fid  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work", type=Path, help="a work directory bench/fidelity.py --keep left")
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--names", default="a,b", help="the two profiles' names in the table")
    ap.add_argument("--reps", type=int, default=2, help="runs of each profile")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--rdelay-ms", type=float, default=1)
    ap.add_argument("--wdelay-ms", type=float, default=1)
    ap.add_argument("--device-size", default="2G",
                    help="the rig's device (with --own-file the second file takes the "
                         "capacity too)")  # fmt: skip
    ap.add_argument("--out", required=True, help="results file stem (.md and .json)")
    ap.add_argument("--own-file", default="", metavar="WHICH:STREAM,...",
                    help="run these streams of profile a or b on a file of their own "
                         "(b:postgres_log): a database's log is a file of its own")  # fmt: skip
    args = ap.parse_args()
    names = args.names.split(",")
    if len(names) != 2:
        ap.error("--names takes two names, comma-separated")
    app = args.work / "app.parquet"
    if not app.exists():
        ap.error(f"{app} does not exist: the work directory of a fidelity.py --keep run?")
    cap = fid.capacity_of(args.a)
    runs: dict[str, list[dict]] = {n: [] for n in names}
    profiles = dict(zip(names, (args.a, args.b), strict=True))
    own: dict[str, tuple[str, ...]] = dict.fromkeys(names, ())
    if args.own_file:
        which, _, streams = args.own_file.partition(":")
        if which not in ("a", "b") or not streams:
            ap.error("--own-file takes a:STREAM,... or b:STREAM,...")
        own[names[0 if which == "a" else 1]] = tuple(streams.split(","))
    order = [names if rep % 2 == 0 else names[::-1] for rep in range(args.reps)]
    with rigs.delayed_device(args.work / "ab-dev", args.device_size, rdelay_ms=args.rdelay_ms,
                             wdelay_ms=args.wdelay_ms) as dev:  # fmt: skip
        with rigs.ext4(dev.loop, args.work / "ab-fs") as fs:
            for rep, pair in enumerate(order):
                for name in pair:
                    out = args.work / f"ab-{name}-{rep}.parquet"
                    fid.run_profile(dev, fs, str(profiles[name]), cap, args.seconds, out,
                                    own_file=own[name])  # fmt: skip
                    doc = fid.fidelity(app, out)
                    doc["pressure"] = rigs.pressure()
                    runs[name].append(doc)
                    print(f"{name} {rep + 1}: overall {doc.get('overall')}", flush=True)
    stem = Path(args.out)
    stem.with_suffix(".json").write_text(json.dumps(
        {"argv": sys.argv, "host": platform.node(), "runs": runs}, indent=1))  # fmt: skip
    text = [
        f"# Two profiles of one capture, alternated ({datetime.now():%Y-%m-%d %H:%M})",
        "",
        f"`bench/fid_ab.py {' '.join(sys.argv[1:])}` on {platform.node()} "
        f"(kernel {platform.release()}): {names[0]} = {args.a}, {names[1]} = {args.b}"
        + "".join(f" ({n}: {', '.join(v)} on a file of their own)" for n, v in own.items() if v)
        + ", "
        f"order {' '.join(' '.join(p) for p in order)}; each run compared with "
        f"{app} (`tilemark fidelity --same-device`).",
        "",
        fid.controls_table(runs),
        "",
    ]
    stem.with_suffix(".md").write_text("\n".join(text))
    print(stem.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
