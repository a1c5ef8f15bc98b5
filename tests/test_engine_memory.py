"""What an engine holds in memory: the device memory the driver reports, and the KV cache
each engine's admission reserves per request (planner.engines, planner.capacity)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from pydantic import ValidationError

from catalog.loader import load_catalog
from catalog.schema import Gpu
from planner import calibration as cb
from planner import engines
from planner import roofline as rl
from planner.calibration.predict import base_replica
from planner.capacity import replica_capacity
from planner.errors import PlanningError

CAT = load_catalog()


def test_admission_context_per_engine() -> None:
    """128 + 2,048 tokens: TensorRT-LLM reserves 2,176 tokens at admission, vLLM and SGLang
    hold 1,152 on average (they grow sequences into the cache)."""
    trt, vllm, sglang = (engines.engine_profile(n) for n in ("trtllm", "vllm", "sglang"))
    assert trt.reserves_max_output and not vllm.reserves_max_output
    assert not sglang.reserves_max_output
    assert engines.kv_admission_context_tokens(trt, 128, 2048) == 2176
    assert engines.kv_admission_context_tokens(vllm, 128, 2048) == 1152
    assert engines.kv_admission_context_tokens(sglang, 128, 2048) == 1152
    with pytest.raises(PlanningError) as info:
        engines.kv_admission_context_tokens(vllm, -1, 10)
    assert info.value.issues[0][0] == "prompt_tokens"


def test_gpu_memory_is_what_the_driver_reports() -> None:
    """An "80GB" H100 reports 81,559 MiB = 85,520,809,984 bytes; an H200 143,771 MiB; a GPU
    nobody has read keeps its nominal figure as decimal GB (192e9 bytes for MI300X), which
    is below what every read device reports."""
    h100, h200 = CAT.gpus["h100-sxm5-80gb"], CAT.gpus["h200-sxm-141gb"]
    assert rl.gpu_memory_bytes(h100) == 81_559 * 2**20 == 85_520_809_984
    assert rl.gpu_memory_bytes(h200) == 143_771 * 2**20
    assert CAT.gpus["mi300x"].reported_memory is None
    assert rl.gpu_memory_bytes(CAT.gpus["mi300x"]) == 192e9
    for gpu in CAT.gpus.values():
        if gpu.reported_memory is not None:
            assert rl.gpu_memory_bytes(gpu) >= gpu.memory_gb * 1e9  # nominal never above
            assert gpu.reported_memory.source.startswith("https://")


def test_a_reported_memory_far_from_the_nominal_is_refused() -> None:
    doc = CAT.gpus["h100-sxm5-80gb"].model_dump(mode="json")
    doc["reported_memory"] = {"mib": 40_000, "source": "https://example.org/typo"}
    with pytest.raises(ValidationError, match=r"reported_memory\.mib: 40000 MiB is 0\.52 x"):
        Gpu.model_validate(doc)
    doc["reported_memory"] = {"mib": 81_559, "source": ""}
    with pytest.raises(ValidationError):
        Gpu.model_validate(doc)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_capacity_admits_as_its_engine_does(engine: str) -> None:
    """The KV limit of :func:`replica_capacity` is ``floor(kv_capacity / kv_held(K))`` with
    ``K`` the engine's admission context: ``P + G`` on TensorRT-LLM, ``P + G/2`` else."""
    r = rl.build_replica(CAT, "llama-3.1-70b", "h100-sxm5-80gb", tp=2, dtype="fp8", engine=engine)
    res = replica_capacity(r, 128, 2048)
    k = 2176 if engine == "trtllm" else 1152
    per_seq = r.coefficients.kv_held_bytes(k)
    assert res.max_resident_sequences == math.floor(rl.kv_capacity_bytes(r) / per_seq)
    assert res.bound.value == "kv_capacity"


def test_one_sequence_that_its_reservation_does_not_fit_is_refused_naming_the_prompt() -> None:
    """Same memory, two admission rules: a request whose mean context fits but whose whole
    output does not is served by vLLM and refused on TensorRT-LLM's rule."""
    vllm = rl.build_replica(CAT, "llama-3.1-70b", "h100-sxm5-80gb", dtype="fp8")
    trt = dataclasses.replace(vllm, engine="trtllm")
    tokens = math.floor(rl.kv_capacity_bytes(vllm) / vllm.coefficients.kv_held_bytes(1))
    prompt = tokens - 1000 - 1  # P + G/2 = tokens - 1 fits; P + G = tokens + 999 does not
    assert replica_capacity(vllm, prompt, 2000).max_resident_sequences == 1
    with pytest.raises(PlanningError) as info:
        replica_capacity(trt, prompt, 2000)
    assert info.value.issues[0][0] == "prompt_tokens"
    assert "reserved at admission by trtllm" in str(info.value)
    # the message says how much the sequence needs and by how much to shorten it
    need = trt.coefficients.kv_held_bytes(prompt + 2000) / 1e9
    fit = rl.kv_capacity_tokens(trt)
    assert f"needs {need:.2f} GB of KV cache" in str(info.value)
    assert f"about {fit:,} tokens fit, {prompt + 2000 - fit:,} fewer" in str(info.value)


def test_vendor_static_batches_fit_and_the_tightest_just_fit() -> None:
    """NVIDIA's DLI course ran TensorRT-LLM 0.9.0 static batches of B requests, each
    reaching P + G tokens of cache: every one must fit the model's memory (at most one
    sequence short), and the tightest must not fit with more than 10% to spare (the
    memory model is not generous either). With the nominal GB read as 1e9 bytes, Llama-2-
    70B at 128/2,048 on one H100 (FP8) or two A100s held 16 of the 32 that ran."""
    # Mixtral's runs are recorded, not fitted (fake weights route every token alike), but
    # the memory they held does not depend on the routing: they are checked too
    points = [
        m
        for m in cb.load_reference_measurements(CAT, include_skipped=True)
        if (m.id or "").startswith("dli-trt09-")
        and (m.usable or "fake weights" in (m.skip_reason or ""))
    ]
    assert len(points) >= 150
    ratios = []
    for m in points:
        assert m.isl is not None and m.osl is not None and m.max_batch is not None
        n = rl.max_resident_batch(base_replica(m, CAT), m.isl + m.osl)
        assert n >= m.max_batch - 1, m.id
        ratios.append(n / m.max_batch)
    assert 0.95 <= min(ratios) <= 1.10


@pytest.mark.parametrize(
    ("engine", "gpu", "cap"),
    [
        ("vllm", "h100-sxm5-80gb", 1024),  # 85.5e9 bytes >= 70 GiB
        ("vllm", "mi300x", 1024),
        ("vllm", "a100-sxm-80gb", 256),  # vLLM keeps A100s at the small default
        ("vllm", "l40s", 256),  # 48.3e9 bytes < 70 GiB
        ("trtllm", "l40s", 2048),
        ("sglang", "h100-sxm5-80gb", None),
    ],
)
def test_engine_default_batch_caps(engine: str, gpu: str, cap: int | None) -> None:
    g = CAT.gpus[gpu]
    profile = engines.engine_profile(engine)
    assert engines.default_max_num_seqs(profile, g) == cap


def test_capacity_analysis_applies_the_engine_default_cap_and_says_so() -> None:
    """Llama-3.1-8B FP8 on one H200 at 128/2,048: the KV cache holds 1,717 sequences, vLLM
    runs at most 1,024 unless told; an explicit max_batch replaces the default."""
    from planner.capacity_analysis import CapacityRequest, capacity_analysis

    shape: dict[str, object] = {"model": "llama-3.1-8b", "gpu": "h200-sxm-141gb"}
    shape |= {"dtype": "fp8", "prompt_tokens": 128, "output_tokens": 2048}
    capped = capacity_analysis(CAT, CapacityRequest.model_validate(shape)).result
    assert capped.bound.value == "max_batch" and capped.batch == 1024
    assert capped.max_resident_sequences > 1024
    assert any("default max_num_seqs of 1,024" in n for n in capped.notes)
    free = capacity_analysis(CAT, CapacityRequest.model_validate({**shape, "max_batch": 4096}))
    assert free.result.batch > 1024 and not any("max_num_seqs" in n for n in free.result.notes)
    assert free.result.output_tokens_per_s > capped.output_tokens_per_s


def test_vllm_keeps_what_its_start_up_profile_measured() -> None:
    """vLLM PR 10511's profile of Llama-3-8B on H100s (same widths as the catalog's
    Llama-3.1-8B): 1.79 GiB non-torch + 1.26 GiB activations at tp 1, 3.58 + 1.26 at tp 2;
    wider models scale the activation peak by 2 I + 4 H, and GPUs where vLLM's default
    token budget is 2,048 (A100, under 70 GiB) by a quarter."""
    vllm = engines.engine_profile("vllm")
    m8, m70 = CAT.models["llama-3.1-8b"], CAT.models["llama-3.1-70b"]
    h100, a10g = CAT.gpus["h100-sxm5-80gb"], CAT.gpus["a10g"]
    gib = 2**30 / 1e9
    assert engines.activation_reserve_gb(vllm, m8, 1, h100) == pytest.approx(3.05 * gib)
    assert engines.activation_reserve_gb(vllm, m8, 2, h100) == pytest.approx(4.84 * gib)
    assert engines.activation_reserve_gb(vllm, m70, 1, h100) == pytest.approx(
        (1.79 + 1.26 * (2 * 28_672 + 4 * 8_192) / 45_056) * gib
    )
    assert engines.default_batched_tokens(vllm, a10g) == 2048
    assert engines.activation_reserve_gb(vllm, m70, 8, a10g) == pytest.approx(
        (3.58 + 1.26 * (2 * 28_672 + 4 * 8_192) / 45_056 / 4) * gib
    )
    trt, sglang = engines.engine_profile("trtllm"), engines.engine_profile("sglang")
    assert engines.activation_reserve_gb(trt, m70, 1, h100) == 1.0
    assert engines.activation_reserve_gb(sglang, m70, 1, h100) == 0.0
    r = rl.build_replica(CAT, "llama-3.1-70b", "h100-sxm5-80gb", dtype="fp8")
    assert r.activation_reserve_gb == engines.activation_reserve_gb(vllm, m70, 1, h100)


def test_what_vendors_run_on_vllm_class_engines_still_fits() -> None:
    """Llama-3.1-70B FP8 on one H100 and BF16 on two A100 80GBs (DOMAIN.md section 8) and
    Llama-2-70B BF16 on eight A10Gs (FMBench's TGI runs) fit with vLLM's measured reserve."""
    rl.build_replica(CAT, "llama-3.1-70b", "h100-sxm5-80gb", dtype="fp8")
    rl.build_replica(CAT, "llama-3.1-70b", "a100-sxm-80gb", tp=2)
    rl.build_replica(CAT, "llama-2-70b", "a10g", tp=8)


def test_trtllm_gives_the_kv_cache_90_percent_of_what_weights_leave_free() -> None:
    """TensorRT-LLM's free_gpu_memory_fraction 0.9: Llama-3.1-8B FP8 on an H100 (85.52 GB
    reported) holds 8.03 GB of weights and the 1 GB reserve, so it uses
    0.9 + 0.1 x 9.03 / 85.52 = 0.911 of the GPU and its KV cache is
    0.9 x (85.52 - 9.03) = 68.8 GB; the 70B in FP8 on one H100 uses 0.984 and keeps
    0.9 x what is left (12.6 GB); vLLM keeps its fixed 0.92."""
    gpu = CAT.gpus["h100-sxm5-80gb"]
    device_gb = rl.gpu_memory_bytes(gpu) / 1e9
    trt = engines.engine_profile("trtllm")
    assert engines.memory_utilization(trt, 8.0, 1.0, 80.0) == pytest.approx(0.9 + 0.1 * 9 / 80)
    assert engines.memory_utilization(trt, 90.0, 1.0, 80.0) == pytest.approx(1.0)
    vllm = engines.engine_profile("vllm")
    assert engines.memory_utilization(vllm, 8.0, 1.0, 80.0) == vllm.memory_utilization == 0.92
    for model in ("llama-3.1-8b", "llama-3.1-70b"):
        r = rl.build_replica(CAT, model, gpu.id, dtype="fp8", kv_dtype="fp8", engine="trtllm")
        weights_gb = rl.replica_weight_bytes(r) / 1e9
        free_gb = device_gb - weights_gb - r.activation_reserve_gb
        assert r.memory_utilization == pytest.approx(
            0.9 + 0.1 * (weights_gb + r.activation_reserve_gb) / device_gb
        )
        assert rl.kv_capacity_bytes(r) / 1e9 == pytest.approx(0.9 * free_gb)
    small = rl.build_replica(CAT, "llama-3.1-8b", gpu.id, dtype="fp8", engine="trtllm")
    big = rl.build_replica(CAT, "llama-3.1-70b", gpu.id, dtype="fp8", engine="trtllm")
    assert small.memory_utilization == pytest.approx(0.911, abs=1e-3)
    assert big.memory_utilization == pytest.approx(0.986, abs=1e-3)


def test_sglang_sizes_its_memory_share_from_the_device() -> None:
    """SGLang's default ``mem_fraction_static`` (``ServerArgs._handle_gpu_memory_settings``)
    keeps ``512 + 1.5 x chunk + 2 x graph batch + 1024 x tp x pp / 8`` MiB outside weights
    and KV: an H100 (81,559 MiB) at tp 1 keeps 512 + 12,288 + 512 + 128 = 13,440 MiB
    (0.835); an H200 at tp 8 graphs to 512 and keeps 14,848 (0.897); above 160 GiB the chunk
    is 16,384 tokens; below 35 GiB 2,048 with graphs to 24; DP attention and a draft model
    keep more. A replica SGLang serves gets that share unless one is stated."""
    h100, h200, b200, l4 = 81_559, 143_771, 183_359, 23_034
    assert engines.sglang_memory_share(h100, 1) == round((h100 - 13_440) / h100, 3) == 0.835
    assert engines.sglang_memory_share(h200, 8) == round((h200 - 14_848) / h200, 3) == 0.897
    assert engines.sglang_memory_share(b200, 8) == round((b200 - 27_136) / b200, 3)
    assert engines.sglang_memory_share(l4, 1) == round((l4 - 3_760) / l4, 3)
    dp8 = 14_848 + 3 * 512 * 8 + 1.5 * 512 * 8
    assert engines.sglang_memory_share(h200, 8, dp=8) == round((h200 - dp8) / h200, 3)
    spec = engines.sglang_memory_share(h100, 1, speculative=True)
    assert spec == round((h100 - 13_440 - 2_048) / h100, 3)
    with pytest.raises(PlanningError) as info:
        engines.sglang_memory_share(0, 1)
    assert info.value.issues[0][0] == "memory_utilization"
    r = rl.build_replica(CAT, "llama-3.1-8b", "h100-sxm5-80gb", engine="sglang")
    assert (r.memory_utilization, r.activation_reserve_gb) == (0.835, 0.0)
    r8 = rl.build_replica(CAT, "deepseek-v3", "h200-sxm-141gb", tp=8, dtype="fp8", engine="sglang")
    assert r8.memory_utilization == 0.897
    told = rl.build_replica(
        CAT, "llama-3.1-8b", "h100-sxm5-80gb", engine="sglang", memory_utilization=0.9
    )
    assert told.memory_utilization == 0.9
    # as SGLang does: 70B FP8 on one H100 needs a share stated above its default
    with pytest.raises(PlanningError, match=r"x 0\.835 per GPU"):
        rl.build_replica(CAT, "llama-3.1-70b", "h100-sxm5-80gb", dtype="fp8", engine="sglang")


def test_sglang_share_for_a_plan_keeps_the_plans_kv_cache() -> None:
    """A pool planned on vLLM at 0.92 keeps its activations inside that share; SGLang's
    share covers weights and KV only, so it is launched with ``0.92 - reserve / device``
    (rounded down): Llama-3.1-70B FP8 on an H100, 0.92 - 4.63 / 85.52 = 0.865, the same
    weights and KV cache to within 0.1% of the GPU and never more."""
    r = rl.build_replica(CAT, "llama-3.1-70b", "h100-sxm5-80gb", dtype="fp8")
    device_gb = rl.gpu_memory_bytes(r.gpu) / 1e9
    f = engines.sglang_share_for(r.memory_utilization, r.activation_reserve_gb, device_gb)
    assert f == 0.865
    planned_gb = r.memory_utilization * device_gb - r.activation_reserve_gb
    assert 0 <= planned_gb - f * device_gb < 0.001 * device_gb
    assert engines.sglang_share_for(0.9, 0.0, 80.0) == 0.9


def test_a_refusal_for_memory_names_the_engines_it_fits_on() -> None:
    """Llama-3.1-70B FP8 on one H100 with a 20,000 + 2,000-token sequence: vLLM's
    defaults leave 1.39 GB of KV cache (8,514 tokens), TensorRT-LLM's 0.9 of the free
    memory holds it; the refusal on vLLM says so, and changes nothing else."""
    from planner.capacity_analysis import CapacityRequest, capacity_analysis
    from planner.errors import DoesNotFitError

    shape = {
        "model": "llama-3.1-70b",
        "gpu": "h100-sxm5-80gb",
        "dtype": "fp8",
        "prompt_tokens": 20_000,
        "output_tokens": 2_000,
    }
    with pytest.raises(PlanningError) as e:
        capacity_analysis(CAT, CapacityRequest.model_validate(shape))
    assert e.value.issues[0][0] == "prompt_tokens"
    assert "about 8,514 tokens fit" in e.value.message
    assert e.value.message.endswith(
        "; it fits on trtllm (set engine to trtllm: memory reserves differ)"
    )
    ok = capacity_analysis(CAT, CapacityRequest.model_validate({**shape, "engine": "trtllm"}))
    assert ok.result.output_tokens_per_s > 0
    # refused for the weights on SGLang (its device share), the class kept
    with pytest.raises(DoesNotFitError) as w:
        capacity_analysis(
            CAT,
            CapacityRequest.model_validate({**shape, "prompt_tokens": 2000, "engine": "sglang"}),
        )
    assert w.value.issues[0][0] == "tp"
    assert "; it fits on vllm and trtllm (set engine to vllm" in w.value.message
    # nowhere: no engine named
    with pytest.raises(DoesNotFitError) as n:
        capacity_analysis(CAT, CapacityRequest.model_validate({**shape, "model": "llama-3.1-405b"}))
    assert "it fits on" not in n.value.message
