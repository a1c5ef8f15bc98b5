"""The user-facing analyses (planner/analyses/) against DOMAIN.md's worked checks."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from catalog.loader import load_catalog
from catalog.schema import Catalog
from planner import analyses as an
from planner import architecture as arch
from planner import kernels as kn
from planner import roofline as rl
from planner import sizing as sz
from planner.errors import DoesNotFitError, PlanningError, UnknownEntryError

H100 = "h100-sxm5-80gb"
P = 4096
BUDGET_MS = 20.1


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def llama7b(catalog: Catalog) -> rl.Replica:
    return rl.build_replica(catalog, "llama-2-7b", H100, mfu=0.5, overlap_factor=1.0)


@pytest.fixture(scope="module")
def worked(catalog: Catalog) -> an.ChunkBudgetTable:
    """DOMAIN.md section 3: llama-2-7b on one H100 at MFU 0.5, perfect overlap."""
    return an.chunk_budget_table(
        catalog,
        "llama-2-7b",
        H100,
        prompt_tokens=P,
        tpot_budget_ms=BUDGET_MS,
        mfu=0.5,
        overlap_factor=1.0,
    )


# --------------------------------------------------------------------------- chunk budget


def test_t_star_is_683(worked: an.ChunkBudgetTable) -> None:
    # 20.1 ms x 494.7 TFLOP/s / 14.55 GFLOP = 683 tokens, at the mean context 2,048.
    assert worked.max_free_chunk_tokens == 683
    assert worked.context_tokens == 2048
    assert worked.flops_per_token_g == pytest.approx(14.55, abs=0.005)
    assert worked.replica.effective_tflops == pytest.approx(494.7)


def test_default_budgets_double_up_to_the_prompt_and_include_t_star(
    worked: an.ChunkBudgetTable,
) -> None:
    assert [r.budget_tokens for r in worked.rows] == [256, 512, 683, 1024, 2048, 4096]
    assert an.default_budgets(5000, 0) == [256, 512, 1024, 2048, 4096, 8192]
    assert an.default_budgets(100, 683) == [256, 683]


def test_chunk_is_free_up_to_t_star_and_costs_tpot_beyond(
    catalog: Catalog, llama7b: rl.Replica
) -> None:
    table = an.chunk_budget_table(
        catalog,
        "llama-2-7b",
        H100,
        prompt_tokens=P,
        tpot_budget_ms=BUDGET_MS,
        mfu=0.5,
        overlap_factor=1.0,
        budgets=[683, 684, 1024],
    )
    free, over, big = table.rows
    per_token = arch.flops_per_token(llama7b.model, 2048)
    f_eff = rl.effective_flops(llama7b)
    c = llama7b.coefficients

    def chunk_ms(t: int) -> float:
        # T tokens at the mean context, the cost T* is defined by, with the dense GEMMs
        # at H100's measured rate gain at T tokens (vLLM, bf16: 1.043 at 1,024)
        dense = t * c.dense_flops_per_token * (1 - 1 / kn.gain_at_tokens(c.gemm_gain, t))
        return (t * per_token - dense) / f_eff * 1e3

    assert kn.gain_at_tokens(c.gemm_gain, 1024) == 1.043
    assert free.chunk_ms == pytest.approx(chunk_ms(683))
    assert free.chunk_ms < 683 * per_token / f_eff * 1e3  # the gain: T* is on the safe side
    assert free.chunk_ms <= BUDGET_MS and over.chunk_ms <= BUDGET_MS < big.chunk_ms
    assert free.step_ms == BUDGET_MS and free.tpot_penalty == 0.0
    assert big.step_ms == big.chunk_ms and big.tpot_penalty > 0
    assert big.tpot_penalty == pytest.approx(chunk_ms(1024) / BUDGET_MS - 1)


def test_rows_use_the_named_cost_model_functions(
    worked: an.ChunkBudgetTable, llama7b: rl.Replica
) -> None:
    for row in worked.rows:
        t = row.budget_tokens
        assert row.chunks == math.ceil(P / t)
        # With perfect overlap the TTFT is ceil(P/T) steps of max(decode = budget, chunk
        # compute at its own start context) (DOMAIN.md section 3's first-order model).
        sizes = [t] * (P // t) + ([P % t] if P % t else [])
        starts = [t * i for i in range(len(sizes))]
        assert row.ttft_ms == pytest.approx(
            sum(
                max(BUDGET_MS, rl.chunk_compute_ms(llama7b, c, s))
                for c, s in zip(sizes, starts, strict=True)
            )
        )
        assert row.kv_reread_gb == pytest.approx(
            rl.chunk_kv_reread_bytes(llama7b.model, P, t) / 1e9
        )
        assert row.kv_reread_ms == pytest.approx(
            row.kv_reread_gb * 1e9 / rl.effective_bandwidth_bytes_per_s(llama7b) * 1e3
        )
        assert row.step_ms == pytest.approx(max(BUDGET_MS, row.chunk_ms))
    by_budget = {r.budget_tokens: r for r in worked.rows}
    # S^2/(2T) - S/2 extra token-reads x 524,288 bytes: T = 512 -> 14,336 x 524,288 B.
    assert by_budget[512].kv_reread_gb == pytest.approx(14_336 * 524_288 / 1e9)
    assert by_budget[4096].kv_reread_gb == 0.0
    # 16 free steps of 20.1 ms at T = 256; the 683-token budget's late chunks overrun.
    assert by_budget[256].ttft_ms == pytest.approx(16 * BUDGET_MS)
    assert by_budget[683].ttft_ms > 6 * BUDGET_MS
    # One chunk: the whole prompt's causal prefill compute.
    assert by_budget[4096].ttft_ms == pytest.approx(rl.chunk_compute_ms(llama7b, P, 0))


def test_shrinking_schedule_holds_the_step_at_the_budget(
    worked: an.ChunkBudgetTable, llama7b: rl.Replica
) -> None:
    s = worked.shrinking
    assert s.chunk_tokens == rl.shrinking_chunk_schedule(llama7b, P, BUDGET_MS)
    assert sum(s.chunk_tokens) == P
    assert s.chunks == len(s.chunk_tokens) == 6
    assert s.first_chunk_tokens > s.last_chunk_tokens  # late chunks see more context
    assert s.ttft_ms == pytest.approx(6 * BUDGET_MS)
    assert s.max_step_ms == pytest.approx(BUDGET_MS)


def test_imperfect_overlap_charges_part_of_the_chunk(catalog: Catalog) -> None:
    table = an.chunk_budget_table(
        catalog, "llama-2-7b", H100, prompt_tokens=P, tpot_budget_ms=BUDGET_MS, mfu=0.5
    )
    assert table.replica.overlap_factor == catalog.gpus[H100].efficiency.overlap_factor == 0.8
    for row in table.rows:
        d, c = BUDGET_MS, row.chunk_ms
        assert row.step_ms == pytest.approx(max(d, c) + 0.2 * min(d, c))
        assert row.tpot_penalty > 0
    assert an.overlapped_step_ms(20.0, 10.0, 1.0) == 20.0
    assert an.overlapped_step_ms(20.0, 10.0, 0.0) == 30.0
    assert an.overlapped_step_ms(10.0, 20.0, 0.5) == 25.0


def test_chunk_budget_bad_input(catalog: Catalog) -> None:
    kwargs: dict[str, Any] = {"prompt_tokens": P, "tpot_budget_ms": BUDGET_MS}
    with pytest.raises(UnknownEntryError, match="model"):
        an.chunk_budget_table(catalog, "gpt-9", H100, **kwargs)
    with pytest.raises(PlanningError) as err:
        an.chunk_budget_table(catalog, "llama-2-7b", H100, tp=16, **kwargs)
    field, text = err.value.issues[0]
    assert field == "tp" and text.startswith(f"16 exceeds the scale-up domain of {H100} (8)")
    with pytest.raises(DoesNotFitError):
        an.chunk_budget_table(catalog, "llama-3.1-70b", H100, **kwargs)
    for bad in ({"prompt_tokens": 0}, {"prompt_tokens": 8192}, {"tpot_budget_ms": 0.0}):
        field = next(iter(bad))
        with pytest.raises(PlanningError) as err:
            an.chunk_budget_table(catalog, "llama-2-7b", H100, **{**kwargs, **bad})
        assert err.value.issues[0][0] == field
    with pytest.raises(PlanningError) as err:
        an.chunk_budget_table(catalog, "llama-2-7b", H100, budgets=[512, 0], **kwargs)
    assert err.value.issues[0][0] == "budgets"


# --------------------------------------------------------------------------- KV transfer


def test_kv_cache_sizes(catalog: Catalog) -> None:
    mha = an.kv_transfer_table(catalog, "llama-2-7b", prompt_tokens=P)
    assert mha.kv_bytes_per_token == 524_288
    assert round(mha.kv_gb, 3) == 2.147
    for gqa8 in ("llama-3.1-8b", "mistral-7b-v0.1"):
        t = an.kv_transfer_table(catalog, gqa8, prompt_tokens=P)
        assert t.kv_bytes_per_token == 131_072
        assert round(t.kv_gb, 3) == 0.537
    assert an.kv_transfer_table(
        catalog, "llama-2-7b", prompt_tokens=P, kv_dtype="fp8"
    ).kv_gb == pytest.approx(mha.kv_gb / 2)


@pytest.mark.parametrize(
    ("model_id", "expected_ms"),
    [
        ("llama-3.1-8b", [1.3, 8.4, 21.5]),
        ("mistral-7b-v0.1", [1.3, 8.4, 21.5]),
        ("llama-2-7b", [5.4, 33.6, 85.9]),
    ],
)
def test_transfer_times_over_400_64_25_gb_per_s(
    catalog: Catalog, model_id: str, expected_ms: list[float]
) -> None:
    t = an.kv_transfer_table(
        catalog, model_id, prompt_tokens=P, bandwidths_gb_per_s=[400, 64, 25], prefill_ms=129.0
    )
    assert [r.link for r in t.rows] == ["400 GB/s", "64 GB/s", "25 GB/s"]
    assert [round(r.transfer_ms, 1) for r in t.rows] == expected_ms
    for row in t.rows:
        assert row.parallel_links == 1 and row.latency_us == 0.0
        assert row.transfer_ms == pytest.approx(
            rl.kv_transfer_ms(t.kv_gb * 1e9, row.bandwidth_gb_per_s)
        )
        # Against a 129 ms prefill, streaming hides 90% of each transfer (32 layers).
        assert row.exposed_ms == pytest.approx(
            rl.exposed_transfer_ms(row.transfer_ms, 129.0, 0.9, num_layers=32)
        )
        assert row.exposed_ms == pytest.approx(0.1 * row.transfer_ms)
    assert t.prefill_source is an.PrefillSource.GIVEN and not t.notes


def test_transfer_without_prefill_is_all_exposed(catalog: Catalog) -> None:
    t = an.kv_transfer_table(catalog, "llama-2-7b", prompt_tokens=P, bandwidths_gb_per_s=[25])
    assert t.prefill_ms is None and t.prefill_source is an.PrefillSource.NONE
    assert t.rows[0].exposed_ms == t.rows[0].transfer_ms
    assert t.notes and "exposed" in t.notes[0]


def test_prefill_time_from_a_gpu(catalog: Catalog, llama7b: rl.Replica) -> None:
    t = an.kv_transfer_table(
        catalog, "llama-2-7b", prompt_tokens=P, gpu_id=H100, mfu=0.5, bandwidths_gb_per_s=[25]
    )
    assert t.prefill_source is an.PrefillSource.ROOFLINE
    assert t.prefill_ms == pytest.approx(rl.prefill_ms(llama7b, P))
    assert t.prefill_replica is not None and t.prefill_replica.gpu == H100
    # tp GPUs ship their shards over tp links at once.
    t4 = an.kv_transfer_table(
        catalog, "llama-2-7b", prompt_tokens=P, gpu_id=H100, tp=4, bandwidths_gb_per_s=[25]
    )
    assert t4.rows[0].parallel_links == 4
    assert t4.rows[0].transfer_ms == pytest.approx(t.rows[0].transfer_ms / 4)


def test_catalog_links(catalog: Catalog) -> None:
    every = an.kv_transfer_table(catalog, "llama-2-7b", prompt_tokens=P)
    assert sorted(r.link for r in every.rows) == sorted(catalog.links)
    bws = [r.bandwidth_gb_per_s for r in every.rows]
    assert bws == sorted(bws, reverse=True)
    picked = an.kv_transfer_table(
        catalog, "llama-2-7b", prompt_tokens=P, link_ids=["pcie-gen5-x16"], bandwidths_gb_per_s=[1]
    )
    pcie = catalog.links["pcie-gen5-x16"]
    assert [r.link for r in picked.rows] == ["pcie-gen5-x16", "1 GB/s"]
    assert picked.rows[0].kind == "pcie"
    assert picked.rows[0].transfer_ms == pytest.approx(
        rl.kv_transfer_ms(2.147483648e9, pcie.bandwidth_gb_per_s, pcie.latency_us)
    )


def test_kv_transfer_bad_input(catalog: Catalog) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"link_ids": ["warp-drive"]}, "links"),
        ({"bandwidths_gb_per_s": [0.0]}, "bandwidths_gb_per_s"),
        ({"kv_dtype": "fp4"}, "kv_dtype"),
        ({"overlap_fraction": 1.5}, "overlap_fraction"),
        ({"prefill_ms": 10.0, "gpu_id": H100}, "prefill_ms"),
        ({"prefill_ms": -1.0}, "prefill_ms"),
        ({"gpu_id": H100, "tp": 16}, "tp"),
        ({"prompt_tokens": -1}, "prompt_tokens"),
    ]
    for kwargs, field in cases:
        with pytest.raises(PlanningError) as err:
            an.kv_transfer_table(catalog, "llama-2-7b", **{"prompt_tokens": P, **kwargs})
        assert err.value.issues[0][0] == field, kwargs


# --------------------------------------------------------------------------- pool ratio


@pytest.fixture(scope="module")
def llama8b(catalog: Catalog) -> rl.Replica:
    # DOMAIN.md section 5's figures assume vLLM's default 0.9, a 2 GB reserve and 80e9
    # bytes of HBM (the driver reports 81,559 MiB: planner.roofline.gpu_memory_bytes)
    r = rl.build_replica(
        catalog, "llama-3.1-8b", H100, mfu=0.5, memory_utilization=0.9, activation_reserve_gb=2.0
    )
    return dataclasses.replace(r, gpu=r.gpu.model_copy(update={"reported_memory": None}))


@pytest.fixture(scope="module")
def doc_point(catalog: Catalog, llama8b: rl.Replica) -> sz.DecodePoint:
    """tests/test_sizing.py's assumption: every class decodes at chat's operating point,
    B = resident-batch cap at 2,300-token sequences (178), TPOT = the step there (30.2 ms:
    DOMAIN.md's reads the input embedding table each step and leaves out the elementwise
    kernels between the GEMMs; the step gathers the table by row, 1.05 GB less, and runs
    those kernels, 30.6 -> 30.2 ms)."""
    # DOMAIN.md's H100 is MBU 0.7 (the analogy), not the calibrated level
    domain = dataclasses.replace(llama8b, decode_mbu=0.7)
    point = sz.decode_operating_point(domain, 2300, 2150)
    assert point.batch == 178 and round(point.tpot_ms, 1) == 30.2
    return point


def doc_table(catalog: Catalog, point: sz.DecodePoint, **kwargs) -> an.PoolRatioTable:
    """DOMAIN.md section 5 under tests/test_sizing.py's assumptions: llama-3.1-8b on one
    H100 SXM (bf16, MFU 0.5), first-order prefill (2 x N_active per new token), no prefix
    hits, decode at chat's point for both classes."""
    return an.pool_ratio_table(
        catalog,
        "llama-3.1-8b",
        H100,
        ["chat", "agent"],
        mfu=0.5,
        tpot_ms=point.tpot_ms,
        decode_batch=point.batch,
        prefix_hit_rate=0.0,
        prefill_cost="first-order",
        **kwargs,
    )


def test_pool_ratio_reproduces_chat_1_3_and_agent_12(
    catalog: Catalog, llama8b: rl.Replica, doc_point: sz.DecodePoint
) -> None:
    table = doc_table(catalog, doc_point)
    chat, agent = table.rows
    assert (chat.workload, chat.prompt_tokens, chat.output_tokens) == ("chat", 2000, 300)
    assert (agent.workload, agent.prompt_tokens, agent.output_tokens) == ("agent", 97_000, 1600)
    assert round(chat.ratio, 1) == 1.3  # 1.27
    # 11.4 (11.6 before the elementwise kernels lengthened the decode step 30.2 -> 30.6 ms)
    assert 11 <= agent.ratio <= 12
    for row in table.rows:
        assert row.decode_point is an.DecodePointSource.GIVEN
        assert (row.decode_batch, row.tpot_ms, row.tpot_budget_ms) == (178, doc_point.tpot_ms, None)
        assert row.prefill_gpu_s == pytest.approx(
            sz.first_order_prefill_gpu_s(llama8b, row.prompt_tokens, 0.0)
        )
        assert row.decode_gpu_s == pytest.approx(
            sz.decode_gpu_s(1, row.output_tokens, doc_point.tpot_ms, 178)
        )
    assert agent.ratio / chat.ratio == pytest.approx(97_000 / 2000 * 300 / 1600)


def test_agents_are_over_nine_tenths_of_prefill_in_an_80_20_mix(
    catalog: Catalog, doc_point: sz.DecodePoint
) -> None:
    table = doc_table(catalog, doc_point, mix={"chat": 0.8, "agent": 0.2})
    assert table.blend is not None
    shares = {s.workload: s for s in table.blend.shares}
    assert shares["agent"].request_share == pytest.approx(0.2)
    assert shares["agent"].prefill_load_share > 0.9  # 0.924
    assert shares["chat"].prefill_load_share == pytest.approx(
        1 - shares["agent"].prefill_load_share
    )
    chat, agent = table.rows
    assert table.blend.prefill_gpu_s == pytest.approx(
        0.8 * chat.prefill_gpu_s + 0.2 * agent.prefill_gpu_s
    )
    assert table.blend.decode_gpu_s == pytest.approx(
        0.8 * chat.decode_gpu_s + 0.2 * agent.decode_gpu_s
    )
    assert table.blend.ratio == pytest.approx(table.blend.prefill_gpu_s / table.blend.decode_gpu_s)
    # Shares are by request count and normalized.
    same = doc_table(catalog, doc_point, mix={"chat": 4, "agent": 1})
    assert same.blend == table.blend
    # With the full roofline prefill the agents' share only grows.
    roof = an.pool_ratio_table(
        catalog,
        "llama-3.1-8b",
        H100,
        [],
        mfu=0.5,
        tpot_ms=doc_point.tpot_ms,
        decode_batch=doc_point.batch,
        prefix_hit_rate=0.0,
        mix={"chat": 0.8, "agent": 0.2},
    )
    assert [r.workload for r in roof.rows] == ["chat", "agent"]
    assert roof.blend is not None and roof.blend.shares[1].prefill_load_share > 0.924


def test_pool_ratio_default_decode_point_is_the_cost_models(catalog: Catalog) -> None:
    llama8b = rl.build_replica(catalog, "llama-3.1-8b", H100, mfu=0.5)  # engine defaults
    table = an.pool_ratio_table(catalog, "llama-3.1-8b", H100, ["chat", "agent"], mfu=0.5)
    assert table.prefill_cost is an.PrefillCost.ROOFLINE
    for row in table.rows:
        wl = catalog.workloads[row.workload]
        ctx = row.prompt_tokens + row.output_tokens / 2
        point = sz.decode_operating_point(llama8b, ctx, ctx, tpot_budget_ms=wl.slo.tpot_ms)
        assert row.decode_point is an.DecodePointSource.COST_MODEL
        assert (row.decode_batch, row.tpot_ms) == (point.batch, point.tpot_ms)
        assert row.tpot_budget_ms == wl.slo.tpot_ms
        assert row.decode_batch <= rl.max_resident_batch(llama8b, ctx)
        assert row.tpot_ms <= wl.slo.tpot_ms
        assert row.prefix_hit_rate == wl.prefix_hit_rate  # the catalog's, per class
        assert row.prefill_gpu_s == pytest.approx(
            sz.prefill_gpu_s(llama8b, row.prompt_tokens, wl.prefix_hit_rate)
        )
    chat, agent = table.rows
    assert agent.prefix_hit_rate == 0.92
    assert agent.decode_batch < 10 < chat.decode_batch  # 98K-token sequences fill the cache
    assert table.notes


def test_pool_ratio_tpot_budget_or_batch_alone(catalog: Catalog, llama8b: rl.Replica) -> None:
    tight = an.pool_ratio_table(catalog, "llama-3.1-8b", H100, ["chat"], tpot_ms=20.0)
    (row,) = tight.rows
    assert row.tpot_budget_ms == 20.0 and row.tpot_ms <= 20.0
    assert rl.decode_step_ms(llama8b, row.decode_batch + 1, 2150) > 20.0
    given_b = an.pool_ratio_table(catalog, "llama-3.1-8b", H100, ["chat"], decode_batch=64)
    (row,) = given_b.rows
    assert row.decode_batch == 64 and row.tpot_budget_ms is None
    assert row.tpot_ms == pytest.approx(rl.decode_step_ms(llama8b, 64, 2150))


def test_pool_ratio_bad_input(catalog: Catalog) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"workload_ids": ["nope"]}, "workloads"),
        ({"workload_ids": [], "mix": {"chat": 1.0, "nope": 1.0}}, "mix"),
        ({"mix": {"chat": 0.0}}, "mix"),
        ({"mix": {"chat": -1.0}}, "mix"),
        ({"workload_ids": []}, "workloads"),
        ({"tpot_ms": 1.0}, "tpot_ms"),
        ({"tpot_ms": -1.0}, "tpot_ms"),
        ({"decode_batch": 0}, "decode_batch"),
        ({"decode_batch": 100_000}, "decode_batch"),
        ({"prefix_hit_rate": 1.0}, "prefix_hit_rate"),
        ({"prefill_cost": "vibes"}, "prefill_cost"),
        ({"tp": 16}, "tp"),
        ({"model_id": "llama-2-7b", "workload_ids": ["agent"]}, "workloads"),
    ]
    for kwargs, field in cases:
        args = {"model_id": "llama-3.1-8b", "gpu_id": H100, "workload_ids": ["chat"], **kwargs}
        with pytest.raises(PlanningError) as err:
            an.pool_ratio_table(catalog, **args)
        assert err.value.issues[0][0] == field, kwargs
