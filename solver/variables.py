"""The MILP's decision variables, created only on screened candidates."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import pulp

from solver.problem import Mode, Objective, PoolRole, Problem


@lru_cache(maxsize=65536)
def stock_row(gpu: str) -> str:
    """The name of the stock row (and its slack) of GPU type ``gpu``."""
    return f"stock__{safe_name(gpu)}"


def safe_name(text: str) -> str:
    """A row/column name PuLP keeps as is (it rewrites '-', spaces, brackets);
    remembered (a candidate's id is asked for by every subproblem holding it)."""
    out = []
    for ch in text:
        out.append(ch if ch.isalnum() or ch == "_" else "_")
    return "".join(out)


@dataclass
class Variables:
    """Handles to the model's variables, keyed by candidate, class, GPU type."""

    replicas: dict[str, pulp.LpVariable] = field(default_factory=dict)  # n_j, integer
    rate: dict[str, pulp.LpVariable] = field(default_factory=dict)  # r_j, requests/s
    used: dict[str, pulp.LpVariable] = field(default_factory=dict)  # y_j, binary
    disagg: dict[str, pulp.LpVariable | float] = field(default_factory=dict)  # m_k
    disagg_rate: dict[str, pulp.LpVariable | float] = field(default_factory=dict)  # D_k, rps
    served: dict[str, pulp.LpVariable | float] = field(default_factory=dict)  # s_k, rps
    config_used: dict[str, pulp.LpVariable] = field(default_factory=dict)  # z_key
    gpu_type_used: dict[str, pulp.LpVariable] = field(default_factory=dict)  # u_g
    slack: dict[str, pulp.LpVariable] = field(default_factory=dict)  # elastic limits
    segment_pick: dict[str, list[pulp.LpVariable]] = field(default_factory=dict)  # w_{j,s}


def modes_available(problem: Problem, class_id: str) -> set[Mode]:
    """Modes a class can use: allowed by the request and with candidates for every role."""
    roles = {c.role for c in problem.candidates_of(class_id)}
    cls = next(c for c in problem.classes if c.id == class_id)
    out: set[Mode] = set()
    if Mode.AGGREGATED in cls.modes and PoolRole.AGGREGATED in roles:
        out.add(Mode.AGGREGATED)
    if Mode.DISAGGREGATED in cls.modes and {PoolRole.PREFILL, PoolRole.DECODE} <= roles:
        out.add(Mode.DISAGGREGATED)
    return out


def create_variables(prob: pulp.LpProblem, problem: Problem) -> Variables:
    """n_j in {0..max_replicas_j}, r_j in [0, rate_k], y_j binary; per class the
    mode m_k (binary, or a constant when one mode is possible), the
    disaggregated rate D_k and the served rate s_k (= rate_k under min_cost)."""
    v = Variables()
    rate_of = {c.id: c.rate_rps for c in problem.classes}
    for cand in problem.candidates:
        key = safe_name(cand.id)
        v.replicas[cand.id] = prob.add_variable(
            f"n__{key}", lowBound=0, upBound=cand.max_replicas, cat="Integer"
        )
        v.rate[cand.id] = prob.add_variable(f"r__{key}", lowBound=0, upBound=rate_of[cand.class_id])
        v.used[cand.id] = prob.add_variable(f"y__{key}", cat="Binary")
    for cls in problem.classes:
        key = safe_name(cls.id)
        modes = modes_available(problem, cls.id)
        if problem.objective == Objective.MAX_GOODPUT:
            v.served[cls.id] = prob.add_variable(f"s__{key}", lowBound=0, upBound=cls.rate_rps)
        else:
            v.served[cls.id] = cls.rate_rps
        if modes == {Mode.AGGREGATED, Mode.DISAGGREGATED}:
            v.disagg[cls.id] = prob.add_variable(f"m__{key}", cat="Binary")
            v.disagg_rate[cls.id] = prob.add_variable(f"D__{key}", lowBound=0, upBound=cls.rate_rps)
        elif modes == {Mode.DISAGGREGATED}:
            v.disagg[cls.id] = 1.0
            v.disagg_rate[cls.id] = v.served[cls.id]
        else:  # aggregated only, or nothing (then demand rows make it infeasible)
            v.disagg[cls.id] = 0.0
            v.disagg_rate[cls.id] = 0.0
    return v
