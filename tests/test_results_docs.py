"""The typed results documents (store/results.py): every document tilemark writes reads typed,
a wrong type is one sentence naming its field, and docs/results-schema.md shows the classes as
they are."""

from __future__ import annotations

from pathlib import Path

import pytest

from report_runs import simple_plan, write_run, write_study
from tilemark.store import results
from tilemark.store.rundoc import read_run_json

DOCS = Path(__file__).resolve().parents[1] / "docs" / "results-schema.md"


def test_written_runs_and_studies_read_typed(tmp_path):
    run_dir = write_run(tmp_path / "r", simple_plan(("randrw", "log")), intervals=3, warmup=0)
    doc = results.read_run(read_run_json(run_dir))
    assert doc.run_id == run_dir.name and doc.summary is not None
    assert [s.name for s in doc.summary.streams] == ["randrw", "log"]
    assert doc.summary.total.iops > 0 and doc.plan.streams[1].name == "log"
    study_dir = write_study(tmp_path / "s", (1, 2), latency_per_tile=1.0)
    study = results.read_study((study_dir / "study.json").read_bytes())
    assert study.kind == "scale" and [s.tiles for s in study.steps] == [1, 2]


@pytest.mark.parametrize(
    ("doc", "said"),
    [
        ({"summary": "x"}, "field summary is a string, not an object"),
        (
            {"summary": {"total": {"iops": "fast"}}},
            "field summary.total.iops is a string, not a number",
        ),
        ({"argv": [1]}, "field argv[0] is a number, not a string"),
        ({"hosts": [{"name": "a"}]}, "hosts[0]"),
    ],
)
def test_a_wrong_type_is_one_sentence_naming_the_field(doc, said):
    assert said in (results.run_problem(doc) or "")


def test_unknown_fields_are_kept_out_of_the_view_but_never_refused():
    assert results.run_problem({"run_id": "x", "from_a_newer_tilemark": {"a": 1}}) is None


def test_the_typed_fields_of_docs_results_schema_are_generated_from_the_classes():
    text = DOCS.read_text()
    assert results.update_docs(text) == text, "run `make docs` (python -m tilemark.store.results)"
    assert "### StreamSummary" in text and "| `iops` | `float` |" in text
