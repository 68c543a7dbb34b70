"""Synthetic stored runs and studies for report, compare and export tests.

Small runs go through the real store (RunWriter) and the real analysis (summarize,
application_results), so reports read exactly what `tilemark run` and `tilemark scale` write;
only the engine is replaced by generated snapshots. The big run is written with pyarrow
directly (the store's writer would spend most of the test budget serializing histograms).
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import tilemark
from engine_data import hist_json, latencies
from tilemark.analysis.tiles import application_results
from tilemark.hist import Histogram
from tilemark.run.summary import summarize, target_iops
from tilemark.run.tiles import TileRunSettings, tile_workload
from tilemark.store.intervals import INTERVAL_SCHEMA
from tilemark.store.rundir import SCHEMA_VERSION, RunWriter
from tilemark.study import (
    KnobStudy,
    StudyRecord,
    TileCountStudy,
    attempt_of,
    run_study,
    tile_definition,
)
from tilemark.targets.header import TargetInfo
from tilemark.targets.spec import TargetSpec
from tilemark.workload.compiler import compile_plan
from tilemark.workload.tilefile import default_tile, parse_sets

GIB = 1 << 30


def target_info(path: str = "/tmp/tilemark-report-test.dat") -> TargetInfo:
    return TargetInfo(
        path=path,
        kind="file",
        data_offset=4096,
        data_length=4 * GIB,
        direct=True,
        dio_alignment=4096,
        exists=False,
    )


def _op_counters(rng: random.Random, n: int, size: int, lo: int, hi: int, open_loop: bool):
    service = latencies(rng, n, lo, hi) if n else []
    op = {"ops": n, "bytes": n * size, "errors": {}, "service": hist_json(service)}
    # Open loop: response time runs from the intended issue time, so it is never shorter.
    op["response"] = hist_json([v + rng.randint(0, lo) for v in service]) if open_loop else None
    return op


def _merge_ops(ops: list[dict]) -> dict:
    out = {"ops": 0, "bytes": 0, "errors": {}}
    for kind in ("service", "response"):
        hists = [o.get(kind) for o in ops]
        out[kind] = None if all(h is None for h in hists) else Histogram.merged(hists).to_json()
    for o in ops:
        out["ops"] += o["ops"]
        out["bytes"] += o["bytes"]
    return out


def synth_snapshots(
    plan: dict,
    *,
    intervals: int,
    warmup: int,
    scale: float = 1.0,
    latency: float = 1.0,
    seed: int = 3,
) -> tuple[list[dict], dict]:
    """Snapshots and the engine result for a plan: ~rate IOs per second per stream.

    Closed-loop streams do 200 * scale IOs a second; open-loop ones their target rate (capped
    at 400 so tests stay fast). Latencies are log-uniform in [0.1, 2] ms times `latency`.
    """
    rng = random.Random(seed)
    snaps = []
    totals: dict[int, dict[str, list[dict]]] = {}
    for i in range(intervals):
        streams = []
        for index, s in enumerate(plan["streams"]):
            open_loop = s["arrival"]["kind"] == "open"
            rate = min(target_iops(s) or 0.0, 400.0) if open_loop else 200.0 * scale
            n = max(1, int(rate))
            size = int(s["sizes"][0][0])
            reads = int(round(n * s["read_pct"] / 100.0))
            entry: dict = {"stream": index, "lag_max_ns": 0, "behind_ios": 0}
            lo, hi = int(100_000 * latency), int(2_000_000 * latency)
            for kind, count in (("read", reads), ("write", n - reads), ("sync", 0)):
                # The engine reports every op kind, with zero counts when it had none.
                entry[kind] = _op_counters(rng, count, size, lo, hi, open_loop)
                if i >= warmup:
                    totals.setdefault(index, {}).setdefault(kind, []).append(entry[kind])
            streams.append(entry)
        start = i * 1_000_000_000
        snaps.append(
            {
                "interval": i,
                "phase": "warmup" if i < warmup else "measure",
                "start_ns": start,
                "end_ns": start + 1_000_000_000,
                "streams": streams,
            }
        )
    result = {
        "complete": True,
        "started_at_ns": 1_790_000_000_000_000_000,
        "measure_start_ns": warmup * 1_000_000_000,
        "measure_end_ns": intervals * 1_000_000_000,
        "streams": [
            {
                "stream": index,
                **{kind: _merge_ops(ops) for kind, ops in totals.get(index, {}).items()},
                "lag_max_ns": 0,
                "ios_issued_late": 0,
            }
            for index in range(len(plan["streams"]))
        ],
    }
    return snaps, result


def simple_plan(
    names=("randrw",), *, read_pct: float = 70.0, bs: int = 8192, rate: float | None = None
) -> dict:
    arrival = {"kind": "open", "rate_iops": rate, "dist": "poisson"} if rate else {"kind": "closed"}
    return {
        "plan_version": 1,
        "backend": "uring",
        "threads": 2,
        "interval_ms": 1000,
        "start_at_ns": None,
        "warmup_ms": 2000,
        "duration_ms": 8000,
        "targets": [{"path": "/tmp/t.dat", "offset": 4096, "length": GIB, "direct": True}],
        "streams": [
            {
                "name": name,
                "target": 0,
                "offset": 0,
                "length": GIB,
                "read_pct": read_pct,
                "sizes": [[bs, 1.0]],
                "pattern": {"kind": "random"},
                "random_pct": 100.0,
                "align": 4096,
                "qd": 8,
                "arrival": arrival,
                "burst": None,
                "sync": {"kind": "none"},
                "compress_pct": 0.0,
                "seed": k + 1,
            }
            for k, name in enumerate(names)
        ],
    }


def write_run(
    results: Path,
    plan: dict,
    *,
    intervals: int = 10,
    warmup: int = 2,
    scale: float = 1.0,
    latency: float = 1.0,
    workload_name: str = "randrw",
    seed: int = 3,
) -> Path:
    """A complete stored run of `plan` with synthetic measurements; its directory."""
    snaps, result = synth_snapshots(
        plan, intervals=intervals, warmup=warmup, scale=scale, latency=latency, seed=seed
    )
    writer = RunWriter(
        results,
        plan=plan,
        workload={"name": workload_name, "streams": [s["name"] for s in plan["streams"]]},
        targets=[{"path": plan["targets"][0]["path"]}],
        argv=["tilemark", "run", "--synthetic"],
    )
    writer.add_snapshots(snaps)
    return writer.finish(result, summary=summarize(plan, result), complete=True)


def write_tile_run(
    results: Path,
    tiles: int,
    *,
    max_tiles: int | None = None,
    latency: float = 1.0,
    intervals: int = 10,
    warmup: int = 2,
    kind: str = "tiles",
    sets: list[str] | None = None,
) -> tuple[Path, dict]:
    """A stored tile run of the default tile (mail, oltp, dss, web, backup), with `sets` knob
    overrides; dir and summary."""
    tile = default_tile(parse_sets(sets or []))
    settings = TileRunSettings(
        targets=[TargetSpec("tilemark-report-test", "/tmp/tilemark-report-test.dat")],
        capacity=4 * GIB,
        duration=intervals - warmup,
        warmup=warmup,
        qos_interval_s=max((intervals - warmup) / 4, 1.0),
    )
    info = target_info()
    workload, layout = tile_workload(
        tile, tiles, settings, max_tiles=max_tiles or tiles, infos=[info]
    )
    plan = compile_plan(workload, info)
    snaps, result = synth_snapshots(plan, intervals=intervals, warmup=warmup, latency=latency)
    summary = summarize(plan, result)
    apps = application_results(
        tile, layout, plan, snaps, result, qos_interval_s=settings.qos_interval_s
    )
    apps["layout"] = {
        "tile": tile.name,
        "max_tiles": max_tiles or tiles,
        "capacity": settings.capacity,
        "regions": layout.regions,
        "streams": [t.to_json() for t in layout.tags],
    }
    summary["applications"] = apps
    writer = RunWriter(
        results,
        plan=plan,
        workload=workload.to_json(),
        targets=[info.record()],
        argv=["tilemark", "run", "--tiles", str(tiles)],
        kind=kind,
    )
    writer.add_snapshots(snaps)
    run_dir = writer.finish(result, summary=summary, complete=True)
    return run_dir, summary


class _Outcome:
    """The parts of runner.RunOutcome that study.attempt_of reads."""

    def __init__(self, run_dir: Path, summary: dict):
        self.run_id = run_dir.name
        self.run_dir = run_dir
        self.summary = summary
        self.complete = True
        self.exit_status = None
        self.error = None


class _SyntheticSteps:
    """A study's step runner that stores synthetic tile runs instead of running the engine.
    Latency grows by `latency_per_step` per tile (or per doubling of a knob's value)."""

    def __init__(self, results: Path, max_tiles: int, latency_per_step: float, knob_start=None):
        self.results = results
        self.max_tiles = max_tiles
        self.latency_per_step = latency_per_step
        self.knob_start = knob_start

    def run(self, spec, reason):
        n = spec.params["tiles"]
        steps = n - 1
        if self.knob_start is not None:
            steps = max(0.0, math.log2(spec.key / self.knob_start))
        run_dir, summary = write_tile_run(
            self.results,
            n,
            max_tiles=self.max_tiles,
            latency=self.latency_per_step**steps,
            kind="scale-step",
            sets=[spec.params["set"]] if "set" in spec.params else None,
        )
        return attempt_of(_Outcome(run_dir, summary), reason)


def _settings() -> TileRunSettings:
    return TileRunSettings(
        targets=[TargetSpec("tilemark-report-test", "/tmp/tilemark-report-test.dat")],
        capacity=4 * GIB,
        duration=8,
        warmup=2,
    )


def write_study(
    results: Path,
    counts=(1, 2, 3),
    *,
    latency_per_tile: float = 1.0,
    confirm_runs: int = 0,
    repeat: int = 1,
) -> Path:
    """A linear scaling study of the default tile; latency grows with the tile count."""
    definition = tile_definition(default_tile({}), _settings())
    outcome = run_study(
        lambda: TileCountStudy(list(counts), search=False, confirm=1, definition=definition),
        _SyntheticSteps(results, max(counts), latency_per_tile),
        StudyRecord(results, {"kind": "scale", "argv": ["tilemark", "scale"]}),
        confirm_runs=confirm_runs,
        repeat=repeat,
        extra=lambda: {"confirm_runs": confirm_runs, "repeat": repeat, "settle": None},
    )
    return outcome.path


def write_knob_study(results: Path, *, latency_per_doubling: float = 3.0) -> Path:
    """A knob study of oltp.iops in one default tile; latency grows as the rate doubles."""
    definition = tile_definition(default_tile({}), _settings())
    outcome = run_study(
        lambda: KnobStudy(
            "oltp.iops",
            1000.0,
            low=100.0,
            high=16000.0,
            precision_pct=10.0,
            tiles=1,
            definition=definition,
        ),
        _SyntheticSteps(results, 1, latency_per_doubling, knob_start=1000.0),
        StudyRecord(results, {"kind": "knob", "argv": ["tilemark", "scale", "--knob"]}),
        confirm_runs=1,
        extra=lambda: {"confirm_runs": 1, "repeat": 1, "settle": None},
    )
    return outcome.path


# ---------------------------------------------------------------------------------------------
# a long run with many streams, written directly


def _times(h: Histogram, count: int) -> Histogram:
    """h merged with itself `count` times."""
    return Histogram(
        {i: c * count for i, c in h.counts.items()}, h.n * count, h.sum * count, h.min, h.max
    )


def write_big_run(results: Path, *, intervals: int = 3600, streams: int = 100) -> Path:
    """A complete run of `streams` closed-loop streams over `intervals` one-second intervals.

    Rows reuse a pool of histograms (Parquet dictionary-encodes them), so writing stays fast
    while every row still carries a real histogram for the report to parse and merge.
    """
    rng = random.Random(11)
    pool = []
    for _ in range(64):
        # Like measured intervals: 50..2000 IOs spread over 1-3 octaves of latency
        # (tile runs' interval histograms hold 55-100 buckets on average).
        lo = int(100_000 * 10 ** rng.random())
        hi = int(lo * 2 ** (1 + 2 * rng.random()))
        h = Histogram()
        for v in latencies(rng, int(50 * 40 ** rng.random()), lo, hi):
            h.record(v)
        pool.append(h)
    pool_text = [json.dumps(h.to_json(), separators=(",", ":")) for h in pool]
    names = [f"s{i:03d}" for i in range(streams)]
    plan = simple_plan(names, read_pct=100.0)
    plan["warmup_ms"] = 60_000
    plan["duration_ms"] = (intervals - 60) * 1000
    warm = 60
    run_id = "20260101-000000-b16a"
    run_dir = results / run_id
    run_dir.mkdir(parents=True)
    cols: dict[str, list] = {name: [] for name in INTERVAL_SCHEMA.names}
    ops_total = [0] * streams
    whole = [Histogram() for _ in range(streams)]
    for i in range(intervals):
        phase = "warmup" if i < warm else "measure"
        for s in range(streams):
            k = (i * 7 + s * 13) % len(pool)
            h = pool[k]
            ops = h.n
            cols["run_id"].append(run_id)
            cols["interval"].append(i)
            cols["phase"].append(phase)
            cols["start_ns"].append(i * 1_000_000_000)
            cols["end_ns"].append((i + 1) * 1_000_000_000)
            cols["stream"].append(s)
            cols["stream_name"].append(names[s])
            cols["op"].append("read")
            cols["ops"].append(ops)
            cols["bytes"].append(ops * 8192)
            cols["errors"].append(0)
            cols["errors_json"].append("{}")
            cols["lag_max_ns"].append(0)
            cols["behind_ios"].append(0)
            cols["service_hist"].append(pool_text[k])
            cols["response_hist"].append(None)
            if phase == "measure":
                ops_total[s] += ops
    stats = {}
    for k, h in enumerate(pool):
        stats[k] = {
            "mean": h.mean() / 1e3,
            "p50": h.percentile(50) / 1e3,
            "p99": h.percentile(99) / 1e3,
            "p999": h.percentile(99.9) / 1e3,
            "max": h.max / 1e3,
        }
    uses = [[0] * len(pool) for _ in range(streams)]
    for i in range(intervals):
        for s in range(streams):
            k = (i * 7 + s * 13) % len(pool)
            if i >= warm:
                uses[s][k] += 1
            for stat in ("mean", "p50", "p99", "p999", "max"):
                cols[f"service_{stat}_us"].append(stats[k][stat])
                cols[f"response_{stat}_us"].append(None)
    for s in range(streams):
        for k, count in enumerate(uses[s]):
            if count:
                whole[s].merge(_times(pool[k], count))
    table = pa.table(cols, schema=INTERVAL_SCHEMA)
    pq.write_table(table, run_dir / "intervals.parquet", compression="zstd", row_group_size=20_000)
    result = {
        "complete": True,
        "started_at_ns": 1_767_225_600_000_000_000,
        "measure_start_ns": warm * 1_000_000_000,
        "measure_end_ns": intervals * 1_000_000_000,
        "streams": [
            {
                "stream": s,
                "read": {
                    "ops": ops_total[s],
                    "bytes": ops_total[s] * 8192,
                    "errors": {},
                    "service": whole[s].to_json(),
                    "response": None,
                },
                "write": {"ops": 0, "bytes": 0, "errors": {}, "service": None, "response": None},
                "sync": None,
                "lag_max_ns": 0,
                "ios_issued_late": 0,
            }
            for s in range(streams)
        ],
    }
    doc = {
        "schema_version": SCHEMA_VERSION,
        "tilemark_version": tilemark.__version__,
        "engine_version": None,
        "run_id": run_id,
        "kind": "run",
        "status": "complete",
        "complete": True,
        "error": None,
        "argv": ["tilemark", "run", "--synthetic-big"],
        "started_at": "2026-01-01T00:00:00.000Z",
        "ended_at": "2026-01-01T01:00:00.000Z",
        "workload": {"name": "big", "streams": names},
        "plan": plan,
        "targets": [{"path": "/tmp/t.dat"}],
        "environment": {"hostname": "synthetic", "kernel": "Linux 6.1.0", "targets": []},
        "summary": summarize(plan, result),
        "result": result,
        "files": {"intervals": "intervals.parquet"},
    }
    (run_dir / "run.json").write_text(json.dumps(doc))
    return run_dir


__all__ = [
    "simple_plan",
    "write_big_run",
    "write_run",
    "write_study",
    "write_tile_run",
]
