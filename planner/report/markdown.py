"""A report :class:`~planner.report.document.Document` as GitHub-flavoured
Markdown: the same sections as the HTML report, tables as pipe tables, launch
commands and the request as fenced code. Charts are HTML-only; their numbers
are in the tables."""

from __future__ import annotations

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


def text(value: object) -> str:
    """Inline text: angle brackets escaped (no raw HTML gets through), one line."""
    return (
        str(value)
        .replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("\r", " ")
        .replace("\n", " ")
    )


def strong(value: str) -> str:
    """Bold text, with any surrounding spaces kept outside the markers."""
    t = text(value)
    core = t.strip()
    if not core:
        return t
    head = t[: len(t) - len(t.lstrip())]
    tail = t[len(t.rstrip()) :]
    return f"{head}**{core}**{tail}"


def runs(items: list[Run]) -> str:
    return "".join(strong(r.text) if isinstance(r, Strong) else text(r) for r in items)


def cell(value: str) -> str:
    return text(", ".join(str(value).split("\n"))).replace("|", "\\|") or " "


def table(t: Table) -> str:
    numeric = t.numeric or [False] * len(t.headers)
    lines = []
    if t.caption:
        lines += [f"*{text(t.caption)}*", ""]
    lines.append("| " + " | ".join(cell(h) for h in t.headers) + " |")
    lines.append("|" + "|".join("---:" if n else "---" for n in numeric) + "|")
    for i, row in enumerate(t.rows):
        cells = [cell(c) for c in row]
        if t.total_last and i == len(t.rows) - 1:
            cells = [f"**{c}**" if c.strip() else c for c in cells]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fence(body: str, lang: str) -> str:
    ticks = "```"
    while ticks in body:
        ticks += "`"
    return f"{ticks}{lang}\n{body}\n{ticks}"


def block(b: Block) -> str:
    if isinstance(b, Para):
        prefix = {"note": "> ", "warn": "> **Note:** ", "ok": "✓ "}.get(b.kind, "")
        return prefix + runs(b.runs)
    if isinstance(b, Bullets):
        return "\n".join(f"- {runs(item)}" for item in b.items)
    if isinstance(b, Table):
        return table(b)
    if isinstance(b, Code):
        lang = {"vLLM": "sh", "SGLang": "sh", "YAML": "yaml"}.get(b.label, "")
        return f"{text(b.label)}:\n\n{fence(b.text, lang)}"
    if isinstance(b, Charts):
        return (
            "*(Charts: " + "; ".join(text(c.caption) for c in b.items) + " See the HTML report.)*"
        )
    if isinstance(b, Heading):
        return f"### {text(b.text)}"
    raise TypeError(f"unknown block {type(b).__name__}")


def section(sec: Section, n: int) -> str:
    return "\n\n".join([f"## {n}. {text(sec.title)}", *(block(b) for b in sec.blocks)])


def render_markdown(doc: Document) -> str:
    parts = [f"# {text(doc.title)}", f"*{text(doc.kicker)}*"]
    parts.append("\n".join(f"- **{text(k)}:** {text(v)}" for k, v in doc.meta))
    parts.append("## Summary")
    parts.append(f"**{text(doc.headline)}**")
    if doc.figures:
        parts.append(
            table(
                Table(
                    [f.label for f in doc.figures],
                    [[f.value for f in doc.figures], [f.sub for f in doc.figures]],
                    [True] * len(doc.figures),
                )
            )
        )
    parts += [block(b) for b in doc.summary]
    parts += [section(sec, i) for i, sec in enumerate(doc.sections, start=1)]
    parts.append(f"---\n\n*{text(doc.footer)}*")
    return "\n\n".join(parts) + "\n"
