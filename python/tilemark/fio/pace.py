"""fio's jobs that pace or end each other: token-based flow control (`flow`, `flow_id`,
`flow_sleep`) and `exitall` with `exit_what`, as the streams' `flow` and `on_end_stop`
(workload/pacing.py; fio commit f5344384).

fio's rules:

- HOWTO "flow": "Weight in token-based flow control. If this value is used, then fio
  regulates the activity between two or more jobs sharing the same flow_id. Fio attempts to
  keep each job activity proportional to other jobs' activities in the same flow_id group,
  with respect to requested weight per job." flow.c: before each IO a job compares its IO
  count's share of the group's count with its weight's share of the group's weights; when
  above, it waits for its IOs in flight (io_u_quiesce) and sleeps `flow_sleep` us ("flow_sleep":
  "The period of time, in microseconds, to wait after the flow counter has exceeded its
  proportion before retrying operations"), or with flow_sleep 0 retries at once. `flow_id`
  defaults to 0 ("a global flow"); `flow` is 0 (off) to 1000 (FLOW_MAX_WEIGHT). Every clone
  (numjobs) is a job of its own with the weight. The engine does exactly this (flow.rs).
- HOWTO "exitall": "terminate all jobs in the same group, as soon as one job of that group
  finishes"; "exit_what": "group" (the default), "all terminates all jobs", "stonewall
  terminates all currently running jobs across all groups and continues execution with the
  next stonewalled group". `exitall` is one switch for the whole run (options.c
  str_exitall_cb sets `exitall_on_terminate`), so every job, when it exits (backend.c
  thread_main end), calls fio_terminate_threads(its group, its exit_what); libfio.c: group
  marks every job of the group, stonewall every job whose runstate is at least TD_RUNNING
  (those not started are left), all every job (those not started never run). A terminated
  job exits too, and so terminates per its own exit_what. Reporting groups begin at
  stonewall and new_group (HOWTO "new_group", init.c groupid).

Where jobs follow each other as they end (fio/gates.py), every stream gets the streams its
end stops; where the jobs' phases are fixed run times (fio/schedule.py), exitall with the
default exit_what=group is scheduled there as before, and another exit_what is refused.
"""

from __future__ import annotations

from typing import Any

from tilemark.fio import gates
from tilemark.fio.job import FioJob, Problem
from tilemark.fio.jobfile import Job
from tilemark.fio.paceopts import EXIT_WHATS

_GROUP = "jobs that pace each other"
# Jobs on fio's sync engines next to jobs on libaio/io_uring (exitwhat.fio): tilemark's
# backend is one for the run, and io_uring at depth 1 issues one IO at a time, as they do.
MIXED_ENGINES_NOTE = (
    "jobs on fio's sync engines and on libaio/io_uring in one file: tilemark's backend is one "
    "for the run, so all run on io_uring; a sync job's stream keeps depth 1 (one IO at a "
    "time, the next issued when the last completed, as fio's pread/pwrite), submitted "
    "through the ring rather than by a system call per IO"
)


def apply(
    jobs: list[FioJob],
    parsed: list[Job],
    plan: Any,
    streams: list[dict[str, Any]],
    clone_names: list[list[str]],
    notes: list[str],
) -> list[Problem]:
    """Each job's streams get `flow`/`flow_sleep` and, under exitall, `on_end_stop`."""
    by_name = {name: i for i, names in enumerate(clone_names) for name in names}
    if MIXED_ENGINES_NOTE in notes:  # the sync jobs' psync note no longer holds
        for job in jobs:
            job.notes = [n for n in job.notes if "runs on tilemark's psync backend" not in n]
    problems = _flows(jobs, streams, by_name, notes)
    if any(job.exitall for job in jobs):
        problems += _exits(jobs, parsed, plan, streams, clone_names, by_name, notes)
    elif any("exit_what" in job.pace for job in jobs):
        notes.append(
            "exit_what: fio reads it only with exitall, which no job sets, so nothing ends "
            "other jobs, here neither"
        )
    return problems


def _flows(
    jobs: list[FioJob], streams: list[dict[str, Any]], by_name: dict[str, int], notes: list[str]
) -> list[Problem]:
    weighted = [i for i, job in enumerate(jobs) if job.pace.get("flow")]
    for i, job in enumerate(jobs):
        if i not in weighted and ("flow_id" in job.pace or job.pace.get("flow_sleep")):
            notes.append(
                f"flow_id/flow_sleep of job {job.name}: fio paces a job only with a flow weight "
                "above 0, which it has not, so it runs unpaced, here too"
            )
    if not weighted:
        return []
    for table in streams:
        i = by_name.get(table["name"])
        if i is None or i not in weighted:
            continue
        job = jobs[i]
        if "rate" in table or "rate_bytes" in table:
            opt = job.pace["flow_opt"]
            return [
                Problem(
                    opt.key,
                    opt.where,
                    "fio paces a rate-limited job by its flow as well; tilemark's flow paces "
                    "closed-loop streams only",
                    _GROUP,
                )
            ]
        table["flow"] = f"fio{job.pace.get('flow_id', 0)}:{job.pace['flow']}"
        if job.pace.get("flow_sleep"):
            table["flow_sleep"] = f"{job.pace['flow_sleep'] / 1000:g}ms"
    groups: dict[int, list[str]] = {}
    for i in weighted:
        groups.setdefault(jobs[i].pace.get("flow_id", 0), []).append(
            f"{jobs[i].name} {jobs[i].pace['flow']}"
        )
    for flow_id, members in sorted(groups.items()):
        notes.append(
            f"flow_id={flow_id}: fio keeps the IOs its jobs issue in the ratio of their flow "
            f"weights ({', '.join(members)}; each numjobs clone with its weight), and so does "
            "tilemark (the streams' flow, one shared count per group over every engine thread)"
        )
    queued = [jobs[i].name for i in weighted if jobs[i].iodepth > 1]
    if queued and not all(jobs[i].sync_engine() for i in weighted):
        # Measured on flow.fio (docs/fio.md, "The eight examples added last").
        notes.append(
            f"flow with iodepth > 1 ({', '.join(queued)}): fio (at its default "
            "iodepth_batch_submit=1) counts and submits a job's IOs one at a time, one system "
            "call each, tilemark a stream's admitted IOs at once, in one io_uring submission; "
            "the ratio is the same, but the "
            "other jobs of the group find room sooner, so their IOs meet at the device more "
            "often (flow.fio's writer: p50 142 us against fio's 106 on a disk)"
        )
    sleeps = {jobs[i].pace.get("flow_sleep", 0) for i in weighted}
    if 0 in sleeps:
        notes.append(
            "flow_sleep=0: a job ahead of its share retries at once (fio spins on its CPU); "
            "tilemark looks again at its engine thread's next loop turn, then, while still "
            "ahead, after 1, 2, 4 ... up to 128 us, so that its thread sleeps and leaves the "
            "CPU to the other streams' threads (crates/engine/src/flow.rs)"
        )
    if sleeps - {0}:
        notes.append(
            "flow_sleep: a job ahead of its share waits for its IOs in flight and then sleeps "
            "flow_sleep (fio's io_u_quiesce and usleep), here too, the stream's engine thread "
            "serving its other streams meanwhile; fio's usleep sleeps longer than asked by its "
            "thread's timer slack (50 us by default) and wake-up (flow_sleep=10 slept 114 us at "
            "the median on the development VM), tilemark's engine threads (1 ns of slack) about "
            "flow_sleep, so with a flow_sleep of tens of us a held stream looks again sooner "
            "than fio's job (docs/fio.md: butterfly.fio with flow_sleep=10)"
        )
    return []


def _exits(
    jobs: list[FioJob],
    parsed: list[Job],
    plan: Any,
    streams: list[dict[str, Any]],
    clone_names: list[list[str]],
    by_name: dict[str, int],
    notes: list[str],
) -> list[Problem]:
    modes = [job.pace.get("exit_what", "group") for job in jobs]
    if not isinstance(plan, gates.GatedSchedule):
        if any(m != "group" for m in modes):
            i = next(k for k, m in enumerate(modes) if m != "group")
            return [
                Problem(
                    "exit_what",
                    jobs[i].where,
                    f"exit_what={modes[i]} is translated where jobs wait for others to end "
                    "(stonewall after jobs that end by their bytes); here the jobs' phases are "
                    "fixed run times, where tilemark ends exitall's group only",
                    _GROUP,
                )
            ]
        return []  # schedule.py cut the group's phases at the first end
    groups = gates._groups(jobs, parsed)
    everyone = [name for names in clone_names for name in names]
    for table in streams:
        i = by_name.get(table["name"])
        if i is None:
            continue
        if modes[i] == "group":
            stop = [
                n for k, names in enumerate(clone_names) if groups[k] == groups[i] for n in names
            ]
        else:
            stop = everyone
        # Its own name stays: it covers its copies (numjobs clones), which fio's group ends too.
        table["on_end_stop"] = stop
        if modes[i] == "stonewall":
            table["on_end_only_started"] = True
    for mode in sorted(set(modes), key=EXIT_WHATS.index):
        who = ", ".join(job.name for job, m in zip(jobs, modes, strict=True) if m == mode)
        what = {
            "group": "the jobs of its reporting group (stonewall and new_group begin one)",
            "stonewall": "every job running by then (jobs still waiting for a stonewall start "
            "later)",
            "all": "every job, those not started yet included (they never start)",
        }[mode]
        notes.append(
            f"exitall with exit_what={mode}: when job {who} ends, fio ends {what}; so does "
            "tilemark (the stream's on_end_stop; the stopped streams' own ends stop others in "
            "turn, as fio's terminated jobs do), each stopped stream issuing nothing more and "
            "ending when its IOs in flight completed (result spans[].stopped)"
        )
    return []


def export_lines(
    stream: dict[str, Any], streams: list[dict[str, Any]], notes: list[str]
) -> list[str]:
    """A plan stream's `flow` as fio's options (`export --fio`, exact); its `on_end` as a note:
    fio can end other jobs only through exitall, one switch for every job."""
    lines = []
    flow = stream.get("flow")
    if flow:
        lines += [f"flow_id={flow['group']}", f"flow={flow['weight']}"]
        if flow.get("sleep_us"):
            lines.append(f"flow_sleep={flow['sleep_us']}")
    on_end = stream.get("on_end")
    if on_end:
        names = ", ".join(streams[k]["name"] for k in on_end["stop"])
        notes.append(
            f"{stream['name']}'s end stopped {names}"
            + (" (those started by then)" if on_end.get("started_only") else "")
            + "; fio ends other jobs only through exitall, for every job at once, so the "
            "exported jobs run to their own end"
        )
    return lines
