"""fio's `stonewall` and `wait_for` after jobs whose end is not known in advance, as streams
that start when others have ended (a stream's `after`, workload/gates.py; fio commit f5344384).

fio's rules (HOWTO "stonewall, wait_for_previous": "Wait for preceding jobs in the job file to
exit, before starting this one. Can be used to insert serialization points in the job file. A
stone wall also implies starting a new reporting group"; "new_group": "Start a new reporting
group ... a job's reporting group starts with it"; "wait_for": the job starts "after the
specified job has finished"; backend.c `run_threads`):

- A stonewall job is created only when no earlier job is running or starting
  (`if (td->o.stonewall && (nr_started || nr_running)) break;`), so it waits for every job
  before it; the jobs after it (without a stonewall of their own) are created in the same
  pass, so they start with it. `waitee_running` holds a `wait_for` job until the named job
  (all its clones) has exited.
- A job that is not `time_based` ends once it has done its bytes (`size`/`io_size`, times
  `loops`), or at its `runtime`, whichever is first; one with a steady-state criterion
  (`ss`) also ends when the criterion holds for its reporting group (steadystate.c marks the
  group's jobs to terminate).
- fio looks for exited jobs every 100 ms (`do_usleep(100000)` in the loop of run_threads)
  and then creates the next jobs' threads; tilemark starts a waiting stream within 1 ms of
  the moment the last IO of the streams it waits for completed (at once when they share an
  engine thread). The note says so.

schedule.py maps phases whose start is known in advance to fixed run times; when a job waits
for one that ends by its bytes or by its steady-state criterion, the whole file is scheduled
here instead: every waiting job becomes a stream with `after` naming the streams of the jobs
it waits for, its `start` 0 and its `stop` its own ramp_time + runtime, both counted from
the moment they ended; the run lasts until every stream has ended. Each reporting group with
a steady-state criterion becomes a `[[steadystate]]` rule over its streams with
`ends = "streams"` (steady.py checks each group as it checks a last phase).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tilemark.errors import UsageError
from tilemark.fio import steady
from tilemark.fio.job import FioJob, Problem
from tilemark.fio.jobfile import Job
from tilemark.fio.schedule import Schedule, Timing

_TIMING = "timing"
POLL_NOTE = (
    "fio looks for ended jobs every 100 ms (backend.c run_threads) and then starts the next "
    "ones' threads; tilemark starts a waiting stream within 1 ms of the last IO of those it "
    "waits for (engine result `spans` has each stream's start and end), so its phases follow "
    "each other up to 0.1 s sooner than fio's"
)


@dataclass
class GatedSchedule(Schedule):
    """A Schedule whose waiting jobs start when others end: `after[i]`, the jobs job i waits
    for (empty: it starts with the run); its timing counts from that moment."""

    after: list[list[int]] = field(default_factory=list)
    groups: list[int] = field(default_factory=list)  # reporting group of every job


def _waits_on(jobs: list[FioJob], i: int) -> list[int]:
    """The jobs job i waits for before fio starts it (backend.c run_threads)."""
    waits: list[int] = []
    stonewalls = [k for k in range(1, i + 1) if jobs[k].stonewall]
    if stonewalls:
        waits = list(range(stonewalls[-1]))
    if jobs[i].wait_for:
        waits += [k for k, o in enumerate(jobs) if o.name == jobs[i].wait_for and k != i]
    return sorted(set(waits))


def _groups(jobs: list[FioJob], parsed: list[Job]) -> list[int]:
    """Reporting groups: a new one at every stonewall and new_group (HOWTO new_group)."""
    group, out = 0, []
    for i, section in enumerate(parsed):
        new = section.get("new_group")
        if i > 0 and (jobs[i].stonewall or (new is not None and (new.value or "1") != "0")):
            group += 1
        out.append(group)
    return out


def _judged(parsed: list[Job], jobs: list[FioJob]) -> set[int]:
    """Jobs with a steady-state criterion (ss_dur above 0); malformed ones are left to
    steady.py, which refuses them."""
    out = set()
    for i, section in enumerate(parsed):
        try:
            if steady.read(section, jobs[i].kb_base) is not None:
                out.add(i)
        except UsageError:
            pass
    return out


def _ends_by_bytes(job: FioJob) -> bool:
    return not job.time_based and job.runtime_us is None


def reschedule(jobs: list[FioJob], parsed: list[Job], plan: Schedule) -> Schedule:
    """`plan`, or a GatedSchedule when a job waits for one that ends by its bytes or by its
    steady-state criterion (which fixed run times cannot say)."""
    judged = _judged(parsed, jobs)
    waits = [_waits_on(jobs, i) for i in range(len(jobs))]
    waited = {k for w in waits for k in w}
    if not any(_ends_by_bytes(jobs[k]) or k in judged for k in waited):
        return plan
    return _gated(jobs, parsed, waits, judged)


def _gated(
    jobs: list[FioJob], parsed: list[Job], waits: list[list[int]], judged: set[int]
) -> GatedSchedule:
    out = GatedSchedule(timings=[Timing() for _ in jobs], after=waits)
    out.groups = _groups(jobs, parsed)
    first = [i for i in range(len(jobs)) if not waits[i]]
    for i, job in enumerate(jobs):
        if job.wait_for and not any(o.name == job.wait_for for o in jobs if o is not job):
            out.problems.append(_problem(job.wait_for_opt, f"no job is named {job.wait_for}"))
        if job.startdelay_us:
            out.problems.append(
                _problem(
                    job.startdelay_opt,
                    "with stonewall or wait_for in the file fio's start order of delayed jobs "
                    "depends on which jobs are still running, which tilemark cannot know",
                )
            )
        if waits[i] and job.ramp_us:
            out.problems.append(
                _problem(
                    job.ramp_opt,
                    "fio ramps every job at its own start, and tilemark has one warm-up at the "
                    "start of the run, so a job that waits for others cannot have a ramp_time",
                )
            )
        for k in waits[i]:
            other = jobs[k]
            if other.time_based and other.runtime_us is None and k not in judged:
                out.problems.append(
                    _problem(
                        job.stonewall_opt or job.wait_for_opt,
                        f"job {other.name} runs until it is stopped (time_based without "
                        "runtime), so fio never starts this one",
                    )
                )
                break
        if out.problems:
            return out
    ramps = {jobs[i].ramp_us for i in first}
    if len(ramps) > 1:
        job = next(jobs[i] for i in first if jobs[i].ramp_us)
        out.problems.append(
            _problem(
                job.ramp_opt,
                "fio ramps every job at its own start, and tilemark has one warm-up at the "
                "start of the run for every stream, so the jobs that start at once must have "
                "the same ramp_time",
            )
        )
        return out
    out.warmup_s = (ramps.pop() if ramps else 0) / 1e6
    for i, job in enumerate(jobs):
        timing = out.timings[i]
        if job.runtime_us is not None:
            timing.stop_s = (job.ramp_us + job.runtime_us) / 1e6
        timing.exact = job.time_based
    out.duration_s = None
    names = lambda ks: ", ".join(jobs[k].name for k in ks)  # noqa: E731
    for i, job in enumerate(jobs):
        if waits[i] and (i == 0 or waits[i] != waits[i - 1]):
            how = "stonewall" if job.stonewall else f"wait_for={job.wait_for}"
            many = len(waits[i]) > 1
            out.notes.append(
                f"{how}: fio starts job {job.name} when job{'s' if many else ''} "
                f"{names(waits[i])} ha{'ve' if many else 's'} ended, and so does tilemark "
                "(the stream's after), its start and stop counted from then"
            )
    out.notes.append(POLL_NOTE)
    return out


def rules(
    jobs: list[FioJob],
    parsed: list[Job],
    clone_names: list[list[str]],
    plan: GatedSchedule,
    doc: dict[str, Any],
    notes: list[str],
) -> list[Problem]:
    """One `[[steadystate]]` rule per reporting group with a steady-state criterion, ending
    only that group's streams; each group checked by steady.py as a run's only group."""
    tables = []
    for group in sorted(set(plan.groups)):
        members = [i for i, g in enumerate(plan.groups) if g == group]
        sub_doc: dict[str, Any] = {}
        sub_notes: list[str] = []
        sub_plan = Schedule(timings=[Timing() for _ in members])
        problems = steady.steadystate(
            [jobs[i] for i in members],
            [parsed[i] for i in members],
            [clone_names[i] for i in members],
            sub_plan,
            sub_doc,
            sub_notes,
        )
        if problems:
            return problems
        notes += [n for n in sub_notes if not n.startswith("ss=")]
        table = sub_doc.get("steadystate")
        if table is None:
            continue
        table["streams"] = [n for i in members for n in clone_names[i]]
        table["ends"] = "streams"
        tables.append(table)
        who = ", ".join(jobs[i].name for i in members)
        notes.append(
            f"ss={table['criterion']}:{table['limit']}: fio ends the reporting group of "
            f"{who} when its steady-state criterion holds over ss_dur, and the jobs waiting "
            "for it start; the workload's [[steadystate]] rule over its streams with ends = "
            '"streams" stops them and starts the streams after them (summary.fio_steady_'
            "state.groups says whether and when); samples are tilemark's snapshot intervals, "
            "the first whole one from ss_ramp after the streams started"
        )
    if tables:
        doc["steadystate"] = tables
    return []


def name_after(
    streams: list[dict[str, Any]],
    jobs: list[FioJob],
    plan: GatedSchedule,
    clone_names: list[list[str]],
    notes: list[str],
) -> None:
    """Each waiting job's streams name the streams they wait for (`after`)."""
    by_name = {name: i for i, names in enumerate(clone_names) for name in names}
    for table in streams:
        i = by_name.get(table["name"])
        if i is None or not plan.after[i]:
            continue
        table["after"] = [n for k in plan.after[i] for n in clone_names[k]]
    bytes_note = "the run lasts until every stream has done its bytes"
    notes[:] = [n for n in notes if not n.startswith(bytes_note)]
    notes.append(
        "the run lasts until every stream has ended, as fio's jobs: by its bytes, its "
        "runtime or its steady-state criterion"
    )


def _problem(opt: Any, why: str, key: str = "stonewall") -> Problem:
    if opt is None or isinstance(opt, str):
        return Problem(key, opt or "job file", why, _TIMING)
    return Problem(opt.key, opt.where, why, _TIMING)


def export_lines(
    stream: dict[str, Any], streams: list[dict[str, Any]], notes: list[str]
) -> list[str]:
    """A plan stream with `after` as fio options (`export --fio`): `stonewall` when it waits
    for every stream before it, `wait_for` when for one; notes for what fio cannot say."""
    index = next(i for i, s in enumerate(streams) if s is stream)
    after = sorted(stream["after"])
    name = stream["name"]
    lines = []
    if after == list(range(index)):
        lines.append("stonewall")
    elif len(after) == 1:
        lines.append(f"wait_for={streams[after[0]]['name']}")
    else:
        notes.append(
            f"{name} started when streams {', '.join(streams[k]['name'] for k in after)} had "
            "ended; fio waits for every job before it (stonewall) or one job (wait_for), so "
            "the exported job starts with the run"
        )
    if stream.get("start_ms"):
        notes.append(
            f"{name} started {stream['start_ms']} ms after the streams it waited for ended; "
            "fio's startdelay counts from fio's start, so none is written"
        )
    return lines
