"""Running one MILP through PuLP: HiGHS (CBC as fallback), read honestly.

With HiGHS a time-limited run that has an incumbent still maps to PuLP's
``LpStatusOptimal``; we read HiGHS's own model status and MIP gap instead and
report ``optimal``, ``feasible`` (with the gap), ``infeasible`` or ``error``
(:func:`run_solver`); :func:`extract_result` reads the fleet off the variables.
"""

from __future__ import annotations

import math
import os
import sys
import time
import warnings
from dataclasses import replace

import pulp

from solver.problem import (
    MIN_SOLVE_TIME_S,
    Mode,
    Objective,
    PoolRole,
    Problem,
    SolveResult,
    SolverOptions,
    SolveStatus,
)
from solver.variables import Variables

TOL = 1e-6


_BANNER_SILENCED = False


def _silence_highs_banner() -> None:
    """HiGHS prints a copyright banner to stdout (from C++) the first time a solver
    object is created in a process, which would corrupt ``--json`` output: create
    that first object with file descriptor 1 pointed at /dev/null."""
    global _BANNER_SILENCED
    if _BANNER_SILENCED:
        return
    _BANNER_SILENCED = True
    try:
        import highspy
    except ImportError:
        return
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _solver_cmd(
    options: SolverOptions, time_limit_s: float, presolve: bool = True
) -> tuple[pulp.LpSolver, str]:
    if options.solver == "highs" and pulp.HiGHS().available():
        _silence_highs_banner()
        extra = {} if presolve else {"presolve": "off"}
        return (
            pulp.HiGHS(
                msg=False,
                timeLimit=max(MIN_SOLVE_TIME_S, time_limit_s),
                gapRel=options.rel_gap,
                threads=options.threads,
                **extra,
            ),
            "highs",
        )
    with warnings.catch_warnings():
        # PuLP 3.3 deprecates its bundled CBC in favour of COIN_CMD (4.0); it still works.
        warnings.simplefilter("ignore", DeprecationWarning)
        cbc = pulp.PULP_CBC_CMD(
            msg=False, timeLimit=max(1, math.ceil(time_limit_s)), gapRel=options.rel_gap
        )
    return cbc, "cbc"


def run_solver(
    prob: pulp.LpProblem, options: SolverOptions, time_limit_s: float, *, presolve: bool = True
):
    """Solve; return (status, gap, solver name, message). A HiGHS "Solve error" is
    solved again by CBC (its name is returned). ``presolve=False`` turns
    HiGHS's presolve off: on a one-class fleet MILP (the decompositions' subproblems)
    its probing of the segment binaries took ~1.4 s of a 1.5 s solve (50 GPU types,
    72 candidates, 1,064 binaries: 0.3 s without; same optimum, proven)."""
    cmd, name = _solver_cmd(options, time_limit_s, presolve)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            prob.solve(cmd)
    except pulp.PulpSolverError as err:
        return SolveStatus.ERROR, None, name, str(err)
    if name == "highs":
        import highspy

        model = prob.solverModel
        status = model.getModelStatus()
        info = model.getInfo()
        has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
        ms = highspy.HighsModelStatus
        if status == ms.kOptimal:
            gap = info.mip_gap if math.isfinite(info.mip_gap) else 0.0
            return SolveStatus.OPTIMAL, max(0.0, gap), name, ""
        if status in (ms.kInfeasible, ms.kUnboundedOrInfeasible):
            return SolveStatus.INFEASIBLE, None, name, "infeasible"
        if status == ms.kSolveError:
            # HiGHS rejects its own MIP optimum when postsolve leaves a primal
            # infeasibility at its tolerance (seen: 1e-6 on the elastic re-solve of a
            # budget-bound request, "Solve error"): the model is solved again by CBC in
            # the time left.
            left = time_limit_s - (time.perf_counter() - t0)
            if left < MIN_SOLVE_TIME_S:
                return SolveStatus.ERROR, None, name, "HiGHS solve error, no time left for CBC"
            st, gap, cbc, msg = run_solver(prob, replace(options, solver="cbc"), left)
            return st, gap, cbc, f"HiGHS solve error; solved by CBC{': ' + msg if msg else ''}"
        if has_solution:
            gap = info.mip_gap if math.isfinite(info.mip_gap) else None
            return SolveStatus.FEASIBLE, gap, name, model.modelStatusToString(status)
        if status == ms.kTimeLimit:
            return SolveStatus.ERROR, None, name, "time limit reached before any fleet was found"
        return SolveStatus.ERROR, None, name, model.modelStatusToString(status)
    # CBC: PuLP's statuses are honest enough (1 optimal, -1 infeasible); a time-limited
    # run with an incumbent reports sol_status 2.
    if prob.status == pulp.LpStatusOptimal:
        if prob.sol_status == pulp.LpSolutionIntegerFeasible:
            return SolveStatus.FEASIBLE, None, name, "time limit"
        return SolveStatus.OPTIMAL, 0.0, name, ""
    if prob.status == pulp.LpStatusInfeasible:
        return SolveStatus.INFEASIBLE, None, name, "infeasible"
    return SolveStatus.ERROR, None, name, pulp.LpStatus[prob.status]


def var_value(x) -> float:
    if isinstance(x, int | float):
        return float(x)
    val = x.value()
    return float(val) if val is not None else 0.0


def binding_rows(prob: pulp.LpProblem) -> tuple[str, ...]:
    """Limit rows (budget, stock, power, max_configurations) with no slack left."""
    out = []
    for con in prob.constraints():
        name = con.name
        if name.startswith(("budget", "power", "stock__", "max_configurations", "max_gpu_types")):
            slack = -(con.value() or 0.0)
            if slack <= TOL * max(1.0, abs(con.constant)):
                out.append(name)
    return tuple(sorted(out))


def _with_budget_spent(
    rows: tuple[str, ...], problem: Problem, replicas: dict[str, int], served: dict[str, float]
) -> tuple[str, ...]:
    """The binding limit ``rows``, with ``"budget"`` added where a most-goodput fleet
    leaves a class unserved while its budget row keeps some slack, yet what is left buys
    no more of it: less than the cheapest replica that serves that class on its own (an
    aggregated one) or with its other role (a prefill plus a decode one), among candidates
    below their replica cap (:func:`cheapest_more_usd_per_hour`)."""
    budget = problem.limits.budget_usd_per_hour
    if problem.objective != Objective.MAX_GOODPUT or budget is None or "budget" in rows:
        return rows
    left = budget - problem.gpu_cost_usd_per_hour(replicas)
    for cls in problem.classes:
        if served.get(cls.id, 0.0) >= cls.rate_rps * (1 - 1e-6) - TOL:
            continue
        more = cheapest_more_usd_per_hour(problem, cls.id, replicas)
        if more is not None and left < more:
            return tuple(sorted((*rows, "budget")))
    return rows


def cheapest_more_usd_per_hour(
    problem: Problem, class_id: str, replicas: dict[str, int]
) -> float | None:
    """The least that serves more of class ``class_id`` ($/hour): one more aggregated
    replica, or one more prefill and one more decode replica, of candidates below their
    ``max_replicas`` and the request's replicas per pool; None when none can grow."""
    by_role: dict[PoolRole, list[float]] = {}
    pool_cap = problem.limits.max_replicas_per_pool
    for c in problem.candidates:
        cap = c.max_replicas if pool_cap is None else min(c.max_replicas, pool_cap)
        if c.class_id == class_id and replicas.get(c.id, 0) < cap:
            by_role.setdefault(c.role, []).append(c.cost_usd_per_hour_per_replica)
    options = [min(by_role[PoolRole.AGGREGATED])] if PoolRole.AGGREGATED in by_role else []
    if PoolRole.PREFILL in by_role and PoolRole.DECODE in by_role:
        options.append(min(by_role[PoolRole.PREFILL]) + min(by_role[PoolRole.DECODE]))
    return min(options) if options else None


def extract_result(
    problem: Problem, v: Variables, status, gap, runtime_s, name, prob, message
) -> SolveResult:
    replicas = {cid: round(var_value(var)) for cid, var in v.replicas.items()}
    rates = {cid: max(0.0, var_value(var)) for cid, var in v.rate.items()}
    modes = {
        k: (Mode.DISAGGREGATED if var_value(m) > 0.5 else Mode.AGGREGATED)
        for k, m in v.disagg.items()
    }
    served = {k: var_value(s) for k, s in v.served.items()}
    cost = problem.gpu_cost_usd_per_hour(replicas) + problem.operations_cost_usd_per_hour(replicas)
    objective = cost if problem.objective == Objective.MIN_COST else sum(served.values())
    return SolveResult(
        status=status,
        objective=objective,
        gap=gap,
        runtime_s=runtime_s,
        solver=name,
        replicas={k: n for k, n in replicas.items() if n > 0},
        rates_rps={k: r for k, r in rates.items() if r > TOL},
        modes=modes,
        served_rps=served,
        binding=_with_budget_spent(binding_rows(prob), problem, replicas, served),
        message=message,
        num_variables=prob.numVariables(),
        num_constraints=prob.numConstraints(),
    )
