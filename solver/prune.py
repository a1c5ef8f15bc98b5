"""Cost-curve dominance on pool candidates, for per-class subproblems.

Within one class and a fixed set of GPU types nothing prices the GPU type
itself, so a candidate B can go when another candidate A of the same role and
checkpoint carries every rate B can carry for no more money: for every replica
count n of B, the fewest replicas m of A with capacity_A(m) >= capacity_B(n)
cost c_A m <= c_B n (the planner's ``prune_by_cost_curves``, on the MILP's own
capacity rows). A swap replaces one pool by one pool, so the number of
configurations does not grow. KV pairing is respected: a prefill candidate is
replaced only by one reaching every decode GPU type it reaches; a decode
candidate only by one on a GPU type every prefill candidate reaching it also
reaches.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from solver.problem import PoolCandidate, PoolRole


def capacity_curve(pc: PoolCandidate) -> np.ndarray:
    """``pc.capacity_rps(n)`` for n = 1..max_replicas (requests/s), vectorized: the
    min over cuts of intercept + slope x n and, with segments, the best segment
    holding n (0 where none does), floored at 0; equal to the scalar function."""
    n = np.arange(1, pc.max_replicas + 1, dtype=float)
    if not len(n):
        return n
    caps = np.full(n.shape, np.inf)
    for c in pc.cuts:
        caps = np.minimum(caps, c.intercept_rps + c.slope_rps_per_replica * n)
    if pc.segments:
        held = np.full(n.shape, -np.inf)
        for seg in pc.segments:
            # n = k + 1 at index k: the segment's replica counts are one slice
            lo, hi = max(seg.start_replicas, 1), min(seg.end_replicas, len(n))
            if lo > hi:
                continue
            part = slice(lo - 1, hi)
            held[part] = np.maximum(
                held[part], seg.intercept_rps + seg.slope_rps_per_replica * n[part]
            )
        caps = np.minimum(caps, np.where(np.isfinite(held), held, 0.0))
    elif not pc.cuts:
        return np.zeros(n.shape)
    return np.maximum(caps, 0.0)


def capacity_table(pc: PoolCandidate) -> np.ndarray:
    """Best capacity_rps(k) over k <= n, for n = 1..max_replicas (requests/s)."""
    caps = capacity_curve(pc)
    return np.maximum.accumulate(caps) if len(caps) else caps


def may_replace(
    a_pairs: frozenset[str] | None,
    b_pairs: frozenset[str] | None,
    b_role: PoolRole,
    a_gpu: str,
    b_gpu: str,
    reach: Iterable[frozenset[str]],
) -> bool:
    """Whether pool candidate A may stand in for B (same class, role and checkpoint)
    without breaking KV pairing: a prefill restricted to some decode GPU types
    (``a_pairs``) only for one restricted to a subset of them; an unrestricted one for
    any; a decode candidate only by one on a GPU type that every prefill reach set in
    ``reach`` containing B's type also contains. The one rule of
    :func:`prune_by_cost` and the planner's ``prune_by_cost_curves``."""
    if a_pairs is not None:
        return b_pairs is not None and a_pairs >= b_pairs
    if b_pairs is not None:
        return True
    if b_role == PoolRole.DECODE and a_gpu != b_gpu:
        return all(a_gpu in r for r in reach if b_gpu in r)
    return True


def prune_by_cost(
    cands: tuple[PoolCandidate, ...],
    rate_rps: float,
    min_replicas: int = 1,
    max_replicas: int | None = None,
    tables: dict[str, np.ndarray] | None = None,
) -> tuple[PoolCandidate, ...]:
    """The candidates of one class not dominated on cost (see the module doc).
    ``tables`` caches capacity tables by candidate id."""
    tables = tables if tables is not None else {}
    for c in cands:
        if c.id not in tables:
            tables[c.id] = capacity_table(c)
    reach = [c.pairs_with for c in cands if c.pairs_with is not None]

    def swappable(a: PoolCandidate, b: PoolCandidate) -> bool:
        return may_replace(a.pairs_with, b.pairs_with, b.role, a.gpu, b.gpu, reach)

    groups: dict[tuple, list[PoolCandidate]] = {}
    for c in cands:
        fmt = c.checkpoint if c.role != PoolRole.AGGREGATED else ""
        groups.setdefault((c.role, fmt), []).append(c)
    keep: list[PoolCandidate] = []
    for group in groups.values():

        def unit_cost(c: PoolCandidate) -> float:
            t = tables[c.id]
            return c.cost_usd_per_hour_per_replica * len(t) / max(t[-1], 1e-12) if len(t) else 1e18

        group.sort(key=lambda c: (unit_cost(c), c.id))
        alive: list[PoolCandidate] = []
        for b in group:
            cap_b = tables[b.id]
            if not len(cap_b):
                continue
            n_b = np.maximum(np.arange(1, len(cap_b) + 1), min_replicas)
            r_b = np.minimum(cap_b, rate_rps)
            beaten = False
            for a in alive:
                if not swappable(a, b):
                    continue
                cap_a = tables[a.id]
                m = np.searchsorted(cap_a, r_b * (1 - 1e-12), side="left") + 1
                if (m > len(cap_a)).any():
                    continue
                m = np.maximum(m, min_replicas)
                if max_replicas is not None and (m > np.maximum(n_b, max_replicas)).any():
                    continue
                if (
                    a.cost_usd_per_hour_per_replica * m
                    > b.cost_usd_per_hour_per_replica * n_b + 1e-9
                ).any():
                    continue
                beaten = True
                break
            if not beaten:
                alive.append(b)
        keep += alive
    kept = {id(c) for c in keep}
    return tuple(c for c in cands if id(c) in kept)
