"""The report document and the exporter interface every output format implements.

A Report is format-free: a verdict, sections of figures (Altair charts) and tables, the full
provenance, and links to the raw files. Exporters (html.py, png.py, csv.py) turn it into
files, the way hyperfine's exporters each own one format behind one small trait.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import altair as alt

LEGEND_LABEL_LIMIT_PX = 400
LEGEND_SYMBOL_LIMIT = 200


@dataclass
class Figure:
    """One chart; `id` names its PNG/SVG file and its HTML container."""

    id: str
    title: str
    chart: alt.TopLevelMixin
    caption: str = ""

    def spec(self) -> dict[str, Any]:
        """The Vega-Lite specification, its data under top-level `datasets`. Legends show every
        entry and their whole labels (Vega's defaults cut a legend at 30 entries with
        "…N entries" and a label at 160 px with "…"): a chart with too many lines for a legend
        offers a picker instead (charts.MAX_LINES).

        Not validated against the Vega-Lite JSON schema: that check costs more than half of
        turning a chart into a spec (0.16 s of a run report) and only finds bugs in
        tilemark's own charts, which the tests look for (test_report.py validates the figures
        of run, tile and study reports; the browser tests fail on any warning Vega-Lite logs
        while compiling every kind of report)."""
        from tilemark.report.charts import with_datasets

        spec = with_datasets(self.chart.to_dict(validate=False))
        legend = spec.setdefault("config", {}).setdefault("legend", {})
        legend.setdefault("labelLimit", LEGEND_LABEL_LIMIT_PX)
        legend.setdefault("symbolLimit", LEGEND_SYMBOL_LIMIT)
        return spec


@dataclass
class Cell:
    """A table cell: its text and an optional state ("pass", "fail", "warn", "num")."""

    text: str
    state: str = ""


@dataclass
class Table:
    """A titled table of cells; `raw` keeps machine values for CSV export."""

    id: str
    title: str
    columns: list[str]
    rows: list[list[Cell]]
    caption: str = ""


@dataclass
class Section:
    id: str
    title: str
    items: list[Figure | Table] = field(default_factory=list)
    intro: str = ""


class Caution(str):
    """A note of the verdict that warns (tool-bound, failed IOs, an answer that is a range):
    shown in the warning colour; every other note is neutral."""

    __slots__ = ()


@dataclass
class Verdict:
    """What was tested, on what, and what came out: shown first."""

    headline: str
    status: str  # "pass", "fail", "info" or "warn": the verdict box's colour
    facts: list[tuple[str, str]] = field(default_factory=list)  # big numbers
    tested: list[tuple[str, str]] = field(default_factory=list)  # what, on what
    notes: list[str] = field(default_factory=list)
    criteria: Table | None = None


@dataclass
class Report:
    """A format-free report of a run, a study or a comparison."""

    kind: str  # "run", "tiles", "study", "compare"
    title: str
    verdict: Verdict
    sections: list[Section] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)  # plan, environment, ...: as JSON
    links: list[tuple[str, Path]] = field(default_factory=list)  # label, absolute path
    home: Path | None = None  # the run or study directory (default output location)
    source: Any = None  # RunData / StudyData / Comparison, for exporters that need raw data
    generated_by: str = ""

    def figures(self) -> list[Figure]:
        return [i for s in self.sections for i in s.items if isinstance(i, Figure)]

    def tables(self) -> list[Table]:
        tables = [i for s in self.sections for i in s.items if isinstance(i, Table)]
        if self.verdict.criteria is not None:
            tables.insert(0, self.verdict.criteria)
        return tables


class Exporter(Protocol):
    """One output format. `export` writes under `dest` and returns the files it wrote."""

    def export(self, report: Report, dest: Path) -> list[Path]: ...
