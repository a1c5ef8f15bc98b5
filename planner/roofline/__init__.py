"""Roofline cost model of one replica: step times, memory, chunk budgets, KV transfer.

A *replica* is ``tp`` GPUs of one SKU serving one model (DOMAIN.md section 2).
Every time here is a roofline: the larger of a compute time (FLOPs over the
effective FLOP/s ``F_eff = tp x peak x MFU``) and a memory time (bytes over the
effective bandwidth ``W_eff = tp x HBM bandwidth x MBU``), plus tensor-parallel
communication and a fixed per-step overhead where a real engine step pays them.

Units: times in milliseconds (``_ms``), bytes in bytes, memory in decimal GB
(``_gb``, 1e9 bytes), FLOP/s and bytes/s in SI. All functions are pure.

One module a job: ``replica`` (the replica, building it, its memory), ``steps``
(rates, communication, prefill and decode steps), ``chunks`` (chunked prefill) and
``transfer`` (KV transfer), ``speculative`` (speculative decoding's drafter).
Every name is importable from ``planner.roofline`` itself.
"""

from planner.roofline.chunks import (
    MixedSteps,
    chunk_attention_linear_ms,
    chunk_attention_parts_array_ms,
    chunk_attention_parts_ms,
    chunk_compute_ms,
    chunk_kv_reread_bytes,
    chunk_kv_reread_tokens,
    chunked_prefill_ttft_ms,
    max_free_chunk_tokens,
    mixed_step_ms,
    shrinking_chunk_schedule,
    shrinking_schedule_ttft_ms,
)
from planner.roofline.chunks import _largest_chunk_within as _largest_chunk_within
from planner.roofline.replica import (
    ACTIVATION_BYTES,
    DEFAULT_ACTIVATION_RESERVE_GB,
    DEFAULT_MEMORY_UTILIZATION,
    KV_DTYPES,
    MIN_FIT_CONTEXT_TOKENS,
    PP_OPTIONS,
    Replica,
    build_replica,
    check_memory_fit,
    dp_level_ratio,
    draft_weight_bytes,
    fp4_format_error,
    gpu_memory_bytes,
    kv_capacity_bytes,
    kv_capacity_tokens,
    max_resident_batch,
    max_tp,
    memory_needed_gb,
    moe_level_ratio,
    pp_link_id,
    replica_weight_bytes,
    server_tp_link,
    tp_link_id,
    usable_memory_gb,
)
from planner.roofline.speculative import (
    MAX_DRAFT_TOKENS,
    check_speculation,
    draft_repo_for,
    with_speculation,
)
from planner.roofline.steps import (
    decode_compute_ms,
    decode_memory_ms,
    decode_step_ms,
    effective_bandwidth_bytes_per_s,
    effective_flops,
    peak_bandwidth_bytes_per_s,
    peak_flops,
    prefill_ms,
    step_kernels,
    tp_comm_ms,
    weight_bytes_read_per_step,
    weight_read_ms,
)
from planner.roofline.transfer import exposed_transfer_ms, kv_transfer_ms

__all__ = [
    "ACTIVATION_BYTES",
    "DEFAULT_ACTIVATION_RESERVE_GB",
    "DEFAULT_MEMORY_UTILIZATION",
    "KV_DTYPES",
    "MAX_DRAFT_TOKENS",
    "MIN_FIT_CONTEXT_TOKENS",
    "PP_OPTIONS",
    "MixedSteps",
    "Replica",
    "build_replica",
    "check_memory_fit",
    "check_speculation",
    "chunk_attention_linear_ms",
    "chunk_attention_parts_array_ms",
    "chunk_attention_parts_ms",
    "chunk_compute_ms",
    "chunk_kv_reread_bytes",
    "chunk_kv_reread_tokens",
    "chunked_prefill_ttft_ms",
    "decode_compute_ms",
    "decode_memory_ms",
    "decode_step_ms",
    "dp_level_ratio",
    "draft_repo_for",
    "draft_weight_bytes",
    "effective_bandwidth_bytes_per_s",
    "effective_flops",
    "exposed_transfer_ms",
    "fp4_format_error",
    "gpu_memory_bytes",
    "kv_capacity_bytes",
    "kv_capacity_tokens",
    "kv_transfer_ms",
    "max_free_chunk_tokens",
    "max_resident_batch",
    "max_tp",
    "memory_needed_gb",
    "mixed_step_ms",
    "moe_level_ratio",
    "peak_bandwidth_bytes_per_s",
    "peak_flops",
    "pp_link_id",
    "prefill_ms",
    "replica_weight_bytes",
    "server_tp_link",
    "shrinking_chunk_schedule",
    "shrinking_schedule_ttft_ms",
    "step_kernels",
    "tp_comm_ms",
    "tp_link_id",
    "usable_memory_gb",
    "weight_bytes_read_per_step",
    "weight_read_ms",
    "with_speculation",
]
