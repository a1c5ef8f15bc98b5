"""Operational simplicity: at most K distinct engine configurations.

    y_j <= z_c            for each pool j with configuration c   config_use__j
    sum_c z_c <= K                                               max_configurations

z_c is 1 when any pool runs configuration c (role, GPU, TP, dtype, budgets);
pools of several classes with the same configuration count once.
"""

from __future__ import annotations

import pulp

from solver.problem import Problem
from solver.variables import Variables, safe_name


def define_configurations(
    prob: pulp.LpProblem, problem: Problem, v: Variables, tag: str = ""
) -> None:
    """``tag`` suffixes the limit row (``max_configurations__<tag>``) when several
    problems share one model (the robust, multi-scenario fleet)."""
    k_max = problem.limits.max_configurations
    if k_max is None:
        return
    for cand in problem.candidates:
        key = cand.config_key or cand.id
        if key not in v.config_used:
            v.config_used[key] = prob.add_variable(f"z__{safe_name(key)}", cat="Binary")
        prob += v.used[cand.id] <= v.config_used[key], f"config_use__{safe_name(cand.id)}"
    name = f"max_configurations__{safe_name(tag)}" if tag else "max_configurations"
    prob += pulp.lpSum(v.config_used.values()) <= k_max, name
