"""The steady state of a measured disaggregated deployment: ``P`` prefill workers hand
each prompt's KV to ``D`` decode workers, driven by a closed loop of ``C`` users
(InferenceMAX's PD-disaggregated runs: each user sends its next request when the
previous one ends).

Per request, a prompt of ``isl`` tokens is prefilled in a batch on a prefill worker
(time to first token), then ``osl - 1`` decode steps run on a decode worker. With
``X`` requests/s in the loop (Little's law)::

    C = X x (TTFT(X) + (osl - 1) x TPOT(X)) / 1000

and :func:`disaggregated_closed_loop` solves it for ``X`` (``scipy.optimize.brentq``).
Output tokens/s are ``X x osl``. Where no ``X`` below the deployment's capacity holds
``C`` users, the bottleneck stage runs saturated and the rest wait (TTFT is then the
queue: ``C / X - (osl - 1) x TPOT``).

Not modelled (each a few per cent at these shapes, or unknown): the KV hand-over (a
1k-8k-token DeepSeek MLA latent, ~70 KB per token, moves in 1-11 ms at 400 Gb/s), the
router, and the length spread of the prompts (their mean is priced).

Measured multi-node deployments show TTFTs far above a prefill pass (InferenceMAX:
2.2 s at 4 users on B200, where a pass takes ~40 ms, 0.3 s at 32 users): hand-over,
router and scheduling delays the planner does not price. A calibration therefore
gives the measured TTFT (``ttft_ms``): the time a user's request is not in decode is
then taken as measured, and the measured throughput and TPOT check the decode
workers alone (:func:`planner.calibration.predict.predict_with`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.optimize import brentq

from planner import roofline as rl

#: Tokens a prefill worker batches per forward pass (assumed: disaggregated prefill
#: workers of SGLang and TensorRT-LLM run with chunked-prefill sizes / max_num_tokens of
#: 8,192-32,768 in the published recipes; 16,384 taken).
PREFILL_WORKER_TOKEN_BUDGET = 16_384

#: The wait for the prefill batch running when a prompt arrives is at most half a batch
#: (a busy worker takes every waiting prompt into its next batch).
MAX_PREFILL_WAIT_BATCHES = 0.5


def prefill_batch_ms(replica: rl.Replica, prompt_tokens: float, prompts: float) -> float:
    """One forward pass prefilling ``prompts`` prompts of ``prompt_tokens`` tokens
    together (ms), a sum of kernels (:mod:`planner.kernels`) over ``n = prompts x
    prompt_tokens`` tokens: ``gemm_ms(n) + moe_ms(n) + prompts x max(chunk attention
    compute, memory)(prompt_tokens) + comm_ms(n) + step overhead``. The weights are read
    once for the batch, so batching short prompts amortises them (MoE: every expert is
    read once a batch touches it). ``replica``'s factors are measured, fitted or assumed
    as its provenance says."""
    c = replica.coefficients
    n = prompts * prompt_tokens
    attention = prompts * max(c.chunk_attention_parts_ms(prompt_tokens, 0.0))
    return c.gemm_ms(n) + c.moe_ms(n) + attention + c.comm_ms(n) + c.overhead_ms


@dataclass(frozen=True)
class DisaggregatedPoint:
    """A disaggregated deployment's steady state: ``requests_per_s`` (X), whole-deployment
    ``output_tok_s`` (``X x osl``), mean ``ttft_ms`` and ``tpot_ms``, the decode batch
    per worker (sequences), the prefill batch (prompts per pass), and ``bound``:
    ``loop`` (the users' concurrency limits X), ``prefill`` or ``decode`` (that stage is
    saturated)."""

    requests_per_s: float
    output_tok_s: float
    ttft_ms: float
    tpot_ms: float
    decode_batch: float
    prefill_batch: float
    bound: str


class _Stages:
    """The two stages' times as functions of the loop's request rate."""

    def __init__(
        self,
        prefill: rl.Replica,
        decode: rl.Replica,
        prefill_workers: int,
        decode_workers: int,
        isl: int,
        osl: int,
        token_budget: int,
    ) -> None:
        self.prefill, self.decode = prefill, decode
        self.p, self.d = prefill_workers, decode_workers
        self.isl, self.steps = isl, max(osl - 1, 1)
        self.context = isl + osl / 2.0
        self.n_max = max(1.0, float(token_budget // isl))
        self.b_max = float(max(rl.max_resident_batch(decode, isl + osl), 1))

    def tpot_ms(self, b: float) -> float:
        return rl.decode_step_ms(self.decode, b, self.context)

    def prefill_cap_rps(self) -> float:
        return self.p * self.n_max * 1e3 / prefill_batch_ms(self.prefill, self.isl, self.n_max)

    def decode_cap_rps(self) -> float:
        return self.d * self.b_max * 1e3 / (self.steps * self.tpot_ms(self.b_max))

    def decode_batch(self, x_rps: float) -> float:
        """Sequences per decode worker at ``x_rps``: ``b = X (osl - 1) TPOT(b) / 1000 / D``."""

        def gap(b: float) -> float:
            return b - x_rps * self.steps * self.tpot_ms(b) / 1e3 / self.d

        lo = 1e-6
        if gap(lo) >= 0:
            return lo
        if gap(self.b_max) <= 0:
            return self.b_max
        return float(brentq(gap, lo, self.b_max, xtol=1e-6))

    def prefill_at(self, x_rps: float) -> tuple[float, float]:
        """(prompts per pass, TTFT ms) at ``x_rps``: prompts arriving during a pass form
        the next (``n = lambda T(n)``, ``1 <= n <= n_max``, ``lambda = X / P``); TTFT is
        the pass plus the wait for the one running, ``T(n) x min(rho / (2 (1 - rho)),
        1/2)`` with ``rho = lambda T(n) / n`` (M/D/1 below one prompt per pass)."""
        lam = x_rps / self.p / 1e3  # prompts per ms per worker

        def gap(n: float) -> float:
            return n - lam * prefill_batch_ms(self.prefill, self.isl, n)

        n = 1.0
        if gap(1.0) < 0:
            n = self.n_max if gap(self.n_max) <= 0 else float(brentq(gap, 1.0, self.n_max))
        t = prefill_batch_ms(self.prefill, self.isl, n)
        rho = min(lam * t / n, 1.0)
        wait = MAX_PREFILL_WAIT_BATCHES if rho >= 0.5 else rho / (2.0 * (1.0 - rho))
        return n, t * (1.0 + min(wait, MAX_PREFILL_WAIT_BATCHES))


def disaggregated_closed_loop(
    prefill: rl.Replica,
    decode: rl.Replica,
    *,
    prefill_workers: int,
    decode_workers: int,
    isl: int,
    osl: int,
    concurrency: float,
    token_budget: int = PREFILL_WORKER_TOKEN_BUDGET,
    ttft_ms: float | None = None,
) -> DisaggregatedPoint:
    """Solve ``C = X (TTFT(X) + (osl - 1) TPOT(X)) / 1000`` for the request rate ``X``
    (requests/s) of ``concurrency`` users on ``prefill_workers`` x ``prefill`` and
    ``decode_workers`` x ``decode`` (see the module docstring). TPOT at the decode
    batch ``b`` solving ``b = X (osl - 1) TPOT(b) / 1000 / D`` (at most the KV cache's
    ``max_resident_batch`` at ``isl + osl``), at mean context ``isl + osl / 2``; TTFT
    from :meth:`_Stages.prefill_at`, or ``ttft_ms`` when given (measured: the loop's time
    outside decode taken as it was, the prefill side then not priced). Inputs: the
    measured layout and lengths; the replicas' factors as given (the fit varies them)."""
    st = _Stages(prefill, decode, prefill_workers, decode_workers, isl, osl, token_budget)
    caps = {"decode": st.decode_cap_rps()}
    if ttft_ms is None:
        caps["prefill"] = st.prefill_cap_rps()
    bound = min(caps, key=lambda k: caps[k])
    x_cap = caps[bound] * (1.0 - 1e-9)

    def ttft_at(x: float) -> tuple[float, float]:
        return (1.0, ttft_ms) if ttft_ms is not None else st.prefill_at(x)

    def users(x: float) -> float:
        _, ttft = ttft_at(x)
        return x * (ttft + st.steps * st.tpot_ms(st.decode_batch(x))) / 1e3

    if users(x_cap) > concurrency:
        x = float(brentq(lambda v: users(v) - concurrency, 1e-9, x_cap, xtol=1e-9, rtol=1e-8))
        bound = "loop"
        n, ttft = ttft_at(x)
    else:  # the bottleneck stage is saturated; the other users queue before prefill
        x = x_cap
        n, ttft = ttft_at(x)
    b = st.decode_batch(x)
    tpot = st.tpot_ms(b)
    if bound != "loop":
        ttft = max(concurrency / x * 1e3 - st.steps * tpot, 0.0)
    if not (math.isfinite(x) and x > 0):
        raise ValueError(f"no steady state for {concurrency} users")
    return DisaggregatedPoint(
        requests_per_s=x,
        output_tok_s=x * osl,
        ttft_ms=ttft,
        tpot_ms=tpot,
        decode_batch=b,
        prefill_batch=n,
        bound=bound,
    )
