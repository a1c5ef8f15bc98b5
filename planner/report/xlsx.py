"""Reports as Excel workbooks (issue 13 item 4): what a purchasing meeting pastes into
its own sheets, with numbers as numbers.

* :func:`render_comparison_xlsx`: sheet ``Comparison`` (the table: one row per
  variant with cost, change against the base, GPUs, power and per class its mode and
  predicted latencies), then ``Bill of materials`` (every variant's, as in the CSV);
* :func:`render_plan_xlsx`: ``Bill of materials``, ``Pools`` and, when the plan has
  one, ``TCO``.

Cells come from the same figures as the CSV and HTML reports (the comparison's
``table`` rows, :func:`planner.report.csv_bom.bom_rows`, the plan's pools and
``tco``); text cells are made formula-safe (:func:`csv_bom.spreadsheet_safe`), so a
catalog name such as ``=HYPERLINK(...)`` stays text. openpyxl writes the file.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

from planner.report.bom import Bom
from planner.report.csv_bom import COLUMNS, bom_rows, spreadsheet_safe, write_csv

MEDIA_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

#: The comparison sheet's fixed columns before the per-class ones: (header, row key).
COMPARISON_COLUMNS = (
    ("variant", "variant"),
    ("axis", "axis"),
    ("status", "status"),
    ("usd_per_hour", "cost_usd_per_hour"),
    ("delta_usd_per_hour", "delta_usd_per_hour"),
    ("delta_pct", "delta_pct"),
    ("usd_per_million_tokens", "cost_usd_per_million_tokens"),
    ("gpus", "gpus_total"),
    ("power_kw", "power_kw"),
    ("prefill_to_decode_gpus", "pool_ratio_prefill_to_decode"),
)

POOL_COLUMNS = (
    "class",
    "role",
    "gpu",
    "tp",
    "pp",
    "dp",
    "ep",
    "dtype",
    "kv_dtype",
    "replicas",
    "gpus",
    "chunk_budget_tokens",
    "max_batch",
    "rate_rps",
    "capacity_rps",
    "utilization",
    "predicted_ttft_ms",
    "predicted_tpot_ms",
    "cost_usd_per_hour",
    "power_kw",
    "effective_prefix_hit_rate",
)


def _cell(value: Any) -> Any:
    """A value as an Excel cell: finite numbers stay numbers, booleans stay booleans,
    None is empty, anything else is formula-safe text."""
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value if math.isfinite(value) else None
    return spreadsheet_safe(str(value))


def _number_or_text(text: str) -> Any:
    """A CSV cell (:func:`bom_rows`) back as a number where it is one."""
    if text == "":
        return None
    try:
        return float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:
        return _cell(text)


def comparison_sheet_rows(table: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list]]:
    """The comparison table as (headers, rows): :data:`COMPARISON_COLUMNS`, the GPUs by
    type as text, then per class (in order of first appearance) its mode, predicted
    TTFT and TPOT (ms) and whether it meets its SLO."""
    classes: list[str] = []
    for r in table:
        for c in r.get("modes") or {}:
            if c not in classes:
                classes.append(c)
    headers = [h for h, _ in COMPARISON_COLUMNS] + ["gpus_by_type"]
    for c in classes:
        headers += [f"{c}_mode", f"{c}_ttft_ms", f"{c}_tpot_ms", f"{c}_meets_slo"]
    rows = []
    for r in table:
        by_type = r.get("gpus_by_type") or {}
        row = [_cell(r.get(key)) for _, key in COMPARISON_COLUMNS]
        row.append(_cell(", ".join(f"{g} {n}" for g, n in by_type.items()) or None))
        for c in classes:
            row += [
                _cell((r.get("modes") or {}).get(c)),
                _cell((r.get("ttft_ms") or {}).get(c)),
                _cell((r.get("tpot_ms") or {}).get(c)),
                _cell((r.get("meets_slo") or {}).get(c)),
            ]
        rows.append(row)
    return headers, rows


def _csv_cell(value: Any) -> str:
    """A workbook cell as CSV text: empty for None, numbers to 4 decimals."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{round(value, 4)}"
    return str(value)


def render_comparison_table_csv(table: Sequence[Mapping[str, Any]]) -> str:
    """The comparison table (:func:`comparison_sheet_rows`) as CSV: the same columns as
    the workbook's ``Comparison`` sheet, formula-safe (:func:`csv_bom.write_csv`)."""
    headers, rows = comparison_sheet_rows(table)
    return write_csv(headers, [[_csv_cell(x) for x in r] for r in rows])


def _sheet(wb: Any, title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    from openpyxl.styles import Font

    ws = wb.create_sheet(title)
    ws.append(list(headers))
    for cell in ws[1]:
        cell.font = Font(bold=True)
    for row in rows:
        ws.append(list(row))
    ws.freeze_panes = "A2"
    for i, header in enumerate(headers, start=1):
        width = max([len(str(header))] + [len(str(r[i - 1] or "")) for r in rows[:200]])
        ws.column_dimensions[ws.cell(row=1, column=i).column_letter].width = min(width + 2, 60)


def _workbook() -> Any:
    from openpyxl import Workbook

    wb = Workbook()
    assert wb.active is not None
    wb.remove(wb.active)
    return wb


def _bytes(wb: Any) -> bytes:
    out = io.BytesIO()
    wb.save(out)
    return out.getvalue()


def render_comparison_xlsx(
    table: Sequence[Mapping[str, Any]], boms: Mapping[str, Bom | None]
) -> bytes:
    """A comparison as an XLSX workbook: ``Comparison`` (:func:`comparison_sheet_rows`)
    and ``Bill of materials`` (each variant's BOM rows with a ``variant`` column)."""
    wb = _workbook()
    headers, rows = comparison_sheet_rows(table)
    _sheet(wb, "Comparison", headers, rows)
    bom = [
        [_cell(name), *[_number_or_text(x) for x in r]]
        for name, b in boms.items()
        if b is not None
        for r in bom_rows(b)
    ]
    _sheet(wb, "Bill of materials", ["variant", *COLUMNS], bom)
    return _bytes(wb)


def tco_sheet_rows(tco: Mapping[str, Any]) -> tuple[list[str], list[list]]:
    """The plan's TCO (``plan.tco``) as (headers, rows): one row per GPU type's line,
    then the fleet's total with operations."""
    headers = ["gpu", "servers", "capex_usd", "energy_usd", "hosting_usd", "rent_usd"]
    headers += ["operations_usd", "total_usd"]
    rows = [
        [_cell(x.get(k)) for k in ("gpu", "servers", "capex_usd", "energy_usd", "hosting_usd")]
        + [_cell(x.get("rent_usd")), None, None]
        for x in tco.get("lines") or []
    ]
    rows.append(
        [
            "total",
            _cell(sum((tco.get("servers_by_type") or {}).values()) or None),
            *[
                _cell(tco.get(k))
                for k in (
                    "capex_usd",
                    "energy_usd",
                    "hosting_usd",
                    "rent_usd",
                    "operations_usd",
                    "total_usd",
                )
            ],
        ]
    )
    return headers, rows


def render_plan_xlsx(plan: Mapping[str, Any], bom: Bom) -> bytes:
    """A plan as an XLSX workbook: ``Bill of materials`` (as the CSV), ``Pools`` (one
    row per pool, :data:`POOL_COLUMNS`) and ``TCO`` when the plan has one."""
    wb = _workbook()
    _sheet(
        wb, "Bill of materials", COLUMNS, [[_number_or_text(x) for x in r] for r in bom_rows(bom)]
    )
    pools = [
        [_cell(p.get(c, p.get("class_name")) if c == "class" else p.get(c)) for c in POOL_COLUMNS]
        for p in plan.get("pools") or []
    ]
    _sheet(wb, "Pools", POOL_COLUMNS, pools)
    tco = plan.get("tco")
    if tco:
        _sheet(wb, "TCO", *tco_sheet_rows(tco))
    return _bytes(wb)


__all__ = [
    "MEDIA_TYPE",
    "comparison_sheet_rows",
    "render_comparison_table_csv",
    "render_comparison_xlsx",
    "render_plan_xlsx",
    "tco_sheet_rows",
]
