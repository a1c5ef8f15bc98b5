"""The bill of materials as CSV for spreadsheets: a header row, one row per GPU
type and a total row (RFC 4180: CRLF line ends, fields quoted where needed).

Numbers are plain (no thousands separators or currency signs; money to the
cent, power to 0.001 kW); units are in the column names. Missing figures are
empty cells.

Text cells come from users (a custom GPU's name, a price note, a variant's name), and
a spreadsheet runs a cell that starts with ``=``, ``+``, ``-`` or ``@`` as a formula
(``=HYPERLINK(...)`` leaks data, DDE runs commands): such a text cell is written with
a leading single quote (OWASP's advice for CSV injection), so it shows as text. A
number (``-12.50``) is left as it is.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from planner.report.bom import Bom

COLUMNS = [
    "gpu",
    "gpu_name",
    "gpus",
    "gpus_per_server",
    "servers",
    "rack_units",
    "power_kw",
    "price_usd_per_gpu_hour",
    "price_is_estimate",
    "usd_per_hour",
    "usd_per_month",
    "usd_per_year",
    "usd_1y",
    "usd_3y",
    "purchase_usd_per_gpu",
    "capital_usd",
    "note",
    "purchase_usd_per_server",
    "networking_usd_per_server",
    "tco_horizon_years",
    "tco_purchase",
    "tco_servers",
    "tco_capex_usd",
    "tco_energy_usd",
    "tco_hosting_usd",
    "tco_rent_usd",
    "tco_operations_usd",
    "tco_total_usd",
]
TOTAL = "TOTAL"


def _n(value: Any, digits: int) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def bom_rows(bom: Bom) -> list[list[str]]:
    """The BOM's lines and its total as rows of :data:`COLUMNS`."""
    rows = []
    for ln in bom.lines:
        note = ln.price_note.rstrip(". ")
        if ln.capital_usd is None:
            note = (note + "; " if note else "") + ln.capital_note
        rows.append(
            [
                ln.gpu,
                ln.gpu_name,
                _n(ln.gpus, 0),
                _n(ln.gpus_per_server, 0),
                _n(ln.nodes, 0),
                _n(ln.rack_units, 0),
                _n(ln.power_kw, 3),
                _n(ln.price_usd_per_gpu_hour, 4),
                _n(ln.price_is_estimate, 0),
                _n(ln.usd_per_hour, 2),
                _n(ln.usd_per_month, 2),
                _n(ln.usd_per_year, 2),
                _n(ln.usd_1y, 2),
                _n(ln.usd_3y, 2),
                _n(ln.purchase_usd_per_gpu, 2),
                _n(ln.capital_usd, 2),
                note,
                _n(ln.purchase_usd_per_server, 2),
                _n(ln.networking_usd_per_server, 2),
                *_tco_cells(bom, ln.gpu),
            ]
        )
    t = bom.total
    rows.append(
        [
            TOTAL,
            "",
            _n(t.gpus, 0),
            "",
            _n(t.nodes, 0),
            _n(t.rack_units, 0),
            _n(t.power_kw, 3),
            "",
            "",
            _n(t.usd_per_hour, 2),
            _n(t.usd_per_month, 2),
            _n(t.usd_per_year, 2),
            _n(t.usd_1y, 2),
            _n(t.usd_3y, 2),
            "",
            _n(t.capital_usd, 2),
            t.capital_note,
            "",
            "",
            *_tco_cells(bom, None),
        ]
    )
    return rows


def _tco_cells(bom: Bom, gpu: str | None) -> list[str]:
    """The plan's TCO (``plan.tco``, planner.procurement) for one GPU type's line, or
    (``gpu`` None) the whole fleet's with operations and the total; blank without one."""
    tco = bom.tco
    if not tco:
        return [""] * 9
    head = [_n(tco.get("horizon_years"), 2), str(tco.get("purchase") or "")]
    if gpu is None:
        return [
            *head,
            _n(sum((tco.get("servers_by_type") or {}).values()), 0),
            _n(tco.get("capex_usd"), 2),
            _n(tco.get("energy_usd"), 2),
            _n(tco.get("hosting_usd"), 2),
            _n(tco.get("rent_usd"), 2),
            _n(tco.get("operations_usd"), 2),
            _n(tco.get("total_usd"), 2),
        ]
    line = next((x for x in tco.get("lines") or [] if x.get("gpu") == gpu), None)
    if line is None:
        return [*head] + [""] * 7
    return [
        *head,
        _n(line.get("servers"), 0),
        _n(line.get("capex_usd"), 2),
        _n(line.get("energy_usd"), 2),
        _n(line.get("hosting_usd"), 2),
        _n(line.get("rent_usd"), 2),
        "",
        "",
    ]


#: First characters that make a spreadsheet read a cell as a formula (OWASP).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def spreadsheet_safe(cell: str) -> str:
    """``cell`` with a leading ``'`` when a spreadsheet would run it as a formula;
    numbers (``-3.5``, ``+1e3``) unchanged."""
    if cell.startswith(FORMULA_START) and not _NUMBER.fullmatch(cell):
        return "'" + cell
    return cell


def write_csv(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """RFC 4180 CSV, every cell made :func:`spreadsheet_safe`."""
    buf = io.StringIO(newline="")
    w = csv.writer(buf, lineterminator="\r\n", quoting=csv.QUOTE_MINIMAL)
    w.writerow([spreadsheet_safe(c) for c in header])
    w.writerows([spreadsheet_safe(c) for c in row] for row in rows)
    return buf.getvalue()


def render_bom_csv(bom: Bom) -> str:
    """One plan's bill of materials as CSV text."""
    return write_csv(COLUMNS, bom_rows(bom))


def render_boms_csv(boms: Mapping[str, Bom | None]) -> str:
    """Several bills of materials (a comparison's variants) in one CSV, with a
    leading ``variant`` column; each variant has its own total row."""
    rows = []
    for name, bom in boms.items():
        if bom is None:
            continue
        rows += [[name, *r] for r in bom_rows(bom)]
    return write_csv(["variant", *COLUMNS], rows)
