"""simulate() and simulate_plan(): run a fleet under load, seeded and reproducible."""

from __future__ import annotations

import concurrent.futures as cf
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from catalog.loader import load_catalog
from catalog.schema import Catalog
from planner.errors import PlanningError
from planner.lifetime import die_with_parent, process_context
from planner.request import PlanRequest, ResolvedRequest
from planner.simulate.engine import run_class
from planner.simulate.fleet import SimClass, build_fleet
from planner.simulate.results import (
    ClassSimulation,
    PoolSimulation,
    SimulationResult,
    summarize_class,
    summarize_pools,
)
from solver.problem import has_solution

DEFAULT_REQUESTS = 100_000
MAX_REQUESTS = 2_000_000
WARMUP_FRACTION = 0.1
#: From this many requests, a plan's classes (independent streams) are simulated in
#: parallel processes, one per core: starting a process (~0.5 s) is then small beside
#: a class's run (seconds). The result is the same as in series.
PARALLEL_FROM_REQUESTS = 200_000

NOTES = (
    "Poisson arrivals per class (gamma inter-arrivals when burst_cv != 1); log-normal prompt "
    "and output lengths in whole tokens, not clipped to the model's context (the planner does "
    "not clip either); a prefix hit caches the class's hit rate of every prompt.",
    "Each resident sequence counts with its own lifetime-mean context P + G/2 in the step "
    "time (exact on average: the step time is linear in context).",
    "Replicas start with a stationary resident batch; requests arriving in the first 10% of "
    "the horizon, or less than 2 x TTFT SLO before its end, are not measured; sequences still "
    "decoding at the end finish at their replica's current step time.",
    "TPOT of a request = (last token - first token) / (output tokens - 1); attainment = share "
    "of requests meeting both SLOs.",
)


def check_options(n_requests: int, burst_cv: float) -> None:
    if not 1 <= n_requests <= MAX_REQUESTS:
        raise PlanningError.for_field(
            "requests", f"must be between 1 and {MAX_REQUESTS:,}, got {n_requests}"
        )
    if not 0.05 <= burst_cv <= 20:
        raise PlanningError.for_field("burst_cv", f"must be in [0.05, 20], got {burst_cv}")


@dataclass
class _ClassOutcome:
    """What :func:`simulate` keeps of one class's run (small: no per-request arrays)."""

    summary: ClassSimulation
    pools: list[PoolSimulation]
    requests: int
    measured: int
    events: int
    over_context: float


def _run_one(
    cls: SimClass,
    seed_seq: np.random.SeedSequence,
    horizon_ms: float,
    burst_cv: float,
    warmup_fraction: float,
) -> _ClassOutcome:
    run = run_class(cls, np.random.default_rng(seed_seq), horizon_ms, burst_cv, warmup_fraction)
    return _ClassOutcome(
        summary=summarize_class(run),
        pools=summarize_pools(run),
        requests=len(run.arrival_ms),
        measured=int(run.measured.sum()),
        events=run.events,
        over_context=run.over_context,
    )


def _run_classes(
    classes: Sequence[SimClass],
    streams: list[np.random.SeedSequence],
    horizon_ms: float,
    burst_cv: float,
    warmup_fraction: float,
    workers: int,
) -> list[_ClassOutcome]:
    """Every class's run: in series, or in ``workers`` processes (same results)."""
    pairs = zip(classes, streams, strict=True)
    args = [(c, s, horizon_ms, burst_cv, warmup_fraction) for c, s in pairs]
    if workers <= 1 or len(classes) <= 1:
        return [_run_one(*a) for a in args]
    with cf.ProcessPoolExecutor(
        max_workers=min(workers, len(classes)),
        mp_context=process_context(fork_when_alone=True),
        initializer=die_with_parent,
        initargs=(os.getpid(),),
    ) as pool:
        return list(pool.map(_run_one, *zip(*args, strict=True)))


def simulate(
    classes: Sequence[SimClass],
    n_requests: int = DEFAULT_REQUESTS,
    seed: int = 0,
    burst_cv: float = 1.0,
    warmup_fraction: float = WARMUP_FRACTION,
    workers: int | None = None,
) -> SimulationResult:
    """Simulate ``classes`` for the time in which ``n_requests`` arrive over all of
    them (horizon = n / total rate); each class on its own seeded stream.

    ``workers``: processes to run the classes in (the result does not depend on it);
    by default one per core from :data:`PARALLEL_FROM_REQUESTS` requests, else 1."""
    check_options(n_requests, burst_cv)
    t0 = time.perf_counter()
    total_rate = sum(c.rate_rps for c in classes)
    if total_rate <= 0:
        return SimulationResult(
            requests=0,
            measured=0,
            seed=seed,
            burst_cv=burst_cv,
            horizon_s=0.0,
            warmup_s=0.0,
            wall_time_s=0.0,
            events=0,
            classes=[],
            pools=[],
            meets_slo=False,
            notes=["nothing to simulate: the plan serves no traffic"],
        )
    horizon_ms = n_requests / total_rate * 1000.0
    streams = np.random.SeedSequence(seed).spawn(len(classes))
    summaries, pools = [], []
    notes = list(NOTES)
    simulated = measured = events = 0
    if workers is None:
        workers = (os.cpu_count() or 1) if n_requests >= PARALLEL_FROM_REQUESTS else 1
    runs = _run_classes(classes, streams, horizon_ms, burst_cv, warmup_fraction, workers)
    for cls, run in zip(classes, runs, strict=True):
        summaries.append(run.summary)
        pools += run.pools
        simulated += run.requests
        measured += run.measured
        events += run.events
        if run.over_context > 0.001:
            notes.append(
                f"class {cls.name}: {run.over_context:.1%} of requests (prompt + output) exceed "
                f"the model's {cls.max_context_tokens:,}-token context; simulated as planned"
            )
    return SimulationResult(
        requests=simulated,
        measured=measured,
        seed=seed,
        burst_cv=burst_cv,
        horizon_s=horizon_ms / 1000.0,
        warmup_s=warmup_fraction * horizon_ms / 1000.0,
        wall_time_s=round(time.perf_counter() - t0, 4),
        events=events,
        classes=summaries,
        pools=pools,
        meets_slo=all(c.meets_slo for c in summaries),
        notes=notes,
    )


def simulate_plan(
    plan: Mapping[str, Any],
    request: Mapping[str, Any] | PlanRequest | ResolvedRequest,
    catalog: Catalog | None = None,
    n_requests: int = DEFAULT_REQUESTS,
    seed: int = 0,
    burst_cv: float = 1.0,
    workers: int | None = None,
) -> SimulationResult:
    """Simulate a plan (its JSON, e.g. ``Plan.to_json_dict()`` or a stored plan) at the
    rates it was planned for, rebuilding its pools from the request and ``catalog``."""
    catalog = catalog or load_catalog()
    if not has_solution(plan.get("status")):
        raise PlanningError.for_field(
            "status", f"a plan with status {plan.get('status')!r} has no fleet to simulate"
        )
    classes = build_fleet(plan, request, catalog)
    result = simulate(classes, n_requests, seed, burst_cv, workers=workers)
    planned_with = plan.get("catalog_hash")
    if planned_with and planned_with != catalog.content_hash:
        result.notes.append(
            f"simulated against catalog {catalog.content_hash[:19]}, the plan was made with "
            f"{planned_with[:19]}: GPU efficiency or prices may differ"
        )
    return result
