"""Waiting times under load (DOMAIN.md section 6).

Prefill pools are multi-server queues: requests arrive as a Poisson stream of
``rate_per_s``, each takes a service time on one of ``servers`` replicas. We use
Erlang C (M/M/c) for the probability of waiting and its exponential waiting-time
tail, and the Allen-Cunneen approximation for general service times (M/G/c,
incl. deterministic M/D/c). Decode pools are sized by Little's law.

Units: rates per second, times in seconds (``_s``), loads in Erlangs.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from planner.errors import PlanningError

# scipy is imported on first use (a second of the CLI's start-up otherwise): ``pdtr`` and
# ``gammaln`` by :func:`_load_special`, ``brentq`` where it is called.
_gammaln: Any = None
_pdtr: Any = None


def _load_special() -> None:
    global _gammaln, _pdtr
    from scipy.special import gammaln, pdtr

    _gammaln, _pdtr = gammaln, pdtr


#: Utilization upper bound used when searching: queues blow up at rho = 1.
_RHO_MAX = 1.0 - 1e-12
#: Bisections of [0, 1) in :func:`max_utilization_for_wait_batch` (2^-44 < 1e-13).
_BATCH_BISECTIONS = 44
#: Above this many servers Erlang B uses its closed form instead of the recursion.
_RECURSION_MAX_SERVERS = 32


def _servers(servers: int) -> int:
    """``servers`` as an int >= 1 (integral floats such as a solver's 3.0 are accepted)."""
    if type(servers) is int and servers >= 1:  # the common case, fast
        return servers
    if isinstance(servers, bool) or not isinstance(servers, numbers.Real):
        raise PlanningError.for_field("servers", f"must be a positive integer, got {servers!r}")
    if isinstance(servers, numbers.Integral) or float(servers).is_integer():
        n = int(servers)
    else:
        raise PlanningError.for_field("servers", f"must be a positive integer, got {servers!r}")
    if n < 1:
        raise PlanningError.for_field("servers", f"must be a positive integer, got {servers!r}")
    return n


def _check_quantile(quantile: float) -> None:
    if not 0.0 < quantile < 1.0:
        raise PlanningError.for_field("quantile", f"must be in (0, 1), got {quantile}")


def erlang_b_blocking_probability(servers: int, offered_load: float) -> float:
    """Erlang B (loss) probability for ``c`` servers and load ``a = lambda / mu`` (Erlangs).

    Stable recursion ``B(0) = 1``, ``B(k) = a B(k-1) / (k + a B(k-1))`` (no factorials)
    up to 32 servers; beyond, the closed form ``B = P(N = c) / P(N <= c)`` for
    ``N ~ Poisson(a)`` with scipy's ``pdtr`` and ``gammaln`` (O(1), same value).
    """
    servers = _servers(servers)
    if offered_load < 0:
        raise PlanningError.for_field("offered_load", f"must be >= 0, got {offered_load}")
    return _erlang_b(servers, offered_load)


def _erlang_b(servers: int, offered_load: float, log_factorial: float | None = None) -> float:
    """:func:`erlang_b_blocking_probability` on validated input (an int >= 1, a load >= 0);
    ``log_factorial`` is ``gammaln(servers + 1)`` when the caller has it already."""
    if servers > _RECURSION_MAX_SERVERS and offered_load > 0:
        # Closed form B = pmf(c; a) / cdf(c; a) of a Poisson(a), in log space.
        if _pdtr is None:
            _load_special()
        lf = _gammaln(servers + 1) if log_factorial is None else log_factorial
        log_pmf = servers * math.log(offered_load) - offered_load - lf
        cdf = _pdtr(servers, offered_load)
        return math.exp(log_pmf) / cdf if cdf > 0 else 1.0
    b = 1.0
    for k in range(1, servers + 1):
        b = offered_load * b / (k + offered_load * b)
    return b


def erlang_c_wait_probability(servers: int, offered_load: float) -> float:
    """Erlang C: probability an arrival waits in an M/M/c queue (dimensionless).

    ``C(c, a) = c B(c, a) / (c - a (1 - B(c, a)))`` from the Erlang B recursion,
    numerically stable for hundreds of servers; 1 when ``a >= c`` (overloaded).
    Check: ``C(2, 1) = 1/3``; ``C(1, a) = a`` (M/M/1).
    """
    servers = _servers(servers)
    b = erlang_b_blocking_probability(servers, offered_load)
    if offered_load >= servers:
        return 1.0
    return servers * b / (servers - offered_load * (1.0 - b))


def _load(rate_per_s: float, service_s: float, servers: int) -> tuple[float, float]:
    """(offered load a = lambda x S, utilization rho = a / c), validated."""
    servers = _servers(servers)
    if rate_per_s < 0:
        raise PlanningError.for_field("rate_per_s", f"must be >= 0, got {rate_per_s}")
    if service_s <= 0:
        raise PlanningError.for_field("service_s", f"must be > 0, got {service_s}")
    a = rate_per_s * service_s
    return a, a / servers


def mmc_mean_wait_s(rate_per_s: float, service_s: float, servers: int) -> float:
    """Mean queueing delay of M/M/c (s): ``W_q = C(c, a) / (c mu - lambda)``;
    inf when ``rho >= 1`` or when ``c mu - lambda`` rounds to 0 or below in floating point
    (``rho`` a hair under 1). M/M/1: ``rho / (mu - lambda)``."""
    a, rho = _load(rate_per_s, service_s, servers)
    decay = servers / service_s - rate_per_s
    if rho >= 1.0 or decay <= 0.0:
        return math.inf
    return erlang_c_wait_probability(servers, a) / decay


def mmc_wait_quantile_s(
    rate_per_s: float, service_s: float, servers: int, quantile: float
) -> float:
    """Waiting-time quantile of M/M/c (s).

    ``P(W > t) = C e^{-(c mu - lambda) t}``, so
    ``t_q = ln(C / (1 - q)) / (c mu - lambda)``; 0 when ``C <= 1 - q`` (at least a
    share q of arrivals do not wait at all); inf when ``rho >= 1``.
    """
    _check_quantile(quantile)
    a, rho = _load(rate_per_s, service_s, servers)
    decay = servers / service_s - rate_per_s
    if rho >= 1.0 or decay <= 0.0:
        return math.inf
    c_wait = erlang_c_wait_probability(servers, a)
    if c_wait <= 1.0 - quantile:
        return 0.0
    return math.log(c_wait / (1.0 - quantile)) / decay


def allen_cunneen_factor(service_cv2: float, arrival_cv2: float = 1.0) -> float:
    """Allen-Cunneen scaling of an M/M/c wait to G/G/c: ``(ca^2 + cs^2) / 2``.

    Poisson arrivals (``ca^2 = 1``): ``(1 + cs^2) / 2``; deterministic service
    (M/D/c, ``cs^2 = 0``) halves the M/M/c wait; exponential service keeps it.
    """
    if service_cv2 < 0 or arrival_cv2 < 0:
        raise PlanningError.for_field("service_cv2", f"must be >= 0, got {service_cv2}")
    return (arrival_cv2 + service_cv2) / 2.0


def mgc_mean_wait_s(
    rate_per_s: float,
    mean_service_s: float,
    servers: int,
    service_cv2: float = 1.0,
    arrival_cv2: float = 1.0,
) -> float:
    """Mean queueing delay of G/G/c (s), Allen-Cunneen:
    ``W_q ~ W_q(M/M/c) x (ca^2 + cs^2) / 2`` (exact for M/G/1, ``ca^2 = 1``:
    Pollaczek-Khinchine; Kingman's heavy-traffic formula for G/G/1)."""
    return mmc_mean_wait_s(rate_per_s, mean_service_s, servers) * allen_cunneen_factor(
        service_cv2, arrival_cv2
    )


def mgc_wait_quantile_s(
    rate_per_s: float,
    mean_service_s: float,
    servers: int,
    quantile: float,
    service_cv2: float = 1.0,
    arrival_cv2: float = 1.0,
) -> float:
    """Waiting-time quantile of G/G/c (s), Allen-Cunneen style:

    ``t_q(G/G/c) ~ t_q(M/M/c) x (ca^2 + cs^2) / 2`` with ``cs^2`` the squared
    coefficient of variation of the service time (0 for M/D/c, 1 for M/M/c) and
    ``ca^2`` that of the inter-arrival times (1 for Poisson arrivals; the request's
    ``traffic.burst_cv`` squared).
    The scaling is exact for the mean of M/G/1 and a standard engineering
    approximation for tails and for c > 1; the probability of waiting is kept
    at Erlang C.
    """
    t = mmc_wait_quantile_s(rate_per_s, mean_service_s, servers, quantile)
    return t * allen_cunneen_factor(service_cv2, arrival_cv2) if math.isfinite(t) else t


def max_utilization_for_wait(
    servers: int,
    service_s: float,
    quantile: float,
    wait_budget_s: float,
    service_cv2: float = 1.0,
    arrival_cv2: float = 1.0,
) -> float:
    """Largest utilization ``rho`` in [0, 1) whose ``quantile`` wait fits the budget.

    Solves ``mgc_wait_quantile_s(rho x c / S, S, c, q, cs^2, ca^2) = wait_budget_s`` for
    rho with :func:`scipy.optimize.brentq` (the wait grows with rho). With a zero
    budget it is the rho at which ``C(c, rho c) = 1 - q`` (a share q never waits).
    The optimizer uses it as each pool's headroom: ``servers x rho`` Erlangs.
    """
    servers = _servers(servers)
    _check_quantile(quantile)
    if service_s <= 0:
        raise PlanningError.for_field("service_s", f"must be > 0, got {service_s}")
    if wait_budget_s < 0:
        raise PlanningError.for_field("wait_budget_s", f"must be >= 0, got {wait_budget_s}")

    factor = allen_cunneen_factor(service_cv2, arrival_cv2)
    no_wait = 1.0 - quantile
    if _gammaln is None:
        _load_special()
    log_factorial = _gammaln(servers + 1) if servers > _RECURSION_MAX_SERVERS else None

    def wait_at(rho: float) -> float:
        # mgc_wait_quantile_s(rho c / S, S, c, q, cs^2, ca^2) with the input checked once
        # above: the same operations in the same order (so the same floats), without
        # re-validating on each of brentq's evaluations
        rate = rho * servers / service_s
        a = rate * service_s
        if a / servers >= 1.0:
            return math.inf
        if a >= servers:
            c_wait = 1.0
        else:
            b = _erlang_b(servers, a, log_factorial)
            c_wait = servers * b / (servers - a * (1.0 - b))
        if c_wait <= no_wait:
            return 0.0 * factor
        return math.log(c_wait / no_wait) / (servers / service_s - rate) * factor

    from scipy.optimize import brentq

    if wait_at(_RHO_MAX) <= wait_budget_s:
        return _RHO_MAX
    if wait_budget_s == 0.0:

        def excess(rho: float) -> float:
            return erlang_c_wait_probability(servers, rho * servers) - (1.0 - quantile)

        if excess(0.0) > 0:  # unreachable: C(c, 0) = 0
            return 0.0
        return float(brentq(excess, 0.0, _RHO_MAX, xtol=1e-12))

    def gap(rho: float) -> float:
        return wait_at(rho) - wait_budget_s

    return float(brentq(gap, 0.0, _RHO_MAX, xtol=1e-12))


def max_utilization_for_wait_batch(
    servers: np.ndarray,
    service_s: np.ndarray,
    quantile: np.ndarray,
    wait_budget_s: np.ndarray,
    service_cv2: np.ndarray,
    arrival_cv2: np.ndarray,
) -> np.ndarray:
    """:func:`max_utilization_for_wait` of many queues at once (utilizations in [0, 1)).

    The same G/G/c wait (``mgc_wait_quantile_s``: Erlang C from the Erlang B recursion
    up to :data:`_RECURSION_MAX_SERVERS` servers, its Poisson closed form above, times
    ``(ca^2 + cs^2) / 2``) evaluated on arrays, and its root in rho found by
    :data:`_BATCH_BISECTIONS` bisections of [0, :data:`_RHO_MAX`] (width below 1e-13):
    it agrees with the scalar brentq (``xtol`` 1e-12) within 2e-12 (absolute), not to the
    float.
    Queues whose wait at :data:`_RHO_MAX` fits get :data:`_RHO_MAX`, as the scalar
    does. Input the scalar rejects, or a zero budget (another root), is the caller's:
    ``servers`` >= 1 (integers), ``service_s`` > 0, ``wait_budget_s`` > 0, ``quantile``
    in (0, 1)."""
    # Queues sorted by servers, most first (the answer is put back in the caller's
    # order): the big ones (closed form) lead, and step k of the Erlang B recursion
    # updates only the slice of the others with at least k servers. Each queue sees the
    # same operations on the same floats as in a loop over all of them: the same answer.
    c_in = np.asarray(servers, dtype=float)
    order = np.argsort(-c_in, kind="stable")
    c = c_in[order]
    s = np.asarray(service_s, dtype=float)[order]
    budget = np.asarray(wait_budget_s, dtype=float)[order]
    no_wait = 1.0 - np.asarray(quantile, dtype=float)[order]
    factor = ((np.asarray(arrival_cv2, dtype=float) + np.asarray(service_cv2, dtype=float)) / 2.0)[
        order
    ]
    n_big = int(np.count_nonzero(c > _RECURSION_MAX_SERVERS))
    if _gammaln is None:
        _load_special()
    gammaln, pdtr = _gammaln, _pdtr
    c_big = c[:n_big]
    log_factorial = gammaln(c_big + 1.0)
    # end of the slice of recursion queues with at least k servers, for k = 1..32
    c_small = c[n_big:]
    ends = [n_big + int(np.count_nonzero(c_small >= k)) for k in range(_RECURSION_MAX_SERVERS + 1)]
    steps = int(min(c.max(initial=1.0), _RECURSION_MAX_SERVERS))

    def wait_at(rho: np.ndarray) -> np.ndarray:
        rate = rho * c / s
        a = rate * s
        b = np.ones_like(a)
        for k in range(1, steps + 1):
            end = ends[k]
            if end <= n_big:
                break
            ak, bk = a[n_big:end], b[n_big:end]
            b[n_big:end] = ak * bk / (k + ak * bk)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if n_big:
                a_big = a[:n_big]
                p_big = pdtr(c_big, a_big)
                closed = np.exp(c_big * np.log(a_big) - a_big - log_factorial) / p_big
                b[:n_big] = np.where(
                    a_big > 0,
                    np.where(p_big > 0, closed, 1.0),
                    np.where(a_big <= 0, 0.0, np.nan),  # a NaN load: NaN, as the recursion
                )
            c_wait = np.where(a >= c, 1.0, c * b / (c - a * (1.0 - b)))
            wait = np.log(c_wait / no_wait) / (c / s - rate) * factor
        wait = np.where(c_wait <= no_wait, 0.0, wait)
        return np.where(a / c >= 1.0, np.inf, wait)

    top = np.full_like(c, _RHO_MAX)
    fits = wait_at(top) <= budget
    lo, hi = np.zeros_like(c), top
    for _ in range(_BATCH_BISECTIONS):
        mid = (lo + hi) / 2.0
        below = wait_at(mid) - budget <= 0.0
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    out = np.empty_like(c)
    out[order] = np.where(fits, _RHO_MAX, (lo + hi) / 2.0)
    return out


def littles_law_resident(rate_per_s: float, output_tokens: float, tpot_ms: float) -> float:
    """Sequences resident in decode (Little's law): ``L = lambda x G x TPOT`` (sequences).

    Each request stays ``G x TPOT`` seconds in the decode batch.
    """
    if rate_per_s < 0 or output_tokens < 0 or tpot_ms < 0:
        raise PlanningError.for_field("rate_per_s", "rate, tokens and TPOT must be >= 0")
    return rate_per_s * output_tokens * tpot_ms / 1e3


def resident_peakedness(arrival_cv2: float) -> float:
    """Variance-to-mean ratio of the number of sequences resident in decode (an
    infinite-server queue) under renewal arrivals of squared CV ``ca^2``:
    ``z = (1 + ca^2) / 2`` (dimensionless). Poisson arrivals give 1 (the resident
    count is Poisson); bursty arrivals (ca^2 > 1) widen it. This is the usual
    engineering approximation of the peakedness of a G/GI/infinity queue whose
    holding time is long against the inter-arrival time (Whitt 1984 gives
    ``1 + (ca^2 - 1) x beta`` with ``beta`` = 1/2 for exponential holding times)."""
    if arrival_cv2 < 0:
        raise PlanningError.for_field("arrival_cv2", f"must be >= 0, got {arrival_cv2}")
    return (1.0 + arrival_cv2) / 2.0


__all__ = [
    "allen_cunneen_factor",
    "erlang_b_blocking_probability",
    "erlang_c_wait_probability",
    "littles_law_resident",
    "max_utilization_for_wait",
    "mgc_mean_wait_s",
    "mgc_wait_quantile_s",
    "mmc_mean_wait_s",
    "mmc_wait_quantile_s",
    "resident_peakedness",
]
