"""DOMAIN.md section 5: prefill and decode GPU-seconds per request and the
prefill/decode pool ratio per workload and for a mix (:func:`pool_ratio_table`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from enum import StrEnum

from catalog.schema import Catalog, Dtype, Workload
from planner import roofline as rl
from planner import sizing as sz
from planner.analyses.common import ReplicaSummary, _check_positive, _Result
from planner.errors import PlanningError, UnknownEntryError

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
