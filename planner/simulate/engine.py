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
  and KV memory; the prefilling sequence holds one);
* **prefill** (disaggregated): one prompt at a time (``roofline.prefill_ms``),
  first come first served; the exposed part of the KV transfer
  (``roofline.exposed_transfer_ms`` of the prompt's KV over the pool's link)
  is added to the first token and delays the decode;
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
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from itertools import accumulate

import numpy as np

from planner import roofline as rl
from planner.simulate.fleet import LengthModel, SimClass, SimPool
from planner.simulate.steps import chunk_count
from solver.problem import PoolRole

INF = math.inf
#: Routing penalty (ms) for a replica with no free decode slot.
_FULL = 1e15


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


# --------------------------------------------------------------------------- sampling


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


# --------------------------------------------------------------------------- replicas


class _Rep:
    """State of one replica. Between events it runs uniform decode steps of ``step``
    ms, or the remaining chunk steps of the prefill ``pf`` (cumulative ``cum``)."""

    __slots__ = (
        "B",
        "C",
        "V",
        "ci",
        "cum",
        "fin",
        "ib",
        "ibusy",
        "idx",
        "iq",
        "kv",
        "last",
        "maxb",
        "nch",
        "pending",
        "pf",
        "pi",
        "pool",
        "qest",
        "qmax",
        "queue",
        "step",
        "t0",
        "t_acc",
        "t_next",
        "ver",
    )

    def __init__(self, idx: int, pi: int, pool: SimPool) -> None:
        self.idx, self.pi, self.pool = idx, pi, pool
        self.maxb = pool.max_batch or 1
        self.B = 0  # resident decodes
        self.C = 0.0  # sum of their contexts (tokens)
        self.kv = 0.0  # KV bytes held or reserved
        self.fin: list[tuple[int, int]] = []  # (step count at which it finishes, request)
        self.V = 0  # steps done at t0
        self.t0 = 0.0  # last step boundary (ms)
        self.step = 0.0
        self.pf = -1  # request being prefilled (aggregated)
        self.cum: list[float] = []  # cumulative durations of its remaining chunk steps
        self.nch = 0  # chunks of pf, and the size of its last
        self.last = 0.0
        self.ci = 0  # chunks of pf done
        self.queue: deque[int] = deque()
        self.pending: list[int] = []  # decode: joins at the next boundary
        self.qest = 0.0  # estimated prefill work queued (ms)
        self.ver = 0
        self.t_next = INF
        self.t_acc = 0.0
        self.ib = self.ibusy = self.iq = 0.0
        self.qmax = 0


class _ClassSim:
    """The event loop of one class's aggregated replicas or decode replicas."""

    def __init__(
        self,
        cls: SimClass,
        pools: list[tuple[int, SimPool]],
        n_total: int,
        output: list[float],
        ctx: np.ndarray,
        t_warm: float,
        t_stop: float,
    ) -> None:
        self.cls = cls
        self.reps: list[_Rep] = []
        for pi, pool in pools:
            for _ in range(pool.replicas):
                self.reps.append(_Rep(len(self.reps), pi, pool))
        self.pool_ids = np.array([r.pi for r in self.reps])
        self.maxb = np.array([r.maxb for r in self.reps], dtype=float)
        self.maxb_list = self.maxb.tolist()
        self.cap = np.array([r.pool.steps.kv_capacity_bytes for r in self.reps])
        self.occ = np.zeros(len(self.reps))  # slots used or promised
        self.kvs = np.zeros(len(self.reps))
        self.work_end = np.zeros(len(self.reps))
        self.output = output
        self.ctx = ctx.tolist()
        # KV bytes per request on each pool's replicas (pool index -> list)
        self.need: dict[int, list[float]] = {
            pi: pool.steps.kv_bytes_array(ctx).tolist() for pi, pool in pools
        }
        self.first = [math.nan] * n_total
        self.last = [math.nan] * n_total
        self.started = [math.nan] * n_total
        self.joined = [math.nan] * n_total
        self.rep_of = [-1] * n_total
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.t_warm, self.t_stop = t_warm, t_stop
        self.central: deque[int] = deque()  # decode: waiting for a slot
        self.central_iq = 0.0
        self.central_t = 0.0
        self.central_max = 0
        self.events = 0
        # aggregated prefill chunks
        self.new_tokens: list[float] = []
        self.cached: list[float] = []
        self.est: dict[int, np.ndarray] = {}
        self.est_matrix = np.zeros((0, 1))
        self.est_col = np.zeros(0, dtype=int)

    # ------------------------------------------------------------------ bookkeeping

    def _acc(self, rep: _Rep, t: float) -> None:
        lo = rep.t_acc if rep.t_acc > self.t_warm else self.t_warm
        hi = t if t < self.t_stop else self.t_stop
        rep.t_acc = t
        if hi > lo:
            dt = hi - lo
            rep.ib += rep.B * dt
            if rep.pf >= 0 or (rep.B > 0 and rep.pool.role == PoolRole.DECODE):
                rep.ibusy += dt
            if rep.queue:
                rep.iq += len(rep.queue) * dt

    def _acc_central(self, t: float) -> None:
        lo = self.central_t if self.central_t > self.t_warm else self.t_warm
        hi = t if t < self.t_stop else self.t_stop
        self.central_t = t
        if hi > lo and self.central:
            self.central_iq += len(self.central) * (hi - lo)

    def _schedule(self, rep: _Rep) -> None:
        """Push the replica's next event: a decode completion or the end of its prefill."""
        rep.ver += 1
        if rep.pf >= 0:
            cum = rep.cum
            k = len(cum)
            if rep.fin:
                kc = rep.fin[0][0] - rep.V
                if kc < k:
                    k = kc
            t = rep.t0 + cum[k - 1]
        elif rep.B > 0:
            k = rep.fin[0][0] - rep.V
            t = rep.t0 + k * rep.step
        else:
            rep.t_next = INF
            return
        rep.t_next = t
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, rep.idx, rep.ver, k))

    def _wake_at_boundary(self, rep: _Rep, t: float) -> None:
        """Make the replica act at its first step boundary at or after ``t``."""
        if rep.pf >= 0:
            return  # it acts when the current prefill ends
        if rep.B == 0:  # idle: act now
            self._advance(rep, t, 0)
            self._boundary(rep, t)
            return
        k = max(0, math.ceil((t - rep.t0) / rep.step - 1e-9))
        tb = rep.t0 + k * rep.step
        if tb < rep.t_next:
            rep.ver += 1
            rep.t_next = tb
            self.seq += 1
            heapq.heappush(self.heap, (tb, self.seq, rep.idx, rep.ver, k))

    def _advance(self, rep: _Rep, t: float, k: int) -> None:
        self._acc(rep, t)
        rep.V += k
        rep.t0 = t
        if rep.pf >= 0:
            rep.ci += k

    def _join(self, rep: _Rep, rid: int, t: float) -> None:
        g = self.output[rid]
        self.joined[rid] = t
        if g <= 1:
            self.last[rid] = t
            self._release(rep, rid)
            return
        heapq.heappush(rep.fin, (rep.V + int(g) - 1, rid))
        rep.B += 1
        rep.C += self.ctx[rid]

    def _release(self, rep: _Rep, rid: int) -> None:
        rep.kv -= self.need[rep.pi][rid]
        self.kvs[rep.idx] = rep.kv
        self.occ[rep.idx] -= 1

    def _admissible(self, rep: _Rep, rid: int, held: int) -> bool:
        if held == 0:
            return True  # an empty replica always takes one sequence
        cap = rep.pool.steps.kv_capacity_bytes
        return held < rep.maxb and rep.kv + self.need[rep.pi][rid] <= cap

    def _boundary(self, rep: _Rep, t: float) -> None:
        """Everything that happens at a step boundary, then the next segment."""
        fin = rep.fin
        while fin and fin[0][0] <= rep.V:
            _, rid = heapq.heappop(fin)
            self.last[rid] = t
            rep.B -= 1
            rep.C -= self.ctx[rid]
            self._release(rep, rid)
        if rep.B == 0:
            rep.C = 0.0
        if rep.pf >= 0 and rep.ci >= rep.nch:
            rid, rep.pf = rep.pf, -1
            self.first[rid] = t
            self._join(rep, rid, t)
            self.work_end[rep.idx] = t + rep.qest
        if rep.pending:
            for rid in rep.pending:
                self._join(rep, rid, t)
            rep.pending.clear()
        if self.central and rep.pool.role == PoolRole.DECODE:
            self._acc_central(t)
            while self.central and self._admissible(rep, self.central[0], rep.B):
                rid = self.central.popleft()
                self._reserve(rep, rid)
                self._join(rep, rid, t)
        if rep.pf < 0 and rep.queue:
            rid = rep.queue[0]
            if self._admissible(rep, rid, rep.B):
                rep.queue.popleft()
                rep.pf = rid
                rep.qest -= float(self.est[rep.pi][rid])
                rep.kv += self.need[rep.pi][rid]
                self.kvs[rep.idx] = rep.kv
                self.started[rid] = t
                rep.nch, rep.last = chunk_count(
                    self.new_tokens[rid], rep.pool.chunk_budget_tokens or 1
                )
                rep.ci = 0
        if rep.pf >= 0:
            ctx = rep.C / rep.B if rep.B else 0.0
            dur = rep.pool.steps.chunk_steps_ms(
                rep.B,
                ctx,
                float(rep.pool.chunk_budget_tokens or 1),
                rep.nch,
                rep.last,
                self.cached[rep.pf],
                rep.ci,
            )
            rep.cum = list(accumulate(dur))
        elif rep.B > 0:
            rep.step = rep.pool.steps.decode_ms(rep.B, rep.C / rep.B)
        self._schedule(rep)

    def _reserve(self, rep: _Rep, rid: int) -> None:
        rep.kv += self.need[rep.pi][rid]
        self.kvs[rep.idx] = rep.kv
        self.occ[rep.idx] += 1
        self.rep_of[rid] = rep.idx

    # ------------------------------------------------------------------ warm start

    def warm_start(
        self,
        rng: np.random.Generator,
        ghosts: list[int],
        prompt: LengthModel,
        output: LengthModel,
        hit: float,
    ) -> list[int]:
        """Give every replica a stationary resident batch (ids taken from ``ghosts``)."""
        used = 0
        g_mu, g_sigma = output.mu + output.sigma**2, output.sigma  # length-biased
        for rep in self.reps:
            pool = rep.pool
            lam = pool.rate_rps / pool.replicas / 1000.0  # per ms
            mean_g = output.mean_tokens
            ctx_mean = prompt.mean_tokens + mean_g / 2.0
            step = pool.step_ms or pool.steps.decode_ms(1, ctx_mean)
            resident = lam * mean_g * step
            for _ in range(3):  # fixed point of L = lambda G step(L)
                b = max(1.0, min(resident, rep.maxb))
                if pool.role == PoolRole.AGGREGATED and pool.chunk_budget_tokens:
                    step = pool.steps.mixed_ms(
                        round(b), ctx_mean, pool.chunk_budget_tokens, prompt.mean_tokens * hit
                    )
                else:
                    step = pool.steps.decode_ms(round(b), ctx_mean)
                resident = lam * mean_g * step
            count = min(int(rng.poisson(resident)), max(rep.maxb - 1, 0))
            for _ in range(count):
                if used >= len(ghosts):
                    break
                gid = ghosts[used]
                g = max(2.0, round(float(np.exp(g_mu + g_sigma * rng.standard_normal()))))
                # its context with the length-biased output (the prompt as sampled)
                self.ctx[gid] += (g - self.output[gid]) / 2.0
                self.output[gid] = g
                self.need[rep.pi][gid] = pool.steps.kv_bytes(self.ctx[gid])
                if not self._admissible(rep, gid, rep.B):
                    break
                used += 1
                remaining = int(rng.integers(1, int(g) + 1))
                self._reserve(rep, gid)
                heapq.heappush(rep.fin, (remaining, gid))
                rep.B += 1
                rep.C += self.ctx[gid]
        for rep in self.reps:
            self._boundary(rep, 0.0)
        return ghosts[:used]

    # ------------------------------------------------------------------ arrivals

    def arrive_prefill(self, rid: int, t: float) -> None:
        """An aggregated request arrives: route it, queue it, wake the replica."""
        if len(self.reps) == 1:
            r = 0
        elif len(self.reps) <= 16:
            est = self._est_for(rid)
            ests = est.tolist() if isinstance(est, np.ndarray) else [est] * len(self.reps)
            r, best = 0, INF
            for i, (w, o, b, e) in enumerate(
                zip(self.work_end.tolist(), self.occ.tolist(), self.maxb_list, ests, strict=True)
            ):
                score = (w if w > t else t) + e + (_FULL if o >= b else 0.0)
                if score < best:
                    r, best = i, score
        else:
            est = self._est_for(rid)
            score = np.maximum(self.work_end, t) + est
            full = self.occ >= self.maxb
            if full.any():
                score = np.where(full, score + _FULL, score)
            r = int(score.argmin())
        rep = self.reps[r]
        e = float(self.est[rep.pi][rid])
        self.work_end[r] = max(float(self.work_end[r]), t) + e
        self.occ[r] += 1
        rep.qest += e
        self.rep_of[rid] = r
        self._acc(rep, t)
        rep.queue.append(rid)
        if len(rep.queue) > rep.qmax:
            rep.qmax = len(rep.queue)
        if rep.pf < 0 and len(rep.queue) == 1 and self._admissible(rep, rid, rep.B):
            self._wake_at_boundary(rep, t)

    def _est_for(self, rid: int) -> np.ndarray | float:
        """Estimated prefill time of ``rid`` on each replica (ms)."""
        row = self.est_matrix[rid]
        return float(row[0]) if len(row) == 1 else row[self.est_col]

    def arrive_decode(self, rid: int, t: float) -> None:
        """A disaggregated request's KV has arrived: pick a decode replica or queue it."""
        best, best_occ = None, INF
        for rep in self.reps:  # decode pools are small: a few replicas
            held = rep.B + len(rep.pending)
            frac = held / rep.maxb
            if frac < best_occ and self._admissible(rep, rid, held):
                best, best_occ = rep, frac
        if best is None:
            self._acc_central(t)
            self.central.append(rid)
            self.central_max = max(self.central_max, len(self.central))
            return
        self._reserve(best, rid)
        best.pending.append(rid)
        if best.B == 0 and best.pf < 0:
            self._advance(best, t, 0)
            self._boundary(best, t)
        else:
            self._wake_at_boundary(best, t)

    # ------------------------------------------------------------------ loop

    def run(self, times: list[float], order: list[int], arrive) -> None:
        heap = self.heap
        reps = self.reps
        t_stop = self.t_stop
        i, n = 0, len(order)
        events = 0
        while True:
            ta = times[i] if i < n else INF
            if heap and heap[0][0] <= ta:
                t, _, r, ver, k = heapq.heappop(heap)
                if t > t_stop:
                    break
                rep = reps[r]
                if ver != rep.ver:
                    continue
                events += 1
                self._advance(rep, t, k)
                self._boundary(rep, t)
            else:
                if ta > t_stop:
                    break
                arrive(order[i], ta)
                i += 1
                events += 1
        self.events = events
        self._finish()

    def _finish(self) -> None:
        """Stop at the horizon: finish resident decodes at their replica's current step."""
        t = self.t_stop
        self._acc_central(t)
        for rep in self.reps:
            self._acc(rep, t)
            if rep.pf >= 0:
                done = bisect.bisect_right(rep.cum, t - rep.t0)
            elif rep.B > 0:
                done = int((t - rep.t0) // rep.step)
            else:
                done = 0
            v = rep.V + done
            for rid in rep.pending:
                heapq.heappush(rep.fin, (v + int(self.output[rid]) - 1, rid))
                rep.B += 1
                rep.C += self.ctx[rid]
                self.joined[rid] = t
            if not rep.fin:
                continue
            step = rep.pool.steps.decode_ms(rep.B, rep.C / rep.B) if rep.B else 0.0
            for vf, rid in rep.fin:
                self.last[rid] = t + max(vf - v, 0) * step


# --------------------------------------------------------------------------- prefill pools


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


# --------------------------------------------------------------------------- one class


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
        sim = _ClassSim(cls, agg, n_total, all_output.tolist(), ctx, t_warm, horizon_ms)
        cached = all_prompt * hit
        sim.new_tokens = (all_prompt - cached).tolist()
        sim.cached = cached.tolist()
        for pi, pool in agg:
            t_budget = pool.chunk_budget_tokens or 1
            chunks = np.ceil((all_prompt - cached) / t_budget - 1e-9)
            sim.est[pi] = chunks * (pool.step_ms or 0.0)
        sim.est_matrix = np.column_stack([sim.est[pi] for pi, _ in agg])
        col = {pi: k for k, (pi, _) in enumerate(agg)}
        sim.est_col = np.array([col[r.pi] for r in sim.reps])
        used = sim.warm_start(rng, ghosts, cls.prompt, cls.output, hit)
        ghosts = ghosts[len(used) :]
        sim.run(arr[idx].tolist(), idx.tolist(), sim.arrive_prefill)
        events += sim.events
        f = np.array(sim.first[:n])
        first[idx] = f[idx]
        last[idx] = np.array(sim.last[:n])[idx]
        wait[idx] = np.array(sim.started[:n])[idx] - arr[idx]
        reps = np.array(sim.rep_of[:n])
        pool_of[idx] = sim.pool_ids[reps[idx]]
        stats += _replica_stats(sim, agg, window)

    if pre and dec:
        idx = np.flatnonzero(~to_agg)
        t_in = arr[idx]
        p_in = prompt[idx]
        services, exposed = [], []
        for _, pool in pre:
            s, e = _prefill_and_exposed(pool, p_in, hit)
            services.append(s)
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
        sim = _ClassSim(cls, dec, n_total, all_output.tolist(), ctx, t_warm, horizon_ms)
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


def _replica_stats(sim: _ClassSim, pools: list[tuple[int, SimPool]], window) -> list[dict]:
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
