"""The alternatives table prices each fleet as the solver's objective does (GPUs plus
operations), so it states that and the plan's own total on the same footing: a reader
comparing "$109.00" with a headline "$68.25/h" would otherwise find "+$10.75" wrong."""

from __future__ import annotations

from pathlib import Path

import yaml

from catalog.loader import load_catalog
from planner.report.alternatives import alternatives_table
from planner.report.text import render_plan_text
from planner.service import make_plan

CAT = load_catalog()
EXAMPLE = Path(__file__).parent.parent / "examples" / "fp4-llama-70b-b200.yaml"


def test_alternatives_are_compared_with_the_plans_total_with_operations():
    plan = make_plan(yaml.safe_load(EXAMPLE.read_text()), CAT, verify=False).to_json_dict()
    total = plan["total_cost_usd_per_hour"]
    ops = plan["operations"]["cost_usd_per_hour"]
    assert ops > 0 and total == plan["cost_usd_per_hour"] + ops
    priced = [a for a in plan["alternatives"] if a["cost_usd_per_hour"] is not None]
    assert priced
    for a in priced:  # each delta is against the total, not the GPU-only headline
        assert a["delta_usd_per_hour"] == a["cost_usd_per_hour"] - total
    text = render_plan_text(plan)
    assert f"$/h is GPUs + operations, as this plan's total ${total:,.2f}/h" in text
    table = alternatives_table(plan)
    assert table is not None and table.caption is not None
    assert f"as this plan's total ${total:,.2f}/hour" in table.caption
