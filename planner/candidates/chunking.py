"""The chunked prefill of an aggregated replica and the expectations over prompt lengths
that screening uses (planner.candidates): a prompt's TTFT in fixed chunks on a stall-free
replica (the sum of the mixed steps that carry its chunks, as the simulator runs them),
a closed form for it, and the decode batch that maximizes a replica's capacity."""

from __future__ import annotations

import bisect
import functools
import itertools
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
    """The chunks of one prompt on one replica and chunk budget, as far as they do not
    depend on the decode batch: ``chunks = ceil(P_new / T)`` chunks, ``m = chunks - 1``
    full ones of ``budget_tokens`` starting at ``s_i = cached + i T`` and a tail of
    ``tail_tokens`` at ``cached + m T`` with its attention's (compute, KV read) parts
    (ms). :func:`chunked_ttft_ms` turns it into a TTFT at a decode batch
    (:class:`planner.roofline.MixedSteps`), so a search over batches prices each
    prompt's chunks once (:func:`chunked_prompt`).

    The full chunks' attention: compute ``cc_i`` and ``a_i = max(cc_i, cm_i)`` with
    ``cm_i`` the KV read (ms), both nondecreasing in ``i`` (later chunks attend to more
    context). Without sliding windows both are linear in ``i``
    (:func:`planner.roofline.chunk_attention_linear_ms`): ``linear = (cc_0, d_cc, cm_0,
    d_cm)``, and the counts and sums below are closed forms; otherwise ``arrays`` holds
    ``(cc, a)`` (:func:`planner.roofline.chunk_attention_parts_array_ms`) with the prefix
    sums of ``a``."""

    chunks: int
    budget_tokens: float
    tail_tokens: float
    tail_compute_ms: float
    tail_memory_ms: float
    linear: tuple[float, float, float, float] | None = None
    arrays: tuple[np.ndarray, np.ndarray, list[float], list[float]] | None = None

    def below(self, ms: float) -> int:
        """How many full chunks have ``a_i < ms`` (the first ones: ``a`` grows)."""
        m = self.chunks - 1
        if self.linear is None:
            assert self.arrays is not None
            return bisect.bisect_left(self.arrays[2], ms)
        cc0, dcc, cm0, dcm = self.linear
        return min(_count_below(cc0, dcc, ms, m), _count_below(cm0, dcm, ms, m))

    def attention_sum_ms(self, lo: int, hi: int) -> float:
        """``a_lo + .. + a_{hi-1}`` (ms)."""
        if hi <= lo:
            return 0.0
        if self.linear is None:
            assert self.arrays is not None
            prefix = self.arrays[3]
            return prefix[hi] - prefix[lo]
        cc0, dcc, cm0, dcm = self.linear
        e0, de = cc0 - cm0, dcc - dcm  # cc_i - cm_i, linear: one crossing at most
        if de == 0:
            return _linear_sum(cc0, dcc, lo, hi) if e0 >= 0 else _linear_sum(cm0, dcm, lo, hi)
        if de > 0:  # cm first, then cc from the first i with e_i >= 0
            t = min(max(math.ceil(-e0 / de), lo), hi)
            return _linear_sum(cm0, dcm, lo, t) + _linear_sum(cc0, dcc, t, hi)
        t = min(max(math.floor(-e0 / de) + 1, lo), hi)  # cc while e_i >= 0, then cm
        return _linear_sum(cc0, dcc, lo, t) + _linear_sum(cm0, dcm, t, hi)

    @functools.cached_property
    def attention_total_ms(self) -> float:
        """``a_0 + .. + a_{m-1}`` over all full chunks (ms; computed once)."""
        return self.attention_sum_ms(0, self.chunks - 1)

    def compute_at_ms(self, i: int) -> float:
        """``cc_i`` (ms)."""
        if self.linear is None:
            assert self.arrays is not None
            return float(self.arrays[0][i])
        return self.linear[0] + i * self.linear[1]

    def full_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """``(cc, a)`` of the full chunks as arrays (ms)."""
        if self.linear is None:
            assert self.arrays is not None
            return self.arrays[0], self.arrays[1]
        cc0, dcc, cm0, dcm = self.linear
        i = np.arange(self.chunks - 1, dtype=float)
        cc = cc0 + i * dcc
        return cc, np.maximum(cc, cm0 + i * dcm)


def _count_below(first: float, step: float, ms: float, count: int) -> int:
    """How many of ``first + i step`` (``i < count``, ``step >= 0``) are below ``ms``."""
    if first >= ms:
        return 0
    if step <= 0:
        return count
    return min(math.ceil((ms - first) / step), count)


def _linear_sum(first: float, step: float, lo: int, hi: int) -> float:
    """``sum_{i=lo}^{hi-1} (first + i step)``, closed form; 0 when ``hi <= lo``."""
    n = hi - lo
    return n * first + step * (lo + hi - 1) * n / 2.0 if n > 0 else 0.0


def _sum_max_lines(lines: tuple[tuple[float, float], ...], lo: int, hi: int) -> float:
    """``sum_{i=lo}^{hi-1} max_k (first_k + i step_k)`` over a few lines, closed form: the
    range is cut where two lines cross (at most one crossing a pair), and on each piece
    the line on top at its middle is summed (:func:`_linear_sum`); 0 when ``hi <= lo``."""
    if hi <= lo:
        return 0.0
    cuts = {lo, hi}
    for k, (f1, s1) in enumerate(lines):
        for f2, s2 in lines[k + 1 :]:
            if s1 != s2:
                x = math.ceil((f2 - f1) / (s1 - s2))
                if lo < x < hi:
                    cuts.add(x)
    total = 0.0
    edges = sorted(cuts)
    for a, b in itertools.pairwise(edges):
        mid = (a + b - 1) / 2.0
        first, step = max(lines, key=lambda ln: ln[0] + mid * ln[1])
        total += _linear_sum(first, step, a, b)
    return total


def chunked_prompt(
    replica: rl.Replica, prompt_tokens: float, budget_tokens: int, cached: float
) -> ChunkedPrompt | None:
    """The :class:`ChunkedPrompt` of a prompt of ``prompt_tokens`` with ``cached``
    tokens already in the KV cache, in chunks of ``budget_tokens`` (its tail's attention
    parts, and its full chunks' as a line or, with sliding windows, arrays); None when
    nothing is left to prefill (TTFT 0)."""
    new = max(prompt_tokens - cached, 0.0)
    if new <= 0:
        return None
    k = math.ceil(new / budget_tokens)
    last = new - (k - 1) * budget_tokens
    tail_cc, tail_cm = rl.chunk_attention_parts_ms(replica, last, cached + (k - 1) * budget_tokens)
    if k == 1:
        return ChunkedPrompt(1, float(budget_tokens), last, tail_cc, tail_cm)
    line = rl.chunk_attention_linear_ms(replica, budget_tokens)
    if line is not None:
        c0, c_slope, m0, m_slope = line
        linear = (
            c0 + cached * c_slope,
            budget_tokens * c_slope,
            m0 + cached * m_slope,
            budget_tokens * m_slope,
        )
        return ChunkedPrompt(k, float(budget_tokens), last, tail_cc, tail_cm, linear=linear)
    starts = cached + budget_tokens * np.arange(k - 1, dtype=float)
    cc, cm = rl.chunk_attention_parts_array_ms(replica, float(budget_tokens), starts)
    attn = np.maximum(cc, cm)
    arrays = (cc, attn, attn.tolist(), [0.0, *np.cumsum(attn).tolist()])
    return ChunkedPrompt(k, float(budget_tokens), last, tail_cc, tail_cm, arrays=arrays)


def full_chunks_attention_ms(prompt: ChunkedPrompt, steps: rl.MixedSteps) -> float:
    """The attention kernels of a prompt's full chunks' steps, summed (ms):
    ``sum_i max(max(a_d, a_i) + (1 - o) min(a_d, a_i), dc + cc_i)``
    (:meth:`planner.roofline.MixedSteps.attention_ms`), ``a_d``/``dc`` the decodes'
    attention (``max(compute, KV read)``/compute) at the step's batch and context.

    Closed form: ``a_i`` is nondecreasing, so the chunks with ``a_i < a_d`` are the
    first ``j`` (:meth:`ChunkedPrompt.below`) and the sum is ``j a_d + (1 - o) A[0, j)
    + A[j, m) + (m - j)(1 - o) a_d`` (``A`` sums of ``a_i``,
    :meth:`ChunkedPrompt.attention_sum_ms`) whenever the ``dc + cc_i`` floor binds
    nowhere, which holds when ``a_d - dc >= o cc_{j-1}`` (for ``i < j``: the step's
    attention minus ``dc + cc_i`` is at least ``a_d - dc - o cc_i``, and ``cc`` is
    nondecreasing) and ``(1 - o) a_d >= dc`` (for ``i >= j``): a bandwidth-bound
    decode attention. Otherwise (compute-bound decode attention: MLA, many draft
    queries) each side of ``j`` is a sum of the upper envelope of lines in ``i``
    (:func:`_sum_max_lines`) when the chunks' parts are lines, and a numpy sum over the
    chunk arrays with sliding windows."""
    m = prompt.chunks - 1
    if m <= 0:
        return 0.0
    a_d, dc, omo = steps.decode_attention_ms, steps.decode_compute_ms, steps.one_minus_overlap
    line = prompt.linear
    if line is not None:  # below() and compute_at_ms() inline: screening's inner loop
        cc0, dcc, cm0, dcm = line
        if cc0 >= a_d or cm0 >= a_d:
            j = 0
        else:
            j = m
            if dcc > 0:
                j = min(j, math.ceil((a_d - cc0) / dcc))
            if dcm > 0:
                j = min(j, math.ceil((a_d - cm0) / dcm))
        cc_below = cc0 + (j - 1) * dcc
    else:
        j = prompt.below(a_d)
        cc_below = prompt.compute_at_ms(j - 1) if j else 0.0
    if (j == 0 or a_d - dc >= (1.0 - omo) * cc_below) and (j == m or omo * a_d >= dc):
        total = prompt.attention_total_ms
        below = 0.0 if j == 0 else total if j == m else prompt.attention_sum_ms(0, j)
        return j * a_d + omo * below + (total - below) + (m - j) * omo * a_d
    if line is not None:  # the floor binds somewhere: upper envelopes of lines
        # i < j (a_i < a_d): max(a_d + (1 - o) cc_i, a_d + (1 - o) cm_i, dc + cc_i);
        # i >= j: max(cc_i + max((1 - o) a_d, dc), cm_i + (1 - o) a_d)
        below_lines = ((a_d + omo * cc0, omo * dcc), (a_d + omo * cm0, omo * dcm), (dc + cc0, dcc))
        above_lines = ((cc0 + max(omo * a_d, dc), dcc), (cm0 + omo * a_d, dcm))
        return _sum_max_lines(below_lines, 0, j) + _sum_max_lines(above_lines, j, m)
    cc, a = prompt.full_arrays()
    attn = np.maximum(a_d, a) + omo * np.minimum(a_d, a)
    return float(np.maximum(attn, dc + cc).sum())


def chunked_ttft_ms(prompt: ChunkedPrompt | None, steps: rl.MixedSteps) -> float:
    """TTFT of a chunked prompt on an idle stall-free replica (ms): the sum of the mixed
    steps that carry its chunks, each with the decode batch and context of ``steps``,

    ``sum_i mixed_step_ms(B, s_d, T_i, s_i) = (chunks - 1) fixed_ms(T) +
    full_chunks_attention_ms + fixed_ms(T_tail) + attention(tail)``

    (:class:`planner.roofline.MixedSteps`: the token-count kernels do not depend on the
    chunk's start, its attention does), as the simulator times a prompt's chunk steps
    (:meth:`planner.simulate.steps.StepModel.chunk_steps_ms`; tests hold it to the
    per-chunk loop :func:`planner.roofline.chunked_prefill_ttft_ms`); 0 for None."""
    if prompt is None:
        return 0.0
    total = steps.fixed_ms(prompt.tail_tokens) + steps.attention_ms(
        prompt.tail_compute_ms, prompt.tail_memory_ms
    )
    if prompt.chunks == 1:
        return total
    full = (prompt.chunks - 1) * steps.fixed_ms(prompt.budget_tokens)
    return full + full_chunks_attention_ms(prompt, steps) + total


def fast_chunked_ttft_ms(
    replica: rl.Replica,
    prompt_tokens: float,
    budget_tokens: int,
    decode_batch: float,
    decode_context_tokens: float,
    cached: float,
) -> float:
    """TTFT of a prompt in fixed chunks of ``budget_tokens`` on an idle stall-free
    replica whose steps carry ``decode_batch`` decodes at ``decode_context_tokens`` (ms):
    ``chunked_ttft_ms(chunked_prompt(...), MixedSteps(replica, B, s_d))``, which
    screening splits to price the chunks once per prompt and the steps once per batch.
    The per-chunk loop is :func:`planner.roofline.chunked_prefill_ttft_ms` (integer
    tokens)."""
    return chunked_ttft_ms(
        chunked_prompt(replica, prompt_tokens, budget_tokens, cached),
        rl.MixedSteps(replica, decode_batch, decode_context_tokens),
    )


def chunked_ttft_floor_ms(steps: rl.MixedSteps, new_tokens: float, budget_tokens: int) -> float:
    """A floor on the chunked TTFT of ``new_tokens`` tokens to prefill in chunks of
    ``budget_tokens`` (ms), for every decode batch at least ``steps``' (batch 1 in
    :mod:`planner.candidates.bounds`), every start context, and every larger
    ``new_tokens`` (a lower prefix hit rate):

    ``G(N) = m fixed(T) + max(m a_d, A span(m T)) + fixed(L) + a_d``,
    ``m = ceil(N / T) - 1`` full chunks and a tail of ``L`` tokens;

    ``fixed`` (the token-count kernels) and ``a_d`` (the decodes' attention) from
    ``steps`` (:class:`planner.roofline.MixedSteps`), ``A span(x)`` the causal attention
    compute of ``x`` tokens from context 0 (``prefill_attn_per_ctx x span(x) /
    F_attn``). Why: a chunk's step is ``fixed`` plus an attention of at least
    ``max(a_d, cc_i)``, and the full chunks' computes ``cc_i`` sum to the attention of
    ``m T`` tokens after the cached ones, no less than from context 0 (``span`` is
    convex); every term grows with the batch. ``G`` grows with ``N`` (``fixed(L)`` grows
    with ``L``; a new chunk turns the tail ``fixed(T)`` into a full one and adds a tail)."""
    if new_tokens <= 0:
        return 0.0
    c = steps.coefficients
    k = math.ceil(new_tokens / budget_tokens)
    m = k - 1
    a_d = steps.decode_attention_ms
    total = steps.fixed_ms(new_tokens - m * budget_tokens) + a_d
    if m:
        attention = c.prefill_attn_per_ctx * c.span(m * budget_tokens) / c.f_attn_per_ms
        total += m * steps.fixed_ms(float(budget_tokens)) + max(m * a_d, attention)
    return total


def capacity_maximizing_batch(
    b_max: int, decode_rps: Callable[[int], float], prefill_rps: Callable[[int], float]
) -> int:
    """The decode batch of an aggregated replica (count, in [1, ``b_max``]): the B
    that maximizes ``min(decode_rps(B), prefill_rps(B))`` (requests/s per replica).

    ``decode_rps(B) = B / (G x step(B))`` grows with B (more sequences share each
    read of the weights); ``prefill_rps(B) = 1 / E[chunked prefill time]`` falls with
    B (each chunk rides a longer mixed step). Their minimum peaks where they cross: the
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
    "chunked_ttft_floor_ms",
    "chunked_ttft_ms",
    "fast_chunked_ttft_ms",
    "full_chunks_attention_ms",
]
