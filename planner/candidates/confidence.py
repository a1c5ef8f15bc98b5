"""Latency SLOs held at the request's confidence, as capacities are (planner.risk).

A plan derates every candidate's capacity by ``d = exp(-z_c sigma_down)`` so that the
pool carries its rate with probability ``confidence`` if the GPU's factors are as far
off as their measured spread allows (``planner.risk.capacity_derate``). On such a GPU
every kernel runs ``1 / d`` times slower, so latencies grow by that factor too: a
candidate whose predicted TTFT or TPOT meets the class's SLO with no margin would miss
it there. Screening a GPU's candidates against ``SLO x d`` keeps the latency SLOs at the
same confidence as the capacity: predicted latency ``<= SLO x d`` means ``latency / d <=
SLO`` on the slow GPU. First-order: fixed costs (a KV transfer over the network, the
serving stack) are scaled too, which errs slow. At confidence 0.5 (``d = 1``) nothing
changes; a higher confidence only tightens the SLOs, so the plan never gets cheaper.

Three-class example at 0.8: the coding agent's prefill on GB200 (analogy spread 0.73,
``d = 0.541``) was predicted at 642 ms for an 800 ms TTFT SLO, 1,187 ms on a GPU as slow
as its derate assumes; screened against 433 ms it is not bought there.
"""

from __future__ import annotations

from dataclasses import replace

from planner.request import ResolvedClass, RiskSpec


def slo_at_confidence_ms(slo_ms: float, derate: float) -> float:
    """The latency a candidate must be predicted at (ms) so that it meets ``slo_ms`` on a
    GPU as slow as its capacity derate ``derate`` (dimensionless, in (0, 1];
    ``planner.risk.capacity_derate`` of the GPU's derate spread at the request's
    confidence) assumes: ``slo_ms x derate``. 1,000 ms at derate 0.8: 800 ms."""
    if not 0.0 < derate <= 1.0:
        raise ValueError(f"derate {derate!r} outside (0, 1]")
    return slo_ms * derate


def class_at_confidence(cls: ResolvedClass, derate: float, risk: RiskSpec) -> ResolvedClass:
    """``cls`` with its TTFT and TPOT SLOs each :func:`slo_at_confidence_ms` (the
    percentile kept) where the request holds latencies at its confidence
    (``risk.hold_latency``); ``cls`` itself otherwise, or at ``derate`` 1."""
    if not risk.hold_latency or derate >= 1.0:
        return cls
    slo = cls.slo.model_copy(
        update={
            "ttft_ms": slo_at_confidence_ms(cls.slo.ttft_ms, derate),
            "tpot_ms": slo_at_confidence_ms(cls.slo.tpot_ms, derate),
        }
    )
    return replace(cls, slo=slo)
