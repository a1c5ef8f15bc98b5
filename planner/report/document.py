"""The document model of a procurement report, independent of its format: a
:class:`Document` is a title, a summary, key figures and sections of paragraphs,
tables, code and charts. ``planner.report.html`` and ``planner.report.markdown``
only lay it out, so both formats always say the same thing. Strings are plain
text (never markup): the renderers escape them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# --------------------------------------------------------------------------- model


@dataclass
class Strong:
    text: str


Run = str | Strong


@dataclass
class Para:
    runs: list[Run]
    kind: str = "p"  # p | note | warn | ok | lead


@dataclass
class Bullets:
    items: list[list[Run]]


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    numeric: list[bool] = field(default_factory=list)  # right-align these columns
    caption: str = ""
    total_last: bool = False  # the last row is a total
    small: bool = False


@dataclass
class Code:
    label: str
    text: str


@dataclass
class Chart:
    svg: str
    caption: str


@dataclass
class Charts:
    items: list[Chart]


@dataclass
class Figure:
    label: str
    value: str
    sub: str = ""


@dataclass
class Heading:
    text: str


Block = Para | Bullets | Table | Code | Charts | Heading


@dataclass
class Section:
    id: str
    title: str
    blocks: list[Block]
    page_break: bool = False


@dataclass
class Document:
    title: str
    kicker: str
    meta: list[tuple[str, str]]
    headline: str
    status: str  # ok | warn | bad
    figures: list[Figure]
    summary: list[Block]
    sections: list[Section]
    footer: str
