"""Discrete-event simulation of a planned fleet under load (issue 6).

``simulate_plan(plan_json, request, catalog, n_requests, seed, burst_cv)`` rebuilds
a plan's pools from the catalog and runs them: Poisson (or bursty) arrivals per
class, log-normal prompts and outputs, stall-free chunked batching on
aggregated replicas, prefill and decode replicas with the KV transfer between
them, memory-limited resident batches, a least-loaded router. It reports per
class TTFT/TPOT percentiles, SLO attainment and goodput, and per pool
utilization and queues. See ``engine`` for the scheduler and its one
approximation, ``verify`` for the plan's verification section.
"""

from planner.simulate.fleet import LengthModel, SimClass, SimPool, build_fleet
from planner.simulate.results import SimulationResult, Verification
from planner.simulate.runner import DEFAULT_REQUESTS, simulate, simulate_plan

__all__ = [
    "DEFAULT_REQUESTS",
    "LengthModel",
    "SimClass",
    "SimPool",
    "SimulationResult",
    "Verification",
    "build_fleet",
    "simulate",
    "simulate_plan",
]
