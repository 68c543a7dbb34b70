"""Every local run takes the engine's frames (issue 25), the QoS and steady-state monitors, the
metrics endpoint and runs over several targets included: what they decide and store must be
what the JSON snapshots gave.

Each test makes one real run (null backend, short) on the frames path, recording every poll's
frames and, from the engine in the same call (`poll_frames_and_json`), the JSON snapshots of the
same intervals. The same command then runs again on the JSON path (TILEMARK_ENGINE_SNAPSHOTS=
json) with the engine replaced by the recording: the same measurements, the old consumers. The
interval files, the per-target file, the summaries (QoS verdicts, steady state, change points,
issue lateness) and the metrics served must be equal.
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tilemark import engine
from tilemark.cli import main

pytestmark = [pytest.mark.cost(13)]

# Figures of the host and its clock, not of the measurements: they differ between two runs
# (`overhead` holds the process's CPU per IO, from the host telemetry).
NOT_MEASURED = {
    "telemetry", "tool_bound", "overhead", "hosts", "cluster", "preconditioning", "notes",
}  # fmt: skip


HOST_METRICS = r"runs_ended|tilemark_device_|tilemark_host_"


class Recording:
    """A real engine run on the frames path that keeps each poll's frames and JSON."""

    def __init__(self, real: engine.Handle) -> None:
        self.real = real
        self.plan = real.plan
        self.polls: list[str] = []
        self.waits: list[bool] = []
        self.sets: list[list[int]] = []
        self.final: dict[str, Any] | None = None
        self.stopped_at: int | None = None
        self.window: tuple[int, float] | None = None

    def set_groups(self, group_of: list[int]) -> None:
        self.real.set_groups(group_of)

    def set_group_sets(self, sets: list[list[int]]) -> None:
        self.sets = sets
        self.real.set_group_sets(sets)

    def set_window(self, index: int, window_s: float) -> None:
        self.window = (index, window_s)
        self.real.set_window(index, window_s)

    def window_snapshot(self) -> dict[str, Any] | None:
        return self.real.window_snapshot()

    def poll_frames(self) -> list[engine.Frame]:
        raws, text = self.real._run.poll_frames_and_json()
        self.polls.append(text)
        return [engine.Frame(raw) for raw in raws]

    def wait(self, timeout_s: float) -> bool:
        finished = self.real.wait(timeout_s)
        self.waits.append(finished)
        return finished

    def stop(self) -> None:
        if self.stopped_at is None:
            self.stopped_at = len(self.polls)
        self.real.stop()

    def result(self) -> dict[str, Any]:
        if self.final is None:
            self.final = self.real.result()
        return self.final


class JsonReplay:
    """The recording's intervals as `Handle.poll` gives them (no frames: the JSON path)."""

    def __init__(self, recording: Recording, plan: dict[str, Any]) -> None:
        self.plan = plan
        self._polls = iter(recording.polls)
        self._waits = iter(recording.waits)
        self._final = recording.final
        self.stopped_at: int | None = None
        self._polled = 0

    def poll(self) -> list[dict[str, Any]]:
        self._polled += 1
        return json.loads(next(self._polls))

    def wait(self, timeout_s: float) -> bool:
        return next(self._waits)

    def stop(self) -> None:
        if self.stopped_at is None:
            self.stopped_at = self._polled

    def result(self) -> dict[str, Any]:
        return json.loads(json.dumps(self._final))


def run_both(monkeypatch, tmp_path: Path, args: list[str]) -> tuple[dict, dict, Recording]:
    """The run on the frames path, then replayed on the JSON path: their run.json docs."""
    real_start = engine.start
    made: dict[str, Any] = {}

    def recording_start(plan):
        made["recording"] = Recording(real_start(plan))
        return made["recording"]

    monkeypatch.delenv("TILEMARK_ENGINE_SNAPSHOTS", raising=False)
    monkeypatch.setattr(engine, "start", recording_start)
    # A loaded host may fail a QoS criterion (exit 3): the replay must then fail it too.
    status = main([*args, "--results", str(tmp_path / "frames")])
    assert status in (0, 3, None)
    recording: Recording = made["recording"]
    assert recording.polls and recording.final is not None

    def replay_start(plan):
        made["replay"] = JsonReplay(recording, plan)
        return made["replay"]

    monkeypatch.setenv("TILEMARK_ENGINE_SNAPSHOTS", "json")
    monkeypatch.setattr(engine, "start", replay_start)
    assert main([*args, "--results", str(tmp_path / "json")]) == status
    assert made["replay"].stopped_at == recording.stopped_at, "the monitors stopped alike"
    return run_doc(tmp_path / "frames"), run_doc(tmp_path / "json"), recording


def run_doc(results: Path) -> dict[str, Any]:
    (run_json,) = results.glob("*/run.json")
    doc = json.loads(run_json.read_text())
    doc["dir"] = run_json.parent
    return doc


def measured(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc["summary"].items() if k not in NOT_MEASURED}


def same_summary(a: dict[str, Any], b: dict[str, Any]) -> None:
    """The summaries' measured parts are equal, key by key (a failure names the key)."""
    ma, mb = measured(a), measured(b)
    assert sorted(ma) == sorted(mb)
    for key in ma:
        assert ma[key] == mb[key], key


def same_table(a: Path, b: Path) -> int:
    """The two parquet files hold the same rows (run ids aside); how many."""
    ta, tb = pq.read_table(a), pq.read_table(b)
    ta, tb = ta.drop_columns(["run_id"]), tb.drop_columns(["run_id"])
    assert ta.schema == tb.schema
    assert ta.num_rows == tb.num_rows
    assert ta.to_pylist() == tb.to_pylist()
    return ta.num_rows


def same_files(a: dict[str, Any], b: dict[str, Any], name: str) -> int:
    files_a = sorted(p.relative_to(a["dir"]) for p in a["dir"].rglob(f"{name}*.parquet"))
    files_b = sorted(p.relative_to(b["dir"]) for p in b["dir"].rglob(f"{name}*.parquet"))
    assert files_a and files_a == files_b
    return sum(same_table(a["dir"] / f, b["dir"] / f) for f in files_a)


def tile_args(tmp_path: Path, *more: str) -> list[str]:
    return ["run", "--tiles", "2", "--target", str(tmp_path / "t.dat"), "--capacity", "256m",
            "--backend", "null", "--warmup", "0.5", "--interval", "0.25", "--json",
            *more]  # fmt: skip


def test_a_tile_runs_qos_verdicts_and_files_are_the_same_on_both_paths(monkeypatch, tmp_path):
    args = tile_args(tmp_path, "--duration", "2", "--qos-interval", "1")
    frames, old, recording = run_both(monkeypatch, tmp_path, args)
    assert recording.sets == [list(range(len(frames["plan"]["streams"])))], "a set per stream"
    # The QoS monitor is its only reader: the engine merges its QoS windows (Handle.set_window),
    # and the JSON path merges every stream's snapshots in Python, as before.
    assert recording.window == (0, 1.0)
    same_summary(frames, old)
    apps = frames["summary"]["applications"]
    # A loaded host may fail a criterion or leave it within noise: both paths must agree.
    verdicts = {i["verdict"] for i in apps["instances"]}
    assert apps["instances"] and verdicts <= {"pass", "fail", "noise"}
    rows = same_files(frames, old, "intervals")
    assert rows >= len(frames["plan"]["streams"]) * 8  # every stream in every interval
    assert frames["summary"]["change_points"] == old["summary"]["change_points"]
    assert frames["summary"]["issue_lateness"]["ios"] > 0


def test_an_extended_tile_run_is_judged_as_it_goes_alike_on_both_paths(monkeypatch, tmp_path):
    # Past --duration the monitor judges every second until every criterion is decided: the
    # windows merged so far and the one being filled (from the engine on the frames path: at
    # 1 s, the second window of 0.75 s has one of its three intervals).
    args = tile_args(tmp_path, "--duration", "1", "--max-duration", "3", "--qos-interval", "0.75")
    frames, old, recording = run_both(monkeypatch, tmp_path, args)
    assert recording.window == (0, 0.75)
    same_summary(frames, old)
    measurement = frames["summary"]["applications"]["measurement"]
    assert measurement["checks"] >= 1, measurement


def test_a_steady_state_run_ends_and_is_judged_alike_on_both_paths(monkeypatch, tmp_path):
    args = tile_args(tmp_path, "--until-steady", "--round", "0.5", "--max-rounds", "8")
    frames, old, _ = run_both(monkeypatch, tmp_path, args)
    state = frames["summary"]["steady_state"]
    assert state["rounds"], "rounds were measured"
    same_summary(frames, old)
    same_files(frames, old, "intervals")


def test_the_metrics_served_are_the_same_on_both_paths(monkeypatch, tmp_path):
    from prometheus_client import CollectorRegistry, generate_latest

    from tilemark.telemetry import prometheus

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = tile_args(tmp_path, "--duration", "1", "--metrics-port", str(port))
    scraped: list[str] = []
    observe = prometheus.MetricsServer.observe

    def observed(self, snapshots):
        observe(self, snapshots)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(prometheus._Collector(self))
        text = generate_latest(registry).decode()
        # The run's id, how many runs this process ended and the host's telemetry (sampled
        # on its own clock) differ between the two runs.
        text = re.sub(r'run="[^"]*"', 'run=""', text)
        scraped.append("\n".join(x for x in text.splitlines() if not re.search(HOST_METRICS, x)))

    monkeypatch.setattr(prometheus.MetricsServer, "observe", observed)
    try:
        frames, old, recording = run_both(monkeypatch, tmp_path, args)
    finally:
        prometheus.stop()
    polls = sum(1 for p in recording.polls if json.loads(p))
    assert len(scraped) == 2 * polls
    for a, b in zip(scraped[:polls], scraped[polls:], strict=True):
        assert sorted(set(a.splitlines()) ^ set(b.splitlines())) == []
    assert 'tilemark_iops{app="oltp",op="read"' in scraped[polls - 1]
    same_summary(frames, old)


def test_a_run_over_several_targets_stores_the_same_per_target_rows(monkeypatch, tmp_path):
    workload = tmp_path / "w.toml"
    workload.write_text(
        "\n".join(
            [
                'backend = "null"',
                "[[target]]",
                'name = "a"',
                f'path = "{tmp_path / "a.dat"}"',
                'size = "8m"',
                "[[target]]",
                'name = "b"',
                f'path = "{tmp_path / "b.dat"}"',
                'size = "8m"',
                "[[stream]]",
                'name = "ra"',
                'target = "a"',
                'rw = "randread"',
                "rate = 2000",
                "qd = 4",
                "[[stream]]",
                'name = "wb"',
                'target = "b"',
                'rw = "randwrite"',
                "qd = 2",
                "copies = 3",
            ]
        )
        + "\n"
    )
    args = ["run", str(workload), "--duration", "1", "--warmup", "0.25", "--interval", "0.25",
            "--json"]  # fmt: skip
    frames, old, recording = run_both(monkeypatch, tmp_path, args)
    assert recording.sets == [[0, 1, 1, 1]], "a set per target"
    same_summary(frames, old)
    same_files(frames, old, "intervals")
    assert same_files(frames, old, "targets") >= 2 * 5


@pytest.mark.parametrize("several", [False, True])
def test_frames_describe_refuses_what_groups_leave_out(several):
    from tilemark.run.runner import frame_sets, frames_describe

    one = {"regions": [{"target": 0}]}
    spread = {"regions": [{"target": 0}, {"target": 1}]}
    targets = [{}, {}] if several else [{}]
    plan = {"targets": targets, "streams": [one, spread]}
    assert frames_describe(plan, per_stream=False) is (not several)
    replay = {"targets": targets, "streams": [one, {**one, "ios": {"mode": "afap"}}]}
    assert frames_describe(replay, per_stream=False)
    assert not frames_describe(replay, per_stream=True)
    plain = {"targets": targets, "streams": [one, one]}
    assert frame_sets(plain, per_stream=True) == {
        "streams": [0, 1],
        **({"targets": [0, 0]} if several else {}),
    }
