"""DOMAIN.md section 3: what a chunked-prefill token budget costs in TPOT and buys
in TTFT, with the largest free chunk ``T*`` (:func:`chunk_budget_table`)."""

from __future__ import annotations

from collections.abc import Sequence

from catalog.schema import Catalog, Dtype
from planner import architecture as arch
from planner import roofline as rl
from planner.analyses.common import (
    DEFAULT_MIN_BUDGET_TOKENS,
    ReplicaSummary,
    _check_positive,
    _check_prompt,
    _Result,
)
from planner.errors import PlanningError

# --------------------------------------------------------------------------- chunk budget


def overlapped_step_ms(decode_ms: float, chunk_ms: float, overlap_factor: float) -> float:
    """A mixed step's time from its decode part and its chunk's compute (ms).

    DOMAIN.md section 3, the same combination as :func:`planner.roofline.mixed_step_ms`:
    ``max(d, c) + (1 - o) x min(d, c)`` with overlap factor ``o`` (1 = the chunk's
    compute hides entirely under the decode's memory traffic, so the step is
    ``max(d, c)``; 0 = they run back to back, ``d + c``).
    """
    if not 0.0 <= overlap_factor <= 1.0:
        raise PlanningError.for_field("overlap_factor", f"must be in [0, 1], got {overlap_factor}")
    return max(decode_ms, chunk_ms) + (1.0 - overlap_factor) * min(decode_ms, chunk_ms)


def fixed_chunks(prompt_tokens: int, budget_tokens: int) -> list[int]:
    """The chunk sizes of a prompt split in chunks of at most ``budget_tokens`` (tokens):
    ``ceil(P / T)`` chunks of T, the last one holding the remainder."""
    full, rest = divmod(prompt_tokens, budget_tokens)
    return [budget_tokens] * full + ([rest] if rest else [])


def schedule_ttft_ms(
    replica: rl.Replica, chunks: Sequence[int], decode_step_ms: float, start_tokens: int = 0
) -> float:
    """TTFT of a prompt prefilled one chunk per mixed step (ms, no queueing).

    ``sum_i overlapped_step_ms(decode_step_ms, chunk_compute_ms(T_i, s_i), o)``,
    chunk i starting at context ``s_i = start + T_0 + ... + T_{i-1}`` (late chunks
    attend to more context and take longer). This is DOMAIN.md section 3's first-order
    table, the decode part held at the TPOT budget; screening and the simulator price
    each chunk as the whole mixed step of a decode batch
    (:func:`planner.roofline.chunked_prefill_ttft_ms`).
    """
    total, s = 0.0, start_tokens
    for t in chunks:
        c = rl.chunk_compute_ms(replica, t, s)
        total += overlapped_step_ms(decode_step_ms, c, replica.overlap_factor)
        s += t
    return total


def default_budgets(prompt_tokens: int, free_chunk_tokens: int) -> list[int]:
    """Budgets shown when none are asked for (tokens): powers of two from
    :data:`DEFAULT_MIN_BUDGET_TOKENS` up to the first one that holds the whole prompt,
    plus ``T*`` (when at least 1), sorted."""
    budgets = {DEFAULT_MIN_BUDGET_TOKENS}
    t = DEFAULT_MIN_BUDGET_TOKENS
    while t < prompt_tokens:
        t *= 2
        budgets.add(t)
    if free_chunk_tokens >= 1:
        budgets.add(free_chunk_tokens)
    return sorted(budgets)


class ChunkBudgetRow(_Result):
    """One chunk budget T (tokens), for a prompt of P tokens under a TPOT budget X (ms).

    - ``chunk_ms``: compute time of one chunk of ``min(T, P)`` tokens whose tokens
      see the prompt's mean context P/2 (the chunk centred on the prompt's middle):
      ``chunk_compute_ms(min(T, P), (P - min(T, P)) / 2)`` = ``T x flops_per_token(P/2)
      / F_eff`` on full-attention layers — the cost ``T*`` is defined by — except where
      the cost model refines it: dense GEMMs of a chunk past 512 tokens at the GPU's
      measured rate gain (:func:`planner.kernels.gemm_token_gain`, a few percent at
      ``T*``), FP8 weights' attention at its own rate, MoE experts at theirs; so ``T*`` is
      first-order, and ``chunk_ms`` at ``T*`` can be a little under or over ``X``;
    - ``step_ms``: a mixed step whose decode part exactly fills the TPOT budget
      (decode time = X) plus that chunk: ``overlapped_step_ms(X, chunk_ms, o)`` =
      ``max(X, chunk) + (1 - o) x min(X, chunk)``;
    - ``tpot_penalty``: ``step_ms / X - 1`` (fraction; 0 when the chunk is free,
      which takes ``T <= T*`` and perfect overlap ``o = 1``);
    - ``chunks``: ``ceil(P / T)`` steps to prefill the prompt;
    - ``ttft_ms``: :func:`schedule_ttft_ms` of those chunks at decode time X (each
      chunk at its own context, so late chunks cost more than ``chunk_ms``);
    - ``kv_reread_gb``: extra KV read because each chunk re-reads the cache of the
      chunks before it, ``(P^2 / (2T) - P/2) x kv_bytes_per_token / 1e9``
      (:func:`planner.roofline.chunk_kv_reread_bytes`; 0 when ``T >= P``);
    - ``kv_reread_ms``: that traffic at the replica's effective HBM bandwidth
      (``bytes / W_eff``), summed over the whole prefill.
    """

    budget_tokens: int
    chunk_ms: float
    step_ms: float
    tpot_penalty: float
    chunks: int
    ttft_ms: float
    kv_reread_gb: float
    kv_reread_ms: float


class ShrinkingSchedule(_Result):
    """The budget that shrinks through the prompt to hold each chunk's compute at X.

    ``chunk_tokens``: :func:`planner.roofline.shrinking_chunk_schedule` (the chunk
    starting at context s is the largest T with ``chunk_compute_ms(T, s) <= X``);
    ``ttft_ms``: :func:`schedule_ttft_ms` of those chunks at decode time X (with
    ``o = 1``, ``chunks x X``: TPOT never moves); ``max_step_ms``: its slowest step.
    """

    chunks: int
    first_chunk_tokens: int
    last_chunk_tokens: int
    min_chunk_tokens: int
    chunk_tokens: list[int]
    ttft_ms: float
    max_step_ms: float


class ChunkBudgetTable(_Result):
    """Chunked prefill (DOMAIN.md section 3) of one prompt under a TPOT budget.

    ``context_tokens``: the prompt's mean context P/2. ``max_free_chunk_tokens``:
    ``T* = floor(X x F_eff / flops_per_token(P/2))``
    (:func:`planner.roofline.max_free_chunk_tokens`), the largest chunk whose compute
    fits the budget; it is the launch setting engines call ``max_num_batched_tokens``
    (vLLM, with the decode tokens on top) or ``chunked_prefill_size`` (SGLang).
    """

    replica: ReplicaSummary
    prompt_tokens: int
    tpot_budget_ms: float
    context_tokens: float
    flops_per_token_g: float
    max_free_chunk_tokens: int
    rows: list[ChunkBudgetRow]
    shrinking: ShrinkingSchedule


def chunk_budget_row(
    replica: rl.Replica, prompt_tokens: int, tpot_budget_ms: float, budget_tokens: int
) -> ChunkBudgetRow:
    """One :class:`ChunkBudgetRow` (see it for the definitions of the columns)."""
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens < 1:
        raise PlanningError.for_field(
            "budgets", f"budgets must be positive integers, got {budget_tokens!r}"
        )
    p = prompt_tokens
    t = min(budget_tokens, p)
    chunk_ms = rl.chunk_compute_ms(replica, t, (p - t) / 2.0)
    step_ms = overlapped_step_ms(tpot_budget_ms, chunk_ms, replica.overlap_factor)
    chunks = fixed_chunks(p, budget_tokens)
    reread = rl.chunk_kv_reread_bytes(replica.model, p, budget_tokens, replica.kv_dtype)
    return ChunkBudgetRow(
        budget_tokens=budget_tokens,
        chunk_ms=chunk_ms,
        step_ms=step_ms,
        tpot_penalty=step_ms / tpot_budget_ms - 1.0,
        chunks=len(chunks),
        ttft_ms=schedule_ttft_ms(replica, chunks, tpot_budget_ms),
        kv_reread_gb=reread / 1e9,
        kv_reread_ms=reread / rl.effective_bandwidth_bytes_per_s(replica) * 1e3,
    )


def chunk_budget_table(
    catalog: Catalog,
    model_id: str,
    gpu_id: str,
    *,
    prompt_tokens: int,
    tpot_budget_ms: float,
    tp: int = 1,
    dtype: Dtype | str = "bf16",
    kv_dtype: Dtype | str | None = None,
    mfu: float | None = None,
    overlap_factor: float | None = None,
    budgets: Sequence[int] | None = None,
) -> ChunkBudgetTable:
    """The chunk-budget analysis of a ``prompt_tokens`` prompt under ``tpot_budget_ms``.

    Builds the replica (:func:`planner.roofline.build_replica`; ``mfu`` and
    ``overlap_factor`` default to the GPU's catalog efficiency), computes ``T*`` at
    the mean context P/2, one :class:`ChunkBudgetRow` per budget (default
    :func:`default_budgets`) and the :class:`ShrinkingSchedule`.

    Check (DOMAIN.md): llama-2-7b on one H100 SXM at MFU 0.5, P = 4,096, X = 20.1 ms:
    ``T* = 20.1 ms x 494.7 TFLOP/s / 14.55 GFLOP = 683``.
    """
    replica = rl.build_replica(
        catalog,
        model_id,
        gpu_id,
        tp=tp,
        dtype=dtype,
        kv_dtype=kv_dtype,
        mfu=mfu,
        overlap_factor=overlap_factor,
    )
    _check_prompt(replica.model, prompt_tokens)
    _check_positive("tpot_budget_ms", tpot_budget_ms)
    context = prompt_tokens / 2.0
    t_star = rl.max_free_chunk_tokens(replica, tpot_budget_ms, context)
    wanted = default_budgets(prompt_tokens, t_star) if budgets is None else list(budgets)
    if not wanted:
        raise PlanningError.for_field("budgets", "give at least one budget")
    rows = [chunk_budget_row(replica, prompt_tokens, tpot_budget_ms, b) for b in wanted]

    schedule = rl.shrinking_chunk_schedule(replica, prompt_tokens, tpot_budget_ms)
    steps, s = [], 0
    for t in schedule:
        c = rl.chunk_compute_ms(replica, t, s)
        steps.append(overlapped_step_ms(tpot_budget_ms, c, replica.overlap_factor))
        s += t
    shrinking = ShrinkingSchedule(
        chunks=len(schedule),
        first_chunk_tokens=schedule[0],
        last_chunk_tokens=schedule[-1],
        min_chunk_tokens=min(schedule),
        chunk_tokens=schedule,
        ttft_ms=schedule_ttft_ms(replica, schedule, tpot_budget_ms),
        max_step_ms=max(steps),
    )
    return ChunkBudgetTable(
        replica=ReplicaSummary.of(replica),
        prompt_tokens=prompt_tokens,
        tpot_budget_ms=tpot_budget_ms,
        context_tokens=context,
        flops_per_token_g=arch.flops_per_token(replica.model, context) / 1e9,
        max_free_chunk_tokens=t_star,
        rows=rows,
        shrinking=shrinking,
    )
