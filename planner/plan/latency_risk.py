"""Latencies at the plan's confidence: where a pool's predicted TTFT or TPOT would miss
its class's SLO on a GPU as slow as the pool's capacity derate assumes.

A plan derates each pool's capacity by ``d = exp(-z_c sigma_down)``
(``planner.risk.capacity_derate``): the pool carries its rate with probability
``confidence`` if the GPU's factors are as far off as their measured spread allows. On
such a GPU every kernel runs ``1 / d`` times slower, so the pool's latencies grow by that
factor too (first-order; :func:`latency_at_confidence_ms`). Unless the request holds the
SLOs at its confidence (``risk.hold_latency``, planner.candidates.confidence), a pool
whose latency at the confidence passes the SLO is named in the plan's warnings: its
capacity holds at the confidence, its latency only as predicted. The check is a lower
bound (:func:`latency_at_confidence_ms`): a pool it passes may still miss on the slow
GPU, which only ``hold_latency`` screens for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from catalog.schema import Slo
from planner.plan.models import PoolPlan
from planner.request import RiskSpec

#: The words every latency warning ends with (reports count them: planner.report.blocks).
LATENCY_RISK_MARK = "(risk.hold_latency: true sizes for it)"


def latency_at_confidence_ms(latency_ms: float, derate: float) -> float:
    """A predicted latency on a GPU as slow as the capacity derate ``derate``
    (dimensionless, in (0, 1]) assumes: ``latency_ms / derate`` (ms). First-order, and a
    lower bound for a loaded pool: at the same rate the slow GPU is busier too, so its
    queueing wait (TTFT) and its batch (TPOT, Little's law) grow faster than ``1 /
    derate``, while fixed costs (KV transfer, the serving stack) grow slower. 800 ms at
    derate 0.8: 1,000 ms."""
    if not 0.0 < derate <= 1.0:
        raise ValueError(f"derate {derate!r} outside (0, 1]")
    return latency_ms / derate


def latency_risk_warnings(
    pools: Sequence[PoolPlan], slos: Mapping[str, Slo], risk: RiskSpec
) -> list[str]:
    """One warning per pool and latency (TTFT, TPOT) whose
    :func:`latency_at_confidence_ms` at the pool's ``capacity_derate`` passes its class's
    SLO (``slos`` by class name), when the request does not hold latencies at its
    confidence; none otherwise, and none at confidence 0.5 (``d = 1``)."""
    if risk.hold_latency:
        return []
    out = []
    for p in pools:
        d, slo = p.capacity_derate, slos.get(p.class_name)
        if d is None or d >= 1.0 or slo is None or p.rate_rps <= 0:
            continue
        for name, value, limit in (
            ("TTFT", p.predicted_ttft_ms, slo.ttft_ms),
            ("TPOT", p.predicted_tpot_ms, slo.tpot_ms),
        ):
            if value is None or value > limit * (1 + 1e-6):
                continue  # not predicted, or already over the SLO (meets_slo says so)
            slow = latency_at_confidence_ms(value, d)
            if slow > limit * (1 + 1e-6):
                out.append(
                    f"class {p.class_name}: {p.role.value} pool on {p.gpu}, "
                    f"p{slo.percentile:g} {name} {value:,.1f} ms would be {slow:,.1f} ms "
                    f"on a GPU as slow as the {risk.confidence:.0%} capacity derate assumes "
                    f"(x{1 / d:.2f}, derate sigma {p.derate_sigma_log:.2f}), over its "
                    f"{limit:,g} ms SLO: capacity holds at that confidence, this latency "
                    f"only as predicted {LATENCY_RISK_MARK}"
                )
    return out
