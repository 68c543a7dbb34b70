"""Every figure of a report as PNG and SVG, rendered by vl-convert (no browser)."""

from __future__ import annotations

from pathlib import Path

import vl_convert as vlc

from tilemark.report.base import Report
from tilemark.report.vega import vl_version
from tilemark.store.outputs import OutputDir

PNG_SCALE = 2  # pixels per CSS pixel: sharp on high-density screens and in slides


class PngExporter:
    """Writes <figure id>.png and <figure id>.svg into a directory."""

    def export(self, report: Report, dest: Path, *, force: bool = False) -> list[Path]:
        """Figures written as store.outputs does (no links followed, no foreign file replaced
        unless `force`)."""
        written = []
        with OutputDir(Path(dest), force=force, what="--png file") as out:
            for fig in report.figures():
                spec = fig.spec()
                svg = vlc.vegalite_to_svg(spec, vl_version=vl_version())
                png = vlc.vegalite_to_png(spec, vl_version=vl_version(), scale=PNG_SCALE)
                written += [out.write(f"{fig.id}.png", png), out.write(f"{fig.id}.svg", svg)]
        return written
