"""make_plan(): the one entry point the API and the CLI call to plan a fleet."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from catalog.loader import load_catalog
from catalog.schema import Catalog, Dtype, Fp4Checkpoint, Model
from planner import alternatives as alt
from planner import architecture as arch
from planner import kernel_floors as kf
from planner import kernels as kn
from planner import risk
from planner import roofline as rl
from planner.candidates import Candidate, Screening, prune_by_cost_curves, screen_candidates
from planner.plan import Plan, plan_assumed_notes, plan_from_result
from planner.plan.figures import output_tokens_per_hour
from planner.problem_build import build_problem, parse_request
from planner.procurement import PoolDemand, plan_tco
from planner.request import PlanRequest, ResolvedClass, ResolvedRequest, resolve_request
from planner.simulate import verify as sv
from solver.problem import PoolCandidate, SolverOptions
from solver.solve import solve

if TYPE_CHECKING:
    from planner.calibration import Calibration

DEFAULT_TIME_LIMIT_S = 10.0
DEFAULT_REL_GAP = 0.001
#: Screening (every class x GPU type x dtype x TP x chunk budget through the cost
#: model) stops with an error naming ``candidates`` past this many seconds. The 80/20
#: example screens in 0.3 s, 50 GPU types x 20 classes (bench/solver_scaling.py) in a
#: few seconds; the capped inputs (planner.request) keep any request well below it on an
#: idle machine, so it only trips on a starved one, and then says so instead of hanging.
DEFAULT_SCREENING_TIME_LIMIT_S = 30.0


@dataclass(frozen=True)
class SolverLimits:
    """Caps from settings; a request may ask for less, never more."""

    time_limit_s: float = DEFAULT_TIME_LIMIT_S
    rel_gap: float = DEFAULT_REL_GAP
    screening_time_limit_s: float = DEFAULT_SCREENING_TIME_LIMIT_S


def solver_options_for(req: PlanRequest, caps: SolverLimits) -> SolverOptions:
    """Request overrides, capped by the settings (time) and floored at their gap."""
    t = req.solver.time_limit_s
    g = req.solver.rel_gap
    return SolverOptions(
        time_limit_s=min(t, caps.time_limit_s) if t else caps.time_limit_s,
        rel_gap=max(g, 0.0) if g is not None else caps.rel_gap,
    )


def make_plan(
    data: Mapping[str, Any] | PlanRequest,
    catalog: Catalog | None = None,
    caps: SolverLimits | None = None,
    *,
    alternatives: bool | str = True,
    verify: bool | None = None,
    verify_default: bool | None = None,
    calibrations: Callable[[str], Calibration] | None = None,
    corrections: Any = None,
    timings: dict[str, float] | None = None,
) -> Plan:
    """Validate, screen candidates, solve the MILP and assemble the Plan.

    ``alternatives``: True solves them now (``alternatives_status: ready``); False
    not at all (``not_requested``); ``"deferred"`` not now (``pending``) but keeps the
    solved model on the plan, so :func:`planner.alternatives.complete_alternatives`
    solves them later, identically and without screening again. ``timings``, when
    given, receives the wall seconds of each stage (``screening``, ``milp``,
    ``verification``, ``alternatives``, ``rest``; :data:`STAGES`).

    Bad input raises :class:`PlanningError` (naming the field); an infeasible
    request returns a Plan with status ``infeasible`` and the reasons. The plan
    is then verified by simulation (``verify``: None follows the request's
    ``verify.enabled``, else ``verify_default``, which the caller reads from its
    settings) and corrected when a class misses (:mod:`planner.simulate.verify`).
    ``corrections`` (the ``verification.corrections`` of the plan this request is a
    variant of) are applied from the start and kept: a variant is solved on the
    corrected model its base learned, and may only add to it.
    """
    t0 = time.perf_counter()
    catalog = catalog or load_catalog()
    caps = caps or SolverLimits()
    request = parse_request(data)
    if verify is None and request.verify.enabled is None:
        verify = verify_default
    if request.calibration is not None:
        catalog = calibrated_catalog(catalog, request.calibration, calibrations)
    if request.scenarios:
        from planner.scenarios import make_robust_plan

        raw = data if isinstance(data, Mapping) else request.model_dump(exclude_none=True)
        robust = make_robust_plan(
            request,
            raw,
            catalog,
            solver_options_for(request, caps),
            screening_deadline=t0 + caps.screening_time_limit_s,
        )
        if request.calibration is not None:
            robust.assumptions["calibration"] = request.calibration
        if sv.enabled(request.verify, verify):
            sv.verify_robust(robust, request, raw, catalog)
        else:
            robust.verification = sv.skipped(request.verify)
        attach_tco(
            robust,
            request,
            catalog,
            (),
            resolve_request(request, catalog),
            solver_options_for(request, caps).time_limit_s,
        )
        robust.assumed_notes = plan_assumed_notes(robust)
        return robust
    resolved = resolve_request(request, catalog)
    uncorrected = screen_candidates(resolved, catalog, deadline=t0 + caps.screening_time_limit_s)
    inherited = sv.as_corrections(corrections)
    screening = sv.corrected_screening(uncorrected, inherited, resolved)
    problem = build_problem(resolved, screening)
    opts = solver_options_for(request, caps)
    t_solve = time.perf_counter()
    cache: dict = {}
    result = solve(problem, opts, cache)
    plan = plan_from_result(resolved, screening, result, catalog, opts.time_limit_s, opts.rel_gap)
    t_verify = time.perf_counter()
    simulated_s = 0.0
    if sv.enabled(request.verify, verify):
        plan, problem, result, screening, simulated_s = sv.verify_and_correct(
            plan,
            problem,
            result,
            resolved,
            uncorrected,
            catalog,
            opts,
            deadline=t_solve + opts.time_limit_s,
            inherited=inherited,
            cache=cache,
        )
    else:
        plan.verification = sv.skipped(request.verify)
        plan.verification.corrections = sv.correction_list(inherited)
    t_alternatives = time.perf_counter()
    if alternatives:
        final = screening  # the corrected model the plan was solved on

        def without(gpu: str) -> tuple[PoolCandidate, ...]:
            kept = [c for c in final.candidates + final.cross_dominated if c.config.gpu != gpu]
            return tuple(c.to_pool_candidate() for c in prune_by_cost_curves(kept, resolved)[0])

        model = alt.SolvedModel(
            problem,
            result,
            opts,
            without,
            cache,
            solver_used_s=t_alternatives - t_solve - simulated_s,  # solver time only
        )
        if alternatives == "deferred" and result.status.has_solution:
            plan.alternatives_status = alt.PENDING
            plan.keep_solved_model(model)
        else:
            alt.complete_alternatives(plan, model)
    t_rest = time.perf_counter()
    plan.assumptions = assumptions(resolved, catalog, screening)
    plan.assumptions["calibration"] = request.calibration
    attach_tco(plan, request, catalog, problem.candidates, resolved, opts.time_limit_s)
    plan.assumed_notes = plan_assumed_notes(plan)  # from its classes and assumptions
    t_end = time.perf_counter()
    plan.assumptions["planning_time_s"] = round(t_end - t0, 4)
    if timings is not None:
        timings.update(
            screening=t_solve - t0,
            milp=t_verify - t_solve + (t_alternatives - t_verify - simulated_s),
            verification=simulated_s,
            alternatives=t_rest - t_alternatives,
            rest=t_end - t_rest,
        )
    return plan


#: The stages ``make_plan(..., timings=)`` times (wall seconds): screening (request,
#: candidates, model), milp (the solve, the plan, and correction re-solves),
#: verification (simulations), alternatives, rest (assumptions, TCO).
STAGES = ("screening", "milp", "verification", "alternatives", "rest")


def attach_tco(
    plan: Plan,
    request: PlanRequest,
    catalog: Catalog,
    candidates: tuple[PoolCandidate, ...],
    resolved: ResolvedRequest,
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
) -> None:
    """Set the plan's ``tco``, ``capex_usd`` and ``servers_by_type`` for the request's
    ``procurement`` over its ``load_profile`` (:func:`planner.procurement.plan_tco`).
    Each pool's hourly need follows the fleet MILP's own capacity curve of its
    candidate (in ``candidates``, the model the plan was solved on); a plan without
    pools (a robust plan) is costed per GPU type from ``gpus_by_type``, the same
    every hour. The own-or-rent MILP gets the request's solver time limit (capped)."""
    if not plan.status.has_solution or not plan.gpus_by_type:
        return
    by_id = {c.id: c for c in candidates}
    min_n = request.constraints.min_replicas_per_pool
    if plan.pools:
        pools = [
            PoolDemand(
                id=p.id,
                gpu=p.gpu,
                gpus_per_replica=p.tp,
                replicas=p.replicas,
                rate_rps=p.rate_rps,
                capacity_rps=by_id[p.id].capacity_rps if p.id in by_id else None,
                min_replicas=min(min_n, p.replicas),
            )
            for p in plan.pools
        ]
    else:
        pools = [
            PoolDemand(id=g, gpu=g, gpus_per_replica=1, replicas=n, rate_rps=0.0)
            for g, n in sorted(plan.gpus_by_type.items())
            if n > 0
        ]
    ratio = None
    if plan.cost_band_usd_per_hour and plan.cost_usd_per_hour:
        lo, hi = plan.cost_band_usd_per_hour
        ratio = (lo / plan.cost_usd_per_hour, hi / plan.cost_usd_per_hour)
    tco = plan_tco(
        pools,
        catalog,
        request.procurement,
        request.load_profile.hourly_rate_factors if request.load_profile else None,
        plan.operations.cost_usd_per_hour if plan.operations else 0.0,
        output_tokens_per_hour(resolved),
        ratio,
        time_limit_s,
    )
    plan.tco = tco
    plan.capex_usd = tco.capex_usd
    plan.servers_by_type = dict(tco.servers_by_type)
    bands = [(p.gpu, *p.cost_band_usd_per_hour) for p in plan.pools if p.cost_band_usd_per_hour]
    if bands:
        ranges = {}
        for g in {b[0] for b in bands}:
            price = catalog.gpus[g].price
            lo, hi = price.range_usd_per_hour or (price.usd_per_hour, price.usd_per_hour)
            ranges[g] = (lo, price.usd_per_hour, hi)
        lo, hi = risk.price_band_usd_per_hour(bands, ranges)
        plan.cost_band_with_prices_usd_per_hour = (round(lo, 2), round(hi, 2))


def calibrated_catalog(
    catalog: Catalog, name: str, resolve: Callable[[str], Calibration] | None = None
) -> Catalog:
    """``catalog`` with the named calibration's factors applied. ``resolve`` finds it
    (the service: its database, then the YAML store in ``Settings.calibration_dir``);
    by default the YAML store in ``./calibrations``. An unknown name is an error on
    ``calibration``."""
    from planner.calibration import apply_calibration, load_calibration

    cal = resolve(name) if resolve is not None else load_calibration(name)
    return apply_calibration(catalog, cal)


def assumptions(req: ResolvedRequest, catalog: Catalog, screening: Screening) -> dict[str, Any]:
    """Prices and efficiency factors of the GPUs in the model (with the factors'
    provenance, points and sigma_log: planner.risk.factor_uncertainty, as the
    candidates carry them, the measured dense GEMM rate over the MFU's:
    planner.kernel_floors.dense_gemm_lift, and the serving stack's TTFT latency priced:
    planner.serving_stack), per-class figures."""
    gpus = sorted({c.config.gpu for c in screening.candidates})
    first: dict[str, Candidate] = {}
    for c in screening.candidates:
        first.setdefault(c.config.gpu, c)
    return {
        "gpus": {
            g: {
                "price_usd_per_hour": catalog.gpus[g].price.usd_per_hour,
                "price_is_estimate": catalog.gpus[g].price.estimate,
                "prefill_mfu": first[g].replica.prefill_mfu,
                "decode_mbu": first[g].replica.decode_mbu,
                "provenance": first[g].provenance,
                "points": first[g].factor_points,
                "level_scale": first[g].level_scale,
                # MFU and MBU above include it for an MoE model (planner.roofline)
                "moe_level_ratio": rl.moe_level_ratio(catalog.gpus[g], first[g].replica.model),
                # MFU and MBU of its replicas with data-parallel attention (dp > 1) x this
                # (planner.roofline.dp_level_ratio; 1: not measured lower)
                "dp_attention_level_ratio": catalog.gpus[g].efficiency.dp_attention_level_ratio,
                "sigma_log": first[g].sigma_log,
                # the spread the capacity derate uses (the errors' low side;
                # planner.risk.FactorUncertainty.derate_sigma_log)
                "derate_sigma_log": first[g].derate_sigma_log,
                # dense GEMMs at MFU x this: the measured kernel rate at 512 tokens over
                # the MFU's (planner.kernel_floors.dense_gemm_lift; 1: none measured)
                "dense_gemm_lift": first[g].replica.coefficients.dense_lift,
                # in every TTFT of the plan (planner.serving_stack; zero without MLA)
                "serving_stack_base_ms": first[g].replica.stack.base_ms,
                "serving_stack_ms_per_prompt_token": first[g].replica.stack.per_token_ms,
            }
            for g in gpus
        },
        "classes": {
            c.name: {
                "prompt_mean_tokens": c.prompt.mean_tokens,
                "prompt_p90_tokens": c.prompt.p90_tokens,
                "output_mean_tokens": c.output.mean_tokens,
                "prefix_hit_rate": c.prefix_hit_rate,
                **speculative_assumption(c, catalog, catalog.models[req.model_id]),
            }
            for c in req.classes
        },
        "pools_per_class": "each pool serves one class (no head-of-line blocking across classes)",
        **fp4_assumptions(screening),
    }


def speculative_assumption(c: ResolvedClass, catalog: Catalog, model: Model) -> dict[str, Any]:
    """A class's speculative decoding as the plan assumed it (empty without): method,
    draft tokens k, acceptance length a (the request's assumption), the drafter loaded
    and how the cost model used them (planner.kernels, planner.roofline.speculative)."""
    sp = c.speculative
    if sp is None:
        return {}
    return {
        "speculative": {
            "method": sp.method.value,
            "draft_tokens": sp.draft_tokens,
            "acceptance_length": sp.acceptance_length,
            "draft_model": sp.draft_model,
            "draft_repo": rl.draft_repo_for(
                model, sp.method, sp.draft_repo, catalog, sp.draft_model
            ),
            "note": (
                f"assumed by the request, not measured: each verification step runs the "
                f"target over {sp.draft_tokens + 1} tokens per sequence plus the "
                f"{sp.method.value} drafter and advances a sequence "
                f"{sp.acceptance_length:g} tokens on average, so TPOT = step / "
                f"{sp.acceptance_length:g} and decode throughput = B x "
                f"{sp.acceptance_length:g} / step (decode and aggregated pools; prefill "
                "pools do not speculate)"
            ),
        }
    }


def fp4_assumptions(screening: Screening) -> dict[str, Any]:
    """What an FP4 candidate was priced on (empty when none was screened in): the
    checkpoints the GPUs load (one per block format: :attr:`planner.roofline.Replica.
    fp4_checkpoint`, with the model whose weights they are when not this one's), their
    bits per weight (:func:`planner.architecture.fp4_bits_per_weight`) and the layers
    they keep in BF16 beyond the embedding, lm_head, norms and routers,
    the GEMM and weight-read derates per GPU type
    (:func:`planner.kernels.weight_dtype_derates`) and the factors' provenance and spread
    (:func:`planner.risk.factor_uncertainty`: analogy unless measured in FP4)."""
    by_gpu: dict[str, Candidate] = {}
    ckpt_of: dict[str, Fp4Checkpoint] = {}
    for c in screening.candidates:
        ckpt = c.replica.fp4_checkpoint
        if ckpt is not None and c.config.gpu not in by_gpu:
            by_gpu[c.config.gpu], ckpt_of[c.config.gpu] = c, ckpt
    if not by_gpu:
        return {}
    used = {ckpt.repo: ckpt for ckpt in ckpt_of.values()}
    return {
        "fp4": {
            "checkpoints": {
                repo: {
                    "format": ckpt.format.value,
                    "bits_per_weight": arch.fp4_bits_per_weight(ckpt.format),
                    **({"weights_of": ckpt.weights_of} if ckpt.weights_of else {}),
                    # beyond the embedding, lm_head, norms and routers every one keeps
                    **(
                        {"bf16_layers": [g.value for g in ckpt.bf16_layers]}
                        if ckpt.bf16_layers
                        else {}
                    ),
                }
                for repo, ckpt in sorted(used.items())
            },
            "kv_dtype": "fp8",
            "gpus": {
                g: {
                    "checkpoint": ckpt_of[g].repo,
                    "gemm_derate": round(gemm, 3),
                    "weight_read_derate": round(read, 3),
                    "fp4_level_ratio": kf.fp4_level_ratio(c.replica.gpu),
                    "provenance": c.provenance,
                    "sigma_log": c.sigma_log,
                }
                for g, c in sorted(by_gpu.items())
                for gemm, read in [
                    kn.weight_dtype_derates(
                        c.replica.gpu, Dtype.FP4, c.replica.engine, c.replica.decode_mbu
                    )
                ]
            },
            "note": "GEMMs at the FP4 peak x the GPU's MFU x gemm_derate (the FP4 GEMMs' "
            "share of their peak over the FP8 ones' of theirs, measured on Blackwell "
            "(aiconfigurator's nvfp4 GEMMs) and assumed 0.75 elsewhere, x the GPU's "
            "fp4_level_ratio, at most 1, x its measured FP8 GEMM efficiency) x the measured "
            "GEMM rate (assumptions.gpus[g].dense_gemm_lift, with its own gain at larger "
            "steps), weight reads at W_eff x weight_read_derate (the assumed derate x "
            "fp4_level_ratio, at most the best-measured GPUs' 0.7 of peak bandwidth over the "
            "replica's MBU where above 1; planner.kernels). fp4_level_ratio is measured where "
            "the GPU's FP4 runs were (make calibrate-defaults), else 1; factors measured "
            "in FP4 (a calibration) replace all this, and otherwise the risk derate takes "
            "the analogy spread",
        }
    }
