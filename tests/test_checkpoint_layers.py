"""What a quantized checkpoint keeps in BF16, in the bytes the planner prices.

Every FP8 and FP4 checkpoint keeps the embedding table, the lm_head, the norms and the
MoE routers in BF16; some keep more: Meta's FP8 Llama-3.1-405B quantizes only the MLPs of
layers 1..n-2 (487 GB of weights, not 410), NVIDIA's NVFP4 DeepSeek leaves attention in
BF16, OpenAI's gpt-oss MXFP4 only its experts. The weights a replica holds and reads are
counted with those layers at 2 bytes, and a measurement that ran such a checkpoint is
priced with it."""

from __future__ import annotations

import dataclasses
import json

import pytest
from pydantic import ValidationError
from script_support import load_script

from catalog.loader import load_catalog
from catalog.schema import Dtype, Model, WeightGroup
from planner import architecture as arch
from planner import calibration as cb
from planner import roofline as rl
from planner.errors import PlanningError

CAT = load_catalog()
H100 = "h100-sxm5-80gb"
META_FP8 = "meta-llama/Llama-3.1-405B-Instruct-FP8"
IMPORTER = load_script("import_reference_measurements")


# --------------------------------------------------------------------------- worked bytes


def test_every_fp8_checkpoint_keeps_embedding_lm_head_and_norms_in_bf16():
    """Llama-3.1-8B in fp8: 8,030,261,248 parameters, of which the untied embedding and
    lm_head (2 x 128,256 x 4,096 = 1,050,673,152) and 65 norms of 4,096 (266,240) stay
    BF16: (N - 1,050,939,392) x 1 + 1,050,939,392 x 2 = 9,081,200,640 bytes, not 8.03 GB.
    In bf16 every weight is 2 bytes."""
    m = CAT.models["llama-3.1-8b"]
    n = arch.total_param_count(m)
    assert n == 8_030_261_248
    assert arch.bf16_param_count(m) == 1_050_939_392
    assert arch.weight_bytes(m, "fp8") == 9_081_200_640
    assert arch.weight_bytes(m, "bf16") == 2 * n
    assert arch.weight_bytes(m, "bf16", bf16_layers=[WeightGroup.ATTENTION]) == 2 * n


def test_meta_fp8_405b_holds_attention_and_the_edge_mlps_in_bf16():
    """Meta's recipe: attention 126 x (2 x 16,384^2 + 2 x 16,384 x 1,024) = 71,873,593,344,
    the first and last MLPs 2 x 3 x 16,384 x 53,248 = 5,234,491,392, embeddings
    4,202,692,608 and norms 253 x 16,384 = 4,145,152 in BF16: 81,314,922,496 wide
    parameters, 487.17 GB of weights against 410.06 GB quantized on load."""
    m = CAT.models["llama-3.1-405b"]
    ckpt = m.measured_checkpoint(META_FP8)
    assert ckpt.bf16_layers == [WeightGroup.ATTENTION, WeightGroup.EDGE_MLP]
    wide = arch.bf16_param_count(m, ckpt.bf16_layers)
    assert wide == 71_873_593_344 + 5_234_491_392 + 4_202_692_608 + 4_145_152
    n = arch.total_param_count(m)
    assert arch.weight_bytes(m, "fp8", bf16_layers=ckpt.bf16_layers) == n + wide
    assert arch.weight_bytes(m, "fp8", bf16_layers=ckpt.bf16_layers) / 1e9 == pytest.approx(
        487.17, abs=0.01
    )
    assert arch.weight_bytes(m, "fp8") / 1e9 == pytest.approx(410.06, abs=0.01)


def test_fp4_moe_checkpoints_keep_attention_wide_and_the_experts_at_four_bits():
    """NVIDIA's NVFP4 DeepSeek: attention BF16, everything else of the blocks NVFP4 (4.5
    bits), routers BF16; the routed experts stay at 0.5625 bytes whatever is wide. 396.7 GB
    of weights (377.5 GB if every parameter were NVFP4)."""
    m = CAT.models["deepseek-v3"]
    nv = m.fp4_checkpoint_for(["nvfp4"])
    assert nv is not None and nv.bf16_layers == [WeightGroup.ATTENTION]
    wide = arch.bf16_param_count(m, nv.bf16_layers)
    attention = m.num_layers * arch.attention_param_count_per_layer(m)
    assert wide - arch.bf16_param_count(m) == attention
    total = arch.weight_bytes(m, "fp4", "nvfp4", nv.bf16_layers)
    n = arch.total_param_count(m)
    assert total == pytest.approx((n - wide) * 0.5625 + wide * 2.0)
    assert total / 1e9 == pytest.approx(396.68, abs=0.01)
    dense = arch.dense_weight_bytes(m, "fp4", "nvfp4", nv.bf16_layers)
    routed = arch.routed_expert_param_count(m) * 0.5625
    assert dense + routed == pytest.approx(total)
    oss = CAT.models["gpt-oss-120b"]
    (ckpt,) = oss.fp4_checkpoints
    assert arch.weight_bytes(oss, "fp4", "mxfp4", ckpt.bf16_layers) / 1e9 == pytest.approx(
        65.19, abs=0.01
    )


def test_one_layers_bytes_follow_its_groups_width():
    """A dense layer's projections and MLP: each at 2 bytes when its group is kept BF16."""
    m = CAT.models["llama-3.1-70b"]
    attn, mlp = arch.attention_param_count_per_layer(m), arch.dense_mlp_param_count(m)
    assert arch.layer_linear_bytes(m, "fp8") == attn + mlp
    assert arch.layer_linear_bytes(m, "fp8", bf16_layers=["attention"]) == 2 * attn + mlp
    assert arch.layer_linear_bytes(m, "fp8", bf16_layers=["dense_mlp"]) == attn + 2 * mlp
    assert arch.layer_linear_bytes(m, "bf16") == 2 * (attn + mlp)


# --------------------------------------------------------------------------- catalog


def _405b(**update) -> dict:
    data = CAT.models["llama-3.1-405b"].model_dump(mode="json")
    data.update(update)
    return data


def test_checkpoint_layers_are_checked_against_the_model():
    ckpt = {
        "repo": "someone/x-FP8",
        "dtype": "fp8",
        "bf16_layers": ["attention"],
        "bf16_layers_source": "s",
    }
    model = Model(**_405b(measured_checkpoints=[ckpt]))
    assert model.measured_checkpoints[0].repo == "someone/x-FP8"
    bad = [
        ({**ckpt, "bf16_layers": ["lm_head"]}, "bf16_layers"),
        ({**ckpt, "bf16_layers": ["attention", "attention"]}, "lists a group twice"),
        ({**ckpt, "bf16_layers_source": ""}, "needs bf16_layers_source"),
        ({**ckpt, "bf16_layers": ["dense_mlp", "edge_mlp"]}, "dense_mlp already holds"),
        ({**ckpt, "bf16_layers": ["attention", "attention_qkv"]}, "attention already holds"),
        ({**ckpt, "format": "nvfp4"}, "format is given for an fp4 checkpoint, and only"),
        ({**ckpt, "dtype": "fp4"}, "format is given for an fp4 checkpoint, and only"),
        ({**ckpt, "bf16_layers": ["shared_experts"]}, "shared_experts, but the model has none"),
    ]
    for entry, reason in bad:
        with pytest.raises(ValidationError, match=reason):
            Model(**_405b(measured_checkpoints=[entry]))
    with pytest.raises(ValidationError, match="repository is listed twice"):
        Model(**_405b(measured_checkpoints=[ckpt, ckpt]))
    with pytest.raises(ValidationError, match="is fp8, not in weight_dtypes"):
        Model(**_405b(measured_checkpoints=[ckpt], weight_dtypes=["bf16", "fp4"]))
    llama8 = CAT.models["llama-3.1-8b"].model_dump(mode="json")
    llama8["fp4_checkpoints"] = [llama8["fp4_checkpoints"][0]]  # NVFP4 only
    mx = {**ckpt, "dtype": "fp4", "format": "mxfp4"}
    with pytest.raises(ValidationError, match="a format no fp4_checkpoints entry has"):
        Model(**{**llama8, "measured_checkpoints": [mx]})
    ds = CAT.models["deepseek-v3"].model_dump(mode="json")
    ds["fp4_checkpoints"][0]["bf16_layers"] = ["edge_mlp"]
    with pytest.raises(ValidationError, match="edge_mlp is for dense models"):
        Model(**ds)


def test_every_shipped_checkpoint_with_wide_layers_says_where_that_is_read():
    wide = [
        c
        for m in CAT.models.values()
        for c in [*m.fp4_checkpoints, *m.measured_checkpoints]
        if c.bf16_layers
    ]
    assert {c.repo for c in wide} >= {META_FP8, "nvidia/DeepSeek-V3-0324-FP4"}
    for c in wide:
        assert "https://" in c.bf16_layers_source or "Assumed" in c.bf16_layers_source


# --------------------------------------------------------------------------- replicas


def test_a_replica_of_metas_fp8_checkpoint_holds_about_half_the_kv_cache():
    """On 8 x H100 the 77 GB Meta's BF16 attention adds come out of the KV cache: at vLLM's
    memory share about half the tokens of FP8 quantized on load fit."""
    plain = rl.build_replica(CAT, "llama-3.1-405b", H100, tp=8, dtype="fp8")
    meta = rl.build_replica(CAT, "llama-3.1-405b", H100, tp=8, dtype="fp8", checkpoint=META_FP8)
    assert plain.measured_checkpoint is None and plain.bf16_layers == ()
    assert meta.bf16_layers == (WeightGroup.ATTENTION, WeightGroup.EDGE_MLP)
    added = rl.replica_weight_bytes(meta) - rl.replica_weight_bytes(plain)
    assert added / 1e9 == pytest.approx(77.11, abs=0.01)
    ratio = rl.kv_capacity_tokens(meta) / rl.kv_capacity_tokens(plain)
    assert 0.3 < ratio < 0.6
    # every decode step reads the wider weights (all but the 2.1 GB input embedding)
    emb_gb = arch.input_embedding_bytes(plain.model) / 1e9
    assert rl.weight_read_ms(meta) / rl.weight_read_ms(plain) == pytest.approx(
        (487.17 - emb_gb) / (410.06 - emb_gb), rel=1e-3
    )


def test_a_checkpoint_is_refused_unless_the_model_publishes_it_in_the_runs_dtype():
    for kwargs, reason in (
        ({"dtype": "bf16", "checkpoint": META_FP8}, "is fp8 but the weights are bf16"),
        ({"dtype": "fp8", "checkpoint": "someone/else"}, "has no checkpoint 'someone/else'"),
    ):
        with pytest.raises(PlanningError, match=reason) as err:
            rl.build_replica(CAT, "llama-3.1-405b", H100, tp=8, **kwargs)
        assert err.value.issues[0][0] == "checkpoint"
    # a replica built around the check is refused too
    meta = rl.build_replica(CAT, "llama-3.1-405b", H100, tp=8, dtype="fp8", checkpoint=META_FP8)
    with pytest.raises(PlanningError, match="is fp8 but the weights are bf16"):
        dataclasses.replace(meta, weight_dtype=Dtype.BF16)


def test_a_run_may_name_a_checkpoint_plans_load():
    """A B200 run of AMD's MXFP4 DeepSeek is priced with that checkpoint's format and
    layers (MXFP4, 4.25 bits), not B200's own NVFP4 one; the plan's own checkpoint named
    prices as the plan does."""
    amd = "amd/DeepSeek-R1-0528-MXFP4"
    mx = rl.build_replica(CAT, "deepseek-v3", "b200", tp=8, dtype="fp4", checkpoint=amd)
    nv = rl.build_replica(CAT, "deepseek-v3", "b200", tp=8, dtype="fp4")
    assert mx.fp4_format == "mxfp4" and nv.fp4_format == "nvfp4"
    assert rl.replica_weight_bytes(mx) < rl.replica_weight_bytes(nv)
    same = rl.build_replica(
        CAT, "deepseek-v3", "b200", tp=8, dtype="fp4", checkpoint="nvidia/DeepSeek-V3-0324-FP4"
    )
    assert rl.replica_weight_bytes(same) == rl.replica_weight_bytes(nv)
    assert same.bf16_layers == nv.bf16_layers == ("attention",)


def test_tied_embeddings_are_read_every_step():
    """A tied table is the lm_head, which every step reads whole: nothing is left out of
    the read."""
    tied = CAT.models["llama-3.1-8b"].model_copy(update={"tie_word_embeddings": True})
    assert arch.input_embedding_bytes(tied) == 0.0
    assert arch.input_embedding_bytes(CAT.models["llama-3.1-8b"]) == 128_256 * 4_096 * 2
    assert arch.bf16_param_count(tied) == 128_256 * 4_096 + 65 * 4_096


def test_plans_never_load_a_measured_checkpoint():
    """Llama-3.1-405B FP8 on H100 is planned on FP8 quantized on load (410 GB at tp 8), never
    on Meta's 487 GB checkpoint its measurements name; the launch loads the model's repo."""
    from planner.service import make_plan

    request = {
        "model": "llama-3.1-405b",
        "traffic": {"rate_rps": 2, "classes": [{"workload": "chat", "share": 1.0}]},
        "candidates": {"gpus": [H100], "dtypes": ["fp8"]},
    }
    plan = make_plan(request, CAT, alternatives=False, verify=False)
    assert plan.pools
    for pool in plan.pools:
        assert META_FP8 not in str(pool.launch)
        assert pool.launch.vllm[2] == "meta-llama/Llama-3.1-405B-Instruct"
    from planner.candidates import screen_candidates
    from planner.problem_build import parse_request
    from planner.request import resolve_request

    screened = screen_candidates(resolve_request(parse_request(request), CAT), CAT)
    assert screened.candidates
    assert all(c.replica.measured_checkpoint is None for c in screened.candidates)


def test_dstacks_h100_405b_runs_are_priced_with_metas_checkpoint():
    """dstack's 8 x H100 runs loaded Meta's FP8 checkpoint (launch-settings.json cites the
    benchmark's README): priced with it, the held-out small-batch run is predicted
    closer to what it measured than with FP8 quantized on load."""
    points = {m.id: m for m in cb.load_reference_measurements(CAT)}
    run = points["p0194"]  # 128/2,048 tokens, 4 prompts at once, held out
    assert run.checkpoint == META_FP8 and run.split == cb.Split.HOLDOUT
    assert run.output_tok_s is not None
    with_ckpt = cb.predict(run, CAT).output_tok_s
    without = cb.predict(run.model_copy(update={"checkpoint": None}), CAT).output_tok_s
    assert with_ckpt is not None and without is not None
    assert abs(with_ckpt / run.output_tok_s - 1) < abs(without / run.output_tok_s - 1)
    assert with_ckpt < without
    assert all(
        m.checkpoint == META_FP8
        for m in points.values()
        if m.gpu == H100 and m.model == "llama-3.1-405b"
    )


def test_a_user_measurement_naming_an_unknown_checkpoint_is_refused_with_its_line(tmp_path):
    header = "model,gpu,tp,dtype,isl,osl,concurrency,output_tok_s,ttft_ms,tpot_ms,checkpoint"
    rows = [
        f"llama-3.1-405b,{H100},8,fp8,128,2048,4,115,,,{META_FP8}",
        f"llama-3.1-405b,{H100},8,fp8,128,2048,16,432,,,someone/Llama-405B-FP8",
    ]
    path = tmp_path / "runs.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    with pytest.raises(cb.MeasurementError) as err:
        cb.load_measurements([path], CAT)
    assert f"{path}:3" in str(err.value) and "has no checkpoint" in str(err.value)
    path.write_text("\n".join([header, rows[0]]) + "\n")
    (point,) = cb.load_measurements([path], CAT)
    assert point.checkpoint == META_FP8


def test_a_launch_setting_checkpoint_must_be_a_repository(tmp_path, capsys):
    base = tmp_path / "calibration.json"
    base.write_text(json.dumps({"measurements": []}))
    more = tmp_path / "more.json"
    entry = {
        "category": "dstack benchmark (dstackai/benchmarks)",
        "framework": "vLLM 0.6.3",
        "hardware": "NVIDIA H100 SXM5 80GB",
        "num_accelerators": 8,
        "tp": 8,
        "model": "meta-llama/Llama-3.1-405B-FP8 (llama-3.1-405b)",
        "precision": "FP8",
        "isl": 128,
        "osl": 2048,
        "concurrency": 4,
        "metric": "offline",
        "value": {"output_token_tput": 114.9},
        "source": "https://example.org/run",
        "id": "d1",
    }
    more.write_text(json.dumps({"measurements": [entry]}, indent=1))
    out = tmp_path / "out" / "reference.json"
    settings = tmp_path / "launch.json"
    args = [str(base), "--more", str(more), "--mlperf", "", "--dli", "", "--out", str(out)]
    args += ["--launch-settings", str(settings)]
    group = {"ids": ["d1"], "checkpoint": META_FP8, "source": "https://example.org/README"}
    settings.write_text(json.dumps({"settings": [group]}))
    assert IMPORTER.main(args) == 0
    (row,) = json.loads(out.read_text())["measurements"]
    assert row["checkpoint"] == META_FP8
    out.unlink()
    # a repository the model does not publish: refused, not left unpriced
    settings.write_text(json.dumps({"settings": [{**group, "checkpoint": "someone/x-FP8"}]}))
    assert IMPORTER.main(args) == 1
    assert "d1: llama-3.1-405b has no checkpoint someone/x-FP8" in capsys.readouterr().err
    assert not out.exists()
    settings.write_text(json.dumps({"settings": [{**group, "checkpoint": "Meta FP8"}]}))
    assert IMPORTER.main(args) == 1
    assert "checkpoint must be a repository owner/name" in capsys.readouterr().err
    assert not out.exists()


def test_a_plan_states_the_layers_its_fp4_checkpoint_keeps_in_bf16():
    from planner.plan.notes import assumed_notes
    from planner.service import make_plan

    request = {
        "model": "deepseek-v3",
        "traffic": {"rate_rps": 10, "classes": [{"workload": "chat", "share": 1.0}]},
        "candidates": {"gpus": ["b200"], "dtypes": ["fp4"]},
    }
    plan = make_plan(request, CAT, alternatives=False, verify=False)
    ckpts = plan.assumptions["fp4"]["checkpoints"]
    assert ckpts["nvidia/DeepSeek-V3-0324-FP4"]["bf16_layers"] == ["attention"]
    line = next(n for n in assumed_notes([], plan.assumptions) if n.startswith("fp4:"))
    assert "attention kept in BF16" in line


def test_nvidias_v2_fp4_deepseek_quantizes_the_attention_output_too():
    """NVIDIA's NVFP4 DeepSeek-R1 "v2" quantizes ``wo`` (128 heads x 128 x 7,168 =
    117,440,512 per layer) as well: 61 x that less in BF16 than the plan's checkpoint.
    InferenceX's B200 and GB200 FP4 runs loaded it, and are priced with it; a GPU that
    runs no NVFP4 cannot be priced on it."""
    m = CAT.models["deepseek-v3"]
    v2 = m.measured_checkpoint("nvidia/DeepSeek-R1-0528-FP4-v2")
    assert (v2.dtype, v2.format, v2.bf16_layers) == ("fp4", "nvfp4", ["attention_qkv"])
    assert arch.attention_output_param_count_per_layer(m) == 117_440_512
    v1 = m.fp4_checkpoint_for(["nvfp4"])
    assert v1 is not None
    gap = arch.bf16_param_count(m, v1.bf16_layers) - arch.bf16_param_count(m, v2.bf16_layers)
    assert gap == 61 * 117_440_512
    r1 = rl.build_replica(CAT, "deepseek-v3", "b200", tp=8, dtype="fp4")
    r2 = rl.build_replica(CAT, "deepseek-v3", "b200", tp=8, dtype="fp4", checkpoint=v2.repo)
    assert r2.fp4_format == r1.fp4_format == "nvfp4"
    saved = rl.replica_weight_bytes(r1) - rl.replica_weight_bytes(r2)
    assert saved == pytest.approx(gap * (2.0 - 0.5625))
    with pytest.raises(PlanningError, match="nvfp4, a format mi355x does not run"):
        rl.build_replica(CAT, "deepseek-v3", "mi355x", tp=8, dtype="fp4", checkpoint=v2.repo)
    points = [
        m
        for m in cb.load_reference_measurements(CAT)
        if m.model == "deepseek-v3" and m.dtype == "fp4" and m.gpu in ("b200", "gb200-per-gpu")
    ]
    assert len(points) >= 19
    assert all(p.checkpoint == v2.repo for p in points if p.id != "p0258")
    layer = arch.layer_linear_bytes(m, "fp4", "nvfp4", ["attention_qkv"])
    attn = arch.attention_param_count_per_layer(m)
    out = arch.attention_output_param_count_per_layer(m)
    mlp = arch.dense_mlp_param_count(m)
    assert layer == pytest.approx((attn - out) * 2 + (out + mlp) * 0.5625)


# --------------------------------------------------------------------------- BF16 GEMM rate


def test_bf16_gemm_weights_are_the_wide_ones_a_gemm_multiplies():
    """What runs as a BF16 GEMM in a quantized checkpoint: its wide weights less the norms
    and the untied input table (gathered by row). Llama-3.1-8B: the lm_head alone,
    128,256 x 4,096; Meta's FP8 405B: attention 71,873,593,344 + the edge MLPs
    5,234,491,392 + the lm_head 2,101,346,304; tied tables are the lm_head and count."""
    m8 = CAT.models["llama-3.1-8b"]
    assert arch.input_embedding_param_count(m8) == 128_256 * 4_096
    assert arch.bf16_gemm_param_count(m8) == 525_336_576
    m405 = CAT.models["llama-3.1-405b"]
    layers = m405.measured_checkpoint(META_FP8).bf16_layers
    assert arch.bf16_gemm_param_count(m405, layers) == (
        71_873_593_344 + 5_234_491_392 + 2_101_346_304
    )
    tied = m8.model_copy(update={"tie_word_embeddings": True})
    assert arch.input_embedding_param_count(tied) == 0
    assert arch.bf16_gemm_param_count(tied) == 525_336_576


def test_a_bf16_gemm_flop_costs_the_ratio_of_the_two_measured_rates():
    """H100 under TensorRT-LLM at its MFU: an FP8 GEMM runs at 1,979 x e_fp8 x lift_fp8, a
    BF16 one at 989 x lift_bf16 (their measured kernel shares at 512 tokens): a BF16 FLOP
    takes 1.32x an FP8 one, and gains less with the step's tokens (its own measured
    curve). Without measured kernel rates it is the peak ratio times the FP8 derate (2 x
    0.741 = 1.48); BF16 weights and a GPU without an FP8 peak: 1 and no gains. A GPU whose
    factors differ per dtype compares the two dtypes' MFUs too."""
    from planner.kernel_floors import (
        bf16_gemm_rates,
        bf16_gemm_time_ratio,
        dense_gemm_lift,
        gemm_token_gain,
        weight_dtype_derates,
    )

    gpu = CAT.gpus[H100]
    mfu = gpu.efficiency.prefill_mfu
    e = weight_dtype_derates(gpu, "fp8", "trtllm")[0]
    lq = min(dense_gemm_lift(gpu, "trtllm", "fp8"), 1 / (mfu * e))
    lb = min(dense_gemm_lift(gpu, "trtllm", "bf16"), 1 / mfu)
    rho, gains = bf16_gemm_rates(gpu, "trtllm", "fp8", mfu)
    assert rho == pytest.approx(gpu.peak_tflops("fp8") * e * lq / (gpu.bf16_dense_tflops * lb))
    assert rho == pytest.approx(1.32, abs=0.01)
    assert bf16_gemm_time_ratio(gpu, "trtllm", "fp8", mfu) == rho
    assert gains == gemm_token_gain(gpu, "trtllm", "bf16")
    assert max(gains) < max(gemm_token_gain(gpu, "trtllm", "fp8"))
    plain = bf16_gemm_time_ratio(gpu, "trtllm", "fp8", mfu, kernel_rate=False)
    assert plain == pytest.approx(gpu.peak_tflops("fp8") / gpu.bf16_dense_tflops * e)
    assert bf16_gemm_rates(gpu, "trtllm", "bf16", mfu) == (1.0, ())
    assert bf16_gemm_rates(CAT.gpus["a100-sxm-80gb"], "trtllm", "fp8", mfu) == (1.0, ())
    # FP8 factors fitted apart at half the BF16 MFU: an FP8 FLOP is half as fast, rho halves
    doc = gpu.model_dump()
    doc["efficiency"]["by_dtype"] = {
        "fp8": {
            "prefill_mfu": gpu.efficiency.prefill_mfu / 2,
            "decode_mbu": gpu.efficiency.decode_mbu,
            "step_overhead_ms": gpu.efficiency.step_overhead_ms,
            "reason": "a test: FP8 fitted apart",
        }
    }
    split = type(gpu).model_validate(doc)
    halved = bf16_gemm_time_ratio(split, "trtllm", "fp8", mfu / 2)
    assert halved == pytest.approx(max(1.0, rho / 2), rel=0.02)


def test_metas_bf16_attention_slows_the_405b_prefill_by_its_share_of_the_flops():
    """On 8 x H100 a prefill chunk of Meta's FP8 405B spends its 79.2B BF16 GEMM weights'
    FLOPs at the BF16 rate: 2 (N - W) FLOPs per token at the FP8 rate and 2 W rho in FP8
    FLOPs at the BF16 gain, so the chunk takes longer than FP8 quantized on load (whose
    BF16 GEMM is its lm_head alone)."""
    from planner.kernel_floors import bf16_gemm_rates

    plain = rl.build_replica(CAT, "llama-3.1-405b", H100, tp=8, dtype="fp8")
    meta = rl.build_replica(CAT, "llama-3.1-405b", H100, tp=8, dtype="fp8", checkpoint=META_FP8)
    m = meta.model
    wide = arch.bf16_gemm_param_count(m, meta.bf16_layers)
    rho, gains = bf16_gemm_rates(meta.gpu, meta.engine, "fp8", meta.prefill_mfu)
    assert rho > 1.2
    n = arch.dense_weight_param_count(m)
    c = meta.coefficients
    assert c.dense_flops_per_token == pytest.approx(2 * (n - wide))
    assert c.wide_flops_per_token == pytest.approx(2 * wide * rho)
    assert c.wide_gain == gains
    lm_head = arch.bf16_gemm_param_count(m)
    assert plain.coefficients.wide_flops_per_token == pytest.approx(2 * lm_head * rho)
    assert c.dense_ms_per_token(512) == pytest.approx(
        2 * (n + wide * (rho - 1)) / (c.f_gemm_per_ms * c.dense_lift)
    )
    ratio = rl.chunk_compute_ms(meta, 4096, 0) / rl.chunk_compute_ms(plain, 4096, 0)
    per_token = c.dense_ms_per_token(4096) / plain.coefficients.dense_ms_per_token(4096)
    assert 1.0 < ratio < per_token  # attention FLOPs are the same on both
    # a BF16 replica has no narrower GEMMs to slow
    bf16 = rl.build_replica(CAT, "llama-3.1-8b", H100, tp=1, dtype="bf16").coefficients
    assert bf16.wide_flops_per_token == 0.0
    assert bf16.dense_flops_per_token == 2 * arch.dense_weight_param_count(
        CAT.models["llama-3.1-8b"]
    )


def test_dstacks_405b_runs_are_priced_at_the_vllm_defaults_of_their_day():
    """dstack launched vLLM (Nov 2024) without a memory share or KV dtype: the default 0.9
    and the checkpoint's BF16 KV cache; its server ran with max_model_len 91,680, so
    chunked prefill was on at that version's 512 tokens per step. Priced so, a serving
    run's steps hold 512 tokens, not the modern default's 8,192: a shorter predicted TPOT
    (the measured one, about 110 ms, lies between the two)."""
    points = {m.id: m for m in cb.load_reference_measurements(CAT)}
    for mid in ("p0194", "p0200", "p0203"):
        run = points[mid]
        assert (run.kv_dtype, run.memory_utilization, run.token_budget) == (
            Dtype.BF16,
            0.9,
            None,
        )
    serving = points["p0205"]
    assert (serving.kv_dtype, serving.memory_utilization, serving.token_budget) == (
        Dtype.BF16,
        0.9,
        512,
    )
    assert serving.max_batch == 512  # what the entry states itself
    shipped = cb.predict(serving, CAT)
    modern = cb.predict(serving.model_copy(update={"token_budget": None}), CAT)
    assert shipped.tpot_ms is not None and modern.tpot_ms is not None
    assert shipped.tpot_ms < modern.tpot_ms


def test_analyze_capacity_says_what_runs_in_bf16(capsys):
    """`fleetplan analyze capacity` names the GEMM weights a quantized checkpoint keeps in
    BF16 and how much longer their FLOPs take: Llama-3.1-8B FP8 on an H100 under
    TensorRT-LLM, its 0.53B lm_head at x1.32; nothing for BF16 weights."""
    from api.cli import main
    from planner.analyses.common import ReplicaSummary
    from planner.kernel_floors import bf16_gemm_time_ratio

    r = rl.build_replica(CAT, "llama-3.1-8b", H100, dtype="fp8", engine="trtllm")
    summary = ReplicaSummary.of(r)
    assert summary.bf16_gemm_params_b == pytest.approx(0.525336576)
    assert summary.bf16_gemm_time_ratio == bf16_gemm_time_ratio(
        r.gpu, "trtllm", "fp8", r.prefill_mfu
    )
    args = ["analyze", "capacity", "--model", "llama-3.1-8b", "--gpu", H100]
    args += ["--prompt-tokens", "1000", "--output-tokens", "200"]
    assert main([*args, "--dtype", "fp8", "--engine", "trtllm"]) == 0
    out = capsys.readouterr().out
    assert "BF16 GEMMs  0.53B GEMM parameters kept in BF16 by the fp8 checkpoint" in out
    assert "each FLOP x1.32 a fp8 FLOP's time" in out
    assert main(args) == 0
    assert "BF16 GEMMs" not in capsys.readouterr().out
    bf16 = ReplicaSummary.of(rl.build_replica(CAT, "llama-3.1-8b", H100))
    assert (bf16.bf16_gemm_params_b, bf16.bf16_gemm_time_ratio) == (0.0, 1.0)


def test_a_kernel_layer_of_metas_fp8_405b_runs_its_attention_at_the_bf16_rate():
    """A per-layer kernel point is priced as the steps are: of one 405B layer's
    3,187,671,040 projection and MLP parameters Meta's FP8 checkpoint keeps the 570,425,344
    of attention in BF16, at rho x an FP8 FLOP's time and the BF16 gain; its bytes hold
    them at 2 bytes. A BF16 layer has nothing narrower."""
    from planner.calibration.predict import kernel_layer_ms
    from planner.kernel_floors import bf16_gemm_time_ratio, gain_at_tokens

    m = CAT.models["llama-3.1-405b"]
    layers = m.measured_checkpoint(META_FP8).bf16_layers
    assert arch.layer_bf16_gemm_param_count(m, layers) == 570_425_344
    assert arch.layer_bf16_gemm_param_count(m, [WeightGroup.ATTENTION_QKV]) == 570_425_344 - (
        16_384 * 16_384
    )
    params = arch.attention_param_count_per_layer(m) + arch.dense_mlp_param_count(m)
    assert params == 3_187_671_040
    assert arch.layer_linear_bytes(m, "fp8", bf16_layers=layers) == params + 570_425_344
    meta = rl.build_replica(CAT, "llama-3.1-405b", H100, tp=8, dtype="fp8", checkpoint=META_FP8)
    c = meta.coefficients
    rho = bf16_gemm_time_ratio(meta.gpu, meta.engine, "fp8", meta.prefill_mfu)
    tokens = 8192
    wide_rate = c.f_gemm_per_ms * c.dense_lift * gain_at_tokens(c.wide_gain, tokens)
    compute_ms = (
        tokens
        * 2
        * ((params - 570_425_344) / c.dense_gemm_per_ms(tokens) + 570_425_344 * rho / wide_rate)
    )
    assert kernel_layer_ms(meta, tokens) == pytest.approx(compute_ms)  # compute-bound here
    plain = rl.build_replica(CAT, "llama-3.1-405b", H100, tp=8, dtype="fp8")
    assert kernel_layer_ms(plain, tokens) < kernel_layer_ms(meta, tokens)
    assert arch.layer_bf16_gemm_param_count(m) == 0
