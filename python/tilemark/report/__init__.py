"""Reports of runs, studies and comparisons: HTML, PNG/SVG and CSV behind one interface.

One module per report kind turns stored results (data.py) into a format-free Report
(base.py): run_report.py, study_report.py, compare_report.py; build.py picks the run or study
report for a source. Their shared text (numbers, marks, provenance) is in format.py, every
Altair chart in charts.py. Each exporter writes one format: html.py, png.py, csv.py.
"""

from tilemark.report.base import Exporter, Figure, Report, Section, Table, Verdict
from tilemark.report.build import build_report
from tilemark.report.compare_report import compare_report
from tilemark.report.csv import CsvExporter
from tilemark.report.html import HtmlExporter
from tilemark.report.png import PngExporter

REPORT_FILE = "report.html"

__all__ = [
    "REPORT_FILE",
    "CsvExporter",
    "Exporter",
    "Figure",
    "HtmlExporter",
    "PngExporter",
    "Report",
    "Section",
    "Table",
    "Verdict",
    "build_report",
    "compare_report",
]
