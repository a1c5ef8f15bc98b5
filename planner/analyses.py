"""Analyses users run on one model and GPU: chunk budgets, KV transfers, pool ratios.

Each analysis is a pure function of the catalog and a few parameters that
returns a frozen pydantic model (the CLI renders it as a table or JSON, and an
HTTP endpoint can serve it as is):

- :func:`chunk_budget_table` — DOMAIN.md section 3: what a chunked-prefill token
  budget costs in TPOT and buys in TTFT, with the largest free chunk ``T*``;
- :func:`kv_transfer_table` — DOMAIN.md section 4: the KV cache a disaggregated
  prefill ships, over each link, and what of it layer-wise streaming hides;
- :func:`pool_ratio_table` — DOMAIN.md section 5: prefill and decode GPU-seconds
  per request and the prefill/decode pool ratio per workload and for a mix.

Every number comes from a named cost-model function (:mod:`planner.roofline`,
:mod:`planner.sizing`, :mod:`planner.architecture`); the docstrings state the
formulas. Units are in the names: ``_ms`` milliseconds, ``_gb`` decimal
gigabytes (1e9 bytes), ``_gb_per_s`` GB/s, ``_gpu_s`` GPU-seconds, ``_tokens``.

Bad input raises :class:`~planner.errors.PlanningError` (or a subclass) whose
field is the parameter's name here (``prompt_tokens``, ``budgets``...) or, for
the replica, the field :func:`planner.roofline.build_replica` names (``model``,
``gpu``, ``tp``, ``dtype``...).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from catalog.schema import Catalog, Dtype, Link, Model, Workload
from planner import architecture as arch
from planner import roofline as rl
from planner import sizing as sz
from planner.candidates import KV_STREAM_OVERLAP
from planner.errors import PlanningError, UnknownEntryError

#: Smallest default chunk budget (tokens); defaults double from here up to the prompt.
DEFAULT_MIN_BUDGET_TOKENS = 256

#: Default share of a KV transfer that layer-wise streaming can hide (the planner's value).
DEFAULT_KV_STREAM_OVERLAP = KV_STREAM_OVERLAP


class _Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReplicaSummary(_Result):
    """The replica an analysis priced: ``tp`` GPUs of ``gpu`` serving ``model``.

    ``effective_tflops`` = ``tp x peak x MFU`` / 1e12 (:func:`planner.roofline.effective_flops`);
    ``effective_bandwidth_tb_per_s`` = ``tp x HBM x MBU`` / 1e12.
    """

    model: str
    gpu: str
    tp: int
    dtype: str
    kv_dtype: str
    mfu: float
    mbu: float
    overlap_factor: float
    step_overhead_ms: float
    effective_tflops: float
    effective_bandwidth_tb_per_s: float

    @classmethod
    def of(cls, replica: rl.Replica) -> ReplicaSummary:
        return cls(
            model=replica.model.id,
            gpu=replica.gpu.id,
            tp=replica.tp,
            dtype=str(replica.weight_dtype),
            kv_dtype=str(replica.kv_dtype),
            mfu=replica.prefill_mfu,
            mbu=replica.decode_mbu,
            overlap_factor=replica.overlap_factor,
            step_overhead_ms=replica.step_overhead_ms,
            effective_tflops=rl.effective_flops(replica) / 1e12,
            effective_bandwidth_tb_per_s=rl.effective_bandwidth_bytes_per_s(replica) / 1e12,
        )


# --------------------------------------------------------------------------- validation


def _check_prompt(model: Model, prompt_tokens: int, field: str = "prompt_tokens") -> None:
    if isinstance(prompt_tokens, bool) or not isinstance(prompt_tokens, int) or prompt_tokens < 1:
        raise PlanningError.for_field(field, f"must be a positive integer, got {prompt_tokens!r}")
    if prompt_tokens > model.max_context_tokens:
        raise PlanningError.for_field(
            field,
            f"{prompt_tokens:,} tokens exceed {model.id}'s context window "
            f"({model.max_context_tokens:,})",
        )


def _check_positive(field: str, value: float) -> None:
    if not (value > 0 and math.isfinite(value)):
        raise PlanningError.for_field(field, f"must be > 0, got {value}")


def _kv_dtype(value: Dtype | str) -> Dtype:
    """The KV-cache format, one of :data:`planner.roofline.KV_DTYPES` (field ``kv_dtype``)."""
    try:
        k_dtype = Dtype(value)
    except ValueError:
        k_dtype = None
    if k_dtype not in rl.KV_DTYPES:
        known = ", ".join(d.value for d in rl.KV_DTYPES)
        raise PlanningError.for_field("kv_dtype", f"unsupported KV dtype {value!r} (use {known})")
    return k_dtype


def _get_model(catalog: Catalog, model_id: str) -> Model:
    model = catalog.models.get(model_id)
    if model is None:
        known = ", ".join(sorted(catalog.models))
        raise UnknownEntryError.for_field("model", f"unknown model {model_id!r} (known: {known})")
    return model


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
    attend to more context and take longer). With ``o = 1`` this is
    :func:`planner.roofline.chunked_prefill_ttft_ms` for fixed chunks and
    :func:`planner.roofline.shrinking_schedule_ttft_ms` for the shrinking schedule.
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
      / F_eff`` on full-attention layers — the cost ``T*`` is defined by, so
      ``chunk_ms <= X`` exactly when ``T <= T*``;
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


# --------------------------------------------------------------------------- KV transfer


class PrefillSource(StrEnum):
    """Where a KV-transfer analysis got its prefill time from."""

    GIVEN = "given"
    ROOFLINE = "roofline"
    NONE = "none"


class KvTransferRow(_Result):
    """Shipping one prompt's KV cache over one link.

    ``bandwidth_gb_per_s``: the link's per-direction bandwidth (GB/s = 1e9 bytes/s);
    ``parallel_links``: links used at once (the prefill replica's ``tp``: each GPU
    ships its own shard); ``transfer_ms``:
    :func:`planner.roofline.kv_transfer_ms` ``= kv_bytes / (bandwidth x parallel_links)
    + latency``; ``exposed_ms``: what layer-wise streaming leaves on TTFT,
    :func:`planner.roofline.exposed_transfer_ms` ``(transfer, prefill, overlap, L)``
    (the whole transfer when no prefill time is known).
    """

    link: str
    kind: str
    bandwidth_gb_per_s: float
    latency_us: float
    parallel_links: int
    transfer_ms: float
    exposed_ms: float


class KvTransferTable(_Result):
    """The KV transfer of a disaggregated prefill (DOMAIN.md section 4).

    ``kv_bytes_per_token``: :func:`planner.architecture.kv_bytes_per_token`;
    ``kv_gb``: the cache of one ``prompt_tokens`` sequence,
    :func:`planner.architecture.kv_bytes_for_sequence` / 1e9 (sliding windows cap it).
    ``prefill_ms``: the prefill the transfer streams behind (given, or
    :func:`planner.roofline.prefill_ms` on ``prefill_replica``; None when unknown).
    """

    model: str
    prompt_tokens: int
    kv_dtype: str
    kv_bytes_per_token: float
    kv_gb: float
    num_layers: int
    overlap_fraction: float
    prefill_ms: float | None
    prefill_source: PrefillSource
    prefill_replica: ReplicaSummary | None
    rows: list[KvTransferRow]
    notes: list[str]


def kv_transfer_table(
    catalog: Catalog,
    model_id: str,
    *,
    prompt_tokens: int,
    kv_dtype: Dtype | str = "bf16",
    link_ids: Sequence[str] | None = None,
    bandwidths_gb_per_s: Sequence[float] | None = None,
    prefill_ms: float | None = None,
    gpu_id: str | None = None,
    tp: int = 1,
    dtype: Dtype | str = "bf16",
    mfu: float | None = None,
    overlap_fraction: float = DEFAULT_KV_STREAM_OVERLAP,
) -> KvTransferTable:
    """The KV-transfer analysis of one ``prompt_tokens`` prompt of ``model_id``.

    Links: the catalog links ``link_ids`` and plain bandwidths
    ``bandwidths_gb_per_s`` (GB/s per direction, no latency), in that order; with
    neither, every catalog link, fastest first. Prefill time: ``prefill_ms`` if
    given, else :func:`planner.roofline.prefill_ms` of the prompt on ``tp`` x
    ``gpu_id`` (causal attention, overhead included), else unknown (exposed =
    transfer). With ``gpu_id`` each of the ``tp`` GPUs ships its shard over its
    own link (``parallel_links = tp``), as the planner does.

    Checks (DOMAIN.md): 4,096 tokens of llama-2-7b (MHA) are 2.147 GB, of a GQA-8
    7-8B model 0.537 GB; over 400 / 64 / 25 GB/s they take 5.4 / 33.6 / 85.9 ms
    and 1.3 / 8.4 / 21.5 ms.
    """
    model = _get_model(catalog, model_id)
    _check_prompt(model, prompt_tokens)
    k_dtype = _kv_dtype(kv_dtype)
    if not 0.0 <= overlap_fraction <= 1.0:
        raise PlanningError.for_field(
            "overlap_fraction", f"must be in [0, 1], got {overlap_fraction}"
        )
    links: list[Link] = []
    for lid in link_ids or ():
        link = catalog.links.get(lid)
        if link is None:
            known = ", ".join(sorted(catalog.links))
            raise UnknownEntryError.for_field("links", f"unknown link {lid!r} (known: {known})")
        links.append(link)
    custom = list(bandwidths_gb_per_s or ())
    for bw in custom:
        _check_positive("bandwidths_gb_per_s", bw)
    if not links and not custom:
        links = sorted(catalog.links.values(), key=lambda lk: (-lk.bandwidth_gb_per_s, lk.id))

    replica: rl.Replica | None = None
    notes: list[str] = []
    if prefill_ms is not None and gpu_id is not None:
        raise PlanningError.for_field("prefill_ms", "give a prefill time or a GPU, not both")
    if prefill_ms is not None:
        if not (prefill_ms >= 0 and math.isfinite(prefill_ms)):
            raise PlanningError.for_field("prefill_ms", f"must be >= 0, got {prefill_ms}")
        source = PrefillSource.GIVEN
    elif gpu_id is not None:
        replica = rl.build_replica(
            catalog, model_id, gpu_id, tp=tp, dtype=dtype, kv_dtype=k_dtype, mfu=mfu
        )
        prefill_ms = rl.prefill_ms(replica, prompt_tokens)
        source = PrefillSource.ROOFLINE
    else:
        source = PrefillSource.NONE
        notes.append(
            "no prefill time (give one, or a GPU to compute it): "
            "the whole transfer is counted as exposed"
        )
    parallel = replica.tp if replica is not None else 1
    kv_bytes = arch.kv_bytes_for_sequence(model, prompt_tokens, k_dtype)

    def row(label: str, kind: str, bw: float, latency_us: float) -> KvTransferRow:
        transfer = rl.kv_transfer_ms(kv_bytes, bw * parallel, latency_us)
        if prefill_ms is None:
            exposed = transfer
        else:
            exposed = rl.exposed_transfer_ms(
                transfer, prefill_ms, overlap_fraction, num_layers=model.num_layers
            )
        return KvTransferRow(
            link=label,
            kind=kind,
            bandwidth_gb_per_s=bw,
            latency_us=latency_us,
            parallel_links=parallel,
            transfer_ms=transfer,
            exposed_ms=exposed,
        )

    rows = [row(lk.id, str(lk.kind), lk.bandwidth_gb_per_s, lk.latency_us) for lk in links]
    rows += [row(f"{bw:g} GB/s", "custom", bw, 0.0) for bw in custom]
    return KvTransferTable(
        model=model.id,
        prompt_tokens=prompt_tokens,
        kv_dtype=str(k_dtype),
        kv_bytes_per_token=arch.kv_bytes_per_token(model, k_dtype),
        kv_gb=kv_bytes / 1e9,
        num_layers=model.num_layers,
        overlap_fraction=overlap_fraction,
        prefill_ms=prefill_ms,
        prefill_source=source,
        prefill_replica=None if replica is None else ReplicaSummary.of(replica),
        rows=rows,
        notes=notes,
    )


# --------------------------------------------------------------------------- pool ratio


class PrefillCost(StrEnum):
    """How prefill GPU-seconds are priced.

    ``roofline``: :func:`planner.sizing.prefill_gpu_s` (attention growing with
    context, weight-read floor, TP communication, step overhead);
    ``first-order``: :func:`planner.sizing.first_order_prefill_gpu_s`, DOMAIN.md
    section 5's ``P x (1 - hit) x 2 N_active / F_eff`` (weights only, flat per token).
    """

    ROOFLINE = "roofline"
    FIRST_ORDER = "first-order"


class DecodePointSource(StrEnum):
    """Where a row's decode batch and TPOT came from."""

    GIVEN = "given"
    COST_MODEL = "cost model"


class PoolRatioRow(_Result):
    """One workload's per-request work and pool ratio (DOMAIN.md section 5).

    ``prompt_tokens`` / ``output_tokens``: the workload's mean lengths P and G;
    ``prefix_hit_rate``: the share of P already cached; ``decode_batch`` B and
    ``tpot_ms``: the decode operating point (``decode_point`` says whether given or
    from the cost model, see :func:`pool_ratio_table`); ``tpot_budget_ms``: the
    budget B was sized against (None when both were given);
    ``prefill_gpu_s``: per-request prefill work (``prefill_cost``);
    ``decode_gpu_s``: :func:`planner.sizing.decode_gpu_s` ``= tp x G x TPOT / B``;
    ``ratio``: :func:`planner.sizing.pool_ratio`, prefill GPUs per decode GPU.
    """

    workload: str
    prompt_tokens: float
    output_tokens: float
    prefix_hit_rate: float
    decode_batch: int
    tpot_ms: float
    tpot_budget_ms: float | None
    decode_point: DecodePointSource
    prefill_gpu_s: float
    decode_gpu_s: float
    ratio: float


class MixShare(_Result):
    """One class of a mix: its share of requests and of the blend's prefill and decode
    work (``w_i x prefill_i / sum_j w_j x prefill_j``, likewise for decode)."""

    workload: str
    request_share: float
    prefill_load_share: float
    decode_load_share: float


class PoolRatioBlend(_Result):
    """A traffic mix by request count: per average request, ``prefill_gpu_s = sum_i w_i
    x prefill_i``, ``decode_gpu_s = sum_i w_i x decode_i``, ``ratio`` their quotient."""

    prefill_gpu_s: float
    decode_gpu_s: float
    ratio: float
    shares: list[MixShare]


class PoolRatioTable(_Result):
    """Prefill/decode pool ratios of workloads on one replica (DOMAIN.md section 5)."""

    replica: ReplicaSummary
    prefill_cost: PrefillCost
    rows: list[PoolRatioRow]
    blend: PoolRatioBlend | None
    notes: list[str]


def decode_context_tokens(prompt_tokens: float, output_tokens: float) -> float:
    """Mean context of a resident decoding sequence: ``P + G/2`` (tokens), as the
    planner's screening uses for both the memory cap and the step time."""
    return prompt_tokens + output_tokens / 2.0


def _decode_point(
    replica: rl.Replica,
    workload: Workload,
    context: float,
    tpot_ms: float | None,
    decode_batch: int | None,
) -> tuple[int, float, float | None, DecodePointSource]:
    """(B, TPOT, TPOT budget, source) for one workload; see :func:`pool_ratio_table`."""
    if tpot_ms is not None and decode_batch is not None:
        return decode_batch, tpot_ms, None, DecodePointSource.GIVEN
    b_mem = rl.max_resident_batch(replica, context)
    if b_mem < 1:
        raise PlanningError.for_field(
            "workloads",
            f"{workload.id}: one sequence of {context:,.0f} tokens needs more KV memory than "
            f"the {rl.kv_capacity_bytes(replica) / 1e9:.1f} GB left after weights",
        )
    if decode_batch is not None:
        if decode_batch > b_mem:
            raise PlanningError.for_field(
                "decode_batch",
                f"{decode_batch} sequences of {context:,.0f} tokens ({workload.id}) exceed "
                f"the KV cache (at most {b_mem})",
            )
        step = rl.decode_step_ms(replica, decode_batch, context)
        return decode_batch, step, None, DecodePointSource.COST_MODEL
    budget = workload.slo.tpot_ms if tpot_ms is None else tpot_ms
    try:
        point = sz.decode_operating_point(replica, context, context, tpot_budget_ms=budget)
    except PlanningError as err:
        field = "workloads" if tpot_ms is None else "tpot_ms"
        what = f"{workload.id}'s SLO TPOT" if tpot_ms is None else f"{workload.id}: TPOT"
        step1 = rl.decode_step_ms(replica, 1, context)
        raise PlanningError.for_field(
            field,
            f"{what} {budget:g} ms is below a single-sequence decode step "
            f"({step1:.1f} ms at {context:,.0f} tokens of context)",
        ) from err
    return point.batch, point.tpot_ms, budget, DecodePointSource.COST_MODEL


def pool_ratio_table(
    catalog: Catalog,
    model_id: str,
    gpu_id: str,
    workload_ids: Sequence[str],
    *,
    tp: int = 1,
    dtype: Dtype | str = "bf16",
    kv_dtype: Dtype | str | None = None,
    mfu: float | None = None,
    mbu: float | None = None,
    tpot_ms: float | None = None,
    decode_batch: int | None = None,
    prefix_hit_rate: float | None = None,
    mix: Mapping[str, float] | None = None,
    prefill_cost: PrefillCost | str = PrefillCost.ROOFLINE,
) -> PoolRatioTable:
    """Prefill and decode GPU-seconds per request, and their ratio, per workload.

    For each workload (its mean prompt P and output G; ``prefix_hit_rate``
    overrides every class's catalog hit rate):

    - prefill: ``prefill_cost`` (:class:`PrefillCost`) of P with ``P x hit`` cached;
    - decode point at mean context ``s = P + G/2``: both ``tpot_ms`` and
      ``decode_batch`` given: taken as they are; only ``decode_batch``: TPOT =
      :func:`planner.roofline.decode_step_ms` ``(B, s)`` (B must fit memory); else
      :func:`planner.sizing.decode_operating_point`: B = the largest batch that fits
      the KV cache (:func:`planner.roofline.max_resident_batch` at s) and keeps the
      decode step within the TPOT budget (``tpot_ms``, default the workload's SLO
      TPOT), TPOT = the step time at that B;
    - ``decode = tp x G x TPOT / B``, ``ratio = prefill / decode``.

    ``mix`` (workload -> request share, normalized to sum 1; its classes join the
    rows) adds a :class:`PoolRatioBlend`.

    Check (DOMAIN.md section 5, the assumptions of tests/test_sizing.py):
    llama-3.1-8b on one H100 SXM at MFU 0.5, first-order prefill, no prefix hits,
    decode at chat's point for every class (B = 178, TPOT = 30.2 ms): chat 1.27,
    agent 11.6, and in an 80/20 mix the agents carry 92% of the prefill load.
    """
    replica = rl.build_replica(
        catalog, model_id, gpu_id, tp=tp, dtype=dtype, kv_dtype=kv_dtype, mfu=mfu, mbu=mbu
    )
    try:
        cost = PrefillCost(prefill_cost)
    except ValueError:
        known = ", ".join(c.value for c in PrefillCost)
        raise PlanningError.for_field(
            "prefill_cost", f"unknown prefill cost {prefill_cost!r} (known: {known})"
        ) from None
    if tpot_ms is not None:
        _check_positive("tpot_ms", tpot_ms)
    if decode_batch is not None and (
        isinstance(decode_batch, bool) or not isinstance(decode_batch, int) or decode_batch < 1
    ):
        raise PlanningError.for_field(
            "decode_batch", f"must be a positive integer, got {decode_batch!r}"
        )
    if prefix_hit_rate is not None and not 0.0 <= prefix_hit_rate < 1.0:
        raise PlanningError.for_field(
            "prefix_hit_rate", f"must be in [0, 1), got {prefix_hit_rate}"
        )
    shares: dict[str, float] = {}
    if mix is not None:
        if not mix:
            raise PlanningError.for_field("mix", "give at least one class=share")
        for wid, w in mix.items():
            if not (w >= 0 and math.isfinite(w)):
                raise PlanningError.for_field("mix", f"{wid}: share must be >= 0, got {w}")
        total = sum(mix.values())
        if total <= 0:
            raise PlanningError.for_field("mix", "shares must not all be 0")
        shares = {wid: w / total for wid, w in mix.items()}
    ids = list(dict.fromkeys([*workload_ids, *shares]))
    if not ids:
        raise PlanningError.for_field("workloads", "give at least one workload (or a mix)")
    for wid in ids:
        if wid not in catalog.workloads:
            known = ", ".join(sorted(catalog.workloads))
            field = "workloads" if wid in workload_ids else "mix"
            raise UnknownEntryError.for_field(field, f"unknown workload {wid!r} (known: {known})")

    rows: list[PoolRatioRow] = []
    for wid in ids:
        wl = catalog.workloads[wid]
        p, g = wl.prompt_tokens.mean_tokens, wl.output_tokens.mean_tokens
        hit = wl.prefix_hit_rate if prefix_hit_rate is None else prefix_hit_rate
        if p + g > replica.model.max_context_tokens:
            raise PlanningError.for_field(
                "workloads",
                f"{wid}: prompt + output ({p + g:,.0f} tokens) exceed {replica.model.id}'s "
                f"context window ({replica.model.max_context_tokens:,})",
            )
        context = decode_context_tokens(p, g)
        b, tpot, budget, source = _decode_point(replica, wl, context, tpot_ms, decode_batch)
        if cost is PrefillCost.FIRST_ORDER:
            pre = sz.first_order_prefill_gpu_s(replica, p, hit)
        else:
            pre = sz.prefill_gpu_s(replica, p, hit)
        dec = sz.decode_gpu_s(replica.tp, g, tpot, b)
        rows.append(
            PoolRatioRow(
                workload=wid,
                prompt_tokens=p,
                output_tokens=g,
                prefix_hit_rate=hit,
                decode_batch=b,
                tpot_ms=tpot,
                tpot_budget_ms=budget,
                decode_point=source,
                prefill_gpu_s=pre,
                decode_gpu_s=dec,
                ratio=sz.pool_ratio(pre, dec),
            )
        )

    blend = None
    if shares:
        by_id = {r.workload: r for r in rows}
        pre = sum(w * by_id[wid].prefill_gpu_s for wid, w in shares.items())
        dec = sum(w * by_id[wid].decode_gpu_s for wid, w in shares.items())
        blend = PoolRatioBlend(
            prefill_gpu_s=pre,
            decode_gpu_s=dec,
            ratio=sz.pool_ratio(pre, dec),
            shares=[
                MixShare(
                    workload=wid,
                    request_share=w,
                    prefill_load_share=w * by_id[wid].prefill_gpu_s / pre if pre > 0 else 0.0,
                    decode_load_share=w * by_id[wid].decode_gpu_s / dec,
                )
                for wid, w in shares.items()
            ],
        )
    notes = []
    if tpot_ms is None or decode_batch is None:
        notes.append(
            "each class decodes at its own operating point (mean context P + G/2); long-context "
            "classes get small batches, so their decode GPU-seconds grow"
        )
    return PoolRatioTable(
        replica=ReplicaSummary.of(replica),
        prefill_cost=cost,
        rows=rows,
        blend=blend,
        notes=notes,
    )


__all__ = [
    "DEFAULT_KV_STREAM_OVERLAP",
    "DEFAULT_MIN_BUDGET_TOKENS",
    "ChunkBudgetRow",
    "ChunkBudgetTable",
    "DecodePointSource",
    "KvTransferRow",
    "KvTransferTable",
    "MixShare",
    "PoolRatioBlend",
    "PoolRatioRow",
    "PoolRatioTable",
    "PrefillCost",
    "PrefillSource",
    "ReplicaSummary",
    "ShrinkingSchedule",
    "chunk_budget_row",
    "chunk_budget_table",
    "decode_context_tokens",
    "default_budgets",
    "fixed_chunks",
    "kv_transfer_table",
    "overlapped_step_ms",
    "pool_ratio_table",
    "schedule_ttft_ms",
]
