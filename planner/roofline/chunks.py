"""Chunked prefill: mixed steps (decodes plus one prefill chunk), the largest chunk a
TPOT budget allows, shrinking chunk schedules and their TTFT, and the KV re-read
chunking costs.
"""

from __future__ import annotations

import math

import numpy as np

from catalog.schema import Dtype, Model
from planner import architecture as arch
from planner.errors import PlanningError
from planner.roofline.replica import Replica
from planner.roofline.steps import effective_flops


def chunk_compute_ms(replica: Replica, chunk_tokens: float, context_tokens: float) -> float:
    """Compute time of one prefill chunk of ``T`` tokens after ``s`` cached tokens (ms).

    ``T x 2 N_dense / (F_gemm x g)`` (``g`` the measured GEMM gain at ``T`` tokens,
    :func:`planner.kernels.gain_at_tokens`) + MoE expert compute + ``attention over s .. s + T /
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


class MixedSteps:
    """The mixed steps of one replica at one decode batch and decode context, as a
    function of the chunk they carry: ``step_ms(T, s)`` equals
    :func:`mixed_step_ms` ``(replica, decode_batch, decode_context_tokens, T, s)`` (ms),
    split in two parts so that many chunks of one prompt are priced from one setup:

    * ``fixed_ms(T)``: everything that depends on the step's token count alone, over
      ``n = B / pp x q + T`` tokens (``q`` query tokens per decode, k + 1 with
      speculative decoding): weight GEMMs, expert GEMMs, TP collectives, the step
      overhead, pipeline hand-overs (``pp > 1``) and the drafter's work per step (ms);
    * ``attention_ms(cc, cm)``: the decodes' attention (compute ``dc``, KV read
      ``dm``, at the decode batch and context) and the chunk's (compute ``cc``, KV read
      ``cm``: :func:`chunk_attention_parts_ms`) in one launch,
      ``max(max(a_d, a_c) + (1 - o) min(a_d, a_c), dc + cc)`` with ``a = max(compute,
      memory)`` and overlap factor ``o`` (:meth:`planner.kernels.StepCoefficients
      .shared_attention_ms`).

    The simulator runs a prompt's chunk steps with these inputs
    (:meth:`planner.simulate.steps.StepModel.chunk_steps_ms`: ``B`` the decodes resident
    while the prompt prefills, at their mean context)."""

    def __init__(self, replica: Replica, decode_batch: float, decode_context_tokens: float) -> None:
        c = self.coefficients = replica.coefficients
        b = max(decode_batch, 0.0) / c.pp
        self.decode_batch = decode_batch
        self.decode_context_tokens = decode_context_tokens
        self.decode_tokens = b * c.queries_per_seq
        dc, dm = c.decode_attention_parts_ms(b, decode_context_tokens, c.queries_per_seq)
        self.decode_compute_ms, self.decode_memory_ms = dc, dm
        self.decode_attention_ms = dc if dc > dm else dm
        self.one_minus_overlap = 1.0 - c.overlap
        self.draft_ms = c.draft_ms(b, decode_context_tokens)
        self._fixed: dict[float, float] = {}

    def fixed_ms(self, chunk_tokens: float) -> float:
        """The step's token-count kernels with a chunk of ``chunk_tokens`` (ms, cached
        per chunk size): ``gemm(n) + moe(n) + comm(n) + overhead [+ pipeline(n)] +
        draft``, ``n = B / pp x q + T`` (collectives and overhead only when ``n > 0``)."""
        got = self._fixed.get(chunk_tokens)
        if got is None:
            c = self.coefficients
            n = self.decode_tokens + max(chunk_tokens, 0.0)
            got = c.gemm_ms(n) + c.moe_ms(n)
            if n > 0:
                got += c.comm_ms(n) + c.overhead_ms
                if c.pp > 1:
                    got += c.pipeline_ms(n)
            got += self.draft_ms
            self._fixed[chunk_tokens] = got
        return got

    def attention_ms(self, chunk_compute_ms: float, chunk_memory_ms: float) -> float:
        """Decode and chunk attention in one launch (ms) from the chunk's (compute, KV
        read) parts: ``max(max(a_d, a_c) + (1 - o) min(a_d, a_c), dc + cc)``."""
        a_d = self.decode_attention_ms
        a_c = chunk_compute_ms if chunk_compute_ms > chunk_memory_ms else chunk_memory_ms
        hi, lo = (a_d, a_c) if a_d > a_c else (a_c, a_d)
        t = hi + self.one_minus_overlap * lo
        both = self.decode_compute_ms + chunk_compute_ms
        return t if t > both else both

    def step_ms(self, chunk_tokens: float, chunk_start_tokens: float) -> float:
        """The mixed step carrying a chunk of ``chunk_tokens`` after
        ``chunk_start_tokens`` cached tokens (ms): ``fixed_ms(T) + attention_ms(cc, cm)``,
        equal to :func:`mixed_step_ms` (to rounding; tests/test_chunk_steps.py)."""
        return self.fixed_ms(chunk_tokens) + self.attention_ms(
            *self.coefficients.chunk_attention_parts_ms(chunk_tokens, chunk_start_tokens)
        )


def chunk_attention_parts_ms(
    replica: Replica, chunk_tokens: float, start_tokens: float
) -> tuple[float, float]:
    """(compute, KV read) of the attention of a chunk of ``chunk_tokens`` after
    ``start_tokens`` cached tokens (ms), the chunk's part of :meth:`MixedSteps
    .attention_ms`: ``prefill_attn_per_ctx x (span(s + T) - span(s)) / F_attn`` (each
    token attends to all earlier ones on full layers, to the last ``window`` on
    sliding-window ones) and ``kv_held_bytes(s + T) / W_eff``."""
    return replica.coefficients.chunk_attention_parts_ms(chunk_tokens, start_tokens)


def chunk_attention_linear_ms(
    replica: Replica, chunk_tokens: float
) -> tuple[float, float, float, float] | None:
    """:func:`chunk_attention_parts_ms` of a chunk of ``chunk_tokens`` as lines in its
    start context ``s`` (tokens), for replicas without sliding-window layers (nor a
    draft model's cache): ``(cc_0, cc', cm_0, cm')`` (ms, ms per token) with

    ``compute(s) = cc_0 + s cc' = prefill_attn_per_ctx x L x T (s + T / 2) / F_attn``
    (``span(s + T) - span(s)`` with ``span(x) = L x^2 / 2``, ``L`` the layers) and
    ``KV read(s) = cm_0 + s cm' = kv_per_token (s + T) / W_eff``. None with sliding
    windows (both are then piecewise)."""
    c = replica.coefficients
    if c.windowed_layers or c.kv_windowed_held or c.draft is not None:
        return None
    per = c.prefill_attn_per_ctx * c.full_layers * chunk_tokens / c.f_attn_per_ms
    kv = (c.kv_full_held + c.draft_kv_held) / c.w_per_ms
    return per * chunk_tokens / 2.0, per, kv * chunk_tokens, kv


def chunk_attention_parts_array_ms(
    replica: Replica, chunk_tokens: float, starts_tokens: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`chunk_attention_parts_ms` of equal chunks of ``chunk_tokens`` at many
    start contexts (ms; arrays like ``starts_tokens``), vectorized."""
    c = replica.coefficients
    ends = starts_tokens + chunk_tokens

    def span(x: np.ndarray) -> np.ndarray:  # StepCoefficients.span over an array
        out = c.full_layers * x * x / 2.0
        if c.windowed_layers:
            w = c.window_tokens
            out = out + c.windowed_layers * np.where(x <= w, x * x / 2.0, w * w / 2.0 + w * (x - w))
        return out

    compute = c.prefill_attn_per_ctx * (span(ends) - span(starts_tokens)) / c.f_attn_per_ms
    return compute, c.kv_held_array(ends) / c.w_per_ms


def _ttft_of_chunks(
    replica: Replica,
    chunks: list[int],
    start_tokens: int,
    decode_batch: float,
    decode_context_tokens: float,
) -> float:
    """Sum of the mixed steps that carry ``chunks`` one after another from
    ``start_tokens`` (ms), each with ``decode_batch`` decodes at ``decode_context_tokens``."""
    total, s = 0.0, start_tokens
    for t in chunks:
        total += mixed_step_ms(replica, decode_batch, decode_context_tokens, t, s)
        s += t
    return total


def chunked_prefill_ttft_ms(
    replica: Replica,
    prompt_tokens: int,
    budget_tokens: int,
    decode_batch: float,
    decode_context_tokens: float,
    cached_tokens: int = 0,
) -> float:
    """TTFT of a prompt prefilled in fixed chunks of ``budget_tokens`` on a stall-free
    replica (ms, no queueing), one chunk per mixed step:

    ``sum over the ceil((P - cached) / T) chunks of mixed_step_ms(B, s_d, T_i, s_i)``,
    chunk i starting at ``s_i = cached + i T``, the last one holding the remainder,
    each step carrying ``B = decode_batch`` decodes at mean context
    ``s_d = decode_context_tokens`` (tokens). Later chunks see more context and take
    longer. The exact loop: the simulator's chunk steps
    (:meth:`planner.simulate.steps.StepModel.chunk_steps_ms`) and screening's closed
    form (:func:`planner.candidates.chunked_ttft_ms`) are held to it by tests.
    """
    if budget_tokens < 1:
        raise PlanningError.for_field("budget_tokens", f"must be >= 1, got {budget_tokens}")
    if not 0 <= cached_tokens <= prompt_tokens:
        raise PlanningError.for_field("cached_tokens", "must be in [0, prompt_tokens]")
    new = int(prompt_tokens) - int(cached_tokens)
    full, rest = divmod(new, int(budget_tokens))
    chunks = [int(budget_tokens)] * full + ([rest] if rest else [])
    return _ttft_of_chunks(replica, chunks, int(cached_tokens), decode_batch, decode_context_tokens)


def shrinking_schedule_ttft_ms(
    replica: Replica,
    prompt_tokens: int,
    tpot_budget_ms: float,
    decode_batch: float,
    decode_context_tokens: float,
    cached_tokens: int = 0,
) -> float:
    """TTFT of the :func:`shrinking_chunk_schedule` (ms, no queueing): ``sum over its
    chunks of mixed_step_ms(B, s_d, T(s), s)``, each step carrying ``B =
    decode_batch`` decodes at mean context ``s_d = decode_context_tokens``."""
    chunks = shrinking_chunk_schedule(replica, prompt_tokens, tpot_budget_ms, cached_tokens)
    return _ttft_of_chunks(replica, chunks, int(cached_tokens), decode_batch, decode_context_tokens)


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
