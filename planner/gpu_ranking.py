"""Every catalog GPU on one workload: what the cost model predicts each delivers per GPU,
relative to the reference GPU, with what its factors rest on.

The planner buys what it rates highly, so the ratio between GPU types is the number a
purchase turns on (a GPU rated 30% too high relative to H100 wins every plan it should
lose). :func:`gpu_ranking` prices one workload on every catalog GPU, each at its best
configuration, and puts the GPUs side by side with the provenance and spread of their
factors (:func:`planner.risk.factor_uncertainty`) and, for a GPU measured on MoE LLMs only,
the GPU its dense level is borrowed from (``efficiency.dense_level_from``). The default
workload is MLPerf Inference's Llama-2-70B offline shape (mean prompt 222 tokens, 293
generated, every prompt queued), the workload on which GPU types are most often compared
in public; ``bench/fidelity.py`` prints the table beside the measured ratios it has
(``planner.fidelity.cross_vendor_ratios``). Predictions only: nothing here is measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from catalog.schema import MAX_CONTEXT_TOKENS, Catalog, Dtype, Provenance
from planner import risk
from planner import roofline as rl
from planner.capacity import engine_max_batch, replica_capacity
from planner.errors import PlanningError, UnknownEntryError
from planner.request import CatalogRef
from planner.request_checks import check_context_window

#: The workload every GPU is priced on: MLPerf Inference's Llama-2-70B (OpenOrca: mean
#: prompt 222 tokens, 293 generated per sample; the importer's MLPerf offline points).
RANKING_MODEL = "llama-2-70b"
RANKING_PROMPT_TOKENS = 222
RANKING_OUTPUT_TOKENS = 293
#: Tensor parallel degrees tried per GPU (one replica's GPUs; each must hold the model).
RANKING_TPS = (1, 2, 4, 8)
#: Weight dtypes tried, where the GPU has a peak for them (FP4 and FP8 with an FP8 KV
#: cache, BF16 with a BF16 one).
RANKING_DTYPES = (Dtype.FP4, Dtype.FP8, Dtype.BF16)
#: The GPU the others are compared with.
RANKING_REFERENCE = "h100-sxm5-80gb"


class GpuRank(BaseModel):
    """One GPU's best predicted configuration on the ranking workload.

    ``output_tokens_per_s_per_gpu``: the replica's maximum output tokens/s (every prompt
    queued, :func:`planner.capacity.replica_capacity`) over its ``tp`` GPUs;
    ``relative``: that over the reference GPU's (dimensionless; None without a reference);
    ``provenance``/``sigma_log``: what the factors of that dtype rest on
    (:func:`planner.risk.factor_uncertainty`); ``band_output_tokens_per_s_per_gpu``: the
    tokens/s per GPU at the ends of the factors' 90% band
    (:func:`planner.risk.capacity_band_rps`: ``x exp(-+1.645 sigma_log)``);
    ``dense_level_from``: for a dense LLM on a GPU measured on MoE LLMs only, the GPU its
    dense level is judged by."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu: str
    output_tokens_per_s_per_gpu: float
    tp: int
    dtype: Dtype
    engine: Literal["trtllm", "vllm"]
    provenance: Provenance
    sigma_log: float
    band_output_tokens_per_s_per_gpu: tuple[float, float]
    relative: float | None = None
    dense_level_from: str | None = None


def ranking_engine(catalog: Catalog, gpu_id: str) -> Literal["trtllm", "vllm"]:
    """The engine a GPU is priced with: TensorRT-LLM on NVIDIA GPUs (the vendor's engine,
    what MLPerf submissions run), vLLM on the others (AMD's and Intel's submissions)."""
    return "trtllm" if catalog.gpus[gpu_id].vendor.strip().casefold() == "nvidia" else "vllm"


def borrowed_dense_level_from(catalog: Catalog, gpu_id: str, model: str) -> str | None:
    """The GPU whose measured level a dense ``model`` on ``gpu_id`` is judged by
    (``efficiency.dense_level_from``), None for a MoE model, for a GPU measured on a
    dense LLM, and for ``"self"`` (measured on MoE LLMs only, judged by no other GPU)."""
    if catalog.models[model].is_moe:
        return None
    source = catalog.gpus[gpu_id].efficiency.dense_level_from
    return None if source in (None, "self") else source


def best_capacity(
    catalog: Catalog,
    gpu_id: str,
    model: str = RANKING_MODEL,
    prompt_tokens: int = RANKING_PROMPT_TOKENS,
    output_tokens: int = RANKING_OUTPUT_TOKENS,
    tps: Sequence[int] = RANKING_TPS,
    dtypes: Sequence[Dtype] = RANKING_DTYPES,
) -> GpuRank | None:
    """The configuration (tp in ``tps``, weight dtype in ``dtypes``) with the highest
    predicted output tokens/s per GPU of ``model`` on ``gpu_id`` at ``prompt_tokens`` /
    ``output_tokens`` with every prompt queued, on :func:`ranking_engine` at its default
    batch limit (:func:`planner.capacity.engine_max_batch`); the KV cache in FP8 with
    FP8 or FP4 weights, BF16 with BF16 ones. Configurations that do not fit or that the
    GPU cannot run (no peak for the dtype) are skipped; None when none runs. Ties keep
    the first (smaller tp, FP4 before FP8 before BF16)."""
    engine = ranking_engine(catalog, gpu_id)
    best: tuple[float, int, Dtype] | None = None  # (tokens/s per GPU, tp, dtype)
    for dtype in dtypes:
        for tp in tps:
            try:
                replica = rl.build_replica(
                    catalog,
                    model,
                    gpu_id,
                    tp=tp,
                    dtype=dtype,
                    kv_dtype=Dtype.BF16 if dtype == Dtype.BF16 else Dtype.FP8,
                    engine=engine,
                )
                result = replica_capacity(
                    replica, prompt_tokens, output_tokens, max_batch=engine_max_batch(replica)
                )
            except PlanningError:
                continue
            per_gpu = result.output_tokens_per_s / tp
            if best is None or per_gpu > best[0]:
                best = (per_gpu, tp, Dtype(dtype))
    if best is None:
        return None
    per_gpu, tp, dtype = best
    unc = risk.factor_uncertainty(catalog, gpu_id, dtype)
    return GpuRank(
        gpu=gpu_id,
        output_tokens_per_s_per_gpu=per_gpu,
        tp=tp,
        dtype=dtype,
        engine=engine,
        provenance=unc.provenance,
        sigma_log=unc.sigma_log,
        band_output_tokens_per_s_per_gpu=risk.capacity_band_rps(per_gpu, unc.sigma_log),
        dense_level_from=borrowed_dense_level_from(catalog, gpu_id, model),
    )


def gpu_ranking(
    catalog: Catalog,
    reference: str = RANKING_REFERENCE,
    model: str = RANKING_MODEL,
    prompt_tokens: int = RANKING_PROMPT_TOKENS,
    output_tokens: int = RANKING_OUTPUT_TOKENS,
    dtypes: Sequence[Dtype] = RANKING_DTYPES,
) -> list[GpuRank]:
    """:func:`best_capacity` of every catalog GPU that runs ``model`` in one of
    ``dtypes``, fastest per GPU first, each with ``relative`` = its tokens/s per GPU over
    ``reference``'s (None for all when the reference cannot run it)."""
    ranks = [
        r
        for g in sorted(catalog.gpus)
        if (r := best_capacity(catalog, g, model, prompt_tokens, output_tokens, dtypes=dtypes))
        is not None
    ]
    ref = next((r for r in ranks if r.gpu == reference), None)
    if ref is not None:
        base = ref.output_tokens_per_s_per_gpu
        ranks = [
            r.model_copy(update={"relative": r.output_tokens_per_s_per_gpu / base}) for r in ranks
        ]
    return sorted(ranks, key=lambda r: -r.output_tokens_per_s_per_gpu)


class GpuRankingRequest(BaseModel):
    """The workload every catalog GPU is priced on (:func:`gpu_ranking_analysis`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: CatalogRef = Field(default=RANKING_MODEL, description="Catalog model id.")
    prompt_tokens: Annotated[int, Field(strict=True, ge=1, le=MAX_CONTEXT_TOKENS)] = (
        RANKING_PROMPT_TOKENS
    )
    output_tokens: Annotated[int, Field(strict=True, ge=2, le=MAX_CONTEXT_TOKENS)] = (
        RANKING_OUTPUT_TOKENS
    )
    reference: CatalogRef = Field(
        default=RANKING_REFERENCE, description="Catalog GPU id the others are compared with."
    )
    dtype: Dtype | None = Field(
        default=None,
        description="Weight format every GPU is ranked in (fp4, fp8 or bf16), like for like; "
        "default: each GPU at its best of the three. A GPU without a peak in it cannot run.",
    )


class GpuRanking(BaseModel):
    """Every catalog GPU that runs the workload, fastest per GPU first
    (:func:`gpu_ranking`), and the GPUs that cannot run it in any tried configuration."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    prompt_tokens: int
    output_tokens: int
    reference: str
    dtype: Dtype | None = None
    gpus: list[GpuRank]
    cannot_run: list[str]
    note: str


#: What every ranking says about itself.
RANKING_NOTE = (
    "Predictions of the cost model, each GPU at its best tensor parallelism (1-8) and "
    "weight format (FP4 and FP8 with an FP8 KV cache where the GPU has the peak, BF16; "
    "or in the one format asked for), "
    "every prompt queued (maximum throughput), TensorRT-LLM on NVIDIA GPUs and vLLM on the "
    "others. One replica of at most 8 GPUs, no expert, pipeline or data-parallel attention "
    "layouts: a model that needs more than one server (DeepSeek-V3 on H100) shows as unable "
    "to run or as nearly so (a KV cache of a few sequences); plans consider those layouts. "
    "'provenance' ('factors' in the table) and 'sigma_log' say what each GPU's numbers "
    "rest on (analogy: no measurement in that format), and the band is the 90% band those "
    "factors' spread gives each GPU's tokens/s; 'dense_level_from' names the GPU a dense "
    "LLM's level is borrowed from where the GPU was measured on MoE LLMs only."
)


def gpu_ranking_analysis(catalog: Catalog, req: GpuRankingRequest) -> GpuRanking:
    """:func:`gpu_ranking` for ``req``'s workload against ``req.reference`` on
    ``catalog`` (the shipped one, or with custom entries); an unknown model or reference
    GPU is refused naming the field (:class:`planner.errors.UnknownEntryError`)."""
    if req.model not in catalog.models:
        raise UnknownEntryError.for_field(
            "model", f"unknown model {req.model!r} (fleetplan catalog list models)"
        )
    if req.reference not in catalog.gpus:
        raise UnknownEntryError.for_field(
            "reference", f"unknown GPU {req.reference!r} (fleetplan catalog list gpus)"
        )
    check_context_window(catalog.models[req.model], req.prompt_tokens, req.output_tokens)
    dtypes = (req.dtype,) if req.dtype is not None else RANKING_DTYPES
    ranks = gpu_ranking(
        catalog, req.reference, req.model, req.prompt_tokens, req.output_tokens, dtypes
    )
    ran = {r.gpu for r in ranks}
    if req.reference not in ran:
        formats = " / ".join(d.value.upper() for d in dtypes)
        raise PlanningError.for_field(
            "reference",
            f"{req.reference} cannot run {req.model} at {req.prompt_tokens:,} / "
            f"{req.output_tokens:,} tokens in any tried configuration (tp 1-8, {formats}): "
            "choose a reference GPU that can",
        )
    return GpuRanking(
        model=req.model,
        prompt_tokens=req.prompt_tokens,
        output_tokens=req.output_tokens,
        reference=req.reference,
        dtype=req.dtype,
        gpus=ranks,
        cannot_run=sorted(g for g in catalog.gpus if g not in ran),
        note=RANKING_NOTE,
    )


def ranking_table(ranks: Sequence[GpuRank], reference: str = RANKING_REFERENCE) -> list[list[str]]:
    """Header and rows for :func:`gpu_ranking`'s result: the GPU, its best configuration,
    output tokens/s per GPU, the ratio to ``reference``, the factors' provenance and
    spread, and the GPU a borrowed dense level comes from."""
    head = [
        "gpu",
        "tp",
        "dtype",
        "engine",
        "output tok/s per GPU",
        f"{risk.BAND_CONFIDENCE:.0%} band",
        f"x {reference}",
        "factors",
        "sigma_log",
        "dense level from",
    ]
    body = [
        [
            r.gpu,
            str(r.tp),
            r.dtype.value,
            r.engine,
            f"{r.output_tokens_per_s_per_gpu:,.0f}",
            "{:,.0f}-{:,.0f}".format(*r.band_output_tokens_per_s_per_gpu),
            "-" if r.relative is None else f"{r.relative:.2f}",
            r.provenance.value,
            f"{r.sigma_log:.2f}",
            r.dense_level_from or "-",
        ]
        for r in ranks
    ]
    return [head, *body]


__all__ = [
    "RANKING_DTYPES",
    "RANKING_MODEL",
    "RANKING_NOTE",
    "RANKING_OUTPUT_TOKENS",
    "RANKING_PROMPT_TOKENS",
    "RANKING_REFERENCE",
    "RANKING_TPS",
    "GpuRank",
    "GpuRanking",
    "GpuRankingRequest",
    "best_capacity",
    "borrowed_dense_level_from",
    "gpu_ranking",
    "gpu_ranking_analysis",
    "ranking_engine",
    "ranking_table",
]
