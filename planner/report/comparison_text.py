"""A what-if comparison's table as plain text (``fleetplan compare``).

One row per variant, base first: status, cost per hour, the difference from the
base (US$/h and %), cost per million tokens, GPUs in total and by type, the
prefill:decode GPU ratio, and per traffic class its mode and predicted TTFT/TPOT
(ms, at the class's SLO percentile). Below the table, the variants that could not
be planned or are infeasible, with the reason. Rows are the
``planner.compare.comparison_table`` rows (or stored ones: read defensively).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from planner.report.text import ms, num, per_mtok, render_table, usd, usd_delta

WRAP = 100
MODE_SHORT = {"aggregated": "agg", "disaggregated": "disagg"}


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _delta_pct(value: Any) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "-"
    return f"{value:+.1f}%"


def _gpus_by_type(value: Any) -> str:
    by_type = _map(value)
    parts = [f"{n:,} {gpu}" for gpu, n in sorted(by_type.items(), key=lambda t: (-t[1], t[0]))]
    return ", ".join(parts) or "-"


def _ratio(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) and not isinstance(value, bool) else "-"


def class_names(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Traffic classes in order of first appearance."""
    out: list[str] = []
    for row in rows:
        for name in _map(row.get("modes")):
            if name not in out:
                out.append(name)
    return out


def render_comparison_text(
    rows: Sequence[Mapping[str, Any]], title: str | None = None, *, plan_ids: bool = False
) -> str:
    """The table, with a title line and notes; ``plan_ids`` adds each stored plan's id."""
    rows = [_map(r) for r in rows]
    classes = class_names(rows)
    headers = ["variant", "status", "$/h", "Δ $/h", "Δ %", "$/Mtok", "GPUs", "by type", "P:D"]
    for c in classes:
        headers += [f"{c} mode", f"{c} TTFT/TPOT ms"]
    if plan_ids:
        headers.append("plan")
    body = []
    for r in rows:
        is_base = r.get("variant") == "base"
        cells = [
            str(r.get("variant", "?")),
            str(r.get("status", "-")),
            usd(r.get("cost_usd_per_hour")),
            "-" if is_base else usd_delta(r.get("delta_usd_per_hour")),
            "-" if is_base else _delta_pct(r.get("delta_pct")),
            per_mtok(r.get("cost_usd_per_million_tokens")),
            num(r.get("gpus_total")),
            _gpus_by_type(r.get("gpus_by_type")),
            _ratio(r.get("pool_ratio_prefill_to_decode")),
        ]
        modes, ttft, tpot = _map(r.get("modes")), _map(r.get("ttft_ms")), _map(r.get("tpot_ms"))
        meets = _map(r.get("meets_slo"))
        for c in classes:
            mode = modes.get(c)
            cells.append(MODE_SHORT.get(str(mode), str(mode)) if mode else "-")
            t, p = ms(ttft.get(c)), ms(tpot.get(c))
            lat = "-" if t == p == "-" else f"{t}/{p}"
            if meets.get(c) is False:
                lat += " (miss)"
            cells.append(lat)
        if plan_ids:
            cells.append(str(r.get("plan_id") or "-"))
        body.append(cells)
    lines = []
    if title:
        base = next((r for r in rows if r.get("variant") == "base"), {})
        lines.append(f"{title}: {len(rows)} variants, base {usd(base.get('cost_usd_per_hour'))}/h")
        lines.append("")
    lines.append(render_table(headers, body))
    lines += [
        "",
        "$/h: the GPUs' cost (operations costs of GPU types and configurations not "
        "included); $/Mtok: per million prompt (cached included) + output tokens",
    ]
    notes = []
    for r in rows:
        status = r.get("status")
        if status == "error":
            notes.append(f"{r.get('variant')}: could not be planned: {r.get('error') or '?'}")
        elif status == "infeasible":
            reasons = "; ".join(str(x) for x in r.get("infeasible_reasons") or []) or "no reason"
            notes.append(f"{r.get('variant')}: infeasible: {_shorten(reasons)}")
    if notes:
        lines += ["", "Not planned:"]
        lines += [
            textwrap.fill(n, WRAP, initial_indent="  ", subsequent_indent="    ") for n in notes
        ]
    lines.append("")
    lines.append(
        textwrap.fill(
            "Δ: cost minus the base's. P:D: prefill GPUs per decode GPU (disaggregated "
            "pools). TTFT/TPOT: predicted at each class's SLO percentile; agg: chunked "
            "prefill in one pool; disagg: separate prefill and decode pools.",
            WRAP,
        )
    )
    return "\n".join(lines) + "\n"


def _shorten(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
