"""Roofline cost model of one replica: step times, memory, chunk budgets, KV transfer.

A *replica* is ``tp`` GPUs of one SKU serving one model (DOMAIN.md section 2).
Every time here is a roofline: the larger of a compute time (FLOPs over the
effective FLOP/s ``F_eff = tp x peak x MFU``) and a memory time (bytes over the
effective bandwidth ``W_eff = tp x HBM bandwidth x MBU``), plus tensor-parallel
communication and a fixed per-step overhead where a real engine step pays them.

Units: times in milliseconds (``_ms``), bytes in bytes, memory in decimal GB
(``_gb``, 1e9 bytes), FLOP/s and bytes/s in SI. All functions are pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from catalog.schema import DTYPE_BYTES, Catalog, Dtype, Gpu, Link, Model
from planner import architecture as arch
from planner import engines
from planner import kernels as kn
from planner.errors import DoesNotFitError, PlanningError, UnknownEntryError

#: The default engine's (vLLM's, as plans launch it) ``gpu_memory_utilization``: the
#: share of each GPU's memory the engine may use for weights, activations and the KV
#: cache (see :mod:`planner.engines` for why 0.92 and not vLLM's 0.9).
DEFAULT_MEMORY_UTILIZATION = engines.ENGINES[engines.DEFAULT_ENGINE].memory_utilization

#: Memory kept per GPU for activations, CUDA graphs and the sampler's logits (GB) by the
#: default engine (see :mod:`planner.engines`).
DEFAULT_ACTIVATION_RESERVE_GB = engines.ENGINES[engines.DEFAULT_ENGINE].activation_reserve_gb

#: Bytes per activation element exchanged in tensor-parallel all-reduces (bf16).
ACTIVATION_BYTES = kn.ACTIVATION_BYTES

#: A replica "fits" when, after weights and the activation reserve, its KV cache
#: holds at least one sequence of min(model.max_context_tokens, this) tokens.
MIN_FIT_CONTEXT_TOKENS = 4096

#: KV-cache formats an engine can store (fp4 KV is not offered by mainstream engines).
KV_DTYPES = (Dtype.BF16, Dtype.FP8)


@dataclass(frozen=True)
class Replica:
    """One serving replica: ``tp`` GPUs of ``gpu`` holding one copy of ``model``.

    ``prefill_mfu``: achieved / peak FLOP/s (compute-bound phases);
    ``decode_mbu``: achieved / peak HBM bandwidth (memory-bound phases);
    ``step_overhead_ms``: fixed cost per engine step (scheduling, launches);
    ``overlap_factor``: how well a chunk's compute hides under decode memory
    traffic in a mixed step (1 = perfectly); ``scale_up_link``: the link the TP
    all-reduces use (None when ``tp == 1`` or the SKU has none);
    ``memory_utilization``: share of GPU memory the engine may use (vLLM's
    ``gpu_memory_utilization``); ``activation_reserve_gb``: per-GPU memory kept
    for activations (see :data:`DEFAULT_ACTIVATION_RESERVE_GB`); ``attention_dtype``:
    the precision attention kernels run at (:func:`planner.engines.attention_dtype`);
    ``engine``: the serving engine the factors describe (:mod:`planner.engines`).
    ``scale_up_link`` is the link the TP collectives cross: the NVLink/xGMI link within
    the scale-up domain, or the PCIe link when ``tp`` spans more GPUs than that domain
    (TP over PCIe, e.g. L40S or H100 PCIe at tp 4-8).
    """

    model: Model
    gpu: Gpu
    tp: int
    weight_dtype: Dtype
    kv_dtype: Dtype
    prefill_mfu: float
    decode_mbu: float
    step_overhead_ms: float
    overlap_factor: float
    scale_up_link: Link | None
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION
    activation_reserve_gb: float = DEFAULT_ACTIVATION_RESERVE_GB
    attention_dtype: Dtype = Dtype.BF16
    engine: str = engines.DEFAULT_ENGINE

    @cached_property
    def coefficients(self) -> kn.StepCoefficients:
        """The cost model's constants for this replica (:mod:`planner.kernels`)."""
        return kn.coefficients_of(self)

    def __post_init__(self) -> None:
        if isinstance(self.tp, bool) or not isinstance(self.tp, int) or self.tp < 1:
            raise PlanningError.for_field("tp", f"must be a positive integer, got {self.tp!r}")
        if self.gpu.peak_tflops(self.weight_dtype) is None:
            raise PlanningError.for_field(
                "dtype", f"{self.gpu.id} has no {Dtype(self.weight_dtype)} tensor cores"
            )
        for name, value in (("mfu", self.prefill_mfu), ("mbu", self.decode_mbu)):
            if not (0.0 < value <= 1.0):
                raise PlanningError.for_field(name, f"must be in (0, 1], got {value}")
        if not (0.0 <= self.overlap_factor <= 1.0):
            raise PlanningError.for_field(
                "overlap_factor", f"must be in [0, 1], got {self.overlap_factor}"
            )
        if not (self.step_overhead_ms >= 0.0 and math.isfinite(self.step_overhead_ms)):
            raise PlanningError.for_field(
                "step_overhead_ms", f"must be >= 0, got {self.step_overhead_ms}"
            )
        if not (0.0 < self.memory_utilization <= 1.0):
            raise PlanningError.for_field(
                "memory_utilization", f"must be in (0, 1], got {self.memory_utilization}"
            )
        if not (self.activation_reserve_gb >= 0.0):
            raise PlanningError.for_field(
                "activation_reserve_gb", f"must be >= 0, got {self.activation_reserve_gb}"
            )
        if self.tp > 1 and self.scale_up_link is None:
            raise PlanningError.for_field(
                "tp", f"tp={self.tp} needs a scale-up link and {self.gpu.id} has none"
            )


# --------------------------------------------------------------------------- building


def _is_power_of_two(n: int) -> bool:
    return n >= 1 and (n & (n - 1)) == 0


def _parse_dtype(value: Dtype | str, field: str) -> Dtype:
    try:
        return Dtype(value)
    except ValueError:
        known = ", ".join(d.value for d in Dtype)
        raise PlanningError.for_field(field, f"unknown dtype {value!r} (known: {known})") from None


def _check_fraction(field: str, value: float | None) -> None:
    if value is not None and not (0.0 < value <= 1.0):
        raise PlanningError.for_field(field, f"must be in (0, 1], got {value}")


def memory_needed_gb(replica: Replica) -> float:
    """Memory a replica needs to fit (GB): weights + ``tp x activation_reserve`` + the KV
    cache of one sequence of ``min(max_context, MIN_FIT_CONTEXT_TOKENS)`` tokens, held
    ``kv_replication(tp)`` times (heads or an MLA latent replicated over ranks)."""
    ctx = min(replica.model.max_context_tokens, MIN_FIT_CONTEXT_TOKENS)
    kv = arch.kv_bytes_for_sequence(replica.model, ctx, replica.kv_dtype) * arch.kv_replication(
        replica.model, replica.tp
    )
    weights = arch.weight_bytes(replica.model, replica.weight_dtype)
    return (weights + kv) / 1e9 + replica.tp * replica.activation_reserve_gb


def usable_memory_gb(replica: Replica) -> float:
    """Memory the engine may use (GB): ``tp x memory_gb x memory_utilization``."""
    return replica.tp * replica.gpu.memory_gb * replica.memory_utilization


def check_memory_fit(replica: Replica) -> None:
    """Raise :class:`DoesNotFitError` when the model does not fit the replica's memory.

    Names ``tp`` when a larger power-of-two tp within the scale-up domain would
    fit, else ``gpu``; the message says how many GB are needed vs available.
    """
    needed = memory_needed_gb(replica)
    available = usable_memory_gb(replica)
    if needed <= available:
        return
    m, g = replica.model, replica.gpu
    ctx = min(m.max_context_tokens, MIN_FIT_CONTEXT_TOKENS)
    weights_gb = arch.weight_bytes(m, replica.weight_dtype) / 1e9
    reserve_gb = replica.tp * replica.activation_reserve_gb
    text = (
        f"{m.id} in {replica.weight_dtype} needs {needed:.1f} GB ({weights_gb:.1f} GB weights "
        f"+ {reserve_gb:.1f} GB activations + {needed - weights_gb - reserve_gb:.1f} GB for one "
        f"{ctx}-token KV cache) but tp={replica.tp} x {g.id} offers {available:.1f} GB usable "
        f"({g.memory_gb:g} GB x {replica.memory_utilization:g} per GPU)"
    )
    larger = [
        t
        for t in (2**k for k in range(1, 11))
        if replica.tp < t <= max_tp(g)
        and needed - replica.tp * replica.activation_reserve_gb + t * replica.activation_reserve_gb
        <= t * g.memory_gb * replica.memory_utilization
    ]
    if larger:
        raise DoesNotFitError.for_field("tp", f"{text}; tp={larger[0]} would fit")
    raise DoesNotFitError.for_field("gpu", f"{text}, even at the largest tp of its domain")


def max_tp(gpu: Gpu) -> int:
    """Largest tensor parallelism of one replica on ``gpu`` (GPUs): its scale-up domain,
    or a whole server over PCIe when the server holds more GPUs than that domain
    (``max(scale_up_domain_size, server.gpus_per_server)``; L40S 8, H100 PCIe 8)."""
    return max(gpu.scale_up_domain_size, gpu.server.gpus_per_server)


def tp_link_id(gpu: Gpu, tp: int) -> str | None:
    """The link a ``tp``-way replica's collectives cross: None at tp 1, the scale-up link
    within the scale-up domain, else the PCIe link (TP over PCIe)."""
    if tp <= 1:
        return None
    if tp <= gpu.scale_up_domain_size and gpu.scale_up_link is not None:
        return gpu.scale_up_link
    return gpu.pcie_link


def build_replica(
    catalog: Catalog,
    model_id: str,
    gpu_id: str,
    tp: int = 1,
    dtype: Dtype | str = "bf16",
    kv_dtype: Dtype | str | None = None,
    mfu: float | None = None,
    mbu: float | None = None,
    step_overhead_ms: float | None = None,
    overlap_factor: float | None = None,
    check_fit: bool = True,
    memory_utilization: float | None = None,
    activation_reserve_gb: float | None = None,
    engine: str | None = None,
) -> Replica:
    """Validate the arguments against the catalog and build a :class:`Replica`.

    Efficiency defaults come from ``gpu.efficiency_for(dtype)`` (the SKU's factors, or a
    calibration's for that dtype) and are overridden per call.
    ``kv_dtype`` defaults to bf16 (vLLM's ``kv_cache_dtype="auto"`` stores the
    activation dtype, bf16, even for fp8 weights). ``engine`` (default vLLM) sets the
    memory defaults and the attention precision (:mod:`planner.engines`). ``tp`` may
    exceed the scale-up domain up to a whole server (TP over PCIe). Raises
    :class:`UnknownEntryError` (fields ``model``, ``gpu``) or
    :class:`PlanningError` (``tp``, ``dtype``, ``kv_dtype``, ``mfu``, ``mbu``,
    ``step_overhead_ms``, ``overlap_factor``) and, with ``check_fit``,
    :class:`DoesNotFitError` (``tp`` or ``gpu``).
    """
    model = catalog.models.get(model_id)
    if model is None:
        raise UnknownEntryError.for_field(
            "model", f"unknown model {model_id!r} (known: {', '.join(sorted(catalog.models))})"
        )
    gpu = catalog.gpus.get(gpu_id)
    if gpu is None:
        raise UnknownEntryError.for_field(
            "gpu", f"unknown gpu {gpu_id!r} (known: {', '.join(sorted(catalog.gpus))})"
        )
    if isinstance(tp, bool) or not isinstance(tp, int) or not _is_power_of_two(tp):
        raise PlanningError.for_field("tp", f"must be a positive power of two, got {tp!r}")
    if tp > max_tp(gpu):
        raise PlanningError.for_field(
            "tp",
            f"{tp} exceeds the scale-up domain of {gpu.id} ({gpu.scale_up_domain_size}) and "
            f"its {gpu.server.gpus_per_server}-GPU server: the largest replica is "
            f"{max_tp(gpu)} GPUs (TP over PCIe beyond the scale-up domain)",
        )
    profile = engines.engine_profile(engine)
    w_dtype = _parse_dtype(dtype, "dtype")
    if gpu.peak_tflops(w_dtype) is None:
        supported = ", ".join(d.value for d in gpu.supported_dtypes())
        raise PlanningError.for_field(
            "dtype", f"{gpu.id} has no {w_dtype} tensor cores (supported: {supported})"
        )
    if w_dtype not in model.weight_dtypes:
        served = ", ".join(d.value for d in model.weight_dtypes)
        raise PlanningError.for_field(
            "dtype", f"{model.id} is not served in {w_dtype} (served in: {served})"
        )
    k_dtype = Dtype.BF16 if kv_dtype is None else _parse_dtype(kv_dtype, "kv_dtype")
    if k_dtype not in KV_DTYPES:
        raise PlanningError.for_field(
            "kv_dtype", f"{k_dtype} KV cache is not supported (use bf16 or fp8)"
        )
    _check_fraction("mfu", mfu)
    _check_fraction("mbu", mbu)
    eff = gpu.efficiency_for(w_dtype)
    link_id = tp_link_id(gpu, tp)
    link = catalog.links[link_id] if link_id is not None else None
    replica = Replica(
        model=model,
        gpu=gpu,
        tp=tp,
        weight_dtype=w_dtype,
        kv_dtype=k_dtype,
        prefill_mfu=eff.prefill_mfu if mfu is None else mfu,
        decode_mbu=eff.decode_mbu if mbu is None else mbu,
        step_overhead_ms=eff.step_overhead_ms if step_overhead_ms is None else step_overhead_ms,
        overlap_factor=eff.overlap_factor if overlap_factor is None else overlap_factor,
        scale_up_link=link,
        memory_utilization=(
            profile.memory_utilization if memory_utilization is None else memory_utilization
        ),
        activation_reserve_gb=(
            profile.activation_reserve_gb
            if activation_reserve_gb is None
            else activation_reserve_gb
        ),
        attention_dtype=engines.attention_dtype(profile, k_dtype),
        engine=profile.name,
    )
    if check_fit:
        check_memory_fit(replica)
    return replica


# --------------------------------------------------------------------------- rates


def effective_flops(replica: Replica) -> float:
    """Effective FLOP/s of the replica: ``F_eff = tp x peak_tflops(dtype) x 1e12 x MFU``.

    H100 bf16 at MFU 0.5: 989.4e12 x 0.5 = 494.7e12 FLOP/s.
    """
    peak = replica.gpu.peak_tflops(replica.weight_dtype)
    assert peak is not None  # checked when the replica was built
    return replica.tp * peak * 1e12 * replica.prefill_mfu


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


def replica_weight_bytes(replica: Replica) -> float:
    """Bytes of the replica's weights in its dtype (all ``tp`` shards together)."""
    return arch.weight_bytes(replica.model, replica.weight_dtype)


def weight_bytes_read_per_step(replica: Replica, tokens: float) -> float:
    """Weight bytes one forward step over ``tokens`` tokens reads (bytes).

    Dense: all weights. MoE: everything but the routed experts, plus per MoE layer
    the expected number of distinct routed experts the step touches,
    ``E x (1 - (1 - k/E)^tokens)`` (each token picks k of E uniformly), times one
    expert's bytes. At large ``tokens`` every expert is read once.
    """
    model = replica.model
    b_w = DTYPE_BYTES[replica.weight_dtype]
    total = arch.weight_bytes(model, replica.weight_dtype)
    if model.moe is None:
        return total
    e, k = model.moe.num_experts, model.moe.experts_per_token
    distinct = e * (1.0 - (1.0 - k / e) ** max(tokens, 0.0)) if tokens > 0 else 0.0
    routed = arch.routed_expert_param_count(model) * b_w
    touched = arch.moe_layer_count(model) * distinct * arch.expert_param_count(model) * b_w
    return total - routed + touched


# --------------------------------------------------------------------------- communication


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


# --------------------------------------------------------------------------- prefill


def weight_read_ms(replica: Replica) -> float:
    """Time to read all weights once: ``weight_bytes / W_eff`` (ms)."""
    return replica_weight_bytes(replica) / effective_bandwidth_bytes_per_s(replica) * 1e3


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
    ``max(S x 2 N_dense / F_gemm, dense weight bytes / W_eff)``, MoE expert GEMMs,
    attention ``max(attention FLOPs / F_attn, KV bytes / W_eff)``, then
    ``tp_comm_ms(S) + step_overhead`` (only with ``include_overhead``). 0 when nothing
    is new.

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
        t += c.comm_ms(new) + c.overhead_ms
    return t


# --------------------------------------------------------------------------- decode


def decode_memory_ms(replica: Replica, batch: float, context_tokens: float) -> float:
    """Memory time of a decode step (ms): ``(weights read + B x KV_held(s)) / W_eff``.

    Weights read follow :func:`weight_bytes_read_per_step` (MoE reads only the
    experts the batch routes to); ``KV_held(s)`` is one sequence's KV with its TP
    replication (:func:`planner.architecture.kv_replication`; sliding windows cap it).
    A bound for reports; the step itself is :func:`decode_step_ms`.
    """
    c = replica.coefficients
    kv = batch * c.kv_held_bytes(context_tokens)
    weights = weight_bytes_read_per_step(replica, batch)
    return (weights + kv) / c.w_per_ms


def decode_compute_ms(replica: Replica, batch: float, context_tokens: float) -> float:
    """Compute time of a decode step (ms): ``B x 2 N_active / F_gemm + B x decode
    attention FLOPs(s) / F_attn`` (MLA absorbed). A bound for reports."""
    c = replica.coefficients
    gemm = batch * (c.dense_flops_per_token + c.routed_flops_per_token) / c.f_gemm_per_ms
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
    ``max(B x 2 N_dense / F_gemm, weights / W_eff)`` + MoE expert GEMMs + attention
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


# --------------------------------------------------------------------------- memory


def kv_capacity_bytes(replica: Replica) -> float:
    """Bytes left for the KV cache:
    ``(tp x memory_gb x memory_utilization - tp x activation_reserve_gb) x 1e9 - weights``
    (bytes; 0 if negative)."""
    usable = usable_memory_gb(replica) - replica.tp * replica.activation_reserve_gb
    return max(usable * 1e9 - replica_weight_bytes(replica), 0.0)


def kv_capacity_tokens(replica: Replica) -> int:
    """KV-cache capacity in tokens:
    ``floor(kv_capacity_bytes / (kv_bytes_per_token x kv_replication(tp)))``.

    Counts every layer growing (the per-token rate); sliding windows help only per
    sequence (see :func:`max_resident_batch`). Replicated KV heads (tp > kv_heads) and
    MLA's latent (whole on every rank) divide the pooled capacity.
    """
    per_token = arch.kv_bytes_per_token_held(replica.model, replica.kv_dtype, replica.tp)
    return math.floor(kv_capacity_bytes(replica) / per_token)


def max_resident_batch(replica: Replica, context_tokens: float) -> int:
    """Most sequences of ``context_tokens`` that fit in the KV cache at once:
    ``floor(kv_capacity_bytes / (kv_bytes_for_sequence(context) x kv_replication(tp)))``
    (sequences). DeepSeek-V3 fp8 on 8 x H200 at 2,300 tokens: about 480, not thousands
    (the latent is held whole on each of the 8 ranks)."""
    if context_tokens <= 0:
        raise PlanningError.for_field("context_tokens", f"must be > 0, got {context_tokens}")
    per_seq = replica.coefficients.kv_held_bytes(context_tokens)
    return math.floor(kv_capacity_bytes(replica) / per_seq)


# --------------------------------------------------------------------------- chunked prefill


def chunk_compute_ms(replica: Replica, chunk_tokens: float, context_tokens: float) -> float:
    """Compute time of one prefill chunk of ``T`` tokens after ``s`` cached tokens (ms).

    ``T x 2 N_dense / F_gemm`` + MoE expert compute + ``attention over s .. s + T /
    F_attn`` — on full layers the chunk's mean context is ``s + T/2`` (each token
    attends to all earlier ones). Pure compute: no weight-read floor, communication
    or overhead (the mixed step adds those).
    """
    return replica.coefficients.chunk_compute_ms(chunk_tokens, context_tokens)


def mixed_step_ms(
    replica: Replica,
    decode_batch: float,
    decode_context_tokens: float,
    chunk_tokens: float,
    chunk_context_tokens: float,
    *,
    include_overhead: bool = True,
) -> float:
    """A stall-free mixed step: ``decode_batch`` decodes plus one prefill chunk (ms).

    A sum of kernels (:mod:`planner.kernels`): the weight and expert GEMMs run over
    all ``B + T`` tokens at once (a chunk is free while they stay bandwidth-bound);
    the decodes' attention ``a_d`` (bandwidth-bound) and the chunk's ``a_c``
    (compute-bound) share one kernel with overlap factor ``o``:
    ``max(a_d, a_c) + (1 - o) min(a_d, a_c)``; then ``tp_comm_ms(B + T)`` and the
    step overhead. With no chunk it equals :func:`decode_step_ms`.
    """
    return replica.coefficients.step_ms(
        decode_batch,
        decode_context_tokens,
        max(chunk_tokens, 0.0),
        chunk_context_tokens,
        include_overhead=include_overhead,
    )


def max_free_chunk_tokens(replica: Replica, tpot_budget_ms: float, context_tokens: float) -> int:
    """Largest chunk that fits a TPOT budget by compute alone (tokens, floored):

    ``T* = floor(TPOT_budget x F_eff / flops_per_token(s_ctx))``.
    Check: llama-2-7b on one H100 at MFU 0.5, 20.1 ms, s = 2,048:
    ``20.1e-3 x 494.7e12 / 14.55e9 = 683``.
    """
    if tpot_budget_ms <= 0:
        raise PlanningError.for_field("tpot_budget_ms", f"must be > 0, got {tpot_budget_ms}")
    per_token = arch.flops_per_token(replica.model, context_tokens)
    return math.floor(tpot_budget_ms * 1e-3 * effective_flops(replica) / per_token)


def _largest_chunk_within(
    replica: Replica, budget_ms: float, start_tokens: float, limit: int
) -> int:
    """Largest integer T in [1, limit] with chunk_compute_ms(T, start) <= budget (>= 1)."""
    if chunk_compute_ms(replica, limit, start_tokens) <= budget_ms:
        return limit
    lo, hi = 1, limit  # compute(lo) may exceed the budget: a chunk is at least 1 token
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if chunk_compute_ms(replica, mid, start_tokens) <= budget_ms:
            lo = mid
        else:
            hi = mid
    return lo


def shrinking_chunk_schedule(
    replica: Replica,
    prompt_tokens: int,
    tpot_budget_ms: float,
    cached_tokens: int = 0,
) -> list[int]:
    """Chunk sizes ``T(s)`` that hold each chunk's compute time at the TPOT budget.

    The chunk starting at context ``s`` is the largest integer T with
    ``chunk_compute_ms(T, s) <= TPOT_budget`` (its tokens see mean context
    ``s + T/2``), at least 1 token, and the last chunk takes what is left. As
    ``s`` grows through the prompt the attention term grows, so chunks shrink.
    Returns the list of chunk sizes (tokens), summing to ``prompt - cached``.
    """
    if tpot_budget_ms <= 0:
        raise PlanningError.for_field("tpot_budget_ms", f"must be > 0, got {tpot_budget_ms}")
    if not 0 <= cached_tokens <= prompt_tokens:
        raise PlanningError.for_field("cached_tokens", "must be in [0, prompt_tokens]")
    chunks: list[int] = []
    s = int(cached_tokens)
    end = int(prompt_tokens)
    while s < end:
        t = _largest_chunk_within(replica, tpot_budget_ms, s, end - s)
        chunks.append(t)
        s += t
    return chunks


def _ttft_of_chunks(
    replica: Replica, chunks: list[int], start_tokens: int, decode_step_ms: float
) -> float:
    total, s = 0.0, start_tokens
    for t in chunks:
        total += max(decode_step_ms, chunk_compute_ms(replica, t, s))
        s += t
    return total


def chunked_prefill_ttft_ms(
    replica: Replica,
    prompt_tokens: int,
    budget_tokens: int,
    decode_step_ms: float,
    cached_tokens: int = 0,
) -> float:
    """TTFT of a prompt prefilled in fixed chunks of ``budget_tokens`` (ms, no queueing).

    ``sum over the ceil((P - cached) / T) chunks of max(decode_step_ms,
    chunk_compute_ms(T_i, s_i))``, where chunk i starts at ``s_i`` and the last
    chunk holds the remainder. Later chunks see more context and take longer.
    """
    if budget_tokens < 1:
        raise PlanningError.for_field("budget_tokens", f"must be >= 1, got {budget_tokens}")
    if not 0 <= cached_tokens <= prompt_tokens:
        raise PlanningError.for_field("cached_tokens", "must be in [0, prompt_tokens]")
    new = int(prompt_tokens) - int(cached_tokens)
    full, rest = divmod(new, int(budget_tokens))
    chunks = [int(budget_tokens)] * full + ([rest] if rest else [])
    return _ttft_of_chunks(replica, chunks, int(cached_tokens), decode_step_ms)


def shrinking_schedule_ttft_ms(
    replica: Replica,
    prompt_tokens: int,
    tpot_budget_ms: float,
    decode_step_ms: float,
    cached_tokens: int = 0,
) -> float:
    """TTFT of the :func:`shrinking_chunk_schedule` (ms, no queueing):
    ``sum over its chunks of max(decode_step_ms, chunk_compute_ms(T(s), s))``."""
    chunks = shrinking_chunk_schedule(replica, prompt_tokens, tpot_budget_ms, cached_tokens)
    return _ttft_of_chunks(replica, chunks, int(cached_tokens), decode_step_ms)


def chunk_kv_reread_tokens(prompt_tokens: float, budget_tokens: float) -> float:
    """Extra KV token-reads caused by chunking a prompt of S tokens in chunks of T:

    ``S^2 / (2T) - S/2`` (token-reads): chunk i re-reads the ``i x T`` tokens
    before it, ``sum_{i<S/T} i T``. Exact when T divides S; 0 when ``T >= S``.
    """
    if budget_tokens <= 0:
        raise PlanningError.for_field("budget_tokens", f"must be > 0, got {budget_tokens}")
    s = prompt_tokens
    return max(s * s / (2.0 * budget_tokens) - s / 2.0, 0.0)


def chunk_kv_reread_bytes(
    model: Model, prompt_tokens: float, budget_tokens: float, kv_dtype: Dtype | str = "bf16"
) -> float:
    """Extra KV bytes read by chunking: ``chunk_kv_reread_tokens x kv_bytes_per_token``
    (bytes; an upper bound for sliding-window models, whose windowed layers read less)."""
    return chunk_kv_reread_tokens(prompt_tokens, budget_tokens) * arch.kv_bytes_per_token(
        model, kv_dtype
    )


# --------------------------------------------------------------------------- KV transfer


def kv_transfer_ms(kv_bytes: float, bandwidth_gb_per_s: float, latency_us: float = 0.0) -> float:
    """Time to ship a KV cache (ms): ``kv_bytes / (GB/s x 1e9) x 1000 + latency_us / 1000``.

    Checks: a 4,096-token GQA-8 cache (0.537 GB) over 400 / 64 / 25 GB/s takes
    1.3 / 8.4 / 21.5 ms; an MHA cache (2.147 GB) 5.4 / 33.6 / 85.9 ms.
    """
    if bandwidth_gb_per_s <= 0:
        raise PlanningError.for_field(
            "bandwidth_gb_per_s", f"must be > 0, got {bandwidth_gb_per_s}"
        )
    if kv_bytes < 0 or latency_us < 0:
        raise PlanningError.for_field("kv_bytes", "bytes and latency must be >= 0")
    return kv_bytes / (bandwidth_gb_per_s * 1e9) * 1e3 + latency_us * 1e-3


def exposed_transfer_ms(
    transfer_ms: float, prefill_ms: float, overlap_fraction: float, num_layers: int = 1
) -> float:
    """The part of a KV transfer that adds to TTFT under layer-wise streaming (ms).

    Layer i's KV leaves as soon as layer i is computed, so the transfer can run
    behind the last ``(L-1)/L`` of the prefill. ``overlap_fraction`` caps the share
    of the transfer that streaming hides in practice:
    ``hidden = min(overlap_fraction x transfer, prefill x (L-1)/L)``,
    ``exposed = transfer - hidden``, clamped to ``[0, transfer]``.
    ``num_layers = 1`` (the default) models no streaming: all of it is exposed.
    """
    if not 0.0 <= overlap_fraction <= 1.0:
        raise PlanningError.for_field(
            "overlap_fraction", f"must be in [0, 1], got {overlap_fraction}"
        )
    if num_layers < 1:
        raise PlanningError.for_field("num_layers", f"must be >= 1, got {num_layers}")
    if transfer_ms <= 0:
        return 0.0
    window = max(prefill_ms, 0.0) * (num_layers - 1) / num_layers
    hidden = min(overlap_fraction * transfer_ms, window)
    return min(max(transfer_ms - hidden, 0.0), transfer_ms)


__all__ = [
    "DEFAULT_ACTIVATION_RESERVE_GB",
    "DEFAULT_MEMORY_UTILIZATION",
    "Replica",
    "build_replica",
    "check_memory_fit",
    "chunk_compute_ms",
    "chunk_kv_reread_bytes",
    "chunk_kv_reread_tokens",
    "chunked_prefill_ttft_ms",
    "decode_compute_ms",
    "decode_memory_ms",
    "decode_step_ms",
    "effective_bandwidth_bytes_per_s",
    "effective_flops",
    "exposed_transfer_ms",
    "kv_capacity_bytes",
    "kv_capacity_tokens",
    "kv_transfer_ms",
    "max_free_chunk_tokens",
    "max_resident_batch",
    "max_tp",
    "memory_needed_gb",
    "mixed_step_ms",
    "peak_bandwidth_bytes_per_s",
    "peak_flops",
    "prefill_ms",
    "replica_weight_bytes",
    "shrinking_chunk_schedule",
    "shrinking_schedule_ttft_ms",
    "step_kernels",
    "tp_comm_ms",
    "tp_link_id",
    "usable_memory_gb",
    "weight_bytes_read_per_step",
    "weight_read_ms",
]
