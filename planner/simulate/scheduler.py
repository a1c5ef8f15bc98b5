"""The event loop of one class's aggregated or decode replicas (:class:`ClassSim`):
the per-replica scheduler, router and exact between-event advance that
:mod:`planner.simulate.engine` describes, on replica state (:class:`_Rep`).
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections import deque

import numpy as np

from planner import kernels as kn
from planner.simulate.fleet import LengthModel, SimClass, SimPool
from planner.simulate.steps import chunk_count
from solver.problem import PoolRole

INF = math.inf


#: Routing penalty (ms) for a replica with no free decode slot.
_FULL = 1e15
#: Golden-ratio conjugate: request ids times it, mod 1, spread evenly over [0, 1).
_SPREAD = 0.6180339887498949


def decode_steps(output_tokens: float, tokens_per_step: float, rid: int) -> int:
    """Engine steps request ``rid`` stays in decode for ``output_tokens`` (steps).

    Without speculation ``G - 1`` (one token per step; the first comes from prefill).
    With speculative decoding a sequence advances ``a`` tokens per verification step on
    average: ``x = (G - 1) / a`` (:func:`planner.kernels.verification_steps`), rounded
    down or up so that the mean over requests is x: up when ``frac(rid x 0.618...) <
    frac(x)`` (a low-discrepancy sequence, deterministic per request). At least 1 step
    when G > 1."""
    g = int(output_tokens)
    if g <= 1:
        return 0
    if tokens_per_step == 1.0:
        return g - 1
    x = kn.verification_steps(g, tokens_per_step)
    whole = math.floor(x)
    up = ((rid + 1) * _SPREAD) % 1.0 < x - whole
    return max(1, whole + (1 if up else 0))


class _Rep:
    """State of one replica. Between events it runs uniform decode steps of ``step``
    ms, or the remaining chunk steps of the prefill ``pf`` (chunks ``ci`` of ``nch``)."""

    __slots__ = (
        "B",
        "C",
        "V",
        "a",
        "ahead",
        "budget",
        "budget_f",
        "cap",
        "ci",
        "fin",
        "ib",
        "ibusy",
        "idx",
        "iq",
        "is_decode",
        "kv",
        "last",
        "maxb",
        "nch",
        "need",
        "occ",
        "pending",
        "pf",
        "pi",
        "pool",
        "qest",
        "qmax",
        "queue",
        "step",
        "steps",
        "t0",
        "t_acc",
        "t_next",
        "ver",
    )

    def __init__(self, idx: int, pi: int, pool: SimPool) -> None:
        self.idx, self.pi, self.pool = idx, pi, pool
        self.steps = pool.steps
        self.is_decode = pool.role == PoolRole.DECODE
        self.budget = pool.chunk_budget_tokens or 1
        self.budget_f = float(self.budget)
        self.need: list[float] = []  # KV bytes per request on this pool (ClassSim.need)
        self.maxb = pool.max_batch or 1
        self.cap = pool.steps.kv_capacity_bytes
        # output tokens a sequence advances per step: the acceptance length with
        # speculative decoding (planner.kernels.tokens_per_verification_step), else 1
        self.a = kn.tokens_per_verification_step(pool.steps.replica.speculative)
        self.B = 0  # resident decodes
        self.C = 0.0  # sum of their contexts (tokens)
        self.kv = 0.0  # KV bytes held or reserved
        self.occ = 0  # decode slots used or promised (ClassSim.occ)
        # residents by the step count at which they finish, then id: a heap of
        # ``steps x ClassSim.M + request`` (one int: cheaper to compare than a pair)
        self.fin: list[int] = []
        self.V = 0  # steps done at t0
        self.t0 = 0.0  # last step boundary (ms)
        self.step = 0.0
        self.pf = -1  # request being prefilled (aggregated)
        self.nch = 0  # chunks of pf, and the size of its last
        self.last = 0.0
        self.ci = 0  # chunks of pf done
        self.queue: deque[int] = deque()
        self.pending: list[int] = []  # decode: joins at the next boundary
        self.qest = 0.0  # estimated prefill work queued (ms)
        self.ver = 0
        self.t_next = INF
        self.ahead = -1.0  # the last boundary a decode join was done ahead of (ms)
        self.t_acc = 0.0
        self.ib = self.ibusy = self.iq = 0.0
        self.qmax = 0


class ClassSim:
    """The event loop of one class's aggregated replicas or decode replicas."""

    #: Join a request at its decode replica's next boundary on arrival when nothing else
    #: happens there (:meth:`_join_ahead`); off, an event at the boundary does it (tests).
    JOIN_AHEAD = True

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
        # decode replicas (disaggregated) or aggregated ones: a ClassSim runs one kind
        self.decode = bool(self.reps) and self.reps[0].is_decode
        self.pool_list = [pi for pi, _ in pools]
        self.one_pool = len(self.pool_list) == 1 and len(self.reps) > 4
        self.maxb = np.array([r.maxb for r in self.reps], dtype=float)
        self.maxb_list = self.maxb.tolist()
        self.occ = [0] * len(self.reps)  # slots used or promised (_Rep.occ)
        # routing penalty of a replica with no free slot: _FULL where occ >= max batch
        self.pen = np.zeros(len(self.reps))
        self._score = np.zeros(len(self.reps))
        self.work_end = np.zeros(len(self.reps))
        self.output = output
        self.ctx = ctx.tolist()
        # KV bytes per request on each pool's replicas (pool index -> list)
        self.need: dict[int, list[float]] = {
            pi: pool.steps.kv_bytes_array(ctx).tolist() for pi, pool in pools
        }
        for rep in self.reps:
            rep.need = self.need[rep.pi]
        self.M = n_total  # request ids are below it (residents' heap keys, _Rep.fin)
        self.first = [math.nan] * n_total
        self.last = [math.nan] * n_total
        self.started = [math.nan] * n_total
        self.joined = [math.nan] * n_total
        self.rep_of = [-1] * n_total
        #: aggregated arrivals that found their replica stepping (decodes resident or a
        #: prefill running): overlap scheduling starts them one step later (engine.py)
        self.busy = [False] * n_total
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.t_warm, self.t_stop = t_warm, t_stop
        self.central: deque[int] = deque()  # decode: waiting for a slot
        self.central_iq = 0.0
        self.central_t = 0.0
        self.central_max = 0
        self.events = 0
        self.events_ahead = 0  # decode joins done ahead of their boundary (_join_ahead)
        # aggregated prefill chunks
        self.new_tokens: list[float] = []
        self.cached: list[float] = []
        self.est: dict[int, list[float]] = {}
        self.est_matrix = np.zeros((0, 1))
        self.est_col = np.zeros(0, dtype=int)
        self.est_one: list[float] | None = None  # one pool: its estimates

    def set_estimates(self, est: dict[int, np.ndarray]) -> None:
        """Estimated prefill time of every request on each aggregated pool (pool index
        -> ms per request), which the router adds to a replica's queued work."""
        self.est = {pi: e.tolist() for pi, e in est.items()}
        self.est_matrix = np.column_stack([est[pi] for pi in self.pool_list])
        col = {pi: k for k, pi in enumerate(self.pool_list)}
        self.est_col = np.array([col[r.pi] for r in self.reps])
        self.est_one = self.est[self.pool_list[0]] if len(self.pool_list) == 1 else None

    def _occupy(self, rep: _Rep, slots: int) -> None:
        """Add ``slots`` (negative: free them) to the replica's used or promised slots."""
        rep.occ += slots
        self.occ[rep.idx] = rep.occ
        if not self.decode:
            self.pen[rep.idx] = _FULL if rep.occ >= rep.maxb else 0.0

    # ------------------------------------------------------------------ bookkeeping

    def _acc(self, rep: _Rep, t: float) -> None:
        lo = rep.t_acc if rep.t_acc > self.t_warm else self.t_warm
        hi = t if t < self.t_stop else self.t_stop
        rep.t_acc = t
        if hi > lo:
            dt = hi - lo
            rep.ib += rep.B * dt
            if rep.pf >= 0 or (rep.B > 0 and rep.is_decode):
                rep.ibusy += dt
            if rep.queue:
                rep.iq += len(rep.queue) * dt

    def _acc_central(self, t: float) -> None:
        lo = self.central_t if self.central_t > self.t_warm else self.t_warm
        hi = t if t < self.t_stop else self.t_stop
        self.central_t = t
        if hi > lo and self.central:
            self.central_iq += len(self.central) * (hi - lo)

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
            self._release_one(rep, rid)
            return
        steps = int(g) - 1 if rep.a == 1.0 else decode_steps(g, rep.a, rid)
        heapq.heappush(rep.fin, (rep.V + steps) * self.M + rid)
        rep.B += 1
        rep.C += self.ctx[rid]

    def _release_one(self, rep: _Rep, rid: int) -> None:
        """Free the KV and the slot of request ``rid``, which never became a resident
        (its one output token came with its prefill)."""
        rep.kv -= rep.need[rid]
        self._occupy(rep, -1)

    def _admissible(self, rep: _Rep, rid: int, held: int) -> bool:
        if held == 0:
            return True  # an empty replica always takes one sequence
        return held < rep.maxb and rep.kv + rep.need[rid] <= rep.cap

    def _release(self, rep: _Rep, t: float, lim: int) -> int:
        """Retire the residents whose last token lands at or before ``lim`` (their
        ``step x M + rid`` keys in ``rep.fin``) at time ``t``: their batch slot, context
        and KV leave the replica; returns how many left."""
        fin, m = rep.fin, self.M
        last, ctx, need = self.last, self.ctx, rep.need
        pop = heapq.heappop
        b, c, kv, released = rep.B, rep.C, rep.kv, 0
        while fin and fin[0] < lim:
            rid = pop(fin) % m
            last[rid] = t
            b -= 1
            c -= ctx[rid]
            kv -= need[rid]
            released += 1
        rep.B, rep.C, rep.kv = b, c, kv
        return released

    def _boundary(self, rep: _Rep, t: float) -> None:
        """Everything that happens at a step boundary, then the next segment and its
        event: the end of the prefill (or its chunks up to the next decode completion),
        or the next decode completion."""
        fin, m = rep.fin, self.M
        lim = (rep.V + 1) * m  # residents finishing at or before step V
        if fin and fin[0] < lim:
            self._occupy(rep, -self._release(rep, t, lim))
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
        if self.central and rep.is_decode:
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
                rep.qest -= self.est[rep.pi][rid]
                rep.kv += rep.need[rid]
                self.started[rid] = t
                rep.nch, rep.last = chunk_count(self.new_tokens[rid], rep.budget)
                rep.ci = 0
        # the next event: the end of the prefill's chunks or the next decode completion
        rep.ver += 1
        b = rep.B
        if rep.pf >= 0:
            k = rep.nch - rep.ci
            if fin:
                kc = fin[0] // m - rep.V
                if kc < k:
                    k = kc
            tn = rep.t0 + rep.steps.chunks_ms(
                b,
                rep.C / b if b else 0.0,
                rep.budget_f,
                rep.nch,
                rep.last,
                self.cached[rep.pf],
                rep.ci,
                k,
            )
        elif b > 0:
            rep.step = step = rep.steps.decode_ms(b, rep.C / b)
            k = fin[0] // m - rep.V
            tn = rep.t0 + k * step
        else:
            rep.t_next = INF
            return
        rep.t_next = tn
        self.seq += 1
        heapq.heappush(self.heap, (tn, self.seq, rep.idx, rep.ver, k))

    def _decode_boundary(self, rep: _Rep, t: float) -> None:
        """:meth:`_boundary` of a decode replica (no prefill, no queue of its own): the
        same operations in the same order."""
        fin, m = rep.fin, self.M
        v = rep.V
        lim = (v + 1) * m  # residents finishing at or before step v
        if fin and fin[0] < lim:
            rep.occ -= self._release(rep, t, lim)
            self.occ[rep.idx] = rep.occ
        if rep.B == 0:
            rep.C = 0.0
        pending = rep.pending
        if pending:
            output, ctx, push = self.output, self.ctx, heapq.heappush
            joined, a = self.joined, rep.a
            for rid in pending:  # _join, inline
                g = output[rid]
                joined[rid] = t
                if g <= 1:
                    self.last[rid] = t
                    self._release_one(rep, rid)
                    continue
                steps = int(g) - 1 if a == 1.0 else decode_steps(g, a, rid)
                push(fin, (v + steps) * m + rid)
                rep.B += 1
                rep.C += ctx[rid]
            pending.clear()
        if self.central:
            self._acc_central(t)
            while self.central and self._admissible(rep, self.central[0], rep.B):
                rid = self.central.popleft()
                self._reserve(rep, rid)
                self._join(rep, rid, t)
        rep.ver += 1
        b = rep.B
        if b > 0:
            rep.step = step = rep.steps.decode_ms(b, rep.C / b)
            k = fin[0] // m - v
            tn = rep.t0 + k * step
            rep.t_next = tn
            self.seq += 1
            heapq.heappush(self.heap, (tn, self.seq, rep.idx, rep.ver, k))
        else:
            rep.t_next = INF

    def _reserve(self, rep: _Rep, rid: int) -> None:
        rep.kv += rep.need[rid]
        self._occupy(rep, 1)
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
            # pool.step_ms is the planned time per output token; the steps below are
            # engine steps, each advancing a sequence rep.a tokens
            resident = lam * mean_g * step
            for _ in range(3):  # fixed point of L = lambda G step(L) / a
                b = max(1.0, min(resident, rep.maxb))
                if pool.role == PoolRole.AGGREGATED and pool.chunk_budget_tokens:
                    step = pool.steps.mixed_ms(
                        round(b), ctx_mean, pool.chunk_budget_tokens, prompt.mean_tokens * hit
                    )
                else:
                    step = pool.steps.decode_ms(round(b), ctx_mean)
                resident = lam * mean_g * step / rep.a
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
                remaining = decode_steps(int(rng.integers(1, int(g) + 1)) + 1, rep.a, gid)
                self._reserve(rep, gid)
                heapq.heappush(rep.fin, remaining * self.M + gid)
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
                zip(self.work_end.tolist(), self.occ, self.maxb_list, ests, strict=True)
            ):
                score = (w if w > t else t) + e + (_FULL if o >= b else 0.0)
                if score < best:
                    r, best = i, score
        else:  # max(work_end, t) + estimate, + _FULL where full (pen); in place
            score = self._score
            np.maximum(self.work_end, t, out=score)
            if self.est_one is not None:
                score += self.est_one[rid]
            else:
                score += self.est_matrix[rid][self.est_col]
            score += self.pen
            r = int(score.argmin())
        rep = self.reps[r]
        self.busy[rid] = rep.B > 0 or rep.pf >= 0
        e = self.est[rep.pi][rid]
        w = float(self.work_end[r])
        self.work_end[r] = (w if w > t else t) + e
        self._occupy(rep, 1)
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
        best: _Rep | None = None
        occ = self.occ
        if self.one_pool:
            # One pool: the least occupied replica (first of equals) is the loop's choice
            # below when it is admissible. A decode replica's slots used or promised
            # (occ) are its residents and pending joins.
            rep = self.reps[occ.index(min(occ))]
            held = rep.B + len(rep.pending)
            if held == 0 or (held < rep.maxb and rep.kv + rep.need[rid] <= rep.cap):
                best = rep
        if best is None:
            best_occ = INF
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
        best.kv += best.need[rid]  # _reserve, inline (no routing penalty on decode)
        best.occ += 1
        occ[best.idx] = best.occ
        self.rep_of[rid] = best.idx
        if best.B == 0:  # idle: act now
            best.pending.append(rid)
            self._advance(best, t, 0)
            self._decode_boundary(best, t)
            return
        # it joins at the first step boundary at or after t (_wake_at_boundary)
        k = math.ceil((t - best.t0) / best.step - 1e-9)
        if k < 0:
            k = 0
        tb = best.t0 + k * best.step
        if (
            self.JOIN_AHEAD
            and tb < best.t_next
            and tb <= self.t_stop
            and not best.pending
            and not self.central
            and self.output[rid] > 1
        ):
            self._join_ahead(best, rid, tb, k)
            return
        best.pending.append(rid)
        if tb < best.t_next:
            best.ver += 1
            best.t_next = tb
            self.seq += 1
            heapq.heappush(self.heap, (tb, self.seq, best.idx, best.ver, k))

    def _join_ahead(self, rep: _Rep, rid: int, tb: float, k: int) -> None:
        """Join ``rid`` now at the decode replica's boundary ``tb`` (``k`` steps ahead)
        instead of at an event there: the replica's boundary at ``tb``, done early.

        Equivalent because nothing else happens at that boundary: no resident finishes
        at or before it (its next event comes later), nothing waits for a slot (the
        class's decode queue is empty and so are the replica's pending joins), and the
        request has tokens to decode. What the router sees until ``tb`` (slots used or
        promised, KV reserved) is the same; a request routed here before ``tb`` joins at
        ``tb`` too (its first boundary at or after its arrival), in the same order."""
        if rep.ahead != tb:  # one event per boundary, however many join there
            rep.ahead = tb
            self.events_ahead += 1
        self._acc(rep, tb)  # the loop's advance to tb
        v = rep.V + k
        rep.V, rep.t0 = v, tb
        self.joined[rid] = tb  # _join
        g = self.output[rid]
        steps = int(g) - 1 if rep.a == 1.0 else decode_steps(g, rep.a, rid)
        fin, m = rep.fin, self.M
        heapq.heappush(fin, (v + steps) * m + rid)
        rep.B += 1
        rep.C += self.ctx[rid]
        rep.ver += 1  # the next event, as _decode_boundary schedules it
        b = rep.B
        rep.step = step = rep.steps.decode_ms(b, rep.C / b)
        kc = fin[0] // m - v
        tn = tb + kc * step
        rep.t_next = tn
        self.seq += 1
        heapq.heappush(self.heap, (tn, self.seq, rep.idx, rep.ver, kc))

    # ------------------------------------------------------------------ loop

    def run(self, times: list[float], order: list[int], arrive) -> None:
        """Process arrivals (sorted ``times`` of requests ``order``, each handed to
        ``arrive``) and replica events up to the horizon, then :meth:`_finish`."""
        heap = self.heap
        reps = self.reps
        t_stop, t_warm = self.t_stop, self.t_warm
        boundary = self._decode_boundary if self.decode else self._boundary
        pop = heapq.heappop
        times = [*times, INF]  # a sentinel: no arrival after the last
        i = 0
        events = 0
        while True:
            ta = times[i]
            if heap and heap[0][0] <= ta:
                t, _, r, ver, k = pop(heap)
                if t > t_stop:
                    break
                rep = reps[r]
                if ver != rep.ver:
                    continue
                events += 1
                # _advance(rep, t, k), inline (t <= t_stop)
                lo = rep.t_acc
                rep.t_acc = t
                if lo < t_warm:
                    lo = t_warm
                if t > lo:
                    dt = t - lo
                    rep.ib += rep.B * dt
                    if rep.pf >= 0 or (rep.B > 0 and rep.is_decode):
                        rep.ibusy += dt
                    if rep.queue:
                        rep.iq += len(rep.queue) * dt
                rep.V += k
                rep.t0 = t
                if rep.pf >= 0:
                    rep.ci += k
                boundary(rep, t)
            else:
                if ta > t_stop:
                    break
                arrive(order[i], ta)
                i += 1
                events += 1
        self.events = events + self.events_ahead
        self._finish()

    def _finish(self) -> None:
        """Stop at the horizon: finish resident decodes at their replica's current step."""
        t = self.t_stop
        self._acc_central(t)
        for rep in self.reps:
            self._acc(rep, t)
            if rep.pf >= 0:
                cum = rep.steps.chunk_cumulative_ms(
                    rep.B,
                    rep.C / rep.B if rep.B else 0.0,
                    float(rep.budget),
                    rep.nch,
                    rep.last,
                    self.cached[rep.pf],
                    rep.ci,
                )
                done = bisect.bisect_right(cum, t - rep.t0)
            elif rep.B > 0:
                done = int((t - rep.t0) // rep.step)
            else:
                done = 0
            v = rep.V + done
            for rid in rep.pending:
                steps = decode_steps(self.output[rid], rep.a, rid)
                heapq.heappush(rep.fin, (v + steps) * self.M + rid)
                rep.B += 1
                rep.C += self.ctx[rid]
                self.joined[rid] = t
            if not rep.fin:
                continue
            step = rep.pool.steps.decode_ms(rep.B, rep.C / rep.B) if rep.B else 0.0
            for vf, rid in (divmod(key, self.M) for key in rep.fin):
                self.last[rid] = t + max(vf - v, 0) * step
