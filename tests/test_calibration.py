"""planner.calibration: parsers, refusals, the fit, the store, applying a calibration."""

from __future__ import annotations

import json
import math
from pathlib import Path
from statistics import median

import pytest
from settings_support import planner_defaults

from api.settings import Settings
from catalog.loader import load_catalog
from catalog.schema import Dtype
from planner import calibration as cb
from planner import roofline as rl
from planner.errors import PlanningError, UnknownEntryError

CAT = load_catalog()
DATA = Path(__file__).parent / "data" / "calibration"
H100 = "h100-sxm5-80gb"


# --------------------------------------------------------------------------- parsers


def test_csv_file():
    got = cb.load_measurements([DATA / "measurements.csv"], CAT)
    assert len(got) == 4
    m = got[1]
    assert (m.model, m.gpu, m.tp, m.dtype) == ("llama-3.1-8b", H100, 1, Dtype.BF16)
    assert (m.isl, m.osl, m.concurrency) == (1024, 256, 8)
    assert (m.output_tok_s, m.ttft_ms, m.tpot_ms) == (860.4, 35.1, 9.1)
    assert m.where == f"{DATA / 'measurements.csv'}:3"


def test_csv_carries_the_memory_share_the_run_stated(tmp_path):
    """An optional ``memory_utilization`` column (vLLM's gpu_memory_utilization) prices
    the run's KV cache at that share; outside (0, 1] it is refused naming the field."""
    head = "model,gpu,tp,dtype,isl,osl,concurrency,output_tok_s,ttft_ms,tpot_ms,memory_utilization"
    path = tmp_path / "m.csv"
    path.write_text(f"{head}\nllama-3.1-8b,{H100},1,bf16,1024,256,8,860.4,35.1,9.1,0.85\n")
    (m,) = cb.load_measurements([path], CAT)
    assert m.memory_utilization == 0.85
    assert cb.base_replica(m, CAT).memory_utilization == 0.85
    path.write_text(f"{head}\nllama-3.1-8b,{H100},1,bf16,1024,256,8,860.4,35.1,9.1,1.5\n")
    with pytest.raises(cb.MeasurementError) as info:
        cb.load_measurements([path], CAT)
    assert "memory_utilization" in info.value.issues[0][1]


def test_vllm_bench_serve_file_takes_the_replica_from_flags():
    path = DATA / "vllm_bench_serve.json"
    with pytest.raises(cb.MeasurementError) as info:
        cb.load_measurements([path], CAT)
    where, reason = info.value.issues[0]
    assert where == f"{path}:1" and "gpu" in reason and "--gpu" in reason
    (m,) = cb.load_measurements([path], CAT, {"gpu": H100, "tp": 1, "dtype": "bf16"})
    assert m.model == "llama-3.1-8b"  # from meta-llama/Llama-3.1-8B-Instruct
    assert (m.isl, m.osl) == (1024, 256)  # total tokens / completed
    assert m.concurrency == 16 and m.request_rate_rps is None
    assert (m.output_tok_s, m.ttft_ms, m.tpot_ms) == (1242.7, 61.3, 12.6)
    assert m.engine == "vllm"


def test_genai_perf_export_in_ms():
    (m,) = cb.load_measurements(
        [DATA / "genai_perf_export.json"], CAT, {"gpu": H100, "tp": 1, "dtype": "bf16"}
    )
    assert m.model == "llama-3.1-8b" and m.concurrency == 8
    assert (m.isl, m.osl) == (2048, 256)
    assert (m.output_tok_s, m.ttft_ms, m.tpot_ms) == (617.0, 148.2, 12.4)


def test_aiperf_export_without_units_is_in_nanoseconds():
    (m,) = cb.load_measurements(
        [DATA / "aiperf_export.json"],
        CAT,
        {"model": "llama-3.1-70b", "gpu": H100, "tp": 4, "dtype": "bf16"},
    )
    assert m.concurrency == 32 and (m.isl, m.osl) == (1000, 256)
    assert m.ttft_ms == pytest.approx(95.0) and m.tpot_ms == pytest.approx(24.1)


def test_fleetplan_json_reports_the_line_of_each_bad_entry(tmp_path):
    doc = {
        "measurements": [
            {
                "model": "llama-3.1-8b",
                "gpu": H100,
                "tp": 1,
                "dtype": "bf16",
                "isl": 100,
                "osl": 100,
                "concurrency": 1,
                "tpot_ms": 8.0,
            },
            {
                "model": "llama-3.1-8b",
                "gpu": H100,
                "tp": 1,
                "dtype": "bf16",
                "isl": 100,
                "osl": 100,
                "concurrency": 1,
            },
        ]
    }
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc, indent=1))
    with pytest.raises(cb.MeasurementError) as info:
        cb.load_measurements([path], CAT)
    (where, reason), *_ = info.value.issues
    line = path.read_text().splitlines().index("  {", 12) + 1
    assert where == f"{path}:{line}"
    assert "measures nothing" in reason


@pytest.mark.parametrize(
    ("name", "line", "words"),
    [
        ("bad_missing_column.csv", 1, ["missing column", "tpot_ms"]),
        ("bad_values.csv", 3, ["output_tok_s", "greater than 0"]),
        ("bad_unknown.csv", 4, ["unknown model", "not-a-model"]),
    ],
)
def test_bad_files_name_file_line_and_reason(name, line, words):
    with pytest.raises(cb.MeasurementError) as info:
        cb.load_measurements([DATA / "measurements.csv", DATA / name], CAT)
    where, reason = info.value.issues[0]
    assert where == f"{DATA / name}:{line}"
    for w in words:
        assert w in reason
    assert info.value.code == "invalid_measurements"


def test_every_bad_line_is_reported():
    with pytest.raises(cb.MeasurementError) as info:
        cb.load_measurements([DATA / "bad_unknown.csv"], CAT)
    assert [w.rsplit(":", 1)[1] for w, _ in info.value.issues] == ["4", "5"]
    assert "unknown gpu 'tpu-v9'" in info.value.issues[1][1]


def test_measurement_model_refuses_incomplete_points():
    base = {"model": "llama-3.1-8b", "gpu": H100, "tp": 1, "dtype": "bf16"}
    with pytest.raises(ValueError, match="isl and osl"):
        cb.Measurement(**base, tpot_ms=3.0)
    with pytest.raises(ValueError, match="kernel measurement needs"):
        cb.Measurement(**base, kind="kernel", tokens=4)
    with pytest.raises(ValueError, match="not both"):
        cb.Measurement(**base, isl=1, osl=2, tpot_ms=1, concurrency=1, request_rate_rps=1)
    m = cb.Measurement(**base, isl=1, osl=2, tpot_ms=1, request_rate_rps="inf")
    assert math.isinf(m.request_rate_rps)


def test_model_names_map_to_catalog_ids():
    assert cb.resolve_model(CAT, "meta-llama/Meta-Llama-3.1-70B-Instruct") == "llama-3.1-70b"
    assert cb.resolve_model(CAT, "meta-llama/Llama-3.3-70B-Instruct") == "llama-3.1-70b"
    assert cb.resolve_model(CAT, "llama-2-7b") == "llama-2-7b"
    assert cb.resolve_model(CAT, "gpt-2") is None


# --------------------------------------------------------------------------- predictions


def test_kernel_prediction_is_the_layer_roofline():
    """llama-2-7b's linear layers: 202.4M parameters per layer; 4096 tokens on one H100
    at MFU 0.5 take 4096 x 2 x 202.4M / 494.7 TFLOP/s = 3.35 ms at 512 tokens' rate, and
    H100's GEMMs (vLLM, bf16) run 1.005x that rate at 4,096 tokens: 3.335 ms."""
    r = rl.build_replica(CAT, "llama-2-7b", H100, mfu=0.5, mbu=0.7)
    assert r.coefficients.gemm_gain[2] == 1.005  # at 4,096 tokens
    assert cb.kernel_layer_ms(r, 4096) == pytest.approx(3.352 / 1.005, rel=1e-3)
    # one token reads the layer's 404.8 MB at 0.7 x 3.35 TB/s
    assert cb.kernel_layer_ms(r, 1) == pytest.approx(0.1726, rel=1e-3)


def test_finite_open_loop_run_is_priced_with_its_ramp_down():
    base = dict(model="llama-3.1-8b", gpu=H100, tp=1, dtype="bf16", isl=467, osl=256)
    light = cb.Measurement(**base, request_rate_rps=2.0, num_requests=500, tpot_ms=8.0)
    p = cb.predict(light, CAT)
    assert 0.97 * 512 < p.output_tok_s < 512  # 2 req/s x 256, less the last request
    burst = cb.Measurement(**base, request_rate_rps="inf", num_requests=500, tpot_ms=8.0)
    assert cb.predict(burst, CAT).ttft_ms is None


# --------------------------------------------------------------------------- fitting


def synthetic(factors, noise: float = 0.0):
    """Measurements the cost model itself predicts at ``factors`` (+/- noise)."""
    shapes = [
        ("llama-3.1-8b", 1, 512, 128),
        ("llama-3.1-8b", 1, 2048, 256),
        ("llama-3.1-70b", 4, 1024, 512),
        ("llama-3.1-70b", 4, 4096, 256),
    ]
    out = []
    k = 0
    for model, tp, isl, osl in shapes:
        for c in (1, 8, 64):
            m = cb.Measurement(
                model=model,
                gpu=H100,
                tp=tp,
                dtype=Dtype.BF16,
                isl=isl,
                osl=osl,
                concurrency=c,
                tpot_ms=1.0,
                id=f"s{k}",
            )
            p = cb.predict(m, CAT, factors)
            wiggle = 1 + noise * ((-1) ** k)
            out.append(
                m.model_copy(
                    update={
                        "output_tok_s": p.output_tok_s * wiggle,
                        "ttft_ms": p.ttft_ms / wiggle,
                        "tpot_ms": p.tpot_ms * wiggle,
                    }
                )
            )
            k += 1
    return out


def test_fit_recovers_the_factors_that_made_the_data():
    truth = (0.62, 0.81, 1.2)
    cal = cb.fit_calibration("synthetic", synthetic(truth), CAT)
    (f,) = cal.factors
    assert (f.gpu, f.dtype, f.engine) == (H100, Dtype.BF16, None)
    assert f.factors == pytest.approx(truth, rel=0.02, abs=0.05)
    assert all(f.determined.values())
    assert f.median_ape_after < 0.005 < f.median_ape_before
    assert len(cal.residuals) == f.values == 36


def test_fit_on_noisy_data_stays_close():
    truth = (0.45, 0.6, 3.0)
    (f,) = cb.fit_calibration("noisy", synthetic(truth, noise=0.05), CAT).factors
    assert f.prefill_mfu == pytest.approx(0.45, rel=0.1)
    assert f.decode_mbu == pytest.approx(0.6, rel=0.1)


def test_fit_holds_what_the_data_cannot_tell():
    """Kernel timings say nothing about the per-step overhead: it stays the catalog's."""
    points = [m for m in cb.load_reference_measurements(CAT) if m.kind == "kernel"]
    points = [m for m in points if m.gpu == H100]
    (f,) = cb.fit_calibration("kernels", points, CAT).factors
    assert f.determined == {
        "prefill_mfu": True,
        "decode_mbu": True,
        "step_overhead_ms": False,
    }
    assert f.step_overhead_ms == CAT.gpus[H100].efficiency.step_overhead_ms


def test_groups_per_dtype_and_engine():
    a = synthetic((0.5, 0.7, 2.0))[:3]
    b = [m.model_copy(update={"engine": "sglang"}) for m in a]
    cal = cb.fit_calibration("two", a + b, CAT, per_engine=True)
    assert [(f.dtype, f.engine) for f in cal.factors] == [
        (Dtype.BF16, None),
        (Dtype.BF16, "sglang"),
    ]


def test_leave_one_out_predicts_each_point_from_the_others():
    pts = synthetic((0.6, 0.8, 1.0), noise=0.02)[:6]
    res = cb.fit_group(pts, CAT, (H100, Dtype.BF16, None))
    apes = cb.leave_one_out(pts, CAT, (H100, Dtype.BF16, None), res.fit)
    assert len(apes) == 18 and median(apes) < 0.1


# --------------------------------------------------------------------------- apply and store


def calibration(mfu=0.61, mbu=0.77, overhead=1.1, dtype: Dtype | None = Dtype.FP8):
    return cb.Calibration(
        name="lab",
        created_at="2026-01-01T00:00:00+00:00",
        factors=[
            cb.GroupFit(
                gpu=H100,
                dtype=dtype,
                engine=None,
                prefill_mfu=mfu,
                decode_mbu=mbu,
                step_overhead_ms=overhead,
                determined={},
                std_errors={},
                points=3,
                values=9,
                median_ape_before=None,
                worst_ape_before=None,
                median_ape_after=None,
                worst_ape_after=None,
            )
        ],
    )


def test_apply_calibration_sets_the_dtypes_factors_and_rehashes():
    cal = calibration()
    cat = cb.apply_calibration(CAT, cal)
    assert cat.content_hash != CAT.content_hash
    fp8 = rl.build_replica(cat, "llama-3.1-8b", H100, dtype="fp8")
    assert (fp8.prefill_mfu, fp8.decode_mbu, fp8.step_overhead_ms) == (0.61, 0.77, 1.1)
    bf16 = rl.build_replica(cat, "llama-3.1-8b", H100, dtype="bf16")
    base = CAT.gpus[H100].efficiency
    assert (bf16.prefill_mfu, bf16.decode_mbu) == (base.prefill_mfu, base.decode_mbu)
    assert CAT.gpus[H100].efficiency.by_dtype == {}  # the shipped catalog is untouched
    # a group over every dtype sets the GPU's defaults
    every = cb.apply_calibration(CAT, calibration(dtype=None))
    assert rl.build_replica(every, "llama-3.1-8b", H100).decode_mbu == 0.77


def test_apply_refuses_unknown_gpus():
    cal = calibration().model_copy(
        update={"factors": [calibration().factors[0].model_copy(update={"gpu": "tpu"})]}
    )
    with pytest.raises(UnknownEntryError) as info:
        cb.apply_calibration(CAT, cal)
    assert info.value.issues[0][0] == "calibration"


def test_store_round_trip(tmp_path, monkeypatch):
    cal = calibration()
    path = cb.save_calibration(cal, tmp_path)
    assert path == tmp_path / "lab.yaml"
    assert cb.load_calibration("lab", tmp_path) == cal
    planner_defaults(monkeypatch, Settings(calibration_dir=str(tmp_path)))
    assert cb.list_calibration_names() == ["lab"]
    assert cb.load_calibration("lab") == cal
    with pytest.raises(UnknownEntryError, match="known: lab"):
        cb.load_calibration("other")
    with pytest.raises(PlanningError):
        cb.load_calibration("../etc/passwd")


def test_a_plan_names_its_calibration(tmp_path, monkeypatch):
    from planner.service import make_plan

    planner_defaults(monkeypatch, Settings(calibration_dir=str(tmp_path)))
    cb.save_calibration(calibration(dtype=Dtype.BF16, mbu=0.9), tmp_path)
    request = {
        "model": "llama-3.1-8b",
        "traffic": {"rate_rps": 4, "classes": [{"workload": "chat", "share": 1}]},
        "candidates": {"gpus": [H100], "dtypes": ["bf16"]},
        "calibration": "lab",
    }
    plan = make_plan(request, alternatives=False, verify=False)
    assert plan.assumptions["calibration"] == "lab"
    assert plan.assumptions["gpus"][H100]["decode_mbu"] == 0.9
    assert plan.catalog_hash != CAT.content_hash
    plain = make_plan({**request, "calibration": None}, alternatives=False, verify=False)
    assert plain.assumptions["calibration"] is None
    assert plain.catalog_hash == CAT.content_hash
    with pytest.raises(UnknownEntryError) as info:
        make_plan({**request, "calibration": "nope"}, alternatives=False, verify=False)
    assert info.value.issues[0][0] == "calibration"


# --------------------------------------------------------------------------- reference data


def test_reference_measurements_are_shipped_with_their_sources():
    doc = json.loads(cb.REFERENCE_PATH.read_text())
    everything = cb.load_reference_measurements(CAT, include_skipped=True)
    points = cb.load_reference_measurements(CAT)
    assert len(everything) == doc["imported"] >= 300
    assert len(everything) - len(points) == doc["recorded_not_fitted"] > 50
    assert all(m.source and m.id and m.split for m in everything)
    assert all(m.usable for m in points)
    assert {m.gpu for m in points} >= {
        H100,
        "h200-sxm-141gb",
        "a100-sxm-80gb",
        "mi300x",
        "mi325x",
        "b200",
        "a10g",
    }
    assert {m.kind for m in points} == {"serving", "kernel"}
    # expert parallelism (with DP attention) is priced now: such points are fitted
    # unless something else is unmodelled (disaggregation, MTP, a dtype not served)
    wide = [m for m in everything if (m.ep or 1) > 1]
    assert any(m.usable for m in wide)
    for m in wide:
        if not m.usable:
            assert m.skip_reason and "expert parallelism" not in m.skip_reason.split(";")[0]
