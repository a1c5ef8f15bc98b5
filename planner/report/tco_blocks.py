"""The report's total-cost-of-ownership pieces (a plan's ``tco``, planner.procurement):
the executive summary line, the TCO tables, the assumptions and the own/rent chart.
Every figure is read from the stored plan; nothing is recomputed here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planner.report.document import (
    Block,
    Bullets,
    Chart,
    Charts,
    Para,
    Run,
    Section,
    Strong,
    Table,
)
from planner.report.formatting import _list, _map, is_num, num, usd, usd_short
from planner.report.text import cheaper_option_text

TERMS = {
    "on_demand": "on demand",
    "reserved_1y": "1-year reserved",
    "reserved_3y": "3-year reserved",
}
ITEMS = (
    ("capex_usd", "Capital: servers + networking"),
    ("energy_usd", "Energy (owned servers)"),
    ("hosting_usd", "Hosting (owned servers)"),
    ("rent_usd", "Rent"),
    ("operations_usd", "Operations (GPU types, configurations)"),
)


def _years(tco: Mapping[str, Any]) -> str:
    y = tco.get("horizon_years")
    return f"{y:g}-year" if is_num(y) else "horizon"


def _servers_text(servers: Mapping[str, Any]) -> str:
    parts = [f"{num(n)} × {g}" for g, n in sorted(servers.items()) if is_num(n) and n]
    return " + ".join(parts) if parts else "no servers"


def summary_runs(plan: Mapping[str, Any]) -> list[Run] | None:
    """The executive summary line: capex, the horizon's TCO with its band, $ per million
    output tokens, and buy / rent / hybrid side by side."""
    tco = _map(plan.get("tco"))
    if not tco or not is_num(tco.get("total_usd")):
        return None
    years = _years(tco)
    runs: list[Run] = [Strong("Executive summary: ")]
    capex = tco.get("capex_usd") or 0
    if capex:
        runs.append(
            f"capex {usd_short(capex)} for {_servers_text(_map(tco.get('servers_by_type')))} "
            "whole servers; "
        )
    else:
        runs.append("no capex (rented); ")
    band = tco.get("band_usd")
    band_text = (
        f" (band {usd_short(band[0])}–{usd_short(band[1])})"
        if isinstance(band, list | tuple) and len(band) == 2
        else ""
    )
    runs.append(
        f"{years} TCO {usd_short(tco['total_usd'])}{band_text} ({tco.get('purchase')}), "
        f"{usd(tco.get('usd_per_million_output_tokens'))} per million output tokens. "
    )
    opts = [o for o in _list(tco.get("options"))]
    if opts:
        term = TERMS.get(str(tco.get("rent_term")), str(tco.get("rent_term")))
        bits = []
        for o in opts:
            label = f"rent ({term})" if o.get("purchase") == "rent" else str(o.get("purchase"))
            val = usd_short(o["total_usd"]) if o.get("available") else "not possible"
            bits.append(f"{label} {val}")
        runs.append(f"Over {years.replace('-year', ' years')}: " + ", ".join(bits) + ".")
        hint = cheaper_option_text(tco)
        if hint:
            runs.append(" " + hint)
    return runs


def tco_section(plan: Mapping[str, Any], with_charts: bool = True) -> Section | None:
    """The "Total cost of ownership" section: buy / rent / hybrid by cost item, the
    chosen option per GPU type, the assumptions and notes, and the own/rent chart."""
    tco = _map(plan.get("tco"))
    if not tco:
        return None
    opts = {str(o.get("purchase")): o for o in _list(tco.get("options"))}
    chosen = str(tco.get("purchase"))
    term = TERMS.get(str(tco.get("rent_term")), str(tco.get("rent_term")))
    names = [n for n in ("buy", "rent", "hybrid") if n in opts]
    headers = ["Over " + _years(tco).replace("-year", " years")] + [
        (f"rent ({term})" if n == "rent" else n) + (" (chosen)" if n == chosen else "")
        for n in names
    ]
    rows = []
    for key, label in ITEMS:
        rows.append(
            [label] + [usd(opts[n].get(key), 0) if opts[n].get("available") else "—" for n in names]
        )
    rows.append(
        ["Servers bought"]
        + [
            _servers_text(_map(opts[n].get("servers_by_type"))) if opts[n].get("available") else "—"
            for n in names
        ]
    )
    rows.append(
        ["Total"]
        + [
            usd(opts[n].get("total_usd"), 0) if opts[n].get("available") else "not possible"
            for n in names
        ]
    )
    blocks: list[Block] = [
        Table(headers, rows, [False] + [True] * len(names), total_last=True),
    ]
    why_not: list[list[Run]] = [
        [Strong(f"{n}: "), str(opts[n].get("note"))] for n in names if opts[n].get("note")
    ]
    if why_not:
        blocks.append(Bullets(why_not))
    lines = _list(tco.get("lines"))
    if lines:
        blocks.append(
            Table(
                [
                    "GPU",
                    "GPUs at peak",
                    "Owned GPUs",
                    "Servers",
                    "Per server",
                    "Networking",
                    "Capital",
                    "Energy",
                    "Hosting",
                    "Rent",
                ],
                [
                    [
                        str(ln.get("gpu")),
                        num(ln.get("gpus_needed_peak")),
                        num(ln.get("owned_gpus")),
                        f"{num(ln.get('servers'))} × {num(ln.get('gpus_per_server'))}",
                        usd(ln.get("usd_per_server"), 0)
                        + (" (est.)" if ln.get("purchase_is_estimate") else ""),
                        usd(ln.get("networking_usd_per_server"), 0),
                        usd(ln.get("capex_usd"), 0),
                        usd(ln.get("energy_usd"), 0),
                        usd(ln.get("hosting_usd"), 0),
                        usd(ln.get("rent_usd"), 0),
                    ]
                    for ln in lines
                ],
                [False] + [True] * 9,
                caption=f"{chosen}, by GPU type",
            )
        )
    blocks.append(
        Para(
            [
                f"Horizon {tco.get('horizon_years'):g} years; energy "
                f"{usd(tco.get('electricity_usd_per_kwh'))}/kWh at PUE {tco.get('pue'):g}; "
                f"hosting {usd(tco.get('hosting_usd_per_kw_month'), 0)}/kW-month; rent at "
                f"{term} prices. Capital = whole servers × (server price + networking); "
                "energy = kW × PUE × hours × $/kWh; hosting = kW × $/kW-month × months; rent = "
                "GPU-hours × $/GPU-hour; owned kW = servers × nameplate server power. The band "
                "runs every price over its catalog range and the fleet over its capacity band."
            ],
            kind="note",
        )
    )
    notes: list[list[Run]] = [[str(n)] for n in _list(tco.get("notes"))]
    if notes:
        blocks.append(Bullets(notes))
    # a flat day (no load_profile) has nothing to show hour by hour
    if with_charts and tco.get("hourly") and tco.get("load_profile"):
        from planner.report.tco_chart import chart_own_rent_by_hour

        svg = chart_own_rent_by_hour(tco)
        if svg:
            caption = (
                "Bars: GPUs owned (light: owned but idle that hour), reserved and rented on "
                "demand; line: GPUs each hour's load needs (the request's load_profile)."
            )
            blocks.append(Charts([Chart(svg, caption)]))
    return Section("tco", "Total cost of ownership", blocks)
