"""Fleet limits: budget, GPUs in stock per SKU, power.

    sum_j cost_j * n_j            <= budget (+ slack_budget)     budget         ($/hour)
    sum_{j: gpu_j=g} tp_j * n_j   <= max_gpus_g (+ slack_g)      stock__g       (GPUs)
    sum_j power_j * n_j           <= power_kw (+ slack_power)    power          (kW)

The slack columns exist only in the elastic re-solve that explains an
infeasible request (how much each limit must grow).
"""

from __future__ import annotations

import pulp

from solver.problem import Problem
from solver.variables import Variables, stock_row

#: Which limits get a slack column: every one (True), none (False), or those named.
Elastic = bool | frozenset[str]


def _slack(prob: pulp.LpProblem, v: Variables, name: str, elastic: Elastic):
    if not (elastic is True or (isinstance(elastic, frozenset) and name in elastic)):
        return 0
    var = prob.add_variable(f"slack__{name}", lowBound=0)
    v.slack[name] = var
    return var


def fleet_cost(problem: Problem, v: Variables) -> pulp.LpAffineExpression:
    """sum_j cost_j * n_j, US dollars per hour."""
    return pulp.lpSum(
        c.cost_usd_per_hour_per_replica * v.replicas[c.id] for c in problem.candidates
    )


def define_budget(prob: pulp.LpProblem, problem: Problem, v: Variables, elastic: Elastic) -> None:
    budget = problem.limits.budget_usd_per_hour
    if budget is None:
        return
    prob += fleet_cost(problem, v) <= budget + _slack(prob, v, "budget", elastic), "budget"


def define_stock(prob: pulp.LpProblem, problem: Problem, v: Variables, elastic: Elastic) -> None:
    for gpu, max_gpus in sorted(problem.limits.max_gpus.items()):
        cands = [c for c in problem.candidates if c.gpu == gpu]
        if not cands:
            continue
        row = stock_row(gpu)
        used = pulp.lpSum(c.gpus_per_replica * v.replicas[c.id] for c in cands)
        prob += used <= max_gpus + _slack(prob, v, row, elastic), row


def define_power(prob: pulp.LpProblem, problem: Problem, v: Variables, elastic: Elastic) -> None:
    power = problem.limits.power_kw
    if power is None:
        return
    used = pulp.lpSum(c.power_kw_per_replica * v.replicas[c.id] for c in problem.candidates)
    prob += used <= power + _slack(prob, v, "power", elastic), "power"
