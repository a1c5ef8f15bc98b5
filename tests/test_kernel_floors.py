"""Kernel floors measured in aiconfigurator's database: the MoE layer's fixed cost per
GPU and engine (planner.kernels.moe_layer_floor_us), its expert-read efficiency
(planner.kernels.moe_read_efficiency), the MLA decode kernel's floor
(planner.kernels.mla_layer_floor_us) and the scale-up links' collective latency, against
the extracted file catalog/measurements/sources/aiconfigurator-kernels.json
(scripts/extract_aiconfigurator.py)."""

from __future__ import annotations

import dataclasses
import statistics

import pytest
from script_support import aiconfigurator_kernels, load_script

from catalog.loader import load_catalog
from planner import kernels
from planner import roofline as rl
from planner.kernels import coefficients_of, moe_layer_floor_us

EXTRACTED = aiconfigurator_kernels()
CAT = load_catalog()
extract = load_script("extract_aiconfigurator")

#: Blackwell GPUs take their vLLM floor for TensorRT-LLM: the database's DeepGEMM layer is
#: contradicted by TensorRT-LLM's serving runs (see the GPUs' moe_layer_floor.source).
OVERRIDDEN = {(gpu, "trtllm"): "vllm" for gpu in ("b200", "gb200-per-gpu", "b300", "gb300-per-gpu")}


def test_catalog_floors_are_the_extracted_ones():
    for gpu, entry in EXTRACTED["gpus"].items():
        got = CAT.gpus[gpu].moe_layer_floor
        assert got is not None, gpu
        for engine, figures in entry["engines"].items():
            want = figures["moe_layer_floor_us"]
            if (gpu, engine) in OVERRIDDEN:
                want = entry["engines"][OVERRIDDEN[gpu, engine]]["moe_layer_floor_us"]
                assert "contradicted" in got.source
            assert got.by_engine_us[engine] == pytest.approx(want), (gpu, engine)


def test_catalog_few_expert_floors_are_the_extracted_ones():
    for gpu, entry in EXTRACTED["gpus"].items():
        got = CAT.gpus[gpu].moe_layer_floor
        assert got is not None and got.few_experts_by_engine_us is not None, gpu
        for engine, figures in entry["engines"].items():
            want = figures["moe_layer_floor_8_experts_us"]
            assert got.few_experts_by_engine_us[engine] == pytest.approx(want), (gpu, engine)


def test_moe_floor_interpolates_in_the_layers_experts():
    """H100 with TensorRT-LLM: 24.5 us for a layer of 8 experts (Mixtral's shape), 94.9 us
    for 256 (DeepSeek-V3's), both fp8 block-scaled at tp 8; a layer of 32 experts:
    24.5 + (94.9 - 24.5) x 24 / 248 = 31.31 us; 512 experts extend the line to 167.6 us;
    fewer than 8 stay at 24.5."""
    h100 = CAT.gpus["h100-sxm5-80gb"]
    slope = (94.9 - 24.5) / 248
    assert moe_layer_floor_us(h100, "trtllm", 8) == pytest.approx(24.5)
    assert moe_layer_floor_us(h100, "trtllm", 256) == pytest.approx(94.9)
    assert moe_layer_floor_us(h100, "trtllm") == pytest.approx(94.9)  # default: 256
    assert moe_layer_floor_us(h100, "trtllm", 32) == pytest.approx(24.5 + slope * 24)
    assert moe_layer_floor_us(h100, "trtllm", 512) == pytest.approx(24.5 + slope * 504)
    assert moe_layer_floor_us(h100, "trtllm", 1) == pytest.approx(24.5)
    # SGLang on B200 measures a dearer few-expert layer: the line falls, never below
    # the 256-expert floor past it
    b200 = CAT.gpus["b200"]
    assert moe_layer_floor_us(b200, "sglang", 8) == pytest.approx(41.2)
    assert moe_layer_floor_us(b200, "sglang", 512) == pytest.approx(30.2)
    # unmeasured GPU: the assumed floor whatever the experts
    mi300x = CAT.gpus["mi300x"]
    for experts in (1, 8, 32, 256, 512):
        assert (
            moe_layer_floor_us(mi300x, "trtllm", experts)
            == kernels.MOE_LAYER_FLOOR_ASSUMED_US["trtllm"]
        )


def test_mixtral_step_pays_the_few_expert_floor_and_deepseek_the_many_at_any_ep():
    """Mixtral (8 experts) on 2 x H100 with TensorRT-LLM pays 32 x 24.5 us per step.
    DeepSeek-V3 (two stages of 8: its weights need 16 H100s) pays 58 x 94.9 us at ep 1
    and at ep 8: the floor is read at the layer's 256 experts, not the 32 per GPU (its
    served runs on H200 at ep 8 pay the 256-expert floor)."""
    mixtral = rl.build_replica(CAT, "mixtral-8x7b", "h100-sxm5-80gb", tp=2, engine="trtllm")
    assert coefficients_of(mixtral).moe_floor_ms == pytest.approx(32 * 24.5e-3)
    for ep in (1, 8):
        ds = rl.build_replica(
            CAT, "deepseek-v3", "h100-sxm5-80gb", tp=8, dtype="fp8", engine="trtllm", ep=ep, pp=2
        )
        assert coefficients_of(ds).moe_floor_ms == pytest.approx(58 * 94.9e-3)


def test_assumed_floors_are_the_largest_measured():
    measured: dict[str, list[float]] = {}
    for gpu in CAT.gpus.values():
        if gpu.moe_layer_floor is not None:
            for engine, us in gpu.moe_layer_floor.by_engine_us.items():
                measured.setdefault(engine, []).append(us)
    assert set(measured) == set(kernels.MOE_LAYER_FLOOR_ASSUMED_US)
    for engine, values in measured.items():
        assert kernels.MOE_LAYER_FLOOR_ASSUMED_US[engine] == max(values)
    assert (
        max(max(measured["vllm"]), max(measured["sglang"]))
        == kernels.MOE_LAYER_FLOOR_OTHER_ENGINES_US
    )


def test_an_unmeasured_gpu_never_gets_a_cheaper_moe_layer():
    mi300x = CAT.gpus["mi300x"]
    assert mi300x.moe_layer_floor is None
    for engine in ("vllm", "sglang", "trtllm", "atom"):
        floor = moe_layer_floor_us(mi300x, engine)
        for gpu in CAT.gpus.values():
            if gpu.moe_layer_floor is not None and engine in gpu.moe_layer_floor.by_engine_us:
                assert floor >= gpu.moe_layer_floor.by_engine_us[engine]
    assert moe_layer_floor_us(CAT.gpus["h200-sxm-141gb"], "sglang") == 27.6
    assert moe_layer_floor_us(mi300x, "atom") == 53.3


def test_deepseek_decode_step_pays_58_layer_floors():
    """DeepSeek-V3 on 8 x H200 with SGLang: 58 MoE layers x 27.6 us = 1.6008 ms per step,
    whatever the batch; Llama (dense) pays none."""
    replica = rl.build_replica(
        CAT, "deepseek-v3", "h200-sxm-141gb", tp=8, dtype="fp8", engine="sglang"
    )
    c = coefficients_of(replica)
    assert c.moe_layers == 58
    assert c.moe_floor_ms == pytest.approx(58 * 27.6e-3)
    bare = dataclasses.replace(c, moe_floor_ms=0.0)
    for batch in (1, 4, 64):
        assert c.step_ms(batch, 2000) - bare.step_ms(batch, 2000) == pytest.approx(1.6008)
    assert c.moe_ms(0) == 0.0  # an idle step pays nothing
    dense = rl.build_replica(CAT, "llama-3.1-70b", "h200-sxm-141gb", tp=8, dtype="fp8")
    assert coefficients_of(dense).moe_floor_ms == 0.0


def _median_tp8(systems: tuple[str, ...]) -> float:
    return statistics.median(
        e["allreduce_small_us"]["8"]
        for gpu, entry in EXTRACTED["gpus"].items()
        if entry["system"] in systems
        for e in entry["engines"].values()
        if "8" in e.get("allreduce_small_us", {})
    )


def test_nvlink_latency_is_the_measured_small_allreduce():
    assert CAT.links["nvlink4"].latency_us == pytest.approx(
        _median_tp8(("h100_sxm", "h200_sxm")), abs=0.05
    )
    assert CAT.links["nvlink5"].latency_us == pytest.approx(_median_tp8(("b200_sxm",)), abs=0.05)
    measured = max(CAT.links[k].latency_us for k in ("nvlink3", "nvlink4", "nvlink5"))
    for unmeasured in ("infinity-fabric-mi300", "gaudi3-roce"):
        assert CAT.links[unmeasured].latency_us >= measured


def test_allreduce_floors_filter_graph_small_bf16_rows():
    rows = [
        {
            "allreduce_dtype": "bfloat16",
            "num_gpus": 8,
            "message_size": 128,
            "latency": 0.003,
            "backend": "x_graph",
        },
        {
            "allreduce_dtype": "bfloat16",
            "num_gpus": 8,
            "message_size": 8192,
            "latency": 0.005,
            "backend": "x_graph",
        },
        {"allreduce_dtype": "bfloat16", "num_gpus": 8, "message_size": 8192, "latency": 0.004},
        {"allreduce_dtype": "bfloat16", "num_gpus": 8, "message_size": 16384, "latency": 0.9},
        {
            "allreduce_dtype": "bfloat16",
            "num_gpus": 8,
            "message_size": 128,
            "latency": 0.03,
            "backend": "x_eager",
        },
        {"allreduce_dtype": "float32", "num_gpus": 8, "message_size": 128, "latency": 0.9},
        {"allreduce_dtype": "bfloat16", "num_gpus": 2, "message_size": 128, "latency": 0.002},
    ]
    assert extract.allreduce_floors(rows) == {"2": 2.0, "8": 4.0}
    assert extract.allreduce_floors(rows, eager=True) == {"8": 30.0}


def test_moe_floor_arithmetic():
    """H200 (4.8 TB/s): 8 experts x 3 x 7,168 x 2,048 / 8 GPUs = 44,040,192 bytes read in
    9.175 us; a 36.75 us layer leaves 27.575 -> 27.6 us."""
    assert extract.ONE_TOKEN_EXPERT_BYTES_PER_GPU == 44_040_192
    assert extract.moe_floor_us(36.75, 4.8) == 27.6
    assert extract.moe_floor_us(5.0, 4.8) == 0.0
    row = dict(extract.DEEPSEEK_MOE, moe_dtype="fp8_block", moe_tp_size=8, moe_ep_size=1)
    rows = [
        dict(row, num_tokens=1, latency=0.030),
        dict(row, num_tokens=1, latency=0.040),
        dict(row, num_tokens=2, latency=0.9),
        dict(row, num_tokens=1, latency=0.9, moe_ep_size=8),
    ]
    assert extract.moe_one_token_us(rows) == 35.0
    assert extract.moe_one_token_us([]) is None


def test_few_experts_floor_arithmetic():
    """H100 (3.35 TB/s), Mixtral's layer shape fp8 block-scaled at tp 8 and one token: its
    2 experts per GPU are 2 x 3 x 4,096 x 14,336 / 8 bytes (44,040,192: 13.15 us at
    peak); two distributions at 37 and 39 us leave 38 - 13.15 = 24.85 -> 24.9 us. Other
    shapes, dtypes, tp, token counts and expert parallelism are not read."""
    row = dict(
        extract.FEW_EXPERTS_MOE, moe_dtype="fp8_block", moe_tp_size=8, moe_ep_size=1, num_tokens=1
    )
    rows = [
        dict(row, latency=0.037),
        dict(row, latency=0.039),
        dict(row, latency=0.9, num_tokens=2),
        dict(row, latency=0.9, moe_ep_size=2),
        dict(row, latency=0.9, moe_dtype="bfloat16"),
        dict(row, latency=0.9, moe_tp_size=4),
        dict(row, latency=0.9, num_experts=16),
    ]
    assert extract.few_experts_floor_us(rows, 3.35) == 24.9
    assert extract.few_experts_floor_us([], 3.35) is None
    assert extract.few_experts_floor_us([dict(row, latency=0.001)], 3.35) == 0.0


def test_all_to_all_is_deepeps_measured_kernel():
    """DeepSeek-V3 decode on 8 x H200 with EP 8: one dispatch of 4 tokens x 8 experts x
    7,168 bf16 values per rank = 458,752 bytes: 13.8 us + 458,752 x 7/8 / (450 GB/s x
    0.67) = 13.8 + 1.331 us."""
    link = CAT.links["nvlink4"]
    got = kernels.all_to_all_ms(link, 8, 458_752) * 1e3
    assert got == pytest.approx(13.8 + 458_752 * 7 / 8 / (450e3 * 0.67))
    for lid in ("nvlink4", "nvlink5"):
        fit = [
            e["deepep_low_latency"]
            for e in EXTRACTED["gpus"].values()
            if e["scale_up_link"] == lid and "deepep_low_latency" in e
        ]
        kernel = CAT.links[lid].all_to_all
        assert kernel is not None and len(fit) == (2 if lid == "nvlink4" else 4)
        assert kernel.latency_us == max(f["latency_us"] for f in fit)  # the slowest GPU
        assert kernel.bandwidth_fraction == min(f["bandwidth_fraction"] for f in fit)


def test_unmeasured_links_never_get_a_faster_all_to_all():
    measured = [lk.all_to_all for lk in CAT.links.values() if lk.all_to_all is not None]
    assert max(m.latency_us for m in measured) == kernels.ALL_TO_ALL_ASSUMED_LATENCY_US
    assert (
        min(m.bandwidth_fraction for m in measured) == kernels.ALL_TO_ALL_ASSUMED_BANDWIDTH_FRACTION
    )
    xgmi = CAT.links["infinity-fabric-mi300"]
    assert xgmi.all_to_all is None
    assert kernels.all_to_all_kernel(xgmi) == (22.1, 0.67)
    # the same bytes over xGMI (448 GB/s) take longer than over measured NVLink 4 (450)
    assert kernels.all_to_all_ms(xgmi, 8, 1e6) > kernels.all_to_all_ms(CAT.links["nvlink4"], 8, 1e6)


def test_all_to_all_fit_arithmetic():
    row = {"hidden_size": 7168, "num_topk": 8, "num_experts": 256, "node_num": 1}
    rows = [
        dict(row, num_token=1, dispatch_avg_t_us=12.0, combine_avg_t_us=13.0),
        dict(row, num_token=1024, dispatch_avg_t_us=200.0, combine_avg_t_us=400.0),
        dict(row, num_token=1, node_num=2, dispatch_avg_t_us=99.0, combine_avg_t_us=99.0),
    ]
    fit = extract.all_to_all_fit(rows, 450.0)
    moved = 2 * 1024 * 8 * 7168 * 2 * 7 / 8
    assert fit == {"latency_us": 12.5, "bandwidth_fraction": round(moved / (450e3 * 575.0), 2)}
    assert extract.all_to_all_fit(rows[:1], 450.0) is None


def test_attention_tp_with_expert_parallel_moe_has_no_all_to_all():
    """tp 8 attention with EP 8 experts (TensorRT-LLM's `--tp 8 --ep 8`): every GPU holds
    every token, so the step's collectives are the 2 x 61 all-reduces of tp 8, as
    without EP; with DP attention (dp 8) each rank dispatches its own tokens."""
    tp = rl.build_replica(CAT, "deepseek-v3", "h200-sxm-141gb", tp=8, dtype="fp8")
    ep = rl.build_replica(CAT, "deepseek-v3", "h200-sxm-141gb", tp=8, dtype="fp8", ep=8)
    wide = rl.build_replica(CAT, "deepseek-v3", "h200-sxm-141gb", tp=8, dtype="fp8", dp=8, ep=8)
    for tokens in (1.0, 64.0, 576.0):
        assert ep.coefficients.comm_ms(tokens) == tp.coefficients.comm_ms(tokens)
        link = CAT.links["nvlink4"]
        routed = tokens / 8 * 7168 * 2 * 8
        assert wide.coefficients.comm_ms(tokens) == pytest.approx(
            2 * 58 * kernels.all_to_all_ms(link, 8, routed)
        )


# --------------------------------------------------------------------------- expert reads, MLA


def test_expert_read_efficiency_is_the_least_measured_ratio_capped_at_one():
    """Where aiconfigurator measures the DeepSeek-V3 layer, its expert reads reach at least
    the dense fp8 GEMMs' share of peak bandwidth on every engine (ratio > 1), so the
    catalog's efficiency is min(1, least ratio) = 1; every other GPU is assumed at
    MOE_BANDWIDTH_EFFICIENCY (0.75), below every measured one."""
    for gpu_id, entry in EXTRACTED["gpus"].items():
        ratios = [e["moe_expert_read_vs_dense"] for e in entry["engines"].values()]
        assert len(ratios) == 3 and min(ratios) > 1.0, gpu_id
        floor = CAT.gpus[gpu_id].moe_layer_floor
        assert floor is not None and floor.expert_read_efficiency == min(1.0, min(ratios))
        assert kernels.moe_read_efficiency(CAT.gpus[gpu_id]) == 1.0
    for gpu_id, gpu in CAT.gpus.items():
        if gpu_id not in EXTRACTED["gpus"]:
            assert kernels.moe_read_efficiency(gpu) == kernels.MOE_BANDWIDTH_EFFICIENCY == 0.75


def test_expert_read_ratio_arithmetic():
    """s_moe(n) = E (1 - (1 - k/E)^n) x one expert's bytes per GPU / ((latency - floor) x
    peak); s_dense(n) = N K / (latency x peak); the ratio's median over 4-64 tokens."""
    moe_row = dict(extract.DEEPSEEK_MOE, moe_dtype="fp8_block", moe_tp_size=8, moe_ep_size=1)
    peak, floor = 4.8, 20.0  # TB/s, us
    moe, gemm = [], []
    for n in extract.READ_TOKENS:
        touched = 256 * (1 - (1 - 8 / 256) ** n)
        read_us = touched * extract.ONE_EXPERT_BYTES_PER_GPU / (0.8 * peak * 1e6)
        moe.append(dict(moe_row, num_tokens=n, latency=(read_us + floor) / 1e3))
        for nk in (4096, 8192):  # dense weights read at 0.5 of peak
            gemm.append(
                {
                    "gemm_dtype": "fp8",
                    "m": n,
                    "n": nk,
                    "k": nk,
                    "latency": nk * nk / (0.5 * peak * 1e9),
                }
            )
        gemm.append({"gemm_dtype": "bfloat16", "m": n, "n": 4096, "k": 4096, "latency": 1.0})
        gemm.append({"gemm_dtype": "fp8", "m": n, "n": 1024, "k": 4096, "latency": 1.0})
    assert extract.expert_read_vs_dense(moe, gemm, peak, floor) == pytest.approx(1.6)
    assert extract.expert_read_vs_dense(moe[:-1], gemm, peak, floor) is None  # no 64-token row
    assert extract.expert_read_vs_dense(moe, gemm, peak, 1e9) is None  # nothing left to read


def test_a_moe_decode_reads_experts_at_the_measured_efficiency():
    """DeepSeek-V3 on H200 (measured: 1.0) and MI300X (assumed: 0.75) at 64 decodes: the
    expert-read term is touched experts x their bytes / (W_eff x e_read), 4/3 as long on
    the GPU whose efficiency is assumed, all else equal."""
    h200 = rl.build_replica(CAT, "deepseek-v3", "h200-sxm-141gb", tp=8, dtype="fp8")
    c = coefficients_of(h200)
    assert c.moe_read_efficiency == 1.0
    read = c.experts_touched(64) * c.expert_bytes_all_layers / c.w_weights_per_ms
    compute = (
        64 * c.routed_flops_per_token / (c.f_gemm_per_ms * kernels.grouped_gemm_efficiency(2.0))
    )
    assert read > compute  # 64 decodes: the expert reads bound the layer
    assert c.moe_ms(64) == pytest.approx(read + c.moe_floor_ms)
    assumed = dataclasses.replace(c, moe_read_efficiency=kernels.MOE_BANDWIDTH_EFFICIENCY)
    assert assumed.moe_ms(64) - assumed.moe_floor_ms == pytest.approx(read / 0.75)
    mi300x = coefficients_of(rl.build_replica(CAT, "deepseek-v3", "mi300x", tp=8, dtype="fp8"))
    assert mi300x.moe_read_efficiency == 0.75


def test_catalog_mla_floors_are_the_extracted_ones_and_the_assumed_is_the_largest():
    measured = []
    for gpu_id, entry in EXTRACTED["gpus"].items():
        got = CAT.gpus[gpu_id].mla_layer_floor
        assert got is not None, gpu_id
        want = {
            e: f["mla_layer_floor_us"]
            for e, f in entry["engines"].items()
            if "mla_layer_floor_us" in f
        }
        assert set(want) == {"sglang", "trtllm"}  # vLLM's database times the whole module
        assert got.by_engine_us == pytest.approx(want)
        measured += want.values()
    assert kernels.MLA_LAYER_FLOOR_ASSUMED_US == max(measured) == 17.2
    h200 = CAT.gpus["h200-sxm-141gb"]
    assert kernels.mla_layer_floor_us(h200, "sglang") == 16.7
    assert kernels.mla_layer_floor_us(h200, "vllm") == 17.2  # not measured: the largest
    assert kernels.mla_layer_floor_us(CAT.gpus["mi300x"], "sglang") == 17.2
    assert (
        extract.mla_floor_us(
            [
                {
                    "batch_size": 1,
                    "step": 1,
                    "num_heads": 16,
                    "kv_cache_dtype": "fp8",
                    "latency": 0.0167,
                },
                {
                    "batch_size": 1,
                    "step": 1,
                    "num_heads": 16,
                    "kv_cache_dtype": "fp8",
                    "latency": 0.0169,
                },
                {
                    "batch_size": 1,
                    "step": 3,
                    "num_heads": 16,
                    "kv_cache_dtype": "fp8",
                    "latency": 1.0,
                },
                {
                    "batch_size": 1,
                    "step": 1,
                    "num_heads": 32,
                    "kv_cache_dtype": "fp8",
                    "latency": 1.0,
                },
                {
                    "batch_size": 1,
                    "step": 1,
                    "num_heads": 16,
                    "kv_cache_dtype": "bfloat16",
                    "latency": 1.0,
                },
            ]
        )
        == 16.8
    )
    assert extract.mla_floor_us([]) is None


def test_an_mla_step_pays_every_layers_floor_and_a_gqa_step_none():
    """DeepSeek-V3 (61 MLA layers) on H200 with SGLang: the step's overhead is the GPU's
    step overhead plus 61 x 16.7 us, paid in every step with tokens (decode, mixed and
    prefill alike) and not by an idle one; Llama (GQA) pays no MLA floor."""
    r = rl.build_replica(CAT, "deepseek-v3", "h200-sxm-141gb", tp=8, dtype="fp8", engine="sglang")
    c = r.coefficients
    assert c.attention_floor_ms == pytest.approx(61 * 16.7e-3)
    assert c.overhead_ms == pytest.approx(r.step_overhead_ms + 61 * 16.7e-3)
    k = c.kernels(4, 2000)
    assert k.overhead_ms == c.overhead_ms and c.kernels(0, 0).overhead_ms == 0.0
    bare = dataclasses.replace(c, overhead_ms=r.step_overhead_ms)
    assert c.step_ms(4, 2000) - bare.step_ms(4, 2000) == pytest.approx(61 * 16.7e-3)
    dense = rl.build_replica(CAT, "llama-3.1-70b", "h200-sxm-141gb", tp=4, dtype="fp8")
    assert dense.coefficients.attention_floor_ms == 0.0
    assert dense.coefficients.overhead_ms == dense.step_overhead_ms


# FP8 GEMM efficiency (planner.kernels.fp8_gemm_efficiency) ----------------------------


def test_catalog_fp8_gemm_efficiency_is_the_extracted_one():
    seen = 0
    for gpu, entry in {**EXTRACTED["gpus"], **EXTRACTED["fp8_gemm_only"]}.items():
        want = {
            engine: figures["fp8_gemm_vs_bf16"]
            for engine, figures in entry["engines"].items()
            if "fp8_gemm_vs_bf16" in figures
        }
        if not want:  # A100: read for the token gain only, no FP8
            assert CAT.gpus[gpu].fp8_gemm is None
            continue
        got = CAT.gpus[gpu].fp8_gemm
        assert got is not None, gpu
        assert got.by_engine == want, gpu
        assert "aiconfigurator" in got.source
        seen += 1
    assert seen == 7  # H100, H200, B200, GB200, B300, GB300 and L40S (read for this ratio only)


def test_an_unmeasured_gpu_never_gets_more_efficient_fp8_gemms():
    measured: dict[str, dict[str, list[float]]] = {}
    for g in CAT.gpus.values():
        if g.fp8_gemm is not None:
            for engine, v in g.fp8_gemm.by_engine.items():
                measured.setdefault(g.arch, {}).setdefault(engine, []).append(v)
    # per architecture and engine: the least measured value of that architecture
    assert {
        arch: {e: min(v) for e, v in by.items()} for arch, by in measured.items()
    } == kernels.FP8_GEMM_EFFICIENCY_BY_ARCH
    everything = [v for by in measured.values() for vs in by.values() for v in vs]
    assert min(everything) == kernels.FP8_GEMM_EFFICIENCY_ASSUMED
    for gpu in CAT.gpus.values():
        if gpu.fp8_gemm is not None or gpu.fp8_dense_tflops is None:
            continue
        for engine in ("vllm", "sglang", "trtllm", "atom", None):
            eff = kernels.fp8_gemm_efficiency(gpu, engine)
            same_arch = measured.get(gpu.arch)
            if same_arch is None:
                floor = gpu.bf16_dense_tflops / gpu.fp8_dense_tflops
                assert eff == max(kernels.FP8_GEMM_EFFICIENCY_ASSUMED, floor), gpu.id
            else:
                pool = same_arch.get(engine) or [v for vs in same_arch.values() for v in vs]
                assert eff == min(pool), (gpu.id, engine)
    # H100 NVL (the same die as H100 SXM) takes Hopper's least per engine; MI300X the
    # least anywhere; Gaudi 3, whose FP8 peak is its BF16 peak, is not priced below BF16
    assert kernels.fp8_gemm_efficiency(CAT.gpus["h100-nvl-94gb"], "trtllm") == 0.741
    assert kernels.fp8_gemm_efficiency(CAT.gpus["mi300x"], "vllm") == 0.603
    assert kernels.fp8_gemm_efficiency(CAT.gpus["gaudi3"], "vllm") == 1.0


def test_fp8_gemm_efficiency_per_engine_and_fallbacks():
    h100 = CAT.gpus["h100-sxm5-80gb"]
    assert kernels.fp8_gemm_efficiency(h100, "trtllm") == 0.741
    assert kernels.fp8_gemm_efficiency(h100, "sglang") == 0.688
    # an engine the database does not measure takes the GPU's least measured value
    assert kernels.fp8_gemm_efficiency(h100, "atom") == 0.603
    assert kernels.fp8_gemm_efficiency(h100, None) == 0.603
    # only FP8 carries it; BF16 GEMMs and all weight reads are not derated
    assert kernels.weight_dtype_derates(h100, "fp8", "trtllm") == (0.741, 1.0)
    assert kernels.weight_dtype_derates(h100, "bf16", "trtllm") == (1.0, 1.0)


def test_fp8_gemms_are_priced_at_the_measured_share_of_the_fp8_peak():
    """Worked: Llama-3.1-8B FP8 at tp 1 on H100 with TensorRT-LLM and MFU 0.5: F_gemm =
    1,978.9e12 x 0.5 x 0.741 = 733.2e12 FLOP/s (733.2e9 per ms), 1.48x BF16's 494.7e12,
    not 2x; the weight-read bandwidth is BF16's, 3.35e12 x 0.7 = 2.345e12 B/s."""
    kw = {"engine": "trtllm", "mfu": 0.5, "mbu": 0.7}
    fp8 = rl.build_replica(CAT, "llama-3.1-8b", "h100-sxm5-80gb", dtype="fp8", **kw)
    bf16 = rl.build_replica(CAT, "llama-3.1-8b", "h100-sxm5-80gb", dtype="bf16", **kw)
    c8, c16 = coefficients_of(fp8), coefficients_of(bf16)
    assert c8.f_gemm_per_ms == pytest.approx(1978.9e12 * 0.5 * 0.741 / 1e3)
    assert rl.effective_flops(fp8) == pytest.approx(1978.9e12 * 0.5 * 0.741)
    assert c8.f_gemm_per_ms / c16.f_gemm_per_ms == pytest.approx(2.0 * 0.741, rel=1e-3)
    assert c8.w_weights_per_ms == pytest.approx(c16.w_weights_per_ms)
    assert c8.w_weights_per_ms == pytest.approx(3.35e12 * 0.7 / 1e3)


def test_fp8_gemm_vs_bf16_arithmetic():
    def row(dtype: str, m: int, n: int, k: int, ms: float) -> dict:
        return {"gemm_dtype": dtype, "m": m, "n": n, "k": k, "latency": ms}

    rows = [
        # in range: ratios (1.0 / 0.7) / 2 = 0.714, (2.0 / 1.25) / 2 = 0.8, (1 / 0.5) / 2 = 1
        row("bfloat16", 2048, 8192, 8192, 1.0),
        row("fp8", 2048, 8192, 8192, 0.7),
        row("bfloat16", 4096, 4096, 16384, 2.0),
        row("fp8", 4096, 4096, 16384, 1.3),
        row("fp8", 4096, 4096, 16384, 1.2),  # two fp8 rows of one shape: their median 1.25
        row("bfloat16", 8192, 16384, 4096, 1.0),
        row("fp8", 8192, 16384, 4096, 0.5),
        # out of range (m < 1,024; n > 16,384) or one dtype only: ignored
        row("bfloat16", 512, 8192, 8192, 1.0),
        row("fp8", 512, 8192, 8192, 5.0),
        row("bfloat16", 2048, 32768, 8192, 1.0),
        row("fp8", 2048, 32768, 8192, 5.0),
        row("bfloat16", 1024, 8192, 8192, 1.0),
        row("fp8_block", 1024, 8192, 8192, 9.0),
    ]
    assert extract.fp8_gemm_vs_bf16(rows) == 0.8
    assert extract.fp8_gemm_vs_bf16(rows[:2]) == 0.714
    assert extract.fp8_gemm_vs_bf16(rows[7:]) is None


# All-reduce over PCIe (planner.collectives.pcie_allreduce_alpha_beta) -------------------


def test_pcie_allreduce_is_the_extracted_nccl_measurement():
    by_tp = {int(tp): v for tp, v in EXTRACTED["pcie_allreduce"]["by_tp"].items()}
    assert EXTRACTED["pcie_allreduce"]["system"] == "l40s"
    assert set(by_tp) == set(kernels.PCIE_ALLREDUCE_MEASURED) == {2, 4, 8}
    two = by_tp[2]["bus_gb_per_s"]
    for tp, (latency_us, bus) in kernels.PCIE_ALLREDUCE_MEASURED.items():
        assert latency_us == by_tp[tp]["latency_us"]  # measured at every tp
        # tp 2's measured bus bandwidth up to tp 4, half of it at tp 8 (assumed)
        assert bus == (two if tp <= 4 else round(two / 2, 2))
        # never faster than the link's nominal per-direction bandwidth
        assert bus <= CAT.links["pcie-gen4-x16"].bandwidth_gb_per_s


def test_pcie_allreduce_worked_example_and_fallbacks():
    """Llama-70B's decode all-reduce of 64 tokens (64 x 8,192 x 2 = 1,048,576 bytes) on
    PCIe: tp 4: 12.41 us + 1.5 x 1,048,576 B / 19.56 GB/s = 0.0928 ms; tp 8: 24.53 us +
    1.75 x 1,048,576 / 9.78e9 s = 0.2122 ms; tp 2: 7 us + 1,048,576 / 19.56e9 s = 0.0606
    ms."""
    pcie = CAT.links["pcie-gen4-x16"]
    m = 64 * 8192 * 2
    assert kernels.allreduce_ms(pcie, 4, m) == pytest.approx(12.41e-3 + 1.5 * m / 19.56e9 * 1e3)
    assert kernels.allreduce_ms(pcie, 4, m) == pytest.approx(0.0928, abs=1e-4)
    assert kernels.allreduce_ms(pcie, 8, m) == pytest.approx(0.2122, abs=1e-4)
    assert kernels.allreduce_ms(pcie, 2, m) == pytest.approx(0.0606, abs=1e-4)
    assert kernels.allreduce_ms(pcie, 1, m) == 0.0
    # a tp between measured counts takes the next larger count's figures; past 8, 8's
    assert kernels.pcie_allreduce_alpha_beta(pcie, 3) == (12.41, 19.56)
    assert kernels.pcie_allreduce_alpha_beta(pcie, 16) == (24.53, 9.78)
    # Gen5 hosts are not measured: the same server figures
    gen5 = CAT.links["pcie-gen5-x16"]
    assert kernels.pcie_allreduce_alpha_beta(gen5, 8) == (24.53, 9.78)
    # the model before: a ring at the link's nominal 32 GB/s and 5 us per hop
    old_ring = 2 * 7 * 5e-3 + 1.75 * m / 32e9 * 1e3
    assert kernels.allreduce_ms(pcie, 8, m) > 1.6 * old_ring  # 0.212 vs 0.127 ms
    # NVLink is untouched: the one-/two-shot alpha-beta minimum
    nv = CAT.links["nvlink4"]
    assert kernels.allreduce_ms(nv, 8, m) < kernels.allreduce_ms(pcie, 2, m)


def test_tp_over_pcie_scales_worse_than_over_nvlink():
    """Per-GPU decode throughput of Llama-2-70B FP8 on L40S falls from tp 4 to tp 8 (the
    all-reduces cross the host), as NVIDIA's DLI course runs measured (1,516 tok/s at tp 4
    vs 1,409 at tp 8 over all GPUs, 128/128: 0.46x per GPU); over NVLink on H100 it
    holds up better."""

    def per_gpu(gpu: str, tp: int) -> float:
        r = rl.build_replica(CAT, "llama-2-70b", gpu, tp=tp, dtype="fp8", engine="trtllm")
        return 256 / rl.decode_step_ms(r, 256, 1024) / tp

    l40s = per_gpu("l40s", 8) / per_gpu("l40s", 4)
    h100 = per_gpu("h100-sxm5-80gb", 8) / per_gpu("h100-sxm5-80gb", 4)
    assert l40s < 0.6
    assert h100 > l40s + 0.1
