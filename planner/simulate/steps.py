"""Step times of one replica for the simulator: the cost model, made fast.

A simulation evaluates hundreds of thousands of steps, and the cost model's
functions (``planner.roofline``) re-derive parameter counts on every call.
:class:`StepModel` caches a replica's constants once and evaluates the same
formulas with plain floats (and numpy for the chunk steps of long prompts):

* decode step ``roofline.decode_step_ms(B, s)``:
  ``max((W_read(B) + B KV(s)) / W_eff, B flops_per_token(s) / F_eff) + comm(B) + overhead``;
* stall-free mixed step ``roofline.mixed_step_ms(B, s, T, s_c)``: the decode part
  ``d = max((W_read(B + T) + B KV(s)) / W_eff, B flops_per_token(s) / F_eff)``, the
  chunk ``c = prefill_flops(T, s_c) / F_eff``,
  ``max(d, c) + (1 - o) min(d, c) + comm(B + T) + overhead``;
* ``W_read(n)``: all weights, or for MoE the experts n tokens touch
  (``roofline.weight_bytes_read_per_step``); ``comm(n)``: the TP all-reduces,
  linear in tokens (``roofline.tp_comm_ms``).

tests/test_simulate.py pins every function here to the cost model's own
(relative error 1e-12) for dense, MoE and sliding-window models.
"""

from __future__ import annotations

import math

import numpy as np

from catalog.schema import DTYPE_BYTES
from planner import architecture as arch
from planner import roofline as rl

#: Chunk schedules up to this many steps are timed with floats, longer ones with numpy.
_VECTOR_FROM = 8


class StepModel:
    """Cached constants of one replica's cost model, and its step times (ms)."""

    def __init__(self, replica: rl.Replica) -> None:
        self.replica = replica
        model = replica.model
        self.f_eff = rl.effective_flops(replica)
        self.w_eff = rl.effective_bandwidth_bytes_per_s(replica)
        self.overlap = replica.overlap_factor
        self.overhead_ms = replica.step_overhead_ms
        self.weight_flops = arch.weight_flops_per_token(model)
        self.attn_per_ctx = arch.attention_flops_per_context_token(model)
        windowed = model.sliding_window.windowed_layers if model.sliding_window else 0
        self.full_layers = model.num_layers - windowed
        self.windowed_layers = windowed
        self.window = float(model.sliding_window.window_tokens) if model.sliding_window else 0.0
        per_layer = arch.kv_bytes_per_token_per_layer(model, replica.kv_dtype)
        self.kv_full = per_layer * self.full_layers
        self.kv_windowed = per_layer * windowed
        self.kv_capacity_bytes = rl.kv_capacity_bytes(replica)
        self.weights_bytes = rl.replica_weight_bytes(replica)
        self.moe = model.moe
        if model.moe is not None:
            b_w = DTYPE_BYTES[replica.weight_dtype]
            self.moe_fixed = self.weights_bytes - arch.routed_expert_param_count(model) * b_w
            self.moe_per_expert = arch.moe_layer_count(model) * arch.expert_param_count(model) * b_w
        # TP all-reduces are linear in tokens (plus link latency) for tokens > 0
        c1, c2 = rl.tp_comm_ms(replica, 1.0), rl.tp_comm_ms(replica, 2.0)
        self.comm_per_token = c2 - c1
        self.comm_fixed = c1 - self.comm_per_token

    # ------------------------------------------------------------------ pieces

    def weights_read(self, tokens: float) -> float:
        """``roofline.weight_bytes_read_per_step`` (bytes)."""
        if self.moe is None:
            return self.weights_bytes
        e, k = self.moe.num_experts, self.moe.experts_per_token
        distinct = e * (1.0 - (1.0 - k / e) ** max(tokens, 0.0)) if tokens > 0 else 0.0
        return self.moe_fixed + self.moe_per_expert * distinct

    def comm_ms(self, tokens: float) -> float:
        """``roofline.tp_comm_ms`` (ms)."""
        return self.comm_fixed + self.comm_per_token * tokens if tokens > 0 else 0.0

    def kv_bytes(self, tokens: float) -> float:
        """KV bytes of one sequence (``architecture.kv_bytes_for_sequence``)."""
        held = self.kv_full * tokens
        if self.kv_windowed:
            held += self.kv_windowed * min(tokens, self.window)
        return held

    def _context_weight(self, tokens: float) -> float:
        """Layers x context a token attends to: full x s + windowed x min(s, window)."""
        ctx = self.full_layers * tokens
        if self.windowed_layers:
            ctx += self.windowed_layers * min(tokens, self.window)
        return ctx

    def decode_part_ms(self, batch: int, context_tokens: float, routed_tokens: float) -> float:
        """Decode part ``d`` of a step: max(memory, compute) of ``batch`` decodes at mean
        context, weights read for ``routed_tokens`` tokens (ms, no overhead)."""
        memory = (self.weights_read(routed_tokens) + batch * self.kv_bytes(context_tokens)) / (
            self.w_eff
        )
        flops = batch * (
            self.weight_flops + self.attn_per_ctx * self._context_weight(context_tokens)
        )
        return max(memory, flops / self.f_eff) * 1e3

    # ------------------------------------------------------------------ steps

    def decode_ms(self, batch: int, context_tokens: float) -> float:
        """``roofline.decode_step_ms(batch, context)`` (ms)."""
        return (
            self.decode_part_ms(batch, context_tokens, batch)
            + self.comm_ms(batch)
            + self.overhead_ms
        )

    def prefill_ms(self, prompt_tokens: float, cached_tokens: float) -> float:
        """A whole prompt on a prefill replica (``roofline.prefill_ms``)."""
        return rl.prefill_ms(self.replica, prompt_tokens, cached_tokens)

    def _span(self, x: float) -> float:
        """Integral of the layer-weighted context up to position x."""
        out = self.full_layers * x * x / 2.0
        if self.windowed_layers:
            w = self.window
            out += self.windowed_layers * (x * x / 2.0 if x <= w else w * w / 2.0 + w * (x - w))
        return out

    def chunk_ms(self, chunk_tokens: float, start_tokens: float) -> float:
        """``roofline.chunk_compute_ms(T, s)`` (ms)."""
        flops = chunk_tokens * self.weight_flops + self.attn_per_ctx * (
            self._span(start_tokens + chunk_tokens) - self._span(start_tokens)
        )
        return flops / self.f_eff * 1e3

    def mixed_ms(self, batch: int, context: float, chunk: float, chunk_start: float) -> float:
        """``roofline.mixed_step_ms(batch, context, T, s)`` (ms)."""
        d = self.decode_part_ms(batch, context, batch + chunk)
        c = self.chunk_ms(chunk, chunk_start)
        hi, lo = (d, c) if d >= c else (c, d)
        return hi + (1.0 - self.overlap) * lo + self.comm_ms(batch + chunk) + self.overhead_ms

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
            out.append(self.mixed_ms(batch, context, last, cached + (count - 1) * budget))
            return out
        starts = cached + budget * np.arange(first_index, count - 1, dtype=float)
        c = self._chunk_array(budget, starts)
        d = self.decode_part_ms(batch, context, batch + budget)
        fixed = self.comm_ms(batch + budget) + self.overhead_ms
        full = np.maximum(d, c) + (1.0 - self.overlap) * np.minimum(d, c) + fixed
        out = full.tolist()
        out.append(self.mixed_ms(batch, context, last, cached + (count - 1) * budget))
        return out

    def _chunk_array(self, chunk: float, starts: np.ndarray) -> np.ndarray:
        """:meth:`chunk_ms` of equal chunks at many start contexts (ms)."""

        def span(x: np.ndarray) -> np.ndarray:
            out = self.full_layers * x * x / 2.0
            if self.windowed_layers:
                w = self.window
                out = out + self.windowed_layers * np.where(
                    x <= w, x * x / 2.0, w * w / 2.0 + w * (x - w)
                )
            return out

        flops = chunk * self.weight_flops + self.attn_per_ctx * (
            span(starts + chunk) - span(starts)
        )
        return flops / self.f_eff * 1e3

    # ------------------------------------------------------------------ arrays

    def kv_bytes_array(self, tokens: np.ndarray) -> np.ndarray:
        """:meth:`kv_bytes` over an array of sequence lengths (bytes)."""
        held = self.kv_full * tokens
        if self.kv_windowed:
            held = held + self.kv_windowed * np.minimum(tokens, self.window)
        return held


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
