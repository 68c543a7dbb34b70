"""Every figure of a report as PNG and SVG, rendered by vl-convert (no browser)."""

from __future__ import annotations

from pathlib import Path

import vl_convert as vlc

from tilemark.report.base import Report
from tilemark.report.vega import vl_version

PNG_SCALE = 2  # pixels per CSS pixel: sharp on high-density screens and in slides


class PngExporter:
    """Writes <figure id>.png and <figure id>.svg into a directory."""

    def export(self, report: Report, dest: Path) -> list[Path]:
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        written = []
        for fig in report.figures():
            spec = fig.spec()
            svg = dest / f"{fig.id}.svg"
            svg.write_text(vlc.vegalite_to_svg(spec, vl_version=vl_version()), encoding="utf-8")
            png = dest / f"{fig.id}.png"
            png.write_bytes(vlc.vegalite_to_png(spec, vl_version=vl_version(), scale=PNG_SCALE))
            written += [png, svg]
        return written
