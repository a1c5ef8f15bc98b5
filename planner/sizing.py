"""Per-request work of each phase in GPU-seconds, and the prefill/decode pool ratio.

DOMAIN.md section 5: per request,

    prefill = P x (1 - prefix_hit) x cost_per_token / F_eff
    decode  = G x TPOT / B

(GPU-seconds = replica-seconds x tp), so the ratio of prefill to decode GPUs is
a property of the workload. :func:`prefill_gpu_s` prices prefill with the full
roofline (attention growing with context, weight-read floor, TP communication,
step overhead); :func:`first_order_prefill_gpu_s` is the doc's one-line formula
at a fixed cost per token.

Assumptions behind DOMAIN.md's "chat wants about 1.3 prefill GPUs per decode GPU,
an agent about 12" (tests/test_sizing.py): llama-3.1-8b on one H100 SXM (bf16,
MFU 0.5, MBU 0.7, 2 ms step overhead); prefill at ``2 x N_active`` FLOP per new
token (no attention term); decode at chat's operating point for both classes:
B = the resident-batch cap at chat's context (P + G = 2,300 tokens: 178
sequences) and TPOT = the roofline step at that batch (30.2 ms). Chat then
gives 1.27 and the agent (P = 97,000, G = 1,600, no prefix hits) 11.6. Their
quotient is ``(97,000 / 2,000) x (300 / 1,600) = 9.1``, whatever the model and
GPU: the doc's two figures hold only while both costs per token are flat in
context. With the agent's own decode point (its 98K-token sequences cap the
batch at 4 on one H100) decode dominates and the agent's ratio falls below
chat's.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner import architecture as arch
from planner.errors import PlanningError
from planner.roofline import (
    Replica,
    decode_step_ms,
    effective_flops,
    max_resident_batch,
    prefill_ms,
)


def _check_hit(prefix_hit_rate: float) -> None:
    if not 0.0 <= prefix_hit_rate < 1.0:
        raise PlanningError.for_field(
            "prefix_hit_rate", f"must be in [0, 1), got {prefix_hit_rate}"
        )


def prefill_gpu_s(
    replica: Replica,
    prompt_tokens: float,
    prefix_hit_rate: float,
    *,
    include_overhead: bool = True,
) -> float:
    """Prefill work of one request (GPU-seconds):
    ``tp x prefill_ms(P, cached = P x hit) / 1000``.

    The ``P x (1 - hit)`` new tokens attend to the ``P x hit`` cached ones
    (:func:`planner.roofline.prefill_ms`). More hits never cost more.
    """
    _check_hit(prefix_hit_rate)
    if prompt_tokens < 0:
        raise PlanningError.for_field("prompt_tokens", f"must be >= 0, got {prompt_tokens}")
    cached = prompt_tokens * prefix_hit_rate
    t_ms = prefill_ms(replica, prompt_tokens, cached, include_overhead=include_overhead)
    return replica.tp * t_ms / 1e3


def first_order_prefill_gpu_s(
    replica: Replica,
    prompt_tokens: float,
    prefix_hit_rate: float,
    context_tokens: float = 0.0,
) -> float:
    """DOMAIN.md section 5's prefill work (GPU-seconds):
    ``tp x P x (1 - hit) x flops_per_token(context_tokens) / F_eff``.

    A fixed cost per token: ``context_tokens = 0`` prices weights only
    (``2 x N_active``); no weight-read floor, communication or overhead.
    """
    _check_hit(prefix_hit_rate)
    per_token = arch.flops_per_token(replica.model, context_tokens)
    return (
        replica.tp * prompt_tokens * (1.0 - prefix_hit_rate) * per_token / effective_flops(replica)
    )


def decode_gpu_s(replica_tp: int, output_tokens: float, tpot_ms: float, batch: float) -> float:
    """Decode work of one request (GPU-seconds): ``tp x G x TPOT / B``.

    Each of the G steps lasts TPOT on ``tp`` GPUs and is shared by B sequences.
    """
    if replica_tp < 1:
        raise PlanningError.for_field("tp", f"must be >= 1, got {replica_tp}")
    if batch <= 0:
        raise PlanningError.for_field("batch", f"must be > 0, got {batch}")
    if tpot_ms < 0 or output_tokens < 0:
        raise PlanningError.for_field("tpot_ms", "tpot_ms and output_tokens must be >= 0")
    return replica_tp * output_tokens * tpot_ms / 1e3 / batch


def pool_ratio(prefill_gpu_s: float, decode_gpu_s: float) -> float:
    """Prefill GPUs per decode GPU: ``prefill_gpu_s / decode_gpu_s`` (dimensionless)."""
    if decode_gpu_s <= 0:
        raise PlanningError.for_field("decode_gpu_s", f"must be > 0, got {decode_gpu_s}")
    return prefill_gpu_s / decode_gpu_s


@dataclass(frozen=True)
class DecodePoint:
    """A decode operating point: ``batch`` sequences per step, ``tpot_ms`` per step."""

    batch: int
    tpot_ms: float


def decode_operating_point(
    replica: Replica,
    max_context_tokens: float,
    mean_context_tokens: float,
    tpot_budget_ms: float | None = None,
) -> DecodePoint:
    """The largest decode batch that fits memory (and the TPOT budget, if given).

    ``B = max_resident_batch(max_context)``, lowered while
    ``decode_step_ms(B, mean_context) > tpot_budget_ms``; ``tpot_ms`` is the step
    time at that B. Raises :class:`PlanningError` (field ``tpot_budget_ms``) when
    even one sequence misses the budget, and (field ``context_tokens``) when not
    one sequence fits.
    """
    b_max = max_resident_batch(replica, max_context_tokens)
    if b_max < 1:
        raise PlanningError.for_field(
            "context_tokens",
            f"no {max_context_tokens:g}-token sequence fits the KV cache of this replica",
        )
    b = b_max
    if tpot_budget_ms is not None:
        if decode_step_ms(replica, 1, mean_context_tokens) > tpot_budget_ms:
            raise PlanningError.for_field(
                "tpot_budget_ms", f"{tpot_budget_ms} ms is below a single-sequence decode step"
            )
        if decode_step_ms(replica, b, mean_context_tokens) > tpot_budget_ms:
            lo, hi = 1, b  # step time grows with the batch: bisect the last feasible one
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if decode_step_ms(replica, mid, mean_context_tokens) <= tpot_budget_ms:
                    lo = mid
                else:
                    hi = mid
            b = lo
    return DecodePoint(batch=b, tpot_ms=decode_step_ms(replica, b, mean_context_tokens))


__all__ = [
    "DecodePoint",
    "decode_gpu_s",
    "decode_operating_point",
    "first_order_prefill_gpu_s",
    "pool_ratio",
    "prefill_gpu_s",
]
