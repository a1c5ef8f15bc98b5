"""Cost model v2: an engine step is a sum of kernels (DOMAIN.md section 8).

A step of ``B`` decodes (mean context ``s``) and one prefill chunk of ``T`` tokens
(starting after ``s_c`` cached tokens) runs, one after another:

* **weight GEMMs** over all ``n = B + T`` tokens (everything but the routed experts):
  ``max(n x 2 N_dense / (F_gemm x lift x g_n), dense weight bytes / W_eff)``, ``lift``
  the measured kernel rate at 512 tokens over ``F_gemm``'s (:func:`dense_gemm_lift`; 1
  where unmeasured) and ``g_n`` the GEMM rate's measured gain from 512 to ``n`` tokens
  (:func:`gemm_token_gain`, >= 1); then the **elementwise kernels** between them (add +
  RMSNorm, gated activation), ``n x elementwise bytes / W_eff``
  (:func:`planner.architecture.elementwise_bytes_per_token`);
* **MoE expert GEMMs** (grouped): ``max(n x 2 N_routed_active / (F_gemm x g(m)),
  experts touched x expert bytes / (W_eff x e_read))`` with
  ``m = n k / E`` tokens per expert, :func:`grouped_gemm_efficiency` ``g(m)`` and the
  GPU's expert-read efficiency ``e_read`` (:func:`moe_read_efficiency`);
* **attention**: the decodes' part ``a_d = max(B x attn_decode(s) / F_attn,
  B x (KV_held(s) / W_eff + seq))`` (``seq`` the GPU's fitted per-sequence cost at tp >= 2,
  :func:`decode_sequence_ms`; 0 on most GPUs) and the chunk's
  ``a_c = max(attn_prefill(s_c .. s_c + T) / F_attn, KV_held(s_c + T) / W_eff)``, sharing
  one kernel launch:
  ``max(a_d, a_c) + (1 - o) min(a_d, a_c)`` with the overlap factor ``o``, never
  below the sum of their compute times;
* **collectives**: two all-reduces per layer of ``n x hidden x 2`` bytes
  (:func:`allreduce_ms`: one-shot/two-shot/ring on a scale-up link times the engines'
  measured slowdown at that message size, NCCL's measured ring over PCIe);
* the per-step **overhead**: the engine's (scheduling, launches; the GPU's
  ``step_overhead_ms``) plus, for MLA models, every layer's measured MLA kernel floor
  (:func:`mla_layer_floor_us`), and, for GQA/MHA models on a GPU fitted to batch
  sweeps, every layer's fitted floor (:func:`step_layer_floor_ms`).

**Data-parallel attention with expert parallelism** (MoE models, ``dp`` attention
ranks of ``tp / dp`` GPUs, experts over ``ep`` GPUs): attention and dense GEMMs run
per rank on ``B / dp`` sequences, so their FLOPs and KV reads spread as before but
every rank reads its own copy of the dense weights (``dp x dense bytes / W_eff``),
and the KV is replicated only over a rank's ``tp / dp`` GPUs (an MLA latent once per
rank instead of ``tp`` times); expert GEMMs spread over ``ep`` GPUs at
:data:`EP_LOAD_IMBALANCE`; the all-reduces shrink to a rank's GPUs and each MoE layer
adds a dispatch and a combine all-to-all (:func:`all_to_all_ms`).

**Pipeline parallelism** (``pp`` stages of ``tp`` GPUs, layers split evenly): the
``B`` resident sequences run as ``pp`` micro-batches of ``B / pp``, one per stage at
a time, so every sequence advances one token per pass of its micro-batch through all
stages: ``step(B) = kernels(B / pp decodes + the chunk) + pp x hop(B / pp + T)`` with
:meth:`StepCoefficients.stage_hop_ms` the activations' transfer between stages. One
chunk per pass is credited (the planner's one chunk slot per replica): conservative,
as an engine may schedule one per micro-batch.

``F_gemm = tp x peak(weight dtype) x MFU`` (x the measured FP8 GEMM efficiency for FP8
weights, :func:`fp8_gemm_efficiency`, and x :data:`FP4_GEMM_DERATE` more for unmeasured
FP4 weights, whose reads also run at ``W_eff x`` :data:`FP4_WEIGHT_READ_DERATE`:
:func:`weight_dtype_derates`), ``F_attn = tp x peak(attention dtype)
x MFU`` (attention at the kernel's precision, :func:`planner.engines.attention_dtype`; FP8
attention is not derated like FP8 weight GEMMs: no kernel measurement, and derating it
too fits the reference runs slightly worse),
``W_eff = tp x HBM bandwidth x MBU``. KV bytes are those the replica *holds*,
replication under TP included (:func:`planner.architecture.kv_replication`). MLA
decodes in the absorbed form
(:func:`planner.architecture.decode_attention_flops_per_context_token`).

At large decode batch the GEMMs turn compute-bound while attention stays
bandwidth-bound, so the sum exceeds the old single roofline
``max(all FLOPs, all bytes)`` (by 1.3-1.5x for a 70B model at batch ~500).

Where inputs come from: FLOPs and bytes from the model's config (catalog); peaks
and bandwidths from the GPU's datasheet (catalog); MFU, MBU, overhead and overlap
from the GPU's efficiency factors (fitted where measurements exist, else set by
analogy: see ``docs/calibration.md``); :data:`MOE_BANDWIDTH_EFFICIENCY` and
:data:`MOE_HALF_EFFICIENCY_TOKENS` are assumed (see their comments).

Units: times in ms, bytes, FLOP; rates are stored per ms so a step costs arithmetic only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from catalog.schema import Link
from planner import architecture as arch
from planner.collectives import (
    ALL_TO_ALL_ASSUMED_BANDWIDTH_FRACTION,
    ALL_TO_ALL_ASSUMED_LATENCY_US,
    PCIE_ALLREDUCE_MEASURED,
    all_to_all_kernel,
    all_to_all_ms,
    allreduce_ms,
    allreduce_slowdown,
    group_bandwidth_gb_per_s,
    pcie_allreduce_alpha_beta,
)
from planner.kernel_floors import (  # re-exported: the measured kernel floors
    FP4_GEMM_DERATE,
    FP4_WEIGHT_READ_DERATE,
    FP8_GEMM_EFFICIENCY_ASSUMED,
    FP8_GEMM_EFFICIENCY_BY_ARCH,
    MLA_LAYER_FLOOR_ASSUMED_US,
    MOE_BANDWIDTH_EFFICIENCY,
    MOE_HALF_EFFICIENCY_TOKENS,
    MOE_LAYER_FLOOR_ASSUMED_US,
    MOE_LAYER_FLOOR_OTHER_ENGINES_US,
    bf16_gemm_rates,
    bf16_gemm_time_ratio,
    decode_attention_rate,
    decode_sequence_ms,
    dense_gemm_lift,
    fp8_gemm_efficiency,
    gain_at_tokens,
    gemm_token_gain,
    grouped_gemm_efficiency,
    grouped_gemm_peak_share,
    mla_layer_floor_us,
    moe_layer_floor_us,
    moe_read_efficiency,
    step_layer_floor_ms,
    weight_dtype_derates,
)
from planner.spec_steps import (  # re-exported: speculative decoding's step arithmetic
    DRAFT_TARGET_LAYERS,
    SpecMethod,
    Speculation,
    decode_tokens_per_s,
    effective_tpot_ms,
    tokens_per_verification_step,
    verification_steps,
)

#: Bytes per activation element exchanged in tensor-parallel all-reduces (bf16; one
#: definition with the elementwise kernels', planner.architecture).
ACTIVATION_BYTES = arch.ACTIVATION_BYTES

#: Expert parallelism: the busiest GPU's share of expert work over the mean (the step
#: waits for it). Assumed: routing skew at decode batches with an expert-placement
#: balancer is commonly reported at 1.1-1.3x; 1.25 errs high. Not fitted.
EP_LOAD_IMBALANCE = 1.25


@dataclass(frozen=True)
class StepKernels:
    """One step's kernel times (ms): ``total_ms`` is their sum."""

    gemm_ms: float
    moe_ms: float
    attention_ms: float
    comm_ms: float
    overhead_ms: float
    draft_ms: float = 0.0  # speculative decoding: the drafter's work per step

    @property
    def total_ms(self) -> float:
        return (
            self.gemm_ms
            + self.moe_ms
            + self.attention_ms
            + self.comm_ms
            + self.overhead_ms
            + self.draft_ms
        )


@dataclass(frozen=True)
class StepCoefficients:
    """A replica's cost-model constants, computed once (see the module docstring).

    Rates are per millisecond: ``f_gemm_per_ms``/``f_attn_per_ms`` FLOP/ms, ``w_per_ms``
    bytes/ms. ``dense_flops_per_token``: ``2 (N_dense - N_bf16)``, the non-routed weights'
    FLOPs (2 N, DOMAIN.md section 1) less those of the GEMM weights a quantized checkpoint
    keeps in BF16; ``wide_flops_per_token``: ``2 N_bf16 x rho``, those in weight-dtype FLOPs
    at 512 tokens (``wide_rho`` = rho, ``wide_gain``: :func:`bf16_gemm_rates`)."""

    f_gemm_per_ms: float
    f_attn_per_ms: float
    w_per_ms: float
    w_weights_per_ms: float  # weight reads: w_per_ms x the dtype's read derate
    dense_flops_per_token: float
    wide_flops_per_token: float
    wide_gain: tuple[float, ...]
    wide_rho: float
    dense_weight_bytes: float
    routed_flops_per_token: float
    num_experts: int
    experts_per_token: int
    routing_exponent: float  # arch.routing_exponent (0: uniform routing)
    expert_bytes_all_layers: float
    decode_attn_per_ctx: float
    prefill_attn_per_ctx: float
    full_layers: int
    windowed_layers: int
    window_tokens: float
    kv_full_held: float  # KV bytes per token per full layer set, replication included
    kv_windowed_held: float
    tp: int
    num_layers: int
    hidden_size: int
    link: Link | None
    # step overhead + attention_floor_ms (MLA models) + the GPU's fitted layer floor
    # (:func:`step_layer_floor_ms`, GQA/MHA models), per step with tokens
    overhead_ms: float
    overlap: float
    pp: int = 1
    pp_link: Link | None = None
    dp: int = 1
    ep: int = 1
    moe_layers: int = 0
    moe_floor_ms: float = 0.0  # moe_layers x moe_layer_floor_us / 1000
    moe_read_efficiency: float = MOE_BANDWIDTH_EFFICIENCY  # :func:`moe_read_efficiency`
    f_grouped_per_ms: float = math.inf  # tp x peak x :func:`grouped_gemm_peak_share`
    # the measured decode attention kernel (:func:`decode_attention_rate`): per sequence
    # per step, layers x KV heads per rank x pair_ns / dp (ms; dp attention ranks each
    # serve 1/dp of the sequences, in parallel), and tp x peak x saturated share
    attn_pair_ms: float = 0.0
    w_attn_per_ms: float = math.inf
    # the GPU's fitted per-sequence decode cost (:func:`decode_sequence_ms`): per decoding
    # sequence per step, layers x us_per_layer / dp (ms), added to its KV read
    attn_seq_ms: float = 0.0
    # layers x mla_layer_floor_us / 1000 for MLA models (0 otherwise), and the GPU's
    # fitted layer floor (:func:`step_layer_floor_ms`; 0 for MLA models); both already in
    # overhead_ms, which is the engine's step overhead plus these
    attention_floor_ms: float = 0.0
    layer_floor_ms: float = 0.0
    # speculative decoding (see :class:`Speculation`): query tokens per sequence in a
    # step (k + 1), the drafter's target-layer fraction per step (k x layers / L), and a
    # draft model's own coefficients with its k steps
    queries_per_seq: int = 1
    draft_layer_fraction: float = 0.0
    draft: StepCoefficients | None = None
    draft_steps: int = 0
    draft_kv_held: float = 0.0  # drafter KV bytes per token (DRAFT_TARGET_LAYERS layers)
    gemm_gain: tuple[float, ...] = ()  # dense GEMM rate gains, :func:`gemm_token_gain`
    dense_lift: float = 1.0  # measured dense GEMM rate over f_gemm's, :func:`dense_gemm_lift`
    elementwise_bytes_per_token: float = (
        0.0  # :func:`planner.architecture.elementwise_bytes_per_token`
    )

    # ------------------------------------------------------------ shapes

    def context_weight(self, tokens: float) -> float:
        """Layer-weighted context ``L_full x s + L_window x min(s, window)`` (layer-tokens)."""
        ctx = self.full_layers * tokens
        if self.windowed_layers:
            ctx += self.windowed_layers * min(tokens, self.window_tokens)
        return ctx

    def span(self, x: float) -> float:
        """Integral of the layer-weighted context over positions 0..x (layer-tokens^2)."""
        out = self.full_layers * x * x / 2.0
        if self.windowed_layers:
            w = self.window_tokens
            out += self.windowed_layers * (x * x / 2.0 if x <= w else w * w / 2.0 + w * (x - w))
        return out

    def kv_held_bytes(self, tokens: float) -> float:
        """KV bytes the replica holds for one sequence of ``tokens`` (replication included)."""
        held = (self.kv_full_held + self.draft_kv_held) * tokens
        if self.kv_windowed_held:
            held += self.kv_windowed_held * min(tokens, self.window_tokens)
        if self.draft is not None:
            held += self.draft.kv_held_bytes(tokens)
        return held

    def kv_held_array(self, tokens: np.ndarray) -> np.ndarray:
        """:meth:`kv_held_bytes` over an array of sequence lengths (bytes)."""
        held = (self.kv_full_held + self.draft_kv_held) * tokens
        if self.kv_windowed_held:
            held = held + self.kv_windowed_held * np.minimum(tokens, self.window_tokens)
        if self.draft is not None:
            held = held + self.draft.kv_held_array(tokens)
        return held

    # ------------------------------------------------------------ kernels

    def dense_gemm_per_ms(self, tokens: float) -> float:
        """The dense GEMMs' rate in a step of ``tokens`` tokens (FLOP/ms): ``F_gemm x lift x
        g``, ``lift`` the measured kernel rate over ``F_gemm``'s (:func:`dense_gemm_lift`)
        and ``g`` the measured rate gain at the ``tokens / dp`` tokens one rank's GEMM runs
        on (:func:`gain_at_tokens` of ``gemm_gain``)."""
        g = gain_at_tokens(self.gemm_gain, tokens / self.dp)
        return self.f_gemm_per_ms * self.dense_lift * g

    def bf16_gemm_per_ms(self, tokens: float) -> float:
        """A quantized checkpoint's BF16 GEMMs' rate at ``tokens`` tokens (BF16 FLOP/ms):
        ``F_gemm x lift x g_bf16 / rho``, ``g_bf16`` their own gain (``wide_gain``)."""
        g = gain_at_tokens(self.wide_gain, tokens / self.dp)
        return self.f_gemm_per_ms * self.dense_lift * g / self.wide_rho

    def dense_ms_per_token(self, tokens: float) -> float:
        """Dense GEMM compute per token in a step of ``tokens`` tokens (ms): ``2 (N_dense -
        N_bf16) /`` :meth:`dense_gemm_per_ms` ``+ 2 N_bf16 /`` :meth:`bf16_gemm_per_ms`."""
        t = self.dense_flops_per_token / self.dense_gemm_per_ms(tokens)
        if self.wide_flops_per_token:
            t += self.wide_flops_per_token / self.wide_rho / self.bf16_gemm_per_ms(tokens)
        return t

    def gemm_ms(self, tokens: float) -> float:
        """Dense weight GEMMs over ``tokens`` tokens and the elementwise kernels between
        them: ``max(tokens x 2 N_dense /`` :meth:`dense_gemm_per_ms` ``, dp x dense bytes /
        W_eff) + tokens x elementwise bytes / W_eff`` (ms; 0 with no tokens; ``dp``
        attention ranks each read their own copy of the weights)."""
        if tokens <= 0:
            return 0.0
        return (
            max(
                tokens * self.dense_ms_per_token(tokens),
                self.dp * self.dense_weight_bytes / self.w_weights_per_ms,
            )
            + tokens * self.elementwise_bytes_per_token / self.w_per_ms
        )

    def experts_touched(self, tokens: float) -> float:
        """Distinct routed experts ``tokens`` touch per MoE layer (arch.distinct_experts)."""
        e, k, a = self.num_experts, self.experts_per_token, self.routing_exponent
        return arch.distinct_experts(e, k, tokens, a) if e else 0.0

    def grouped_time_per_flop(self, tokens: float) -> float:
        """ms per routed FLOP of ``tokens`` tokens: ``max(1 / (F_gemm g(m)), 1 /
        F_grouped)``, ``m = tokens k / E``, ``F_grouped`` the measured saturated rate."""
        g = grouped_gemm_efficiency(tokens * self.experts_per_token / self.num_experts)
        return max(1.0 / (self.f_gemm_per_ms * g), 1.0 / self.f_grouped_per_ms)

    def moe_ms(self, tokens: float) -> float:
        """Grouped expert GEMMs over ``tokens`` tokens (ms; 0 for dense models):
        ``skew x max(tokens x 2 N_routed x`` :meth:`grouped_time_per_flop` ``, touched x
        expert bytes / (W_eff x e_read)) + moe_floor_ms``; ``F_grouped`` caps a prefill's
        expert GEMMs at what the kernel measures at the layer's expert width (DeepSeek-V3
        at tp 8 on H200 with SGLang: 0.173 of the FP8 peak, half of ``F_gemm``);
        ``m = tokens x k / E``, ``e_read`` the GPU's
        :func:`moe_read_efficiency` (measured, else MOE_BANDWIDTH_EFFICIENCY);
        ``moe_floor_ms`` is the MoE layers' fixed cost (:func:`moe_layer_floor_us`), which
        dominates at decode batches of a few sequences."""
        if self.num_experts == 0 or tokens <= 0:
            return 0.0
        compute = tokens * self.routed_flops_per_token * self.grouped_time_per_flop(tokens)
        memory = (
            self.experts_touched(tokens)
            * self.expert_bytes_all_layers
            / (self.w_weights_per_ms * self.moe_read_efficiency)
        )
        skew = EP_LOAD_IMBALANCE if self.ep > 1 else 1.0
        return skew * max(compute, memory) + self.moe_floor_ms

    def decode_attention_parts_ms(
        self, batch: float, context: float, queries: float = 1.0
    ) -> tuple[float, float]:
        """(compute, memory) of ``batch`` decodes' attention at mean context (ms), each
        with ``queries`` query tokens (k + 1 when verifying drafts): the FLOPs scale with
        the queries, the KV is read once per sequence."""
        if batch <= 0:
            return 0.0, 0.0
        flops = queries * batch * self.decode_attn_per_ctx * self.context_weight(context)
        return flops / self.f_attn_per_ms, batch * self.kv_read_ms_per_seq(
            self.kv_held_bytes(context)
        )

    def kv_read_ms_per_seq(self, kv_bytes: float) -> float:
        """One decoding sequence's KV read of ``kv_bytes`` (ms): ``max(kv / W_eff,
        attn_pair_ms + kv / W_attn) + attn_seq_ms``, the second the measured attention
        kernel (:func:`decode_attention_rate`; none for MLA or unmeasured families), the
        last the GPU's fitted per-sequence cost (:func:`decode_sequence_ms`; 0 where none
        is fitted)."""
        a = kv_bytes / self.w_per_ms
        b = self.attn_pair_ms + kv_bytes / self.w_attn_per_ms
        return (a if a > b else b) + self.attn_seq_ms

    def chunk_attention_parts_ms(self, chunk: float, start: float) -> tuple[float, float]:
        """(compute, memory) of a chunk's attention after ``start`` cached tokens (ms)."""
        if chunk <= 0:
            return 0.0, 0.0
        flops = self.prefill_attn_per_ctx * (self.span(start + chunk) - self.span(start))
        return flops / self.f_attn_per_ms, self.kv_held_bytes(start + chunk) / self.w_per_ms

    def shared_attention_ms(
        self, decode_compute: float, decode_memory: float, chunk_compute: float, chunk_memory: float
    ) -> float:
        """Decode and chunk attention in one launch from their (compute, memory) parts (ms):
        ``max(a_d, a_c) + (1 - o) min(a_d, a_c)`` with ``a = max(compute, memory)``, at
        least the sum of their compute times."""
        a_d, a_c = max(decode_compute, decode_memory), max(chunk_compute, chunk_memory)
        t = max(a_d, a_c) + (1.0 - self.overlap) * min(a_d, a_c)
        return max(t, decode_compute + chunk_compute)

    def attention_ms(self, batch: float, context: float, chunk: float, start: float) -> float:
        """Decode and chunk attention in one launch (:meth:`shared_attention_ms`, ms)."""
        return self.shared_attention_ms(
            *self.decode_attention_parts_ms(batch, context, self.queries_per_seq),
            *self.chunk_attention_parts_ms(chunk, start),
        )

    def comm_ms(self, tokens: float) -> float:
        """Collectives of a step over ``tokens`` tokens (ms; 0 at tp 1): two all-reduces
        per layer of ``tokens x hidden x 2`` bytes over the ``tp`` GPUs; with ``dp``
        attention ranks, the all-reduces of a rank's ``tokens / dp`` over its ``tp / dp``
        GPUs, and with ``ep`` two all-to-alls per MoE layer (dispatch, combine) of a
        rank's ``tokens / dp x k x hidden x 2`` bytes (:func:`all_to_all_ms`). With
        attention over all ``tp`` GPUs (``dp == 1``) every GPU already holds every token,
        so expert parallelism needs no all-to-all: each GPU runs its own experts on the
        tokens routed to them and the layer's all-reduce sums the outputs (TensorRT-LLM's
        and SGLang's TP-attention + EP-MoE mode)."""
        if self.tp <= 1 or tokens <= 0 or self.link is None:
            return 0.0
        if self.dp == 1:
            message = tokens * self.hidden_size * ACTIVATION_BYTES
            return 2 * self.num_layers * allreduce_ms(self.link, self.tp, message)
        per_rank = tokens / self.dp * self.hidden_size * ACTIVATION_BYTES
        t = 2 * self.num_layers * allreduce_ms(self.link, self.tp // self.dp, per_rank)
        routed = per_rank * self.experts_per_token
        return t + 2 * self.moe_layers * all_to_all_ms(self.link, self.ep, routed)

    def stage_hop_ms(self, tokens: float) -> float:
        """One hand-over between pipeline stages of ``tokens`` tokens' activations (ms):
        ``latency + tokens x hidden x 2 bytes / link bandwidth`` (0 without stages); each
        GPU sends to one peer, so on a mesh without a switch over one of its links
        (:func:`group_bandwidth_gb_per_s` of a pair)."""
        if self.pp <= 1 or self.pp_link is None or tokens <= 0:
            return 0.0
        message = tokens * self.hidden_size * ACTIVATION_BYTES
        return self.pp_link.latency_us * 1e-3 + message / (
            group_bandwidth_gb_per_s(self.pp_link, 2) * 1e9 / 1e3
        )

    def pipeline_ms(self, tokens: float, hops: int | None = None) -> float:
        """Hand-overs of one pass (ms): ``hops x stage_hop_ms(tokens)``; ``hops``
        defaults to ``pp`` (the last stage's token back to the first)."""
        return (self.pp if hops is None else hops) * self.stage_hop_ms(tokens)

    # ------------------------------------------------------------ steps

    def kernels(
        self,
        batch: float,
        context: float,
        chunk: float = 0.0,
        chunk_start: float = 0.0,
        *,
        include_overhead: bool = True,
    ) -> StepKernels:
        """The kernel times of one step (see the module docstring); with pipeline
        stages, of one micro-batch's pass (``batch / pp`` decodes), hand-overs in
        ``comm_ms``; with speculative decoding each decode carries ``k + 1`` queries."""
        b = max(batch, 0.0) / self.pp
        n = b * self.queries_per_seq + max(chunk, 0.0)
        busy = n > 0 and include_overhead
        return StepKernels(
            gemm_ms=self.gemm_ms(n),
            moe_ms=self.moe_ms(n),
            attention_ms=self.attention_ms(b, context, chunk, chunk_start),
            comm_ms=self.comm_ms(n) + self.pipeline_ms(n) if busy else 0.0,
            overhead_ms=self.overhead_ms if busy else 0.0,
            draft_ms=self.draft_ms(b, context),
        )

    def step_ms(
        self,
        batch: float,
        context: float,
        chunk: float = 0.0,
        chunk_start: float = 0.0,
        *,
        include_overhead: bool = True,
    ) -> float:
        """One step's time, the sum of :meth:`kernels` (ms); pipeline stages as in
        :meth:`kernels` (a micro-batch of ``batch / pp``). With speculative decoding the
        ``batch`` decodes each carry ``k + 1`` query tokens (a verification step: GEMMs
        over ``B (k + 1) + chunk`` tokens, weights read once, attention FLOPs x (k + 1)
        over the same KV) and the drafter's :meth:`draft_ms` is added."""
        b = max(batch, 0.0) / self.pp
        n = b * self.queries_per_seq + max(chunk, 0.0)
        t = self.gemm_ms(n) + self.moe_ms(n) + self.attention_ms(b, context, chunk, chunk_start)
        if include_overhead and n > 0:
            t += self.comm_ms(n) + self.overhead_ms
            if self.pp > 1:
                t += self.pipeline_ms(n)
        return t + self.draft_ms(b, context)

    def base_decode_ms(self, batch: float, context: float) -> float:
        """A plain decode step of ``batch`` sequences, one token each, without the
        per-step overhead (ms): ``gemm(B) + moe(B) + attention(B, s) + comm(B)``."""
        if batch <= 0:
            return 0.0
        dc, dm = self.decode_attention_parts_ms(batch, context)
        return self.gemm_ms(batch) + self.moe_ms(batch) + max(dc, dm) + self.comm_ms(batch)

    def draft_ms(self, batch: float, context: float) -> float:
        """The drafter's work per verification step for ``batch`` sequences (ms):
        ``k x DRAFT_TARGET_LAYERS / L x base_decode_ms(B, s)`` for a head on the target
        (EAGLE-3: 1.5 target layers per draft token, MTP: 1), plus ``k`` full decode
        steps of a draft model (its own coefficients, overhead included); 0 without
        speculation or for n-gram lookup (CPU). A head's layers pay no per-layer floor
        (``attention_floor_ms``, ``layer_floor_ms``): 1-1.5 layers per draft token, a few
        tens of us, against a target step of 10+ ms."""
        if batch <= 0:
            return 0.0
        t = 0.0
        if self.draft_layer_fraction:
            t += self.draft_layer_fraction * self.base_decode_ms(batch, context)
        if self.draft is not None and self.draft_steps:
            t += self.draft_steps * self.draft.step_ms(batch, context)
        return t

    def chunk_compute_ms(self, chunk: float, start: float) -> float:
        """Pure compute of a chunk (ms): ``T x 2 N_dense /`` :meth:`dense_gemm_per_ms` ``+ T x
        2 N_routed x`` :meth:`grouped_time_per_flop` ``+ attention FLOPs / F_attn`` (no
        weight-read floor, no overhead)."""
        if chunk <= 0:
            return 0.0
        t = chunk * self.dense_ms_per_token(chunk)
        if self.num_experts:
            t += chunk * self.routed_flops_per_token * self.grouped_time_per_flop(chunk)
        return t + self.chunk_attention_parts_ms(chunk, start)[0]

    def chunk_steps_array_ms(
        self, batch: float, context: float, chunk: float, starts: np.ndarray
    ) -> np.ndarray:
        """:meth:`step_ms` of equal chunks at many start contexts (ms), vectorized."""
        batch = batch / self.pp
        n = batch * self.queries_per_seq + chunk
        fixed = (
            self.gemm_ms(n)
            + self.moe_ms(n)
            + self.comm_ms(n)
            + self.overhead_ms
            + self.pipeline_ms(n)
            + self.draft_ms(batch, context)
        )
        dc, dm = self.decode_attention_parts_ms(batch, context, self.queries_per_seq)
        a_d = max(dc, dm)

        def span(x: np.ndarray) -> np.ndarray:
            out = self.full_layers * x * x / 2.0
            if self.windowed_layers:
                w = self.window_tokens
                out = out + self.windowed_layers * np.where(
                    x <= w, x * x / 2.0, w * w / 2.0 + w * (x - w)
                )
            return out

        cc = self.prefill_attn_per_ctx * (span(starts + chunk) - span(starts)) / self.f_attn_per_ms
        a_c = np.maximum(cc, self.kv_held_array(starts + chunk) / self.w_per_ms)
        attn = np.maximum(a_d, a_c) + (1.0 - self.overlap) * np.minimum(a_d, a_c)
        attn = np.maximum(attn, dc + cc)
        return fixed + attn


def coefficients_of(replica) -> StepCoefficients:
    """The :class:`StepCoefficients` of a :class:`planner.roofline.Replica`."""
    model, gpu, tp = replica.model, replica.gpu, replica.tp
    peak_w = gpu.peak_tflops(replica.weight_dtype)
    assert peak_w is not None  # checked when the replica was built
    peak_a = gpu.peak_tflops(replica.attention_dtype) or gpu.bf16_dense_tflops
    b_w = arch.weight_bytes_per_param(model, replica.weight_dtype, replica.fp4_format)
    mbu = replica.decode_mbu
    gemm_derate, read_derate = weight_dtype_derates(gpu, replica.weight_dtype, replica.engine, mbu)
    w_per_ms = tp * gpu.mem_bw_tbps * 1e12 * mbu / 1e3
    windowed = model.sliding_window.windowed_layers if model.sliding_window else 0
    repl = arch.kv_replication(model, replica.attention_tp)
    per_layer = arch.kv_bytes_per_token_per_layer(model, replica.kv_dtype) * repl
    moe = model.moe
    rate = None if model.mla else decode_attention_rate(gpu, replica.engine, replica.kv_dtype)
    heads = -(-model.num_kv_heads // replica.attention_tp)  # whole heads per rank
    layer_floor_ms = step_layer_floor_ms(gpu, model, tp)
    # MLA models: every layer's decode attention kernel pays its measured floor per step
    attention_floor_ms = (
        model.num_layers * mla_layer_floor_us(gpu, replica.engine) * 1e-3
        if model.mla is not None
        else 0.0
    )
    spec: Speculation | None = getattr(replica, "speculative", None)
    spec_fields: dict = {}
    if spec is not None:
        layers = DRAFT_TARGET_LAYERS[spec.method]
        spec_fields = {
            "queries_per_seq": spec.tokens_per_step,
            "draft_layer_fraction": spec.draft_tokens * layers / model.num_layers,
            "draft": spec.draft,
            "draft_steps": spec.draft_tokens if spec.draft is not None else 0,
            "draft_kv_held": per_layer * layers,
        }
    r = replica  # a quantized checkpoint's BF16 GEMMs: rho x a weight-dtype FLOP's time
    rho, wide_gain = bf16_gemm_rates(
        gpu, r.engine, r.weight_dtype, r.prefill_mfu, r.kernel_gemm_rate
    )
    wide = 0 if r.weight_dtype == "bf16" else arch.bf16_gemm_param_count(model, r.bf16_layers)
    # measured dense GEMMs never run past the peak (MFU x derate x lift x gain <= 1)
    measured = dense_gemm_lift(gpu, replica.engine, replica.weight_dtype)
    lift = min(
        measured if replica.kernel_gemm_rate else 1.0,
        1.0 / (replica.prefill_mfu * gemm_derate),
    )
    return StepCoefficients(
        f_gemm_per_ms=tp * peak_w * 1e12 * replica.prefill_mfu * gemm_derate / 1e3,
        dense_lift=lift,
        elementwise_bytes_per_token=arch.elementwise_bytes_per_token(model, replica.attention_tp),
        gemm_gain=tuple(
            min(g, max(1.0, 1.0 / (replica.prefill_mfu * gemm_derate * lift)))
            for g in gemm_token_gain(gpu, replica.engine, replica.weight_dtype)
        ),
        f_attn_per_ms=tp * peak_a * 1e12 * replica.prefill_mfu / 1e3,
        w_per_ms=w_per_ms,
        w_weights_per_ms=w_per_ms * read_derate,
        dense_flops_per_token=2.0 * (arch.dense_weight_param_count(model) - wide),
        wide_flops_per_token=2.0 * wide * rho,
        wide_gain=wide_gain,
        wide_rho=rho,
        dense_weight_bytes=arch.dense_weight_bytes(*replica.weight_layout)
        - arch.input_embedding_bytes(model),  # a step gathers the input table by row
        routed_flops_per_token=2.0 * arch.routed_active_param_count(model),
        num_experts=moe.num_experts if moe else 0,
        experts_per_token=moe.experts_per_token if moe else 0,
        routing_exponent=arch.routing_exponent(model, replica.ep),
        expert_bytes_all_layers=arch.moe_layer_count(model) * arch.expert_param_count(model) * b_w,
        decode_attn_per_ctx=arch.decode_attention_flops_per_context_token(model),
        prefill_attn_per_ctx=arch.attention_flops_per_context_token(model),
        full_layers=model.num_layers - windowed,
        windowed_layers=windowed,
        window_tokens=float(model.sliding_window.window_tokens) if model.sliding_window else 0.0,
        kv_full_held=per_layer * (model.num_layers - windowed),
        kv_windowed_held=per_layer * windowed,
        tp=tp,
        num_layers=model.num_layers,
        hidden_size=model.hidden_size,
        link=replica.scale_up_link,
        overhead_ms=replica.step_overhead_ms + attention_floor_ms + layer_floor_ms,
        attention_floor_ms=attention_floor_ms,
        layer_floor_ms=layer_floor_ms,
        overlap=replica.overlap_factor,
        pp=replica.pp,
        pp_link=replica.pp_link,
        dp=replica.dp,
        ep=replica.ep,
        moe_layers=arch.moe_layer_count(model),
        moe_floor_ms=(
            arch.moe_layer_count(model)
            * moe_layer_floor_us(gpu, replica.engine, moe.num_experts)
            * 1e-3
            if moe
            else 0.0
        ),
        moe_read_efficiency=moe_read_efficiency(gpu),
        f_grouped_per_ms=tp
        * peak_w
        * 1e9
        * grouped_gemm_peak_share(
            gpu, replica.engine, moe.expert_intermediate_size * replica.ep / tp
        )
        if moe
        else math.inf,
        attn_pair_ms=model.num_layers * heads * rate[0] * 1e-6 / replica.dp if rate else 0.0,
        w_attn_per_ms=tp * gpu.mem_bw_tbps * 1e9 * rate[1] if rate else math.inf,
        attn_seq_ms=decode_sequence_ms(gpu, model, tp) / replica.dp,
        **spec_fields,
    )


__all__ = [
    "ACTIVATION_BYTES",
    "ALL_TO_ALL_ASSUMED_BANDWIDTH_FRACTION",
    "ALL_TO_ALL_ASSUMED_LATENCY_US",
    "DRAFT_TARGET_LAYERS",
    "EP_LOAD_IMBALANCE",
    "FP4_GEMM_DERATE",
    "FP4_WEIGHT_READ_DERATE",
    "FP8_GEMM_EFFICIENCY_ASSUMED",
    "FP8_GEMM_EFFICIENCY_BY_ARCH",
    "MLA_LAYER_FLOOR_ASSUMED_US",
    "MOE_BANDWIDTH_EFFICIENCY",
    "MOE_HALF_EFFICIENCY_TOKENS",
    "MOE_LAYER_FLOOR_ASSUMED_US",
    "MOE_LAYER_FLOOR_OTHER_ENGINES_US",
    "PCIE_ALLREDUCE_MEASURED",
    "SpecMethod",
    "Speculation",
    "StepCoefficients",
    "StepKernels",
    "all_to_all_kernel",
    "all_to_all_ms",
    "allreduce_ms",
    "allreduce_slowdown",
    "bf16_gemm_rates",
    "bf16_gemm_time_ratio",
    "coefficients_of",
    "decode_attention_rate",
    "decode_sequence_ms",
    "decode_tokens_per_s",
    "effective_tpot_ms",
    "fp8_gemm_efficiency",
    "gain_at_tokens",
    "gemm_token_gain",
    "group_bandwidth_gb_per_s",
    "grouped_gemm_efficiency",
    "grouped_gemm_peak_share",
    "mla_layer_floor_us",
    "moe_layer_floor_us",
    "moe_read_efficiency",
    "pcie_allreduce_alpha_beta",
    "step_layer_floor_ms",
    "tokens_per_verification_step",
    "verification_steps",
    "weight_dtype_derates",
]
