"""Buying for a mix that will move: one fleet for several traffic scenarios.

A request with ``scenarios`` is planned as follows: each scenario's request
(the base with its ``mix``, ``rate_scale`` and ``override`` applied) is
validated, screened and turned into a solver problem; ``solver.robust``
buys one set of GPUs per type that serves every scenario at its SLOs,
re-assigning GPUs between roles and pools per scenario. Each scenario is
also planned alone, so the plan says what robustness costs: the robust
fleet's cost over the cheapest fleet for each scenario by itself.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict

from catalog.schema import Catalog
from planner import risk
from planner.candidates import screen_candidates
from planner.plan import HOURS_PER_MONTH, Plan, SolverInfo, plan_from_result
from planner.request import PlanRequest, resolve_request
from planner.variants import apply_mix, deep_merge, scale_rate
from solver.problem import MIN_SOLVE_TIME_S, Limits, Operations, SolveResult, SolverOptions
from solver.robust import Scenario, solve_robust
from solver.solve import solve


class ScenarioPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    weight: float
    cost_alone_usd_per_hour: float | None
    status_alone: str
    premium_usd_per_hour: float | None  # robust fleet cost - this scenario's own optimum
    gpus_used: dict[str, int]
    gpus_idle: dict[str, int]
    plan: Plan  # this scenario's assignment of the robust fleet


def scenario_requests(req: PlanRequest, raw: Mapping[str, Any]) -> list[tuple[str, float, dict]]:
    """(name, weight, request document) for every scenario of ``req``."""
    base = {k: v for k, v in dict(raw).items() if k != "scenarios"}
    out = []
    names = set()
    for i, sc in enumerate(req.scenarios or []):
        if sc.name in names:
            from planner.errors import PlanningError

            raise PlanningError.for_field(f"scenarios.{i}.name", f"duplicate name {sc.name!r}")
        names.add(sc.name)
        doc = deep_merge(base, sc.override or {})
        # the override may have replaced traffic by anything: mix and rate_scale check
        # its shape (naming scenarios.<i>.override...), make_robust_plan validates it all
        if sc.mix is not None:
            doc = apply_mix(doc, sc.mix, f"scenarios.{i}.mix", f"scenarios.{i}.override")
        if sc.rate_scale is not None:
            doc = scale_rate(doc, sc.rate_scale, f"scenarios.{i}.override")
        out.append((sc.name, sc.weight, doc))
    return out


def make_robust_plan(
    req: PlanRequest,
    raw: Mapping[str, Any],
    catalog: Catalog,
    opts: SolverOptions,
    *,
    screening_deadline: float | None = None,
) -> Plan:
    """Plan one fleet for all of ``req.scenarios``; see the module docstring. Every
    scenario's screening ends by ``screening_deadline`` (perf_counter seconds); the
    robust MILP gets ``opts.time_limit_s`` and the scenarios solved alone share another
    ``opts.time_limit_s`` (past it, each gets the shortest solve, MIN_SOLVE_TIME_S, and
    reports the status it reached)."""
    from planner.problem_build import build_problem, parse_request

    t0 = time.perf_counter()
    prepared = []
    for i, (name, weight, doc) in enumerate(scenario_requests(req, raw)):
        try:
            sub_req = parse_request(doc)
        except Exception as err:  # re-raise with the scenario in the field path
            from planner.errors import PlanningError

            if isinstance(err, PlanningError):
                issues = [(f"scenarios.{i}.{f}", m) for f, m in err.issues]
                raise PlanningError(f"scenario {name!r}: {err.message}", issues) from None
            raise
        resolved = resolve_request(sub_req, catalog)
        screening = screen_candidates(
            resolved, catalog, cross_gpu_prune=False, deadline=screening_deadline
        )
        # The robust MILP buys GPUs per type for every scenario; it does not price
        # operations (per GPU type / configuration) yet, so neither do the
        # scenario-alone costs it is compared with.
        problem = replace(build_problem(resolved, screening), operations=Operations())
        prepared.append((name, weight, resolved, screening, problem))
    lim = req.constraints
    limits = Limits(
        budget_usd_per_hour=lim.budget_usd_per_hour,
        max_gpus=dict(lim.max_gpus),
        power_kw=lim.power_kw,
        min_replicas_per_pool=lim.min_replicas_per_pool,
        max_configurations=lim.max_configurations,
    )
    robust = solve_robust([Scenario(n, p, w) for n, w, _, _, p in prepared], limits, opts)
    scenario_plans: list[ScenarioPlan] = []
    ok = robust.status.has_solution
    alone_deadline = time.perf_counter() + opts.time_limit_s
    for (name, weight, resolved, screening, problem), assign in zip(
        prepared, robust.assignments if ok else [None] * len(prepared), strict=True
    ):
        left = max(MIN_SOLVE_TIME_S, min(opts.time_limit_s, alone_deadline - time.perf_counter()))
        alone = solve(problem, replace(opts, time_limit_s=left))
        alone_ok = alone.status.has_solution
        if assign is not None:
            result = SolveResult(
                status=robust.status,
                objective=None,
                gap=robust.gap,
                runtime_s=robust.runtime_s,
                solver=robust.solver,
                replicas=assign.replicas,
                rates_rps=assign.rates_rps,
                modes=assign.modes,
                served_rps={c.id: c.rate_rps for c in problem.classes},
            )
        else:
            result = alone
        sub = plan_from_result(
            resolved, screening, result, catalog, opts.time_limit_s, opts.rel_gap
        )
        if assign is not None:
            sub.objective_value = sub.cost_usd_per_hour
        idle = {
            g: n - (assign.gpus_by_type.get(g, 0) if assign else 0)
            for g, n in robust.gpus_bought.items()
        }
        scenario_plans.append(
            ScenarioPlan(
                name=name,
                weight=weight,
                cost_alone_usd_per_hour=alone.objective if alone_ok else None,
                status_alone=alone.status.value,
                premium_usd_per_hour=(
                    robust.objective - alone.objective
                    if ok
                    and alone_ok
                    and robust.objective is not None
                    and alone.objective is not None
                    else None
                ),
                gpus_used=dict(assign.gpus_by_type) if assign else {},
                gpus_idle={g: n for g, n in idle.items() if n > 0},
                plan=sub,
            )
        )
    first = scenario_plans[0].plan
    price = {g: catalog.gpus[g].price.usd_per_hour for g in robust.gpus_bought}
    gpu_power = {
        g: (
            catalog.gpus[g].tdp_w
            + catalog.gpus[g].server.server_overhead_w / catalog.gpus[g].server.gpus_per_server
        )
        / 1000.0
        for g in robust.gpus_bought
    }
    cost = robust.objective if ok else None
    reasons = []
    if not ok:
        reasons.append(robust.message)
        for sp in scenario_plans:
            if sp.status_alone == "infeasible":
                reasons += [f"scenario {sp.name}: {r}" for r in sp.plan.infeasible_reasons]
    plan = Plan(
        status=robust.status,
        objective="min_cost (robust over scenarios)",
        objective_value=cost,
        model=req.model,
        catalog_hash=catalog.content_hash,
        cost_usd_per_hour=cost,
        cost_usd_per_month=cost * HOURS_PER_MONTH if cost is not None else None,
        cost_usd_per_million_tokens=first.cost_usd_per_million_tokens if ok else None,
        cost_band_usd_per_hour=(
            risk.robust_cost_band_usd_per_hour(
                [
                    (p.gpu, *p.cost_band_usd_per_hour)
                    for p in sp.plan.pools
                    if p.cost_band_usd_per_hour is not None
                ]
                for sp in scenario_plans
            )
            if ok
            else None
        ),
        unmeasured_gpus=sorted(
            {g for sp in scenario_plans for g in sp.plan.unmeasured_gpus} & set(robust.gpus_bought)
        ),
        risk=first.risk,
        gpus_total=sum(robust.gpus_bought.values()),
        gpus_by_type=dict(sorted(robust.gpus_bought.items())),
        power_kw=sum(gpu_power[g] * n for g, n in robust.gpus_bought.items()),
        pool_ratio_prefill_to_decode=None,
        pools=[],
        classes=[],
        binding=[],
        infeasible_reasons=reasons,
        solver=SolverInfo(
            status=robust.status,
            gap=robust.gap,
            runtime_s=robust.runtime_s,
            solver=robust.solver,
            time_limit_s=opts.time_limit_s,
            rel_gap=opts.rel_gap,
            candidates_considered=sum(s.considered for _, _, _, s, _ in prepared),
            candidates_in_model=sum(len(s.candidates) for _, _, _, s, _ in prepared),
            candidates_rejected={},
            variables=robust.num_variables,
            constraints=robust.num_constraints,
            message=robust.message,
        ),
        scenarios=[sp.model_dump() for sp in scenario_plans],
        assumptions={
            "prices_usd_per_gpu_hour": price,
            "planning_time_s": round(time.perf_counter() - t0, 4),
            "scenario_weights": {sp.name: sp.weight for sp in scenario_plans},
            "weighted_cost_alone_usd_per_hour": (
                sum(sp.weight * (sp.cost_alone_usd_per_hour or 0) for sp in scenario_plans)
                / sum(sp.weight for sp in scenario_plans)
            ),
        },
    )
    return plan
