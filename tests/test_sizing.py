"""Per-request GPU-seconds and the prefill/decode pool ratio (DOMAIN.md section 5)."""

from __future__ import annotations

import dataclasses

import pytest

from catalog.loader import load_catalog
from catalog.schema import Model, ReferenceFigures
from planner import roofline as rl
from planner import sizing as sz
from planner.errors import PlanningError

H100 = "h100-sxm5-80gb"

# Llama-3.1-8B (config.json facts), built here so the test does not depend on the catalog.
LLAMA_31_8B = Model(
    id="llama-3.1-8b",
    name="Llama-3.1-8B",
    num_layers=32,
    hidden_size=4096,
    num_attention_heads=32,
    num_kv_heads=8,
    head_dim=128,
    intermediate_size=14336,
    vocab_size=128256,
    max_context_tokens=131072,
    reference=ReferenceFigures(
        total_params_b=8.03, active_params_b=8.03, kv_bytes_per_token_bf16=131072
    ),
    sources=["https://github.com/meta-llama/llama-models (sku_list.py)"],
)

CHAT = {"prompt": 2000, "output": 300}
AGENT = {"prompt": 97_000, "output": 1600}


@pytest.fixture
def llama7b() -> rl.Replica:
    # DOMAIN.md section 5's figures assume vLLM's default 0.9 and a 2 GB reserve, 80e9
    # bytes of HBM (not the 81,559 MiB the driver reports: rl.gpu_memory_bytes), and
    # H100's analogy factors (MFU 0.5, MBU 0.7), not the calibrated level
    r = rl.build_replica(
        load_catalog(),
        "llama-2-7b",
        H100,
        mfu=0.5,
        mbu=0.7,
        memory_utilization=0.9,
        activation_reserve_gb=2.0,
    )
    return dataclasses.replace(r, gpu=r.gpu.model_copy(update={"reported_memory": None}))


@pytest.fixture
def llama8b(llama7b: rl.Replica) -> rl.Replica:
    """Llama-3.1-8B on one H100 SXM at the analogy factors (bf16, MFU 0.5, MBU 0.7, 2 ms)."""
    return dataclasses.replace(llama7b, model=LLAMA_31_8B)


def test_prefill_gpu_s_is_tp_times_prefill_time(llama7b: rl.Replica) -> None:
    assert sz.prefill_gpu_s(llama7b, 4096, 0.0) == pytest.approx(rl.prefill_ms(llama7b, 4096) / 1e3)
    assert sz.prefill_gpu_s(llama7b, 4000, 0.5) == pytest.approx(
        rl.prefill_ms(llama7b, 4000, 2000) / 1e3
    )
    r4 = rl.build_replica(load_catalog(), "llama-2-7b", H100, tp=4)
    assert sz.prefill_gpu_s(r4, 4096, 0.0) == pytest.approx(4 * rl.prefill_ms(r4, 4096) / 1e3)


def test_first_order_prefill_is_the_domain_formula(llama7b: rl.Replica) -> None:
    # P x (1 - hit) x cost_per_token / F_eff
    expected = 2000 * 0.75 * 14.5506e9 / 494.7e12
    got = sz.first_order_prefill_gpu_s(llama7b, 2000, 0.25, context_tokens=2048)
    assert got == pytest.approx(expected, rel=1e-4)


def test_decode_gpu_s() -> None:
    assert sz.decode_gpu_s(1, 300, 20.0, 100) == pytest.approx(300 * 0.020 / 100)
    assert sz.decode_gpu_s(4, 300, 20.0, 100) == pytest.approx(4 * 300 * 0.020 / 100)
    with pytest.raises(PlanningError, match="batch"):
        sz.decode_gpu_s(1, 300, 20.0, 0)


def test_pool_ratio() -> None:
    assert sz.pool_ratio(2.6, 2.0) == pytest.approx(1.3)
    with pytest.raises(PlanningError):
        sz.pool_ratio(1.0, 0.0)


def test_prefix_hit_validated(llama7b: rl.Replica) -> None:
    with pytest.raises(PlanningError, match="prefix_hit_rate"):
        sz.prefill_gpu_s(llama7b, 1000, 1.0)


def test_decode_operating_point(llama8b: rl.Replica) -> None:
    point = sz.decode_operating_point(llama8b, 2300, 2150)
    assert point.batch == rl.max_resident_batch(llama8b, 2300) == 178
    assert point.tpot_ms == pytest.approx(rl.decode_step_ms(llama8b, 178, 2150))
    capped = sz.decode_operating_point(llama8b, 2300, 2150, tpot_budget_ms=20.0)
    assert rl.decode_step_ms(llama8b, capped.batch, 2150) <= 20.0
    assert rl.decode_step_ms(llama8b, capped.batch + 1, 2150) > 20.0
    with pytest.raises(PlanningError, match="tpot_budget_ms"):
        sz.decode_operating_point(llama8b, 2300, 2150, tpot_budget_ms=1.0)
    with pytest.raises(PlanningError, match="context_tokens"):
        sz.decode_operating_point(llama8b, 10_000_000, 5_000_000)


def _doc_ratios(replica: rl.Replica) -> dict[str, float]:
    """DOMAIN.md section 5 under its implicit assumptions (see planner/sizing.py):

    - llama-3.1-8b on one H100 SXM, bf16, MFU 0.5, MBU 0.7, 2 ms step overhead;
    - prefill at a flat 2 x N_active FLOP per new token (no attention term);
    - decode at chat's operating point for both classes: B = resident-batch cap at
      chat's 2,300-token sequences (178), TPOT = roofline step at B, mean context
      2,150 (30.2 ms), i.e. a flat decode cost per output token.
    """
    point = sz.decode_operating_point(replica, 2300, 2150)
    out: dict[str, float] = {}
    for name, cls, hit in [("chat", CHAT, 0.0), ("agent", AGENT, 0.0), ("agent92", AGENT, 0.92)]:
        pre = sz.first_order_prefill_gpu_s(replica, cls["prompt"], hit)
        dec = sz.decode_gpu_s(replica.tp, cls["output"], point.tpot_ms, point.batch)
        out[name] = sz.pool_ratio(pre, dec)
    return out


def test_pool_ratio_reproduces_domain_figures(llama8b: rl.Replica) -> None:
    ratios = _doc_ratios(llama8b)
    assert round(ratios["chat"], 1) == 1.3  # 1.27: "about 1.3"
    # 11.4: "about 12" (11.6 before the elementwise kernels between the GEMMs lengthened
    # the decode step at the chat point, 30.2 -> 30.6 ms)
    assert 11 <= ratios["agent"] <= 12
    # With flat per-token costs the quotient is (97,000/2,000) x (300/1,600) = 9.09.
    assert ratios["agent"] / ratios["chat"] == pytest.approx(97_000 / 2000 * 300 / 1600)
    # A 92% prefix hit makes the agent look like chat to the planner.
    assert ratios["agent92"] == pytest.approx(0.08 * ratios["agent"])
    assert 0.5 < ratios["agent92"] < 1.5


def test_agent_prefill_dominates_at_a_shared_decode_point(llama8b: rl.Replica) -> None:
    """Full roofline prefill (attention grows with context) at chat's decode point."""
    point = sz.decode_operating_point(llama8b, 2300, 2150)

    def ratio(cls: dict[str, int], hit: float) -> float:
        pre = sz.prefill_gpu_s(llama8b, cls["prompt"], hit)
        return sz.pool_ratio(pre, sz.decode_gpu_s(1, cls["output"], point.tpot_ms, point.batch))

    chat, agent = ratio(CHAT, 0.0), ratio(AGENT, 0.0)
    # 1.42 (1.35 before the elementwise kernels: 4.1 ms of a 2,000-token prompt's prefill)
    assert chat == pytest.approx(1.42, abs=0.05)
    assert agent > 12 * chat  # attention over a 97K transcript more than doubles the cost
    assert ratio(AGENT, 0.92) < agent / 5


def test_agent_decode_at_its_own_batch_cap_reverses_the_ordering(llama8b: rl.Replica) -> None:
    """Characterization, not a DOMAIN figure: decoding 98K-token sequences caps the batch
    at 4 on one H100, so decode, not prefill, dominates the agent's GPU-seconds."""
    own = sz.decode_operating_point(llama8b, 97_000 + 1600, 97_000 + 800)
    assert own.batch == 4
    pre = sz.prefill_gpu_s(llama8b, AGENT["prompt"], 0.0)
    dec = sz.decode_gpu_s(1, AGENT["output"], own.tpot_ms, own.batch)
    assert sz.pool_ratio(pre, dec) < 1.0


def test_agents_are_most_of_the_prefill_load_in_an_80_20_mix(llama8b: rl.Replica) -> None:
    # DOMAIN.md section 5: agents are a fifth of requests and over nine tenths of prefill.
    for price in (sz.first_order_prefill_gpu_s, sz.prefill_gpu_s):
        chat = price(llama8b, CHAT["prompt"], 0.0)
        agent = price(llama8b, AGENT["prompt"], 0.0)
        assert 0.2 * agent / (0.2 * agent + 0.8 * chat) > 0.9
