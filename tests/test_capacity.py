"""planner.capacity: one replica's steady state under continuous batching."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.loader import load_catalog
from planner import roofline as rl
from planner.capacity import (
    Bound,
    CapacityMode,
    CapacityModel,
    StepModel,
    decode_slots,
    replica_capacity,
    roofline_limits,
)
from planner.errors import PlanningError

CAT = load_catalog()
H100 = "h100-sxm5-80gb"


def replica(model="llama-3.1-8b", gpu=H100, tp=1, dtype="bf16", **kw) -> rl.Replica:
    kv = "bf16" if dtype == "bf16" else "fp8"
    return rl.build_replica(CAT, model, gpu, tp=tp, dtype=dtype, kv_dtype=kv, **kw)


# --------------------------------------------------------------------------- step model


def test_step_without_chunk_is_the_roofline_decode_step():
    r = replica("llama-3.1-70b", tp=4)
    steps = StepModel.of(r, 2000.0, 400.0)
    for b in (1, 16, 128):
        assert steps.step_ms(b, 0.0) == pytest.approx(rl.decode_step_ms(r, b, 2200.0), rel=1e-9)


def test_step_with_a_chunk_is_the_mixed_step_at_the_prompts_mean_cost():
    """A chunk of T tokens of a P-token prompt costs T / P of the prompt's FLOPs: the
    mixed step at chunk context P/2 - T/2 (mean context P/2) gives the same time."""
    r = replica()
    p, g, t, b = 4096.0, 256.0, 1024.0, 32
    steps = StepModel.of(r, p, g)
    expected = rl.mixed_step_ms(r, b, p + g / 2, t, p / 2 - t / 2)
    assert steps.step_ms(b, t) == pytest.approx(expected, rel=1e-9)


def test_step_never_beats_the_compute_roofline():
    """Tensor cores cannot overlap compute with compute: with overlap 1 and a
    compute-bound decode part, the step is at least both compute times."""
    r = replica(overlap_factor=1.0)
    steps = StepModel.of(r, 100.0, 10.0)
    memory, dcomp, ccomp = steps.parts_ms(2000, 2000)
    assert dcomp > memory  # a compute-bound decode part
    assert steps.step_ms(2000, 2000) >= dcomp + ccomp


# --------------------------------------------------------------------------- modes


def test_concurrency_one_is_one_sequence_at_a_time():
    r = replica()
    res = replica_capacity(r, 1000, 200, concurrency=1)
    assert res.mode == CapacityMode.CONCURRENCY and not res.saturated
    assert res.batch == pytest.approx(1.0, abs=0.05)
    # a lone user's cycle: TTFT then G - 1 steps
    cycle_s = (res.ttft_ms + 199 * res.tpot_ms) / 1e3
    assert res.requests_per_s == pytest.approx(1.0 / cycle_s, rel=1e-6)
    assert res.output_tokens_per_s == pytest.approx(200 / cycle_s, rel=1e-6)
    assert res.tpot_ms == pytest.approx(rl.decode_step_ms(r, 1, 1100), rel=0.05)


def test_closed_loop_obeys_littles_law():
    r = replica("llama-3.1-70b", tp=4)
    for c in (4, 32, 128):
        res = replica_capacity(r, 2000, 300, concurrency=c)
        users = res.requests_per_s * (res.ttft_ms + 299 * res.tpot_ms) / 1e3
        assert users == pytest.approx(c, rel=1e-4)


def test_more_users_more_throughput_and_slower_tokens():
    r = replica()
    results = [replica_capacity(r, 1000, 200, concurrency=c) for c in (1, 4, 16, 64, 256)]
    tput = [x.output_tokens_per_s for x in results]
    tpot = [x.tpot_ms for x in results]
    assert tput == sorted(tput) and tpot == sorted(tpot)
    assert tput[-1] > 10 * tput[0]


def test_saturated_closed_loop_queues_the_extra_users():
    r = replica("llama-3.1-70b", tp=2, dtype="fp8")
    top = replica_capacity(r, 5000, 500)
    assert top.mode == CapacityMode.MAX_THROUGHPUT and top.saturated
    assert top.resident_sequences == pytest.approx(top.max_resident_sequences, rel=1e-3)
    many = replica_capacity(r, 5000, 500, concurrency=250)
    assert many.saturated
    assert many.output_tokens_per_s == pytest.approx(top.output_tokens_per_s, rel=1e-9)
    # Little's law over the whole loop: the extra users wait before admission
    assert many.ttft_ms == pytest.approx(
        250 / many.requests_per_s * 1e3 - 499 * many.tpot_ms, rel=1e-9
    )
    assert many.ttft_ms > 20 * top.ttft_ms


def test_open_loop_carries_the_rate_until_overloaded():
    r = replica()
    res = replica_capacity(r, 1000, 200, request_rate_rps=5.0)
    assert res.mode == CapacityMode.RATE and not res.saturated
    assert res.requests_per_s == pytest.approx(5.0, rel=1e-6)
    assert res.ttft_ms is not None
    over = replica_capacity(r, 1000, 200, request_rate_rps=1e6)
    top = replica_capacity(r, 1000, 200)
    assert over.saturated and over.ttft_ms is None
    assert over.requests_per_s == pytest.approx(top.requests_per_s)
    assert replica_capacity(r, 1000, 200, request_rate_rps=math.inf).ttft_ms is None


def test_slo_mode_is_the_highest_load_meeting_the_slos():
    r = replica()
    res = replica_capacity(r, 1000, 200, tpot_ms=20.0)
    assert res.mode == CapacityMode.SLO and res.bound == Bound.SLO
    assert res.slo_binding == "tpot"
    assert res.tpot_ms == pytest.approx(20.0, rel=1e-5)
    top = replica_capacity(r, 1000, 200)
    assert res.output_tokens_per_s < top.output_tokens_per_s
    loose = replica_capacity(r, 1000, 200, tpot_ms=10_000.0, ttft_ms=1e6)
    assert loose.bound != Bound.SLO and loose.output_tokens_per_s == pytest.approx(
        top.output_tokens_per_s
    )
    tight = replica_capacity(r, 1000, 200, ttft_ms=60.0)
    assert tight.slo_binding == "ttft" and tight.ttft_ms <= 60.0 + 1e-6


def test_slo_with_concurrency_reports_whether_it_is_met():
    r = replica()
    ok = replica_capacity(r, 1000, 200, concurrency=2, tpot_ms=50.0)
    bad = replica_capacity(r, 1000, 200, concurrency=400, tpot_ms=12.0)
    assert ok.mode == CapacityMode.CONCURRENCY and ok.slo_met is True
    assert bad.slo_met is False


def test_unreachable_slos_name_the_field():
    r = replica()
    with pytest.raises(PlanningError) as info:
        replica_capacity(r, 1000, 200, tpot_ms=1.0)
    assert info.value.issues[0][0] == "tpot_ms"
    with pytest.raises(PlanningError) as info:
        replica_capacity(r, 1000, 200, ttft_ms=1.0)
    assert info.value.issues[0][0] == "ttft_ms"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"prompt_tokens": 0, "output_tokens": 10}, "prompt_tokens"),
        ({"prompt_tokens": 10, "output_tokens": 1}, "output_tokens"),
        ({"prompt_tokens": 200_000, "output_tokens": 10}, "prompt_tokens"),
        ({"prompt_tokens": 10, "output_tokens": 10, "concurrency": -1}, "concurrency"),
        (
            {"prompt_tokens": 10, "output_tokens": 10, "concurrency": 2, "request_rate_rps": 1},
            "request_rate_rps",
        ),
    ],
)
def test_bad_input_names_the_field(kwargs, field):
    with pytest.raises(PlanningError) as info:
        replica_capacity(replica(), **kwargs)
    assert info.value.issues[0][0] == field


def test_bounds():
    long = replica("llama-3.1-70b", tp=2, dtype="fp8")
    # prefill-heavy: the steps are compute-bound when the KV cache fills
    assert replica_capacity(long, 5000, 500).bound == Bound.COMPUTE
    # long sequences on a small KV cache: the cache limits the batch (at 100/2000 tokens
    # the batch of ~414 reads weights and KV for longer than its GEMMs take at the
    # measured kernel rate)
    small = replica("llama-3.1-70b", tp=4, dtype="bf16")
    assert replica_capacity(small, 100, 2000).step_bound == Bound.MEMORY_BANDWIDTH
    res = replica_capacity(small, 2000, 2000)
    assert res.bound == Bound.KV_CAPACITY and res.step_bound == Bound.MEMORY_BANDWIDTH
    capped = replica_capacity(replica(), 500, 500, max_batch=8)
    assert capped.bound == Bound.MAX_BATCH and capped.batch <= 8
    light = replica_capacity(replica(), 500, 500, concurrency=2)
    assert light.bound == Bound.MEMORY_BANDWIDTH and not light.saturated


def test_per_gpu_is_the_replica_over_tp():
    res = replica_capacity(replica("llama-3.1-70b", tp=4), 1000, 200, concurrency=32)
    assert res.output_tokens_per_s_per_gpu == pytest.approx(res.output_tokens_per_s / 4)


def test_max_batch_point_is_feasible_and_tight():
    cm = CapacityModel(replica(), 2000, 300)
    b, bound = cm.max_batch_point()
    assert cm._violation(b) is None
    assert cm._violation(b * (1 + 1e-6) + 1e-6) is not None or bound != Bound.KV_CAPACITY


def test_decode_slots_fit_memory_and_the_tpot_budget():
    r = replica()
    b, step = decode_slots(r, 1100, 20.0)
    assert step <= 20.0 < rl.decode_step_ms(r, b + 1, 1100)
    assert b <= rl.max_resident_batch(r, 1100)
    b2, step2 = decode_slots(r, 1100, 30.0, chunk_tokens=512, chunk_context_tokens=500)
    assert step2 == pytest.approx(rl.mixed_step_ms(r, b2, 1100, 512, 500))
    assert decode_slots(r, 1100, 1.0) is None


# --------------------------------------------------------------------------- roofline property

MODELS = ["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "qwen3-32b", "mistral-7b-v0.1"]
GPUS = ["h100-sxm5-80gb", "h200-sxm-141gb", "a100-sxm-80gb", "mi300x", "l40s", "b200"]


@st.composite
def scenarios(draw):
    model = draw(st.sampled_from(MODELS))
    gpu = draw(st.sampled_from(GPUS))
    dtype = draw(st.sampled_from(["bf16", "fp8"]))
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    factors = (
        draw(st.floats(0.05, 1.0)),
        draw(st.floats(0.05, 1.0)),
        draw(st.floats(0.0, 50.0)),
    )
    prompt = draw(st.integers(1, 20_000))
    output = draw(st.integers(2, 4_000))
    mode = draw(st.sampled_from(["max", "concurrency", "rate", "slo"]))
    load = draw(st.floats(0.1, 2000.0))
    return model, gpu, dtype, tp, factors, prompt, output, mode, load


def _predict(r: rl.Replica, prompt, output, mode, load):
    if mode == "concurrency":
        return replica_capacity(r, prompt, output, concurrency=load)
    if mode == "rate":
        return replica_capacity(r, prompt, output, request_rate_rps=load / 10)
    if mode == "slo":
        return replica_capacity(r, prompt, output, tpot_ms=load)
    return replica_capacity(r, prompt, output)


PRICED: list[str] = []


# derandomized: the companion check below needs every mode priced, and a random draw of
# 150 cases once priced no "slo" case (all missed their drawn TPOT: a fresh-check run)
@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.filter_too_much],
)
@given(scenarios())
def test_predictions_never_exceed_the_roofline(case):
    """Whatever the efficiency factors (any calibration stays within MFU, MBU <= 1 and
    overhead >= 0), no prediction beats peak FLOP/s and peak bandwidth."""
    model, gpu, dtype, tp, (mfu, mbu, overhead), prompt, output, mode, load = case
    try:
        r = replica(model, gpu, tp, dtype, mfu=mfu, mbu=mbu, step_overhead_ms=overhead)
        res = _predict(r, prompt, output, mode, load)
    except PlanningError:
        return  # a combination that does not exist, does not fit, or misses its SLO
    PRICED.append(mode)
    limits = roofline_limits(r, prompt, output)
    assert res.output_tokens_per_s <= limits.max_output_tokens_per_s * (1 + 1e-9)
    assert res.tpot_ms >= limits.min_tpot_ms * (1 - 1e-9)
    if res.ttft_ms is not None:
        assert res.ttft_ms >= limits.min_ttft_ms * (1 - 1e-9)


def test_the_property_priced_enough_cases():
    """The property above is not vacuous: most drawn combinations were priced."""
    if PRICED:  # run after it (same module, definition order)
        assert len(PRICED) >= 40 and len(set(PRICED)) == 4


def test_calibrated_predictions_never_exceed_the_roofline():
    """The shipped reference calibration's factors, on every GPU it covers."""
    from planner import calibration as cb

    points = cb.load_reference_measurements(CAT)
    for m in points:
        if m.kind != cb.MeasurementKind.SERVING:
            continue
        r = cb.base_replica(m, CAT)
        for factors in ((1.0, 1.0, 0.0), (0.05, 0.05, 50.0), (0.6, 0.8, 1.0)):
            rr = cb.with_factors(r, factors)
            res = replica_capacity(rr, m.isl, m.osl)
            limits = roofline_limits(rr, m.isl, m.osl)
            assert res.output_tokens_per_s <= limits.max_output_tokens_per_s * (1 + 1e-9)
            assert res.tpot_ms >= limits.min_tpot_ms * (1 - 1e-9)


def test_a_busy_engine_starts_a_new_request_after_the_step_in_flight_and_the_next():
    """Overlap / async scheduling (vLLM, SGLang and TensorRT-LLM by default): a request
    arriving at a busy engine waits for the step in flight (half of one on average) and
    for the one already scheduled: min(1, n) x t x (1/2 + 1)."""
    from dataclasses import replace as dc_replace

    from planner import engines

    assert all(p.first_token_extra_steps == 1 for p in engines.ENGINES.values())
    assert engines.busy_wait_ms("vllm", 40.0, 20.0) == pytest.approx(30.0)  # 1.5 steps
    assert engines.busy_wait_ms("trtllm", 0.5, 20.0) == pytest.approx(15.0)  # busy half
    assert engines.busy_wait_ms("sglang", 0.0, 20.0) == 0.0  # idle: starts at once
    model = CapacityModel(replica(), 1000, 200)
    pt = model.point(32.0)
    assert pt.resident > 1
    assert pt.residual_ms == pytest.approx(1.5 * pt.tpot_ms)
    assert pt.admitted_ttft_ms == pytest.approx(1.5 * pt.tpot_ms + pt.prefill_ms + pt.stack_ms)
    # a synchronous scheduler (k = 0) would start it after the step in flight alone
    sync = dc_replace(engines.ENGINES["vllm"], first_token_extra_steps=0)
    original = engines.ENGINES["vllm"]
    try:
        engines.ENGINES["vllm"] = sync
        assert engines.busy_wait_ms("vllm", 40.0, 20.0) == pytest.approx(10.0)
    finally:
        engines.ENGINES["vllm"] = original


def test_an_aggregated_pools_ttft_counts_the_step_already_scheduled(monkeypatch):
    """Plans price the overlap step where a busy stepping replica sets the TTFT: an
    aggregated pool's predicted TTFT holds k x its mixed step at its batch
    (Candidate.overlap_ttft_ms, shown as scheduled_step_ms); with a synchronous engine
    (k = 0) the same fleet's TTFT is that much shorter."""
    from dataclasses import replace as dc_replace

    from planner import engines
    from planner.service import make_plan

    req = {
        "name": "overlap",
        "model": "llama-3.1-8b",
        "traffic": {"rate_rps": 20, "classes": [{"workload": "chat", "share": 1.0}]},
        "slo": {"ttft_ms": 1000, "tpot_ms": 50, "percentile": 90},
        "candidates": {"gpus": [H100], "dtypes": ["fp8"], "modes": ["aggregated"]},
    }
    plan = make_plan(req, CAT, alternatives=False, verify=False)
    (pool,) = plan.pools
    assert pool.role == "aggregated" and pool.step_ms is not None
    assert pool.scheduled_step_ms == pytest.approx(pool.step_ms)  # k = 1, no speculation
    sync = dc_replace(engines.ENGINES["vllm"], first_token_extra_steps=0)
    monkeypatch.setitem(engines.ENGINES, "vllm", sync)
    plain = make_plan(req, CAT, alternatives=False, verify=False)
    (same,) = plain.pools
    assert same.scheduled_step_ms == 0.0
    assert (same.replicas, same.max_batch, same.tp) == (pool.replicas, pool.max_batch, pool.tp)
    assert pool.predicted_ttft_ms is not None and same.predicted_ttft_ms is not None
    assert pool.predicted_ttft_ms - same.predicted_ttft_ms == pytest.approx(pool.step_ms)
