"""The cost model's measured kernel floors and efficiencies per GPU and engine (split
from :mod:`planner.kernels`, which re-exports them): what a MoE layer and an MLA decode
attention kernel cost beyond their roofline, how fast grouped expert GEMMs read
weights, and how much of the FP8 peak FP8 weight GEMMs reach. Measured where the GPU's
catalog entry has them (aiconfigurator's kernel database,
``scripts/extract_aiconfigurator.py``), else assumed no cheaper than the most expensive
measurement, so an unmeasured GPU never looks better than a measured one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from catalog.schema import Dtype, Gpu, Model

#: Achieved share of the dense MBU that grouped expert GEMMs reach when reading expert
#: weights (many small GEMMs, one per expert, each with its own tail), on a GPU whose
#: catalog entry has no measured ``moe_layer_floor.expert_read_efficiency``
#: (:func:`moe_read_efficiency`). Assumed from public grouped-GEMM benchmarks (fused MoE
#: kernels reach 60-85% of a dense GEMM's bandwidth at decode-sized batches); not
#: fitted. Below every measured value (1.0 on the six GPUs aiconfigurator's database
#: measures), so an unmeasured GPU's MoE layers are never priced faster.
MOE_BANDWIDTH_EFFICIENCY = 0.75

#: The MoE layer floor (us) assumed for a GPU and engine without a measurement
#: (:func:`moe_layer_floor_us`): the largest floor measured for that engine on any catalog
#: GPU (``catalog/measurements/sources/aiconfigurator-kernels.json``: H100, H200, B200,
#: GB200, B300 and GB300, DeepSeek-V3's layer at one token), so an unmeasured GPU never
#: gets a cheaper MoE layer than a measured one. Engines with no measurement at all take
#: :data:`MOE_LAYER_FLOOR_OTHER_ENGINES_US`. Checked against the catalog in
#: tests/test_kernel_floors.py.
MOE_LAYER_FLOOR_ASSUMED_US = {"sglang": 41.1, "vllm": 53.3, "trtllm": 95.9}
#: The floor (us) of engines aiconfigurator does not measure (AMD's ATOM, TGI, Gaudi's
#: vLLM fork): the largest of vLLM's and SGLang's measured floors. Assumed.
MOE_LAYER_FLOOR_OTHER_ENGINES_US = 53.3


#: The fixed cost (us) of an MLA decode attention kernel on a GPU or engine whose catalog
#: entry has no ``mla_layer_floor`` for it (vLLM everywhere: aiconfigurator's database
#: times only vLLM's whole attention module): the largest floor measured on any GPU and
#: engine (H100 with SGLang, 17.2 us), so an unmeasured one is never cheaper. Checked
#: against the catalog in tests/test_kernel_floors.py.
MLA_LAYER_FLOOR_ASSUMED_US = 17.2


#: FP8 GEMM efficiency relative to BF16 (:func:`fp8_gemm_efficiency`) assumed for a GPU
#: whose catalog entry has no ``fp8_gemm`` measurement, per architecture (the catalog's
#: ``arch``) and engine: the least value measured on a catalog GPU of that architecture
#: with that engine (aiconfigurator's database: H100 and H200 for Hopper, so H100 NVL and
#: PCIe, the same GH100 die, take them; L40S for Ada, so L4; B200, GB200, B300 and GB300 for
#: Blackwell). An unmeasured GPU is never priced closer to its FP8 peak than a measured
#: GPU of its architecture. Checked against the catalog in tests/test_kernel_floors.py.
FP8_GEMM_EFFICIENCY_BY_ARCH: dict[str, dict[str, float]] = {
    "Hopper": {"sglang": 0.688, "vllm": 0.603, "trtllm": 0.741},
    "Ada Lovelace": {"sglang": 0.816, "vllm": 0.771, "trtllm": 0.846},
    "Blackwell": {"sglang": 0.73, "vllm": 0.617, "trtllm": 0.687},
}

#: The same for an architecture (or engine) nothing measures (AMD CDNA 3, Gaudi 3,
#: Ampere's A10G has no FP8): the least value measured on any catalog GPU and engine (H100
#: with vLLM 0.24.0), never below ``bf16 peak / fp8 peak`` (an FP8 GEMM is not priced
#: slower than the BF16 one: Gaudi 3 runs FP8 at its BF16 peak, so it takes 1).
FP8_GEMM_EFFICIENCY_ASSUMED = 0.603


def fp8_gemm_efficiency(gpu: Gpu, engine: str | None) -> float:
    """Share of ``peak(fp8) x MFU`` that ``gpu``'s FP8 weight GEMMs reach with ``engine``
    (dimensionless, in (0, 1]): the GPU's MFU is a BF16-relative figure (MFU 0.5 is what
    H100's BF16 prefill reaches), and FP8 GEMMs fall short of the doubled peak (scales,
    activation quantization, tensor cores harder to feed): measured on compute-bound
    GEMMs as ``(t_bf16 / t_fp8) / 2`` (``fp8_gemm.by_engine``, aiconfigurator's kernel
    database: H100 0.60-0.74, H200 0.67-0.76, L40S 0.77-0.85, B200 0.64-0.73, GB200
    0.64-0.73, B300 and GB300 0.62-0.73). An engine the entry does not list takes the
    entry's least value; a GPU without an entry takes its architecture's
    :data:`FP8_GEMM_EFFICIENCY_BY_ARCH` for the engine (the least listed for an unlisted
    engine), else
    :data:`FP8_GEMM_EFFICIENCY_ASSUMED`, never below ``bf16 peak / fp8 peak``.

    Only GEMM compute is derated: FP8 weight *reads* are priced at the full ``W_eff``, as
    TensorRT-LLM 0.9.0's batch-1 runs on H100 (NVIDIA DLI course data) show them: Llama-2-7B
    steps take 7.01 ms in BF16 and 4.33 ms in FP8, which one MBU (0.75) and one 1.65 ms step
    overhead reproduce for both."""
    if gpu.fp8_gemm is not None:
        return _for_engine(gpu.fp8_gemm.by_engine, engine)
    by_arch = FP8_GEMM_EFFICIENCY_BY_ARCH.get(gpu.arch)
    assumed = FP8_GEMM_EFFICIENCY_ASSUMED if by_arch is None else _for_engine(by_arch, engine)
    if gpu.fp8_dense_tflops:
        assumed = max(assumed, gpu.bf16_dense_tflops / gpu.fp8_dense_tflops)
    return min(assumed, 1.0)


def _for_engine(by_engine: Mapping[str, float], engine: str | None) -> float:
    """``engine``'s value in ``by_engine``, else the least listed (an unlisted engine is
    never priced better than a listed one)."""
    if engine is not None and engine in by_engine:
        return by_engine[engine]
    return min(by_engine.values())


#: Experts of the two measured MoE layers (:func:`moe_layer_floor_us`): Mixtral's shape
#: (8, ``moe_layer_floor.few_experts_by_engine_us``) and DeepSeek-V3's (256,
#: ``moe_layer_floor.by_engine_us``), both at tp 8 without expert parallelism.
MOE_FLOOR_FEW_EXPERTS = 8
MOE_FLOOR_MANY_EXPERTS = 256


def moe_layer_floor_us(gpu: Gpu, engine: str, experts: float = MOE_FLOOR_MANY_EXPERTS) -> float:
    """Fixed cost of one routed-expert layer of ``experts`` experts on ``gpu`` with
    ``engine`` (us), paid once per MoE layer in every step with tokens, on top of the
    experts' GEMMs (:meth:`StepCoefficients.moe_ms`).

    ``f_many``: measured with 256 experts where the GPU's catalog entry has it
    (``moe_layer_floor.by_engine_us``, aiconfigurator's kernel database: DeepSeek-V3's
    layer at tp 8 and one token minus its experts' weight read at peak HBM bandwidth,
    e.g. H200 with SGLang 27.6 us, with TensorRT-LLM 95.9 us); otherwise assumed:
    :data:`MOE_LAYER_FLOOR_ASSUMED_US` for the engine, or
    :data:`MOE_LAYER_FLOOR_OTHER_ENGINES_US`. ``f_few``: measured with 8 experts
    (``moe_layer_floor.few_experts_by_engine_us``, Mixtral's layer shape, e.g. H100 with
    TensorRT-LLM 24.5 us), else ``f_many`` (no cheaper floor without a measurement).
    The floor is ``f_few`` up to 8 experts, linear in the experts from ``f_few`` at 8 to
    ``f_many`` at 256 (TensorRT-LLM's block-scaled layer on H100 at one token: 108, 64,
    45 and 35 us with 256, 128, 64 and 32 experts per GPU), and beyond 256 the larger of
    ``f_many`` and that line extended. It is read at the layer's experts, not the
    experts per GPU under expert parallelism: DeepSeek-V3's served runs on 8 x H200 with
    TensorRT-LLM at ep 8 pay the 256-expert floor (priced at ep 8's 32 experts per GPU,
    their TPOT at 8-72 users came out 7-24% short)."""
    many = MOE_LAYER_FLOOR_ASSUMED_US.get(engine, MOE_LAYER_FLOOR_OTHER_ENGINES_US)
    few = many
    floor = gpu.moe_layer_floor
    if floor is not None and engine in floor.by_engine_us:
        many = few = floor.by_engine_us[engine]
        if floor.few_experts_by_engine_us is not None:
            few = floor.few_experts_by_engine_us.get(engine, many)
    if experts <= MOE_FLOOR_FEW_EXPERTS:
        return few
    slope = (many - few) / (MOE_FLOOR_MANY_EXPERTS - MOE_FLOOR_FEW_EXPERTS)
    line = few + slope * (experts - MOE_FLOOR_FEW_EXPERTS)
    return line if experts <= MOE_FLOOR_MANY_EXPERTS else max(many, line)


def mla_layer_floor_us(gpu: Gpu, engine: str) -> float:
    """Fixed cost of one MLA decode attention kernel on ``gpu`` with ``engine`` (us),
    paid once per layer of an MLA model in every step with tokens, on top of attention's
    roofline (:meth:`StepCoefficients.attention_ms`): measured where the GPU's catalog
    entry has it (``mla_layer_floor.by_engine_us``, aiconfigurator's kernel at batch 1
    and a one-token context, e.g. H200 with SGLang 16.7 us), else
    :data:`MLA_LAYER_FLOOR_ASSUMED_US`."""
    if gpu.mla_layer_floor is not None and engine in gpu.mla_layer_floor.by_engine_us:
        return gpu.mla_layer_floor.by_engine_us[engine]
    return MLA_LAYER_FLOOR_ASSUMED_US


def moe_read_efficiency(gpu: Gpu) -> float:
    """Share of the dense decode bandwidth ``W_eff`` at which ``gpu``'s grouped expert
    GEMMs read expert weights (dimensionless, in (0, 1]): measured where the GPU's
    catalog entry has it (``moe_layer_floor.expert_read_efficiency``, from aiconfigurator's
    kernel database: the DeepSeek-V3 layer's expert reads against dense fp8 GEMMs' at the
    same token counts, capped at 1), else :data:`MOE_BANDWIDTH_EFFICIENCY` (assumed)."""
    floor = gpu.moe_layer_floor
    if floor is not None and floor.expert_read_efficiency is not None:
        return floor.expert_read_efficiency
    return MOE_BANDWIDTH_EFFICIENCY


#: Saturated grouped-GEMM rate as a share of the weight dtype's dense peak
#: (:func:`grouped_gemm_peak_share`) assumed for a GPU whose catalog entry does not
#: measure it for the engine, per engine and expert width per GPU: the least share
#: measured at that width on any catalog GPU with that engine (aiconfigurator's database:
#: H100, H200, B200, GB200, B300 and GB300), so an unmeasured GPU's expert GEMMs never
#: reach a larger share of its peak than a measured GPU's. Engines nothing measures take
#: the least over these engines. Checked against the catalog in tests/test_grouped_gemm.py.
GROUPED_GEMM_PEAK_SHARE_ASSUMED: dict[str, dict[int, float]] = {
    "sglang": {
        128: 0.077,
        256: 0.107,
        512: 0.123,
        1024: 0.149,
        2048: 0.165,
        4096: 0.181,
        8192: 0.194,
        16384: 0.209,
    },
    "vllm": {
        128: 0.081,
        256: 0.115,
        512: 0.139,
        1024: 0.16,
        2048: 0.177,
        4096: 0.177,
        8192: 0.188,
        16384: 0.178,
    },
    "trtllm": {
        128: 0.034,
        256: 0.063,
        512: 0.111,
        1024: 0.168,
        2048: 0.216,
        4096: 0.319,
        8192: 0.361,
        16384: 0.376,
    },
}


def grouped_gemm_peak_share(gpu: Gpu, engine: str | None, width: float) -> float:
    """The rate a MoE layer's grouped expert GEMMs reach with every expert well fed (128+
    tokens each), as a share of the GPU's dense peak (dimensionless, in (0, 1]), at
    ``width`` = the expert FFN width per GPU (``expert_intermediate / (tp / ep)``); the
    cost model caps the layer's expert GEMMs at ``peak x`` this
    (:meth:`planner.kernels.StepCoefficients.moe_ms`).

    Measured (``moe_layer_floor.grouped_gemm_peak_share_by_engine``, aiconfigurator's
    kernel database: fp8 block-scaled layers of every shape it times over the FP8 peak,
    the median per width; one curve fits DeepSeek-V3, Qwen3, Mixtral and gpt-oss shapes
    alike, e.g. H200 with SGLang 0.113 at 128, 0.173 at 256, 0.326 at 2,048, 0.397 at
    16,384, where its dense FP8 GEMMs reach about 0.55): narrow experts, as DeepSeek-V3's
    at tp 8 (256), run at a third of a dense GEMM's rate. Else assumed:
    :data:`GROUPED_GEMM_PEAK_SHARE_ASSUMED` for the engine (the least over engines for
    others). Linear in ``log2(width)`` between the listed widths, flat beyond them. Read
    on fp8 kernels and applied to the peak of the layer's weight dtype (BF16 and FP4
    expert GEMMs assumed to reach the same share of their peaks)."""
    table: Mapping[int, float] | None = None
    floor = gpu.moe_layer_floor
    if floor is not None and floor.grouped_gemm_peak_share_by_engine is not None:
        table = floor.grouped_gemm_peak_share_by_engine.get(engine or "")
    if table is None:
        table = GROUPED_GEMM_PEAK_SHARE_ASSUMED.get(engine or "")
    if table is None:
        tables = GROUPED_GEMM_PEAK_SHARE_ASSUMED.values()
        table = {w: min(t[w] for t in tables) for w in next(iter(tables))}
    widths = sorted(table)
    x = math.log2(max(width, 1.0))
    # np.interp is flat beyond the ends, as the docstring says
    return float(np.interp(x, [math.log2(w) for w in widths], [table[w] for w in widths]))


#: Share of ``peak(fp4) x MFU x fp8_gemm_efficiency`` (the FP8 GEMMs' measured share,
#: :func:`fp8_gemm_efficiency`) that FP4 weight GEMMs are assumed to reach, where no FP4
#: measurement backs the GPU's factors. Assumed, not fitted: the reference measurements
#: price no FP4 run the planner can use, and FP4 GEMMs pay block-scale handling and
#: activation quantization (W4A4) that FP8 GEMMs do not, in kernels younger than FP8's. At
#: 0.75 an FP4 GEMM runs 1.5x an FP8 one on Blackwell (peak ratio 2x). Checked, not fitted:
#: the reference set's DeepSeek-V3/R1 FP4 runs on B200 (InferenceX, TensorRT-LLM; imported
#: as skipped because the catalog had no FP4 DeepSeek then) that the planner can price are
#: measured at a median 1.45x the throughput this predicts, against 1.0x for the FP8 runs
#: on the same GPU and model: FP4 is priced pessimistically, never better than FP8
#: (tests/test_fp4.py).
FP4_GEMM_DERATE = 0.75

#: Share of the effective HBM bandwidth ``W_eff`` that reading FP4 weights is assumed to
#: reach where no FP4 measurement backs the factors (dequantizing 16- or 32-value blocks
#: in small-batch GEMMs costs issue slots a BF16/FP8 read does not). Assumed, not fitted.
FP4_WEIGHT_READ_DERATE = 0.85

#: The largest share of peak HBM bandwidth a measured FP4 level may lift FP4 weight reads
#: to (dimensionless): the decode MBU of the best-measured GPUs, H100/H200's 0.7, the MBU
#: cap every measured level stops at (:func:`planner.levels.factor_caps`). The read
#: derate ``FP4_WEIGHT_READ_DERATE x r`` may pass 1 (the GPU's level is set on its other
#: formats and LLMs; its FP4 runs may read faster than that level says), never past this
#: share: B200, MBU 0.571, FP4 runs at r = 1.332: 0.85 x 1.332 = 1.132 (0.647 of peak).
MAX_WEIGHT_READ_MBU = 0.7


def fp4_level_ratio(gpu: Gpu) -> float:
    """The measured ratio that priced ``gpu``'s FP4 weights (dimensionless): 1 where it
    has factors measured in FP4 (``efficiency.by_dtype['fp4']``, no assumed derate to
    lift), else ``efficiency.fp4_level_ratio`` (make calibrate-defaults; 1 where no FP4
    run was measured)."""
    if Dtype.FP4 in gpu.efficiency.by_dtype:
        return 1.0
    return gpu.efficiency.fp4_level_ratio


def fp4_gemm_ratio(gpu: Gpu, engine: str | None) -> float:
    """Share of its (doubled) peak an FP4 weight GEMM reaches over the share an FP8 one
    reaches of its own, before any measured FP4 level (dimensionless, in (0, 1]):
    measured where the GPU's FP4 and FP8 GEMMs are (:func:`gemm_peak_share` at 512 tokens,
    ``fp4 / fp8``: B200 with TensorRT-LLM 0.239 / 0.314 = 0.761, SGLang 0.670, vLLM
    0.860), else :data:`FP4_GEMM_DERATE` (assumed). An FP4 GEMM then runs ``2 x`` this
    times an FP8 GEMM of the same GPU at 512 tokens (peak ratio 2), each dtype with its
    own measured gain over larger steps."""
    s4 = gemm_peak_share(gpu, engine, Dtype.FP4)
    s8 = gemm_peak_share(gpu, engine, Dtype.FP8)
    if s4 is None or s8 is None:
        return FP4_GEMM_DERATE
    return min(1.0, s4 / s8)


def weight_dtype_derates(
    gpu: Gpu, dtype: Dtype | str, engine: str | None = None, mbu: float | None = None
) -> tuple[float, float]:
    """(GEMM compute, weight-read bandwidth) factors applied on top of the GPU's MFU and
    MBU for weights in ``dtype`` run by ``engine`` (dimensionless; <= 1 but a measured FP4 read).

    * fp8: ``(fp8_gemm_efficiency(gpu, engine), 1)``: FP8 GEMMs reach a smaller share of
      their (doubled) peak than BF16 GEMMs of theirs, measured per GPU and engine
      (:func:`planner.kernel_floors.fp8_gemm_efficiency`; H100 with TensorRT-LLM 0.741);
    * fp4: ``(min(1, q x r) x fp8_gemm_efficiency(gpu, engine),
      min(FP4_WEIGHT_READ_DERATE x r, max(1, MAX_WEIGHT_READ_MBU / mbu)))`` with ``q``
      :func:`fp4_gemm_ratio` (measured FP4 over FP8 GEMM share on Blackwell, else the
      assumed :data:`FP4_GEMM_DERATE`), ``r = efficiency.fp4_level_ratio`` (the GPU's FP4
      runs measured against these derates, 1 where none is) and ``mbu`` the replica's
      decode MBU (default the GPU's; a hand-set or MoE-scaled one where given), unless
      the GPU's catalog (or an applied calibration) has factors measured in fp4
      (``efficiency.by_dtype['fp4']``): the GPU's factors were set or fitted on
      BF16/FP8 runs, and an unmeasured format must not look better than a measured one
      (an unmeasured FP4 GEMM runs at most 1.5x the FP8 one of the same GPU, a measured
      one at most 2x, the peak ratio; unmeasured FP4 weights are read at 0.85 of the
      GPU's MBU, measured ones as their runs say, at most at the best-measured GPUs'
      share of peak, :data:`MAX_WEIGHT_READ_MBU`; B200 at r = 1.332: 1.132);
    * (1, 1) for every other dtype."""
    d = Dtype(dtype)
    if d == Dtype.FP8:
        return (fp8_gemm_efficiency(gpu, engine), 1.0)
    if d != Dtype.FP4 or Dtype.FP4 in gpu.efficiency.by_dtype:
        return (1.0, 1.0)
    r, eff_mbu = fp4_level_ratio(gpu), gpu.efficiency.decode_mbu
    return (
        min(1.0, fp4_gemm_ratio(gpu, engine) * r) * fp8_gemm_efficiency(gpu, engine),
        min(FP4_WEIGHT_READ_DERATE * r, max(1.0, MAX_WEIGHT_READ_MBU / (mbu or eff_mbu))),
    )


#: The decode attention kernel (``(pair_ns, saturated_share)``, :func:`decode_attention_rate`)
#: assumed for a GPU whose catalog entry has no ``decode_attention``, per architecture
#: (the catalog's ``arch``), engine and KV dtype: the slowest measured on a catalog GPU of
#: that architecture (aiconfigurator's database: the largest ``pair_ns`` and the least
#: ``saturated_share`` of H100 and H200 for Hopper, so H100 NVL and PCIe, the same GH100
#: die, take them; of B200, GB200, B300 and GB300 for Blackwell). Checked against the catalog in
#: tests/test_decode_attention.py.
DECODE_ATTENTION_BY_ARCH: dict[str, dict[str, dict[str, tuple[float, float]]]] = {
    "Hopper": {
        "sglang": {"bf16": (11.67, 0.891), "fp8": (17.37, 0.514)},
        "vllm": {"bf16": (16.57, 0.898), "fp8": (27.31, 0.645)},
        "trtllm": {"bf16": (4.57, 0.833), "fp8": (4.45, 0.684)},
    },
    "Blackwell": {
        "sglang": {"bf16": (2.04, 0.879), "fp8": (3.14, 0.845)},
        "vllm": {"bf16": (2.65, 0.882), "fp8": (4.07, 0.904)},
        "trtllm": {"bf16": (2.29, 0.901), "fp8": (3.3, 0.92)},
    },
}


#: Vendors whose accelerators take no borrowed decode attention kernel: Intel's Gaudi 3
#: runs attention on its matrix engines and TPCs, not in GPU thread blocks, and its
#: measured serving runs contradict a per-(sequence, KV head) cost of GPU kernels
#: (Llama-2-7B at 1,536 sequences of 128/128 tokens, measured 19,810 tokens/s, would be
#: predicted 43% below with vLLM's, against 20% below without); its fitted decode MBU
#: prices its attention.
NO_BORROWED_DECODE_ATTENTION = frozenset({"Intel"})


def _slowest(fits: Mapping[str, tuple[float, float]] | None) -> tuple[float, float] | None:
    """The slowest of several ``(pair_ns, saturated_share)``: the largest per-pair cost
    and the least share (None when there are none)."""
    if not fits:
        return None
    return max(f[0] for f in fits.values()), min(f[1] for f in fits.values())


#: The same for a GPU of an architecture nothing measures (Ampere, Ada, AMD's CDNA): the
#: slowest over :data:`DECODE_ATTENTION_BY_ARCH` per engine and dtype (largest
#: ``pair_ns``, least share; vLLM's FP8 kernel: 27.31 ns, 0.645).
DECODE_ATTENTION_ASSUMED: dict[str, dict[str, tuple[float, float]]] = {
    engine: {
        dtype: slowest
        for dtype in by_dtype
        if (slowest := _slowest({a: t[engine][dtype] for a, t in DECODE_ATTENTION_BY_ARCH.items()}))
    }
    for engine, by_dtype in DECODE_ATTENTION_BY_ARCH["Hopper"].items()
}


def decode_attention_rate(
    gpu: Gpu, engine: str | None, kv_dtype: Dtype | str
) -> tuple[float, float] | None:
    """``(pair_ns, saturated_share)`` of ``gpu``'s decode attention kernel (GQA/MHA) with
    ``engine`` and a ``kv_dtype`` KV cache, or None where nothing measures a kernel of
    that family: a decode step's KV read takes at least ``layers x B / dp x
    kv_heads_per_rank x pair_ns + KV bytes / (tp x peak HBM x saturated_share)``
    (:meth:`planner.kernels.StepCoefficients.kv_read_ms_per_seq`).

    Measured (the catalog's ``decode_attention``, aiconfigurator's kernel database: on
    H200, vLLM's FP8-KV kernel pays 27.3 ns per (sequence, KV head) pair per layer and
    streams its bytes at 0.645 of the peak; its BF16 one 16.6 ns and 0.898). An engine
    the entry does not list takes the slowest listed (per pair and per byte, for the
    dtype); a GPU without an entry its architecture's :data:`DECODE_ATTENTION_BY_ARCH`
    (the slowest over that table's engines for an engine it does not list), or
    :data:`DECODE_ATTENTION_ASSUMED` for an architecture nothing measures (A100, L40S,
    MI300X: never a faster kernel than a measured GPU's). Gaudi returns None
    (:data:`NO_BORROWED_DECODE_ATTENTION`): its fitted decode MBU prices its attention."""
    d = Dtype(kv_dtype).value
    entry = gpu.decode_attention
    if entry is not None:
        fits = {
            e: (f[d].pair_ns, f[d].saturated_share) for e, f in entry.by_engine.items() if d in f
        }
        own = fits.get(engine or "")
        return own if own is not None else _slowest(fits)
    table = DECODE_ATTENTION_BY_ARCH.get(gpu.arch)
    if table is None:
        if gpu.vendor in NO_BORROWED_DECODE_ATTENTION:
            return None
        table = DECODE_ATTENTION_ASSUMED
    fits = {e: f[d] for e, f in table.items() if d in f}
    own = fits.get(engine or "")
    return own if own is not None else _slowest(fits)


#: Token counts of a step at which a dense GEMM's rate gain is measured (the catalog's
#: ``gemm_token_gain``: the rate there over the rate at :data:`GEMM_GAIN_BASE_TOKENS`).
GEMM_GAIN_BASE_TOKENS = 512
GEMM_GAIN_TOKENS = (1024, 2048, 4096, 8192)

#: The gain (:func:`gemm_token_gain`) of a GPU whose catalog entry has no
#: ``gemm_token_gain``, per architecture, engine and weight dtype: the least gain measured
#: at each token count on a catalog GPU of that architecture (aiconfigurator's database:
#: A100 80GB for Ampere, so A100 40GB; H100 and H200 for Hopper, so H100 NVL and PCIe; L40S
#: for Ada, so L4; B200, GB200, B300 and GB300 for Blackwell). An architecture nothing measures (AMD
#: CDNA 3, Gaudi 3, the A10G's GA102) gets no gain: its GEMMs run at the MFU at every
#: step size, never faster than a measured GPU's. Checked against the catalog in
#: tests/test_gemm_token_gain.py.
GEMM_TOKEN_GAIN_BY_ARCH: dict[str, dict[str, dict[str, tuple[float, ...]]]] = {
    "Ampere": {
        "sglang": {"bf16": (1.049, 1.076, 1.124, 1.132)},
        "vllm": {"bf16": (1.056, 1.14, 1.162, 1.167)},
        "trtllm": {"bf16": (1.041, 1.126, 1.138, 1.134)},
    },
    "Blackwell": {
        "sglang": {
            "bf16": (1.057, 1.138, 1.169, 1.187),
            "fp8": (1.177, 1.261, 1.292, 1.258),
            "fp4": (1.066, 1.369, 1.593, 1.69),
        },
        "vllm": {
            "bf16": (1.059, 1.115, 1.126, 1.0),
            "fp8": (1.204, 1.305, 1.33, 1.277),
            "fp4": (1.181, 1.347, 1.491, 1.55),
        },
        "trtllm": {
            "bf16": (1.067, 1.134, 1.047, 1.058),
            "fp8": (1.262, 1.476, 1.52, 1.565),
            "fp4": (1.207, 1.478, 1.63, 1.656),
        },
    },
    "Hopper": {
        "sglang": {"bf16": (1.038, 1.063, 1.052, 1.0), "fp8": (1.117, 1.109, 1.048, 1.0)},
        "vllm": {"bf16": (1.016, 1.022, 1.0, 1.0), "fp8": (1.027, 1.033, 1.023, 1.174)},
        "trtllm": {"bf16": (1.037, 1.059, 1.074, 1.076), "fp8": (1.11, 1.179, 1.227, 1.239)},
    },
    "Ada Lovelace": {
        "sglang": {"bf16": (1.052, 1.029, 1.0, 1.0), "fp8": (1.078, 1.098, 1.079, 1.003)},
        "vllm": {"bf16": (1.069, 1.105, 1.022, 1.0), "fp8": (1.033, 1.063, 1.015, 1.004)},
        "trtllm": {"bf16": (1.087, 1.122, 1.133, 1.167), "fp8": (1.168, 1.195, 1.219, 1.141)},
    },
}


def gemm_token_gain(gpu: Gpu, engine: str | None, dtype: Dtype | str) -> tuple[float, ...]:
    """How much faster per FLOP ``gpu``'s dense weight GEMMs in ``dtype`` run with
    ``engine`` at :data:`GEMM_GAIN_TOKENS` tokens per step than at 512 (dimensionless,
    each >= 1; ``()``: no gain, the MFU at every step size). The cost model divides a
    step's dense GEMM compute time by :func:`gain_at_tokens` of these
    (:meth:`planner.kernels.StepCoefficients.gemm_ms`): the fitted MFU prices a
    decode-sized step, a prefill chunk of thousands of tokens fills the tensor cores
    better (H100 with TensorRT-LLM, FP8: 1.14 at 1,024 tokens, 1.26 at 8,192; BF16
    1.04-1.10).

    Measured (the catalog's ``gemm_token_gain``, aiconfigurator's kernel database); an
    engine the entry does not list takes the least gain over the listed engines at each
    token count; a GPU without an entry its architecture's
    :data:`GEMM_TOKEN_GAIN_BY_ARCH` (likewise), none for an architecture nothing
    measures or a dtype nothing measures (FP4 is measured on Blackwell only: the
    database's nvfp4 GEMMs, B200 with TensorRT-LLM 1.21 at 1,024 tokens, 1.66 at 8,192)."""
    d = Dtype(dtype).value
    entry = gpu.gemm_token_gain
    if entry is not None:
        curves = {e: tuple(c[d]) for e, c in entry.by_engine.items() if d in c}
    else:
        table = GEMM_TOKEN_GAIN_BY_ARCH.get(gpu.arch, {})
        curves = {e: c[d] for e, c in table.items() if d in c}
    own = curves.get(engine or "")
    if own is not None:
        return own
    if not curves:
        return ()
    return tuple(min(v) for v in zip(*curves.values(), strict=True))


def gain_at_tokens(gains: tuple[float, ...], tokens: float) -> float:
    """The GEMM rate gain at ``tokens`` tokens per step (dimensionless): 1 at or below
    :data:`GEMM_GAIN_BASE_TOKENS`, ``gains[i]`` at ``GEMM_GAIN_TOKENS[i]`` (each twice
    the previous), linear in log2(tokens) between, the last beyond the last; 1 without
    ``gains``."""
    if not gains or tokens <= GEMM_GAIN_BASE_TOKENS:
        return 1.0
    if not tokens < GEMM_GAIN_BASE_TOKENS * 2 ** len(gains):  # the last, and inf or nan
        return gains[-1]
    x = math.log2(tokens / GEMM_GAIN_BASE_TOKENS)
    i = int(x)
    lo = 1.0 if i == 0 else gains[i - 1]
    return lo + (gains[i] - lo) * (x - i)


#: The share of its dense peak a dense GEMM reaches at 512 tokens (:func:`dense_gemm_lift`)
#: for a GPU whose catalog entry has no ``gemm_peak_share``, per architecture, engine and
#: dtype: the least measured on a catalog GPU of that architecture (aiconfigurator's
#: database: H100/H200 for Hopper, so H100 NVL and PCIe take them; B200/GB200/B300/GB300 for
#: Blackwell; A100 80GB for Ampere; L40S for Ada, so L4 takes them). Checked against the
#: catalog in tests/test_gemm_peak_share.py.
GEMM_PEAK_SHARE_BY_ARCH: dict[str, dict[str, dict[str, float]]] = {
    "Ampere": {"sglang": {"bf16": 0.709}, "vllm": {"bf16": 0.734}, "trtllm": {"bf16": 0.734}},
    "Blackwell": {
        "sglang": {"bf16": 0.572, "fp8": 0.351, "fp4": 0.188},
        "vllm": {"bf16": 0.622, "fp8": 0.32, "fp4": 0.193},
        "trtllm": {"bf16": 0.556, "fp8": 0.287, "fp4": 0.143},
    },
    "Hopper": {
        "sglang": {"bf16": 0.733, "fp8": 0.523},
        "vllm": {"bf16": 0.801, "fp8": 0.533},
        "trtllm": {"bf16": 0.733, "fp8": 0.483},
    },
    "Ada Lovelace": {
        "sglang": {"bf16": 0.557, "fp8": 0.413},
        "vllm": {"bf16": 0.613, "fp8": 0.466},
        "trtllm": {"bf16": 0.536, "fp8": 0.423},
    },
}


def gemm_peak_share(gpu: Gpu, engine: str | None, dtype: Dtype | str) -> float | None:
    """The share of its ``dtype`` dense peak ``gpu``'s dense weight GEMMs reach at 512
    tokens with ``engine`` (dimensionless; measured, aiconfigurator's kernel database): the
    GPU's ``gemm_peak_share`` (an engine it does not list takes the least listed), else its
    architecture's :data:`GEMM_PEAK_SHARE_BY_ARCH` (likewise); None where nothing of the
    architecture is measured (AMD, Intel) or not in ``dtype`` (FP4 is measured on
    Blackwell only: nvfp4 GEMMs, W4A4 with FP8 scales per 16 values; MXFP4 weights are
    taken at the same tensor-core rate)."""
    d = Dtype(dtype).value
    if gpu.gemm_peak_share is not None:
        shares = {e: s[d] for e, s in gpu.gemm_peak_share.by_engine.items() if d in s}
    else:
        table = GEMM_PEAK_SHARE_BY_ARCH.get(gpu.arch, {})
        shares = {e: s[d] for e, s in table.items() if d in s}
    return _for_engine(shares, engine) if shares else None


#: The share of the kernel database's GEMM rate a dense GEMM keeps inside a serving step
#: (:func:`dense_gemm_lift`): a benchmark times one GEMM alone, at the clock a short burst
#: holds; a step runs it between attention, collectives and elementwise kernels at the
#: clock a whole step's power draw sustains. Fitted: the factor at which the reference
#: GPUs' (H100 and H200 SXM) level (``make calibrate-defaults``) comes back to about 1, so
#: the level stops pulling their decode bandwidth down to pay for compute-bound steps
#: (without it H100's level fell to 0.916, its MBU with it, and memory-bound runs went
#: 5-8% more pessimistic).
SERVING_GEMM_SHARE = 0.9


def dense_gemm_lift(gpu: Gpu, engine: str | None, dtype: Dtype | str) -> float:
    """The measured dense GEMM rate over the one the analogy factors give (dimensionless):
    ``k x share / (MFU_a x e_fp8)``, ``share`` the measured :func:`gemm_peak_share` at 512
    tokens, ``MFU_a`` the GPU's analogy MFU (``gemm_peak_share.analogy_mfu``; for a GPU
    borrowing its architecture's share, ``efficiency.prefill_mfu / efficiency.level_scale``;
    a BF16 prefill figure that also carries what else a step spends: H100 0.5) and
    ``e_fp8`` the derate the weight dtype's GEMMs carry before any measured FP4 level
    (:func:`fp8_gemm_efficiency` for FP8; that x :func:`fp4_gemm_ratio` for FP4; 1 for
    BF16) and ``k`` :data:`SERVING_GEMM_SHARE` (fitted). So a replica's
    dense GEMMs run at ``peak x level x k x share x gain(tokens)`` (FP4: x ``min(1, q x
    r) / q``, its measured FP4 level ``r`` up to the FP8 share's rate): the measured
    kernel rate inside a step, scaled by the GPU's fitted level. H100 with TensorRT-LLM:
    BF16 0.9 x 0.733 / 0.5 = 1.319, FP8 0.9 x 0.483 / (0.5 x 0.741) = 1.173. 1 where no share is
    measured (no lift an unmeasured architecture's GPU did not earn)."""
    share = gemm_peak_share(gpu, engine, dtype)
    if share is None:
        return 1.0
    if gpu.gemm_peak_share is not None:
        mfu_a = gpu.gemm_peak_share.analogy_mfu
    else:
        mfu_a = gpu.efficiency.prefill_mfu / gpu.efficiency.level_scale
    d = Dtype(dtype)
    e_fp8 = fp8_gemm_efficiency(gpu, engine) if d in (Dtype.FP8, Dtype.FP4) else 1.0
    if d == Dtype.FP4:  # factors fitted in FP4 carry no derate (weight_dtype_derates)
        e_fp8 = 1.0 if d in gpu.efficiency.by_dtype else e_fp8 * fp4_gemm_ratio(gpu, engine)
    return SERVING_GEMM_SHARE * share / (mfu_a * e_fp8)


def bf16_gemm_rates(
    gpu: Gpu, engine: str | None, dtype: Dtype | str, mfu: float, kernel_rate: bool = True
) -> tuple[float, tuple[float, ...]]:
    """How a quantized checkpoint's BF16 GEMMs run beside those in its weight ``dtype`` on
    ``gpu`` under ``engine``: ``(rho, gains)``. ``rho`` (dimensionless, >= 1; 1 for BF16
    weights) is how many times longer a BF16 GEMM FLOP takes than a ``dtype`` one at 512
    tokens, the ratio of their rates ``(P_q x m_q x e_q x l_q) / (P_bf16 x m_bf16 x
    l_bf16)``: each dtype's dense peak ``P`` (catalog), fitted MFU ``m`` (the GPU's factors
    for that dtype, :meth:`catalog.schema.Gpu.efficiency_for`, scaled like the replica's
    ``mfu``), GEMM derate ``e_q`` (:func:`weight_dtype_derates`, measured or assumed) and
    measured kernel lift ``l`` (:func:`dense_gemm_lift` when ``kernel_rate``, else 1), each
    lift capped as the step's GEMMs are, at ``1 / (m x e)`` (no GEMM past its peak).
    ``gains``: the BF16 GEMMs' own measured gain with the tokens per step
    (:func:`gemm_token_gain` in BF16), capped at the BF16 peak. What the checkpoint keeps in
    BF16 (its lm_head; layers such as Meta's FP8 405B attention,
    :func:`planner.architecture.bf16_gemm_param_count`) runs at the BF16 rate and gains
    (planner.kernels). H100 with TensorRT-LLM, FP8 weights at MFU 0.4873: rho = 1,979 x
    0.741 x 1.173 / (989 x 1.319) = 1.32."""
    d = Dtype(dtype)
    peak_q, peak_b = gpu.peak_tflops(d), gpu.bf16_dense_tflops
    if d == Dtype.BF16 or not peak_q or not peak_b or mfu <= 0:
        return 1.0, ()
    derate = weight_dtype_derates(gpu, d, engine)[0]
    mfu_b = mfu * gpu.efficiency_for(Dtype.BF16).prefill_mfu / gpu.efficiency_for(d).prefill_mfu

    def lift(dt: Dtype, m: float, e: float) -> float:
        measured = dense_gemm_lift(gpu, engine, dt) if kernel_rate else 1.0
        return min(measured, 1.0 / (m * e))

    lift_b = lift(Dtype.BF16, mfu_b, 1.0)
    rho = max(1.0, peak_q * mfu * derate * lift(d, mfu, derate) / (peak_b * mfu_b * lift_b))
    cap = max(1.0, 1.0 / (mfu_b * lift_b))
    return rho, tuple(min(g, cap) for g in gemm_token_gain(gpu, engine, Dtype.BF16))


def bf16_gemm_time_ratio(
    gpu: Gpu, engine: str | None, dtype: Dtype | str, mfu: float, kernel_rate: bool = True
) -> float:
    """``rho`` of :func:`bf16_gemm_rates`: a BF16 GEMM FLOP's time over one in the weight
    ``dtype`` at 512 tokens (dimensionless, >= 1). H100 with TensorRT-LLM, FP8: 1.32."""
    return bf16_gemm_rates(gpu, engine, dtype, mfu, kernel_rate)[0]


#: Tokens per expert at which a grouped expert GEMM reaches half of the dense MFU:
#: ``g(m) = m / (m + this)``. Assumed (a 16-token tile is half-empty at 16 tokens); not fitted.
MOE_HALF_EFFICIENCY_TOKENS = 16.0


def decode_sequence_ms(gpu: Gpu, model: Model, tp: int) -> float:
    """What one decoding sequence costs per step on a replica of ``tp`` ``gpu`` beyond its
    KV read (ms): ``num_layers x us_per_layer / 1000``, the GPU's fitted per-sequence,
    per-layer decode cost (the catalog's ``decode_sequence_cost``: fitted to serving runs
    by ``scripts/fit_decode_sequence_cost.py``, or taken from a sibling GPU, as its
    ``source`` says), at ``tp >= 2`` only; 0 for a GPU without one, for MLA models (their
    decode kernel has its measured floor, :func:`mla_layer_floor_us`) and at ``tp == 1``.
    The cost was fitted to tensor-parallel runs (AMD's tp 8 sweeps); AMD's MLPerf runs at
    tp 1 are predicted within 7% without it, so it is not carried to a GPU that runs its
    layers alone. MI300X at tp 8: 0.795 us x 80 layers = 0.064 ms per sequence for a 70B
    Llama, so 128 sequences add ~8.1 ms to a step. Extrapolated linearly past the sweeps'
    128 sequences, conservatively: AMD's throughput table at 1,500-3,200 sequences is
    predicted 33% low to 1% high with it, and 20-41% high with the cost held at its
    value for 128 sequences."""
    cost = gpu.decode_sequence_cost
    if cost is None or model.mla is not None or tp < 2:
        return 0.0
    return model.num_layers * cost.us_per_layer * 1e-3


def step_layer_floor_ms(gpu: Gpu, model: Model, tp: int) -> float:
    """What every step of a replica of ``tp`` ``gpu`` pays beyond its kernels' roofline
    and the GPU's ``step_overhead_ms`` (ms): ``num_layers x step_us_per_layer / 1000``,
    the level of the GPU's batch sweeps at small batches (the catalog's
    ``decode_sequence_cost.step_us_per_layer``, fitted with the per-sequence cost by
    ``scripts/fit_decode_sequence_cost.py``, or a sibling's, as its ``source`` says); 0
    without a fit and for MLA models (their decode kernel has its measured floor,
    :func:`mla_layer_floor_us`). Added to the step's fixed cost
    (``StepCoefficients.overhead_ms``), in every step with tokens, at every ``tp``: what it
    is (in-engine all-reduce latency beyond the microbenchmarks, launches, skinny FP8
    GEMMs short of the MBU) the tp 8 sweeps do not say, and the only tp 1 runs (AMD's
    MLPerf, compute-bound ~200 ms steps) move 0.6% further below measured with it
    (-6.5% -> -7.0%), too little to tell whether tp 1 pays it; so a GPU that runs its
    layers alone pays it too, conservatively (a 70B chat decode step on one MI300X,
    ~25-35 ms, by 6-9%). A layer count times a constant because AMD's 70B and 405B
    sweeps (80 and 126 layers) fall short by 23 and 40 us per layer at batch 1 (x1.7),
    where their weight bytes per layer differ x3.7. MI300X: 27 us x 80 layers = 2.2 ms
    per step for a 70B Llama."""
    cost = gpu.decode_sequence_cost
    if cost is None or model.mla is not None:
        return 0.0
    return model.num_layers * cost.step_us_per_layer * 1e-3


def grouped_gemm_efficiency(tokens_per_expert: float) -> float:
    """Share of the dense MFU a grouped expert GEMM reaches at ``m`` tokens per expert:
    ``g(m) = m / (m + MOE_HALF_EFFICIENCY_TOKENS)`` (dimensionless, in [0, 1)); 0 at m = 0.
    At 16 tokens per expert 0.5, at 2,048 (a prefill chunk) 0.992."""
    if tokens_per_expert <= 0:
        return 0.0
    return tokens_per_expert / (tokens_per_expert + MOE_HALF_EFFICIENCY_TOKENS)
