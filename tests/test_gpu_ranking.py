"""planner.gpu_ranking: every catalog GPU priced on one workload at its best
configuration, relative to H100 SXM, with what its factors rest on."""

from __future__ import annotations

import json
import math
from typing import Literal

import pytest

from api import cli
from catalog.loader import load_catalog
from catalog.schema import Dtype
from planner import gpu_ranking as gr
from planner import risk
from planner.capacity_analysis import CapacityRequest, capacity_analysis
from planner.errors import PlanningError

CAT = load_catalog()


def _per_gpu(gpu: str, tp: int, dtype: Dtype, engine: Literal["trtllm", "vllm"]) -> float | None:
    """What ``fleetplan analyze capacity`` predicts per GPU (every prompt queued)."""
    try:
        got = capacity_analysis(
            CAT,
            CapacityRequest(
                model=gr.RANKING_MODEL,
                gpu=gpu,
                tp=tp,
                dtype=dtype,
                prompt_tokens=gr.RANKING_PROMPT_TOKENS,
                output_tokens=gr.RANKING_OUTPUT_TOKENS,
                engine=engine,
            ),
        )
    except PlanningError:
        return None
    return got.result.output_tokens_per_s / tp


@pytest.mark.parametrize("gpu", ["h100-sxm5-80gb", "b200", "l40s", "mi300x"])
def test_best_capacity_is_the_best_analyze_capacity_over_tp_and_dtype(gpu):
    engine = gr.ranking_engine(CAT, gpu)
    tried = {
        (tp, dt): v
        for tp in gr.RANKING_TPS
        for dt in gr.RANKING_DTYPES
        if (v := _per_gpu(gpu, tp, dt, engine)) is not None
    }
    best = gr.best_capacity(CAT, gpu)
    assert best is not None
    assert best.output_tokens_per_s_per_gpu == pytest.approx(max(tried.values()))
    assert tried[best.tp, Dtype(best.dtype)] == pytest.approx(best.output_tokens_per_s_per_gpu)
    unc = risk.factor_uncertainty(CAT, gpu, best.dtype)
    assert (best.provenance, best.sigma_log) == (unc.provenance.value, unc.sigma_log)
    low, high = best.band_output_tokens_per_s_per_gpu
    x, z = best.output_tokens_per_s_per_gpu, risk.Z_BAND
    assert (low, high) == pytest.approx(
        (x * math.exp(-z * unc.sigma_log), x * math.exp(z * unc.sigma_log))
    )


def test_engines_follow_the_vendor():
    assert gr.ranking_engine(CAT, "h200-sxm-141gb") == "trtllm"
    assert gr.ranking_engine(CAT, "mi355x") == "vllm"
    assert gr.ranking_engine(CAT, "gaudi3") == "vllm"
    # a custom entry's vendor is free text: its spelling does not change the engine
    ours = CAT.gpus["l40s"].model_copy(update={"id": "our-l40s", "vendor": " nvidia"})
    custom = CAT.model_copy(update={"gpus": {**CAT.gpus, "our-l40s": ours}})
    assert gr.ranking_engine(custom, "our-l40s") == "trtllm"


def test_the_workload_is_checked_before_any_gpu_is_priced():
    # past the model's context window: refused naming prompt_tokens, not "no GPU runs it"
    with pytest.raises(PlanningError) as err:
        gr.gpu_ranking_analysis(CAT, gr.GpuRankingRequest(prompt_tokens=4096))
    assert err.value.issues[0][0] == "prompt_tokens"
    # a reference that cannot run the workload gives no ratio: refused naming it
    with pytest.raises(PlanningError) as err:
        gr.gpu_ranking_analysis(CAT, gr.GpuRankingRequest(model="llama-3.1-405b", reference="l40s"))
    assert err.value.issues[0][0] == "reference"
    # a load a hair under saturation (M/M/c slack rounding to 0) ranks, it does not crash
    got = gr.gpu_ranking_analysis(
        CAT, gr.GpuRankingRequest(model="llama-2-7b", prompt_tokens=4094, output_tokens=2)
    )
    assert len(got.gpus) == len(CAT.gpus) and not got.cannot_run


def test_a_gpu_judged_by_no_other_borrows_from_none():
    assert gr.borrowed_dense_level_from(CAT, "gb200-per-gpu", "llama-2-70b") == "b200"
    assert gr.borrowed_dense_level_from(CAT, "gb200-per-gpu", "deepseek-v3") is None
    assert gr.borrowed_dense_level_from(CAT, "h100-sxm5-80gb", "llama-2-70b") is None
    selfish = CAT.gpus["b300"].model_copy(
        update={
            "efficiency": CAT.gpus["b300"].efficiency.model_copy(
                update={"dense_level_from": "self"}
            )
        }
    )
    custom = CAT.model_copy(update={"gpus": {**CAT.gpus, "b300": selfish}})
    assert gr.borrowed_dense_level_from(custom, "b300", "llama-2-70b") is None


def test_dtypes_without_a_peak_are_skipped():
    # Hopper has no FP4 peak, A100 no FP8 one: neither is priced in them
    assert gr.best_capacity(CAT, "h100-sxm5-80gb").dtype == "fp8"
    assert gr.best_capacity(CAT, "a100-sxm-80gb").dtype == "bf16"
    assert gr.best_capacity(CAT, "b200").dtype == "fp4"


def test_a_model_no_configuration_holds_is_left_out():
    # Llama-3.1-405B in BF16 (810 GB) does not fit 8 x L4 (24 GB) at any tried tp
    assert gr.best_capacity(CAT, "l4", "llama-3.1-405b", dtypes=(Dtype.BF16,)) is None
    # nor in any format on 8 x L40S (384 GB): it is listed apart, not ranked
    got = gr.gpu_ranking_analysis(CAT, gr.GpuRankingRequest(model="llama-3.1-405b"))
    assert "l40s" in got.cannot_run and "l40s" not in {r.gpu for r in got.gpus}


def test_ranking_is_relative_to_the_reference_and_sorted():
    ranks = gr.gpu_ranking(CAT)
    by_gpu = {r.gpu: r for r in ranks}
    assert set(by_gpu) <= set(CAT.gpus)
    ref = by_gpu[gr.RANKING_REFERENCE]
    assert ref.relative == 1.0
    for r in ranks:
        assert r.relative == pytest.approx(
            r.output_tokens_per_s_per_gpu / ref.output_tokens_per_s_per_gpu
        )
    speeds = [r.output_tokens_per_s_per_gpu for r in ranks]
    assert speeds == sorted(speeds, reverse=True)
    # a dense LLM on a GPU measured on MoE LLMs only says whose dense level it borrows
    assert by_gpu["gb200-per-gpu"].dense_level_from == "b200"
    assert by_gpu["h200-sxm-141gb"].dense_level_from is None


def test_a_moe_llm_borrows_no_dense_level():
    best = gr.best_capacity(CAT, "gb300-per-gpu", "deepseek-v3", 922, 922, tps=(8,))
    assert best is not None and best.dense_level_from is None


def test_without_the_reference_no_ratio_is_given():
    ranks = gr.gpu_ranking(CAT, reference="no-such-gpu")
    assert ranks and all(r.relative is None for r in ranks)


def test_the_table_has_one_row_per_gpu():
    ranks = gr.gpu_ranking(CAT)
    table = gr.ranking_table(ranks)
    assert table[0][0] == "gpu" and len(table) == len(ranks) + 1
    assert [row[0] for row in table[1:]] == [r.gpu for r in ranks]
    ref_row = table[1 + [r.gpu for r in ranks].index(gr.RANKING_REFERENCE)]
    assert ref_row[table[0].index(f"x {gr.RANKING_REFERENCE}")] == "1.00"
    assert table[0][5] == "90% band" and all("-" in row[5] for row in table[1:])


def test_the_cli_prints_the_ranking_and_refuses_bad_input(capsys):
    assert cli.main(["analyze", "gpus", "--model", "llama-3.1-8b", "--output-tokens", "256"]) == 0
    out = capsys.readouterr().out
    assert "llama-3.1-8b, 222 prompt / 256 output tokens" in out
    assert "x h100-sxm5-80gb" in out
    assert any(line.startswith("b200 ") for line in out.splitlines())
    assert cli.main(["analyze", "gpus", "--json", "--reference", "a100-sxm-80gb"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["reference"] == "a100-sxm-80gb" and data["model"] == gr.RANKING_MODEL
    rel = {g["gpu"]: g["relative"] for g in data["gpus"]}
    assert rel["a100-sxm-80gb"] == 1.0 and rel["h100-sxm5-80gb"] > 1.0
    for argv, option in (
        (["--model", "nope"], "--model"),
        (["--reference", "nope"], "--reference"),
        (["--output-tokens", "1"], "--output-tokens"),
        (["--prompt-tokens", "abc"], "--prompt-tokens"),
        (["--prompt-tokens", "4096"], "--prompt-tokens"),
    ):
        assert cli.main(["analyze", "gpus", *argv]) == 2
        assert capsys.readouterr().err.startswith(f"fleetplan: error: {option}:")


def test_the_api_serves_the_ranking_and_names_bad_fields(client):
    r = client.post("/analyses/gpu-ranking", json={})
    assert r.status_code == 200, r.text
    data = r.json()
    assert data["model"] == gr.RANKING_MODEL and data["reference"] == gr.RANKING_REFERENCE
    assert [g["gpu"] for g in data["gpus"]] == [g.gpu for g in gr.gpu_ranking(CAT)]
    big = client.post("/analyses/gpu-ranking", json={"model": "llama-3.1-405b"}).json()
    assert "l40s" in big["cannot_run"] and "l40s" not in {g["gpu"] for g in big["gpus"]}
    for body, field in (
        ({"model": "nope"}, "model"),
        ({"reference": "nope"}, "reference"),
        ({"prompt_tokens": 0}, "prompt_tokens"),
        ({"prompt_tokens": 4096}, "prompt_tokens"),
        ({"model": "llama-3.1-405b", "reference": "l40s"}, "reference"),
        ({"gpu": "b200"}, "gpu"),
        ({"dtype": "fp5"}, "dtype"),
        ({"dtype": "fp4"}, "reference"),  # H100 has no FP4 peak: no like-for-like ratio
    ):
        r = client.post("/analyses/gpu-ranking", json=body)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["issues"][0]["field"] == field


def test_a_ranking_in_one_weight_format_is_like_for_like(client, capsys):
    fp8 = client.post("/analyses/gpu-ranking", json={"dtype": "fp8"}).json()
    assert fp8["dtype"] == "fp8" and {g["dtype"] for g in fp8["gpus"]} == {"fp8"}
    # GPUs without an FP8 peak cannot run it in FP8; every other one is priced in it
    assert {"a100-sxm-80gb", "a10g"} <= set(fp8["cannot_run"])
    best = {g.gpu: g for g in gr.gpu_ranking(CAT)}
    for g in fp8["gpus"]:
        if best[g["gpu"]].dtype == Dtype.FP8:  # its best was FP8 anyway: the same row
            assert g["output_tokens_per_s_per_gpu"] == pytest.approx(
                best[g["gpu"]].output_tokens_per_s_per_gpu
            )
    b200 = next(g for g in fp8["gpus"] if g["gpu"] == "b200")
    assert b200["output_tokens_per_s_per_gpu"] < best["b200"].output_tokens_per_s_per_gpu
    assert cli.main(["analyze", "gpus", "--dtype", "bf16"]) == 0
    out = capsys.readouterr().out
    assert "every GPU in BF16" in out and " fp8 " not in out and " fp4 " not in out
    assert cli.main(["analyze", "gpus", "--dtype", "int3"]) == 2
    assert capsys.readouterr().err.startswith("fleetplan: error: --dtype:")


def test_an_analysis_body_with_an_unknown_field_is_told_the_fields_it_takes(client):
    r = client.post("/analyses/gpu-ranking", json={"modle": "llama-3.1-8b"})
    assert r.status_code == 422
    (issue,) = r.json()["issues"]
    assert issue["field"] == "modle"
    assert issue["message"] == (
        "unknown field 'modle'; expected one of: model, prompt_tokens, output_tokens, "
        "reference, dtype"
    )
    body = {"model": "llama-3.1-8b", "gpu": "h100-sxm5-80gb", "prompt_tokens": 100}
    r = client.post("/analyses/capacity", json={**body, "output_tokens": 50, "request_rate": 3})
    (issue,) = r.json()["issues"]
    assert (
        issue["field"] == "request_rate" and "expected one of: model, gpu, tp" in issue["message"]
    )
    assert "request_rate_rps" in issue["message"]
