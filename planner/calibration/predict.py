"""The cost model's prediction of a measured point (:func:`predict`): the replica it ran
on, with the catalog's factors or given ones, priced by
:func:`planner.capacity.replica_capacity` (serving runs) or :func:`kernel_layer_ms`
(kernel timings); errors as APE.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from catalog.schema import Catalog, Dtype
from planner import architecture as arch
from planner import engines
from planner import roofline as rl
from planner.calibration.disagg import disaggregated_closed_loop
from planner.calibration.measurements import Measurement, MeasurementKind
from planner.capacity import DEFAULT_TOKEN_BUDGET, engine_max_batch, replica_capacity


def _kv_dtype(m: Measurement) -> Dtype:
    """The KV-cache format a measurement ran with: its ``kv_dtype`` when stated; else
    bf16 for bf16 weights, and for FP8/FP4 weights the engine's default: vLLM and
    SGLang keep ``kv_cache_dtype="auto"`` (the activation dtype, bf16) unless told,
    TensorRT-LLM's quantized checkpoints ship an FP8 cache."""
    if m.kv_dtype is not None:
        return m.kv_dtype
    if m.dtype == Dtype.BF16:
        return Dtype.BF16
    return Dtype.FP8 if measurement_engine(m) == "trtllm" else Dtype.BF16


def measurement_engine(m: Measurement) -> str:
    """The engine profile a measurement ran on (:mod:`planner.engines`): its ``engine``
    field's name (``vllm``, ``sglang``, ``trtllm`` and aliases; a version or a framework
    string containing one of them counts; NVIDIA NIM's optimized profiles run
    TensorRT-LLM), else the default engine."""
    name = (m.engine or "").lower()
    for key, aliases in (
        ("trtllm", ("trtllm", "tensorrt", "trt-llm", "nim")),
        ("sglang", ("sglang",)),
        ("vllm", ("vllm",)),
    ):
        if any(a in name for a in aliases):
            return key
    return engines.DEFAULT_ENGINE


def base_replica(m: Measurement, catalog: Catalog) -> rl.Replica:
    """The replica a measurement ran on (a disaggregated run's decode workers), with the
    catalog's factors and the memory and attention precision of the engine it ran on
    (:func:`measurement_engine`)."""
    return _worker(m, catalog, m.tp, m.ep, m.dp_attention, pp=m.pp or 1)


def _worker(
    m: Measurement, catalog: Catalog, tp: int, ep: int | None, dp_attention: bool | None, pp: int
) -> rl.Replica:
    """``m``'s model on ``m``'s GPU at ``tp``/``ep``/``pp`` (DP attention: ``dp = tp``),
    in its dtypes and on its engine, with the memory share and the FP8 checkpoint the run
    stated (else the engine's, and FP8 quantized on load)."""
    return rl.build_replica(
        catalog,
        m.model,
        m.gpu,
        tp=tp,
        dtype=m.dtype,
        kv_dtype=_kv_dtype(m),
        engine=measurement_engine(m),
        pp=pp,
        ep=ep or 1,
        dp=tp if dp_attention else 1,
        memory_utilization=m.memory_utilization,
        checkpoint=m.checkpoint,
    )


def prefill_replica(m: Measurement, catalog: Catalog) -> rl.Replica | None:
    """A disaggregated run's prefill worker (``prefill_tp``, ``prefill_ep``,
    ``prefill_dp_attention``; else as :func:`base_replica`); None for other runs."""
    if not m.disaggregated:
        return None
    assert m.prefill_tp is not None
    return _worker(m, catalog, m.prefill_tp, m.prefill_ep, m.prefill_dp_attention, pp=1)


def with_measured_ratios(catalog: Catalog, ratios: Mapping[str, tuple[float, ...]]) -> Catalog:
    """``catalog`` with each GPU's measured ratios (``efficiency.moe_level_ratio``,
    ``fp4_level_ratio``, ``dp_attention_level_ratio``) set to ``ratios[gpu]`` (MoE, FP4
    and, when given, data-parallel attention; else 1), and at 1 for every GPU not in
    ``ratios``."""
    gpus = {}
    for g, gpu in catalog.gpus.items():
        moe, fp4, dp = (*ratios.get(g, (1.0, 1.0)), 1.0)[:3]
        eff = gpu.efficiency.model_copy(
            update={"moe_level_ratio": moe, "fp4_level_ratio": fp4, "dp_attention_level_ratio": dp}
        )
        gpus[g] = gpu.model_copy(update={"efficiency": eff})
    return catalog.model_copy(update={"gpus": gpus})


def unscaled_catalog(catalog: Catalog) -> Catalog:
    """``catalog`` with every GPU's measured ratios at 1 (:func:`with_measured_ratios`):
    the model as the factors alone price it, which the public levels and ratios, and a
    user's calibration, are fitted against."""
    return with_measured_ratios(catalog, {})


def with_factors(replica: rl.Replica, factors: Sequence[float]) -> rl.Replica:
    """``replica`` priced with a GPU's ``factors`` (prefill MFU, decode MBU, step
    overhead ms), as :func:`planner.roofline.build_replica` prices the catalog's: MFU and
    MBU x :func:`planner.roofline.moe_level_ratio` for an MoE model and x
    :func:`planner.roofline.dp_level_ratio` with data-parallel attention."""
    mfu, mbu, overhead = factors
    r = rl.moe_level_ratio(replica.gpu, replica.model) * rl.dp_level_ratio(replica.gpu, replica.dp)
    return dataclasses.replace(
        replica,
        prefill_mfu=float(mfu) * r,
        decode_mbu=float(mbu) * r,
        step_overhead_ms=float(overhead),
    )


def kernel_layer_ms(replica: rl.Replica, tokens: float) -> float:
    """One transformer layer's linear layers (QKV, O, MLP) on ``tokens`` tokens, per GPU
    shard (ms): ``max(tokens x 2 x params / (F_eff x g), bytes / W_eff)`` with
    ``params`` the layer's attention-projection and MLP parameters (dense models),
    ``bytes`` theirs as the checkpoint holds them
    (:func:`planner.architecture.layer_linear_bytes`) and ``g`` the GPU's measured GEMM
    rate gain at ``tokens`` tokens
    (:func:`planner.kernels.gain_at_tokens`), as the cost model's steps price them: the
    params a quantized checkpoint keeps in BF16
    (:func:`planner.architecture.layer_bf16_gemm_param_count`) at ``rho`` x a weight-dtype
    FLOP's time and the BF16 gain (:meth:`planner.kernels.StepCoefficients.bf16_gemm_per_ms`)."""
    model, c = replica.model, replica.coefficients
    params = arch.attention_param_count_per_layer(model) + arch.dense_mlp_param_count(model)
    wide = arch.layer_bf16_gemm_param_count(model, replica.bf16_layers)  # none in BF16 weights
    # FLOP/ms rates: the step's dense GEMM rate x the gain, and the BF16 GEMMs' (ms -> s)
    per_token = (params - wide) / c.dense_gemm_per_ms(tokens) + wide / c.bf16_gemm_per_ms(tokens)
    compute = tokens * 2.0 * per_token / 1e3
    layer_bytes = arch.layer_linear_bytes(*replica.weight_layout)
    memory = layer_bytes / rl.effective_bandwidth_bytes_per_s(replica)
    return max(compute, memory) * 1e3


class Prediction(BaseModel):
    model_config = ConfigDict(frozen=True)

    output_tok_s: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    layer_ms: float | None = None

    def get(self, name: str) -> float | None:
        return getattr(self, name)


def predict_with(
    m: Measurement, replica: rl.Replica, prefill: rl.Replica | None = None
) -> Prediction:
    """The cost model's prediction of ``m`` on ``replica`` (its factors as they are);
    a disaggregated run on ``prefill`` workers and ``replica`` decode workers
    (:func:`planner.calibration.disagg.disaggregated_closed_loop`)."""
    if m.disaggregated:
        assert prefill is not None and m.concurrency is not None
        assert m.prefill_workers is not None and m.decode_workers is not None
        assert m.isl is not None and m.osl is not None
        pt = disaggregated_closed_loop(
            prefill,
            replica,
            prefill_workers=m.prefill_workers,
            decode_workers=m.decode_workers,
            isl=m.isl,
            osl=m.osl,
            concurrency=m.concurrency,
            ttft_ms=m.ttft_ms,  # measured: the decode workers alone are checked
        )
        return Prediction(output_tok_s=pt.output_tok_s, tpot_ms=pt.tpot_ms)
    if m.kind == MeasurementKind.KERNEL:
        assert m.tokens is not None
        return Prediction(layer_ms=kernel_layer_ms(replica, m.tokens))
    assert m.isl is not None and m.osl is not None
    budget = m.token_budget or DEFAULT_TOKEN_BUDGET
    max_batch = m.max_batch if m.max_batch is not None else engine_max_batch(replica)
    if m.concurrency is not None:
        res = replica_capacity(
            replica,
            m.isl,
            m.osl,
            concurrency=m.concurrency,
            token_budget=budget,
            max_batch=max_batch,
        )
        return Prediction(
            output_tok_s=res.output_tokens_per_s, ttft_ms=res.ttft_ms, tpot_ms=res.tpot_ms
        )
    rate = m.request_rate_rps if m.request_rate_rps is not None else math.inf
    if m.num_requests is not None:
        # A run of N requests never holds more than N at once: the most it can carry is
        # a closed loop of N users. Beyond that rate it runs at that loop's point (TTFT
        # then measures the queue, not predicted); below it, the run lasts N / rate plus
        # the last request's own latency.
        full = replica_capacity(
            replica,
            m.isl,
            m.osl,
            concurrency=m.num_requests,
            token_budget=budget,
            max_batch=max_batch,
        )
        if rate >= full.requests_per_s:
            return Prediction(output_tok_s=full.output_tokens_per_s, tpot_ms=full.tpot_ms)
    res = replica_capacity(
        replica, m.isl, m.osl, request_rate_rps=rate, token_budget=budget, max_batch=max_batch
    )
    out = res.output_tokens_per_s
    if m.num_requests is not None:
        latency_s = (res.prefill_ms + (m.osl - 1) * res.tpot_ms) / 1e3
        out = m.num_requests * m.osl / (m.num_requests / res.requests_per_s + latency_s)
    offline = m.request_rate_rps is None
    return Prediction(
        output_tok_s=out, ttft_ms=None if offline else res.ttft_ms, tpot_ms=res.tpot_ms
    )


def predict(m: Measurement, catalog: Catalog, factors: Sequence[float] | None = None) -> Prediction:
    """The prediction of ``m`` with the catalog's factors, or with ``factors``
    (prefill MFU, decode MBU, step overhead ms)."""
    replica, prefill = base_replica(m, catalog), prefill_replica(m, catalog)
    if factors is not None:
        replica = with_factors(replica, factors)
        prefill = None if prefill is None else with_factors(prefill, factors)
    return predict_with(m, replica, prefill)


def ape(predicted: float | None, measured: float) -> float | None:
    """Absolute percentage error ``|predicted / measured - 1|`` (None when not predicted)."""
    if predicted is None:
        return None
    return abs(predicted / measured - 1.0)
