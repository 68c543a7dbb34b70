"""Studies stored under <results>/studies/<id>/study.json, read for listings.

Only study.json files are read (the study package owns their format); every field is looked
up leniently so that study kinds with other fields still list.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tilemark.errors import excerpt
from tilemark.store import results
from tilemark.store.rundoc import RUN_JSON, inspect_run

STUDIES_DIR = "studies"
STUDY_FILE = "study.json"


def study_dirs(results_root: Path) -> list[Path]:
    """Directories under <results>/studies holding a study.json, by name."""
    base = Path(results_root) / STUDIES_DIR
    if not base.is_dir():
        return []
    return sorted(d for d in base.iterdir() if d.is_dir() and (d / STUDY_FILE).is_file())


def read_study(study_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(study.json, None), or (None, why it cannot be read): not JSON, not an object, or a
    field of the wrong type (store/results.py); such a study is `damaged`."""
    path = Path(study_dir) / STUDY_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        return None, f"{path} cannot be read as JSON: {excerpt(str(exc), 200)}"
    if not isinstance(doc, dict):
        return None, f"{path} is not a JSON object"
    wrong = results.study_problem(doc)
    if wrong is not None:
        return None, f"{path} cannot be read: its {wrong}"
    return doc, None


def step_run_dir(results_root: Path, step: dict[str, Any]) -> Path | None:
    """The run directory of a study step: <results>/<run_id>, else its recorded run_dir."""
    candidates = [Path(results_root) / str(step["run_id"])] if step.get("run_id") else []
    if step.get("run_dir"):
        candidates.append(Path(str(step["run_dir"])))
    return next((c for c in candidates if (c / RUN_JSON).is_file()), None)


def study_row(results_root: Path, study_dir: Path) -> dict[str, Any]:
    """One study as `tilemark studies` lists it."""
    # the study package (and with it pyarrow) only when a study is listed, not for `runs`
    from tilemark.study.answers import answer_phrase

    doc, problem = read_study(study_dir)
    row: dict[str, Any] = {"study_id": study_dir.name, "path": str(study_dir.resolve())}
    if doc is None:
        return {**row, "status": "damaged", "problem": problem}
    typed = results.read_study(doc)  # read_study checked its shape
    steps = [s for s in doc.get("steps") or [] if isinstance(s, dict)]
    run_dirs = [step_run_dir(results_root, s) for s in steps]
    status = "complete" if doc.get("complete") else "incomplete"
    last = next((d for d in reversed(run_dirs) if d is not None), None)
    if not doc.get("complete") and last is not None:
        # A study in progress is as alive as its latest step run.
        last_status = inspect_run(last).status
        if last_status in ("running", "killed"):
            status = last_status
    tile = doc.get("tile")
    return {
        **row,
        "study_id": str(doc.get("study_id") or study_dir.name),
        "kind": doc.get("kind"),
        "label": doc.get("label"),
        "started_at": doc.get("started_at"),
        "ended_at": doc.get("ended_at"),
        "tile": tile.get("name") if isinstance(tile, dict) else tile,
        "mode": doc.get("mode"),
        "steps": len(steps),
        "steps_missing": sum(d is None for d in run_dirs),
        "max_passing_tiles": doc.get("max_passing_tiles"),
        "knob": doc.get("knob"),  # studies of an application knob (study.json 2)
        "max_passing_value": doc.get("max_passing_value"),
        # the answer with its caveats: "at least 4 (the range's top)", "10 (11 inconclusive)"
        "answer": answer_phrase(typed) if typed.kind in ("scale", "knob") else None,
        "score_at_max": doc.get("score_at_max"),
        "verdict": doc.get("verdict"),  # repeat studies: stable, decaying, improving, inconclusive
        # sweeps, matrices and curves (study/points.py, study/curve.py)
        "points_measured": doc.get("points_measured", doc.get("cells_measured")),
        "max_iops": doc.get("max_iops"),
        "slo": doc.get("slo"),
        "slo_iops": doc.get("slo_iops"),
        "status": status,
        "problem": None,
        "run_ids": [s.get("run_id") for s in steps],
    }


def list_studies(results_root: Path) -> list[dict[str, Any]]:
    """Every study under a results directory, newest first (study ids start with the time)."""
    rows = [study_row(results_root, d) for d in study_dirs(results_root)]
    return sorted(rows, key=lambda r: (r.get("started_at") or "", r["study_id"]), reverse=True)


def steps_of_studies(results_root: Path) -> dict[str, str]:
    """run id -> id of the study it is a step of."""
    out = {}
    for study_dir in study_dirs(results_root):
        doc, _ = read_study(study_dir)
        for step in (doc or {}).get("steps") or []:
            if isinstance(step, dict) and step.get("run_id"):
                out[str(step["run_id"])] = str((doc or {}).get("study_id") or study_dir.name)
    return out
