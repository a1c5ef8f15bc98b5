"""planner.gpu_ranking: every catalog GPU priced on one workload at its best
configuration, relative to H100 SXM, with what its factors rest on."""

from __future__ import annotations

from typing import Literal

import pytest

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


def test_engines_follow_the_vendor():
    assert gr.ranking_engine(CAT, "h200-sxm-141gb") == "trtllm"
    assert gr.ranking_engine(CAT, "mi355x") == "vllm"
    assert gr.ranking_engine(CAT, "gaudi3") == "vllm"


def test_dtypes_without_a_peak_are_skipped():
    # Hopper has no FP4 peak, A100 no FP8 one: neither is priced in them
    assert gr.best_capacity(CAT, "h100-sxm5-80gb").dtype == "fp8"
    assert gr.best_capacity(CAT, "a100-sxm-80gb").dtype == "bf16"
    assert gr.best_capacity(CAT, "b200").dtype == "fp4"


def test_a_model_no_configuration_holds_is_left_out():
    # Llama-3.1-405B in BF16 (810 GB) does not fit 8 x L4 (24 GB) in any tried format
    assert gr.best_capacity(CAT, "l4", "llama-3.1-405b", dtypes=(Dtype.BF16,)) is None


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
    assert table[1 + [r.gpu for r in ranks].index(gr.RANKING_REFERENCE)][5] == "1.00"
