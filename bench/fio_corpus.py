"""fio's example job files through `tilemark import-fio`: which translate, which are refused
and why, every blocker counted (docs/fio.md, issue 27).

    .venv/bin/python bench/fio_corpus.py /path/to/fio/examples --label "fio f5344384"

For every `*.fio` file of the directory it runs the translation (tilemark.fio.translate.
examine, the function `import-fio` and `tilemark run JOB.fio` use, with this process's
environment: unset ${VAR}s are empty, as in fio) and times it. A refused file is grouped by
the sentence the user sees (the engine first, then the first blocker in the file); every
blocker of every file is counted too, by option and by group. No file is run.

Results: bench/results/<date>-fio-corpus.{json,md}. fio's files are read, never copied.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"


def examine_all(examples: Path) -> list[dict[str, Any]]:
    from tilemark.fio.translate import examine, first_problem

    rows = []
    for path in sorted(examples.glob("*.fio")):
        started = time.perf_counter()
        outcome = examine(path)
        seconds = time.perf_counter() - started
        row: dict[str, Any] = {"file": path.name, "seconds": seconds}
        if outcome.translation is not None:
            doc = outcome.translation.doc
            # A job file of fio's file and directory engines is a file workload (filestream).
            streams = doc.get("stream") or doc["filestream"]
            row.update(
                translated=True,
                streams=len(streams),
                phased=any("start" in s or "stop" in s for s in streams),
                notes=outcome.translation.notes,
            )
        else:
            first = first_problem(outcome.problems)
            row.update(
                translated=False,
                refusal=first.sentence(),
                group=first.group,
                key=first.key,
                blockers=[
                    {"key": p.key, "group": p.group, "where": p.where} for p in outcome.problems
                ],
            )
        rows.append(row)
    return rows


def markdown(doc: dict[str, Any]) -> str:
    rows = doc["files"]
    done = [r for r in rows if r["translated"]]
    refused = [r for r in rows if not r["translated"]]
    times = [r["seconds"] * 1000 for r in rows]
    lines = [
        f"# fio's examples through `tilemark import-fio`, {doc['date']}",
        "",
        f"{doc['label']}: {len(rows)} job files; **{len(done)} translate, {len(refused)} are "
        "refused** in one sentence naming the option (no traceback). Translation took "
        f"{statistics.median(times):.1f} ms median, {max(times):.1f} ms at most per file "
        f"(parsing only; `{doc['command']}`).",
        "",
        "## Translated",
        "",
        "| file | streams | phases | notes |",
        "|---|---|---|---|",
    ]
    for r in done:
        lines.append(
            f"| {r['file']} | {r['streams']} | {'yes' if r['phased'] else ''} | {len(r['notes'])} |"
        )
    by_group = collections.Counter(r["group"] for r in refused)
    lines += [
        "",
        "## Refused, by the reason the user is given",
        "",
        "| reason (group) | files |",
        "|---|---|",
    ]
    for group, count in by_group.most_common():
        names = ", ".join(r["file"].removesuffix(".fio") for r in refused if r["group"] == group)
        lines.append(f"| {group} | {count}: {names} |")
    own = [r for r in refused if r["group"] != "ioengine"]
    every = collections.Counter(key for r in own for key in {b["key"] for b in r["blockers"]})
    groups = collections.Counter(g for r in own for g in {b["group"] for b in r["blockers"]})
    lines += [
        "",
        f"## Every blocker of the {len(own)} refused files whose engine tilemark stands in for",
        "",
        "A file counts once per option (and once per group); the files of other engines are "
        "left out, their other options being that engine's.",
        "",
        "By group: " + ", ".join(f"{group} {count}" for group, count in groups.most_common()) + ".",
        "",
        "By option: " + ", ".join(f"`{key}` {count}" for key, count in every.most_common()) + ".",
        "",
        "## Each refused file",
        "",
        "| file | what the user reads |",
        "|---|---|",
    ]
    for r in refused:
        sentence = r["refusal"].replace("|", "\\|")
        lines.append(f"| {r['file']} | {sentence} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("examples", type=Path, help="fio's examples/ directory")
    p.add_argument("--label", default="fio's examples", help="what the directory is")
    args = p.parse_args(argv)
    sys.path.insert(0, str(REPO / "python"))
    rows = examine_all(args.examples)
    date = datetime.now(UTC)
    doc = {
        "date": date.isoformat(timespec="seconds"),
        "label": args.label,
        "command": " ".join(["bench/fio_corpus.py", *(argv or sys.argv[1:])]),
        "files": rows,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = RESULTS / f"{date:%Y-%m-%d}-fio-corpus"
    stem.with_suffix(".json").write_text(json.dumps(doc, indent=1))
    stem.with_suffix(".md").write_text(markdown(doc))
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
