"""fio's stonewall, wait_for and new_group after jobs that end by their bytes or by their
steady-state criterion: streams that start when others have ended (`after`), and
`[[steadystate]]` rules that end only their streams (fio/gates.py, workload/gates.py).

fio's rules, quoted from its HOWTO (fio commit f5344384):
- stonewall, wait_for_previous: "Wait for preceding jobs in the job file to exit, before
  starting this one. Can be used to insert serialization points in the job file. A stone wall
  also implies starting a new reporting group, see group_reporting."
- new_group: "Start a new reporting group. [...] a job's reporting group starts with it".
- wait_for: "If set, the current job won't be started until all workers of the specified
  waitee job are done."
- size: "fio will divide this size between the available files [...] and run until this
  much I/O has been done"; time_based: run for the whole runtime "even if the file(s) are
  completely read or written".
- steadystate: "Define the criterion and limit for assessing steady state performance",
  and with group_reporting "this will apply to all jobs in the group".
backend.c run_threads: a stonewall job is created only once no earlier job is started or
running (`if (td->o.stonewall && (nr_started || nr_running)) break;`), the jobs after it in
the same pass; the loop looks again every 100 ms (`do_usleep(100000)`).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tilemark.errors import UsageError
from tilemark.fio import toml_text, translate
from tilemark.run.fio_groups import FioGroupsMonitor
from tilemark.workload import plan
from tilemark.workload.gates import gate_indices

SSD_STEADYSTATE = """\
[global]
ioengine=libaio
direct=1
group_reporting
filename=/dev/fioa

[sequential-fill]
description=Sequential fill phase
rw=write
iodepth=16
bs=1M

[random-write-steady]
stonewall
description=Random write steady state phase
rw=randwrite
bs=4K
iodepth=32
numjobs=4
write_bw_log=fioa-steady-state
"""

STEADYSTATE = """\
[global]
threads=1
group_reporting
time_based
size=128m

[ss-write]
filename=/dev/null
rw=write
bs=128k
numjobs=4
runtime=5m
ss=iops:10%
ss_dur=30s
ss_ramp=10s

[ss-read]
new_group
stonewall
filename=/dev/zero
rw=randread
bs=4k
numjobs=4
runtime=5m
ss=bw_slope:1%
ss_dur=10s
ss_ramp=5s
"""


def write(tmp_path: Path, text: str, name: str = "job.fio") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_ssd_steadystate_fills_once_then_writes_randomly_when_the_fill_has_ended(tmp_path):
    t = translate(write(tmp_path, SSD_STEADYSTATE, "ssd-steadystate.fio"))
    fill, steady = t.doc["stream"]
    # No size: the whole device, once (not time_based): fill ends by its bytes.
    assert (fill["rw"], fill["bs"], fill["qd"], fill["passes"]) == ("write", "1m", 16, 1)
    assert "after" not in fill and "stop" not in fill
    # stonewall: the four random writers start when the fill has ended, each one pass.
    assert steady["after"] == ["sequential-fill"]
    assert (steady["rw"], steady["bs"], steady["qd"], steady["copies"]) == (
        "randwrite",
        "4k",
        32,
        4,
    )
    assert steady["passes"] == 1 and "start" not in steady
    assert "duration" not in t.doc  # until every stream has ended
    assert any("fio starts job random-write-steady when job sequential-fill" in n for n in t.notes)
    assert any("every 100 ms (backend.c run_threads)" in n for n in t.notes)
    w = plan.parse_workload({**t.doc, "target": "/x"}, source="t")
    assert w.duration_s is None and w.streams[1].after == ["sequential-fill"]


def test_steadystate_example_ends_each_group_on_its_criterion(tmp_path):
    t = translate(write(tmp_path, STEADYSTATE, "steadystate.fio"))
    ss_write, ss_read = t.doc["stream"]
    assert ss_read["after"] == ["ss-write"] and "after" not in ss_write
    # time_based runtime=5m: each group stops 300 s after its own start, or on its criterion.
    assert ss_write["stop"] == ss_read["stop"] == "300s"
    assert ss_write["copies"] == ss_read["copies"] == 4
    assert t.doc["steadystate"] == [
        {
            "criterion": "iops",
            "limit": "10%",
            "window": "30s",
            "sample": "1s",
            "ramp": "10s",
            "streams": ["ss-write"],
            "ends": "streams",
        },
        {
            "criterion": "bw_slope",
            "limit": "1%",
            "window": "10s",
            "sample": "1s",
            "ramp": "5s",
            "streams": ["ss-read"],
            "ends": "streams",
        },
    ]
    # The TOML the user gets reads back to the same workload.
    doc = tomllib.loads(toml_text(t))
    assert doc["steadystate"] == t.doc["steadystate"]
    w = plan.parse_workload(doc, source="t")
    assert w.steadystate is None and len(w.stream_rules) == 2
    assert w.duration_s is None


def test_jobs_after_a_stonewall_job_start_with_it_and_wait_for_names_one_job(tmp_path):
    # backend.c: the jobs after a stonewall job are created in the same pass (they wait for
    # what it waits for); wait_for waits for the named job only.
    t = translate(
        write(
            tmp_path,
            "[global]\nfilename=/x\nsize=1m\n[a]\nrw=write\n[b]\nrw=read\n"
            "[c]\nstonewall\nrw=randread\n[d]\nrw=randwrite\n[e]\nwait_for=c\nrw=read\n",
        )
    )
    after = {s["name"]: s.get("after") for s in t.doc["stream"]}
    assert after == {"a": None, "b": None, "c": ["a", "b"], "d": ["a", "b"], "e": ["a", "b", "c"]}


def test_phases_after_jobs_with_a_known_end_keep_their_run_times(tmp_path):
    # time_based with runtime: the end is known, so the phase starts at a fixed time as before.
    t = translate(
        write(tmp_path, "[global]\nfilename=/x\ntime_based\nruntime=5\n[a]\n[b]\nstonewall\n")
    )
    assert [(s.get("start"), s.get("after")) for s in t.doc["stream"]] == [
        (None, None),
        ("5s", None),
    ]


@pytest.mark.parametrize(
    "text, words",
    [
        # fio ramps each job at its own start; tilemark has one warm-up, at the run's start.
        ("[a]\n[b]\nstonewall\nramp_time=2\n", "cannot have a ramp_time"),
        # A job that never ends (time_based, no runtime, no criterion): fio never starts b.
        ("[a]\ntime_based\n[b]\nstonewall\n[c]\nstonewall\n", "runs until it is stopped"),
        ("[a]\n[b]\nwait_for=zz\n", "no job is named zz"),
    ],
)
def test_what_gates_cannot_say_is_refused_with_the_reason(tmp_path, text, words):
    with pytest.raises(UsageError, match=words):
        translate(write(tmp_path, "[global]\nfilename=/x\nsize=1m\n" + text))


def workload(streams: str, extra: str = "") -> plan.Workload:
    return plan.parse_workload(
        tomllib.loads('target = "/x"\nsize = "4m"\n' + extra + streams), source="w.toml"
    )


FILL = '[[stream]]\nname = "fill"\nrw = "write"\npasses = 1\ncopies = 2\n'


def test_after_names_earlier_streams_that_end_and_covers_their_copies():
    w = workload(FILL + '[[stream]]\nname = "r"\nrw = "randread"\nafter = "fill"\nstop = "2s"\n')
    assert w.duration_s is None  # when the gated phase ends is not known in advance
    assert [s.name for s in w.streams] == ["fill@0", "fill@1", "r"]
    # The plan's after (compiler.py): the indices of every copy of the named stream.
    assert gate_indices(w.streams, 2) == [0, 1]
    assert gate_indices(w.streams, 0) == []


@pytest.mark.parametrize(
    "streams, words",
    [
        ('[[stream]]\nname = "r"\nrw = "read"\nafter = "zz"\n', "not a stream of this workload"),
        (
            '[[stream]]\nname = "r"\nrw = "read"\nafter = "w"\npasses = 1\n'
            '[[stream]]\nname = "w"\nrw = "write"\npasses = 1\n',
            "not defined before it",
        ),
        (
            '[[stream]]\nname = "w"\nrw = "write"\n[[stream]]\nname = "r"\nrw = "read"\n'
            'after = "w"\n',
            "never ends",
        ),
        ('[[stream]]\nname = "r"\nrw = "read"\nafter = ["a", "a"]\n', "names stream 'a' twice"),
    ],
)
def test_after_that_could_never_open_is_refused(streams, words):
    with pytest.raises(UsageError, match=words):
        workload(streams)


def test_a_rule_that_ends_streams_lets_a_stream_wait_for_an_endless_one():
    rule = (
        '[[steadystate]]\ncriterion = "iops"\nlimit = "10%"\nwindow = "3s"\nstreams = ["w"]\n'
        'ends = "streams"\n'
    )
    w = workload(
        '[[stream]]\nname = "w"\nrw = "write"\n[[stream]]\nname = "r"\nrw = "read"\n'
        'after = "w"\nstop = "1s"\n',
        rule,
    )
    assert w.duration_s is None and w.stream_rules[0].ends == "streams"
    m = FioGroupsMonitor.for_workload(w)
    # Samples begin once the judged stream has started (engine spans), after the ramp.
    m.see_spans([{"started_ns": None, "ended_ns": None}] * 2)
    assert m.monitors[0].begin_s == float("inf")
    m.see_spans([{"started_ns": 2_000_000_000, "ended_ns": None}, {}])
    assert m.monitors[0].begin_s == 2.0
    snaps = [
        {
            "start_ns": k * 10**9,
            "end_ns": (k + 1) * 10**9,
            "streams": [{"stream": 0, "write": {"ops": 100, "bytes": 409600}}],
        }
        for k in range(6)
    ]
    m.add(snaps)
    assert m.streams_to_stop() == [[0]]  # met at 5 s: stop w, whose end starts r
    assert m.streams_to_stop() == []  # once
    assert m.should_stop() is None  # the run goes on


def test_two_rules_may_not_both_end_the_run_or_judge_one_stream():
    base = '[[stream]]\nname = "w"\nrw = "write"\nstop = "5s"\n'
    rule = '[[steadystate]]\ncriterion = "iops"\nlimit = "10%"\nwindow = "3s"\n'
    with pytest.raises(UsageError, match="at most one rule may end the run"):
        workload(base, rule + rule)
    with pytest.raises(UsageError, match="judged by two rules"):
        workload(base, (rule + 'ends = "streams"\n') * 2)


def _plan_stream(name: str, **extra: object) -> dict:
    stream = {
        "name": name,
        "regions": [{"target": 0, "offset": 0, "length": 1 << 20}],
        "read_pct": 100,
        "sizes": [[4096, 1]],
        "pattern": {"kind": "random"},
        "random_pct": 100,
        "align": 4096,
        "qd": 1,
        "arrival": {"kind": "closed"},
        "burst": None,
        "sync": {"kind": "none"},
        "compress_pct": 0,
        "seed": 1,
    }
    return {**stream, **extra}


def test_export_writes_a_gate_as_stonewall_or_wait_for():
    from tilemark.fio.export import job_text

    plan_doc = {
        "backend": "null",
        "warmup_ms": 0,
        "duration_ms": None,
        "targets": [{"name": "t", "path": "/x", "offset": 4096, "length": 1 << 20, "direct": True}],
        "streams": [
            _plan_stream("a", io_limit=1 << 20),
            _plan_stream("b", io_limit=1 << 20),
            _plan_stream("c", after=[0, 1], stop_ms=300),  # every stream before: stonewall
            _plan_stream("d", after=[2], stop_ms=300),  # one: wait_for
            _plan_stream("e", after=[0, 2], start_ms=5, stop_ms=300),  # neither: a note
        ],
    }
    text = job_text(plan_doc, title="t")
    sections = {s.split("]")[0]: s for s in text.split("\n[")[1:]}
    assert "stonewall" in sections["c"] and "runtime=300ms" in sections["c"]
    assert "wait_for=c" in sections["d"]
    assert "stonewall" not in sections["e"] and "startdelay" not in sections["e"]
    assert "e started when streams a, c had ended" in text
    assert "fio's startdelay counts from fio's start" in text


def test_the_report_and_live_view_place_a_gated_phase_where_the_engine_started_it(tmp_path):
    from tilemark.report.data import RunData
    from tilemark.report.run_report import phase_marks
    from tilemark.run.live import phase_text

    fill = {"name": "fill", "start_ms": None, "stop_ms": None}
    read = {"name": "read", "start_ms": None, "stop_ms": 300, "after": [0]}
    run = RunData(  # a stored run's document, read as reports read it (typed plan)
        tmp_path,
        {
            "plan": {"streams": [fill, read]},
            "result": {
                "spans": [
                    {"started_ns": 0, "ended_ns": 250_000_000},
                    {"started_ns": 250_100_000, "ended_ns": 550_100_000},
                ]
            },
        },
    )
    # The plan's stop (300 ms) counts from the gate; the marks are the engine's times.
    assert phase_marks(run) == [
        {"t_s": 0.2501, "label": "read starts"},
        {"t_s": 0.5501, "label": "read stops"},
    ]
    assert phase_text(read) == "after others end" and phase_text(fill) == ""


def test_per_interval_qos_of_a_gated_stream_covers_the_time_the_engine_ran_it():
    from tilemark.analysis.qos import phase_span

    plan_doc = {"streams": [{"stop_ms": 2000}, {"stop_ms": 300, "after": [0]}]}
    spans = [
        {"started_ns": 0, "ended_ns": 2_000_000_000},
        {"started_ns": 2_000_100_000, "ended_ns": 2_300_100_000},
    ]
    assert phase_span(plan_doc, [1], spans) == (2_000_100_000, 2_300_100_000)
    assert phase_span(plan_doc, [0], spans) == (0, 2_000_000_000)  # as before
