"""The Vega, Vega-Lite and vega-embed JavaScript that reports inline, from vl-convert.

vl-convert-python ships these libraries (no network, no browser); its bundle exposes
`vega`, `vegaLite` and `vegaEmbed` on `window`. Building the bundle takes about a second, so
it is cached per library version under the user's cache directory.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import altair as alt
import vl_convert as vlc


@cache
def vl_version() -> str:
    """The Vega-Lite version (major.minor) Altair writes specs for, as vl-convert names it."""
    wanted = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    known = vlc.get_vegalite_versions()
    if wanted in known:
        return wanted
    # Altair newer than this vl-convert: the newest Vega-Lite it has.
    return known[-1]


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tilemark"


@cache
def javascript_bundle() -> str:
    """Vega + Vega-Lite + vega-embed as one classic script."""
    key = f"vega-{vlc.get_vega_version()}-vl-{vl_version()}-embed-{vlc.get_vega_embed_version()}"
    cached = _cache_dir() / f"{key}.js"
    try:
        return cached.read_text(encoding="utf-8")
    except OSError:
        pass
    bundle = vlc.javascript_bundle(vl_version=vl_version())
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f".{cached.name}.{os.getpid()}.tmp")
        tmp.write_text(bundle, encoding="utf-8")
        os.replace(tmp, cached)
    except OSError:
        pass  # a read-only home only costs the rebuild next time
    return bundle
