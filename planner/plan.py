"""The Plan: what to run, what it costs, what it predicts, and why.

``plan_from_result`` turns a solver result and the screened candidates into
a :class:`Plan`. Every number in it comes from a named function here or in
the cost model (``roofline``, ``queueing``), whose docstring gives the
formula and units.
"""

from __future__ import annotations

import json
import math
from statistics import NormalDist
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from planner import queueing, sizing
from planner import roofline as rl
from planner.candidates import Candidate, ClassFigures, Screening
from planner.request import ResolvedRequest
from planner.simulate.results import Verification
from solver.problem import Mode, PoolRole, SolveResult, SolveStatus
from solver.variables import safe_name

HOURS_PER_MONTH = 730.0


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LaunchSettings(Out):
    vllm: list[str]
    sglang: list[str]


class PoolPlan(Out):
    id: str
    class_name: str = Field(serialization_alias="class")
    role: PoolRole
    gpu: str
    tp: int
    dtype: str
    kv_dtype: str
    replicas: int
    gpus: int
    chunk_budget_tokens: int | None
    max_batch: int | None
    rate_rps: float
    capacity_rps: float
    utilization: float
    cost_usd_per_hour: float
    power_kw: float
    predicted_ttft_ms: float | None
    predicted_tpot_ms: float | None
    step_ms: float | None
    kv_transfer_link: str | None = None
    kv_transfer_exposed_ms: float | None = None
    launch: LaunchSettings


class SloOut(Out):
    ttft_ms: float
    tpot_ms: float
    percentile: float


class ClassPlan(Out):
    name: str
    workload: str
    mode: Mode | None
    rate_rps: float
    served_rps: float
    slo: SloOut
    ttft_ms: float | None
    tpot_ms: float | None
    meets_slo: bool | None
    pools: list[str]
    prefill_gpus: int
    decode_gpus: int
    aggregated_gpus: int
    prefill_gpu_s_per_request: float | None = None
    decode_gpu_s_per_request: float | None = None
    prefill_load_share: float | None = None
    mode_reason: str = ""


class BindingConstraint(Out):
    name: str
    detail: str


class Alternative(Out):
    name: str
    status: str
    cost_usd_per_hour: float | None
    delta_usd_per_hour: float | None
    note: str = ""
    class_name: str | None = Field(default=None, serialization_alias="class")
    verified: bool = Field(
        default=False,
        description="simulated and meeting every SLO; alternatives are solved on the plan's "
        "corrected model (verification.corrections) but not simulated",
    )


class WhyNot(Out):
    class_name: str = Field(serialization_alias="class")
    gpu: str
    reason: str
    detail: str


class SolverInfo(Out):
    status: SolveStatus
    gap: float | None
    runtime_s: float
    solver: str
    time_limit_s: float
    rel_gap: float
    candidates_considered: int
    candidates_in_model: int
    candidates_rejected: dict[str, int]
    variables: int
    constraints: int
    message: str = ""


class Plan(Out):
    status: SolveStatus
    objective: str
    objective_value: float | None
    model: str
    catalog_hash: str
    cost_usd_per_hour: float | None
    cost_usd_per_month: float | None
    cost_usd_per_million_tokens: float | None
    gpus_total: int
    gpus_by_type: dict[str, int]
    power_kw: float
    pool_ratio_prefill_to_decode: float | None
    pools: list[PoolPlan]
    classes: list[ClassPlan]
    binding: list[BindingConstraint]
    alternatives: list[Alternative] = []
    why_not: list[WhyNot] = []
    infeasible_reasons: list[str] = []
    warnings: list[str] = []
    relaxation: dict[str, float] = {}
    solver: SolverInfo
    assumptions: dict[str, Any] = {}
    verification: Verification | None = Field(
        default=None,
        description="The planned fleet simulated under load (planner.simulate.verify)",
    )
    scenarios: list[dict[str, Any]] | None = None  # robust plans: planner.scenarios

    def to_json_dict(self) -> dict[str, Any]:
        return json.loads(self.model_dump_json(by_alias=True))


# --------------------------------------------------------------------------- numbers


def pool_ttft_ms(cand: Candidate, rate_rps: float, replicas: int) -> float | None:
    """Predicted TTFT at the SLO percentile for a pool carrying ``rate_rps`` (ms):

    ``wait_q(M/G/c, c = replicas) + prefill of the percentile prompt + exposed KV
    transfer``; None for decode pools (their class's TTFT is set by prefill).
    """
    if cand.service_mean_ms is None:
        return None
    wait_s = queueing.mgc_wait_quantile_s(
        rate_rps,
        cand.service_mean_ms / 1000.0,
        max(1, replicas),
        cand.quantile,
        cand.service_cv2 or 0.0,
    )
    return wait_s * 1000.0 + (cand.service_q_ms or 0.0) + cand.transfer_exposed_ms


def percentile_batch(cand: Candidate, rate_rps: float, replicas: int) -> float:
    """Resident sequences per replica at the SLO percentile:
    ``min(B, L + z_q sqrt(L))`` with ``L = rate x G x step / replicas`` (Little)."""
    if cand.config.max_batch is None or cand.step_ms is None:
        return 0.0
    mean = queueing.littles_law_resident(rate_rps, cand.output_mean_tokens, cand.step_ms)
    mean /= max(1, replicas)
    z = NormalDist().inv_cdf(cand.quantile)
    return max(1.0, min(float(cand.config.max_batch), mean + z * math.sqrt(max(mean, 0.0))))


def pool_tpot_ms(
    cand: Candidate, fig: ClassFigures, rate_rps: float, replicas: int
) -> float | None:
    """Predicted TPOT at the SLO percentile (ms): the decode (or mixed, with the
    pool's chunk budget) step at :func:`percentile_batch` resident sequences."""
    if cand.config.max_batch is None:
        return None
    b = percentile_batch(cand, rate_rps, replicas)
    if cand.config.role == PoolRole.AGGREGATED:
        return rl.mixed_step_ms(
            cand.replica,
            b,
            fig.decode_context_tokens,
            cand.config.chunk_budget_tokens or 0,
            fig.chunk_context_tokens,
        )
    return rl.decode_step_ms(cand.replica, b, fig.decode_context_tokens)


def tokens_per_hour(req: ResolvedRequest) -> float:
    """Prompt + output tokens processed per hour at the requested rates (tokens/hour)."""
    return 3600.0 * sum(
        c.rate_rps * (c.prompt.mean_tokens + c.output.mean_tokens) for c in req.classes
    )


def cost_per_million_tokens(cost_usd_per_hour: float, req: ResolvedRequest) -> float:
    """$/hour / (tokens per hour / 1e6): US dollars per million prompt+output tokens."""
    tph = tokens_per_hour(req)
    return cost_usd_per_hour / (tph / 1e6) if tph > 0 else math.inf


def launch_settings(cand: Candidate, model_id: str) -> LaunchSettings:
    """Engine arguments for vLLM and SGLang that realize the pool's configuration
    (the model's Hugging Face repository when the catalog names one)."""
    cfg = cand.config
    model_id = cand.replica.model.hf_repo or model_id
    v = [
        "vllm",
        "serve",
        model_id,
        f"--tensor-parallel-size={cfg.tp}",
        f"--gpu-memory-utilization={cand.replica.memory_utilization}",
    ]
    s = [
        "python",
        "-m",
        "sglang.launch_server",
        f"--model-path={model_id}",
        f"--tp-size={cfg.tp}",
        f"--mem-fraction-static={cand.replica.memory_utilization}",
    ]
    if cfg.dtype.value in ("fp8", "fp4"):
        v.append("--quantization=fp8" if cfg.dtype.value == "fp8" else "--quantization=mxfp4")
        s.append("--quantization=fp8" if cfg.dtype.value == "fp8" else "--quantization=mxfp4")
    if cfg.kv_dtype.value == "fp8":
        v.append("--kv-cache-dtype=fp8")
        s.append("--kv-cache-dtype=fp8_e4m3")
    if cfg.max_batch:
        v.append(f"--max-num-seqs={cfg.max_batch}")
        s.append(f"--max-running-requests={cfg.max_batch}")
    if cfg.role == PoolRole.AGGREGATED:
        v += ["--enable-chunked-prefill", f"--max-num-batched-tokens={cfg.chunk_budget_tokens}"]
        s.append(f"--chunked-prefill-size={cfg.chunk_budget_tokens}")
    elif cfg.role == PoolRole.PREFILL:
        v.append('--kv-transfer-config={"kv_connector":"NixlConnector","kv_role":"kv_producer"}')
        s.append("--disaggregation-mode=prefill")
    else:
        v.append('--kv-transfer-config={"kv_connector":"NixlConnector","kv_role":"kv_consumer"}')
        s.append("--disaggregation-mode=decode")
    return LaunchSettings(vllm=v, sglang=s)


def binding_detail(name: str, req: ResolvedRequest) -> str:
    lim = req.request.constraints
    if name == "budget":
        return f"budget of ${lim.budget_usd_per_hour:,.2f}/h is fully used"
    if name == "power":
        return f"power limit of {lim.power_kw:,.1f} kW is fully used"
    if name.startswith("stock__"):
        for gpu, cap in lim.max_gpus.items():
            if name == f"stock__{safe_name(gpu)}":
                return f"all {cap} {gpu} GPUs in stock are used"
    if name == "max_configurations":
        return f"at most {lim.max_configurations} distinct configurations"
    return name


def plan_from_result(
    req: ResolvedRequest,
    screening: Screening,
    result: SolveResult,
    catalog_hash: str,
    time_limit_s: float,
    rel_gap: float,
) -> Plan:
    """Assemble the Plan from the solve: pools with predictions, classes, binding limits."""
    by_id = {c.id: c for c in screening.candidates}
    figs = {c.name: ClassFigures.of(c) for c in req.classes}
    pools: list[PoolPlan] = []
    for cid, n in sorted(result.replicas.items()):
        cand = by_id[cid]
        rate = result.rates_rps.get(cid, 0.0)
        cap = cand.to_pool_candidate().capacity_rps(n)
        fig = figs[cand.class_name]
        pools.append(
            PoolPlan(
                id=cid,
                class_name=cand.class_name,
                role=cand.config.role,
                gpu=cand.config.gpu,
                tp=cand.config.tp,
                dtype=cand.config.dtype.value,
                kv_dtype=cand.config.kv_dtype.value,
                replicas=n,
                gpus=n * cand.config.tp,
                chunk_budget_tokens=cand.config.chunk_budget_tokens,
                max_batch=cand.config.max_batch,
                rate_rps=rate,
                capacity_rps=cap,
                utilization=rate / cap if cap > 0 else 0.0,
                cost_usd_per_hour=n * cand.cost_usd_per_hour,
                power_kw=n * cand.power_kw,
                predicted_ttft_ms=pool_ttft_ms(cand, rate, n) if rate > 0 else None,
                predicted_tpot_ms=pool_tpot_ms(cand, fig, rate, n) if rate > 0 else None,
                step_ms=cand.step_ms,
                kv_transfer_link=cand.kv_transfer_link,
                kv_transfer_exposed_ms=(
                    cand.transfer_exposed_ms if cand.config.role == PoolRole.PREFILL else None
                ),
                launch=launch_settings(cand, req.model_id),
            )
        )
    solved = result.status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE)
    classes: list[ClassPlan] = []
    for cls in req.classes:
        mine = [p for p in pools if p.class_name == cls.name and p.rate_rps > 0]
        ttfts = [p.predicted_ttft_ms for p in mine if p.predicted_ttft_ms is not None]
        tpots = [p.predicted_tpot_ms for p in mine if p.predicted_tpot_ms is not None]
        ttft = max(ttfts) if ttfts else None
        tpot = max(tpots) if tpots else None
        meets = None
        if solved and (ttft is not None and tpot is not None):
            meets = ttft <= cls.slo.ttft_ms * (1 + 1e-6) and tpot <= cls.slo.tpot_ms * (1 + 1e-6)
        served = result.served_rps.get(cls.name, cls.rate_rps if solved else 0.0)

        def gpus_of(role: PoolRole, mine=mine) -> int:
            return sum(p.gpus for p in mine if p.role == role)

        classes.append(
            ClassPlan(
                name=cls.name,
                workload=cls.workload.id,
                mode=result.modes.get(cls.name) if solved and cls.rate_rps > 0 else None,
                rate_rps=cls.rate_rps,
                served_rps=served if cls.rate_rps > 0 else 0.0,
                slo=SloOut(**cls.slo.model_dump()),
                ttft_ms=ttft,
                tpot_ms=tpot,
                meets_slo=meets,
                pools=[p.id for p in mine],
                prefill_gpus=gpus_of(PoolRole.PREFILL),
                decode_gpus=gpus_of(PoolRole.DECODE),
                aggregated_gpus=gpus_of(PoolRole.AGGREGATED),
            )
        )
    fill_gpu_seconds(classes, pools, by_id, req)
    gpus_by_type: dict[str, int] = {}
    for p in pools:
        gpus_by_type[p.gpu] = gpus_by_type.get(p.gpu, 0) + p.gpus
    pre = sum(p.gpus for p in pools if p.role == PoolRole.PREFILL)
    dec = sum(p.gpus for p in pools if p.role == PoolRole.DECODE)
    cost = sum(p.cost_usd_per_hour for p in pools) if solved else None
    infeasible: list[str] = []
    if result.status == SolveStatus.INFEASIBLE:
        infeasible = infeasibility_reasons(req, screening)
        if result.relaxation:
            infeasible += [relaxation_text(k, v, req) for k, v in result.relaxation.items()]
        if not infeasible:
            infeasible = [result.message]
    return Plan(
        status=result.status,
        objective=req.request.objective.value,
        objective_value=result.objective,
        model=req.model_id,
        catalog_hash=catalog_hash,
        cost_usd_per_hour=cost,
        cost_usd_per_month=cost * HOURS_PER_MONTH if cost is not None else None,
        cost_usd_per_million_tokens=cost_per_million_tokens(cost, req) if cost else None,
        gpus_total=sum(gpus_by_type.values()),
        gpus_by_type=dict(sorted(gpus_by_type.items())),
        power_kw=sum(p.power_kw for p in pools),
        pool_ratio_prefill_to_decode=(pre / dec) if dec else None,
        pools=pools,
        classes=classes,
        binding=[BindingConstraint(name=b, detail=binding_detail(b, req)) for b in result.binding],
        why_not=why_not(screening, pools),
        infeasible_reasons=infeasible,
        warnings=list(req.warnings),
        relaxation=result.relaxation,
        solver=SolverInfo(
            status=result.status,
            gap=result.gap,
            runtime_s=result.runtime_s,
            solver=result.solver,
            time_limit_s=time_limit_s,
            rel_gap=rel_gap,
            candidates_considered=screening.considered,
            candidates_in_model=len(screening.candidates),
            candidates_rejected=screening.rejected_by_reason(),
            variables=result.num_variables,
            constraints=result.num_constraints,
            message=result.message,
        ),
    )


def relaxation_text(name: str, amount: float, req: ResolvedRequest) -> str:
    """A fleet limit that must grow for any fleet to meet the SLOs, in its units."""
    lim = req.request.constraints
    if name == "budget":
        return (
            f"budget ${lim.budget_usd_per_hour:,.2f}/h is short by ${amount:,.2f}/h "
            f"(the cheapest fleet meeting the SLOs needs about "
            f"${lim.budget_usd_per_hour + amount:,.2f}/h)"
        )
    if name == "power":
        return f"power limit {lim.power_kw:,.1f} kW is short by {amount:,.1f} kW"
    for gpu, cap in lim.max_gpus.items():
        if name == f"stock__{safe_name(gpu)}":
            return f"{gpu} stock of {cap} GPUs is short by {amount:,.0f} GPUs"
    return f"{name} short by {amount:.4g}"


def fill_gpu_seconds(
    classes: list[ClassPlan], pools: list[PoolPlan], by_id: dict[str, Candidate], req
) -> None:
    """Per class, rate-weighted over its pools: prefill GPU-seconds per request
    (``sizing.prefill_gpu_s`` of the mean prompt after prefix hits) and decode
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
                pre += p.rate_rps * sizing.prefill_gpu_s(
                    cand.replica, rc.prompt.mean_tokens, rc.prefix_hit_rate
                )
                w_pre += p.rate_rps
            if p.role in (PoolRole.DECODE, PoolRole.AGGREGATED) and cand.step_ms:
                dec += p.rate_rps * sizing.decode_gpu_s(
                    cand.config.tp, rc.output.mean_tokens, cand.step_ms, cand.config.max_batch
                )
                w_dec += p.rate_rps
        cp.prefill_gpu_s_per_request = pre / w_pre if w_pre else None
        cp.decode_gpu_s_per_request = dec / w_dec if w_dec else None
    total = sum((c.prefill_gpu_s_per_request or 0.0) * c.served_rps for c in classes)
    for cp in classes:
        if total > 0 and cp.prefill_gpu_s_per_request is not None:
            cp.prefill_load_share = cp.prefill_gpu_s_per_request * cp.served_rps / total


def _most_capable(rejections: list) -> object:
    """The rejection of the most capable configuration tried: largest TP, then FP8."""
    return max(rejections, key=lambda r: (r.tp or 0, r.dtype == "fp8", r.chunk_budget_tokens or 0))


def infeasibility_reasons(req: ResolvedRequest, screening: Screening) -> list[str]:
    """For each class that no mode can serve: per missing pool role, why even the
    most capable configuration tried (largest TP, FP8) was rejected."""
    out = []
    have = {(c.class_name, c.config.role) for c in screening.candidates}
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
        out.append(
            f"class {cls.name} (p{cls.slo.percentile:g} TTFT {cls.slo.ttft_ms:g} ms, "
            f"TPOT {cls.slo.tpot_ms:g} ms) cannot be served: " + "; ".join(parts)
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
    """Per class and GPU type not in the plan: why (rejected, or dominated on cost)."""
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
            reason="more_expensive" if in_model else "dominated",
            detail=(
                f"best config {c.config.key} costs ${c.usd_per_rps:,.2f}/h per req/s "
                "at full utilization" + _derate_note(c)
            ),
        )
    for r in screening.rejections:
        key = (r.class_name, r.gpu)
        if key in used or key in out:
            continue
        out[key] = WhyNot(class_name=r.class_name, gpu=r.gpu, reason=r.reason, detail=r.detail)
    return [out[k] for k in sorted(out)]
