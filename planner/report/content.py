"""What a procurement report says, independent of its format.

:func:`plan_document` and :func:`comparison_document` turn a stored plan
(or comparison) into a :class:`Document`: a title, a summary a buyer reads in
a minute, key figures, and sections of paragraphs, tables, code and charts.
``planner.report.html`` and ``planner.report.markdown`` only lay it out, so
both formats always say the same thing. Strings here are plain text (never
markup): the renderers escape them.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from catalog.schema import Catalog
from planner.report import charts
from planner.report import text as _text
from planner.report.bom import Bom, build_bom

# --------------------------------------------------------------------------- model


@dataclass
class Strong:
    text: str


Run = str | Strong


@dataclass
class Para:
    runs: list[Run]
    kind: str = "p"  # p | note | warn | ok | lead


@dataclass
class Bullets:
    items: list[list[Run]]


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    numeric: list[bool] = field(default_factory=list)  # right-align these columns
    caption: str = ""
    total_last: bool = False  # the last row is a total
    small: bool = False


@dataclass
class Code:
    label: str
    text: str


@dataclass
class Chart:
    svg: str
    caption: str


@dataclass
class Charts:
    items: list[Chart]


@dataclass
class Figure:
    label: str
    value: str
    sub: str = ""


@dataclass
class Heading:
    text: str


Block = Para | Bullets | Table | Code | Charts | Heading


@dataclass
class Section:
    id: str
    title: str
    blocks: list[Block]
    page_break: bool = False


@dataclass
class Document:
    title: str
    kicker: str
    meta: list[tuple[str, str]]
    headline: str
    status: str  # ok | warn | bad
    figures: list[Figure]
    summary: list[Block]
    sections: list[Section]
    footer: str


# --------------------------------------------------------------------------- numbers


#: Short mode names for narrow table cells.
_MODE_SHORT = {"disaggregated": "split", "aggregated": "chunked"}


#: What a missing number prints as in the HTML and Markdown reports.
DASH = "–"
is_num = _text._is_num


def num(x: Any, digits: int = 0) -> str:
    return _text.num(x, digits, missing=DASH)


def usd(x: Any, digits: int = 2) -> str:
    return _text.usd(x, digits, missing=DASH)


def usd_short(x: Any) -> str:
    """$1.08M, $13.0M, $2.41B, $1,486: money at a glance."""
    if not is_num(x):
        return "–"
    a = abs(x)
    sign = "-" if x < 0 else ""
    if a >= 1e9:
        return f"{sign}${a / 1e9:,.2f}B"
    if a >= 1e7:
        return f"{sign}${a / 1e6:,.1f}M"
    if a >= 1e6:
        return f"{sign}${a / 1e6:,.2f}M"
    if a >= 100:
        return f"{sign}${a:,.0f}"
    return f"{sign}${a:,.2f}"


def usd_delta(x: Any) -> str:
    return _text.usd_delta(x, missing=DASH)


def pct(x: Any, digits: int = 0) -> str:
    """A share (0.25) as a percentage (25%)."""
    return _text.pct(x, digits, missing=DASH)


def pct_delta(x: Any) -> str:
    """A change already in percent (48.86) as +48.9%."""
    return f"{x:+.1f}%" if is_num(x) else "–"


def ms(x: Any) -> str:
    return _text.ms(x, missing=DASH)


def rps(x: Any) -> str:
    if not is_num(x):
        return "–"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:,.1f}" if abs(x) >= 1 else f"{x:.3g}"


def per_mtok(x: Any) -> str:
    return _text.per_mtok(x, missing=DASH)


def kw(x: Any) -> str:
    return f"{x:,.1f} kW" if is_num(x) else "–"


def yes_no(x: Any) -> str:
    return _text._yes_no(x, missing=DASH)


def s(x: Any) -> str:
    return _text._s(x, missing=DASH)


def _map(x: Any) -> Mapping[str, Any]:
    return x if isinstance(x, Mapping) else {}


def _list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def pool_class(p: Mapping[str, Any]) -> str:
    """A pool's class (``class`` in plan JSON, ``class_name`` in robust sub-plans)."""
    return str(p.get("class", p.get("class_name", "?")))


def gpu_name(g: str, catalog: Catalog) -> str:
    spec = catalog.gpus.get(g)
    return spec.name if spec else g


def model_name(m: Any, catalog: Catalog) -> str:
    spec = catalog.models.get(str(m))
    return f"{spec.name} ({m})" if spec else s(m)


OK_STATUSES = ("optimal", "feasible")


# --------------------------------------------------------------------------- shared pieces


def bom_table(bom: Bom, catalog: Catalog) -> Table:
    headers = [
        "GPU",
        "GPUs",
        "Servers",
        "Rack units",
        "Power",
        "$/GPU-hour",
        "$/hour",
        "$/month",
        "1 year",
        "3 years",
        "Capital",
    ]
    rows = []
    for ln in bom.lines:
        price = usd(ln.price_usd_per_gpu_hour)
        if ln.price_is_estimate:
            price += " (est.)"
        servers = num(ln.nodes)
        if ln.gpus_per_server:
            servers += f" × {ln.gpus_per_server}"
        rows.append(
            [
                f"{ln.gpu_name} ({ln.gpu})" if ln.gpu_name != ln.gpu else ln.gpu,
                num(ln.gpus),
                servers,
                num(ln.rack_units),
                kw(ln.power_kw),
                price,
                usd(ln.usd_per_hour),
                usd(ln.usd_per_month, 0),
                usd(ln.usd_1y, 0),
                usd(ln.usd_3y, 0),
                usd(ln.capital_usd, 0) if ln.capital_usd is not None else "n/a",
            ]
        )
    t = bom.total
    rows.append(
        [
            "Total",
            num(t.gpus),
            num(t.nodes),
            num(t.rack_units),
            kw(t.power_kw),
            "",
            usd(t.usd_per_hour),
            usd(t.usd_per_month, 0),
            usd(t.usd_1y, 0),
            usd(t.usd_3y, 0),
            usd(t.capital_usd, 0) if t.capital_usd is not None else "n/a",
        ]
    )
    return Table(headers, rows, [False] + [True] * 10, total_last=True)


def bom_notes(bom: Bom) -> list[Block]:
    out: list[Block] = []
    for ln in bom.lines:
        bits = []
        if ln.price_range_usd_per_gpu_hour:
            lo, hi = ln.price_range_usd_per_gpu_hour
            bits.append(f"range {usd(lo)}–{usd(hi)} per GPU-hour")
        if ln.price_note:
            bits.append(ln.price_note.rstrip(". "))
        if ln.capital_usd is None:
            bits.append(f"capital cost: {ln.capital_note}")
        else:
            bits.append(f"capital cost at {usd(ln.purchase_usd_per_gpu, 0)} per GPU")
        out.append(Para([Strong(f"{ln.gpu}: "), "; ".join(bits) + "."], kind="note"))
    out.append(Bullets([[n] for n in bom.notes]))
    return out


def launch_blocks(pools: Sequence[Mapping[str, Any]], catalog: Catalog) -> list[Block]:
    out: list[Block] = []
    for p in pools:
        launch = _map(p.get("launch"))
        if not launch:
            continue
        out.append(
            Heading(
                f"{pool_class(p)} · {s(p.get('role'))} — {num(p.get('replicas'))} replicas of "
                f"{num(p.get('tp'))} × {gpu_name(str(p.get('gpu')), catalog)} "
                f"({s(p.get('dtype'))}), one command per replica"
            )
        )
        for engine, label in (("vllm", "vLLM"), ("sglang", "SGLang")):
            cmd = _list(launch.get(engine))
            if cmd:
                out.append(Code(label, shlex.join(str(a) for a in cmd)))
    return out


def pools_table(pools: Sequence[Mapping[str, Any]]) -> Table:
    headers = [
        "Class",
        "Role",
        "GPU",
        "TP",
        "Weights / KV",
        "Replicas",
        "GPUs",
        "Chunk (tokens)",
        "Max batch",
        "Rate (req/s)",
        "Load",
        "TTFT (ms)",
        "TPOT (ms)",
        "$/hour",
    ]
    rows = []
    for p in pools:
        dt = s(p.get("dtype"))
        if p.get("kv_dtype"):
            dt += f" / {p.get('kv_dtype')}"
        rows.append(
            [
                pool_class(p),
                s(p.get("role")),
                s(p.get("gpu")),
                num(p.get("tp")),
                dt,
                num(p.get("replicas")),
                num(p.get("gpus")),
                num(p.get("chunk_budget_tokens")),
                num(p.get("max_batch")),
                rps(p.get("rate_rps")),
                pct(p.get("utilization")),
                ms(p.get("predicted_ttft_ms")),
                ms(p.get("predicted_tpot_ms")),
                usd(p.get("cost_usd_per_hour")),
            ]
        )
    numeric = [False, False, False] + [True, False] + [True] * 9
    return Table(headers, rows, numeric, small=True)


def gpus_by_role(c: Mapping[str, Any]) -> str:
    """ "69 prefill + 14 decode", "752 aggregated" (GPUs of a class by role)."""
    parts = [
        f"{c.get(f'{role}_gpus'):,} {role}"
        for role in ("prefill", "decode", "aggregated")
        if is_num(c.get(f"{role}_gpus")) and c.get(f"{role}_gpus")
    ]
    return " + ".join(parts) or "–"


def classes_table(plan: Mapping[str, Any]) -> Table:
    headers = [
        "Class",
        "Workload",
        "Rate (req/s)",
        "Mode",
        "SLO TTFT / TPOT (ms)",
        "Predicted TTFT / TPOT (ms)",
        "Meets SLO",
        "GPUs by role",
        "Share of prefill work",
    ]
    rows = []
    for c in _list(plan.get("classes")):
        slo = _map(c.get("slo"))
        p = slo.get("percentile")
        ptxt = f"p{p:g} " if is_num(p) else ""
        rows.append(
            [
                s(c.get("name")),
                s(c.get("workload")),
                rps(c.get("rate_rps")),
                s(c.get("mode")),
                f"{ptxt}{ms(slo.get('ttft_ms'))} / {ms(slo.get('tpot_ms'))}",
                f"{ms(c.get('ttft_ms'))} / {ms(c.get('tpot_ms'))}",
                yes_no(c.get("meets_slo")),
                gpus_by_role(c),
                pct(c.get("prefill_load_share")),
            ]
        )
    numeric = [False, False, True, False, True, True, False, False, True]
    return Table(headers, rows, numeric, small=True)


def mode_bullets(plan: Mapping[str, Any]) -> list[list[Run]]:
    out: list[list[Run]] = []
    for c in _list(plan.get("classes")):
        if not c.get("mode"):
            continue
        pre, dec, agg = (c.get(k) or 0 for k in ("prefill_gpus", "decode_gpus", "aggregated_gpus"))
        if c.get("mode") == "disaggregated":
            how = f"disaggregated: {pre:,} prefill + {dec:,} decode GPUs"
        else:
            chunk = next(
                (
                    p.get("chunk_budget_tokens")
                    for p in _list(plan.get("pools"))
                    if pool_class(p) == c.get("name") and p.get("chunk_budget_tokens")
                ),
                None,
            )
            how = f"aggregated with chunked prefill ({agg:,} GPUs"
            how += f", {chunk:,}-token chunks)" if is_num(chunk) else ")"
        reason = str(c.get("mode_reason") or "")
        if ":" in reason:
            reason = reason.split(":", 1)[1].strip()
        run: list[Run] = [Strong(f"{c.get('name')}"), f" ({rps(c.get('rate_rps'))} req/s) — {how}"]
        if reason:
            run.append(f"; {reason}")
        out.append(run)
    return out


def slo_sentence(plan: Mapping[str, Any]) -> Para | None:
    classes = [c for c in _list(plan.get("classes")) if c.get("mode")]
    if not classes:
        return None
    missed = [c for c in classes if c.get("meets_slo") is False]
    pcts = sorted({_map(c.get("slo")).get("percentile") for c in classes} - {None})
    ptxt = "/".join(f"p{p:g}" for p in pcts)
    if missed:
        return Para(
            [
                Strong("Latency objectives missed (predicted): "),
                ", ".join(str(c.get("name")) for c in missed) + ".",
            ],
            kind="warn",
        )
    return Para(
        [
            f"Every class meets its {ptxt} TTFT and TPOT objectives "
            "(predicted by the queueing model)."
        ],
        kind="ok",
    )


def verification_blocks(plan: Mapping[str, Any]) -> list[Block]:
    v = _map(plan.get("verification"))
    if not v:
        return []
    out: list[Block] = [Heading("Simulated SLO attainment (verification)")]
    if not v.get("enabled", True):
        out.append(Para([s(v.get("summary"))], kind="note"))
        return out
    kind = "ok" if v.get("passed") is True else "warn" if v.get("passed") is False else "note"
    out.append(Para([s(v.get("summary"))], kind=kind))
    rows = []
    for c in _list(v.get("classes")):
        ci = c.get("attainment_ci95")
        att = pct(c.get("attainment"), 1) + (f" ± {pct(ci, 1)}" if is_num(ci) else "")
        p = c.get("percentile")
        rows.append(
            [
                s(c.get("name")),
                f"p{p:g}" if is_num(p) else "–",
                f"{ms(c.get('ttft_ms'))} / {ms(c.get('slo_ttft_ms'))} ms",
                f"{ms(c.get('tpot_ms'))} / {ms(c.get('slo_tpot_ms'))} ms",
                att,
                rps(c.get("goodput_rps")),
                yes_no(c.get("meets_slo")),
                s(c.get("verdict")),
            ]
        )
    if rows:
        out.append(
            Table(
                [
                    "Class",
                    "Percentile",
                    "Simulated TTFT / SLO",
                    "Simulated TPOT / SLO",
                    "Attainment",
                    "Goodput (req/s)",
                    "Meets SLO",
                    "Verdict",
                ],
                rows,
                [False, False, True, True, True, True, False, False],
                small=True,
            )
        )
    out.append(
        Para(
            [
                f"{num(v.get('requests'))} simulated requests, seed {s(v.get('seed'))}, "
                f"burstiness CV {s(v.get('burst_cv'))}, {num(v.get('wall_time_s'), 1)} s."
            ],
            kind="note",
        )
    )
    corr = _map(v.get("correction"))
    if corr:
        out.append(
            Para(
                [
                    Strong("Corrected after simulation: "),
                    f"{s(corr.get('note'))} (cost {usd(corr.get('original_cost_usd_per_hour'))}/h "
                    f"→ {usd(corr.get('cost_usd_per_hour'))}/h, "
                    f"{num(corr.get('iterations'))} iterations).",
                ],
                kind="note",
            )
        )
    return out


def next_cheapest(plan: Mapping[str, Any]) -> Mapping[str, Any] | None:
    alts = [a for a in _list(plan.get("alternatives")) if is_num(a.get("cost_usd_per_hour"))]
    return min(alts, key=lambda a: a["cost_usd_per_hour"]) if alts else None


def alternatives_table(plan: Mapping[str, Any]) -> Table | None:
    alts = _list(plan.get("alternatives"))
    if not alts:
        return None
    base = plan.get("cost_usd_per_hour")
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
                str(a.get("note") or ""),
            ]
        )
    return Table(
        ["Alternative fleet", "Status", "$/hour", "vs this plan", "Change", "Note"],
        rows,
        [False, False, True, True, True, False],
    )


WHY_NOT = {
    "dominated": "beaten on cost",
    "more_expensive": "costs more",
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
    sens: Mapping[str, Any] | None, plan_cost: Any, with_chart: bool = True
) -> list[Block]:
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
            ]
        )
    out: list[Block] = [
        Table(
            ["Case", "What changes", "Status", "$/hour", "vs this plan", "Change", "GPUs"],
            rows,
            [False, False, False, True, True, True, True],
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
    unmeasured = [str(g) for g in _list(plan.get("unmeasured_gpus"))]
    if unmeasured:
        runs.append(
            f" No measurement backs {', '.join(unmeasured)}: its factors are set by analogy "
            "(wider band); benchmark it before buying at scale."
        )
    else:
        runs.append(" Every GPU bought has factors fitted to measurements.")
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


def price_blocks(gpu_ids: Sequence[str], plan: Mapping[str, Any], catalog: Catalog) -> list[Block]:
    """Prices with their sources, and efficiency factors with their reasons,
    for the GPU types the plan buys."""
    a = _map(plan.get("assumptions"))
    used = _map(a.get("gpus"))
    rows, eff_rows = [], []
    for g in gpu_ids:
        spec = catalog.gpus.get(g)
        if spec is None:
            rows.append([g, "–", "–", "–", "not in the current catalog", ""])
            continue
        p = spec.price
        rng = (
            f"{usd(p.range_usd_per_hour[0])}–{usd(p.range_usd_per_hour[1])}"
            if p.range_usd_per_hour
            else "–"
        )
        rows.append(
            [
                f"{spec.name} ({g})",
                usd(_map(used.get(g)).get("price_usd_per_hour", p.usd_per_hour)),
                "estimate" if p.estimate else "quoted",
                rng,
                p.note.strip(),
                "\n".join(spec.sources),
            ]
        )
        e = spec.efficiency
        prov = dict(_map(used.get(g))) if _map(used.get(g)).get("provenance") else {}
        if not prov:  # plans stored before provenance was recorded: the catalog's
            prov = {"provenance": e.provenance.value, "points": e.points, "sigma_log": e.sigma_log}
        eff_rows.append(
            [
                f"{spec.name} ({g})",
                num(_map(used.get(g)).get("prefill_mfu", e.prefill_mfu), 2),
                num(_map(used.get(g)).get("decode_mbu", e.decode_mbu), 2),
                num(e.step_overhead_ms, 1),
                num(e.overlap_factor, 2),
                _text.factors_text(prov, missing=DASH),
                e.reason.strip(),
            ]
        )
    out: list[Block] = [
        Heading("Prices and their sources"),
        Table(
            ["GPU", "$/GPU-hour", "Kind", "Range", "Note", "Sources"],
            rows,
            [False, True, False, True, False, False],
            small=True,
        ),
    ]
    if eff_rows:
        out += [
            Heading("Efficiency factors"),
            Table(
                [
                    "GPU",
                    "Prefill MFU",
                    "Decode MBU",
                    "Step overhead (ms)",
                    "Overlap",
                    "Provenance",
                    "Why",
                ],
                eff_rows,
                [False, True, True, True, True, False, False],
                small=True,
            ),
            Para(
                [
                    "MFU: achieved share of peak FLOP/s in compute-bound prefill; MBU: achieved "
                    "share of peak HBM bandwidth in memory-bound decode; overlap: how much of a "
                    "prefill chunk hides under a decode step (1 = fully). Provenance: fitted to "
                    "N measured points, or set by analogy with no measurement; sigma is the "
                    "spread of ln(measured / predicted) (the fit's residuals; 0.30 assumed for "
                    "analogy), which the plan's capacity derating and cost band use."
                ],
                kind="note",
            ),
        ]
    others = [g for g in sorted(used) if g not in gpu_ids]
    if others:
        out.append(
            Table(
                ["Other GPU types in the model", "$/GPU-hour", "Prefill MFU", "Decode MBU"],
                [
                    [
                        f"{gpu_name(g, catalog)} ({g})",
                        usd(_map(used[g]).get("price_usd_per_hour")),
                        num(_map(used[g]).get("prefill_mfu"), 2),
                        num(_map(used[g]).get("decode_mbu"), 2),
                    ]
                    for g in others
                ],
                [False, True, True, True],
                small=True,
            )
        )
    return out


def traffic_table(plan: Mapping[str, Any]) -> Table | None:
    classes = _map(_map(plan.get("assumptions")).get("classes"))
    if not classes:
        return None
    rows = [
        [
            str(name),
            num(_map(c).get("prompt_mean_tokens")),
            num(_map(c).get("prompt_p90_tokens")),
            num(_map(c).get("output_mean_tokens")),
            pct(_map(c).get("prefix_hit_rate")),
        ]
        for name, c in classes.items()
    ]
    return Table(
        [
            "Class",
            "Prompt mean (tokens)",
            "Prompt p90 (tokens)",
            "Output mean (tokens)",
            "Prefix-cache hits",
        ],
        rows,
        [False, True, True, True, True],
        small=True,
    )


def solver_para(plan: Mapping[str, Any]) -> Para | None:
    sv = _map(plan.get("solver"))
    if not sv:
        return None
    gap = sv.get("gap")
    rej = _map(sv.get("candidates_rejected"))
    rej_txt = ", ".join(
        f"{k} {num(v)}" for k, v in sorted(rej.items(), key=lambda kv: -(kv[1] or 0))
    )
    text = (
        f"Solver {s(sv.get('solver'))}: {s(sv.get('status'))}"
        + (f", gap {pct(gap, 2)}" if is_num(gap) else "")
        + f", {num(sv.get('runtime_s'), 2)} s (limit {num(sv.get('time_limit_s'), 0)} s). "
        f"Candidates: {num(sv.get('candidates_considered'))} considered, "
        f"{num(sv.get('candidates_in_model'))} in the model"
        + (f"; rejected: {rej_txt}" if rej_txt else "")
        + "."
    )
    if sv.get("message"):
        text += f" {sv['message']}."
    return Para([text], kind="note")


def request_yaml(request: Any) -> str:
    return yaml.safe_dump(
        request, sort_keys=False, allow_unicode=True, width=100, default_flow_style=None
    ).strip()


# --------------------------------------------------------------------------- plans


def _buy_text(bom: Bom) -> str:
    return " + ".join(f"{ln.gpus:,} × {ln.gpu_name}" for ln in bom.lines)


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
    solved = status in OK_STATUSES
    robust = bool(plan.get("scenarios"))
    name = request.get("name") or (f"plan {record['id']}" if record.get("id") else "fleet plan")
    cost = plan.get("cost_usd_per_hour")
    t = bom.total

    summary: list[Block] = []
    figures: list[Figure] = []
    if solved and bom.lines:
        headline = f"Buy {_buy_text(bom)}"
        doc_status = "ok"
        figures = [
            Figure("per hour", usd(cost), "list price, on demand"),
            Figure("per month", usd_short(t.usd_per_month), "730 hours"),
            Figure("over 3 years", usd_short(t.usd_3y), "26,280 hours"),
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
                    f"{pct(risk.get('band_confidence'))} band of the capacity error",
                ),
            )
        if t.capital_usd is not None:
            figures.insert(3, Figure("capital", usd_short(t.capital_usd), "purchase price"))
        classes = [c for c in _list(plan.get("classes"))]
        total_rate = sum(c.get("rate_rps") or 0 for c in classes)
        lead = [
            Strong(f"{_buy_text(bom)}"),
            f" in {num(t.nodes)} servers ({num(t.rack_units)} rack units, {kw(t.power_kw)}) "
            f"for {usd(cost)}/hour at list prices: {usd_short(t.usd_per_month)} a month, "
            f"{usd_short(t.usd_per_year)} a year, {usd_short(t.usd_3y)} over three years",
        ]
        if t.capital_usd is not None:
            lead.append(f"; {usd_short(t.capital_usd)} to purchase outright")
        lead.append(".")
        summary.append(Para(lead, kind="lead"))
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
        if alt is not None and is_num(cost) and cost:
            d = alt["cost_usd_per_hour"] - cost
            bullets.append(
                [
                    Strong("Next-cheapest: "),
                    f"“{alt.get('name')}” at {usd(alt['cost_usd_per_hour'])}/h "
                    f"({usd_delta(d)}/h, {pct_delta(100 * d / cost)}).",
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
        reasons = [[str(r)] for r in _list(plan.get("infeasible_reasons"))]
        if reasons:
            summary.append(Bullets(reasons))

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
                [bom_table(bom, catalog), *bom_notes(bom)],
            )
        )

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
                    *kv_transfer_paras(pools),
                    *launch_blocks(pools, catalog),
                ],
                page_break=True,
            )
        )
    if _list(plan.get("classes")):
        reasons = [
            [Strong(f"{c.get('name')}: "), str(c.get("mode_reason"))]
            for c in _list(plan.get("classes"))
            if c.get("mode_reason")
        ]
        blocks = [classes_table(plan)]
        if reasons:
            blocks += [Heading("Why each class is served the way it is"), Bullets(reasons)]
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
            Section("sensitivity", "Sensitivity", sensitivity_blocks(sens, cost, with_charts))
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


def kv_transfer_paras(pools: Sequence[Mapping[str, Any]]) -> list[Block]:
    out: list[Block] = []
    for p in pools:
        if p.get("kv_transfer_link") and is_num(p.get("kv_transfer_exposed_ms")):
            out.append(
                Para(
                    [
                        f"{pool_class(p)} prefill on {p.get('gpu')}: the KV cache ships over "
                        f"{p['kv_transfer_link']} ({ms(p['kv_transfer_exposed_ms'])} ms exposed, "
                        "included in TTFT)."
                    ],
                    kind="note",
                )
            )
    return out


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
            blocks += [pools_table(pools), *kv_transfer_paras(pools)]
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
        xs = [r.get("value") for r in pts]
        share = "share" in axis.lower() and all(is_num(x) and 0 <= x <= 1 for x in xs)

        def at(v: Any, share: bool = share) -> str:
            return f"{v * 100:.0f}%" if share else _short(v)

        text = (
            f"from {usd_short(first['cost_usd_per_hour'])}/h at {at(first.get('value'))} "
            f"to {usd_short(last['cost_usd_per_hour'])}/h at {at(last.get('value'))}"
        )
        if share and xs[-1] != xs[0]:
            slope = (last["cost_usd_per_hour"] - first["cost_usd_per_hour"]) / (xs[-1] - xs[0])
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
