"""Step times of one replica: effective and peak rates, tensor-parallel communication,
prefill, decode and their kernels (rooflines: the larger of compute and memory time).
"""

from __future__ import annotations

from planner import architecture as arch
from planner import kernels as kn
from planner.errors import PlanningError
from planner.roofline.replica import Replica, replica_weight_bytes


def effective_flops(replica: Replica) -> float:
    """Effective FLOP/s of the replica's dense weight GEMMs at 512 tokens: ``F_eff = tp x
    peak_tflops(dtype) x 1e12 x MFU x d x lift``, ``d`` the dtype's GEMM derate on the
    replica's engine (FP8: the measured FP8 GEMM efficiency; unmeasured FP4: assumed; else
    1; :func:`planner.kernels.weight_dtype_derates`) and ``lift`` the measured kernel rate
    over that (:func:`planner.kernel_floors.dense_gemm_lift`; 1 where unmeasured).

    H100 bf16 at MFU 0.5 without a measured kernel rate: 989.4e12 x 0.5 = 494.7e12 FLOP/s;
    with vLLM's (lift 0.9 x 0.801 / 0.5 = 1.442): 713.2e12.
    """
    peak = replica.gpu.peak_tflops(replica.weight_dtype)
    assert peak is not None  # checked when the replica was built
    derate = kn.weight_dtype_derates(replica.gpu, replica.weight_dtype, replica.engine)[0]
    lift = replica.coefficients.dense_lift
    return replica.tp * peak * 1e12 * replica.prefill_mfu * derate * lift


def peak_flops(replica: Replica) -> float:
    """Peak FLOP/s of the replica (MFU = 1): ``tp x peak_tflops(dtype) x 1e12``."""
    peak = replica.gpu.peak_tflops(replica.weight_dtype)
    assert peak is not None
    return replica.tp * peak * 1e12


def effective_bandwidth_bytes_per_s(replica: Replica) -> float:
    """Effective HBM bandwidth: ``W_eff = tp x mem_bw_tbps x 1e12 x MBU`` (bytes/s)."""
    return replica.tp * replica.gpu.mem_bw_tbps * 1e12 * replica.decode_mbu


def peak_bandwidth_bytes_per_s(replica: Replica) -> float:
    """Peak HBM bandwidth of the replica (MBU = 1): ``tp x mem_bw_tbps x 1e12`` (bytes/s)."""
    return replica.tp * replica.gpu.mem_bw_tbps * 1e12


def weight_bytes_read_per_step(replica: Replica, tokens: float) -> float:
    """Weight bytes one forward step over ``tokens`` tokens reads (bytes).

    Dense: all weights (the checkpoint's BF16 layers at 2 bytes,
    :func:`planner.architecture.weight_bytes`) but the input embedding table, which a step
    gathers one row per token of (:func:`planner.architecture.input_embedding_bytes`).
    MoE: everything but the routed experts (at the quantized width), plus per MoE layer
    the expected number of distinct routed experts the step touches
    (:func:`planner.architecture.distinct_experts`: ``E x (1 - (1 - k/E)^tokens)`` with
    uniform routing, fewer with the model's routing skew, priced without expert
    parallelism only, :func:`planner.architecture.routing_exponent`), times one expert's
    bytes. At large ``tokens`` every expert is read once.
    """
    model = replica.model
    b_w = arch.weight_bytes_per_param(model, replica.weight_dtype, replica.fp4_format)
    total = arch.weight_bytes(*replica.weight_layout)
    total -= arch.input_embedding_bytes(model)  # gathered by row, never read whole
    if model.moe is None:
        return total
    e, k = model.moe.num_experts, model.moe.experts_per_token
    distinct = arch.distinct_experts(e, k, tokens, arch.routing_exponent(model, replica.ep))
    routed = arch.routed_expert_param_count(model) * b_w
    touched = arch.moe_layer_count(model) * distinct * arch.expert_param_count(model) * b_w
    return total - routed + touched


def tp_comm_ms(replica: Replica, tokens: float) -> float:
    """Tensor-parallel all-reduce time of one step over ``tokens`` tokens (ms).

    Two all-reduces per layer (after attention and after the MLP), each of
    ``tokens x hidden x 2`` bytes (bf16 activations), each priced by
    :func:`planner.kernels.allreduce_ms` on the replica's TP link (one-shot,
    two-shot or ring on NVSwitch/xGMI/NVLink bridges, whichever is fastest; ring
    over PCIe): ``t = 2 x L x allreduce_ms(link, tp, tokens x hidden x 2)``.
    0 when ``tp == 1`` or no tokens.
    """
    if replica.tp == 1 or tokens <= 0:
        return 0.0
    if replica.scale_up_link is None:
        raise PlanningError.for_field("tp", "tp > 1 needs a scale-up link")
    return replica.coefficients.comm_ms(tokens)


def weight_read_ms(replica: Replica) -> float:
    """Time to read all weights once: ``(weight_bytes - dp x input embedding bytes) /
    (W_eff x read derate)`` (ms; the embedding table is gathered by row,
    :func:`planner.architecture.input_embedding_bytes`); the derate is 1 except for
    unmeasured FP4 weights (:func:`planner.kernels.weight_dtype_derates`)."""
    read = replica_weight_bytes(replica) - replica.dp * arch.input_embedding_bytes(replica.model)
    return read / replica.coefficients.w_weights_per_ms


def prefill_ms(
    replica: Replica,
    prompt_tokens: float,
    cached_tokens: float = 0.0,
    *,
    include_overhead: bool = True,
    causal_skip: bool = True,
) -> float:
    """Time to prefill one prompt of ``prompt_tokens``, ``cached_tokens`` of it cached (ms).

    New tokens ``S = prompt - cached``;
    ``FLOPs = S x 2 N_active + attention over contexts cached .. cached + S``
    (mean context ``cached + S/2`` on full layers: the kernel skips the causal
    mask's upper triangle). ``causal_skip=False`` charges every new token the
    full ``cached + S`` context instead (a kernel computing the whole square).

    A sum of kernels (:mod:`planner.kernels`): weight GEMMs
    ``max(S x 2 N_dense / (F_gemm x g), dense weight bytes / W_eff)`` (``g`` the measured
    gain at the step's tokens, :func:`planner.kernels.gain_at_tokens`), MoE expert GEMMs,
    attention ``max(attention FLOPs / F_attn, KV bytes / W_eff)``, then
    ``tp_comm_ms(S) + step_overhead`` (only with ``include_overhead``), and with ``pp``
    pipeline stages ``(pp - 1)`` hand-overs of the prompt's activations (the stages run
    one after another for one prompt). 0 when nothing is new.

    DOMAIN.md's "129 ms prefill" of a 4,096-token llama-2-7b prompt on one H100 at
    MFU 0.5 is ``4096 x 15.62 GFLOP / 494.7 TFLOP/s = 129.4 ms``: attention at
    context 4,096, i.e. ``causal_skip=False``; with the causal mean context 2,048
    (14.55 GFLOP/token) the same prefill takes 120.5 ms.
    """
    if prompt_tokens < 0 or cached_tokens < 0:
        raise PlanningError.for_field("prompt_tokens", "token counts must be >= 0")
    if cached_tokens > prompt_tokens:
        raise PlanningError.for_field(
            "cached_tokens", f"{cached_tokens} exceeds the prompt ({prompt_tokens})"
        )
    new = prompt_tokens - cached_tokens
    if new <= 0:
        return 0.0
    c = replica.coefficients
    t = c.gemm_ms(new) + c.moe_ms(new)
    if causal_skip:
        t += max(c.chunk_attention_parts_ms(new, cached_tokens))
    else:
        flops = new * c.prefill_attn_per_ctx * c.context_weight(prompt_tokens)
        t += max(flops / c.f_attn_per_ms, c.kv_held_bytes(prompt_tokens) / c.w_per_ms)
    if include_overhead:
        t += c.comm_ms(new) + c.overhead_ms + c.pipeline_ms(new, hops=replica.pp - 1)
    return t


def decode_memory_ms(replica: Replica, batch: float, context_tokens: float) -> float:
    """Memory time of a decode step (ms): ``weights read / (W_eff x read derate) +
    B x KV read(KV_held(s))`` (the derate: :func:`planner.kernels.weight_dtype_derates`;
    the KV read: :meth:`planner.kernels.StepCoefficients.kv_read_ms_per_seq`, at least
    ``KV_held / W_eff``).

    Weights read follow :func:`weight_bytes_read_per_step` (MoE reads only the
    experts the batch routes to); ``KV_held(s)`` is one sequence's KV with its TP
    replication (:func:`planner.architecture.kv_replication`; sliding windows cap it).
    A bound for reports; the step itself is :func:`decode_step_ms`.
    """
    c = replica.coefficients
    kv_ms = batch * c.kv_read_ms_per_seq(c.kv_held_bytes(context_tokens))
    weights = weight_bytes_read_per_step(replica, batch)
    return weights / c.w_weights_per_ms + kv_ms


def decode_compute_ms(replica: Replica, batch: float, context_tokens: float) -> float:
    """Compute time of a decode step (ms): ``B x 2 N_active / F_gemm + B x decode
    attention FLOPs(s) / F_attn`` (MLA absorbed; dense GEMMs at the gain of ``B`` tokens,
    :func:`planner.kernels.gain_at_tokens`). A bound for reports."""
    c = replica.coefficients
    gemm = batch * (c.dense_ms_per_token(batch) + c.routed_flops_per_token / c.f_gemm_per_ms)
    return gemm + c.decode_attention_parts_ms(batch, context_tokens)[0]


def decode_step_ms(
    replica: Replica,
    batch: float,
    context_tokens: float,
    *,
    include_overhead: bool = True,
) -> float:
    """One decode step for ``batch`` sequences at mean context ``context_tokens`` (ms).

    A sum of kernels (:meth:`planner.kernels.StepCoefficients.step_ms`): weight GEMMs
    ``max(B x 2 N_dense / (F_gemm x g), weights / W_eff)`` + MoE expert GEMMs + attention
    ``max(B x attn(s) / F_attn, B x KV_held(s) / W_eff)`` + ``tp_comm_ms(B)`` + step
    overhead. This is the TPOT at that batch.
    """
    if batch <= 0:
        raise PlanningError.for_field("batch", f"must be > 0, got {batch}")
    if context_tokens < 0:
        raise PlanningError.for_field("context_tokens", f"must be >= 0, got {context_tokens}")
    return replica.coefficients.step_ms(batch, context_tokens, include_overhead=include_overhead)


def step_kernels(
    replica: Replica,
    decode_batch: float,
    decode_context_tokens: float,
    chunk_tokens: float = 0.0,
    chunk_context_tokens: float = 0.0,
) -> kn.StepKernels:
    """The kernel times (GEMMs, MoE, attention, collectives, overhead; ms) of a step of
    ``decode_batch`` decodes and one chunk (:class:`planner.kernels.StepKernels`)."""
    return replica.coefficients.kernels(
        decode_batch, decode_context_tokens, chunk_tokens, chunk_context_tokens
    )
