"""Typed catalog entries: GPUs, models, links and workloads.

Every entry is frozen and forbids unknown keys, so a typo in a YAML file is an
error that names the file and the field, never a silently ignored value.
Units are in the field names (``_tflops`` dense peak TFLOP/s, ``_gb`` decimal
gigabytes, ``_tbps`` terabytes per second, ``_gb_per_s`` gigabytes per second,
``_usd_per_hour`` US dollars per GPU-hour).

This module imports nothing of the project (catalog is a leaf package).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from catalog.checkpoints import (  # noqa: F401  (re-exported)
    Fp4Checkpoint,
    Fp4Format,
    MeasuredCheckpoint,
    WeightGroup,
    check_checkpoints,
    checkpoint_named,
)
from catalog.fields import (  # noqa: F401  (re-exported: the catalog's field types)
    MAX_CONTEXT_TOKENS,
    MAX_EXPERTS,
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_HOST_MEMORY_GB,
    MAX_LATENCY_US,
    MAX_LAYERS,
    MAX_LINK_GB_PER_S,
    MAX_MEM_BW_TBPS,
    MAX_MEMORY_GB,
    MAX_PARAMS_B,
    MAX_PURCHASE_USD,
    MAX_SLO_MS,
    MAX_TDP_W,
    MAX_TFLOPS,
    MAX_TOKENS,
    MAX_USD_PER_HOUR,
    MAX_VOCAB,
    MAX_WIDTH,
    Fraction,
    Frozen,
    HeadDim,
    Id,
    Name,
    NonNegFloat,
    ParamsB,
    PosFloat,
    ReportedMemory,
    SloMs,
    Sources,
    Text,
    Tflops,
    Tokens,
    UsdPerHour,
    Width,
    _printable_text,
    control_character,
    device_memory_bytes,
    no_control_characters,
)
from catalog.kernel_floors import (
    DecodeAttention,
    DecodeSequenceCost,
    Fp8GemmEfficiency,
    GemmPeakShare,
    GemmTokenGain,
    MlaLayerFloor,
    MoeLayerFloor,
)
from catalog.layers import Mla, Moe, MoeRouting, SlidingWindow  # noqa: F401  (re-exported)
from catalog.links import (  # noqa: F401  (re-exported)
    AllReduceKernel,
    AllToAllKernel,
    Link,
    LinkKind,
)
from catalog.uncertainty import (  # noqa: F401  (re-exported)
    ANALOGY_LEVEL_SCALE,
    ANALOGY_SIGMA_LOG,
    MAX_CATALOG_LEVEL_SCALE,
    MAX_OWN_LLM_CHECKS,
    OwnLlmCheck,
    Provenance,
    SigmaLog,
    Uncertainty,
)


class Dtype(StrEnum):
    """Numeric format of weights, activations or KV cache."""

    BF16 = "bf16"
    FP8 = "fp8"
    FP4 = "fp4"


DTYPE_BYTES: dict[Dtype, float] = {Dtype.BF16: 2.0, Dtype.FP8: 1.0, Dtype.FP4: 0.5}


# --------------------------------------------------------------------------- GPUs


class DtypeEfficiency(Uncertainty):
    """Efficiency factors for one weight dtype, overriding the SKU's defaults
    (a calibration fitted from measurements in that dtype), with their own
    provenance and spread (see :class:`Uncertainty`)."""

    prefill_mfu: Fraction
    decode_mbu: Fraction
    step_overhead_ms: NonNegFloat = Field(le=MAX_SLO_MS)
    reason: Text = Field(min_length=10)


class Efficiency(Uncertainty):
    """Default efficiency factors of a SKU with a mainstream serving engine.

    ``prefill_mfu``: achieved / peak dense FLOP/s in compute-bound prefill.
    ``decode_mbu``: achieved / peak HBM bandwidth in memory-bound decode.
    ``step_overhead_ms``: fixed per-step cost (scheduling, kernel launches).
    ``reason``: why these defaults (calibration source or analogy).
    ``provenance``, ``points``, ``sigma_log``: see :class:`Uncertainty` (default:
    analogy with the wide prior).
    ``by_dtype``: per weight dtype overrides (see :meth:`Gpu.efficiency_for`).
    ``moe_level_ratio``: measured level of the GPU's mixture-of-experts LLMs over its
    level (dimensionless, 0 < r <= 1; MFU and MBU x r for MoE models,
    :func:`planner.roofline.moe_level_ratio`): MI300X serves DeepSeek-V3 at about half
    the share of peak it serves dense Llamas at. 1: not measured, or no lower.
    ``fp4_level_ratio``: measured level of the GPU's FP4 runs over its level
    (dimensionless, 0 < r <= 2; the FP4 derates x r, the GEMM's capped at 1, the weight
    read's at the best-measured GPUs' share of peak bandwidth,
    :func:`planner.kernel_floors.weight_dtype_derates`). 1: not measured.
    Both are written by ``make calibrate-defaults`` (planner.fidelity.level_scale).
    ``dp_attention_level_ratio``: measured level of its data-parallel-attention runs over
    its factors' (0 < r <= 1; MFU and MBU x r at ``dp > 1``,
    :func:`planner.roofline.dp_level_ratio`; planner.fidelity.dp_attention_ratio).
    ``own_llm_ratio``: per LLM (catalog model id) the GPU was measured on, how its own
    runs compare with what these factors predict (:class:`OwnLlmCheck`, written by ``make
    calibrate-defaults``, planner.fidelity.own_llm_ratios). The factors rest on the median
    over the GPU's LLMs, so one LLM's runs may sit well below them: a plan warns where a
    pool runs such an LLM (planner.plan.assemble.own_llm_warnings). Informational: it
    prices nothing.
    """

    prefill_mfu: Fraction
    decode_mbu: Fraction
    step_overhead_ms: NonNegFloat = Field(default=0.0, le=MAX_SLO_MS)
    overlap_factor: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False, strict=True)] = 0.8
    reason: Text = Field(min_length=10)
    by_dtype: dict[Dtype, DtypeEfficiency] = Field(default_factory=dict)
    moe_level_ratio: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False, strict=True)] = 1.0
    fp4_level_ratio: Annotated[float, Field(gt=0, le=2, allow_inf_nan=False, strict=True)] = 1.0
    dp_attention_level_ratio: Annotated[
        float, Field(gt=0, le=1, allow_inf_nan=False, strict=True)
    ] = 1.0
    own_llm_ratio: dict[Id, OwnLlmCheck] = Field(
        default_factory=dict, max_length=MAX_OWN_LLM_CHECKS
    )
    dense_level_from: Id | None = Field(
        default=None,
        description="Set when the GPU was measured on mixture-of-experts LLMs only: the "
        "measured GPU its dense-LLM level is judged by (a sibling of its architecture, "
        "whose dense level it borrows, or its predecessor, whose level caps it), or "
        "'self' when none is measured and its MoE level stands for dense LLMs too. Written "
        "by make calibrate-defaults (scripts/calibration_levels.py); plans serving a dense "
        "LLM on it say so (planner.plan.assemble.borrowed_level_warnings). None: its level "
        "rests on dense-LLM runs, or it is set by analogy.",
    )


Month = Annotated[str, Field(pattern=r"^20[0-9]{2}-(0[1-9]|1[0-2])$")]


def _check_quoted_range(
    nominal: float, rng: tuple[float, float] | None, estimate: bool, field: str
) -> None:
    """An estimated price needs a range ``[low, high]`` holding its nominal value, and
    the nominal value no lower than the range's midpoint: an assumed price must not
    make a plan look better than a quoted one would (the plan's band shows the rest).
    A quoted price (``estimate: false``) may carry a range or not."""
    if rng is not None:
        if rng[0] > rng[1]:
            raise ValueError(f"{field}: low must not exceed high")
        if not rng[0] <= nominal <= rng[1]:
            raise ValueError(
                f"{field}: the nominal price {nominal:g} lies outside [{rng[0]:g}, {rng[1]:g}]"
            )
    if estimate:
        if rng is None:
            raise ValueError(f"{field}: an estimate (estimate: true) needs a range [low, high]")
        if nominal < (rng[0] + rng[1]) / 2 - 1e-9:
            raise ValueError(
                f"{field}: an estimated price must be at least the middle of its range "
                f"({(rng[0] + rng[1]) / 2:g}), so that a guess never looks cheaper than a quote"
            )


class ServerPurchase(Frozen):
    """What buying one server (the unit :class:`Server` describes: 8 GPUs in an HGX
    node, 72 in a GB200 NVL72 rack) costs, in US dollars, with where the figure comes
    from. ``networking_usd_per_server``: the scale-out network one server needs (NICs
    beyond those in the server price, its share of leaf/spine switches, optics and
    cables). ``sources``: URLs (or "estimate: ..." with the reasoning); ``date``: the
    month the figure was published or read (YYYY-MM)."""

    usd_per_server: PosFloat
    range_usd_per_server: tuple[PosFloat, PosFloat] | None = None
    networking_usd_per_server: NonNegFloat
    networking_range_usd_per_server: tuple[NonNegFloat, NonNegFloat] | None = None
    estimate: bool
    sources: Sources
    date: Month
    note: str = ""

    @model_validator(mode="after")
    def _ranges(self) -> ServerPurchase:
        _check_quoted_range(
            self.usd_per_server, self.range_usd_per_server, self.estimate, "range_usd_per_server"
        )
        _check_quoted_range(
            self.networking_usd_per_server,
            self.networking_range_usd_per_server,
            self.estimate,
            "networking_range_usd_per_server",
        )
        return self


class ReservedPrice(Frozen):
    """A committed rental price per GPU-hour (a 1- or 3-year reservation, paid for
    every hour of the term whether used or not), with its sources and date."""

    usd_per_hour: PosFloat
    range_usd_per_hour: tuple[PosFloat, PosFloat] | None = None
    estimate: bool
    sources: Sources
    date: Month
    note: str = ""

    @model_validator(mode="after")
    def _range(self) -> ReservedPrice:
        _check_quoted_range(
            self.usd_per_hour, self.range_usd_per_hour, self.estimate, "range_usd_per_hour"
        )
        return self


class Price(Frozen):
    """On-demand price per GPU-hour; ``estimate`` marks third-party estimates.

    ``purchase``: the price of the server the SKU is sold in (None: not sold to
    buy, e.g. a cloud-only part); ``reserved_1y`` / ``reserved_3y``: committed rental
    prices per GPU-hour (None: no such offer known)."""

    usd_per_hour: PosFloat = Field(le=MAX_USD_PER_HOUR)
    estimate: bool
    range_usd_per_hour: tuple[UsdPerHour, UsdPerHour] | None = None
    purchase_usd: PosFloat | None = Field(
        default=None,
        le=MAX_PURCHASE_USD,
        description="Capital cost per GPU (legacy; ``purchase`` prices whole servers and "
        "is preferred when both are set).",
    )
    purchase: ServerPurchase | None = None
    reserved_1y: ReservedPrice | None = None
    reserved_3y: ReservedPrice | None = None
    note: Text = ""

    @model_validator(mode="after")
    def _range_ordered(self) -> Price:
        if self.range_usd_per_hour and self.range_usd_per_hour[0] > self.range_usd_per_hour[1]:
            raise ValueError("range_usd_per_hour: low must not exceed high")
        return self


class PcieAllReduce(Frozen):
    """NCCL's all-reduce over PCIe in the servers a GPU was measured in, fitted to its
    published tensor-parallel runs: ``tp8_bus_gb_per_s``, the bus bandwidth at 8 GPUs
    (GB/s) at which the model's median measured / predicted throughput over
    ``points`` such runs (fit split) is 1 (``scripts/fit_pcie_allreduce.py``);
    ``source``: the runs and the fit."""

    tp8_bus_gb_per_s: PosFloat = Field(le=MAX_LINK_GB_PER_S)
    points: Annotated[int, Field(ge=1, strict=True)]
    source: Text = Field(min_length=10)


class Server(Frozen):
    """The node a SKU is bought in: GPUs per server, rack units, and server power."""

    gpus_per_server: Annotated[int, Field(ge=1, le=72, strict=True)]
    gpus_per_node: Annotated[int, Field(ge=1, le=72, strict=True)] | None = Field(
        default=None,
        description="GPUs per host (one OS instance, e.g. a GB200 NVL72 compute tray: 4) "
        "when the unit bought holds several; a replica with more GPUs is multi-node. "
        "Unset: gpus_per_server.",
    )
    rack_units: Annotated[int, Field(ge=1, le=64, strict=True)]
    server_overhead_w: NonNegFloat = Field(
        default=0.0,
        le=100 * MAX_TDP_W,
        description="Host power beyond the GPUs (CPUs, NICs, fans), watts per server.",
    )
    host_memory_gb: PosFloat | None = Field(
        default=None,
        le=MAX_HOST_MEMORY_GB,
        description="CPU memory (DRAM) of one server, GB: what a KV-cache host tier "
        "(LMCache, vLLM's native offloading, SGLang HiCache) can use. None: unknown.",
    )
    pcie_allreduce: PcieAllReduce | None = Field(
        default=None,
        description="All-reduce over PCIe fitted to this GPU's servers (GPUs whose "
        "tensor parallelism crosses PCIe); None: the conservative measured figure.",
    )


class Gpu(Frozen):
    """One accelerator SKU. TFLOP/s are dense (no 2:4 sparsity) peaks."""

    id: Id
    name: Name
    vendor: Name
    arch: Name
    bf16_dense_tflops: Tflops
    fp8_dense_tflops: Tflops | None = None
    fp4_dense_tflops: Tflops | None = None
    fp4_formats: list[Fp4Format] = Field(
        default_factory=list,
        max_length=4,
        description="Block-scaled FP4 formats the tensor cores run natively (Blackwell: "
        "nvfp4 and mxfp4); required when fp4_dense_tflops is set, empty otherwise.",
    )
    memory_gb: PosFloat = Field(le=MAX_MEMORY_GB)
    reported_memory: ReportedMemory | None = Field(
        default=None,
        description="Device memory as the driver reports it (MiB, with its source); None: "
        "memory_gb read as decimal GB (the nominal figure, never more than a device has).",
    )
    memory_type: Name
    mem_bw_tbps: PosFloat = Field(le=MAX_MEM_BW_TBPS)
    scale_up_link: Id | None = Field(
        default=None, description="Link id within the scale-up domain; None when PCIe only."
    )
    scale_up_domain_size: Annotated[int, Field(ge=1, le=576, strict=True)]
    predecessor: Id | None = Field(
        default=None,
        description="The same vendor's previous-generation GPU (catalog id) whose measured "
        "dense-LLM level this GPU's is judged by when this GPU is measured on MoE LLMs only "
        "and no GPU of its own architecture is measured on dense ones: its level relative to "
        "the predecessor on runs published for both carries the predecessor's level over "
        "(scripts/calibration_levels.py). None: only a sibling of its architecture is used.",
    )
    pcie_link: Id
    network_link: Id = Field(description="Typical scale-out NIC per GPU (link id).")
    tdp_w: PosFloat = Field(le=MAX_TDP_W)
    price: Price
    server: Server
    efficiency: Efficiency
    moe_layer_floor: MoeLayerFloor | None = Field(
        default=None, description="Measured MoE layer fixed cost per engine (us); None: assumed."
    )
    mla_layer_floor: MlaLayerFloor | None = Field(
        default=None, description="Measured MLA decode kernel floor per engine (us); None: assumed."
    )
    fp8_gemm: Fp8GemmEfficiency | None = Field(
        default=None, description="Measured FP8 GEMM share against BF16 per engine; None: assumed."
    )
    decode_attention: DecodeAttention | None = None  # measured kernel rate; None: the MBU only
    decode_sequence_cost: DecodeSequenceCost | None = None  # fitted; None: none beyond the KV
    gemm_token_gain: GemmTokenGain | None = None  # measured; None: the architecture's or 1
    gemm_peak_share: GemmPeakShare | None = None  # measured; None: the architecture's or none
    sources: Sources
    notes: Text = ""
    uncertain: list[Name] = Field(
        max_length=100,
        default_factory=list,
        description="Fields whose values are estimates or conflicting.",
    )

    @model_validator(mode="after")
    def _reported_memory(self) -> Gpu:
        if self.reported_memory is not None:
            ratio = device_memory_bytes(self.memory_gb, self.reported_memory) / (
                self.memory_gb * 1e9
            )
            if not 0.85 <= ratio <= 1.10:
                raise ValueError(
                    f"reported_memory.mib: {self.reported_memory.mib:g} MiB is "
                    f"{ratio:.2f} x memory_gb ({self.memory_gb:g} GB); a driver reports "
                    "0.85-1.10 of the nominal size (e.g. 81,559 MiB for an 80 GB H100)"
                )
        return self

    @model_validator(mode="after")
    def _fp4_formats(self) -> Gpu:
        if self.fp4_dense_tflops is not None and not self.fp4_formats:
            raise ValueError("fp4_formats: list the FP4 formats (nvfp4, mxfp4) the FP4 peak is for")
        if self.fp4_dense_tflops is None and self.fp4_formats:
            raise ValueError("fp4_formats needs fp4_dense_tflops (the FP4 peak)")
        return self

    def peak_tflops(self, dtype: Dtype) -> float | None:
        """Dense peak TFLOP/s for ``dtype`` (None when the SKU has no such tensor cores)."""
        if dtype == Dtype.BF16:
            return self.bf16_dense_tflops
        if dtype == Dtype.FP8:
            return self.fp8_dense_tflops
        if dtype == Dtype.FP4:
            return self.fp4_dense_tflops
        raise ValueError(f"unknown dtype {dtype!r}")

    def supported_dtypes(self) -> list[Dtype]:
        return [d for d in Dtype if self.peak_tflops(d) is not None]

    def efficiency_for(self, dtype: Dtype | str) -> Efficiency:
        """The efficiency factors for weights in ``dtype``: the SKU's defaults with the
        ``by_dtype`` override for that dtype, if any, applied (the override's
        provenance and spread too: they describe its own factors)."""
        override = self.efficiency.by_dtype.get(Dtype(dtype))
        if override is None:
            return self.efficiency
        return self.efficiency.model_copy(update=override.model_dump())


# --------------------------------------------------------------------------- models


class ReferenceFigures(Frozen):
    """Figures published for the model, to test the derived numbers against."""

    total_params_b: ParamsB
    active_params_b: ParamsB
    kv_bytes_per_token_bf16: PosFloat = Field(le=1e12)
    computed_total_params_b: ParamsB | None = None
    computed_active_params_b: ParamsB | None = None


class Model(Frozen):
    """A transformer's architecture, as in its config.json."""

    id: Id
    name: Name
    num_layers: Annotated[int, Field(ge=1, le=MAX_LAYERS, strict=True)]
    hidden_size: Width
    num_attention_heads: Annotated[int, Field(ge=1, le=MAX_HEADS, strict=True)]
    num_kv_heads: Annotated[int, Field(ge=1, le=MAX_HEADS, strict=True)]
    head_dim: HeadDim | None = Field(
        default=None, description="Per-head width; None for MLA models (see mla)."
    )
    intermediate_size: Width
    vocab_size: Annotated[int, Field(ge=1, le=MAX_VOCAB, strict=True)]
    max_context_tokens: Annotated[int, Field(ge=1, le=MAX_CONTEXT_TOKENS, strict=True)]
    hf_repo: Name | None = Field(
        default=None,
        max_length=200,
        description="Hugging Face repository engines load it from (used in launch commands).",
    )
    tie_word_embeddings: bool = False
    qkv_bias: bool = False
    attention_sinks: bool = False
    moe: Moe | None = None
    mla: Mla | None = None
    sliding_window: SlidingWindow | None = None
    weight_dtypes: list[Dtype] = Field(
        default_factory=lambda: [Dtype.BF16, Dtype.FP8],
        description="Weight formats the model is served in.",
    )
    fp4_checkpoints: list[Fp4Checkpoint] = Field(
        default_factory=list,
        max_length=len(Fp4Format),
        description="The published FP4 checkpoints, at most one per block format (required "
        "when weight_dtypes has fp4). A GPU runs the first of its fp4_formats the model has "
        "a checkpoint in. A single checkpoint may be given as fp4_checkpoint.",
    )
    measured_checkpoints: list[MeasuredCheckpoint] = Field(
        default_factory=list,
        max_length=8,
        description="Published checkpoints measurements ran that plans do not launch (their "
        "own BF16 layers, FP4 format, weights): measurements name them as checkpoint.",
    )
    mtp_modules: Annotated[int, Field(ge=0, le=8)] = Field(
        default=0,
        description="Multi-token-prediction modules shipped with the weights (DeepSeek-V3: "
        "1, config num_nextn_predict_layers); speculative method mtp needs at least one.",
    )
    eagle3_draft_repo: str | None = Field(
        default=None,
        max_length=200,
        description="A published EAGLE-3 draft head for this model (Hugging Face repository).",
    )
    reference: ReferenceFigures
    sources: Sources
    notes: Text = ""

    @model_validator(mode="before")
    @classmethod
    def _one_fp4_checkpoint(cls, data: Any) -> Any:
        """``fp4_checkpoint: {...}`` (one checkpoint) is read as ``fp4_checkpoints: [...]``."""
        if isinstance(data, dict) and "fp4_checkpoint" in data:
            if "fp4_checkpoints" in data:
                raise ValueError("give fp4_checkpoints or fp4_checkpoint, not both")
            data = dict(data)
            one = data.pop("fp4_checkpoint")
            data["fp4_checkpoints"] = [] if one is None else [one]
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Model:
        if self.mla is None and self.head_dim is None:
            raise ValueError("head_dim is required unless the model uses MLA")
        if self.num_attention_heads % self.num_kv_heads:
            raise ValueError("num_attention_heads must be a multiple of num_kv_heads")
        if self.sliding_window and self.sliding_window.windowed_layers > self.num_layers:
            raise ValueError("sliding_window.windowed_layers exceeds num_layers")
        if self.moe and self.moe.first_dense_layers > self.num_layers:
            raise ValueError("moe.first_dense_layers exceeds num_layers")
        if Dtype.FP4 in self.weight_dtypes and not self.fp4_checkpoints:
            raise ValueError(
                "weight_dtypes lists fp4 but fp4_checkpoints (the published FP4 checkpoints' "
                "repo and format) is not given"
            )
        if self.fp4_checkpoints and Dtype.FP4 not in self.weight_dtypes:
            raise ValueError("fp4_checkpoints is given but weight_dtypes does not list fp4")
        formats = [c.format for c in self.fp4_checkpoints]
        for fmt in set(formats):
            if formats.count(fmt) > 1:
                raise ValueError(
                    f"fp4_checkpoints: {formats.count(fmt)} checkpoints in {fmt.value}; give "
                    "at most one per format (the one a GPU running it loads)"
                )
        check_checkpoints(
            self.fp4_checkpoints, self.measured_checkpoints, self.weight_dtypes, self.moe
        )
        return self

    def measured_checkpoint(self, repo: str) -> MeasuredCheckpoint:
        """The checkpoint ``repo`` a measurement ran: one plans load (``fp4_checkpoints``)
        or a ``measured_checkpoints`` entry; ValueError naming the known ones."""
        return checkpoint_named(self.id, repo, self.fp4_checkpoints, self.measured_checkpoints)

    def fp4_checkpoint_for(self, formats: Sequence[Fp4Format]) -> Fp4Checkpoint | None:
        """The FP4 checkpoint a GPU running the block ``formats`` (its ``fp4_formats``, in
        its order of preference) loads: the first of them the model has a checkpoint in,
        or None."""
        by_format = {c.format: c for c in self.fp4_checkpoints}
        return next((by_format[f] for f in formats if f in by_format), None)

    @property
    def is_moe(self) -> bool:
        return self.moe is not None


# --------------------------------------------------------------------------- workloads

Z90 = 1.2815515655446004  # standard normal 90th percentile


class LengthDist(Frozen):
    """A log-normal token-length distribution given by its mean and p90.

    sigma solves ln(p90/mean) = z90*sigma - sigma^2/2 (smaller root);
    mu = ln(mean) - sigma^2/2. Requires 1 < p90/mean <= exp(z90^2/2) ~ 2.27.
    """

    mean_tokens: Tokens
    p90_tokens: Tokens

    @model_validator(mode="after")
    def _fits_lognormal(self) -> LengthDist:
        ratio = self.p90_tokens / self.mean_tokens
        if ratio <= 1.0:
            raise ValueError("p90_tokens must exceed mean_tokens for a log-normal")
        if math.log(ratio) > Z90**2 / 2:
            raise ValueError(
                f"p90_tokens/mean_tokens = {ratio:.2f} exceeds {math.exp(Z90**2 / 2):.2f}, "
                "the largest a log-normal allows"
            )
        return self

    @property
    def sigma(self) -> float:
        """Log-normal shape sigma (dimensionless)."""
        c = math.log(self.p90_tokens / self.mean_tokens)
        return Z90 - math.sqrt(Z90 * Z90 - 2.0 * c)

    @property
    def mu(self) -> float:
        """Log-normal location mu (log tokens)."""
        return math.log(self.mean_tokens) - self.sigma**2 / 2

    def quantile_tokens(self, q: float) -> float:
        """Tokens at quantile ``q`` in (0, 1): exp(mu + sigma * Phi^-1(q))."""
        from statistics import NormalDist

        return math.exp(self.mu + self.sigma * NormalDist().inv_cdf(q))


class Slo(Frozen):
    """Latency objectives at a percentile: TTFT (first token) and TPOT (per output token)."""

    ttft_ms: SloMs
    tpot_ms: SloMs
    percentile: Annotated[float, Field(ge=50, le=99.9, allow_inf_nan=False, strict=True)] = 90.0


class Sessions(Frozen):
    """How a class's requests come in conversations (agent loops, chats): each session
    sends ``turns`` requests, and between two turns it is idle for ``think_time_s``
    on average (a tool running, a person reading). Its prefix hits need its context
    kept in the KV cache while it is idle (:mod:`planner.candidates.sessions`)."""

    think_time_s: Annotated[float, Field(gt=0, le=86_400, allow_inf_nan=False, strict=True)] = (
        Field(description="Mean idle time between a session's turns, seconds (exponential).")
    )
    turns: Annotated[float, Field(ge=1, le=100_000, allow_inf_nan=False, strict=True)] = Field(
        description="Mean requests per session (1: no follow-up turn, nothing kept)."
    )


class Workload(Frozen):
    """A traffic class: prompt and output length distributions, prefix reuse, SLOs."""

    id: Id
    name: Name
    description: Text
    prompt_tokens: LengthDist
    output_tokens: LengthDist
    prefix_hit_rate: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False, strict=True)] = Field(
        description="Share of prompt tokens already in the prefix cache (not recomputed)."
    )
    sessions: Sessions | None = Field(
        default=None,
        description="Session shape behind the prefix hits (None: hits on shared prefixes, "
        "such as a common system prompt, that need no per-session memory).",
    )
    slo: Slo
    sources: Sources
    notes: Text = ""


Kind = Literal["gpus", "models", "workloads", "links"]


class Catalog(Frozen):
    """The whole catalog, keyed by id, with a content hash of its entries."""

    gpus: dict[str, Gpu]
    models: dict[str, Model]
    workloads: dict[str, Workload]
    links: dict[str, Link]
    content_hash: str

    @field_validator("gpus", "models", "workloads", "links")
    @classmethod
    def _non_empty(cls, v: dict) -> dict:
        return v
