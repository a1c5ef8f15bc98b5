"""Dense GEMMs and all-reduces at their measured rates (issue 10): the share of its dense
peak a GEMM reaches at 512 tokens and the bus bandwidth an engine's all-reduce reaches on
a scale-up link, read from aiconfigurator's kernel database
(scripts/extract_aiconfigurator.py, scripts/aiconfigurator_rates.py), carried in the
catalog, borrowed no faster than the slowest measured GPU (or link), and priced in a
step together with the elementwise kernels between the GEMMs."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import pytest
from script_support import aiconfigurator_kernels, load_script

from catalog.loader import load_catalog
from planner import architecture as arch
from planner import roofline as rl
from planner.collectives import (
    ALLREDUCE_SLOWDOWN_ASSUMED,
    allreduce_ms,
    allreduce_slowdown,
)
from planner.kernel_floors import (
    GEMM_PEAK_SHARE_BY_ARCH,
    SERVING_GEMM_SHARE,
    dense_gemm_lift,
    fp4_gemm_ratio,
    fp8_gemm_efficiency,
    gemm_peak_share,
    gemm_token_gain,
)

EXTRACTED = aiconfigurator_kernels()
CAT = load_catalog()
rates = load_script("aiconfigurator_rates")
ENGINES = ("vllm", "sglang", "trtllm")


def _gemm(share: float, peak_tflops: float, n: int, k: int, dtype: str = "bfloat16", m=512):
    """A GEMM row whose rate at m tokens is ``share`` of ``peak_tflops`` (latency in ms)."""
    latency_ms = 2.0 * m * n * k / (share * peak_tflops * 1e12) * 1e3
    return {"gemm_dtype": dtype, "m": m, "n": n, "k": k, "latency": latency_ms}


def test_gemm_share_extraction_is_the_median_over_layer_shapes_at_512_tokens():
    rows = [
        _gemm(0.70, 1000.0, 8192, 4096),
        _gemm(0.74, 1000.0, 16384, 8192),
        _gemm(0.90, 1000.0, 4096, 4096),
        _gemm(0.99, 1000.0, 2048, 4096),  # weights narrower than 4,096: not read
        _gemm(0.99, 1000.0, 8192, 4096, m=1024),  # not 512 tokens: not read
        _gemm(0.50, 2000.0, 8192, 4096, dtype="fp8"),  # of the FP8 peak (2 x BF16's)
        _gemm(0.30, 4000.0, 8192, 4096, dtype="nvfp4"),  # of the FP4 peak (4 x BF16's)
        _gemm(0.99, 1000.0, 8192, 4096, dtype="int8"),  # no dtype read: not read
    ]
    assert rates.gemm_peak_share(rows, 1000.0) == {"bf16": 0.74, "fp8": 0.5, "fp4": 0.3}
    assert rates.gemm_peak_share([], 1000.0) == {}


def _ar_row(tp: int, mib: int, ms: float, backend: str = "vllm_graph") -> dict:
    return {
        "allreduce_dtype": "bfloat16",
        "num_gpus": tp,
        "message_size": mib * 2**20 // 2,  # bf16 elements
        "latency": ms,
        "backend": backend,
    }


def test_allreduce_slowdown_is_the_median_measured_over_alpha_beta_per_size():
    nominal = rates.alpha_beta_ms(3.5, 450.0, 8, 8 * 2**20)
    # two-shot: 2 x 3.5 us + 7/4 x 8 MiB / 450 GB/s
    assert nominal == pytest.approx(7e-3 + 7 / 4 * 8 * 2**20 / 450e9 * 1e3)
    rows = [
        _ar_row(8, 8, 1.2 * nominal),
        _ar_row(8, 8, 1.6 * nominal),
        _ar_row(8, 8, 2.0 * nominal),
        _ar_row(8, 8, 9.0 * nominal, backend="vllm_eager"),  # eager: not read
        _ar_row(8, 3, 1.0),  # not a power-of-two size read: not read
        {**_ar_row(8, 8, 9.0 * nominal), "allreduce_dtype": "float32"},  # not bf16
    ]
    assert rates.allreduce_slowdown(rows, 3.5, 450.0) == {8: 1.6}
    # per GPU count: the median at each count (read for comparison, not priced)
    tp2 = rates.alpha_beta_ms(3.5, 450.0, 2, 8 * 2**20)
    per_count = [*rows, _ar_row(2, 8, 1.1 * tp2), _ar_row(2, 8, 1.3 * tp2)]
    assert rates.allreduce_slowdown_by_gpus(per_count, 3.5, 450.0) == {2: {8: 1.2}, 8: {8: 1.6}}
    assert rates.allreduce_slowdown(per_count, 3.5, 450.0) == {8: 1.3}  # over both counts
    # the script's alpha-beta is the cost model's at a slowdown of 1
    plain = CAT.links["ib-ndr-400"].model_copy(update={"kind": "scale_up"})
    for tp, nbytes in itertools.product((2, 4, 8), (1e4, 1e6, 3e7)):
        assert allreduce_ms(plain, tp, nbytes) == pytest.approx(
            rates.alpha_beta_ms(plain.latency_us, plain.bandwidth_gb_per_s, tp, nbytes)
            * allreduce_slowdown(plain, nbytes)
        )


def test_catalog_carries_the_extracted_shares_and_link_slowdowns():
    for gpu_id, entry in EXTRACTED["gpus"].items():
        gpu = CAT.gpus[gpu_id]
        assert gpu.gemm_peak_share is not None, gpu_id
        for engine, e in entry["engines"].items():
            assert gpu.gemm_peak_share.by_engine[engine] == e["gemm_peak_share_512"]
    for gpu_id, entry in EXTRACTED["fp8_gemm_only"].items():
        gpu = CAT.gpus[gpu_id]
        assert gpu.gemm_peak_share is not None, gpu_id
        for engine, e in entry["engines"].items():
            assert gpu.gemm_peak_share.by_engine[engine] == e["gemm_peak_share_512"]
    extract = load_script("extract_aiconfigurator")
    for link_id, entry in EXTRACTED["allreduce_slowdown"].items():
        link = CAT.links[link_id]
        assert link.allreduce is not None, link_id
        assert {str(k): v for k, v in link.allreduce.slowdown_by_mib.items()} == entry["by_mib"]
        # the script read it against the catalog's link
        assert extract.SCALE_UP_LINKS[link_id] == (link.bandwidth_gb_per_s, link.latency_us)


def test_unmeasured_gpus_and_links_borrow_the_slowest_measured():
    for arch_name, table in GEMM_PEAK_SHARE_BY_ARCH.items():
        measured = [g for g in CAT.gpus.values() if g.arch == arch_name and g.gemm_peak_share]
        assert measured, arch_name
        for engine, dtype in itertools.product(ENGINES, ("bf16", "fp8", "fp4")):
            shares = [
                g.gemm_peak_share.by_engine[engine][dtype]
                for g in measured
                if dtype in g.gemm_peak_share.by_engine.get(engine, {})
            ]
            assert table[engine].get(dtype) == (min(shares) if shares else None)
    nvl = CAT.gpus["h100-nvl-94gb"]
    assert nvl.gemm_peak_share is None
    assert gemm_peak_share(nvl, "trtllm", "bf16") == 0.733  # Hopper's least (H100 SXM's)
    assert gemm_peak_share(nvl, "lmdeploy", "fp8") == 0.483  # unlisted engine: the least
    for gpu_id in ("mi300x", "mi325x", "gaudi3"):  # nothing of the architecture measured
        assert gemm_peak_share(CAT.gpus[gpu_id], "vllm", "fp8") is None
        assert dense_gemm_lift(CAT.gpus[gpu_id], "vllm", "fp8") == 1.0
    # the assumed curve is the largest of aiconfigurator's (NVLink 3, 4, 5, 1 MiB-1 GiB);
    # xGMI has its own, measured to 64 MiB (tests/test_mesh_allreduce.py), below it
    curves = [
        lk.allreduce.slowdown_by_mib
        for lk in CAT.links.values()
        if lk.allreduce and "aiconfigurator" in lk.allreduce.source
    ]
    assert len(curves) == 3
    assert {m: max(c[m] for c in curves) for m in curves[0]} == ALLREDUCE_SLOWDOWN_ASSUMED
    xgmi = CAT.links["infinity-fabric-mi300"].allreduce
    assert xgmi is not None
    assert all(v <= ALLREDUCE_SLOWDOWN_ASSUMED[m] for m, v in xgmi.slowdown_by_mib.items())
    gaudi = CAT.links["gaudi3-roce"]
    assert gaudi.allreduce is None
    for mib in (1, 8, 1024):
        assert allreduce_slowdown(gaudi, mib * 2**20) == ALLREDUCE_SLOWDOWN_ASSUMED[mib]
    assert allreduce_slowdown(CAT.links["ib-ndr-400"], 2**30) == 1.0  # a network ring


def test_lift_is_the_measured_share_over_the_analogy_factors():
    from planner.calibration import UNCALIBRATED_DEFAULTS

    k = SERVING_GEMM_SHARE
    assert 0.5 < k <= 1.0
    h100 = CAT.gpus["h100-sxm5-80gb"]
    assert h100.gemm_peak_share is not None
    assert h100.gemm_peak_share.analogy_mfu == 0.5
    assert dense_gemm_lift(h100, "trtllm", "bf16") == pytest.approx(k * 0.733 / 0.5)
    e_fp8 = fp8_gemm_efficiency(h100, "trtllm")
    assert dense_gemm_lift(h100, "trtllm", "fp8") == pytest.approx(k * 0.483 / (0.5 * e_fp8))
    # FP4 (B200's nvfp4 GEMMs): its share over the analogy's rate for FP4, the FP8 GEMM
    # derate times the measured FP4-over-FP8 share ratio q, i.e. FP8's lift
    b200 = CAT.gpus["b200"]
    q = fp4_gemm_ratio(b200, "trtllm")
    assert q == pytest.approx(0.239 / 0.314)
    e_b200 = fp8_gemm_efficiency(b200, "trtllm")
    assert dense_gemm_lift(b200, "trtllm", "fp4") == pytest.approx(k * 0.239 / (0.45 * e_b200 * q))
    assert dense_gemm_lift(b200, "trtllm", "fp4") == pytest.approx(
        dense_gemm_lift(b200, "trtllm", "fp8")
    )
    for gpu_id in ("h100-sxm5-80gb", "mi325x"):  # no FP4 GEMM measured (nor an FP4 peak)
        assert gemm_peak_share(CAT.gpus[gpu_id], "trtllm", "fp4") is None
    # every entry states its GPU's analogy MFU (what a level scales)
    for gpu in CAT.gpus.values():
        if gpu.gemm_peak_share is not None:
            assert gpu.gemm_peak_share.analogy_mfu == UNCALIBRATED_DEFAULTS[gpu.id][0], gpu.id
    # a GPU borrowing its architecture's share states its analogy through its level
    nvl = CAT.gpus["h100-nvl-94gb"]
    mfu_a = nvl.efficiency.prefill_mfu / nvl.efficiency.level_scale
    assert mfu_a == pytest.approx(UNCALIBRATED_DEFAULTS[nvl.id][0], abs=1e-3)
    e_nvl = fp8_gemm_efficiency(nvl, "trtllm")
    assert dense_gemm_lift(nvl, "trtllm", "fp8") == pytest.approx(k * 0.483 / (mfu_a * e_nvl))


@pytest.mark.parametrize(
    "gpu_id,dtype,engine",
    [
        ("h100-sxm5-80gb", "bf16", "trtllm"),
        ("h200-sxm-141gb", "fp8", "vllm"),
        ("l40s", "fp8", "sglang"),
    ],
)
def test_a_step_runs_its_dense_gemms_at_the_measured_rate_times_the_level(gpu_id, dtype, engine):
    """At 512 tokens (gain 1) the dense GEMM rate is tp x peak x level x k x share."""
    gpu = CAT.gpus[gpu_id]
    replica = rl.build_replica(
        CAT, "llama-3.1-8b", gpu_id, 1, dtype, engine=engine, check_fit=False
    )
    c = replica.coefficients
    assert gpu.gemm_peak_share is not None
    level = replica.prefill_mfu / gpu.gemm_peak_share.analogy_mfu
    share = gemm_peak_share(gpu, engine, dtype)
    assert share is not None
    peak = gpu.peak_tflops(dtype)
    assert peak is not None
    expected = peak * 1e12 * level * SERVING_GEMM_SHARE * share / 1e3
    assert c.dense_gemm_per_ms(512) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("engine", ENGINES)
def test_fp4_gemms_run_at_their_measured_rate_and_gain(engine):
    """B200's FP4 (nvfp4) GEMMs: at 512 tokens ``peak(fp4) x level x k x share(fp4) x
    min(1, q r) / q`` (``r`` its measured FP4 level, ``q`` the FP4-over-FP8 share ratio),
    and faster at more tokens by their own measured gain (TensorRT-LLM: 1.63 at 4,096),
    not FP8's. Before, FP4 took the assumed 0.75 derate and no gain at all, so a
    4,096-token prefill step ran FP4 GEMMs at 2 x 0.75 / 1.57 = 0.96x the FP8 ones."""
    gpu = CAT.gpus["b200"]
    replica = rl.build_replica(
        CAT, "llama-3.1-70b", "b200", 1, "fp4", kv_dtype="fp8", engine=engine, check_fit=False
    )
    assert replica.gpu.gemm_peak_share is not None
    c = replica.coefficients
    level = replica.prefill_mfu / gpu.gemm_peak_share.analogy_mfu
    share = gemm_peak_share(gpu, engine, "fp4")
    assert share is not None
    q, r = fp4_gemm_ratio(gpu, engine), gpu.efficiency.fp4_level_ratio
    expected = 9000e12 * level * SERVING_GEMM_SHARE * share * min(1.0, q * r) / q / 1e3
    assert c.dense_gemm_per_ms(512) == pytest.approx(expected, rel=1e-9)
    gains = gemm_token_gain(gpu, engine, "fp4")
    assert gains == tuple(gpu.gemm_token_gain.by_engine[engine]["fp4"])
    assert c.dense_gemm_per_ms(4096) == pytest.approx(expected * gains[2], rel=1e-9)
    # at a prefill-sized step an FP4 GEMM now runs well past the FP8 one of the same GPU
    fp8 = rl.build_replica(
        CAT, "llama-3.1-70b", "b200", 1, "fp8", kv_dtype="fp8", engine=engine, check_fit=False
    ).coefficients
    assert c.dense_gemm_per_ms(4096) > 1.2 * fp8.dense_gemm_per_ms(4096)


def test_the_lift_never_runs_a_gemm_past_its_peak():
    h100 = CAT.gpus["h100-sxm5-80gb"]
    replica = rl.build_replica(
        CAT,
        "llama-3.1-8b",
        "h100-sxm5-80gb",
        1,
        "bf16",
        mfu=0.9,
        engine="vllm",
        check_fit=False,
        kernel_gemm_rate=True,
    )
    c = replica.coefficients
    peak_per_ms = h100.peak_tflops("bf16") * 1e12 / 1e3
    for tokens in (512, 2048, 8192):
        assert c.dense_gemm_per_ms(tokens) <= peak_per_ms * (1 + 1e-12)


def test_elementwise_bytes_worked_example_and_their_place_in_a_step():
    m8 = CAT.models["llama-3.1-8b"]
    # 32 layers x (tp 1 x 8 x 4,096 + 3 x 14,336) values x 2 bytes
    assert arch.elementwise_bytes_per_token(m8, 1) == 32 * (8 * 4096 + 3 * 14336) * 2 == 4_849_664
    # the norms are held whole on every rank, the activation is split
    m70 = CAT.models["llama-3.1-70b"]
    assert arch.elementwise_bytes_per_token(m70, 4) == 80 * (4 * 8 * 8192 + 3 * 28672) * 2
    ds = CAT.models["deepseek-v3"]
    moe = ds.moe
    assert moe is not None
    width = 3 * (moe.experts_per_token + moe.num_shared_experts) * moe.expert_intermediate_size
    dense_layers = moe.first_dense_layers
    expected = (
        ds.num_layers * 8 * 8 * ds.hidden_size
        + dense_layers * 3 * ds.intermediate_size
        + (ds.num_layers - dense_layers) * width
    ) * 2
    assert arch.elementwise_bytes_per_token(ds, 8) == expected
    replica = rl.build_replica(CAT, "llama-3.1-8b", "h100-sxm5-80gb", 1, "bf16", check_fit=False)
    c = replica.coefficients
    bare = dataclasses.replace(c, elementwise_bytes_per_token=0.0)
    for tokens in (1, 64, 2048):
        extra = c.gemm_ms(tokens) - bare.gemm_ms(tokens)
        assert extra == pytest.approx(tokens * 4_849_664 / c.w_per_ms)


def test_allreduce_takes_the_measured_slowdown_of_the_link():
    nvlink4 = CAT.links["nvlink4"]
    assert nvlink4.allreduce is not None
    curve = nvlink4.allreduce.slowdown_by_mib
    message = 32 * 2**20  # a 2,048-token prefill chunk of a 8,192-wide model
    alpha = nvlink4.latency_us * 1e-3
    two_shot = 2 * alpha + 2 * 7 / 8 * message / 450e9 * 1e3
    assert allreduce_ms(nvlink4, 8, message) == pytest.approx(two_shot * curve[32])
    # what the engines measure at that size on 8 H100s: 178-213 us
    assert 0.178 < allreduce_ms(nvlink4, 8, message) < 0.213
    # between points: linear in log2(size); at and below 64 KiB: the alpha-beta time
    mid = 2**21 * 2**0.5  # 2.83 MiB, halfway between 2 and 4 in log2
    assert allreduce_slowdown(nvlink4, mid) == pytest.approx((curve[2] + curve[4]) / 2)
    assert allreduce_slowdown(nvlink4, 2**16) == 1.0
    assert allreduce_slowdown(nvlink4, 2**18) == pytest.approx(1 + (curve[1] - 1) / 2)
    assert allreduce_slowdown(nvlink4, 2**40) == curve[1024]
    # small messages stay latency-bound: one-shot at a few microseconds
    assert allreduce_ms(nvlink4, 8, 16384) < 0.006


def test_catalog_refuses_a_bad_slowdown_curve_naming_the_field():
    from pydantic import ValidationError

    from catalog.schema import AllReduceKernel

    for curve, field in (({1: 0.1}, "slowdown_by_mib.1"), ({0: 1.2}, "slowdown_by_mib.0")):
        with pytest.raises(ValidationError) as err:
            AllReduceKernel.model_validate({"slowdown_by_mib": curve, "source": "a benchmark"})
        assert field in str(err.value)


def test_an_mfu_the_user_sets_is_the_rate_their_gemms_run_at():
    """The lift is the measured kernel rate over the catalog's factors; an MFU a user
    sets (an analysis's --mfu, a request's efficiency.prefill_mfu) is taken as it is."""
    catalog_factors = rl.build_replica(CAT, "llama-3.1-8b", "h100-sxm5-80gb", engine="vllm")
    assert catalog_factors.kernel_gemm_rate
    assert catalog_factors.coefficients.dense_lift == pytest.approx(0.9 * 0.801 / 0.5)
    user = rl.build_replica(CAT, "llama-3.1-8b", "h100-sxm5-80gb", engine="vllm", mfu=0.5)
    assert not user.kernel_gemm_rate
    assert user.coefficients.dense_lift == 1.0
    assert rl.effective_flops(user) == pytest.approx(989.4e12 * 0.5)
    assert rl.effective_flops(catalog_factors) == pytest.approx(
        989.4e12 * catalog_factors.prefill_mfu * 0.9 * 0.801 / 0.5
    )
    # a draft model takes its target's choice
    for mfu, lifted in ((None, True), (0.5, False)):
        target = rl.build_replica(
            CAT, "llama-3.1-70b", "h100-sxm5-80gb", tp=4, engine="vllm", mfu=mfu
        )
        spec = rl.with_speculation(
            CAT, target, "draft_model", 3, 2.0, draft_model="llama-3.1-8b"
        ).speculative
        assert spec is not None and spec.draft is not None
        assert (spec.draft.dense_lift > 1.0) == lifted


def test_a_plan_and_its_report_say_which_gemm_rate_they_priced():
    import yaml

    from planner.report.render import render_plan_report
    from planner.service import make_plan

    root = Path(__file__).resolve().parent.parent
    request = yaml.safe_load((root / "examples/code-completion-8b.yaml").read_text())
    plan = make_plan(request, CAT, alternatives=False, verify=False)
    gpus = plan.assumptions["gpus"]
    for gpu_id, g in gpus.items():
        assert g["dense_gemm_lift"] >= 0.5, gpu_id
    h100 = gpus["h100-sxm5-80gb"]
    assert h100["dense_gemm_lift"] > 1.2  # the measured rate over the analogy MFU's
    md, _ = render_plan_report({"request": request, "plan": plan.to_json_dict()}, "md", CAT)
    assert isinstance(md, str)
    assert "GEMM rate x" in md and f"{h100['dense_gemm_lift']:.2f}" in md


def _stream(share: float, peak_tb_per_s: float, n: int, k: int, m: int = 16, dtype="bfloat16"):
    """A GEMM row streaming its ``2 N K`` weight bytes at ``share`` of the peak (ms)."""
    latency_ms = 2.0 * n * k / (share * peak_tb_per_s * 1e12) * 1e3
    return {"gemm_dtype": dtype, "m": m, "n": n, "k": k, "latency": latency_ms}


def test_weight_stream_share_reads_decode_gemms_past_the_l2_cache():
    """BF16 GEMMs of 8-32 tokens with 256 MB or more of weights: the median share of
    peak HBM bandwidth; a weight that fits an L2 cache (read faster than HBM in a
    repeated benchmark), another token count or dtype is not read."""
    rows = [
        _stream(0.80, 0.864, 16384, 8192),  # 268 MB
        _stream(0.76, 0.864, 16384, 16384, m=8),
        _stream(0.84, 0.864, 16384, 16384, m=32),
        _stream(1.04, 0.864, 4096, 4096),  # 34 MB: in L40S's 96 MB L2
        _stream(0.30, 0.864, 16384, 16384, m=512),  # compute-bound
        _stream(0.30, 0.864, 16384, 16384, dtype="fp8"),
    ]
    assert rates.weight_stream_share(rows, 0.864) == 0.8
    assert rates.weight_stream_share(rows[3:], 0.864) is None


def test_shipped_weight_stream_shares_are_read_for_every_gpu_in_the_tables():
    """The extracted shares (aiconfigurator-kernels.json): Hopper streams decode weights
    at about 0.82-0.87 of its peak in every engine, L40S and A100 at 0.75-0.82, Blackwell
    at 0.74-0.81; none reads above the peak (an L2 cache read)."""
    doc = aiconfigurator_kernels()
    shares = {
        g: [e["weight_stream_share"] for e in v["engines"].values()]
        for part in ("gpus", "fp8_gemm_only")
        for g, v in doc[part].items()
    }
    assert set(shares) == {
        "h100-sxm5-80gb",
        "h200-sxm-141gb",
        "b200",
        "gb200-per-gpu",
        "b300",
        "gb300-per-gpu",
        "l40s",
        "a100-sxm-80gb",
    }
    for g, s in shares.items():
        assert len(s) == 3 and all(0.7 < x < 0.9 for x in s), (g, s)
    assert min(shares["h100-sxm5-80gb"] + shares["h200-sxm-141gb"]) > 0.8
