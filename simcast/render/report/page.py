"""The self-contained HTML page of a report: skeleton, style, script and the small pieces every report uses.

One file, no network: the style and the script are inline, charts are inline SVG (matplotlib's SVG backend,
the notebooks' look), text uses the reader's system sans-serif font (no web font is fetched). The script only
sorts tables, copies launch lines and shows a point's layout on hover; the page reads fully without it.
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Sequence

from matplotlib import rc_context
from matplotlib.figure import Figure

STYLE = """
:root { --fg: #1f2328; --muted: #57606a; --line: #d0d7de; --best: #fff5d6; --pareto: #e8f3ff; --accent: #4C72B0; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  color: var(--fg); background: #fff; margin: 0 auto; max-width: 1280px; padding: 24px 32px; line-height: 1.45; }
h1 { font-size: 1.5rem; margin: 0 0 4px; } h2 { font-size: 1.2rem; margin: 28px 0 8px;
  border-bottom: 1px solid var(--line); padding-bottom: 4px; } h3 { font-size: 1rem; margin: 16px 0 6px; }
.question { color: var(--muted); margin: 0 0 16px; }
.answer { font-size: 1.1rem; background: var(--best); border: 1px solid #e6d38a; border-radius: 6px;
  padding: 12px 16px; margin: 8px 0 16px; }
.answer b { font-size: 1.2rem; }
table { border-collapse: collapse; font-size: 0.8rem; font-variant-numeric: tabular-nums; margin: 8px 0; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 5px; text-align: right; white-space: nowrap; }
th { background: #f6f8fa; white-space: normal; vertical-align: bottom; }
.scroll { overflow-x: auto; }
th.sortable { cursor: pointer; } th.sortable::after { content: " \\2195"; color: #8c959f; font-size: 0.75em; }
td.text, th.text { text-align: left; }
tr.best td { background: var(--best); font-weight: 600; } tr.pareto td { background: var(--pareto); }
.legend-chip { display: inline-block; width: 0.9em; height: 0.9em; border: 1px solid #999; vertical-align: -1px; }
.chip-best { background: var(--best); } .chip-pareto { background: var(--pareto); }
.charts { display: flex; flex-wrap: wrap; gap: 16px; }
figure { margin: 8px 0 16px; } figure svg { max-width: 100%; height: auto; }
figcaption { color: var(--muted); font-size: 0.85rem; }
pre { background: #f6f8fa; border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px;
  font-size: 0.8rem; overflow-x: auto; white-space: pre-wrap; margin: 4px 0 0; }
.copy { font-size: 0.75rem; margin: 8px 0 0; cursor: pointer; border: 1px solid var(--line);
  background: #fff; border-radius: 4px; padding: 2px 8px; }
details { border: 1px solid var(--line); border-radius: 6px; padding: 6px 12px; margin: 8px 0; }
summary { cursor: pointer; font-weight: 600; }
ul.assumptions { font-size: 0.85rem; color: #333; padding-left: 20px; } ul.assumptions li { margin: 3px 0; }
.muted { color: var(--muted); font-size: 0.85rem; }
#tip { position: fixed; pointer-events: none; background: #1f2328; color: #fff; font-size: 0.8rem;
  padding: 4px 8px; border-radius: 4px; display: none; z-index: 10; }
@media print { body { max-width: none; padding: 0; } .copy { display: none; } details { break-inside: avoid; }
  details:not([open]) > *:not(summary) { display: block; } th { position: static; } }
"""

SCRIPT = """
(function () {
  function cellValue(td) {
    var v = td.getAttribute('data-v');
    if (v !== null) { return parseFloat(v); }
    return td.textContent.trim().toLowerCase();
  }
  document.querySelectorAll('table.sortable').forEach(function (tbl) {
    tbl.querySelectorAll('th.sortable').forEach(function (th, col) {
      th.addEventListener('click', function () {
        var idx = Array.prototype.indexOf.call(th.parentNode.children, th);
        var body = tbl.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var dir = th.getAttribute('data-dir') === 'asc' ? -1 : 1;
        rows.sort(function (a, b) {
          var x = cellValue(a.cells[idx]), y = cellValue(b.cells[idx]);
          if (x < y) { return -dir; } if (x > y) { return dir; } return 0;
        });
        rows.forEach(function (r) { body.appendChild(r); });
        tbl.querySelectorAll('th').forEach(function (h) { h.removeAttribute('data-dir'); });
        th.setAttribute('data-dir', dir === 1 ? 'asc' : 'desc');
      });
    });
  });
  document.querySelectorAll('button.copy').forEach(function (b) {
    b.addEventListener('click', function () {
      var text = document.getElementById(b.getAttribute('data-for')).textContent;
      if (navigator.clipboard) { navigator.clipboard.writeText(text).catch(function () {}); }
      b.textContent = 'copied';
      setTimeout(function () { b.textContent = 'copy'; }, 1200);
    });
  });
  var tip = document.getElementById('tip');
  document.querySelectorAll('[data-tip]').forEach(function (g) {
    g.addEventListener('mousemove', function (e) {
      tip.textContent = g.getAttribute('data-tip'); tip.style.display = 'block';
      tip.style.left = (e.clientX + 12) + 'px'; tip.style.top = (e.clientY + 12) + 'px';
    });
    g.addEventListener('mouseleave', function () { tip.style.display = 'none'; });
  });
})();
"""


def esc(text: object) -> str:
    """HTML-escaped text of any value."""
    return html.escape(str(text), quote=True)


def document(title: str, body: str) -> str:
    """The whole page: ``title`` (plain text) and ``body`` (HTML), style and script inline."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="generator" content="simcast">\n'
        f"<title>{esc(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}\n"
        f'<div id="tip" role="tooltip"></div>\n<script>{SCRIPT}</script>\n</body>\n</html>\n'
    )


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[tuple[str, float | None]]],
    *,
    row_classes: Sequence[str] = (),
    text_cols: Sequence[int] = (),
    table_id: str = "",
) -> str:
    """A sortable table: each cell is ``(text, sort value)`` (None: sort by text); ``row_classes`` mark rows
    (``best``, ``pareto``); ``text_cols`` are left-aligned."""
    ths = "".join(
        f'<th class="sortable{" text" if i in text_cols else ""}" scope="col">{esc(h)}</th>'
        for i, h in enumerate(headers)
    )
    body = []
    for k, row in enumerate(rows):
        cls = row_classes[k] if k < len(row_classes) and row_classes[k] else ""
        tds = "".join(
            f"<td{' class=' + chr(34) + 'text' + chr(34) if i in text_cols else ''}"
            f"{'' if v is None else f' data-v={chr(34)}{v!r}{chr(34)}'}>{esc(t)}</td>"
            for i, (t, v) in enumerate(row)
        )
        body.append(f"<tr{f' class={chr(34)}{cls}{chr(34)}' if cls else ''}>{tds}</tr>")
    ident = f' id="{esc(table_id)}"' if table_id else ""
    return f'<div class="scroll"><table class="sortable"{ident}>\n<thead><tr>{ths}</tr></thead>\n<tbody>\n' + (
        "\n".join(body) + "\n</tbody>\n</table></div>"
    )


def code_block(block_id: str, text: str) -> str:
    """A preformatted block with a copy button."""
    return (
        f'<button class="copy" type="button" data-for="{esc(block_id)}">copy</button>'
        f'<pre id="{esc(block_id)}">{esc(text)}</pre>'
    )


_ID = re.compile(r'\bid="([^"]+)"')


def svg(fig: Figure, prefix: str, tips: dict[str, str] | None = None) -> str:
    """``fig`` as inline SVG: text kept as text (the page's font), no date, ids made unique to the page by
    ``prefix``; every group whose id is a key of ``tips`` gets that text as its hover tooltip (``data-tip``
    for the page's script and an SVG ``<title>`` for readers without it)."""
    buf = io.StringIO()
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "simcast"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, flags=re.S)  # RDF a validator refuses in HTML
    ids = set(_ID.findall(text))
    for ident in sorted(ids, key=len, reverse=True):
        new = f"{prefix}-{ident}"
        text = text.replace(f'id="{ident}"', f'id="{new}"').replace(f"#{ident})", f"#{new})")
        text = text.replace(f'href="#{ident}"', f'href="#{new}"')
    for gid, tip in (tips or {}).items():
        text = text.replace(
            f'<g id="{prefix}-{gid}">',
            f'<g id="{prefix}-{gid}" class="pt" data-tip="{esc(tip)}"><title>{esc(tip)}</title>',
        )
    return text


def figure(svg_text: str, caption: str) -> str:
    return f"<figure>\n{svg_text}\n<figcaption>{esc(caption)}</figcaption>\n</figure>"


def uncertainty_section(lines: list[str]) -> str:
    """The prediction intervals' lines (:mod:`simcast.render.interval_text`) as a section; empty without them."""
    if not lines:
        return ""
    head, rest = lines[0], lines[1:]
    items = "".join(f"<li>{esc(x.strip())}</li>" for x in rest)
    return f'<h2>How sure simcast is</h2>\n<p class="muted">{esc(head)}</p>\n<ul class="assumptions">{items}</ul>'
