"""The per-sequence decode cost fitted to batch sweeps (catalog decode_sequence_cost,
planner.kernels.decode_sequence_ms, scripts/fit_decode_sequence_cost.py)."""

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


def test_the_cost_is_layers_times_us_per_sequence_and_none_for_mla_tp1_or_unfitted_gpus():
    """0.5 us x 80 layers (Llama-3.1-70B) = 0.04 ms per decoding sequence per step at
    tp 2-8; 126 layers (405B) 0.063 ms; none at tp 1 (fitted to tp 8 sweeps, and AMD's
    tp 1 MLPerf runs show none), for DeepSeek-V3 (MLA: its kernel has its own floor) and
    on a GPU without a fit."""
    cat = FIT.with_cost(CAT, "mi300x", 0.5)
    mi300x, llama70 = cat.gpus["mi300x"], cat.models["llama-3.1-70b"]
    assert kernels.decode_sequence_ms(mi300x, llama70, 8) == pytest.approx(0.04)
    assert kernels.decode_sequence_ms(mi300x, llama70, 2) == pytest.approx(0.04)
    assert kernels.decode_sequence_ms(mi300x, llama70, 1) == 0.0
    assert kernels.decode_sequence_ms(mi300x, cat.models["llama-3.1-405b"], 8) == pytest.approx(
        0.063
    )
    assert kernels.decode_sequence_ms(mi300x, cat.models["deepseek-v3"], 8) == 0.0
    assert kernels.decode_sequence_ms(cat.gpus["h100-sxm5-80gb"], llama70, 8) == 0.0
    assert FIT.with_cost(CAT, "mi300x", None).gpus["mi300x"].decode_sequence_cost is None
    tp1 = rl.build_replica(cat, "llama-3.1-70b", "mi300x", tp=1, dtype="fp8", engine="vllm")
    assert tp1.coefficients.attn_seq_ms == 0.0


def test_a_decode_step_grows_by_the_cost_of_each_sequence_in_the_model_and_the_simulation():
    """64 decodes at a 1,000-token context on 8 x MI300X: the step is 64 x 0.04 = 2.56 ms
    longer with 0.5 us per sequence per layer (the decode attention is memory-bound), in
    the cost model and in the simulation's inline step (decode and mixed)."""
    without = _replica(FIT.with_cost(CAT, "mi300x", None))
    with_cost = _replica(FIT.with_cost(CAT, "mi300x", 0.5))
    assert with_cost.coefficients.attn_seq_ms == pytest.approx(0.04)
    grown = with_cost.coefficients.step_ms(64, 1000.0) - without.coefficients.step_ms(64, 1000.0)
    assert grown == pytest.approx(64 * 0.04, rel=1e-9)
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


def test_the_fit_recovers_a_planted_cost_whatever_the_level():
    """Runs synthesized from the model at 0.9 us per sequence per layer and scaled by 0.7
    (a level the factors miss) give back 0.9: the fit reads the slope with the batch,
    not the level."""
    planted = FIT.with_cost(CAT, "mi300x", 0.9)
    runs = [m for s in FIT.batch_sweeps(POINTS, CAT, "mi300x") for m in s]
    synthetic = []
    for m in runs:
        p = cb.predict(m, planted).output_tok_s
        assert p
        synthetic.append(m.model_copy(update={"output_tok_s": 0.7 * p}))
    fit = FIT.fit_us_per_layer(synthetic, FIT.with_cost(CAT, "mi300x", None), "mi300x")
    assert fit is not None
    assert fit[0] == pytest.approx(0.9, abs=0.01) and fit[1] == len(runs)


def test_no_fit_where_a_kernel_benchmark_measures_decode_attention():
    """H200's decode attention is measured (aiconfigurator): its sweeps, if any, are not
    fitted, so the measured kernel is never doubled by a fitted cost."""
    assert CAT.gpus["h200-sxm-141gb"].decode_attention is not None
    assert FIT.fit_us_per_layer(POINTS, CAT, "h200-sxm-141gb") is None


def test_the_shipped_cost_flattens_the_held_out_sweeps_and_the_sibling_takes_it():
    """MI300X's shipped cost came from its fit-split sweeps; on the held-out runs of the
    same sweeps (each judged from its own smallest held-out batch) the measured /
    predicted ratio moves less with the batch with it than without. MI325X (no sweep of
    its own) carries MI300X's value, marked as taken."""
    cost = CAT.gpus["mi300x"].decode_sequence_cost
    assert cost is not None and cost.points > 0 and cost.us_per_layer > 0
    held = FIT.batch_sweeps(POINTS, CAT, "mi300x", cb.Split.HOLDOUT)
    assert held  # Llama-3.1-70B at 128 prompt tokens, batches 32, 64 and 128
    bare = FIT.with_cost(CAT, "mi300x", None)
    assert abs(FIT.slope_log_ratio(held, CAT)) < abs(FIT.slope_log_ratio(held, bare))
    sibling = CAT.gpus["mi325x"].decode_sequence_cost
    assert sibling is not None and sibling.points == 0
    assert sibling.us_per_layer == cost.us_per_layer and "mi300x" in sibling.source


def test_bad_entries_are_refused():
    with pytest.raises(ValidationError, match="us_per_layer"):
        DecodeSequenceCost(us_per_layer=-0.1, points=3, source="fitted to three runs")
    with pytest.raises(ValidationError, match="us_per_layer"):
        DecodeSequenceCost(us_per_layer=math.inf, points=3, source="fitted to three runs")
    with pytest.raises(ValidationError, match="source"):
        DecodeSequenceCost(us_per_layer=0.5, points=3, source="x")


def test_write_cost_replaces_an_earlier_block_before_the_sources(tmp_path, monkeypatch):
    import yaml

    (tmp_path / "gpus").mkdir()
    path = tmp_path / "gpus" / "x.yaml"
    path.write_text("id: x\nefficiency:\n  points: 3\nsources:\n  - https://example.com/x\n")
    monkeypatch.setattr(FIT, "DATA_DIR", tmp_path)
    source = " ".join(f"word{i}" for i in range(40))
    FIT.write_cost("x", 0.61234, 24, source)
    FIT.write_cost("x", 0.5, 20, source)
    text = path.read_text()
    assert text.count("decode_sequence_cost:") == 1
    assert text.index("decode_sequence_cost:") < text.index("sources:")
    data = yaml.safe_load(text)
    assert data["decode_sequence_cost"] == {"us_per_layer": 0.5, "points": 20, "source": source}
    assert data["sources"] == ["https://example.com/x"] and data["efficiency"] == {"points": 3}


def test_analyze_capacity_names_the_cost_where_a_gpu_pays_it():
    """`analyze capacity` reports what each decoding sequence adds (JSON and text) on
    MI300X (80 layers x its fitted us), and nothing on H100."""
    from api.cli.calibrate import render_capacity
    from planner.capacity_analysis import CapacityRequest, capacity_analysis

    base = {"model": "llama-3.1-70b", "tp": 8, "dtype": "fp8", "prompt_tokens": 128}
    a = capacity_analysis(CAT, CapacityRequest(gpu="mi300x", output_tokens=2048, **base))
    us = CAT.gpus["mi300x"].decode_sequence_cost.us_per_layer
    assert a.replica.decode_sequence_ms == pytest.approx(80 * us / 1000)
    assert f"each decoding sequence adds {80 * us / 1000:.3f} ms" in render_capacity(a)
    b = capacity_analysis(CAT, CapacityRequest(gpu="h100-sxm5-80gb", output_tokens=2048, **base))
    assert b.replica.decode_sequence_ms == 0.0
    assert "each decoding sequence adds" not in render_capacity(b)
