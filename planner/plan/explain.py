"""The plan's words: what binds, what limit must move for a fleet to exist
(infeasibility reasons, relaxations), why other GPUs are not in the plan, and the
per-class GPU-seconds per request.
"""

from __future__ import annotations

import math

from planner import sizing
from planner.candidates import Candidate, Rejection, Screening
from planner.plan.models import ClassPlan, PoolPlan, WhyNot
from planner.request import ResolvedRequest
from solver.problem import Mode, PoolRole
from solver.variables import stock_row


def binding_detail(name: str, req: ResolvedRequest) -> str:
    lim = req.request.constraints
    if name == "budget":
        return (
            f"budget of ${lim.budget_usd_per_hour:,.2f}/h is spent as far as it buys "
            "capacity (it limits the GPUs' cost; operations costs come on top)"
        )
    if name == "power":
        return f"power limit of {lim.power_kw:,.1f} kW is fully used"
    if name.startswith("stock__"):
        for gpu, cap in lim.max_gpus.items():
            if name == stock_row(gpu):
                return f"all {cap} {gpu} GPUs in stock are used"
    if name == "max_configurations":
        return f"at most {lim.max_configurations} distinct configurations"
    if name == "max_gpu_types":
        return f"at most {lim.max_gpu_types} GPU types"
    return name


#: Limits that count things (configurations, GPU types, replicas): moved in whole units.
_COUNT_LIMITS = {
    "max_configurations": ("max_configurations", "configurations"),
    "max_gpu_types": ("max_gpu_types", "GPU types"),
}


def relaxation_text(name: str, amount: float, req: ResolvedRequest) -> str:
    """A fleet limit that must move for any fleet to meet the SLOs, and by how much,
    in its units (counts rounded up to whole units)."""
    lim = req.request.constraints
    if name in _COUNT_LIMITS:
        field, what = _COUNT_LIMITS[name]
        cur = getattr(lim, field)
        return (
            f"raise {field} from {cur} to {cur + math.ceil(amount - 1e-6)} "
            f"(no fleet meeting the SLOs has {cur} or fewer {what})"
        )
    if name == "max_replicas_per_pool":
        cur = lim.max_replicas_per_pool
        assert cur is not None  # the row exists only when the limit is set
        return (
            f"allow {cur + math.ceil(amount - 1e-6)} replicas per pool instead of {cur} "
            "(constraints.max_replicas_per_pool)"
        )
    if name == "min_replicas_per_pool":
        cur = lim.min_replicas_per_pool
        new = max(1, cur - math.ceil(amount - 1e-6))
        return (
            f"lower min_replicas_per_pool from {cur} to {new} "
            "(the replica minimum leaves no fleet within the other limits)"
        )
    if name == "budget":
        assert lim.budget_usd_per_hour is not None  # the row exists only with a budget
        return (
            f"budget ${lim.budget_usd_per_hour:,.2f}/h is short by ${amount:,.2f}/h "
            f"(the cheapest fleet meeting the SLOs needs about "
            f"${lim.budget_usd_per_hour + amount:,.2f}/h)"
        )
    if name == "power":
        return f"power limit {lim.power_kw:,.1f} kW is short by {amount:,.1f} kW"
    for gpu, cap in lim.max_gpus.items():
        if name == stock_row(gpu):
            short = math.ceil(amount - 1e-6)
            return (
                f"{gpu} stock of {cap:,} GPU{'s' if cap != 1 else ''} is short by "
                f"{short:,} GPU{'s' if short != 1 else ''}"
            )
    return f"{name} short by {amount:.4g}"


def fill_gpu_seconds(
    classes: list[ClassPlan], pools: list[PoolPlan], by_id: dict[str, Candidate], req
) -> None:
    """Per class, rate-weighted over its pools: prefill GPU-seconds per request
    (``sizing.prefill_gpu_s`` of the mean prompt after the pool's effective prefix hits) and decode
    GPU-seconds per request (``sizing.decode_gpu_s`` at the pool's step and max
    batch), and each class's share of the fleet's prefill load."""
    res = {c.name: c for c in req.classes}
    for cp in classes:
        rc = res[cp.name]
        pre, dec, w_pre, w_dec = 0.0, 0.0, 0.0, 0.0
        for p in pools:
            if p.class_name != cp.name or p.rate_rps <= 0:
                continue
            cand = by_id[p.id]
            if p.role in (PoolRole.PREFILL, PoolRole.AGGREGATED):
                hit = cand.effective_prefix_hit_rate
                pre += p.rate_rps * sizing.prefill_gpu_s(
                    cand.replica, rc.prompt.mean_tokens, rc.prefix_hit_rate if hit is None else hit
                )
                w_pre += p.rate_rps
            if p.role in (PoolRole.DECODE, PoolRole.AGGREGATED) and cand.step_ms:
                dec += p.rate_rps * sizing.decode_gpu_s(
                    cand.config.gpus,
                    rc.output.mean_tokens,
                    cand.step_ms,
                    cand.config.max_batch or 1,
                )
                w_dec += p.rate_rps
        cp.prefill_gpu_s_per_request = pre / w_pre if w_pre else None
        cp.decode_gpu_s_per_request = dec / w_dec if w_dec else None
    total = sum((c.prefill_gpu_s_per_request or 0.0) * c.served_rps for c in classes)
    for cp in classes:
        if total > 0 and cp.prefill_gpu_s_per_request is not None:
            cp.prefill_load_share = cp.prefill_gpu_s_per_request * cp.served_rps / total


def _most_capable(rejections: list[Rejection]) -> Rejection:
    """The rejection of the most capable configuration tried: largest TP, then FP8."""
    return max(rejections, key=lambda r: (r.tp or 0, r.dtype == "fp8", r.chunk_budget_tokens or 0))


#: Rejections for a latency SLO: with ``risk.hold_latency`` the limits they name are the
#: SLOs held at the confidence (planner.candidates.confidence).
LATENCY_REASONS = frozenset({"ttft_unreachable", "tpot_unreachable"})


def infeasibility_reasons(req: ResolvedRequest, screening: Screening) -> list[str]:
    """For each class that no mode can serve: per missing pool role, why even the
    most capable configuration tried (largest TP, FP8) was rejected."""
    out = []
    have = {(c.class_name, c.config.role) for c in screening.candidates}
    risk = req.request.risk
    held = (
        f" (SLOs held at {risk.confidence:.0%} confidence, risk.hold_latency: each GPU was "
        "screened against each SLO x its capacity derate, the lower limits named above; "
        "hold_latency false or a lower confidence checks latencies as predicted)"
        if risk.hold_latency and risk.confidence > 0.5
        else ""
    )
    for cls in req.classes:
        if cls.rate_rps <= 0:
            continue
        agg_ok = Mode.AGGREGATED in cls.modes and (cls.name, PoolRole.AGGREGATED) in have
        dis_ok = (
            Mode.DISAGGREGATED in cls.modes
            and {
                (cls.name, PoolRole.PREFILL),
                (cls.name, PoolRole.DECODE),
            }
            <= have
        )
        if agg_ok or dis_ok:
            continue
        roles = []
        if Mode.AGGREGATED in cls.modes:
            roles.append(PoolRole.AGGREGATED)
        if Mode.DISAGGREGATED in cls.modes:
            roles += [PoolRole.PREFILL, PoolRole.DECODE]
        parts = []
        latency_bound = False  # a latency SLO binds (the held limits apply)
        for role in roles:
            if (cls.name, role) in have:
                continue
            rej = [r for r in screening.rejections if r.class_name == cls.name and r.role == role]
            if not rej:
                parts.append(f"no {role.value} configurations were offered")
                continue
            fit = {"does_not_fit", "dtype_unsupported", "invalid"}
            if any(r.reason not in fit for r in rej):  # the SLO is what binds
                rej = [r for r in rej if r.reason not in fit]
            reasons = []
            for reason in dict.fromkeys(r.reason for r in rej):
                best = _most_capable([r for r in rej if r.reason == reason])
                budget = f" T={best.chunk_budget_tokens}" if best.chunk_budget_tokens else ""
                tp = f" tp{best.tp}" if best.tp else ""
                reasons.append(f"{best.gpu}{tp} {best.dtype}{budget}: {best.detail}")
            parts.append(f"no {role.value} pool (" + "; ".join(reasons[:3]) + ")")
            latency_bound = latency_bound or any(r.reason in LATENCY_REASONS for r in rej)
        out.append(
            f"class {cls.name} (p{cls.slo.percentile:g} TTFT {cls.slo.ttft_ms:g} ms, "
            f"TPOT {cls.slo.tpot_ms:g} ms) cannot be served: "
            + "; ".join(parts)
            + (held if latency_bound else "")
        )
    return out


def _derate_note(c: Candidate) -> str:
    """Words for a candidate whose capacity a simulation-learned correction derated
    (planner.simulate.verify.DeratedCandidate); empty otherwise."""
    sides = [
        f"{side} x{f:.3g}"
        for side, f in (
            ("prefill", getattr(c, "prefill_derate", 1.0)),
            ("decode", getattr(c, "decode_derate", 1.0)),
        )
        if f < 1.0
    ]
    return f" (capacity corrected by simulation: {', '.join(sides)})" if sides else ""


def why_not(screening: Screening, pools: list[PoolPlan]) -> list[WhyNot]:
    """Per class and GPU type not in the plan: why (rejected, or dominated on cost). With
    no pools at all (no feasible fleet) a candidate was not beaten on cost: its reason is
    ``no_feasible_fleet`` (the plan's ``infeasible_reasons`` say which class binds)."""
    used = {(p.class_name, p.gpu) for p in pools}
    out: dict[tuple[str, str], WhyNot] = {}
    for c in screening.candidates + screening.pruned:
        key = (c.class_name, c.config.gpu)
        if key in used or key in out:
            continue
        in_model = c in screening.candidates
        out[key] = WhyNot(
            class_name=c.class_name,
            gpu=c.config.gpu,
            reason=(
                "no_feasible_fleet" if not pools else "more_expensive" if in_model else "dominated"
            ),
            detail=(
                ("no fleet meets the whole request (see why no fleet does); " if not pools else "")
                + f"best config {c.config.key} costs ${c.usd_per_rps:,.2f}/h per req/s "
                "at full utilization"
                + _derate_note(c)
                + (
                    f" (capacity derated x{c.risk_derate:.2f}: factors "
                    + (
                        f"fitted to {c.factor_points} points, derate sigma "
                        f"{c.derate_sigma_log:.2f})"
                        if c.provenance == "fitted"
                        else (
                            f"scaled x{c.level_scale:.2f} to {c.factor_points} points, "
                            f"derate sigma {c.derate_sigma_log:.2f})"
                        )
                        if c.provenance == "scaled"
                        else f"by analogy x{c.level_scale:.2f}, sigma {c.derate_sigma_log:.2f})"
                    )
                    if c.risk_derate < 1.0
                    else ""
                )
            ),
        )
    for r in screening.rejections:
        key = (r.class_name, r.gpu)
        if key in used or key in out:
            continue
        out[key] = WhyNot(class_name=r.class_name, gpu=r.gpu, reason=r.reason, detail=r.detail)
    return [out[k] for k in sorted(out)]
