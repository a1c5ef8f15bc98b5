"""Disaggregated pairs share one checkpoint and KV format.

A prefill replica ships its KV cache to a decode replica, so both must run
the same weights format and KV-cache dtype (vLLM's and SGLang's KV
connectors require it). For class k whose prefill and decode candidates span
several formats c, with binary x_{k,c}:

    sum_c x_{k,c} <= 1                      checkpoint_pick__k
    y_j <= x_{k,c(j)}   for prefill/decode pools j of class k     checkpoint_use__j

Aggregated pools are independent replicas and may differ.
"""

from __future__ import annotations

import pulp

from solver.problem import PoolRole, Problem
from solver.variables import Variables, safe_name


def define_checkpoint(prob: pulp.LpProblem, problem: Problem, v: Variables) -> None:
    for cls in problem.classes:
        pairs = [
            c
            for c in problem.candidates_of(cls.id)
            if c.role in (PoolRole.PREFILL, PoolRole.DECODE)
        ]
        formats = sorted({c.checkpoint for c in pairs})
        if len(formats) <= 1:
            continue
        k = safe_name(cls.id)
        pick = {
            f: prob.add_variable(f"x__{k}__{safe_name(f or 'default')}", cat="Binary")
            for f in formats
        }
        prob += pulp.lpSum(pick.values()) <= 1, f"checkpoint_pick__{k}"
        for c in pairs:
            prob += v.used[c.id] - pick[c.checkpoint] <= 0, f"checkpoint_use__{safe_name(c.id)}"
