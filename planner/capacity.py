"""Steady-state capacity of one replica: continuous batching with chunked prefill.

The question users ask of one replica ("how many output tokens per second does
llama-3.1-70b on 4 x H100 give at 1k/256 tokens, and at what TTFT/TPOT?") has
one answer per *operating point*. This module computes it from the roofline
cost model (:mod:`planner.roofline`), in the mean-value steady state of an
engine that, every step, runs all resident decodes plus prefill chunks up to a
token budget ``T`` (vLLM ``max_num_batched_tokens``, TensorRT-LLM
``max_num_tokens``), each decode counting one token of the budget.

Notation (units in brackets). Every request has ``P`` prompt tokens and ``G``
output tokens; the first output token ends the prefill, the other ``G - 1``
come one per decode step. The operating point is parametrized by ``B``, the
mean number of sequences in decode [sequences]:

* prefill tokens per step (flow balance, per step ``B`` decode tokens and
  ``c`` prefill tokens are served, in the ratio ``(G - 1) : P``):
  ``c = B x P / (G - 1)`` [tokens];
* a decoding sequence sees ``B_s = max(B, 1)`` decodes in its step; the budget
  left for prefill is ``T_avail = T - B_s`` [tokens];
* steps that carry prefill hold a chunk of ``T_c = min(max(P, c), T_avail)`` tokens (one
  whole prompt, several short ones, or one budget-sized chunk of a long one); a share
  ``f = c / T_c`` of the steps carries one;
* :func:`step_ms` prices a step of ``b`` decodes and ``n`` chunk tokens: memory
  ``(weights read + b x KV(P + G/2)) / W_eff``, decode compute ``b x flops_per_token(P +
  G/2) / F_eff``, chunk compute ``n x prefill FLOPs per prompt token / F_eff`` (dense
  GEMMs x the measured gain at ``b + n`` tokens); ``d = max(memory, decode compute)``,
  ``t = max(d, chunk) + (1 - overlap) x min(d, chunk)``, never below the sum of the two
  compute times (tensor cores cannot overlap compute with compute), plus TP all-reduces
  and the per-step overhead (:mod:`planner.roofline` functions);
* TPOT = the mean step ``t = f x step(B_s, T_c) + (1 - f) x step(B_s, 0)`` [ms];
* throughput (Little's law on the decode phase, ``B = X (G - 1) t``):
  ``X = B / ((G - 1) t)`` [requests/s]; output tokens/s = ``X x G``;
* one prompt's prefill takes ``S_p = ceil(P / T_avail)`` steps of
  ``step(B_s, T_c)`` [ms], and waits for prefill slots as an M/D/c queue with
  ``c = max(1, floor(T_avail / P))`` servers of service ``S_p``
  (:func:`planner.queueing.mgc_mean_wait_s` with ``cs^2 = 0``), plus, arriving at a
  busy engine, the step in flight and the one already scheduled under overlap
  scheduling (:func:`planner.engines.busy_wait_ms`, ``k`` = 1 on all three engines):
  TTFT = ``min(1, n) x t x (1/2 + k) + W_q + S_p + stack(P)`` [ms], the last the
  serving stack's latency (:mod:`planner.serving_stack`, no GPU time; 0 without MLA);
* resident sequences holding KV cache: ``n = B + X x S_p`` must fit
  ``max_resident_batch(K)`` (:func:`planner.roofline.max_resident_batch`), ``K`` the
  context each sequence takes against the engine's admission limit
  (:func:`planner.engines.kv_admission_context_tokens`): ``P + G/2`` on vLLM and SGLang,
  which grow sequences into the cache, ``P + G`` on TensorRT-LLM, whose default
  scheduler reserves the whole output at admission;
  the prefill share of the budget ``rho = c / T_avail`` must stay below 1.

Throughput, TPOT and TTFT all grow with ``B``, so every question is a 1-D
search over ``B``: the largest feasible ``B*`` gives the maximum throughput;
a request rate, a concurrency ``C = X x (TTFT + (G - 1) t)`` (closed loop)
or SLOs on the *mean* TTFT/TPOT pick a smaller one. Beyond ``B*`` a closed loop
queues the extra users: TTFT = ``C / X - (G - 1) t`` (Little's law).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from planner import architecture as arch
from planner import engines, queueing
from planner import kernels as kn
from planner import roofline as rl
from planner.errors import PlanningError
from planner.request_checks import check_context_window

#: Token budget per engine step (vLLM V1 ``max_num_batched_tokens`` for online serving on
#: large GPUs, TensorRT-LLM's default ``max_num_tokens``).
DEFAULT_TOKEN_BUDGET = 8192

#: Relative tolerance of the searches over the decode batch.
_REL_TOL = 1e-8


class Bound(StrEnum):
    """What limits a replica's throughput at the reported operating point."""

    COMPUTE = "compute"  # steps are compute-bound (or the prefill budget is full)
    MEMORY_BANDWIDTH = "memory_bandwidth"  # steps are bound by reading weights and KV
    KV_CAPACITY = "kv_capacity"  # resident sequences fill the KV cache
    MAX_BATCH = "max_batch"  # the engine's max_num_seqs setting caps the batch
    SLO = "slo"  # a TTFT or TPOT objective caps the load


class CapacityMode(StrEnum):
    MAX_THROUGHPUT = "max_throughput"  # every request queued: the replica's maximum
    CONCURRENCY = "concurrency"  # a closed loop of C users
    RATE = "rate"  # an open loop at a request rate (Poisson arrivals)
    SLO = "slo"  # the highest throughput meeting the SLOs


class CapacityResult(BaseModel):
    """One replica's predicted steady state (see the module docstring for formulas).

    ``batch``: mean sequences in decode; ``resident_sequences``: decode + prefill
    (what holds KV cache); ``ttft_ms`` is None when an open loop is overloaded (the
    queue, hence TTFT, grows through the run); in ``max_throughput`` mode it is the
    time from admission to first token (queueing before admission excluded).
    ``bound`` says what limits the throughput; ``step_bound`` which roofline side
    dominates the mean step (compute or memory_bandwidth); ``saturated`` whether
    the replica runs at its maximum."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: CapacityMode
    prompt_tokens: int
    output_tokens: int
    output_tokens_per_s: float
    output_tokens_per_s_per_gpu: float
    requests_per_s: float
    batch: float
    resident_sequences: float
    max_resident_sequences: int
    concurrency: float | None
    ttft_ms: float | None
    tpot_ms: float
    prefill_ms: float
    prefill_tokens_per_step: float
    token_budget: int
    prefill_budget_utilization: float
    bound: Bound
    step_bound: Bound
    slo_binding: str | None = None
    slo_met: bool | None = None
    saturated: bool
    notes: list[str] = []


# --------------------------------------------------------------------------- step model


@dataclass(frozen=True)
class StepModel:
    """Step times of one replica for one request shape (``P`` prompt, ``G`` output).

    The cost model v2 (:mod:`planner.kernels`): a step of ``b`` decodes at the mean
    decode context ``P + G/2`` and ``n`` prefill tokens is a sum of kernels, the
    weight/expert GEMMs over ``b + n`` tokens, attention (decodes bandwidth-bound,
    the chunk compute-bound at the prompt's mean per-token attention cost, sharing
    one kernel with the overlap factor), TP collectives and the per-step overhead.
    Constants come from the replica's :class:`planner.kernels.StepCoefficients`, so a
    step costs arithmetic only (the calibration fit evaluates millions of them).
    """

    replica: rl.Replica
    prompt_tokens: float
    output_tokens: float
    kv_bytes_per_seq: float  # KV held for one sequence at the mean decode context P + G/2
    decode_flops_per_seq: float  # FLOPs of one decode token at context P + G/2
    prefill_flops_per_token: float  # mean prefill FLOPs per prompt token
    prefill_attn_flops_per_token: float  # of which attention
    max_resident: int  # sequences the engine admits: KV at kv_admission_context_tokens

    @classmethod
    def of(cls, replica: rl.Replica, prompt_tokens: float, output_tokens: float) -> StepModel:
        model = replica.model
        c = replica.coefficients
        context = prompt_tokens + output_tokens / 2.0
        attn = c.prefill_attn_per_ctx * c.span(prompt_tokens) / prompt_tokens
        return cls(
            replica=replica,
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            kv_bytes_per_seq=c.kv_held_bytes(context),
            decode_flops_per_seq=arch.weight_flops_per_token(model)
            + c.decode_attn_per_ctx * c.context_weight(context),
            prefill_flops_per_token=arch.weight_flops_per_token(model) + attn,
            prefill_attn_flops_per_token=attn,
            max_resident=rl.max_resident_batch(
                replica, admission_context_tokens(replica, prompt_tokens, output_tokens)
            ),
        )

    @property
    def coefficients(self):
        return self.replica.coefficients

    def weight_bytes(self, tokens: float) -> float:
        """Weight bytes a step over ``tokens`` tokens reads (MoE: the experts touched)."""
        return rl.weight_bytes_read_per_step(self.replica, tokens)

    def _attention_parts(self, batch: float, chunk_tokens: float) -> tuple[float, ...]:
        c = self.coefficients
        context = self.prompt_tokens + self.output_tokens / 2.0
        dc, dm = c.decode_attention_parts_ms(batch, context)
        cc = chunk_tokens * self.prefill_attn_flops_per_token / c.f_attn_per_ms
        cm = c.kv_held_bytes(self.prompt_tokens) * chunk_tokens / self.prompt_tokens / c.w_per_ms
        return dc, dm, cc, cm

    def parts_ms(self, batch: float, chunk_tokens: float) -> tuple[float, float, float]:
        """(memory, decode compute, chunk compute) of one step, ms: the bytes every
        kernel reads over ``W_eff`` and the two sides' FLOPs over their peaks, dense GEMMs
        at the step's token gain (bounds for reports and :meth:`is_compute_bound`)."""
        c = self.coefficients
        dc, dm, cc, cm = self._attention_parts(batch, chunk_tokens)
        n = batch + chunk_tokens
        weights = self.weight_bytes(n) / c.w_weights_per_ms if n > 0 else 0.0
        dense_per_token = c.dense_ms_per_token(n) if n > 0 else 0.0
        gemm_per_token = dense_per_token + c.routed_flops_per_token / c.f_gemm_per_ms
        return (weights + dm + cm, batch * gemm_per_token + dc, chunk_tokens * gemm_per_token + cc)

    def step_ms(self, batch: float, chunk_tokens: float) -> float:
        """One step of ``batch`` decodes and ``chunk_tokens`` prefill tokens (ms).

        ``gemm(b + n) + moe(b + n) + max(a_d, a_c) + (1 - o) min(a_d, a_c)`` (attention
        at least the sum of its compute times) + TP all-reduces of ``b + n`` tokens +
        step overhead. With no chunk it is :func:`planner.roofline.decode_step_ms`.
        """
        c = self.coefficients
        n = batch + chunk_tokens
        if n <= 0:
            return 0.0
        attn = c.shared_attention_ms(*self._attention_parts(batch, chunk_tokens))
        return c.gemm_ms(n) + c.moe_ms(n) + attn + c.comm_ms(n) + c.overhead_ms

    def is_compute_bound(self, batch: float, chunk_tokens: float) -> bool:
        memory, dcomp, ccomp = self.parts_ms(batch, chunk_tokens)
        return dcomp + ccomp > memory


@dataclass(frozen=True)
class OperatingPoint:
    """Everything at mean decode batch ``batch`` (see the module docstring)."""

    batch: float
    prefill_tokens_per_step: float
    budget_left: float  # T_avail
    chunk_tokens: float  # T_c
    chunk_share: float  # f
    tpot_ms: float
    chunk_step_ms: float
    requests_per_s: float
    prefill_ms: float  # S_p
    wait_ms: float  # W_q (inf when the prefill budget is saturated)
    residual_ms: float
    resident: float  # n
    rho: float
    compute_bound: bool
    stack_ms: float = 0.0  # serving stack (Replica.stack_ttft_ms of the prompt), no GPU time

    @property
    def admitted_ttft_ms(self) -> float:
        """From admission to first token (ms): TTFT without the queue's wait."""
        return self.residual_ms + self.prefill_ms + self.stack_ms

    @property
    def ttft_ms(self) -> float:
        return self.admitted_ttft_ms + self.wait_ms


class CapacityModel:
    """The operating points of one replica for one request shape and engine settings."""

    def __init__(
        self,
        replica: rl.Replica,
        prompt_tokens: int,
        output_tokens: int,
        *,
        token_budget: int = DEFAULT_TOKEN_BUDGET,
        max_batch: int | None = None,
    ):
        _check_shape(replica, prompt_tokens, output_tokens, token_budget, max_batch)
        self.replica = replica
        self.p = float(prompt_tokens)
        self.g = float(output_tokens)
        self.token_budget = token_budget
        self.max_batch = max_batch
        self.steps = StepModel.of(replica, self.p, self.g)
        self._b_max: float | None = None
        self._b_max_bound: Bound | None = None

    # ------------------------------------------------------------ one point

    def point(self, batch: float) -> OperatingPoint:
        p, g1 = self.p, self.g - 1.0
        b_s = max(batch, 1.0)
        c = batch * p / g1
        left = self.token_budget - b_s
        if left < 1.0:
            left = 1.0  # only reached beyond the feasible range (see feasible())
        chunk = min(max(p, c), left)
        share = min(c / chunk, 1.0)
        with_chunk = self.steps.step_ms(b_s, chunk)
        tpot = share * with_chunk + (1.0 - share) * self.steps.step_ms(b_s, 0.0)
        x = batch / (g1 * tpot / 1e3)
        service = math.ceil(p / left - 1e-9) * with_chunk
        rho = c / left
        servers = max(1, math.floor(left / p))
        if rho >= 1.0 or x * service / 1e3 >= servers:
            wait = math.inf
        elif x <= 0:
            wait = 0.0
        else:
            wait = 1e3 * queueing.mgc_mean_wait_s(x, service / 1e3, servers, service_cv2=0.0)
        resident = batch + x * service / 1e3
        return OperatingPoint(
            batch=batch,
            prefill_tokens_per_step=c,
            budget_left=left,
            chunk_tokens=chunk,
            chunk_share=share,
            tpot_ms=tpot,
            chunk_step_ms=with_chunk,
            requests_per_s=x,
            prefill_ms=service,
            wait_ms=wait,
            residual_ms=engines.busy_wait_ms(self.replica.engine, resident, tpot),
            resident=resident,
            rho=rho,
            compute_bound=self.steps.is_compute_bound(b_s, share * chunk),
            stack_ms=self.replica.stack_ttft_ms(p),
        )

    def _violation(self, batch: float) -> Bound | None:
        """The first limit ``batch`` breaks, or None when it is feasible."""
        if self.token_budget - max(batch, 1.0) < 1.0:
            return Bound.COMPUTE
        pt = self.point(batch)
        if pt.rho >= 1.0:
            return Bound.COMPUTE
        if pt.resident > self.steps.max_resident:
            return Bound.KV_CAPACITY
        if self.max_batch is not None and max(batch, 1.0) > self.max_batch:
            return Bound.MAX_BATCH
        return None

    # ------------------------------------------------------------ searches

    def max_batch_point(self) -> tuple[float, Bound]:
        """The largest feasible mean decode batch ``B*`` and the limit it meets."""
        if self._b_max is None:
            hi = float(min(self.steps.max_resident, self.token_budget - 1))
            if self.max_batch is not None:
                hi = min(hi, float(self.max_batch))
            bound = self._violation(hi)
            if bound is None:
                self._b_max, self._b_max_bound = hi, self._limit_at(hi)
            else:
                lo = 0.0
                while hi - lo > _REL_TOL * max(hi, 1.0):
                    mid = (lo + hi) / 2.0
                    why = self._violation(mid)
                    if why is None:
                        lo = mid
                    else:
                        hi, bound = mid, why
                self._b_max, self._b_max_bound = lo, bound
        assert self._b_max_bound is not None
        return self._b_max, self._b_max_bound

    def _limit_at(self, batch: float) -> Bound:
        """Which limit a feasible upper end of the range sits on."""
        if self.max_batch is not None and batch >= self.max_batch:
            return Bound.MAX_BATCH
        if batch >= self.steps.max_resident:
            return Bound.KV_CAPACITY
        return Bound.COMPUTE

    def search(self, fn: Callable[[OperatingPoint], float], target: float) -> float:
        """The largest B in [0, B*] with fn(point(B)) <= target (fn grows with B)."""
        b_max, _ = self.max_batch_point()
        if fn(self.point(b_max)) <= target:
            return b_max
        lo, hi = 0.0, b_max
        while hi - lo > _REL_TOL * max(hi, 1.0):
            mid = (lo + hi) / 2.0
            if fn(self.point(mid)) <= target:
                lo = mid
            else:
                hi = mid
        return lo

    def concurrency_of(self, pt: OperatingPoint) -> float:
        """Users of a closed loop at this point: ``X x (TTFT + (G - 1) t)``."""
        return pt.requests_per_s * (pt.ttft_ms + (self.g - 1.0) * pt.tpot_ms) / 1e3


# --------------------------------------------------------------------------- checks


def _check_shape(
    replica: rl.Replica,
    prompt_tokens: int,
    output_tokens: int,
    token_budget: int,
    max_batch: int | None,
) -> None:
    for field, value, low in (
        ("prompt_tokens", prompt_tokens, 1),
        ("output_tokens", output_tokens, 2),
        ("token_budget", token_budget, 2),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            extra = " (one prefill token and at least one decode step)" if low == 2 else ""
            raise PlanningError.for_field(
                field, f"must be an integer >= {low}{extra}, got {value!r}"
            )
    if max_batch is not None and (isinstance(max_batch, bool) or max_batch < 1):
        raise PlanningError.for_field("max_batch", f"must be >= 1, got {max_batch!r}")
    check_context_window(replica.model, prompt_tokens, output_tokens)
    context = admission_context_tokens(replica, prompt_tokens, output_tokens)
    if rl.max_resident_batch(replica, context) < 1:
        reserves = engines.engine_profile(replica.engine).reserves_max_output
        held = "reserved at admission by" if reserves else "on"
        fit = min(rl.kv_capacity_tokens(replica), math.floor(context))
        raise PlanningError.for_field(
            "prompt_tokens",
            f"one sequence of {context:,.0f} tokens ({held} {replica.engine}) needs "
            f"{replica.coefficients.kv_held_bytes(context) / 1e9:.2f} GB of KV cache, more "
            f"than the {rl.kv_capacity_bytes(replica) / 1e9:.2f} GB left after the weights: "
            f"about {fit:,} tokens fit, {context - fit:,.0f} fewer (or spread the model over "
            "more GPUs)",
        )


def admission_context_tokens(
    replica: rl.Replica, prompt_tokens: float, output_tokens: float
) -> float:
    """The context (tokens) one sequence of the shape takes against ``replica``'s
    engine's KV admission limit (:func:`planner.engines.kv_admission_context_tokens`:
    ``P + G`` on TensorRT-LLM, ``P + G/2`` on vLLM and SGLang)."""
    profile = engines.engine_profile(replica.engine)
    return engines.kv_admission_context_tokens(profile, prompt_tokens, output_tokens)


def engine_max_batch(replica: rl.Replica) -> int | None:
    """The running-sequence cap ``replica``'s engine applies when not told (sequences;
    :func:`planner.engines.default_max_num_seqs` on the replica's GPU), for analyses and
    measurements that set no ``max_batch``."""
    return engines.default_max_num_seqs(engines.engine_profile(replica.engine), replica.gpu)


# --------------------------------------------------------------------------- the analysis


def replica_capacity(
    replica: rl.Replica,
    prompt_tokens: int,
    output_tokens: int,
    *,
    ttft_ms: float | None = None,
    tpot_ms: float | None = None,
    concurrency: float | None = None,
    request_rate_rps: float | None = None,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
    max_batch: int | None = None,
) -> CapacityResult:
    """Predicted steady state of one replica (see the module docstring).

    - no SLO, concurrency or rate: the maximum throughput (every request queued);
    - ``concurrency`` C: a closed loop of C users, each sending its next request
      when the previous one ends;
    - ``request_rate_rps``: an open loop (Poisson arrivals); ``math.inf`` is the
      maximum throughput; an overloaded loop has ``ttft_ms`` None;
    - ``ttft_ms`` / ``tpot_ms``: the highest throughput whose *mean* TTFT / TPOT
      meet them (with ``concurrency``: the point at that concurrency, and whether
      it meets them, ``slo_met``).

    Raises :class:`PlanningError` naming ``prompt_tokens``, ``output_tokens``,
    ``concurrency``, ``request_rate_rps``, ``ttft_ms`` or ``tpot_ms`` (an SLO
    missed even at the lightest load).
    """
    for field, value in (("ttft_ms", ttft_ms), ("tpot_ms", tpot_ms), ("concurrency", concurrency)):
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise PlanningError.for_field(field, f"must be a positive number, got {value}")
    if request_rate_rps is not None and not request_rate_rps > 0:
        raise PlanningError.for_field("request_rate_rps", f"must be > 0, got {request_rate_rps}")
    if concurrency is not None and request_rate_rps is not None:
        raise PlanningError.for_field("request_rate_rps", "give a concurrency or a rate, not both")
    cm = CapacityModel(
        replica, prompt_tokens, output_tokens, token_budget=token_budget, max_batch=max_batch
    )
    b_max, limit = cm.max_batch_point()
    top = cm.point(b_max)
    notes: list[str] = []
    slo = ttft_ms is not None or tpot_ms is not None

    if concurrency is not None:
        mode = CapacityMode.CONCURRENCY
        if cm.concurrency_of(top) <= concurrency:
            pt, saturated = top, True
            ttft = concurrency / top.requests_per_s * 1e3 - (cm.g - 1.0) * top.tpot_ms
            ttft = max(ttft, top.ttft_ms)
            if concurrency > cm.concurrency_of(top) * (1 + 1e-9):
                notes.append(
                    f"{concurrency:g} users exceed the {cm.concurrency_of(top):.1f} the replica "
                    "serves at once: the rest queue (TTFT by Little's law)"
                )
        else:
            b = cm.search(cm.concurrency_of, concurrency)
            pt, saturated = cm.point(b), False
            ttft = pt.ttft_ms
    elif request_rate_rps is not None and not slo:
        mode = CapacityMode.RATE
        if request_rate_rps >= top.requests_per_s:
            pt, saturated, ttft = top, True, None
            if math.isfinite(request_rate_rps):
                notes.append(
                    f"{request_rate_rps:g} requests/s exceed the replica's "
                    f"{top.requests_per_s:.2f}: the queue grows, TTFT is not predicted"
                )
        else:
            b = cm.search(lambda p: p.requests_per_s, request_rate_rps)
            pt, saturated = cm.point(b), False
            ttft = pt.ttft_ms
    elif slo:
        mode = CapacityMode.SLO
        lightest = cm.point(0.0)
        if ttft_ms is not None and lightest.ttft_ms > ttft_ms:
            raise PlanningError.for_field(
                "ttft_ms",
                f"{ttft_ms:g} ms is below the TTFT of an idle replica ({lightest.ttft_ms:.1f} ms)",
            )
        if tpot_ms is not None and lightest.tpot_ms > tpot_ms:
            raise PlanningError.for_field(
                "tpot_ms",
                f"{tpot_ms:g} ms is below the TPOT of a single sequence "
                f"({lightest.tpot_ms:.1f} ms)",
            )
        b = b_max
        binding = None
        if ttft_ms is not None:
            b_t = cm.search(lambda p: p.ttft_ms, ttft_ms)
            if b_t < b:
                b, binding = b_t, "ttft"
        if tpot_ms is not None:
            b_p = cm.search(lambda p: p.tpot_ms, tpot_ms)
            if b_p < b:
                b, binding = b_p, "tpot"
        pt = cm.point(b)
        saturated = binding is None
        ttft = pt.ttft_ms if math.isfinite(pt.ttft_ms) else pt.admitted_ttft_ms
    else:
        mode = CapacityMode.MAX_THROUGHPUT
        pt, saturated = top, True
        ttft = pt.admitted_ttft_ms
        notes.append("ttft_ms is from admission to first token (time queued before excluded)")

    step_bound = Bound.COMPUTE if pt.compute_bound else Bound.MEMORY_BANDWIDTH
    slo_binding = None
    if mode == CapacityMode.SLO and not saturated:
        bound, slo_binding = Bound.SLO, binding
    elif saturated:
        bound = limit
        if limit == Bound.KV_CAPACITY and pt.compute_bound:
            bound = Bound.COMPUTE  # more KV would not help: steps are compute-bound
    else:
        bound = step_bound
    slo_met = None
    if slo and mode != CapacityMode.SLO:
        slo_met = (ttft_ms is None or (ttft is not None and ttft <= ttft_ms)) and (
            tpot_ms is None or pt.tpot_ms <= tpot_ms
        )
    x = pt.requests_per_s
    out = x * cm.g
    conc: float | None = concurrency if concurrency is not None else cm.concurrency_of(pt)
    if conc is not None and not math.isfinite(conc):
        conc = None
    return CapacityResult(
        mode=mode,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        output_tokens_per_s=out,
        output_tokens_per_s_per_gpu=out / replica.tp,
        requests_per_s=x,
        batch=pt.batch,
        resident_sequences=pt.resident,
        max_resident_sequences=cm.steps.max_resident,
        concurrency=conc,
        ttft_ms=ttft,
        tpot_ms=pt.tpot_ms,
        prefill_ms=pt.prefill_ms,
        prefill_tokens_per_step=pt.prefill_tokens_per_step,
        token_budget=token_budget,
        prefill_budget_utilization=min(pt.rho, 1.0),
        bound=bound,
        step_bound=step_bound,
        slo_binding=slo_binding,
        slo_met=slo_met,
        saturated=saturated,
        notes=notes,
    )


# --------------------------------------------------------------------------- decode slots


def largest_batch(
    limit: int, step_of: Callable[[int], float], tpot_ms: float
) -> tuple[int, float] | None:
    """Largest B in [1, limit] with step_of(B) <= tpot_ms (step time grows with B):
    (B, step_of(B)), or None when even B = 1 misses."""
    if limit < 1 or step_of(1) > tpot_ms:
        return None
    lo, hi = 1, limit
    if step_of(hi) <= tpot_ms:
        return hi, step_of(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if step_of(mid) <= tpot_ms:
            lo = mid
        else:
            hi = mid
    return lo, step_of(lo)


def decode_slots(
    replica: rl.Replica,
    context_tokens: float,
    tpot_ms: float,
    *,
    chunk_tokens: int | None = None,
    chunk_context_tokens: float = 0.0,
) -> tuple[int, float] | None:
    """The optimizer's decode slots of one replica: the largest integer batch B that
    fits the KV cache at ``context_tokens`` (:func:`planner.roofline.max_resident_batch`)
    and whose step stays within ``tpot_ms`` — a decode step, or with ``chunk_tokens``
    a mixed step carrying a full chunk every time (:func:`planner.roofline.mixed_step_ms`:
    the worst step a TPOT percentile must cover, where :func:`replica_capacity` prices
    the mean step). With speculative decoding (``replica.speculative``) the step is a
    verification step advancing each sequence ``a`` tokens, so the bound is on
    ``step / a`` (:func:`planner.kernels.effective_tpot_ms`) and that is the time
    returned. Returns (B, time per output token ms), or None when one sequence misses."""
    limit = rl.max_resident_batch(replica, context_tokens)
    a = kn.tokens_per_verification_step(replica.speculative)

    def step(b: int) -> float:
        if chunk_tokens is None:
            return kn.effective_tpot_ms(rl.decode_step_ms(replica, b, context_tokens), a)
        t = rl.mixed_step_ms(replica, b, context_tokens, chunk_tokens, chunk_context_tokens)
        return kn.effective_tpot_ms(t, a)

    return largest_batch(limit, step, tpot_ms)


# --------------------------------------------------------------------------- roofline limits


class RooflineLimits(BaseModel):
    """What no prediction may beat: peak FLOP/s and HBM bandwidth (MFU = MBU = 1), no
    overhead, no communication, the KV cache's batch cap.

    ``max_output_tokens_per_s = G x min(peak FLOP/s / FLOPs per request,
    B_cap x peak BW / (weights + B_cap x KV) / (G - 1))``; ``min_tpot_ms`` = one read
    of the weights a single decode touches at peak bandwidth; ``min_ttft_ms`` = the
    prompt's FLOPs at peak.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_output_tokens_per_s: float
    min_tpot_ms: float
    min_ttft_ms: float


def roofline_limits(replica: rl.Replica, prompt_tokens: int, output_tokens: int) -> RooflineLimits:
    """Ideal-hardware limits of one replica for one request shape (see RooflineLimits)."""
    steps = StepModel.of(replica, float(prompt_tokens), float(output_tokens))
    g1 = output_tokens - 1.0
    peak_f = rl.peak_flops(replica)
    peak_w = rl.peak_bandwidth_bytes_per_s(replica)
    per_request = prompt_tokens * steps.prefill_flops_per_token + g1 * steps.decode_flops_per_seq
    x_compute = peak_f / per_request
    cap = float(max(steps.max_resident, 1))
    decode_tok_s = cap * peak_w / (steps.weight_bytes(cap) + cap * steps.kv_bytes_per_seq)
    x_memory = decode_tok_s / g1
    return RooflineLimits(
        max_output_tokens_per_s=output_tokens * min(x_compute, x_memory),
        min_tpot_ms=steps.weight_bytes(1.0) / peak_w * 1e3,
        min_ttft_ms=prompt_tokens * steps.prefill_flops_per_token / peak_f * 1e3,
    )


__all__ = [
    "DEFAULT_TOKEN_BUDGET",
    "Bound",
    "CapacityMode",
    "CapacityModel",
    "CapacityResult",
    "OperatingPoint",
    "RooflineLimits",
    "StepModel",
    "decode_slots",
    "largest_batch",
    "replica_capacity",
    "roofline_limits",
]
