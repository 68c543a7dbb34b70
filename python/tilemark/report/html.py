"""One self-contained, offline HTML file: verdict, charts (Vega-Lite), tables, provenance.

The Vega libraries are inlined (report.vega), so the file opens without network. Chart data
are stored once per page, column-wise, and shared by the charts that draw them: the
per-stream series of a long run are drawn by three charts but stored once.
"""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tilemark.report.base import Caution, Figure, Report, Table
from tilemark.report.charts import rounded
from tilemark.report.data import relpath
from tilemark.report.vega import javascript_bundle
from tilemark.store.outputs import starts_with, write_file

# What makes an existing HTML file a tilemark report, which a new report may replace.
GENERATOR_MARK = b'<meta name="generator" content="tilemark'

CSS = """
:root { --fg:#1f2328; --muted:#59636e; --line:#d1d9e0; --pass:#1a7f37; --fail:#cf222e;
        --warn:#9a6700; --info:#0969da; --bg2:#f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Liberation Sans", sans-serif;
       color: var(--fg); margin: 0; }
main { max-width: 1180px; margin: 0 auto; padding: 20px 28px 60px; }
h1 { font-size: 22px; margin: 0 0 2px; }
h2 { font-size: 18px; margin: 30px 0 10px; border-bottom: 1px solid var(--line);
     padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
.meta, figcaption, .caption { color: var(--muted); font-size: 12.5px; }
nav { margin: 10px 0 0; font-size: 13px; } nav a { margin-right: 14px; color: var(--info); }
.verdict { border: 1px solid var(--line); border-left: 6px solid var(--info); border-radius: 6px;
  padding: 14px 18px; margin-top: 16px; background: #fff; }
.verdict.pass { border-left-color: var(--pass); } .verdict.fail { border-left-color: var(--fail); }
.verdict.warn { border-left-color: var(--warn); }
.verdict .headline { font-size: 20px; font-weight: 600; margin: 0 0 10px; }
.verdict.pass .headline { color: var(--pass); } .verdict.fail .headline { color: var(--fail); }
.facts { display: flex; flex-wrap: wrap; gap: 8px 26px; margin: 6px 0 12px; }
.fact .v { font-size: 19px; font-weight: 600; } .fact .k { color: var(--muted); font-size: 12px; }
.notes { margin: 4px 0 10px; padding-left: 18px; color: var(--muted); }
.notes li.warn { color: var(--warn); }
dl.tested { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 8px 0; }
dl.tested dt { color: var(--muted); } dl.tested dd { margin: 0; font-family: ui-monospace,
  "DejaVu Sans Mono", monospace; font-size: 12.5px; }
figure { margin: 14px 0 22px; } .chart { min-height: 60px; overflow-x: auto; }
table { border-collapse: collapse; margin: 6px 0 4px; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: var(--bg2); font-weight: 600; } td.num { text-align: right;
  font-variant-numeric: tabular-nums; white-space: nowrap; }
td.pass { color: var(--pass); font-weight: 600; } td.fail { color: var(--fail); font-weight: 600; }
td.warn { color: var(--warn); } .tablewrap { overflow-x: auto; }
details { margin: 8px 0; } summary { cursor: pointer; font-weight: 600; }
pre { background: var(--bg2); padding: 10px; overflow: auto; font-size: 12px; max-height: 480px; }
ul.links li { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12.5px; }
.vega-embed .vega-bindings { font-size: 12.5px; margin-top: 4px; }
"""

# Rebuilds each chart's datasets from the page's column-wise store (a fresh copy per chart:
# Vega tags the objects it ingests), then renders every chart with vega-embed.
SCRIPT = """
(function () {
  var store = JSON.parse(document.getElementById('tm-datasets').textContent);
  var specs = JSON.parse(document.getElementById('tm-specs').textContent);
  function rows(name) {
    var d = store[name], cols = d.c, vals = d.v, keys = d.k || {};
    var n = vals.length ? vals[0].length : 0, out = new Array(n);
    for (var i = 0; i < n; i++) {
      var o = {};
      for (var c = 0; c < cols.length; c++) {
        var v = vals[c][i];
        if (v === null) continue;
        o[cols[c]] = keys[c] ? keys[c][v] : v;
      }
      out[i] = o;
    }
    return out;
  }
  Object.keys(specs).forEach(function (id) {
    var spec = specs[id], names = spec.__datasets || [];
    delete spec.__datasets;
    spec.datasets = {};
    names.forEach(function (n) { spec.datasets[n] = rows(n); });
    var el = document.getElementById('chart-' + id);
    vegaEmbed(el, spec, {renderer: 'svg',
        actions: {export: true, source: false, compiled: false, editor: false}})
      .then(function () { el.setAttribute('data-rendered', 'yes'); })
      .catch(function (e) { el.textContent = 'chart failed to render: ' + e; console.error(e); });
  });
})();
"""


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _script_json(doc: Any) -> str:
    """JSON safe inside <script>: no '</' can close the element."""
    return json.dumps(doc, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")


def _columnar(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Rows as columns; repetitive string columns (stream names) as codes into a key list."""
    cols: list[str] = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    values = []
    keys: dict[str, list[str]] = {}
    for i, c in enumerate(cols):
        column = [rounded(r.get(c)) for r in rows]
        distinct = {v for v in column if v is not None}
        if (
            distinct
            and all(isinstance(v, str) for v in distinct)
            and len(distinct) * 2 < len(column)
        ):
            ordered = sorted(distinct)
            code = {v: n for n, v in enumerate(ordered)}
            column = [None if v is None else code[v] for v in column]
            keys[str(i)] = ordered
        values.append(column)
    out: dict[str, Any] = {"c": cols, "v": values}
    if keys:
        out["k"] = keys
    return out


def _table(t: Table) -> str:
    head = "".join(f"<th>{_esc(c)}</th>" for c in t.columns)
    body = []
    for row in t.rows:
        cells = "".join(
            f'<td class="{_esc(c.state)}">{_esc(c.text)}</td>'
            if c.state
            else f"<td>{_esc(c.text)}</td>"
            for c in row
        )
        body.append(f"<tr>{cells}</tr>")
    caption = f'<p class="caption">{_esc(t.caption)}</p>' if t.caption else ""
    return (
        f'<h3 id="{_esc(t.id)}">{_esc(t.title)}</h3><div class="tablewrap"><table>'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>{caption}"
    )


def _figure(f: Figure) -> str:
    caption = f"<figcaption>{_esc(f.caption)}</figcaption>" if f.caption else ""
    return (
        f'<figure><div class="chart" id="chart-{_esc(f.id)}" role="img" '
        f'aria-label="{_esc(f.title)}"></div>{caption}</figure>'
    )


def render(report: Report, out_path: Path) -> str:
    """The HTML text of a report that will be written to `out_path` (links are relative)."""
    out_dir = Path(out_path).resolve().parent
    store: dict[str, Any] = {}
    specs: dict[str, Any] = {}
    for fig in report.figures():
        spec = fig.spec()
        datasets = spec.pop("datasets", {}) or {}
        for name, values in datasets.items():
            if name not in store:
                store[name] = _columnar(values)
        spec["__datasets"] = sorted(datasets)
        specs[fig.id] = spec
    v = report.verdict
    facts = "".join(
        f'<div class="fact"><div class="v">{_esc(val)}</div><div class="k">{_esc(k)}</div></div>'
        for k, val in v.facts
    )
    notes = "".join(
        f'<li class="warn">{_esc(n)}</li>' if isinstance(n, Caution) else f"<li>{_esc(n)}</li>"
        for n in v.notes
    )
    tested = "".join(f"<dt>{_esc(k)}</dt><dd>{_esc(val)}</dd>" for k, val in v.tested)
    parts = [
        f'<section class="verdict {_esc(v.status)}" id="verdict">',
        f'<p class="headline">{_esc(v.headline)}</p>',
        f'<div class="facts">{facts}</div>' if facts else "",
        f'<ul class="notes">{notes}</ul>' if notes else "",
        f'<dl class="tested">{tested}</dl>' if tested else "",
        _table(v.criteria) if v.criteria is not None else "",
        "</section>",
    ]
    nav = ['<a href="#verdict">verdict</a>']
    for s in report.sections:
        nav.append(f'<a href="#{_esc(s.id)}">{_esc(s.title)}</a>')
        parts.append(f'<section id="{_esc(s.id)}"><h2>{_esc(s.title)}</h2>')
        if s.intro:
            parts.append(f'<p class="caption">{_esc(s.intro)}</p>')
        for item in s.items:
            parts.append(_figure(item) if isinstance(item, Figure) else _table(item))
        parts.append("</section>")
    nav += ['<a href="#raw">raw data</a>', '<a href="#details">plan and environment</a>']
    links = "".join(
        f'<li><a href="{_esc(relpath(path, out_dir))}">{_esc(label)}</a></li>'
        for label, path in report.links
    )
    parts.append(
        '<section id="raw"><h2>Raw data</h2><p class="caption">Paths relative to this file; '
        "the report never changes them.</p>"
        f'<ul class="links">{links}</ul></section>'
    )
    details = "".join(
        f"<details><summary>{_esc(k)}</summary><pre>{_esc(json.dumps(val, indent=2))}</pre>"
        "</details>"
        for k, val in report.details.items()
    )
    parts.append(
        '<section id="details"><h2>Plan and environment</h2>'
        f"<details><summary>Full plan and environment</summary>{details}</details></section>"
    )
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="{_esc(report.generated_by)}">'
        f"<title>{_esc(report.title)}</title><style>{CSS}</style></head><body><main>"
        f"<header><h1>{_esc(report.title)}</h1>"
        f'<div class="meta">generated {generated} by {_esc(report.generated_by)}</div>'
        f"<nav>{''.join(nav)}</nav></header>" + "".join(parts) + "</main>"
        f"<script>{javascript_bundle()}</script>"
        f'<script type="application/json" id="tm-datasets">{_script_json(store)}</script>'
        f'<script type="application/json" id="tm-specs">{_script_json(specs)}</script>'
        f"<script>{SCRIPT}</script></body></html>\n"
    )


class HtmlExporter:
    """Writes the report as one HTML file at `dest`."""

    def export(self, report: Report, dest: Path, *, force: bool = False) -> list[Path]:
        """Written as store.outputs does: through a new file renamed into place (a full disk
        leaves no partial file), never through a link, and over an existing file only when it
        is a tilemark report (its generator line) or `force`."""
        dest = Path(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        text = render(report, dest)
        write_file(dest, text, force=force, ours=starts_with(GENERATOR_MARK), what="the report")
        return [dest]
