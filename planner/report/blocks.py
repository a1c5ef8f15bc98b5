"""Pieces several report documents share: the bill of materials, pools, classes,
verification, alternatives, sensitivity, prices, traffic and solver paragraphs."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from catalog.schema import ANALOGY_SIGMA_LOG, Catalog
from planner.plan.latency_risk import LATENCY_RISK_MARK
from planner.report import text as _text
from planner.report.bom import Bom
from planner.report.document import (
    Block,
    Bullets,
    Code,
    Heading,
    Para,
    Run,
    Strong,
    Table,
)
from planner.report.formatting import (
    DASH,
    _list,
    _map,
    gpu_name,
    is_num,
    kw,
    ms,
    num,
    pct,
    pool_class,
    rps,
    s,
    usd,
    yes_no,
)
from planner.report.served import rate_served_cell

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
        "1 year rent",
        "3 years rent",
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
        elif ln.purchase_usd_per_server is not None:
            est = " (estimate)" if ln.purchase_is_estimate else ""
            bits.append(
                f"capital cost: {num(ln.nodes)} whole server{'s' if ln.nodes != 1 else ''} of "
                f"{num(ln.gpus_per_server)} GPUs at {usd(ln.purchase_usd_per_server, 0)}{est} + "
                f"{usd(ln.networking_usd_per_server, 0)} networking each "
                f"({ln.purchase_date}; {', '.join(x.split(' ')[0] for x in ln.purchase_sources)})"
            )
        else:
            bits.append(f"capital cost at {usd(ln.purchase_usd_per_gpu, 0)} per GPU, whole servers")
        out.append(Para([Strong(f"{ln.gpu}: "), "; ".join(bits) + "."], kind="note"))
    out.append(Bullets([[n] for n in bom.notes]))
    return out


def launch_blocks(pools: Sequence[Mapping[str, Any]], catalog: Catalog) -> list[Block]:
    out: list[Block] = []
    for p in pools:
        launch = _map(p.get("launch"))
        if not launch:
            continue
        nodes = launch.get("nodes_per_replica") or 1
        per_node = [_map(x) for x in _list(launch.get("per_node"))]
        what = (
            f"each replica spans {num(nodes)} nodes, one command per node "
            "(HEAD_ADDR: the replica's node-0 address)"
            if nodes > 1 and per_node
            else "one command per replica"
        )
        out.append(
            Heading(
                f"{pool_class(p)} · {s(p.get('role'))} — {num(p.get('replicas'))} "
                f"{'replica' if p.get('replicas') == 1 else 'replicas'} of "
                f"{num(p.get('tp'))} × {gpu_name(str(p.get('gpu')), catalog)} "
                f"({s(p.get('dtype'))}), {what}"
            )
        )
        if nodes > 1 and per_node:
            out += multinode_blocks(per_node)
            continue
        for engine, label in (("vllm", "vLLM"), ("sglang", "SGLang")):
            cmd = _list(launch.get(engine))
            if cmd:
                out.append(Code(label, shlex.join(str(a) for a in cmd)))
    return out


def multinode_blocks(per_node: Sequence[Mapping[str, Any]]) -> list[Block]:
    """A multi-node replica's commands: vLLM joins every node to one Ray cluster and
    starts the server on node 0 once all have joined; SGLang runs one command per
    node with its rank."""
    out: list[Block] = []
    for key, label in (
        ("ray", "vLLM · node {} (Ray)"),
        ("vllm", "vLLM · then on node {}"),
        ("sglang", "SGLang · node {}"),
    ):
        for x in per_node:
            if _list(x.get(key)):
                out.append(
                    Code(label.format(x.get("node_rank")), shlex.join(map(str, _list(x.get(key)))))
                )
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
                _text.parallel_text(p),
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
                rate_served_cell(plan, c) or rps(c.get("rate_rps")),
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
    pcts: list[float] = sorted(
        {p for c in classes if is_num(p := _map(c.get("slo")).get("percentile"))}
    )
    ptxt = "/".join(f"p{p:g}" for p in pcts)
    if missed:
        return Para(
            [
                Strong("Latency objectives missed (predicted): "),
                ", ".join(str(c.get("name")) for c in missed) + ".",
            ],
            kind="warn",
        )
    risk = _map(plan.get("risk"))
    at = [w for w in _list(plan.get("warnings")) if LATENCY_RISK_MARK in str(w)]
    if at:
        conf = f"{risk.get('confidence', 0):.0%}"
        tail = f"; at {conf} confidence {len(at)} may not (see the warnings)."
    elif risk.get("hold_latency"):
        tail = f", held at {risk.get('confidence', 0):.0%} confidence."
    else:
        tail = "."
    return Para(
        [
            f"Every class meets its {ptxt} TTFT and TPOT objectives "
            "(predicted by the queueing model)" + tail
        ],
        kind="ok" if not at else "warn",
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
    if corr and corr.get("kept") == "original":
        out.append(
            Para(
                [
                    Strong("Correction tried, original kept: "),
                    f"{s(corr.get('note'))} (kept {usd(corr.get('original_cost_usd_per_hour'))}/h; "
                    f"tried {usd(corr.get('cost_usd_per_hour'))}/h, "
                    f"{num(corr.get('iterations'))} iterations).",
                ],
                kind="note",
            )
        )
    elif corr:
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
    tried = [
        f"{s(f.get('class'))} {s(f.get('role'))} on {s(f.get('gpu'))} {s(f.get('side'))} "
        f"curve x{num(f.get('factor'), 3)}"
        for f in map(_map, _list(corr.get("tried_corrections")))
    ]
    if tried:
        out.append(Para([Strong("Tried, not applied: "), "; ".join(tried) + "."], kind="note"))
    fixes = _list(v.get("corrections"))
    if fixes:
        out.append(
            Table(
                ["Class", "Role", "GPU", "Curve", "Factor", "Learned", "Why"],
                [
                    [
                        s(f.get("class")),
                        s(f.get("role")),
                        s(f.get("gpu")),
                        s(f.get("side")),
                        num(f.get("factor"), 3),
                        s(f.get("learned")),
                        s(f.get("reason")),
                    ]
                    for f in map(_map, fixes)
                ],
                [False, False, False, False, True, False, False],
                caption="Capacity-model corrections learned by simulation (every candidate "
                "of the family is derated, and the whole model re-solved)",
                small=True,
            )
        )
    return out


def verified_text(row: Mapping[str, Any]) -> str:
    """'yes' when a row's plan was simulated and met every SLO (``verified`` true),
    'no' when it was not or missed, '–' when the row predates the field."""
    if "verified" not in row:
        return "–"
    return "yes" if row.get("verified") is True else "no"


def _layer_floor_text(spec: Any) -> str:
    """What a GPU's step pays per layer beyond ``step_overhead_ms`` (its fitted layer
    floor, catalog ``decode_sequence_cost.step_us_per_layer``), as a suffix of the
    efficiency table's step-overhead cell: " + 27.1 us/layer", or "" without one."""
    cost = spec.decode_sequence_cost
    if cost is None or not cost.step_us_per_layer:
        return ""
    return f" + {cost.step_us_per_layer:.1f} us/layer"


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
            prov = {
                "provenance": e.provenance.value,
                "points": e.points,
                "sigma_log": e.sigma_log,
                "derate_sigma_log": e.derate_sigma_log,
                "level_scale": e.level_scale,
            }
        eff_rows.append(
            [
                f"{spec.name} ({g})",
                num(_map(used.get(g)).get("prefill_mfu", e.prefill_mfu), 2),
                num(_map(used.get(g)).get("dense_gemm_lift"), 2),
                num(_map(used.get(g)).get("decode_mbu", e.decode_mbu), 2),
                num(e.step_overhead_ms, 1) + _layer_floor_text(spec),
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
                    "GEMM rate x",
                    "Decode MBU",
                    "Step overhead (ms)",
                    "Overlap",
                    "Provenance",
                    "Why",
                ],
                eff_rows,
                [False, True, True, True, True, True, False, False],
                small=True,
            ),
            Para(
                [
                    "MFU: achieved share of peak FLOP/s in compute-bound prefill; GEMM rate x: "
                    "dense weight GEMMs run at MFU times this, the measured kernel rate at 512 "
                    "tokens over the MFU's (1: none measured); MBU: achieved "
                    "share of peak HBM bandwidth in memory-bound decode; overlap: how much of a "
                    "prefill chunk hides under a decode step (1 = fully). Provenance: fitted to "
                    "N measured points, scaled (the analogy's factors times the level its "
                    "measurements show; MoE LLMs and FP4 weights may have measured ratios of "
                    "their own), or set by analogy with no measurement; sigma is the "
                    "spread of ln(measured / predicted capacity) (the fit's residuals, set "
                    "so that on the public measurements it was fitted to 90% of the GPU's "
                    "values fall inside its 90% band), which the cost band uses; the "
                    "capacity derating uses the larger of the errors' normal-law spread "
                    "(MAD) and what their low side needs (shown as 'derate' where "
                    "narrower: the model errs on the safe side there), set so that 80% and "
                    "90% of the values clear the derates at confidence 0.8 and 0.9; "
                    f"{ANALOGY_SIGMA_LOG:.2f} assumed for both for analogy or a few points."
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
    planned = {_map(c).get("name"): _map(c) for c in plan.get("classes") or []}

    def sessions(name: str) -> str:
        s = _map(planned.get(name, {}).get("sessions"))
        if not s:
            return "-"
        return f"{num(s.get('turns'))} turns, {num(s.get('think_time_s'))} s apart"

    rows = [
        [
            str(name),
            num(_map(c).get("prompt_mean_tokens")),
            num(_map(c).get("prompt_p90_tokens")),
            num(_map(c).get("output_mean_tokens")),
            pct(_map(c).get("prefix_hit_rate")),
            sessions(str(name)),
            pct(planned.get(name, {}).get("effective_prefix_hit_rate")),
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
            "Sessions",
            "Hits counted on",
        ],
        rows,
        [False, True, True, True, True, False, True],
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
