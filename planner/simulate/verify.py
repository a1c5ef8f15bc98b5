"""The plan's verification section: simulate the planned fleet, judge each class,
and when a class misses, derate its pools and solve again.

Judgement. A class *meets* its SLO when its simulated attainment (the share of
requests meeting both its TTFT and TPOT SLOs) reaches its target percentile
(p90: 90%). That is stricter than each percentile alone: a plan promising
p90 TTFT <= 1 s and p90 TPOT <= 50 ms is held to 90% of requests meeting
both. The 95% interval of the attainment (20 batch means) comes with it: a
pool run near saturation varies a lot over time, so a class below the target
whose interval still reaches it is marked ``within_noise`` (a longer
``fleetplan simulate --requests`` settles it). It still counts as a miss: the
verdict errs on the side of the user's SLO.

Correction. The simulation checks the optimizer's capacity model, not one plan.
When a class misses, the *family* of each of its pools on the side that missed
(same class, role and GPU type: the prefill queue curve when TTFT misses, the
decode slot curve when TPOT misses) has its curve scaled by a factor f < 1
(:func:`learn`), and that correction applies to every candidate of the family,
in the model or set aside by cross-GPU pruning (:func:`corrected_screening`).
The whole model is then solved again and the new plan simulated, until it
verifies (at most :data:`MAX_CORRECTIONS` solves, each simulated). Factors only
shrink, so each plan solved is the optimum of the model with the corrections so
far. The plan returned is the best of the original and every re-solve
(:mod:`planner.simulate.outcome`): one that verifies, else the one attaining most
of its SLOs, the cheaper on a tie, so a correction that costs more and attains no
more is stated (``verification.correction``: every round's cost and attainment,
the corrections tried) but not kept. ``verification.corrections`` lists the
corrections the returned plan was solved with (family, side, factor, why).

The corrections are reused: the alternatives and "why not" rows are solved on
the corrected model, and a variant of the request (``make_plan(...,
corrections=)``: sensitivity rows, what-ifs) starts from them (:func:`as_corrections`)
and may only add to them; corrections tried for a plan that was not kept are not
inherited. A correction that cannot be solved (a fleet limit binds) leaves the
plan as solved, with the miss stated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any

from catalog.schema import Catalog
from planner.candidates import Candidate, Screening, attach_capacity, prune_by_cost_curves
from planner.errors import PlanningError
from planner.request import ResolvedRequest, VerifySpec, resolve_request
from planner.simulate.outcome import (
    Key,
    Tried,
    attainments,
    best_tried,
    correction_record,
    kept_because,
)
from planner.simulate.results import (
    ClassSimulation,
    ClassVerification,
    FamilyCorrection,
    SimulationResult,
    Verification,
)
from planner.simulate.runner import simulate_plan
from solver.problem import has_solution

#: Verification runs unless the caller or the request turns it off. The service passes
#: its setting (``Settings.verify_default``, ``FLEETPLAN_VERIFY_DEFAULT``) explicitly;
#: this is the default of a direct call (the planner reads no environment variable).
DEFAULT_ENABLED = True
MAX_CORRECTIONS = 4
#: A miss whose percentile latency improves by less than this share after its family was
#: derated (so its pools grew) is a latency floor, not load: more replicas cannot meet it.
FLOOR_IMPROVEMENT = 0.01


def enabled(spec: VerifySpec, override: bool | None = None) -> bool:
    """Whether to verify: an explicit argument (the caller's setting), else the
    request's ``verify.enabled``, else :data:`DEFAULT_ENABLED`."""
    if override is not None:
        return override
    if spec.enabled is not None:
        return spec.enabled
    return DEFAULT_ENABLED


# --------------------------------------------------------------------------- judgement


def judge(c: ClassSimulation) -> ClassVerification:
    """A class's verdict: attainment against its target percentile, in words.

    ``meets`` when the attainment reaches the target; ``within_noise`` when it does
    not but its 95% interval does (a longer simulation settles it); ``misses``
    otherwise."""
    target = c.percentile / 100.0
    ci = c.attainment_ci95 or 0.0
    if c.requests > 0 and c.attainment >= target:
        status = "meets"
    elif c.requests > 0 and c.attainment + ci >= target:
        status = "within_noise"
    else:
        status = "misses"
    shown = f" +- {ci:.1%}" if ci >= 0.0005 else ""
    t, p = c.ttft_ms.at_target, c.tpot_ms.at_target
    pct = f"p{c.percentile:g}"
    ttft = f"{t:,.0f} ms" if t is not None else "unbounded"
    tpot = f"{p:,.1f} ms" if p is not None else "n/a"
    text = (
        f"{c.attainment:.1%}{shown} of requests meet both SLOs (target {target:.0%}); "
        f"{pct} TTFT {ttft} vs {c.slo_ttft_ms:,.0f} ms, {pct} TPOT {tpot} vs "
        f"{c.slo_tpot_ms:,.0f} ms"
    )
    verdict = {
        "meets": f"meets: {text}",
        "within_noise": f"MISSES (within the simulation's noise: its 95% interval reaches "
        f"the target; simulate longer to settle it): {text}",
        "misses": f"MISSES: {text}",
    }[status]
    return ClassVerification(
        name=c.name,
        percentile=c.percentile,
        slo_ttft_ms=c.slo_ttft_ms,
        slo_tpot_ms=c.slo_tpot_ms,
        ttft_ms=t,
        tpot_ms=p,
        planned_ttft_ms=c.planned_ttft_ms,
        planned_tpot_ms=c.planned_tpot_ms,
        attainment=c.attainment,
        attainment_ci95=c.attainment_ci95,
        goodput_rps=c.goodput_rps,
        status=status,
        meets_slo=status == "meets",
        verdict=verdict,
    )


def verification_of(sim: SimulationResult, spec: VerifySpec) -> Verification:
    """The plan's verification section from a simulation."""
    classes = [judge(c) for c in sim.classes]
    passed = bool(classes) and all(c.meets_slo for c in classes)
    head = f"simulated {sim.requests:,} requests (seed {sim.seed}"
    head += f", burst CV {sim.burst_cv:g})" if sim.burst_cv != 1.0 else ")"
    summary = f"{head}: " + _summary(classes, "")
    return Verification(
        enabled=True,
        requests=sim.requests,
        seed=sim.seed,
        burst_cv=sim.burst_cv,
        wall_time_s=sim.wall_time_s,
        passed=passed if classes else None,
        summary=summary,
        classes=classes,
    )


def _summary(classes: list[ClassVerification], note: str) -> str:
    """One sentence: every class meets, or which miss (and which of those only within
    the simulation's noise)."""
    if not classes:
        return "no class to verify"

    def label(c: ClassVerification) -> str:
        name = f"{c.scenario}/{c.name}" if c.scenario else c.name
        return f"{name} (within the simulation's noise)" if c.status == "within_noise" else name

    missed = [label(c) for c in classes if c.status != "meets"]
    if not missed:
        return "every class meets its SLO percentile"
    verb = "MISSES its SLO percentile" if len(missed) == 1 else "MISS their SLO percentiles"
    return f"{', '.join(missed)} {verb}{note}"


def verify_plan(
    plan: Mapping[str, Any],
    request: ResolvedRequest | Mapping[str, Any],
    catalog: Catalog,
    spec: VerifySpec,
) -> Verification:
    """Simulate a plan (its JSON) and judge every class; an unsolved plan is not verified."""
    if not has_solution(plan.get("status")):
        return Verification(
            requests=0,
            seed=spec.seed,
            burst_cv=spec.burst_cv,
            wall_time_s=0.0,
            passed=None,
            summary=f"not verified: the plan is {plan.get('status')}",
        )
    sim = simulate_plan(plan, request, catalog, spec.requests, spec.seed, spec.burst_cv)
    return verification_of(sim, spec)


def skipped(spec: VerifySpec) -> Verification:
    return Verification(
        enabled=False,
        requests=0,
        seed=spec.seed,
        burst_cv=spec.burst_cv,
        wall_time_s=0.0,
        passed=None,
        summary="not verified (verification is switched off)",
    )


# --------------------------------------------------------------------------- correction

#: Re-solves (each simulated) a correction may take before the plan stands as it is.
MAX_CORRECTIONS = 6
#: Pool roles whose capacity curve a side's factor scales.
_SIDE_ROLES = {"prefill": ("prefill", "aggregated"), "decode": ("decode", "aggregated")}
_MODE_OF_ROLE = {"aggregated": "aggregated", "prefill": "disaggregated", "decode": "disaggregated"}


@dataclass
class DeratedCandidate(Candidate):
    """A candidate whose queueing-model capacity is capped at a share of itself:
    ``prefill_derate`` scales the prefill-queue curve, ``decode_derate`` the
    decode-slot curve (requests/s at every replica count)."""

    prefill_derate: float = 1.0
    decode_derate: float = 1.0

    def prefill_capacity_rps(self, replicas: int) -> float:
        cap = super().prefill_capacity_rps(replicas)
        return cap * self.prefill_derate if math.isfinite(cap) else cap

    def decode_capacity_rps(self, replicas: int) -> float:
        cap = super().decode_capacity_rps(replicas)
        return cap * self.decode_derate if math.isfinite(cap) else cap

    @cached_property
    def asymptotic_rps_per_replica(self) -> float:
        """The derated capacity per replica with no queueing headroom (requests/s):
        min(decode rate x decode_derate, prefill rate x prefill_derate), so cost
        per request/s (pruning, "why not") sees the correction too."""
        rates = [
            r * f
            for r, f in (
                (self.decode_rps_per_replica, self.decode_derate),
                (self.prefill_rps_per_replica, self.prefill_derate),
            )
            if r
        ]
        return min(rates) if rates else 0.0


def derate_candidate(cand: Candidate, prefill: float, decode: float) -> DeratedCandidate | None:
    """A copy of ``cand`` with derated curves and MILP rows rebuilt (None: rejected)."""
    base = {f.name: getattr(cand, f.name) for f in fields(Candidate)}
    if isinstance(cand, DeratedCandidate):
        prefill, decode = prefill * cand.prefill_derate, decode * cand.decode_derate
    base["notes"] = list(cand.notes)
    out = DeratedCandidate(**base, prefill_derate=prefill, decode_derate=decode)
    return None if attach_capacity(out) is not None else out


def family_factors(
    cand: Candidate, corrections: Mapping[Key, FamilyCorrection]
) -> tuple[float, float]:
    """(prefill, decode) factors of ``cand``'s family (class, role, GPU type); 1.0 if none."""
    cls, role, gpu = cand.class_name, cand.config.role.value, cand.config.gpu
    p = corrections.get((cls, role, gpu, "prefill"))
    d = corrections.get((cls, role, gpu, "decode"))
    return (p.factor if p else 1.0, d.factor if d else 1.0)


def corrected_screening(
    screening: Screening, corrections: Mapping[Key, FamilyCorrection], request: ResolvedRequest
) -> Screening:
    """``screening`` under ``corrections``: every candidate of a corrected family, in the
    model or set aside by cross-GPU pruning, is rebuilt with its derated curves, and
    cross-GPU pruning runs again on the corrected curves (a derated family may no
    longer beat the one it pruned). Within-GPU pruning compares candidates of one
    family only, so it stands."""
    if not corrections:
        return screening
    aside = {id(c) for c in screening.cross_dominated}
    pool: list[Candidate] = []
    for c in screening.candidates + screening.cross_dominated:
        p, d = family_factors(c, corrections)
        if p == 1.0 and d == 1.0:
            pool.append(c)
            continue
        dc = derate_candidate(c, p, d)
        if dc is not None:
            pool.append(dc)
    kept, dominated = prune_by_cost_curves(pool, request)
    within = [c for c in screening.pruned if id(c) not in aside]
    return Screening(
        kept, within + dominated, screening.rejections, screening.considered, dominated
    )


def learn(
    corrections: dict[Key, FamilyCorrection], ver: Verification, plan: Any, round_no: int
) -> list[Key]:
    """Tighten the families whose pools served a class that missed, on the side(s)
    that missed (the prefill queue when TTFT misses, the decode slots when TPOT
    does); returns the keys changed.

    New factor = old x min(step, 0.995 x u), with step = max(0.6, min(0.93,
    attainment / target)) following the size of the miss, and u the pool's
    utilization of its (already corrected) modelled capacity: the pool as planned
    is then over its corrected capacity, so the next solve must change the fleet
    rather than find the same one under a lower cap. Factors only ever shrink.

    A latency floor: when a family derated in an earlier round of this plan misses
    again with its percentile latency within :data:`FLOOR_IMPROVEMENT` of what it was
    (the pools grew, the latency did not fall: the service time, not the queue, is
    over the SLO), its factor becomes 0 and the family is excluded, instead of buying
    replicas that cannot help."""
    pools = plan.to_json_dict().get("pools", []) if plan is not None else []
    changed: list[Key] = []
    for c in ver.classes:
        if c.status == "meets":
            continue
        step = max(0.6, min(0.93, c.attainment / (c.percentile / 100.0)))
        ttft_bad = c.ttft_ms is None or c.ttft_ms > c.slo_ttft_ms
        tpot_bad = c.tpot_ms is not None and c.tpot_ms > c.slo_tpot_ms
        sides = [
            s for s, bad in (("prefill", ttft_bad or not tpot_bad), ("decode", tpot_bad)) if bad
        ]
        for side in sides:
            metric_ms = c.ttft_ms if side == "prefill" else c.tpot_ms
            mult: dict[Key, tuple[float, str]] = {}
            for p in pools:
                if p.get("class") != c.name or p["role"] not in _SIDE_ROLES[side]:
                    continue
                key = (c.name, p["role"], p["gpu"], side)
                m = min(step, 0.995 * max(p["utilization"], 0.05))
                if key not in mult or m < mult[key][0]:
                    mult[key] = (
                        m,
                        f"{p['id']} ({p['replicas']} replicas at {p['utilization']:.0%} "
                        "of its modelled capacity)",
                    )
            for key, (m, pool_text) in mult.items():
                old = corrections.get(key)
                f = (old.factor if old else 1.0) * m
                floor = latency_floor(old, metric_ms)
                if floor:
                    f = 0.0
                metric = (
                    f"p{c.percentile:g} TTFT "
                    + (f"{c.ttft_ms:,.0f} ms" if c.ttft_ms is not None else "unbounded")
                    + f" vs {c.slo_ttft_ms:,.0f} ms"
                    if side == "prefill"
                    else f"p{c.percentile:g} TPOT {c.tpot_ms:,.1f} ms vs {c.slo_tpot_ms:,.0f} ms"
                )
                reason = (
                    f"round {round_no}: {c.name} met both SLOs for {c.attainment:.1%} of "
                    f"requests (target {c.percentile / 100:.0%}), {metric}, on {pool_text}"
                )
                if floor:
                    reason = f"{reason}: {floor}"
                if old is not None:
                    reason = f"{reason}; before: {old.reason}"
                corrections[key] = FamilyCorrection(
                    class_name=key[0],
                    role=key[1],
                    mode=_MODE_OF_ROLE[key[1]],
                    gpu=key[2],
                    side=side,
                    factor=round(f, 6),
                    reason=reason,
                    learned="this plan",
                    metric_ms=metric_ms,
                )
                changed.append(key)
    return changed


def latency_floor(old: FamilyCorrection | None, metric_ms: float | None) -> str | None:
    """Why a family's miss is a latency floor (None when it is not): it was derated
    earlier while verifying this plan, and the class's percentile latency ``metric_ms``
    (ms) is still at least ``(1 - FLOOR_IMPROVEMENT)`` of what it was then."""
    if old is None or old.learned != "this plan" or old.metric_ms is None or metric_ms is None:
        return None
    if metric_ms < old.metric_ms * (1.0 - FLOOR_IMPROVEMENT):
        return None
    return (
        f"{metric_ms:,.1f} ms again after the derate ({old.metric_ms:,.1f} ms before) although "
        "its pools grew: a latency floor more replicas do not lower; the family is excluded"
    )


def as_corrections(items: Any) -> dict[Key, FamilyCorrection]:
    """Corrections to inherit (FamilyCorrection objects or their JSON), keyed, marked
    ``inherited``; for one key the smallest factor wins (the max of the derates)."""
    out: dict[Key, FamilyCorrection] = {}
    for it in items or ():
        fc = it if isinstance(it, FamilyCorrection) else FamilyCorrection.model_validate(it)
        fc = fc.model_copy(update={"learned": "inherited"})
        if fc.key not in out or fc.factor < out[fc.key].factor:
            out[fc.key] = fc
    return out


def correction_list(corrections: Mapping[Key, FamilyCorrection]) -> list[FamilyCorrection]:
    return [corrections[k] for k in sorted(corrections)]


Replan = Callable[[Screening], Any]  # screening -> (Plan, problem, result, screening)


def correct(
    plan: Any,
    first: Verification,
    request: ResolvedRequest,
    screening: Screening,
    catalog: Catalog,
    spec: VerifySpec,
    replan: Replan,
    inherited: Mapping[Key, FamilyCorrection] | None = None,
    simulate: Callable[[Any], Verification] | None = None,
) -> tuple[Any, Verification, Any, dict[Key, FamilyCorrection]]:
    """Learn corrections from the simulation and re-solve the whole model with them
    until the plan verifies (at most MAX_CORRECTIONS solves, each simulated).

    ``screening`` is the uncorrected one; ``inherited`` the corrections ``plan``
    was solved with. Every round re-solves from the uncorrected screening under
    all corrections so far, so each plan is the optimum of the model with the
    corrections of its round. The plan returned is the best of the original and
    every re-solve (:func:`best_tried`): one that verifies, else the one attaining
    most of its SLOs, the cheaper on a tie (a correction that costs more and
    attains no more is reported, not kept). Returns (that plan, its verification
    with the ``correction`` section, replan's output or None when the original
    plan stands, the corrections that plan was solved with). ``simulate`` (a Plan
    -> its Verification) defaults to :func:`verify_plan`."""

    def check(p: Any) -> Verification:
        if simulate is not None:
            return simulate(p)
        return verify_plan(p.to_json_dict(), request, catalog, spec)

    corr: dict[Key, FamilyCorrection] = dict(inherited or {})
    tried = [Tried(0, plan, first, None, dict(corr))]
    ver, current = first, plan
    why = "no pool to derate"
    rounds = 0
    while rounds < MAX_CORRECTIONS:
        rounds += 1
        if not learn(corr, ver, current, rounds):
            break
        floored = [f"{c.class_name} {c.role} on {c.gpu}" for c in corr.values() if c.factor == 0.0]
        after = f" once {', '.join(floored)} was excluded at its latency floor" if floored else ""
        try:
            out = replan(corrected_screening(screening, corr, request))
        except PlanningError as err:
            why = err.message + after
            break
        if not out[0].status.has_solution:
            why = "; ".join(out[0].infeasible_reasons) or f"status {out[0].status.value}"
            if out[0].solver.message:
                why = out[0].solver.message
            why += after
            break
        ver = check(out[0])
        current = out[0]
        tried.append(Tried(rounds, out[0], ver, out, dict(corr)))
        if _clear(ver):
            break
    else:
        why = f"at most {MAX_CORRECTIONS} re-solves"
    kept = best_tried(tried)
    kept.ver.correction = correction_record(tried, kept, corr, rounds, why)
    if kept.round and not kept.ver.passed:
        kept.ver.summary += (
            f"; the corrected plan is kept (${kept.cost_usd_per_hour:,.2f}/h, was "
            f"${plan.cost_usd_per_hour or 0:,.2f}/h): {kept_because(kept, tried[0])}, "
            f"{attainments(kept.ver, first)}"
        )
    elif not kept.round and len(tried) > 1:
        best = best_tried(tried[1:])
        kept.ver.summary += (
            f"; correction tried at ${best.cost_usd_per_hour:,.2f}/h attained no more, "
            f"{attainments(best.ver, first)}: the original "
            f"${plan.cost_usd_per_hour or 0:,.2f}/h plan is kept"
        )
    return kept.plan, kept.ver, kept.out, kept.corrections


def _clear(ver: Verification) -> bool:
    """Every class meets its target (what a correction aims for)."""
    return bool(ver.passed)


def verify_and_correct(
    plan,
    problem,
    result,
    request: ResolvedRequest,
    screening,
    catalog,
    opts,
    deadline=None,
    inherited: Mapping[Key, FamilyCorrection] | None = None,
    cache: dict | None = None,
):
    """make_plan's verification step: simulate ``plan`` (solved from ``screening``
    under the ``inherited`` corrections); on a miss (and ``verify.correct``), learn
    corrections and re-solve (:func:`correct`). Returns (plan, problem, result,
    screening, simulated seconds) of the plan :func:`correct` keeps: a corrected
    one's, else the inputs (``screening`` corrected by ``inherited``), so the
    alternatives are solved on the model the returned plan was solved on. That plan
    carries its ``verification`` section with the corrections it was solved with.
    Correction solves share the request's solver time (``deadline``, perf_counter
    seconds, moved later by the time spent simulating): once it is used up the
    best plan solved so far stands."""
    import time
    from dataclasses import replace

    from planner.plan import plan_from_result
    from planner.problem_build import build_problem
    from solver.problem import SolveResult, SolveStatus
    from solver.solve import solve

    spec = request.request.verify
    inherited = dict(inherited or {})
    simulated_s = 0.0  # simulation wall time: it does not count against the solver deadline

    def simulate(p: Any) -> Verification:
        nonlocal simulated_s
        t = time.perf_counter()
        out = verify_plan(p.to_json_dict(), request, catalog, spec)
        simulated_s += time.perf_counter() - t
        return out

    ver = simulate(plan)
    final_screening = corrected_screening(screening, inherited, request)
    corrections = inherited
    if ver.passed is False and spec.correct:

        def replan(scr: Screening):
            prob = build_problem(request, scr)
            left = (
                opts.time_limit_s
                if deadline is None
                else deadline + simulated_s - time.perf_counter()
            )
            if left < 0.05:
                res = SolveResult(
                    status=SolveStatus.ERROR,
                    objective=None,
                    gap=None,
                    runtime_s=0.0,
                    solver=opts.solver,
                    message="the request's solver time limit was used up before the correction",
                )
            else:
                res = solve(prob, replace(opts, time_limit_s=min(opts.time_limit_s, left)), cache)
            new = plan_from_result(request, scr, res, catalog, opts.time_limit_s, opts.rel_gap)
            return new, prob, res, scr

        plan, ver, out, corrections = correct(
            plan, ver, request, screening, catalog, spec, replan, inherited, simulate
        )
        if out is not None:
            _, problem, result, final_screening = out
    ver.corrections = correction_list(corrections)
    plan.verification = ver
    return plan, problem, result, final_screening, simulated_s


def verify_robust(plan, request, raw: Mapping[str, Any], catalog: Catalog) -> None:
    """A robust plan (one fleet, several traffic scenarios): simulate each scenario's
    assignment of the fleet with that scenario's request and judge every class.
    Sets ``plan.verification``; robust plans are reported, not corrected."""
    from planner.problem_build import parse_request
    from planner.scenarios import scenario_requests

    spec = request.verify
    scenarios = plan.to_json_dict().get("scenarios") or []
    if not plan.status.has_solution or not scenarios:
        plan.verification = verify_plan({"status": plan.status.value}, request, catalog, spec)
        return
    docs = {name: doc for name, _, doc in scenario_requests(request, raw)}
    classes: list[ClassVerification] = []
    simulated, wall = 0, 0.0
    for sc in scenarios:
        sub = resolve_request(parse_request(docs[sc["name"]]), catalog)
        ver = verify_plan(sc["plan"], sub, catalog, spec)
        simulated += ver.requests
        wall += ver.wall_time_s
        for c in ver.classes:
            classes.append(c.model_copy(update={"scenario": sc["name"]}))
    passed = bool(classes) and all(c.meets_slo for c in classes)
    head = f"simulated {len(scenarios)} scenarios, {simulated:,} requests (seed {spec.seed})"
    plan.verification = Verification(
        requests=simulated,
        seed=spec.seed,
        burst_cv=spec.burst_cv,
        wall_time_s=round(wall, 4),
        passed=passed if classes else None,
        summary=f"{head}: " + _summary(classes, " (robust plans are reported, not corrected)"),
        classes=classes,
    )
