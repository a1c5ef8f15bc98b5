"""Uncertainty of the cost model's capacities: derating at a confidence, and bands.

Every GPU's efficiency factors carry their provenance and spread
(:class:`catalog.schema.Uncertainty`): ``sigma_log`` is the standard deviation of
ln(measured / predicted), the residual spread for measured (fitted or scaled) factors and the
wide prior :data:`catalog.schema.ANALOGY_SIGMA_LOG` for factors set by analogy.
A pool's true capacity is taken as the predicted one times ``exp(e)``, ``e ~
N(0, sigma_log^2)``: a first-order model in which the factors' error scales the
capacity (it leaves out that a slower step also shrinks the batch the TPOT SLO
allows, so it understates the loss of a slow GPU a little).

Two uses:

* **Derating at a confidence** (``risk.confidence`` in the request, default
  :data:`DEFAULT_CONFIDENCE`): every candidate's capacity is multiplied by
  :func:`capacity_derate` ``= exp(-z_c sigma_down)``, ``z_c = Phi^-1(confidence)``,
  ``sigma_down`` the factors' derate spread (``FactorUncertainty.derate_sigma_log``: the
  larger of the MAD term and the capacity errors' low-side terms, at most
  ``sigma_log``), before the MILP sees it, so the fleet carries its rate with that probability
  per pool. A GPU known only by analogy then wins only if it is cheaper by its
  wider margin. At confidence 0.5 (``z_c = 0``) nothing is derated: the nominal
  plan. A higher confidence only lowers capacities, so the plan never gets
  cheaper (a tested property).
* **Bands** (no extra solve): per pool, the capacity of the replicas bought at the
  ends of a central :data:`BAND_CONFIDENCE` (90%) interval of ``e``
  (:func:`capacity_band_rps`), and the replicas, hence dollars, that the pool's
  rate would need there (:func:`replicas_band`, :func:`pool_cost_band_usd_per_hour`).
  The plan's band is the sum over pools (:func:`cost_band_usd_per_hour`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from statistics import NormalDist

from catalog.schema import ANALOGY_SIGMA_LOG, Catalog, Dtype, Provenance

#: Default ``risk.confidence``. 0.5 would be the nominal plan, in which a GPU known only
#: by analogy competes on its median guess (the 80/20 example bought MI300X, a GPU with
#: no measurement, on it). 0.8 (z = 0.84), the usual P80 of capacity planning, prices
#: every pool at the capacity it exceeds four times in five: an analogy GPU (sigma 0.73)
#: is derated by 46%, the measured ones by 12% (L40S, derate spread 0.155) to 22% (H100
#: SXM, 0.288), so an unmeasured GPU must be 31-38% cheaper per predicted capacity than a
#: measured one to win. The measured derate spreads are set so that this derate, and the
#: one at 0.9, hold on each GPU's fit values
#: (planner.calibration.spreads_from_log_errors); of the public measurements of the
#: measured GPUs, 84.0% of the fit values and 90.7% of the held-out ones clear it, 90.9%
#: and 94.0% the one at 0.9 (planner.band_coverage; docs/calibration.md). 0.9 would
#: derate analogy GPUs by 61%: spare capacity for errors most pools do not have, which
#: the 90% cost band already shows and a request can still ask for.
DEFAULT_CONFIDENCE = 0.8
MIN_CONFIDENCE = 0.5
MAX_CONFIDENCE = 0.999
#: The confidences the measured downside spreads are set to hold at: the derate at each
#: is cleared by at least that share of a GPU's fit values
#: (planner.calibration.spreads_from_log_errors; planner.band_coverage checks both).
DERATE_CONFIDENCES = (DEFAULT_CONFIDENCE, 0.9)
#: Central probability of the capacity and cost bands: 90%, i.e. the 5th to 95th
#: percentile of the capacity error (z = 1.645).
BAND_CONFIDENCE = 0.90


def z_for_confidence(confidence: float) -> float:
    """The standard normal quantile ``Phi^-1(confidence)`` (dimensionless); 0 at 0.5.
    ``confidence`` must lie in [MIN_CONFIDENCE, MAX_CONFIDENCE]."""
    if not MIN_CONFIDENCE <= confidence <= MAX_CONFIDENCE:
        raise ValueError(f"confidence {confidence!r} outside [{MIN_CONFIDENCE}, {MAX_CONFIDENCE}]")
    return 0.0 if confidence == 0.5 else NormalDist().inv_cdf(confidence)


#: z of the band's upper end: Phi^-1(0.5 + BAND_CONFIDENCE / 2) = 1.645.
Z_BAND = NormalDist().inv_cdf(0.5 + BAND_CONFIDENCE / 2)


def capacity_derate(sigma_log: float, confidence: float) -> float:
    """Factor applied to a candidate's capacity at ``confidence`` (dimensionless, <= 1):
    ``exp(-z_c x sigma_log)``, ``z_c = Phi^-1(confidence)``: the capacity the pool
    exceeds with probability ``confidence`` when ln(true / predicted) ~
    N(0, sigma_log^2). Screening passes the GPU's derate spread
    (:func:`factor_uncertainty` ``.derate_sigma_log``: the downside spread measured for
    its factors, else ``sigma_log``)."""
    return math.exp(-z_for_confidence(confidence) * sigma_log)


@dataclass(frozen=True)
class FactorUncertainty:
    """Provenance and spread of the factors one candidate is priced with."""

    provenance: Provenance
    points: int
    sigma_log: float
    level_scale: float = 1.0
    #: The spread of the capacity error's low side (``Uncertainty.derate_sigma_log``):
    #: what :func:`capacity_derate` is given. None: ``sigma_log``.
    downside_sigma_log: float | None = None

    @property
    def derate_sigma_log(self) -> float:
        """The spread a derate at a confidence uses (ln units): the downside spread when
        measured, else ``sigma_log``."""
        return self.sigma_log if self.downside_sigma_log is None else self.downside_sigma_log

    @property
    def measured(self) -> bool:
        """True when measurements back the factors (fitted or scaled)."""
        return self.provenance.measured


def factor_uncertainty(
    catalog: Catalog, gpu_id: str, dtype: Dtype | str, overridden: bool = False
) -> FactorUncertainty:
    """The provenance, points and ``sigma_log`` (ln units) of ``gpu_id``'s efficiency
    factors for weights in ``dtype`` (``Gpu.efficiency_for``: the catalog's, or a
    calibration's when one is applied). ``overridden``: the request set MFU or MBU by
    hand (``efficiency`` in the request), which no fit backs: analogy with the prior.
    FP4 weights without factors measured in FP4 (``efficiency.by_dtype['fp4']``): analogy,
    ``sigma_log`` at least :data:`ANALOGY_SIGMA_LOG`, however well the GPU is measured in
    BF16/FP8 (an unmeasured format must not look better-measured than a measured one)."""
    if overridden:
        return FactorUncertainty(Provenance.ANALOGY, 0, ANALOGY_SIGMA_LOG)
    gpu = catalog.gpus[gpu_id]
    eff = gpu.efficiency_for(dtype)
    if Dtype(dtype) == Dtype.FP4 and Dtype.FP4 not in gpu.efficiency.by_dtype:
        # FP4 runs are priced from factors measured (if at all) in BF16/FP8, derated by
        # planner.kernel_floors.fp4_gemm_ratio (a kernel benchmark on Blackwell, else
        # assumed) / FP4_WEIGHT_READ_DERATE: no fit to serving runs backs them in FP4,
        # so analogy with at least the analogy prior's spread.
        return FactorUncertainty(
            Provenance.ANALOGY, 0, max(eff.sigma_log, ANALOGY_SIGMA_LOG), eff.level_scale
        )
    return FactorUncertainty(
        eff.provenance, eff.points, eff.sigma_log, eff.level_scale, eff.downside_sigma_log
    )


def capacity_band_rps(
    nominal_capacity_rps: float, sigma_log: float, z_band: float = Z_BAND
) -> tuple[float, float]:
    """The capacity of a pool at the ends of its band (requests/s): the predicted
    (nominal, not derated) capacity times ``exp(-z_band sigma_log)`` and
    ``exp(+z_band sigma_log)``; ``z_band`` = :data:`Z_BAND` (a 90% band)."""
    return (
        nominal_capacity_rps * math.exp(-z_band * sigma_log),
        nominal_capacity_rps * math.exp(z_band * sigma_log),
    )


def replicas_band(
    replicas: int,
    derate: float,
    sigma_log: float,
    z_band: float = Z_BAND,
    min_replicas: int = 1,
) -> tuple[int, int]:
    """Replicas the pool's rate would need at the ends of the band (count).

    The pool bought ``replicas`` for a capacity derated by ``derate``
    (:func:`capacity_derate`; 1 for a nominal plan), so ``replicas x derate`` would
    do at the predicted capacity. Replicas are taken to scale as 1 / capacity
    factor f and are rounded up: ``ceil(replicas x derate / f)`` for
    ``f = exp(+z_band sigma)`` (low) and ``exp(-z_band sigma)`` (high), at least
    ``min_replicas`` (the request's redundancy minimum). An approximation: the
    queueing capacity of n replicas grows a little faster than n, so the high
    end is slightly pessimistic, and no MILP is solved again."""
    if replicas <= 0:
        return (0, 0)
    base = replicas * derate
    lo = math.ceil(base * math.exp(-z_band * sigma_log) - 1e-9)
    hi = math.ceil(base * math.exp(z_band * sigma_log) - 1e-9)
    return (max(lo, min_replicas), max(hi, min_replicas))


def pool_cost_band_usd_per_hour(
    replicas: int,
    cost_usd_per_hour_per_replica: float,
    derate: float,
    sigma_log: float,
    z_band: float = Z_BAND,
    min_replicas: int = 1,
) -> tuple[float, float]:
    """A pool's cost at the ends of its band ($/hour): :func:`replicas_band` times the
    cost of one replica (tp x the GPU's price per hour)."""
    lo, hi = replicas_band(replicas, derate, sigma_log, z_band, min_replicas)
    return (lo * cost_usd_per_hour_per_replica, hi * cost_usd_per_hour_per_replica)


def cost_band_usd_per_hour(pool_bands: Iterable[tuple[float, float]]) -> tuple[float, float]:
    """The plan's cost band ($/hour): the sum of its pools' low ends and of their high
    ends. Summing treats the pools' errors as moving together (pools on one GPU type
    share its factors, and GPU types share the model's blind spots): wider than
    independent errors would give, which is the cautious side for a budget."""
    lo = hi = 0.0
    for a, b in pool_bands:
        lo += a
        hi += b
    return (lo, hi)


def price_band_usd_per_hour(
    pool_bands: Iterable[tuple[str, float, float]],
    price_ranges: Mapping[str, tuple[float, float, float]],
) -> tuple[float, float]:
    """The plan's cost band with the price ranges too ($/hour): each pool's band ends
    (:func:`pool_cost_band_usd_per_hour`, priced at the GPU's nominal $/GPU-hour) moved
    to the ends of its GPU's catalog price range, ``sum_j lo_j x low_g / nominal_g`` and
    ``sum_j hi_j x high_g / nominal_g``. ``pool_bands``: (GPU type, low, high) per pool;
    ``price_ranges``: GPU type -> (low, nominal, high) $/GPU-hour (the catalog's
    ``price.range_usd_per_hour``; a GPU without one keeps its nominal price). Capacity
    and price are taken to move together: the cautious side for a budget."""
    lo = hi = 0.0
    for gpu, a, b in pool_bands:
        low, nominal, high = price_ranges.get(gpu, (1.0, 1.0, 1.0))
        lo += a * low / nominal
        hi += b * high / nominal
    return (lo, hi)


def robust_cost_band_usd_per_hour(
    scenarios: Iterable[Iterable[tuple[str, float, float]]],
) -> tuple[float, float]:
    """The cost band of one fleet bought for several scenarios ($/hour).

    Each scenario is its pools as (GPU type, low, high) cost bands
    (:func:`pool_cost_band_usd_per_hour`). A robust fleet buys, per GPU type, what
    its most demanding scenario uses, so per type the band's ends are the largest of
    the scenarios' sums of their pools' ends on that type (the price per GPU is one per
    type, so dollars order like GPUs); the fleet's band sums the types."""
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    for pools in scenarios:
        s_lo: dict[str, float] = {}
        s_hi: dict[str, float] = {}
        for gpu, a, b in pools:
            s_lo[gpu] = s_lo.get(gpu, 0.0) + a
            s_hi[gpu] = s_hi.get(gpu, 0.0) + b
        for gpu in s_lo:
            lo[gpu] = max(lo.get(gpu, 0.0), s_lo[gpu])
            hi[gpu] = max(hi.get(gpu, 0.0), s_hi[gpu])
    return (sum(lo.values()), sum(hi.values()))
