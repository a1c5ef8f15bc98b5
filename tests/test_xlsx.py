"""Reports as XLSX workbooks (issue 13 item 4): the comparison table and bills of
materials with numbers as numbers and text that cannot run as a formula."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml
from openpyxl import load_workbook

from catalog.loader import load_catalog
from catalog.schema import Catalog
from planner.report.bom import build_bom
from planner.report.csv_bom import COLUMNS
from planner.report.xlsx import (
    comparison_sheet_rows,
    render_comparison_xlsx,
    render_plan_xlsx,
    tco_sheet_rows,
)
from planner.service import make_plan

TABLE: list[dict[str, Any]] = [
    {
        "variant": "base",
        "axis": None,
        "status": "optimal",
        "cost_usd_per_hour": 100.0,
        "delta_usd_per_hour": None,
        "delta_pct": None,
        "gpus_total": 16,
        "gpus_by_type": {"h100-sxm5-80gb": 16},
        "modes": {"chat": "aggregated"},
        "ttft_ms": {"chat": 512.5},
        "tpot_ms": {"chat": 31.0},
        "meets_slo": {"chat": True},
    },
    {
        "variant": '=HYPERLINK("x")',
        "axis": "rate_scale",
        "status": "optimal",
        "cost_usd_per_hour": 150.0,
        "delta_usd_per_hour": 50.0,
        "delta_pct": 50.0,
        "gpus_total": 24,
        "gpus_by_type": {"h100-sxm5-80gb": 24},
        "modes": {"chat": "disaggregated", "rag": "aggregated"},
        "ttft_ms": {"chat": 600.0, "rag": 700.0},
        "tpot_ms": {"chat": 40.0, "rag": 45.0},
        "meets_slo": {"chat": True, "rag": False},
    },
]


EXAMPLE = Path(__file__).parent.parent / "examples" / "code-completion-8b.yaml"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def _load(data: bytes) -> Any:
    return load_workbook(io.BytesIO(data))


def test_comparison_rows_keep_numbers_and_every_class() -> None:
    headers, rows = comparison_sheet_rows(TABLE)
    assert headers[:4] == ["variant", "axis", "status", "usd_per_hour"]
    assert headers[-8:] == [
        "chat_mode",
        "chat_ttft_ms",
        "chat_tpot_ms",
        "chat_meets_slo",
        "rag_mode",
        "rag_ttft_ms",
        "rag_tpot_ms",
        "rag_meets_slo",
    ]
    assert rows[0][3] == 100.0 and rows[1][4] == 50.0
    assert rows[1][0] == '\'=HYPERLINK("x")'  # formula-safe text
    assert rows[0][-4:] == [None, None, None, None]  # base had no rag class


def test_comparison_workbook(catalog: Catalog) -> None:
    plan = make_plan(
        yaml.safe_load(EXAMPLE.read_text()),
        catalog,
        alternatives=False,
        verify=False,
    ).to_json_dict()
    data = render_comparison_xlsx(TABLE, {"base": build_bom(plan, catalog), "x": None})
    wb = _load(data)
    assert wb.sheetnames == ["Comparison", "Bill of materials"]
    ws = wb["Comparison"]
    assert ws.cell(row=2, column=4).value == 100.0
    assert ws.cell(row=3, column=1).value.startswith("'=")
    bom = wb["Bill of materials"]
    assert [c.value for c in bom[1]] == ["variant", *COLUMNS]
    gpus_col = COLUMNS.index("gpus") + 2
    assert isinstance(bom.cell(row=2, column=gpus_col).value, int)
    assert bom.cell(row=2, column=gpus_col).value == plan["gpus_total"]


def test_plan_workbook_with_tco(catalog: Catalog) -> None:
    req = yaml.safe_load(EXAMPLE.read_text())
    req["procurement"] = {"horizon_years": 3}
    plan = make_plan(req, catalog, alternatives=False, verify=False).to_json_dict()
    wb = _load(render_plan_xlsx(plan, build_bom(plan, catalog)))
    assert wb.sheetnames == ["Bill of materials", "Pools", "TCO"]
    pools = wb["Pools"]
    header = [c.value for c in pools[1]]
    assert pools.max_row == 1 + len(plan["pools"])
    assert (
        pools.cell(row=2, column=header.index("replicas") + 1).value == plan["pools"][0]["replicas"]
    )
    tco = wb["TCO"]
    headers, _rows = tco_sheet_rows(plan["tco"])
    assert [c.value for c in tco[1]] == headers
    total = [c.value for c in tco[tco.max_row]]
    assert total[0] == "total" and total[-1] == pytest.approx(plan["tco"]["total_usd"])
    assert plan["tco"]["capex_usd"] > 0 and total[2] == pytest.approx(plan["tco"]["capex_usd"])


def test_comparison_table_as_csv() -> None:
    """The comparison CSV is its table: one row per variant, the workbook's columns."""
    import csv

    from planner.report.xlsx import render_comparison_table_csv

    rows = list(csv.reader(io.StringIO(render_comparison_table_csv(TABLE))))
    headers, _ = comparison_sheet_rows(TABLE)
    assert rows[0] == headers
    assert [r[0] for r in rows[1:]] == ["base", '\'=HYPERLINK("x")']
    assert float(rows[2][headers.index("delta_pct")]) == 50.0
    assert rows[1][headers.index("rag_mode")] == ""  # the base had no rag class
