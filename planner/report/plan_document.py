"""A stored plan's report: :func:`plan_document` turns the plan (and its request,
sensitivity and catalog) into a :class:`~planner.report.document.Document`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from catalog.schema import Catalog
from planner.plan.notes import notes_of
from planner.report import charts
from planner.report import text as _text
from planner.report.alternatives import (
    alternatives_table,
    next_cheapest,
    sensitivity_blocks,
    sensitivity_sentence,
    uncertainty_sentence,
    why_not_table,
)
from planner.report.blocks import (
    bom_notes,
    bom_table,
    classes_table,
    launch_blocks,
    mode_bullets,
    pools_table,
    price_blocks,
    request_yaml,
    slo_sentence,
    solver_para,
    traffic_table,
    verification_blocks,
)
from planner.report.bom import Bom, build_bom
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
    _list,
    _map,
    is_num,
    kw,
    model_name,
    ms,
    num,
    pct,
    pct_delta,
    per_mtok,
    pool_class,
    rps,
    s,
    usd,
    usd_delta,
    usd_short,
)
from planner.report.tco_blocks import summary_runs, tco_section
from solver.problem import has_solution

# --------------------------------------------------------------------------- plans


def _buy_text(bom: Bom) -> str:
    return " + ".join(f"{ln.gpus:,} × {ln.gpu_name}" for ln in bom.lines)


def _headline(bom: Bom, tco: Mapping[str, Any]) -> str:
    """Buy / Rent / Own + rent, from the plan's procurement choice (buy without one)."""
    purchase = tco.get("purchase")
    if purchase == "rent":
        return f"Rent {_buy_text(bom)}"
    if purchase == "hybrid":
        servers = _map(tco.get("servers_by_type"))
        owned = " + ".join(f"{num(n)} servers of {g}" for g, n in sorted(servers.items()) if n)
        return f"Own {owned}, rent the rest by the hour" if owned else f"Rent {_buy_text(bom)}"
    return f"Buy {_buy_text(bom)}"


def _with_prices(plan: Mapping[str, Any]) -> str:
    """ "; with price ranges $a–$b" (``cost_band_with_prices_usd_per_hour``), or ""."""
    band = _text.band_of(plan.get("cost_band_with_prices_usd_per_hour"))
    if band is None:
        return ""
    return f"; with price ranges {usd_short(band[0])}–{usd_short(band[1])}"


def _bom_purchase_note(tco: Mapping[str, Any]) -> list[Block]:
    """Under rent or hybrid, say that the bill of materials is the peak fleet, not
    what is bought."""
    purchase = tco.get("purchase")
    day = (
        " Its rent columns rent the peak fleet around the clock; the TCO's rent follows "
        "the day's load (load_profile)."
        if tco.get("load_profile")
        else ""
    )
    if not tco:
        return []
    if purchase == "buy":
        return [Para([Strong("Peak fleet: "), day.strip()], kind="note")] if day else []
    servers = _map(tco.get("servers_by_type"))
    bought = ", ".join(f"{num(n)} servers of {g}" for g, n in sorted(servers.items()) if n)
    what = f"only {bought} are bought" if bought else "nothing is bought"
    return [
        Para(
            [
                Strong("Peak fleet: "),
                f"this is the fleet the peak hour needs; with purchase {purchase}, {what} and "
                "the rest is rented (Total cost of ownership, below). Its capital column is "
                "what buying all of it would cost." + day,
            ],
            kind="warn",
        )
    ]


def _meta(
    record: Mapping[str, Any], plan: Mapping[str, Any], catalog: Catalog
) -> list[tuple[str, str]]:
    out = []
    if record.get("id") is not None:
        out.append(("Plan", str(record["id"])))
    if record.get("created_at"):
        out.append(("Created", str(record["created_at"])))
    out.append(("Model", model_name(plan.get("model"), catalog)))
    out.append(("Objective", s(plan.get("objective"))))
    out.append(("Status", s(plan.get("status"))))
    out.append(("Catalog", s(plan.get("catalog_hash"))))
    return out


def plan_document(
    record: Mapping[str, Any], catalog: Catalog, *, with_charts: bool = True
) -> Document:
    """The procurement report of one stored plan (see the module docstring)."""
    plan = _map(record.get("plan"))
    request = _map(record.get("request"))
    sens = record.get("sensitivity")
    bom = build_bom(plan, catalog)
    status = str(plan.get("status") or "")
    solved = has_solution(status)
    robust = bool(plan.get("scenarios"))
    name = request.get("name") or (f"plan {record['id']}" if record.get("id") else "fleet plan")
    cost = plan.get("cost_usd_per_hour")
    t = bom.total

    summary: list[Block] = []
    figures: list[Figure] = []
    tco = _map(plan.get("tco"))
    if solved and bom.lines:
        headline = _headline(bom, tco)
        doc_status = "ok"
        figures = [
            Figure("per hour", usd(cost), "list price, on demand"),
            Figure("per month", usd_short(t.usd_per_month), "730 hours"),
            Figure("over 3 years", usd_short(t.usd_3y), "26,280 hours, on-demand rent"),
            Figure("GPUs", num(t.gpus), f"in {num(t.nodes)} servers, {num(t.rack_units)} RU"),
            Figure("power", kw(t.power_kw), "GPUs + server share"),
            Figure(
                "per million tokens",
                per_mtok(plan.get("cost_usd_per_million_tokens")),
                "prompt + output",
            ),
        ]
        band = _text.band_of(plan.get("cost_band_usd_per_hour"))
        if band is not None:
            risk = _map(plan.get("risk"))
            figures.insert(
                1,
                Figure(
                    "cost band per hour",
                    f"{usd_short(band[0])}–{usd_short(band[1])}",
                    f"{pct(risk.get('band_confidence'))} band of the capacity error"
                    + _with_prices(plan),
                ),
            )
        if is_num(tco.get("total_usd")):
            years = tco.get("horizon_years")
            figures[3] = Figure(
                f"{years:g}-year TCO" if is_num(years) else "TCO",
                usd_short(tco["total_usd"]),
                f"{tco.get('purchase')}: capital, energy, hosting, rent, operations",
            )
            figures.insert(
                3,
                Figure(
                    "capital",
                    usd_short(tco.get("capex_usd")),
                    f"{num(sum(_map(tco.get('servers_by_type')).values()))} whole servers"
                    if tco.get("capex_usd")
                    else "rented: none",
                ),
            )
            figures.append(
                Figure(
                    "per million output tokens",
                    per_mtok(tco.get("usd_per_million_output_tokens")),
                    "TCO over the horizon",
                )
            )
        elif t.capital_usd is not None:
            figures.insert(3, Figure("capital", usd_short(t.capital_usd), "whole servers"))
        classes = [c for c in _list(plan.get("classes"))]
        total_rate = sum(c.get("rate_rps") or 0 for c in classes)
        lead: list[Run] = [
            Strong(f"{_buy_text(bom)}"),
            f" in {num(t.nodes)} servers ({num(t.rack_units)} rack units, {kw(t.power_kw)}) "
            f"for {usd(cost)}/hour at list prices: {usd_short(t.usd_per_month)} a month, "
            f"{usd_short(t.usd_per_year)} a year, {usd_short(t.usd_3y)} over three years",
        ]
        if tco:
            lead[1] = (
                f" in {num(t.nodes)} servers ({num(t.rack_units)} rack units, {kw(t.power_kw)}); "
                f"rented on demand at list prices it would cost {usd(cost)}/hour "
                f"({usd_short(t.usd_per_month)} a month)"
            )
        elif t.capital_usd is not None:
            lead.append(f"; {usd_short(t.capital_usd)} to purchase outright")
        lead.append(".")
        summary.append(Para(lead, kind="lead"))
        exec_line = summary_runs(plan)
        if exec_line:
            summary.append(Para(exec_line, kind="lead"))
        if robust:
            scen = _list(plan.get("scenarios"))
            names = ", ".join(str(x.get("name")) for x in scen)
            alone = _map(plan.get("assumptions")).get("weighted_cost_alone_usd_per_hour")
            summary.append(
                Para(
                    [
                        f"One fleet for {len(scen)} traffic scenarios of "
                        f"{model_name(plan.get('model'), catalog)} ({names}): GPUs are "
                        "re-assigned between pools per scenario. Planned alone, the weighted "
                        f"scenarios would cost {usd(alone)}/h; the difference buys the ability "
                        "to follow the mix."
                    ]
                )
            )
        else:
            summary.append(
                Para(
                    [
                        f"It serves {model_name(plan.get('model'), catalog)} at {rps(total_rate)} "
                        f"requests/s in {len(classes)} traffic "
                        f"class{'es' if len(classes) != 1 else ''}. Why this shape:"
                    ]
                )
            )
        bullets = mode_bullets(plan)
        slo = slo_sentence(plan)
        if slo:
            bullets.append(slo.runs)
        v = _map(plan.get("verification"))
        if v.get("enabled") and v.get("summary"):
            bullets.append([Strong("Simulation: "), str(v["summary"])])
        binding = _list(plan.get("binding"))
        if not robust:
            bullets.append(
                [
                    Strong("Binding constraints: "),
                    "; ".join(str(b.get("detail") or b.get("name")) for b in binding)
                    if binding
                    else "none — no budget, stock, power or configuration limit is active; "
                    "the fleet is as small as the latency objectives allow.",
                ]
            )
        alt = next_cheapest(plan)
        # alternatives are priced as the optimizer's objective (GPUs + operations):
        # compare with the plan's total, or take the planner's own delta
        total = plan.get("total_cost_usd_per_hour")
        base = total if is_num(total) and total else cost
        if alt is not None and is_num(base) and base:
            d = alt.get("delta_usd_per_hour")
            d = d if is_num(d) else alt["cost_usd_per_hour"] - base
            bullets.append(
                [
                    Strong("Next-cheapest: "),
                    f"“{alt.get('name')}” at {usd(alt['cost_usd_per_hour'])}/h "
                    f"({usd_delta(d)}/h, {pct_delta(100 * d / base)}"
                    + (
                        f" against this plan's {usd(total)}/h with operations)."
                        if is_num(total) and total
                        else ")."
                    ),
                ]
            )
        unc = uncertainty_sentence(plan)
        if unc:
            bullets.append(unc)
        sens_run = sensitivity_sentence(sens)
        if sens_run:
            bullets.append(sens_run)
        if bullets:
            summary.append(Bullets(bullets))
        if status == "feasible":
            gap = _map(plan.get("solver")).get("gap")
            summary.append(
                Para(
                    [
                        "The solver stopped at its time limit: this fleet is feasible and within "
                        f"{pct(gap, 2)} of the cheapest possible."
                    ],
                    kind="warn",
                )
            )
    elif solved:
        headline = "Nothing to buy"
        doc_status = "warn"
        summary.append(Para(["The plan needs no GPUs (no traffic)."]))
    else:
        headline = "No fleet meets this request"
        doc_status = "bad"
        summary.append(
            Para(
                [Strong("No fleet meets this request"), f" (status {status or 'unknown'})."],
                kind="warn",
            )
        )
        reasons: list[list[Run]] = [[str(r)] for r in _list(plan.get("infeasible_reasons"))]
        if reasons:
            summary.append(Bullets(reasons))
    summary += warning_blocks(plan)

    if with_charts and solved:
        items = []
        if robust:
            svg = charts.chart_robust_usage(plan, {})
            if svg:
                items.append(
                    Chart(svg, "Solid: GPUs serving the scenario; light: bought but idle.")
                )
        else:
            svg = charts.chart_cost_by_pool(plan)
            if svg:
                items.append(Chart(svg, "Hourly cost of each pool, by GPU type."))
            svg = charts.chart_gpus_per_class(plan)
            if svg:
                items.append(Chart(svg, "GPUs each class uses, by role."))
        if items:
            summary.append(Charts(items))

    sections: list[Section] = []
    if not solved:
        blocks: list[Block] = [Bullets([[str(r)] for r in _list(plan.get("infeasible_reasons"))])]
        relax = _map(plan.get("relaxation"))
        if relax:
            blocks.append(
                Table(
                    ["Limit", "Must grow by"],
                    [[str(k), num(v, 2)] for k, v in sorted(relax.items())],
                    [False, True],
                )
            )
        sections.append(Section("infeasible", "Why no fleet meets this request", blocks))

    if bom.lines:
        sections.append(
            Section(
                "bom",
                "Bill of materials",
                [bom_table(bom, catalog), *_bom_purchase_note(tco), *bom_notes(bom)],
            )
        )

    tco_sec = tco_section(plan, with_charts) if solved else None
    if tco_sec is not None:
        sections.append(tco_sec)

    if robust:
        sections += robust_sections(plan, catalog)
    elif _list(plan.get("pools")):
        pools = _list(plan.get("pools"))
        sections.append(
            Section(
                "pools",
                "Pools and launch settings",
                [
                    pools_table(pools),
                    Para(
                        [
                            "Load = the pool's request rate over its capacity within the latency "
                            "objectives (not GPU busy time). TTFT and TPOT are predicted at the "
                            "SLO percentile. Each replica is one engine process on TP GPUs."
                        ],
                        kind="note",
                    ),
                    *kv_transfer_paras(pools, _list(plan.get("kv_pairs"))),
                    *serving_stack_paras(pools),
                    *launch_blocks(pools, catalog),
                ],
                page_break=True,
            )
        )
    if _list(plan.get("classes")):
        class_reasons: list[list[Run]] = [
            [Strong(f"{c.get('name')}: "), str(c.get("mode_reason"))]
            for c in _list(plan.get("classes"))
            if c.get("mode_reason")
        ]
        blocks = [classes_table(plan)]
        if class_reasons:
            blocks += [Heading("Why each class is served the way it is"), Bullets(class_reasons)]
        blocks += verification_blocks(plan)
        sections.append(Section("classes", "Traffic classes and predicted SLO attainment", blocks))

    if solved and not robust:
        binding = _list(plan.get("binding"))
        blocks = [
            Heading("Binding constraints"),
            Bullets(
                [[str(b.get("name")), f": {b.get('detail')}"] for b in binding]
                if binding
                else [["None: no budget, stock, power or configuration limit is active."]]
            ),
        ]
        alt_t = alternatives_table(plan)
        if alt_t:
            blocks += [Heading("Alternatives (the next-cheapest fleets)"), alt_t]
        wn = why_not_table(plan)
        if wn:
            blocks += [Heading("Why not other GPUs"), wn]
        sections.append(Section("why", "Binding constraints and alternatives", blocks))

    if solved:
        sections.append(
            Section(
                "sensitivity",
                "Sensitivity",
                sensitivity_blocks(
                    sens, cost, with_charts, pending=record.get("sensitivity_pending")
                ),
            )
        )

    assumptions: list[Block] = [
        Table(
            ["Item", "Value"],
            [
                ["Catalog hash", s(plan.get("catalog_hash"))],
                ["Current catalog", catalog.content_hash],
                ["Model", model_name(plan.get("model"), catalog)],
                ["Objective", s(plan.get("objective"))],
                [
                    "Pools",
                    str(
                        _map(plan.get("assumptions")).get("pools_per_class")
                        or "each pool serves one class"
                    ),
                ],
            ],
            [False, False],
        ),
        *price_blocks([ln.gpu for ln in bom.lines], plan, catalog),
    ]
    tt = traffic_table(plan)
    if tt:
        assumptions += [Heading("Traffic figures per class"), tt]
    notes = notes_of(plan)
    if notes:
        # the plan's assumed_notes (the plain-text report's "Assumed" lines): the TTFT of
        # disaggregated classes, speculative acceptance and FP4 efficiency are assumed
        assumptions += [Heading("Assumed"), Bullets([[t] for t in notes])]
    sp = solver_para(plan)
    if sp:
        assumptions.append(sp)
    if request:
        assumptions += [
            Heading("The request (to reproduce this plan)"),
            Code("YAML", request_yaml(dict(request))),
        ]
    sections.append(Section("assumptions", "Assumptions", assumptions, page_break=True))

    return Document(
        title=str(name),
        kicker="Procurement report · fleet plan",
        meta=_meta(record, plan, catalog),
        headline=headline,
        status=doc_status,
        figures=figures,
        summary=summary,
        sections=sections,
        footer=(
            "Generated by fleetplan from the stored plan. Prices are list on-demand rates per "
            "GPU-hour from the catalog (estimates where marked), not quotes."
        ),
    )


def serving_stack_paras(pools: Sequence[Mapping[str, Any]]) -> list[Block]:
    """One note per pool whose TTFT includes a serving stack's latency
    (``serving_stack_ms`` > 0 in its plan JSON, planner.serving_stack)."""
    out: list[Block] = []
    for p in pools:
        stack = p.get("serving_stack_ms")
        if is_num(stack) and stack > 0:
            out.append(
                Para(
                    [
                        f"{pool_class(p)} {p.get('role')} on {p.get('gpu')}: TTFT includes "
                        f"{ms(stack)} ms of serving stack at the SLO percentile's prompt (API "
                        "server, tokenization, scheduling: measured on public runs of MLA "
                        "models, no GPU time)."
                    ],
                    kind="note",
                )
            )
    return out


def warning_blocks(plan: Mapping[str, Any]) -> list[Block]:
    """The plan's warnings (``warnings``: requests beyond the model's context, pools on
    an LLM their GPU measured well below its factors, ...) as a warning line and a list;
    nothing without any."""
    warns: list[list[Run]] = [[str(w)] for w in _list(plan.get("warnings"))]
    if not warns:
        return []
    head = f"{len(warns)} warning{'s' if len(warns) != 1 else ''} to read before buying:"
    return [Para([Strong("Warnings: "), head], kind="warn"), Bullets(warns)]


def kv_transfer_paras(pools: Sequence[Mapping[str, Any]], pairs: Sequence[Any] = ()) -> list[Block]:
    """The KV-cache transfer notes under the pools table
    (:func:`planner.report.text.kv_transfer_sentences`)."""
    return [Para([line + "."], kind="note") for line in _text.kv_transfer_sentences(pools, pairs)]


def robust_sections(plan: Mapping[str, Any], catalog: Catalog) -> list[Section]:
    scen = _list(plan.get("scenarios"))
    rows = []
    for sc in scen:
        sub = _map(sc.get("plan"))
        modes = ", ".join(
            f"{c.get('name')} {c.get('mode') or '–'}" for c in _list(sub.get("classes"))
        )
        rows.append(
            [
                s(sc.get("name")),
                num(sc.get("weight"), 2),
                usd(sub.get("cost_usd_per_hour")),
                usd(sc.get("cost_alone_usd_per_hour")),
                usd(sc.get("premium_usd_per_hour")),
                ", ".join(f"{g} {n:,}" for g, n in _map(sc.get("gpus_used")).items()) or "–",
                ", ".join(f"{g} {n:,}" for g, n in _map(sc.get("gpus_idle")).items()) or "none",
                modes,
            ]
        )
    out = [
        Section(
            "scenarios",
            "Scenarios",
            [
                Table(
                    [
                        "Scenario",
                        "Weight",
                        "GPUs in use, $/h",
                        "Cheapest alone, $/h",
                        "Premium, $/h",
                        "GPUs in use",
                        "GPUs idle",
                        "Modes",
                    ],
                    rows,
                    [False, True, True, True, True, False, False, False],
                    small=True,
                ),
                Para(
                    [
                        "Premium = the robust fleet's cost minus the cheapest fleet for that "
                        "scenario alone: what buying for the whole range costs in that scenario."
                    ],
                    kind="note",
                ),
            ],
            page_break=True,
        )
    ]
    for sc in scen:
        sub = _map(sc.get("plan"))
        pools = _list(sub.get("pools"))
        blocks: list[Block] = []
        if pools:
            blocks += [
                pools_table(pools),
                *kv_transfer_paras(pools, _list(sub.get("kv_pairs"))),
                *serving_stack_paras(pools),
            ]
        if _list(sub.get("classes")):
            blocks += [Heading("Classes"), classes_table(sub)]
        blocks += launch_blocks(pools, catalog)
        out.append(
            Section(
                f"scenario-{len(out)}",
                f"Scenario {sc.get('name')}: pools and launch settings",
                blocks,
                page_break=True,
            )
        )
    return out
