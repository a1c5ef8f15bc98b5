"""The per-sequence decode cost and the layer floor fitted to batch sweeps (catalog
decode_sequence_cost, planner.kernels.decode_sequence_ms and step_layer_floor_ms,
scripts/fit_decode_sequence_cost.py)."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError
from script_support import load_script

from catalog.kernel_floors import DecodeSequenceCost
from catalog.loader import load_catalog
from planner import calibration as cb
from planner import kernels
from planner import roofline as rl
from planner.simulate.steps import StepModel

CAT = load_catalog()
FIT = load_script("fit_decode_sequence_cost")
POINTS = [m for m in cb.load_reference_measurements(CAT) if m.usable]


def _replica(catalog, model: str = "llama-3.1-70b", gpu: str = "mi300x") -> rl.Replica:
    return rl.build_replica(catalog, model, gpu, tp=8, dtype="fp8", kv_dtype="fp8", engine="vllm")


def test_the_costs_are_layers_times_us_and_none_for_mla_tp1_or_unfitted_gpus():
    """0.5 us x 80 layers (Llama-3.1-70B) = 0.04 ms per decoding sequence per step at
    tp 2-8, and a 30 us layer floor 80 x 30 us = 2.4 ms per step; 126 layers (405B)
    0.063 ms and 3.78 ms. No per-sequence cost at tp 1 (fitted to tp 8 sweeps, and AMD's
    tp 1 MLPerf runs show none), but the floor there too (nothing shows its absence:
    conservative); neither for DeepSeek-V3 (MLA: its kernel has its own floor) nor on a
    GPU without a fit."""
    cat = FIT.with_cost(CAT, "mi300x", 0.5, 1, 30.0)
    mi300x, llama70 = cat.gpus["mi300x"], cat.models["llama-3.1-70b"]
    llama405, ds = cat.models["llama-3.1-405b"], cat.models["deepseek-v3"]
    for tp in (2, 8):
        assert kernels.decode_sequence_ms(mi300x, llama70, tp) == pytest.approx(0.04)
        assert kernels.step_layer_floor_ms(mi300x, llama70, tp) == pytest.approx(2.4)
    assert kernels.decode_sequence_ms(mi300x, llama405, 8) == pytest.approx(0.063)
    assert kernels.step_layer_floor_ms(mi300x, llama405, 8) == pytest.approx(3.78)
    assert kernels.decode_sequence_ms(mi300x, llama70, 1) == 0.0
    assert kernels.step_layer_floor_ms(mi300x, llama70, 1) == pytest.approx(2.4)
    for fn in (kernels.decode_sequence_ms, kernels.step_layer_floor_ms):
        assert fn(mi300x, ds, 8) == 0.0
        assert fn(cat.gpus["h100-sxm5-80gb"], llama70, 8) == 0.0
    assert FIT.with_cost(CAT, "mi300x", None).gpus["mi300x"].decode_sequence_cost is None
    tp1 = rl.build_replica(cat, "llama-3.1-70b", "mi300x", tp=1, dtype="fp8", engine="vllm")
    assert tp1.coefficients.attn_seq_ms == 0.0
    assert tp1.coefficients.overhead_ms == pytest.approx(tp1.step_overhead_ms + 2.4)
    tp8 = _replica(cat)
    assert tp8.coefficients.overhead_ms == pytest.approx(tp8.step_overhead_ms + 2.4)


def test_the_shipped_floor_in_the_step_coefficients():
    """Llama-3.1-70B FP8 on 8 x MI300X with the shipped catalog: the step's fixed cost is
    the 3 ms step overhead plus 80 layers x 27.14 us = 5.1712 ms; MI325X carries the same
    floor; DeepSeek-V3 (MLA) pays its MLA kernel floor and no layer floor."""
    cost = CAT.gpus["mi300x"].decode_sequence_cost
    assert cost is not None and cost.step_us_per_layer == 27.14
    c = _replica(CAT).coefficients
    assert c.layer_floor_ms == pytest.approx(80 * 27.14e-3)
    assert c.overhead_ms == pytest.approx(3.0 + 80 * 27.14e-3) == pytest.approx(5.1712)
    sibling = _replica(CAT, gpu="mi325x").coefficients
    assert sibling.layer_floor_ms == pytest.approx(c.layer_floor_ms)
    ds = rl.build_replica(CAT, "deepseek-v3", "mi300x", tp=8, dtype="fp8", engine="vllm")
    assert ds.coefficients.layer_floor_ms == 0.0 and ds.coefficients.attention_floor_ms > 0
    assert ds.coefficients.overhead_ms == pytest.approx(
        ds.step_overhead_ms + ds.coefficients.attention_floor_ms
    )


def test_a_decode_step_grows_by_the_costs_in_the_model_and_the_simulation():
    """64 decodes at a 1,000-token context on 8 x MI300X: the step is 64 x 0.04 + 2.4 =
    4.96 ms longer with 0.5 us per sequence and 30 us per step, per layer (the decode
    attention is memory-bound), in the cost model and in the simulation's inline step
    (decode and mixed)."""
    without = _replica(FIT.with_cost(CAT, "mi300x", None))
    with_cost = _replica(FIT.with_cost(CAT, "mi300x", 0.5, 1, 30.0))
    assert with_cost.coefficients.attn_seq_ms == pytest.approx(0.04)
    grown = with_cost.coefficients.step_ms(64, 1000.0) - without.coefficients.step_ms(64, 1000.0)
    assert grown == pytest.approx(64 * 0.04 + 2.4, rel=1e-9)
    sim = StepModel(with_cost)
    for batch, ctx in ((1, 100.0), (64, 1000.0), (256, 3000.0)):
        want = with_cost.coefficients.step_ms(batch, ctx)
        assert sim.decode_ms(batch, ctx) == pytest.approx(want, rel=1e-12)
        assert sim.decode_ms(batch, ctx) == pytest.approx(want, rel=1e-12)  # cached path
        assert sim.mixed_ms(batch, ctx, 256.0, 1000.0) == pytest.approx(
            with_cost.coefficients.step_ms(batch, ctx, 256.0, 1000.0), rel=1e-12
        )


def test_batch_sweeps_group_one_configuration_at_three_or_more_batches():
    """MI300X's sweeps are AMD's vLLM latency tables (Llama-3.1-70B and 405B FP8 at tp 8,
    128 or 2,048 prompt tokens), fit split only; H100 has no sweep of one source."""
    sweeps = FIT.batch_sweeps(POINTS, CAT, "mi300x")
    assert len(sweeps) == 4
    for runs in sweeps:
        assert len({FIT.sweep_key(m) for m in runs}) == 1
        batches = [m.num_requests for m in runs]
        assert batches == sorted(batches) and len(set(batches)) >= FIT.MIN_SWEEP_BATCHES
        assert all(m.split == cb.Split.FIT and m.request_rate_rps == math.inf for m in runs)
    held = FIT.batch_sweeps(POINTS, CAT, "mi300x", cb.Split.HOLDOUT)
    assert all(m.split == cb.Split.HOLDOUT for runs in held for m in runs)
    assert FIT.batch_sweeps(POINTS, CAT, "h100-sxm5-80gb") == []


def test_the_fit_recovers_planted_costs():
    """Runs synthesized from the model at 0.9 us per sequence and 35 us per step, per
    layer, give back both: the floor carries the sweeps' level at small batches, the
    per-sequence cost their growth with the batch."""
    planted = FIT.with_cost(CAT, "mi300x", 0.9, 1, 35.0)
    runs = [m for s in FIT.batch_sweeps(POINTS, CAT, "mi300x") for m in s]
    synthetic = []
    for m in runs:
        p = cb.predict(m, planted).output_tok_s
        assert p
        synthetic.append(m.model_copy(update={"output_tok_s": p}))
    fit = FIT.fit_costs(synthetic, FIT.with_cost(CAT, "mi300x", None), "mi300x")
    assert fit is not None
    us, step_us, n = fit
    assert us == pytest.approx(0.9, abs=0.02) and step_us == pytest.approx(35.0, abs=0.5)
    assert n == len(runs)


def test_a_sweep_the_model_prices_as_measured_gets_no_cost():
    """Runs synthesized without either cost fit to (about) none: the fit adds nothing
    the sweeps do not measure."""
    bare = FIT.with_cost(CAT, "mi300x", None)
    runs = [m for s in FIT.batch_sweeps(POINTS, CAT, "mi300x") for m in s]
    synthetic = [
        m.model_copy(update={"output_tok_s": cb.predict(m, bare).output_tok_s}) for m in runs
    ]
    fit = FIT.fit_costs(synthetic, bare, "mi300x")
    assert fit is not None
    assert fit[0] < 0.02 and fit[1] < 0.5


def test_no_fit_where_a_kernel_benchmark_measures_decode_attention():
    """H200's decode attention is measured (aiconfigurator): its sweeps, if any, are not
    fitted, so the measured kernel is never doubled by a fitted cost."""
    assert CAT.gpus["h200-sxm-141gb"].decode_attention is not None
    assert FIT.fit_costs(POINTS, CAT, "h200-sxm-141gb") is None


def test_the_shipped_costs_price_the_held_out_sweeps_and_the_sibling_takes_them():
    """MI300X's shipped costs came from its fit-split sweeps; on the held-out runs of the
    same configurations (Llama-3.1-70B, batches 4-128) they bring the median
    ln(measured / predicted) within 0.1 of 0 from below -0.25, and the measured /
    predicted ratio moves less with the batch. MI325X (no sweep of its own) carries
    MI300X's values, marked as taken."""
    cost = CAT.gpus["mi300x"].decode_sequence_cost
    assert cost is not None and cost.points > 0 and cost.us_per_layer > 0
    assert cost.step_us_per_layer > 0
    held = FIT.batch_sweeps(POINTS, CAT, "mi300x", cb.Split.HOLDOUT)
    assert held
    bare = FIT.with_cost(CAT, "mi300x", None)
    assert FIT.median_log_ratio(held, bare) < -0.25
    assert abs(FIT.median_log_ratio(held, CAT)) < 0.1
    assert abs(FIT.slope_log_ratio(held, CAT)) < abs(FIT.slope_log_ratio(held, bare))
    sibling = CAT.gpus["mi325x"].decode_sequence_cost
    assert sibling is not None and sibling.points == 0
    assert sibling.us_per_layer == cost.us_per_layer and "mi300x" in sibling.source
    assert sibling.step_us_per_layer == cost.step_us_per_layer


def test_bad_entries_are_refused():
    with pytest.raises(ValidationError, match="us_per_layer"):
        DecodeSequenceCost(us_per_layer=-0.1, points=3, source="fitted to three runs")
    with pytest.raises(ValidationError, match="us_per_layer"):
        DecodeSequenceCost(us_per_layer=math.inf, points=3, source="fitted to three runs")
    with pytest.raises(ValidationError, match="source"):
        DecodeSequenceCost(us_per_layer=0.5, points=3, source="x")
    for bad in (-1.0, math.nan, 1e4):
        with pytest.raises(ValidationError, match="step_us_per_layer"):
            DecodeSequenceCost(
                us_per_layer=0.5, step_us_per_layer=bad, points=3, source="fitted to three runs"
            )


def test_write_cost_replaces_an_earlier_block_before_the_sources(tmp_path, monkeypatch):
    import yaml

    (tmp_path / "gpus").mkdir()
    path = tmp_path / "gpus" / "x.yaml"
    path.write_text("id: x\nefficiency:\n  points: 3\nsources:\n  - https://example.com/x\n")
    monkeypatch.setattr(FIT, "DATA_DIR", tmp_path)
    source = " ".join(f"word{i}" for i in range(40))
    FIT.write_cost("x", 0.61234, 20.5, 24, source, 64)
    FIT.write_cost("x", 0.5, 27.123, 20, source, 128)
    text = path.read_text()
    assert text.count("decode_sequence_cost:") == 1
    assert text.index("decode_sequence_cost:") < text.index("sources:")
    data = yaml.safe_load(text)
    assert data["decode_sequence_cost"] == {
        "us_per_layer": 0.5,
        "step_us_per_layer": 27.12,
        "max_batch": 128,
        "points": 20,
        "source": source,
    }
    assert data["sources"] == ["https://example.com/x"] and data["efficiency"] == {"points": 3}


def test_analyze_capacity_names_the_costs_where_a_gpu_pays_them():
    """`analyze capacity` reports what each decoding sequence adds and the layer floor
    every step pays (JSON and text) on MI300X (80 layers x its fitted us), and nothing
    on H100."""
    from api.cli.calibrate import render_capacity
    from planner.capacity_analysis import CapacityRequest, capacity_analysis

    base = {"model": "llama-3.1-70b", "tp": 8, "dtype": "fp8", "prompt_tokens": 128}
    a = capacity_analysis(CAT, CapacityRequest(gpu="mi300x", output_tokens=2048, **base))
    cost = CAT.gpus["mi300x"].decode_sequence_cost
    assert a.replica.decode_sequence_ms == pytest.approx(80 * cost.us_per_layer / 1000)
    assert a.replica.step_layer_floor_ms == pytest.approx(80 * cost.step_us_per_layer / 1000)
    text = render_capacity(a)
    assert f"each decoding sequence adds {80 * cost.us_per_layer / 1000:.3f} ms" in text
    floor = 80 * cost.step_us_per_layer / 1000
    assert f"each step pays a {floor:.2f} ms layer floor" in text
    assert f"step overhead 3 ms + {floor:.2f} ms layer floor = {3 + floor:.2f} ms" in text
    b = capacity_analysis(CAT, CapacityRequest(gpu="h100-sxm5-80gb", output_tokens=2048, **base))
    assert b.replica.decode_sequence_ms == 0.0 and b.replica.step_layer_floor_ms == 0.0
    assert "each decoding sequence adds" not in render_capacity(b)
    assert "each step pays" not in render_capacity(b)
    assert "layer floor" not in render_capacity(b)


def test_the_report_shows_the_floor_beside_the_step_overhead():
    """The plan report's efficiency table: MI300X's step overhead cell names its layer
    floor per layer; H100's has none."""
    from planner.report.blocks import _layer_floor_text

    assert _layer_floor_text(CAT.gpus["mi300x"]) == " + 27.1 us/layer"
    assert _layer_floor_text(CAT.gpus["h100-sxm5-80gb"]) == ""


def test_the_largest_fitted_batch_is_recorded_and_named_past_it():
    """The shipped costs record the sweeps' largest batch (128, AMD's tables; MI325X
    the same as its sibling). `analyze capacity` at every prompt queued (1,000+
    sequences on 8 x MI300X) says the per-sequence cost is extrapolated past it; a
    closed loop of 64 users stays inside it and says nothing."""
    from planner.capacity_analysis import CapacityRequest, capacity_analysis

    sweeps = FIT.batch_sweeps(POINTS, CAT, "mi300x")
    assert FIT.max_sweep_batch(sweeps) == 128
    for gpu in ("mi300x", "mi325x"):
        assert CAT.gpus[gpu].decode_sequence_cost.max_batch == 128
    base = {"model": "llama-3.1-70b", "gpu": "mi300x", "tp": 8, "dtype": "fp8"}
    shape = {"prompt_tokens": 128, "output_tokens": 2048}
    queued = capacity_analysis(CAT, CapacityRequest(**base, **shape))
    assert queued.replica.decode_sequence_max_batch == 128
    assert queued.result.batch > 128
    assert any("past the 128 the per-sequence decode cost" in n for n in queued.result.notes)
    closed = capacity_analysis(CAT, CapacityRequest(**base, **shape, concurrency=64))
    assert closed.result.batch <= 128
    assert not any("per-sequence decode cost" in n for n in closed.result.notes)
    with pytest.raises(ValidationError, match="max_batch"):
        DecodeSequenceCost(us_per_layer=0.5, max_batch=0, points=3, source="fitted to three runs")
