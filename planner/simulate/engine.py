"""Discrete-event simulation of one traffic class on its planned pools.

Pools serve one class each (docs/formulation.md), so classes are simulated
independently, each on its own random stream.

Scheduler per replica (what the plan assumes):

* **aggregated** (stall-free batching, Sarathi-Serve): every step carries all
  resident decodes plus one chunk of the prefill at the head of the replica's
  queue, at most the pool's chunk budget T; a prompt of P_new = P (1 - h) new
  tokens takes ceil(P_new / T) steps, each timed by ``roofline.mixed_step_ms``
  at the replica's current batch; decode-only steps by ``decode_step_ms``. A
  prefill starts only when the replica has a free decode slot (``max_batch``
  and KV memory; the prefilling sequence holds one); a request that arrives while the
  replica is stepping sees its first (and last) token one planned step later: the
  engines schedule the next step while the GPU runs the current one (overlap / async
  scheduling, ``planner.engines.busy_wait_ms``), as the plan prices it;
* **prefill** (disaggregated): one prompt at a time (``roofline.prefill_ms``),
  first come first served; the exposed part of the KV transfer
  (``roofline.exposed_transfer_ms`` of the prompt's KV over the pool's link)
  is added to the first token and delays the decode; the serving stack's latency
  (``Replica.stack_ttft_ms``, :mod:`planner.serving_stack`) shifts the whole request
  as the client sees it (first and last token), holding no GPU;
* **decode** (disaggregated): every step decodes all residents; a shipped
  sequence joins at the next step boundary when a slot (``max_batch``, KV
  memory) is free, otherwise it waits in the class's decode queue.

Router: a request goes to the replica of the class's pools where it would get
its first token soonest: least prefill work left (the queue's estimated
prefill time, or a prefill replica's busy-until time) among replicas with a
free decode slot. For identical prefill replicas this is exactly one FCFS
queue with c servers (M/G/c). A shipped sequence goes to the decode replica
with the lowest slot occupancy.

Exact between events, not step by step: between two events (a join, a
completion, the end of a prefill) the batch is constant, so decode-only steps
all take the same time and a decode completion is found in closed form; the
chunk steps of a prefill are timed as one numpy vector. Time and step counts
are exact at every step boundary. One approximation: a resident sequence
counts with its lifetime-mean context P + G/2 (the planner's own decode
context) instead of growing a token per step; the step time is linear in the
contexts, so this is exact on average over a sequence's life.

Warm start: replicas start with a resident batch drawn from the stationary
distribution (Poisson count from Little's law at the plan's rate, each
resident with a length-biased output and a uniform position in it), so the
decode population is in steady state from the start; requests arriving in the
first ``warmup_fraction`` of the horizon are not measured. Arrivals stop at
the horizon; requests still decoding then are finished at the current step
time of their replica, and only requests that arrived at least ``2 x TTFT
SLO`` (at most 20% of the horizon) before the end are measured.

The event loop itself is :class:`planner.simulate.scheduler.ClassSim`; this module
samples the traffic, runs the prefill pools (FCFS servers) and the loop, and gathers
the per-request outcome (:class:`ClassRun`) and per-replica statistics.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from planner import engines
from planner import kernels as kn
from planner import roofline as rl
from planner.simulate.fleet import LengthModel, SimClass, SimPool
from planner.simulate.scheduler import INF, ClassSim
from solver.problem import PoolRole


@dataclass
class ClassRun:
    """Raw per-request outcome of one class (times in ms from the start)."""

    cls: SimClass
    arrival_ms: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    first_ms: np.ndarray  # first token (nan: never)
    last_ms: np.ndarray  # last token (extrapolated past the horizon)
    wait_ms: np.ndarray  # prefill queueing (nan: never started)
    slot_wait_ms: np.ndarray  # disaggregated: waiting for a decode slot
    pool_of: np.ndarray  # index into cls.pools of the prefill / aggregated pool
    decode_pool_of: np.ndarray  # index into cls.pools of the decode pool (-1: none)
    measured: np.ndarray  # bool mask
    horizon_ms: float
    window_ms: tuple[float, float]
    pool_stats: list[dict] = field(default_factory=list)
    events: int = 0
    over_context: float = 0.0  # share of requests longer than the model's context


def sample_lengths(rng: np.random.Generator, model: LengthModel, n: int) -> np.ndarray:
    """Token lengths (whole tokens, at least 1) from a log-normal."""
    if model.sigma <= 0:
        return np.full(n, max(1.0, float(round(math.exp(model.mu)))))
    return np.maximum(1.0, np.rint(rng.lognormal(model.mu, model.sigma, n)))


def sample_arrivals(
    rng: np.random.Generator, rate_rps: float, horizon_ms: float, burst_cv: float = 1.0
) -> np.ndarray:
    """Arrival times (ms) in [0, horizon): a Poisson stream, or a renewal stream with
    gamma inter-arrival times of coefficient of variation ``burst_cv`` (> 1: bursty)."""
    if rate_rps <= 0:
        return np.zeros(0)
    mean_gap = 1000.0 / rate_rps
    chunks, t, n = [], 0.0, int(horizon_ms / mean_gap * 1.05) + 64
    while t < horizon_ms:
        if burst_cv == 1.0:
            gaps = rng.exponential(mean_gap, n)
        else:
            shape = 1.0 / (burst_cv * burst_cv)
            gaps = rng.gamma(shape, mean_gap / shape, n)
        times = t + np.cumsum(gaps)
        chunks.append(times)
        t = float(times[-1])
        n = max(64, n // 4)
    out = np.concatenate(chunks)
    return out[out < horizon_ms]


def fcfs_servers(
    arrivals_ms: list[float], services: list[list[float]], servers: list[int]
) -> tuple[list[int], list[float]]:
    """First-come-first-served over several pools of identical servers, each request
    to the server that would finish it first (its service time may differ by pool).

    For one pool this is exactly an M/G/c queue with a central FIFO (the server
    free first takes the next request). Returns each request's pool and start
    time (ms)."""
    heaps = [[0.0] * c for c in servers]
    pool_of = [0] * len(arrivals_ms)
    start = [0.0] * len(arrivals_ms)
    if len(heaps) == 1:
        h, serv = heaps[0], services[0]
        for i, t in enumerate(arrivals_ms):
            f = h[0]
            s = f if f > t else t
            start[i] = s
            heapq.heapreplace(h, s + serv[i])
        return pool_of, start
    for i, t in enumerate(arrivals_ms):
        best_p, best_s, best_e = 0, 0.0, INF
        for p, h in enumerate(heaps):
            f = h[0]
            s = f if f > t else t
            e = s + services[p][i]
            if e < best_e:
                best_p, best_s, best_e = p, s, e
        pool_of[i] = best_p
        start[i] = best_s
        heapq.heapreplace(heaps[best_p], best_e)
    return pool_of, start


def _prefill_and_exposed(pool: SimPool, prompt: np.ndarray, hit: float):
    """Per request on a prefill replica of ``pool``: the prefill time
    (``roofline.prefill_ms`` of P with P h cached) and the exposed KV transfer
    (``roofline.exposed_transfer_ms`` of the prompt's KV over the pool's link), ms.
    Evaluated once per distinct prompt length."""
    steps = pool.steps
    uniq, inv = np.unique(prompt, return_inverse=True)
    serv = np.array([steps.prefill_ms(p, p * hit) for p in uniq.tolist()])
    if not pool.kv_link_gb_per_s:
        return serv[inv], np.zeros(len(prompt))
    layers = steps.replica.model.num_layers
    transfer = steps.kv_bytes_array(uniq) / (pool.kv_link_gb_per_s * 1e9) * 1e3
    transfer = transfer + pool.kv_link_latency_us * 1e-3
    expo = np.array(
        [
            rl.exposed_transfer_ms(tr, sv, pool.kv_stream_overlap, layers)
            for tr, sv in zip(transfer.tolist(), serv.tolist(), strict=True)
        ]
    )
    return serv[inv], expo[inv]


def run_class(
    cls: SimClass,
    rng: np.random.Generator,
    horizon_ms: float,
    burst_cv: float = 1.0,
    warmup_fraction: float = 0.1,
    *,
    trace: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> ClassRun:
    """Simulate one class for ``horizon_ms`` of arrivals; see the module docstring.

    ``trace`` replays given requests instead of sampling them: arrival times (ms,
    sorted), prompt and output tokens."""
    if trace is None:
        arr = sample_arrivals(rng, cls.rate_rps, horizon_ms, burst_cv)
        prompt = sample_lengths(rng, cls.prompt, len(arr))
        output = sample_lengths(rng, cls.output, len(arr))
    else:
        arr, prompt, output = (np.asarray(x, dtype=float) for x in trace)
        if len(arr) > 1 and (np.diff(arr) < 0).any():
            raise ValueError("trace arrival times must be sorted")
    n = len(arr)
    hit = cls.prefix_hit_rate
    # prefix hits found in a KV host tier: that share of requests waits for the reload
    delay = (
        np.where(rng.random(n) < cls.reload_share, cls.reload_ms, 0.0)
        if cls.reload_share > 0 and cls.reload_ms > 0
        else np.zeros(n)
    )
    t_warm = warmup_fraction * horizon_ms
    margin = min(2.0 * cls.ttft_slo_ms, 0.2 * horizon_ms)
    measured = (arr >= t_warm) & (arr <= horizon_ms - margin)
    # ghosts: warm-start residents (ids after the real requests)
    ghost_cap = sum((p.max_batch or 0) * p.replicas for p in cls.pools)
    g_prompt = sample_lengths(rng, cls.prompt, ghost_cap)
    g_output = sample_lengths(rng, cls.output, ghost_cap)
    all_prompt = np.concatenate([prompt, g_prompt])
    all_output = np.concatenate([output, g_output])
    ctx = all_prompt + all_output / 2.0
    n_total = n + ghost_cap
    ghosts = list(range(n, n_total))

    first = np.full(n, np.nan)
    last = np.full(n, np.nan)
    wait = np.full(n, np.nan)
    slot_wait = np.full(n, np.nan)
    pool_of = np.full(n, -1)
    dpool_of = np.full(n, -1)
    stats: list[dict] = []
    window = (t_warm, horizon_ms)
    events = 0

    agg = [(i, p) for i, p in enumerate(cls.pools) if p.role == PoolRole.AGGREGATED]
    pre = [(i, p) for i, p in enumerate(cls.pools) if p.role == PoolRole.PREFILL]
    dec = [(i, p) for i, p in enumerate(cls.pools) if p.role == PoolRole.DECODE]
    # Requests go to aggregated or disaggregated serving in the plan's proportions.
    agg_rate = sum(p.rate_rps for _, p in agg)
    dis_rate = sum(p.rate_rps for _, p in pre) if dec else 0.0
    if agg and dis_rate > 0:
        to_agg = rng.random(n) < agg_rate / (agg_rate + dis_rate)
    else:
        to_agg = np.full(n, bool(agg))

    if agg:
        idx = np.flatnonzero(to_agg)
        sim = ClassSim(cls, agg, n_total, all_output.tolist(), ctx, t_warm, horizon_ms)
        cached = all_prompt * hit
        sim.new_tokens = (all_prompt - cached).tolist()
        sim.cached = cached.tolist()
        est = {}
        for pi, pool in agg:
            t_budget = pool.chunk_budget_tokens or 1
            chunks = np.ceil((all_prompt - cached) / t_budget - 1e-9)
            est[pi] = chunks * (pool.step_ms or 0.0)
        sim.set_estimates(est)
        used = sim.warm_start(rng, ghosts, cls.prompt, cls.output, hit)
        ghosts = ghosts[len(used) :]
        t_agg = arr[idx] + delay[idx]  # a reload comes before the request's first chunk
        order = np.argsort(t_agg, kind="stable")
        sim.run(t_agg[order].tolist(), idx[order].tolist(), sim.arrive_prefill)
        events += sim.events
        f = np.array(sim.first[:n])
        first[idx] = f[idx]
        last[idx] = np.array(sim.last[:n])[idx]
        wait[idx] = np.array(sim.started[:n])[idx] - arr[idx]
        reps = np.array(sim.rep_of[:n])
        pool_of[idx] = sim.pool_ids[reps[idx]]
        stats += _replica_stats(sim, agg, window)
        # overlap / async scheduling: an arrival at a stepping replica joins the step after
        # the one already scheduled (planner.engines.busy_wait_ms's k engine steps of the
        # pool's planned step, as the plan prices it: Candidate.overlap_ttft_ms)
        late = np.array([_overlap_step_ms(p) for p in cls.pools] + [0.0])
        busy = np.array(sim.busy[:n])[idx]
        shift_agg = np.where(busy, late[pool_of[idx]], 0.0)
        first[idx] += shift_agg
        last[idx] += shift_agg

    if pre and dec:
        idx = np.flatnonzero(~to_agg)
        t_in = arr[idx]
        p_in = prompt[idx]
        services, exposed = [], []
        for _, pool in pre:
            s, e = _prefill_and_exposed(pool, p_in, hit)
            services.append(s + delay[idx])  # the reload is part of the prefill
            exposed.append(e)
        which, start = fcfs_servers(
            t_in.tolist(), [s.tolist() for s in services], [p.replicas for _, p in pre]
        )
        which_a = np.array(which, dtype=int)
        start_a = np.array(start)
        rows = np.arange(len(idx))
        serv = np.array(services)[which_a, rows] if len(idx) else np.zeros(0)
        expo = np.array(exposed)[which_a, rows] if len(idx) else np.zeros(0)
        ready = start_a + serv + expo
        first[idx] = ready
        wait[idx] = start_a - t_in
        pre_ids = np.array([i for i, _ in pre])
        pool_of[idx] = pre_ids[which_a] if len(idx) else pre_ids[:0]
        stats += _prefill_stats(
            pre, which_a, t_in, start_a, serv, measured[idx], window, horizon_ms, margin
        )
        # decode stage: shipped sequences in order of arrival at the decode pool
        sim = ClassSim(cls, dec, n_total, all_output.tolist(), ctx, t_warm, horizon_ms)
        sim.warm_start(rng, ghosts, cls.prompt, cls.output, hit)
        order = np.argsort(ready, kind="stable")
        ids = idx[order]
        sim.run(ready[order].tolist(), ids.tolist(), sim.arrive_decode)
        events += sim.events + len(idx)
        last[idx] = np.array(sim.last[:n])[idx]
        slot_wait[idx] = np.array(sim.joined[:n])[idx] - ready
        reps = np.array(sim.rep_of[:n])[idx]
        ok = reps >= 0
        dpool = np.full(len(idx), -1)
        dpool[ok] = sim.pool_ids[reps[ok]]
        dpool_of[idx] = dpool
        stats += _replica_stats(sim, dec, window)

    # the serving stack's latency (Replica.stack_ttft_ms of the pool that served the
    # prefill): the client sees the whole request later by it; no GPU time
    stacks = [p.steps.replica.stack for p in cls.pools]
    base = np.array([s.base_ms for s in stacks] + [0.0])  # pool_of -1: never served, 0
    per_token = np.array([s.per_token_ms for s in stacks] + [0.0])
    shift = base[pool_of] + per_token[pool_of] * prompt
    first = first + shift
    last = last + shift

    return ClassRun(
        cls=cls,
        arrival_ms=arr,
        prompt_tokens=prompt,
        output_tokens=output,
        first_ms=first,
        last_ms=last,
        wait_ms=wait,
        slot_wait_ms=slot_wait,
        pool_of=pool_of,
        decode_pool_of=dpool_of,
        measured=measured,
        horizon_ms=horizon_ms,
        window_ms=window,
        pool_stats=stats,
        events=events,
        over_context=float(np.mean(prompt + output > cls.max_context_tokens)) if n else 0.0,
    )


def _replica_stats(sim: ClassSim, pools: list[tuple[int, SimPool]], window) -> list[dict]:
    span = max(window[1] - window[0], 1e-9)
    out = []
    for pi, pool in pools:
        reps = [r for r in sim.reps if r.pi == pi]
        busy = sum(r.ibusy for r in reps) / (span * len(reps))
        batch = sum(r.ib for r in reps) / (span * len(reps))
        queue = sum(r.iq for r in reps) / span
        qmax = max((r.qmax for r in reps), default=0)
        if pool.role == PoolRole.DECODE:
            queue = sim.central_iq / span
            qmax = sim.central_max
        out.append(
            {
                "pool_index": pi,
                "busy": busy,
                "mean_batch": batch,
                "mean_queue": queue,
                "max_queue": qmax,
            }
        )
    return out


def _prefill_stats(pre, which, t_in, start, serv, measured, window, horizon_ms, margin) -> list:
    out = []
    for k, (pi, pool) in enumerate(pre):
        mine = which == k
        t_p, s_p = t_in[mine], start[mine]
        sel = measured[mine]
        span = max((horizon_ms - margin) - window[0], 1e-9)
        lam = sel.sum() / span  # per ms
        busy = lam * float(serv[mine][sel].mean()) / pool.replicas if sel.any() else 0.0
        waits = (s_p - t_p)[sel]
        mean_wait = float(waits.mean()) if sel.any() else 0.0
        # starts are in arrival order (FCFS): requests waiting when request i arrives
        queued = np.arange(len(t_p)) - np.searchsorted(s_p, t_p, side="right")
        out.append(
            {
                "pool_index": pi,
                "busy": busy,
                "mean_batch": None,
                "mean_queue": lam * mean_wait,
                "max_queue": int(max(queued.max(initial=0), 0)),
            }
        )
    return out


def _overlap_step_ms(pool: SimPool) -> float:
    """The step an arrival at a busy replica of aggregated ``pool`` waits for beyond the
    one in flight (ms): :func:`planner.engines.scheduled_step_ms` of its planned engine
    step (``step_ms`` per output token x tokens per step); 0 for other roles or without
    a planned step."""
    if pool.role != PoolRole.AGGREGATED or not pool.step_ms:
        return 0.0
    replica = pool.steps.replica
    step = pool.step_ms * kn.tokens_per_verification_step(replica.speculative)
    return engines.scheduled_step_ms(replica.engine, step)
