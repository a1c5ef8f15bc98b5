"""A reference solver by enumeration, for tests and benchmarks on tiny instances.

``brute_force_cost`` tries every replica vector n in {0..max_replicas}^J and
keeps the cheapest that meets every class (its whole rate on aggregated pools,
or on both prefill and decode pools, each within ``capacity_rps(n)``) and the
budget, stock and redundancy limits. Exponential: a handful of candidates only.
Power and configuration limits and checkpoint pairing are not modelled.
"""

from __future__ import annotations

import itertools

from solver.problem import Mode, PoolRole, Problem

_TOL = 1e-9


def brute_force_cost(p: Problem, max_replicas: int) -> float | None:
    """Cheapest fleet cost ($/hour) by enumeration, or None when none is feasible."""
    cands = list(p.candidates)
    lim = p.limits
    best = None
    for ns in itertools.product(range(max_replicas + 1), repeat=len(cands)):
        if any(0 < n < lim.min_replicas_per_pool for n in ns):
            continue
        cost = sum(c.cost_usd_per_hour_per_replica * n for c, n in zip(cands, ns, strict=True))
        if best is not None and cost >= best:
            continue
        if lim.budget_usd_per_hour is not None and cost > lim.budget_usd_per_hour + _TOL:
            continue
        gpus: dict[str, int] = {}
        for c, n in zip(cands, ns, strict=True):
            gpus[c.gpu] = gpus.get(c.gpu, 0) + n * c.gpus_per_replica
        if any(gpus.get(g, 0) > m for g, m in lim.max_gpus.items()):
            continue
        if all(_served(p, cls, cands, ns) for cls in p.classes):
            best = cost
    return best


def _served(p: Problem, cls, cands, ns) -> bool:
    def cap(role: PoolRole) -> float:
        return sum(
            c.capacity_rps(n)
            for c, n in zip(cands, ns, strict=True)
            if c.class_id == cls.id and c.role == role
        )

    need = cls.rate_rps - _TOL
    agg = Mode.AGGREGATED in cls.modes and cap(PoolRole.AGGREGATED) >= need
    dis = (
        Mode.DISAGGREGATED in cls.modes and min(cap(PoolRole.PREFILL), cap(PoolRole.DECODE)) >= need
    )
    return agg or dis
