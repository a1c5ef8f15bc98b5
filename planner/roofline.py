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

from catalog.schema import DTYPE_BYTES, Catalog, Dtype, Gpu, Link, Model
from planner import architecture as arch
from planner.errors import DoesNotFitError, PlanningError, UnknownEntryError

#: vLLM's default ``gpu_memory_utilization``: the share of each GPU's memory the
#: engine may use for weights, activations and the KV cache.
DEFAULT_MEMORY_UTILIZATION = 0.9

#: Memory kept per GPU for activations, CUDA graphs and the sampler's logits (GB).
#: vLLM profiles the peak activation of a forward pass at ``max_num_batched_tokens``
#: (8,192 tokens: about 1-2 GB for 7-70B models, more with a 128K-256K vocabulary)
#: and CUDA graphs take a few hundred MB; 2 GB per GPU covers the common cases on
#: top of the 10% that ``memory_utilization = 0.9`` already leaves out.
DEFAULT_ACTIVATION_RESERVE_GB = 2.0

#: Bytes per activation element exchanged in tensor-parallel all-reduces (bf16).
ACTIVATION_BYTES = 2.0

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
    for activations (see :data:`DEFAULT_ACTIVATION_RESERVE_GB`).
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
    cache of one sequence of ``min(max_context, MIN_FIT_CONTEXT_TOKENS)`` tokens."""
    ctx = min(replica.model.max_context_tokens, MIN_FIT_CONTEXT_TOKENS)
    kv = arch.kv_bytes_for_sequence(replica.model, ctx, replica.kv_dtype)
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
        if replica.tp < t <= g.scale_up_domain_size
        and needed - replica.tp * replica.activation_reserve_gb + t * replica.activation_reserve_gb
        <= t * g.memory_gb * replica.memory_utilization
    ]
    if larger:
        raise DoesNotFitError.for_field("tp", f"{text}; tp={larger[0]} would fit")
    raise DoesNotFitError.for_field("gpu", f"{text}, even at the largest tp of its domain")


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
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION,
    activation_reserve_gb: float = DEFAULT_ACTIVATION_RESERVE_GB,
) -> Replica:
    """Validate the arguments against the catalog and build a :class:`Replica`.

    Efficiency defaults come from ``gpu.efficiency_for(dtype)`` (the SKU's factors, or a
    calibration's for that dtype) and are overridden per call.
    ``kv_dtype`` defaults to bf16 (vLLM's ``kv_cache_dtype="auto"`` stores the
    activation dtype, bf16, even for fp8 weights). Raises
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
    if tp > gpu.scale_up_domain_size:
        raise PlanningError.for_field(
            "tp", f"{tp} exceeds the scale-up domain of {gpu.id} ({gpu.scale_up_domain_size})"
        )
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
    link = None
    if tp > 1:
        assert gpu.scale_up_link is not None  # the loader guarantees it for domains > 1
        link = catalog.links[gpu.scale_up_link]
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
        memory_utilization=memory_utilization,
        activation_reserve_gb=activation_reserve_gb,
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
    ``tokens x hidden x 2`` bytes (bf16 activations), as a ring (the alpha-beta
    model: 2 (tp-1) sequential steps, each paying the link latency, moving
    2 (tp-1)/tp of the message):
    ``t = 2 x L x (2 (tp-1)/tp x bytes / link_bw + 2 (tp-1) x link_latency)`` with
    the link's per-direction bandwidth (GB/s x 1e9). 0 when ``tp == 1`` or no tokens.
    """
    if replica.tp == 1 or tokens <= 0:
        return 0.0
    link = replica.scale_up_link
    if link is None:
        raise PlanningError.for_field("tp", "tp > 1 needs a scale-up link")
    tp = replica.tp
    message_bytes = tokens * replica.model.hidden_size * ACTIVATION_BYTES
    one_s = 2.0 * (tp - 1) / tp * message_bytes / (link.bandwidth_gb_per_s * 1e9)
    one_s += 2.0 * (tp - 1) * link.latency_us * 1e-6
    return 2 * replica.model.num_layers * one_s * 1e3


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

    ``t = max(FLOPs / F_eff, weight_bytes / W_eff) + tp_comm_ms(S) + step_overhead``
    (comm and overhead only with ``include_overhead``; MoE weight bytes are those the
    S tokens route to, see :func:`weight_bytes_read_per_step`). 0 when nothing is new.

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
    model = replica.model
    if causal_skip:
        flops = arch.prefill_flops(model, new, cached_tokens)
    else:
        flops = new * arch.flops_per_token(model, prompt_tokens)
    compute_ms = flops / effective_flops(replica) * 1e3
    memory_ms = weight_bytes_read_per_step(replica, new) / effective_bandwidth_bytes_per_s(replica)
    t = max(compute_ms, memory_ms * 1e3)
    if include_overhead:
        t += tp_comm_ms(replica, new) + replica.step_overhead_ms
    return t


# --------------------------------------------------------------------------- decode


def decode_memory_ms(replica: Replica, batch: float, context_tokens: float) -> float:
    """Memory time of a decode step (ms): ``(weights read + B x KV(s)) / W_eff``.

    Weights read follow :func:`weight_bytes_read_per_step` (MoE reads only the
    experts the batch routes to); ``KV(s) = kv_bytes_for_sequence(s)`` (sliding
    windows cap it).
    """
    kv = batch * arch.kv_bytes_for_sequence(replica.model, context_tokens, replica.kv_dtype)
    weights = weight_bytes_read_per_step(replica, batch)
    return (weights + kv) / effective_bandwidth_bytes_per_s(replica) * 1e3


def decode_compute_ms(replica: Replica, batch: float, context_tokens: float) -> float:
    """Compute time of a decode step (ms): ``B x flops_per_token(s) / F_eff``."""
    flops = batch * arch.flops_per_token(replica.model, context_tokens)
    return flops / effective_flops(replica) * 1e3


def decode_step_ms(
    replica: Replica,
    batch: float,
    context_tokens: float,
    *,
    include_overhead: bool = True,
) -> float:
    """One decode step for ``batch`` sequences at mean context ``context_tokens`` (ms).

    ``t = max(decode_memory_ms, decode_compute_ms) + tp_comm_ms(B) + step_overhead``
    (the step never beats its compute time). This is the TPOT at that batch.
    """
    if batch <= 0:
        raise PlanningError.for_field("batch", f"must be > 0, got {batch}")
    if context_tokens < 0:
        raise PlanningError.for_field("context_tokens", f"must be >= 0, got {context_tokens}")
    t = max(
        decode_memory_ms(replica, batch, context_tokens),
        decode_compute_ms(replica, batch, context_tokens),
    )
    if include_overhead:
        t += tp_comm_ms(replica, batch) + replica.step_overhead_ms
    return t


# --------------------------------------------------------------------------- memory


def kv_capacity_bytes(replica: Replica) -> float:
    """Bytes left for the KV cache:
    ``(tp x memory_gb x memory_utilization - tp x activation_reserve_gb) x 1e9 - weights``
    (bytes; 0 if negative)."""
    usable = usable_memory_gb(replica) - replica.tp * replica.activation_reserve_gb
    return max(usable * 1e9 - replica_weight_bytes(replica), 0.0)


def kv_capacity_tokens(replica: Replica) -> int:
    """KV-cache capacity in tokens: ``floor(kv_capacity_bytes / kv_bytes_per_token)``.

    Counts every layer growing (the per-token rate); sliding windows help only per
    sequence (see :func:`max_resident_batch`).
    """
    per_token = arch.kv_bytes_per_token(replica.model, replica.kv_dtype)
    return math.floor(kv_capacity_bytes(replica) / per_token)


def max_resident_batch(replica: Replica, context_tokens: float) -> int:
    """Most sequences of ``context_tokens`` that fit in the KV cache at once:
    ``floor(kv_capacity_bytes / kv_bytes_for_sequence(context))`` (sequences)."""
    if context_tokens <= 0:
        raise PlanningError.for_field("context_tokens", f"must be > 0, got {context_tokens}")
    per_seq = arch.kv_bytes_for_sequence(replica.model, context_tokens, replica.kv_dtype)
    return math.floor(kv_capacity_bytes(replica) / per_seq)


# --------------------------------------------------------------------------- chunked prefill


def chunk_compute_ms(replica: Replica, chunk_tokens: float, context_tokens: float) -> float:
    """Compute time of one prefill chunk of ``T`` tokens after ``s`` cached tokens (ms).

    ``(T x 2 N_active + attention over s .. s + T) / F_eff`` — on full layers the
    chunk's mean context is ``s + T/2`` (each token attends to all earlier ones).
    Pure compute: no weight-read floor, communication or overhead (the mixed step
    adds those).
    """
    if chunk_tokens <= 0:
        return 0.0
    flops = arch.prefill_flops(replica.model, chunk_tokens, context_tokens)
    return flops / effective_flops(replica) * 1e3


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

    Decode part ``d = max(decode memory, decode compute)`` (MoE experts touched by
    ``decode_batch + chunk_tokens`` tokens), chunk part
    ``c = chunk_compute_ms(chunk_tokens, chunk_context_tokens)``; with overlap factor
    ``o``: ``t = max(d, c) + (1 - o) x min(d, c) + tp_comm_ms(B + T) + overhead``
    (``o = 1``: perfect overlap). With no chunk it equals :func:`decode_step_ms`.
    """
    routed = decode_batch + max(chunk_tokens, 0.0)
    kv = decode_batch * arch.kv_bytes_for_sequence(
        replica.model, decode_context_tokens, replica.kv_dtype
    )
    memory = (weight_bytes_read_per_step(replica, routed) + kv) / (
        effective_bandwidth_bytes_per_s(replica)
    )
    d = max(memory * 1e3, decode_compute_ms(replica, decode_batch, decode_context_tokens))
    c = chunk_compute_ms(replica, chunk_tokens, chunk_context_tokens)
    t = max(d, c) + (1.0 - replica.overlap_factor) * min(d, c)
    if include_overhead:
        t += tp_comm_ms(replica, routed) + replica.step_overhead_ms
    return t


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
    "memory_needed_gb",
    "mixed_step_ms",
    "peak_bandwidth_bytes_per_s",
    "peak_flops",
    "prefill_ms",
    "replica_weight_bytes",
    "shrinking_chunk_schedule",
    "shrinking_schedule_ttft_ms",
    "tp_comm_ms",
    "usable_memory_gb",
    "weight_bytes_read_per_step",
    "weight_read_ms",
]
