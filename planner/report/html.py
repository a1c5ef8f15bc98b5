"""A report :class:`~planner.report.document.Document` as one stand-alone HTML
page: inline CSS, inline SVG charts, no scripts, fonts or images fetched from
anywhere, and a print stylesheet (A4, big tables start on a new page).

Every string from the document is escaped with :func:`html.escape`; the only
markup not built here is the charts' SVG, which matplotlib wrote from numbers
and escaped labels.
"""

from __future__ import annotations

import html
import re

from planner.report.document import (
    Block,
    Bullets,
    Charts,
    Code,
    Document,
    Heading,
    Para,
    Run,
    Section,
    Strong,
    Table,
)

CSS = """
:root {
  --ink: #1d2329; --muted: #5d6873; --line: #dbe1e6; --soft: #f4f6f8;
  --accent: #2f6db5; --ok: #2a7a4b; --warn: #a45d00; --bad: #b3261e;
}
* { box-sizing: border-box; }
html { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
body {
  margin: 0; color: var(--ink); background: #fff;
  font: 15px/1.5 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
    "Liberation Sans", "DejaVu Sans", sans-serif;
}
main { max-width: 1180px; margin: 0 auto; padding: 28px 36px 48px; }
a { color: var(--accent); }
.kicker { text-transform: uppercase; letter-spacing: .08em; font-size: 12px;
  color: var(--muted); font-weight: 600; }
h1 { font-size: 28px; line-height: 1.2; margin: 4px 0 10px; }
.meta { display: flex; flex-wrap: wrap; gap: 6px 18px; margin: 0 0 18px; padding: 0;
  font-size: 13px; color: var(--muted); list-style: none; }
.meta b { color: var(--ink); font-weight: 600; }
.meta .hash { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace;
  font-size: 12px; overflow-wrap: anywhere; }
.headline { font-size: 24px; font-weight: 700; line-height: 1.25; margin: 0 0 16px;
  padding: 14px 18px; border-left: 6px solid var(--ok); background: var(--soft);
  border-radius: 0 6px 6px 0; }
.headline.warn { border-color: var(--warn); }
.headline.bad { border-color: var(--bad); }
.figures { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr));
  gap: 10px; margin: 0 0 18px; }
.figure { border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; }
.figure .label { font-size: 11.5px; text-transform: uppercase; letter-spacing: .06em;
  color: var(--muted); font-weight: 600; }
.figure .value { font-size: 22px; font-weight: 700; font-variant-numeric: tabular-nums;
  white-space: nowrap; }
.figure .sub { font-size: 12px; color: var(--muted); }
p { margin: 8px 0; }
p.lead { font-size: 16.5px; }
p.note { font-size: 13px; color: var(--muted); }
p.warn { padding: 8px 12px; background: #fff4e5; border-left: 4px solid var(--warn); }
p.ok { color: var(--ok); font-weight: 600; }
ul { margin: 6px 0 10px; padding-left: 22px; }
li { margin: 3px 0; }
nav.toc { font-size: 13px; color: var(--muted); margin: 10px 0 4px; }
nav.toc a { color: var(--accent); text-decoration: none; margin-right: 14px; white-space: nowrap; }
section { margin-top: 30px; }
h2 { font-size: 20px; margin: 0 0 10px; padding-bottom: 6px; border-bottom: 2px solid var(--ink); }
h2 .n { color: var(--muted); font-weight: 600; margin-right: 8px; }
h3 { font-size: 15.5px; margin: 18px 0 6px; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(430px, 1fr));
  gap: 16px 24px; margin: 14px 0 4px; }
figure { margin: 0; break-inside: avoid; }
figcaption { font-size: 12.5px; color: var(--muted); margin-top: 2px; }
.table-wrap { overflow-x: auto; margin: 8px 0 10px; }
table { border-collapse: collapse; width: 100%; font-size: 13.5px; }
table.small { font-size: 12.5px; }
caption { text-align: left; font-size: 12.5px; color: var(--muted); padding-bottom: 4px; }
th { text-align: left; background: var(--soft); font-weight: 600; border-bottom: 1px solid #c5ccd3;
  padding: 6px 8px; vertical-align: bottom; }
td { padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.wrap { overflow-wrap: anywhere; min-width: 12em; }
td.nw { white-space: nowrap; }
table.narrow { width: auto; min-width: 55%; }
tr.total td { font-weight: 700; border-top: 2px solid var(--ink); border-bottom: none; }
td.no { color: var(--bad); font-weight: 700; }
.code { margin: 6px 0 10px; }
.code .label { font-size: 11.5px; font-weight: 700; color: var(--muted); text-transform: uppercase;
  letter-spacing: .06em; }
pre { margin: 2px 0 0; padding: 8px 10px; background: var(--soft);
  border-left: 3px solid var(--accent);
  font: 12.5px/1.45 ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace;
  white-space: pre-wrap; overflow-wrap: anywhere; }
footer { margin-top: 36px; padding-top: 10px; border-top: 1px solid var(--line); font-size: 12px;
  color: var(--muted); }
@media print {
  @page { size: A4; margin: 13mm 12mm; }
  body { font-size: 10pt; }
  main { max-width: none; padding: 0; }
  nav.toc { display: none; }
  h1 { font-size: 20pt; }
  .headline { font-size: 15pt; }
  .figures { grid-template-columns: repeat(auto-fit, minmax(95px, 1fr)); gap: 6px; }
  .figure { padding: 6px 8px; }
  .figure .value { font-size: 13pt; }
  .figure .label, .figure .sub { font-size: 7pt; }
  .charts { grid-template-columns: 1fr 1fr; }
  section.page-break { break-before: page; }
  h2, h3 { break-after: avoid; }
  .table-wrap { overflow: visible; }
  table { font-size: 8.5pt; }
  table.small { font-size: 7.5pt; }
  thead { display: table-header-group; }
  tr, pre, .figure { break-inside: avoid; }
  pre { font-size: 7.5pt; }
  a { color: inherit; text-decoration: none; }
}
"""

_URL = re.compile(r"^https?://\S+\Z")


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def runs(items: list[Run]) -> str:
    return "".join(
        f"<strong>{esc(r.text)}</strong>" if isinstance(r, Strong) else esc(r) for r in items
    )


def cell(text: str) -> str:
    """A table cell's text: lines become <br>, a line that is a URL a link."""
    out = []
    for line in str(text).split("\n"):
        if _URL.match(line):
            out.append(f'<a href="{esc(line)}">{esc(line)}</a>')
        else:
            out.append(esc(line))
    return "<br>".join(out)


def table(t: Table) -> str:
    klasses = ["small"] if t.small else []
    if len(t.headers) <= 6 and all(len(c) <= 60 for row in t.rows for c in row):
        klasses.append("narrow")
    cls = f' class="{" ".join(klasses)}"' if klasses else ""
    numeric = t.numeric or [False] * len(t.headers)
    head = "".join(
        f'<th class="num">{esc(h)}</th>' if n else f"<th>{esc(h)}</th>"
        for h, n in zip(t.headers, numeric, strict=True)
    )
    body = []
    for i, row in enumerate(t.rows):
        tr = ' class="total"' if t.total_last and i == len(t.rows) - 1 else ""
        tds = []
        for c, n in zip(row, numeric, strict=True):
            klass = []
            if n:
                klass.append("num")
            elif len(c) > 60:
                klass.append("wrap")
            elif max(len(line) for line in c.split("\n")) <= 18:
                klass.append("nw")
            if c == "NO":
                klass.append("no")
            attr = f' class="{" ".join(klass)}"' if klass else ""
            tds.append(f"<td{attr}>{cell(c)}</td>")
        body.append(f"<tr{tr}>{''.join(tds)}</tr>")
    caption = f"<caption>{esc(t.caption)}</caption>" if t.caption else ""
    return (
        f'<div class="table-wrap"><table{cls}>{caption}<thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def block(b: Block) -> str:
    if isinstance(b, Para):
        klass = f' class="{esc(b.kind)}"' if b.kind != "p" else ""
        mark = "✓ " if b.kind == "ok" else ""
        return f"<p{klass}>{mark}{runs(b.runs)}</p>"
    if isinstance(b, Bullets):
        return "<ul>" + "".join(f"<li>{runs(item)}</li>" for item in b.items) + "</ul>"
    if isinstance(b, Table):
        return table(b)
    if isinstance(b, Code):
        return (
            f'<div class="code"><div class="label">{esc(b.label)}</div>'
            f"<pre>{esc(b.text)}</pre></div>"
        )
    if isinstance(b, Charts):
        figs = "".join(
            f"<figure>{c.svg}<figcaption>{esc(c.caption)}</figcaption></figure>" for c in b.items
        )
        return f'<div class="charts">{figs}</div>'
    if isinstance(b, Heading):
        return f"<h3>{esc(b.text)}</h3>"
    raise TypeError(f"unknown block {type(b).__name__}")


def section(sec: Section, n: int) -> str:
    klass = ' class="page-break"' if sec.page_break else ""
    inner = "".join(block(b) for b in sec.blocks)
    return (
        f'<section id="{esc(sec.id)}"{klass}><h2><span class="n">{n}</span>{esc(sec.title)}</h2>'
        f"{inner}</section>"
    )


def render_html(doc: Document) -> str:
    """The whole document as a stand-alone HTML page."""
    meta = "".join(
        f'<li><b>{esc(k)}</b> <span class="{"hash" if k == "Catalog" else ""}">{esc(v)}</span></li>'
        for k, v in doc.meta
    )
    figures = "".join(
        f'<div class="figure"><div class="label">{esc(f.label)}</div>'
        f'<div class="value">{esc(f.value)}</div><div class="sub">{esc(f.sub)}</div></div>'
        for f in doc.figures
    )
    toc = " ".join(
        f'<a href="#{esc(sec.id)}">{i}. {esc(sec.title)}</a>'
        for i, sec in enumerate(doc.sections, start=1)
    )
    status = {"ok": "", "warn": " warn", "bad": " bad"}.get(doc.status, "")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(doc.title)} — {esc(doc.kicker)}</title>",
        f"<style>{CSS}</style></head><body><main>",
        f'<header><div class="kicker">{esc(doc.kicker)}</div><h1>{esc(doc.title)}</h1>',
        f'<ul class="meta">{meta}</ul></header>',
        f'<section id="summary"><div class="headline{status}">{esc(doc.headline)}</div>',
        f'<div class="figures">{figures}</div>' if figures else "",
        "".join(block(b) for b in doc.summary),
        f'<nav class="toc">Contents: {toc}</nav>' if toc else "",
        "</section>",
        "".join(section(sec, i) for i, sec in enumerate(doc.sections, start=1)),
        f"<footer>{esc(doc.footer)}</footer>",
        "</main></body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"
