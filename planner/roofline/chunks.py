"""Chunked prefill: mixed steps (decodes plus one prefill chunk), the largest chunk a
TPOT budget allows, shrinking chunk schedules and their TTFT, and the KV re-read
chunking costs.
"""

from __future__ import annotations

import math

from catalog.schema import Dtype, Model
from planner import architecture as arch
from planner.errors import PlanningError
from planner.roofline.replica import Replica
from planner.roofline.steps import effective_flops


def chunk_compute_ms(replica: Replica, chunk_tokens: float, context_tokens: float) -> float:
    """Compute time of one prefill chunk of ``T`` tokens after ``s`` cached tokens (ms).

    ``T x 2 N_dense / F_gemm`` + MoE expert compute + ``attention over s .. s + T /
    F_attn`` — on full layers the chunk's mean context is ``s + T/2`` (each token
    attends to all earlier ones). Pure compute: no weight-read floor, communication
    or overhead (the mixed step adds those).
    """
    return replica.coefficients.chunk_compute_ms(chunk_tokens, context_tokens)


def mixed_step_ms(
    replica: Replica,
    decode_batch: float,
    decode_context_tokens: float,
    chunk_tokens: float,
    chunk_context_tokens: float,
    *,
    include_overhead: bool = True,
) -> float:
    """A stall-free mixed step: ``decode_batch`` decodes plus one prefill chunk (ms).

    A sum of kernels (:mod:`planner.kernels`): the weight and expert GEMMs run over
    all ``B + T`` tokens at once (a chunk is free while they stay bandwidth-bound);
    the decodes' attention ``a_d`` (bandwidth-bound) and the chunk's ``a_c``
    (compute-bound) share one kernel with overlap factor ``o``:
    ``max(a_d, a_c) + (1 - o) min(a_d, a_c)``; then ``tp_comm_ms(B + T)`` and the
    step overhead. With no chunk it equals :func:`decode_step_ms`.
    """
    return replica.coefficients.step_ms(
        decode_batch,
        decode_context_tokens,
        max(chunk_tokens, 0.0),
        chunk_context_tokens,
        include_overhead=include_overhead,
    )


def max_free_chunk_tokens(replica: Replica, tpot_budget_ms: float, context_tokens: float) -> int:
    """Largest chunk that fits a TPOT budget by compute alone (tokens, floored):

    ``T* = floor(TPOT_budget x F_eff / flops_per_token(s_ctx))``.
    Check: llama-2-7b on one H100 at MFU 0.5, 20.1 ms, s = 2,048:
    ``20.1e-3 x 494.7e12 / 14.55e9 = 683``.
    """
    if tpot_budget_ms <= 0:
        raise PlanningError.for_field("tpot_budget_ms", f"must be > 0, got {tpot_budget_ms}")
    per_token = arch.flops_per_token(replica.model, context_tokens)
    return math.floor(tpot_budget_ms * 1e-3 * effective_flops(replica) / per_token)


def _largest_chunk_within(
    replica: Replica, budget_ms: float, start_tokens: float, limit: int
) -> int:
    """Largest integer T in [1, limit] with chunk_compute_ms(T, start) <= budget (>= 1)."""
    if chunk_compute_ms(replica, limit, start_tokens) <= budget_ms:
        return limit
    lo, hi = 1, limit  # compute(lo) may exceed the budget: a chunk is at least 1 token
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if chunk_compute_ms(replica, mid, start_tokens) <= budget_ms:
            lo = mid
        else:
            hi = mid
    return lo


def shrinking_chunk_schedule(
    replica: Replica,
    prompt_tokens: int,
    tpot_budget_ms: float,
    cached_tokens: int = 0,
) -> list[int]:
    """Chunk sizes ``T(s)`` that hold each chunk's compute time at the TPOT budget.

    The chunk starting at context ``s`` is the largest integer T with
    ``chunk_compute_ms(T, s) <= TPOT_budget`` (its tokens see mean context
    ``s + T/2``), at least 1 token, and the last chunk takes what is left. As
    ``s`` grows through the prompt the attention term grows, so chunks shrink.
    Returns the list of chunk sizes (tokens), summing to ``prompt - cached``.
    """
    if tpot_budget_ms <= 0:
        raise PlanningError.for_field("tpot_budget_ms", f"must be > 0, got {tpot_budget_ms}")
    if not 0 <= cached_tokens <= prompt_tokens:
        raise PlanningError.for_field("cached_tokens", "must be in [0, prompt_tokens]")
    chunks: list[int] = []
    s = int(cached_tokens)
    end = int(prompt_tokens)
    while s < end:
        t = _largest_chunk_within(replica, tpot_budget_ms, s, end - s)
        chunks.append(t)
        s += t
    return chunks


def _ttft_of_chunks(
    replica: Replica, chunks: list[int], start_tokens: int, decode_step_ms: float
) -> float:
    total, s = 0.0, start_tokens
    for t in chunks:
        total += max(decode_step_ms, chunk_compute_ms(replica, t, s))
        s += t
    return total


def chunked_prefill_ttft_ms(
    replica: Replica,
    prompt_tokens: int,
    budget_tokens: int,
    decode_step_ms: float,
    cached_tokens: int = 0,
) -> float:
    """TTFT of a prompt prefilled in fixed chunks of ``budget_tokens`` (ms, no queueing).

    ``sum over the ceil((P - cached) / T) chunks of max(decode_step_ms,
    chunk_compute_ms(T_i, s_i))``, where chunk i starts at ``s_i`` and the last
    chunk holds the remainder. Later chunks see more context and take longer.
    """
    if budget_tokens < 1:
        raise PlanningError.for_field("budget_tokens", f"must be >= 1, got {budget_tokens}")
    if not 0 <= cached_tokens <= prompt_tokens:
        raise PlanningError.for_field("cached_tokens", "must be in [0, prompt_tokens]")
    new = int(prompt_tokens) - int(cached_tokens)
    full, rest = divmod(new, int(budget_tokens))
    chunks = [int(budget_tokens)] * full + ([rest] if rest else [])
    return _ttft_of_chunks(replica, chunks, int(cached_tokens), decode_step_ms)


def shrinking_schedule_ttft_ms(
    replica: Replica,
    prompt_tokens: int,
    tpot_budget_ms: float,
    decode_step_ms: float,
    cached_tokens: int = 0,
) -> float:
    """TTFT of the :func:`shrinking_chunk_schedule` (ms, no queueing):
    ``sum over its chunks of max(decode_step_ms, chunk_compute_ms(T(s), s))``."""
    chunks = shrinking_chunk_schedule(replica, prompt_tokens, tpot_budget_ms, cached_tokens)
    return _ttft_of_chunks(replica, chunks, int(cached_tokens), decode_step_ms)


def chunk_kv_reread_tokens(prompt_tokens: float, budget_tokens: float) -> float:
    """Extra KV token-reads caused by chunking a prompt of S tokens in chunks of T:

    ``S^2 / (2T) - S/2`` (token-reads): chunk i re-reads the ``i x T`` tokens
    before it, ``sum_{i<S/T} i T``. Exact when T divides S; 0 when ``T >= S``.
    """
    if budget_tokens <= 0:
        raise PlanningError.for_field("budget_tokens", f"must be > 0, got {budget_tokens}")
    s = prompt_tokens
    return max(s * s / (2.0 * budget_tokens) - s / 2.0, 0.0)


def chunk_kv_reread_bytes(
    model: Model, prompt_tokens: float, budget_tokens: float, kv_dtype: Dtype | str = "bf16"
) -> float:
    """Extra KV bytes read by chunking: ``chunk_kv_reread_tokens x kv_bytes_per_token``
    (bytes; an upper bound for sliding-window models, whose windowed layers read less)."""
    return chunk_kv_reread_tokens(prompt_tokens, budget_tokens) * arch.kv_bytes_per_token(
        model, kv_dtype
    )
