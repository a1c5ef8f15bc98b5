"""The numbers a plan predicts per pool and per token: percentile TTFT and TPOT of a
pool at its rate and replicas (queueing model), tokens per hour, $ per million tokens;
each with its formula and units.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist

from planner import kernels as kn
from planner import queueing
from planner import roofline as rl
from planner.candidates import Candidate, ClassFigures
from planner.request import ResolvedRequest
from solver.problem import PoolRole


def pool_ttft_ms(cand: Candidate, rate_rps: float, replicas: int) -> float | None:
    """Predicted TTFT at the SLO percentile for a pool carrying ``rate_rps`` (ms):

    ``wait_q(M/G/c, c = replicas) + prefill of the percentile prompt + the step already
    scheduled (aggregated pools, :attr:`Candidate.overlap_ttft_ms`) + exposed KV transfer
    + the serving stack's latency`` (:attr:`Candidate.stack_ttft_ms`); None for decode
    pools (their class's TTFT is set by prefill).
    """
    if cand.service_mean_ms is None:
        return None
    wait_s = queueing.mgc_wait_quantile_s(
        rate_rps,
        cand.service_mean_ms / 1000.0,
        max(1, replicas),
        cand.quantile,
        cand.service_cv2 or 0.0,
    )
    return (
        wait_s * 1000.0
        + (cand.service_q_ms or 0.0)
        + cand.overlap_ttft_ms
        + cand.transfer_exposed_ms
        + cand.stack_ttft_ms
    )


def percentile_batch(
    cand: Candidate, rate_rps: float, replicas: int, tpot_at: Callable[[float], float]
) -> float:
    """Resident sequences per replica at the SLO percentile: ``min(B, L + z_q sqrt(L))``,
    with ``L`` the mean resident sequences per replica at the pool's operating point,
    the fixed point of Little's law ``L = rate x G x tpot_at(L) / replicas``
    (:func:`littles_law_operating_point`; ``tpot_at``: the pool's TPOT at a batch of b
    sequences, ms; B when the pool saturates). The step of the max batch B would
    overstate ``L``: a pool below B runs shorter steps, so fewer sequences are
    resident. The 80/20 example's agent decode pool (B 30, prompts of ~97k tokens, 85%
    loaded): its p90 TPOT is 29.1 ms at the operating point against 45.3 ms at the max
    batch's step; the simulation measures 24.9 ms (mean batch 9.8)."""
    if cand.config.max_batch is None or cand.step_ms is None:
        return 0.0
    cap = float(cand.config.max_batch)
    per_replica = rate_rps * cand.output_mean_tokens / max(1, replicas) / 1e3
    mean = littles_law_operating_point(per_replica, tpot_at, cap)
    z = NormalDist().inv_cdf(cand.quantile)
    return max(1.0, min(cap, mean + z * math.sqrt(max(mean, 0.0))))


def littles_law_operating_point(
    tokens_per_ms: float, tpot_at: Callable[[float], float], max_batch: float
) -> float:
    """The mean batch ``L`` (sequences) at which a decode replica fed ``tokens_per_ms``
    output tokens per ms (its rate x mean output tokens) holds Little's law with the TPOT
    it runs at: ``L = tokens_per_ms x tpot_at(L)`` (``tpot_at`` in ms, increasing in the
    batch). The least root in ``[0, max_batch]`` (Brent's method); ``max_batch`` when
    there is none (the replica saturates: its residents wait for slots)."""
    from scipy.optimize import brentq  # imported on use: the CLI starts faster

    def excess(b: float) -> float:
        return tokens_per_ms * tpot_at(max(b, 1.0)) - b

    if tokens_per_ms <= 0:
        return 0.0
    if excess(max_batch) >= 0:
        return max_batch
    return float(brentq(excess, 0.0, max_batch, xtol=1e-6))


def pool_tpot_ms(
    cand: Candidate, fig: ClassFigures, rate_rps: float, replicas: int
) -> float | None:
    """Predicted TPOT at the SLO percentile (ms): the decode (or mixed, with the
    pool's chunk budget) step at :func:`percentile_batch` resident sequences, taken at
    the pool's operating point (the mean batch at which Little's law holds with the
    step it runs); with speculative decoding that step verifies drafts and advances each
    sequence by the acceptance length a, so TPOT is ``step / a``
    (:func:`planner.kernels.effective_tpot_ms`)."""
    if cand.config.max_batch is None:
        return None
    a = kn.tokens_per_verification_step(cand.replica.speculative)

    def step_at(b: float) -> float:
        if cand.config.role == PoolRole.AGGREGATED:
            return rl.mixed_step_ms(
                cand.replica,
                b,
                fig.decode_context_tokens,
                cand.config.chunk_budget_tokens or 0,
                fig.chunk_context_tokens,
            )
        return rl.decode_step_ms(cand.replica, b, fig.decode_context_tokens)

    def tpot_at(b: float) -> float:
        return kn.effective_tpot_ms(step_at(b), a)

    return tpot_at(percentile_batch(cand, rate_rps, replicas, tpot_at))


def tokens_per_hour(req: ResolvedRequest) -> float:
    """Prompt + output tokens processed per hour at the requested rates (tokens/hour)."""
    return 3600.0 * sum(
        c.rate_rps * (c.prompt.mean_tokens + c.output.mean_tokens) for c in req.classes
    )


def output_tokens_per_hour(req: ResolvedRequest) -> float:
    """Output tokens generated per hour at the requested rates: ``3,600 x sum over
    classes of rate x mean output tokens`` (tokens/hour)."""
    return 3600.0 * sum(c.rate_rps * c.output.mean_tokens for c in req.classes)


def cost_per_million_tokens(cost_usd_per_hour: float, req: ResolvedRequest) -> float:
    """$/hour / (tokens per hour / 1e6): US dollars per million prompt+output tokens."""
    tph = tokens_per_hour(req)
    return cost_usd_per_hour / (tph / 1e6) if tph > 0 else math.inf
