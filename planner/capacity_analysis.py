"""``analyze capacity``: one replica's steady state, as users ask it.

:func:`capacity_analysis` builds the replica from the catalog (optionally with a
named calibration's factors, or explicit MFU/MBU/overhead) and calls
:func:`planner.capacity.replica_capacity`. The CLI renders the result as text or
JSON; ``POST /analyses/capacity`` serves the same model. Errors are
:class:`~planner.errors.PlanningError` naming the request field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from catalog.schema import MAX_CONTEXT_TOKENS, Catalog, Dtype, Provenance, SloMs
from planner import kernel_floors as kf
from planner import risk
from planner import roofline as rl
from planner.analyses import ReplicaSummary
from planner.capacity import (
    DEFAULT_TOKEN_BUDGET,
    Bound,
    CapacityResult,
    engine_max_batch,
    replica_capacity,
)
from planner.engines import DEFAULT_ENGINE, ENGINES
from planner.errors import PlanningError
from planner.request import MAX_RATE_RPS, CatalogRef

if TYPE_CHECKING:
    from planner.calibration import Calibration

#: Engines an analysis can price (planner.engines.ENGINES); the default is the plans' engine.
EngineName = Literal["vllm", "sglang", "trtllm"]
assert DEFAULT_ENGINE == "vllm" and set(get_args(EngineName)) == set(ENGINES)

Frac = Annotated[float, Field(strict=True, gt=0, le=1, allow_inf_nan=False)]


class CapacityRequest(BaseModel):
    """One replica and one request shape; the load is given by at most one of
    ``concurrency`` / ``request_rate_rps``, or by the SLOs (highest throughput
    meeting them), or by nothing (the maximum throughput)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: CatalogRef = Field(description="Catalog model id.")
    gpu: CatalogRef = Field(description="Catalog GPU id.")
    tp: Annotated[int, Field(strict=True, ge=1, le=1024)] = 1
    dtype: Dtype = Dtype.BF16
    kv_dtype: Dtype | None = Field(
        default=None, description="KV-cache dtype; default bf16 with bf16 weights, else fp8."
    )
    prompt_tokens: Annotated[int, Field(strict=True, ge=1, le=MAX_CONTEXT_TOKENS)]
    output_tokens: Annotated[int, Field(strict=True, ge=2, le=MAX_CONTEXT_TOKENS)]
    ttft_ms: SloMs | None = Field(default=None, description="SLO on the mean TTFT (ms).")
    tpot_ms: SloMs | None = Field(default=None, description="SLO on the mean TPOT (ms).")
    concurrency: Annotated[float, Field(strict=True, gt=0, le=1e9, allow_inf_nan=False)] | None = (
        Field(default=None, description="Users of a closed loop.")
    )
    request_rate_rps: (
        Annotated[float, Field(strict=True, gt=0, le=MAX_RATE_RPS, allow_inf_nan=False)] | None
    ) = Field(default=None, description="Open-loop arrival rate.")
    engine: EngineName = Field(
        default="vllm",
        description="The serving engine (planner/engines.py): its memory share, attention "
        "precision and KV admission (trtllm reserves each request's whole output at "
        "admission, GUARANTEED_NO_EVICT); vllm, as plans launch, by default.",
    )
    token_budget: Annotated[int, Field(strict=True, ge=2, le=1_048_576)] = DEFAULT_TOKEN_BUDGET
    max_batch: Annotated[int, Field(strict=True, ge=1, le=1_000_000)] | None = Field(
        default=None,
        description="The engine's max_num_seqs (default: the engine's own default, "
        "planner.engines.default_max_num_seqs: vLLM 1,024 on GPUs of 70 GiB or more other "
        "than A100, else 256; TensorRT-LLM 2,048; SGLang only the KV cache).",
    )
    mfu: Frac | None = None
    mbu: Frac | None = None
    step_overhead_ms: (
        Annotated[float, Field(strict=True, ge=0, le=1000, allow_inf_nan=False)] | None
    ) = None
    overlap_factor: Annotated[float, Field(strict=True, ge=0, le=1, allow_inf_nan=False)] | None = (
        None
    )
    calibration: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9][a-z0-9._\-]*$",
        max_length=64,
        description="A stored calibration whose factors the replica uses.",
    )


class FactorSpread(BaseModel):
    """Where the replica's efficiency factors come from and how far to trust them
    (planner.risk): provenance, measured points, ``sigma_log`` (standard deviation of
    ln(measured / predicted)), and the 90% bands of the predicted rates."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provenance: Provenance
    points: int
    sigma_log: float
    level_scale: float
    moe_level_ratio: float = 1.0
    fp4_level_ratio: float = 1.0
    dense_level_from: str | None = Field(
        default=None,
        description="For a dense LLM on a GPU measured on MoE LLMs only: the measured GPU "
        "its dense level is judged by, or 'self' (catalog efficiency.dense_level_from); "
        "None otherwise.",
    )
    band_confidence: float
    requests_per_s_band: tuple[float, float] | None
    output_tokens_per_s_band: tuple[float, float] | None


def factor_spread(catalog: Catalog, req: CapacityRequest, result: CapacityResult) -> FactorSpread:
    """The provenance and spread of ``req``'s GPU factors for its dtype
    (:func:`planner.risk.factor_uncertainty`; explicit MFU, MBU or overhead in the
    request count as analogy), the GPU's measured ratios that priced it (MoE LLMs:
    :func:`planner.roofline.moe_level_ratio` on the catalog's MFU and MBU, 1 when both
    are given; FP4 weights: ``efficiency.fp4_level_ratio``, 1 where the GPU has factors
    measured in FP4), for a dense LLM the GPU its dense level is judged by where it was
    measured on MoE LLMs only, and :func:`planner.risk.capacity_band_rps` applied
    to the predicted requests/s and output tokens/s."""
    overridden = req.mfu is not None or req.mbu is not None or req.step_overhead_ms is not None
    unc = risk.factor_uncertainty(catalog, req.gpu, req.dtype, overridden)
    gpu = catalog.gpus[req.gpu]
    moe = rl.moe_level_ratio(gpu, catalog.models[req.model])

    def band(x: float | None) -> tuple[float, float] | None:
        return risk.capacity_band_rps(x, unc.sigma_log) if x is not None else None

    return FactorSpread(
        provenance=unc.provenance,
        points=unc.points,
        sigma_log=unc.sigma_log,
        level_scale=unc.level_scale,
        moe_level_ratio=1.0 if req.mfu is not None and req.mbu is not None else moe,
        fp4_level_ratio=kf.fp4_level_ratio(gpu) if req.dtype == Dtype.FP4 else 1.0,
        dense_level_from=(
            None
            if overridden or catalog.models[req.model].is_moe
            else gpu.efficiency.dense_level_from
        ),
        band_confidence=risk.BAND_CONFIDENCE,
        requests_per_s_band=band(result.requests_per_s),
        output_tokens_per_s_band=band(result.output_tokens_per_s),
    )


class CapacityAnalysis(BaseModel):
    """The replica priced (factors in force) and its predicted steady state."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    replica: ReplicaSummary
    calibration: str | None
    result: CapacityResult
    factors: FactorSpread | None = None


def capacity_analysis(
    catalog: Catalog,
    req: CapacityRequest,
    calibrations: Callable[[str], Calibration] | None = None,
) -> CapacityAnalysis:
    """Price ``req``'s replica (catalog factors; a calibration's when named, found by
    ``calibrations`` or in the YAML store; explicit factors override both)."""
    if req.calibration is not None:
        from planner.service import calibrated_catalog

        catalog = calibrated_catalog(catalog, req.calibration, calibrations)
    try:
        replica, max_batch, result = _priced(catalog, req)
    except PlanningError as e:
        raise _with_fitting_engines(catalog, req, e) from e
    if req.max_batch is None and max_batch is not None and result.bound == Bound.MAX_BATCH:
        note = (
            f"the batch is {req.engine}'s default max_num_seqs of {max_batch:,} on this GPU "
            "(set max_batch to change it)"
        )
        result = result.model_copy(update={"notes": [*result.notes, note]})
    summary = ReplicaSummary.of(replica)
    fitted_to = summary.decode_sequence_max_batch
    if summary.decode_sequence_ms and fitted_to and result.batch > fitted_to:
        note = (
            f"{result.batch:,.0f} decoding sequences per step, past the {fitted_to:,} the "
            "per-sequence decode cost was fitted at: it is extrapolated linearly, which errs "
            "slow (on MI300X, AMD's throughput table at 1,500-3,200 sequences measures up to "
            "1.5x such predictions)"
        )
        result = result.model_copy(update={"notes": [*result.notes, note]})
    return CapacityAnalysis(
        replica=summary,
        calibration=req.calibration,
        result=result,
        factors=factor_spread(catalog, req, result),
    )


def _priced(
    catalog: Catalog, req: CapacityRequest
) -> tuple[rl.Replica, int | None, CapacityResult]:
    """``req``'s replica on its engine, the batch cap it runs at and its capacity."""
    kv = req.kv_dtype or (Dtype.BF16 if req.dtype == Dtype.BF16 else Dtype.FP8)
    replica = rl.build_replica(
        catalog,
        req.model,
        req.gpu,
        tp=req.tp,
        dtype=req.dtype,
        kv_dtype=kv,
        mfu=req.mfu,
        mbu=req.mbu,
        step_overhead_ms=req.step_overhead_ms,
        overlap_factor=req.overlap_factor,
        engine=req.engine,
    )
    max_batch = req.max_batch
    if max_batch is None:
        max_batch = engine_max_batch(replica)
    result = replica_capacity(
        replica,
        req.prompt_tokens,
        req.output_tokens,
        ttft_ms=req.ttft_ms,
        tpot_ms=req.tpot_ms,
        concurrency=req.concurrency,
        request_rate_rps=req.request_rate_rps,
        token_budget=req.token_budget,
        max_batch=max_batch,
    )
    return replica, max_batch, result


#: The fields a refusal for memory names (:class:`planner.errors.DoesNotFitError` on
#: ``tp``; one sequence's KV cache on ``prompt_tokens``, planner.capacity._check_shape):
#: what another engine's memory reserve and KV admission may change.
MEMORY_FIELDS = ("tp", "prompt_tokens")


def _with_fitting_engines(
    catalog: Catalog, req: CapacityRequest, error: PlanningError
) -> PlanningError:
    """``error`` (a refusal of ``req`` on its engine) with the engines the replica does
    fit on named, where it was refused for memory (:data:`MEMORY_FIELDS`): each engine
    keeps its own reserve and admits a sequence's KV differently
    (planner.engines), so a model TensorRT-LLM runs on one H100 may not fit under vLLM's
    defaults. The error itself otherwise, unchanged."""
    if not error.issues or error.issues[0][0] not in MEMORY_FIELDS:
        return error
    fits = []
    for name in ENGINES:
        if name == req.engine:
            continue
        try:
            _priced(catalog, req.model_copy(update={"engine": name}))
        except PlanningError:
            continue
        fits.append(name)
    if not fits:
        return error
    field, message = error.issues[0]
    hint = f"; it fits on {' and '.join(fits)} (set engine to {fits[0]}: memory reserves differ)"
    out = type(error).for_field(field, message + hint)
    out.issues = [(field, message + hint), *error.issues[1:]]
    return out


__all__ = [
    "CapacityAnalysis",
    "CapacityRequest",
    "FactorSpread",
    "capacity_analysis",
    "factor_spread",
]
