"""Cost model v2: DOMAIN.md section 8's facts, each as a worked test."""

from __future__ import annotations

import math

import pytest

from catalog.loader import load_catalog
from catalog.schema import Dtype
from planner import architecture as arch
from planner import engines
from planner import kernels as kn
from planner import roofline as rl
from planner.errors import PlanningError

CAT = load_catalog()


def test_a_step_is_a_sum_of_kernels_not_one_roofline() -> None:
    # 70B at batch ~500: the GEMMs are compute-bound, attention bandwidth-bound, so the
    # single roofline max(all FLOPs, all bytes) undercounts by 1.25-1.5x (1.30x).
    r = rl.build_replica(CAT, "llama-3.1-70b", "h100-sxm5-80gb", tp=8)
    c = r.coefficients
    batch, context = 500, 2000
    flops = batch * (c.dense_flops_per_token + c.decode_attn_per_ctx * c.context_weight(context))
    bytes_ = c.dense_weight_bytes + batch * c.kv_held_bytes(context)
    # (both at the step's measured dense GEMM rate; the elementwise kernels come on top)
    rate = c.dense_gemm_per_ms(batch)
    single = max(flops / rate, bytes_ / c.w_per_ms)
    summed = rl.decode_step_ms(r, batch, context, include_overhead=False)
    assert 1.25 <= summed / single <= 1.5
    k = rl.step_kernels(r, batch, context)
    ew = batch * c.elementwise_bytes_per_token / c.w_per_ms
    assert k.gemm_ms == pytest.approx(batch * c.dense_flops_per_token / rate + ew)
    assert k.attention_ms == pytest.approx(batch * c.kv_held_bytes(context) / c.w_per_ms)
    assert k.total_ms == pytest.approx(rl.decode_step_ms(r, batch, context))


def test_gqa_heads_replicate_beyond_kv_heads_and_mla_latent_is_whole_per_rank() -> None:
    llama = CAT.models["llama-3.1-70b"]  # 8 KV heads
    assert arch.kv_replication(llama, 1) == 1.0
    assert arch.kv_replication(llama, 8) == 1.0
    assert arch.kv_replication(llama, 16) == 2.0  # each rank still holds a whole head
    ds = CAT.models["deepseek-v3"]
    assert arch.kv_replication(ds, 8) == 8.0
    assert arch.kv_bytes_per_token_held(ds, "fp8", 8) == 35_136 * 8
    with pytest.raises(ValueError):
        arch.kv_replication(llama, 0)


def test_deepseek_v3_on_8_h200_holds_hundreds_not_thousands_of_sequences() -> None:
    r = rl.build_replica(CAT, "deepseek-v3", "h200-sxm-141gb", tp=8, dtype="fp8", kv_dtype="fp8")
    n = rl.max_resident_batch(r, 2300)
    assert n == math.floor(rl.kv_capacity_bytes(r) / (2300 * 35_136 * 8))
    # DOMAIN.md's "about 480" reads the H200's 141 GB as 141e9 bytes and keeps 1 GB per
    # GPU; its driver reports 143,771 MiB = 150.75e9 bytes and vLLM's start-up profile
    # keeps 5.81 GB per GPU at tp 8 (planner.engines.activation_reserve_gb), so vLLM's
    # 0.92 of it, less that and 84.1 GB of weights per GPU (the embedding, lm_head and
    # routers in BF16), holds 48.8 GB of latents: 603 sequences of 2,300 tokens (it was
    # 4,344 with a sharded latent)
    reserve_gb = engines.activation_reserve_gb(engines.engine_profile("vllm"), r.model, 8, r.gpu)
    assert reserve_gb == pytest.approx((3.58 + 1.26 * 65_536 / 45_056) * 2**30 / 1e9)
    free_per_gpu = 143_771 * 2**20 * 0.92 - reserve_gb * 1e9 - rl.replica_weight_bytes(r) / 8
    assert n == math.floor(free_per_gpu / (2300 * 35_136)) == 603
    sharded = math.floor(rl.kv_capacity_bytes(r) / (2300 * 35_136))
    assert sharded == 8 * n or sharded // 8 == n


def test_mla_decodes_in_the_absorbed_form() -> None:
    ds = CAT.models["deepseek-v3"]
    assert arch.decode_attention_flops_per_context_token(ds) == 278_528
    naive = arch.attention_flops_per_context_token(ds)
    assert naive == 2 * 128 * (128 + 64 + 128)  # prefill keeps the naive form
    llama = CAT.models["llama-3.1-8b"]
    assert arch.decode_attention_flops_per_context_token(
        llama
    ) == arch.attention_flops_per_context_token(llama)


def test_attention_runs_at_the_kernels_precision_per_engine() -> None:
    vllm = rl.build_replica(CAT, "llama-3.1-8b", "h100-sxm5-80gb", dtype="fp8", kv_dtype="fp8")
    assert vllm.attention_dtype == Dtype.BF16
    c = vllm.coefficients
    # fp8 GEMMs: twice the bf16 peak x H100's measured FP8 GEMM efficiency with vLLM
    eff = kn.fp8_gemm_efficiency(CAT.gpus["h100-sxm5-80gb"], "vllm")
    assert c.f_gemm_per_ms == pytest.approx(2 * eff * c.f_attn_per_ms, rel=0.01)
    trt = rl.build_replica(
        CAT, "llama-3.1-8b", "h100-sxm5-80gb", dtype="fp8", kv_dtype="fp8", engine="trtllm"
    )
    assert trt.attention_dtype == Dtype.FP8
    # FP8 attention runs at the FP8 peak x MFU; FP8 weight GEMMs also x their measured
    # efficiency (TensorRT-LLM on H100: 0.741)
    assert trt.coefficients.f_gemm_per_ms == pytest.approx(0.741 * trt.coefficients.f_attn_per_ms)
    # attention-heavy prefill is slower when attention runs at bf16
    assert rl.prefill_ms(vllm, 32_000) > rl.prefill_ms(
        rl.build_replica(
            CAT,
            "llama-3.1-8b",
            "h100-sxm5-80gb",
            dtype="fp8",
            kv_dtype="fp8",
            engine="trtllm",
            memory_utilization=vllm.memory_utilization,
            activation_reserve_gb=vllm.activation_reserve_gb,
        ),
        32_000,
    )
    with pytest.raises(PlanningError, match="engine"):
        rl.build_replica(CAT, "llama-3.1-8b", "h100-sxm5-80gb", engine="nope")


def test_token_budget_semantics_per_engine() -> None:
    vllm, sglang = engines.engine_profile("vllm"), engines.engine_profile("sglang")
    # the 80/20 agent pool: a chunk of 256 with 48 decodes
    assert engines.launch_token_budget(vllm, 256, 48) == 304
    assert engines.launch_token_budget(sglang, 256, 48) == 256
    assert engines.engine_profile("TensorRT-LLM").name == "trtllm"
    with pytest.raises(PlanningError, match="chunk_budget_tokens"):
        engines.launch_token_budget(vllm, 0, 1)


def test_collectives_are_one_shot_when_small_and_bandwidth_bound_when_large() -> None:
    nvswitch = CAT.links["nvlink4"]
    small = kn.allreduce_ms(nvswitch, 8, 8 * 8192 * 2)  # a small decode step
    # one-shot: 3.5 us (the measured small all-reduce, tests/test_kernel_floors.py) plus
    # 7 x 131,072 bytes at 450 GB/s = 2.04 us; not 2(tp-1) ring hops (49 us); times the
    # measured slowdown at 128 KiB (a quarter of the way from 1 at 64 KiB to 1.216 at 1 MiB)
    slow = kn.allreduce_slowdown(nvswitch, 131_072)
    assert slow == pytest.approx(1 + 0.216 / 4)
    assert small * 1e3 == pytest.approx((3.5 + 7 * 131_072 / 450e3) * slow)
    assert small * 1e3 < 2 * 7 * nvswitch.latency_us
    large = 64e6
    two_shot = 2 * nvswitch.latency_us * 1e-3 + 2 * 7 / 8 * large / (
        nvswitch.bandwidth_gb_per_s * 1e6
    )
    assert kn.allreduce_ms(nvswitch, 8, large) == pytest.approx(
        two_shot * kn.allreduce_slowdown(nvswitch, large)
    )
    pcie = CAT.links["pcie-gen4-x16"]
    # PCIe: NCCL's ring as measured on a PCIe server (tests/test_kernel_floors.py)
    t0_us, bus = kn.pcie_allreduce_alpha_beta(pcie, 8)
    ring = t0_us * 1e-3 + 2 * 7 / 8 * 1e6 / (bus * 1e6)
    assert kn.allreduce_ms(pcie, 8, 1e6) == pytest.approx(ring)
    assert kn.allreduce_ms(pcie, 1, 1e6) == 0.0


def test_what_vendors_run_fits() -> None:
    # TensorRT-LLM runs Llama-3.1-70B FP8 at tp 1 on H100 80GB and BF16 at tp 2 on A100 80GB
    fp8 = rl.build_replica(
        CAT, "llama-3.1-70b", "h100-sxm5-80gb", tp=1, dtype="fp8", kv_dtype="fp8"
    )
    assert rl.kv_capacity_tokens(fp8) > 8192
    bf16 = rl.build_replica(CAT, "llama-3.1-70b", "a100-sxm-80gb", tp=2, dtype="bf16")
    assert rl.kv_capacity_tokens(bf16) > 8192
    # and L40S at tp 4 over PCIe
    l40s = rl.build_replica(CAT, "llama-3.1-70b", "l40s", tp=4, dtype="fp8", kv_dtype="fp8")
    assert l40s.scale_up_link is not None and l40s.scale_up_link.kind == "pcie"


def test_grouped_expert_gemms_run_below_dense_efficiency() -> None:
    assert kn.grouped_gemm_efficiency(0) == 0.0
    assert kn.grouped_gemm_efficiency(kn.MOE_HALF_EFFICIENCY_TOKENS) == pytest.approx(0.5)
    assert kn.grouped_gemm_efficiency(2048) > 0.99
    r = rl.build_replica(CAT, "mixtral-8x7b", "h100-sxm5-80gb", tp=2)
    c = r.coefficients
    # a decode batch of 64 reads every expert at the grouped kernels' bandwidth, measured
    # on H100 at the dense MBU's (tests/test_kernel_floors.py), assumed lower elsewhere
    assert c.moe_read_efficiency == kn.moe_read_efficiency(r.gpu) == 1.0
    expected = c.experts_touched(64) * c.expert_bytes_all_layers / (c.w_per_ms * 1.0)
    # plus the MoE layers' fixed cost: Mixtral's 32 layers x H100's vLLM floor with 8
    # experts per GPU, 36.1 us (53.3 with DeepSeek's 256)
    assert c.moe_floor_ms == pytest.approx(32 * 36.1e-3)
    assert c.moe_ms(64) == pytest.approx(
        c.moe_floor_ms
        + max(
            expected,
            64
            * c.routed_flops_per_token
            / (c.f_gemm_per_ms * kn.grouped_gemm_efficiency(64 * 2 / 8)),
        )
    )
    assert rl.step_kernels(r, 64, 1000).moe_ms == pytest.approx(c.moe_ms(64))
    dense = rl.build_replica(CAT, "llama-3.1-8b", "h100-sxm5-80gb")
    assert dense.coefficients.moe_ms(64) == 0.0
