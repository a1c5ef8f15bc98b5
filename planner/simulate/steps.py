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

import numpy as np

from planner import roofline as rl

#: Chunk schedules up to this many steps are timed with floats, longer ones with numpy.
_VECTOR_FROM = 8


class StepModel:
    """Cached constants of one replica's cost model, and its step times (ms)."""

    def __init__(self, replica: rl.Replica) -> None:
        self.replica = replica
        self.c = replica.coefficients
        self.kv_capacity_bytes = rl.kv_capacity_bytes(replica)

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

    def decode_ms(self, batch: int, context_tokens: float) -> float:
        """``roofline.decode_step_ms(batch, context)`` (ms)."""
        return self.c.step_ms(batch, context_tokens)

    def prefill_ms(self, prompt_tokens: float, cached_tokens: float) -> float:
        """A whole prompt on a prefill replica (``roofline.prefill_ms``)."""
        return rl.prefill_ms(self.replica, prompt_tokens, cached_tokens)

    def chunk_ms(self, chunk_tokens: float, start_tokens: float) -> float:
        """``roofline.chunk_compute_ms(T, s)`` (ms)."""
        return self.c.chunk_compute_ms(chunk_tokens, start_tokens)

    def mixed_ms(self, batch: int, context: float, chunk: float, chunk_start: float) -> float:
        """``roofline.mixed_step_ms(batch, context, T, s)`` (ms)."""
        return self.c.step_ms(batch, context, chunk, chunk_start)

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
        out = self.c.chunk_steps_array_ms(batch, context, budget, starts).tolist()
        out.append(self.mixed_ms(batch, context, last, cached + (count - 1) * budget))
        return out

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
