"""Speculative decoding per class (issue 12 item 4): the verification step and the
drafter in the cost model, TPOT = step / a, field-level errors, the simulator, the plan's
assumptions and the launch settings."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from catalog.loader import load_catalog
from planner import architecture as arch
from planner import kernels as kn
from planner import roofline as rl
from planner.capacity import decode_slots
from planner.errors import PlanningError
from planner.plan.launch import speculative_args
from planner.report import render_plan_text
from planner.report.render import render_plan_report
from planner.service import make_plan
from planner.simulate.scheduler import decode_steps
from planner.simulate.steps import StepModel

CAT = load_catalog()
EXAMPLE = Path(__file__).parent.parent / "examples" / "speculative-agent-eagle3.yaml"
EAGLE3 = {"method": "eagle3", "draft_tokens": 3, "acceptance_length": 2.5}


def _replica(model="llama-3.1-70b", gpu="h100-sxm5-80gb", tp=8, **spec):
    base = rl.build_replica(CAT, model, gpu, tp=tp, dtype="fp8", kv_dtype="fp8")
    if not spec:
        return base
    return rl.with_speculation(CAT, base, **spec)


def _request(speculative=None, **over):
    doc = yaml.safe_load(EXAMPLE.read_text())
    cls = doc["traffic"]["classes"][0]
    if speculative is None:
        cls.pop("speculative")
    else:
        cls["speculative"] = dict(speculative)
    doc.update(over)
    return doc


# --------------------------------------------------------------------------- formulas


def test_tpot_and_throughput_follow_the_acceptance_length():
    assert kn.effective_tpot_ms(50.0, 2.5) == 20.0
    assert kn.decode_tokens_per_s(32, 40.0, 2.5) == pytest.approx(32 * 2.5 / 0.040)
    assert kn.decode_tokens_per_s(32, 40.0, 1.0) == 800.0
    assert kn.verification_steps(1601, 2.5) == 640.0
    assert kn.verification_steps(2, 3.0) == 1.0  # at least one step
    assert kn.verification_steps(1, 3.0) == 0.0
    assert kn.tokens_per_verification_step(None) == 1.0


def test_a_verification_step_runs_k_plus_1_tokens_per_sequence():
    plain = _replica()
    ngram = _replica(method="ngram", draft_tokens=3, acceptance_length=2.0)
    c0, c1 = plain.coefficients, ngram.coefficients
    b, ctx = 16, 50_000.0
    k0, k1 = c0.kernels(b, ctx), c1.kernels(b, ctx)
    # GEMMs over B (k + 1) tokens, the weights read once
    assert k1.gemm_ms == pytest.approx(c0.gemm_ms(4 * b))
    # still weight-bound at 64: only the elementwise kernels grow with the tokens
    ew = c0.elementwise_bytes_per_token / c0.w_per_ms
    assert c0.gemm_ms(4 * b) == pytest.approx(c0.gemm_ms(b) + 3 * b * ew)
    # attention: 4x the FLOPs over a KV cache read once
    dc0, dm0 = c0.decode_attention_parts_ms(b, ctx)
    dc1, dm1 = c1.decode_attention_parts_ms(b, ctx, 4)
    assert dc1 == pytest.approx(4 * dc0) and dm1 == dm0
    assert k1.draft_ms == 0.0  # n-gram lookup runs on the CPU
    assert k1.total_ms == pytest.approx(c1.step_ms(b, ctx))
    # a decode-bound step barely grows, so 2 tokens per step nearly halve TPOT
    assert k0.total_ms < k1.total_ms < 1.1 * k0.total_ms
    assert kn.effective_tpot_ms(k1.total_ms, 2.0) < 0.6 * k0.total_ms


def test_an_eagle3_head_costs_one_and_a_half_target_layers_per_draft_token():
    plain = _replica()
    spec = _replica(**EAGLE3)
    c = spec.coefficients
    b, ctx = 16, 50_000.0
    layers = CAT.models["llama-3.1-70b"].num_layers
    assert kn.DRAFT_TARGET_LAYERS[kn.SpecMethod.EAGLE3] == 1.5
    # (the head's attention reads its own KV too: the spec replica's base step)
    expected = 3 * 1.5 / layers * c.base_decode_ms(b, ctx)
    assert c.draft_ms(b, ctx) == pytest.approx(expected)
    assert expected == pytest.approx(
        4.5 / layers * plain.coefficients.base_decode_ms(b, ctx), rel=0.02
    )
    assert spec.speculative.draft_repo == "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B"
    # memory: 1.5 target layers of weights (1.32 B parameters, the head in BF16) and of KV
    per_layer = arch.total_param_count(CAT.models["llama-3.1-70b"]) / layers
    assert rl.draft_weight_bytes(spec) / 1e9 == pytest.approx(2.65, abs=0.01)
    assert rl.draft_weight_bytes(spec) == pytest.approx(1.5 * per_layer * 2.0)
    assert rl.kv_capacity_bytes(plain) - rl.kv_capacity_bytes(spec) == pytest.approx(
        rl.draft_weight_bytes(spec)
    )
    held0 = plain.coefficients.kv_held_bytes(1000)
    assert c.kv_held_bytes(1000) == pytest.approx(held0 * (1 + 1.5 / layers))


def test_a_draft_model_costs_k_of_its_own_decode_steps():
    spec = _replica(
        method="draft_model", draft_tokens=4, acceptance_length=2.2, draft_model="llama-3.1-8b"
    )
    draft = rl.build_replica(
        CAT, "llama-3.1-8b", "h100-sxm5-80gb", tp=8, dtype="fp8", kv_dtype="fp8", check_fit=False
    )
    b, ctx = 8, 4000.0
    assert spec.coefficients.draft_ms(b, ctx) == pytest.approx(
        4 * draft.coefficients.step_ms(b, ctx)
    )
    assert rl.draft_weight_bytes(spec) == arch.weight_bytes(CAT.models["llama-3.1-8b"], "fp8")
    assert spec.speculative.draft_repo == "meta-llama/Llama-3.1-8B-Instruct"
    held = spec.coefficients.kv_held_bytes(ctx)
    assert held == pytest.approx(
        _replica().coefficients.kv_held_bytes(ctx) + draft.coefficients.kv_held_bytes(ctx)
    )


def test_mtp_on_deepseek_holds_its_module():
    spec = _replica(
        model="deepseek-v3",
        gpu="h200-sxm-141gb",
        method="mtp",
        draft_tokens=1,
        acceptance_length=1.8,
    )
    # the MTP module: one of 61 layers' worth of DeepSeek-V3's 671 B parameters, in fp8
    assert rl.draft_weight_bytes(spec) / 1e9 == pytest.approx(11.0, abs=0.1)
    assert spec.speculative.draft_repo is None  # the target's own module


def test_decode_slots_bound_the_time_per_output_token():
    plain = _replica()
    spec = _replica(**EAGLE3)
    ctx, tpot = 98_000.0, 50.0
    b0, t0 = decode_slots(plain, ctx, tpot)
    b1, t1 = decode_slots(spec, ctx, tpot)
    assert t0 <= tpot and t1 <= tpot
    assert t1 == pytest.approx(rl.decode_step_ms(spec, b1, ctx) / 2.5)
    # per GPU-second, 2.5 tokens per verification step buy more than the drafter costs
    assert kn.decode_tokens_per_s(b1, t1 * 2.5, 2.5) > kn.decode_tokens_per_s(b0, t0, 1.0)


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("over", "field", "words"),
    [
        ({"acceptance_length": 0.5}, "acceptance_length", "greater than or equal to 1"),
        ({"acceptance_length": 4.5}, "acceptance_length", "draft_tokens + 1 = 4"),
        ({"draft_tokens": 0}, "draft_tokens", "greater than or equal to 1"),
        ({"method": "mtp"}, "method", "multi-token-prediction"),
        ({"method": "medusa"}, "method", "expected one of"),
        ({"method": "draft_model"}, "draft_model", "needs a draft model id"),
        ({"method": "draft_model", "draft_model": "nope"}, "draft_model", "unknown model"),
        ({"method": "draft_model", "draft_model": "llama-2-7b"}, "draft_model", "vocabulary"),
        ({"draft_model": "llama-3.1-8b"}, "draft_model", "only for method draft_model"),
    ],
)
def test_bad_speculative_settings_name_the_field(over, field, words):
    sp = {**EAGLE3, **over}
    with pytest.raises(PlanningError) as err:
        make_plan(_request(sp), CAT, alternatives=False, verify=False)
    got_field, message = err.value.issues[0]
    assert got_field == f"traffic.classes[0].speculative.{field}"
    assert words in message


def test_eagle3_without_a_draft_head_names_draft_repo():
    doc = _request(EAGLE3, model="llama-3.1-8b")
    with pytest.raises(PlanningError) as err:
        make_plan(doc, CAT, alternatives=False, verify=False)
    assert err.value.issues[0][0] == "traffic.classes[0].speculative.draft_repo"
    doc["traffic"]["classes"][0]["speculative"]["draft_repo"] = "org/llama-8b-eagle3"
    doc["candidates"]["gpus"] = ["h100-sxm5-80gb"]
    plan = make_plan(doc, CAT, alternatives=False, verify=False)
    assert plan.assumptions["classes"]["agent"]["speculative"]["draft_repo"] == (
        "org/llama-8b-eagle3"
    )


# --------------------------------------------------------------------------- plans


def test_an_agent_class_with_eagle3_costs_less_than_without():
    with_spec = make_plan(_request(EAGLE3), CAT, alternatives=False, verify=False)
    without = make_plan(_request(None), CAT, alternatives=False, verify=False)
    assert with_spec.status.value == without.status.value == "optimal"
    assert with_spec.cost_usd_per_hour < without.cost_usd_per_hour
    assert all(p.id.endswith("eagle3k3") for p in with_spec.pools if p.role.value != "prefill")
    assumed = with_spec.assumptions["classes"]["agent"]["speculative"]
    assert assumed["acceptance_length"] == 2.5 and "not measured" in assumed["note"]
    assert "speculative" not in without.assumptions["classes"]["agent"]
    for c in with_spec.classes:
        assert c.tpot_ms is not None and c.tpot_ms <= c.slo.tpot_ms


def test_a_drafter_that_is_never_accepted_costs_more_than_none():
    """acceptance_length 1: every verification step advances one token, so the drafter
    and the k extra tokens are pure cost: the plan must not get cheaper."""
    useless = {**EAGLE3, "acceptance_length": 1.0}
    plan = make_plan(_request(useless), CAT, alternatives=False, verify=False)
    without = make_plan(_request(None), CAT, alternatives=False, verify=False)
    assert plan.cost_usd_per_hour >= without.cost_usd_per_hour


def test_prefill_pools_do_not_speculate():
    doc = _request(EAGLE3)
    doc["traffic"]["classes"][0]["modes"] = ["disaggregated"]
    plan = make_plan(doc, CAT, alternatives=False, verify=False)
    roles = {p.role.value: p for p in plan.pools}
    assert "prefill" in roles and "decode" in roles
    for p in plan.pools:
        spec = any(a.startswith("--speculative-config") for a in p.launch.vllm)
        assert spec == (p.role.value == "decode"), p.id


# --------------------------------------------------------------------------- simulator


def test_decode_steps_advance_a_tokens_per_step_on_average():
    assert decode_steps(300, 1.0, 7) == 299
    assert decode_steps(1, 2.5, 7) == 0
    assert decode_steps(2, 2.5, 7) == 1
    steps = [decode_steps(1601, 2.5, rid) for rid in range(10_000)]
    assert set(steps) == {640}
    steps = [decode_steps(1000, 2.5, rid) for rid in range(10_000)]
    assert set(steps) == {399, 400}
    assert sum(steps) / len(steps) == pytest.approx(999 / 2.5, rel=1e-3)


def test_the_simulated_tpot_is_the_verification_step_over_a():
    doc = _request(EAGLE3)
    doc["verify"] = {"requests": 4000}
    plan = make_plan(doc, CAT, alternatives=False, verify=True)
    ver = plan.verification
    assert ver is not None and ver.passed, ver.summary
    assert ver.correction is None
    sim_tpot = ver.classes[0].tpot_ms
    # the plan's prediction is step / 2.5; without the division the simulated TPOT
    # would be 2.5x the plan's
    assert sim_tpot == pytest.approx(plan.classes[0].tpot_ms, rel=0.35)


# --------------------------------------------------------------------------- launch


def test_launch_settings_carry_the_speculative_config():
    spec = _replica(**EAGLE3).speculative
    vllm, sglang = speculative_args(spec)
    assert len(vllm) == 1 and vllm[0].startswith("--speculative-config=")
    config = json.loads(vllm[0].split("=", 1)[1])
    assert config == {
        "method": "eagle3",
        "model": "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B",
        "num_speculative_tokens": 3,
    }
    assert sglang == [
        "--speculative-algorithm=EAGLE3",
        "--speculative-draft-model-path=yuhuili/EAGLE3-LLaMA3.3-Instruct-70B",
        "--speculative-num-steps=3",
        "--speculative-eagle-topk=1",
        "--speculative-num-draft-tokens=4",
    ]
    mtp = _replica(
        model="deepseek-v3",
        gpu="h200-sxm-141gb",
        method="mtp",
        draft_tokens=1,
        acceptance_length=1.8,
    ).speculative
    v, s = speculative_args(mtp)
    assert json.loads(v[0].split("=", 1)[1]) == {"method": "mtp", "num_speculative_tokens": 1}
    assert "--speculative-algorithm=NEXTN" in s
    assert not any("draft-model-path" in a for a in s)
    ngram = _replica(method="ngram", draft_tokens=4, acceptance_length=1.5).speculative
    v, s = speculative_args(ngram)
    assert json.loads(v[0].split("=", 1)[1])["method"] == "ngram"
    assert s == ["--speculative-algorithm=NGRAM", "--speculative-num-draft-tokens=5"]
    assert speculative_args(None) == ([], [])


def test_the_vllm_token_budget_counts_k_plus_1_tokens_per_running_sequence():
    plan = make_plan(_request(EAGLE3), CAT, alternatives=False, verify=False)
    pool = next(p for p in plan.pools if p.role.value == "aggregated")
    budget = next(a for a in pool.launch.vllm if a.startswith("--max-num-batched-tokens="))
    assert int(budget.split("=")[1]) == pool.chunk_budget_tokens + 4 * pool.max_batch
    chunk = next(a for a in pool.launch.sglang if a.startswith("--chunked-prefill-size="))
    assert int(chunk.split("=")[1]) == pool.chunk_budget_tokens
    # SGLang refuses --enable-mixed-chunk with speculative decoding: left out, and said so
    assert "--enable-mixed-chunk" not in pool.launch.sglang
    assert any(pool.id in w and "SGLang does not mix" in w for w in plan.warnings)
    without = make_plan(_request(None), CAT, alternatives=False, verify=False)
    assert "--enable-mixed-chunk" in without.pools[0].launch.sglang
    assert not any("SGLang does not mix" in w for w in without.warnings)


def test_the_text_plan_says_what_speculation_it_assumed():
    plan = make_plan(_request(EAGLE3), CAT, alternatives=False, verify=False)
    text = render_plan_text(plan.to_json_dict())
    assumed = text.split("  Assumed:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    # the class's TTFT caveat (planner.plan.notes), then its speculation
    assert assumed[0].startswith("    agent: aggregated TTFT")
    assert assumed[1].startswith(
        "    agent: speculative eagle3 (yuhuili/EAGLE3-LLaMA3.3-Instruct-70B)"
    )
    assert "assumed acceptance length 2.5" in text
    without = make_plan(_request(None), CAT, alternatives=False, verify=False)
    assert "speculative" not in render_plan_text(without.to_json_dict()).split("  Assumed:")[1]


def test_pools_report_their_speculation():
    plan = make_plan(_request(EAGLE3), CAT, alternatives=False, verify=False)
    pool = plan.pools[0]
    assert pool.speculative is not None
    assert pool.speculative["method"] == "eagle3" and pool.speculative["draft_tokens"] == 3
    assert pool.speculative["verification_step_ms"] == pytest.approx(pool.step_ms * 2.5)
    without = make_plan(_request(None), CAT, alternatives=False, verify=False)
    assert all(p.speculative is None for p in without.pools)


def test_the_procurement_report_lists_the_assumed_speculation():
    req = _request(EAGLE3)
    plan = make_plan(req, CAT, alternatives=False, verify=False)
    record = {"id": "p", "created_at": "2026-12-01T00:00:00Z", "request": req}
    md, _ = render_plan_report({**record, "plan": plan.to_json_dict()}, "md", CAT)
    assert "### Assumed" in md
    assert "- agent: speculative eagle3" in md
    without = make_plan(_request(None), CAT, alternatives=False, verify=False)
    md, _ = render_plan_report({**record, "plan": without.to_json_dict()}, "md", CAT)
    assert "### Assumed" in md and "- agent: aggregated TTFT" in md  # the TTFT caveat only
    assert "- agent: speculative" not in md


@pytest.mark.parametrize(
    "spec",
    [
        EAGLE3,
        {
            "method": "draft_model",
            "draft_tokens": 3,
            "acceptance_length": 2.0,
            "draft_model": "llama-3.1-8b",
        },
    ],
)
def test_vectorized_steps_and_kv_match_the_scalar_ones_with_a_drafter(spec):
    replica = _replica(**spec)
    c = replica.coefficients
    starts = np.array([0.0, 4096.0, 50_000.0])
    vec = c.chunk_steps_array_ms(12, 40_000.0, 2048, starts)
    scalar = [c.step_ms(12, 40_000.0, 2048, s) for s in starts]
    assert vec.tolist() == pytest.approx(scalar)
    assert c.kv_held_array(starts + 1).tolist() == pytest.approx(
        [c.kv_held_bytes(s + 1) for s in starts]
    )
    steps = StepModel(replica)
    assert steps.kv_bytes_array(starts + 1).tolist() == pytest.approx(
        [steps.kv_bytes(s + 1) for s in starts]
    )
