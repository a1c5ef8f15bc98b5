"""A what-if comparison's report: :func:`comparison_document` turns a stored
comparison (its variants, table and plans) into a
:class:`~planner.report.document.Document`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from catalog.schema import Catalog
from planner.report import charts
from planner.report.blocks import bom_notes, bom_table, price_blocks, request_yaml
from planner.report.bom import build_bom
from planner.report.document import (
    Block,
    Bullets,
    Chart,
    Charts,
    Code,
    Document,
    Figure,
    Heading,
    Para,
    Run,
    Section,
    Strong,
    Table,
)
from planner.report.formatting import (
    _MODE_SHORT,
    _list,
    _map,
    is_num,
    kw,
    model_name,
    num,
    pct_delta,
    per_mtok,
    s,
    usd,
    usd_delta,
    usd_short,
)
from planner.report.plan_document import _buy_text

# --------------------------------------------------------------------------- comparisons


def _flatten(doc: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(doc, Mapping):
        for k, v in doc.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(doc, list) and doc and all(isinstance(x, Mapping) for x in doc):
        for i, x in enumerate(doc):
            key = x.get("name") or x.get("workload") or i
            out.update(_flatten(x, f"{prefix}[{key}]"))
    else:
        out[prefix] = doc
    return out


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        return "[" + ", ".join(_short(x) for x in v) + "]"
    return "default" if v is None else str(v)


def request_changes(base: Mapping[str, Any], variant: Mapping[str, Any]) -> list[str]:
    """What a variant changes, as ``path: old → new`` (classes by name)."""
    a, b = _flatten(base), _flatten(variant)
    out = []
    for k in list(dict.fromkeys([*a, *b])):
        if k == "name":
            continue
        va, vb = a.get(k), b.get(k)
        if va != vb and not (is_num(va) and is_num(vb) and math.isclose(va, vb, rel_tol=1e-9)):
            out.append(f"{k}: {_short(va)} → {_short(vb)}")
    return out


def _gpus_text(by_type: Mapping[str, Any]) -> str:
    return ", ".join(f"{g} {n:,}" for g, n in by_type.items()) if by_type else "–"


def _variant_rows(rows: Sequence[Mapping[str, Any]], changes: Mapping[str, list[str]]) -> Table:
    out = []
    for r in rows:
        slo = _map(r.get("meets_slo"))
        met = [v for v in slo.values() if v is not None]
        out.append(
            [
                s(r.get("variant")),
                "; ".join(changes.get(str(r.get("variant")), []))
                or ("–" if r.get("variant") == "base" else "none"),
                s(r.get("status")),
                usd(r.get("cost_usd_per_hour")),
                usd_delta(r.get("delta_usd_per_hour")) if r.get("variant") != "base" else "",
                pct_delta(r.get("delta_pct")) if r.get("variant") != "base" else "",
                per_mtok(r.get("cost_usd_per_million_tokens")),
                num(r.get("gpus_total")),
                _gpus_text(_map(r.get("gpus_by_type"))),
                kw(r.get("power_kw")),
                "\n".join(
                    f"{k} {_MODE_SHORT.get(v, v or '–')}" for k, v in _map(r.get("modes")).items()
                ),
                ("all" if all(met) else "NO") if met else "–",
            ]
        )
    return Table(
        [
            "Variant",
            "What changes",
            "Status",
            "$/hour",
            "vs base",
            "Change",
            "$/M tokens",
            "GPUs",
            "GPU types",
            "Power",
            "Modes",
            "SLOs met",
        ],
        out,
        [False, False, False, True, True, True, True, True, False, True, False, False],
        small=True,
    )


def sweep_axes(table: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """The comparison's sweep rows grouped by axis, in order."""
    axes: dict[str, list[Mapping[str, Any]]] = {}
    for r in table:
        if r.get("axis") is not None:
            axes.setdefault(str(r["axis"]), []).append(r)
    return axes


def comparison_document(
    comparison: Mapping[str, Any], catalog: Catalog, *, with_charts: bool = True
) -> Document:
    """The procurement report of a what-if comparison: the variants against
    the base, the sweeps, each variant's bill of materials and the assumptions."""
    table = [_map(r) for r in _list(comparison.get("table"))]
    plans = _list(comparison.get("plans"))
    variants = _list(comparison.get("variants"))
    base_req = _map(comparison.get("base"))
    name = comparison.get("name") or base_req.get("name") or "comparison"
    base_row = next((r for r in table if r.get("variant") == "base"), table[0] if table else {})
    base_plan = _map(plans[0]) if plans else {}
    base_cost = base_row.get("cost_usd_per_hour")
    changes = {
        str(v.get("name")): request_changes(base_req, _map(v.get("request")))
        for v in variants
        if v.get("name") != "base"
    }
    named = [r for r in table if r.get("axis") is None]
    others = [r for r in table if r.get("variant") != "base"]
    priced = [r for r in others if is_num(r.get("cost_usd_per_hour"))]
    failed = [r for r in others if not is_num(r.get("cost_usd_per_hour"))]

    summary: list[Block] = []
    figures: list[Figure] = []
    base_bom = build_bom(base_plan, catalog) if base_plan else None
    if is_num(base_cost) and base_bom and base_bom.lines:
        headline = f"Base: buy {_buy_text(base_bom)} for {usd(base_cost)}/h"
        status = "ok"
        summary.append(
            Para(
                [
                    Strong("Base plan: "),
                    f"{_buy_text(base_bom)} in {num(base_bom.total.nodes)} servers, "
                    f"{usd(base_cost)}/hour ({usd_short(base_bom.total.usd_per_month)} a month, "
                    f"{usd_short(base_bom.total.usd_3y)} over three years), "
                    f"{kw(base_bom.total.power_kw)}.",
                ],
                kind="lead",
            )
        )
        figures = [
            Figure("base per hour", usd(base_cost), "list price"),
            Figure("base per month", usd_short(base_bom.total.usd_per_month), "730 hours"),
            Figure("base GPUs", num(base_bom.total.gpus), f"{num(base_bom.total.nodes)} servers"),
            Figure(
                "variants",
                num(len(others)),
                f"{len(named) - 1} named, {len(others) - len(named) + 1} in sweeps",
            ),
        ]
    else:
        headline = "The base request has no feasible plan"
        status = "bad"
        summary.append(Para([f"Base: {s(base_row.get('status'))}."], kind="warn"))
    bullets: list[list[Run]] = []
    named_priced = [r for r in priced if r.get("axis") is None]
    if named_priced:
        lo = min(named_priced, key=lambda r: r["cost_usd_per_hour"])
        hi = max(named_priced, key=lambda r: r["cost_usd_per_hour"])
        if lo is not hi and (lo.get("delta_pct") or 0) < 0:
            bullets.append(
                [
                    Strong("Cheapest variant: "),
                    f"{lo.get('variant')} at {usd(lo['cost_usd_per_hour'])}/h "
                    f"({pct_delta(lo.get('delta_pct'))}).",
                ]
            )
        movers = sorted(named_priced, key=lambda r: -abs(r.get("delta_pct") or 0))[:3]
        bullets.append(
            [
                Strong("Biggest cost drivers: "),
                "; ".join(
                    f"{r.get('variant')} {usd_short(r['cost_usd_per_hour'])}/h "
                    f"({pct_delta(r.get('delta_pct'))})"
                    for r in movers
                )
                + ".",
            ]
        )
        small = [r for r in named_priced if abs(r.get("delta_pct") or 0) < 5]
        if small:
            bullets.append(
                [
                    Strong("Within 5% of the base: "),
                    "; ".join(
                        f"{r.get('variant')} ({pct_delta(r.get('delta_pct'))})" for r in small
                    )
                    + ".",
                ]
            )
        flips = []
        base_modes = _map(base_row.get("modes"))
        for r in named_priced:
            diff = [
                f"{k} → {v}"
                for k, v in _map(r.get("modes")).items()
                if v and base_modes.get(k) and v != base_modes.get(k)
            ]
            if diff:
                flips.append(f"{r.get('variant')} ({', '.join(diff)})")
        if flips:
            bullets.append([Strong("Serving mode changes: "), "; ".join(flips) + "."])
        gpu_changes = []
        base_types = set(_map(base_row.get("gpus_by_type")))
        for r in named_priced:
            types = set(_map(r.get("gpus_by_type")))
            if types != base_types:
                gpu_changes.append(f"{r.get('variant')} ({', '.join(sorted(types))})")
        if gpu_changes:
            bullets.append([Strong("Different GPU types: "), "; ".join(gpu_changes) + "."])
    for axis, rows in sweep_axes(table).items():
        pts = [r for r in rows if is_num(r.get("cost_usd_per_hour"))]
        if len(pts) < 2:
            continue
        first, last = pts[0], pts[-1]
        xs: list[Any] = [r.get("value") for r in pts]
        share = "share" in axis.lower() and all(is_num(x) and 0 <= x <= 1 for x in xs)

        def at(v: Any, share: bool = share) -> str:
            return f"{v * 100:.0f}%" if share else _short(v)

        text = (
            f"from {usd_short(first['cost_usd_per_hour'])}/h at {at(first.get('value'))} "
            f"to {usd_short(last['cost_usd_per_hour'])}/h at {at(last.get('value'))}"
        )
        if share and xs[-1] != xs[0]:
            x0, x1 = float(xs[0]), float(xs[-1])
            slope = (last["cost_usd_per_hour"] - first["cost_usd_per_hour"]) / (x1 - x0)
            text += f" (about {usd_delta(slope / 100)}/h per percentage point)"
        bad = len(rows) - len(pts)
        if bad:
            text += f"; {bad} value{'s' if bad > 1 else ''} without a feasible plan"
        bullets.append([Strong(f"Sweep {axis}: "), text + "."])
    if failed:
        bullets.append(
            [
                Strong("No feasible plan: "),
                "; ".join(
                    f"{r.get('variant')} ({r.get('status')}"
                    + (f": {r.get('error')}" if r.get("error") else "")
                    + ")"
                    for r in failed
                )
                + ".",
            ]
        )
    if bullets:
        summary.append(Bullets(bullets))
    if with_charts:
        items = []
        svg = charts.chart_variant_costs(table)
        if svg:
            items.append(
                Chart(
                    svg,
                    "Hourly cost of each named variant; the label is the change against the base.",
                )
            )
        svg = charts.chart_sweeps(table, base_cost if is_num(base_cost) else None)
        if svg:
            items.append(Chart(svg, "Each point is a full re-plan at that value."))
        if items:
            summary.append(Charts(items))

    sections = [
        Section(
            "variants",
            "Variants against the base",
            [
                _variant_rows(named, changes),
                Para(
                    [
                        "Every variant is re-planned from scratch: its cheapest fleet that meets "
                        "the latency objectives. Modes: split = disaggregated prefill/decode "
                        "pools, chunked = one aggregated pool with chunked prefill."
                    ],
                    kind="note",
                ),
            ],
            page_break=True,
        )
    ]
    for axis, rows in sweep_axes(table).items():
        values = [r.get("value") for r in rows]
        as_share = "share" in axis.lower() and all(is_num(v) and 0 <= v <= 1 for v in values)
        sections.append(
            Section(
                f"sweep-{len(sections)}",
                f"Sweep: {axis}",
                [
                    Table(
                        [
                            axis,
                            "Status",
                            "$/hour",
                            "vs base",
                            "Change",
                            "GPUs",
                            "GPU types",
                            "Modes",
                        ],
                        [
                            [
                                f"{r['value'] * 100:.0f}%" if as_share else _short(r.get("value")),
                                s(r.get("status")),
                                usd(r.get("cost_usd_per_hour")),
                                usd_delta(r.get("delta_usd_per_hour")),
                                pct_delta(r.get("delta_pct")),
                                num(r.get("gpus_total")),
                                _gpus_text(_map(r.get("gpus_by_type"))),
                                ", ".join(
                                    f"{k} {v or '–'}" for k, v in _map(r.get("modes")).items()
                                ),
                            ]
                            for r in rows
                        ],
                        [True, False, True, True, True, True, False, False],
                        small=True,
                    )
                ],
            )
        )

    bom_rows = []
    all_gpus: list[str] = []
    for v, p in zip(variants, plans, strict=False):
        if not p:
            continue
        b = build_bom(_map(p), catalog)
        for i, ln in enumerate(b.lines):
            if ln.gpu not in all_gpus:
                all_gpus.append(ln.gpu)
            bom_rows.append(
                [
                    s(v.get("name")) if i == 0 else "",
                    ln.gpu,
                    num(ln.gpus),
                    num(ln.nodes),
                    num(ln.rack_units),
                    kw(ln.power_kw),
                    usd(ln.usd_per_hour),
                    usd(ln.usd_per_month, 0),
                    usd(ln.usd_3y, 0),
                ]
            )
    blocks: list[Block] = []
    if base_bom and base_bom.lines:
        blocks += [Heading("Base"), bom_table(base_bom, catalog), *bom_notes(base_bom)]
    if bom_rows:
        blocks += [
            Heading("Every variant"),
            Table(
                [
                    "Variant",
                    "GPU",
                    "GPUs",
                    "Servers",
                    "Rack units",
                    "Power",
                    "$/hour",
                    "$/month",
                    "3 years",
                ],
                bom_rows,
                [False, False, True, True, True, True, True, True, True],
                small=True,
            ),
        ]
    sections.append(Section("bom", "Bills of materials", blocks, page_break=True))

    hashes = sorted({str(_map(p).get("catalog_hash")) for p in plans if p})
    assumptions: list[Block] = [
        Table(
            ["Item", "Value"],
            [
                ["Catalog hash", ", ".join(hashes) or "–"],
                ["Current catalog", catalog.content_hash],
                ["Model", model_name(base_req.get("model"), catalog)],
                ["Variants", f"{len(others)} (each planned independently)"],
            ],
            [False, False],
        )
    ]
    if base_plan and base_bom:
        assumptions += price_blocks(all_gpus, base_plan, catalog)
    assumptions += [Heading("Base request"), Code("YAML", request_yaml(dict(base_req)))]
    sections.append(Section("assumptions", "Assumptions", assumptions, page_break=True))

    meta = []
    if comparison.get("id") is not None:
        meta.append(("Comparison", str(comparison["id"])))
    if comparison.get("created_at"):
        meta.append(("Created", str(comparison["created_at"])))
    meta.append(("Model", model_name(base_req.get("model"), catalog)))
    meta.append(("Variants", str(len(others))))
    return Document(
        title=str(name),
        kicker="Procurement report · what-if comparison",
        meta=meta,
        headline=headline,
        status=status,
        figures=figures,
        summary=summary,
        sections=sections,
        footer=(
            "Generated by fleetplan from the stored comparison. Prices are list on-demand rates "
            "per GPU-hour from the catalog (estimates where marked), not quotes."
        ),
    )
