"""The chunked prefill of an aggregated replica and the expectations over prompt lengths
that screening uses (planner.candidates): a prompt's TTFT in fixed chunks on a stall-free
replica, a closed-form sum for it, and the decode batch that maximizes a replica's
capacity."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from planner import roofline as rl
from planner.candidates.model import ClassFigures


def _expect(fig: ClassFigures, fn) -> tuple[float, float]:
    """E[fn(P)] and Var[fn(P)]/E^2 over the log-normal prompt length (GH quadrature)."""
    vals = np.array([fn(p) for p in fig.prompt_nodes_tokens])
    w = np.array(fig.prompt_weights)
    mean = float(np.dot(w, vals))
    var = float(np.dot(w, (vals - mean) ** 2))
    return mean, (var / (mean * mean) if mean > 0 else 0.0)


def fast_chunked_ttft_ms(
    replica: rl.Replica, prompt_tokens: float, budget_tokens: int, step_ms: float, cached: float
) -> float:
    """TTFT of a prompt in fixed chunks on an idle stall-free replica (ms):
    ``sum_i max(step_ms, chunk_compute_ms(T, s_i))`` over ceil(P_new / T) chunks.

    Chunk compute is taken linear in its start context between the first and
    the last full chunk (exact for full attention, where attention FLOPs grow
    linearly with context; within a few percent for sliding-window layers), so
    it costs three cost-model calls instead of one per chunk. The exact loop is
    :func:`planner.roofline.chunked_prefill_ttft_ms`.
    """
    new = max(prompt_tokens - cached, 0.0)
    if new <= 0:
        return 0.0
    k = math.ceil(new / budget_tokens)
    last = new - (k - 1) * budget_tokens
    tail = max(step_ms, rl.chunk_compute_ms(replica, last, cached + (k - 1) * budget_tokens))
    if k == 1:
        return tail
    c0 = rl.chunk_compute_ms(replica, budget_tokens, cached)
    c1 = rl.chunk_compute_ms(replica, budget_tokens, cached + (k - 2) * budget_tokens)
    return sum_max_linear(step_ms, c0, c1, k - 1) + tail


def sum_max_linear(floor: float, first: float, last: float, count: int) -> float:
    """sum_{i=0}^{count-1} max(floor, first + (last - first) i / (count - 1)), closed form."""
    if count <= 0:
        return 0.0
    if count == 1:
        return max(floor, first)
    if first >= floor and last >= floor:
        return count * (first + last) / 2.0
    if first <= floor and last <= floor:
        return count * floor
    step = (last - first) / (count - 1)
    # indices whose value is below the floor form a prefix (step > 0) or suffix (step < 0)
    below = (
        math.floor((floor - first) / step) + 1
        if step > 0
        else count - (math.floor((floor - first) / step) + 1)
    )
    below = min(max(below, 0), count)
    if step > 0:
        lo, hi = below, count - 1
    else:
        lo, hi = 0, count - below - 1
    above = hi - lo + 1
    above_sum = above * (2 * first + step * (lo + hi)) / 2.0 if above > 0 else 0.0
    return below * floor + above_sum


def capacity_maximizing_batch(
    b_max: int, decode_rps: Callable[[int], float], prefill_rps: Callable[[int], float]
) -> int:
    """The decode batch of an aggregated replica (count, in [1, ``b_max``]): the B
    that maximizes ``min(decode_rps(B), prefill_rps(B))`` (requests/s per replica).

    ``decode_rps(B) = B / (G x step(B))`` grows with B (more sequences share each
    read of the weights); ``prefill_rps(B) = 1 / E[chunked prefill time]`` falls with
    B (each chunk waits for a longer step). Their minimum peaks where they cross: the
    smallest B with ``decode_rps(B) >= prefill_rps(B)`` or the one below it, whichever
    has the larger minimum (bisection); ``b_max`` (the largest batch within the TPOT
    SLO and the KV cache, ``decode_slots``) when decode stays the bottleneck.

    Taking ``b_max`` itself, as the planner did before, made a looser TPOT SLO buy
    *less* capacity (longer steps, slower chunks): the feasible set only grows with the
    SLO, so its maximum never falls."""
    if b_max <= 1 or decode_rps(b_max) <= prefill_rps(b_max):
        return max(b_max, 1)
    lo, hi = 1, b_max  # decode_rps(hi) > prefill_rps(hi)
    if decode_rps(lo) >= prefill_rps(lo):
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if decode_rps(mid) >= prefill_rps(mid):
            hi = mid
        else:
            lo = mid
    return max((lo, hi), key=lambda b: min(decode_rps(b), prefill_rps(b)))


__all__ = ["capacity_maximizing_batch", "fast_chunked_ttft_ms", "sum_max_linear"]
