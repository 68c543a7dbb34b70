"""fio's jobs that pace or end each other (fio/pace.py, workload/pacing.py): token-based flow
control and exitall with exit_what.

fio's rules, quoted from its HOWTO (fio commit f5344384):
- flow_id: "The ID of the flow. If not specified, it defaults to being a global flow."
- flow: "Weight in token-based flow control. If this value is used, then fio regulates the
  activity between two or more jobs sharing the same flow_id. Fio attempts to keep each job
  activity proportional to other jobs' activities in the same flow_id group, with respect to
  requested weight per job."
- flow_sleep: "The period of time, in microseconds, to wait after the flow counter has
  exceeded its proportion before retrying operations."
- exitall: "Setting exitall will instead make fio terminate all jobs in the same group, as
  soon as one job of that group finishes."
- exit_what: "The default is group [...] The setting all terminates all jobs. The setting
  stonewall terminates all currently running jobs across all groups and continues execution
  with the next stonewalled group."
- new_group / stonewall: each starts a reporting group.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from fio_examples import example
from tilemark.errors import UsageError
from tilemark.fio import toml_text, translate
from tilemark.fio.translate import examine
from tilemark.workload import plan
from tilemark.workload.compiler import compile_plan  # noqa: F401 (the module compiles plans)
from tilemark.workload.pacing import plan_fields


def write(tmp_path: Path, text: str, name: str = "job.fio") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def streams(doc: dict) -> dict[str, dict]:
    return {s["name"]: s for s in doc["stream"]}


def workload(doc: dict) -> plan.Workload:
    return plan.parse_workload({**doc, "target": "/x", "size": "64m"}, source="t")


FLOW = """\
[global]
time_based
runtime=30
direct=1
ioengine=libaio
iodepth=256
size=100g
bs=8k
filename=/tmp/testfile
flow_sleep=1000

[job2]
rw=write
flow=1

[job1]
rw=randread
flow=8
"""


def test_flow_fio_weights_share_one_group_with_flow_sleep(tmp_path):
    # HOWTO flow_id: "If not specified, it defaults to being a global flow": group 0.
    t = translate(write(tmp_path, FLOW, "flow.fio"))
    s = streams(t.doc)
    assert (s["job2"]["flow"], s["job1"]["flow"]) == ("fio0:1", "fio0:8")
    assert s["job1"]["flow_sleep"] == "1ms"  # flow_sleep=1000 (us)
    w = workload(t.doc)
    assert [plan_fields(w.streams, i) for i in range(2)] == [
        {"flow": {"group": 0, "weight": 1, "sleep_us": 1000}},
        {"flow": {"group": 0, "weight": 8, "sleep_us": 1000}},
    ]
    assert any(n.startswith("flow_id=0:") for n in t.notes)
    # fio's libaio job submits one IO per io_submit (HOWTO iodepth_batch_submit: "It defaults
    # to 1 which means that we submit each I/O as soon as it is available"); the note says
    # what a burst submitted at once changes.
    assert any(n.startswith("flow with iodepth > 1 (job2, job1)") for n in t.notes)
    # fio's usleep(flow_sleep) also sleeps the thread's timer slack (prctl(2): 50 us by
    # default); tilemark's engine threads set 1 ns. The note says so.
    assert any(n.startswith("flow_sleep:") and "timer slack" in n for n in t.notes)
    tomllib.loads(toml_text(t))  # the TOML file reads back


def test_flow_ids_make_separate_groups_and_clones_keep_their_weight(tmp_path):
    t = translate(
        write(
            tmp_path,
            "[global]\nfilename=/x\nsize=1m\nrw=randread\n"
            "[a]\nflow_id=1\nflow=3\nnumjobs=2\n[b]\nflow_id=2\nflow=1\n[c]\nflow_id=1\nflow=1\n",
        )
    )
    s = streams(t.doc)
    assert (s["a"]["flow"], s["b"]["flow"], s["c"]["flow"]) == ("fio1:3", "fio2:1", "fio1:1")
    w = workload(t.doc)
    fields = [plan_fields(w.streams, i)["flow"] for i in range(len(w.streams))]
    # a's two clones (a@0, a@1) each weigh 3, in the group of c; b alone in its own.
    assert [(f["group"], f["weight"]) for f in fields] == [(0, 3), (0, 3), (1, 1), (0, 1)]
    assert "flow_sleep" not in s["a"]
    assert any(n.startswith("flow_sleep=0:") for n in t.notes)
    assert not any(n.startswith("flow with iodepth") for n in t.notes)  # psync, depth 1


def test_flow_0_is_no_flow_and_flow_id_alone_is_a_note(tmp_path):
    # fio's flow_init_job: only `if (td->o.flow)` joins a flow.
    t = translate(write(tmp_path, "[a]\nfilename=/x\nsize=1m\nflow=0\nflow_id=3\n"))
    assert "flow" not in t.doc["stream"][0]
    assert any("runs unpaced" in n for n in t.notes)


@pytest.mark.parametrize(
    ("option", "why"),
    [
        ("flow=1001", "from 0 to 1000"),  # FLOW_MAX_WEIGHT
        ("flow=-1", "flow must be a whole number"),
        ("flow_sleep=abc", "flow_sleep"),
        ("exit_what=some", "group, stonewall or all"),
    ],
)
def test_bad_values_are_one_sentence(tmp_path, option, why):
    with pytest.raises(UsageError, match=why):
        translate(write(tmp_path, f"[a]\nfilename=/x\nsize=1m\n{option}\n"))


def test_a_rate_limited_job_with_a_flow_is_refused(tmp_path):
    with pytest.raises(UsageError, match="closed-loop streams only"):
        translate(
            write(
                tmp_path,
                "[global]\nfilename=/x\nsize=1m\n[a]\nrate_iops=100\nflow=2\n[b]\nflow=1\n",
            )
        )


def test_butterfly_reads_both_ways_in_step(tmp_path):
    t = translate(
        write(
            tmp_path,
            "[global]\nfilename=/x\nsize=1m\nbs=4k\ndirect=1\n"
            "[forward]\nrw=read\nflow=2\n[backward]\nrw=read:-8k\nflow=2\n",
            "butterfly.fio",
        )
    )
    s = streams(t.doc)
    assert s["forward"]["flow"] == s["backward"]["flow"] == "fio0:2"
    assert s["backward"]["skip"] == "-8k"


def _exitwhat(tmp_path: Path) -> dict:
    return translate(example(tmp_path, "exitwhat")).doc


def test_exitwhat_fio_maps_each_exit_what(tmp_path):
    s = streams(_exitwhat(tmp_path))
    everyone = ["slow1", "fast1", "slow2", "fast2", "runsnever"]
    # exit_what=stonewall: every running job (those waiting at the stonewall are left).
    assert s["slow1"]["on_end_stop"] == everyone
    assert s["slow1"]["on_end_only_started"] is True
    # exit_what=all: every job, started or not.
    assert s["slow2"]["on_end_stop"] == everyone
    assert "on_end_only_started" not in s["slow2"]
    # exit_what=group (the default): fast1's group is its own clones (new_group=1); slow2,
    # fast2 and runsnever share the group slow2's stonewall begins.
    assert s["fast1"]["on_end_stop"] == ["fast1"]
    assert s["fast2"]["on_end_stop"] == ["slow2", "fast2", "runsnever"]
    assert s["slow2"]["after"] == ["slow1", "fast1"]


def test_exitwhat_plan_stops_and_run_lasts_until_every_stream_ended(tmp_path):
    doc = _exitwhat(tmp_path)
    w = workload(doc)
    assert w.duration_s is None  # the fast jobs end only when stopped
    names = [st.name for st in w.streams]
    fields = {st.name: plan_fields(w.streams, i) for i, st in enumerate(w.streams)}
    # slow1's end stops the other streams, itself not, started ones only.
    assert fields["slow1"]["on_end"] == {
        "stop": [i for i, n in enumerate(names) if n != "slow1"],
        "started_only": True,
    }
    # One fast1 clone's end stops its sibling clones (fio's group holds every clone).
    assert fields["fast1@0"]["on_end"]["stop"] == [names.index("fast1@1"), names.index("fast1@2")]
    assert all(st.ends_by_itself() for st in w.streams)


def test_exitall_in_one_job_is_fios_switch_for_every_job(tmp_path):
    # options.c str_exitall_cb sets exitall_on_terminate for the whole run.
    t = translate(
        write(
            tmp_path,
            "[global]\nfilename=/x\nsize=1m\n"
            "[a]\nrw=read\n[b]\nrw=randread\nexitall\ntime_based\nruntime=1\n"
            "[c]\nstonewall\nrw=read\n[d]\nrw=randread\n",
        )
    )
    s = streams(t.doc)
    assert s["a"]["on_end_stop"] == ["a", "b"]  # a (no exitall of its own) ends its group too
    assert s["c"]["on_end_stop"] == ["c", "d"]


def test_exit_what_without_exitall_changes_nothing(tmp_path):
    t = translate(
        write(tmp_path, "[global]\nfilename=/x\nsize=1m\n[a]\nexit_what=all\n[b]\nrw=read\n")
    )
    assert not any("on_end_stop" in s for s in t.doc["stream"])
    assert any(n.startswith("exit_what: fio reads it only with exitall") for n in t.notes)


def test_exit_what_on_fixed_phases_is_refused(tmp_path):
    with pytest.raises(UsageError, match="exit_what=all is translated where jobs wait"):
        translate(
            write(
                tmp_path,
                "[global]\nfilename=/x\nsize=1m\ntime_based\nruntime=1\nexitall\n"
                "[a]\nexit_what=all\n[b]\nrw=read\n",
            )
        )


@pytest.mark.parametrize("name", ["flow", "butterfly", "exitwhat"])
def test_fios_own_examples_translate(tmp_path, name):
    outcome = examine(example(tmp_path, name))
    assert outcome.problems == []


def test_workload_keys_refuse_what_the_engine_cannot_pace():
    base = {"target": "/x", "size": "1m"}
    with pytest.raises(UsageError, match="flow paces closed-loop streams"):
        plan.parse_workload(
            {**base, "stream": [{"name": "a", "flow": "g:1", "rate": 100}]}, source="t"
        )
    with pytest.raises(UsageError, match="GROUP:WEIGHT"):
        plan.parse_workload({**base, "stream": [{"name": "a", "flow": "g:0"}]}, source="t")
    with pytest.raises(UsageError, match="not a stream of this workload"):
        plan.parse_workload({**base, "stream": [{"name": "a", "on_end_stop": "b"}]}, source="t")
    with pytest.raises(UsageError, match="needs a flow"):
        plan.parse_workload({**base, "stream": [{"name": "a", "flow_sleep": "1ms"}]}, source="t")


def test_export_writes_the_flow_and_notes_what_fio_cannot_say():
    from tilemark.fio.export import job_text

    def stream(name: str, **extra) -> dict:
        return {
            "name": name,
            "regions": [{"target": 0, "offset": 0, "length": 1 << 20}],
            "read_pct": 100,
            "random_pct": 100,
            "sizes": [[4096, 1]],
            "pattern": {"kind": "random"},
            "align": 4096,
            "qd": 4,
            "arrival": {"kind": "closed"},
            "sync": {"kind": "none"},
            "compress_pct": 0,
            "dedupe_ratio": 1,
            **extra,
        }

    plan_doc = {
        "backend": "psync",
        "duration_ms": 1000,
        "warmup_ms": 0,
        "max_errors": 0,
        "targets": [{"path": "/x", "offset": 4096, "length": 1 << 20, "direct": True}],
        "streams": [
            stream("a", flow={"group": 0, "weight": 8, "sleep_us": 1000}),
            stream("b", flow={"group": 0, "weight": 1}, on_end={"stop": [0]}),
        ],
    }
    text = job_text(plan_doc, title="t")
    assert "flow_id=0\nflow=8\nflow_sleep=1000" in text
    assert "flow=1\n" in text
    assert "b's end stopped a; fio ends other jobs only through exitall" in text
