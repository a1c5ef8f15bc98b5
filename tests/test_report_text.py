"""planner.report.text: a plan's JSON as text, robust to old or partial documents."""

from __future__ import annotations

import shlex

import pytest
from api_support import small

from planner.report.text import render_plan_text, render_table
from planner.service import make_plan


@pytest.fixture(scope="module")
def plan_json() -> dict:
    return make_plan(small()).to_json_dict()


def section(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(title)
    out = []
    for line in lines[start + 1 :]:
        if not line:
            break
        out.append(line)
    return out


def test_header_has_status_cost_gpus_power_ratio(plan_json):
    text = render_plan_text(plan_json, title="Plan x")
    lines = text.splitlines()
    assert lines[0] == "Plan x"
    assert lines[1] == "status          optimal"
    cost = plan_json["cost_usd_per_hour"]
    assert f"${cost:,.2f}/h" in lines[3]
    assert f"${plan_json['cost_usd_per_month']:,.0f}/month" in lines[3]
    assert lines[4].startswith(f"GPUs            {plan_json['gpus_total']} (")
    assert lines[5].startswith("power")
    assert lines[6].startswith("prefill:decode")


def test_pools_table_has_a_row_per_pool(plan_json):
    rows = section(render_plan_text(plan_json), "Pools")
    header = rows[0].split()
    assert header[:6] == ["class", "role", "gpu", "tp", "dtype", "replicas"]
    pool_rows = [r for r in rows[2:] if r.startswith("  chat ")]
    assert len(pool_rows) == len(plan_json["pools"])
    for row, pool in zip(pool_rows, plan_json["pools"], strict=True):
        cells = row.split()
        assert cells[1] == pool["role"] and cells[2] == pool["gpu"]
        assert cells[3] == str(pool["tp"])


def test_launch_commands_are_shell_quoted(plan_json):
    lines = section(render_plan_text(plan_json), "Launch (vLLM, one command per replica)")
    commands = [line.strip() for line in lines if line.startswith("    ")]
    assert len(commands) == len(plan_json["pools"])
    for command, pool in zip(commands, plan_json["pools"], strict=True):
        assert shlex.split(command) == pool["launch"]["vllm"]


def test_infeasible_plan_shows_reasons_and_relaxation():
    text = render_plan_text(
        {
            "status": "infeasible",
            "model": "m",
            "infeasible_reasons": ["budget $1.00/h is short by $2.00/h"],
            "relaxation": {"budget": 2.0},
            "classes": [],
            "pools": [],
            "solver": {"status": "infeasible", "solver": "highs", "runtime_s": 0.01},
        }
    )
    assert "Why no fleet meets this request\n  - budget $1.00/h is short by $2.00/h" in text
    assert "Relaxation (what would have to change):\n    budget: 2.00" in text
    assert "\nPools\n" not in text and "Binding constraints" not in text
    assert "Solver: highs infeasible" in text


@pytest.mark.parametrize(
    "doc",
    [
        {},
        {"status": "optimal"},
        {"status": "optimal", "pools": [{}], "classes": [{}], "alternatives": [{}]},
        {"status": "optimal", "pools": "garbage", "solver": None, "cost_usd_per_hour": "x"},
        {"status": "feasible", "solver": {"gap": 0.02}, "cost_usd_per_hour": float("inf")},
    ],
)
def test_partial_or_old_documents_render_without_errors(doc):
    text = render_plan_text(doc)
    assert text.startswith("status")
    assert text.endswith("\n")


def test_render_table_aligns_numbers_right():
    table = render_table(["name", "n"], [["a", "1"], ["bbb", "1,000"]])
    assert table.splitlines() == ["name      n", "----  -----", "a         1", "bbb   1,000"]


def test_kv_transfer_sentence_names_the_priced_link_and_each_pairs_link():
    """A prefill pool priced on a slower link than its pair uses reads as an upper bound;
    one priced on the pair's own link says so; pools without a transfer say nothing."""
    from planner.report.plan_document import kv_transfer_paras
    from planner.report.text import kv_transfer_sentences

    pools = [
        {
            "id": "p1",
            "class": "chat",
            "role": "prefill",
            "gpu": "mi300x",
            "kv_transfer_link": "eth-100g",
            "kv_transfer_exposed_ms": 5.2,
        },
        {
            "id": "p2",
            "class": "rag",
            "role": "prefill",
            "gpu": "h100-sxm5-80gb",
            "kv_transfer_link": "ib-ndr-400",
            "kv_transfer_exposed_ms": 1.0,
        },
        {"id": "d1", "class": "chat", "role": "decode", "gpu": "mi300x"},
        {"id": "d2", "class": "rag", "role": "decode", "gpu": "h100-sxm5-80gb"},
        {
            "id": "a1",
            "class": "agent",
            "role": "aggregated",
            "gpu": "mi300x",
            "kv_transfer_link": None,
            "kv_transfer_exposed_ms": None,
        },
    ]
    pairs = [
        {"prefill_pool": "p1", "decode_pool": "d1", "link": "eth-400g", "priced_link": "eth-100g"},
        {
            "prefill_pool": "p2",
            "decode_pool": "d2",
            "link": "ib-ndr-400",
            "priced_link": "ib-ndr-400",
        },
    ]
    lines = kv_transfer_sentences(pools, pairs)
    assert lines == [
        "chat prefill on mi300x: TTFT includes 5.2 ms of KV-cache transfer priced over "
        "eth-100g (to decode on mi300x over eth-400g, at least as fast as eth-100g: the "
        "priced TTFT is an upper bound)",
        "rag prefill on h100-sxm5-80gb: TTFT includes 1.0 ms of KV-cache transfer priced "
        "over ib-ndr-400 (to decode on h100-sxm5-80gb over ib-ndr-400, the link priced)",
    ]
    assert [b.runs[0] for b in kv_transfer_paras(pools, pairs)] == [x + "." for x in lines]
    assert kv_transfer_sentences(pools, []) == [
        "chat prefill on mi300x: TTFT includes 5.2 ms of KV-cache transfer priced over eth-100g",
        "rag prefill on h100-sxm5-80gb: TTFT includes 1.0 ms of KV-cache transfer priced "
        "over ib-ndr-400",
    ]


def test_a_class_served_in_part_shows_served_and_unserved_traffic(plan_json):
    import copy

    from planner.report.blocks import classes_table

    doc = copy.deepcopy(plan_json)
    c = doc["classes"][0]
    c["served_rps"] = c["rate_rps"] * 0.65
    # a least-cost plan serves all or nothing (an infeasible one nothing, by no choice)
    assert "NOT served" not in render_plan_text(doc)
    assert "served" not in classes_table(doc).rows[0][2]
    doc["objective"] = "max_goodput"
    lines = section(render_plan_text(doc), "Classes (predicted latencies at the SLO percentile)")
    assert "served r/s" in lines[0]
    missing = c["rate_rps"] - c["served_rps"]
    assert any(
        f"{c['name']}: {missing:,.1f} of its {c['rate_rps']:,.1f} req/s NOT served (35%)" in x
        for x in lines
    )
    assert "of" in classes_table(doc).rows[0][2] and "served" in classes_table(doc).rows[0][2]
    # served in full: no column, no line
    lines = section(
        render_plan_text(plan_json), "Classes (predicted latencies at the SLO percentile)"
    )
    assert "served r/s" not in lines[0] and not any("NOT served" in x for x in lines)
