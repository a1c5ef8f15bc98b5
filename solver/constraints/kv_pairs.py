"""Disaggregated pairs exchange KV caches only over a link both sides have.

A prefill candidate j is priced on one KV link (NVLink within one rack-scale
domain of one GPU type, else the slower of the two GPUs' network links); the
decode GPU types that link reaches are ``pairs_with_j``. A class's prefill
pools may hand a request to any of its decode pools, so a prefill pool priced
on a link may not coexist with a decode pool on a GPU type that link does not
reach. With binary v_{k,g} (class k has a decode pool on GPU type g):

    y_i <= v_{k,g}        decode pools i of class k on g         kv_decode_gpu__i
    y_j + v_{k,g} <= 1    prefill pools j of class k, g not in pairs_with_j
                                                                 kv_pair__j__g
"""

from __future__ import annotations

import pulp

from solver.problem import PoolRole, Problem
from solver.variables import Variables, safe_name


def define_kv_pairs(prob: pulp.LpProblem, problem: Problem, v: Variables) -> None:
    for cls in problem.classes:
        decodes = problem.candidates_of(cls.id, PoolRole.DECODE)
        prefills = [
            c for c in problem.candidates_of(cls.id, PoolRole.PREFILL) if c.pairs_with is not None
        ]
        gpus = sorted({d.gpu for d in decodes})
        needed = sorted({g for p in prefills for g in gpus if g not in (p.pairs_with or ())})
        if not needed:
            continue
        k = safe_name(cls.id)
        has = {g: prob.add_variable(f"v__{k}__{safe_name(g)}", cat="Binary") for g in needed}
        for d in decodes:
            if d.gpu in has:
                prob += v.used[d.id] <= has[d.gpu], f"kv_decode_gpu__{safe_name(d.id)}"
        for p in prefills:
            for g in needed:
                if g not in (p.pairs_with or ()):
                    prob += (
                        v.used[p.id] + has[g] <= 1,
                        f"kv_pair__{safe_name(p.id)}__{safe_name(g)}",
                    )
