"""Roofline step times, memory, chunk budgets and KV transfer (DOMAIN.md sections 2-4)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from first_order_support import first_order_gpu

from catalog.loader import build_catalog, load_catalog, with_entries
from catalog.schema import Catalog, Gpu, Model
from planner import architecture as arch
from planner import roofline as rl
from planner.collectives import allreduce_slowdown
from planner.errors import DoesNotFitError, PlanningError, UnknownEntryError

H100 = "h100-sxm5-80gb"
LLAMA = "llama-2-7b"


def _model(model_id: str, **fields: object) -> Model:
    base = {
        "id": model_id,
        "name": model_id,
        "num_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_kv_heads": 8,
        "head_dim": 128,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "max_context_tokens": 131072,
        "reference": {
            "total_params_b": 8.03,
            "active_params_b": 8.03,
            "kv_bytes_per_token_bf16": 131072,
        },
        "sources": ["test"],
    }
    base.update(fields)
    return Model.model_validate(base)


# Llama-3.1-style models of several sizes, an MoE and a sliding-window model (test-only ids).
GQA8 = _model("t-gqa8-8b")
BIG70 = _model(
    "t-dense-70b", num_layers=80, hidden_size=8192, num_attention_heads=64, intermediate_size=28672
)
BIG405 = _model(
    "t-dense-405b",
    num_layers=126,
    hidden_size=16384,
    num_attention_heads=128,
    intermediate_size=53248,
)
TINY_MOE = _model(
    "t-moe",
    moe={"num_experts": 8, "experts_per_token": 2, "expert_intermediate_size": 14336},
)
WINDOWED = _model("t-window", sliding_window={"window_tokens": 1024, "windowed_layers": 16})
BF16_ONLY = _model("t-bf16-only", weight_dtypes=["bf16"])


def _catalog() -> Catalog:
    base = load_catalog()
    h100 = base.gpus[H100]
    no_fp8 = h100.model_copy(update={"id": "t-no-fp8", "fp8_dense_tflops": None})
    pcie_only = h100.model_copy(
        update={"id": "t-pcie-only", "scale_up_link": None, "scale_up_domain_size": 1}
    )
    gpus: dict[str, Gpu] = {g.id: g for g in (no_fp8, pcie_only)}
    models = {m.id: m for m in (GQA8, BIG70, BIG405, TINY_MOE, WINDOWED, BF16_ONLY)}
    return with_entries(base, {"gpus": gpus, "models": models})


CAT = _catalog()
#: DOMAIN.md's worked checks are first-order: one GEMM rate whatever the step's tokens, so
#: their H100's GEMM gain by token count is 1 (tests/test_gemm_token_gain.py has the gain)
#: and its GEMMs run at the MFU (no measured kernel rate: an architecture nothing measures;
#: tests/test_gemm_peak_share.py has the lift). The elementwise kernels between the GEMMs,
#: which DOMAIN.md's figures leave out, are added where a check prices a whole step
#: (:func:`elementwise_ms`).
FIRST_ORDER = build_catalog(
    {
        "gpus": {
            **CAT.gpus,
            H100: first_order_gpu(CAT.gpus[H100]),
        },
        "models": dict(CAT.models),
        "workloads": dict(CAT.workloads),
        "links": dict(CAT.links),
    }
)


def elementwise_ms(replica: rl.Replica, tokens: float) -> float:
    """The elementwise kernels of ``tokens`` tokens (ms): bytes / W_eff."""
    per_token = arch.elementwise_bytes_per_token(replica.model, replica.tp)
    return tokens * per_token / replica.coefficients.w_per_ms


@pytest.fixture
def llama() -> rl.Replica:
    """llama-2-7b on one H100 at DOMAIN.md's worked inputs (MFU 0.5, MBU 0.7; the catalog's
    2 ms overhead; no GEMM gain by token count): H100's analogy factors, which the shipped
    catalog scales by its measured level (test_build_uses_catalog_defaults)."""
    return rl.build_replica(FIRST_ORDER, LLAMA, H100, mfu=0.5, mbu=0.7)


# --------------------------------------------------------------------------- building


def test_build_uses_catalog_defaults(llama: rl.Replica) -> None:
    eff = CAT.gpus[H100].efficiency
    shipped = rl.build_replica(CAT, LLAMA, H100)
    assert shipped.prefill_mfu == eff.prefill_mfu
    assert shipped.decode_mbu == eff.decode_mbu
    assert llama.prefill_mfu == 0.5 and llama.decode_mbu == 0.7
    assert llama.step_overhead_ms == eff.step_overhead_ms
    assert llama.overlap_factor == eff.overlap_factor
    assert llama.kv_dtype == "bf16"
    assert llama.scale_up_link is None
    assert llama.memory_utilization == rl.DEFAULT_MEMORY_UTILIZATION == 0.92  # vLLM profile
    # vLLM keeps what its start-up profile measures: 1.79 GiB outside torch and the
    # activation peak, 1.26 GiB for Llama-3-8B scaled by 2 I + 4 H (planner.engines)
    assert llama.activation_reserve_gb == pytest.approx(
        (1.79 + 1.26 * (2 * 11_008 + 4 * 4_096) / 45_056) * 2**30 / 1e9
    )
    assert llama.activation_reserve_gb == pytest.approx(3.075, abs=1e-3)
    assert llama.engine == "vllm" and llama.attention_dtype == "bf16"


def test_build_overrides_per_call() -> None:
    r = rl.build_replica(
        CAT,
        LLAMA,
        H100,
        tp=2,
        dtype="fp8",
        kv_dtype="fp8",
        mfu=0.4,
        mbu=0.8,
        step_overhead_ms=1.0,
        overlap_factor=0.5,
    )
    assert (r.tp, r.weight_dtype, r.kv_dtype) == (2, "fp8", "fp8")
    assert (r.prefill_mfu, r.decode_mbu, r.step_overhead_ms, r.overlap_factor) == (
        0.4,
        0.8,
        1.0,
        0.5,
    )
    assert r.scale_up_link is not None and r.scale_up_link.id == CAT.gpus[H100].scale_up_link


def _issue_fields(err: PlanningError) -> list[str]:
    return [field for field, _ in err.issues]


@pytest.mark.parametrize(
    ("kwargs", "error", "field", "words"),
    [
        ({"model_id": "nope"}, UnknownEntryError, "model", "nope"),
        ({"gpu_id": "nope"}, UnknownEntryError, "gpu", "nope"),
        ({"tp": 3}, PlanningError, "tp", "power of two"),
        ({"tp": 0}, PlanningError, "tp", "power of two"),
        ({"tp": 16}, PlanningError, "tp", "largest replica"),
        ({"gpu_id": "t-pcie-only", "tp": 16}, PlanningError, "tp", "over PCIe"),
        ({"dtype": "fp4"}, PlanningError, "dtype", "fp4"),
        ({"dtype": "int4"}, PlanningError, "dtype", "unknown dtype"),
        ({"gpu_id": "t-no-fp8", "dtype": "fp8"}, PlanningError, "dtype", "no fp8"),
        ({"model_id": "t-bf16-only", "dtype": "fp8"}, PlanningError, "dtype", "not served"),
        ({"kv_dtype": "fp4"}, PlanningError, "kv_dtype", "fp4"),
        ({"mfu": 0.0}, PlanningError, "mfu", "(0, 1]"),
        ({"mfu": 1.5}, PlanningError, "mfu", "(0, 1]"),
        ({"mbu": -0.1}, PlanningError, "mbu", "(0, 1]"),
        ({"overlap_factor": 1.2}, PlanningError, "overlap_factor", "[0, 1]"),
        ({"step_overhead_ms": -1.0}, PlanningError, "step_overhead_ms", ">= 0"),
    ],
)
def test_build_rejects_bad_input_naming_the_argument(
    kwargs: dict, error: type[PlanningError], field: str, words: str
) -> None:
    args = {"model_id": LLAMA, "gpu_id": H100} | kwargs
    with pytest.raises(error) as info:
        rl.build_replica(CAT, **args)
    assert _issue_fields(info.value) == [field]
    assert words in str(info.value)


def test_real_catalog_pcie_gpus_run_tp_over_pcie() -> None:
    # Vendors run L40S at tp 4 and 8 and H100 PCIe/NVL beyond their bridged pairs:
    # TP over PCIe is slower, not impossible (DOMAIN.md section 8).
    cat = load_catalog()
    l40s = cat.gpus["l40s"]
    assert l40s.scale_up_domain_size == 1 and rl.max_tp(l40s) == l40s.server.gpus_per_server == 8
    r = rl.build_replica(cat, LLAMA, "l40s", tp=8, check_fit=False)
    assert r.scale_up_link is not None and r.scale_up_link.kind == "pcie"
    nvl = rl.build_replica(cat, LLAMA, "h100-nvl-94gb", tp=2, check_fit=False)
    assert nvl.scale_up_link is not None and nvl.scale_up_link.kind == "scale_up"
    nvl4 = rl.build_replica(cat, LLAMA, "h100-nvl-94gb", tp=4, check_fit=False)
    assert nvl4.scale_up_link is not None and nvl4.scale_up_link.kind == "pcie"
    # the same all-reduce costs more over PCIe than over the NVLink bridge
    assert rl.tp_comm_ms(nvl4, 64) > rl.tp_comm_ms(
        dataclasses.replace(nvl4, scale_up_link=nvl.scale_up_link), 64
    )
    with pytest.raises(PlanningError, match="scale-up domain of l40s"):
        rl.build_replica(cat, LLAMA, "l40s", tp=16, check_fit=False)


def test_model_too_big_for_tp_names_tp_and_the_gb() -> None:
    with pytest.raises(DoesNotFitError) as info:
        rl.build_replica(CAT, BIG70.id, H100, tp=1)
    assert _issue_fields(info.value) == ["tp"]
    text = str(info.value)
    assert "GB" in text and "78.7 GB usable" in text and "tp=2 would fit" in text
    assert "(85.5 GB x 0.92 per GPU)" in text  # the 81,559 MiB the driver reports
    weights_gb = arch.weight_bytes(BIG70, "bf16") / 1e9
    assert f"{weights_gb:.1f} GB weights" in text
    rl.build_replica(CAT, BIG70.id, H100, tp=2)  # fits


def test_model_too_big_for_the_whole_domain_names_pp_then_gpu() -> None:
    with pytest.raises(DoesNotFitError) as info:
        rl.build_replica(CAT, BIG405.id, H100, tp=8)
    assert _issue_fields(info.value) == ["pp"]  # stages across nodes would fit
    assert "629.4 GB usable" in str(info.value) and "(pp=2) would fit" in str(info.value)
    rl.build_replica(CAT, BIG405.id, H100, tp=8, pp=2)  # two stages fit
    rl.build_replica(CAT, BIG405.id, H100, tp=8, dtype="fp8")  # fp8 weights fit
    rl.build_replica(CAT, BIG405.id, H100, tp=8, check_fit=False)  # no check asked
    # too big even for the most stages offered: the GPU is named
    with pytest.raises(DoesNotFitError) as info:
        rl.build_replica(CAT, BIG405.id, "a10g", tp=4)
    assert _issue_fields(info.value) == ["gpu"]


def test_replica_validates_its_own_fields(llama: rl.Replica) -> None:
    with pytest.raises(PlanningError, match="mbu"):
        dataclasses.replace(llama, decode_mbu=0.0)
    with pytest.raises(PlanningError, match="tp"):
        dataclasses.replace(llama, tp=2)  # no scale-up link given


# --------------------------------------------------------------------------- rates


def test_effective_rates(llama: rl.Replica) -> None:
    assert rl.effective_flops(llama) == pytest.approx(494.7e12)
    assert rl.effective_bandwidth_bytes_per_s(llama) == pytest.approx(3.35e12 * 0.7)
    r8 = rl.build_replica(CAT, LLAMA, H100, tp=8, dtype="fp8", mfu=0.5, mbu=0.7)
    # FP8 GEMMs at H100's measured share of the doubled peak with vLLM (0.603)
    assert rl.effective_flops(r8) == pytest.approx(8 * 1978.9e12 * 0.5 * 0.603)
    assert rl.effective_bandwidth_bytes_per_s(r8) == pytest.approx(8 * 3.35e12 * 0.7)


def test_tp_comm(llama: rl.Replica) -> None:
    assert rl.tp_comm_ms(llama, 4096) == 0.0
    r8 = rl.build_replica(CAT, LLAMA, H100, tp=8)
    link = r8.scale_up_link
    assert link is not None
    bw, alpha = link.bandwidth_gb_per_s * 1e9, link.latency_us * 1e-6

    def algorithms(message: float) -> tuple[float, float, float]:
        ring = 2 * 7 / 8 * message / bw + 2 * 7 * alpha
        one_shot = alpha + 7 * message / bw
        two_shot = 2 * alpha + 2 * 7 / 8 * message / bw
        return ring, one_shot, two_shot

    # each algorithm's time x the engines' measured slowdown at the message's size
    # (tests/test_gemm_peak_share.py); 1 up to 64 KiB
    def slow(tokens: int) -> float:
        return allreduce_slowdown(link, tokens * 4096 * 2)

    # a decode-sized message on NVSwitch: one-shot, a few microseconds per all-reduce
    ring, one_shot, two_shot = algorithms(8 * 4096 * 2)
    assert one_shot < two_shot < ring
    assert slow(8) == 1.0
    assert rl.tp_comm_ms(r8, 8) == pytest.approx(2 * 32 * one_shot * 1e3)
    assert one_shot * 1e6 < 5.0
    ring, one_shot, two_shot = algorithms(100 * 4096 * 2)
    assert rl.tp_comm_ms(r8, 100) == pytest.approx(2 * 32 * two_shot * slow(100) * 1e3)
    # a prefill-sized message is bandwidth-bound: two-shot (= ring bytes, fewer hops)
    ring, one_shot, two_shot = algorithms(8192 * 4096 * 2)
    expected = 2 * 32 * min(ring, one_shot, two_shot) * slow(8192) * 1e3
    assert rl.tp_comm_ms(r8, 8192) == pytest.approx(expected)
    assert two_shot < one_shot
    assert rl.tp_comm_ms(r8, 0) == 0.0


# --------------------------------------------------------------------------- prefill


def test_prefill_worked_check_129_ms(llama: rl.Replica) -> None:
    # DOMAIN.md section 4's "129 ms prefill" (4,096-token llama-2-7b prompt, one H100,
    # MFU 0.5) charges every token the full 4,096-token context (15.62 GFLOP/token).
    # The elementwise kernels between the GEMMs (4.2 MB per token: 7.35 ms) come on top.
    ew = elementwise_ms(llama, 4096)
    assert ew == pytest.approx(4096 * 32 * (8 * 4096 + 3 * 11008) * 2 / 2_345e9 * 1e3)
    full = rl.prefill_ms(llama, 4096, include_overhead=False, causal_skip=False)
    assert round(full - ew) == 129
    assert full - ew == pytest.approx(
        4096 * arch.flops_per_token(llama.model, 4096) / 494.7e12 * 1e3
    )
    # The causal mean context 2,048 (14.55 GFLOP/token) gives 120.5 ms.
    causal = rl.prefill_ms(llama, 4096, include_overhead=False)
    assert round(causal - ew, 1) == 120.5
    assert causal - ew == pytest.approx(4096 * 14.5506e9 / 494.7e12 * 1e3, rel=1e-4)
    assert rl.prefill_ms(llama, 4096) == pytest.approx(causal + llama.step_overhead_ms)


def test_prefill_never_below_one_weight_read(llama: rl.Replica) -> None:
    floor = rl.weight_read_ms(llama)
    # one token: the weight read, plus its own KV written/read by attention
    kv_ms = 524_288 / (3.35e12 * 0.7) * 1e3
    assert rl.prefill_ms(llama, 1, include_overhead=False) == pytest.approx(
        floor + kv_ms + elementwise_ms(llama, 1)
    )
    # every weight but the input embedding table (gathered by row): 13.48 - 0.26 GB
    read = arch.weight_bytes(llama.model, "bf16") - arch.input_embedding_bytes(llama.model)
    assert arch.input_embedding_bytes(llama.model) == 32_000 * 4_096 * 2
    assert floor == pytest.approx(read / (3.35e12 * 0.7) * 1e3)


def test_prefill_with_cache_computes_only_new_tokens(llama: rl.Replica) -> None:
    # 1,024 new tokens after 3,072 cached: mean context 3,072 + 512.
    t = rl.prefill_ms(llama, 4096, 3072, include_overhead=False)
    expected = 1024 * arch.flops_per_token(llama.model, 3584) / rl.effective_flops(llama) * 1e3
    assert t == pytest.approx(expected + elementwise_ms(llama, 1024))
    assert rl.prefill_ms(llama, 4096, 4096) == 0.0
    with pytest.raises(PlanningError, match="cached_tokens"):
        rl.prefill_ms(llama, 100, 200)


# --------------------------------------------------------------------------- decode


def test_decode_step_reads_weights_and_kv(llama: rl.Replica) -> None:
    w_eff = 3.35e12 * 0.7
    weights = arch.weight_bytes(llama.model, "bf16") - arch.input_embedding_bytes(llama.model)
    t1 = rl.decode_step_ms(llama, 1, 0)
    # an empty context still pays the attention kernel's per-(sequence, KV head) cost
    # (vLLM's BF16 kernel on H100: 32 layers x 32 heads x 13.37 ns, tests/test_decode_attention.py)
    assert llama.coefficients.attn_pair_ms == pytest.approx(32 * 32 * 13.37e-6)
    ew = elementwise_ms(llama, 1)
    assert t1 == pytest.approx(weights / w_eff * 1e3 + llama.coefficients.attn_pair_ms + 2.0 + ew)
    t = rl.decode_step_ms(llama, 16, 2048, include_overhead=False)
    expected = (weights + 16 * 2048 * 524_288) / w_eff * 1e3 + elementwise_ms(llama, 16)
    assert t == pytest.approx(expected)


def test_decode_step_never_below_compute(llama: rl.Replica) -> None:
    # at a huge batch the weight GEMMs are compute-bound; attention is its own kernel
    batch = 5000
    gemm = batch * arch.weight_flops_per_token(llama.model) / rl.effective_flops(llama) * 1e3
    attn_flops = batch * arch.attention_flops_per_token(llama.model, 10)
    # 10-token contexts: the kernel's per-(sequence, KV head) cost exceeds the KV bytes'
    kv_ms = llama.coefficients.kv_read_ms_per_seq(10 * 524_288)
    assert kv_ms > 10 * 524_288 / (3.35e12 * 0.7) * 1e3
    attn = max(attn_flops / 494.7e12 * 1e3, batch * kv_ms)
    ew = elementwise_ms(llama, batch)
    got = rl.decode_step_ms(llama, batch, 10, include_overhead=False)
    assert got == pytest.approx(gemm + ew + attn)
    compute = batch * arch.flops_per_token(llama.model, 10) / rl.effective_flops(llama) * 1e3
    assert rl.decode_step_ms(llama, batch, 10, include_overhead=False) >= compute


def test_decode_step_rejects_empty_batch(llama: rl.Replica) -> None:
    with pytest.raises(PlanningError, match="batch"):
        rl.decode_step_ms(llama, 0, 100)


def test_moe_decode_reads_expected_distinct_experts() -> None:
    r = rl.build_replica(CAT, TINY_MOE.id, H100, tp=2)
    b_w = 2.0
    expert = arch.expert_param_count(TINY_MOE) * b_w
    total = arch.weight_bytes(TINY_MOE, "bf16") - arch.input_embedding_bytes(TINY_MOE)
    dense = total - 32 * 8 * expert
    assert rl.weight_bytes_read_per_step(r, 1) == pytest.approx(dense + 32 * 2 * expert)
    expected_b4 = 8 * (1 - (1 - 2 / 8) ** 4)
    assert rl.weight_bytes_read_per_step(r, 4) == pytest.approx(dense + 32 * expected_b4 * expert)
    assert rl.weight_bytes_read_per_step(r, 10_000) == pytest.approx(total)
    assert rl.decode_step_ms(r, 1, 0) < rl.decode_step_ms(r, 64, 0)


# --------------------------------------------------------------------------- memory


def test_kv_capacity(llama: rl.Replica) -> None:
    # an "80GB" H100 reports 81,559 MiB (85.52e9 bytes): vLLM takes 0.92 of that
    free = (
        81_559 * 2**20 / 1e9 * 0.92
        - llama.activation_reserve_gb
        - arch.weight_bytes(llama.model, "bf16") / 1e9
    )
    assert rl.kv_capacity_bytes(llama) == pytest.approx(free * 1e9)
    assert rl.kv_capacity_tokens(llama) == math.floor(free * 1e9 / 524_288) == 118_498
    assert rl.max_resident_batch(llama, 4096) == math.floor(free * 1e9 / (4096 * 524_288)) == 28
    tight = dataclasses.replace(llama, memory_utilization=0.1)
    assert rl.kv_capacity_tokens(tight) == 0


def test_sliding_window_raises_resident_batch() -> None:
    full = rl.build_replica(CAT, GQA8.id, H100)
    windowed = rl.build_replica(CAT, WINDOWED.id, H100)
    assert rl.kv_capacity_tokens(full) == rl.kv_capacity_tokens(windowed)
    assert rl.max_resident_batch(windowed, 32_768) > rl.max_resident_batch(full, 32_768)
    per_seq = 16 * 32_768 * 4096 + 16 * 1024 * 4096  # 4,096 B per token per layer
    assert rl.max_resident_batch(windowed, 32_768) == math.floor(
        rl.kv_capacity_bytes(windowed) / per_seq
    )


# --------------------------------------------------------------------------- chunked prefill


def test_free_chunk_worked_check(llama: rl.Replica) -> None:
    # DOMAIN.md section 3: 20.1 ms x 494.5 TFLOP/s / 14.55 GFLOP = 683 tokens.
    assert rl.max_free_chunk_tokens(llama, 20.1, 2048) == 683


def test_mixed_step_overlap(llama: rl.Replica) -> None:
    decode = rl.decode_step_ms(llama, 32, 2048)
    assert rl.mixed_step_ms(llama, 32, 2048, 0, 0) == pytest.approx(decode)
    c = llama.coefficients
    # the GEMMs run over decodes and chunk together; the two attentions share a kernel
    gemm = c.gemm_ms(32 + 512)
    a_d = max(c.decode_attention_parts_ms(32, 2048))
    a_c = max(c.chunk_attention_parts_ms(512, 1000))
    perfect = dataclasses.replace(llama, overlap_factor=1.0)
    none = dataclasses.replace(llama, overlap_factor=0.0)
    assert rl.mixed_step_ms(perfect, 32, 2048, 512, 1000, include_overhead=False) == (
        pytest.approx(gemm + max(a_d, a_c))
    )
    assert rl.mixed_step_ms(none, 32, 2048, 512, 1000, include_overhead=False) == pytest.approx(
        gemm + a_d + a_c
    )
    o = llama.overlap_factor
    assert rl.mixed_step_ms(llama, 32, 2048, 512, 1000) == pytest.approx(
        gemm + max(a_d, a_c) + (1 - o) * min(a_d, a_c) + llama.step_overhead_ms
    )
    # a small chunk rides on the bandwidth-bound GEMM for free
    assert rl.mixed_step_ms(perfect, 32, 2048, 64, 0) < decode * 1.05


def test_chunk_compute(llama: rl.Replica) -> None:
    t = rl.chunk_compute_ms(llama, 512, 1000)
    assert t == pytest.approx(512 * arch.flops_per_token(llama.model, 1256) / 494.7e12 * 1e3)
    assert rl.chunk_compute_ms(llama, 0, 1000) == 0.0


def test_shrinking_schedule_holds_step_time(llama: rl.Replica) -> None:
    chunks = rl.shrinking_chunk_schedule(llama, 4096, 20.1)
    assert sum(chunks) == 4096
    assert chunks == sorted(chunks, reverse=True)  # attention grows, chunks shrink
    s = 0
    for t in chunks[:-1]:
        assert rl.chunk_compute_ms(llama, t, s) <= 20.1 < rl.chunk_compute_ms(llama, t + 1, s)
        s += t
    # The first chunk is close to T* at its own context.
    assert chunks[0] == rl._largest_chunk_within(llama, 20.1, 0, 4096)
    cached = rl.shrinking_chunk_schedule(llama, 4096, 20.1, cached_tokens=2048)
    assert sum(cached) == 2048
    assert cached[0] < chunks[0]


def test_chunk_of_at_least_one_token_under_a_tiny_budget(llama: rl.Replica) -> None:
    assert rl.shrinking_chunk_schedule(llama, 3, 1e-6) == [1, 1, 1]


def test_fixed_chunk_ttft(llama: rl.Replica) -> None:
    """Each chunk rides one mixed step (GEMMs over decodes and chunk, shared attention,
    overhead). llama-2-7b bf16 on one H100: 2N = 13.477 GFLOP/token, F = 494.7 TFLOP/s,
    W = 2,345 GB/s, 512 KiB of KV per token, o = 0.8, 2 ms per step; 4,096 tokens in
    four chunks of 1,024."""
    c = llama.coefficients
    gemm_all = 4096 * 13_476_831_232 / 494.7e12 * 1e3  # 111.59 ms, all chunks compute-bound
    attention_all = 16_384 * 32 * 4096**2 / 2 / 494.7e12 * 1e3  # causal: 8.890 ms
    assert gemm_all + attention_all == pytest.approx(rl.chunk_compute_ms(llama, 4096, 0))
    # no decodes: the whole prompt's prefill compute and one overhead per step (each
    # chunk's attention compute is over its KV read: 0.556 > 0.229 ms at the first)
    assert c.chunk_attention_parts_ms(1024, 0)[0] > c.chunk_attention_parts_ms(1024, 0)[1]
    # and the elementwise kernels of all 4,096 tokens (7.35 ms)
    ew_all = elementwise_ms(llama, 4096)
    assert rl.chunked_prefill_ttft_ms(llama, 4096, 1024, 0, 0.0) == pytest.approx(
        gemm_all + attention_all + ew_all + 4 * 2.0
    )
    assert rl.chunked_prefill_ttft_ms(llama, 4096, 1024, 0, 0.0) - ew_all == pytest.approx(
        128.475, abs=1e-3
    )
    # 32 decodes at context 2,048: GEMMs over 1,056 tokens (28.77 ms), the decodes' KV
    # read a_d = 32 x 2,048 x 512 KiB / W = 14.65 ms over every chunk's attention
    # (<= 3.89 ms), which hides o of it: 4 (28.77 + 14.65 + 2) + 0.2 x 8.89
    gemm_step = 1056 * 13_476_831_232 / 494.7e12 * 1e3
    a_d = 32 * 2048 * 524_288 / 2_345e9 * 1e3
    assert a_d == pytest.approx(14.652, abs=1e-3)
    expected = 4 * (gemm_step + a_d + 2.0) + 0.2 * attention_all
    assert expected == pytest.approx(183.460, abs=1e-3)
    expected += 4 * elementwise_ms(llama, 1056)
    assert rl.chunked_prefill_ttft_ms(llama, 4096, 1024, 32, 2048.0) == pytest.approx(expected)
    # a remainder chunk is a step of its own: 4,100 tokens take five steps
    assert rl.chunked_prefill_ttft_ms(llama, 4100, 1024, 32, 2048.0) == pytest.approx(
        expected + rl.mixed_step_ms(llama, 32, 2048.0, 4, 4096)
    )
    # later fixed chunks are slower (attention grows)
    assert rl.mixed_step_ms(llama, 0, 0.0, 683, 3 * 683) > rl.mixed_step_ms(llama, 0, 0.0, 683, 0)


def test_shrinking_schedule_ttft(llama: rl.Replica) -> None:
    """With no decodes, any schedule of compute-bound chunks costs the prompt's prefill
    compute, its elementwise kernels and one step overhead per chunk: 120.48 + 7.35 +
    6 x 2 ms."""
    chunks = rl.shrinking_chunk_schedule(llama, 4096, 20.1)
    assert chunks == [727, 708, 690, 673, 657, 641]
    ttft = rl.shrinking_schedule_ttft_ms(llama, 4096, 20.1, 0, 0.0)
    ew = elementwise_ms(llama, 4096)
    assert ttft == pytest.approx(rl.chunk_compute_ms(llama, 4096, 0) + ew + 6 * 2.0)
    # each chunk's compute is within the budget, so each step within budget + its
    # elementwise kernels + overhead
    assert ttft <= 6 * (20.1 + 2.0) + ew


def test_chunk_kv_reread_exact() -> None:
    assert rl.chunk_kv_reread_tokens(4096, 512) == 14_336
    for s, t in [(4096, 512), (6000, 1000), (1024, 1), (512, 512)]:
        brute = sum(i * t for i in range(s // t))
        assert rl.chunk_kv_reread_tokens(s, t) == brute
    assert rl.chunk_kv_reread_tokens(100, 1000) == 0.0
    model = CAT.models[LLAMA]
    assert rl.chunk_kv_reread_bytes(model, 4096, 512) == 14_336 * 524_288


# --------------------------------------------------------------------------- KV transfer


@pytest.mark.parametrize(
    ("kv_per_token", "bandwidth", "expected_ms"),
    [
        (131_072, 400, 1.3),
        (131_072, 64, 8.4),
        (131_072, 25, 21.5),
        (524_288, 400, 5.4),
        (524_288, 64, 33.6),
        (524_288, 25, 85.9),
    ],
)
def test_kv_transfer_worked_check(kv_per_token: int, bandwidth: float, expected_ms: float) -> None:
    # DOMAIN.md section 4: a 4,096-token cache (GQA-8 0.537 GB, MHA 2.147 GB).
    assert round(rl.kv_transfer_ms(4096 * kv_per_token, bandwidth), 1) == expected_ms


def test_kv_transfer_latency_and_validation() -> None:
    assert rl.kv_transfer_ms(1e9, 100, latency_us=5.0) == pytest.approx(10.0 + 0.005)
    with pytest.raises(PlanningError, match="bandwidth"):
        rl.kv_transfer_ms(1e9, 0)


def test_exposed_transfer() -> None:
    # Fully hidden share capped by overlap_fraction.
    assert rl.exposed_transfer_ms(10.0, 100.0, 0.8, num_layers=32) == pytest.approx(2.0)
    # Capped by the prefill tail (L-1)/L x prefill.
    assert rl.exposed_transfer_ms(100.0, 10.0, 1.0, num_layers=2) == pytest.approx(95.0)
    # No streaming (one layer) or no overlap: all exposed.
    assert rl.exposed_transfer_ms(10.0, 100.0, 0.9) == 10.0
    assert rl.exposed_transfer_ms(10.0, 100.0, 0.0, num_layers=32) == 10.0
    assert rl.exposed_transfer_ms(0.0, 100.0, 0.5, num_layers=32) == 0.0
    with pytest.raises(PlanningError, match="overlap_fraction"):
        rl.exposed_transfer_ms(10.0, 100.0, 1.5, num_layers=32)
