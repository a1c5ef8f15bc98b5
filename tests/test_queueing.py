"""Erlang C, waiting-time percentiles and Little's law (DOMAIN.md section 6)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner import queueing as q
from planner.errors import PlanningError


def _erlang_c_textbook(c: int, a: float) -> float:
    """The closed form with factorials (fine for small c)."""
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


@pytest.mark.parametrize(("c", "a"), [(1, 0.5), (2, 1.0), (3, 2.5), (5, 4.0), (10, 8.0)])
def test_erlang_c_matches_closed_form(c: int, a: float) -> None:
    assert q.erlang_c_wait_probability(c, a) == pytest.approx(_erlang_c_textbook(c, a))


def test_erlang_c_table_values() -> None:
    assert q.erlang_c_wait_probability(2, 1.0) == pytest.approx(1 / 3)
    assert q.erlang_c_wait_probability(1, 0.7) == pytest.approx(0.7)  # M/M/1: C = rho
    assert q.erlang_c_wait_probability(10, 8.0) == pytest.approx(0.4092, abs=1e-4)
    assert q.erlang_c_wait_probability(3, 3.0) == 1.0
    assert q.erlang_c_wait_probability(3, 0.0) == 0.0


def test_erlang_c_is_stable_for_many_servers() -> None:
    c = q.erlang_c_wait_probability(2000, 1950.0)
    assert 0.0 < c < 1.0 and math.isfinite(c)


def test_mm1_mean_wait() -> None:
    lam, service = 0.6, 1.0
    mu = 1 / service
    rho = lam / mu
    assert q.mmc_mean_wait_s(lam, service, 1) == pytest.approx(rho / (mu - lam))
    assert q.mmc_mean_wait_s(1.0, service, 1) == math.inf


def test_mm1_wait_quantile_closed_form() -> None:
    lam, mu = 0.8, 1.0
    # P(W > t) = rho e^{-(mu - lambda) t}
    t90 = q.mmc_wait_quantile_s(lam, 1 / mu, 1, 0.9)
    assert 0.8 * math.exp(-(mu - lam) * t90) == pytest.approx(0.1)
    assert q.mmc_wait_quantile_s(0.05, 1.0, 1, 0.9) == 0.0  # C = 0.05 <= 0.1
    assert q.mmc_wait_quantile_s(2.0, 1.0, 1, 0.9) == math.inf


def test_quantile_grows_with_rate() -> None:
    waits = [q.mmc_wait_quantile_s(rate, 1.0, 4, 0.9) for rate in (2.0, 2.5, 3.0, 3.5, 3.9)]
    assert waits == sorted(waits)
    assert waits[-1] > waits[0]


def test_more_servers_less_wait() -> None:
    rate = 3.5
    waits = [q.mmc_wait_quantile_s(rate, 1.0, c, 0.9) for c in (4, 5, 6, 8)]
    assert waits == sorted(waits, reverse=True)
    means = [q.mmc_mean_wait_s(rate, 1.0, c) for c in (4, 5, 6, 8)]
    assert means == sorted(means, reverse=True)


def test_allen_cunneen_scaling() -> None:
    mm = q.mmc_wait_quantile_s(3.0, 1.0, 4, 0.95)
    assert q.mgc_wait_quantile_s(3.0, 1.0, 4, 0.95, service_cv2=1.0) == pytest.approx(mm)
    assert q.mgc_wait_quantile_s(3.0, 1.0, 4, 0.95, service_cv2=0.0) == pytest.approx(mm / 2)
    assert q.mgc_wait_quantile_s(3.0, 1.0, 4, 0.95, service_cv2=3.0) == pytest.approx(2 * mm)
    assert q.mgc_wait_quantile_s(5.0, 1.0, 4, 0.95, service_cv2=0.0) == math.inf


def test_md1_mean_wait_is_pollaczek_khinchine() -> None:
    lam, s = 0.7, 1.0
    rho = lam * s
    pk = rho * s / (2 * (1 - rho))  # M/D/1 mean wait
    assert q.mgc_mean_wait_s(lam, s, 1, service_cv2=0.0) == pytest.approx(pk)


@pytest.mark.parametrize("cv2", [0.0, 0.5, 1.0])
@pytest.mark.parametrize(("servers", "budget"), [(1, 0.5), (4, 0.2), (16, 0.05), (4, 0.0)])
def test_max_utilization_meets_budget(servers: int, budget: float, cv2: float) -> None:
    service, quantile = 1.0, 0.9
    rho = q.max_utilization_for_wait(servers, service, quantile, budget, cv2)
    assert 0.0 < rho < 1.0
    rate = rho * servers / service
    assert q.mgc_wait_quantile_s(rate, service, servers, quantile, cv2) <= budget + 1e-6
    over = (rho + 1e-3) * servers / service
    assert q.mgc_wait_quantile_s(over, service, servers, quantile, cv2) > budget


def test_max_utilization_rises_with_servers_and_budget() -> None:
    by_servers = [q.max_utilization_for_wait(c, 1.0, 0.9, 0.2) for c in (1, 2, 4, 8, 16)]
    assert by_servers == sorted(by_servers)
    by_budget = [q.max_utilization_for_wait(4, 1.0, 0.9, b) for b in (0.0, 0.1, 0.5, 2.0)]
    assert by_budget == sorted(by_budget)
    # Deterministic service allows more load than exponential at the same budget.
    assert q.max_utilization_for_wait(4, 1.0, 0.9, 0.2, 0.0) > q.max_utilization_for_wait(
        4, 1.0, 0.9, 0.2, 1.0
    )


def test_littles_law() -> None:
    # 10 req/s x 300 tokens x 20 ms = 60 resident sequences.
    assert q.littles_law_resident(10.0, 300, 20.0) == pytest.approx(60.0)


def test_validation() -> None:
    with pytest.raises(PlanningError, match="servers"):
        q.erlang_c_wait_probability(0, 1.0)
    with pytest.raises(PlanningError, match="servers"):
        q.erlang_c_wait_probability(2.5, 1.0)  # type: ignore[arg-type]
    assert q.erlang_c_wait_probability(2.0, 1.0) == pytest.approx(1 / 3)  # type: ignore[arg-type]
    with pytest.raises(PlanningError, match="quantile"):
        q.mmc_wait_quantile_s(1.0, 1.0, 2, 1.0)
    with pytest.raises(PlanningError, match="service_s"):
        q.mmc_mean_wait_s(1.0, 0.0, 2)


@given(
    servers=st.lists(st.integers(1, 80), min_size=2, max_size=30),
    service_s=st.lists(st.floats(1e-3, 10.0), min_size=2, max_size=30),
    budget_s=st.lists(st.floats(1e-4, 30.0), min_size=2, max_size=30),
    quantile=st.sampled_from([0.5, 0.9, 0.99]),
    cs2=st.floats(0.0, 4.0),
)
def test_batched_root_search_does_not_depend_on_its_companions(
    servers, service_s, budget_s, quantile, cs2
) -> None:
    """Each queue of max_utilization_for_wait_batch gets the same float alone as in a
    batch of queues with other server counts (sorted by servers, the recursion steps
    only the slice that needs them: per queue the same operations)."""
    k = min(len(servers), len(service_s), len(budget_s))
    args = (
        np.array(servers[:k], dtype=float),
        np.array(service_s[:k]),
        np.full(k, quantile),
        np.array(budget_s[:k]),
        np.full(k, cs2),
        np.ones(k),
    )
    together = q.max_utilization_for_wait_batch(*args).tolist()
    for i in range(k):
        alone = q.max_utilization_for_wait_batch(*(a[i : i + 1] for a in args))
        assert alone.tolist() == [together[i]]


def test_a_load_a_hair_under_one_that_rounds_to_no_slack_waits_forever():
    """rho = 0.9999999999999999 but ``c mu - lambda`` is 0.0 in floating point: the wait
    is unbounded, not a ZeroDivisionError (seen through POST /analyses/gpu-ranking at
    4,094 / 2 tokens)."""
    rate, service = 0.23104090402043806, 4.3282379119826295
    assert rate * service < 1.0 and 1.0 / service - rate == 0.0
    assert q.mmc_mean_wait_s(rate, service, 1) == math.inf
    assert q.mmc_wait_quantile_s(rate, service, 1, 0.9) == math.inf
