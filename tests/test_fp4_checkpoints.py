"""One published FP4 checkpoint per block format: a GPU loads the one in its own format.

MI355X runs MXFP4 only, Blackwell NVFP4 and MXFP4. A model with an NVFP4 checkpoint and
an MXFP4 one is served in FP4 on both; each GPU's weights are priced at its
checkpoint's bits per weight (NVFP4 4.5, MXFP4 4.25), its launch command loads that
checkpoint, and a checkpoint of another model's weights (same architecture) is named in
the plan."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from catalog.loader import load_catalog
from catalog.schema import Dtype, Fp4Format, Model
from planner import architecture as arch
from planner import roofline as rl
from planner.calibration.parsers import load_reference_measurements
from planner.calibration.predict import predict
from planner.errors import PlanningError
from planner.plan.notes import assumed_notes
from planner.report import render_plan_text
from planner.service import make_plan

CAT = load_catalog()
NV, MX = Fp4Format.NVFP4, Fp4Format.MXFP4
LLAMA2_MXFP4 = "amd/Llama-2-70b-chat-hf-WMXFP4-AMXFP4-KVFP8-Scale-UINT8-6.0MLPerf-GPTQ"


def _request(model: str, gpus: list[str]) -> dict:
    return {
        "model": model,
        "traffic": {"rate_rps": 20, "classes": [{"workload": "chat", "share": 1.0}]},
        "candidates": {"gpus": gpus, "dtypes": ["fp4"]},
    }


def _plan(model: str, gpus: list[str]):
    return make_plan(_request(model, gpus), CAT, alternatives=False, verify=False)


# --------------------------------------------------------------------------- catalog


def test_one_checkpoint_given_as_fp4_checkpoint_is_read_as_the_list():
    data = CAT.models["llama-3.1-8b"].model_dump(mode="json")
    one = data.pop("fp4_checkpoints")[0]
    model = Model(**data, fp4_checkpoint=one)
    assert [c.repo for c in model.fp4_checkpoints] == ["nvidia/Llama-3.1-8B-Instruct-FP4"]
    with pytest.raises(ValidationError, match="fp4_checkpoints or fp4_checkpoint, not both"):
        Model(**data, fp4_checkpoint=one, fp4_checkpoints=[one])


def test_two_checkpoints_in_one_format_are_refused():
    data = CAT.models["llama-3.1-8b"].model_dump(mode="json")
    nv = data["fp4_checkpoints"][0]
    data["fp4_checkpoints"] = [nv, {**nv, "repo": "someone/Llama-3.1-8B-NVFP4"}]
    with pytest.raises(ValidationError, match="2 checkpoints in nvfp4; give at most one"):
        Model(**data)


def test_the_published_mxfp4_checkpoints():
    def repos(model: str) -> dict[Fp4Format, str]:
        return {c.format: c.repo for c in CAT.models[model].fp4_checkpoints}

    assert repos("llama-3.1-405b")[MX] == "amd/Llama-3.1-405B-Instruct-MXFP4-Preview"
    assert repos("llama-3.1-8b")[MX] == "amd/Llama-3.1-8B-Instruct-MXFP4-W4A4-MLCAL-C1000-GPTQ"
    assert repos("deepseek-v3")[MX] == "amd/DeepSeek-R1-0528-MXFP4"
    assert repos("llama-3.1-70b")[MX] == "amd/Llama-3.3-70B-Instruct-MXFP4-Preview"
    assert set(repos("mixtral-8x7b")) == {NV}  # none published
    # another model's weights on the same architecture are named
    weights_of = {
        m.id: c.weights_of for m in CAT.models.values() for c in m.fp4_checkpoints if c.weights_of
    }
    assert weights_of == {
        "deepseek-v3": "DeepSeek-R1-0528",
        "llama-3.1-70b": "Llama-3.3-70B-Instruct",
    }


@pytest.mark.parametrize(
    ("model", "gpu", "repo"),
    [
        ("llama-3.1-70b", "b200", "RedHatAI/Llama-3.1-70B-Instruct-NVFP4"),  # nvfp4 first
        ("llama-3.1-70b", "mi355x", "amd/Llama-3.3-70B-Instruct-MXFP4-Preview"),
        ("llama-2-70b", "b200", LLAMA2_MXFP4),  # the only one published
        ("gpt-oss-120b", "mi355x", "openai/gpt-oss-120b"),
        ("mixtral-8x7b", "mi355x", None),
    ],
)
def test_a_gpu_loads_the_checkpoint_in_the_first_of_its_formats(model, gpu, repo):
    ckpt = CAT.models[model].fp4_checkpoint_for(CAT.gpus[gpu].fp4_formats)
    assert (ckpt.repo if ckpt else None) == repo


def test_a_model_without_a_checkpoint_in_the_gpus_format_is_refused_with_what_exists():
    message = rl.fp4_format_error(CAT.models["mixtral-8x7b"], CAT.gpus["mi355x"])
    assert message == (
        "mixtral-8x7b's FP4 checkpoints in the catalog: nvidia/Mixtral-8x7B-Instruct-v0.1-FP4 "
        "is nvfp4; mi355x runs mxfp4 natively"
    )
    assert rl.fp4_format_error(CAT.models["mixtral-8x7b"], CAT.gpus["b200"]) is None
    with pytest.raises(PlanningError) as err:
        _plan("mixtral-8x7b", ["mi355x"])
    assert err.value.issues[0] == ("candidates.dtypes[0]", message)


# --------------------------------------------------------------------------- cost model


def test_each_gpu_prices_its_own_checkpoints_bits():
    """Llama-3.1-405B at tp 4: 401.6 B quantized parameters x 4.5 / 8 on B200 (NVFP4),
    x 4.25 / 8 on MI355X (MXFP4), and 4.2 B in BF16 (embedding, lm_head, norms): 234.3 GB
    and 221.8 GB."""
    model = CAT.models["llama-3.1-405b"]
    wide = arch.bf16_param_count(model)
    n = arch.total_param_count(model) - wide
    b200 = rl.build_replica(CAT, "llama-3.1-405b", "b200", tp=4, dtype="fp4")
    mi355x = rl.build_replica(CAT, "llama-3.1-405b", "mi355x", tp=4, dtype="fp4")
    assert (b200.fp4_format, mi355x.fp4_format) == (NV, MX)
    assert rl.replica_weight_bytes(b200) == pytest.approx(n * 4.5 / 8 + 2 * wide)
    assert rl.replica_weight_bytes(mi355x) == pytest.approx(n * 4.25 / 8 + 2 * wide)
    assert rl.replica_weight_bytes(mi355x) / 1e9 == pytest.approx(221.8, abs=0.1)
    fp8 = rl.build_replica(CAT, "llama-3.1-405b", "mi355x", tp=4, dtype="fp8")
    assert fp8.fp4_checkpoint is None and fp8.fp4_format is None


def test_mi355x_mxfp4_runs_are_priced():
    """The InferenceX DeepSeek-R1 MXFP4 runs on MI355X, recorded only while the catalog
    had NVIDIA's NVFP4 checkpoint alone, are priced on the MXFP4 one."""
    points = [
        m for m in load_reference_measurements(CAT) if m.gpu == "mi355x" and m.dtype == Dtype.FP4
    ]
    assert len(points) == 17
    for m in points[:3]:
        replica = rl.build_replica(CAT, m.model, m.gpu, tp=m.tp, dtype="fp4")
        assert replica.fp4_checkpoint.repo == "amd/DeepSeek-R1-0528-MXFP4"
        ds = CAT.models["deepseek-v3"]
        wide = arch.bf16_param_count(ds, replica.fp4_checkpoint.bf16_layers)  # attention too
        n = arch.total_param_count(ds) - wide
        assert rl.replica_weight_bytes(replica) == pytest.approx(n * 4.25 / 8 + 2 * wide)
        predicted = predict(m, CAT).output_tok_s
        assert predicted and predicted > 0


# --------------------------------------------------------------------------- plans


def test_an_mi355x_fp4_plan_loads_amds_checkpoint():
    plan = _plan("llama-3.1-405b", ["mi355x"])
    assert plan.status.value == "optimal"
    repo = "amd/Llama-3.1-405B-Instruct-MXFP4-Preview"
    for pool in plan.pools:
        assert pool.launch.vllm[:3] == ["vllm", "serve", repo]
        assert f"--model-path={repo}" in pool.launch.sglang
    assert plan.assumptions["fp4"]["checkpoints"] == {
        repo: {"format": "mxfp4", "bits_per_weight": 4.25}
    }
    assert not [w for w in plan.warnings if "the weights of" in w]


def test_a_checkpoint_of_another_models_weights_is_named():
    plan = _plan("llama-3.1-70b", ["mi355x"])
    repo = "amd/Llama-3.3-70B-Instruct-MXFP4-Preview"
    assert {p.launch.vllm[2] for p in plan.pools} == {repo}
    assert plan.assumptions["fp4"]["checkpoints"][repo]["weights_of"] == "Llama-3.3-70B-Instruct"
    assert (
        f"mi355x: the fp4 pools load {repo}, the weights of Llama-3.3-70B-Instruct (the same "
        "architecture as llama-3.1-70b" in " ".join(plan.warnings)
    )
    text = render_plan_text(plan.to_json_dict())
    assert (
        f"fp4: checkpoint {repo} (mxfp4, 4.25 bits per weight; the weights of "
        "Llama-3.3-70B-Instruct, the same architecture), KV fp8" in text
    )


def test_a_plan_offered_both_formats_says_which_gpu_loads_which():
    plan = _plan("llama-3.1-70b", ["b200", "mi355x"])
    fp4 = plan.assumptions["fp4"]
    assert set(fp4["checkpoints"]) == {
        "RedHatAI/Llama-3.1-70B-Instruct-NVFP4",
        "amd/Llama-3.3-70B-Instruct-MXFP4-Preview",
    }
    assert fp4["gpus"]["b200"]["checkpoint"] == "RedHatAI/Llama-3.1-70B-Instruct-NVFP4"
    assert fp4["gpus"]["mi355x"]["checkpoint"] == "amd/Llama-3.3-70B-Instruct-MXFP4-Preview"
    line = next(n for n in assumed_notes([], plan.assumptions) if n.startswith("fp4:"))
    assert "b200 (loads RedHatAI/Llama-3.1-70B-Instruct-NVFP4) GEMMs" in line
    assert "mi355x (loads amd/Llama-3.3-70B-Instruct-MXFP4-Preview) GEMMs" in line
    # the warning names only the GPUs whose pools serve the other model's weights
    warned = [w for w in plan.warnings if "the weights of" in w]
    assert bool(warned) == any(p.gpu == "mi355x" and p.replicas for p in plan.pools)


def test_plans_stored_with_one_top_level_checkpoint_still_render():
    legacy = {
        "fp4": {
            "checkpoint": "RedHatAI/Llama-3.1-70B-Instruct-NVFP4",
            "format": "nvfp4",
            "bits_per_weight": 4.5,
            "kv_dtype": "fp8",
            "gpus": {"b200": {"gemm_derate": 0.5, "weight_read_derate": 0.85}},
            "note": "n",
        }
    }
    (line,) = assumed_notes([], legacy)
    assert line.startswith(
        "fp4: checkpoint RedHatAI/Llama-3.1-70B-Instruct-NVFP4 (nvfp4, 4.5 bits per weight), "
        "KV fp8; b200 GEMMs x0.5"
    )


def test_disaggregated_pairs_load_one_checkpoint():
    """A B200 prefill pool (NVIDIA's NVFP4 DeepSeek-V3) never hands its KV cache to an
    MI355X decode pool (AMD's MXFP4 DeepSeek-R1-0528): a class's prefill and decode
    pools share one checkpoint (planner.candidates.model.pair_checkpoint), even when
    stock forces both GPU types into the plan."""
    from types import SimpleNamespace

    from planner.candidates.model import pair_checkpoint

    def key(gpu: str, dtype: str) -> str:
        replica = rl.build_replica(CAT, "deepseek-v3", gpu, tp=8, dtype=dtype, kv_dtype="fp8")
        cfg = SimpleNamespace(dtype=Dtype(dtype), kv_dtype=Dtype.FP8)
        fake: Any = SimpleNamespace(config=cfg, replica=replica)
        return pair_checkpoint(fake)

    assert key("b200", "fp4") == "fp4/fp8-kv/nvidia/DeepSeek-V3-0324-FP4"
    assert key("mi355x", "fp4") == "fp4/fp8-kv/amd/DeepSeek-R1-0528-MXFP4"
    assert key("b200", "fp8") == key("mi355x", "fp8") == "fp8/fp8-kv"
    # stock that only a mixed pair could serve from: no plan mixes them
    request = _request("deepseek-v3", ["b200", "mi355x"])
    request["traffic"]["rate_rps"] = 30
    for limits in ({"b200": 16, "mi355x": 16}, {"b200": 24, "mi355x": 24}):
        request["constraints"] = {"max_gpus": limits}
        plan = make_plan(request, CAT, alternatives=False, verify=False)
        assert plan.status.value in ("optimal", "infeasible")
        disagg = [p for p in plan.pools if p.role in ("prefill", "decode") and p.replicas]
        for cls in {p.class_name for p in disagg}:
            repos = {p.launch.vllm[2] for p in disagg if p.class_name == cls}
            assert len(repos) == 1, (limits, cls, repos)


def test_a_deployment_launches_each_pool_with_its_own_checkpoint():
    """Aggregated pools may run different checkpoints (B200 NVFP4, MI355X MXFP4): every
    deployment target launches each pool with the repository its plan command names."""
    from planner.deploy import render_deployment

    def one(gpu: str) -> dict:
        req = _request("llama-3.1-8b", [gpu])
        req["traffic"]["classes"][0]["modes"] = ["aggregated"]
        return make_plan(req, CAT, alternatives=False, verify=False).to_json_dict()

    nv, mx = one("b200"), one("mi355x")
    doc = dict(nv)
    doc["pools"] = [*nv["pools"], *[{**p, "id": p["id"] + "-mx"} for p in mx["pools"]]]
    repos = {p["launch"]["vllm"][2] for p in doc["pools"]}
    assert repos == {
        "nvidia/Llama-3.1-8B-Instruct-FP4",
        "amd/Llama-3.1-8B-Instruct-MXFP4-W4A4-MLCAL-C1000-GPTQ",
    }
    for target in ("dynamo", "llm-d"):  # (compose deploys one GPU type per host)
        text = render_deployment(doc, target, CAT).text
        for repo in repos:
            assert repo in text, (target, repo)
