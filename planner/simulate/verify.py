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

Correction. The optimizer sizes pools with queueing curves (capacity per
replica count). A class that misses has the curve of the side that missed
(the prefill queue when TTFT misses, the decode slots when TPOT misses)
scaled by a factor f < 1, a utilization cap relative to the queueing model,
for all its candidate pools, and the fleet is solved again; f shrinks with
the size of the miss (f <- f x max(0.6, min(0.93, attainment / target)), and at
least below the busiest such pool's utilization, so the fleet must change)
until every class meets, then bisected back towards 1 while rounds
remain (:data:`MAX_CORRECTIONS` solves in all). The plan returned is the
corrected one; its ``verification.correction`` keeps the original cost and
verdicts, and the factors used. A correction that cannot be solved (a fleet limit binds)
returns the original plan with the miss stated.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from catalog.schema import Catalog
from planner.candidates import Candidate, Screening, attach_capacity
from planner.errors import PlanningError
from planner.request import ResolvedRequest, VerifySpec, resolve_request
from planner.simulate.results import (
    ClassSimulation,
    ClassVerification,
    Correction,
    SimulationResult,
    Verification,
)
from planner.simulate.runner import simulate_plan

#: Verification runs unless a request (or FLEETPLAN_VERIFY_DEFAULT=off) turns it off.
DEFAULT_ENABLED = True
#: Environment switch for the default (the test suite sets it off: plans there are many).
DEFAULT_ENV = "FLEETPLAN_VERIFY_DEFAULT"
MAX_CORRECTIONS = 4
_SOLVED = ("optimal", "feasible")


def enabled(spec: VerifySpec, override: bool | None = None) -> bool:
    """Whether to verify: an explicit argument, else the request's ``verify.enabled``,
    else ``$FLEETPLAN_VERIFY_DEFAULT`` (off/false/0 turn it off), else on."""
    if override is not None:
        return override
    if spec.enabled is not None:
        return spec.enabled
    env = os.environ.get(DEFAULT_ENV, "").strip().lower()
    if env in ("0", "off", "false", "no"):
        return False
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
    if plan.get("status") not in _SOLVED:
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


def derate_candidate(cand: Candidate, prefill: float, decode: float) -> DeratedCandidate | None:
    """A copy of ``cand`` with derated curves and MILP rows rebuilt (None: rejected)."""
    base = {f.name: getattr(cand, f.name) for f in fields(Candidate)}
    if isinstance(cand, DeratedCandidate):
        prefill, decode = prefill * cand.prefill_derate, decode * cand.decode_derate
    base["notes"] = list(cand.notes)
    out = DeratedCandidate(**base, prefill_derate=prefill, decode_derate=decode)
    return None if attach_capacity(out) is not None else out


def derated_screening(screening: Screening, derate: Mapping[str, Mapping[str, float]]) -> Screening:
    """``screening`` with every candidate of a derated class rebuilt (see the module doc)."""
    cands = []
    for c in screening.candidates:
        f = derate.get(c.class_name)
        if f is None:
            cands.append(c)
            continue
        d = derate_candidate(c, f.get("prefill", 1.0), f.get("decode", 1.0))
        if d is not None:
            cands.append(d)
    return Screening(cands, screening.pruned, screening.rejections, screening.considered)


Replan = Callable[[Screening], Any]  # screening -> (Plan, problem, result)


def _clear(ver: Verification) -> bool:
    """Every class meets its target (what a correction aims for)."""
    return bool(ver.passed)


#: Pool roles whose capacity curve a side's factor scales.
_SIDE_ROLES = {"prefill": ("prefill", "aggregated"), "decode": ("decode", "aggregated")}


def _tighten(derate: dict[str, dict[str, float]], ver: Verification, plan: Any) -> None:
    """Shrink the factors of every class that missed, on the side(s) that missed.

    The step follows the size of the miss; it is at least enough to take the
    class's busiest pool on that side over its (derated) capacity, so the next
    solve must change the fleet rather than find the same one under a lower cap."""
    pools = plan.to_json_dict().get("pools", []) if plan is not None else []
    for c in ver.classes:
        if c.status == "meets":
            continue
        step = max(0.6, min(0.93, c.attainment / (c.percentile / 100.0)))
        f = derate.setdefault(c.name, {"prefill": 1.0, "decode": 1.0})
        ttft_bad = c.ttft_ms is None or c.ttft_ms > c.slo_ttft_ms
        tpot_bad = c.tpot_ms is not None and c.tpot_ms > c.slo_tpot_ms
        sides = [
            s for s, bad in (("prefill", ttft_bad or not tpot_bad), ("decode", tpot_bad)) if bad
        ]
        for side in sides:
            util = max(
                (
                    p["utilization"]
                    for p in pools
                    if p.get("class") == c.name and p["role"] in _SIDE_ROLES[side]
                ),
                default=1.0,
            )
            f[side] *= min(step, 0.995 * util)


def _midpoint(good: dict, bad: dict) -> dict[str, dict[str, float]]:
    """Geometric midpoint of a passing and a failing set of factors."""
    return {
        k: {side: math.sqrt(x * bad.get(k, {}).get(side, 1.0)) for side, x in v.items()}
        for k, v in good.items()
    }


def correct(
    plan: Any,
    first: Verification,
    request: ResolvedRequest,
    screening: Screening,
    catalog: Catalog,
    spec: VerifySpec,
    replan: Replan,
) -> tuple[Any, Verification, Any]:
    """Re-solve with the missing classes derated until the simulation passes, then
    bisect back towards the plan that missed while rounds remain (at most
    MAX_CORRECTIONS solves). Returns (plan, its verification, replan's output or
    None when the original plan stands)."""
    derate: dict[str, dict[str, float]] = {}
    failing: dict[str, dict[str, float]] = {}
    ver = first
    last = best = None
    why = "a fleet limit binds"
    rounds = 0

    def attempt(factors):
        nonlocal why
        try:
            out = replan(derated_screening(screening, factors))
        except PlanningError as err:
            why = err.message
            return None
        if out[0].status.value not in _SOLVED:
            why = "; ".join(out[0].infeasible_reasons) or f"status {out[0].status.value}"
            return None
        return out, verify_plan(out[0].to_json_dict(), request, catalog, spec)

    current = plan
    while rounds < MAX_CORRECTIONS:  # tighten until the simulation passes
        rounds += 1
        _tighten(derate, ver, current)
        got = attempt(derate)
        if got is None:
            break
        out, ver = got
        current = out[0]
        last = (out, ver, {k: dict(v) for k, v in derate.items()}, rounds)
        if _clear(ver):
            best = last
            break
        failing = {k: dict(v) for k, v in derate.items()}
    while best is not None and rounds < MAX_CORRECTIONS:  # relax towards the original
        mid = _midpoint(best[2], failing)
        if all(abs(mid[k][s] - best[2][k][s]) < 0.02 for k in mid for s in mid[k]):
            break
        rounds += 1
        got = attempt(mid)
        if got is None:
            break
        out, v = got
        cheaper = (out[0].cost_usd_per_hour or 0.0) <= (best[0][0].cost_usd_per_hour or 0.0)
        if _clear(v) and cheaper:
            best = (out, v, mid, rounds)
        else:
            failing = mid
    chosen = best or last
    if chosen is None:
        first.correction = Correction(
            derate={k: {s: round(x, 4) for s, x in v.items()} for k, v in derate.items()},
            iterations=rounds,
            original_cost_usd_per_hour=plan.cost_usd_per_hour,
            cost_usd_per_hour=None,
            original=first.classes,
            note=f"no corrected fleet could be solved ({why}); the plan stands as solved "
            "and misses as stated",
        )
        return plan, first, None
    out, ver, factors, _ = chosen
    new_plan = out[0]
    state = "meets its targets" if ver.passed else "still misses"
    ver.correction = Correction(
        derate={k: {s: round(x, 4) for s, x in v.items()} for k, v in factors.items()},
        iterations=rounds,
        original_cost_usd_per_hour=plan.cost_usd_per_hour,
        cost_usd_per_hour=new_plan.cost_usd_per_hour,
        original=first.classes,
        note=(
            f"the solved plan missed ({first.summary}); re-solved with the missing classes' "
            f"pool capacity capped at the factors shown, the corrected plan {state} "
            f"at ${new_plan.cost_usd_per_hour or 0:,.2f}/h "
            f"(was ${plan.cost_usd_per_hour or 0:,.2f}/h)"
        ),
    )
    return new_plan, ver, out


def verify_and_correct(
    plan, problem, result, request: ResolvedRequest, screening, catalog, opts, deadline=None
):
    """make_plan's verification step: simulate ``plan``; on a miss (and
    ``verify.correct``), re-solve with derated pools. Returns (plan, problem, result):
    the corrected ones when a correction was solved, else the inputs. The plan
    returned carries its ``verification`` section. Correction solves share the
    request's solver time (``deadline``, perf_counter seconds): once it is used up
    the original plan stands."""
    import time
    from dataclasses import replace

    from planner.plan import plan_from_result
    from planner.problem_build import build_problem
    from solver.problem import SolveResult, SolveStatus
    from solver.solve import solve

    spec = request.request.verify
    ver = verify_plan(plan.to_json_dict(), request, catalog, spec)
    if ver.passed is False and spec.correct:

        def replan(scr: Screening):
            prob = build_problem(request, scr)
            left = opts.time_limit_s if deadline is None else deadline - time.perf_counter()
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
                res = solve(prob, replace(opts, time_limit_s=min(opts.time_limit_s, left)))
            new = plan_from_result(
                request, scr, res, catalog.content_hash, opts.time_limit_s, opts.rel_gap
            )
            return new, prob, res

        plan, ver, out = correct(plan, ver, request, screening, catalog, spec, replan)
        if out is not None:
            _, problem, result = out
    plan.verification = ver
    return plan, problem, result


def verify_robust(plan, request, raw: Mapping[str, Any], catalog: Catalog) -> None:
    """A robust plan (one fleet, several traffic scenarios): simulate each scenario's
    assignment of the fleet with that scenario's request and judge every class.
    Sets ``plan.verification``; robust plans are reported, not corrected."""
    from planner.problem_build import parse_request
    from planner.scenarios import scenario_requests

    spec = request.verify
    scenarios = plan.to_json_dict().get("scenarios") or []
    if plan.status.value not in _SOLVED or not scenarios:
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
