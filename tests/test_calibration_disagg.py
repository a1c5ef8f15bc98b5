"""Disaggregated measurements (planner.calibration.disagg): the closed loop of users on
prefill and decode workers, its layout read from InferenceMAX's notes, and its checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from script_support import load_script

from catalog.loader import load_catalog
from catalog.schema import Dtype
from planner import calibration as cb
from planner import roofline as rl
from planner.calibration.disagg import disaggregated_closed_loop, prefill_batch_ms

CAT = load_catalog()
ROOT = Path(__file__).resolve().parent.parent


def _replica(tp: int, ep: int = 1, dp: int = 1) -> rl.Replica:
    return rl.build_replica(
        CAT,
        "deepseek-v3",
        "h200-sxm-141gb",
        tp=tp,
        dtype=Dtype.FP8,
        kv_dtype=Dtype.FP8,
        ep=ep,
        dp=dp,
    )


PREFILL, DECODE = _replica(8, ep=8, dp=8), _replica(8)


def test_a_prefill_pass_is_the_sum_of_its_kernels():
    c = PREFILL.coefficients
    n, isl = 4, 1000
    want = (
        c.gemm_ms(n * isl)
        + c.moe_ms(n * isl)
        + n * max(c.chunk_attention_parts_ms(isl, 0.0))
        + c.comm_ms(n * isl)
        + c.overhead_ms
    )
    assert prefill_batch_ms(PREFILL, isl, n) == pytest.approx(want, rel=1e-12)
    # the weights are read once a pass: four prompts together beat four passes
    assert prefill_batch_ms(PREFILL, isl, 4) < 4 * prefill_batch_ms(PREFILL, isl, 1)


def test_the_loop_holds_its_users_by_littles_law():
    pt = disaggregated_closed_loop(
        PREFILL, DECODE, prefill_workers=1, decode_workers=3, isl=1000, osl=1000, concurrency=64
    )
    assert pt.bound == "loop"
    users = pt.requests_per_s * (pt.ttft_ms + 999 * pt.tpot_ms) / 1e3
    assert users == pytest.approx(64, rel=1e-6)
    assert pt.output_tok_s == pytest.approx(pt.requests_per_s * 1000)
    # the decode batch per worker is the loop's decoding users over the workers
    decoding = pt.requests_per_s * 999 * pt.tpot_ms / 1e3
    assert pt.decode_batch * 3 == pytest.approx(decoding, rel=1e-4)
    assert pt.tpot_ms == pytest.approx(rl.decode_step_ms(DECODE, pt.decode_batch, 1500.0))


def test_a_measured_ttft_is_taken_as_it_was():
    pt = disaggregated_closed_loop(
        PREFILL,
        DECODE,
        prefill_workers=1,
        decode_workers=3,
        isl=1000,
        osl=1000,
        concurrency=8,
        ttft_ms=2000.0,
    )
    assert pt.ttft_ms == 2000.0
    assert pt.requests_per_s == pytest.approx(8 / ((2000.0 + 999 * pt.tpot_ms) / 1e3), rel=1e-6)


def test_too_many_users_saturate_the_bottleneck_and_queue():
    few = disaggregated_closed_loop(
        PREFILL, DECODE, prefill_workers=1, decode_workers=1, isl=1000, osl=200, concurrency=10**5
    )
    more = disaggregated_closed_loop(
        PREFILL,
        DECODE,
        prefill_workers=1,
        decode_workers=1,
        isl=1000,
        osl=200,
        concurrency=2 * 10**5,
    )
    assert few.bound in ("prefill", "decode")
    assert more.requests_per_s == pytest.approx(few.requests_per_s)
    assert more.ttft_ms > few.ttft_ms  # the extra users wait


@settings(max_examples=15, deadline=None)
@given(st.floats(1, 3000), st.floats(1.1, 3.0))
def test_more_users_never_lower_the_throughput(c, k):
    a, b = (
        disaggregated_closed_loop(
            PREFILL, DECODE, prefill_workers=1, decode_workers=2, isl=2000, osl=500, concurrency=x
        )
        for x in (c, c * k)
    )
    assert b.output_tok_s >= a.output_tok_s * (1 - 1e-6)


def _point(**update) -> dict:
    base = {
        "model": "deepseek-v3",
        "gpu": "h200-sxm-141gb",
        "tp": 8,
        "dtype": "fp8",
        "engine": "sglang",
        "isl": 922,
        "osl": 922,
        "concurrency": 72.0,
        "output_tok_s": 4038.0,
        "ttft_ms": 881.0,
        "tpot_ms": 16.3,
        "prefill_workers": 1,
        "prefill_tp": 8,
        "prefill_ep": 8,
        "prefill_dp_attention": True,
        "decode_workers": 9,
        "ep": 8,
        "id": "d1",
    }
    return {**base, **update}


def test_a_disaggregated_point_is_priced_on_both_sides_with_its_ttft_as_measured():
    m = cb.Measurement.model_validate(_point())
    assert m.disaggregated and set(m.quantities()) == {"output_tok_s", "tpot_ms"}
    assert cb.check_measurement(m, CAT) is None
    pred = cb.predict(m, CAT)
    assert pred.ttft_ms is None and pred.output_tok_s and pred.tpot_ms
    prefill = cb.prefill_replica(m, CAT)
    assert prefill is not None and (prefill.tp, prefill.ep, prefill.dp) == (8, 8, 8)
    # slower decode kernels, lower predicted throughput (the fit has something to fit)
    slow = cb.predict(m, CAT, (0.3, 0.3, 5.0))
    assert slow.output_tok_s < pred.output_tok_s and slow.tpot_ms > pred.tpot_ms


@pytest.mark.parametrize(
    ("update", "why"),
    [
        ({"decode_workers": None}, "needs prefill_workers, prefill_tp and decode_workers"),
        ({"concurrency": None, "request_rate_rps": 2.0}, "closed loop"),
        ({"prefill_ep": None}, "prefill_dp_attention without expert parallelism"),
    ],
)
def test_an_incomplete_disaggregated_point_is_refused_with_the_reason(update, why):
    with pytest.raises(ValidationError, match=why):
        cb.Measurement.model_validate(_point(**update))
    # recorded with a reason, it is kept (not priced)
    kept = cb.Measurement.model_validate(_point(**update, skip_reason="not modelled: layout"))
    assert not kept.usable


def _importer():
    return load_script("import_reference_measurements")


def test_the_importer_reads_the_worker_layout_and_records_an_ambiguous_one():
    imp = _importer()
    notes = (
        "PD-disaggregated, multi-node: 1 prefill worker(s) TP8/EP8/dp-attn=True (8 GPUs) "
        "+ 3 decode worker(s) TP8/EP1/dp-attn=False (24 GPUs)."
    )
    assert imp.disaggregated_layout({"notes": notes}) == {
        "prefill_tp": 8,
        "prefill_ep": 8,
        "prefill_dp_attention": True,
        "prefill_workers": 1,
        "tp": 8,
        "ep": None,
        "dp_attention": None,
        "decode_workers": 3,
    }
    ambiguous = notes.replace("TP8/EP8/dp-attn=True (8 GPUs)", "TP1/EP1/dp-attn=True (4 GPUs)")
    assert imp.disaggregated_layout({"notes": ambiguous}) is None
    entry = {"notes": ambiguous, "framework": "SGLang", "tp": 1, "concurrency": 4}
    assert "layout not stated per worker" in imp._skip_reason_more(entry)
    assert (
        imp._skip_reason_more({"notes": notes, "framework": "x", "tp": 8, "concurrency": 4}) is None
    )


def test_shipped_disaggregated_points_are_priced():
    pts = [m for m in cb.load_reference_measurements(CAT) if m.disaggregated]
    assert {m.gpu for m in pts} >= {"gb200-per-gpu", "b200", "h200-sxm-141gb"}
    for m in pts:
        pred = cb.predict(m, CAT)
        assert pred.output_tok_s and pred.tpot_ms, m.label
