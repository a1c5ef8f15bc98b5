"""What every analysis shares: defaults, the replica summary, input checks."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

from catalog.schema import Catalog, Dtype, Model
from planner import roofline as rl
from planner.candidates import KV_STREAM_OVERLAP
from planner.errors import PlanningError, UnknownEntryError

#: Smallest default chunk budget (tokens); defaults double from here up to the prompt.
DEFAULT_MIN_BUDGET_TOKENS = 256

#: Default share of a KV transfer that layer-wise streaming can hide (the planner's value).
DEFAULT_KV_STREAM_OVERLAP = KV_STREAM_OVERLAP


class _Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReplicaSummary(_Result):
    """The replica an analysis priced: ``tp`` GPUs of ``gpu`` serving ``model``.

    ``effective_tflops`` = ``tp x peak x MFU x lift`` / 1e12 (dense GEMMs at 512 tokens,
    :func:`planner.roofline.effective_flops`);
    ``effective_bandwidth_tb_per_s`` = ``tp x HBM x MBU`` / 1e12; ``gemm_gain``: how much
    faster per FLOP its dense GEMMs run at 1,024, 2,048, 4,096 and 8,192 tokens per step
    than at 512 (measured, :func:`planner.kernels.gemm_token_gain`; empty: no gain);
    ``gemm_lift``: the measured dense GEMM rate at 512 tokens over ``effective_tflops``'
    (:func:`planner.kernel_floors.dense_gemm_lift`; 1: none measured);
    ``decode_sequence_ms``: what each decoding sequence adds to a step beyond its KV read
    (fitted to batch sweeps, :func:`planner.kernels.decode_sequence_ms`, as the replica's
    step coefficients carry it per attention rank; 0: none);
    ``decode_sequence_max_batch``: the largest batch it was fitted at (None: unrecorded);
    ``step_layer_floor_ms``: what every step pays beyond its kernels and
    ``step_overhead_ms`` (fitted to the same sweeps, :func:`planner.kernels.step_layer_floor_ms`,
    as the replica's step coefficients carry it; 0: none);
    ``bf16_gemm_params_b``: the GEMM weights a quantized checkpoint keeps in BF16, in
    billions (its lm_head and any BF16 layers,
    :func:`planner.architecture.bf16_gemm_param_count`; 0 with BF16 weights), whose FLOPs
    take ``bf16_gemm_time_ratio`` x a weight-dtype FLOP's time at 512 tokens
    (:func:`planner.kernel_floors.bf16_gemm_rates`); ``num_experts`` / ``experts_per_token``:
    a MoE model's routed experts per layer and per token (0: dense), whose expert reads
    are priced at the routing exponent ``routing_exponent``
    (:func:`planner.architecture.routing_exponent`: the catalog's ``moe.routing``, 0 with
    uniform routing or expert parallelism).
    """

    model: str
    gpu: str
    tp: int
    dtype: str
    kv_dtype: str
    engine: str
    mfu: float
    mbu: float
    overlap_factor: float
    step_overhead_ms: float
    effective_tflops: float
    effective_bandwidth_tb_per_s: float
    gemm_gain: list[float] = []
    gemm_lift: float = 1.0
    decode_sequence_ms: float = 0.0
    decode_sequence_max_batch: int | None = None
    step_layer_floor_ms: float = 0.0
    bf16_gemm_params_b: float = 0.0
    bf16_gemm_time_ratio: float = 1.0
    num_experts: int = 0
    experts_per_token: int = 0
    routing_exponent: float = 0.0

    @classmethod
    def of(cls, replica: rl.Replica) -> ReplicaSummary:
        c = replica.coefficients
        return cls(
            model=replica.model.id,
            gpu=replica.gpu.id,
            tp=replica.tp,
            dtype=str(replica.weight_dtype),
            kv_dtype=str(replica.kv_dtype),
            engine=replica.engine,
            mfu=replica.prefill_mfu,
            mbu=replica.decode_mbu,
            overlap_factor=replica.overlap_factor,
            step_overhead_ms=replica.step_overhead_ms,
            effective_tflops=rl.effective_flops(replica) / 1e12,
            effective_bandwidth_tb_per_s=rl.effective_bandwidth_bytes_per_s(replica) / 1e12,
            gemm_gain=list(replica.coefficients.gemm_gain),
            gemm_lift=replica.coefficients.dense_lift,
            decode_sequence_ms=replica.coefficients.attn_seq_ms * replica.coefficients.dp,
            decode_sequence_max_batch=(
                replica.gpu.decode_sequence_cost.max_batch
                if replica.gpu.decode_sequence_cost is not None
                else None
            ),
            step_layer_floor_ms=replica.coefficients.layer_floor_ms,
            # the step's own figures: 2 N_bf16 rho FLOPs per token at rho
            bf16_gemm_params_b=c.wide_flops_per_token / (2.0 * c.wide_rho) / 1e9,
            bf16_gemm_time_ratio=c.wide_rho,
            num_experts=c.num_experts,
            experts_per_token=c.experts_per_token,
            routing_exponent=c.routing_exponent,
        )


# --------------------------------------------------------------------------- validation


def _check_prompt(model: Model, prompt_tokens: int, field: str = "prompt_tokens") -> None:
    if isinstance(prompt_tokens, bool) or not isinstance(prompt_tokens, int) or prompt_tokens < 1:
        raise PlanningError.for_field(field, f"must be a positive integer, got {prompt_tokens!r}")
    if prompt_tokens > model.max_context_tokens:
        raise PlanningError.for_field(
            field,
            f"{prompt_tokens:,} tokens exceed {model.id}'s context window "
            f"({model.max_context_tokens:,})",
        )


def _check_positive(field: str, value: float) -> None:
    if not (value > 0 and math.isfinite(value)):
        raise PlanningError.for_field(field, f"must be > 0, got {value}")


def _kv_dtype(value: Dtype | str) -> Dtype:
    """The KV-cache format, one of :data:`planner.roofline.KV_DTYPES` (field ``kv_dtype``)."""
    try:
        k_dtype = Dtype(value)
    except ValueError:
        k_dtype = None
    if k_dtype not in rl.KV_DTYPES:
        known = ", ".join(d.value for d in rl.KV_DTYPES)
        raise PlanningError.for_field("kv_dtype", f"unsupported KV dtype {value!r} (use {known})")
    return k_dtype


def _get_model(catalog: Catalog, model_id: str) -> Model:
    model = catalog.models.get(model_id)
    if model is None:
        known = ", ".join(sorted(catalog.models))
        raise UnknownEntryError.for_field("model", f"unknown model {model_id!r} (known: {known})")
    return model
