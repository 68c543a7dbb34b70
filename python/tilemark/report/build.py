"""The report of whatever a name points at: a run or a study."""

from __future__ import annotations

from tilemark.report.base import Report
from tilemark.report.data import Source, StudyData
from tilemark.report.points_report import POINT_KINDS, points_report
from tilemark.report.repeat_report import repeat_report
from tilemark.report.run_report import run_report
from tilemark.report.study_report import study_report

__all__ = ["build_report"]


def build_report(source: Source) -> Report:
    """The report of a run or a study."""
    if isinstance(source, StudyData):
        if source.kind in POINT_KINDS:
            return points_report(source)
        return repeat_report(source) if source.kind == "repeat" else study_report(source)
    if source.typed.kind == "files":
        from tilemark.report.files_report import files_report

        return files_report(source)
    return run_report(source)
