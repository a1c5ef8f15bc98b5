"""Operational simplicity: distinct engine configurations and GPU types.

    y_j <= z_c            for each pool j with configuration c   config_use__j
    sum_c z_c <= K (+ slack)                                     max_configurations
    y_j <= u_g            for each pool j on GPU type g          gpu_type_use__j
    sum_g u_g <= G (+ slack)                                     max_gpu_types

z_c is 1 when any pool runs configuration c (role, GPU, TP, dtype, budgets);
pools of several classes with the same configuration count once. u_g is 1
when any pool runs on GPU type g. Both exist when their limit is set or
when operations costs price them (the objective adds
usd_per_hour_per_configuration x sum_c z_c + usd_per_hour_per_gpu_type x
sum_g u_g, :func:`operations_cost`). The slacks exist only in the elastic
re-solve that explains an infeasible request.
"""

from __future__ import annotations

import pulp

from solver.problem import Problem
from solver.variables import Variables, safe_name


def _slack(prob: pulp.LpProblem, v: Variables, name: str, elastic: bool):
    if not elastic:
        return 0
    var = prob.add_variable(f"slack__{name}", lowBound=0)
    v.slack[name] = var
    return var


def define_configurations(
    prob: pulp.LpProblem, problem: Problem, v: Variables, tag: str = "", elastic: bool = False
) -> None:
    """``tag`` suffixes the limit row (``max_configurations__<tag>``) when several
    problems share one model (the robust, multi-scenario fleet)."""
    k_max = problem.limits.max_configurations
    if k_max is None and problem.operations.usd_per_hour_per_configuration <= 0:
        return
    for cand in problem.candidates:
        key = cand.config_key or cand.id
        if key not in v.config_used:
            v.config_used[key] = prob.add_variable(f"z__{safe_name(key)}", cat="Binary")
        prob += v.used[cand.id] <= v.config_used[key], f"config_use__{safe_name(cand.id)}"
    if k_max is None:
        return
    name = f"max_configurations__{safe_name(tag)}" if tag else "max_configurations"
    slack = _slack(prob, v, "max_configurations", elastic)
    prob += pulp.lpSum(v.config_used.values()) <= k_max + slack, name


def define_gpu_types(
    prob: pulp.LpProblem, problem: Problem, v: Variables, elastic: bool = False
) -> None:
    g_max = problem.limits.max_gpu_types
    if g_max is None and problem.operations.usd_per_hour_per_gpu_type <= 0:
        return
    for cand in problem.candidates:
        if cand.gpu not in v.gpu_type_used:
            v.gpu_type_used[cand.gpu] = prob.add_variable(f"u__{safe_name(cand.gpu)}", cat="Binary")
        prob += (
            v.used[cand.id] <= v.gpu_type_used[cand.gpu],
            f"gpu_type_use__{safe_name(cand.id)}",
        )
    if g_max is None:
        return
    slack = _slack(prob, v, "max_gpu_types", elastic)
    prob += pulp.lpSum(v.gpu_type_used.values()) <= g_max + slack, "max_gpu_types"


def operations_cost(problem: Problem, v: Variables) -> pulp.LpAffineExpression:
    """usd_per_hour_per_gpu_type x sum_g u_g + usd_per_hour_per_configuration x
    sum_c z_c ($/hour); 0 when no operations cost is set."""
    ops = problem.operations
    terms = []
    if ops.usd_per_hour_per_gpu_type > 0:
        terms += [ops.usd_per_hour_per_gpu_type * u for u in v.gpu_type_used.values()]
    if ops.usd_per_hour_per_configuration > 0:
        terms += [ops.usd_per_hour_per_configuration * z for z in v.config_used.values()]
    return pulp.lpSum(terms)
