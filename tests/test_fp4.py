"""FP4 weights (issue 12 item 3): published checkpoints, block-scale bytes, derated and
unmeasured efficiency, field-level errors, the launch command, and the plan's choice."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from catalog.loader import load_catalog
from catalog.schema import (
    ANALOGY_SIGMA_LOG,
    Dtype,
    DtypeEfficiency,
    Fp4Format,
    Gpu,
    Model,
    Provenance,
)
from planner import architecture as arch
from planner import kernel_floors as kf
from planner import kernels as kn
from planner import roofline as rl
from planner.calibration.parsers import load_reference_measurements
from planner.calibration.predict import predict
from planner.errors import PlanningError
from planner.fidelity import unscaled_catalog
from planner.plan.launch import checkpoint_repo
from planner.report import render_plan_text
from planner.risk import factor_uncertainty
from planner.service import make_plan

CAT = load_catalog()
EXAMPLE = Path(__file__).parent.parent / "examples" / "fp4-llama-70b-b200.yaml"


def _request(dtypes: list[str], gpus: list[str] | None = None, model: str = "llama-3.1-70b"):
    return {
        "model": model,
        "traffic": {"rate_rps": 40, "classes": [{"workload": "chat", "share": 1.0}]},
        "candidates": {"gpus": gpus or ["b200"], "dtypes": dtypes},
    }


def _with_gpu(gpu: Gpu):
    return CAT.model_copy(update={"gpus": {**CAT.gpus, gpu.id: gpu}})


# --------------------------------------------------------------------------- catalog


def test_models_with_fp4_name_their_published_checkpoint():
    ckpts = {
        m.id: m.fp4_checkpoints[0] for m in CAT.models.values() if Dtype.FP4 in m.weight_dtypes
    }
    assert set(ckpts) == {
        "llama-3.1-70b",
        "deepseek-v3",
        "gpt-oss-120b",
        "llama-2-70b",
        "llama-3.1-8b",
        "llama-3.1-405b",
        "mixtral-8x7b",
    }
    assert ckpts["llama-3.1-70b"].repo == "RedHatAI/Llama-3.1-70B-Instruct-NVFP4"
    assert ckpts["deepseek-v3"].repo == "nvidia/DeepSeek-V3-0324-FP4"
    assert ckpts["gpt-oss-120b"].format.value == "mxfp4"
    # the models vendors have run in FP4 (MLPerf Inference Llama-2-70B and 405B, the
    # TensorRT-LLM tables' Llama-3.1-8B and Mixtral): no such configuration is refused
    assert ckpts["llama-3.1-8b"].repo == "nvidia/Llama-3.1-8B-Instruct-FP4"
    assert ckpts["llama-3.1-405b"].repo == "nvidia/Llama-3.1-405B-Instruct-FP4"
    assert ckpts["mixtral-8x7b"].repo == "nvidia/Mixtral-8x7B-Instruct-v0.1-FP4"
    # no NVFP4 Llama-2-70B is published: AMD's MXFP4 MLPerf checkpoint, which B200 runs
    assert ckpts["llama-2-70b"].format.value == "mxfp4"
    for m in CAT.models.values():
        assert (not m.fp4_checkpoints) == (Dtype.FP4 not in m.weight_dtypes), m.id


def test_fp4_in_a_model_without_a_checkpoint_is_refused():
    data = CAT.models["mistral-7b-v0.1"].model_dump()
    assert data["fp4_checkpoints"] == []
    data["weight_dtypes"] = ["bf16", "fp4"]
    with pytest.raises(ValidationError, match="fp4_checkpoints"):
        Model(**data)


def test_an_fp4_peak_needs_its_formats():
    data = CAT.gpus["b200"].model_dump()
    data["fp4_formats"] = []
    with pytest.raises(ValidationError, match="fp4_formats"):
        Gpu(**data)
    data = CAT.gpus["mi325x"].model_dump()
    data["fp4_formats"] = ["mxfp4"]
    with pytest.raises(ValidationError, match="fp4_dense_tflops"):
        Gpu(**data)


# --------------------------------------------------------------------------- cost model


def test_fp4_gemms_and_weight_reads_are_derated_when_unmeasured():
    plain = unscaled_catalog(CAT)  # no FP4 run measured (fp4_level_ratio 1)
    fp8 = rl.build_replica(plain, "llama-3.1-70b", "b200", dtype="fp8", kv_dtype="fp8")
    fp4 = rl.build_replica(plain, "llama-3.1-70b", "b200", dtype="fp4", kv_dtype="fp8")
    c8, c4 = fp8.coefficients, fp4.coefficients
    # FP4 peak 9,000 vs FP8 4,500 TFLOP/s, times the FP4 GEMMs' share of their peak over
    # the FP8 ones' (measured on B200; on top of the FP8 GEMMs' measured efficiency,
    # which both carry): about 1.5x
    q = kf.fp4_gemm_ratio(plain.gpus["b200"], fp4.engine)
    assert c4.f_gemm_per_ms / c8.f_gemm_per_ms == pytest.approx(2 * q)
    assert 0.6 < q < 0.9
    assert c4.f_attn_per_ms == c8.f_attn_per_ms  # attention stays at its kernel precision
    assert c4.w_weights_per_ms == pytest.approx(c8.w_per_ms * kn.FP4_WEIGHT_READ_DERATE)
    assert c4.w_per_ms == c8.w_per_ms  # KV reads are not derated
    # 4.5 bits per quantized weight (0.5625 of the FP8 bytes; the BF16 embedding, lm_head
    # and norms as they are), read at 0.85 of the bandwidth
    m = fp4.model
    wide = arch.bf16_param_count(m)
    n = arch.total_param_count(m)
    emb = arch.input_embedding_bytes(m)  # gathered by row, not read
    bytes_ratio = ((n - wide) * 0.5625 + 2 * wide - emb) / (n - wide + 2 * wide - emb)
    ratio = rl.weight_read_ms(fp4) / rl.weight_read_ms(fp8)
    assert ratio == pytest.approx(bytes_ratio / kn.FP4_WEIGHT_READ_DERATE)
    # one decode step at batch 32: faster than FP8, slower than the raw byte ratio
    s8 = rl.decode_step_ms(fp8, 32, 2300)
    s4 = rl.decode_step_ms(fp4, 32, 2300)
    assert 0.5625 * s8 < s4 < s8


def test_fp4_measured_in_the_catalog_is_not_derated():
    b200 = CAT.gpus["b200"]
    measured = DtypeEfficiency(
        prefill_mfu=0.3,
        decode_mbu=0.5,
        step_overhead_ms=2.0,
        provenance=Provenance.FITTED,
        points=12,
        sigma_log=0.2,
        reason="a test calibration fitted to FP4 runs",
    )
    eff = b200.efficiency.model_copy(update={"by_dtype": {Dtype.FP4: measured}})
    gpu = b200.model_copy(update={"efficiency": eff})
    assert kn.weight_dtype_derates(gpu, "fp4") == (1.0, 1.0)
    plain = unscaled_catalog(CAT).gpus["b200"]
    q = kf.fp4_gemm_ratio(plain, None)  # the least engine's FP4 and FP8 GEMM shares
    assert q == pytest.approx(0.239 / 0.314)
    assert kn.weight_dtype_derates(plain, "fp4") == pytest.approx((q * 0.641, 0.85))
    # the shipped B200's FP4 runs lift the assumed derates: the GEMM's at most to 1 (the
    # peak ratio), the read's at most to the best-measured GPUs' MBU 0.7 over its own
    r = CAT.gpus["b200"].efficiency.fp4_level_ratio
    mbu = CAT.gpus["b200"].efficiency.decode_mbu
    assert kn.weight_dtype_derates(CAT.gpus["b200"], "fp4") == pytest.approx(
        (min(1.0, q * r) * 0.641, min(0.85 * r, 0.7 / mbu))
    )
    # FP8 carries the measured FP8 GEMM efficiency (the least of B200's engines unnamed)
    assert kn.weight_dtype_derates(CAT.gpus["b200"], "fp8") == (0.641, 1.0)
    unc = factor_uncertainty(_with_gpu(gpu), "b200", "fp4")
    assert unc.provenance == Provenance.FITTED and unc.sigma_log == 0.2


def test_fp4_factors_are_never_better_measured_than_fp8():
    """B200's factors are scaled to measured points in FP8; in FP4 they are analogy,
    with at least the analogy spread, even on a GPU whose FP8 spread is narrow."""
    b200 = CAT.gpus["b200"]
    narrow = b200.model_copy(
        update={"efficiency": b200.efficiency.model_copy(update={"sigma_log": 0.2})}
    )
    cat = _with_gpu(narrow)
    fp8 = factor_uncertainty(cat, "b200", "fp8")
    fp4 = factor_uncertainty(cat, "b200", "fp4")
    assert fp8.provenance.measured and fp8.sigma_log == 0.2
    assert fp4.provenance == Provenance.ANALOGY and fp4.points == 0
    assert fp4.sigma_log == ANALOGY_SIGMA_LOG


# --------------------------------------------------------------------------- errors


def test_fp4_on_a_gpu_without_an_fp4_peak_names_the_dtype():
    with pytest.raises(PlanningError) as err:
        rl.build_replica(CAT, "llama-3.1-70b", "h100-sxm5-80gb", dtype="fp4")
    assert err.value.issues[0][0] == "dtype"
    with pytest.raises(PlanningError) as err:
        make_plan(_request(["fp8", "fp4"], gpus=["h100-sxm5-80gb", "mi325x"]), CAT)
    field, message = err.value.issues[0]
    assert field == "candidates.dtypes[1]"
    assert "no FP4 tensor cores" in message


def test_fp4_for_a_model_without_a_checkpoint_names_the_dtype():
    with pytest.raises(PlanningError) as err:
        make_plan(_request(["fp4"], model="mistral-7b-v0.1"), CAT)
    field, message = err.value.issues[0]
    assert field == "candidates.dtypes[0]"
    assert "no published FP4 checkpoint" in message


def test_an_fp4_format_the_gpu_does_not_run_is_refused():
    nv_only = CAT.gpus["b200"].model_copy(
        update={"id": "t-nvfp4-only", "fp4_formats": [Fp4Format.NVFP4]}
    )
    cat = _with_gpu(nv_only)
    with pytest.raises(PlanningError) as err:
        rl.build_replica(cat, "gpt-oss-120b", "t-nvfp4-only", dtype="fp4")
    assert err.value.issues[0][0] == "dtype" and "mxfp4" in err.value.issues[0][1]


def test_fp4_is_screened_out_only_where_unsupported():
    plan = make_plan(
        _request(["fp4"], gpus=["b200", "h100-sxm5-80gb"]), CAT, alternatives=False, verify=False
    )
    assert plan.status.value == "optimal"
    assert {p.dtype for p in plan.pools} == {"fp4"} and {p.gpu for p in plan.pools} == {"b200"}


# --------------------------------------------------------------------------- plan


def test_llama_70b_on_b200_offered_fp4_and_fp8_picks_fp4_and_is_cheaper():
    both = make_plan(_request(["fp8", "fp4"]), CAT, alternatives=False, verify=False)
    fp8 = make_plan(_request(["fp8"]), CAT, alternatives=False, verify=False)
    assert both.status.value == fp8.status.value == "optimal"
    assert {p.dtype for p in both.pools} == {"fp4"}
    assert {p.kv_dtype for p in both.pools} == {"fp8"}
    assert both.cost_usd_per_hour < fp8.cost_usd_per_hour
    fp4 = both.assumptions["fp4"]
    assert fp4["checkpoints"] == {
        "RedHatAI/Llama-3.1-70B-Instruct-NVFP4": {"format": "nvfp4", "bits_per_weight": 4.5}
    }
    assert fp4["gpus"]["b200"]["checkpoint"] == "RedHatAI/Llama-3.1-70B-Instruct-NVFP4"
    assert fp4["gpus"]["b200"]["provenance"] == "analogy"
    # vLLM's FP4 GEMMs' share over its FP8 ones' (measured, 0.301 / 0.35) x B200's
    # measured FP4 ratio (at most 1), on top of its measured FP8 GEMM efficiency
    r = CAT.gpus["b200"].efficiency.fp4_level_ratio
    q = kf.fp4_gemm_ratio(CAT.gpus["b200"], "vllm")
    assert q == pytest.approx(0.301 / 0.35)
    assert fp4["gpus"]["b200"]["fp4_level_ratio"] == r > 1.0
    assert fp4["gpus"]["b200"]["gemm_derate"] == pytest.approx(min(1.0, q * r) * 0.641, abs=5e-4)
    assert "fp4" not in fp8.assumptions
    assert all(p.provenance == "analogy" for p in both.pools)
    assert all(p.provenance == "scaled" for p in fp8.pools)


def test_the_fp4_example_plans_fp4():
    doc = yaml.safe_load(EXAMPLE.read_text())
    assert doc["candidates"]["dtypes"] == ["fp8", "fp4"]
    plan = make_plan(doc, CAT, alternatives=False, verify=False)
    assert {p.dtype for p in plan.pools} == {"fp4"}


def test_fp4_pools_launch_the_published_checkpoint():
    plan = make_plan(_request(["fp4"]), CAT, alternatives=False, verify=False)
    pool = plan.pools[0]
    repo = "RedHatAI/Llama-3.1-70B-Instruct-NVFP4"
    assert pool.launch.vllm[:3] == ["vllm", "serve", repo]
    assert f"--model-path={repo}" in pool.launch.sglang
    for cmd in (pool.launch.vllm, pool.launch.sglang):
        assert not any(a.startswith("--quantization") for a in cmd)
        assert any(a.startswith("--kv-cache-dtype=fp8") for a in cmd)
    fp8 = rl.build_replica(CAT, "llama-3.1-70b", "b200", dtype="fp8")
    assert checkpoint_repo(fp8) == "meta-llama/Llama-3.1-70B-Instruct"
    oss = rl.build_replica(CAT, "gpt-oss-120b", "b200", dtype="fp4")
    assert checkpoint_repo(oss) == "openai/gpt-oss-120b"


def test_fp8_pools_still_quantize_on_load():
    plan = make_plan(_request(["fp8"]), CAT, alternatives=False, verify=False)
    assert "--quantization=fp8" in plan.pools[0].launch.vllm
    assert "--quantization=fp8" in plan.pools[0].launch.sglang


def test_the_text_plan_says_fp4_efficiency_is_assumed():
    plan = make_plan(_request(["fp8", "fp4"]), CAT, alternatives=False, verify=False)
    text = render_plan_text(plan.to_json_dict())
    assert "fp4: checkpoint RedHatAI/Llama-3.1-70B-Instruct-NVFP4 (nvfp4, 4.5 bits" in text
    r = CAT.gpus["b200"].efficiency.fp4_level_ratio
    gemm = round(min(1.0, kf.fp4_gemm_ratio(CAT.gpus["b200"], "vllm") * r) * 0.641, 3)
    mbu = CAT.gpus["b200"].efficiency.decode_mbu
    read = round(min(kn.FP4_WEIGHT_READ_DERATE * r, 0.7 / mbu), 3)
    assert read == 1.132  # B200's FP4 runs read faster than its level says
    assert (
        f"b200 GEMMs x{gemm}, weight reads x{read} (FP4 runs measured at x{r} these "
        "derates), factors analogy"
    ) in text


def _measured_over_predicted(dtype: str) -> list[float]:
    """measured / predicted output tokens/s of DeepSeek-V3 on B200 in ``dtype`` over the
    reference points the planner can price (the FP4 ones were imported as skipped only
    because the catalog then had no FP4 DeepSeek)."""
    out = []
    for m in load_reference_measurements(CAT, include_skipped=True):
        if (m.model, m.gpu, m.dtype.value) != ("deepseek-v3", "b200", dtype):
            continue
        dtype_only = (m.skip_reason or "").startswith(
            "cannot be priced on the catalog: dtype: deepseek-v3 is not served in fp4"
        )
        if not (m.usable or dtype_only) or not m.output_tok_s:
            continue
        predicted = predict(m, CAT).output_tok_s
        assert predicted
        out.append(m.output_tok_s / predicted)
    return out


def test_fp4_is_priced_no_better_than_fp8_against_measurements():
    """The assumed FP4 derates make the model under-predict the public FP4 runs more than
    it under-predicts FP8 ones on the same GPU and model (medians 1.45 and 1.0)."""
    fp4, fp8 = _measured_over_predicted("fp4"), _measured_over_predicted("fp8")
    assert len(fp4) >= 5 and len(fp8) >= 5
    assert statistics.median(fp4) >= statistics.median(fp8)
    assert statistics.median(fp4) > 1.0  # pessimistic, not optimistic


def test_the_unmeasured_line_says_a_measured_gpu_is_unmeasured_in_fp4_only():
    from planner.report.borrowed import unmeasured_gpu_note

    plan = make_plan(_request(["fp4"]), CAT, alternatives=False, verify=False)
    doc = plan.to_json_dict()
    assert doc["unmeasured_gpus"] == ["b200"]
    text = render_plan_text(doc)
    assert (
        "unmeasured GPUs: b200 (fp4 pools: no factors measured in fp4; its level x the FP4 "
        "derates, see fp4 under Assumed)"
    ) in text
    # a GPU set by analogy (level 1, nothing measured) or priced by analogy in another
    # format (a hand-set efficiency) keeps the plain words
    pool = {"gpu": "x", "dtype": "fp4", "provenance": "analogy", "level_scale": 1.0}
    plain = "x (efficiency set by analogy, no measurement)"
    assert unmeasured_gpu_note({"pools": [pool]}, "x") == plain
    fp8 = {**pool, "dtype": "fp8", "level_scale": 0.88}
    assert unmeasured_gpu_note({"pools": [fp8]}, "x") == plain
    assert unmeasured_gpu_note({"pools": [{**pool, "level_scale": 0.88}, fp8]}, "x") == plain
    assert unmeasured_gpu_note({"pools": "junk"}, "x") == plain
    # the report's uncertainty sentence says the same
    from planner.report.render import render_plan_report

    md, _ = render_plan_report({"plan": doc, "request": _request(["fp4"])}, "md", CAT)
    assert isinstance(md, str)
    assert "No factors fitted in FP4 back b200: its level times the FP4 derates, lifted" in md
    assert "No measurement backs b200" not in md


def test_an_fp4_pool_on_a_gpu_whose_level_is_borrowed_says_so():
    """B300 was measured on DeepSeek-V3 only: its dense level is B200's. Its FP4 pools are
    priced by analogy (no FP4 factors), and the plan says the level is borrowed."""
    req = _request(["fp4"])
    req["candidates"]["gpus"] = ["b300"]
    doc = make_plan(req, CAT, alternatives=False, verify=False).to_json_dict()
    assert doc["unmeasured_gpus"] == ["b300"]
    assert any(
        w.startswith("b300: measured on mixture-of-experts LLMs only") for w in doc["warnings"]
    )
    text = render_plan_text(doc)
    assert "b300 (fp4 pools: no factors measured in fp4; its level x the FP4 derates" in text
    assert "b300 measured on mixture-of-experts LLMs only: the factors for this model are" in text
