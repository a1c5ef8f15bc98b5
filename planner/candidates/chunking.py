"""The chunked prefill of an aggregated replica and the expectations over prompt lengths
that screening uses (planner.candidates): a prompt's TTFT in fixed chunks on a stall-free
replica, a closed-form sum for it, and the decode batch that maximizes a replica's
capacity."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from planner import roofline as rl
from planner.candidates.model import ClassFigures


@functools.lru_cache(maxsize=64)
def _weights(weights: tuple[float, ...]) -> np.ndarray:
    """The quadrature weights as an array (read-only; the same few tuples every time)."""
    w = np.array(weights)
    w.setflags(write=False)
    return w


def _expect(fig: ClassFigures, fn) -> tuple[float, float]:
    """E[fn(P)] and Var[fn(P)]/E^2 over the log-normal prompt length (GH quadrature)."""
    vals = np.array([fn(p) for p in fig.prompt_nodes_tokens])
    w = _weights(fig.prompt_weights)
    mean = float(np.dot(w, vals))
    var = float(np.dot(w, (vals - mean) ** 2))
    return mean, (var / (mean * mean) if mean > 0 else 0.0)


def _expect_mean(fig: ClassFigures, fn) -> float:
    """E[fn(P)] over the log-normal prompt length: :func:`_expect`'s mean (the same
    dot product), without the variance."""
    return float(
        np.dot(_weights(fig.prompt_weights), np.array([fn(p) for p in fig.prompt_nodes_tokens]))
    )


@dataclass(frozen=True)
class ChunkedPrompt:
    """The chunk computes of one prompt on one replica and chunk budget (ms), which do
    not depend on the decode batch: ``chunks`` = ceil(P_new / T) chunks, the compute
    of the first and of the last full chunk (``first_ms``, ``last_full_ms``; the ones
    between are taken linear in their start context) and of the tail chunk
    (``tail_ms``). :func:`chunked_ttft_ms` turns it into a TTFT at a step time, so a
    search over batches prices each prompt's chunks once (:func:`chunked_prompt`)."""

    chunks: int
    first_ms: float
    last_full_ms: float
    tail_ms: float


def chunked_prompt(
    replica: rl.Replica, prompt_tokens: float, budget_tokens: int, cached: float
) -> ChunkedPrompt | None:
    """The :class:`ChunkedPrompt` of a prompt of ``prompt_tokens`` with ``cached``
    tokens already in the KV cache, in chunks of ``budget_tokens``
    (:func:`planner.roofline.chunk_compute_ms`: three cost-model calls); None when
    nothing is left to prefill (TTFT 0)."""
    new = max(prompt_tokens - cached, 0.0)
    if new <= 0:
        return None
    k = math.ceil(new / budget_tokens)
    last = new - (k - 1) * budget_tokens
    tail = rl.chunk_compute_ms(replica, last, cached + (k - 1) * budget_tokens)
    if k == 1:
        return ChunkedPrompt(1, 0.0, 0.0, tail)
    c0 = rl.chunk_compute_ms(replica, budget_tokens, cached)
    c1 = rl.chunk_compute_ms(replica, budget_tokens, cached + (k - 2) * budget_tokens)
    return ChunkedPrompt(k, c0, c1, tail)


def chunked_ttft_ms(prompt: ChunkedPrompt | None, step_ms: float) -> float:
    """TTFT of a chunked prompt on an idle stall-free replica whose steps take
    ``step_ms`` (ms): ``sum_i max(step_ms, chunk_i)`` over its chunks, the full ones in
    closed form (:func:`sum_max_linear`) plus ``max(step_ms, tail)``; 0 for None."""
    if prompt is None:
        return 0.0
    tail = max(step_ms, prompt.tail_ms)
    if prompt.chunks == 1:
        return tail
    return sum_max_linear(step_ms, prompt.first_ms, prompt.last_full_ms, prompt.chunks - 1) + tail


def fast_chunked_ttft_ms(
    replica: rl.Replica, prompt_tokens: float, budget_tokens: int, step_ms: float, cached: float
) -> float:
    """TTFT of a prompt in fixed chunks on an idle stall-free replica (ms):
    ``sum_i max(step_ms, chunk_compute_ms(T, s_i))`` over ceil(P_new / T) chunks.

    Chunk compute is taken linear in its start context between the first and
    the last full chunk (exact for full attention, where attention FLOPs grow
    linearly with context; within a few percent for sliding-window layers), so
    it costs three cost-model calls instead of one per chunk. The exact loop is
    :func:`planner.roofline.chunked_prefill_ttft_ms`. Equal to
    ``chunked_ttft_ms(chunked_prompt(...), step_ms)``, which screening uses to price
    the chunks once per prompt and batch search.
    """
    return chunked_ttft_ms(chunked_prompt(replica, prompt_tokens, budget_tokens, cached), step_ms)


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


__all__ = [
    "ChunkedPrompt",
    "capacity_maximizing_batch",
    "chunked_prompt",
    "chunked_ttft_ms",
    "fast_chunked_ttft_ms",
    "sum_max_linear",
]
