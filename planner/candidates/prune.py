"""Pruning dominated candidates and by cost curves, and attaching the queueing
capacity curves and their MILP segments (planner.candidates)."""

from __future__ import annotations

import math

import numpy as np

from catalog.schema import Catalog, Link
from planner import queueing
from planner.candidates.links import kv_exposed_ms, network_link_for_pairs, same_vendor_gpus
from planner.candidates.model import (
    KEEP_PER_GPU,
    MAX_REPLICAS_PER_POOL,
    Candidate,
    Rejection,
    pair_checkpoint,
)
from planner.request import ResolvedRequest
from solver.problem import CapacityCut, PoolRole, Segment, segments_capacity_rps
from solver.prune import capacity_table, may_replace

#: Most replicas one pool may have; a class needing more on one config is rejected there.


def _pair_format(c: Candidate) -> str | None:
    """What a disaggregated pool shares with its pairs (:func:`planner.candidates.model.
    pair_checkpoint`: weights format, KV dtype, the FP4 checkpoint; pruning never lets
    one stand in for another, nor reaches a decode pool the solver would not pair); None
    for aggregated."""
    if c.config.role == PoolRole.AGGREGATED:
        return None
    return pair_checkpoint(c)


def dominates(a: Candidate, b: Candidate) -> bool:
    """True when ``a`` is at least as good as ``b`` in every respect the MILP sees:
    same class, role and GPU type; no more GPUs, cost or power per replica; and at
    least the capacity at every replica count (prefill: no longer mean service
    time, no less wait budget, no more service variability; decode: at least as
    many slots, each turning over at least as fast)."""
    if (a.class_name, a.config.role, a.config.gpu) != (b.class_name, b.config.role, b.config.gpu):
        return False
    if _pair_format(a) != _pair_format(b):
        return False
    if b.pairs_with is not None and (a.pairs_with is None or not a.pairs_with >= b.pairs_with):
        return False
    if a.config.gpus > b.config.gpus or a.cost_usd_per_hour > b.cost_usd_per_hour:
        return False
    if a.power_kw > b.power_kw:
        return False
    if b.service_mean_ms is not None:
        if a.service_mean_ms is None or a.service_mean_ms > b.service_mean_ms:
            return False
        if a.wait_budget_ms < b.wait_budget_ms or (a.service_cv2 or 0) > (b.service_cv2 or 0):
            return False
    if b.config.max_batch is not None:
        if a.config.max_batch is None or a.step_ms is None or b.step_ms is None:
            return False
        if a.config.max_batch < b.config.max_batch or a.step_ms > b.step_ms:
            return False
    return True


def prune(cands: list[Candidate]) -> tuple[list[Candidate], list[Candidate]]:
    """Drop dominated candidates (see :func:`dominates`), then keep per (class,
    role, GPU type) the KEEP_PER_GPU cheapest per request/s of capacity.

    Pruning never looks across GPU types, so offering more GPU types only adds
    candidates (a plan can only get cheaper), and every GPU type keeps its
    best configurations for stock limits and for the "why not" explanation.
    """
    groups: dict[tuple, list[Candidate]] = {}
    for c in cands:
        key = (c.class_name, c.config.role, c.config.gpu, _pair_format(c), c.pairs_with)
        groups.setdefault(key, []).append(c)
    keep, drop = [], []
    for group in groups.values():
        group.sort(key=lambda c: (c.usd_per_rps, c.config.gpus, c.config.key))
        alive: list[Candidate] = []
        for c in group:
            if any(dominates(k, c) for k in alive):
                drop.append(c)
            else:
                alive.append(c)
        keep += alive[:KEEP_PER_GPU]
        drop += alive[KEEP_PER_GPU:]
    return keep, drop


def prune_by_cost_curves(
    cands: list[Candidate], req: ResolvedRequest
) -> tuple[list[Candidate], list[Candidate]]:
    """Drop a candidate B when another candidate A of the same class and role can
    carry every rate B can carry for no more money (and no more power when a
    power limit is set): for every replica count n of B, the fewest replicas m
    of A with capacity_A(m) >= capacity_B(n) cost c_A m <= c_B n.

    Any fleet using B then has a fleet at most as expensive using A instead
    (capacities are superadditive, up to the segment approximation). Not applied
    to GPU types with a stock limit, nor when the number of configurations is
    limited (swapping configurations could break those rules), nor when GPU types
    are limited or operations costs price GPU types and configurations (then a
    swap can add a GPU type or a configuration). KV pairing as the solver's pruning
    keeps it (:func:`solver.prune.may_replace`): a prefill candidate is only replaced
    by one whose KV link reaches every decode GPU type it reaches; a decode candidate
    only by one on a GPU type every prefill candidate of the class that reaches it
    also reaches.
    """
    lim = req.request.constraints
    ops = req.request.operations
    if (
        lim.max_configurations is not None
        or lim.max_gpu_types is not None
        or ops.usd_per_hour_per_gpu_type > 0
        or ops.usd_per_hour_per_configuration > 0
    ):
        return cands, []
    reach: dict[str, list[frozenset[str]]] = {}
    for c in cands:
        if c.pairs_with is not None:
            reach.setdefault(c.class_name, []).append(c.pairs_with)

    def swappable(a: Candidate, b: Candidate) -> bool:
        return may_replace(
            a.pairs_with,
            b.pairs_with,
            b.config.role,
            a.config.gpu,
            b.config.gpu,
            reach.get(b.class_name, []),
        )

    limited = set(lim.max_gpus)
    power = lim.power_kw is not None
    m0 = lim.min_replicas_per_pool
    groups: dict[tuple, list[Candidate]] = {}
    for c in cands:
        groups.setdefault((c.class_name, c.config.role, _pair_format(c)), []).append(c)
    keep: list[Candidate] = []
    drop: list[Candidate] = []
    for group in groups.values():
        free = [c for c in group if c.config.gpu not in limited]
        keep += [c for c in group if c.config.gpu in limited]
        tables = {id(c): capacity_table(c.to_pool_candidate()) for c in free}
        free.sort(key=lambda c: (c.usd_per_rps, c.config.key))
        alive: list[Candidate] = []
        for b in free:
            cap_b = tables[id(b)]
            n_b = np.maximum(np.arange(1, len(cap_b) + 1), m0)
            r_b = np.minimum(cap_b, b.rate_rps)
            beaten = False
            for a in alive:
                if not swappable(a, b):
                    continue
                cap_a = tables[id(a)]
                m = np.searchsorted(cap_a, r_b * (1 - 1e-12), side="left") + 1
                if (m > len(cap_a)).any():
                    continue
                m = np.maximum(m, m0)
                if (a.cost_usd_per_hour * m > b.cost_usd_per_hour * n_b + 1e-9).any():
                    continue
                if power and (a.power_kw * m > b.power_kw * n_b + 1e-12).any():
                    continue
                beaten = True
                break
            (drop if beaten else alive).append(b)
        keep += alive
    return keep, drop


def _breakpoints(limit: int) -> list[int]:
    """0, 1, 2, 3, 4, 6, 8, 12, 16, ... up to ``limit`` (replica counts)."""
    pts, a = [0, 1, 2, 3], 4
    while a < limit:
        pts.append(a)
        pts.append(a + a // 2)
        a *= 2
    return sorted({p for p in pts if p < limit})


def attach_capacity(cand: Candidate) -> Rejection | None:
    """Give ``cand`` its MILP capacity rows: chords of its convex capacity curve
    (with the margins of :meth:`Candidate.with_margin`: max_utilization, spare
    replicas) at replica counts (a, a+1) for breakpoints a, and the replica cap that
    carries the whole class. Decode slots on aggregated replicas become one linear cut
    (a chord at the replica count that carries the class: exact there,
    conservative elsewhere). The prefill queue's capacity at each replica count is
    :meth:`Candidate.prefill_capacity_rps` (a scalar root search, tabulated once per
    count); :func:`attach_capacities` does many candidates with batched root searches."""
    values: dict[int, float] = {}
    steps = _capacity_steps(cand, values)
    try:
        need = next(steps)
        while True:
            for n in need:
                values[n] = cand.prefill_capacity_rps(n)
            need = steps.send(None)
    except StopIteration as done:
        return done.value


#: Fewest candidates whose capacity tables :func:`attach_capacities` batches.
BATCH_MIN_CANDIDATES = 200


def attach_capacities(cands: list[Candidate]) -> list[Rejection | Exception | None]:
    """:func:`attach_capacity` of each candidate (None, a Rejection, or the error its
    table raised), with the prefill queues' root searches batched across candidates:
    each round of the replica-count searches asks every candidate for its next counts,
    and :func:`planner.queueing.max_utilization_for_wait_batch` solves them at once
    (utilizations within 2e-12 of the scalar root's, not to the float). A candidate whose
    queue the batch does not take (a subclass's curve, a wait budget <= 0) uses the
    scalar :meth:`Candidate.prefill_capacity_rps`. Fewer than :data:`BATCH_MIN_CANDIDATES`
    candidates are attached one by one (:func:`attach_capacity`: numpy's overhead on
    short arrays would cost more than it saves)."""
    out: list[Rejection | Exception | None] = [None] * len(cands)
    if len(cands) < BATCH_MIN_CANDIDATES:
        for i, c in enumerate(cands):
            try:
                out[i] = attach_capacity(c)
            except Exception as err:  # a faulty entry fails its own candidate only
                out[i] = err
        return out
    tables: list[dict[int, float]] = [{} for _ in cands]
    queues = _PrefillQueues(cands)
    active: dict[int, tuple] = {}
    for i, c in enumerate(cands):
        steps = _capacity_steps(c, tables[i])
        try:
            active[i] = (steps, next(steps))
        except StopIteration as done:
            out[i] = done.value
    while active:
        asks = [(i, n) for i, (_, need) in active.items() for n in need]
        failed = queues.fill(tables, asks)
        for i in list(active):
            steps, _ = active.pop(i)
            if i in failed:
                out[i] = failed[i]
                continue
            try:
                active[i] = (steps, steps.send(None))
            except StopIteration as done:
                out[i] = done.value
            except Exception as err:  # a faulty entry fails its own candidate only
                out[i] = err
    return out


class _PrefillQueues:
    """The prefill queues of many candidates as arrays, read once (service ms, quantile,
    wait budget, squared CVs, risk derate), for :meth:`fill`."""

    def __init__(self, cands: list[Candidate]) -> None:
        self.cands = cands
        n = len(cands)
        self.batchable = np.zeros(n, dtype=bool)
        self.service_ms = np.ones(n)
        self.quantile = np.full(n, 0.5)
        self.budget_ms = np.ones(n)
        self.service_cv2 = np.zeros(n)
        self.arrival_cv2 = np.ones(n)
        self.derate = np.ones(n)
        for i, c in enumerate(cands):
            mean, budget = c.service_mean_ms, c.wait_budget_ms
            if (
                type(c).prefill_capacity_rps is Candidate.prefill_capacity_rps
                and mean is not None
                and mean > 0
                and budget > 0
            ):
                self.batchable[i] = True
                self.service_ms[i] = mean
                self.quantile[i] = c.quantile
                self.budget_ms[i] = budget
                self.service_cv2[i] = c.service_cv2 or 0.0
                self.arrival_cv2[i] = c.arrival_cv2
                self.derate[i] = c.risk_derate
        self.batchable_list: list[bool] = self.batchable.tolist()

    def fill(
        self, tables: list[dict[int, float]], asks: list[tuple[int, int]]
    ) -> dict[int, Exception]:
        """Put ``cands[i].prefill_capacity_rps(n)`` (requests/s) in ``tables[i][n]`` for
        each asked (i, n): ``n x rho x 1000 / service_mean_ms x risk_derate`` with the
        rhos of :func:`planner.queueing.max_utilization_for_wait_batch` (the same
        operations in the same order as one by one: the same floats); a candidate the
        batch does not take uses its scalar curve. Returns the errors of candidates
        whose scalar curve raised."""
        batch: list[tuple[int, int]] = []
        failed: dict[int, Exception] = {}
        batchable = self.batchable_list
        for i, n in asks:
            if batchable[i] and n >= 1:
                batch.append((i, n))
                continue
            try:
                tables[i][n] = self.cands[i].prefill_capacity_rps(n)
            except Exception as err:  # a faulty entry fails its own candidate only
                failed[i] = err
        if batch:
            idx = np.array([i for i, _ in batch])
            ns = np.array([n for _, n in batch], dtype=float)
            mean_ms = self.service_ms[idx]
            rho = queueing.max_utilization_for_wait_batch(
                ns,
                mean_ms / 1000.0,
                self.quantile[idx],
                self.budget_ms[idx] / 1000.0,
                self.service_cv2[idx],
                self.arrival_cv2[idx],
            )
            rps = ns * rho * 1000.0 / mean_ms * self.derate[idx]
            for (i, n), x in zip(batch, rps.tolist(), strict=True):
                tables[i][n] = x
        return failed


def _capacity_steps(cand: Candidate, prefill_at: dict[int, float]):
    """:func:`attach_capacity` as a generator: it yields the replica counts whose prefill
    queue capacity (requests/s) it needs next, reads them from ``prefill_at`` (filled
    by the caller), and returns a Rejection, or None with the rows attached."""
    rate = cand.rate_rps
    k = cand.spare_replicas
    infinite = cand.service_mean_ms is None  # no prefill queue: not a root search

    def prefill(n: int) -> float:
        return math.inf if infinite else (0.0 if n <= 0 else prefill_at[n])

    def asks(*ns: int) -> list[int]:
        if infinite:
            return []
        ups = {n - k for n in ns}
        return sorted(u for u in ups if u > 0 and u not in prefill_at)

    decode = cand.decode_capacity_rps
    planned = cand.with_margin(lambda n: min(prefill(n), decode(n)))
    # Replicas needed for the whole class on this candidate alone.
    per_replica = max(cand.asymptotic_rps_per_replica * cand.max_utilization, 1e-12)
    n = max(1, math.ceil(min(rate / per_replica, 1e9))) + k
    while True:
        if n <= MAX_REPLICAS_PER_POOL:
            yield asks(n)
            if planned(n) >= rate:
                break
        n = math.ceil(n * 1.25) + 1
        if n > MAX_REPLICAS_PER_POOL:
            return Rejection(
                cand.class_name,
                cand.config.role,
                cand.config.gpu,
                cand.config.tp,
                cand.config.dtype.value,
                cand.config.chunk_budget_tokens,
                "too_many_replicas",
                f"needs more than {MAX_REPLICAS_PER_POOL} replicas for {rate:g} req/s",
            )
    # binary search the smallest n carrying the class
    lo_n, hi_n = 0, n
    while hi_n - lo_n > 1:
        mid = (lo_n + hi_n) // 2
        yield asks(mid)
        if planned(mid) >= rate:
            hi_n = mid
        else:
            lo_n = mid
    # a pool must be able to hold the redundancy minimum and its spares
    n = max(hi_n, cand.min_replicas, k + 1)
    role = cand.config.role
    prefill_curve = cand.with_margin(prefill)
    decode_curve = cand.with_margin(decode)
    if role == PoolRole.DECODE:
        curve = decode_curve
    else:
        curve = prefill_curve
        points = _breakpoints(n)
        yield asks(*points, *(a + 1 for a in points), n)
    cand.segments = segments_for(curve, n)
    if segments_capacity_rps(cand.segments, n) < rate and n < MAX_REPLICAS_PER_POOL:
        # the rows' chords, lowered to stay under the curve, can end a hair below it: the
        # class on this candidate alone then needs one more replica in the MILP (the
        # 80/20 agent prefill on MI300X tp2: 59.9997 req/s at 239, against 60)
        if role != PoolRole.DECODE:
            more = _breakpoints(n + 1)
            yield asks(*more, *(a + 1 for a in more), n + 1)
        n += 1
        cand.segments = segments_for(curve, n)
    cand.max_replicas = n
    if role == PoolRole.AGGREGATED:
        a = max(0, n - 1)
        f0, f1 = decode_curve(a), decode_curve(a + 1)
        cand.cuts = (CapacityCut(f0 - (f1 - f0) * a, f1 - f0),)
    return None


def segments_for(curve, n_max: int) -> tuple[Segment, ...]:
    """Segments [a_s, a_{s+1}] over breakpoints a < n_max (the last ends at n_max),
    each with the chord of ``curve`` through (a_s, a_s + 1), lowered where needed so
    it never exceeds the curve at the segment's tabulated replica counts."""
    points = _breakpoints(n_max)
    values: dict[int, float] = {}

    def f(x: int) -> float:
        if x not in values:
            values[x] = 0.0 if x == 0 else min(curve(x), 1e12)
        return values[x]

    out = []
    for i, a in enumerate(points):
        hi = points[i + 1] if i + 1 < len(points) else n_max
        slope = f(a + 1) - f(a)
        intercept = f(a) - slope * a
        check = [x for x in (a, a + 1, hi) if a <= x <= hi]
        excess = max(intercept + slope * x - f(x) for x in check)
        if excess > 1e-9:
            intercept -= excess
        out.append(Segment(a, hi, intercept, slope))
    return tuple(out)


def restrict_prefill_links(
    cands: list[Candidate], catalog: Catalog
) -> tuple[list[Candidate], list[Candidate]]:
    """Re-price each network-priced prefill candidate on the slowest pair link to the
    decode GPU types that have a screened decode candidate of its class and format
    (:func:`network_link_for_pairs`; the exposed transfer and wait budget follow),
    and drop NVLink-priced ones whose GPU type has no such decode candidate, and
    candidates priced on a faster link for fewer decode GPU types (``pairs_with``) that
    reach none of them or that their unrestricted sibling now matches (the same link:
    it pairs with more). Returns (kept, dropped)."""
    decode_gpus: dict[tuple, set[str]] = {}
    for c in cands:
        if c.config.role == PoolRole.DECODE:
            decode_gpus.setdefault((c.class_name, _pair_format(c)), set()).add(c.config.gpu)
    keep: list[Candidate] = []
    drop: list[Candidate] = []
    links: dict[tuple[str, frozenset[str]], Link] = {}
    nets: list[Candidate] = []  # the network-priced ones, re-priced below
    reaches: dict[tuple[str, tuple], set[str]] = {}
    for c in cands:
        if c.config.role != PoolRole.PREFILL:
            keep.append(c)
            continue
        pair_key = (c.class_name, _pair_format(c))
        screened = decode_gpus.get(pair_key, set())
        if (c.config.gpu, pair_key) not in reaches:  # the same for a GPU type and pairing
            reaches[c.config.gpu, pair_key] = set(
                same_vendor_gpus(catalog, c.config.gpu, sorted(screened))
            )
        reach = reaches[c.config.gpu, pair_key]
        if c.pairs_with is not None:
            (keep if c.pairs_with & reach else drop).append(c)
            continue
        if not reach:
            drop.append(c)
            continue
        if reach != screened:  # another vendor's decode pools: never its partners
            c.pairs_with = frozenset(reach)
        nets.append(c)
        key = (c.config.gpu, frozenset(reach))
        if key not in links:  # the same for every candidate of a GPU type and reach
            links[key] = network_link_for_pairs(catalog, c.config.gpu, sorted(reach))
        link = links[key]
        if link.id != c.kv_transfer_link:
            c.transfer_exposed_ms = kv_exposed_ms(
                c.replica, c.service_q_ms or 0.0, c.kv_q_tokens, link
            )
            c.kv_transfer_link = link.id
        (keep if c.queue_room_ms > 0 else drop).append(c)
    # a restricted copy on the link its network sibling now has: the same id, fewer partners
    network = {id(c) for c in nets}
    kept_ids = {c.id for c in keep if id(c) in network}
    copies = [c for c in keep if id(c) not in network and c.pairs_with and c.id in kept_ids]
    keep = [c for c in keep if id(c) in network or not (c.pairs_with and c.id in kept_ids)]
    return keep, drop + copies
