"""What else the buyer could do: the next-cheapest alternatives, why other GPUs
lost, and how the cost moves with traffic and mix (sensitivity, uncertainty)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.report import charts
from planner.report import text as _text
from planner.report.blocks import verified_text
from planner.report.borrowed import analogy_in_fp4_only, borrowed_level_gpus
from planner.report.document import (
    Block,
    Chart,
    Charts,
    Para,
    Run,
    Strong,
    Table,
)
from planner.report.formatting import (
    _list,
    _map,
    is_num,
    num,
    pct,
    pct_delta,
    s,
    usd,
    usd_delta,
    usd_short,
)


def next_cheapest(plan: Mapping[str, Any]) -> Mapping[str, Any] | None:
    alts = [a for a in _list(plan.get("alternatives")) if is_num(a.get("cost_usd_per_hour"))]
    return min(alts, key=lambda a: a["cost_usd_per_hour"]) if alts else None


def alternatives_table(plan: Mapping[str, Any]) -> Table | None:
    alts = _list(plan.get("alternatives"))
    if not alts:
        return None
    # alternatives are priced as the objective (GPUs + operations), like the total
    total = plan.get("total_cost_usd_per_hour")
    base = total if is_num(total) and total else plan.get("cost_usd_per_hour")
    rows = []
    for a in alts:
        d = a.get("delta_usd_per_hour")
        rows.append(
            [
                s(a.get("name")),
                s(a.get("status")),
                usd(a.get("cost_usd_per_hour")),
                usd_delta(d),
                pct_delta(100 * d / base) if is_num(d) and is_num(base) and base else "–",
                verified_text(a),
                str(a.get("note") or ""),
            ]
        )
    return Table(
        ["Alternative fleet", "Status", "$/hour", "vs this plan", "Change", "Verified", "Note"],
        rows,
        [False, False, True, True, True, False, False],
        caption=(
            f"$/hour is GPUs + operations, as this plan's total {usd(total)}/hour. "
            if is_num(total) and total
            else ""
        )
        + "Solved on this plan's capacity model as corrected by simulation; "
        "not simulated themselves",
    )


WHY_NOT = {
    "dominated": "beaten on cost",
    "more_expensive": "costs more",
    "no_feasible_fleet": "no feasible fleet",
    "does_not_fit": "does not fit",
    "kv_exceeds_memory": "KV cache does not fit",
    "tpot_unreachable": "TPOT out of reach",
    "ttft_unreachable": "TTFT out of reach",
    "dtype_unsupported": "dtype unsupported",
}


def why_not_table(plan: Mapping[str, Any]) -> Table | None:
    rows = [
        [
            s(w.get("class", w.get("class_name"))),
            s(w.get("gpu")),
            WHY_NOT.get(str(w.get("reason")), str(w.get("reason")).replace("_", " ")),
            s(w.get("detail")),
        ]
        for w in _list(plan.get("why_not"))
    ]
    if not rows:
        return None
    return Table(
        ["Class", "GPU", "Why not", "Detail"],
        rows,
        [False] * 4,
        caption="GPU types not chosen, per class",
        small=True,
    )


def sensitivity_blocks(
    sens: Mapping[str, Any] | None,
    plan_cost: Any,
    with_chart: bool = True,
    pending: str | None = None,
) -> list[Block]:
    """The sensitivity section: its table and chart, or a note that it is being
    computed in the background (``pending``: since when) or was not computed."""
    if not sens and pending:
        return [
            Para(
                [
                    f"Being computed in the background (started {pending}): re-plans at "
                    "traffic ×1.5 and ×2 and at the mix shifted by 20 points, usually "
                    "10-30 s. Reload this report to see it."
                ],
                kind="note",
            )
        ]
    if not sens:
        return [
            Para(
                [
                    "Not computed for this report (cost at traffic ×1.5 and ×2 and at the mix "
                    "shifted by 20 points)."
                ],
                kind="note",
            )
        ]
    rows = []
    for r in _list(sens.get("rows")):
        rows.append(
            [
                s(r.get("name")),
                s(r.get("change")) if r.get("change") else "",
                s(r.get("status")),
                usd(r.get("cost_usd_per_hour")),
                usd_delta(r.get("delta_usd_per_hour")),
                pct_delta(r.get("delta_pct")),
                num(r.get("gpus_total")),
                verified_text(r),
                s(r.get("note")) if r.get("note") else "",
            ]
        )
    out: list[Block] = [
        Table(
            [
                "Case",
                "What changes",
                "Status",
                "$/hour",
                "vs this plan",
                "Change",
                "GPUs",
                "Verified",
                "Note",
            ],
            rows,
            [False, False, False, True, True, True, True, False, False],
        )
    ]
    if sens.get("note"):
        out.append(Para([str(sens["note"])], kind="note"))
    if with_chart:
        svg = charts.chart_sensitivity(
            sens.get("base_cost_usd_per_hour", plan_cost), _list(sens.get("rows"))
        )
        if svg:
            out.append(Charts([Chart(svg, "Each case re-planned from scratch (cheapest fleet).")]))
    return out


def uncertainty_sentence(plan: Mapping[str, Any]) -> list[Run] | None:
    """The plan's cost band, its confidence and the GPUs with no measurement, in a
    sentence (None for plans stored before bands were recorded)."""
    band = _text.band_of(plan.get("cost_band_usd_per_hour"))
    if band is None:
        return None
    risk = _map(plan.get("risk"))
    runs: list[Run] = [
        Strong("Uncertainty: "),
        f"the cost model's efficiency factors are uncertain, so the right-sized fleet "
        f"would cost {usd(band[0])}–{usd(band[1])}/h ({pct(risk.get('band_confidence'))} "
        f"band); each pool's capacity was derated to hold at {pct(risk.get('confidence'))} "
        "confidence.",
    ]
    listed = [str(g) for g in _list(plan.get("unmeasured_gpus"))]
    fp4 = [g for g in listed if analogy_in_fp4_only(plan, g)]
    unmeasured = [g for g in listed if g not in fp4]
    if unmeasured:
        runs.append(
            f" No measurement backs {', '.join(unmeasured)}: its factors are set by analogy "
            "(wider band); benchmark it before buying at scale."
        )
    if fp4:
        runs.append(
            f" No factors fitted in FP4 back {', '.join(fp4)}: its level times the FP4 "
            "derates, lifted by its FP4 runs' measured ratio where it has some (wider band); "
            "benchmark FP4 on it before buying at scale."
        )
    if not listed:
        runs.append(" Every GPU bought has factors fitted or scaled to measurements.")
    # planner.plan.assemble.borrowed_level_warnings: measured, but on other LLMs only
    borrowed = borrowed_level_gpus(plan)
    if borrowed:
        runs.append(
            f" {', '.join(borrowed)} {'was' if len(borrowed) == 1 else 'were'} measured on "
            "mixture-of-experts LLMs only: the factors for this model are borrowed from a "
            "measured GPU (see the warnings)."
        )
    return runs


def sensitivity_sentence(sens: Mapping[str, Any] | None) -> list[Run] | None:
    if not sens:
        return None
    parts = []
    for r in _list(sens.get("rows")):
        if is_num(r.get("cost_usd_per_hour")):
            parts.append(
                f"{r.get('name')} {usd_short(r['cost_usd_per_hour'])}/h "
                f"({pct_delta(r.get('delta_pct'))})"
            )
        else:
            parts.append(f"{r.get('name')}: {r.get('status')}")
    if not parts:
        return None
    return [Strong("Sensitivity: "), "; ".join(parts) + "."]
