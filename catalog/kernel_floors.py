"""Measured kernel floors of a GPU's catalog entry (split from :mod:`catalog.schema`,
which re-exports them): the fixed cost of a MoE layer and of an MLA decode attention
kernel per serving engine, the MoE layer's expert-read efficiency, FP8 GEMMs'
efficiency against BF16 ones, dense GEMMs' rate gain with tokens per step and the decode
attention kernel's rate, each with the
kernel benchmark it comes from (``scripts/extract_aiconfigurator.py``)."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from catalog.fields import Frozen, Id, Text


class MoeLayerFloor(Frozen):
    """The fixed part of one routed-expert (MoE) layer on this GPU, per serving engine
    (us): what a layer costs beyond reading its experts' weights (routing, permutes,
    quantization, launches), measured at one token.

    ``by_engine_us``: engine name (``vllm``, ``sglang``, ``trtllm``) -> floor (us) of a
    layer of 256 experts (DeepSeek-V3's, fp8 block-scaled, tp 8);
    ``few_experts_by_engine_us``: the same for a layer of 8 experts (Mixtral's shape,
    also fp8 block-scaled at tp 8), where measured (the cost model interpolates in the
    layer's experts, :func:`planner.kernel_floors.moe_layer_floor_us`);
    ``expert_read_efficiency``: the share of the GPU's dense decode bandwidth (its
    ``decode_mbu``) at which the layer's grouped GEMMs read the experts' weights, where
    the same benchmark measured it (dimensionless, in (0, 1]); None: not measured, the
    cost model assumes :data:`planner.kernels.MOE_BANDWIDTH_EFFICIENCY`;
    ``grouped_gemm_peak_share_by_engine``: engine -> {expert width per GPU (expert FFN /
    moe tp): the rate its grouped expert GEMMs reach with 128+ tokens per expert, as a
    share of the FP8 dense peak} (dimensionless;
    :func:`planner.kernel_floors.grouped_gemm_peak_share`);
    ``source``: where the figures come from (a kernel benchmark, with its version).
    Engines not listed take :data:`planner.kernels.MOE_LAYER_FLOOR_ASSUMED_US`."""

    by_engine_us: dict[Id, Annotated[float, Field(ge=0, le=10_000, allow_inf_nan=False)]] = Field(
        min_length=1, max_length=16
    )
    few_experts_by_engine_us: (
        dict[Id, Annotated[float, Field(ge=0, le=10_000, allow_inf_nan=False)]] | None
    ) = Field(default=None, min_length=1, max_length=16)
    expert_read_efficiency: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] | None = None
    grouped_gemm_peak_share_by_engine: (
        dict[Id, dict[Annotated[int, Field(ge=1)], Annotated[float, Field(gt=0, le=1)]]] | None
    ) = Field(default=None, min_length=1, max_length=16)
    source: Text = Field(min_length=10)


class MlaLayerFloor(Frozen):
    """The fixed part of one MLA (multi-head latent attention) decode kernel on this GPU,
    per serving engine (us): its latency at batch 1 and a one-token context, where no KV
    read explains it (launch, split-KV reduction, the absorbed projections' small
    GEMMs), paid by every MLA layer in every step.

    ``by_engine_us``: engine name -> floor (us); ``source``: the kernel benchmark and
    its version. Engines not listed take :data:`planner.kernels.MLA_LAYER_FLOOR_ASSUMED_US`."""

    by_engine_us: dict[Id, Annotated[float, Field(ge=0, le=10_000, allow_inf_nan=False)]] = Field(
        min_length=1, max_length=16
    )
    source: Text = Field(min_length=10)


class Fp8GemmEfficiency(Frozen):
    """How much of the FP8 dense peak this GPU's FP8 weight GEMMs reach, relative to the
    share of the BF16 peak its BF16 GEMMs reach, per serving engine (dimensionless, in
    (0, 1]): measured on compute-bound GEMMs (1,024-8,192 tokens, weights of
    4,096-16,384 x 4,096-16,384) as ``(t_bf16 / t_fp8) / 2``. The cost model prices FP8
    GEMMs at ``peak(fp8) x MFU x`` this (:func:`planner.kernels.fp8_gemm_efficiency`).

    ``by_engine``: engine name -> ratio; ``source``: the kernel benchmark and its
    versions. Engines not listed take the least listed value; GPUs without an entry take
    :data:`planner.kernels.FP8_GEMM_EFFICIENCY_ASSUMED`."""

    by_engine: dict[Id, Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]] = Field(
        min_length=1, max_length=16
    )
    source: Text = Field(min_length=10)


class DecodeAttentionFit(Frozen):
    """One engine's decode attention kernel on this GPU for one KV-cache dtype:
    ``pair_ns`` the time per (sequence, KV head) pair per layer beyond its KV bytes (ns);
    ``saturated_share`` the share of peak HBM bandwidth at which the KV bytes stream
    (dimensionless, in (0, 1])."""

    pair_ns: Annotated[float, Field(ge=0, le=1000, allow_inf_nan=False)]
    saturated_share: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]


class DecodeAttention(Frozen):
    """The measured decode attention kernel (GQA/MHA; MLA has :class:`MlaLayerFloor`)
    per serving engine and KV-cache dtype: a step's KV read takes at least
    ``layers x pairs x pair_ns + KV bytes / (peak x saturated_share)``
    (:func:`planner.kernel_floors.decode_attention_rate`).

    ``by_engine``: engine name -> {``bf16`` | ``fp8`` -> :class:`DecodeAttentionFit`};
    ``source``: the kernel benchmark and its versions. Engines not listed take the
    slowest listed values."""

    by_engine: dict[Id, dict[Literal["bf16", "fp8"], DecodeAttentionFit]] = Field(
        min_length=1, max_length=16
    )
    source: Text = Field(min_length=10)


class DecodeSequenceCost(Frozen):
    """What every decoding sequence costs per layer and step on this GPU beyond its KV
    read, fitted to serving runs where no kernel benchmark measures it (us): the slope
    of a decode step with the batch that neither the weight GEMMs, the KV bytes nor the
    all-reduces explain. AMD's vLLM latency tables on 8 x MI300X (Llama-3.1-70B and
    405B, batch 1-128) grow by ~0.07-0.13 ms per added sequence; the NVIDIA GPUs' decode
    attention kernel (:class:`DecodeAttention`) pays 2-27 ns per (sequence, KV head).

    ``us_per_layer``: the cost per decoding sequence per layer (us, GQA/MHA models;
    MLA decode has :class:`MlaLayerFloor`); ``step_us_per_layer``: what every step pays
    per layer beyond its kernels and the GPU's step overhead (us), the same sweeps'
    intercept: at batch 1 AMD's tables run 1.8 ms (70B) and 5.0 ms (405B) slower than
    the kernels priced at the GPU's factors (0: none fitted); ``points``: the serving
    runs they were fitted to (0: taken from a sibling GPU, ``source`` says which);
    ``source``: where they come from (``scripts/fit_decode_sequence_cost.py``);
    ``max_batch``: the largest batch of the runs they were fitted to (None: not
    recorded). Past it the per-sequence cost is extrapolated linearly, which AMD's
    throughput table at 1,500-3,200 sequences shows errs slow; analyses say so."""

    us_per_layer: Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)]
    step_us_per_layer: Annotated[float, Field(ge=0, le=1000, allow_inf_nan=False)] = 0.0
    max_batch: Annotated[int, Field(ge=1, le=1_000_000, strict=True)] | None = None
    points: Annotated[int, Field(ge=0, le=100_000, strict=True)]
    source: Text = Field(min_length=10)


class GemmTokenGain(Frozen):
    """How much faster per FLOP this GPU's dense weight GEMMs run as a step's token count
    grows past 512, per serving engine and weight dtype (dimensionless, >= 1): the rate at
    1,024, 2,048, 4,096 and 8,192 tokens (:data:`planner.kernel_floors.GEMM_GAIN_TOKENS`)
    over the rate at 512, the median over weight shapes of 4,096-16,384 x 4,096-16,384
    (fuller tiles and waves; :func:`planner.kernel_floors.gemm_token_gain`).

    ``by_engine``: engine name -> {``bf16`` | ``fp8`` | ``fp4`` -> the four gains};
    ``source``: the kernel benchmark and its versions. Engines not listed take the least
    listed gains.
    Each gain is at most ``1 + ln 2`` times the one before (1 before the first), so a step
    of more tokens never takes less GEMM time (the cost model interpolates in log2)."""

    by_engine: dict[
        Id,
        dict[
            Literal["bf16", "fp8", "fp4"],
            Annotated[
                list[Annotated[float, Field(ge=1, le=4, allow_inf_nan=False)]],
                Field(min_length=4, max_length=4),
            ],
        ],
    ] = Field(min_length=1, max_length=16)
    source: Text = Field(min_length=10)

    @field_validator("by_engine")
    @classmethod
    def _time_grows_with_tokens(cls, v: dict[str, dict[str, list[float]]]) -> Any:
        for engine, curves in v.items():
            for dtype, gains in curves.items():
                for i, (before, g) in enumerate(zip([1.0, *gains], gains, strict=False)):
                    if g > (1.0 + math.log(2.0)) * before:
                        raise ValueError(
                            f"{engine}.{dtype}[{i}]: gain {g} is more than 1 + ln 2 times the "
                            f"previous {before}: a step of more tokens would take less time"
                        )
        return v


class GemmPeakShare(Frozen):
    """The share of its dense peak this GPU's dense weight GEMMs reach at 512 tokens,
    per serving engine and weight dtype (dimensionless, in (0, 1]; ``bf16`` of the BF16
    peak, ``fp8`` of the FP8 peak, ``fp4`` of the FP4 peak): ``2 x 512 x N x K / t /
    peak``, the median over weight shapes of 4,096-16,384 x 4,096-16,384 (measured
    kernel timings; the base of :class:`GemmTokenGain`'s curve;
    :func:`planner.kernel_floors.dense_gemm_lift`).

    ``by_engine``: engine name -> {``bf16`` | ``fp8`` | ``fp4`` -> share};
    ``analogy_mfu``: the MFU the GPU's analogy factors set
    (``planner.calibration.UNCALIBRATED_DEFAULTS``), which the measured rate is stated
    against, so that a fitted level or MFU scales the measured rate; ``source``: the
    kernel benchmark and its versions. Engines not listed take the least listed share."""

    analogy_mfu: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
    by_engine: dict[
        Id,
        dict[
            Literal["bf16", "fp8", "fp4"],
            Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)],
        ],
    ] = Field(min_length=1, max_length=16)
    source: Text = Field(min_length=10)
