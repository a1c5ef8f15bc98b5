"""The router's skew over a MoE model's experts: the distinct experts a step reads
(planner.architecture.distinct_experts), where the catalog sets it
(catalog.schema.MoeRouting) and how scripts/moe_routing.py derives it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from script_support import aiconfigurator_kernels, load_script

from catalog.layers import top_expert_share
from catalog.loader import load_catalog
from catalog.schema import Moe, MoeRouting
from planner import architecture as arch
from planner import calibration as cb
from planner import roofline as rl
from planner.kernels import coefficients_of

CAT = load_catalog()
ROUTING = load_script("moe_routing")


def test_uniform_routing_is_the_closed_form():
    for tokens in (0.5, 1, 3.7, 64, 1000):
        assert arch.distinct_experts(256, 8, tokens) == pytest.approx(
            256 * (1 - (1 - 8 / 256) ** tokens), rel=1e-15
        )
    assert arch.distinct_experts(256, 8, 0) == 0.0
    assert arch.distinct_experts(256, 8, -3, 0.76) == 0.0


def test_one_token_picks_k_experts_whatever_the_skew():
    # sum_i q_i = k while no expert's share is capped at 1
    for a in (0.0, 0.3, 0.76, 0.8):
        assert arch.distinct_experts(256, 8, 1, a) == pytest.approx(8.0, rel=1e-9)


def test_deepseek_worked_example():
    # 64 tokens, 256 experts, top 8: 222.4 uniform, 178.5 at a = 0.75 (q_i by hand below)
    w = [i**-0.75 for i in range(1, 257)]
    q = [8 * x / sum(w) for x in w]
    by_hand = sum(1 - (1 - qi) ** 64 for qi in q)
    assert arch.distinct_experts(256, 8, 64, 0.75) == pytest.approx(by_hand, rel=1e-12)
    assert by_hand == pytest.approx(178.5, abs=0.05)
    assert arch.distinct_experts(256, 8, 64) == pytest.approx(222.4, abs=0.05)


@given(
    tokens=st.floats(min_value=1.0, max_value=5000),  # below one token the count is convex
    a=st.floats(min_value=0.0, max_value=2.0),
    b=st.floats(min_value=0.0, max_value=2.0),
)
def test_more_skew_touches_fewer_experts_and_more_tokens_more(tokens, a, b):
    lo, hi = sorted((a, b))
    many = arch.distinct_experts(256, 8, tokens, lo)
    few = arch.distinct_experts(256, 8, tokens, hi)
    assert 0.0 <= few <= many * (1 + 1e-12) <= 256.0 * (1 + 1e-12)
    assert arch.distinct_experts(256, 8, tokens * 2, hi) >= few * (1 - 1e-12)


def test_routing_is_priced_without_expert_parallelism_only():
    ds = CAT.models["deepseek-v3"]
    assert ds.moe is not None and ds.moe.routing is not None
    a = ds.moe.routing.exponent
    assert arch.routing_exponent(ds) == a > 0
    assert arch.routing_exponent(ds, ep=8) == 0.0
    assert arch.routing_exponent(CAT.models["llama-3.1-70b"]) == 0.0
    assert arch.routing_exponent(CAT.models["mixtral-8x7b"]) == 0.0  # no estimate: uniform
    tp = coefficients_of(rl.build_replica(CAT, "deepseek-v3", "h200-sxm-141gb", tp=8, dtype="fp8"))
    ep = coefficients_of(
        rl.build_replica(CAT, "deepseek-v3", "h200-sxm-141gb", tp=8, ep=8, dtype="fp8")
    )
    assert tp.experts_touched(64) == pytest.approx(arch.distinct_experts(256, 8, 64, a))
    assert ep.experts_touched(64) == pytest.approx(arch.distinct_experts(256, 8, 64))
    assert tp.experts_touched(64) < ep.experts_touched(64)


def test_skew_prices_a_decode_step_cheaper_and_weight_reads_agree():
    replica = rl.build_replica(CAT, "deepseek-v3", "h200-sxm-141gb", tp=8, dtype="fp8")
    uniform = replica_without_routing(replica)
    skewed = rl.weight_bytes_read_per_step(replica, 64)
    assert skewed < rl.weight_bytes_read_per_step(uniform, 64)
    # both count the same experts: the difference is the untouched experts' bytes
    moe = replica.model.moe
    assert moe is not None
    a = arch.routing_exponent(replica.model)
    per_expert = (
        arch.moe_layer_count(replica.model)
        * arch.expert_param_count(replica.model)
        * arch.weight_bytes_per_param(replica.model, replica.weight_dtype, replica.fp4_format)
    )
    gap = arch.distinct_experts(256, 8, 64) - arch.distinct_experts(256, 8, 64, a)
    assert rl.weight_bytes_read_per_step(uniform, 64) - skewed == pytest.approx(
        gap * per_expert, rel=1e-9
    )
    assert coefficients_of(replica).moe_ms(64) < coefficients_of(uniform).moe_ms(64)


def replica_without_routing(replica: rl.Replica) -> rl.Replica:
    uniform = ROUTING.with_routing(CAT, replica.model.id, 0.0)
    return rl.build_replica(
        uniform, replica.model.id, replica.gpu.id, tp=replica.tp, dtype=replica.weight_dtype
    )


@pytest.mark.parametrize(
    "routing, field",
    [
        ({"exponent": 0.0, "source": "a measurement of it"}, "exponent"),
        ({"exponent": 2.5, "source": "a measurement of it"}, "exponent"),
        ({"exponent": math.nan, "source": "a measurement of it"}, "exponent"),
        ({"exponent": 0.8}, "source"),
        ({"exponent": 0.8, "source": "short"}, "source"),
    ],
)
def test_bad_routing_is_refused_naming_the_field(routing, field):
    with pytest.raises(ValidationError) as err:
        Moe.model_validate(
            {
                "num_experts": 8,
                "experts_per_token": 2,
                "expert_intermediate_size": 1024,
                "routing": routing,
            }
        )
    assert field in str(err.value)
    assert MoeRouting.model_validate({"exponent": 0.8, "source": "a measurement of it"})


@pytest.mark.parametrize("experts, k, a", [(256, 8, 1.0), (8, 2, 1.5), (64, 8, 2.0)])
def test_a_skew_that_would_pick_an_expert_twice_is_refused(experts, k, a):
    # k x the top expert's share above 1: a token would pick it more than once
    assert k * top_expert_share(experts, a) > 1
    with pytest.raises(ValidationError, match=r"routing\.exponent"):
        Moe.model_validate(
            {
                "num_experts": experts,
                "experts_per_token": k,
                "expert_intermediate_size": 1024,
                "routing": {"exponent": a, "source": "a measurement of it"},
            }
        )
    ok = Moe.model_validate(
        {
            "num_experts": 256,
            "experts_per_token": 8,
            "expert_intermediate_size": 2048,
            "routing": {"exponent": 0.8, "source": "a measurement of it"},
        }
    )
    assert ok.routing is not None


#: Token counts the envelope test checks: both sides of the generator's range change (32
#: to 33 tokens for DeepSeek, where it touches the most experts relative to uniform).
CHECKED_TOKENS = (4, 16, 32, 33, 34, 40, 48, 64, 96, 128, 256, 1024)


def test_the_shipped_exponent_reads_at_least_the_generators_experts():
    moe = CAT.models["deepseek-v3"].moe
    assert moe is not None and moe.routing is not None
    a, tol = moe.routing.exponent, ROUTING.TOLERANCE
    gen = {t: ROUTING.generator_distinct(t, 1.01, 256, 8, ROUTING.DRAWS) for t in CHECKED_TOKENS}
    for t, n in gen.items():
        assert arch.distinct_experts(256, 8, t, a) >= (1 - tol) * n, t
    # the envelope is tight: 0.01 more skew reads fewer than the generator just past 32
    assert arch.distinct_experts(256, 8, 33, a + 0.01) < (1 - tol) * gen[33]
    # and the generator itself touches fewer than uniform routing
    assert all(n < arch.distinct_experts(256, 8, t) for t, n in gen.items())


def test_the_envelope_stops_where_the_grid_would_read_fewer():
    a = ROUTING.envelope_exponent(1.01, 256, 8, tokens=(8, 64), draws=300)
    assert 0.5 < a < 0.9
    assert ROUTING.envelope_exponent(1.01, 256, 8, tokens=(8, 33, 64), draws=300) < a
    # never beyond what the catalog accepts for the layer
    assert ROUTING.envelope_exponent(0.2, 8, 2, tokens=(64,), draws=50) <= 1.5


def test_settle_corrects_the_rounding_as_the_generator_does():
    counts = np.array([3, 0, 1, 0, 2])
    # excess: the busiest first, then from the least loaded up, the busiest where empty
    assert ROUTING.settle(counts, 5).tolist() == [2, 0, 1, 0, 2]
    assert ROUTING.settle(counts, 4).tolist() == [1, 0, 1, 0, 2]
    # shortfall: one more for each of the busiest
    assert ROUTING.settle(counts, 8).tolist() == [4, 0, 1, 0, 3]
    assert ROUTING.settle(counts, 6).tolist() == counts.tolist()


def test_generator_spends_every_pick_and_skews():
    # a load of T k picks over the experts: at most min(E, T k) experts are touched
    for t in (1, 4, 64):
        n = ROUTING.generator_distinct(t, 1.01, 256, 8, 200)
        assert 1 <= n <= min(256, 8 * t)
    assert ROUTING.generator_distinct(64, 1.01, 256, 8, 200) < arch.distinct_experts(256, 8, 64)


def test_capped_expert_reads_stay_at_or_above_what_the_kernels_measure():
    # the catalog caps the expert-read efficiency at 1 where aiconfigurator's kernels read
    # the uniformly counted experts faster than dense GEMMs; with the skew priced that
    # ratio (over the experts the skew counts) must still be at least 1, or the skew
    # would be counted twice
    moe = CAT.models["deepseek-v3"].moe
    assert moe is not None and moe.routing is not None
    a = moe.routing.exponent
    fewer = min(
        arch.distinct_experts(256, 8, t, a) / arch.distinct_experts(256, 8, t)
        for t in (4, 8, 16, 32, 64)
    )
    ratios = [
        r
        for gpu in aiconfigurator_kernels()["gpus"].values()
        for e in gpu.get("engines", {}).values()
        if (r := e.get("moe_expert_read_vs_dense")) is not None
    ]
    assert len(ratios) >= 12
    assert min(ratios) / fewer >= 1.0


def test_shipped_exponent_brings_the_served_slopes_closer():
    points = cb.load_reference_measurements(CAT)
    uniform = ROUTING.with_routing(CAT, "deepseek-v3", 0.0)
    for split in cb.Split:
        before = ROUTING.served_slope(points, uniform, "deepseek-v3", split)
        after = ROUTING.served_slope(points, CAT, "deepseek-v3", split)
        assert before and after and before[1] == after[1] >= 10
        # expert reads over-counted uniformly; still not under-counted with the skew
        assert before[0] > after[0] >= 0.0


def test_write_routing_replaces_an_earlier_block(tmp_path, monkeypatch):
    (tmp_path / "models").mkdir()
    path = tmp_path / "models" / "m.yaml"
    path.write_text(
        "id: m\nmoe:\n  num_experts: 8\n  routing:\n    exponent: 0.5\n    source: >-\n"
        "      old text here\nmla: null\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(ROUTING, "DATA_DIR", tmp_path)
    ROUTING.write_routing("m", 0.76, "new source " * 20)
    text = path.read_text(encoding="utf-8")
    assert text.count("routing:") == 1 and "exponent: 0.76" in text and "old text" not in text
    assert text.index("routing:") < text.index("mla: null")
    assert max(len(line) for line in text.splitlines()) <= 100


def test_capacity_names_the_experts_a_step_reads():
    from api.cli.calibrate import experts_read_text
    from planner.analyses.common import ReplicaSummary

    tp = ReplicaSummary.of(
        rl.build_replica(CAT, "deepseek-v3", "h200-sxm-141gb", tp=8, dtype="fp8")
    )
    a = tp.routing_exponent
    assert (tp.num_experts, tp.experts_per_token) == (256, 8) and a > 0
    text = experts_read_text(tp, 64)
    skewed = round(arch.distinct_experts(256, 8, 64, a))
    assert text.startswith(f"MoE experts {skewed} of 256 routed experts per MoE layer")
    assert "decode-only step of 64 tokens (222 with uniform routing" in text
    assert skewed < 222
    ep = ReplicaSummary.of(
        rl.build_replica(CAT, "deepseek-v3", "h200-sxm-141gb", tp=8, ep=8, dtype="fp8")
    )
    assert experts_read_text(ep, 64).startswith("MoE experts 222 of 256")
    assert experts_read_text(ep, 0.3).endswith("step of 1 tokens (uniform routing)")
    dense = ReplicaSummary.of(rl.build_replica(CAT, "llama-3.1-8b", "h100-sxm5-80gb"))
    assert dense.num_experts == 0
