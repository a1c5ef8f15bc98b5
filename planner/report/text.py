"""A plan as plain text: the header, pools, classes, binding constraints,
alternatives, infeasibility, the solver line and the launch commands.

``render_plan_text`` takes the plan's JSON (``Plan.to_json_dict()``, or a stored
plan document) rather than the model, so plans stored by older versions render
too: every field is read defensively and a missing one shows as ``-``.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from planner.plan.notes import notes_of
from planner.report.borrowed import borrowed_level_note, unmeasured_gpu_note
from planner.report.served import unserved_lines
from solver.problem import has_solution

RULE = "-"


# --------------------------------------------------------------------------- tables


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "") -> str:
    """A plain aligned text table; numeric-looking columns are right-aligned."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    numeric = [
        bool(rows) and all(_looks_numeric(row[i]) for row in rows) for i in range(len(headers))
    ]

    def fmt(cells: Sequence[str]) -> str:
        out = [
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(cells, widths, numeric, strict=True)
        ]
        return (indent + "  ".join(out)).rstrip()

    lines = [fmt(headers), fmt([RULE * w for w in widths])]
    lines += [fmt(row) for row in rows]
    return "\n".join(lines)


def _looks_numeric(cell: str) -> bool:
    stripped = cell.strip().lstrip("+~$-").rstrip("%xB").replace(",", "").replace(".", "", 1)
    return stripped in ("", "-") or stripped.isdigit()


# --------------------------------------------------------------------------- numbers


#: What a missing or non-finite number prints as (the HTML/Markdown reports pass "–").
MISSING = "-"


def _is_num(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def num(value: Any, digits: int = 0, missing: str = MISSING) -> str:
    return f"{value:,.{digits}f}" if _is_num(value) else missing


def usd(value: Any, digits: int = 2, missing: str = MISSING) -> str:
    if not _is_num(value):
        return missing
    sign = "-" if value < 0 else ""
    return f"{sign}${abs(value):,.{digits}f}"


def usd_delta(value: Any, missing: str = MISSING) -> str:
    if not _is_num(value):
        return missing
    return ("+" if value >= 0 else "-") + f"${abs(value):,.2f}"


def ms(value: Any, missing: str = MISSING) -> str:
    """Milliseconds: whole above 100, one decimal below."""
    if not _is_num(value):
        return missing
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"


def rate(value: Any) -> str:
    if not _is_num(value):
        return MISSING
    return f"{value:,.1f}" if abs(value) >= 1 else f"{value:.3g}"


def pct(value: Any, digits: int = 0, missing: str = MISSING) -> str:
    """A share (0.25) as a percentage (25%)."""
    return f"{value * 100:.{digits}f}%" if _is_num(value) else missing


def per_mtok(value: Any, missing: str = MISSING) -> str:
    if not _is_num(value):
        return missing
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def band_of(value: Any) -> tuple[float, float] | None:
    """A [low, high] band read from plan JSON; None unless it is two numbers."""
    if isinstance(value, list | tuple) and len(value) == 2 and all(map(_is_num, value)):
        return (float(value[0]), float(value[1]))
    return None


def usd_band(band: Any, digits: int = 2, missing: str = MISSING) -> str:
    """A [low, high] dollar band as ``$low-$high`` (missing unless two numbers)."""
    b = band_of(band)
    if b is None:
        return missing
    return f"{usd(b[0], digits)}-{usd(b[1], digits)}"


def parallel_text(pool: Mapping[str, Any]) -> str:
    """A pool's parallelism: its TP degree, with ``x pp2`` for pipeline stages and the
    data-parallel attention and expert parallelism of a MoE pool (``8``, ``8 x pp2``,
    ``8 (dp8 ep8)``)."""
    tp, pp = pool.get("tp"), pool.get("pp") or 1
    dp, ep = pool.get("dp") or 1, pool.get("ep") or 1
    text = num(tp)
    if _is_num(dp) and _is_num(ep) and (dp > 1 or ep > 1):
        text += f" (dp{dp} ep{ep})"
    return f"{text} x pp{pp}" if _is_num(pp) and pp > 1 else text


def factors_text(pool_or_gpu: Mapping[str, Any], missing: str = MISSING) -> str:
    """A pool's (or GPU's) efficiency-factor provenance and spread, e.g. ``fitted 59
    pts, sigma 0.23``, ``scaled x0.57 to 26 pts, sigma 0.40`` (the analogy's factors
    times the level its measurements show) or ``analogy x0.72, sigma 0.73``; with a
    measured ratio for MoE LLMs that priced it (``moe_level_ratio`` below 1, a plan's
    ``assumptions.gpus``), `` (MoE x0.54)`` before the spread; with a narrower spread for
    the derate (``derate_sigma_log``), `` (derate 0.17)`` after it."""
    prov = pool_or_gpu.get("provenance")
    sigma = pool_or_gpu.get("sigma_log")
    if not prov:
        return missing
    points = pool_or_gpu.get("factor_points", pool_or_gpu.get("points"))
    level = pool_or_gpu.get("level_scale")
    scale = f" x{level:.2f}" if _is_num(level) and level != 1.0 else ""
    moe = pool_or_gpu.get("moe_level_ratio")
    moe_note = f" (MoE x{moe:.2f})" if _is_num(moe) and moe != 1.0 else ""
    if prov == "fitted":
        head = f"fitted {num(points)} pts"
    elif prov == "scaled":
        head = f"scaled{scale} to {num(points)} pts"
    else:
        head = f"{prov}{scale}"
    head += moe_note
    if not _is_num(sigma):
        return head
    down = pool_or_gpu.get("derate_sigma_log")
    # The derate's spread, where the errors' low side is narrower than the band's.
    low = f" (derate {down:.2f})" if _is_num(down) and round(down, 2) < round(sigma, 2) else ""
    return f"{head}, sigma {sigma:.2f}{low}"


def _yes_no(value: Any, missing: str = MISSING) -> str:
    return "yes" if value is True else "NO" if value is False else missing


def _s(value: Any, missing: str = MISSING) -> str:
    return missing if value is None or value == "" else str(value)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


# --------------------------------------------------------------------------- sections


def _header(plan: Mapping[str, Any], title: str | None) -> list[str]:
    solver = _map(plan.get("solver"))
    status = _s(plan.get("status"))
    if status == "feasible" and _is_num(solver.get("gap")):
        status += f" (stopped at the time limit, gap {pct(solver['gap'], 2)})"
    by_type = _map(plan.get("gpus_by_type"))
    gpus = num(plan.get("gpus_total"))
    if by_type:
        gpus += " (" + ", ".join(f"{g} {num(n)}" for g, n in by_type.items()) + ")"
    ratio = plan.get("pool_ratio_prefill_to_decode")
    band = plan.get("cost_band_usd_per_hour")
    cost_band = f" (band {usd_band(band)})" if usd_band(band) != MISSING else ""
    priced = plan.get("cost_band_with_prices_usd_per_hour")
    if cost_band and usd_band(priced) != MISSING:
        cost_band += f" (with price ranges {usd_band(priced)})"
    rows = [
        ("status", status),
        ("model", f"{_s(plan.get('model'))}   objective {_s(plan.get('objective'))}"),
        (
            "cost",
            f"{usd(plan.get('cost_usd_per_hour'))}/h{cost_band}   "
            f"{usd(plan.get('cost_usd_per_month'), 0)}/month   "
            f"{per_mtok(plan.get('cost_usd_per_million_tokens'))} per million tokens "
            "(prompt, cached included, + output)",
        ),
        ("GPUs", gpus),
        ("power", f"{num(plan.get('power_kw'), 1)} kW"),
        (
            "prefill:decode",
            f"{ratio:.2f} : 1 (GPUs in disaggregated pools)"
            if _is_num(ratio)
            else "- (no disaggregated pools)",
        ),
        *_operations_rows(plan),
        *_tco_rows(plan),
        *_margin_rows(plan),
    ]
    risk = _map(plan.get("risk"))
    if risk:
        rows.append(
            (
                "risk",
                f"each pool's capacity derated to hold at {pct(risk.get('confidence'))} "
                f"confidence (x exp(-{num(risk.get('z'), 3)} x the derate's sigma)"
                + ("; TTFT/TPOT SLOs held at it too" if risk.get("hold_latency") else "")
                + f"); cost band: {pct(risk.get('band_confidence'))} band of the capacity error",
            )
        )
    width = max(len(k) for k, _ in rows)
    lines = [title] if title else []
    lines += [f"{k.ljust(width)}  {v}" for k, v in rows]
    if risk and plan.get("pools"):
        unmeasured = ", ".join(
            unmeasured_gpu_note(plan, str(g)) for g in _list(plan.get("unmeasured_gpus"))
        )
        borrowed = borrowed_level_note(plan)
        which = unmeasured or ("none set by analogy" if borrowed else NONE_UNMEASURED)
        lines.append(f"unmeasured GPUs: {which}{borrowed}")
    return lines


NONE_UNMEASURED = "none (every GPU bought has efficiency fitted or scaled to measurements)"


def _operations_rows(plan: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The operations cost line: per GPU type and per configuration, and the total."""
    ops = _map(plan.get("operations"))
    if not ops:
        return []
    return [
        (
            "operations",
            f"{usd(ops.get('cost_usd_per_hour'))}/h = {num(ops.get('gpu_types'))} GPU type(s) x "
            f"{usd(ops.get('usd_per_hour_per_gpu_type'))} + "
            f"{num(ops.get('configurations'))} configuration(s) x "
            f"{usd(ops.get('usd_per_hour_per_configuration'))} "
            f"(total {usd(plan.get('total_cost_usd_per_hour'))}/h with the GPUs)",
        )
    ]


#: A purchase option is pointed out as cheaper than the chosen one when it saves at least
#: this share of the chosen option's TCO (a smaller difference is within the price
#: ranges' noise and not worth a change of plan).
CHEAPER_OPTION_MIN_SHARE = 0.01


def cheaper_option(tco: Mapping[str, Any]) -> tuple[str, float, float] | None:
    """The cheapest available purchase option of a stored plan's ``tco`` when it is not
    the chosen one: ``(purchase, saving_usd, saving_share)`` with ``saving_usd = chosen
    total - its total`` over the horizon ($) and ``saving_share = saving_usd / chosen
    total``; None when the chosen option is the cheapest, when the saving is under
    :data:`CHEAPER_OPTION_MIN_SHARE`, or when the figures are missing. Read from the
    stored ``tco.options`` (planner.procurement), nothing recomputed."""
    chosen = tco.get("total_usd")
    if not _is_num(chosen) or chosen <= 0:
        return None
    best: tuple[str, float] | None = None
    for o in tco.get("options") or []:
        total = o.get("total_usd")
        if not o.get("available") or not _is_num(total) or o.get("purchase") == tco.get("purchase"):
            continue
        if best is None or total < best[1]:
            best = (str(o.get("purchase")), float(total))
    if best is None:
        return None
    saving = float(chosen) - best[1]
    share = saving / float(chosen)
    return (best[0], saving, share) if share >= CHEAPER_OPTION_MIN_SHARE else None


def cheaper_option_text(tco: Mapping[str, Any]) -> str | None:
    """One sentence naming :func:`cheaper_option` and how to ask for it, or None."""
    got = cheaper_option(tco)
    if got is None:
        return None
    purchase, saving, share = got
    term = str(tco.get("rent_term")).replace("_", " ")
    label = f"renting ({term})" if purchase == "rent" else purchase
    y = tco.get("horizon_years")
    years = f"{y:g}-year" if _is_num(y) else "planning"
    return (
        f"{label.capitalize()} would cost {usd(saving, 0)} ({share:.0%}) less over the "
        f"{years} horizon than {tco.get('purchase')}: set procurement.purchase: {purchase}."
    )


def _tco_rows(plan: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The TCO lines (``plan.tco``, planner.procurement): the chosen purchase's total,
    capex with whole servers, and buy / rent / hybrid side by side."""
    tco = _map(plan.get("tco"))
    if not tco:
        return []
    servers = ", ".join(f"{g} {num(n)}" for g, n in _map(tco.get("servers_by_type")).items())
    band = tco.get("band_usd")
    opts = ", ".join(
        f"{o.get('purchase')} {usd(o.get('total_usd'), 0) if o.get('available') else 'n/a'}"
        for o in _list(tco.get("options"))
    )
    return [
        (
            "TCO",
            f"{num(tco.get('horizon_years'), 1)} years, {_s(tco.get('purchase'))}: "
            f"{usd(tco.get('total_usd'), 0)} (band {usd_band(band, 0)}); capex "
            f"{usd(tco.get('capex_usd'), 0)} ({servers or 'no servers'}); "
            f"{usd(tco.get('usd_per_million_output_tokens'))} per million output tokens",
        ),
        ("TCO options", f"{opts} over the horizon ({_s(tco.get('rent_term'))} rent)"),
        *([("", hint)] if (hint := cheaper_option_text(tco)) else []),
    ]


def _margin_rows(plan: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The margins line: load cap, N+k spares, burst CV, and the highest pool load."""
    m = _map(plan.get("margins"))
    if not m:
        return []
    k = m.get("spare_replicas_per_pool") or 0
    spares = (
        f"N+{num(k)} (each pool carries its rate with {num(k)} replica(s) down)"
        if k
        else ("N+0 (no spare replica)")
    )
    top = m.get("max_pool_load")
    return [
        (
            "margins",
            f"pools loaded at most {pct(m.get('max_utilization'))} of their SLO capacity "
            f"(highest {pct(top)}), {spares}, sized for burst CV {num(m.get('burst_cv'), 2)}",
        )
    ]


def _pools(plan: Mapping[str, Any]) -> list[str]:
    pools = _list(plan.get("pools"))
    if not pools:
        return ["Pools", "  (none)"]
    headers = [
        "class",
        "role",
        "gpu",
        "tp",
        "dtype",
        "replicas",
        "gpus",
        "chunk",
        "max batch",
        "rate r/s",
        "load",
        "TTFT ms",
        "TPOT ms",
        "cost band $/h",
        "factors",
    ]
    rows = []
    for p in pools:
        p = _map(p)
        dtype = _s(p.get("dtype"))
        kv = p.get("kv_dtype")
        if kv and kv != p.get("dtype"):
            dtype += f"/kv {kv}"
        rows.append(
            [
                _s(p.get("class")),
                _s(p.get("role")),
                _s(p.get("gpu")),
                parallel_text(p),
                dtype,
                num(p.get("replicas")),
                num(p.get("gpus")),
                num(p.get("chunk_budget_tokens")),
                num(p.get("max_batch")),
                rate(p.get("rate_rps")),
                pct(p.get("utilization")),
                ms(p.get("predicted_ttft_ms")),
                ms(p.get("predicted_tpot_ms")),
                usd_band(p.get("cost_band_usd_per_hour"), 0),
                factors_text(p),
            ]
        )
    out = ["Pools", render_table(headers, rows, indent="  ")]
    out.append("  load = rate / the pool's capacity within its SLO (not GPU busy time)")
    if any(_map(p).get("capacity_derate") is not None for p in pools):
        out.append(
            "  capacity is derated by exp(-z x sigma) at the plan's confidence (the derate's "
            "sigma where shown); cost band = replicas needed at the 90% band's ends "
            "(1/capacity, rounded up)"
        )
    for line in kv_transfer_sentences(pools, _list(plan.get("kv_pairs"))):
        out.append(f"  {line}")
    return out


def pool_class(p: Mapping[str, Any]) -> str:
    """A pool's class (``class`` in plan JSON, ``class_name`` in robust sub-plans)."""
    return str(p.get("class", p.get("class_name", "?")))


def kv_transfer_sentences(pools: Sequence[Any], pairs: Sequence[Any]) -> list[str]:
    """One sentence per prefill pool whose TTFT includes a KV-cache transfer: the link
    its TTFT was priced on (``kv_transfer_link``, the exposed milliseconds
    ``kv_transfer_exposed_ms``) and, from the plan's ``kv_pairs``, the link each of its
    decode pools is reached over. A pair's link is the priced one or faster (the MILP's
    kv_pair rows), so a faster one means the priced TTFT is an upper bound, not the
    network to buy."""
    gpu_of = {_map(p).get("id"): _map(p).get("gpu") for p in pools}
    out = []
    for p in map(_map, pools):
        priced = p.get("kv_transfer_link")
        if not priced or not _is_num(p.get("kv_transfer_exposed_ms")):
            continue
        head = (
            f"{pool_class(p)} {p.get('role')} on {p.get('gpu')}: TTFT includes "
            f"{ms(p['kv_transfer_exposed_ms'])} ms of KV-cache transfer priced over {priced}"
        )
        links = []
        for x in map(_map, pairs):
            if x.get("prefill_pool") != p.get("id"):
                continue
            link = x.get("link") or priced
            to = gpu_of.get(x.get("decode_pool"), "?")
            if link == priced:
                links.append(f"to decode on {to} over {link}, the link priced")
            else:
                links.append(
                    f"to decode on {to} over {link}, at least as fast as {priced}: "
                    "the priced TTFT is an upper bound"
                )
        out.append(head + (f" ({'; '.join(links)})" if links else ""))
    return out


def _classes(plan: Mapping[str, Any]) -> list[str]:
    classes = _list(plan.get("classes"))
    if not classes:
        return []
    short = unserved_lines(plan)
    headers = ["class", "workload", "mode", "rate r/s", "SLO TTFT/TPOT ms", "TTFT ms", "TPOT ms"]
    if short:
        headers.insert(4, "served r/s")
    headers.append("meets SLO")
    rows = []
    reasons = []
    hits = []
    for c in classes:
        c = _map(c)
        nominal, counted = c.get("prefix_hit_rate"), c.get("effective_prefix_hit_rate")
        sessions = _map(c.get("sessions"))
        if sessions and _is_num(nominal) and _is_num(counted):
            hits.append(
                f"  {c.get('name')}: counts on {counted:.0%} prefix hits of the nominal "
                f"{nominal:.0%} (sessions of {num(sessions.get('turns'))} turns, "
                f"{num(sessions.get('think_time_s'))} s apart: idle prefixes must fit the KV "
                "cache of their replica; a session-affine router keeps them there)"
            )
        slo = _map(c.get("slo"))
        pctl = slo.get("percentile")
        slo_text = f"{ms(slo.get('ttft_ms'))}/{ms(slo.get('tpot_ms'))}"
        if _is_num(pctl):
            slo_text += f" @p{pctl:g}"
        rows.append(
            [
                _s(c.get("name")),
                _s(c.get("workload")),
                _s(c.get("mode")),
                rate(c.get("rate_rps")),
                slo_text,
                ms(c.get("ttft_ms")),
                ms(c.get("tpot_ms")),
                _yes_no(c.get("meets_slo")),
            ]
        )
        if short:
            rows[-1].insert(4, rate(c.get("served_rps")))
        if c.get("mode_reason"):
            reasons.append(f"  {c.get('name')}: {c['mode_reason']}")
    out = ["Classes (predicted latencies at the SLO percentile)"]
    out.append(render_table(headers, rows, indent="  "))
    out += short
    if reasons:
        out += ["", "  Why this mode:", *["  " + r for r in reasons]]
    if hits:
        out += ["", "  Prefix hits:", *["  " + h for h in hits]]
    return out + _assumed_block(plan)


def _assumed_block(plan: Mapping[str, Any]) -> list[str]:
    """The plan's ``assumed_notes`` (planner.plan.notes), under "Assumed"."""
    lines = notes_of(plan)
    return ["", "  Assumed:", *[f"    {line}" for line in lines]] if lines else []


def _verification(plan: Mapping[str, Any]) -> list[str]:
    """The plan's simulation verdict (planner.simulate.verify): one line per class."""
    v = _map(plan.get("verification"))
    if not v or not v.get("enabled", True):
        return []
    out = [f"Verification by simulation: {_s(v.get('summary'))}"]
    for c in _list(v.get("classes")):
        c = _map(c)
        where = f"{c['scenario']}/" if c.get("scenario") else ""
        out.append(f"  {where}{_s(c.get('name'))}: {_s(c.get('verdict'))}")
    corr = _map(v.get("correction"))
    if corr:
        kept = "Correction tried, original kept" if corr.get("kept") == "original" else "Corrected"
        out.append(f"  {kept}: {_s(corr.get('note'))}")
        for f in map(_map, _list(corr.get("tried_corrections"))):
            out.append(
                f"    tried, not applied: {_s(f.get('class'))} {_s(f.get('role'))} on "
                f"{_s(f.get('gpu'))} {_s(f.get('side'))} curve x{f.get('factor', 1.0):.3f}"
            )
    fixes = [_map(f) for f in _list(v.get("corrections"))]
    if fixes:
        out.append(
            "  Capacity-model corrections (every candidate of the family, whole model re-solved):"
        )
        for f in fixes:
            out.append(
                f"    {_s(f.get('class'))} {_s(f.get('role'))} on {_s(f.get('gpu'))}: "
                f"{_s(f.get('side'))} curve x{f.get('factor', 1.0):.3f} "
                f"({_s(f.get('learned'))}) - {_s(f.get('reason'))}"
            )
    return out


def _binding(plan: Mapping[str, Any]) -> list[str]:
    binding = _list(plan.get("binding"))
    out = ["Binding constraints"]
    if not binding:
        return [*out, "  (none: no budget, stock, power or configuration limit is binding)"]
    for b in binding:
        b = _map(b)
        name, detail = _s(b.get("name")), b.get("detail")
        out.append(f"  - {name}: {detail}" if detail and detail != name else f"  - {name}")
    return out


def _alternatives(plan: Mapping[str, Any]) -> list[str]:
    alts = _list(plan.get("alternatives"))
    if not alts:
        return []
    headers = ["alternative", "status", "$/h", "vs plan $/h", "verified", "note"]
    total = plan.get("total_cost_usd_per_hour")
    rows = [
        [
            _s(_map(a).get("name")),
            _s(_map(a).get("status")),
            usd(_map(a).get("cost_usd_per_hour")),
            usd_delta(_map(a).get("delta_usd_per_hour")),
            "yes" if _map(a).get("verified") is True else "no",
            _s(_map(a).get("note")) if _map(a).get("note") else "",
        ]
        for a in alts
    ]
    priced = (
        [f"  $/h is GPUs + operations, as this plan's total {usd(total)}/h"]
        if _is_num(total) and total
        else []
    )
    return [
        "Alternatives (next-cheapest fleets)",
        render_table(headers, rows, indent="  "),
        *priced,
        "  solved on this plan's capacity model as corrected by simulation; not simulated "
        "themselves",
    ]


def _warnings(plan: Mapping[str, Any]) -> list[str]:
    notes = _list(plan.get("warnings"))
    return ["Warnings", *[f"  - {_s(w)}" for w in notes]] if notes else []


def _infeasible(plan: Mapping[str, Any]) -> list[str]:
    reasons = _list(plan.get("infeasible_reasons"))
    relaxation = _map(plan.get("relaxation"))
    if not reasons and not relaxation:
        return []
    out = ["Why no fleet meets this request"]
    out += [f"  - {r}" for r in reasons]
    if relaxation:
        out.append("  Relaxation (what would have to change):")
        out += [
            f"    {k}: {num(v, 2) if _is_num(v) else _s(v)}" for k, v in sorted(relaxation.items())
        ]
    return out


def _solver(plan: Mapping[str, Any]) -> list[str]:
    s = _map(plan.get("solver"))
    if not s:
        return []
    runtime = s.get("runtime_s")
    parts = [
        f"{_s(s.get('solver'))} {_s(s.get('status'))}",
        f"gap {pct(s.get('gap'), 2)}",
        f"{runtime:.2f} s" if _is_num(runtime) else "- s",
        f"(limit {num(s.get('time_limit_s'), 1)} s, target gap {pct(s.get('rel_gap'), 2)})",
    ]
    line = "Solver: " + ", ".join(parts[:3]) + " " + parts[3]
    cands = (
        f"Candidates: {num(s.get('candidates_considered'))} considered, "
        f"{num(s.get('candidates_in_model'))} in the model"
    )
    rejected = _map(s.get("candidates_rejected"))
    if rejected:
        ordered = sorted(rejected.items(), key=lambda kv: (-(kv[1] or 0), kv[0]))
        cands += "; rejected: " + ", ".join(f"{k} {num(v)}" for k, v in ordered)
    out = [line, cands]
    if s.get("message") and s.get("status") not in ("optimal",):
        out.append(f"  solver message: {s['message']}")
    return out


def _launch(plan: Mapping[str, Any]) -> list[str]:
    pools = [_map(p) for p in _list(plan.get("pools"))]
    cmds = [(p, _list(_map(p.get("launch")).get("vllm"))) for p in pools]
    cmds = [(p, c) for p, c in cmds if c]
    if not cmds:
        return []
    multi = any((_map(p.get("launch")).get("nodes_per_replica") or 1) > 1 for p, _ in cmds)
    out = [
        "Launch (vLLM; one command per replica, one per node for multi-node replicas)"
        if multi
        else "Launch (vLLM, one command per replica)"
    ]
    for p, cmd in cmds:
        launch = _map(p.get("launch"))
        nodes = launch.get("nodes_per_replica") or 1
        per_node = [_map(x) for x in _list(launch.get("per_node"))]
        if nodes > 1 and per_node:
            out.append(
                f"  {p.get('class')} {p.get('role')}: {num(p.get('replicas'))} x {p.get('gpu')} "
                f"tp{parallel_text(p).replace(' x ', ' ')}, multi-node: each replica spans "
                f"{num(nodes)} nodes, one "
                "command per node (HEAD_ADDR: the replica's node-0 address)"
            )
            for x in per_node:
                out.append(
                    f"    node {x.get('node_rank')}: "
                    + shlex.join(str(a) for a in _list(x.get("ray")))
                )
            for x in per_node:
                if _list(x.get("vllm")):
                    out.append(
                        f"    then on node {x.get('node_rank')}: "
                        + shlex.join(str(a) for a in _list(x.get("vllm")))
                    )
            continue
        out.append(
            f"  {p.get('class')} {p.get('role')}: {num(p.get('replicas'))} x {p.get('gpu')} "
            f"tp{parallel_text(p).replace(' x ', ' ')}"
        )
        out.append("    " + shlex.join(str(a) for a in cmd))
        router = _list(_map(launch.get("router")).get("vllm"))
        if router:
            out.append(
                "    router (session-affine; WORKER_URLS: the replicas): "
                + shlex.join(str(a) for a in router)
            )
    return out


def render_plan_text(plan: Mapping[str, Any], title: str | None = None) -> str:
    """The whole plan as text, sections separated by blank lines."""
    sections = [
        _header(plan, title),
        _warnings(plan),
        _infeasible(plan),
        _pools(plan) if _list(plan.get("pools")) or plan.get("status") != "infeasible" else [],
        _classes(plan),
        _verification(plan),
        _binding(plan) if has_solution(plan.get("status")) else [],
        _alternatives(plan),
        _solver(plan),
        _launch(plan),
    ]
    return "\n\n".join("\n".join(s) for s in sections if s) + "\n"
