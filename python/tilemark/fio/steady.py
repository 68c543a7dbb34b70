"""fio's steady-state options (`ss`, `ss_dur`, `ss_ramp`, `ss_interval`) as a workload's
`[steadystate]` rule (workload/steadyrule.py; fio commit f5344384).

fio's rules (HOWTO "Steady state"; options.c str_steadystate_cb; init.c; steadystate.c;
libfio.c reset_all_stats):

- `ss=CRITERION:LIMIT` (default `iops_slope:0.01%`) takes effect only with `ss_dur` above 0
  (its default 0 "disables steady state detection"). A limit ending in `%` is a percentage of
  the window's mean; otherwise IOPS, bytes per second in fio's size units, or for `lat` a time
  that fio reads in microseconds and compares with latencies in nanoseconds (refused here:
  fio's `lat:500us` ends at a deviation of 500 ns).
- `ss_interval` (default 1 s) must be at least 1 s and the same for every job; `ss_dur` a
  whole number of intervals and more than one. fio counts the window's samples as
  `ss_dur / (ss_interval_ms / 1000)` in whole seconds, so an interval that is not a whole
  number of seconds is refused.
- "If group_reporting is enabled this will apply to all jobs in the group": the jobs of a
  reporting group (which begins at `stonewall` or `new_group`) are judged on their summed
  samples and ended together; without group_reporting each job is judged and ended alone.
  Every job of a reporting group must have the same settings ("job rejected: steadystate
  options must be consistent within reporting groups").
- `ss_ramp` counts from the job's start, which fio moves to the end of `ramp_time`
  (reset_all_stats sets the job's epoch and the check's prev_time); the first sample is the
  interval that follows `ss_ramp`.

tilemark ends a run, not a phase, when the rule holds, so the jobs fio judges must be the last
to run, and alone (no other job runs beside them or after them); the rest is refused with
the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tilemark.analysis.fio_steady import CRITERIA
from tilemark.errors import UsageError
from tilemark.fio import values
from tilemark.fio.job import FioJob, Problem
from tilemark.fio.jobfile import Job, Option
from tilemark.fio.schedule import Schedule

KEYS = ("ss", "ss_dur", "ss_ramp", "ss_interval")  # canonical (job.ALIASES maps the long names)
DEFAULT = "iops_slope:0.01%"  # options.c, steadystate .def
GROUP = "ending a job on a measurement"


@dataclass(frozen=True)
class JobSteady:
    """One job's steady-state settings in fio's units."""

    criterion: str
    limit: float
    percent: bool
    dur_us: int
    ramp_us: int
    interval_us: int
    where: Option | None  # the option a refusal names

    def same(self) -> tuple[Any, ...]:
        """What fio compares within a reporting group (td_steadystate_init)."""
        return (self.criterion, self.limit, self.percent, self.dur_us, self.ramp_us)

    def describe(self) -> str:
        limit = f"{self.limit:g}%" if self.percent else f"{self.limit:g}"
        return f"{self.criterion}:{limit}"


def _opt(job: Job, key: str) -> Option | None:
    """The option in force for canonical `key` (its long name included)."""
    long = {
        "ss": "steadystate",
        "ss_dur": "steadystate_duration",
        "ss_ramp": "steadystate_ramp_time",
        "ss_interval": "steadystate_check_interval",
    }[key]
    found = None
    for opt in job.options:
        if opt.key in (key, long):
            found = opt
    return found


def _label(opt: Option) -> str:
    return f"{opt.where}: fio option {opt.key}"


def read(job: Job, kb_base: int) -> JobSteady | None:
    """A job's steady-state settings; None when ss_dur is 0 (fio does not judge it).
    Raises UsageError for values fio refuses too."""
    dur_opt = _opt(job, "ss_dur")
    dur_us = values.parse_time_us(dur_opt.value or "", _label(dur_opt)) if dur_opt else 0
    if dur_us == 0:
        return None
    interval_opt = _opt(job, "ss_interval")
    interval_us = (
        values.parse_time_us(interval_opt.value or "", _label(interval_opt))
        if interval_opt
        else 1_000_000
    )
    ramp_opt = _opt(job, "ss_ramp")
    ramp_us = values.parse_time_us(ramp_opt.value or "", _label(ramp_opt)) if ramp_opt else 0
    ss_opt = _opt(job, "ss")
    text = (ss_opt.value or "").strip() if ss_opt else DEFAULT
    label = _label(ss_opt) if ss_opt else f"{job.where}: fio option ss (default {DEFAULT})"
    criterion, _, limit_text = text.partition(":")
    criterion = criterion.strip()
    if criterion not in CRITERIA:
        raise UsageError(f"{label} must be one of {', '.join(CRITERIA)}, got {text!r}.")
    limit_text = limit_text.strip()
    if not limit_text:
        # options.c: "steadystate threshold must be specified in addition to criterion"
        raise UsageError(f"{label} needs a limit after the criterion (e.g. iops:10%), as fio does.")
    percent = "%" in limit_text
    where = ss_opt or dur_opt
    if percent:
        limit = _float(limit_text.split("%")[0].strip(), label, text)
    elif criterion.startswith("iops"):
        limit = _float(limit_text, label, text)
    elif criterion.startswith("bw"):
        limit = float(values.parse_size(limit_text, label, kb_base=kb_base))
    else:
        limit = -1.0  # lat: refused by check()
    if interval_us < 1_000_000:
        raise UsageError(
            f"{_label(interval_opt) if interval_opt else label} must be at least 1s, as fio "
            "requires (init.c)."
        )
    if dur_us % interval_us or dur_us <= interval_us:
        raise UsageError(
            f"{_label(dur_opt)} must be a whole number of ss_interval ({interval_us // 1000}ms) "
            "and more than one, as fio requires (init.c)."
        )
    return JobSteady(criterion, limit, percent, dur_us, ramp_us, interval_us, where)


def _float(text: str, label: str, whole: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{label}: the limit of {whole!r} is not a number.") from None
    return value


def _problem(opt: Option | None, fallback: str, why: str, key: str = "ss") -> Problem:
    if opt is None:
        return Problem(key, fallback, why, GROUP)
    return Problem(opt.key, opt.where, why, GROUP)


def steadystate(
    jobs: list[FioJob],
    parsed: list[Job],
    clone_names: list[list[str]],
    plan: Schedule,
    doc: dict[str, Any],
    notes: list[str],
) -> list[Problem]:
    """Set doc["steadystate"] from the jobs' ss options, or the problems that stop it.
    `clone_names[i]`: the stream names of job i's clones."""
    settings: list[JobSteady | None] = []
    problems: list[Problem] = []
    for job, section in zip(jobs, parsed, strict=True):
        try:
            settings.append(read(section, job.kb_base))
        except UsageError as e:
            problems.append(Problem("ss", section.where, str(e), "malformed values", str(e)))
            settings.append(None)
        if settings[-1] is None and _opt(section, "ss") is not None and not problems:
            notes.append(
                f"job {job.name} sets ss without ss_dur, which fio ignores (ss_dur's default 0 "
                "disables steady-state detection), and so does the translation"
            )
    if problems or not any(settings):
        return problems
    groups, group = [], 0
    for i, section in enumerate(parsed):
        new = section.get("new_group")
        if i > 0 and (jobs[i].stonewall or (new is not None and (new.value or "1") != "0")):
            group += 1
        groups.append(group)
    judged = [i for i, s in enumerate(settings) if s is not None]
    first = settings[judged[0]]
    assert first is not None
    for i, s in enumerate(settings):
        if s is not None and s.interval_us != first.interval_us:
            return [
                _problem(
                    _opt(parsed[i], "ss_interval"),
                    parsed[i].where,
                    "fio requires the same ss_interval for every job (init.c: 'must be "
                    "globally equal')",
                    "ss_interval",
                )
            ]
    for i in range(len(jobs)):
        same_group = [k for k in range(len(jobs)) if groups[k] == groups[i]]
        for k in same_group:
            a, b = settings[i], settings[k]
            if (a is None) != (b is None) or (a and b and a.same() != b.same()):
                named = a if a is not None else b
                return [
                    _problem(
                        named.where if named else None,
                        parsed[i].where,
                        f"jobs {jobs[i].name} and {jobs[k].name} are in one reporting group "
                        "with different steady-state settings, which fio rejects ('steadystate "
                        "options must be consistent within reporting groups')",
                    )
                ]
    the_group = groups[judged[0]]
    members = [i for i in range(len(jobs)) if groups[i] == the_group]
    if problems := _alone(jobs, settings, groups, the_group, members, plan, first):
        return problems
    if first.criterion.startswith("lat") and not first.percent:
        return [
            _problem(
                first.where,
                parsed[judged[0]].where,
                "fio reads an absolute latency limit in microseconds and compares it with "
                "latencies in nanoseconds (options.c str_steadystate_cb, steadystate.c), so "
                "lat:500us ends at a deviation of 500 ns; give the limit as a percentage",
            )
        ]
    if first.interval_us % 1_000_000:
        return [
            _problem(
                _opt(parsed[judged[0]], "ss_interval"),
                parsed[judged[0]].where,
                "fio counts the window's samples in whole seconds of ss_interval (steadystate.c: "
                "ss_dur / (ss_check_interval / 1000)), so an interval of a fraction of a second "
                "is not sampled as written",
                "ss_interval",
            )
        ]
    ramp = jobs[judged[0]].ramp_us
    if ramp and (first.ramp_us == 0 or first.ramp_us + first.interval_us <= ramp):
        return [
            _problem(
                _opt(parsed[judged[0]], "ss_ramp") or first.where,
                parsed[judged[0]].where,
                f"fio starts sampling during ramp_time ({ramp / 1e6:g}s: ss_ramp is 0, or "
                "ss_ramp + ss_interval is shorter), and at its end resets the job's IO "
                "counters but not the check's (libfio.c reset_all_stats), so its next sample "
                "is not an interval's IO; give ss_ramp of at least ramp_time",
                "ss_ramp",
            )
        ]
    clones = sum(jobs[i].numjobs for i in members)
    reporting = [parsed[i].get("group_reporting") for i in members]
    grouped = all(o is not None and (o.value or "1") != "0" for o in reporting)
    if clones > 1 and not grouped:
        return [
            _problem(
                first.where,
                parsed[judged[0]].where,
                f"without group_reporting fio judges each of the {clones} jobs of its group "
                "on its own and ends each when its own criterion is met; tilemark ends the run "
                "when the criterion holds for its streams together, which is fio's rule with "
                "group_reporting",
            )
        ]
    names = [n for i in members for n in clone_names[i]]
    every = [n for names_ in clone_names for n in names_]
    table: dict[str, Any] = {
        "criterion": first.criterion,
        "limit": f"{first.limit:g}%" if first.percent else first.limit,
        "window": f"{first.dur_us // 1_000_000}s",
        "sample": f"{first.interval_us // 1_000_000}s",
    }
    if first.ramp_us:
        table["ramp"] = _seconds(first.ramp_us)
    if names != every:
        table["streams"] = names
    doc["steadystate"] = table
    who = (
        f"job {jobs[members[0]].name}"
        if clones == 1
        else f"the {clones} jobs of {', '.join(jobs[i].name for i in members)} together "
        "(group_reporting)"
    )
    notes.append(
        f"ss={first.describe()}: fio ends {who} when its steady-state criterion holds over "
        f"ss_dur, as tilemark's [steadystate] ends the run (summary.fio_steady_state says "
        f"whether and when); fio samples when its helper thread wakes, about every "
        f"ss_interval, and scales each sample by the time since the last, tilemark's samples "
        f"are its snapshot intervals, exactly {first.interval_us // 1_000_000}s long"
    )
    return []


def _alone(
    jobs: list[FioJob],
    settings: list[JobSteady | None],
    groups: list[int],
    the_group: int,
    members: list[int],
    plan: Schedule,
    first: JobSteady,
) -> list[Problem]:
    """The judged group must be the run's last phase, with nothing beside it: tilemark ends
    the whole run when the rule holds, fio only the group (and then starts what waits for it)."""
    begin = min(plan.timings[i].start_s for i in members)
    stops = [plan.timings[i].stop_s for i in members]
    end = min((s for s in stops if s is not None), default=None)
    leader = jobs[members[0]].name
    for i, job in enumerate(jobs):
        if groups[i] == the_group:
            continue
        timing = plan.timings[i]
        if end is not None and timing.start_s >= end:
            return [
                _problem(
                    job.stonewall_opt or job.wait_for_opt or first.where,
                    job.where,
                    f"fio starts job {job.name} when job {leader} has ended, which its "
                    "steady-state criterion decides while it runs; tilemark's [steadystate] "
                    "ends the whole run when the criterion holds, so no phase can follow it",
                    "stonewall",
                )
            ]
        if timing.stop_s is None or timing.stop_s > begin:
            return [
                _problem(
                    first.where,
                    job.where,
                    f"job {job.name} runs beside job {leader}, and fio ends only the "
                    "steady-state group when its criterion holds; tilemark's [steadystate] "
                    "ends the whole run",
                )
            ]
        if settings[i] is not None:
            return [
                _problem(
                    first.where,
                    job.where,
                    f"jobs {job.name} and {leader} are in different reporting groups, each "
                    "ended by its own steady-state criterion; tilemark ends the whole run on one",
                )
            ]
    return []


def _seconds(us: int) -> str:
    whole, frac = divmod(us, 1_000_000)
    return f"{whole}s" if not frac else f"{us // 1000}ms" if us % 1000 == 0 else f"{us}us"


def export_lines(
    rule: dict[str, Any] | None, stream_names: list[str], warmup_ms: int
) -> tuple[list[str], list[str]]:
    """A run's `[steadystate]` (workload JSON) as fio options for [global], and notes for
    what fio cannot run the same way (`export --fio`)."""
    if not rule:
        return [], []
    limit = f"{rule['limit']:g}%" if rule["percent"] else f"{rule['limit']:g}"
    name = f"{rule['criterion']}:{limit}"
    judged = rule.get("streams") or []
    covered = all(n in judged or n.split("@")[0] in judged for n in stream_names)
    why = None
    if judged and not covered:
        why = (
            "it judged only some streams, and fio requires the same steady-state settings of "
            "every job of a reporting group (every exported job is in one)"
        )
    elif rule["criterion"].startswith("lat") and not rule["percent"]:
        why = "fio reads an absolute latency limit in microseconds and compares it with ns"
    elif rule["sample_s"] < 1 or rule["sample_s"] != int(rule["sample_s"]):
        why = f"its samples of {rule['sample_s']:g}s are shorter than fio's (whole seconds, 1s+)"
    elif warmup_ms and (
        not rule["ramp_s"] or (rule["ramp_s"] + rule["sample_s"]) * 1000 <= warmup_ms
    ):
        why = (
            "fio would sample inside ramp_time, where it resets its counters but not the "
            "check's (libfio.c reset_all_stats)"
        )
    if why is not None:
        return [], [f"the run ended on fio's steady-state criterion {name}; not exported: {why}"]
    lines = [f"ss={name}", f"ss_dur={round(rule['window_s'] * 1000)}ms"]
    if rule["sample_s"] != 1:
        # fio's default is 1s; fio 3.33 and older have no ss_interval and refuse it.
        lines.append(f"ss_interval={round(rule['sample_s'] * 1000)}ms")
    if rule["ramp_s"]:
        lines.append(f"ss_ramp={round(rule['ramp_s'] * 1000)}ms")
    if len(stream_names) > 1:
        # HOWTO steadystate: with group_reporting "this will apply to all jobs in the group".
        lines.append("group_reporting")
    notes = []
    if rule["criterion"].startswith("lat"):
        notes.append(
            f"ss={name}: fio 3.33 has no lat criteria (fio f5344384 has), and refuses the job"
        )
    return lines, notes
