"""Step times of one replica for the simulator: the cost model, made fast.

A simulation evaluates hundreds of thousands of steps. :class:`StepModel` evaluates
the cost model v2 (:mod:`planner.kernels`, a step is a sum of kernels) through the
replica's cached :class:`planner.kernels.StepCoefficients`, with plain floats (and
numpy for the chunk steps of long prompts):

* decode step ``roofline.decode_step_ms(B, s)``;
* stall-free mixed step ``roofline.mixed_step_ms(B, s, T, s_c)``;
* a whole prompt on a prefill replica ``roofline.prefill_ms``;
* KV bytes per sequence as the replica *holds* them (TP replication included), against
  ``roofline.kv_capacity_bytes``.

tests/test_simulate.py pins every function here to the cost model's own
(relative error 1e-12) for dense, MoE and sliding-window models.
"""

from __future__ import annotations

import math
from itertools import accumulate

import numpy as np

from planner import roofline as rl

#: Chunk schedules up to this many steps are timed with floats, longer ones with numpy.
_VECTOR_FROM = 8
#: Entries each step-time cache keeps (prompts whose chunk attention is kept: more are
#: in prefill at once only on pools of more replicas); a cache is emptied when full.
_CHUNK_CACHE = 4096


class StepModel:
    """Cached constants of one replica's cost model, and its step times (ms)."""

    def __init__(self, replica: rl.Replica) -> None:
        self.replica = replica
        self.c = replica.coefficients
        self.kv_capacity_bytes = rl.kv_capacity_bytes(replica)
        c = self.c
        # Fast path (no speculative drafter: its work depends on the context): a step
        # is GEMMs and collectives over the step's tokens, cached per (batch, chunk),
        # plus attention, evaluated inline (the same operations as the cost model's).
        self._fast = c.draft is None and not c.draft_layer_fraction
        self._parts: dict[float, tuple[float, float, float]] = {}
        self._fixed: dict[tuple[float, float], float] = {}
        self._chunks: dict[tuple[float, int, float], tuple[np.ndarray, np.ndarray]] = {}
        self._one_minus_overlap = 1.0 - c.overlap
        self._decode_parts: dict[int, tuple[float, float, float]] = {}
        self._plain = self._fast and not c.windowed_layers and not c.kv_windowed_held
        self._kv_per_token = c.kv_full_held + c.draft_kv_held
        # chunk sums in closed form (chunks_ms): attention affine in the chunk's start
        self._closed = self._plain and 0.0 <= self._one_minus_overlap <= 1.0
        # the measured attention kernel's floor on a sequence's KV read
        # (StepCoefficients.kv_read_ms_per_seq): per-sequence ms, bytes/ms
        self._attn_pair, self._w_attn = c.attn_pair_ms, c.w_attn_per_ms
        self._attn_seq = c.attn_seq_ms  # the per-sequence cost added to it
        self._closed_consts = (
            c.queries_per_seq,
            c.decode_attn_per_ctx,
            c.full_layers,
            c.f_attn_per_ms,
            self._kv_per_token,
            c.w_per_ms,
            c.prefill_attn_per_ctx,
            c.pp,
        )

    # ------------------------------------------------------------------ pieces

    def weights_read(self, tokens: float) -> float:
        """``roofline.weight_bytes_read_per_step`` (bytes)."""
        return rl.weight_bytes_read_per_step(self.replica, tokens)

    def comm_ms(self, tokens: float) -> float:
        """``roofline.tp_comm_ms`` (ms)."""
        return self.c.comm_ms(tokens)

    def kv_bytes(self, tokens: float) -> float:
        """KV bytes the replica holds for one sequence (replication included)."""
        return self.c.kv_held_bytes(tokens)

    # ------------------------------------------------------------------ steps

    def _tokens_parts(self, batch: float, chunk: float) -> tuple[float, float, float]:
        """(GEMMs, collectives + overhead, pipeline hand-overs) of a step of ``batch``
        decodes and a ``chunk`` (ms), as :meth:`planner.kernels.StepCoefficients.step_ms`
        sums them; they depend only on the step's token count ``n = batch / pp x queries
        + chunk``, and are cached per ``n`` (a prompt's last chunk has its own size, but
        ``n`` takes few values: whole tokens)."""
        c = self.c
        n = batch / c.pp * c.queries_per_seq + max(chunk, 0.0)
        parts = self._parts.get(n)
        if parts is None:
            parts = (
                c.gemm_ms(n) + c.moe_ms(n),
                c.comm_ms(n) + c.overhead_ms,
                c.pipeline_ms(n) if c.pp > 1 else 0.0,
            )
            if len(self._parts) >= _CHUNK_CACHE:
                self._parts.clear()
            self._parts[n] = parts
        return parts

    def decode_ms(self, batch: int, context_tokens: float) -> float:
        """``roofline.decode_step_ms(batch, context)`` (ms): the cost model's step
        (:meth:`planner.kernels.StepCoefficients.step_ms`) with its token-count kernels
        cached per batch and its attention ``max(compute, KV read)`` inline."""
        parts = self._decode_parts.get(batch)
        if parts is not None and self._plain:  # the common case, with fewer lookups
            gm, co, pl = parts
            q, d_attn, layers, f_attn, kv_token, w, _, pp = self._closed_consts
            b = batch / pp
            compute = q * b * d_attn * (layers * context_tokens) / f_attn
            kvb = kv_token * context_tokens
            m1, m2 = kvb / w, self._attn_pair + kvb / self._w_attn
            memory = b * ((m1 if m1 > m2 else m2) + self._attn_seq)
            t = gm + (compute if compute > memory else memory) + co
            return t + pl if pp > 1 else t
        if not self._fast or batch <= 0:
            return self.c.step_ms(batch, context_tokens)
        c = self.c
        if parts is None:
            parts = self._decode_parts[batch] = self._tokens_parts(batch, 0.0)
        gm, co, pl = parts
        b = max(batch, 0.0) / c.pp
        if self._plain:  # context_weight and kv_held_bytes of a model without windows
            cw = c.full_layers * context_tokens
            kv = self._kv_per_token * context_tokens
        else:
            cw = c.context_weight(context_tokens)
            kv = c.kv_held_bytes(context_tokens)
        compute = c.queries_per_seq * b * c.decode_attn_per_ctx * cw / c.f_attn_per_ms
        memory = b * c.kv_read_ms_per_seq(kv)
        t = gm + (compute if compute > memory else memory) + co
        return t + pl if c.pp > 1 else t

    def prefill_ms(self, prompt_tokens: float, cached_tokens: float) -> float:
        """A whole prompt on a prefill replica (``roofline.prefill_ms``)."""
        return rl.prefill_ms(self.replica, prompt_tokens, cached_tokens)

    def chunk_ms(self, chunk_tokens: float, start_tokens: float) -> float:
        """``roofline.chunk_compute_ms(T, s)`` (ms)."""
        return self.c.chunk_compute_ms(chunk_tokens, start_tokens)

    def mixed_ms(self, batch: int, context: float, chunk: float, chunk_start: float) -> float:
        """``roofline.mixed_step_ms(batch, context, T, s)`` (ms): the cost model's step
        with its token-count kernels cached and its shared attention launch inline."""
        if not self._fast or chunk <= 0:
            return self.c.step_ms(batch, context, chunk, chunk_start)
        c = self.c
        gm, co, pl = self._tokens_parts(batch, chunk)
        b = max(batch, 0.0) / c.pp
        end = chunk_start + chunk
        if self._plain:  # context_weight, kv_held_bytes and span without windows, inline
            q, d_attn, layers, f_attn, kv, w, p_attn, _ = self._closed_consts
            if b > 0:
                dc = q * b * d_attn * (layers * context) / f_attn
                kvb = kv * context
                m1, m2 = kvb / w, self._attn_pair + kvb / self._w_attn
                dm = b * ((m1 if m1 > m2 else m2) + self._attn_seq)
            else:
                dc = dm = 0.0
            s_end = layers * end * end / 2.0
            s_start = layers * chunk_start * chunk_start / 2.0
            cc = p_attn * (s_end - s_start) / f_attn
            cm = kv * end / w
        else:
            if b > 0:
                flops = c.queries_per_seq * b * c.decode_attn_per_ctx * c.context_weight(context)
                dc = flops / c.f_attn_per_ms
                dm = b * c.kv_read_ms_per_seq(c.kv_held_bytes(context))
            else:
                dc = dm = 0.0
            cc = c.prefill_attn_per_ctx * (c.span(end) - c.span(chunk_start)) / c.f_attn_per_ms
            cm = c.kv_held_bytes(end) / c.w_per_ms
        a_d = dc if dc > dm else dm
        a_c = cc if cc > cm else cm
        hi, lo = (a_d, a_c) if a_d > a_c else (a_c, a_d)
        attn = hi + self._one_minus_overlap * lo
        both = dc + cc
        t = gm + (attn if attn > both else both) + co
        return t + pl if c.pp > 1 else t

    def chunk_steps_ms(
        self,
        batch: int,
        context: float,
        budget: float,
        count: int,
        last: float,
        cached: float,
        first_index: int = 0,
    ) -> list[float]:
        """Durations of chunk steps ``first_index .. count - 1`` of a prompt cut in
        ``count`` chunks of ``budget`` tokens (the last one ``last`` tokens), starting
        after ``cached`` tokens, each with ``batch`` decodes at mean ``context`` (ms)."""
        n = count - first_index
        if n <= 0:
            return []
        if n < _VECTOR_FROM:
            out = [
                self.mixed_ms(batch, context, budget, cached + i * budget)
                for i in range(first_index, count - 1)
            ]
        else:
            out = self._full_chunks_ms(batch, context, budget, count, cached, first_index).tolist()
        out.append(self._last_chunk_ms(batch, context, budget, count, last, cached))
        return out

    def _last_chunk_ms(
        self, batch: int, context: float, budget: float, count: int, last: float, cached: float
    ) -> float:
        """The step of a prompt's last chunk (``last`` tokens after ``count - 1`` full
        ones of ``budget``, after ``cached``), with ``batch`` decodes (ms)."""
        return self.mixed_ms(batch, context, last, cached + (count - 1) * budget)

    def chunk_cumulative_ms(
        self,
        batch: int,
        context: float,
        budget: float,
        count: int,
        last: float,
        cached: float,
        first_index: int = 0,
    ) -> list[float]:
        """Cumulative sums of :meth:`chunk_steps_ms` (ms after the first of them starts),
        the same additions in the same order."""
        if count - first_index >= _VECTOR_FROM:
            full = self._full_chunks_ms(batch, context, budget, count, cached, first_index)
            cum = np.cumsum(full).tolist()
            cum.append(cum[-1] + self._last_chunk_ms(batch, context, budget, count, last, cached))
            return cum
        return list(
            accumulate(
                self.chunk_steps_ms(batch, context, budget, count, last, cached, first_index)
            )
        )

    def chunks_ms(
        self,
        batch: int,
        context: float,
        budget: float,
        count: int,
        last: float,
        cached: float,
        first: int,
        steps: int,
    ) -> float:
        """Duration of ``steps`` chunk steps ``first .. first + steps - 1`` of a prompt
        cut in ``count`` chunks (:meth:`chunk_steps_ms`), with ``batch`` decodes at mean
        ``context`` (ms): their sum, the last element of :meth:`chunk_cumulative_ms`.

        Without sliding windows or a drafter the full chunks are summed in closed form
        (:meth:`_full_chunks_sum_ms`), equal to the sum of the steps up to rounding; the
        last chunk is :meth:`mixed_ms`. Otherwise the cumulative sums are taken."""
        if steps <= 0:
            return 0.0
        if not self._closed:
            return self.chunk_cumulative_ms(batch, context, budget, count, last, cached, first)[
                steps - 1
            ]
        end = first + steps
        full = end if end < count else count - 1
        total = 0.0
        if full > first:
            total = self._full_chunks_sum_ms(batch, context, budget, cached, first, full)
        if end >= count:
            total += self._last_chunk_ms(batch, context, budget, count, last, cached)
        return total

    def _full_chunks_sum_ms(
        self, batch: int, context: float, budget: float, cached: float, lo: int, hi: int
    ) -> float:
        """Sum of the step times of full chunks ``lo .. hi - 1`` (ms) in closed form, for
        a model without sliding windows or a drafter (``self._closed``).

        Full chunk ``i`` starts at ``s_i = cached + i T``. Its own attention compute
        ``cc_i = P_attn L T (s_i + T/2) / F_attn`` and KV read ``cm_i = kv (s_i + T) /
        W`` are affine in ``i``; the decodes' (``dc``, ``dm``, ``a_d = max``) are
        constant. The step is ``fixed + max(A_i, dc + cc_i)`` with ``A_i = max(a_d,
        a_c) + r min(a_d, a_c)``, ``a_c = max(cc_i, cm_i)``, ``r = 1 - overlap`` in
        [0, 1], that is ``(1 - r) max(a_d, cc_i, cm_i) + r (a_d + max(cc_i, cm_i))``: a
        maximum of affine functions of ``i``, so convex. The branch taken at ``i`` gives
        an affine function below the step everywhere and equal to it at ``i``; where the
        branches at both ends of a range are the same, the step *is* that affine function
        over the range (convexity) and its sum is an arithmetic series; otherwise the
        range is split where the two meet. A few ranges per call."""
        fixed = self._fixed.get((batch, budget))
        if fixed is None:
            fixed = self._fixed_ms(batch, budget)
        q, d_attn, layers, f_attn, kv, w, p_attn, pp = self._closed_consts
        b = batch / pp
        if b > 0:  # StepCoefficients.decode_attention_parts_ms, the same operations
            dc = q * b * d_attn * (layers * context) / f_attn
            kvb = kv * context
            m1, m2 = kvb / w, self._attn_pair + kvb / self._w_attn
            dm = b * ((m1 if m1 > m2 else m2) + self._attn_seq)
        else:
            dc = dm = 0.0
        a_d = dc if dc > dm else dm
        r = self._one_minus_overlap
        k_c = p_attn * layers * budget / f_attn
        cc_u, cc_v = k_c * (cached + budget / 2.0), k_c * budget
        k_m = kv / w
        cm_u, cm_v = k_m * (cached + budget), k_m * budget

        def branch(i: int) -> tuple[int, float, float]:
            """(branch, intercept, slope) of the step's attention at chunk ``i``."""
            cc = cc_u + cc_v * i
            cm = cm_u + cm_v * i
            if cc >= cm:
                b, au, av, ac = 0, cc_u, cc_v, cc
            else:
                b, au, av, ac = 2, cm_u, cm_v, cm
            if ac >= a_d:
                u, v, a = au + r * a_d, av, ac + r * a_d
            else:
                b, u, v, a = b + 1, a_d + r * au, r * av, a_d + r * ac
            if dc + cc > a:
                return 4, dc + cc_u, cc_v
            return b, u, v

        total = 0.0
        ranges = [(lo, hi - 1)]
        while ranges:
            p, q = ranges.pop()
            b1, u1, v1 = branch(p)
            if p == q:
                total += u1 + v1 * p
                continue
            b2, u2, v2 = branch(q)
            if b1 == b2:
                n = q - p + 1
                total += n * u1 + v1 * (p + q) * n / 2.0
                continue
            m = math.floor((u2 - u1) / (v1 - v2)) if v1 != v2 else (p + q) // 2
            m = p if m < p else (q - 1 if m >= q else m)
            ranges.append((m + 1, q))
            ranges.append((p, m))
        return fixed * (hi - lo) + total

    def _fixed_ms(self, batch: int, budget: float) -> float:
        """The token-count kernels of a step of ``batch`` decodes and a full chunk of
        ``budget`` tokens (ms), as :meth:`_full_chunks_ms` sums them; cached."""
        key = (batch, budget)
        fixed = self._fixed.get(key)
        if fixed is None:
            c = self.c
            n = batch / c.pp * c.queries_per_seq + budget
            fixed = c.gemm_ms(n) + c.moe_ms(n) + c.comm_ms(n) + c.overhead_ms + c.pipeline_ms(n)
            if len(self._fixed) >= _CHUNK_CACHE:
                self._fixed.clear()
            self._fixed[key] = fixed
        return fixed

    def _full_chunks_ms(
        self, batch: int, context: float, budget: float, count: int, cached: float, first: int
    ) -> np.ndarray:
        """Step times of the full chunks ``first .. count - 2`` (ms), as
        :meth:`planner.kernels.StepCoefficients.chunk_steps_array_ms` computes them; the
        chunks' own attention is computed once per prompt (:meth:`_chunk_attention`)."""
        c = self.c
        if not self._fast:
            starts = cached + budget * np.arange(first, count - 1, dtype=float)
            return c.chunk_steps_array_ms(batch, context, budget, starts)
        fixed = self._fixed_ms(batch, budget)
        dc, dm = c.decode_attention_parts_ms(batch / c.pp, context, c.queries_per_seq)
        a_d = max(dc, dm)
        cc, a_c = self._chunk_attention(budget, count, cached)
        if first:
            cc, a_c = cc[first:], a_c[first:]
        attn = np.maximum(a_d, a_c) + self._one_minus_overlap * np.minimum(a_d, a_c)
        return fixed + np.maximum(attn, dc + cc)

    def _chunk_attention(
        self, budget: float, count: int, cached: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """A prompt's full chunks' own attention (compute, ``max(compute, KV read)``; ms),
        cached per prompt (a prefill's chunk steps are retimed whenever its replica's
        batch changes)."""
        key = (budget, count, cached)
        got = self._chunks.get(key)
        if got is None:
            c = self.c
            starts = cached + budget * np.arange(0, count - 1, dtype=float)
            ends = starts + budget

            def span(x: np.ndarray) -> np.ndarray:
                out = c.full_layers * x * x / 2.0
                if c.windowed_layers:
                    w = c.window_tokens
                    out = out + c.windowed_layers * np.where(
                        x <= w, x * x / 2.0, w * w / 2.0 + w * (x - w)
                    )
                return out

            cc = c.prefill_attn_per_ctx * (span(ends) - span(starts)) / c.f_attn_per_ms
            got = (cc, np.maximum(cc, c.kv_held_array(ends) / c.w_per_ms))
            if len(self._chunks) >= _CHUNK_CACHE:
                self._chunks.clear()
            self._chunks[key] = got
        return got

    # ------------------------------------------------------------------ arrays

    def kv_bytes_array(self, tokens: np.ndarray) -> np.ndarray:
        """:meth:`kv_bytes` over an array of sequence lengths (bytes; a speculative
        drafter's KV included, :meth:`planner.kernels.StepCoefficients.kv_held_array`)."""
        return self.c.kv_held_array(tokens)


def chunk_count(new_tokens: float, budget: int) -> tuple[int, float]:
    """(number of chunks, size of the last) of ``new_tokens`` in chunks of ``budget``."""
    count = max(1, math.ceil(new_tokens / budget - 1e-9))
    return count, new_tokens - (count - 1) * budget


def chunk_plan(new_tokens: float, cached_tokens: float, budget: int) -> tuple[np.ndarray, ...]:
    """Chunk sizes (all ``budget`` but the last) and start contexts of a prompt's
    ``new_tokens`` after ``cached_tokens`` (for tests and reports)."""
    count, last = chunk_count(new_tokens, budget)
    sizes = np.full(count, float(budget))
    sizes[-1] = last
    starts = cached_tokens + budget * np.arange(count, dtype=float)
    return sizes, starts
