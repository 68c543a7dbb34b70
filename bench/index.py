"""One index of every result under bench/results/: bench/results/INDEX.md, generated.

    .venv/bin/python bench/index.py            # rewrite bench/results/INDEX.md (make bench-index)
    .venv/bin/python bench/index.py --check    # exit 1 when INDEX.md is not what it would write

One row per results JSON: when, on which host, against what (file, RAM disk, device), which
script and case, the headline figures that kind of result carries, its verdict, and a link to
its report. The scripts wrote their results in several formats over time, so each JSON is read
by a small adapter chosen by what it holds: its `schema` where it has one, else the keys the
script that wrote it left (fio_jobs.py, scale_repeat.py, ... before they named a schema). A JSON
no adapter understands, or one an adapter fails on, is listed by name with the reason, never
dropped; reports without a JSON (notes written by hand) are listed too.

The output holds nothing but what the results say (no generation time), so it is in sync
exactly when --check passes; tests/test_bench_index.py checks that.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tmbench import RESULTS_DIR, rel

INDEX_NAME = "INDEX.md"
NOT_RESULTS = {INDEX_NAME, "LOG.md"}  # Markdown in results/ that is not a result
# <YYYY-MM-DD>[-<HHMMSS>]-<rest>: every results file name starts so.
NAME = re.compile(r"(\d{4}-\d{2}-\d{2})(?:-(\d{2})(\d{2})(\d{2}))?-(.+)")


@dataclass(frozen=True)
class Reading:
    """What an adapter reads from one results document."""

    script: str  # script and case: "vs_fio.py ramdisk, pinned CPU 1"
    target: str  # what it ran against: "file (ext4 on vda)", "RAM disk", "-"
    headline: str  # the figures this kind of result is about
    verdict: str = "-"  # budgets passed or failed, "-" when the kind has none
    host: str | None = None  # when the document names it
    when: str | None = None  # ISO date and time, when the document has one and the name not


@dataclass(frozen=True)
class Row:
    """One line of the index."""

    when: str
    host: str
    target: str
    script: str
    headline: str
    verdict: str
    name: str  # the results file's name without extension
    report: str  # the file the row links to (.md, else .json)


# ---------------------------------------------------------------------------------------------
# Formatting


def num(value: float | None, digits: int = 2) -> str:
    """A number with `digits` decimals, or "-" when missing."""
    return "-" if value is None else f"{value:,.{digits}f}"


def median(spread: dict[str, float] | None) -> float | None:
    """The median of a {min, median, max} spread, or None."""
    return spread.get("median") if spread else None


def duration_us(value: float | None) -> str:
    """Microseconds as us, ms or s, whichever reads best."""
    if value is None:
        return "-"
    if abs(value) < 1000:
        return f"{value:,.0f} us"
    if abs(value) < 1e6:
        return f"{value / 1e3:,.1f} ms"
    return f"{value / 1e6:,.1f} s"


def bold_if(text: str, failed: bool) -> str:
    return f"**{text}**" if failed else text


def gib(size: float | int | None) -> str:
    return "-" if not size else f"{size / 2**30:g} GiB"


def machine_host(doc: dict[str, Any]) -> str | None:
    """The host name, with its CPUs and whether it is virtual when the notes say."""
    machine = doc.get("machine") if isinstance(doc.get("machine"), dict) else {}
    if not (machine.get("hostname") or machine.get("host")):  # notes per rig (fio_jobs.py)
        machine = next((m for m in machine.values() if isinstance(m, dict)), machine)
    host = machine.get("hostname") or machine.get("host") or doc.get("host")
    if host and machine.get("cpus"):
        virtual = ", virtual" if machine.get("virtualized") else ""
        host += f" ({machine['cpus']} CPUs{virtual})"
    return host


def machine_date(doc: dict[str, Any]) -> str | None:
    machine = doc.get("machine") if isinstance(doc.get("machine"), dict) else {}
    return machine.get("date")


# ---------------------------------------------------------------------------------------------
# Adapters, one per kind of result


def read_vs_fio(doc: dict[str, Any]) -> Reading:
    """vs_fio.py: per case the medians of the ratios its budgets judge; failed ones in bold."""
    options, machine = doc["options"], doc["machine"]
    parts, checks, failed = [], 0, []
    for case in doc["summary"]:
        ratios = case.get("ratios") or {}
        bad = {b["metric"] for b in case.get("budgets", []) if not b["pass"]}
        checks += len(case.get("budgets", []))
        failed += [f"{case['case']} {m}" for m in sorted(bad)]

        def figure(metric: str, digits: int = 2, bad: set[str] = bad, r: dict = ratios) -> str:
            return bold_if(num(median(r.get(metric)), digits), metric in bad)

        if "achieved" in ratios:  # open loop: tilemark's own figures
            cpu = "cpu_vs_fio_rate" if median(ratios.get("cpu_vs_fio_rate")) else "cpu_vs_closed"
            parts.append(
                f"{case['case']} {figure('achieved', 3)}/{figure('response_vs_service')}/"
                f"{figure(cpu)}"
            )
        else:
            parts.append(f"{case['case']} {figure('iops')}/{figure('cpu_window')}")
        if case.get("errors"):
            failed.append(f"{case['case']}: {len(case['errors'])} failed runs")
    if options.get("ramdisk"):
        target = f"RAM disk {gib(options['ramdisk'])}"
    elif options.get("device"):
        target = f"device {options['device']}"
    else:
        target = file_target(machine)
    pinned = options.get("pin")
    script = "vs_fio.py" + (f" --pin {pinned}" if pinned is not None else "")
    script += f", {options.get('reps')} x {num(options.get('duration'), 0)} s"
    verdict = f"{len(failed)} of {checks} fail: " + ", ".join(failed) if failed else "all pass"
    return Reading(script, target, "; ".join(parts), verdict, when=machine.get("date"))


def file_target(machine: dict[str, Any]) -> str:
    """'file (ext4 on vda, virtio)' from the findmnt line and block device notes."""
    fields = (machine.get("filesystem") or "").split()
    fstype = fields[2] if len(fields) > 2 else "?"
    device = machine.get("block_device") or {}
    disk = device.get("disk") or "no disk"
    model = f", {device['model']}" if device.get("model") else ""
    return f"file ({fstype} on {disk}{model})"


def read_cluster(doc: dict[str, Any]) -> Reading:
    """cluster.py: cluster / one process, CPU per IO and IOPS, and the overhead per IO."""
    parts = []
    for case, row in doc["summary"].items():
        parts.append(
            f"{case}: CPU/IO x{num(median(row['cpu_window_us_per_io_ratio']))} "
            f"({num(median(row['overhead_us_per_io']), 3)} us), "
            f"IOPS x{num(median(row['iops_ratio']))}"
        )
    return Reading("cluster.py local:2 vs 1 process", "RAM disk, 2 loop devices", "; ".join(parts))


def read_verify(doc: dict[str, Any]) -> Reading:
    """verify_overhead.py: --verify / plain, IOPS and CPU per IO."""
    s = doc["summary"]
    headline = (
        f"IOPS x{num(median(s['iops_ratio']), 3)} (>= 0.95), CPU/IO "
        f"x{num(median(s['cpu_per_io_ratio']), 3)} (<= 1.3); {s['blocks_checked']:,} blocks "
        f"checked, {s['findings']} findings"
    )
    settings = doc.get("settings") or {}
    return Reading(
        when=doc.get("date"),
        script=f"verify_overhead.py, {settings.get('reps')} x {num(settings.get('duration'), 0)} s",
        target=f"RAM disk {gib(settings.get('ramdisk'))}",
        headline=headline,
        verdict="pass" if s["budget"]["passed"] else "FAIL",
    )


def read_capture(doc: dict[str, Any]) -> Reading:
    """capture_overhead.py: traced / untraced IOPS per load and tracer, and events dropped."""
    s = doc["summary"]
    parts = []
    for load, tracers in s.items():
        if load == "budget":
            continue
        for tracer, t in tracers.items():
            if tracer == "none":
                continue
            dropped = "" if t.get("dropped") in (0, None) else f", {t['dropped']} dropped"
            error = f" ({t['failed']} failed)" if t.get("failed") else ""
            parts.append(f"{load} {tracer} x{num(median(t.get('ratio')))}{dropped}{error}")
    b = s["budget"]
    verdict = "pass" if b.get("passed") else "FAIL"
    if not b.get("passed"):
        verdict += f" (at 50k: {'pass' if b.get('issue_passed') else 'FAIL'}; "
        verdict += f"closed loop: {'pass' if b.get('closed_passed') else 'FAIL'})"
    settings = doc.get("settings") or {}
    return Reading(
        f"capture_overhead.py, {settings.get('reps')} x {num(settings.get('duration'), 0)} s",
        f"RAM disk {gib(settings.get('ramdisk'))}",
        "; ".join(parts),
        verdict,
    )


def read_replay(doc: dict[str, Any]) -> Reading:
    """replay.py: per device and trace, the rate error and lateness p99 of both tools."""
    rows = {(r["device"], r["case"], r["tool"]): r for r in doc["summary"]}
    parts = []
    for device, case, tool in rows:
        if tool != "tilemark":
            continue
        tm, fio = rows[(device, case, "tilemark")], rows.get((device, case, "fio"))
        text = (
            f"{device} {case}: rate {num(tm['rate_error_pct'], 3)}%, lateness p99 "
            f"{duration_us(tm['late_p99_us'])}"
        )
        if fio:
            text += f" (fio {num(fio['rate_error_pct'], 2)}%, {duration_us(fio['late_p99_us'])})"
        parts.append(text)
    failures = doc.get("budget_failures") or []
    pinned = any("pinned" in note for note in doc.get("notes", []))
    devices = ", ".join(dict.fromkeys(r["device"] for r in doc["summary"]))
    return Reading(
        f"replay.py{' --pin' if pinned else ''}, {doc.get('reps')} reps",
        devices.replace("ramdisk", "RAM disk"),
        "; ".join(parts),
        "pass" if not failures else "FAIL: " + "; ".join(failures),
        when=machine_date(doc),
    )


def read_fio_jobs(doc: dict[str, Any]) -> Reading:
    """fio_jobs.py: tilemark / fio IOPS per example job, and whether it is within fio's noise.
    Rows carry `ratio` and `within_noise`, or (the rewrite on branch fio-corpus) a `rig` and
    `figures` with those per figure."""
    parts, within = [], 0
    for job in doc["jobs"]:
        name = Path(job["job"]).stem + (f" ({job['rig']})" if job.get("rig") else "")
        iops = (job.get("figures") or {}).get("iops") if "figures" in job else job
        if not iops or iops.get("ratio") is None:
            parts.append(f"{name} failed")
            continue
        within += bool(iops.get("within_noise"))
        parts.append(f"{name} x{num(iops['ratio'])}{'' if iops.get('within_noise') else '*'}")
    mode = []
    if "as_written" in doc:
        mode.append("as written" if doc["as_written"] else "direct=1")
    elif "ramdisk" in doc:  # results from before --as-written existed ran the jobs as written
        mode.append("as written")
    if doc.get("same_engine"):
        mode.append("fio on io_uring")
    rigs = doc.get("rigs") or {}
    return Reading(
        "fio_jobs.py" + (f" ({', '.join(mode)})" if mode else "") + f", {doc.get('reps')} reps",
        f"RAM disk {doc['ramdisk']}" if "ramdisk" in doc else "; ".join(rigs.values()) or "-",
        "; ".join(parts) + " (* outside fio's spread + 3%)",
        f"{within} of {len(doc['jobs'])} within noise",
        when=doc.get("date"),
    )


def read_scale_repeat(doc: dict[str, Any]) -> Reading:
    """scale_repeat.py: each mode's answers (max passing tiles) over the repeated studies."""
    parts, agree = [], []
    for mode in doc["modes"]:
        answers = [s["max_passing_tiles"] for s in doc["studies"] if s["mode"] == mode]
        parts.append(f"{mode}: {', '.join(map(str, answers))}")
        agree.append(f"{mode} {'agree' if len(set(answers)) == 1 else 'differ'}")
    return Reading(
        f"scale_repeat.py, tiles {doc.get('tiles')}, {num(doc.get('duration'), 0)} s steps",
        f"file {doc.get('target')} ({doc.get('capacity')})",
        "max passing tiles per study: " + "; ".join(parts),
        ", ".join(agree),
    )


def read_trace_import(doc: dict[str, Any]) -> Reading:
    """trace_import.py: MB/s and peak RSS per format, at the largest size imported."""
    largest: dict[str, dict[str, Any]] = {}
    for row in doc["summary"]:
        if row["size_mb"] >= largest.get(row["format"], {}).get("size_mb", -1):
            largest[row["format"]] = row
    parts = [
        f"{fmt} {num(r['mb_per_s'], 1)} MB/s, {num(r['peak_rss_mb'], 0)} MB RSS ({r['size_mb']} MB)"
        for fmt, r in largest.items()
    ]
    return Reading("trace_import.py", "-", "; ".join(parts))


def read_streams(doc: dict[str, Any]) -> Reading:
    """streams.py: per case, frames vs JSON snapshots: lateness p99, wall and Python CPU."""
    parts = []
    for key, m in doc["medians"].items():
        case, variant = key.split("/")
        parts.append(
            f"{case} {variant}: rate {num(m['rate_ratio'], 4)}, lateness p99 "
            f"{num(m['lateness_p99_us'], 0)} us, wall {num(m['wall_s'], 1)} s, CPU "
            f"{num(m['cpu_s'], 1)} s, {num(m['peak_rss_mb'], 0)} MB, Python "
            f"{num(m['python_cpu_pct'], 0)}%"
        )
    return Reading("streams.py (null backend)", "-", "; ".join(parts))


def read_results_schema(doc: dict[str, Any]) -> Reading:
    """results_schema.py: median read time of a large run.json per reader, and import times."""
    reads = ", ".join(f"{k} {num(v['median_ms'], 0)} ms" for k, v in doc["decode"].items())
    imports = ", ".join(f"{k} {num(v, 0)} ms" for k, v in doc["import_ms"].items())
    return Reading(
        f"results_schema.py, {doc['streams']:,} streams ({doc['document_bytes'] / 1e6:.1f} MB)",
        "-",
        f"read: {reads}; import: {imports}",
    )


def read_startup(doc: dict[str, Any]) -> Reading:
    """startup.py: median wall time of each command, against its budget."""
    parts, failed = [], []
    for case in doc["cases"]:
        parts.append(
            bold_if(f"`{case['case']}` {num(case['wall_s']['median'], 3)} s", case["pass"] is False)
        )
        if case["pass"] is False:
            failed.append(case["case"])
    return Reading(
        f"startup.py, {doc.get('reps')} reps",
        "-",
        "; ".join(parts),
        "all pass" if not failed else "FAIL: " + ", ".join(failed),
    )


def read_fidelity(doc: list[dict[str, Any]]) -> Reading:
    """fidelity.py: overall fidelity of each application's learned profile, per repetition
    (design.md budget: >= 0.90 on every property, >= 0.95 overall)."""
    if all(not run.get("fidelity") and run.get("controls") for run in doc):
        return _read_controls(doc)
    per_app: dict[str, list[str]] = {}
    meets = 0
    for run in doc:
        fid = run["fidelity"]
        worst = min(
            (p["accuracy"] for p in fid["properties"] if p.get("accuracy") is not None),
            default=None,
        )
        ok = fid["overall"] >= 0.95 and (worst is None or worst >= 0.90)
        meets += ok
        per_app.setdefault(run["app"], []).append(num(fid["overall"], 3))
    parts = [f"{app} {'/'.join(values)}" for app, values in per_app.items()]
    return Reading(
        "fidelity.py",
        "delayed device",
        "overall fidelity: " + "; ".join(parts),
        f"{meets} of {len(doc)} meet the budget",
    )


def _read_controls(doc: list[dict[str, Any]]) -> Reading:
    """fidelity.py --control-only: the controls' median overall score per replay timing
    (issue 24's goal: >= 0.98 on every property)."""
    import statistics

    parts, meets, total = [], 0, 0
    for run in doc:
        for timing, docs in run["controls"].items():
            overall = statistics.median(d["overall"] for d in docs)
            parts.append(f"{run['app']} {timing} {num(overall, 3)}")
            for d in docs:
                total += 1
                meets += all(
                    p["accuracy"] >= 0.98 for p in d["properties"] if p.get("accuracy") is not None
                )
    return Reading(
        "fidelity.py --control-only",
        "delayed device",
        "control overall (median): " + "; ".join(parts),
        f"{meets} of {total} meet the control goal",
    )


def read_pg_capacity(doc: list[dict[str, Any]]) -> Reading:
    """pg_capacity.py: PostgreSQL instances that fit per rate, as measured with pgbench, and
    the tiles the learned profile predicts (a failed prediction is named)."""
    parts = []
    for rate in doc:
        predicted = rate.get("predicted") or {}
        if "error" in predicted:
            tail = ", prediction failed"
        elif "study" in predicted:
            tail = f", predicted {predicted['study'].get('max_passing_tiles') or 0}"
        else:
            tail = ""
        parts.append(f"{num(rate['rate'], 0)} tps: {rate['measured_answer']} instances{tail}")
    return Reading("pg_capacity.py", doc[0].get("device", "-") if doc else "-", "; ".join(parts))


def read_file_ops(doc: dict[str, Any]) -> Reading:
    """file_ops.py: tilemark's file streams (psync) / the same calls in C, rate and CPU per op,
    per file system, case and thread count (medians over the repetitions)."""
    parts = [
        f"{r['fs']} {r['case']} x{r['threads']} {num(r['tilemark-psync']['ratio_median'])}"
        f" (CPU {num(r['tilemark-psync']['cpu_ratio'])})"
        for r in doc["rows"]
    ]
    return Reading(
        f"file_ops.py, {doc['reps']} reps of {num(doc['seconds'], 1)} s, {doc['files']:,} files",
        ", ".join(sorted({r["fs"] for r in doc["rows"]})),
        "tilemark psync / C loop rate (CPU per op): " + "; ".join(parts),
    )


def read_fio_fileengines(doc: dict[str, Any]) -> Reading:
    """fio_fileengines.py: fio's file and directory engine examples by fio and by tilemark,
    operations done and mean latency (medians over the repetitions)."""
    parts = []
    for r in doc["rows"]:
        fio, tm = r.get("fio"), r["tilemark"]
        theirs = f"fio {fio['ops']:,.0f} ops {num(fio['mean_us'], 1)} us / " if fio else ""
        parts.append(
            f"{r['engine']} {theirs}tilemark {tm['ops']:,.0f} ops {num(tm['mean_us'], 1)} us"
        )
    return Reading(
        f"fio_fileengines.py, {doc['reps']} reps, filecreate nrfiles / {doc['scale']}",
        f"directory under {doc['machine']['work']}",
        "ops done and mean latency: " + "; ".join(parts),
    )


Adapter = Callable[[Any], Reading]
BY_SCHEMA: dict[str, Adapter] = {
    "tilemark-bench-file-ops/1": read_file_ops,
    "tilemark-bench-fio-fileengines/1": read_fio_fileengines,
    "tilemark-bench-vs-fio/1": read_vs_fio,
    "tilemark-bench-cluster/1": read_cluster,
    "tilemark-bench-verify-overhead/1": read_verify,
    "tilemark-bench-capture-overhead/1": read_capture,
    "tilemark-bench-replay/1": read_replay,
    "tilemark-bench-startup/1": read_startup,
    "tilemark-bench-results-schema/1": read_results_schema,
    "tilemark-bench-scale-repeat/1": read_scale_repeat,
    "tilemark-bench-trace-import/1": read_trace_import,
    "tilemark-bench-streams/1": read_streams,
}


def _keys(doc: Any, *names: str) -> bool:
    return isinstance(doc, dict) and all(n in doc for n in names)


def _list_of(doc: Any, *names: str) -> bool:
    return isinstance(doc, list) and bool(doc) and all(_keys(x, *names) for x in doc)


# Results written before their script named a schema, recognised by their keys.
BY_SHAPE: tuple[tuple[str, Callable[[Any], bool], Adapter], ...] = (
    ("fio_jobs", lambda d: _keys(d, "jobs", "runtime", "ramp", "machine"), read_fio_jobs),
    ("scale_repeat", lambda d: _keys(d, "studies", "modes", "tiles"), read_scale_repeat),
    ("trace_import", lambda d: _keys(d, "args", "runs", "summary", "machine"), read_trace_import),
    ("results_schema", lambda d: _keys(d, "decode", "import_ms"), read_results_schema),
    ("startup", lambda d: _keys(d, "cases", "reps", "machine") and "schema" not in d, read_startup),
    ("fidelity", lambda d: _list_of(d, "app", "fidelity"), read_fidelity),
    ("pg_capacity", lambda d: _list_of(d, "rate", "measured_answer"), read_pg_capacity),
)


def adapter_for(doc: Any) -> Adapter | None:
    """The adapter for a results document: by its schema, else by its shape; None if none."""
    if isinstance(doc, dict) and "schema" in doc:
        return BY_SCHEMA.get(doc["schema"])
    for _name, matches, adapter in BY_SHAPE:
        if matches(doc):
            return adapter
    return None


# ---------------------------------------------------------------------------------------------
# The index


@dataclass(frozen=True)
class Index:
    """Every result understood, every JSON not understood (with why), and reports alone."""

    rows: list[Row]
    not_understood: list[tuple[str, str]]  # (file name, reason)
    notes: list[tuple[str, str]]  # (file name, title) of reports without a JSON


def _when(name: str, reading: Reading) -> str:
    m = NAME.fullmatch(name)
    if m and m.group(2):
        return f"{m.group(1)} {m.group(2)}:{m.group(3)}"
    if reading.when and re.match(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}", reading.when):
        return f"{reading.when[:10]} {reading.when[11:16]}"
    return m.group(1) if m else "-"


def _host(name: str, reading: Reading, doc: Any) -> str:
    host = reading.host or (machine_host(doc) if isinstance(doc, dict) else None)
    if host:
        return host
    # A list document names no host; the standard name has it: <date>-<time>-<host>-<case>.
    m = NAME.fullmatch(name)
    return m.group(5).split("-")[0] if m and m.group(2) else "-"


def build(results: Path) -> Index:
    """Read every results JSON and report under `results`."""
    rows, not_understood = [], []
    for path in sorted(results.glob("*.json")):
        name = path.stem
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            not_understood.append((path.name, f"not JSON: {exc}"))
            continue
        adapter = adapter_for(doc)
        if adapter is None:
            schema = doc.get("schema") if isinstance(doc, dict) else None
            why = f"schema {schema!r} has no adapter" if schema else "no adapter knows its shape"
            not_understood.append((path.name, why))
            continue
        try:
            reading = adapter(doc)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            not_understood.append((path.name, f"{adapter.__name__} failed: {exc!r}"))
            continue
        md = path.with_name(f"{name}.md")
        rows.append(
            Row(
                when=_when(name, reading),
                host=_host(name, reading, doc),
                target=reading.target,
                script=reading.script,
                headline=reading.headline,
                verdict=reading.verdict,
                name=name,
                report=md.name if md.exists() else path.name,
            )
        )
    rows.sort(key=lambda r: (r.when, r.name))
    notes = []
    for md in sorted(results.glob("*.md")):
        if md.name in NOT_RESULTS or md.with_suffix(".json").exists():
            continue
        first = next((ln for ln in md.read_text().splitlines() if ln.startswith("# ")), "")
        notes.append((md.name, first[2:].strip() or "-"))
    return Index(rows, not_understood, notes)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(index: Index) -> str:
    """INDEX.md's text."""
    lines = [
        "# Results index",
        "",
        "Generated by `bench/index.py` from every results JSON in this directory "
        "(`make bench-index`); do not edit it by hand. What the results taught, in order, is "
        "in [LOG.md](LOG.md); how they are measured, and where each budget stands, in "
        "[../README.md](../README.md).",
        "",
        "Headlines: `vs_fio.py` gives per case the median ratios tilemark/fio, closed loop "
        "`IOPS/CPU per IO`, open loop `achieved rate/response p50 ÷ service p50/CPU per IO` "
        "(against fio at the same rate, or before that existed tilemark's closed QD1); a "
        "**bold** figure failed its budget. Other scripts: the ratios or figures their "
        "reports lead with (`x` = tilemark with / without, or cluster / one process).",
        "",
        f"{len(index.rows)} results"
        + (f", {len(index.not_understood)} not understood" if index.not_understood else "")
        + (f", {len(index.notes)} reports without a JSON" if index.notes else "")
        + ".",
        "",
        "| when | host | target | script | headline | verdict | report |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in index.rows:
        lines.append(
            "| "
            + " | ".join(
                _cell(x) for x in (r.when, r.host, r.target, r.script, r.headline, r.verdict)
            )
            + f" | [{r.name}]({r.report}) |"
        )
    if index.notes:
        lines += ["", "## Reports without a results JSON", ""]
        lines += [f"- [{name}]({name}): {title}" for name, title in index.notes]
    if index.not_understood:
        lines += ["", "## Not understood", ""]
        lines += [f"- `{name}`: {why}" for name, why in index.not_understood]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=RESULTS_DIR, help="results directory")
    p.add_argument("--out", type=Path, help="the index file (default RESULTS/INDEX.md)")
    p.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if the index is out of date"
    )
    args = p.parse_args(argv)
    out = args.out or args.results / INDEX_NAME
    text = render(build(args.results))
    if args.check:
        current = out.read_text() if out.exists() else None
        if current != text:
            print(
                f"index: {rel(out.resolve())} is out of date; run `make bench-index`",
                file=sys.stderr,
            )
            return 1
        return 0
    out.write_text(text)
    print(f"index: wrote {rel(out.resolve())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
