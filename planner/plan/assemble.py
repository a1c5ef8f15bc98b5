"""``plan_from_result``: a solver result and the screened candidates -> :class:`Plan`
(pools with predictions and bands, classes, costs, margins, KV pairs, solver info).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

from catalog.schema import Catalog, Dtype
from planner import risk
from planner.candidates import Candidate, ClassFigures, Screening
from planner.levels import LEVEL_REFERENCE_GPUS
from planner.plan.explain import (
    binding_detail,
    fill_gpu_seconds,
    infeasibility_reasons,
    relaxation_text,
    why_not,
)
from planner.plan.figures import cost_per_million_tokens, pool_tpot_ms, pool_ttft_ms
from planner.plan.latency_risk import latency_risk_warnings
from planner.plan.launch import launch_settings
from planner.plan.models import (
    BORROWED_LEVEL_MARK,
    HOURS_PER_MONTH,
    BindingConstraint,
    ClassPlan,
    KvPair,
    Margins,
    OperationsCost,
    Plan,
    PoolPlan,
    RiskOut,
    SloOut,
    SolverInfo,
    fp4_analogy_on_scaled_level,
)
from planner.request import ResolvedRequest
from solver.problem import PoolRole, SolveResult, SolveStatus


def effective_hit_rate(pools: list[PoolPlan], nominal: float) -> float:
    """A class's prefix hit rate over the pools that prefill it (dimensionless):
    ``sum(rate_p x h_p) / sum(rate_p)`` over its aggregated and prefill pools with
    traffic, each ``h_p`` its pool's effective rate
    (:func:`planner.candidates.sessions.effective_hit_rate`); ``nominal`` when no pool
    carries the class."""
    weighted = [
        (p.rate_rps, p.effective_prefix_hit_rate)
        for p in pools
        if p.role != PoolRole.DECODE and p.rate_rps > 0 and p.effective_prefix_hit_rate is not None
    ]
    total = sum(r for r, _ in weighted)
    if total <= 0:
        return nominal
    return sum(r * h for r, h in weighted) / total


def plan_from_result(
    req: ResolvedRequest,
    screening: Screening,
    result: SolveResult,
    catalog: Catalog,
    time_limit_s: float,
    rel_gap: float,
) -> Plan:
    """Assemble the Plan from the solve on ``catalog`` (its content hash recorded, its
    own-run checks warned about, :func:`own_llm_warnings`): pools with predictions,
    classes, binding limits."""
    by_id = {c.id: c for c in screening.candidates}
    figs = {c.name: ClassFigures.of(c) for c in req.classes}
    by_name = {c.name: c for c in req.classes}
    pools: list[PoolPlan] = []
    for cid, n in sorted(result.replicas.items()):
        cand = by_id[cid]
        rate = result.rates_rps.get(cid, 0.0)
        cap, planned, spares_down = pool_capacities(cand, n)
        fig = figs[cand.class_name]
        hit = cand.effective_prefix_hit_rate
        if hit is not None and hit != fig.prefix_hit_rate:
            fig = ClassFigures.of(by_name[cand.class_name], hit)
        cap_band = risk.capacity_band_rps(cap / cand.risk_derate, cand.sigma_log)
        cost_band = risk.pool_cost_band_usd_per_hour(
            n,
            cand.cost_usd_per_hour,
            cand.risk_derate,
            cand.sigma_log,
            min_replicas=cand.min_replicas,
        )
        pools.append(
            PoolPlan(
                id=cid,
                class_name=cand.class_name,
                role=cand.config.role,
                gpu=cand.config.gpu,
                tp=cand.config.tp,
                pp=cand.config.pp,
                dp=cand.config.dp,
                ep=cand.config.ep,
                dtype=cand.config.dtype.value,
                kv_dtype=cand.config.kv_dtype.value,
                replicas=n,
                gpus=n * cand.config.gpus,
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
                serving_stack_ms=(
                    cand.stack_ttft_ms if cand.config.role != PoolRole.DECODE else None
                ),
                scheduled_step_ms=(
                    cand.overlap_ttft_ms if cand.config.role == PoolRole.AGGREGATED else None
                ),
                provenance=cand.provenance,
                factor_points=cand.factor_points,
                level_scale=cand.level_scale,
                sigma_log=cand.sigma_log,
                derate_sigma_log=cand.derate_sigma_log,
                capacity_derate=cand.risk_derate,
                capacity_band_rps=cap_band,
                cost_band_usd_per_hour=cost_band,
                launch=launch_settings(cand, req.model_id),
                planned_capacity_rps=planned,
                spare_replicas=cand.spare_replicas,
                capacity_with_spares_down_rps=spares_down,
                effective_prefix_hit_rate=hit,
                host_cache_gb=round(cand.host_cache_gb, 1) if cand.host_cache_gb else None,
                host_hit_share=cand.host_hit_share if cand.host_cache_gb else None,
                speculative=pool_speculation(cand),
            )
        )
    solved = result.status.has_solution
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
                prefix_hit_rate=cls.prefix_hit_rate,
                effective_prefix_hit_rate=effective_hit_rate(mine, cls.prefix_hit_rate),
                sessions=cls.sessions.model_dump() if cls.sessions else None,
            )
        )
    fill_gpu_seconds(classes, pools, by_id, req)
    gpus_by_type: dict[str, int] = {}
    for p in pools:
        gpus_by_type[p.gpu] = gpus_by_type.get(p.gpu, 0) + p.gpus
    pre = sum(p.gpus for p in pools if p.role == PoolRole.PREFILL)
    dec = sum(p.gpus for p in pools if p.role == PoolRole.DECODE)
    cost = sum(p.cost_usd_per_hour for p in pools) if solved else None
    ops = operations_cost(req, screening, result) if solved else None
    band = (
        risk.cost_band_usd_per_hour(
            p.cost_band_usd_per_hour for p in pools if p.cost_band_usd_per_hour
        )
        if solved
        else None
    )
    infeasible: list[str] = []
    if result.status == SolveStatus.INFEASIBLE:
        infeasible = infeasibility_reasons(req, screening)
        if result.relaxation:
            infeasible += [relaxation_text(k, v, req) for k, v in result.relaxation.items()]
        alone = {
            k: v
            for k, v in result.relaxation_alone.items()
            if abs(result.relaxation.get(k, -1.0) - v) > 1e-6 or len(result.relaxation) > 1
        }
        if alone:
            infeasible.append(
                "or any one of these alone, the other limits as they are: "
                + "; ".join(relaxation_text(k, v, req) for k, v in sorted(alone.items()))
            )
        if not infeasible:
            infeasible = [result.message]
    return Plan(
        status=result.status,
        objective=req.request.objective.value,
        objective_value=result.objective,
        model=req.model_id,
        catalog_hash=catalog.content_hash,
        cost_usd_per_hour=cost,
        cost_usd_per_month=cost * HOURS_PER_MONTH if cost is not None else None,
        cost_usd_per_million_tokens=cost_per_million_tokens(cost, req) if cost else None,
        cost_band_usd_per_hour=band,
        unmeasured_gpus=unmeasured_gpus(pools),
        risk=risk_out(req.request.risk.confidence, req.request.risk.hold_latency),
        gpus_total=sum(gpus_by_type.values()),
        gpus_by_type=dict(sorted(gpus_by_type.items())),
        power_kw=sum(p.power_kw for p in pools),
        pool_ratio_prefill_to_decode=(pre / dec) if dec else None,
        pools=pools,
        classes=classes,
        binding=[BindingConstraint(name=b, detail=binding_detail(b, req)) for b in result.binding],
        why_not=why_not(screening, pools),
        infeasible_reasons=infeasible,
        warnings=list(req.warnings)
        + speculation_warnings(pools)
        + own_llm_warnings(pools, catalog, req.model_id, req.request.risk.confidence)
        + borrowed_level_warnings(pools, catalog, req.model_id)
        + fp4_weights_warnings(pools, catalog, req.model_id)
        + latency_risk_warnings(pools, {c.name: c.slo for c in req.classes}, req.request.risk),
        relaxation=result.relaxation,
        relaxation_alone=result.relaxation_alone,
        margins=plan_margins(req, pools),
        operations=ops,
        total_cost_usd_per_hour=(cost + ops.cost_usd_per_hour)
        if ops and cost is not None
        else None,
        kv_pairs=kv_pairs(pools, by_id),
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


def unmeasured_gpus(pools: list[PoolPlan]) -> list[str]:
    """GPU types of the plan's pools whose efficiency factors (for the pool's dtype)
    were set by analogy, not fitted to measurements (sorted ids)."""
    return sorted({p.gpu for p in pools if p.provenance == "analogy"})


def risk_out(confidence: float, hold_latency: bool = False) -> RiskOut:
    """The plan's risk settings: the request's confidence and its z (planner.risk
    .z_for_confidence), whether latency SLOs are held at it, and the band's confidence
    and z (planner.risk.Z_BAND)."""
    return RiskOut(
        confidence=confidence,
        hold_latency=hold_latency,
        z=risk.z_for_confidence(confidence),
        band_confidence=risk.BAND_CONFIDENCE,
        z_band=risk.Z_BAND,
        note=(
            f"capacities derated by exp(-{risk.z_for_confidence(confidence):.3f} x "
            "derate_sigma_log) per GPU (the larger of the MAD of the capacity errors and what "
            "their low side needs, at most sigma_log); bands at "
            f"{risk.BAND_CONFIDENCE:.0%} (exp(+/-{risk.Z_BAND:.3f} x sigma_log)), replicas "
            "scaled as 1/capacity and rounded up"
        ),
    )


def pool_capacities(cand: Candidate, replicas: int) -> tuple[float, float, float | None]:
    """(SLO capacity, planned capacity, SLO capacity with the spares down), requests/s,
    of a pool of ``replicas``: ``cand.capacity_rps(n)`` (the queueing curves: the
    largest rate meeting the SLO percentile), the MILP's own capacity rows
    (``max_utilization x`` capacity at ``n - spare_replicas``, chords of the curve),
    and ``cand.capacity_rps(n - spare_replicas)`` (None without spares)."""
    cap = cand.capacity_rps(replicas)
    planned = cand.to_pool_candidate().capacity_rps(replicas)
    k = cand.spare_replicas
    down = cand.capacity_rps(replicas - k) if k and replicas > k else (0.0 if k else None)
    return cap, planned, down


def plan_margins(req: ResolvedRequest, pools: list[PoolPlan]) -> Margins:
    """The request's margins and the highest pool load (rate / SLO capacity)."""
    lim = req.request.constraints
    loads = [p.utilization for p in pools if p.rate_rps > 0]
    top = max(loads) if loads else None
    return Margins(
        max_utilization=lim.max_utilization,
        spare_replicas_per_pool=lim.spare_replicas_per_pool,
        burst_cv=req.request.traffic.burst_cv,
        max_pool_load=top,
        min_headroom=(1.0 - top) if top is not None else None,
    )


def operations_cost(
    req: ResolvedRequest, screening: Screening, result: SolveResult
) -> OperationsCost:
    """Operations cost of the solved fleet ($/hour): ``usd_per_hour_per_gpu_type x``
    GPU types + ``usd_per_hour_per_configuration x`` distinct configurations
    (``PoolConfig.key``; pools of several classes with one configuration count
    once), with the request's ``operations`` prices."""
    by_id = {c.id: c for c in screening.candidates}
    used = [by_id[k] for k, n in result.replicas.items() if n > 0 and k in by_id]
    ops = req.request.operations
    types = len({c.config.gpu for c in used})
    configs = len({c.config.key for c in used})
    return OperationsCost(
        gpu_types=types,
        configurations=configs,
        usd_per_hour_per_gpu_type=ops.usd_per_hour_per_gpu_type,
        usd_per_hour_per_configuration=ops.usd_per_hour_per_configuration,
        cost_usd_per_hour=ops.usd_per_hour_per_gpu_type * types
        + ops.usd_per_hour_per_configuration * configs,
    )


def kv_pairs(pools: list[PoolPlan], by_id: dict[str, Candidate]) -> list[KvPair]:
    """Every (prefill pool, decode pool) of a class carrying load: the link the pair
    uses (``candidates.kv_pair_link``, recorded at screening) and the one the prefill
    pool's TTFT was priced on (the same or slower, by the MILP's kv_pair rows)."""
    out = []
    for pre in pools:
        if pre.role != PoolRole.PREFILL or pre.rate_rps <= 0:
            continue
        cand = by_id[pre.id]
        for dec in pools:
            if dec.role != PoolRole.DECODE or dec.class_name != pre.class_name:
                continue
            if dec.rate_rps <= 0:
                continue
            out.append(
                KvPair(
                    class_name=pre.class_name,
                    prefill_pool=pre.id,
                    decode_pool=dec.id,
                    link=cand.pair_links.get(dec.gpu, pre.kv_transfer_link or ""),
                    priced_link=pre.kv_transfer_link or "",
                    exposed_ms=pre.kv_transfer_exposed_ms,
                )
            )
    return out


def pool_speculation(cand: Candidate) -> dict[str, Any] | None:
    """A pool's speculative decoding as the plan reports it (None without): method, draft
    tokens k, the assumed acceptance length a, the drafter's repository and the engine's
    verification step at the pool's max batch, ``step_ms x a`` (ms; the candidate's
    ``step_ms`` is per output token, :func:`planner.kernels.effective_tpot_ms`)."""
    spec = cand.replica.speculative
    if spec is None:
        return None
    return {
        "method": spec.method.value,
        "draft_tokens": spec.draft_tokens,
        "acceptance_length": spec.acceptance_length,
        "draft_repo": spec.draft_repo,
        "verification_step_ms": (
            None if cand.step_ms is None else cand.step_ms * spec.acceptance_length
        ),
    }


def speculation_warnings(pools: list[PoolPlan]) -> list[str]:
    """What the launch of speculative aggregated pools cannot promise on SGLang: it
    refuses ``--enable-mixed-chunk`` with speculative decoding (server_args asserts it;
    sgl-project/sglang#6874), so its launch command leaves it out and prefill chunks run
    in steps of their own there, not mixed with the decodes as the plan prices them
    (vLLM's chunked prefill mixes them)."""
    mine = sorted(
        p.id for p in pools if p.speculative and p.role == PoolRole.AGGREGATED and p.replicas
    )
    if not mine:
        return []
    return [
        f"{', '.join(mine)}: aggregated with speculative decoding; the figures are for "
        "vLLM, which mixes prefill chunks with the verification steps. SGLang does not "
        "mix them under speculative decoding (its command has no --enable-mixed-chunk): "
        "chunks there run in steps of their own, which the plan does not price"
    ]


#: A GPU's own runs of the planned LLM at or below this share of what its factors
#: predict (relative to the reference GPUs', catalog.schema.OwnLlmCheck) draw a warning:
#: 15% or more below, beyond the few percent by which one LLM's runs scatter about a
#: level that rests on several.
OWN_LLM_WARN_RATIO = 0.85


def own_llm_warnings(
    pools: list[PoolPlan], catalog: Catalog, model_id: str, confidence: float | None = None
) -> list[str]:
    """Per GPU type of the plan's serving pools (non-FP4, factors scaled to measurements)
    whose own runs of ``model_id`` reach at most :data:`OWN_LLM_WARN_RATIO` of what its
    factors predict (``efficiency.own_llm_ratio``, written by calibration): the factors
    rest on the median over the GPU's LLMs. The warning says whether the pools' capacity,
    already derated at the plan's ``confidence`` (``capacity_derate``, the smallest of
    the GPU's pools), covers that shortfall (:func:`own_llm_cover`). Sorted by GPU id."""
    gpus = sorted(
        {
            p.gpu
            for p in pools
            if p.replicas and p.provenance == "scaled" and p.dtype != Dtype.FP4.value
        }
    )
    out = []
    for gpu in gpus:
        spec = catalog.gpus.get(gpu)
        check = spec.efficiency.own_llm_ratio.get(model_id) if spec else None
        if check is None or check.ratio > OWN_LLM_WARN_RATIO:
            continue
        against = (
            "what its factors predict"
            if gpu in LEVEL_REFERENCE_GPUS
            else "what its factors predict, relative to the reference GPUs on this LLM"
        )
        mine = [p for p in pools if p.gpu == gpu and p.replicas]
        derates = [p.capacity_derate for p in mine if p.capacity_derate is not None]
        sigmas = [
            s
            for p in mine
            if (s := p.derate_sigma_log if p.derate_sigma_log is not None else p.sigma_log)
        ]
        out.append(
            f"{gpu}: its own {check.points} measured run(s) of {model_id} from "
            f"{check.publishers} publisher{'s' if check.publishers != 1 else ''} (fit split) "
            f"reach {check.ratio:.2f}x {against}; its factors rest on the median over the LLMs it "
            "was measured on; "
            + own_llm_cover(
                check.ratio,
                min(derates) if derates else None,
                min(sigmas) if sigmas else None,
                confidence,
            )
        )
    return out


def borrowed_level_warnings(pools: list[PoolPlan], catalog: Catalog, model_id: str) -> list[str]:
    """Per GPU type of the plan's serving pools whose factors were scaled to runs of
    mixture-of-experts LLMs only (``efficiency.dense_level_from`` set by calibration,
    scripts/calibration_levels.py) while the plan serves the dense ``model_id``: its
    dense level is not measured but judged by a measured GPU (a sibling of its
    architecture, whose level it borrows, or its predecessor, whose level caps it), or
    ("self") rests on its MoE level. A plan's "unmeasured GPUs" line counts only GPUs set
    by analogy, so this says it. Sorted by GPU id; none for a MoE ``model_id``."""
    model = catalog.models.get(model_id)
    if model is None or model.is_moe:
        return []
    out = []
    # scaled pools, and FP4 pools priced by analogy on a scaled level (planner.risk)
    served = [p for p in pools if p.replicas]
    fp4 = {
        p.gpu
        for p in served
        if p.provenance == "analogy"  # (a scaled pool may be built without a dtype)
        and fp4_analogy_on_scaled_level(p.provenance, p.dtype, p.level_scale)
    }
    for gpu in sorted({p.gpu for p in served if p.provenance == "scaled"} | fp4):
        spec = catalog.gpus.get(gpu)
        source = spec.efficiency.dense_level_from if spec else None
        if spec is None or source is None:
            continue
        measured = ", ".join(sorted(spec.efficiency.own_llm_ratio)) or "none listed"
        if source == "self":
            how = f"its level on them stands for the dense {model_id} (no measured GPU judges it)"
        elif source == spec.predecessor:
            how = (
                f"its factors for the dense {model_id} are its level on them, capped at "
                f"{source}'s (its predecessor's) measured level"
            )
        else:
            how = (
                f"its factors for the dense {model_id} are borrowed from {source}'s measured level"
            )
        out.append(
            f"{gpu}: {BORROWED_LEVEL_MARK} ({measured}); {how}, never above it, not measured on "
            "a dense LLM on this GPU (see its efficiency reason in the catalog)"
        )
    return out


def fp4_weights_warnings(pools: list[PoolPlan], catalog: Catalog, model_id: str) -> list[str]:
    """Per FP4 checkpoint the plan's serving pools load that quantizes another model's
    weights (``weights_of`` in the model's ``fp4_checkpoints``: the same architecture,
    another release or fine-tune, e.g. AMD's MXFP4 DeepSeek is DeepSeek-R1-0528's): the
    plan serves those weights, not ``model_id``'s. Capacity is priced on the architecture,
    which is the same; answers differ. Sorted by checkpoint."""
    model = catalog.models.get(model_id)
    if model is None:
        return []
    gpus_of: dict[str, set[str]] = {}
    of: dict[str, str] = {}
    for p in pools:
        spec = catalog.gpus.get(p.gpu)
        if not p.replicas or p.dtype != "fp4" or spec is None:
            continue
        ckpt = model.fp4_checkpoint_for(spec.fp4_formats)
        if ckpt is not None and ckpt.weights_of:
            gpus_of.setdefault(ckpt.repo, set()).add(p.gpu)
            of[ckpt.repo] = ckpt.weights_of
    return [
        f"{', '.join(sorted(gpus_of[repo]))}: the fp4 pools load {repo}, the weights of "
        f"{of[repo]} (the same architecture as {model_id}; no {model_id} checkpoint in the "
        "format these GPUs run is published): the capacity holds, the model's answers are "
        f"{of[repo]}'s"
        for repo in sorted(gpus_of)
    ]


def own_llm_cover(
    ratio: float, derate: float | None, derate_sigma_log: float | None, confidence: float | None
) -> str:
    """Whether a GPU's pools, sized at ``derate`` x its factors' capacity (the risk derate
    at the plan's ``confidence``, :func:`planner.risk.capacity_derate`), hold if the GPU
    serves only ``ratio`` x that capacity, as its own runs of the LLM measured
    (dimensionless both):

    * ``derate <= ratio``: covered (the pools already count on no more than its runs);
    * else the pools may serve ``1 - ratio / derate`` less than planned, and the confidence
      whose derate reaches ``ratio`` is ``Phi(ln(1 / ratio) / derate_sigma_log)`` (the
      spread the derate uses, ``planner.risk.FactorUncertainty.derate_sigma_log``; MI300X, ratio
      0.717, sigma 0.498: 0.748, shown 0.75, rounded up); none when it exceeds
      :data:`planner.risk.MAX_CONFIDENCE`.

    ``derate`` None (a nominal plan) counts as 1."""
    d = 1.0 if derate is None else derate
    at = f" at the plan's {confidence:.0%} confidence" if confidence is not None else ""
    if d <= ratio:
        return (
            f"its pools here are sized at {d:.2f}x of that capacity (the risk derate{at}), "
            "which covers it; the plan without it is among the alternatives"
        )
    text = (
        f"its pools here, sized at {d:.2f}x of that capacity (the risk derate{at}), may serve "
        f"about {1 - ratio / d:.0%} less than planned: compare the plan without it "
        "(alternatives)"
    )
    if derate_sigma_log:
        needed = NormalDist().cdf(math.log(1 / ratio) / derate_sigma_log)
        digits = 2 if needed <= 0.99 else 3  # rounded up: 0.9932 -> 0.994, never 1.00
        shown = math.ceil(needed * 10**digits) / 10**digits
        if shown <= risk.MAX_CONFIDENCE:
            return text + f" or raise risk.confidence to {shown:.{digits}f}"
    return text
