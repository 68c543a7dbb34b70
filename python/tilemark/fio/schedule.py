"""When each fio job runs, as tilemark phases (streams' `start` and `stop`).

fio's rules (HOWTO "Time related parameters", "stonewall", "wait_for", "exitall"; backend.c
`run_threads` and `runtime_exceeded` at fio commit f5344384):

- A job runs `ramp_time` and then `runtime` (the ramp is "lead in time": it adds to the
  runtime). With `time_based` it runs exactly that long; without, it also ends once it has
  done its bytes (`size`, `io_size`, `loops`), whichever comes first, so its end is known
  only as an upper bound, or not at all when it has no runtime.
- `startdelay` delays a job from the start of fio.
- `stonewall` starts a job (and the jobs after it) only when every job before it has ended;
  `wait_for=NAME` starts it when job NAME (all its clones) has ended.
- `exitall` ends every job of the job's reporting group when that job ends (reporting groups
  begin at `stonewall` and `new_group`).

tilemark starts and stops streams at run times fixed in advance, with one warm-up at the
start of the run. So a phase maps exactly when the jobs before it end at a known time, and
within the upper bound of a runtime with a note saying what differs; a job that must wait for
bytes to be done cannot be scheduled and is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilemark.fio.job import FioJob, Problem
from tilemark.fio.jobfile import Option

_TIMING = "timing"


@dataclass
class Timing:
    """A job's place in the run (seconds of run time, warm-up included)."""

    start_s: float = 0.0
    stop_s: float | None = None  # None: runs until done (bytes) or the run's end
    exact: bool = True  # False: stop_s is an upper bound (runtime without time_based)


@dataclass
class Schedule:
    """Every job's timing, the run's warm-up and duration (None: until every stream is
    done), notes, and what could not be scheduled."""

    timings: list[Timing]
    warmup_s: float = 0.0
    duration_s: float | None = None
    forever: bool = False  # time_based without runtime: fio runs until it is stopped
    notes: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def _length_us(job: FioJob) -> tuple[int | None, bool]:
    """How long the job runs (ramp included) and whether that is exact; None: unknown (it
    ends by its bytes) or forever (time_based without runtime)."""
    if job.runtime_us is None:
        return None, job.time_based
    return job.ramp_us + job.runtime_us, job.time_based


def schedule(jobs: list[FioJob], new_groups: list[bool]) -> Schedule:
    """The phases of `jobs` (in file order); `new_groups[i]`: job i starts a reporting group
    (new_group), which matters for exitall."""
    out = Schedule(timings=[Timing() for _ in jobs])
    start_us = [0] * len(jobs)
    end_us: list[int | None] = [None] * len(jobs)
    exact = [True] * len(jobs)
    forever = [False] * len(jobs)
    phased = any(j.stonewall or j.wait_for for j in jobs[1:]) or bool(jobs[0].wait_for)
    for i, job in enumerate(jobs):
        waits_on: list[int] = []
        if job.stonewall and i > 0:
            waits_on = list(range(i))
        elif i > 0 and any(jobs[k].stonewall for k in range(1, i + 1)):
            # Jobs after a stonewall job start with it: after every job before it.
            first = max(k for k in range(1, i + 1) if jobs[k].stonewall)
            waits_on = list(range(first))
        if job.wait_for:
            named = [k for k, other in enumerate(jobs) if other.name == job.wait_for and k != i]
            if not named:
                out.problems.append(_problem(job.wait_for_opt, f"no job is named {job.wait_for}"))
                continue
            waits_on += named
        if job.startdelay_us and phased:
            out.problems.append(
                _problem(
                    job.startdelay_opt,
                    "with stonewall or wait_for in the file fio's start order of delayed jobs "
                    "depends on which jobs are still running, which tilemark cannot know",
                )
            )
            continue
        begin = job.startdelay_us
        for k in sorted(set(waits_on)):
            if forever[k]:
                out.problems.append(
                    _problem(
                        job.stonewall_opt or job.wait_for_opt,
                        f"job {jobs[k].name} runs until it is stopped (time_based without "
                        "runtime), so fio never starts this one",
                    )
                )
                break
            if end_us[k] is None:
                out.problems.append(
                    _problem(
                        job.stonewall_opt or job.wait_for_opt,
                        f"fio starts this job when job {jobs[k].name} has done its bytes, a "
                        "time tilemark cannot know in advance (it starts a phase at a run time "
                        "fixed before the run; no phase ends on its streams' bytes); give the "
                        "jobs before it time_based and runtime",
                    )
                )
                break
            begin = max(begin, end_us[k])
            exact[i] = exact[i] and exact[k]
        else:
            length, is_exact = _length_us(job)
            start_us[i] = begin
            if length is None:
                forever[i] = job.time_based
            else:
                end_us[i] = begin + length
                exact[i] = exact[i] and is_exact
    if out.problems:
        return out
    _exitall(jobs, new_groups, start_us, end_us, out)
    if out.problems:
        return out
    _warmup(jobs, start_us, out)
    if out.problems:
        return out
    for i in range(len(jobs)):
        timing = out.timings[i]
        timing.start_s = start_us[i] / 1e6
        timing.stop_s = None if end_us[i] is None else end_us[i] / 1e6
        timing.exact = exact[i]
    if any(forever):
        if not all(forever):
            job = jobs[forever.index(True)]
            out.problems.append(
                _problem(
                    job.runtime_opt or job.where,
                    key="time_based",
                    why=f"job {job.name} is time_based without a runtime, so fio runs it until it "
                    "is stopped, while other jobs end by themselves; give it a runtime",
                )
            )
            return out
        out.forever = True
        out.notes.append(
            "time_based without runtime: fio runs until it is stopped; tilemark runs for "
            "--duration (default 60s)"
        )
        return out
    if all(end is not None for end in end_us):
        out.duration_s = max(end_us) / 1e6 - out.warmup_s  # type: ignore[type-var]
    bounded = [
        (job.name, end_us[i])
        for i, job in enumerate(jobs)
        if not exact[i]
        and end_us[i] is not None
        and any(start_us[k] >= end_us[i] for k in range(len(jobs)))  # type: ignore[operator]
    ]
    if bounded:
        names = ", ".join(name for name, _ in bounded)
        times = ", ".join(f"{end / 1e6:g} s" for _, end in bounded)  # type: ignore[operator]
        out.notes.append(
            f"job {names} ends after its runtime or once it has done its bytes, whichever is "
            f"first; fio starts the jobs after it as soon as it ends, tilemark at {times}, so "
            "if it finishes earlier the storage idles until then"
            if len(bounded) == 1
            else f"jobs {names} end after their runtime or once they have done their bytes, "
            "whichever is first; fio starts the jobs after each as soon as it ends, tilemark "
            f"at {times}, so if one finishes earlier the storage idles until then"
        )
    return out


def _exitall(
    jobs: list[FioJob],
    new_groups: list[bool],
    start_us: list[int],
    end_us: list[int | None],
    out: Schedule,
) -> None:
    """exitall: a job's end ends every job of its reporting group."""
    group, groups = 0, []
    for i, job in enumerate(jobs):
        if i > 0 and (job.stonewall or new_groups[i]):
            group += 1
        groups.append(group)
    for g in set(groups):
        members = [i for i in range(len(jobs)) if groups[i] == g]
        enders = [i for i in members if jobs[i].exitall]
        if not enders:
            continue
        if any(end_us[i] is None for i in enders):
            i = next(i for i in enders if end_us[i] is None)
            out.problems.append(
                _problem(
                    jobs[i].where,
                    key="exitall",
                    why=f"exitall: fio ends the jobs of job {jobs[i].name}'s group when it "
                    "has done its bytes, a time tilemark cannot know in advance",
                )
            )
            return
        cut = min(end_us[i] for i in enders)  # type: ignore[type-var]
        for i in members:
            if start_us[i] >= cut:
                out.problems.append(
                    _problem(
                        jobs[i].where,
                        key="exitall",
                        why=f"exitall ends its group before job {jobs[i].name} starts, so fio "
                        "never runs it",
                    )
                )
                return
            end_us[i] = cut if end_us[i] is None else min(end_us[i], cut)


def _warmup(jobs: list[FioJob], start_us: list[int], out: Schedule) -> None:
    """fio ramps every job at its own start; tilemark has one warm-up at the run's start, so
    the ramps must be one and the same, for the jobs that start at 0 only."""
    ramps = {job.ramp_us for i, job in enumerate(jobs) if start_us[i] == 0}
    later = [(i, job) for i, job in enumerate(jobs) if start_us[i] > 0 and job.ramp_us]
    if len(ramps) > 1 or later:
        i, job = (
            later[0]
            if later
            else next((i, j) for i, j in enumerate(jobs) if start_us[i] == 0 and j.ramp_us)
        )
        out.problems.append(
            _problem(
                job.ramp_opt,
                "fio ramps every job at its own start, and tilemark has one warm-up at the "
                "start of the run for every stream, so every job must start at 0 with the "
                "same ramp_time",
            )
        )
        return
    ramp = ramps.pop() if ramps else 0
    for i, _ in enumerate(jobs):
        if 0 < start_us[i] < ramp:
            out.problems.append(
                _problem(
                    jobs[i].startdelay_opt or jobs[i].where,
                    key="startdelay",
                    why="it starts during the other jobs' ramp_time, which tilemark's warm-up "
                    "would exclude from its results",
                )
            )
            return
    out.warmup_s = ramp / 1e6


def _problem(opt: Option | str | None, why: str, key: str = "stonewall") -> Problem:
    """A scheduling refusal, about option `opt` (or, for a job, the job's header `opt`)."""
    if opt is None or isinstance(opt, str):
        return Problem(key, opt or "job file", why, _TIMING)
    return Problem(opt.key, opt.where, why, _TIMING)
